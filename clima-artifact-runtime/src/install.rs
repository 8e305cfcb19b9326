//! The one-pass install pipeline.
//!
//! [`ensure_variant`] decides, in this order:
//!
//! 1. an override (`Overrides.toml` of any depot) -> use its path; never hashed, never downloaded;
//! 2. `artifacts/<hash>` exists in any depot -> use it (an existence check, nothing is hashed);
//! 3. no `[[name.download]]` -> [`Error::NoDownloads`] with the exact `Overrides.toml` line to add;
//! 4. offline (`CLIMA_ARTIFACTS_OFFLINE=1`): network (`http(s)://`) sources are skipped; local
//!    paths and `file://` URLs are still used. No source left -> [`Error::Offline`], naming the
//!    URLs it would have used;
//! 5. lock `artifacts/.locks/<hash>.lock` in the first writable depot, look again (another process
//!    may have finished meanwhile), reclaim temp dirs of dead processes, then for each URL in
//!    order (transient failures retried with backoff):
//!
//! ```text
//!  reader thread                         |  calling thread
//!  source (HTTP / file) -> SHA-256 ----> bounded channel of 256 KiB buffers
//!                                        |  -> extract (gunzip/zstd, reading those buffers
//!                                        |     in place -> tar -> a writer thread creates
//!                                        |     the files in artifacts/.tmp-<hash>-<host>-
//!                                        |     <pid>-<rand>/ and hashes every blob)
//!                                        |  -> drain the source to its end
//!                                        |  -> compare sha256, compare git-tree-sha1
//!                                        |  -> rename to artifacts/<hash>
//! ```
//!
//! Reading (network, TLS, SHA-256), decompression and writing (with SHA-1) run on three threads
//! that share the cores; memory stays constant (at most a few buffers in flight). Nothing
//! unverified ever appears at a final path: a failed attempt removes its temp dir, a killed process
//! leaves one that the next install in the same depot removes (its pid is dead and nobody holds its
//! artifact's lock; only temp dirs of this host are considered). If the final path already exists
//! when renaming, another process won the race: that is success.

use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clima_artifact_fs::human_bytes;

use clima_artifact_manifest::ArtifactVariant;
use clima_artifact_manifest::manifest::MANIFEST_FILE_NAMES;
use clima_artifact_net::source::{self as download, ResumeRefused};
use clima_artifact_net::{Body, BodyRules, RuleBroken};

use crate::depot::{self, Overrides};
use crate::extract::{ExtractLimits, extract_buffered};
use crate::locked_file::{HolderNote, LockedFile};
use crate::progress::{DownloadStart, Transfer};
use crate::{Config, Error, GitTreeSha1, Sha256};
use clima_comms::notice;

/// How an artifact was made available.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Origin {
    /// An `Overrides.toml` entry points here (never hashed, never downloaded).
    Override {
        /// The overrides file that set it.
        overrides_file: PathBuf,
    },
    /// Already installed in a depot.
    Depot,
    /// Downloaded and installed by this call.
    Downloaded {
        /// The URL that succeeded.
        url: String,
        /// Bytes read from the source.
        bytes: u64,
        /// Wall time of the install in seconds.
        seconds: f64,
    },
}

/// The result of making one artifact available.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Installed {
    /// The artifact's directory (or override target).
    pub path: PathBuf,
    /// Where it came from.
    pub origin: Origin,
}

