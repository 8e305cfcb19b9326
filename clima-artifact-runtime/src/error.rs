//! The runtime's one error enum. Every message says what to do next.
//!
//! Messages are complete on their own: where an OS error or a server reply caused the failure,
//! its text is part of the message (not only a `source()`), because errors also travel between
//! MPI ranks as bytes ([`Error::to_wire`] / [`Error::from_wire`]) and must read the same on
//! every rank.

use std::fmt::{self, Write as _};
use std::io;
use std::path::PathBuf;

pub use clima_artifact_fs::IoCause;
use clima_artifact_manifest::{ManifestError, SelectError, SubPathError};
use clima_artifact_net::NetError;
use clima_comms::{CollectiveError, WireError};

use crate::{GitTreeSha1, GitTreeSha256, Sha256};

/// Everything that can go wrong when resolving, downloading or installing an artifact.
///
/// `Clone` so that an MPI root can broadcast its error and every rank returns the same one
/// (see [`Error::to_wire`] / [`Error::from_wire`]).
///
/// `Debug` prints exactly the readable message of `Display`, so that
/// `fn main() -> Result<(), Box<dyn std::error::Error>>` shows users what to do, not a struct.
/// The message already holds the text of its cause (an OS error, a server's reply), because
/// errors travel between MPI ranks as bytes and must read the same on every rank; the cause
/// itself is also `source()` (the OS error of the `IoCause` fields, the manifest crate's
/// error of the wrapping variants), for programs that inspect it.
///
/// The serde form (every variant, the manifest crate's errors included) is the wire form of
/// [`Error::to_wire`] / [`Error::from_wire`].
#[derive(Clone, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub enum Error {
    /// The manifest or an overrides file is malformed, or a name/sub-path is invalid.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// The name is not in the manifest, or no platform variant fits.
    #[error(transparent)]
    Select(#[from] SelectError),
    /// A bad `name/sub/path`.
    #[error(transparent)]
    SubPath(#[from] SubPathError),
    /// An environment variable has a value that cannot be used.
    #[error(
        "environment variable {variable}=`{}` is invalid: {}",
        clima_artifact_fs::printable(value),
        clima_artifact_fs::printable(reason)
    )]
    Config {
        /// The variable, e.g. `CLIMA_ARTIFACTS_STALL_TIMEOUT`.
        variable: String,
        /// Its value.
        value: String,
        /// What is wrong and what is expected.
        reason: String,
    },
    /// A file-system operation failed.
    #[error("cannot {action} `{}`: {cause}", path.display())]
    Io {
        /// What was attempted, e.g. `create directory`.
        action: String,
        /// The path concerned.
        path: PathBuf,
        /// The cause.
        #[source]
        cause: IoCause,
    },
    /// The artifact is not installed and offline mode forbids downloading it.
    #[error(
        "artifact `{name}` ({hash}) is not installed in any depot ({}) and {OFFLINE} is set, so it cannot be downloaded from {}; run `clima-artifacts fetch` on a machine with network access (into a depot listed here), or unset {OFFLINE}",
        clima_artifact_depot::render_paths(depots),
        render_urls(urls),
        OFFLINE = clima_artifact_vars::OFFLINE
    )]
    Offline {
        /// The artifact.
        name: String,
        /// Its git tree SHA-1.
        hash: GitTreeSha1,
        /// Depots that were searched.
        depots: Vec<PathBuf>,
        /// The network URLs it would have been downloaded from.
        urls: Vec<String>,
    },
    /// The artifact has no `[[name.download]]` section, is not installed and not overridden.
    #[error(
        "artifact `{name}` ({hash}) has no download section in `{}` and is not installed or overridden; {}",
        manifest.display(),
        render_override_hint(name, hash, overrides_file)
    )]
    NoDownloads {
        /// The artifact.
        name: String,
        /// Its git tree SHA-1.
        hash: GitTreeSha1,
        /// The manifest that defines it.
        manifest: PathBuf,
        /// The `Overrides.toml` to add the line to (in the first depot).
        overrides_file: PathBuf,
    },
    /// An installed copy's git tree SHA-256 is not the one its manifest entry gives, although
    /// the copy is at the entry's `git-tree-sha1` name: it was installed by SHA-1 alone.
    #[error(
        "the installed copy of artifact `{name}` at `{}` has git-tree-sha256 {actual}, not the \
         manifest's {expected} ({}): either the manifest's git-tree-sha256 is wrong, or this \
         copy was installed by its git-tree-sha1 alone (by Julia or an older clima-artifacts) \
         and was made to collide in SHA-1; it is not used: if the entry is right, remove that \
         folder and fetch again",
        clima_artifact_fs::printable(&path.display().to_string()),
        match sha1_matches {
            Some(true) => "its git-tree-sha1 matches the manifest's",
            Some(false) => "its content does not match its git-tree-sha1 either: it was changed",
            None => "as recorded when it was first hashed",
        }
    )]
    InstalledTreeSha256Mismatch {
        /// The artifact.
        name: String,
        /// The copy's folder (`<depot>/artifacts/<git-tree-sha1>`).
        path: PathBuf,
        /// The entry's `git-tree-sha256`.
        expected: GitTreeSha256,
        /// The copy's.
        actual: GitTreeSha256,
        /// Whether the copy's git tree SHA-1 is the entry's: known when it was hashed by this
        /// call (`false`: the copy was changed after it was installed), `None` when its
        /// recorded SHA-256 was used.
        sha1_matches: Option<bool>,
    },
    /// A model's first use would download more than `CLIMA_ARTIFACTS_MAX_DOWNLOAD_SIZE`.
    #[error(
        "artifact `{name}` is a {} download (by {from}), more than the {} a model may \
         download on first use ({MAX_DOWNLOAD_SIZE}); fetch it ahead with \
         `clima-artifacts fetch {name} --manifest {}` (explicit fetches are not limited), raise \
         the limit, or override it with a copy that already exists (`clima-artifacts override \
         set {name} /path/to/copy`); a seekable artifact (its download has `index-sha256`) stays \
         usable file by file: `clima_artifact!(\"{name}/path/in/it\")` and `clima-artifacts \
         fetch {name} --only PATH` fetch only those files",
        clima_artifact_fs::human_bytes(*size),
        clima_artifact_fs::human_bytes(*limit),
        manifest.display(),
        MAX_DOWNLOAD_SIZE = clima_artifact_vars::MAX_DOWNLOAD_SIZE
    )]
    DownloadTooLarge {
        /// The artifact.
        name: String,
        /// Its size in bytes, as declared (`size`) or announced (`Content-Length`).
        size: u64,
        /// The limit.
        limit: u64,
        /// Where the size comes from: the manifest's `size` or the server's `Content-Length`.
        from: String,
        /// The manifest to pass to `fetch`.
        manifest: PathBuf,
    },
    /// The depot's filesystem has no room for a download of the size `from` says (the
    /// manifest's `size`, the server's `Content-Length`, or the length the sending node
    /// announced).
    #[error(
        "artifact `{name}` needs {} ({from}) but `{}` has only {} free above the \
         reserve of {} ({MIN_FREE_SPACE}); free space there or put the depot on a \
         larger filesystem ({setting})",
        clima_artifact_fs::human_bytes(*size),
        depot.display(),
        clima_artifact_fs::human_bytes(*free),
        clima_artifact_fs::human_bytes(*reserve),
        MIN_FREE_SPACE = clima_artifact_vars::MIN_FREE_SPACE
    )]
    NoRoom {
        /// The artifact.
        name: String,
        /// The bytes it needs.
        size: u64,
        /// What says so: `its size in the manifest`, the server's `Content-Length` (with the
        /// partial download it is kept in), or the length the sending node announced (boxed:
        /// errors stay small).
        from: Box<str>,
        /// The depot it would go to.
        depot: PathBuf,
        /// Bytes free there (above nothing; the reserve is separate).
        free: u64,
        /// The reserve kept free.
        reserve: u64,
        /// The setting that chose that depot: `CLIMA_ARTIFACTS_NODE_LOCAL_DEPOT` or
        /// `CLIMA_ARTIFACTS_DEPOT_PATH`.
        setting: String,
    },
    /// Every download source failed; lists each URL and why, then what to do next.
    #[error(
        "could not install artifact `{name}` ({hash}): {}:{}\ncheck the {} in `{}` for artifact `{name}`, or make the data available locally: {}",
        if failures.len() == 1 { "its download source failed" } else { "every download source failed" },
        render_failures(failures),
        if failures.len() == 1 { "URL" } else { "URLs" },
        manifest.display(),
        render_override_hint(name, hash, overrides_file)
    )]
    DownloadFailed {
        /// The artifact.
        name: String,
        /// Its git tree SHA-1.
        hash: GitTreeSha1,
        /// One failure per source, in the order tried (the package server's first).
        failures: Vec<SourceFailure>,
        /// The manifest that lists the URLs.
        manifest: PathBuf,
        /// The `Overrides.toml` where a line pointing at a local copy would go (first depot).
        overrides_file: PathBuf,
    },
    /// A `name/sub/path` points inside an artifact where nothing exists.
    #[error(
        "artifact `{name}` has no `{subpath}`: `{}` does not exist; check the sub-path (the artifact's top level holds: {top_level})",
        artifact_path.join(subpath).display()
    )]
    SubPathMissing {
        /// The artifact.
        name: String,
        /// The sub-path asked for.
        subpath: String,
        /// The artifact's directory.
        artifact_path: PathBuf,
        /// What the artifact's top level holds (at most 12 names), for the message.
        top_level: String,
    },
    /// Ranks of a collective call asked for different artifacts.
    #[error(
        "collective artifact access out of step on {context}: rank 0 asked for {root_request}, but {}. Calls with a context are collective: every rank must ask for the same artifact in the same order (or use the serial context for rank-specific artifacts)",
        render_mismatches(mismatches)
    )]
    RanksOutOfStep {
        /// The context's description, e.g. `MPI_COMM_WORLD (16 ranks)`.
        context: String,
        /// What rank 0 asked for (name and hash).
        root_request: String,
        /// Each other rank that asked for something else, and what.
        mismatches: Vec<(usize, String)>,
    },
    /// A collective install failed on one node (node-local mode); every rank reports it.
    #[error("on node `{node}` (its installing rank is rank {rank} of {context}): {message}")]
    FailedOnNode {
        /// The node (`CLIMA_ARTIFACTS_NODE_ID`, else its host name).
        node: String,
        /// The rank of the context that installs on that node.
        rank: usize,
        /// The context's description.
        context: String,
        /// That node's error.
        message: String,
    },
    /// A node could not install an artifact from the bytes it received over MPI (node-local
    /// mode): its depot refused them, or they failed verification there.
    #[error(
        "cannot install artifact `{name}` ({hash}) from the bytes received over MPI from node `{from_node}`: {failure}"
    )]
    ReceiveFailed {
        /// The artifact.
        name: String,
        /// Its git tree SHA-1.
        hash: GitTreeSha1,
        /// The node that sent the bytes.
        from_node: String,
        /// What went wrong.
        failure: Box<SourceFailure>,
    },
    /// `prefetch_declared` failed for several artifacts.
    #[error("prefetch failed for {} artifacts:{}", failures.len(), render_named(failures))]
    PrefetchFailed {
        /// Each artifact that failed, with its error.
        failures: Vec<(String, Error)>,
    },
    /// A bug in this crate or a mismatch between it and its proc macro (never expected).
    #[error("internal error: {message}")]
    Internal {
        /// What went wrong.
        message: String,
    },
    /// A depot refused the operation: no writable depot, a planted link, an override that
    /// cannot be followed, a lock held too long, a node-local depot that is not private (the
    /// crate `clima-artifact-depot`).
    #[error(transparent)]
    Depot(clima_artifact_depot::Error),
    /// The collective step itself failed (an undecodable answer from another rank, a panic on
    /// the root).
    #[error(transparent)]
    Collective(#[from] CollectiveError),
}

