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
use clima_artifact_vars::{DEPOT_PATH, RETRIES};

use clima_artifact_manifest::{ArtifactVariant, Download, layout};
use clima_artifact_net::ranged::{self, Kept, Large};
use clima_artifact_net::source::{self as download, ResumeRefused};
use clima_artifact_net::trust::redact_url;
use clima_artifact_net::{Body, BodyRules, NetConfig, NetError, RuleBroken, Tap};

use crate::depot::{
    Depot, InstallLock, Locked, Wait, first_writable, lock_for_install, lookup, partial_name,
    try_lock_for_install,
};
use crate::depot::{HolderNote, LockedFile, TempDir};
use crate::extract::{ExtractError, ExtractLimits, extract_buffered_at};
use crate::progress::{DownloadStart, Transfer};
use crate::{Config, Error, GitTreeSha1, GitTreeSha256, Sha256, SourceFailure};
use crate::{Installed, Origin};
use clima_artifact_progress::notice;

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
    ensure_variant_tapped(name, variant, manifest, config, None)
}

/// Where the bytes of a download go besides its own install (node-local mode's fan-out over
/// MPI): every attempt that opens a source starts a [`Tap`], which sees every byte the
/// SHA-256 sees, in order.
pub(crate) trait Taps: Sync {
    /// An attempt starts reading `download` (its `sha256`: the one checked, if any;
    /// `length`: the byte count the source announced or the manifest declared).
    fn start(&self, download: &Fetch, length: Option<u64>) -> Box<dyn Tap>;
    /// Whether the receivers stopped the stream: no further attempt or retry is made.
    fn stopped(&self) -> bool;
}

/// [`ensure_variant`], handing the bytes of every download attempt to `taps` as well.
pub(crate) fn ensure_variant_tapped(
    name: &str,
    variant: &ArtifactVariant,
    manifest: &Path,
    config: &Config,
    taps: Option<&dyn Taps>,
) -> Result<Installed, Error> {
    let manifest = ManifestPlace::of(manifest);
    let hash = variant.git_tree_sha1;
    let depots = config.search_depots();
    if let Some(found) = lookup(&hash, &depots)? {
        return Ok(found);
    }
    if variant.downloads.is_empty() {
        return Err(Error::NoDownloads {
            name: name.to_owned(),
            hash,
            manifest: manifest.file,
            overrides_file: suggested_overrides_file(config),
        });
    }
    // Offline, only network sources are skipped: a local path or `file://` URL is no network
    // access, so such sources still install (the quickstart ships its data that way).
    let (allowed, skipped): (Vec<_>, Vec<_>) = variant
        .downloads
        .iter()
        .partition(|d| !config.offline || !is_network(&d.url, &manifest.folder));
    if allowed.is_empty() {
        return Err(Error::Offline {
            name: name.to_owned(),
            hash,
            depots: depots.iter().map(|d| d.root().to_path_buf()).collect(),
            urls: skipped.iter().map(|d| d.url.clone()).collect(),
        });
    }
    let (_lock, mut target) = match lock_target(name, &hash, &depots, config)? {
        Err(found) => return Ok(found),
        Ok(locked) => locked,
    };
    partials_depot(name, &hash, config, &mut target);
    download_and_install(name, variant, &allowed, manifest, config, target, taps)
}

/// The locks of an install, held until it ends, and its target; or the copy another process
/// installed while this one waited.
type LockedTarget = Result<(InstallLock, InstallTarget), Installed>;

/// Locks the artifact in the first writable depot of `config` (waiting for another holder:
/// our lock, then Julia's pidfile), looks again in `depots` (another process may have
/// installed it meanwhile) and reclaims the temp dirs of dead processes: `Err` with the copy
/// another process installed meanwhile.
fn lock_target(
    name: &str,
    hash: &GitTreeSha1,
    depots: &[Depot],
    config: &Config,
) -> Result<LockedTarget, Error> {
    let wait = Wait {
        timeout: config.lock_timeout,
        tell: config.progress,
    };
    Ok(target_of(lock_for_install(
        name,
        hash,
        &config.depots,
        depots,
        wait,
    )?))
}

/// [`lock_target`] without waiting: `None` when another holder (ours or Julia's) has the lock.
fn try_lock_target(
    name: &str,
    hash: &GitTreeSha1,
    depots: &[Depot],
    config: &Config,
) -> Result<Option<LockedTarget>, Error> {
    Ok(try_lock_for_install(name, hash, &config.depots, depots)?.map(target_of))
}

/// The install's target once its locks are held, or the copy found meanwhile.
fn target_of(locked: Locked) -> LockedTarget {
    match locked {
        Locked::Installed(found) => Err(found),
        Locked::Held(lock, depot) => {
            let note = lock.note();
            Ok((
                lock,
                InstallTarget {
                    partials: depot.clone(),
                    dir: depot,
                    note,
                    _partials_lock: None,
                    partials_note: None,
                },
            ))
        }
    }
}

