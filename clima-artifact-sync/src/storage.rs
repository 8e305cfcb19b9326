//! The [`Storage`] trait (durable storage for run files and published tarballs), storage URLs,
//! and helpers shared by the backends.
//!
//! A storage is a flat key space rooted at a URL: keys are `/`-separated relative paths such as
//! `checkpoints/step-100/state.bin`. Every backend guarantees that a key appears **whole or not
//! at all**: a reader never sees a half-written object, even if the writer is killed.
//!
//! | URL                           | backend                                   | feature |
//! |-------------------------------|-------------------------------------------|---------|
//! | `/archive/run1`, `file:///..` | [`PathStorage`](crate::PathStorage)       | always  |
//! | `s3://bucket/prefix`          | `ObjectStorage` (S3-compatible)           | `s3`    |

use clima_artifact_progress::Reporting;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::SyncError;

/// One object in a [`Storage`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredObject {
    /// The key, relative to the storage root.
    pub key: String,
    /// Size in bytes.
    pub size: u64,
}

/// The largest object [`Storage::get_bytes`] reads (the sync manifest: about 200 bytes per
/// stored file, so some 300,000 files). A larger one, or one that never ends (a planted link
/// to `/dev/zero`), is [`SyncError::TooLarge`] after this many bytes, never read whole.
pub const MAX_INDEX_BYTES: u64 = 64 << 20;

/// Creates `dest` for a download: exclusively (never truncating or following anything already
/// there), owner read/write until it is renamed into place.
pub(crate) fn create_download_file(dest: &Path) -> Result<std::fs::File, SyncError> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(dest)
        .map_err(|e| SyncError::io("create", dest, e))
}

/// Durable storage for a run's files or for published tarballs.
///
/// Methods block. Implementations must make every put atomic (the key shows the old object or
/// the complete new one, never a partial one) and must be usable from several threads.
pub trait Storage: Send + Sync + fmt::Debug {
    /// The URL of the storage root, for messages (e.g. `s3://bucket/run1`).
    fn url(&self) -> String;
    /// Uploads the local file at `local` to `key`, whole or not at all; returns the bytes sent.
    fn put_file(&self, key: &str, local: &Path) -> Result<u64, SyncError>;
    /// Stores `bytes` at `key`, whole or not at all.
    fn put_bytes(&self, key: &str, bytes: &[u8]) -> Result<(), SyncError>;
    /// Downloads `key` into `dest`, a file that must not exist yet (created exclusively; the
    /// caller renames it into place); returns the bytes received. A missing key is an error;
    /// more than `max_bytes` is [`SyncError::LargerThanRecorded`] (reading stops one byte past
    /// it); an object that is not a regular file (a planted symlink, fifo or device) is
    /// [`SyncError::NotARegularFile`] and is never read.
    fn get_file(&self, key: &str, dest: &Path, max_bytes: u64) -> Result<u64, SyncError>;
    /// Reads a small object whole; `None` if the key does not exist. More than
    /// [`MAX_INDEX_BYTES`] is [`SyncError::TooLarge`] (reading stops one byte past it); in a
    /// folder store, an object that is not a regular file is [`SyncError::NotARegularFile`]
    /// and is never read.
    fn get_bytes(&self, key: &str) -> Result<Option<Vec<u8>>, SyncError>;
    /// Every complete object whose key starts with `prefix` (`""` for all), sorted by key.
    fn list(&self, prefix: &str) -> Result<Vec<StoredObject>, SyncError>;
    /// A URL the install pipeline can download `key` from, if the storage knows one
    /// (`file://` for paths; S3 objects need `--public-url`).
    fn download_url(&self, key: &str) -> Option<String>;
}