/// Makes one artifact variant available: override, else an installed copy in any depot, else a
/// verified download into the first writable depot. The core every higher-level API calls
/// (the `Artifacts` API, the `clima_artifact!` macro's static path, the MPI root).
///
/// `manifest` is the manifest file the variant comes from (named in messages, so a manifest
/// called `MyArtifacts.toml` is reported as such), or its folder (then the messages name the
/// `JuliaArtifacts.toml`/`Artifacts.toml` found there); relative download paths resolve against
/// its folder. `name` is used in messages.
pub fn ensure_variant(
    name: &str,
    variant: &ArtifactVariant,
    manifest: &Path,
    config: &Config,
) -> Result<Installed, Error> {
    let manifest_dir = manifest;
    let hash = variant.git_tree_sha1;
    let depots = depot::search_depots(config);
    if let Some(found) = lookup(&hash, &depots)? {
        return Ok(found);
    }
    if variant.downloads.is_empty() {
        return Err(Error::NoDownloads {
            name: name.to_owned(),
            hash,
            manifest: manifest_file(manifest_dir),
            overrides_file: suggested_overrides_file(config),
        });
    }
    // Offline, only network sources are skipped: a local path or `file://` URL is no network
    // access, so such sources still install (the quickstart ships its data that way).
    let (allowed, skipped): (Vec<_>, Vec<_>) = variant
        .downloads
        .iter()
        .partition(|d| !config.offline || !is_network(&d.url, manifest_folder(manifest_dir)));
    if allowed.is_empty() {
        return Err(Error::Offline {
            name: name.to_owned(),
            hash,
            depots,
            urls: skipped.iter().map(|d| d.url.clone()).collect(),
        });
    }
    let target = depot::first_writable(config, name)?;
    let _lock = LockedFile::acquire_telling(
        &depot::lock_path(&target, &hash),
        &format!("artifact `{name}` ({hash})"),
        config.lock_timeout,
        config.progress,
    )?;
    // Another process may have installed it while we waited.
    if let Some(path) = depot::find_installed(&depots, &hash) {
        return Ok(Installed {
            path,
            origin: Origin::Depot,
        });
    }
    depot::Depot::new(&target).reclaim_stale(Some(&hash));
    let target = InstallTarget {
        dir: target,
        note: _lock.note(),
    };
    download_and_install(name, variant, &allowed, manifest_dir, config, &target)
}

/// Fails when the filesystem of `depot` cannot take `size` more bytes above its free-space
/// reserve (the tarball's size: the unpacked content is at least about that large).
fn check_room(name: &str, size: u64, depot: &Path, config: &Config) -> Result<(), Error> {
    let Ok((free, total)) = crate::extract::free_space(&depot::artifacts_dir(depot)) else {
        return Ok(());
    };
    let reserve = match config.min_free_space {
        Some(0) => return Ok(()),
        Some(n) => n,
        None => crate::extract::default_free_reserve(total),
    };
    if free < reserve.saturating_add(size) {
        return Err(Error::NoRoom {
            name: name.to_owned(),
            size,
            depot: depot.to_path_buf(),
            free: free.saturating_sub(reserve),
            reserve,
        });
    }
    Ok(())
}

/// The depot an install goes to, and the lock's holder line to keep up to date.
struct InstallTarget {
    dir: PathBuf,
    note: Option<HolderNote>,
}

/// Forwards progress to the reporter and, every few seconds, to the lock's holder line.
struct NotingTransfer {
    inner: Box<dyn Transfer>,
    note: HolderNote,
    what: String,
    size: Option<u64>,
    last: Option<Instant>,
}

impl Transfer for NotingTransfer {
    fn received(&mut self, total: u64) {
        self.inner.received(total);
        if self
            .last
            .is_some_and(|t| t.elapsed() < Duration::from_secs(2))
        {
            return;
        }
        self.last = Some(Instant::now());
        let of = self
            .size
            .map(|s| format!(" of {}", human_bytes(s)))
            .unwrap_or_default();
        self.note.set(&format!(
            "downloading {}: {}{of}",
            self.what,
            human_bytes(total)
        ));
    }
    fn done(self: Box<Self>, bytes: u64, elapsed: Duration) {
        self.note.set(&format!("verifying {}", self.what));
        self.inner.done(bytes, elapsed);
    }
    fn failed(self: Box<Self>, reason: &str) {
        self.inner.failed(reason);
    }
}

/// Whether fetching `url` would use the network (`http(s)://`); local paths, `file://` URLs
/// and unsupported schemes (which fail without any access) are not.
fn is_network(url: &str, manifest_dir: &Path) -> bool {
    matches!(
        download::locate(url, manifest_dir),
        download::Location::Http(_)
    )
}

/// Overrides, then installed copies; `None` when the artifact must be downloaded. Never
/// downloads, never hashes.
pub fn lookup(hash: &GitTreeSha1, depots: &[PathBuf]) -> Result<Option<Installed>, Error> {
    let overrides = Overrides::load(depots)?;
    if let Some(r) = overrides.resolve(hash)? {
        return Ok(Some(Installed {
            path: r.path,
            origin: Origin::Override {
                overrides_file: r.overrides_file,
            },
        }));
    }
    Ok(depot::find_installed(depots, hash).map(|path| Installed {
        path,
        origin: Origin::Depot,
    }))
}

