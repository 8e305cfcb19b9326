//! The download of an install, once its staging is ready: the sources in order (the package
//! server's copy first when one is set, then the manifest's URLs), each with retries of
//! transient failures, and one attempt of a source: open it (resuming or ranged when large),
//! read it through the SHA-256 and the taps, unpack into the temp dir while hashing every
//! blob, drain to the end, check both hashes, rename into the depot. Bytes received over MPI
//! go through the same attempt ([`receive`]).

use super::transfer::{EndLine, HeldEnd, NotingTransfer, Unreported};
use super::*;
use clima_artifact_fs::human_bytes;
use clima_artifact_net::notice::NetEvent;
use clima_artifact_net::ranged::{self, Large};
use clima_artifact_net::source::ResumeRefused;
use clima_artifact_net::trust::redact_url;
use clima_artifact_net::{BodyRules, NetConfig, NetError, RuleBroken};

use crate::config::suggested_overrides_file;
use crate::extract::ExtractLimits;
use crate::notice::{InstallEvent, InstalledFrom, MpiEvent};
use crate::progress::{DownloadStart, Transfer};
use crate::{GitTreeSha1, GitTreeSha256, Origin};
use clima_artifact_progress::Reporting;

/// How far the connections of a download sent over MPI may fetch past what was sent (see
/// `ranged::Large::lead`, which is never less than a chunk per connection): a receiver's
/// failure (at a checkpoint of the stream) stops the download well before the end of a large
/// one.
const TAPPED_LEAD: u64 = 64 << 20;

/// Most bytes read after the end of the archive (or after it failed to unpack) when the
/// manifest gives no `size`: tar's end padding and a compressor's trailer are far smaller, so
/// more means the server is sending something else (or endlessly).
const DRAIN_CAP: u64 = 1 << 20;

/// Most bytes hashed after the depot refused an unpacking, to tell a wrong download from a
/// full disk (see `InstallRequest::depot_trouble`).
const DEPOT_TROUBLE_READ: u64 = 64 << 20;

/// Tries `allowed` (the variant's downloads that may be used now) in order, after the
/// package server if one is set, each with retries of transient failures, installing
/// through `target`; the bytes of every attempt go to `taps` as well.
pub(super) fn download(
    install: &Install<'_>,
    allowed: &[&Download],
    target: InstallTarget,
    taps: Option<&dyn Taps>,
) -> Result<Installed, Error> {
    let (name, config) = (install.name, install.config);
    let hash = install.variant.git_tree_sha1;
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
                manifest: install.manifest.file.clone(),
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
        agent: Some(download::agent(&net)?),
        ..InstallRequest::new(install, net, target, taps)
    };
    let attempts = attempts(install.variant, allowed, config);
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
        manifest: install.manifest.file.clone(),
        overrides_file: suggested_overrides_file(config),
    })
}

/// Installs through `target` on `node` the tarball bytes of `reader`, received over MPI as
/// `incoming` says (see [`Install::receive`]).
pub(super) fn receive(
    install: &Install<'_>,
    target: InstallTarget,
    (node, incoming, reader): (&str, &Incoming, Box<dyn Read + Send>),
) -> Result<Installed, Error> {
    let (name, config) = (install.name, install.config);
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
    let request = InstallRequest::new(install, net, target, None);
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
        hash: request.hash,
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
    Ok(Installed {
        path,
        origin: Origin::Received {
            node: node.to_owned(),
            from_node: incoming.from_node.clone(),
            url: incoming.url.clone(),
            bytes,
            seconds,
        },
    })
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

/// Everything one install of one artifact needs, fixed before the first attempt.
pub(super) struct InstallRequest<'a> {
    /// The artifact's name, for messages.
    pub(super) name: &'a str,
    pub(super) hash: GitTreeSha1,
    /// The entry's `git-tree-sha256`, checked as well when given.
    pub(super) hash_sha256: Option<GitTreeSha256>,
    pub(super) manifest: &'a ManifestPlace,
    pub(super) config: &'a Config,
    /// What the network code takes of `config`.
    pub(super) net: NetConfig,
    /// `None` for an install of bytes received over MPI, which opens no URL.
    pub(super) agent: Option<download::Agent>,
    pub(super) target: InstallTarget,
    /// Where else the bytes of each attempt go.
    pub(super) taps: Option<&'a dyn Taps>,
    /// Bytes kept by an earlier process that the attempts of one URL so far carried on
    /// (`None` before the first attempt opened): an attempt that starts over sets it to 0,
    /// one that continues what an earlier attempt of this call received does not add to it.
    pub(super) carried: std::cell::Cell<Option<u64>>,
    /// The URLs whose index could not be read first (see `streamed.rs`): their later
    /// attempts read the whole file first without asking for its tail again.
    pub(super) index_first_failed: std::cell::RefCell<Vec<String>>,
}

