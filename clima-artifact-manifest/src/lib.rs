//! Julia-compatible `Artifacts.toml` and `Overrides.toml` parsing, shared by the clima-artifacts
//! proc macro, the build.rs helper (clima-artifact-build), runtime and CLI.
//!
//! This crate does no network I/O and pulls in no HTTP or TLS code, so the proc macro can depend
//! on it cheaply.
//!
//! Module map:
//! - [`hash`]: [`GitTreeSha1`], [`GitTreeSha256`] and [`Sha256`] digests.
//! - [`manifest`]: [`Manifest`] (an `Artifacts.toml`) and its entries.
//! - [`platform`]: [`Platform`] tags, the host platform, and selection among `[[name]]` entries.
//! - [`overrides`]: one depot's `Overrides.toml`.
//! - [`layout`]: the name of every file and folder in a depot (names only, no I/O).
//! - [`error`]: [`ManifestError`] with file, line, column and artifact name.
//! - [`validate`](mod@validate): non-fatal [`Warning`]s for build scripts (missing license, `http://` URLs, ...).
//! - [`origin`]: [`Origin`], where an artifact's data came from (one type for the depot,
//!   the runtime and the provenance report).
//! - [`metadata`]: the documented provenance keys (`license`, `citation`, `doi`, ...).
//! - [`provenance`]: syntax checks of SPDX license expressions, DOIs and BibTeX.

pub mod error;
pub mod hash;
pub mod layout;
mod location;
pub mod manifest;
pub mod metadata;
pub mod origin;
pub mod overrides;
pub mod platform;
pub mod provenance;
pub mod validate;

pub use error::{ManifestError, ManifestErrorKind};
pub use hash::{GitTreeSha1, GitTreeSha256, HexError, Sha256};
pub use location::quote as toml_string;
pub use manifest::{
    ArtifactEntry, ArtifactVariant, Download, Manifest, SubPathError, split_name_and_subpath,
};
pub use origin::Origin;
pub use overrides::{OverrideEntry, OverrideTarget, OverridesFile};
pub use platform::{Platform, SelectError, suggest_name};
pub use validate::{Warning, validate};
