//! The home of an artifact's files fetched one by one (from a seekable tarball, by byte
//! ranges) while the artifact is not installed whole: `<depot>/clima_partial/<hash>/<path>`.
//!
//! Outside `artifacts/` on purpose: Julia's lookups only ever look at `artifacts/<hash>`, and
//! `Pkg.gc()` walks every folder of `artifacts/` and deletes those no manifest names (a
//! hidden name included), so a folder of some files kept there would be deleted under a
//! running model by Julia's gc, and a folder named `artifacts/<hash>` would be taken for the
//! whole artifact by everyone. Neither Pkg nor our lookups look into `clima_partial/`.
//!
//! Each file is written under a temp name in its folder (`.<name>.clima-partial-<owner>`,
//! created exclusively, never through a symlink), checked by the caller while it is written,
//! made read-only (the permissions the extraction gives installed files, which the caller
//! passes: 0444, 0555 when executable) and only then renamed to its name. Writers
//! hold the artifact's install lock ([`Staging`]), so two processes do not fetch the same
//! files at once; a reader only ever finds a verified file at a name.

use std::fs::File;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use clima_artifact_fs::{Dir, EntryKind};
use clima_artifact_manifest::GitTreeSha1;
use clima_artifact_manifest::layout::{
    self, PARTIAL_COUNT_SUFFIX as COUNT_SUFFIX, PARTIAL_FILE_MARK,
};

use crate::{Depot, Error, Staging};

/// Most files counted or listed in one artifact's partial folder (a bound on the walk).
const MAX_LISTED: usize = 10_000_000;

fn io_error(action: &str, path: PathBuf, cause: std::io::Error) -> Error {
    Error::Io {
        action: action.to_owned(),
        path,
        cause: cause.into(),
    }
}

/// `rel` split into its folder and its name; `None` for an empty path or an empty name.
fn split(rel: &str) -> Option<(&Path, &str)> {
    let rel = rel.trim_end_matches('/');
    let (parent, name) = rel.rsplit_once('/').unwrap_or(("", rel));
    (!name.is_empty()).then_some((Path::new(parent), name))
}

impl Depot {
    /// `<depot>/clima_partial/<hash>`: where the files of `hash` fetched one by one are.
    pub fn partial_files_dir(&self, hash: &GitTreeSha1) -> PathBuf {
        layout::partial_files_dir(self.root(), hash)
    }

    /// The file (or symlink, itself) of `hash` at `rel` in this depot's partial folder, if one
    /// was fetched; reached without following a symlink in any folder.
    pub fn partial_file(&self, hash: &GitTreeSha1, rel: &str) -> Option<PathBuf> {
        let (parent, name) = split(rel)?;
        let root = Dir::open(&self.partial_files_dir(hash)).ok()?;
        let dir = root.open_dirs(parent).ok()??;
        match dir.entry(name).ok()?? {
            e if matches!(e.kind, EntryKind::File | EntryKind::Symlink) => {
                Some(dir.path().join(name))
            }
            _ => None,
        }
    }

    /// Records beside the partial folder of `hash` how many files the whole artifact has
    /// (from its authenticated index), for listings: `<depot>/clima_partial/<hash>.count`.
    pub fn record_partial_count(&self, hash: &GitTreeSha1, files: u64) -> Result<(), Error> {
        let root = Dir::open(self.root())
            .map_err(|e| io_error("open the depot", self.root().to_path_buf(), e))?;
        let dir = root
            .create_dir(layout::PARTIAL_FILES, 0o755)
            .map_err(|e| io_error("create", self.root().join(layout::PARTIAL_FILES), e))?;
        let name = format!("{}{COUNT_SUFFIX}", hash.to_hex());
        dir.write_atomically(&name, files.to_string().as_bytes())
            .map_err(|e| io_error("write", dir.path().join(&name), e))
    }

