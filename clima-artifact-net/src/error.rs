//! The errors of one source: what went wrong reaching or reading one URL or path.
//!
//! Messages are complete on their own (the cause's text is part of the message), since they
//! travel between MPI ranks as text inside the runtime's errors and must read the same on every
//! rank.

use std::path::PathBuf;

use clima_artifact_fs::IoCause;

/// A failure to reach or read one download source.
#[derive(Debug, Clone, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub enum NetError {
    /// A server answered with an error status.
    #[error("HTTP {status} from `{}`", crate::trust::redact_url(url))]
    HttpStatus {
        /// The URL.
        url: String,
        /// The status code.
        status: u16,
    },
    /// The connection failed, was reset, stalled or ended early, or TLS or a proxy failed.
    #[error("`{}`: {reason}", crate::trust::redact_url(url))]
    Transport {
        /// The URL.
        url: String,
        /// What happened, and what to change.
        reason: String,
        /// Whether retrying may help (a reset or timeout), or not (a TLS certificate error,
        /// an invalid URL, an unknown host).
        transient: bool,
    },
    /// A local source (path or `file://`) cannot be read.
    #[error("cannot read `{}` (from `{}`): {cause}", path.display(), crate::trust::redact_url(url))]
    LocalSource {
        /// The URL as written in the manifest.
        url: String,
        /// The resolved path.
        path: PathBuf,
        /// The cause.
        #[source]
        cause: IoCause,
    },
    /// A download URL has a scheme or form that cannot be fetched.
    #[error("`{}`: {reason}", crate::trust::redact_url(url))]
    UnsupportedUrl {
        /// The URL as written in the manifest.
        url: String,
        /// What is wrong with it and what to write instead.
        reason: String,
    },
    /// A setting cannot be used (a proxy URL, a CA bundle without certificates).
    #[error(
        "environment variable {variable}=`{}` is invalid: {reason}",
        crate::trust::redact_url(value)
    )]
    Config {
        /// The variable, e.g. `HTTPS_PROXY`.
        variable: String,
        /// Its value (credentials redacted).
        value: String,
        /// What is wrong and what is expected.
        reason: String,
    },
}

impl NetError {
    /// The URL (or path, as written in the manifest) the failure is about; empty for a
    /// setting that cannot be used.
    pub fn url(&self) -> &str {
        match self {
            NetError::HttpStatus { url, .. }
            | NetError::Transport { url, .. }
            | NetError::LocalSource { url, .. }
            | NetError::UnsupportedUrl { url, .. } => url,
            NetError::Config { .. } => "",
        }
    }

    /// Whether trying the same source again may succeed: refused, reset or timed-out
    /// connections, stalls, truncated bodies, HTTP 5xx, 429 and 408. Not 404, 403 or other
    /// client errors, TLS certificate errors, invalid URLs or unknown hosts, local files.
    pub fn is_transient(&self) -> bool {
        match self {
            NetError::HttpStatus { status, .. } => crate::retry::is_transient_status(*status),
            NetError::Transport { transient, .. } => *transient,
            _ => false,
        }
    }
}