/// The `Overrides.toml` that error messages suggest adding a line to: the first depot's, whose
/// entries win over all others.
fn suggested_overrides_file(config: &Config) -> PathBuf {
    let first = config
        .depots
        .first()
        .cloned()
        .or_else(crate::config::default_depot)
        .unwrap_or_else(|| PathBuf::from("<depot>"));
    depot::overrides_path(&first)
}

/// The manifest file `manifest` names: itself when it is a file, else the
/// `JuliaArtifacts.toml`/`Artifacts.toml` in that folder.
fn manifest_file(manifest: &Path) -> PathBuf {
    if manifest.is_file() {
        return manifest.to_path_buf();
    }
    MANIFEST_FILE_NAMES
        .iter()
        .map(|n| manifest.join(n))
        .find(|p| p.is_file())
        .unwrap_or_else(|| manifest.join("Artifacts.toml"))
}

/// The folder relative download paths resolve against: `manifest`'s folder when it is a file.
pub(crate) fn manifest_folder(manifest: &Path) -> &Path {
    if manifest.is_file() {
        manifest.parent().unwrap_or(Path::new("."))
    } else {
        manifest
    }
}

/// Tries `allowed` (the variant's downloads that may be used now) in order.
fn download_and_install(
    name: &str,
    variant: &ArtifactVariant,
    allowed: &[&clima_artifact_manifest::Download],
    manifest_dir: &Path,
    config: &Config,
    target: &InstallTarget,
) -> Result<Installed, Error> {
    let hash = variant.git_tree_sha1;
    // What the manifest declares is checked before any request: the size limit of implicit
    // downloads, and room on the depot's filesystem.
    let declared = allowed.iter().filter_map(|d| d.size).min();
    if let Some(size) = declared.filter(|_| allowed.iter().all(|d| d.size.is_some())) {
        if let Some(limit) = config.max_download_size
            && size > limit
        {
            return Err(Error::DownloadTooLarge {
                name: name.to_owned(),
                size,
                limit,
                from: "the manifest's `size`".to_owned(),
                manifest: manifest_file(manifest_dir),
            });
        }
        check_room(name, size, &target.dir, config)?;
    }
    let net = config.net();
    let agent = download::agent(&net)?;
    let mut failures = Vec::new();
    // As Pkg: the package server first (`<server>/artifact/<hash>`, no sha256 known: the tree
    // hash verifies it), then the manifest's URLs. Not when offline.
    let from_server = config
        .pkg_server
        .as_ref()
        .filter(|_| !config.offline)
        .map(|server| clima_artifact_manifest::Download {
            url: format!("{server}/artifact/{hash}"),
            sha256: Sha256([0; 32]),
            size: None,
        });
    if let Some(dl) = &from_server {
        let start = Instant::now();
        let source = Attempt {
            download: dl,
            check_sha256: false,
        };
        match install_once(name, &hash, &source, &agent, manifest_dir, config, target) {
            Ok((path, bytes)) => {
                return Ok(downloaded(
                    name,
                    " from the package server",
                    dl,
                    path,
                    bytes,
                    start,
                ));
            }
            Err(e) => {
                notice::warn(&format!(
                    "the package server could not provide `{name}` ({e}); trying the manifest's \
                     URLs"
                ));
                failures.push(e);
            }
        }
    }
    for (i, dl) in variant.downloads.iter().enumerate() {
        if !allowed.iter().any(|a| std::ptr::eq(*a, dl)) {
            failures.push(Error::NotTried {
                url: dl.url.clone(),
                reason: "CLIMA_ARTIFACTS_OFFLINE is set and this is a network URL".to_owned(),
            });
            continue;
        }
        let mut attempt = 1;
        loop {
            let start = Instant::now();
            let source = Attempt {
                download: dl,
                check_sha256: true,
            };
            match install_once(name, &hash, &source, &agent, manifest_dir, config, target) {
                Ok((path, bytes)) => return Ok(downloaded(name, "", dl, path, bytes, start)),
                Err(e) if e.is_transient() && attempt < config.retries => {
                    let wait = download::backoff(config.retry_backoff, attempt);
                    notice::warn(&format!(
                        "{e}; retrying in {:.1} s (attempt {} of {}, CLIMA_ARTIFACTS_RETRIES)",
                        wait.as_secs_f64(),
                        attempt + 1,
                        config.retries
                    ));
                    std::thread::sleep(wait);
                    attempt += 1;
                }
                Err(e) => {
                    let next = if (i + 1..variant.downloads.len()).any(|j| {
                        allowed
                            .iter()
                            .any(|a| std::ptr::eq(*a, &variant.downloads[j]))
                    }) {
                        "; trying the next URL"
                    } else {
                        ""
                    };
                    notice::warn(&format!("{e}{next}"));
                    failures.push(with_attempts(e, attempt));
                    break;
                }
            }
        }
    }
    Err(Error::DownloadFailed {
        name: name.to_owned(),
        hash,
        failures,
        manifest: manifest_file(manifest_dir),
        overrides_file: suggested_overrides_file(config),
    })
}

