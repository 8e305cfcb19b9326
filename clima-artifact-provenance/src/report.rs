//! The end-of-run provenance report: which datasets a run used, where they came from, and what
//! their authors ask for (license, acknowledgement, citation).
//!
//! ```text
//! ArtifactRecord (accessed) ─┐                                  ┌─▶ to_markdown()  provenance.md   (people)
//!                            ├─▶ Report { schema, artifacts, ──┼─▶ to_json()      provenance.json (tools,
//! DeclaredArtifact (unused) ─┘           declared_not_accessed } │                   docs/report-schema.md)
//!                                                               └─▶ to_bibtex()    provenance.bib  (papers)
//! ```

mod bibtex;
mod files;
mod markdown;

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::time::SystemTime;

use clima_artifact_manifest::GitTreeSha1;
use serde::{Deserialize, Serialize};

use crate::record::{ArtifactRecord, CallSite};

pub use files::ReportPaths;

/// The schema identifier written into every JSON report; readers accept exactly this version.
pub const SCHEMA: &str = "clima-artifacts-report/1";

/// What wrote the report (this crate and its version).
pub const GENERATOR: &str = concat!("clima-artifact-runtime ", env!("CARGO_PKG_VERSION"));

/// An artifact that a `clima_artifact!` call site in this binary can use but that this run did
/// not access (the runtime takes them from the binary's inventory of call sites).
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
        let artifacts = crate::record::merge_records(records);
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
        files::write_report(self, files::Target::Dir(dir.as_ref(), ""))
    }

    /// Writes the three files under a file prefix instead of a folder: `out/run7` gives
    /// `out/run7.md`, `out/run7.json` and `out/run7.bib` (the parent folder is created if
    /// needed), for runs that keep several reports side by side.
    pub fn write_with_prefix(&self, prefix: impl AsRef<Path>) -> io::Result<ReportPaths> {
        files::write_report(self, files::Target::Prefix(prefix.as_ref()))
    }

    /// Writes the three files as `provenance.rank<rank>.{md,json,bib}` into the folder `dir`:
    /// what one rank writes of its own records when it cannot gather the others' (a
    /// panicking rank of a collective run).
    pub fn write_rank_files(&self, dir: impl AsRef<Path>, rank: usize) -> io::Result<ReportPaths> {
        files::write_report(
            self,
            files::Target::Dir(dir.as_ref(), &format!(".rank{rank}")),
        )
    }
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
