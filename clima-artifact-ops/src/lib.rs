//! # clima-artifact-ops
//!
//! The operations of the `clima-artifacts` command as library functions, so that a program
//! (a cluster's mirror job, a notebook, a test) does what the CLI does without running it; the
//! CLI parses arguments and prints, and calls these for the work (as `cargo` calls its `ops`).
//!
//! Where things live:
//! - [`archive`]: publish an artifact to an InvenioRDM archive (CaltechDATA, Zenodo) and record
//!   its DOI and file URL in the manifest (resumable, checksummed).
//! - [`storage`]: publish a tarball to storage (a folder, `file://`, `s3://`) and record its
//!   download URL in the manifest.
//! - [`manifest_edit`]: add or update an `Artifacts.toml` entry, keeping every other byte.
//! - [`overrides_edit`]: set or remove one line of an `Overrides.toml`, keeping the rest.
//! - [`tarball`]: the deterministic `.tar.gz` of a folder, and its sha256.
//! - [`recipe`]: run an artifact's recipe into a temp folder and check what it wrote.
//! - [`census_walk`]: find every `*Artifacts.toml` below some folders for the census.
//! - [`mirror`]: install every downloadable artifact of some manifests into one depot, several
//!   at once, with the overrides it manages in a section of its own of `Overrides.toml`.
//! - [`override_check`]: `mirror --verify-overrides`: an override folder's tree hash against
//!   the hash it overrides, cached in the depot by the folder's size and time.
//! - [`gc`]: collect a depot's unreferenced artifacts after Pkg's grace period.
//! - [`depots`]: the depots of the environment, their overrides, and the usage log.
//! - [`error`]: the [`Error`] every operation returns: a message that says what to do, and its
//!   [`ErrorKind`]: whether the input was bad or the work failed (the CLI turns these into its
//!   exit codes 2 and 1; the library knows no exit codes).

pub mod archive;
pub mod census_walk;
pub mod depots;
pub mod error;
pub mod gc;
pub mod manifest_edit;
pub mod mirror;
pub mod override_check;
pub mod overrides_edit;
pub mod recipe;
pub mod storage;
pub mod tarball;

pub use error::{Error, ErrorKind, Result};
