//! The sync manifest: what was stored, with size, mtime and content hash per file.
//!
//! Kept twice, with the same content after each successful sync: in the storage at
//! [`INDEX_KEY`] (what restore reads) and in the run folder at `.clima-sync/index.json` (so a
//! sync only stats files and hashes those whose size or mtime changed).
//!
//! ```json
//! { "version": 1,
//!   "latest_checkpoint": "checkpoints/step-200",
//!   "checkpoints": ["checkpoints/step-100", "checkpoints/step-200"],
//!   "files": { "diag/energy.csv": { "size": 1234, "mtime_ns": 1700000000000000000,
//!                                   "sha256": "<64 hex>", "kind": "artifact" } } }
//! ```

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use clima_artifact_fs::printable;

use crate::SyncError;
use crate::storage::check_key;

/// Folder (in the run folder and in the storage) holding the sync manifest.
pub const STATE_DIR: &str = ".clima-sync";
/// The format version of the sync manifest this build writes and reads.
pub const VERSION: u32 = 1;
/// Key of the sync manifest in the storage (and its path in the run folder).
pub const INDEX_KEY: &str = ".clima-sync/index.json";

/// What a stored file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileKind {
    /// Part of a checkpoint folder (moves even when `sync_artifacts` is off).
    Checkpoint,
    /// An output artifact (diagnostics, logs, plots...).
    Artifact,
}

/// One stored file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileEntry {
    /// Size in bytes.
    pub size: u64,
    /// Modification time in nanoseconds since the Unix epoch, when it was stored.
    pub mtime_ns: u128,
    /// SHA-256 of the content, lower-case hex.
    pub sha256: String,
    /// Checkpoint or output artifact.
    pub kind: FileKind,
}

/// The sync manifest.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SyncIndex {
    /// Format version (1).
    pub version: u32,
    /// The checkpoint folder of the last `on_checkpoint`, relative to the run folder.
    pub latest_checkpoint: Option<String>,
    /// Every checkpoint folder stored so far, oldest first.
    pub checkpoints: Vec<String>,
    /// Stored files by relative path (`/`-separated).
    pub files: BTreeMap<String, FileEntry>,
    /// In the run folder's copy: the URL of the store it describes. A copy that names another
    /// store (or none, written by an older version) is not used to decide what is unchanged;
    /// the index of the store being pushed to is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<String>,
}

impl SyncIndex {
    /// Parses an index; `what` names its origin for the error message.
    /// Beyond its JSON, an index is checked for what a damaged or planted one could get
    /// wrong: every hash is 64 lower-case hex digits. An index of another format version is
    /// [`SyncError::IndexVersion`], which says to use the newer build, not to delete it.
    pub fn parse(bytes: &[u8], what: &str) -> Result<SyncIndex, SyncError> {
        let bad = |reason: String| SyncError::BadIndex {
            origin: what.to_owned(),
            reason,
        };
        let index: SyncIndex = serde_json::from_slice(bytes).map_err(|e| bad(e.to_string()))?;
        if index.version != VERSION {
            return Err(SyncError::IndexVersion {
                origin: what.to_owned(),
                version: index.version,
                supported: VERSION,
            });
        }
        let not_hex = |h: &str| {
            h.len() != 64
                || !h
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        if let Some((rel, entry)) = index.files.iter().find(|(_, e)| not_hex(&e.sha256)) {
            return Err(bad(format!(
                "the `sha256` of `{}` is `{}`, not 64 lower-case hex digits",
                printable(rel),
                printable(&entry.sha256)
            )));
        }
        let named = index
            .latest_checkpoint
            .iter()
            .map(|c| ("latest_checkpoint", c));
        let listed = index.checkpoints.iter().map(|c| ("checkpoints", c));
        if let Some((key, c)) = named.chain(listed).find(|(_, c)| !is_checkpoint_name(c)) {
            return Err(bad(format!(
                "its `{key}` names `{}`, which is not a folder inside the run folder (a \
                 relative path like `checkpoints/step-200`, without `.` or `..` segments, \
                 outside `{STATE_DIR}`)",
                printable(c)
            )));
        }
        Ok(index)
    }

    /// The index as pretty JSON.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec_pretty(self).unwrap_or_default();
        v.push(b'\n');
        v
    }

