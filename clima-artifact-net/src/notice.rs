//! The network layer's notices, each with the line the user reads ([`NetEvent`]: redirects,
//! TLS not verified, retries, resumed and ranged downloads, their partial files), and the
//! reasons they give, as values to match on. They implement the progress crate's [`Event`]
//! and are sent to the process's reporter with
//! [`emit`](clima_artifact_progress::Reporting::emit); the progress crate knows none of them.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use clima_artifact_fs::{human_bytes, printable};
use clima_artifact_progress::notice::{Event, Level, SystemError};
use clima_artifact_vars::{NO_VERIFY_HOSTS, RETRIES};

#[cfg(test)]
mod tests;

/// The notices of the network layer: redirects, TLS, retries, resumed and ranged downloads,
/// and the partial files they keep.
///
/// New kinds of notices are added as the work grows: match with a `_` arm.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum NetEvent {
    /// Detail: a redirect was followed.
    Redirect {
        /// From this URL, without credentials (escaped by the display).
        from: String,
        /// To this one, without credentials (escaped by the display).
        to: String,
    },
    /// Warning: the TLS certificate of `host` is not verified (`CLIMA_ARTIFACTS_NO_VERIFY_HOSTS`).
    TlsNotVerified {
        /// The host (escaped by the display).
        host: String,
    },
    /// Warning: an attempt failed with `error`; the next, `attempt` of `attempts`, starts
    /// after `delay`.
    Retry {
        /// The failure.
        error: String,
        /// The failure without its URL: the same for every download that failed alike (a
        /// batch's log says it once: [`OncePerCause`](clima_artifact_progress::OncePerCause)).
        cause: String,
        /// The pause before the next attempt.
        delay: Duration,
        /// The number of the next attempt (from 1).
        attempt: u32,
        /// How many attempts there are (`CLIMA_ARTIFACTS_RETRIES`).
        attempts: u32,
    },
    /// Info: a download broke at byte `at` and continues there.
    ResumingBroken {
        /// The artifact's name.
        artifact: String,
        /// Bytes received before it broke.
        at: u64,
        /// Why it broke.
        error: String,
    },
    /// Info: a download continues from `at` of `of` bytes kept in `kept_in` by an earlier
    /// attempt.
    Resuming {
        /// The artifact's name.
        artifact: String,
        /// Bytes kept.
        at: u64,
        /// The download's length.
        of: u64,
        /// The partial download's file.
        kept_in: PathBuf,
    },
    /// Warning: the download of `artifact` is not kept for resuming (`why`): a broken download
    /// starts over.
    PartialNotKept {
        /// The artifact's name.
        artifact: String,
        /// Why.
        why: PartialNotKeptReason,
    },
    /// Warning: the kept partial download at `path` is unusable (`why`, as in `is shorter than
    /// its header`); it is removed and the download starts over.
    PartialUnusable {
        /// The partial download's file.
        path: PathBuf,
        /// What is wrong with it.
        why: PartialUnusableReason,
    },
    /// Warning: the partial download at `path` cannot be continued (`why`: the server's file
    /// changed, say); the download starts over.
    PartialRestart {
        /// The partial download's file.
        path: PathBuf,
        /// Why.
        why: PartialRestartReason,
    },
    /// Detail: a server answered a range request in a way that leaves one stream (`why`).
    RangeFallback {
        /// What the server did (`a range came without a validator`).
        why: RangeFallbackReason,
    },
    /// Detail: connection `id` of a download closed: the server answered HTTP `status` to a
    /// range request (it limits connections).
    ConnectionClosed {
        /// The connection's number.
        id: u64,
        /// The HTTP status.
        status: u16,
    },
}

impl Event for NetEvent {
    fn level(&self) -> Level {
        use NetEvent::*;
        match self {
            ResumingBroken { .. } | Resuming { .. } => Level::Info,
            Redirect { .. } | RangeFallback { .. } | ConnectionClosed { .. } => Level::Detail,
            TlsNotVerified { .. }
            | Retry { .. }
            | PartialNotKept { .. }
            | PartialUnusable { .. }
            | PartialRestart { .. } => Level::Warning,
        }
    }

    fn repeated_cause(&self) -> Option<(&'static str, &str)> {
        match self {
            NetEvent::Retry { cause, .. } => Some(("retry", cause)),
            _ => None,
        }
    }
}

impl fmt::Display for NetEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use NetEvent::*;
        match self {
            Redirect { from, to } => write!(
                f,
                "redirected from `{}` to `{}`",
                printable(from),
                printable(to)
            ),
            TlsNotVerified { host } => write!(
                f,
                "not verifying the TLS certificate of `{}` ({NO_VERIFY_HOSTS}); the sha256 and \
                 the tree hash still check what is downloaded",
                printable(host)
            ),
            Retry {
                error,
                delay,
                attempt,
                attempts,
                ..
            } => write!(
                f,
                "{error}; retrying in {:.1} s (attempt {attempt} of {attempts}, {RETRIES})",
                delay.as_secs_f64()
            ),
            ResumingBroken {
                artifact,
                at,
                error,
            } => write!(
                f,
                "the download of `{artifact}` broke at byte {at} ({error}); resuming there"
            ),
            Resuming {
                artifact,
                at,
                of,
                kept_in,
            } => write!(
                f,
                "resuming the download of `{artifact}` at {} of {} (kept in `{}` by an earlier \
                 attempt)",
                human_bytes(*at),
                human_bytes(*of),
                kept_in.display()
            ),
            PartialNotKept { artifact, why } => write!(
                f,
                "the download of `{artifact}` is not kept for resuming: {why}"
            ),
            PartialUnusable { path, why } => write!(
                f,
                "the kept partial download `{}` {why}; removing it and starting over",
                path.display()
            ),
            PartialRestart { path, why } => write!(
                f,
                "the partial download `{}` cannot be continued: {why}; starting over",
                path.display()
            ),
            RangeFallback { why } => write!(f, "{why}; one stream from now on"),
            ConnectionClosed { id, status } => write!(
                f,
                "connection {id} closed: HTTP {status} to a range request"
            ),
        }
    }
}

