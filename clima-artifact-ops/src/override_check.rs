//! Checking the folders overrides point at (`mirror --verify-overrides`): a folder's git tree
//! hash compared with the hash it overrides, remembered in the depot with the folder's size and
//! time, so that a weekly run hashes again only the folders that changed.
//!
//! ```text
//! <depot>/logs/clima_override_checks.json
//!   {"checks": [{"git_tree_sha1", "path", "bytes", "entries", "newest_s", "newest_ns",
//!                "sha1", "sha256", "checked"}, ...]}
//! ```
//!
//! A folder's "size and time" ([`Fingerprint`]) is its number of entries, the bytes of its
//! files and the newest modification or status change of any entry (the status change time
//! cannot be set back by a user, so content rewritten with its old modification time still
//! counts as changed). The file is read and written by the rule of files in a shared depot
//! (no other user's symlink followed, regular files only, bounded); a cache that cannot be read
//! is a warning and an empty cache. Whoever can write to the depot can also edit its
//! `Overrides.toml`, so the cache trusts no one more than the overrides already do;
//! `clima-artifacts verify --include-overrides` hashes every folder again.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use clima_artifact_manifest::validate::is_name_placeholder;
use clima_artifact_manifest::{ArtifactVariant, layout};
use clima_artifact_runtime::tree_hash::{Formats, tree_hashes};

/// The most a cache file may hold.
const MAX_CACHE_BYTES: u64 = 16 << 20;

/// What the check of an overridden artifact found.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum Check {
    /// The hash is a placeholder (the SHA-1 of a name): no content can match it, so the folder
    /// cannot be verified.
    Placeholder,
    /// Not asked for (`--verify-overrides` not given).
    NotVerified,
    /// The folder holds the content the manifests name.
    Verified {
        /// Known from the cache (the folder's size and time unchanged since it was hashed).
        cached: bool,
    },
    /// The folder holds other content.
    Mismatch {
        /// Its git-tree-sha1.
        actual: String,
        /// Its git-tree-sha256, when the manifest gives one.
        actual_sha256: Option<String>,
        /// Known from the cache.
        cached: bool,
    },
    /// The folder could not be hashed.
    Error {
        /// Why.
        message: String,
    },
}

/// A folder's size and time: what must be unchanged for an earlier hash of it to stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fingerprint {
    /// Entries below the folder, the folder included.
    pub entries: u64,
    /// Bytes of its regular files.
    pub bytes: u64,
    /// The newest modification or status change of any entry: seconds since the epoch.
    pub newest_s: i64,
    /// ... and nanoseconds.
    pub newest_ns: i64,
}

/// The [`Fingerprint`] of the folder `dir` (symlinks below it not followed).
pub fn fingerprint(dir: &Path) -> std::io::Result<Fingerprint> {
    let mut fp = Fingerprint {
        entries: 0,
        bytes: 0,
        newest_s: i64::MIN,
        newest_ns: 0,
    };
    let mut add = |m: &std::fs::Metadata| {
        fp.entries += 1;
        if m.is_file() {
            fp.bytes += m.len();
        }
        for t in [(m.mtime(), m.mtime_nsec()), (m.ctime(), m.ctime_nsec())] {
            if t > (fp.newest_s, fp.newest_ns) {
                (fp.newest_s, fp.newest_ns) = t;
            }
        }
    };
    add(&std::fs::metadata(dir)?);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)? {
            let path = entry?.path();
            let m = std::fs::symlink_metadata(&path)?;
            add(&m);
            if m.is_dir() {
                stack.push(path);
            }
        }
    }
    Ok(fp)
}

/// One folder hashed, as the cache keeps it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Record {
    git_tree_sha1: String,
    path: String,
    entries: u64,
    bytes: u64,
    newest_s: i64,
    newest_ns: i64,
    sha1: String,
    sha256: Option<String>,
    checked: String,
}

impl Record {
    fn fingerprint(&self) -> Fingerprint {
        Fingerprint {
            entries: self.entries,
            bytes: self.bytes,
            newest_s: self.newest_s,
            newest_ns: self.newest_ns,
        }
    }
}

#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct CacheFile {
    checks: Vec<Record>,
}

/// Checks overrides for one run of a mirror: the cache as it was, and what this run found.
#[derive(Debug)]
pub struct Checker {
    enabled: bool,
    file: PathBuf,
    known: Vec<Record>,
    found: Mutex<Vec<Record>>,
}

