//! Content the depots already hold, found by its git blob id: the look-up a ranged install
//! needs to copy a file it would otherwise fetch (issue 49, item 4).
//!
//! See [`Blobs`].

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::PathBuf;

use clima_artifact_fs::{Dir, EntryKind, split_temp_name};
use clima_artifact_manifest::GitTreeSha1;
use clima_artifact_manifest::layout::{self, Entry};
use sha1::Digest;

use crate::depot::Depot;

/// How far [`Blobs::scan`] walks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobLimits {
    /// Most entries (files, folders, symlinks) visited over every depot.
    pub max_entries: u64,
}

impl Default for BlobLimits {
    /// 10 million entries, `CLIMA_ARTIFACTS_MAX_ENTRIES`'s default.
    fn default() -> BlobLimits {
        BlobLimits {
            max_entries: 10_000_000,
        }
    }
}

/// A file of an installed artifact that may hold some content.
#[derive(Debug)]
struct Candidate {
    /// The `artifacts` (or `clima_partial`) folder of its depot.
    artifacts: std::sync::Arc<PathBuf>,
    /// The file's path in that folder, by component (the artifact's hash first).
    rel: Vec<OsString>,
    /// Its blob id, once hashed (and found not to be the one asked for).
    id: Option<[u8; 20]>,
}

/// The files of the installed artifacts of some depots, by size.
///
/// [`Blobs::scan`] walks the installed artifacts of some depots once (`artifacts/<hash>/`,
/// which are renamed into place only when verified: never a temp folder, a partial download or
/// anything else of the depot), and the files of artifacts fetched one by one
/// (`clima_partial/<hash>/<path>`, renamed to their names only when verified; those still
/// being written, under their temp names, are left out) and notes every regular file by its size; nothing is read.
/// [`Blobs::find`] then takes a git blob id (SHA-1) and a size and returns a file of that
/// content, *verified now*: reached again from its artifact's folder without following any
/// link, a regular file of that size, whose content hashes (`blob <size>\0` and the bytes,
/// SHA-1) to that id. A file whose content changed since the scan, a path replaced by a
/// symlink, or a record that lies is therefore never returned.
///
/// Bounds: the walk visits at most [`BlobLimits::max_entries`] entries (files, folders,
/// symlinks), after which the rest of the depots is not looked at ([`Blobs::complete`] says
/// so); a look-up hashes only files of the exact size asked for, and a file that did not match
/// at most once for the life of the [`Blobs`] (its id is kept), so the bytes hashed to find
/// nothing are at most the bytes of the files scanned; a file that matches is hashed again at
/// each look-up that returns it (it is verified when it is handed out).
///
/// What is returned is an open handle on a file someone may still change afterwards (its
/// owner can make it writable): a caller copies from it and checks what it copied (a ranged
/// install checks every file's blob id as it writes it), and never hands the file itself, or a
/// hard link to it, to an artifact unless that file is read-only and its own.
#[derive(Debug, Default)]
pub struct Blobs {
    by_size: HashMap<u64, Vec<Candidate>>,
    visited: u64,
    complete: bool,
}

/// A file found by [`Blobs::find`]: open for reading at its start, and its path (for
/// messages).
#[derive(Debug)]
pub struct FoundBlob {
    /// The file, read-only, positioned at byte 0.
    pub file: File,
    /// Where it is.
    pub path: PathBuf,
}

impl Blobs {
    /// Notes the regular files of every installed artifact of `depots` (in that order), and
    /// of every artifact's files fetched one by one (`clima_partial/<hash>/`, verified files
    /// only: not those still being written), by size, without reading them or following any
    /// link, within `limits`. A depot or folder that cannot be read is passed over.
    pub fn scan(depots: &[Depot], limits: BlobLimits) -> Blobs {
        let mut blobs = Blobs {
            complete: true,
            ..Blobs::default()
        };
        for depot in depots {
            let roots = [
                depot.artifacts_dir(),
                depot.root().join(layout::PARTIAL_FILES),
            ];
            for (k, root) in roots.iter().enumerate() {
                if !blobs.scan_root(root, k == 0, &limits) {
                    blobs.complete = false;
                    return blobs;
                }
            }
        }
        blobs
    }