/// `Box<S>` and `Arc<S>` are storages when `S` is: every method forwards to `S`.
macro_rules! forward_storage {
    ($($ptr:ident),*) => {$(
        impl<S: Storage + ?Sized> Storage for $ptr<S> {
            fn url(&self) -> String {
                (**self).url()
            }
            fn put_file(&self, key: &str, local: &Path) -> Result<u64, SyncError> {
                (**self).put_file(key, local)
            }
            fn put_bytes(&self, key: &str, bytes: &[u8]) -> Result<(), SyncError> {
                (**self).put_bytes(key, bytes)
            }
            fn get_file(&self, key: &str, dest: &Path, max_bytes: u64) -> Result<u64, SyncError> {
                (**self).get_file(key, dest, max_bytes)
            }
            fn get_bytes(&self, key: &str) -> Result<Option<Vec<u8>>, SyncError> {
                (**self).get_bytes(key)
            }
            fn list(&self, prefix: &str) -> Result<Vec<StoredObject>, SyncError> {
                (**self).list(prefix)
            }
            fn download_url(&self, key: &str) -> Option<String> {
                (**self).download_url(key)
            }
        }
    )*};
}
forward_storage!(Box, Arc);

/// Opens the storage named by `url`: a path or `file://` URL ([`crate::PathStorage`]), or, with
/// the `s3` feature, `s3://bucket/prefix` (endpoint and credentials from the `AWS_*` variables).
/// Its notices are told through `reporting`.
pub fn open_storage(url: &str, reporting: &Reporting) -> Result<Box<dyn Storage>, SyncError> {
    let url = url.trim();
    if url.is_empty() {
        return Err(bad_url(
            url,
            "it is empty; give a folder, `file:///path` or `s3://bucket/prefix`",
        ));
    }
    if let Some(path) = file_url_path(url) {
        return Ok(Box::new(
            crate::PathStorage::new(path)?.with_reporting(reporting.clone()),
        ));
    }
    if let Some((scheme, _)) = url.split_once("://") {
        return match scheme {
            #[cfg(feature = "s3")]
            "s3" | "s3a" => Ok(Box::new(crate::ObjectStorage::s3(url)?)),
            #[cfg(not(feature = "s3"))]
            "s3" | "s3a" => Err(bad_url(
                url,
                "this build has no S3 support: the `clima-artifacts` CLI has it by default \
                 (`cargo install --path clima-artifacts-cli`, without `--no-default-features`); \
                 a program that syncs through clima-artifact-sync needs that crate's feature `s3`",
            )),
            other => Err(bad_url(
                url,
                &format!(
                    "the scheme `{other}://` is not supported; use a folder, `file:///path` or \
                     `s3://bucket/prefix`"
                ),
            )),
        };
    }
    Ok(Box::new(
        crate::PathStorage::new(PathBuf::from(url))?.with_reporting(reporting.clone()),
    ))
}

/// The local path of a `file://` URL (`file:///abs` or `file://localhost/abs`), else `None`.
pub(crate) fn file_url_path(url: &str) -> Option<PathBuf> {
    let rest = url.strip_prefix("file://")?;
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    Some(PathBuf::from(rest))
}

pub(crate) fn bad_url(url: &str, why: &str) -> SyncError {
    SyncError::BadStorage {
        url: url.to_owned(),
        reason: why.to_owned(),
    }
}

/// Checks that `key` is a clean relative `/`-separated path (no `..`, no empty or `.`
/// segments, no leading `/`, no NUL or backslash).
pub fn check_key(key: &str) -> Result<(), SyncError> {
    let bad = key.is_empty()
        || key.starts_with('/')
        || key.contains('\0')
        || key.contains('\\')
        || key
            .split('/')
            .any(|s| s.is_empty() || s == "." || s == "..");
    if bad {
        return Err(SyncError::BadKey {
            key: key.to_owned(),
        });
    }
    Ok(())
}

