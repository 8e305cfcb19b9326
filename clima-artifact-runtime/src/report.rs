//! The end-of-run provenance report: which datasets a run used, where they came from, and what
//! their authors ask for (license, acknowledgement, citation).
//!
//! ```text
//! access_log::snapshot() ─┐                                  ┌─▶ to_markdown()  provenance.md   (people)
//! (gather over ranks) ──┼─▶ Report { schema, artifacts, ──┼─▶ to_json()      provenance.json (tools,
//! inventory (declared) ─┘           declared_not_accessed } │                   docs/report-schema.md)
//!                                                          └─▶ to_bibtex()    provenance.bib  (papers)
//! ```
//!
//! Typical use at the end of a simulation:
//!
//! ```no_run
//! // Serial: writes results/provenance.{md,json,bib}.
//! clima_artifact_runtime::report::write_all("results/")?;
//! // Or keep a guard alive for the whole run; it writes when dropped.
//! let _guard = clima_artifact_runtime::report::ReportGuard::new("results/");
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Under MPI, [`write_all_collective`] gathers the records of every rank to rank 0, which writes
//! the files once.

mod bibtex;
mod markdown;
mod write;

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::GitTreeSha1;
use crate::access_log::{self, ArtifactRecord, CallSite};
use clima_comms::Context;

pub use write::{ReportGuard, ReportPaths};

/// The schema identifier written into every JSON report; readers accept exactly this version.
pub const SCHEMA: &str = "clima-artifacts-report/1";

/// What wrote the report (this crate and its version).
pub const GENERATOR: &str = concat!("clima-artifact-runtime ", env!("CARGO_PKG_VERSION"));

/// An artifact that a `clima_artifact!` call site in this binary can use but that this run did
/// not access (from [`crate::inventory::declared_artifacts`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeclaredArtifact {
    /// Artifact name as written in the manifest.
    pub name: String,
    /// The manifest that defines it.
    pub manifest: String,
    /// Git tree SHA-1 of each variant (one per platform for platform-specific entries).
    pub git_tree_sha1s: Vec<GitTreeSha1>,
    /// Every variant is `lazy = true` (installed on first use only).
    #[serde(default)]
    pub lazy: bool,
    /// The call sites that may use it, sorted.
    pub call_sites: Vec<CallSite>,
    /// Provenance metadata of the manifest entry, when known.
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
}

impl From<crate::inventory::DeclaredArtifact> for DeclaredArtifact {
    fn from(declared: crate::inventory::DeclaredArtifact) -> Self {
        DeclaredArtifact {
            name: declared.name.to_owned(),
            manifest: declared.manifest.to_owned(),
            git_tree_sha1s: declared.hashes,
            lazy: declared.lazy,
            call_sites: declared
                .call_sites
                .iter()
                .map(|site| CallSite {
                    file: site.file.to_owned(),
                    line: site.line,
                })
                .collect(),
            metadata: BTreeMap::new(),
        }
    }
}

/// The provenance of one run: every accessed artifact with its origin and metadata, plus the
/// declared artifacts it did not touch. Serialises to the documented JSON schema [`SCHEMA`]
/// (`docs/report-schema.md`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// The library and version that produced the report ([`GENERATOR`]).
    pub generator: String,
    /// When the report was built, RFC 3339 in UTC.
    pub generated_at: String,
    /// Number of ranks whose accesses are included (1 for serial runs).
    pub communicator_size: usize,
    /// Accessed artifacts, sorted by name, hash and manifest.
    pub artifacts: Vec<ArtifactRecord>,
    /// Artifacts declared by call sites in the binary but not accessed, sorted by name and
    /// manifest.
    pub declared_not_accessed: Vec<DeclaredArtifact>,
}

/// Why a JSON text could not be read as a [`Report`].
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// Not JSON, or JSON of the wrong shape.
    #[error(
        "invalid provenance report JSON at line {line}, column {column}: expected an object \
         written by `Report::to_json` (see docs/report-schema.md)"
    )]
    Json {
        /// 1-based line of the problem.
        line: usize,
        /// 1-based column of the problem.
        column: usize,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// The `schema` field is missing or names another version.
    #[error(
        "unsupported provenance report schema `{found}`: this version reads `{SCHEMA}`; render \
         the report with the clima-artifacts version that wrote it"
    )]
    UnsupportedSchema {
        /// The `schema` value found (empty when missing).
        found: String,
    },
}

impl From<serde_json::Error> for ReportError {
    fn from(source: serde_json::Error) -> Self {
        ReportError::Json {
            line: source.line(),
            column: source.column(),
            source,
        }
    }
}