    /// Notes the files of the artifacts' folders in `root`: `artifacts/<hash>` when
    /// `installed`, else `clima_partial/<hash>`. `false` once the limit is reached.
    fn scan_root(&mut self, root: &std::path::Path, installed: bool, limits: &BlobLimits) -> bool {
        let Ok(dir) = Dir::open(root) else {
            return true;
        };
        let shared_root = std::sync::Arc::new(dir.path().to_path_buf());
        let Ok(entries) = dir.entries() else {
            return true;
        };
        for e in entries {
            let name = e.name.to_str().unwrap_or("");
            let wanted = e.kind == EntryKind::Dir
                && match installed {
                    true => matches!(Entry::parse(name), Some(Entry::Artifact(_))),
                    false => name.len() == 40 && GitTreeSha1::from_hex(name).is_ok(),
                };
            if !wanted {
                continue;
            }
            let Ok(Some(artifact)) = dir.open_dir(&e.name) else {
                continue;
            };
            if !self.walk(artifact, (shared_root.clone(), e.name.clone()), limits) {
                return false;
            }
        }
        true
    }

    /// Notes the files under `artifact`, the folder `at.1` of the folder `at.0` (`artifacts`
    /// or `clima_partial`); `false` once the limit is reached.
    fn walk(
        &mut self,
        artifact: Dir,
        at: (std::sync::Arc<PathBuf>, OsString),
        limits: &BlobLimits,
    ) -> bool {
        let (artifacts, name) = at;
        let mut todo = vec![(artifact, vec![name])];
        while let Some((dir, rel)) = todo.pop() {
            let Ok(entries) = dir.entries() else {
                continue;
            };
            for e in entries {
                if self.visited >= limits.max_entries {
                    return false;
                }
                self.visited += 1;
                let mut path = rel.clone();
                path.push(e.name.clone());
                let in_progress = e
                    .name
                    .to_str()
                    .is_some_and(|n| split_temp_name(n, layout::PARTIAL_FILE_MARK).is_some());
                match e.kind {
                    EntryKind::File if in_progress => {}
                    EntryKind::File => self.by_size.entry(e.len).or_default().push(Candidate {
                        artifacts: artifacts.clone(),
                        rel: path,
                        id: None,
                    }),
                    EntryKind::Dir => {
                        if let Ok(Some(sub)) = dir.open_dir(&e.name) {
                            todo.push((sub, path));
                        }
                    }
                    _ => {}
                }
            }
        }
        true
    }

    /// Whether the scan saw every installed artifact (it stopped at no limit).
    pub fn complete(&self) -> bool {
        self.complete
    }

    /// Entries the scan visited.
    pub fn visited(&self) -> u64 {
        self.visited
    }

    /// A file of `size` bytes whose git blob id is `sha1`, verified now (see [`Blobs`]);
    /// `None` when no file noted by the scan has that content any more.
    pub fn find(&mut self, sha1: &[u8; 20], size: u64) -> Option<FoundBlob> {
        let candidates = self.by_size.get_mut(&size)?;
        for c in candidates.iter_mut() {
            if c.id.is_some_and(|id| id != *sha1) {
                continue;
            }
            let Ok((mut file, path)) = c.open(size) else {
                continue;
            };
            let Ok(id) = blob_sha1(&mut file, size) else {
                continue;
            };
            if id != *sha1 {
                c.id = Some(id);
                continue;
            }
            if file.seek(SeekFrom::Start(0)).is_ok() {
                return Some(FoundBlob { file, path });
            }
        }
        None
    }
}