/// Why one download source of an artifact failed: an entry of [`Error::DownloadFailed`], which
/// lists every source tried, in order, and what to do next. Each failure names its URL.
#[derive(Clone, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub enum SourceFailure {
    /// The source could not be reached or read: an HTTP status, a broken, refused or
    /// stalled connection, TLS, a proxy, an unreadable local file, a URL that cannot be
    /// fetched (the network crate's error).
    #[error("{error}{}", render_attempts(*attempts))]
    Net {
        /// What went wrong.
        error: NetError,
        /// How many times it was tried.
        attempts: u32,
    },
    /// The downloaded bytes do not have the SHA-256 the manifest promises.
    #[error(
        "`{}`: sha256 mismatch: the manifest expects {expected}, the download has {actual} ({bytes} bytes); the file on the server changed or is corrupt",
        clima_artifact_net::trust::redact_url(url)
    )]
    Sha256Mismatch {
        /// The URL.
        url: String,
        /// From the manifest.
        expected: Sha256,
        /// Of the bytes received.
        actual: Sha256,
        /// Bytes received.
        bytes: u64,
    },
    /// The unpacked content does not have the git tree SHA-1 the manifest promises.
    #[error(
        "`{}`: git-tree-sha1 mismatch: the manifest expects {expected}, the unpacked archive has {actual}; the manifest entry is wrong or the archive changed",
        clima_artifact_net::trust::redact_url(url)
    )]
    TreeHashMismatch {
        /// The URL.
        url: String,
        /// From the manifest.
        expected: GitTreeSha1,
        /// Of the unpacked content.
        actual: GitTreeSha1,
    },
    /// The unpacked content does not have the git tree SHA-256 the manifest promises
    /// (`git-tree-sha256`, checked when the entry gives it: the stronger of the two checks).
    #[error(
        "`{}`: git-tree-sha256 mismatch: the manifest expects {expected}, the unpacked archive has {actual}; {}",
        clima_artifact_net::trust::redact_url(url),
        if *sha1_matches {
            "its git-tree-sha1 matches the manifest's, so either the manifest's git-tree-sha256 is \
             wrong (`clima-artifacts hash --sha256 DIR` of the intended content prints the right \
             one) or the archive was made to collide in SHA-1: do not use it"
        } else {
            "its git-tree-sha1 does not match either: the manifest entry is wrong or the archive \
             changed"
        }
    )]
    TreeHashSha256Mismatch {
        /// The URL.
        url: String,
        /// `git-tree-sha256` from the manifest.
        expected: GitTreeSha256,
        /// Of the unpacked content.
        actual: GitTreeSha256,
        /// Whether the content's git tree SHA-1 is the manifest's `git-tree-sha1`.
        sha1_matches: bool,
    },
    /// The archive is unsafe, corrupt or too large.
    #[error("`{}`: {reason}", clima_artifact_net::trust::redact_url(url))]
    Archive {
        /// The URL.
        url: String,
        /// What the extractor refused, and why.
        reason: String,
    },
    /// A download source was not tried (offline mode and a network URL).
    #[error(
        "`{}`: not tried: {reason}",
        clima_artifact_net::trust::redact_url(url)
    )]
    NotTried {
        /// The URL.
        url: String,
        /// Why it was skipped.
        reason: String,
    },
    /// The server announced a body larger than the implicit download limit (the message
    /// names the URL and says how to fetch it explicitly).
    #[error("{error}")]
    TooLarge {
        /// The URL.
        url: String,
        /// The limit's message (what to do instead).
        error: Box<Error>,
    },
    /// Installing from this source failed in the depot (a temp dir that cannot be created, a
    /// verified artifact that cannot be moved into place).
    #[error("`{}`: {error}", clima_artifact_net::trust::redact_url(url))]
    Install {
        /// The URL.
        url: String,
        /// What the depot refused.
        error: Box<Error>,
    },
}

