//! [`RunSync`]: push a run folder to storage at checkpoints, pull it back on restore.

use clima_artifact_progress::Reporting;
use std::fs;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use globset::GlobSet;
use serde::{Serialize, de::DeserializeOwned};

use crate::config::{SyncConfig, SyncMode};
use crate::index::{
    FileEntry, FileKind, INDEX_KEY, STATE_DIR, SyncIndex, is_under, mtime_ns, set_mtime_ns,
    sha256_file,
};
use crate::notice::{NotRestoredReason, NotSyncedReason, SyncEvent};
use crate::storage::{Prefixed, Storage, check_key};
use clima_comms::Context;

use crate::SyncError;

/// What one push (`on_checkpoint`, `finish`, `sync push`) did on this rank.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SyncReport {
    /// Files sent, relative to the run folder.
    pub uploaded: Vec<String>,
    /// Bytes sent (files only).
    pub uploaded_bytes: u64,
    /// Files looked at that were already stored with the same content.
    pub unchanged: usize,
    /// Files skipped because an exclude glob matched.
    pub excluded: usize,
    /// The slow-sync warning, if one was logged.
    pub slow_warning: Option<String>,
    /// Files that vanished between listing and uploading (skipped with a warning).
    pub vanished: Vec<String>,
}

/// What [`RunSync::restore`] did on this rank.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Restored {
    /// The restored checkpoint folder (absolute), if any checkpoint was stored.
    pub checkpoint: Option<PathBuf>,
    /// Files downloaded, relative to the run folder.
    pub downloaded: Vec<String>,
    /// Bytes downloaded.
    pub downloaded_bytes: u64,
    /// Files already present with the stored content.
    pub up_to_date: usize,
    /// Local files newer than the stored copy, left alone (pushed at the next sync).
    pub kept_newer: Vec<String>,
    /// The slow-sync warning, if one was logged.
    pub slow_warning: Option<String>,
    /// Stored files not restored, each with a warning naming it: not a regular file in the
    /// store, larger than the index records, or with other content than it records.
    pub skipped: Vec<String>,
}

/// Syncs one run folder with a [`Storage`]; see the [module docs](super) for the protocol.
///
/// `on_checkpoint`, `finish` and `restore` are **collective over the context** (every rank
/// calls them in the same order): in [`SyncMode::Root`] rank 0 moves the files and broadcasts
/// its outcome, in [`SyncMode::PerRank`] every rank moves its own subfolder and all ranks agree
/// on success or on the first error.
pub struct RunSync<'c> {
    dir: PathBuf,
    storage: Box<dyn Storage + 'c>,
    config: SyncConfig,
    excludes: GlobSet,
    ctx: &'c dyn Context,
    index: Option<SyncIndex>,
}

impl std::fmt::Debug for RunSync<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunSync")
            .field("dir", &self.dir)
            .field("storage", &self.storage.url())
            .field("config", &self.config)
            .field("context", &self.ctx.describe())
            .finish()
    }
}