/// In node-local mode (`target` is the node depot, which the end of a job may wipe), where the
/// download's partial file goes so that the next job continues it: the first writable shared
/// depot of `config`, with its lock of `hash` held for the download. Without one (or while
/// another installer holds that lock) it stays in `target`, and the note says so.
fn partials_depot(name: &str, hash: &GitTreeSha1, config: &Config, target: &mut InstallTarget) {
    if config.node_local_depot.as_deref() != Some(target.dir.root()) {
        return;
    }
    let mut shared = config.depots.clone();
    shared.retain(|d| *d != target.dir);
    let why = match first_writable(&shared, name) {
        Ok(depot) => match depot.try_lock(hash) {
            Some(lock) => {
                target.partials = depot;
                target._partials_lock = Some(lock);
                return;
            }
            None => format!(
                "another installer holds its lock in the shared depot `{}`",
                depot.root().display()
            ),
        },
        Err(e) => format!("no shared depot can keep it ({e})"),
    };
    target.partials_note = Some(format!(
        "the partial download of `{name}` is kept in the node-local depot `{}`, which the end \
         of the job may wipe: {why}; a later job starts this download over. Set \
         {DEPOT_PATH} to a writable shared folder to continue it in the next job",
        target.dir.root().display()
    ));
}

/// What a node that receives an artifact's bytes over MPI is told about them.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Incoming {
    /// The node that sends them.
    pub(crate) from_node: String,
    /// The URL the sender reads them from (without credentials), or `None` for a copy of its
    /// installed artifact.
    pub(crate) url: Option<String>,
    /// The SHA-256 they must have, when it is known (a manifest URL's download).
    pub(crate) sha256: Option<Sha256>,
    /// How many bytes come, when known.
    pub(crate) length: Option<u64>,
}

/// Installs `variant` on `node` from the tarball bytes of `reader` (received over MPI, see
/// [`Incoming`]) into the first writable depot of `config`, with the same checks as a download:
/// the lock, another look, room for `length`, SHA-256 (when known), safe extraction, tree hash,
/// rename. `Ok` with [`Origin::Depot`] when the artifact turned out to be installed already;
/// `Ok(None)`, reading nothing, when another installer holds the artifact's lock in that depot
/// (a node or process sharing it: waiting here could wait for the very sender of these bytes),
/// after which [`ensure_variant`] waits for that installer and uses its copy (or, should it
/// fail, downloads the artifact itself).
pub(crate) fn install_received(
    name: &str,
    variant: &ArtifactVariant,
    manifest: &Path,
    config: &Config,
    node: &str,
    incoming: &Incoming,
    reader: Box<dyn Read + Send>,
) -> Result<Option<Installed>, Error> {
    let manifest = ManifestPlace::of(manifest);
    let hash = variant.git_tree_sha1;
    let depots = config.search_depots();
    let (_lock, target) = match try_lock_target(name, &hash, &depots, config)? {
        Some(Err(found)) => return Ok(Some(found)),
        Some(Ok(locked)) => locked,
        None => return Ok(None),
    };
    if let Some(length) = incoming.length {
        let from = format!("the length node `{}` announced", incoming.from_node);
        check_room(name, (length, &from), target.dir.root(), config)?;
    }
    // The bytes arrive as fast as the sender reads them: no low-speed rule here.
    let mut net = config.net();
    net.low_speed_limit = 0;
    let url = incoming
        .url
        .clone()
        .unwrap_or_else(|| format!("the installed copy of node `{}`", incoming.from_node));
    let request = InstallRequest {
        name,
        hash,
        hash_sha256: variant.git_tree_sha256,
        agent: None,
        net,
        manifest,
        config,
        target,
        taps: None,
        carried: std::cell::Cell::new(None),
    };
    let attempt = Attempt {
        download: Fetch {
            url: url.clone(),
            sha256: incoming.sha256,
            size: incoming.length,
        },
        from: " over MPI",
        not_tried: None,
        checked_by_sender: true,
    };
    let start = Instant::now();
    let failed = |failure: SourceFailure| Error::ReceiveFailed {
        name: name.to_owned(),
        hash,
        from_node: incoming.from_node.clone(),
        failure: Box::new(failure),
    };
    let tmp = request.new_temp_dir(&url).map_err(failed)?;
    let source = download::Source::from_reader(reader, incoming.length);
    let rules = BodyRules::new(&request.net, incoming.length, false);
    let body = Body::spawn(source, Box::new(Unreported), rules, name.to_owned());
    let (path, bytes) = request.install_body(&attempt, tmp, body).map_err(failed)?;
    let seconds = start.elapsed().as_secs_f64();
    notice::detail(&format!(
        "installed `{name}` received over MPI from node `{}` into `{}`",
        notice::printable(&incoming.from_node),
        notice::printable(&path.display().to_string())
    ));
    Ok(Some(Installed {
        path,
        origin: Origin::Received {
            node: node.to_owned(),
            from_node: incoming.from_node.clone(),
            url: incoming.url.clone(),
            bytes,
            seconds,
        },
    }))
}

/// Progress of bytes received over MPI: not shown (the sender shows its download's).
struct Unreported;

impl Transfer for Unreported {
    fn received(&mut self, _total: u64) {}
    fn done(self: Box<Self>, _bytes: u64, _elapsed: Duration) {}
    fn failed(self: Box<Self>, _reason: &str) {}
}

/// Fails when the filesystem of `depot` cannot take `size` more bytes above its free-space
/// reserve (the tarball's size: the unpacked content is at least about that large); `from`
/// says where that size comes from.
fn check_room(
    name: &str,
    (size, from): (u64, &str),
    depot: &Path,
    config: &Config,
) -> Result<(), Error> {
    let Ok((free, total)) = crate::extract::free_space(&layout::artifacts_dir(depot)) else {
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
            from: from.into(),
            depot: depot.to_path_buf(),
            free: free.saturating_sub(reserve),
            reserve,
            setting: depot_setting(config, depot).to_owned(),
        });
    }
    Ok(())
}

