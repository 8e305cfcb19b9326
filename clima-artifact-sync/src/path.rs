//! [`PathStorage`]: a folder as storage (a mounted archive filesystem, or a `file://` URL).
//!
//! ```text
//! <root>/<key>                                  complete objects
//! <root>/<dir>/.<name>.clima-upload-<pid>-<n>   an upload in progress (or killed): never listed
//! ```
//!
//! A put writes a temporary file next to its destination, syncs it, then renames it over the
//! key, so the key shows the old or the new content, never a part. A killed upload leaves only
//! its temporary file, which [`PathStorage::list`](Storage::list) and reads never show.

use std::collections::HashSet;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::SyncError;
use crate::storage::{Storage, StoredObject, check_key};

/// Marks temporary upload files (they start with `.` and contain this).
const UPLOAD_MARK: &str = ".clima-upload-";

/// A folder used as [`Storage`]; keys are relative paths below it.
#[derive(Debug, Clone)]
pub struct PathStorage {
    root: PathBuf,
}

impl PathStorage {
    /// Storage rooted at `root` (made absolute; created on the first upload).
    pub fn new(root: impl Into<PathBuf>) -> Result<PathStorage, SyncError> {
        let root = root.into();
        let root = std::path::absolute(&root).map_err(|e| SyncError::io("resolve", &root, e))?;
        if root.exists() && !root.is_dir() {
            return Err(SyncError::BadStorage {
                url: root.display().to_string(),
                reason: "it exists but is not a folder; give a folder to store into".to_owned(),
            });
        }
        Ok(PathStorage { root })
    }

    /// The root folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn path_of(&self, key: &str) -> Result<PathBuf, SyncError> {
        check_key(key)?;
        Ok(self.root.join(key))
    }

    /// Writes what `fill` produces to `key` through a temporary file and a rename.
    fn put_with(
        &self,
        key: &str,
        fill: impl FnOnce(&mut File) -> io::Result<u64>,
    ) -> Result<u64, SyncError> {
        let dest = self.path_of(key)?;
        let dir = dest.parent().unwrap_or(&self.root);
        fs::create_dir_all(dir).map_err(|e| SyncError::io("create storage folder", dir, e))?;
        let name = dest
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("object");
        reclaim_once(dir);
        let tmp = dir.join(clima_artifact_fs::temp_name(name, UPLOAD_MARK));
        let result = (|| {
            // Exclusively: never truncate or write through anything planted at the name.
            let mut file = crate::storage::create_download_file(&tmp)
                .map_err(|e| io::Error::other(e.to_string()))?;
            let n = fill(&mut file)?;
            file.flush()?;
            file.sync_all()?;
            Ok(n)
        })();
        let n = match result {
            Ok(n) => n,
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                return Err(SyncError::io("write storage object", &dest, e));
            }
        };
        fs::rename(&tmp, &dest).map_err(|e| {
            let _ = fs::remove_file(&tmp);
            SyncError::io("move into place", &dest, e)
        })?;
        Ok(n)
    }
}

fn is_upload_temp(name: &str) -> bool {
    clima_artifact_fs::is_temp_name(name, UPLOAD_MARK)
}

/// Removes, once per process and folder, the upload temp files of killed processes in `dir`.
fn reclaim_once(dir: &Path) {
    static DONE: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);
    let mut done = DONE.lock().unwrap_or_else(|p| p.into_inner());
    if done
        .get_or_insert_with(HashSet::new)
        .insert(dir.to_path_buf())
    {
        let n = clima_artifact_fs::reclaim_stale_temps(dir, UPLOAD_MARK);
        if n > 0 {
            clima_comms::notice::info(&format!(
                "removed {n} upload temp file(s) of killed syncs in `{}`",
                dir.display()
            ));
        }
    }
}

impl Storage for PathStorage {
    fn url(&self) -> String {
        format!("file://{}", self.root.display())
    }

    fn put_file(&self, key: &str, local: &Path) -> Result<u64, SyncError> {
        let mut src = File::open(local).map_err(|e| SyncError::io("open", local, e))?;
        self.put_with(key, |out| io::copy(&mut src, out))
    }

    fn put_bytes(&self, key: &str, bytes: &[u8]) -> Result<(), SyncError> {
        self.put_with(key, |out| out.write_all(bytes).map(|()| bytes.len() as u64))
            .map(|_| ())
    }