impl fmt::Debug for SourceFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl SourceFailure {
    /// Whether retrying the same URL may help: refused connections, resets, timeouts,
    /// stalls, truncated bodies, HTTP 5xx, 429 and 408; not client errors, TLS certificate
    /// errors, invalid URLs, unknown hosts, hash mismatches or local files.
    pub fn is_transient(&self) -> bool {
        match self {
            SourceFailure::Net { error, .. } => error.is_transient(),
            _ => false,
        }
    }

    /// The URL (or path, as written in the manifest) this failure is about.
    pub fn url(&self) -> &str {
        match self {
            SourceFailure::Net { error, .. } => error.url(),
            SourceFailure::Sha256Mismatch { url, .. }
            | SourceFailure::TreeHashMismatch { url, .. }
            | SourceFailure::TreeHashSha256Mismatch { url, .. }
            | SourceFailure::Archive { url, .. }
            | SourceFailure::NotTried { url, .. }
            | SourceFailure::TooLarge { url, .. }
            | SourceFailure::Install { url, .. } => url,
        }
    }

    /// The failure without its URL: what downloads that failed alike share (`HTTP 404`, `the
    /// proxy ... refused the connection ...`), for a batch's log to group them by. One line.
    pub fn cause(&self) -> String {
        let text = match self {
            SourceFailure::Net {
                error: NetError::HttpStatus { status, .. },
                attempts,
            } => format!("HTTP {status}{}", render_attempts(*attempts)),
            SourceFailure::Net {
                error: NetError::Transport { reason, .. } | NetError::UnsupportedUrl { reason, .. },
                attempts,
            } => format!("{reason}{}", render_attempts(*attempts)),
            SourceFailure::TooLarge { error, .. } | SourceFailure::Install { error, .. } => {
                error.to_string()
            }
            other => {
                let text = other.to_string();
                let url = format!("`{}`: ", clima_artifact_net::trust::redact_url(other.url()));
                match text.strip_prefix(&url) {
                    Some(rest) => rest.to_owned(),
                    None => text,
                }
            }
        };
        one_line(&text)
    }