/// The setting that chose `depot` as the install's target, for messages that say where to
/// move it: `CLIMA_ARTIFACTS_NODE_LOCAL_DEPOT` for a node depot, else
/// `CLIMA_ARTIFACTS_DEPOT_PATH`.
fn depot_setting(config: &Config, depot: &Path) -> &'static str {
    if config.node_local_depot.as_deref() == Some(depot) {
        clima_artifact_vars::NODE_LOCAL_DEPOT
    } else {
        clima_artifact_vars::DEPOT_PATH
    }
}

/// The depot an install goes to, and the lock's holder line to keep up to date.
struct InstallTarget {
    dir: Depot,
    note: Option<HolderNote>,
    /// The depot whose `artifacts` folder keeps a large download's partial file: `dir`, or
    /// in node-local mode the shared depot (see [`partials_depot`]).
    partials: Depot,
    /// That depot's lock of the artifact, held while its partial file is used (when it is
    /// not `dir`, whose lock the install holds anyway).
    _partials_lock: Option<LockedFile>,
    /// Said once when a partial file is kept where the next job may not find it.
    partials_note: Option<String>,
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
    fn connections(&mut self, open: usize) {
        self.inner.connections(open);
    }
    fn done(self: Box<Self>, bytes: u64, elapsed: Duration) {
        self.note.set(&format!("verifying {}", self.what));
        self.inner.done(bytes, elapsed);
    }
    fn failed(self: Box<Self>, reason: &str) {
        self.inner.failed(reason);
    }
}

/// The end of a transfer whose bytes all arrived, held back until they are verified: the
/// reporter's "downloaded" line is for a download that turned out to be the artifact.
#[derive(Clone, Default)]
struct EndLine(std::sync::Arc<std::sync::Mutex<Option<Ended>>>);

/// A transfer that ended: it, its byte count and its time.
type Ended = (Box<dyn Transfer>, u64, Duration);

impl EndLine {
    /// Tells the reporter the held end, if the transfer ended.
    fn release(&self) {
        let held = self.0.lock().ok().and_then(|mut h| h.take());
        if let Some((transfer, bytes, elapsed)) = held {
            transfer.done(bytes, elapsed);
        }
    }
}

/// Forwards progress, and hands the end of the transfer to its [`EndLine`].
struct HeldEnd {
    inner: Option<Box<dyn Transfer>>,
    end: EndLine,
}

impl Transfer for HeldEnd {
    fn received(&mut self, total: u64) {
        if let Some(t) = self.inner.as_mut() {
            t.received(total);
        }
    }
    fn connections(&mut self, open: usize) {
        if let Some(t) = self.inner.as_mut() {
            t.connections(open);
        }
    }
    fn done(mut self: Box<Self>, bytes: u64, elapsed: Duration) {
        if let (Some(t), Ok(mut held)) = (self.inner.take(), self.end.0.lock()) {
            *held = Some((t, bytes, elapsed));
        }
    }
    fn failed(mut self: Box<Self>, reason: &str) {
        if let Some(t) = self.inner.take() {
            t.failed(reason);
        }
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

/// The `Overrides.toml` that error messages suggest adding a line to: the first depot's, whose
/// entries win over all others.
fn suggested_overrides_file(config: &Config) -> PathBuf {
    match config.depots.first() {
        Some(first) => first.overrides_path(),
        None => layout::overrides_file(
            &crate::config::default_depot().unwrap_or_else(|| PathBuf::from("<depot>")),
        ),
    }
}

/// Where the manifest of a variant is, decided once: the file that messages name, and the
/// folder that relative download paths resolve against.
#[derive(Debug, Clone)]
pub(crate) struct ManifestPlace {
    /// The manifest file (named in messages).
    pub(crate) file: PathBuf,
    /// Its folder.
    pub(crate) folder: PathBuf,
}

impl ManifestPlace {
    /// `manifest` is the manifest file, or a folder: then the file is its
    /// `JuliaArtifacts.toml` or `Artifacts.toml` (the first that exists; `Artifacts.toml` if
    /// neither does).
    pub(crate) fn of(manifest: &Path) -> ManifestPlace {
        if manifest.is_file() {
            let folder = manifest.parent().unwrap_or(Path::new("."));
            return ManifestPlace {
                file: manifest.to_path_buf(),
                folder: folder.to_path_buf(),
            };
        }
        let file = clima_artifact_manifest::Manifest::candidates(manifest)
            .into_iter()
            .find(|p| p.is_file())
            .unwrap_or_else(|| manifest.join("Artifacts.toml"));
        ManifestPlace {
            file,
            folder: manifest.to_path_buf(),
        }
    }
}

/// Everything one install of one artifact needs, fixed before the first attempt.
struct InstallRequest<'a> {
    /// The artifact's name, for messages.
    name: &'a str,
    hash: GitTreeSha1,
    /// The entry's `git-tree-sha256`, checked as well when given.
    hash_sha256: Option<GitTreeSha256>,
    manifest: ManifestPlace,
    config: &'a Config,
    /// What the network code takes of `config`.
    net: NetConfig,
    /// `None` for an install of bytes received over MPI, which opens no URL.
    agent: Option<download::Agent>,
    target: InstallTarget,
    /// Where else the bytes of each attempt go.
    taps: Option<&'a dyn Taps>,
    /// Bytes kept by an earlier process that the attempts of one URL so far carried on
    /// (`None` before the first attempt opened): an attempt that starts over sets it to 0,
    /// one that continues what an earlier attempt of this call received does not add to it.
    carried: std::cell::Cell<Option<u64>>,
}

/// One source to try. In Pkg's order: the package server's copy first (no sha256 is known for
/// it: the tree hash alone verifies it), then the manifest's URLs (sha256 checked); a URL that
/// may not be used now (a network URL while offline) is listed with why it is not tried.
struct Attempt {
    download: Fetch,
    /// Where from, for the log: `" from the package server"`, or empty for a manifest URL.
    from: &'static str,
    not_tried: Option<String>,
    /// The bytes come from another node over MPI, which hashes them itself and reports a
    /// wrong download to every rank: this install need not read past its own trouble.
    checked_by_sender: bool,
}

/// What an attempt reads: a URL, the SHA-256 its bytes must have when one is known (a manifest
/// URL's; not the package server's, nor an installed copy's sent over MPI, which the tree
/// hash alone verifies), and the size declared.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Fetch {
    pub(crate) url: String,
    pub(crate) sha256: Option<Sha256>,
    pub(crate) size: Option<u64>,
}

