//! The one-pass install pipeline.
//!
//! [`ensure_variant`] decides, in this order:
//!
//! 1. an override (`Overrides.toml` of any depot) -> use its path; never hashed, never downloaded;
//! 2. `artifacts/<hash>` exists in any depot -> use it (an existence check, nothing is hashed;
//!    for an entry with a `git-tree-sha256`, its recorded SHA-256 tree hash must be the
//!    entry's, or the copy is hashed once and the result recorded: `sha256_copy`);
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
//!                                        |     the files in artifacts/.<hash>.clima-install-
//!                                        |     <host>.<pid>.<rand>/ and hashes every blob)
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

mod attempt;
mod reuse;
mod seekable;
pub(crate) mod sha256_copy;
mod streamed;
mod transfer;

use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::Instant;

use clima_artifact_fs::human_bytes;

use clima_artifact_manifest::{ArtifactVariant, Download};
use clima_artifact_net::ranged::{self, Kept, Large};
use clima_artifact_net::source::{self as download, ResumeRefused};
use clima_artifact_net::trust::redact_url;
use clima_artifact_net::{Body, BodyRules, NetConfig, NetError, RuleBroken, Tap};

use crate::extract::{ExtractError, ExtractLimits, extract_buffered_at};
use crate::notice::{InstallEvent, InstalledFrom, MpiEvent};
use crate::progress::{DownloadStart, Transfer};
use crate::{Config, Error, GitTreeSha1, GitTreeSha256, Sha256, SourceFailure};
use crate::{Installed, Origin};
use clima_artifact_depot::notice::DepotEvent;
use clima_artifact_depot::{Depot, Stage, Staged, Staging, TempDir, Wait, first_writable, lookup};
use clima_artifact_progress::Reporting;
use transfer::Unreported;

