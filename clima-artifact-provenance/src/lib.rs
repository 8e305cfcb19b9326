//! # clima-artifact-provenance
//!
//! The provenance report: which datasets a run used, where they came from, what to cite and
//! acknowledge. No I/O but writing the report files.
//!
//! | module | what |
//! |---|---|
//! | [`record`] | [`ArtifactRecord`]: one accessed artifact (origin, accesses, call sites, ranks, metadata), merged across ranks ([`merge_records`]) |
//! | [`census`] | the census of many manifests: per content hash its names, manifests, downloads, documentation and problems ([`census::PROBLEMS`]) |
//! | [`readme`] | the sections of a recipe's README.md ([`readme::SECTIONS`]) and its citation section |
//! | [`report`] | [`Report`]: the records plus the declared artifacts a run did not use; JSON ([`report::SCHEMA`], `docs/report-schema.md`), Markdown, BibTeX; the three files written atomically |
//!
//! The runtime (`clima-artifact-runtime`) records accesses in its process-wide access log and
//! re-exports both modules' types (`access_log::ArtifactRecord`, `report::Report`, ...); a
//! tool that only reads and renders reports (the CLI's `report`) needs this crate alone.

pub mod census;
pub mod readme;
pub mod record;
pub mod report;

pub use record::{ArtifactRecord, CallSite, RecordedOrigin, merge_records};
pub use report::{DeclaredArtifact, Report, ReportError, ReportPaths};