impl<'c> RunSync<'c> {
    /// A syncer for `run_dir` (shared, or holding `rank-<r>` subfolders in per-rank mode).
    /// Does no I/O; fails only on a bad exclude glob (the same on every rank).
    pub fn new(
        run_dir: impl Into<PathBuf>,
        storage: impl Storage + 'c,
        config: SyncConfig,
        ctx: &'c dyn Context,
    ) -> Result<RunSync<'c>, SyncError> {
        let run_dir = run_dir.into();
        let run_dir = std::path::absolute(&run_dir).unwrap_or(run_dir);
        let dir = match config.mode {
            SyncMode::Root => run_dir,
            SyncMode::PerRank => run_dir.join(rank_dir(ctx.rank())),
        };
        Ok(RunSync {
            dir,
            storage: Box::new(storage),
            excludes: config.excludes()?,
            config,
            ctx,
            index: None,
        })
    }

    /// The folder this rank syncs (the run folder, or its `rank-<r>` subfolder).
    pub fn local_dir(&self) -> &Path {
        &self.dir
    }

    /// Uploads the checkpoint folder `checkpoint_dir` (absolute, or relative to the synced
    /// folder; it must be inside it) and, if `sync_artifacts` is on, every output artifact
    /// changed since the last sync. Collective.
    pub fn on_checkpoint(
        &mut self,
        checkpoint_dir: impl AsRef<Path>,
    ) -> Result<SyncReport, SyncError> {
        let checkpoint = checkpoint_dir.as_ref().to_path_buf();
        self.collective(move |s| {
            let rel = s.relative_checkpoint(&checkpoint)?;
            s.push(Some(rel))
        })
    }

    /// Final upload of changed output artifacts (when the run completes or stops). Collective.
    pub fn finish(&mut self) -> Result<SyncReport, SyncError> {
        self.collective(|s| s.push(None))
    }

    /// Downloads the latest checkpoint and (if `sync_artifacts` is on) the output artifacts.
    /// A local file newer than its stored copy is never overwritten. Collective.
    pub fn restore(&mut self) -> Result<Restored, SyncError> {
        self.collective(|s| s.pull())
    }

    /// Runs `op` on the ranks that move files and makes every rank return the same outcome
    /// (the collective steps of `clima-comms`).
    fn collective<T: Serialize + DeserializeOwned>(
        &mut self,
        op: impl FnOnce(&mut Local<'_>) -> Result<T, SyncError>,
    ) -> Result<T, SyncError> {
        let ctx = self.ctx;
        match self.config.mode {
            SyncMode::Root => {
                clima_comms::root_decides(ctx, "syncing the run folder", || self.run_local(op))
            }
            SyncMode::PerRank => {
                let own = self.run_local(op);
                clima_comms::all_succeed(ctx, own, |rank, e| match e {
                    e @ SyncError::OnRank { .. } => e,
                    e => SyncError::OnRank {
                        rank,
                        context: ctx.describe(),
                        message: e.to_string(),
                    },
                })
            }
        }
    }

    fn run_local<T>(
        &mut self,
        op: impl FnOnce(&mut Local<'_>) -> Result<T, SyncError>,
    ) -> Result<T, SyncError> {
        let prefixed;
        let storage: &dyn Storage = match self.config.mode {
            SyncMode::Root => &*self.storage,
            SyncMode::PerRank => {
                prefixed = Prefixed {
                    inner: &*self.storage,
                    prefix: rank_dir(self.ctx.rank()),
                };
                &prefixed
            }
        };
        let mut local = Local {
            dir: &self.dir,
            storage,
            config: &self.config,
            excludes: &self.excludes,
            index: &mut self.index,
        };
        catch_unwind(AssertUnwindSafe(|| op(&mut local))).unwrap_or_else(|payload| {
            Err(SyncError::Panicked {
                message: clima_comms::panic_message(&*payload),
            })
        })
    }
}

/// Marker in the names of files being restored (see `clima_artifact_fs::temp_name`).
const RESTORE_MARK: &str = ".clima-restore-";

/// Whether the last component of `rel` is a temp file of a restore (ours or a killed one's):
/// such files are never pushed.
fn is_sync_temp(rel: &str) -> bool {
    clima_artifact_fs::is_temp_name(rel.rsplit('/').next().unwrap_or(rel), RESTORE_MARK)
}

/// The subfolder (and storage prefix) of `rank` in per-rank mode.
pub fn rank_dir(rank: usize) -> String {
    format!("rank-{rank}")
}

/// The per-rank state an operation works on.
struct Local<'a> {
    dir: &'a Path,
    storage: &'a dyn Storage,
    config: &'a SyncConfig,
    excludes: &'a GlobSet,
    index: &'a mut Option<SyncIndex>,
}

/// A file to consider: relative path, absolute path, metadata.
struct Candidate {
    rel: String,
    path: PathBuf,
    size: u64,
    mtime_ns: u128,
    kind: FileKind,
}

