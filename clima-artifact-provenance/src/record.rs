//! The records of the report: one per accessed artifact, with where its data came from and
//! who accessed it, merged across ranks.

use std::collections::BTreeMap;

use clima_artifact_manifest::GitTreeSha1;
use serde::{Deserialize, Serialize};

/// Where the data of an accessed artifact came from, as stored in records and reports: the
/// one [`Origin`](clima_artifact_manifest::Origin) type, re-exported under its earlier name
/// (the report schema, `docs/report-schema.md`, calls it `Origin`).
pub use clima_artifact_manifest::Origin as RecordedOrigin;

/// A source location of a `clima_artifact!` call.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct CallSite {
    /// Source file as `file!()` reports it.
    pub file: String,
    /// 1-based line.
    pub line: u32,
}

impl std::fmt::Display for CallSite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// Everything known about the accesses to one artifact (one `(name, hash, manifest)`), in this
/// process or merged over all ranks ([`access_log::snapshot`](crate::access_log::snapshot) and
/// the runtime's `report::report_collective`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArtifactRecord {
    /// Artifact name as written in the manifest.
    pub name: String,
    /// Its git tree SHA-1.
    pub git_tree_sha1: GitTreeSha1,
    /// The manifest that defined it (lossy UTF-8).
    pub manifest: String,
    /// The resolved directory of the first access (lossy UTF-8).
    pub path: String,
    /// Where the data came from (a download in this run wins over other accesses).
    pub origin: RecordedOrigin,
    /// Number of successful resolutions (summed over ranks after gathering).
    pub accesses: u64,
    /// Time of the first access, RFC 3339 in UTC with milliseconds (`2024-05-01T12:00:00.000Z`).
    pub first_access: String,
    /// Distinct `clima_artifact!` call sites that resolved it, sorted.
    pub call_sites: Vec<CallSite>,
    /// Ranks that accessed it, sorted.
    pub ranks: Vec<usize>,
    /// Provenance metadata of the manifest entry (keys in `clima_artifact_manifest::metadata`).
    pub metadata: BTreeMap<String, String>,
    /// Nodes whose copy this run installed from bytes received over MPI (node-local mode),
    /// sorted; empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub received_by: Vec<String>,
}

impl ArtifactRecord {
    /// Folds another record of the same artifact into this one: accesses summed, call sites and
    /// ranks united, earliest first access kept, the more informative origin kept, metadata
    /// keys missing here taken from `other`.
    pub fn merge(&mut self, other: &ArtifactRecord) {
        self.accesses += other.accesses;
        if other.first_access < self.first_access {
            self.first_access.clone_from(&other.first_access);
        }
        self.origin.merge(&other.origin);
        self.call_sites.extend(other.call_sites.iter().cloned());
        self.call_sites.sort();
        self.call_sites.dedup();
        self.ranks.extend(other.ranks.iter().copied());
        self.ranks.sort_unstable();
        self.ranks.dedup();
        for (key, value) in &other.metadata {
            self.metadata
                .entry(key.clone())
                .or_insert_with(|| value.clone());
        }
        self.received_by.extend(other.received_by.iter().cloned());
        self.received_by.sort();
        self.received_by.dedup();
    }

    /// The key records are merged and sorted by: name, hash, manifest.
    pub fn key(&self) -> (&str, GitTreeSha1, &str) {
        (&self.name, self.git_tree_sha1, &self.manifest)
    }
}

/// Merges records of the same `(name, hash, manifest)` and sorts the result.
pub fn merge_records(records: impl IntoIterator<Item = ArtifactRecord>) -> Vec<ArtifactRecord> {
    let mut merged: BTreeMap<(String, GitTreeSha1, String), ArtifactRecord> = BTreeMap::new();
    for record in records {
        let key = (
            record.name.clone(),
            record.git_tree_sha1,
            record.manifest.clone(),
        );
        match merged.get_mut(&key) {
            Some(existing) => existing.merge(&record),
            None => {
                merged.insert(key, record);
            }
        }
    }
    merged.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn downloads_recorded_before_reused_bytes_were_still_read() {
        let old = r#"{"kind": "downloaded", "url": "u", "bytes": 10, "seconds": 0.5}"#;
        let read: RecordedOrigin = serde_json::from_str(old).unwrap();
        assert_eq!(
            read,
            RecordedOrigin::Downloaded {
                url: "u".into(),
                bytes: 10,
                received_bytes: None,
                reused_bytes: None,
                seconds: 0.5
            }
        );
        assert_eq!(
            serde_json::to_string(&read).unwrap(),
            old.replace(": ", ":").replace(", ", ",")
        );
    }
}