    /// How many files the whole artifact `hash` has, as recorded by
    /// [`Depot::record_partial_count`]; `None` when nothing (usable) is recorded.
    pub fn partial_count(&self, hash: &GitTreeSha1) -> Option<u64> {
        let dir = Dir::open(&self.root().join(layout::PARTIAL_FILES)).ok()?;
        let mut file = dir
            .open_file(format!("{}{COUNT_SUFFIX}", hash.to_hex()))
            .ok()??;
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::Read::take(&mut file, 32), &mut text).ok()?;
        text.trim().parse().ok()
    }

    /// The paths (relative, `/`-separated, sorted) of the files of `hash` this depot holds in
    /// its partial folder (temp files left out); empty when none.
    pub fn partial_file_paths(&self, hash: &GitTreeSha1) -> Vec<String> {
        let Ok(root) = Dir::open(&self.partial_files_dir(hash)) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut todo = vec![(root, String::new())];
        while let Some((dir, prefix)) = todo.pop() {
            let Ok(entries) = dir.entries() else { continue };
            for e in entries {
                let Some(name) = e.name.to_str() else {
                    continue;
                };
                if clima_artifact_fs::is_temp_name(name, PARTIAL_FILE_MARK) {
                    continue;
                }
                let rel = format!("{prefix}{name}");
                match e.kind {
                    EntryKind::File | EntryKind::Symlink if out.len() < MAX_LISTED => {
                        out.push(rel);
                    }
                    EntryKind::Dir => {
                        if let Ok(Some(sub)) = dir.open_dir(&e.name) {
                            todo.push((sub, format!("{rel}/")));
                        }
                    }
                    _ => {}
                }
            }
        }
        out.sort();
        out
    }
}

/// The partial folder of one artifact, open for writing under its install lock (see
/// [`Staging::partial_files`]).
pub struct PartialFiles<'a> {
    dir: Dir,
    _staging: &'a Staging,
    /// The folders whose dead writers' temp files were removed already (once per folder: a
    /// folder of many files is listed once, not once per file).
    reclaimed: std::sync::Mutex<std::collections::HashSet<PathBuf>>,
}

impl Staging {
    /// The partial folder of the staged artifact in its depot, created if missing (never
    /// through a symlink below the depot), for files fetched one by one.
    pub fn partial_files(&self) -> Result<PartialFiles<'_>, Error> {
        let depot = self.depot();
        let root = Dir::open(depot.root())
            .map_err(|e| io_error("open the depot", depot.root().to_path_buf(), e))?;
        let rel = Path::new(layout::PARTIAL_FILES).join(self.hash().to_hex());
        let dir = root
            .create_dirs(&rel, 0o755)
            .map_err(|e| io_error("create", depot.root().join(&rel), e))?;
        Ok(PartialFiles {
            dir,
            _staging: self,
            reclaimed: Default::default(),
        })
    }
}