/// The walked `files` a push considers: those of the `checkpoint` being written, and with
/// `sync_artifacts` the others, except those of an older checkpoint of the `index` (stored when
/// it was written).
fn candidates(
    files: Vec<(String, PathBuf, fs::Metadata)>,
    index: &SyncIndex,
    checkpoint: Option<&str>,
    sync_artifacts: bool,
) -> Vec<Candidate> {
    let mut candidates = Vec::new();
    for (rel, path, meta) in files {
        let in_current = checkpoint.is_some_and(|c| is_under(&rel, c));
        let kind = if in_current {
            FileKind::Checkpoint
        } else if index.in_checkpoint(&rel) {
            continue; // an older checkpoint: stored when it was written
        } else {
            FileKind::Artifact
        };
        if kind == FileKind::Artifact && !sync_artifacts {
            continue;
        }
        candidates.push(Candidate {
            rel,
            path,
            size: meta.len(),
            mtime_ns: mtime_ns(&meta),
            kind,
        });
    }
    candidates
}

/// Logs the slow-sync warning once the deadline passes.
struct SlowWatch {
    start: Instant,
    after: Duration,
    what: String,
    biggest: Vec<(String, u64)>,
    warned: Option<String>,
    reporting: Reporting,
}

impl SlowWatch {
    fn new(
        what: String,
        after: Duration,
        mut sizes: Vec<(String, u64)>,
        reporting: Reporting,
    ) -> SlowWatch {
        sizes.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        sizes.truncate(3);
        SlowWatch {
            start: Instant::now(),
            after,
            what,
            biggest: sizes,
            warned: None,
            reporting,
        }
    }

    fn check(&mut self) {
        let elapsed = self.start.elapsed();
        if self.warned.is_some() || elapsed < self.after {
            return;
        }
        let event = SyncEvent::SlowSync {
            what: self.what.clone(),
            took: elapsed,
            after: self.after,
            biggest: self.biggest.clone(),
        };
        let message = event.to_string();
        self.reporting.emit(event);
        self.warned = Some(message);
    }
}