impl From<&Download> for Fetch {
    fn from(dl: &Download) -> Fetch {
        Fetch {
            url: dl.url.clone(),
            sha256: Some(dl.sha256),
            size: dl.size,
        }
    }
}

/// The sources of `variant` to try, in order; `allowed` are its downloads usable now.
fn attempts(variant: &ArtifactVariant, allowed: &[&Download], config: &Config) -> Vec<Attempt> {
    let server = config.pkg_server.as_ref().filter(|_| !config.offline);
    let from_server = server.map(|server| Attempt {
        download: Fetch {
            url: format!("{server}/artifact/{}", variant.git_tree_sha1),
            sha256: None,
            size: None,
        },
        from: " from the package server",
        not_tried: None,
        checked_by_sender: false,
    });
    let from_manifest = variant.downloads.iter().map(|dl| Attempt {
        download: Fetch::from(dl),
        from: "",
        not_tried: (!allowed.iter().any(|a| std::ptr::eq(*a, dl))).then(|| {
            format!(
                "{} is set and this is a network URL",
                clima_artifact_vars::OFFLINE
            )
        }),
        checked_by_sender: false,
    });
    from_server.into_iter().chain(from_manifest).collect()
}

/// Tries `allowed` (the variant's downloads that may be used now) in order, after the
/// package server if one is set, each with retries of transient failures.
fn download_and_install(
    name: &str,
    variant: &ArtifactVariant,
    allowed: &[&Download],
    manifest: ManifestPlace,
    config: &Config,
    target: InstallTarget,
    taps: Option<&dyn Taps>,
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
                manifest: manifest.file,
            });
        }
        check_room(
            name,
            (size, "its size in the manifest"),
            target.dir.root(),
            config,
        )?;
    }
    let net = config.net();
    let request = InstallRequest {
        name,
        hash,
        hash_sha256: variant.git_tree_sha256,
        agent: Some(download::agent(&net)?),
        net,
        manifest,
        config,
        target,
        taps,
        carried: std::cell::Cell::new(None),
    };
    let attempts = attempts(variant, allowed, config);
    let mut failures = Vec::new();
    for (i, attempt) in attempts.iter().enumerate() {
        if let Some(reason) = &attempt.not_tried {
            failures.push(SourceFailure::NotTried {
                url: attempt.download.url.clone(),
                reason: reason.clone(),
            });
            continue;
        }
        match request.install_retrying(attempt) {
            Ok(installed) => return Ok(installed),
            // The depot's own trouble (its disk full): every other source would meet it too.
            // And a stream that its receivers stopped goes no further.
            Err(e @ SourceFailure::Install { .. }) => {
                notice::warn(&e.to_string());
                failures.push(e);
                break;
            }
            Err(e) if request.stopped() => {
                failures.push(e);
                break;
            }
            Err(e) => {
                let more = attempts[i + 1..].iter().any(|a| a.not_tried.is_none());
                notice::warn(&match (attempt.download.sha256.is_some(), more) {
                    (false, _) => format!(
                        "the package server could not provide `{name}` ({e}); trying the \
                         manifest's URLs"
                    ),
                    (true, true) => format!("{e}; trying the next URL"),
                    // The last source: its failure is told once, by the error returned.
                    (true, false) => {
                        failures.push(e);
                        continue;
                    }
                });
                failures.push(e);
            }
        }
    }
    Err(Error::DownloadFailed {
        name: name.to_owned(),
        hash,
        failures,
        manifest: request.manifest.file,
        overrides_file: suggested_overrides_file(config),
    })
}

/// Logs a finished download (`how`: where from, if not from the manifest's URL) and says what
/// it installed: `(bytes, reused)`, the tarball's size and the bytes of it kept by an earlier
/// attempt.
fn downloaded(
    name: &str,
    how: &str,
    dl: &Fetch,
    path: PathBuf,
    (bytes, reused): (u64, u64),
    start: Instant,
) -> Installed {
    let seconds = start.elapsed().as_secs_f64();
    let received = bytes - reused;
    let kept = match reused {
        0 => String::new(),
        n => format!(
            " ({} received, {} reused from an earlier partial download)",
            human_bytes(received),
            human_bytes(n)
        ),
    };
    notice::detail(&format!(
        "installed `{name}`{how} into `{}`{kept}",
        notice::printable(&path.display().to_string())
    ));
    crate::debug_speed::after_install(name, bytes, start.elapsed());
    Installed {
        path,
        origin: Origin::Downloaded {
            // Recorded (access log, provenance report) without credentials.
            url: redact_url(&dl.url),
            bytes,
            received_bytes: received,
            reused_bytes: reused,
            seconds,
        },
    }
}

