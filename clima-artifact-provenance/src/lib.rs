//! # clima-artifact-provenance
//!
//! The provenance report: which datasets a run used, where they came from, what to cite and
//! acknowledge. Its only I/O: writing the report files and reading the citation section of
//! a recipe's README.md ([`readme::recipe_citation`]).
//!
//! | module | what |
//! |---|---|
//! | [`access_log`] | the process-wide log of artifact accesses ([`access_log::record`]), aggregated per artifact into the records of the report ([`access_log::snapshot`]) |
//! | [`record`] | [`ArtifactRecord`]: one accessed artifact (origin, accesses, call sites, ranks, metadata), merged across ranks ([`merge_records`]) |
//! | [`census`] | the census of many manifests: per content hash its names, manifests, downloads, documentation and problems ([`census::PROBLEMS`]) |
//! | [`readme`] | the sections of a recipe's README.md ([`readme::SECTIONS`]) and its citation section |
//! | [`readme_license`] | the licence statements of a README and the SPDX ids they name ([`readme_license::license_statements`]), for the census |
//! | [`report`] | [`Report`]: the records plus the declared artifacts a run did not use; JSON ([`report::SCHEMA`], `docs/report-schema.md`), Markdown, BibTeX; the three files written atomically |
//!
//! The runtime (`clima-artifact-runtime`) records every access in the [`access_log`] and
//! re-exports it and the report's types (`access_log::ArtifactRecord`, `report::Report`, ...);
//! a tool that only reads and renders reports (the CLI's `report`) needs this crate alone.

pub mod access_log;
pub mod census;
pub mod readme;
pub mod readme_license;
pub mod record;
pub mod report;

pub use record::{ArtifactRecord, CallSite, RecordedOrigin, merge_records};
pub use report::{DeclaredArtifact, Report, ReportError, ReportPaths};