impl Report {
    /// Builds a report from accessed records (merged per artifact and sorted here) and the
    /// declared inventory (entries that were accessed, or repeat, are folded away). Stamped
    /// with the current time and a communicator size of 1.
    pub fn from_parts(
        records: impl IntoIterator<Item = ArtifactRecord>,
        declared: impl IntoIterator<Item = DeclaredArtifact>,
    ) -> Report {
        let artifacts = access_log::merge_records(records);
        let accessed = |d: &DeclaredArtifact| {
            artifacts.iter().any(|r| {
                r.name == d.name
                    && (r.manifest == d.manifest || d.git_tree_sha1s.contains(&r.git_tree_sha1))
            })
        };
        let mut not_accessed: BTreeMap<(String, String), DeclaredArtifact> = BTreeMap::new();
        for item in declared {
            if accessed(&item) {
                continue;
            }
            match not_accessed.get_mut(&(item.name.clone(), item.manifest.clone())) {
                Some(existing) => {
                    existing.call_sites.extend(item.call_sites);
                    existing.git_tree_sha1s.extend(item.git_tree_sha1s);
                    existing.lazy &= item.lazy;
                    for (key, value) in item.metadata {
                        existing.metadata.entry(key).or_insert(value);
                    }
                }
                None => {
                    not_accessed.insert((item.name.clone(), item.manifest.clone()), item);
                }
            }
        }
        let declared_not_accessed = not_accessed
            .into_values()
            .map(|mut d| {
                d.call_sites.sort();
                d.call_sites.dedup();
                d.git_tree_sha1s.sort();
                d.git_tree_sha1s.dedup();
                d
            })
            .collect();
        Report {
            schema: SCHEMA.to_owned(),
            generator: GENERATOR.to_owned(),
            generated_at: clima_artifact_fs::utc_timestamp(SystemTime::now()),
            communicator_size: 1,
            artifacts,
            declared_not_accessed,
        }
    }

    /// The report as pretty-printed JSON (fields in schema order, metadata keys sorted), ending
    /// with a newline.
    pub fn to_json(&self) -> String {
        let mut json = serde_json::to_string_pretty(self).expect(
            "a report holds only strings, integers, floats and lists, which always serialise",
        );
        json.push('\n');
        json
    }

    /// Reads a report written by [`Report::to_json`], checking its [`SCHEMA`] first.
    pub fn from_json(text: &str) -> Result<Report, ReportError> {
        let value: serde_json::Value = serde_json::from_str(text)?;
        let found = value
            .get("schema")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default();
        if found != SCHEMA {
            return Err(ReportError::UnsupportedSchema {
                found: found.to_owned(),
            });
        }
        Ok(serde_json::from_str(text)?)
    }

    /// The report for people: datasets table, acknowledgements paragraph, references, missing
    /// metadata, access details and declared-but-unused artifacts.
    pub fn to_markdown(&self) -> String {
        markdown::render(self)
    }

    /// Every BibTeX entry of the accessed artifacts, deduplicated by key and by content; a
    /// `@misc` entry is generated for artifacts with a `citation` or `doi` but no `bibtex`.
    pub fn to_bibtex(&self) -> String {
        bibtex::render(self)
    }

    /// Writes `provenance.md`, `provenance.json` and `provenance.bib` into the folder `dir`,
    /// creating it (and its parents) if needed, each file atomically (a temporary file, then
    /// renamed). `write_all("results")` gives `results/provenance.md`, and so on.
    pub fn write_all(&self, dir: impl AsRef<Path>) -> io::Result<ReportPaths> {
        write::write_report(self, write::Target::Dir(dir.as_ref(), ""))
    }

    /// Writes the three files under a file prefix instead of a folder: `out/run7` gives
    /// `out/run7.md`, `out/run7.json` and `out/run7.bib` (the parent folder is created if
    /// needed), for runs that keep several reports side by side.
    pub fn write_with_prefix(&self, prefix: impl AsRef<Path>) -> io::Result<ReportPaths> {
        write::write_report(self, write::Target::Prefix(prefix.as_ref()))
    }
}

/// Artifacts declared by `clima_artifact!` call sites linked into this binary.
fn declared_in_binary() -> Vec<DeclaredArtifact> {
    crate::inventory::declared_artifacts()
        .into_iter()
        .map(DeclaredArtifact::from)
        .collect()
}

/// The report of this process: every access recorded so far, plus the declared artifacts that
/// were not accessed.
pub fn report() -> Report {
    Report::from_parts(access_log::snapshot(), declared_in_binary())
}

/// Builds this process's [`report`] and writes it into the folder `dir` (created if needed)
/// with [`Report::write_all`].
pub fn write_all(dir: impl AsRef<Path>) -> io::Result<ReportPaths> {
    report().write_all(dir)
}