/// Most bytes read after the end of the archive (or after it failed to unpack) when the
/// manifest gives no `size`: tar's end padding and a compressor's trailer are far smaller, so
/// more means the server is sending something else (or endlessly).
const DRAIN_CAP: u64 = 1 << 20;

/// Most bytes hashed after the depot refused an unpacking, to tell a wrong download from a
/// full disk (see `InstallRequest::depot_trouble`).
const DEPOT_TROUBLE_READ: u64 = 64 << 20;

impl InstallRequest<'_> {
    /// Whether the nodes receiving this download over MPI stopped it (see [`Taps::stopped`]).
    fn stopped(&self) -> bool {
        self.taps.is_some_and(|t| t.stopped())
    }

    /// [`InstallRequest::install_from`], retried with backoff while it fails transiently
    /// (`CLIMA_ARTIFACTS_RETRIES` attempts in all); each retry is a notice with its cause and
    /// delay.
    fn install_retrying(&self, attempt: &Attempt) -> Result<Installed, SourceFailure> {
        let mut n = 1;
        self.carried.set(None);
        loop {
            let start = Instant::now();
            match self.install_from(attempt) {
                Ok((path, bytes)) => {
                    let dl = &attempt.download;
                    let reused = self.carried.get().unwrap_or(0).min(bytes);
                    let sizes = (bytes, reused);
                    return Ok(downloaded(self.name, attempt.from, dl, path, sizes, start));
                }
                Err(e) => {
                    let retry = self.net.retry;
                    let next = retry.next_attempt(n, e.is_transient());
                    let Some(wait) = next.filter(|_| !self.stopped()) else {
                        return Err(e.after_attempts(n));
                    };
                    notice::warn(&format!(
                        "{e}; retrying in {:.1} s (attempt {} of {}, {RETRIES})",
                        wait.as_secs_f64(),
                        n + 1,
                        retry.attempts
                    ));
                    std::thread::sleep(wait);
                    n += 1;
                }
            }
        }
    }

    /// One attempt: open the source, stream it through the SHA-256, the decompressor and the
    /// tar writer into a fresh temp dir, check both hashes, rename into place.
    ///
    /// A large download's partial file is removed once the artifact is installed, or when
    /// the attempt failed in a way another attempt would not mend; after a transient failure
    /// it stays for the next attempt (of this process or another). Bytes kept by an earlier
    /// attempt that fail verification are removed and the download starts over, once, with
    /// a warning.
    fn install_from(&self, attempt: &Attempt) -> Result<(PathBuf, u64), SourceFailure> {
        let (result, kept) = self.install_once(attempt);
        if let (
            Err(
                e @ (SourceFailure::Sha256Mismatch { .. }
                | SourceFailure::TreeHashMismatch { .. }
                | SourceFailure::TreeHashSha256Mismatch { .. }
                | SourceFailure::Archive { .. }),
            ),
            Some(kept),
        ) = (&result, &kept)
            && kept.resumed_at() > 0
        {
            kept.remove();
            notice::warn(&format!(
                "the download of `{}` continued from {} kept in `{}` by an earlier attempt, \
                 and failed verification ({e}); the kept bytes were deleted and the download \
                 starts over",
                self.name,
                human_bytes(kept.resumed_at()),
                kept.path().display()
            ));
            let (again, kept) = self.install_once(attempt);
            return self.settle_partial(again, kept);
        }
        self.settle_partial(result, kept)
    }

    /// What happens to the partial file `kept` after an attempt that ended in `result`: removed
    /// (with this user's other partial files of the artifact) once it is installed, removed
    /// after a failure another attempt would not mend; kept after a transient one, after the
    /// depot's own trouble (a full disk: what was received is not to blame, and the run after
    /// space was freed continues it), and when the nodes receiving it over MPI stopped it.
    fn settle_partial(
        &self,
        result: Result<(PathBuf, u64), SourceFailure>,
        kept: Option<Kept>,
    ) -> Result<(PathBuf, u64), SourceFailure> {
        match (&result, kept) {
            (Ok(_), Some(kept)) => {
                kept.remove();
                self.target.partials.remove_partials(&self.hash);
            }
            (Err(e), Some(kept))
                if !e.is_transient()
                    && !self.stopped()
                    && !matches!(e, SourceFailure::Install { .. }) =>
            {
                kept.remove()
            }
            _ => {}
        }
        result
    }

    /// [`InstallRequest::install_from`] without the care of the partial file, which it returns
    /// when the download kept one.
    fn install_once(
        &self,
        attempt: &Attempt,
    ) -> (Result<(PathBuf, u64), SourceFailure>, Option<Kept>) {
        let mut kept = None;
        let result = self.install_keeping(attempt, &mut kept);
        (result, kept)
    }

    fn install_keeping(
        &self,
        attempt: &Attempt,
        kept: &mut Option<Kept>,
    ) -> Result<(PathBuf, u64), SourceFailure> {
        let tmp = self.new_temp_dir(&attempt.download.url)?;
        let end = EndLine::default();
        let body = self.open(attempt, kept, &end)?;
        let installed = self.install_body(attempt, tmp, body);
        // "downloaded" is said of a download that proved to be the artifact; a wrong one is
        // told once, by its error.
        if installed.is_ok() {
            end.release();
        }
        installed
    }

    /// A new temp dir in the target depot for an install from `url`.
    fn new_temp_dir(&self, url: &str) -> Result<TempDir, SourceFailure> {
        let tmp_path = self.target.dir.new_temp_dir(&self.hash);
        // Private while it is filled; the verified artifact gets 0o755 before its rename.
        TempDir::create(tmp_path.clone()).map_err(|e| SourceFailure::Install {
            url: url.to_owned(),
            error: Box::new(Error::io("create temporary directory", &tmp_path, e)),
        })
    }

    /// Streams `body` through the decompressor and the tar writer into `tmp`, checks both
    /// hashes and renames `tmp` into place.
    fn install_body(
        &self,
        attempt: &Attempt,
        tmp: TempDir,
        mut body: Body,
    ) -> Result<(PathBuf, u64), SourceFailure> {
        let url = &attempt.download.url;
        let limits = self.limits(tmp.path(), attempt);
        let extracted = extract_buffered_at(&mut body, tmp.dir(), &limits);
        if let Err(
            e @ (ExtractError::LowDiskSpace { .. }
            | ExtractError::LowInodes { .. }
            | ExtractError::Io { .. }),
        ) = &extracted
        {
            return Err(self.depot_trouble(attempt, body, tmp.path(), e));
        }
        let (actual, bytes) = self.finish_body(body, &attempt.download, &extracted)?;
        let url = url.clone();
        // A wrong download is reported as such even when it also fails to unpack.
        if let Some(expected) = attempt.download.sha256
            && actual != expected
        {
            return Err(SourceFailure::Sha256Mismatch {
                url,
                expected,
                actual,
                bytes,
            });
        }
        let extracted = extracted.map_err(|e| SourceFailure::Archive {
            url: url.clone(),
            reason: e.to_string(),
        })?;
        // The SHA-256 tree hash, when the entry gives one, is the stronger check: first.
        if let Some(expected) = self.hash_sha256
            && extracted.tree_hash_sha256 != Some(expected)
        {
            return Err(SourceFailure::TreeHashSha256Mismatch {
                url,
                expected,
                // Computed whenever the entry has one (see `limits`).
                actual: extracted.tree_hash_sha256.unwrap_or(GitTreeSha256([0; 32])),
                sha1_matches: extracted.tree_hash == self.hash,
            });
        }
        if extracted.tree_hash != self.hash {
            return Err(SourceFailure::TreeHashMismatch {
                url,
                expected: self.hash,
                actual: extracted.tree_hash,
            });
        }
        self.move_into_place(tmp)
            .map(|dest| (dest, bytes))
            .map_err(|error| SourceFailure::Install {
                url: attempt.download.url.clone(),
                error: Box::new(error),
            })
    }

    /// Opens `dl` and starts reading its body on a thread of its own, with progress to the
    /// reporter (and the lock's holder line); refuses a `Content-Length` over the implicit
    /// download limit before any of the body is read.
    fn open(
        &self,
        attempt: &Attempt,
        kept: &mut Option<Kept>,
        end: &EndLine,
    ) -> Result<Body, SourceFailure> {
        let dl = &attempt.download;
        let (name, url, config) = (self.name, dl.url.as_str(), self.config);
        // Printed and logged without credentials (a package server's URL may carry a token).
        let shown = redact_url(url);
        notice::detail(&format!(
            "downloading `{name}` from `{}`",
            notice::printable(&shown)
        ));
        let mut source = self.open_source(dl)?;
        *kept = source.partial.take();
        if kept.is_some()
            && let Some(note) = &self.target.partials_note
        {
            notice::info(note);
        }
        let resumed_at = kept.as_ref().map_or(0, Kept::resumed_at);
        // What an earlier process kept is carried on while the attempts continue it.
        let carried = match (self.carried.get(), resumed_at) {
            (_, 0) => 0,
            (None, at) => at,
            (Some(c), at) => c.min(at),
        };
        self.carried.set(Some(carried));
        // Without a declared size, the server's Content-Length is checked before the body.
        if dl.size.is_none()
            && let (Some(limit), Some(length)) = (config.max_download_size, source.length)
            && length > limit
        {
            return Err(SourceFailure::TooLarge {
                url: url.to_owned(),
                error: Box::new(Error::DownloadTooLarge {
                    name: name.to_owned(),
                    size: length,
                    limit,
                    from: format!("the Content-Length of `{shown}`"),
                    manifest: self.manifest.file.clone(),
                }),
            });
        }
        let size = source.length.or(dl.size);
        let mut transfer: Box<dyn Transfer> = Box::new(HeldEnd {
            inner: Some(
                crate::progress::reporter(config.progress)
                    .start(&DownloadStart::new(name, url, size, resumed_at)),
            ),
            end: end.clone(),
        });
        if let Some(note) = &self.target.note {
            transfer = Box::new(NotingTransfer {
                inner: transfer,
                note: note.clone(),
                what: format!("`{name}` from {}", crate::progress::host_of(url)),
                size,
                last: None,
            });
        }
        // With a `size`, a longer body cannot be the manifest's: stop at one byte past it.
        // Without one (the package server's copy, a manifest URL without `size`), a body
        // without a `Content-Length`, or longer than it said, stops past the download limit.
        let max_bytes = dl.size.or(config.max_download_size);
        let rules = BodyRules::new(&self.net, max_bytes, config.progress);
        let tap = self.taps.map(|taps| taps.start(dl, size));
        Ok(Body::spawn_tapped(
            source,
            transfer,
            rules,
            name.to_owned(),
            tap,
        ))
    }

    /// Opens `dl`: a large download (several connections, a partial file in the depot's
    /// `artifacts` folder kept for resuming) where it qualifies, else one stream.
    fn open_source(&self, dl: &Fetch) -> Result<download::Source, SourceFailure> {
        let (url, config) = (dl.url.as_str(), self.config);
        let Some(agent) = &self.agent else {
            return Err(NetError::Transport {
                url: url.to_owned(),
                reason: "an install of bytes received over MPI opens no URL".to_owned(),
                transient: false,
            }
            .into());
        };
        let artifacts = self.target.partials.artifacts_dir();
        let Ok(dir) = clima_artifact_fs::Dir::open(&artifacts) else {
            return Ok(download::open(
                agent,
                url,
                &self.manifest.folder,
                &self.net,
            )?);
        };
        let partial = partial_name(&self.hash, url);
        // The room a partial file needs is checked with the install's own rule and error.
        let no_room = std::cell::RefCell::new(None);
        let (dir_of_install, dir_of_partial) =
            (self.target.dir.root(), self.target.partials.root());
        let room = |partial: u64, length: u64| {
            let from = format!(
                "the server's Content-Length of {}: {} more for the partial download it is kept \
                 in, about as much again for the unpacked files",
                human_bytes(length),
                human_bytes(partial)
            );
            // The partial file and the unpacked artifact, on one filesystem or on two.
            let checked = if dir_of_partial == dir_of_install {
                let size = partial.saturating_add(length);
                check_room(self.name, (size, &from), dir_of_install, config)
            } else {
                check_room(self.name, (partial, &from), dir_of_partial, config)
                    .and_then(|()| check_room(self.name, (length, &from), dir_of_install, config))
            };
            checked.map_err(|e| {
                let text = e.to_string();
                *no_room.borrow_mut() = Some(e);
                text
            })
        };
        let large = Large {
            dir: &dir,
            name: &partial,
            artifact: self.name,
            max_bytes: dl.size.or(config.max_download_size),
            room: &room,
            tell: config.progress,
        };
        match ranged::open_large(agent, url, &self.manifest.folder, &self.net, &large) {
            Ok(source) => Ok(source),
            Err(e) => {
                if let Some(error) = no_room.borrow_mut().take() {
                    return Err(SourceFailure::Install {
                        url: url.to_owned(),
                        error: Box::new(error),
                    });
                }
                // A kept partial file that a failing server cannot continue is of no use.
                if !e.is_transient() {
                    ranged::remove_kept(&dir, &partial);
                }
                Err(e.into())
            }
        }
    }

    /// The extraction limits of an install into `tmp` from `attempt`: without a sha256 to
    /// check (a package server), only what the tree hash covers is written.
    fn limits(&self, tmp: &Path, attempt: &Attempt) -> ExtractLimits {
        let config = self.config;
        ExtractLimits {
            only_hashed: attempt.download.sha256.is_none(),
            tree_hash_sha256: self.hash_sha256.is_some(),
            max_unpacked_bytes: config.max_unpacked_bytes,
            max_entries: config.max_entries,
            min_free_bytes: match config.min_free_space {
                Some(0) => None,
                Some(n) => Some(n),
                None => crate::extract::free_space(tmp)
                    .ok()
                    .map(|(_, total)| crate::extract::default_free_reserve(total)),
            },
        }
    }

    /// Reads `body` of `url` to its end after the extraction stopped (`extracted`), so that
    /// the SHA-256 covers every byte, and returns it with the byte count; a source that broke
    /// or sent more than the archive is an error.
    ///
    /// The drain is bounded: with a `size` the reader itself stops one byte past it; without
    /// one, at most DRAIN_CAP bytes are read after the point where the archive ended (or
    /// failed), so a server that keeps sending after a good tarball cannot keep us reading.
    /// Draining also makes a wrong download a sha256 mismatch even when it failed to unpack.
    fn finish_body<T, E: std::fmt::Display>(
        &self,
        mut body: Body,
        dl: &Fetch,
        extracted: &Result<T, E>,
    ) -> Result<(Sha256, u64), SourceFailure> {
        let url = dl.url.as_str();
        if let Some(e) = self.source_failure(&body, dl) {
            return Err(e);
        }
        let before_drain = body.consumed();
        let drained = io::copy(&mut (&mut body).take(DRAIN_CAP + 1), &mut io::sink());
        if drained.is_ok() && body.consumed() - before_drain > DRAIN_CAP {
            let what = match extracted {
                Ok(_) => "the end of the archive".to_owned(),
                Err(e) => format!("the archive failed to unpack ({e})"),
            };
            return Err(SourceFailure::Archive {
                url: url.to_owned(),
                reason: format!(
                    "the server kept sending after {what}: stopped reading {} past it, at \
                     byte {}; this is not the tarball the manifest describes (add its `size` to \
                     the manifest to stop at exactly that many bytes)",
                    human_bytes(DRAIN_CAP),
                    body.consumed()
                ),
            });
        }
        if let Some(e) = self.source_failure(&body, dl) {
            return Err(e);
        }
        if let Err(e) = drained {
            return Err(self.broken(url, download::describe_io(&e, &self.net), &e));
        }
        Ok(body.finish())
    }

    /// The failure when the depot refused the unpacking (its disk full, a write failing: `e`),
    /// which is not the archive's fault and is reported as the depot refusing it, unless the
    /// source failed first or the download turns out wrong. To tell a wrong download (a bomb
    /// whose sha256 is wrong, named as such) from a full disk, at most
    /// [`DEPOT_TROUBLE_READ`] more bytes are hashed: the rest of a large download is not
    /// fetched only to be thrown away, and bytes received over MPI are not read on at all
    /// (their sender hashes them and reports a wrong download itself; reading on would keep
    /// it streaming to a node that has already failed).
    fn depot_trouble(
        &self,
        attempt: &Attempt,
        mut body: Body,
        tmp: &Path,
        e: &ExtractError,
    ) -> SourceFailure {
        let dl = &attempt.download;
        if let Some(failure) = self.source_failure(&body, dl) {
            return failure;
        }
        if let Some(expected) = dl.sha256.filter(|_| !attempt.checked_by_sender) {
            let before = body.consumed();
            let read = io::copy(
                &mut (&mut body).take(DEPOT_TROUBLE_READ + 1),
                &mut io::sink(),
            );
            let at_end = read.is_ok() && body.consumed() - before <= DEPOT_TROUBLE_READ;
            // A body that broke a rule while read on (longer than its `size`) is wrong.
            if body.failure().is_some_and(|e| RuleBroken::of(e).is_some())
                && let Some(failure) = self.source_failure(&body, dl)
            {
                return failure;
            }
            if at_end && body.failure().is_none() {
                let (actual, bytes) = body.finish();
                if actual != expected {
                    return SourceFailure::Sha256Mismatch {
                        url: dl.url.clone(),
                        expected,
                        actual,
                        bytes,
                    };
                }
            }
        }
        // A full disk names the setting that put the depot there.
        let text = match e {
            ExtractError::LowDiskSpace { .. } | ExtractError::LowInodes { .. } => {
                format!(
                    "{e} ({})",
                    depot_setting(self.config, self.target.dir.root())
                )
            }
            _ => e.to_string(),
        };
        SourceFailure::Install {
            url: dl.url.clone(),
            error: Box::new(Error::io("unpack into", tmp, io::Error::other(text))),
        }
    }

    /// Why the source of `body` stopped early, as the install reports it.
    fn source_failure(&self, body: &Body, dl: &Fetch) -> Option<SourceFailure> {
        let url = dl.url.as_str();
        body.failure().map(|e| match RuleBroken::of(e) {
            // Without a declared size the bound was CLIMA_ARTIFACTS_MAX_DOWNLOAD_SIZE.
            Some(RuleBroken::TooLong { size: limit }) if dl.size.is_none() => {
                SourceFailure::TooLarge {
                    url: url.to_owned(),
                    error: Box::new(Error::DownloadTooLarge {
                        name: self.name.to_owned(),
                        size: *limit + 1,
                        limit: *limit,
                        from: format!(
                            "the body of `{}`, which went on past the limit",
                            redact_url(url)
                        ),
                        manifest: self.manifest.file.clone(),
                    }),
                }
            }
            Some(RuleBroken::TooLong { size }) => SourceFailure::Archive {
                url: url.to_owned(),
                reason: format!(
                    "the download is longer than the manifest's size of {size} bytes: stopped \
                     reading at byte {}; either the server sends something else or the \
                     manifest's `size` is wrong",
                    size + 1
                ),
            },
            // A large download's connection that failed for good (or too often).
            None if let Some(net) = e.get_ref().and_then(|r| r.downcast_ref::<NetError>()) => {
                net.clone().into()
            }
            // Starting over from byte 0 (the next attempt) is what is left to do: transient.
            None if ResumeRefused::of(e).is_some() => NetError::Transport {
                url: url.to_owned(),
                reason: format!("the transfer broke and could not be resumed: {e}"),
                transient: true,
            }
            .into(),
            Some(_) | None => self.broken(url, download::describe_io(e, &self.net), e),
        })
    }

    /// A transfer of `url` that broke with `e` (`reason` says how), tried once so far.
    fn broken(&self, url: &str, reason: String, e: &io::Error) -> SourceFailure {
        NetError::Transport {
            url: url.to_owned(),
            reason,
            transient: clima_artifact_net::retry::is_transient_io(e),
        }
        .into()
    }

    /// Renames the verified `tmp` to `<depot>/artifacts/<hash>`.
    fn move_into_place(&self, tmp: TempDir) -> Result<PathBuf, Error> {
        let dest = self.target.dir.artifact_dir(&self.hash);
        // The artifact's own folder is 0o755 like every folder inside it, whatever the umask.
        tmp.dir()
            .set_mode(0o755)
            .map_err(|e| Error::io("set the permissions of", tmp.path(), e))?;
        // What is renamed must be the folder that was verified, not what someone put at its
        // path meanwhile.
        if !tmp.still_in_place() {
            return Err(Error::io(
                format!("move verified artifact `{}` into place from", self.name),
                tmp.path(),
                io::Error::other(
                    "the folder was moved away and something else put at its path while it \
                     was filled; nothing was installed. Another user can rename entries of \
                     this depot's `artifacts` folder: make it sticky (`chmod +t`) or writable \
                     only by trusted users",
                ),
            ));
        }
        match std::fs::rename(tmp.path(), &dest) {
            Ok(()) => {
                tmp.keep();
                Ok(dest)
            }
            // Another process (without a working lock, e.g. on NFS) won the race: success.
            Err(_) if dest.is_dir() => Ok(dest),
            Err(e) => Err(Error::io(
                format!("move verified artifact `{}` into place as", self.name),
                &dest,
                e,
            )),
        }
    }
}