/// The access to `variant` of artifact `name` (defined in `manifest`) that `installed`
/// answered, by `rank`, from `call_site` if a `clima_artifact!` call made it: what the
/// provenance access log records.
pub(crate) fn access_event(
    installed: &Installed,
    name: &str,
    variant: &ArtifactVariant,
    manifest: PathBuf,
    call_site: Option<(&'static str, u32)>,
    rank: usize,
) -> crate::AccessEvent {
    crate::AccessEvent {
        name: name.to_owned(),
        hash: variant.git_tree_sha1,
        path: installed.path.clone(),
        origin: installed.origin.clone(),
        call_site,
        manifest,
        metadata: variant.metadata.clone(),
        rank,
    }
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
        return sha256_copy::usable(name, variant, found, config);
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
    let target = match stage(name, &hash, &depots, config, true)? {
        Staged::Ready(staging) => InstallTarget::new(*staging, name, config),
        Staged::Installed(found) => return sha256_copy::usable(name, variant, found, config),
        // Not when waiting: a holder is waited for, or the wait is an error.
        Staged::Busy => return Err(busy(name, &hash)),
    };
    // Files of it fetched one by one before are reused, with only the rest fetched (not
    // when the bytes also go to other nodes: they need the whole stream).
    if taps.is_none()
        && let Some(installed) =
            reuse::install_reusing(name, variant, &manifest.file, config, &target.staging)?
    {
        return Ok(installed);
    }
    download_and_install(name, variant, &allowed, manifest, config, target, taps)
}

/// Asks the first writable depot of `config` for the staging of `hash` (the install's one
/// question to the depot): its locks, held until the install ends (waiting for another holder
/// when `wait`: our lock, then Julia's pidfile), another look in `depots` (another process
/// may have installed it meanwhile) and the reclamation of what dead installs left.
fn stage(
    name: &str,
    hash: &GitTreeSha1,
    depots: &[Depot],
    config: &Config,
    wait: bool,
) -> Result<Staged, Error> {
    let wait = wait.then_some(Wait {
        timeout: config.lock_timeout,
        tell: config.progress,
    });
    let stage = Stage {
        name,
        search: depots,
        wait,
        reporting: config.reporting(),
    };
    Ok(first_writable(&config.depots, name)?.stage(hash, stage)?)
}

/// The error of a waiting [`stage`] that came back busy, which it never does.
fn busy(name: &str, hash: &GitTreeSha1) -> Error {
    Error::Internal {
        message: format!(
            "the staging of artifact `{name}` ({hash}) was busy although it waited; please \
             report this"
        ),
    }
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
    /// The entry's `index-sha256` when they are a seekable tarball of a manifest URL: the
    /// node then unpacks them on every core, as the sender does (`seekable.rs`).
    #[serde(default)]
    pub(crate) index_sha256: Option<Sha256>,
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
    let target = match stage(name, &hash, &depots, config, false)? {
        Staged::Ready(staging) => InstallTarget::received(*staging),
        Staged::Installed(found) => {
            return sha256_copy::usable(name, variant, found, config).map(Some);
        }
        Staged::Busy => return Ok(None),
    };
    if let Some(length) = incoming.length {
        let from = format!("the length node `{}` announced", incoming.from_node);
        check_room(name, (length, &from), target.staging.depot(), config)?;
    }
    // The bytes arrive as fast as the sender reads them: no low-speed rule here.
    let mut net = config.net.clone();
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
            // Only with the SHA-256 of the whole file, which the seekable install checks
            // before it reads the index.
            index_sha256: incoming.index_sha256.filter(|_| incoming.sha256.is_some()),
        },
        from: Some(InstalledFrom::OverMpi),
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
    let (path, bytes) = request
        .install_body(&attempt, tmp, body, None)
        .map_err(failed)?;
    let seconds = start.elapsed().as_secs_f64();
    request.net.reporting.emit(MpiEvent::ReceivedOverMpi {
        artifact: name.to_owned(),
        from_node: incoming.from_node.clone(),
        path: path.clone(),
    });
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

/// Fails when the filesystem of `depot` cannot take `size` more bytes above its free-space
/// reserve (the tarball's size: the unpacked content is at least about that large); `from`
/// says where that size comes from.
pub(crate) fn check_room(
    name: &str,
    (size, from): (u64, &str),
    depot: &Depot,
    config: &Config,
) -> Result<(), Error> {
    let Ok((free, total)) = crate::extract::free_space(&depot.artifacts_dir()) else {
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
            depot: depot.root().to_path_buf(),
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
fn depot_setting(config: &Config, depot: &Depot) -> &'static str {
    if config.node_local_depot.as_ref() == Some(depot) {
        clima_artifact_vars::NODE_LOCAL_DEPOT
    } else {
        clima_artifact_vars::DEPOT_PATH
    }
}

/// An install's staging in its depot, and what the install says about it.
struct InstallTarget {
    /// The locks, the temp dirs, the partial downloads and the final rename.
    staging: Staging,
    /// Said once when a partial file is kept where the next job may not find it.
    partials_note: Option<DepotEvent>,
}

impl InstallTarget {
    /// The target of a download through `staging`. In node-local mode (the staging is in the
    /// node depot, which the end of a job may wipe), the download's partial file goes to the
    /// first writable shared depot of `config`, so that the next job continues it; without
    /// one (or while another installer holds its lock) it stays in the node depot, and the
    /// note says so.
    fn new(mut staging: Staging, name: &str, config: &Config) -> InstallTarget {
        let node = staging.depot().clone();
        let mut partials_note = None;
        if config.node_local_depot.as_ref() == Some(&node) {
            let mut shared = config.depots.clone();
            shared.retain(|d| *d != node);
            if let Err(why) = staging.keep_partials_in(&shared) {
                partials_note = Some(DepotEvent::PartialOnNode {
                    artifact: name.to_owned(),
                    depot: node.root().to_path_buf(),
                    why,
                });
            }
        }
        InstallTarget {
            staging,
            partials_note,
        }
    }

    /// The target of an install of bytes received over MPI (which keeps no partial file).
    fn received(staging: Staging) -> InstallTarget {
        InstallTarget {
            staging,
            partials_note: None,
        }
    }
}

/// Whether fetching `url` would use the network (`http(s)://`); local paths, `file://` URLs
/// and unsupported schemes (which fail without any access) are not.
pub(crate) fn is_network(url: &str, manifest_dir: &Path) -> bool {
    matches!(
        download::locate(url, manifest_dir),
        download::Location::Http(_)
    )
}

/// The `Overrides.toml` that error messages suggest adding a line to: the first depot's, whose
/// entries win over all others.
pub(crate) fn suggested_overrides_file(config: &Config) -> PathBuf {
    match config.depots.first() {
        Some(first) => first.overrides_path(),
        None => Depot::new(crate::config::default_depot().unwrap_or_else(|| "<depot>".into()))
            .overrides_path(),
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
    /// Where from, for the log: the package server, over MPI, or `None` for a manifest URL.
    from: Option<InstalledFrom>,
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
    /// The entry's `index-sha256`: a seekable tarball, installed on every core.
    pub(crate) index_sha256: Option<Sha256>,
}

impl From<&Download> for Fetch {
    fn from(dl: &Download) -> Fetch {
        Fetch {
            url: dl.url.clone(),
            sha256: Some(dl.sha256),
            size: dl.size,
            index_sha256: dl.index_sha256,
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
            index_sha256: None,
        },
        from: Some(InstalledFrom::PackageServer),
        not_tried: None,
        checked_by_sender: false,
    });
    let from_manifest = variant.downloads.iter().map(|dl| Attempt {
        download: Fetch::from(dl),
        from: None,
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
            target.staging.depot(),
            config,
        )?;
    }
    let net = config.net.clone();
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
                request.net.reporting.emit(InstallEvent::InstallFailed {
                    error: e.to_string(),
                });
                failures.push(e);
                break;
            }
            Err(e) if request.stopped() => {
                failures.push(e);
                break;
            }
            Err(e) => {
                let more = attempts[i + 1..].iter().any(|a| a.not_tried.is_none());
                request
                    .net
                    .reporting
                    .emit(match (attempt.download.sha256.is_some(), more) {
                        (false, _) => InstallEvent::PackageServerFallback {
                            artifact: name.to_owned(),
                            error: e.to_string(),
                            cause: e.cause(),
                        },
                        (true, true) => InstallEvent::NextSource {
                            error: e.to_string(),
                            cause: e.cause(),
                        },
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

/// Logs a finished download (`how`: where from, `None` for the manifest's URL) and says what
/// it installed: `(bytes, reused)`, the tarball's size and the bytes of it kept by an earlier
/// attempt.
fn downloaded(
    name: &str,
    how: Option<InstalledFrom>,
    dl: &Fetch,
    path: PathBuf,
    (bytes, reused): (u64, u64),
    start: Instant,
    reporting: &Reporting,
) -> Installed {
    let seconds = start.elapsed().as_secs_f64();
    let received = bytes - reused;
    reporting.emit(InstallEvent::Installed {
        artifact: name.to_owned(),
        from: how,
        path: path.clone(),
        received,
        reused,
    });
    crate::debug_speed::after_install(name, bytes, start.elapsed(), reporting);
    Installed {
        path,
        origin: Origin::Downloaded {
            // Recorded (access log, provenance report) without credentials.
            url: redact_url(&dl.url),
            bytes,
            received_bytes: Some(received),
            reused_bytes: Some(reused),
            seconds,
        },
    }
}
