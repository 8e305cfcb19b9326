//! # clima-artifact-runtime
//!
//! Verified, content-addressed input datasets ("artifacts") for Rust models, in Julia's format
//! (`Artifacts.toml`, `Overrides.toml`, depots of `artifacts/<git-tree-sha1>/`).
//!
//! Module map (where things happen):
//! - [`artifacts`]: the public entry point [`Artifacts`] (load a manifest, `ensure_installed`, queries).
//! - [`config`]: [`Config`] from environment variables (depots, offline mode, timeouts, caps).
//! - [`depot`]: depot list, lookups across depots, override resolution.
//! - [`install`]: the one-pass install pipeline (source -> sha256 -> decompress -> tar -> temp dir -> rename).
//! - [`download`]: opening sources (`http(s)://`, `file://`, paths), retries, timeouts, proxies.
//! - [`extract`]: safe tar extraction that hashes every blob while writing it.
//! - [`tree_hash`]: git tree SHA-1 of a directory.
//! - [`locked_file`]: per-artifact lock files between processes.
//! - [`context`]: the communication context (serial [`Singleton`], MPI behind the `mpi` feature:
//!   `mpi_context::MpiContext`). Calls with a context are collective.
//! - [`registry`] and [`report`](mod@report): provenance of every access and the end-of-run report.
//! - [`sync`]: output artifacts: sync a run folder to a path or S3 at checkpoints, restore it.
//! - [`inventory`]: artifacts declared by `clima_artifact!` call sites in this binary.
//! - [`clima_artifact!`]: an artifact path checked against `Artifacts.toml` at compile time.

pub mod artifacts;
pub mod config;
pub mod context;
pub mod depot;
pub mod download;
pub mod error;
pub mod extract;
pub mod install;
pub mod inventory;
pub mod locked_file;
mod macros;
#[cfg(feature = "mpi")]
pub mod mpi_context;
pub mod registry;
pub mod report;
pub mod sync;
pub mod tree_hash;

#[doc(hidden)]
pub mod __private;

#[cfg(feature = "mpi")]
pub use ::mpi;
pub use artifacts::Artifacts;
pub use clima_artifact_manifest as manifest;
pub use clima_artifact_manifest::{GitTreeSha1, Sha256};
pub use config::Config;
pub use context::{Context, Singleton};
pub use error::Error;
pub use macros::set_macro_config;
#[cfg(feature = "mpi")]
pub use mpi_context::MpiContext;
pub use registry::{AccessEvent, ArtifactRecord};
pub use report::{Report, ReportGuard, report};