impl Local<'_> {
    fn relative_checkpoint(&self, checkpoint: &Path) -> Result<String, SyncError> {
        let abs = if checkpoint.is_absolute() {
            checkpoint.to_path_buf()
        } else {
            self.dir.join(checkpoint)
        };
        let not_inside = || SyncError::CheckpointOutsideRun {
            checkpoint: abs.clone(),
            run_dir: self.dir.to_path_buf(),
        };
        let canon_dir = fs::canonicalize(self.dir)
            .map_err(|e| SyncError::io("open run folder", self.dir, e))?;
        let canon = fs::canonicalize(&abs).map_err(|_| not_inside())?;
        if !canon.is_dir() {
            return Err(not_inside());
        }
        let rel = canon.strip_prefix(&canon_dir).map_err(|_| not_inside())?;
        let rel = rel.to_str().ok_or_else(not_inside)?.to_owned();
        if rel.is_empty() || rel.split('/').next() == Some(STATE_DIR) {
            return Err(not_inside());
        }
        Ok(rel)
    }

    /// The index: the local copy, else the stored one, else empty.
    fn index(&mut self) -> Result<&mut SyncIndex, SyncError> {
        if self.index.is_none() {
            let local = self.dir.join(INDEX_KEY);
            let url = self.storage.url();
            // The run folder's copy only counts for the store it was written for: pushing to
            // a second (say, empty) store must upload everything that store lacks.
            let local_copy = match fs::read(&local) {
                Ok(bytes) => Some(SyncIndex::parse(&bytes, &format!("`{}`", local.display()))?)
                    .filter(|i| i.store.as_deref() == Some(url.as_str())),
                Err(_) => None,
            };
            let index = match local_copy {
                Some(index) => index,
                None => match self.storage.get_bytes(INDEX_KEY)? {
                    Some(bytes) => SyncIndex::parse(
                        &bytes,
                        &format!("`{INDEX_KEY}` in `{}`", self.storage.url()),
                    )?,
                    None => SyncIndex {
                        version: crate::index::VERSION,
                        ..Default::default()
                    },
                },
            };
            *self.index = Some(index);
        }
        Ok(self.index.as_mut().expect("set above"))
    }

    fn save_local_index(&self, index: &SyncIndex) -> Result<(), SyncError> {
        let index = SyncIndex {
            store: Some(self.storage.url()),
            ..index.clone()
        };
        let path = self.dir.join(INDEX_KEY);
        let dir = self.dir.join(STATE_DIR);
        fs::create_dir_all(&dir).map_err(|e| SyncError::io("create folder", &dir, e))?;
        clima_artifact_fs::write_atomically(&path, &index.to_bytes())
            .map_err(|e| SyncError::io("write", &path, e))
    }

    /// Regular files below `sub` (relative, `""` for all), skipping the state folder.
    fn walk(
        &self,
        sub: &str,
        excluded: &mut usize,
        out: &mut Vec<(String, PathBuf, fs::Metadata)>,
    ) -> Result<(), SyncError> {
        let start = if sub.is_empty() {
            self.dir.to_path_buf()
        } else {
            self.dir.join(sub)
        };
        if !start.exists() {
            return Ok(());
        }
        let mut stack = vec![(start, sub.to_owned())];
        while let Some((dir, rel)) = stack.pop() {
            let entries = fs::read_dir(&dir).map_err(|e| SyncError::io("list", &dir, e))?;
            for entry in entries {
                let entry = entry.map_err(|e| SyncError::io("list", &dir, e))?;
                let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                    self.config.reporting.emit(SyncEvent::NotSynced {
                        path: entry.path(),
                        why: NotSyncedReason::NameNotUtf8,
                    });
                    continue;
                };
                let child = if rel.is_empty() {
                    name
                } else {
                    format!("{rel}/{name}")
                };
                if child == STATE_DIR {
                    continue;
                }
                let meta = match entry.metadata() {
                    Ok(meta) => meta,
                    // Deleted since it was listed (a model removing a temp file): not an output.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        self.config.reporting.emit(SyncEvent::NotSynced {
                            path: PathBuf::from(&child),
                            why: NotSyncedReason::VanishedWhileListing,
                        });
                        continue;
                    }
                    Err(e) => return Err(SyncError::io("stat", entry.path(), e)),
                };
                if is_sync_temp(&child) {
                    continue;
                }
                if meta.is_dir() {
                    stack.push((entry.path(), child));
                } else if meta.is_file() {
                    if self.excludes.is_match(&child) {
                        *excluded += 1;
                    } else {
                        out.push((child, entry.path(), meta));
                    }
                }
            }
        }
        Ok(())
    }

    // Long on purpose: the steps run in the order that makes a crash at any point safe (the
    // files, then the stored index, then the local one), and that order is read here whole.
    fn push(&mut self, checkpoint: Option<String>) -> Result<SyncReport, SyncError> {
        fs::create_dir_all(self.dir)
            .map_err(|e| SyncError::io("create run folder", self.dir, e))?;
        let sync_artifacts = self.config.sync_artifacts;
        let mut report = SyncReport::default();
        let mut files = Vec::new();
        if sync_artifacts {
            self.walk("", &mut report.excluded, &mut files)?;
        } else if let Some(c) = &checkpoint {
            self.walk(c, &mut report.excluded, &mut files)?;
        }
        let mut index = self.index()?.clone();
        let candidates = candidates(files, &index, checkpoint.as_deref(), sync_artifacts);

        let mut changed_index = false;
        if let Some(c) = &checkpoint {
            if !index.checkpoints.contains(c) {
                index.checkpoints.push(c.clone());
            }
            if index.latest_checkpoint.as_deref() != Some(c) {
                index.latest_checkpoint = Some(c.clone());
            }
            changed_index = true;
        }
        let mut to_send = Vec::new();
        for c in candidates {
            check_key(&c.rel)?;
            if let Some(e) = index.files.get(&c.rel)
                && e.size == c.size
                && e.mtime_ns == c.mtime_ns
                && e.kind == c.kind
            {
                report.unchanged += 1;
                continue;
            }
            let sha256 = match sha256_file(&c.path) {
                Ok(sha) => sha,
                Err(e) if e.io_kind() == Some(std::io::ErrorKind::NotFound) => {
                    self.config.reporting.emit(SyncEvent::NotSynced {
                        path: PathBuf::from(&c.rel),
                        why: NotSyncedReason::VanishedDuringSync,
                    });
                    report.vanished.push(c.rel);
                    continue;
                }
                Err(e) => return Err(e),
            };
            let entry = FileEntry {
                size: c.size,
                mtime_ns: c.mtime_ns,
                sha256,
                kind: c.kind,
            };
            match index.files.get(&c.rel) {
                Some(old) if old.sha256 == entry.sha256 && old.size == entry.size => {
                    // Same content, new mtime (touched, or restored): remember, do not send.
                    report.unchanged += 1;
                    index.files.insert(c.rel, entry);
                    changed_index = true;
                }
                _ => to_send.push((c, entry)),
            }
        }
        to_send.sort_by(|a, b| a.0.rel.cmp(&b.0.rel));
        let mut watch = SlowWatch::new(
            format!(
                "syncing `{}` to `{}`",
                self.dir.display(),
                self.storage.url()
            ),
            self.config.slow_warning_after,
            to_send
                .iter()
                .map(|(c, _)| (c.rel.clone(), c.size))
                .collect(),
            self.config.reporting.clone(),
        );
        for (c, entry) in to_send {
            let sent = match self.storage.put_file(&c.rel, &c.path) {
                Ok(sent) => sent,
                Err(e) if e.io_kind() == Some(std::io::ErrorKind::NotFound) => {
                    self.config.reporting.emit(SyncEvent::NotSynced {
                        path: PathBuf::from(&c.rel),
                        why: NotSyncedReason::VanishedDuringSync,
                    });
                    report.vanished.push(c.rel);
                    continue;
                }
                Err(e) => return Err(e),
            };
            report.uploaded_bytes += sent;
            report.uploaded.push(c.rel.clone());
            index.files.insert(c.rel, entry);
            changed_index = true;
            watch.check();
        }
        if changed_index {
            self.storage.put_bytes(INDEX_KEY, &index.to_bytes())?;
            self.save_local_index(&index)?;
        }
        report.slow_warning = watch.warned;
        *self.index = Some(index);
        Ok(report)
    }

    #[expect(
        clippy::too_many_lines,
        reason = "every object is checked against the index and renamed into place in one \
                  visible order (compare, fetch to a temp name, verify, rename), which is what \
                  makes a killed restore leave nothing half-written"
    )]
    fn pull(&mut self) -> Result<Restored, SyncError> {
        let mut restored = Restored::default();
        let Some(bytes) = self.storage.get_bytes(INDEX_KEY)? else {
            return Ok(restored); // nothing stored yet: a fresh run
        };
        let remote = SyncIndex::parse(
            &bytes,
            &format!("`{INDEX_KEY}` in `{}`", self.storage.url()),
        )?;
        fs::create_dir_all(self.dir)
            .map_err(|e| SyncError::io("create run folder", self.dir, e))?;
        let latest = remote.latest_checkpoint.clone();
        let wanted: Vec<(String, FileEntry)> = remote
            .files
            .iter()
            .filter(|(rel, e)| match e.kind {
                FileKind::Checkpoint => latest.as_deref().is_some_and(|c| is_under(rel, c)),
                FileKind::Artifact => self.config.sync_artifacts,
            })
            .filter(|(rel, _)| !self.excludes.is_match(rel.as_str()))
            .map(|(r, e)| (r.clone(), e.clone()))
            .collect();
        let mut local_index = remote.clone();
        let mut to_fetch = Vec::new();
        for (rel, entry) in wanted {
            check_key(&rel).map_err(|e| SyncError::BadIndex {
                origin: format!("in `{}`", self.storage.url()),
                reason: format!("it lists a bad path: {e}"),
            })?;
            let path = self.dir.join(&rel);
            match fs::symlink_metadata(&path) {
                Ok(meta) if meta.is_file() => {
                    let local_mtime = mtime_ns(&meta);
                    if meta.len() == entry.size && local_mtime == entry.mtime_ns {
                        restored.up_to_date += 1;
                    } else if local_mtime > entry.mtime_ns {
                        self.config.reporting.emit(SyncEvent::NotRestored {
                            path: path.clone(),
                            from: None,
                            why: NotRestoredReason::LocalNewer {
                                storage: self.storage.url(),
                            },
                        });
                        restored.kept_newer.push(rel);
                    } else if sha256_file(&path)? == entry.sha256 {
                        restored.up_to_date += 1;
                        if let Some(e) = local_index.files.get_mut(&rel) {
                            e.mtime_ns = local_mtime;
                        }
                    } else {
                        to_fetch.push((rel, path, entry));
                    }
                }
                Ok(_) => {
                    return Err(SyncError::InTheWay { path });
                }
                Err(_) => to_fetch.push((rel, path, entry)),
            }
        }
        let mut watch = SlowWatch::new(
            format!(
                "restoring `{}` from `{}`",
                self.dir.display(),
                self.storage.url()
            ),
            self.config.slow_warning_after,
            to_fetch
                .iter()
                .map(|(r, _, e)| (r.clone(), e.size))
                .collect(),
            self.config.reporting.clone(),
        );
        let mut reclaimed_in = std::collections::HashSet::new();
        for (rel, path, entry) in to_fetch {
            let parent = path.parent().unwrap_or(self.dir);
            fs::create_dir_all(parent).map_err(|e| SyncError::io("create folder", parent, e))?;
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
            if reclaimed_in.insert(parent.to_path_buf()) {
                // Leftovers of restores killed in this folder (their process is gone).
                clima_artifact_fs::reclaim_stale_temps(parent, RESTORE_MARK);
            }
            let tmp = parent.join(clima_artifact_fs::temp_name(name, RESTORE_MARK));
            // Verified against the index before it is renamed into place; an object that is
            // not a regular file, is larger than recorded or has other bytes is skipped with a
            // warning naming it, and nothing of it stays in the run folder.
            let result = self
                .storage
                .get_file(&rel, &tmp, entry.size)
                .and_then(|n| Ok((n, sha256_file(&tmp)?)));
            let n = match result {
                Ok((n, sha)) if sha == entry.sha256 => n,
                Ok((_, sha)) => {
                    let _ = fs::remove_file(&tmp);
                    self.config.reporting.emit(SyncEvent::NotRestored {
                        path: PathBuf::from(&rel),
                        from: Some(self.storage.url()),
                        why: NotRestoredReason::ContentMismatch {
                            sha256: sha,
                            recorded: entry.sha256,
                        },
                    });
                    restored.skipped.push(rel);
                    continue;
                }
                Err(
                    e @ (SyncError::NotARegularFile { .. }
                    | SyncError::NotAFolder { .. }
                    | SyncError::LargerThanRecorded { .. }),
                ) => {
                    let _ = fs::remove_file(&tmp);
                    self.config.reporting.emit(SyncEvent::NotRestored {
                        path: PathBuf::from(&rel),
                        from: None,
                        why: NotRestoredReason::Refused(e.to_string()),
                    });
                    restored.skipped.push(rel);
                    continue;
                }
                Err(e) => {
                    let _ = fs::remove_file(&tmp);
                    return Err(e);
                }
            };
            let placed = fs::OpenOptions::new()
                .write(true)
                .open(&tmp)
                .map_err(|e| SyncError::io("open", &tmp, e))
                .and_then(|file| {
                    set_mtime_ns(&file, entry.mtime_ns)
                        .map_err(|e| SyncError::io("set the modification time of", &tmp, e))
                })
                .and_then(|()| {
                    fs::rename(&tmp, &path).map_err(|e| SyncError::io("move into place", &path, e))
                });
            if let Err(e) = placed {
                let _ = fs::remove_file(&tmp);
                return Err(e);
            }
            restored.downloaded_bytes += n;
            restored.downloaded.push(rel);
            watch.check();
        }
        self.save_local_index(&local_index)?;
        restored.checkpoint = latest.map(|c| self.dir.join(c));
        restored.slow_warning = watch.warned;
        *self.index = Some(local_index);
        Ok(restored)
    }
}