impl Candidate {
    /// Opens the file again from its depot's `artifacts` folder, never through a link (the
    /// artifact's folder included): a regular file of `size` bytes.
    fn open(&self, size: u64) -> io::Result<(File, PathBuf)> {
        let gone = || io::Error::new(io::ErrorKind::NotFound, "no longer there");
        let (name, folders) = self.rel.split_last().ok_or_else(gone)?;
        let mut dir = Dir::open(&self.artifacts)?;
        for f in folders {
            dir = dir.open_dir(f)?.ok_or_else(gone)?;
        }
        let file = dir.open_file(name)?.ok_or_else(gone)?;
        if file.metadata()?.len() != size {
            return Err(io::Error::other("its size changed"));
        }
        Ok((file, dir.path().join(name)))
    }
}

/// The git blob id (SHA-1) of the `size` bytes of `file` from its start: more or fewer is an
/// error (a file that changed while read).
fn blob_sha1(file: &mut File, size: u64) -> io::Result<[u8; 20]> {
    let mut hasher = sha1::Sha1::new();
    hasher.update(format!("blob {size}\0").as_bytes());
    let mut buf = vec![0; 256 << 10];
    let mut left = size;
    let mut reader = file.take(size.saturating_add(1));
    loop {
        let n = reader.read(&mut buf)?;
        if n == 0 {
            break;
        }
        if n as u64 > left {
            return Err(io::Error::other("longer than its size"));
        }
        left -= n as u64;
        hasher.update(&buf[..n]);
    }
    if left != 0 {
        return Err(io::Error::other("shorter than its size"));
    }
    Ok(hasher.finalize().into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// The git blob id of `bytes`.
    fn id(bytes: &[u8]) -> [u8; 20] {
        let mut h = sha1::Sha1::new();
        h.update(format!("blob {}\0", bytes.len()).as_bytes());
        h.update(bytes);
        h.finalize().into()
    }

    /// A depot with one installed artifact of `files` (relative path, content), and the
    /// artifact's folder.
    fn depot_with(root: &Path, hash: &str, files: &[(&str, &[u8])]) -> (Depot, PathBuf) {
        let depot = Depot::new(root);
        let dir = depot.artifacts_dir().join(hash);
        for (rel, bytes) in files {
            let p = dir.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, bytes).unwrap();
        }
        (depot, dir)
    }

    fn read(found: Option<FoundBlob>) -> Option<(Vec<u8>, PathBuf)> {
        found.map(|mut f| {
            let mut out = Vec::new();
            f.file.read_to_end(&mut out).unwrap();
            (out, f.path)
        })
    }

    #[test]
    fn a_file_is_found_by_its_blob_id_and_size_and_read_from_its_start() {
        let t = tempfile::tempdir().unwrap();
        let a = "ab".repeat(20);
        let (depot, dir) = depot_with(
            t.path(),
            &a,
            &[
                ("x.txt", b"same size 1"),
                ("deep/er/y.txt", b"same size 2"),
                ("z", b""),
            ],
        );
        let mut blobs = Blobs::scan(std::slice::from_ref(&depot), BlobLimits::default());
        assert!(blobs.complete());
        let (bytes, path) = read(blobs.find(&id(b"same size 2"), 11)).unwrap();
        assert_eq!(bytes, b"same size 2");
        assert_eq!(path, dir.join("deep/er/y.txt"));
        // Asked again: found again, from byte 0.
        assert_eq!(
            read(blobs.find(&id(b"same size 2"), 11)).unwrap().0,
            b"same size 2"
        );
        assert_eq!(read(blobs.find(&id(b""), 0)).unwrap().0, b"");
        // Another size, another id, content nobody holds: nothing.
        assert!(blobs.find(&id(b"same size 2"), 12).is_none());
        assert!(blobs.find(&id(b"same size 3"), 11).is_none());
    }

    #[test]
    fn only_installed_artifacts_are_looked_at_and_no_link_is_followed() {
        let t = tempfile::tempdir().unwrap();
        let outside = t.path().join("outside.txt");
        std::fs::write(&outside, b"secret").unwrap();
        let (depot, dir) = depot_with(t.path(), &"cd".repeat(20), &[("in.txt", b"inside")]);
        std::os::unix::fs::symlink(&outside, dir.join("link.txt")).unwrap();
        std::os::unix::fs::symlink(t.path(), dir.join("linked-folder")).unwrap();
        // An install in progress, a partial download, a folder of another name.
        let arts = depot.artifacts_dir();
        for other in [
            format!(".{}.clima-install-h.1.2", "ef".repeat(20)),
            "not-an-artifact".to_owned(),
        ] {
            std::fs::create_dir_all(arts.join(&other)).unwrap();
            std::fs::write(arts.join(&other).join("f"), b"secret").unwrap();
        }
        let mut blobs = Blobs::scan(std::slice::from_ref(&depot), BlobLimits::default());
        assert!(blobs.find(&id(b"secret"), 6).is_none());
        assert_eq!(read(blobs.find(&id(b"inside"), 6)).unwrap().0, b"inside");
    }

    #[test]
    fn a_file_changed_or_replaced_by_a_link_after_the_scan_is_not_returned() {
        let t = tempfile::tempdir().unwrap();
        let (depot, dir) = depot_with(
            t.path(),
            &"12".repeat(20),
            &[("a/f.bin", b"original"), ("g.bin", b"original")],
        );
        let mut blobs = Blobs::scan(std::slice::from_ref(&depot), BlobLimits::default());
        // Same size, other bytes; and a folder swapped for a symlink to a copy of the original.
        std::fs::write(dir.join("g.bin"), b"ORIGINAL").unwrap();
        let copy = t.path().join("copy");
        std::fs::create_dir(&copy).unwrap();
        std::fs::write(copy.join("f.bin"), b"original").unwrap();
        std::fs::remove_dir_all(dir.join("a")).unwrap();
        std::os::unix::fs::symlink(&copy, dir.join("a")).unwrap();
        assert!(blobs.find(&id(b"original"), 8).is_none());
        // The artifact's folder itself swapped for a symlink to a copy: not followed either.
        let (depot2, dir2) = depot_with(&t.path().join("d2"), &"56".repeat(20), &[("h", b"hh")]);
        let mut blobs2 = Blobs::scan(std::slice::from_ref(&depot2), BlobLimits::default());
        let elsewhere = t.path().join("elsewhere");
        std::fs::rename(&dir2, &elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &dir2).unwrap();
        assert!(blobs2.find(&id(b"hh"), 2).is_none());
        // What is there now is found.
        assert_eq!(
            read(blobs.find(&id(b"ORIGINAL"), 8)).unwrap().1,
            dir.join("g.bin")
        );
    }

    #[test]
    fn files_fetched_one_by_one_are_found_but_not_those_being_written() {
        let t = tempfile::tempdir().unwrap();
        let depot = Depot::new(t.path());
        let hash = "78".repeat(20);
        let dir = t
            .path()
            .join(layout::PARTIAL_FILES)
            .join(&hash)
            .join("era5");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("u.nc"), b"fetched").unwrap();
        std::fs::write(dir.join(".v.nc.clima-partial-h.1.2"), b"halfway").unwrap();
        let mut blobs = Blobs::scan(std::slice::from_ref(&depot), BlobLimits::default());
        assert_eq!(
            read(blobs.find(&id(b"fetched"), 7)).unwrap().1,
            dir.join("u.nc")
        );
        assert!(blobs.find(&id(b"halfway"), 7).is_none());
    }

    #[test]
    fn the_walk_stops_at_its_limit_and_says_so() {
        let t = tempfile::tempdir().unwrap();
        let files: Vec<(String, Vec<u8>)> = (0..50)
            .map(|i| (format!("d{}/f{i}", i % 5), vec![i as u8; 10]))
            .collect();
        let refs: Vec<(&str, &[u8])> = files
            .iter()
            .map(|(p, b)| (p.as_str(), b.as_slice()))
            .collect();
        let (depot, _) = depot_with(t.path(), &"34".repeat(20), &refs);
        let depots = std::slice::from_ref(&depot);
        let all = Blobs::scan(depots, BlobLimits::default());
        assert!(all.complete());
        assert_eq!(all.visited(), 55, "50 files and 5 folders");
        let few = Blobs::scan(depots, BlobLimits { max_entries: 20 });
        assert!(!few.complete());
        assert_eq!(few.visited(), 20);
    }
}