/// One source to try. In Pkg's order: the package server's copy first (no sha256 is known for
/// it: the tree hash alone verifies it), then the manifest's URLs (sha256 checked); a URL that
/// may not be used now (a network URL while offline) is listed with why it is not tried.
pub(super) struct Attempt {
    pub(super) download: Fetch,
    /// Where from, for the log: the package server, over MPI, or `None` for a manifest URL.
    pub(super) from: Option<InstalledFrom>,
    pub(super) not_tried: Option<String>,
    /// The bytes come from another node over MPI, which hashes them itself and reports a
    /// wrong download to every rank: this install need not read past its own trouble.
    pub(super) checked_by_sender: bool,
}

impl<'a> InstallRequest<'a> {
    /// The request of `install` through `target` with `net`, opening no URL (an install of
    /// bytes received over MPI; a download sets [`InstallRequest::agent`]).
    fn new(
        install: &'a Install<'a>,
        net: NetConfig,
        target: InstallTarget,
        taps: Option<&'a dyn Taps>,
    ) -> InstallRequest<'a> {
        InstallRequest {
            name: install.name,
            hash: install.variant.git_tree_sha1,
            hash_sha256: install.variant.git_tree_sha256,
            manifest: &install.manifest,
            config: install.config,
            net,
            agent: None,
            target,
            taps,
            carried: std::cell::Cell::new(None),
            index_first_failed: std::cell::RefCell::new(Vec::new()),
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
impl InstallRequest<'_> {
    /// Whether the nodes receiving this download over MPI stopped it (see [`Taps::stopped`]).
    pub(super) fn stopped(&self) -> bool {
        self.taps.is_some_and(|t| t.stopped())
    }

    /// [`InstallRequest::install_from`], retried with backoff while it fails transiently
    /// (`CLIMA_ARTIFACTS_RETRIES` attempts in all); each retry is a notice with its cause and
    /// delay.
    pub(super) fn install_retrying(&self, attempt: &Attempt) -> Result<Installed, SourceFailure> {
        let mut n = 1;
        self.carried.set(None);
        loop {
            let start = Instant::now();
            match self.install_from(attempt) {
                Ok((path, bytes)) => {
                    let dl = &attempt.download;
                    let reused = self.carried.get().unwrap_or(0).min(bytes);
                    let sizes = (bytes, reused);
                    return Ok(downloaded(
                        self.name,
                        attempt.from,
                        dl,
                        path,
                        sizes,
                        start,
                        &self.net.reporting,
                    ));
                }
                Err(e) => {
                    let retry = self.net.retry;
                    let next = retry.next_attempt(n, e.is_transient());
                    let Some(wait) = next.filter(|_| !self.stopped()) else {
                        return Err(e.after_attempts(n));
                    };
                    self.net.reporting.emit(NetEvent::Retry {
                        error: e.to_string(),
                        cause: e.cause(),
                        delay: wait,
                        attempt: n + 1,
                        attempts: retry.attempts,
                    });
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
            self.net
                .reporting
                .emit(InstallEvent::KeptBytesFailedVerification {
                    artifact: self.name.to_owned(),
                    kept: kept.resumed_at(),
                    path: kept.path().to_path_buf(),
                    error: e.to_string(),
                });
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
                self.target.staging.remove_partials();
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
        // A seekable download's index first, when it can be had: its members are then
        // unpacked while the rest arrives (streamed.rs).
        let index = self.index_first(attempt);
        let body = self.open(attempt, kept, &end)?;
        let installed = match index {
            Some(index) => self.install_streamed(attempt, tmp, body, &index),
            None => self.install_body(attempt, tmp, body, kept.as_ref()),
        };
        // "downloaded" is said of a download that proved to be the artifact; a wrong one is
        // told once, by its error.
        if installed.is_ok() {
            end.release();
        }
        installed
    }

    /// A new temp dir of the staging for an install from `url`: private while it is filled;
    /// the verified artifact gets 0o755 before its rename.
    pub(super) fn new_temp_dir(&self, url: &str) -> Result<TempDir<'_>, SourceFailure> {
        self.target
            .staging
            .temp_dir()
            .map_err(|e| SourceFailure::Install {
                url: url.to_owned(),
                error: Box::new(e.into()),
            })
    }

    /// Streams `body` through the decompressor and the tar writer into `tmp`, checks both
    /// hashes and commits `tmp` into place. `kept`: the partial file a large download is
    /// kept in, which a seekable install reads again instead of keeping a copy.
    pub(super) fn install_body(
        &self,
        attempt: &Attempt,
        tmp: TempDir<'_>,
        mut body: Body,
        kept: Option<&Kept>,
    ) -> Result<(PathBuf, u64), SourceFailure> {
        // A seekable tarball is unpacked on every core (seekable.rs).
        if let Some(index_sha256) = attempt.download.index_sha256 {
            return self.install_seekable(attempt, tmp, body, (index_sha256, kept));
        }
        let url = &attempt.download.url;
        let limits = self.limits(tmp.path(), attempt);
        // The one place where the tree is written into the staging's temp dir (and hashed).
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
        check_sha256(&url, &attempt.download, actual, bytes)?;
        let extracted = extracted.map_err(|e| SourceFailure::Archive {
            url: url.clone(),
            reason: e.to_string(),
        })?;
        self.check_trees(&url, &extracted)?;
        self.commit(&url, tmp).map(|dest| (dest, bytes))
    }

    /// Renames the verified `tmp` into place and records its git tree SHA-256 (the staging's
    /// commit).
    pub(super) fn commit(&self, url: &str, tmp: TempDir<'_>) -> Result<PathBuf, SourceFailure> {
        self.target
            .staging
            .commit(tmp, self.hash_sha256.as_ref())
            .map_err(|error| SourceFailure::Install {
                url: url.to_owned(),
                error: Box::new(error.into()),
            })
    }

    /// The tree hashes of what was written against the manifest's (SHA-256 first, the stronger
    /// check, when the entry has one).
    pub(super) fn check_trees(
        &self,
        url: &str,
        extracted: &crate::extract::Extracted,
    ) -> Result<(), SourceFailure> {
        if let Some(expected) = self.hash_sha256
            && extracted.tree_hash_sha256 != Some(expected)
        {
            return Err(SourceFailure::TreeHashSha256Mismatch {
                url: url.to_owned(),
                expected,
                // Computed whenever the entry has one (see `limits`).
                actual: extracted.tree_hash_sha256.unwrap_or(GitTreeSha256([0; 32])),
                sha1_matches: extracted.tree_hash == self.hash,
            });
        }
        if extracted.tree_hash != self.hash {
            return Err(SourceFailure::TreeHashMismatch {
                url: url.to_owned(),
                expected: self.hash,
                actual: extracted.tree_hash,
            });
        }
        Ok(())
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
        self.net.reporting.emit(InstallEvent::Downloading {
            artifact: name.to_owned(),
            url: shown.clone(),
        });
        let mut source = self.open_source(dl)?;
        *kept = source.partial.take();
        if kept.is_some()
            && let Some(note) = &self.target.partials_note
        {
            self.net.reporting.emit(note.clone());
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
        // And the room for it, before the download starts: a large download's partial file
        // had its room checked before it was made; one stream writes no partial file, but the
        // unpacked files need at least that much.
        if dl.size.is_none()
            && kept.is_none()
            && let Some(length) = source.length
        {
            let from = format!("the Content-Length of `{shown}`");
            check_room(name, (length, &from), self.target.staging.depot(), config).map_err(
                |error| SourceFailure::Install {
                    url: url.to_owned(),
                    error: Box::new(error),
                },
            )?;
        }
        let size = source.length.or(dl.size);
        let mut transfer: Box<dyn Transfer> = Box::new(HeldEnd {
            inner: Some(self.net.reporting.start(
                config.progress,
                &DownloadStart::new(name, url, size, resumed_at),
            )),
            end: end.clone(),
        });
        if let Some(note) = self.target.staging.note() {
            transfer = Box::new(NotingTransfer {
                inner: transfer,
                note,
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
        let staging = &self.target.staging;
        let Some(partial) = staging.partial(url) else {
            return Ok(download::open(
                agent,
                url,
                &self.manifest.folder,
                &self.net,
            )?);
        };
        // The room a partial file needs is checked with the install's own rule and error.
        let no_room = std::cell::RefCell::new(None);
        let (dir_of_install, dir_of_partial) = (staging.depot(), staging.partials_depot());
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
            dir: &partial.dir,
            name: &partial.name,
            key: &partial.key,
            artifact: self.name,
            max_bytes: dl.size.or(config.max_download_size),
            room: &room,
            tell: config.progress,
            // Sent over MPI: the connections stay close to what was sent, so that a
            // receiver's failure stops the download at the stream's next checkpoint.
            lead: self.taps.map(|_| TAPPED_LEAD),
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
                    staging.remove_partial(&partial);
                }
                Err(e.into())
            }
        }
    }

    /// The extraction limits of an install into `tmp` from `attempt`: without a sha256 to
    /// check (a package server), only what the tree hash covers is written.
    pub(super) fn limits(&self, tmp: &Path, attempt: &Attempt) -> ExtractLimits {
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
    pub(super) fn depot_trouble(
        &self,
        attempt: &Attempt,
        body: Body,
        tmp: &Path,
        e: &ExtractError,
    ) -> SourceFailure {
        let dl = &attempt.download;
        if let Some(failure) = self.source_failure(&body, dl) {
            return failure;
        }
        if dl.sha256.is_some()
            && !attempt.checked_by_sender
            && let Some(wrong) = self.wrong_download(body, dl, DEPOT_TROUBLE_READ)
        {
            return wrong;
        }
        self.depot_refused(&dl.url, tmp, e)
    }

    /// Whether `body`, whose unpacking stopped, is a wrong download: read on by at most `cap`
    /// more bytes, the failure when it broke a rule meanwhile (longer than its `size`) or,
    /// ending within them, when its SHA-256 is not the entry's; `None` when it is the entry's
    /// file or did not end within `cap` (the rest of a large download is not fetched only to
    /// be thrown away).
    pub(super) fn wrong_download(
        &self,
        mut body: Body,
        dl: &Fetch,
        cap: u64,
    ) -> Option<SourceFailure> {
        let before = body.consumed();
        let read = io::copy(&mut (&mut body).take(cap + 1), &mut io::sink());
        let at_end = read.is_ok() && body.consumed() - before <= cap;
        if body.failure().is_some_and(|e| RuleBroken::of(e).is_some()) {
            return self.source_failure(&body, dl);
        }
        if !at_end || body.failure().is_some() {
            return None;
        }
        let (actual, bytes) = body.finish();
        check_sha256(&dl.url, dl, actual, bytes).err()
    }

    /// The depot's refusal `e` (a full disk, a write or a read of its own files failing) of
    /// the unpacking of `url` into `tmp`; a full disk names the setting that put the depot
    /// there.
    pub(super) fn depot_refused(&self, url: &str, tmp: &Path, e: &ExtractError) -> SourceFailure {
        let text = match e {
            ExtractError::LowDiskSpace { .. } | ExtractError::LowInodes { .. } => {
                format!(
                    "{e} ({})",
                    depot_setting(self.config, self.target.staging.depot())
                )
            }
            _ => e.to_string(),
        };
        SourceFailure::Install {
            url: url.to_owned(),
            error: Box::new(Error::io("unpack into", tmp, io::Error::other(text))),
        }
    }

    /// Why the source of `body` stopped early, as the install reports it.
    pub(super) fn source_failure(&self, body: &Body, dl: &Fetch) -> Option<SourceFailure> {
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
    pub(super) fn broken(&self, url: &str, reason: String, e: &io::Error) -> SourceFailure {
        NetError::Transport {
            url: url.to_owned(),
            reason,
            transient: clima_artifact_net::retry::is_transient_io(e),
        }
        .into()
    }
}

/// The SHA-256 of the `bytes` downloaded from `url` against the entry's, when it gives one.
pub(super) fn check_sha256(
    url: &str,
    dl: &Fetch,
    actual: Sha256,
    bytes: u64,
) -> Result<(), SourceFailure> {
    match dl.sha256 {
        Some(expected) if actual != expected => Err(SourceFailure::Sha256Mismatch {
            url: url.to_owned(),
            expected,
            actual,
            bytes,
        }),
        _ => Ok(()),
    }
}