/// A [`SyncError::Storage`] about `key` in `storage`.
#[cfg_attr(not(feature = "s3"), allow(dead_code))]
pub(crate) fn storage_error(
    storage: &str,
    action: &str,
    key: &str,
    why: impl fmt::Display,
) -> SyncError {
    SyncError::Storage {
        storage: storage.to_owned(),
        action: action.to_owned(),
        key: key.to_owned(),
        reason: why.to_string(),
    }
}

/// A view of a storage under a sub-prefix (used for per-rank sync: `rank-3/...`).
#[derive(Debug)]
pub(crate) struct Prefixed<'s> {
    pub(crate) inner: &'s dyn Storage,
    pub(crate) prefix: String,
}

impl Prefixed<'_> {
    fn key(&self, key: &str) -> String {
        format!("{}/{key}", self.prefix)
    }
}

impl Storage for Prefixed<'_> {
    fn url(&self) -> String {
        format!("{}/{}", self.inner.url().trim_end_matches('/'), self.prefix)
    }
    fn put_file(&self, key: &str, local: &Path) -> Result<u64, SyncError> {
        self.inner.put_file(&self.key(key), local)
    }
    fn put_bytes(&self, key: &str, bytes: &[u8]) -> Result<(), SyncError> {
        self.inner.put_bytes(&self.key(key), bytes)
    }
    fn get_file(&self, key: &str, dest: &Path, max_bytes: u64) -> Result<u64, SyncError> {
        self.inner.get_file(&self.key(key), dest, max_bytes)
    }
    fn get_bytes(&self, key: &str) -> Result<Option<Vec<u8>>, SyncError> {
        self.inner.get_bytes(&self.key(key))
    }
    fn list(&self, prefix: &str) -> Result<Vec<StoredObject>, SyncError> {
        let own = format!("{}/", self.prefix);
        Ok(self
            .inner
            .list(&format!("{own}{prefix}"))?
            .into_iter()
            .filter_map(|o| {
                Some(StoredObject {
                    key: o.key.strip_prefix(&own)?.to_owned(),
                    size: o.size,
                })
            })
            .collect())
    }
    fn download_url(&self, key: &str) -> Option<String> {
        self.inner.download_url(&self.key(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_checked() {
        for good in ["a", "a/b.txt", "ckpt/step-1/x.bin", ".hidden/x"] {
            check_key(good).unwrap();
        }
        for bad in ["", "/a", "a//b", "a/../b", "./a", "a\\b", "a\0b", "a/"] {
            let e = check_key(bad).unwrap_err();
            assert!(
                e.to_string().contains("not a valid storage key"),
                "{bad}: {e}"
            );
        }
        // A key from a planted index is printed escaped.
        let e = check_key("a/\u{1b}[2J/../b").unwrap_err().to_string();
        assert!(e.starts_with("`a/\\u{1b}[2J/../b` is not a valid"), "{e}");
    }

    #[test]
    fn urls_pick_a_backend() {
        let dir = tempfile::tempdir().unwrap();
        let s = open_storage(
            &format!("file://{}", dir.path().display()),
            &clima_artifact_progress::Reporting::default(),
        )
        .unwrap();
        assert_eq!(s.url(), format!("file://{}", dir.path().display()));
        let s = open_storage(
            dir.path().to_str().unwrap(),
            &clima_artifact_progress::Reporting::default(),
        )
        .unwrap();
        assert!(s.url().starts_with("file://"));
        let e = open_storage("ftp://x/y", &clima_artifact_progress::Reporting::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("`ftp://` is not supported"), "{e}");
        let e = open_storage("  ", &clima_artifact_progress::Reporting::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("empty"), "{e}");
        #[cfg(not(feature = "s3"))]
        {
            let e = open_storage(
                "s3://bucket/p",
                &clima_artifact_progress::Reporting::default(),
            )
            .unwrap_err()
            .to_string();
            assert!(
                e.contains("without `--no-default-features`")
                    && e.contains("clima-artifact-sync needs that crate's feature `s3`"),
                "{e}"
            );
        }
    }
}