    /// Whether `rel` is inside one of the known checkpoint folders.
    pub fn in_checkpoint(&self, rel: &str) -> bool {
        self.checkpoints.iter().any(|c| is_under(rel, c))
    }
}

/// Whether `name` can name a checkpoint folder: a clean relative path inside the run folder
/// (what [`RunSync::on_checkpoint`](crate::RunSync::on_checkpoint) records), never the run
/// folder itself, a path out of it (`/etc`, `../other-run`) or the sync state's folder. A
/// restore resumes from the folder it names, so a planted index must not choose another.
pub(crate) fn is_checkpoint_name(name: &str) -> bool {
    check_key(name).is_ok() && name.split('/').next() != Some(STATE_DIR)
}

/// Whether the relative path `rel` is `dir` or below it.
pub fn is_under(rel: &str, dir: &str) -> bool {
    dir.is_empty()
        || rel == dir
        || rel
            .strip_prefix(dir)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// Modification time of `meta` in nanoseconds since the epoch (0 if unknown).
pub fn mtime_ns(meta: &std::fs::Metadata) -> u128 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos())
}

/// Sets the modification time of the open file `file` to `ns` since the epoch.
pub fn set_mtime_ns(file: &File, ns: u128) -> io::Result<()> {
    let secs = (ns / 1_000_000_000) as u64;
    let nanos = (ns % 1_000_000_000) as u32;
    file.set_modified(SystemTime::UNIX_EPOCH + std::time::Duration::new(secs, nanos))
}

/// SHA-256 of a file, lower-case hex.
pub fn sha256_file(path: &Path) -> Result<String, SyncError> {
    let mut file = File::open(path).map_err(|e| SyncError::io("open", path, e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => hasher.update(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(SyncError::io("read", path, e)),
        }
    }
    Ok(hex::encode(hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn under() {
        assert!(is_under("ckpt/a", "ckpt"));
        assert!(is_under("ckpt", "ckpt"));
        assert!(!is_under("ckpt2/a", "ckpt"));
        assert!(is_under("x", ""));
    }

    #[test]
    fn round_trip_and_bad_json() {
        let mut i = SyncIndex {
            version: 1,
            ..Default::default()
        };
        i.files.insert(
            "a".into(),
            FileEntry {
                size: 1,
                mtime_ns: 2,
                sha256: "0a".repeat(32),
                kind: FileKind::Artifact,
            },
        );
        assert_eq!(SyncIndex::parse(&i.to_bytes(), "x").unwrap(), i);
        let e = SyncIndex::parse(b"{nope", "in `s3://b/p`").unwrap_err();
        assert!(e.to_string().contains("in `s3://b/p` is not valid"), "{e}");
    }

    /// A damaged or planted index is refused by name before anything is restored: a hash that
    /// is not hex (printed escaped), an upper-case one, a version this build does not read.
    #[test]
    fn bad_hashes_and_versions_are_refused() {
        let with = |sha: &str, version: u32| {
            let mut i = SyncIndex {
                version,
                ..Default::default()
            };
            let entry = FileEntry {
                size: 1,
                mtime_ns: 2,
                sha256: sha.into(),
                kind: FileKind::Artifact,
            };
            i.files.insert("diag/e\u{1b}.csv".into(), entry);
            SyncIndex::parse(&i.to_bytes(), "`index.json` in `/store`")
        };
        let e = with(&"0a".repeat(31), 1).unwrap_err().to_string();
        assert!(
            e.contains("the `sha256` of `diag/e\\u{1b}.csv` is `0a0a")
                && e.contains("not 64 lower-case hex digits")
                && e.contains("`index.json` in `/store`"),
            "{e}"
        );
        let e = with(&format!("{}\u{1b}[2J", "0".repeat(59)), 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("\\u{1b}[2J") && !e.contains('\u{1b}'), "{e}");
        assert!(with(&"0A".repeat(32), 1).is_err());
        let e = with(&"0a".repeat(32), 2).unwrap_err().to_string();
        assert!(
            e.contains(
                "is of format version 2, which this build does not read (it reads version 1)"
            ) && e.contains("keep the manifest")
                && !e.contains("delete it"),
            "{e}"
        );
        with(&"0a".repeat(32), 1).unwrap();
    }
}
