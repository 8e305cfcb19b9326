//! [`PathStorage`]: a folder as storage (a mounted archive filesystem, or a `file://` URL).
//!
//! ```text
//! <root>/<key>                                            complete objects
//! <root>/<dir>/.<name>.clima-upload-<host>.<pid>.<random> an upload in progress (or
//!                                                         killed): never listed
//! ```
//!
//! A put writes a temporary file next to its destination, syncs it, then renames it over the
//! key, so the key shows the old or the new content, never a part. A killed upload leaves only
//! its temporary file, which [`PathStorage::list`](Storage::list) and reads never show.
//!
//! The folder may be shared with other users who can write to it. So below the root, every
//! folder of a key is reached through the one above it by descriptor without following a
//! symlink ([`clima_artifact_fs::Dir`]): a planted folder link is an error naming it
//! ([`SyncError::NotAFolder`]), never a way out of the store, and cannot be swapped in between
//! two steps of a put. The temporary file is created exclusively in the key's folder and
//! renamed within that same folder; objects and the sync manifest are opened without following
//! a symlink, without blocking on a fifo, only if they are regular files, and read up to the
//! size the index records ([`MAX_INDEX_BYTES`] for the manifest). The root itself is the
//! caller's: a symlink in the root's own path is followed.

use clima_artifact_progress::Reporting;
use std::collections::HashSet;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::notice::SyncEvent;
use clima_artifact_fs::{Dir, EntryKind, Unexpected};

use crate::SyncError;
use crate::storage::{MAX_INDEX_BYTES, Storage, StoredObject, check_key};

/// Marks temporary upload files (they start with `.` and contain this).
const UPLOAD_MARK: &str = ".clima-upload-";

/// A folder used as [`Storage`]; keys are relative paths below it.
#[derive(Debug, Clone)]
pub struct PathStorage {
    root: PathBuf,
    /// Where the removal of killed syncs' temp files is told.
    reporting: Reporting,
}

/// The folders of a checked key and its last component (`a/b/c.bin` -> `a/b`, `c.bin`).
fn split_key(key: &str) -> (&Path, &str) {
    match key.rsplit_once('/') {
        Some((dirs, name)) => (Path::new(dirs), name),
        None => (Path::new(""), key),
    }
}

impl PathStorage {
    /// The same storage, telling its notices (upload temp files of killed syncs removed)
    /// through `reporting` instead of the default.
    #[must_use]
    pub fn with_reporting(mut self, reporting: Reporting) -> PathStorage {
        self.reporting = reporting;
        self
    }

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
        Ok(PathStorage {
            root,
            reporting: Reporting::default(),
        })
    }

    /// The root folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn path_of(&self, key: &str) -> Result<PathBuf, SyncError> {
        check_key(key)?;
        Ok(self.root.join(key))
    }

    /// The error for `e`, met doing `action` on something of the store: a planted entry is
    /// [`SyncError::NotAFolder`] (on the way to `key`) or [`SyncError::NotARegularFile`] (the
    /// object itself), anything else an I/O error naming `path`.
    fn error(&self, action: &str, key: &str, path: &Path, e: io::Error) -> SyncError {
        match Unexpected::of(&e) {
            Some(u) if u.expected == EntryKind::Dir => SyncError::NotAFolder {
                url: self.url(),
                path: u.path.clone(),
                what: u.found.described().to_owned(),
            },
            Some(u) => SyncError::NotARegularFile {
                url: self.url(),
                key: key.to_owned(),
                what: match u.found {
                    EntryKind::Special => "a fifo, socket or device",
                    other => other.described(),
                }
                .to_owned(),
            },
            None => SyncError::io(action, path, e),
        }
    }

    /// The folder holding `key`, reached from the root without following a symlink; `None`
    /// when it (or the root) does not exist. With `create`, missing folders are made.
    fn key_dir(&self, key: &str, create: bool) -> Result<Option<Dir>, SyncError> {
        check_key(key)?;
        let (dirs, _) = split_key(key);
        if create {
            fs::create_dir_all(&self.root)
                .map_err(|e| SyncError::io("create storage folder", &self.root, e))?;
        }
        let root = match Dir::open(&self.root) {
            Ok(root) => root,
            Err(e) if !create && e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(SyncError::io("open storage folder", &self.root, e)),
        };
        let dir = if create {
            root.create_dirs(dirs, 0o777).map(Some)
        } else {
            root.open_dirs(dirs)
        };
        dir.map_err(|e| self.error("open storage folder", key, &self.root.join(dirs), e))
    }

    /// Writes what `fill` produces to `key` through a temporary file and a rename.
    fn put_with(
        &self,
        key: &str,
        fill: impl FnOnce(&mut File) -> io::Result<u64>,
    ) -> Result<u64, SyncError> {
        let dest = self.path_of(key)?;
        let (_, name) = split_key(key);
        let dir = self.key_dir(key, true)?.ok_or_else(|| {
            SyncError::io(
                "create storage folder",
                &dest,
                io::ErrorKind::NotFound.into(),
            )
        })?;
        reclaim_once(&dir, &self.reporting);
        let tmp = clima_artifact_fs::temp_name(name, UPLOAD_MARK);
        // Exclusively, in the key's own folder: never truncating or writing through anything
        // planted at the name. Only once it is ours is it removed on failure.
        let mut file = dir
            .create_new(&tmp, 0o644)
            .map_err(|e| SyncError::io("write storage object", &dest, e))?;
        let result = (|| {
            let n = fill(&mut file)?;
            file.flush()?;
            file.sync_all()?;
            Ok(n)
        })();
        drop(file);
        let n = match result {
            Ok(n) => n,
            Err(e) => {
                let _ = dir.remove_file(&tmp);
                return Err(SyncError::io("write storage object", &dest, e));
            }
        };
        // Within the folder's descriptor: the rename cannot land anywhere else, and replaces
        // whatever is at the key itself (a symlink planted there is replaced, not followed).
        dir.rename(&tmp, name).map_err(|e| {
            let _ = dir.remove_file(&tmp);
            SyncError::io("move into place", &dest, e)
        })?;
        Ok(n)
    }

    /// The object at `key`, opened as [`Dir::open_file`] does; `None` when it does not exist.
    fn open_object(&self, key: &str) -> Result<Option<File>, SyncError> {
        let Some(dir) = self.key_dir(key, false)? else {
            return Ok(None);
        };
        let (_, name) = split_key(key);
        let path = self.root.join(key);
        dir.open_file(name)
            .map_err(|e| self.error("open", key, &path, e))
    }
}