impl PartialFiles<'_> {
    /// The folder.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes the file `rel` (a clean relative path, as an authenticated index gives it):
    /// `write` fills a new temp file beside it and checks what it wrote; only when it returns
    /// `Ok` is the file given the read-only permission bits `mode` (those the extraction gives
    /// an installed file of its kind: `EntryMode::installed_permissions` of the extraction
    /// crate; write bits are never set) and renamed to `rel`
    /// (replacing what is there: another process's copy of the same verified content). On
    /// any error the temp file is removed. The outer error is the depot's, the inner one
    /// `write`'s.
    pub fn put<T, E>(
        &self,
        rel: &str,
        mode: u32,
        write: impl FnOnce(&mut File) -> Result<T, E>,
    ) -> Result<Result<T, E>, Error> {
        match self.stage(rel, mode, write)? {
            Ok((v, pending)) => pending.publish().map(|()| Ok(v)),
            Err(e) => Ok(Err(e)),
        }
    }

    /// [`PartialFiles::put`] up to its rename: the file written, checked and read-only under
    /// its temp name, made visible by [`Pending::publish`] (or removed when the [`Pending`] is
    /// dropped). A caller that publishes several files only once every one was staged makes
    /// none visible before every one was checked, whatever the order they were written in
    /// (each rename is one file's: a failure between two renames leaves the earlier ones,
    /// each verified).
    pub fn stage<T, E>(
        &self,
        rel: &str,
        mode: u32,
        write: impl FnOnce(&mut File) -> Result<T, E>,
    ) -> Result<Result<(T, Pending<'_>), E>, Error> {
        let (dir, parent, temp, name) = self.temp_beside(rel, "write a file of")?;
        let mut file = dir
            .create_new(&temp, 0o600)
            .map_err(|e| io_error("create", dir.path().join(&temp), e))?;
        let path = dir.path().join(&temp);
        drop(dir);
        let pending = Pending {
            root: &self.dir,
            parent: parent.to_path_buf(),
            temp,
            name: name.to_owned(),
            published: false,
        };
        let v = match write(&mut file) {
            Ok(v) => v,
            Err(e) => return Ok(Err(e)),
        };
        file.set_permissions(std::fs::Permissions::from_mode(mode & 0o555))
            .and_then(|()| file.sync_all())
            .map_err(|e| io_error("finish", path, e))?;
        Ok(Ok((v, pending)))
    }

    /// The folder of `rel` (created) and its path below this one, a fresh temp name there and
    /// the name of `rel`; stale temp files of dead writers in that folder are removed first
    /// (once per folder).
    fn temp_beside<'r>(
        &self,
        rel: &'r str,
        what: &str,
    ) -> Result<(Dir, &'r Path, String, &'r str), Error> {
        let (parent, name) = split(rel).ok_or_else(|| {
            io_error(
                what,
                self.path().to_path_buf(),
                std::io::Error::other(format!("`{rel}` is not a file path")),
            )
        })?;
        let dir = self
            .dir
            .create_dirs(parent, 0o755)
            .map_err(|e| io_error("create", self.path().join(parent), e))?;
        let first = self
            .reclaimed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(parent.to_path_buf());
        if first {
            dir.reclaim_stale_temps(PARTIAL_FILE_MARK);
        }
        let temp = clima_artifact_fs::temp_name(name, PARTIAL_FILE_MARK);
        Ok((dir, parent, temp, name))
    }

    /// Makes the symlink `rel` pointing at `target` (verified by the caller), replacing what
    /// is there, through a temp name and a rename as for files.
    pub fn put_symlink(&self, rel: &str, target: &[u8]) -> Result<(), Error> {
        self.stage_symlink(rel, target)?.publish()
    }

    /// [`PartialFiles::put_symlink`] up to its rename, as [`PartialFiles::stage`] is for files.
    pub fn stage_symlink(&self, rel: &str, target: &[u8]) -> Result<Pending<'_>, Error> {
        use std::os::unix::ffi::OsStrExt;
        let (dir, parent, temp, name) = self.temp_beside(rel, "write a symlink of")?;
        let target = std::ffi::OsStr::from_bytes(target);
        dir.symlink(target, &temp)
            .map_err(|e| io_error("create the symlink", dir.path().join(&temp), e))?;
        Ok(Pending {
            root: &self.dir,
            parent: parent.to_path_buf(),
            temp,
            name: name.to_owned(),
            published: false,
        })
    }
}

/// A file (or symlink) of a partial folder written and checked under its temp name, not yet
/// visible ([`PartialFiles::stage`]): [`Pending::publish`] renames it to its name; dropped
/// unpublished, it is removed. It holds no descriptor (a fetch of many files stages them
/// all before any is published): its folder is reached again, without following links, when
/// it is published or removed.
pub struct Pending<'f> {
    root: &'f Dir,
    parent: PathBuf,
    temp: String,
    name: String,
    published: bool,
}

impl Pending<'_> {
    /// Renames the file to its name (replacing what is there: another process's copy of the
    /// same verified content).
    pub fn publish(mut self) -> Result<(), Error> {
        let path = self.root.path().join(&self.parent);
        let dir = match self.root.open_dirs(&self.parent) {
            Ok(Some(dir)) => dir,
            Ok(None) => {
                return Err(io_error(
                    "move into place",
                    path.join(&self.name),
                    std::io::Error::from(std::io::ErrorKind::NotFound),
                ));
            }
            Err(e) => return Err(io_error("open", path, e)),
        };
        dir.rename(&self.temp, &self.name)
            .map_err(|e| io_error("move into place", path.join(&self.name), e))?;
        self.published = true;
        Ok(())
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if !self.published
            && let Ok(Some(dir)) = self.root.open_dirs(&self.parent)
        {
            let _ = dir.remove_file(&self.temp);
        }
    }
}