/// Logs a finished download (`how`: where from, if not from the manifest's URL) and says what
/// it installed.
fn downloaded(
    name: &str,
    how: &str,
    dl: &clima_artifact_manifest::Download,
    path: PathBuf,
    bytes: u64,
    start: Instant,
) -> Installed {
    let seconds = start.elapsed().as_secs_f64();
    tracing::info!(
        artifact = name,
        url = dl.url.as_str(),
        bytes,
        seconds,
        "installed artifact `{name}`{how} into `{}`",
        path.display()
    );
    Installed {
        path,
        origin: Origin::Downloaded {
            url: dl.url.clone(),
            bytes,
            seconds,
        },
    }
}

fn with_attempts(mut e: Error, n: u32) -> Error {
    if let Error::HttpStatus { attempts, .. } | Error::Transport { attempts, .. } = &mut e {
        *attempts = n;
    }
    e
}

/// Most bytes read after the end of the archive (or after it failed to unpack) when the
/// manifest gives no `size`: tar's end padding and a compressor's trailer are far smaller, so
/// more means the server is sending something else (or endlessly).
const DRAIN_CAP: u64 = 1 << 20;

/// A temp dir that removes itself unless [`TempDir::keep`] is called.
struct TempDir(Option<PathBuf>);

impl TempDir {
    fn path(&self) -> &Path {
        self.0.as_deref().unwrap_or(Path::new(""))
    }
    fn keep(mut self) {
        self.0 = None;
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            remove_tree(&p);
        }
    }
}

/// [`clima_artifact_fs::remove_tree`], logging instead of failing (cleanup of temp dirs).
pub(crate) fn remove_tree(path: &Path) {
    if let Err(e) = clima_artifact_fs::remove_tree(path) {
        notice::warn(&format!("cannot remove `{}`: {e}", path.display()));
    }
}

/// One download source to try: a manifest entry (sha256 checked), or a package server's copy
/// (no sha256 known; the tree hash alone verifies it, as in Pkg).
struct Attempt<'a> {
    download: &'a clima_artifact_manifest::Download,
    check_sha256: bool,
}

