//! # clima-artifact-depot
//!
//! Depots of clima-artifacts, in Julia's layout: the staging of an install ([`Depot::stage`]:
//! its locks, its private temp dir, its partial downloads, and the commit of the verified
//! folder as `artifacts/<hash>`) and everything tools do with depots besides.
//!
//! ```text
//! <depot>/                              one entry of CLIMA_ARTIFACTS_DEPOT_PATH (or the cache dir)
//!   artifacts/
//!     <git-tree-sha1>/                  an installed artifact (Julia's layout)
//!     <git-tree-sha1>.pid               Julia 1.13's install lock (taken by us too)
//!     <git-tree-sha1>.git-tree-sha256   the copy's git tree SHA-256, once verified
//!     Overrides.toml                    this depot's overrides
//!     .locks/<git-tree-sha1>.lock       per-artifact install locks
//!     .<hash>.clima-install-<host>.<pid>.<rand>/
//!                                       an install in progress (renamed into place when verified)
//!   logs/
//!     artifact_usage.toml               manifests that used this depot (Julia's format; for `gc`)
//!     orphaned.toml                     artifacts gc found unreferenced, and since when
//! ```
//!
//! (The names themselves are `clima_artifact_manifest::layout`, which the build helper and
//! the CLI share.)
//!
//! - [`Depot`]: one depot and every path of its layout; [`search_order`], [`lookup`],
//!   [`find_installed`], [`first_writable`], [`julia_depots`]; the node-local depot's check
//!   ([`Depot::create_private_node`]).
//! - [`Overrides`]: the overrides of all depots, merged as Julia merges them (`overrides`).
//! - [`Depot::stage`] → [`Staging`]: an install's locks, ours and Julia's pidfile (over
//!   `locked_file` and `julia_lock`), the cleanup of what dead installs left, its private
//!   [`TempDir`], its [`PartialFile`]s, and [`Staging::commit`], which renames the verified
//!   folder into place and records its git tree SHA-256 (`staging`);
//!   [`LockedFile`] for tools that hold a lock of their own.
//! - The reclamation of what dead installs left (`reclaim`) and the usage log (`usage`).
//! - [`Depot::recorded_tree_sha256`], [`Depot::record_tree_sha256`]: the record of an
//!   installed copy's git tree SHA-256, verified once (`tree_sha256`).
//! - [`Depot::partial_file`], [`Staging::partial_files`] ([`PartialFiles`]): the files of an
//!   artifact fetched one by one, in `<depot>/clima_partial/<hash>/` (`partial_files`).
//! - [`Blobs`]: content the installed artifacts (and files fetched one by one) of some depots hold, found by its git blob id
//!   and size and verified when handed out (`blobs`; for a ranged install that copies what
//!   the depot has instead of fetching it).
//! - [`Installed`], [`Origin`]: what making an artifact available returns.
//! - [`Error`]: what a depot operation fails with; the runtime's error wraps it.
//! - [`notice`]: the depot's notices and their lines ([`notice::LockEvent`]: lock waits and
//!   Julia's pidfiles; [`notice::DepotEvent`]: upkeep; [`notice::UsageEvent`]: the usage
//!   log), sent to the process's reporter (`clima_artifact_progress`).

mod blobs;
mod depot;
mod error;
mod installed;
mod julia_lock;
mod locked_file;
pub mod notice;
mod overrides;
mod partial_files;
mod reclaim;
mod staging;
mod tree_sha256;
mod usage;

pub use blobs::{BlobLimits, Blobs, FoundBlob};
pub use depot::{
    Depot, PARTIAL_MAX_AGE, PROBE_MAX_AGE, find_installed, first_writable, julia_depots,
    search_order,
};
pub use error::{Error, render_paths};
pub use installed::{Installed, Origin};
pub use locked_file::{HolderNote, LockedFile, hostname};
pub use overrides::{Overrides, ResolvedOverride, lookup};
pub use partial_files::{PartialFiles, Pending};
pub use staging::{PartialFile, Stage, Staged, Staging, TempDir, Wait, partial_name};
pub use tree_sha256::MAX_RECORD_BYTES;
pub use usage::{
    PendingUsage, USAGE_LOCK_WAIT, USAGE_RECORD_EVERY, UsageLogBusy, UsageLogLock, record_usage_of,
};