/// Gathers `local` records of every rank of `ctx` to rank 0 and merges them there (accesses
/// summed, call sites and ranks united). Collective; rank 0 gets `Some`, the others `None`.
///
/// [`report_collective`] calls this with [`access_log::snapshot`]; it is public for contexts whose
/// ranks do not each have their own registry (tests with threads as ranks).
pub fn gather_records(ctx: &dyn Context, local: &[ArtifactRecord]) -> Option<Vec<ArtifactRecord>> {
    let bytes = serde_json::to_vec(local)
        .expect("records hold only strings, integers, floats and lists, which always serialise");
    let gathered = ctx.gather_to_root(bytes)?;
    let mut all = Vec::new();
    for (rank, bytes) in gathered.iter().enumerate() {
        match serde_json::from_slice::<Vec<ArtifactRecord>>(bytes) {
            Ok(records) => all.extend(records),
            Err(err) => clima_comms::notice::warn(&format!(
                "provenance records from rank {rank} are unreadable and left out of the report: {err}"
            )),
        }
    }
    Some(access_log::merge_records(all))
}

/// Collective [`report`]: gathers every rank's records to rank 0 of `ctx`, which gets the merged
/// report; the other ranks get `None`. Every rank of `ctx` must call it.
pub fn report_collective(ctx: &dyn Context) -> Option<Report> {
    let records = gather_records(ctx, &access_log::snapshot())?;
    let mut report = Report::from_parts(records, declared_in_binary());
    report.communicator_size = ctx.size();
    Some(report)
}

/// Collective [`write_all`]: rank 0 writes the merged report once and tells every rank the
/// outcome, so all ranks return an error if the write failed. Rank 0 gets the paths, the others
/// `Ok(None)`. Every rank of `ctx` must call it.
pub fn write_all_collective(
    ctx: &dyn Context,
    dir: impl AsRef<Path>,
) -> io::Result<Option<ReportPaths>> {
    write::write_collective(ctx, dir.as_ref())
}

/// The value of a metadata key, trimmed, if present and not blank.
fn meta<'a>(metadata: &'a BTreeMap<String, String>, key: &str) -> Option<&'a str> {
    metadata
        .get(key)
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
}

/// Collapses runs of whitespace (including newlines of TOML multi-line strings) to one space.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A DOI without any `doi:` or resolver prefix, e.g. `10.5194/essd-13-4349-2021`.
fn bare_doi(doi: &str) -> &str {
    let doi = doi.trim();
    for prefix in [
        "https://doi.org/",
        "http://doi.org/",
        "https://dx.doi.org/",
        "http://dx.doi.org/",
        "doi.org/",
        "doi:",
        "DOI:",
    ] {
        if let Some(rest) = doi.strip_prefix(prefix) {
            return rest.trim();
        }
    }
    doi
}

/// The `https://doi.org/` link of a DOI, percent-encoding characters that are not safe in a URL
/// path.
fn doi_url(doi: &str) -> String {
    let mut url = String::from("https://doi.org/");
    for byte in bare_doi(doi).bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~/:;()".contains(&byte) {
            url.push(byte as char);
        } else {
            url.push_str(&format!("%{byte:02X}"));
        }
    }
    url
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doi_forms_normalise() {
        assert_eq!(bare_doi("doi:10.1/x"), "10.1/x");
        assert_eq!(bare_doi(" https://doi.org/10.1/x "), "10.1/x");
        assert_eq!(bare_doi("10.1/x"), "10.1/x");
        assert_eq!(
            doi_url("10.1002/(SICI)1097-0258<1>3.0.CO;2-#"),
            "https://doi.org/10.1002/(SICI)1097-0258%3C1%3E3.0.CO;2-%23"
        );
    }

    #[test]
    fn an_empty_report_says_so_in_every_format() {
        let mut report = Report::from_parts(Vec::new(), Vec::new());
        report.generated_at = "2024-01-01T00:00:00.000Z".into();
        let md = report.to_markdown();
        assert!(
            md.starts_with("# Datasets used by this run\n\n0 datasets were accessed, from 1 rank.")
        );
        assert!(md.contains("## Datasets\n\nNo dataset was accessed.\n"));
        assert!(md.contains("No dataset was accessed, so none needs acknowledging."));
        assert!(!md.contains("## Access details"));
        assert!(md.ends_with(".\n") && !md.ends_with("\n\n"));
        let bib = report.to_bibtex();
        assert!(bib.starts_with("% References of the datasets used by this run (0 entries)."));
        assert!(!bib.contains('@'));
        assert!(report.to_json().contains("\"artifacts\": []"));
    }

    #[test]
    fn from_json_rejects_other_schemas_and_garbage() {
        let report = Report::from_parts(Vec::new(), Vec::new());
        let json = report.to_json();
        assert_eq!(Report::from_json(&json).unwrap(), report);
        let other = json.replace(SCHEMA, "clima-artifacts-report/2");
        let err = Report::from_json(&other).unwrap_err();
        assert!(
            matches!(err, ReportError::UnsupportedSchema { ref found } if found.ends_with("/2"))
        );
        assert!(err.to_string().contains(SCHEMA));
        let err = Report::from_json("{\n  \"schema\": ").unwrap_err();
        assert!(matches!(err, ReportError::Json { line: 2, .. }), "{err}");
        let err = Report::from_json("{}").unwrap_err();
        assert!(matches!(err, ReportError::UnsupportedSchema { ref found } if found.is_empty()));
    }
}