/// Why a download is not kept for resuming ([`NetEvent::PartialNotKept`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PartialNotKeptReason {
    /// What is at the partial download's name cannot be opened or inspected (a link, a
    /// folder, no permission).
    CannotOpen(SystemError),
    /// What is at the partial download's name is not this user's alone.
    NotOwned {
        /// The file.
        path: PathBuf,
        /// Its owner's user id.
        uid: u32,
    },
    /// The partial download's file cannot be created (or allocated, or its header written).
    CannotCreate(SystemError),
}

impl fmt::Display for PartialNotKeptReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PartialNotKeptReason::CannotOpen(e) | PartialNotKeptReason::CannotCreate(e) => e.fmt(f),
            PartialNotKeptReason::NotOwned { path, uid } => write!(
                f,
                "`{}` belongs to uid {uid} or has other links",
                path.display()
            ),
        }
    }
}

/// What is wrong with a kept partial download ([`NetEvent::PartialUnusable`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PartialUnusableReason {
    /// The file is shorter than its header.
    ShorterThanHeader,
    /// Its header is of another version, or out of bounds.
    UnreadableHeader,
    /// Its header claims more bytes than the download may have.
    TooLong {
        /// The length the header claims.
        length: u64,
        /// The most the download may have.
        max: u64,
    },
    /// It does not match its header (its length) or is of another URL.
    Mismatch,
    /// Its chunk counters cannot be read.
    Unreadable,
    /// A chunk counter is past its chunk's end.
    CountersPastChunks,
}

impl fmt::Display for PartialUnusableReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PartialUnusableReason::ShorterThanHeader => f.write_str("is shorter than its header"),
            PartialUnusableReason::UnreadableHeader => {
                f.write_str("has no header this version can read, or one out of bounds")
            }
            PartialUnusableReason::TooLong { length, max } => write!(
                f,
                "claims a download of {length} bytes, more than the {max} it may have"
            ),
            PartialUnusableReason::Mismatch => f.write_str("does not match its header or this URL"),
            PartialUnusableReason::Unreadable => f.write_str("cannot be read"),
            PartialUnusableReason::CountersPastChunks => {
                f.write_str("has chunk counters past their chunks")
            }
        }
    }
}

/// The `Content-Range` a server answered a range request with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ContentRange {
    /// `Content-Range: bytes first-last/total`.
    Bytes {
        /// The first byte.
        first: u64,
        /// The last byte.
        last: u64,
        /// The file's length.
        total: u64,
    },
    /// None, or none that could be read.
    Unusable,
}

impl fmt::Display for ContentRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ContentRange::Bytes { first, last, total } => {
                write!(f, "`Content-Range: bytes {first}-{last}/{total}`")
            }
            ContentRange::Unusable => f.write_str("no usable Content-Range"),
        }
    }
}

/// Why a kept partial download cannot be continued ([`NetEvent::PartialRestart`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PartialRestartReason {
    /// The server answered the range request with bytes of another version of the file (or
    /// of one it cannot tell): another ETag or Last-Modified, or none.
    ValidatorChanged,
    /// The server answered the range request with another range than the one asked for.
    OtherRange(ContentRange),
    /// The server sent the whole file, and it is another one (another ETag or
    /// Last-Modified).
    FileChanged,
}

impl fmt::Display for PartialRestartReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PartialRestartReason::ValidatorChanged => f.write_str(
                "the server answered its range request with another ETag or Last-Modified, or \
                 none (the file changed, and the server ignores If-Range)",
            ),
            PartialRestartReason::OtherRange(range) => {
                write!(f, "the server answered its range request with {range}")
            }
            PartialRestartReason::FileChanged => {
                f.write_str("the file on the server changed since (another ETag or Last-Modified)")
            }
        }
    }
}

/// How a server answered a range request so that a download goes on as one stream
/// ([`NetEvent::RangeFallback`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RangeFallbackReason {
    /// A range came without a validator (ETag or Last-Modified), so that its bytes cannot be
    /// told to be of the same file.
    NoValidator,
    /// A range request was answered with another range than the one asked for.
    OtherRange(ContentRange),
}

impl fmt::Display for RangeFallbackReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RangeFallbackReason::NoValidator => f.write_str("a range came without a validator"),
            RangeFallbackReason::OtherRange(range) => {
                write!(f, "a range request was answered with {range}")
            }
        }
    }
}