impl Checker {
    /// The checker of `depot` (its cache read when `enabled`), and a warning when the cache
    /// could not be read (it is then empty).
    pub fn load(depot: &Path, enabled: bool) -> (Checker, Option<String>) {
        let file = layout::override_checks_file(depot);
        let mut warning = None;
        let known = if enabled {
            match clima_artifact_fs::read_text_through_own_links(&file, MAX_CACHE_BYTES) {
                Ok(Some(text)) => match serde_json::from_str::<CacheFile>(&text) {
                    Ok(c) => c.checks,
                    Err(e) => {
                        warning = Some(format!(
                            "`{}` is not a cache of override checks ({e}); every override \
                             folder is hashed again and the file rewritten",
                            file.display()
                        ));
                        Vec::new()
                    }
                },
                Ok(None) => Vec::new(),
                Err(e) => {
                    warning = Some(format!(
                        "{}; every override folder is hashed again",
                        clima_artifact_fs::printable(&e.to_string())
                    ));
                    Vec::new()
                }
            }
        } else {
            Vec::new()
        };
        let checker = Checker {
            enabled,
            file,
            known,
            found: Mutex::new(Vec::new()),
        };
        (checker, warning)
    }

    /// Checks the folder `folder` that overrides `variant` (named `names`): a placeholder hash
    /// is never verified; without `--verify-overrides` nothing is hashed; else the folder is
    /// hashed unless the cache has it with the same size and time.
    pub fn check(&self, names: &[String], variant: &ArtifactVariant, folder: &Path) -> Check {
        let hash = variant.git_tree_sha1;
        if names.iter().any(|n| is_name_placeholder(n, &hash)) {
            return Check::Placeholder;
        }
        if !self.enabled {
            return Check::NotVerified;
        }
        let error = |e: std::io::Error| Check::Error {
            message: clima_artifact_fs::printable(&e.to_string()).into_owned(),
        };
        // A stable mount point may be a symlink: the folder it names is hashed.
        let dir = match std::fs::canonicalize(folder) {
            Ok(d) => d,
            Err(e) => return error(e),
        };
        let fp = match fingerprint(&dir) {
            Ok(fp) => fp,
            Err(e) => return error(e),
        };
        let want_sha256 = variant.git_tree_sha256.is_some();
        let path = folder.to_string_lossy().into_owned();
        let cached = self.known.iter().find(|r| {
            r.git_tree_sha1 == hash.to_hex()
                && r.path == path
                && r.fingerprint() == fp
                && (r.sha256.is_some() || !want_sha256)
        });
        let (record, was_cached) = match cached {
            Some(r) => (r.clone(), true),
            None => match tree_hashes(&dir, Formats::with_sha256(want_sha256)) {
                Ok(h) => (
                    Record {
                        git_tree_sha1: hash.to_hex(),
                        path,
                        entries: fp.entries,
                        bytes: fp.bytes,
                        newest_s: fp.newest_s,
                        newest_ns: fp.newest_ns,
                        sha1: h.sha1.to_hex(),
                        sha256: h.sha256.map(|s| s.to_hex()),
                        checked: clima_artifact_fs::utc_timestamp(std::time::SystemTime::now()),
                    },
                    false,
                ),
                Err(e) => return error(e),
            },
        };
        let sha256_ok = match &variant.git_tree_sha256 {
            Some(want) => record.sha256.as_deref() == Some(want.to_hex().as_str()),
            None => true,
        };
        let check = if record.sha1 == hash.to_hex() && sha256_ok {
            Check::Verified { cached: was_cached }
        } else {
            Check::Mismatch {
                actual: record.sha1.clone(),
                actual_sha256: record.sha256.clone().filter(|_| want_sha256),
                cached: was_cached,
            }
        };
        if let Ok(mut found) = self.found.lock() {
            found.push(record);
        }
        check
    }

    /// Writes the cache: what this run found, and what it kept of the earlier runs' (folders
    /// it did not look at). A warning when it cannot be written.
    pub fn save(self) -> Option<String> {
        let found = self.found.into_inner().unwrap_or_default();
        if !self.enabled || found.is_empty() {
            return None;
        }
        let mut checks: Vec<Record> = self
            .known
            .into_iter()
            .filter(|k| {
                !found
                    .iter()
                    .any(|f| f.git_tree_sha1 == k.git_tree_sha1 && f.path == k.path)
            })
            .collect();
        checks.extend(found);
        let text = match serde_json::to_string_pretty(&CacheFile { checks }) {
            Ok(t) => t,
            Err(e) => return Some(format!("cannot encode the cache of override checks: {e}")),
        };
        let written = self
            .file
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| clima_artifact_fs::reach(&self.file))
            .and_then(|r| {
                r.ok_or_else(|| std::io::Error::other("its folder does not exist"))?
                    .write_atomically(text.as_bytes())
            });
        written.err().map(|e| {
            format!(
                "cannot write `{}` ({}); the next run hashes the override folders again",
                self.file.display(),
                clima_artifact_fs::printable(&e.to_string())
            )
        })
    }
}
