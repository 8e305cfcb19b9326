//! The global provenance registry: every artifact access in this process.
//!
//! Every code path of the runtime that resolves an artifact (its `Artifacts` API, the
//! `clima_artifact!` macro, the MPI collective path on every rank) calls [`record`] (or
//! [`record_ref`]) once per successful call; the runtime re-exports this module as
//! `clima_artifact_runtime::access_log`. The registry aggregates the events per artifact,
//! keyed by `(name, git-tree-sha1, manifest)`:
//!
//! ```text
//! AccessEvent ──record()──▶ REGISTRY: git-tree-sha1 ─▶ [ Entry { name, manifest,   (first event)
//!                                                               path, origin,     (first event; a
//!                                                                                  download wins)
//!                                                               accesses += 1,
//!                                                               call sites ∪= {file:line},
//!                                                               ranks ∪= {rank},
//!                                                               first access time, metadata } ]
//! snapshot() ──▶ Vec<ArtifactRecord>   (sorted by name, hash, manifest; serde for MPI gathering
//!                                       and the JSON report)
//! ```
//!
//! [`record`] sits on the hot path of repeated macro calls, so an access to an artifact that is
//! already known only takes the lock, finds the entry by hash without allocating, and bumps a
//! counter (plus a short linear check of the call-site and rank lists). Clock reads, string
//! formatting and copying happen only when an artifact is seen for the first time or in
//! [`snapshot`]. Callers that keep one event per call site use [`record_ref`], which does not
//! even need an owned event (measured with optimisations: about 35 ns per repeated access;
//! `record` with a freshly cloned event about 250 ns, mostly the clone).

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, Hasher};
use std::path::PathBuf;
use std::sync::{LazyLock, Mutex, PoisonError};
use std::time::SystemTime;

use clima_artifact_manifest::GitTreeSha1;

pub use crate::record::{ArtifactRecord, CallSite, RecordedOrigin, merge_records};

/// One access, as reported by the code paths that resolve artifacts (the `Artifacts` API, the
/// macro's static path, the MPI collective path).
#[derive(Debug, Clone)]
pub struct AccessEvent {
    /// Artifact name as written in the manifest.
    pub name: String,
    /// Its git tree SHA-1.
    pub hash: GitTreeSha1,
    /// The resolved directory (without any sub-path).
    pub path: PathBuf,
    /// Override, depot, downloaded now (with bytes and seconds) or received over MPI.
    pub origin: RecordedOrigin,
    /// `file:line` of the `clima_artifact!` call, when known.
    pub call_site: Option<(&'static str, u32)>,
    /// The manifest that defined it.
    pub manifest: PathBuf,
    /// Provenance metadata keys of the entry (`license`, `citation`, ...).
    pub metadata: BTreeMap<String, String>,
    /// Rank of the calling process in its context (0 when serial).
    pub rank: usize,
}

/// The aggregate of one artifact inside the registry (cheap to update, converted to an
/// [`ArtifactRecord`] by [`snapshot`]).
#[derive(Debug)]
struct Entry {
    name: String,
    manifest: PathBuf,
    path: PathBuf,
    origin: RecordedOrigin,
    accesses: u64,
    first_access: SystemTime,
    call_sites: Vec<(&'static str, u32)>,
    ranks: Vec<usize>,
    metadata: BTreeMap<String, String>,
}

impl Entry {
    fn to_record(&self, hash: GitTreeSha1) -> ArtifactRecord {
        let mut call_sites: Vec<CallSite> = self
            .call_sites
            .iter()
            .map(|&(file, line)| CallSite {
                file: file.to_owned(),
                line,
            })
            .collect();
        call_sites.sort();
        call_sites.dedup();
        let mut ranks = self.ranks.clone();
        ranks.sort_unstable();
        ArtifactRecord {
            name: self.name.clone(),
            git_tree_sha1: hash,
            manifest: self.manifest.to_string_lossy().into_owned(),
            path: self.path.to_string_lossy().into_owned(),
            origin: self.origin.clone(),
            accesses: self.accesses,
            first_access: clima_artifact_fs::utc_timestamp(self.first_access),
            call_sites,
            ranks,
            metadata: self.metadata.clone(),
            received_by: match &self.origin {
                RecordedOrigin::Received { node, .. } => vec![node.clone()],
                _ => vec![],
            },
        }
    }
}

/// The registry proper; the process-wide instance is [`REGISTRY`]. Separate so unit tests can
/// use private instances.
#[derive(Debug, Default)]
struct Registry {
    /// Entries grouped by hash; the inner list almost always has one element (the same content
    /// under two names or in two manifests is rare), so it is scanned linearly.
    entries: Mutex<HashMap<GitTreeSha1, Vec<Entry>, BuildDigestHasher>>,
}

/// Hashing for keys that are already uniformly distributed digests (git tree SHA-1s): folds the
/// bytes into a `u64` instead of running SipHash over them on every access.
#[derive(Debug, Default, Clone, Copy)]
struct BuildDigestHasher;

impl BuildHasher for BuildDigestHasher {
    type Hasher = DigestHasher;
    fn build_hasher(&self) -> DigestHasher {
        DigestHasher(0)
    }
}

/// See [`BuildDigestHasher`].
#[derive(Debug)]
struct DigestHasher(u64);

impl Hasher for DigestHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(byte);
        }
    }
}

