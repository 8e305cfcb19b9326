//! # clima-artifact-runtime
//!
//! Verified, content-addressed input datasets ("artifacts") for Rust models, in Julia's format
//! (`Artifacts.toml`, `Overrides.toml`, depots of `artifacts/<git-tree-sha1>/`).
//!
//! ```ignore
//! // In a crate with an `Artifacts.toml` that defines `era5` (read at compile time):
//! use clima_artifact_runtime::{Singleton, clima_artifact};
//!
//! fn main() -> Result<(), clima_artifact_runtime::Error> {
//!     let era5 = clima_artifact!("era5", &Singleton)?; // or an MPI communicator
//!     println!("ERA5 is in {}", era5.display());
//!     Ok(())
//! }
//! ```
//!
//! # What a model uses (the crate root)
//!
//! - [`clima_artifact!`]: an artifact path checked against `Artifacts.toml` at compile time,
//!   installed on first use; [`set_macro_config`] replaces its configuration.
//! - [`Artifacts`]: the same from a manifest loaded at run time; [`Config`] from environment
//!   variables (depots, offline mode, timeouts, caps; the names are in `clima-artifact-vars`);
//!   [`Error`], whose `Debug` is its readable message; a download that failed lists one
//!   [`SourceFailure`] per source tried.
//! - [`Context`], [`Singleton`] and, with the `mpi` feature, `MpiContext` (re-exported from
//!   `clima-comms`; rsmpi's own `SimpleCommunicator` is a context too): calls with a context are
//!   collective, only the root installs ([`ensure_collective`]).
//! - [`report()`], [`Report`], [`ReportGuard`]: which datasets a run used and what to cite.
//! - [`ensure_files`] ([`Files`]), [`ensure_files_collective`]: only some files of a seekable
//!   artifact, by byte ranges, into the depot's partial folder (what `clima_artifact!("a/sub")`
//!   does when `a` is seekable and not installed).
//!
//! # Modules for tools (the CLI, test harnesses, other front ends)
//!
//! - [`depot`]: [`depot::Depot`] (every path of a depot, its install temp dirs and their
//!   reclamation, the usage log), overrides, lookups, locks (the crate
//!   `clima-artifact-depot`); [`ensure_variant`] installs one manifest variant ([`Installed`],
//!   [`Origin`]).
//! - [`extract`]: safe tar extraction that hashes every blob while writing it;
//!   [`tree_hash`]: git tree SHA-1 of a folder (both the crate `clima-artifact-extract`).
//! - [`trust`]: which TLS roots and unverified hosts downloads use (from the network crate,
//!   `clima-artifact-net`, which opens sources, follows redirects and reads bodies).
//! - [`progress`]: download progress and notices (lock waits, retries, warnings) as events,
//!   and the reporters that draw them; [`notice`]: the kinds of notices, each domain's enum
//!   with its lines (the runtime's installs, MPI and report; the network's and the depot's
//!   re-exported), for a program that matches on them.
//! - [`access_log`]: the provenance access log (every artifact access in this process);
//!   [`report`](mod@report): the end-of-run report built from it (the log, the report's
//!   schema and renderings are the crate `clima-artifact-provenance`).
//! - [`inventory`]: the artifacts declared by `clima_artifact!` call sites in this binary.
//!
//! Where things happen inside (private modules): `install` (one `Install` value owns an
//! install's steps in order: the override or depot copy, the sources usable now, the staging
//! with its locks, the reuse of held files, the download; `install::attempt`: the sources
//! tried in order with their retries, one attempt source -> sha256 -> decompress -> tar ->
//! temp dir -> tree hash -> rename; `install::streamed`: a download with `index-sha256` whose
//! index is read first (the file's last bytes), its members unpacked on every core while the
//! rest arrives; `install::seekable`: one whose index cannot be read first, saved whole, then
//! unpacked by `extract_parallel` on every core; `install::transfer`: its progress;
//! `install::reuse`: a whole install from the files the depots hold and ranges for the rest),
//! `partial` (some files alone: one `PartialFetch` value whose stages run in order, the whole
//! install decided in one place), `ranged_source` (a download read by byte ranges, its
//! authenticated index and its spans, for both; it calls neither), `held` (files the depots
//! already hold, found by blob id, copied and checked), `subpath` (the sub-path check),
//! `access` (the access a call records in the provenance log), `config` (reading the
//! variables once), `collective_install` (who installs under MPI), `node_stream` (node-local
//! mode: one download per job, broadcast to one leader per node, verified and installed
//! there), `resolve` (the resolver behind the macro).
//! Run sync of output files is a separate crate, `clima-artifact-sync`.

mod access;
mod artifacts;
mod collective_install;
mod config;
mod debug_speed;
mod error;
mod held;
mod install;
mod macros;
mod node_stream;
pub mod notice;
mod partial;
mod ranged_source;
mod resolve;
mod subpath;

/// The provenance access log: every artifact access in this process, aggregated per artifact
/// into the records of the report (the crate `clima-artifact-provenance`).
pub use clima_artifact_provenance::access_log;
/// Depots, for tools: every path of a depot ([`Depot`](depot::Depot), with its usage log and
/// the reclaiming of what dead installs left), lookups, overrides, a per-artifact lock, the
/// partial-download name. From the crate `clima-artifact-depot`, whose staging of installs
/// (`Depot::stage`) the runtime's installs use and this module leaves out.
pub mod depot {
    pub use clima_artifact_depot::{
        BlobLimits, Blobs, Depot, Error, FoundBlob, LockedFile, Overrides, PARTIAL_MAX_AGE,
        PROBE_MAX_AGE, PendingUsage, ResolvedOverride, USAGE_LOCK_WAIT, USAGE_RECORD_EVERY,
        UsageLogBusy, UsageLogLock, find_installed, first_writable, hostname, julia_depots, lookup,
        notice, partial_name, search_order,
    };
}
/// Safe tar extraction that hashes every blob while writing it (the crate
/// `clima-artifact-extract`).
pub use clima_artifact_extract as extract;
pub mod inventory;
pub use clima_artifact_progress as progress;
pub mod report;
pub use clima_artifact_extract::tree_hash;
pub use clima_artifact_net::trust;
/// The names of the environment variables this crate reads (the crate `clima-artifact-vars`),
/// for a model that sets or reports them.
pub use clima_artifact_vars as vars;

#[doc(hidden)]
pub mod __private;

pub use access_log::{AccessEvent, ArtifactRecord};
pub use artifacts::Artifacts;
pub use clima_artifact_depot::{Installed, Origin};
pub use clima_artifact_manifest as manifest;
pub use clima_artifact_manifest::{GitTreeSha1, GitTreeSha256, Platform, Sha256};
pub use clima_artifact_net::NetError;
pub use clima_artifact_net::ProxySettings;
pub use clima_comms::{Context, Singleton};
#[cfg(feature = "mpi")]
pub use clima_comms::{MpiContext, mpi};
pub use collective_install::ensure_collective;
pub use config::Config;
pub use error::{Error, IoCause, SourceFailure};
pub use install::ensure_variant;
pub use macros::set_macro_config;
pub use partial::{Files, ensure_files, ensure_files_collective};
pub use report::{Report, ReportGuard, report};