    /// The same failure after `n` attempts in all (for the kinds that are retried).
    pub(crate) fn after_attempts(mut self, n: u32) -> SourceFailure {
        if let SourceFailure::Net { attempts, .. } = &mut self {
            *attempts = n;
        }
        self
    }
}

fn render_mismatches(mismatches: &[(usize, String)]) -> String {
    let shown = mismatches.len().min(8);
    let mut s = mismatches[..shown]
        .iter()
        .map(|(rank, what)| format!("rank {rank} asked for {what}"))
        .collect::<Vec<_>>()
        .join(", ");
    if mismatches.len() > shown {
        let _ = write!(s, " and {} more", mismatches.len() - shown);
    }
    s
}

fn render_named(failures: &[(String, Error)]) -> String {
    let mut s = String::new();
    for (name, e) in failures {
        let _ = write!(s, "\n  - `{name}`: {e}");
    }
    s
}

/// `Display`, then each cause (as anyhow prints errors): what `fn main() -> Result<..>` shows.
impl fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The message holds every cause's text already; printing the chain would repeat it.
        fmt::Display::fmt(self, f)
    }
}

/// The next step shared by errors that end with "use a local copy instead": the exact
/// `Overrides.toml` line and the file to add it to.
fn render_override_hint(
    name: &str,
    hash: &GitTreeSha1,
    overrides_file: &std::path::Path,
) -> String {
    format!(
        "point it at a local copy by adding this line to `{}`:\n    {hash} = \"/path/to/{name}\"",
        overrides_file.display()
    )
}