    fn get_file(&self, key: &str, dest: &Path, max_bytes: u64) -> Result<u64, SyncError> {
        use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
        let src_path = self.path_of(key)?;
        let not_regular = |what: &str| SyncError::NotARegularFile {
            url: self.url(),
            key: key.to_owned(),
            what: what.to_owned(),
        };
        // The store may be shared: never follow a symlink planted as an object, never block on
        // a fifo, read only regular files, and at most what the index records.
        let src = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(&src_path)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ELOOP) => not_regular("a symlink"),
                _ => SyncError::io("open", &src_path, e),
            })?;
        let file_type = src
            .metadata()
            .map_err(|e| SyncError::io("inspect", &src_path, e))?
            .file_type();
        if !file_type.is_file() {
            return Err(not_regular(if file_type.is_fifo() {
                "a fifo"
            } else if file_type.is_dir() {
                "a folder"
            } else {
                "a device or socket"
            }));
        }
        let mut out = crate::storage::create_download_file(dest)?;
        let n = io::copy(&mut (&src).take(max_bytes.saturating_add(1)), &mut out)
            .map_err(|e| SyncError::io("copy into", dest, e))?;
        if n > max_bytes {
            return Err(SyncError::LargerThanRecorded {
                url: self.url(),
                key: key.to_owned(),
                max: max_bytes,
            });
        }
        Ok(n)
    }

    fn get_bytes(&self, key: &str) -> Result<Option<Vec<u8>>, SyncError> {
        let path = self.path_of(key)?;
        match fs::read(&path) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(SyncError::io("read", &path, e)),
        }
    }

    fn list(&self, prefix: &str) -> Result<Vec<StoredObject>, SyncError> {
        let mut out = Vec::new();
        if !self.root.exists() {
            return Ok(out);
        }
        let mut stack = vec![(self.root.clone(), String::new())];
        while let Some((dir, rel)) = stack.pop() {
            let entries = fs::read_dir(&dir).map_err(|e| SyncError::io("list", &dir, e))?;
            for entry in entries {
                let entry = entry.map_err(|e| SyncError::io("list", &dir, e))?;
                let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                    continue;
                };
                if is_upload_temp(&name) {
                    continue;
                }
                let key = if rel.is_empty() {
                    name
                } else {
                    format!("{rel}/{name}")
                };
                let meta = entry
                    .metadata()
                    .map_err(|e| SyncError::io("stat", entry.path(), e))?;
                if meta.is_dir() {
                    stack.push((entry.path(), key));
                } else if meta.is_file() && key.starts_with(prefix) {
                    out.push(StoredObject {
                        key,
                        size: meta.len(),
                    });
                }
            }
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    fn download_url(&self, key: &str) -> Option<String> {
        self.path_of(key)
            .ok()
            .map(|p| format!("file://{}", p.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_get_list() {
        let dir = tempfile::tempdir().unwrap();
        let s = PathStorage::new(dir.path().join("store")).unwrap();
        assert_eq!(s.list("").unwrap(), vec![]);
        s.put_bytes("a/b.txt", b"hello").unwrap();
        let local = dir.path().join("local.bin");
        fs::write(&local, vec![7u8; 1000]).unwrap();
        assert_eq!(s.put_file("c.bin", &local).unwrap(), 1000);
        assert_eq!(s.get_bytes("a/b.txt").unwrap().unwrap(), b"hello");
        assert_eq!(s.get_bytes("nope").unwrap(), None);
        // A leftover temp file of a killed upload is invisible.
        fs::write(dir.path().join("store/a/.b.txt.clima-upload-1-1"), b"hal").unwrap();
        let keys: Vec<_> = s.list("").unwrap().into_iter().map(|o| o.key).collect();
        assert_eq!(keys, ["a/b.txt", "c.bin"]);
        assert_eq!(s.list("a/").unwrap().len(), 1);
        let dest = dir.path().join("back.bin");
        assert_eq!(s.get_file("c.bin", &dest, 1000).unwrap(), 1000);
        assert_eq!(fs::read(&dest).unwrap(), vec![7u8; 1000]);
        assert!(s.put_bytes("../escape", b"x").is_err());
        assert_eq!(
            s.download_url("c.bin").unwrap(),
            format!("file://{}/store/c.bin", dir.path().display())
        );
    }

    #[test]
    fn a_file_is_not_a_storage_folder() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        fs::write(&f, b"x").unwrap();
        let e = PathStorage::new(&f).unwrap_err().to_string();
        assert!(e.contains("is not a folder"), "{e}");
    }
}