impl Registry {
    fn record(&self, event: &AccessEvent, rank: usize) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let group = entries.entry(event.hash).or_default();
        if let Some(entry) = group.iter_mut().find(|e| {
            // Byte comparison of the manifest path: `Path::eq` would parse components.
            e.name == event.name && e.manifest.as_os_str() == event.manifest.as_os_str()
        }) {
            // Fast path: a known artifact; nothing is allocated.
            entry.accesses += 1;
            if let Some(site) = event.call_site
                && !entry.call_sites.contains(&site)
            {
                entry.call_sites.push(site);
            }
            if !entry.ranks.contains(&rank) {
                entry.ranks.push(rank);
            }
            if matches!(event.origin, RecordedOrigin::Downloaded { .. })
                && !matches!(entry.origin, RecordedOrigin::Downloaded { .. })
            {
                entry.origin = event.origin.clone();
            }
            return;
        }
        group.push(Entry {
            name: event.name.clone(),
            manifest: event.manifest.clone(),
            path: event.path.clone(),
            origin: event.origin.clone(),
            accesses: 1,
            first_access: SystemTime::now(),
            call_sites: event.call_site.into_iter().collect(),
            ranks: vec![rank],
            metadata: event.metadata.clone(),
        });
    }

    fn snapshot(&self) -> Vec<ArtifactRecord> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let mut records: Vec<ArtifactRecord> = entries
            .iter()
            .flat_map(|(hash, group)| group.iter().map(|entry| entry.to_record(*hash)))
            .collect();
        drop(entries);
        records.sort_by(|a, b| a.key().cmp(&b.key()));
        records
    }

    fn clear(&self) {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

/// The process-wide registry.
static REGISTRY: LazyLock<Registry> = LazyLock::new(Registry::default);

/// Records an access in the process-wide registry. Cheap and thread-safe.
pub fn record(event: AccessEvent) {
    REGISTRY.record(&event, event.rank);
}

/// Like [`record`] with `rank` in place of `event.rank`, for callers that keep one event and
/// report it on every access (the macro's per-call-site cache): a repeated access allocates
/// nothing; the event is copied only the first time its artifact is seen.
///
/// ```
/// # use clima_artifact_provenance::access_log::{self, AccessEvent, RecordedOrigin};
/// # let cached = AccessEvent { name: "era5".into(), hash: clima_artifact_manifest::GitTreeSha1([7; 20]),
/// #     path: "/depot/artifacts/x".into(), origin: RecordedOrigin::Depot, call_site: Some(("src/main.rs", 3)),
/// #     manifest: "/model/Artifacts.toml".into(), metadata: Default::default(), rank: 0 };
/// for step in 0..3 {
///     access_log::record_ref(&cached, 0);
/// }
/// let era5 = access_log::snapshot().into_iter().find(|r| r.name == "era5").unwrap();
/// assert_eq!(era5.accesses, 3);
/// ```
pub fn record_ref(event: &AccessEvent, rank: usize) {
    REGISTRY.record(event, rank);
}

/// Every artifact accessed in this process so far, sorted by name, hash and manifest.
pub fn snapshot() -> Vec<ArtifactRecord> {
    REGISTRY.snapshot()
}

/// Forgets every recorded access (for tests that need a clean registry).
#[doc(hidden)]
pub fn clear() {
    REGISTRY.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(byte: u8) -> GitTreeSha1 {
        GitTreeSha1([byte; 20])
    }

    fn event(name: &str, h: u8, site: Option<(&'static str, u32)>, rank: usize) -> AccessEvent {
        AccessEvent {
            name: name.into(),
            hash: hash(h),
            path: PathBuf::from(format!("/depot/artifacts/{}", hash(h))),
            origin: RecordedOrigin::Depot,
            call_site: site,
            manifest: PathBuf::from("/model/Artifacts.toml"),
            metadata: BTreeMap::from([("license".to_owned(), "CC0-1.0".to_owned())]),
            rank,
        }
    }

    #[test]
    fn aggregates_per_name_hash_and_manifest() {
        let registry = Registry::default();
        registry.record(&event("b", 2, Some(("src/main.rs", 10)), 0), 0);
        registry.record(&event("a", 1, Some(("src/main.rs", 12)), 1), 1);
        registry.record(&event("a", 1, Some(("src/main.rs", 12)), 0), 0);
        registry.record(&event("a", 1, Some(("src/lib.rs", 3)), 0), 0);
        registry.record(&event("a", 1, None, 0), 0);
        // Same content under another name is a separate record.
        registry.record(&event("a_copy", 1, None, 0), 0);
        let mut downloaded = event("b", 2, None, 0);
        downloaded.origin = RecordedOrigin::Downloaded {
            url: "https://example.org/b.tar.gz".into(),
            bytes: 10,
            received_bytes: Some(10),
            reused_bytes: Some(0),
            seconds: 0.5,
        };
        registry.record(&downloaded, 0);

        let records = registry.snapshot();
        let names: Vec<&str> = records.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["a", "a_copy", "b"]);
        let a = &records[0];
        assert_eq!(a.accesses, 4);
        assert_eq!(
            a.call_sites
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            ["src/lib.rs:3", "src/main.rs:12"]
        );
        assert_eq!(a.ranks, [0, 1]);
        assert_eq!(a.origin, RecordedOrigin::Depot);
        assert_eq!(a.metadata["license"], "CC0-1.0");
        assert!(a.first_access.ends_with('Z') && a.first_access.len() == 24);
        assert_eq!(records[1].accesses, 1);
        let b = &records[2];
        assert_eq!(b.accesses, 2);
        assert!(matches!(
            b.origin,
            RecordedOrigin::Downloaded { bytes: 10, .. }
        ));

        registry.clear();
        assert!(registry.snapshot().is_empty());
    }

    #[test]
    fn merge_sums_and_unites() {
        let registry = Registry::default();
        registry.record(&event("a", 1, Some(("src/main.rs", 12)), 0), 0);
        let mut rank0 = registry.snapshot().remove(0);
        let mut rank1 = rank0.clone();
        rank1.ranks = vec![1];
        rank1.accesses = 3;
        rank1.first_access = "1999-01-01T00:00:00.000Z".into();
        rank1.call_sites.push(CallSite {
            file: "src/other.rs".into(),
            line: 1,
        });
        rank1.origin = RecordedOrigin::Downloaded {
            url: "u".into(),
            bytes: 1,
            received_bytes: Some(1),
            reused_bytes: Some(0),
            seconds: 1.0,
        };
        rank1.metadata.insert("doi".into(), "10.1/x".into());
        rank0.merge(&rank1);
        assert_eq!(rank0.accesses, 4);
        assert_eq!(rank0.ranks, [0, 1]);
        assert_eq!(rank0.first_access, "1999-01-01T00:00:00.000Z");
        assert_eq!(rank0.call_sites.len(), 2);
        assert!(matches!(rank0.origin, RecordedOrigin::Downloaded { .. }));
        assert_eq!(rank0.metadata.len(), 2);

        let merged = merge_records([rank1.clone(), rank1.clone()]);
        assert_eq!(merged.len(), 1);
        assert_eq!(merged[0].accesses, 6);
    }
}