/// `text` on one line: each line break and the indentation after it made one space.
fn one_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The URLs, each quoted, credentials redacted.
fn render_urls(urls: &[String]) -> String {
    urls.iter()
        .map(|u| format!("`{}`", clima_artifact_net::trust::redact_url(u)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn render_attempts(attempts: u32) -> String {
    if attempts > 1 {
        format!(" (after {attempts} attempts)")
    } else {
        String::new()
    }
}

fn render_failures(failures: &[SourceFailure]) -> String {
    let mut s = String::new();
    for f in failures {
        let _ = write!(s, "\n  - {f}");
    }
    s
}

/// A source's failure as the runtime reports it, tried once so far.
impl From<NetError> for SourceFailure {
    fn from(error: NetError) -> SourceFailure {
        SourceFailure::Net { error, attempts: 1 }
    }
}

/// A failure of the network crate outside any one source (a proxy URL or a CA bundle that
/// cannot be used): a configuration error.
impl From<NetError> for Error {
    fn from(e: NetError) -> Error {
        match e {
            NetError::Config {
                variable,
                value,
                reason,
            } => Error::Config {
                variable,
                value,
                reason,
            },
            other => Error::Config {
                variable: String::new(),
                value: String::new(),
                reason: other.to_string(),
            },
        }
    }
}

/// A depot's error: its manifest errors (a malformed `Overrides.toml`) stay
/// [`Error::Manifest`] and its file-system errors [`Error::Io`]; the rest is [`Error::Depot`].
impl From<clima_artifact_depot::Error> for Error {
    fn from(e: clima_artifact_depot::Error) -> Error {
        match e {
            clima_artifact_depot::Error::Manifest(m) => Error::Manifest(m),
            clima_artifact_depot::Error::Io {
                action,
                path,
                cause,
            } => Error::Io {
                action,
                path,
                cause,
            },
            other => Error::Depot(other),
        }
    }
}

impl Error {
    /// An [`Error::Io`] for `action` on `path`.
    pub fn io(action: impl Into<String>, path: impl Into<PathBuf>, source: io::Error) -> Error {
        Error::Io {
            action: action.into(),
            path: path.into(),
            cause: IoCause::new(source),
        }
    }

    /// The kind of the underlying I/O error, if this is an I/O failure.
    pub fn io_kind(&self) -> Option<io::ErrorKind> {
        match self {
            Error::Io { cause, .. }
            | Error::Depot(clima_artifact_depot::Error::NodeLocalDepot { cause, .. }) => {
                Some(cause.kind())
            }
            _ => None,
        }
    }

    /// What went wrong in one line, for a log line per artifact: for a failed download each
    /// source's failure (its URL and why), `; `-separated, without the advice that follows
    /// them in the message; otherwise the message with its line breaks made spaces.
    pub fn one_line(&self) -> String {
        match self {
            Error::DownloadFailed { failures, .. } => failures
                .iter()
                .map(|f| one_line(&f.to_string()))
                .collect::<Vec<_>>()
                .join("; "),
            other => one_line(&other.to_string()),
        }
    }

    /// The cause of the error without what is particular to one artifact (its name, hash and
    /// URLs), when it has one: for a failed download, each source's [`SourceFailure::cause`],
    /// `; `-separated. Artifacts whose downloads failed alike (every one refused by the same
    /// proxy, say) have the same cause, which a batch's log says once for them all; other
    /// errors give [`Error::one_line`], which names the artifact.
    pub fn cause(&self) -> String {
        match self {
            Error::DownloadFailed { failures, .. } => {
                let mut causes: Vec<String> = Vec::new();
                for c in failures.iter().map(SourceFailure::cause) {
                    if !causes.contains(&c) {
                        causes.push(c);
                    }
                }
                causes.join("; ")
            }
            other => other.one_line(),
        }
    }

    /// Serialises the error (variant, fields and therefore its `Display` text) for broadcasting
    /// between processes; [`Error::from_wire`] rebuilds it.
    pub fn to_wire(&self) -> Vec<u8> {
        clima_comms::json_to_wire(self)
    }

    /// Rebuilds an error serialised by [`Error::to_wire`]. Bytes that do not decode become an
    /// [`Error::Collective`] that says so (never a panic).
    pub fn from_wire(bytes: &[u8]) -> Error {
        clima_comms::json_from_wire(bytes)
    }
}

impl WireError for Error {
    fn to_wire(&self) -> Vec<u8> {
        Error::to_wire(self)
    }
    fn from_wire(bytes: &[u8]) -> Error {
        Error::from_wire(bytes)
    }
}

#[cfg(test)]
#[allow(
    clippy::too_many_lines,
    reason = "a test reads as one scenario; the 100-line rule (issue 36) is for non-test code"
)]
mod tests {
    use super::*;
    use clima_artifact_depot::Error as DepotError;
    use clima_artifact_manifest::ManifestErrorKind;

    fn h(c: char) -> GitTreeSha1 {
        GitTreeSha1::from_hex(&c.to_string().repeat(40)).unwrap()
    }

    /// Two artifacts refused by one proxy share a cause (without names, hashes, URLs), and
    /// each says what failed in one line; a 404 and a refused proxy do not share one.
    #[test]
    fn downloads_that_failed_alike_share_a_cause_in_one_line() {
        let refused = |name: &str, c: char, status: Option<u16>| Error::DownloadFailed {
            name: name.into(),
            hash: h(c),
            manifest: "/m/Artifacts.toml".into(),
            overrides_file: "/d/artifacts/Overrides.toml".into(),
            failures: vec![SourceFailure::Net {
                error: match status {
                    Some(status) => NetError::HttpStatus {
                        url: format!("https://u:pw@x.org/{name}.tar.gz"),
                        status,
                    },
                    None => NetError::Transport {
                        url: format!("https://x.org/{name}.tar.gz"),
                        reason: "the proxy `http://***@10.0.0.1:3128` (from HTTPS_PROXY) \
                                 refused the connection"
                            .into(),
                        transient: true,
                    },
                },
                attempts: 3,
            }],
        };
        let (a, b) = (refused("a", 'a', None), refused("b", 'b', None));
        assert_eq!(a.cause(), b.cause());
        assert_eq!(
            a.cause(),
            "the proxy `http://***@10.0.0.1:3128` (from HTTPS_PROXY) refused the connection \
             (after 3 attempts)"
        );
        assert_eq!(
            a.one_line(),
            format!("`https://x.org/a.tar.gz`: {}", a.cause())
        );
        assert!(a.to_string().contains('\n') && !a.one_line().contains('\n'));
        let gone = refused("c", 'c', Some(404));
        assert_eq!(gone.cause(), "HTTP 404 (after 3 attempts)");
        assert_eq!(
            gone.one_line(),
            "HTTP 404 from `https://***@x.org/c.tar.gz` (after 3 attempts)"
        );
        let other = Error::Internal {
            message: "two\nlines".into(),
        };
        assert_eq!(other.cause(), "internal error: two lines");
    }

    #[test]
    fn wire_round_trip_preserves_variant_and_text() {
        let samples = vec![
            Error::Manifest(ManifestError {
                path: "/m/Artifacts.toml".into(),
                line: Some(3),
                column: Some(7),
                artifact: Some("era5".into()),
                kind: ManifestErrorKind::Invalid("bad".into()),
            }),
            Error::Select(SelectError::NoMatch {
                name: "x".into(),
                host: "os=linux".into(),
                offered: vec!["os=macos".into()],
            }),
            Error::SubPath(SubPathError::ParentDir("a/../b".into())),
            Error::io(
                "create directory",
                "/nope",
                io::Error::from_raw_os_error(13),
            ),
            Error::io("read", "/x", io::Error::other("custom failure")),
            Error::DownloadFailed {
                name: "era5".into(),
                hash: h('a'),
                manifest: "/m/Artifacts.toml".into(),
                overrides_file: "/d/artifacts/Overrides.toml".into(),
                failures: vec![
                    SourceFailure::Net {
                        error: NetError::HttpStatus {
                            url: "http://a/x".into(),
                            status: 404,
                        },
                        attempts: 1,
                    },
                    SourceFailure::Sha256Mismatch {
                        url: "http://b/x".into(),
                        expected: Sha256([1; 32]),
                        actual: Sha256([2; 32]),
                        bytes: 10,
                    },
                ],
            },
            // A failure wrapping a depot's error travels inside the list too.
            Error::DownloadFailed {
                name: "era5".into(),
                hash: h('c'),
                manifest: "/m/Artifacts.toml".into(),
                overrides_file: "/d/artifacts/Overrides.toml".into(),
                failures: vec![SourceFailure::Install {
                    url: "http://c/x".into(),
                    error: Box::new(Error::io(
                        "create temporary directory",
                        "/d/artifacts/.t",
                        io::Error::from_raw_os_error(28),
                    )),
                }],
            },
            Error::Depot(DepotError::OverrideCycle {
                chain: vec![
                    (h('a'), "/d/Overrides.toml".into(), 1),
                    (h('b'), "/e".into(), 2),
                ],
            }),
            Error::Depot(DepotError::LockTimeout {
                path: "/d/x.lock".into(),
                seconds: 3,
                holder: "pid 7".into(),
            }),
            Error::RanksOutOfStep {
                context: "MPI_COMM_WORLD (4 ranks)".into(),
                root_request: "`era5` (aaaa)".into(),
                mismatches: vec![(3, "`era6` (bbbb)".into())],
            },
            Error::PrefetchFailed {
                failures: vec![
                    (
                        "a".into(),
                        Error::SubPath(SubPathError::EmptyName("/x".into())),
                    ),
                    (
                        "b".into(),
                        Error::Offline {
                            name: "b".into(),
                            hash: h('b'),
                            depots: vec!["/d".into()],
                            urls: vec!["http://x".into()],
                        },
                    ),
                ],
            },
            Error::Collective(CollectiveError::RootPanicked {
                what: "installing".into(),
                message: "boom".into(),
            }),
        ];
        for e in samples {
            let back = Error::from_wire(&e.to_wire());
            assert_eq!(back.to_string(), e.to_string());
            assert_eq!(
                std::mem::discriminant(&back),
                std::mem::discriminant(&e),
                "{e}"
            );
            assert_eq!(back.io_kind(), e.io_kind());
        }
    }

    #[test]
    fn garbage_on_the_wire_is_an_error_not_a_panic() {
        let e = Error::from_wire(b"\xffnot json");
        assert!(e.to_string().contains("cannot be decoded"), "{e}");
        assert!(matches!(e, Error::Collective(_)), "{e:?}");
    }

    #[test]
    fn debug_is_the_readable_message() {
        let e = Error::io("read", "/x/y", io::Error::from_raw_os_error(13));
        let debug = format!("{e:?}");
        assert!(
            debug.starts_with("cannot read `/x/y`: Permission denied"),
            "{debug}"
        );
        assert!(!debug.contains("Io {"), "{debug}");
    }

    #[test]
    fn all_urls_failed_lists_each() {
        let e = Error::DownloadFailed {
            name: "n".into(),
            hash: h('c'),
            manifest: "/m/Artifacts.toml".into(),
            overrides_file: "/d/artifacts/Overrides.toml".into(),
            failures: vec![
                SourceFailure::Net {
                    error: NetError::HttpStatus {
                        url: "http://one".into(),
                        status: 503,
                    },
                    attempts: 3,
                },
                SourceFailure::Net {
                    error: NetError::Transport {
                        url: "http://two".into(),
                        reason: "connection reset".into(),
                        transient: true,
                    },
                    attempts: 1,
                },
            ],
        };
        let s = e.to_string();
        assert!(
            s.contains("HTTP 503 from `http://one` (after 3 attempts)"),
            "{s}"
        );
        assert!(s.contains("`http://two`: connection reset"), "{s}");
        assert!(
            s.ends_with(&format!(
                "\ncheck the URLs in `/m/Artifacts.toml` for artifact `n`, or make the data \
                 available locally: point it at a local copy by adding this line to \
                 `/d/artifacts/Overrides.toml`:\n    {} = \"/path/to/n\"",
                h('c')
            )),
            "{s}"
        );
    }
}