fn is_upload_temp(name: &str) -> bool {
    clima_artifact_fs::is_temp_name(name, UPLOAD_MARK)
}

/// Removes, once per process and folder, the upload temp files of killed processes in `dir`
/// (through its descriptor, so a folder swapped since cannot redirect the removals).
fn reclaim_once(dir: &Dir, reporting: &Reporting) {
    static DONE: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);
    let mut done = DONE.lock().unwrap_or_else(|p| p.into_inner());
    if done
        .get_or_insert_with(HashSet::new)
        .insert(dir.path().to_path_buf())
    {
        let n = dir.reclaim_stale_temps(UPLOAD_MARK);
        if n > 0 {
            reporting.emit(SyncEvent::UploadTempsRemoved {
                count: n as u64,
                dir: dir.path().to_path_buf(),
            });
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
        // The store may be shared: never follow a symlink planted as an object or as one of
        // its folders, never block on a fifo, read only regular files, and at most what the
        // index records.
        let src_path = self.path_of(key)?;
        let src = self
            .open_object(key)?
            .ok_or_else(|| SyncError::io("open", &src_path, io::ErrorKind::NotFound.into()))?;
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
        let Some(file) = self.open_object(key)? else {
            return Ok(None);
        };
        // Bounded whatever the file claims: a planted multi-gigabyte file is refused after
        // MAX_INDEX_BYTES + 1 bytes, never read whole into memory.
        let mut bytes = Vec::new();
        (&file)
            .take(MAX_INDEX_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| SyncError::io("read", &path, e))?;
        if bytes.len() as u64 > MAX_INDEX_BYTES {
            return Err(SyncError::TooLarge {
                url: self.url(),
                key: key.to_owned(),
                max: MAX_INDEX_BYTES,
                max_text: clima_artifact_fs::human_bytes(MAX_INDEX_BYTES),
            });
        }
        Ok(Some(bytes))
    }

    fn list(&self, prefix: &str) -> Result<Vec<StoredObject>, SyncError> {
        let mut out = Vec::new();
        let root = match Dir::open(&self.root) {
            Ok(root) => root,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(SyncError::io("list", &self.root, e)),
        };
        // Folders are entered by descriptor and symlinks are neither entered nor listed: a
        // link is not an object of this store, whatever it points to.
        let mut stack = vec![(root, String::new())];
        while let Some((dir, rel)) = stack.pop() {
            let entries = dir
                .entries()
                .map_err(|e| SyncError::io("list", dir.path(), e))?;
            for entry in entries {
                let Some(name) = entry.name.to_str().map(str::to_owned) else {
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
                match entry.kind {
                    EntryKind::Dir => match dir.open_dir(&entry.name) {
                        Ok(Some(sub)) => stack.push((sub, key)),
                        // Removed, or swapped for something else, since it was listed.
                        Ok(None) => {}
                        Err(e) if Unexpected::of(&e).is_some() => {}
                        Err(e) => return Err(SyncError::io("list", dir.path(), e)),
                    },
                    EntryKind::File if key.starts_with(prefix) => out.push(StoredObject {
                        key,
                        size: entry.len,
                    }),
                    _ => {}
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
