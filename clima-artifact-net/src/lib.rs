//! # clima-artifact-net
//!
//! Everything that touches the network for clima-artifacts, behind a narrow configuration
//! ([`NetConfig`]) and its own error type ([`NetError`]).
//!
//! | module | what |
//! |---|---|
//! | [`source`] | opening a download: `http(s)://` (ureq, rustls), `file://`, paths relative to the manifest; [`source::Resumer`] continues a broken transfer with `Range` + `If-Range` |
//! | [`retry`] | the retry policy, in one file: which failures are transient, how many tries, the backoff; asked by the install's attempts, the resumes of [`body`], the chunks of [`ranged`], and an archive client's waits for `429 Too Many Requests` (`Retry-After`) |
//! | [`body`] | the body as a `BufRead`: read on a thread of its own, bounded by the manifest's `size`, abandoned by the low-speed rule, resumed after a break, SHA-256 of every byte; progress to a [`Transfer`] |
//! | [`ranged`] | large downloads: several ranged connections into a partial file kept for the next process, read back in order |
//! | [`ranges`] | byte ranges of a remote file, each answer checked (`206`, the exact `Content-Range`, the same total, a bounded body): the reading of only some files of a seekable tarball |
//! | `partial` (private) | what a source carries of a large download ([`ranged::Kept`], the progress counters), apart from [`ranged`] so that a source does not import the code that opens sources |
//! | `limit` (private) | at most [`NetConfig::connections`] requests in flight to one server, for the whole process |
//! | `redirect` (private) | the redirect rule: never `https` to `http`, never into loopback, link-local or private addresses from outside them |
//! | [`trust`] | TLS roots (variables, system bundle, bundled Mozilla roots), hosts without verification, credentials redacted from URLs |
//! | `config` | [`NetConfig`], [`ProxySettings`] |
//! | `error` | [`NetError`] |
//! | [`notice`] | the network's notices and their lines ([`notice::NetEvent`]: redirects, TLS not verified, retries, resumes, partial files, range fallbacks), sent to the process's reporter (`clima_artifact_progress`) |
//!
//! The runtime builds the configuration from its `CLIMA_ARTIFACTS_*` variables; this crate
//! reads no variable itself except the proxies' and the TLS roots' (`ProxySettings::from_vars`,
//! `trust::ca_roots_from_vars`), through the caller's lookup.

mod config;
mod error;
mod limit;
pub mod notice;
mod partial;
mod redirect;
pub mod retry;

pub mod body;
pub mod ranged;
pub mod ranges;
pub mod source;
pub mod trust;

pub use body::{Body, BodyRules, RuleBroken, Tap};
pub use clima_artifact_progress::Transfer;
pub use config::{DEFAULT_PARALLEL_MIN_SIZE, NetConfig, ProxySettings};
pub use error::NetError;