fn install_once(
    name: &str,
    hash: &GitTreeSha1,
    source_of: &Attempt<'_>,
    agent: &download::Agent,
    manifest_dir: &Path,
    config: &Config,
    target: &InstallTarget,
) -> Result<(PathBuf, u64), Error> {
    let dl = source_of.download;
    let url = dl.url.as_str();
    let tmp_path = depot::Depot::new(&target.dir).new_temp_dir(hash);
    std::fs::create_dir(&tmp_path)
        .map_err(|e| Error::io("create temporary directory", &tmp_path, e))?;
    let tmp = TempDir(Some(tmp_path));

    tracing::info!(
        artifact = name,
        url,
        "downloading artifact `{name}` from `{url}`"
    );
    let net = config.net();
    let source = download::open(agent, url, manifest_folder(manifest_dir), &net)?;
    // Without a declared size, the server's Content-Length is checked before the body.
    if dl.size.is_none()
        && let (Some(limit), Some(length)) = (config.max_download_size, source.length)
        && length > limit
    {
        return Err(Error::DownloadTooLarge {
            name: name.to_owned(),
            size: length,
            limit,
            from: format!("the Content-Length of `{url}`"),
            manifest: manifest_file(manifest_dir),
        });
    }
    let size = source.length.or(dl.size);
    let mut transfer = crate::progress::current(config.progress).start(&DownloadStart {
        artifact: name,
        url,
        size,
    });
    if let Some(note) = &target.note {
        transfer = Box::new(NotingTransfer {
            inner: transfer,
            note: note.clone(),
            what: format!("`{name}` from {}", crate::progress::host_of(url)),
            size,
            last: None,
        });
    }
    // With a `size`, a longer body cannot be the manifest's: stop at one byte past it.
    let rules = BodyRules::new(&net, dl.size, config.progress);
    let mut pipe = Body::spawn(source, transfer, rules, name.to_owned());

    let limits = ExtractLimits {
        max_unpacked_bytes: config.max_unpacked_bytes,
        max_entries: config.max_entries,
        min_free_bytes: match config.min_free_space {
            Some(0) => None,
            Some(n) => Some(n),
            None => crate::extract::free_space(tmp.path())
                .ok()
                .map(|(_, total)| crate::extract::default_free_reserve(total)),
        },
    };
    let extracted = extract_buffered(&mut pipe, tmp.path(), &limits);
    let source_failure = |pipe: &Body| {
        pipe.failure().map(|e| match RuleBroken::of(e) {
            Some(RuleBroken::TooLong { size }) => Error::Archive {
                url: url.to_owned(),
                reason: format!(
                    "the download is longer than the manifest's size of {size} bytes: stopped \
                     reading at byte {}; either the server sends something else or the \
                     manifest's `size` is wrong",
                    size + 1
                ),
            },
            None if ResumeRefused::of(e).is_some() => Error::Transport {
                url: url.to_owned(),
                reason: format!("the transfer broke and could not be resumed: {e}"),
                attempts: 1,
                // Starting over from byte 0 (the next attempt) is what is left to do.
                transient: true,
            },
            Some(_) | None => Error::Transport {
                url: url.to_owned(),
                reason: download::describe_io(e, &net),
                attempts: 1,
                transient: download::is_transient_io(e),
            },
        })
    };
    if let Some(e) = source_failure(&pipe) {
        return Err(e);
    }
    // Drain to the end so the SHA-256 covers every byte (tar padding, trailing blocks), and so
    // that a wrong download is reported as a sha256 mismatch even when it also failed to
    // unpack. The drain is bounded: with a `size` the reader itself stops one byte past it;
    // without one, at most DRAIN_CAP bytes are read after the point where the archive ended
    // (or failed), so a server that keeps sending after a good tarball cannot keep us reading.
    let before_drain = pipe.consumed();
    let drained = io::copy(&mut (&mut pipe).take(DRAIN_CAP + 1), &mut io::sink());
    if drained.is_ok() && pipe.consumed() - before_drain > DRAIN_CAP {
        let what = match &extracted {
            Ok(_) => "the end of the archive".to_owned(),
            Err(e) => format!("the archive failed to unpack ({e})"),
        };
        return Err(Error::Archive {
            url: url.to_owned(),
            reason: format!(
                "the server kept sending after {what}: stopped reading {} past it, at \
                 byte {}; this is not the tarball the manifest describes (add its `size` to the \
                 manifest to stop at exactly that many bytes)",
                human_bytes(DRAIN_CAP),
                pipe.consumed()
            ),
        });
    }
    if let Some(e) = source_failure(&pipe) {
        return Err(e);
    }
    if let Err(e) = drained {
        return Err(Error::Transport {
            url: url.to_owned(),
            reason: download::describe_io(&e, &net),
            attempts: 1,
            transient: download::is_transient_io(&e),
        });
    }
    let (actual, bytes) = pipe.finish();
    // A wrong download is reported as such even when it also fails to unpack.
    if source_of.check_sha256 && actual != dl.sha256 {
        return Err(Error::Sha256Mismatch {
            url: url.to_owned(),
            expected: dl.sha256,
            actual,
            bytes,
        });
    }
    let extracted = extracted.map_err(|e| Error::Archive {
        url: url.to_owned(),
        reason: e.to_string(),
    })?;
    if extracted.tree_hash != *hash {
        return Err(Error::TreeHashMismatch {
            url: url.to_owned(),
            expected: *hash,
            actual: extracted.tree_hash,
        });
    }
    let dest = depot::artifact_dir(&target.dir, hash);
    match std::fs::rename(tmp.path(), &dest) {
        Ok(()) => {
            tmp.keep();
            Ok((dest, bytes))
        }
        // Another process (without a working lock, e.g. on NFS) won the race: success.
        Err(_) if dest.is_dir() => Ok((dest, bytes)),
        Err(e) => Err(Error::io(
            format!("move verified artifact `{name}` into place as"),
            &dest,
            e,
        )),
    }
}
