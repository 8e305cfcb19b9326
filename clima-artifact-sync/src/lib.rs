//! # clima-artifact-sync
//!
//! Output artifacts: sync a run's files to durable storage at checkpoints, restore them on
//! resume, and the storage layer `clima-artifacts publish` uploads tarballs through.
//!
//! ```no_run
//! use clima_comms::Singleton;
//! use clima_artifact_sync::{RunSync, SyncConfig, open_storage};
//!
//! let config = SyncConfig::from_env()?;  // its `reporting`: where notices go (stderr by default)
//! let storage = open_storage("s3://archive/runs/2025-01-run7", &config.reporting)?; // or "/archive/run7"
//! let mut sync = RunSync::new("run7", storage, config, &Singleton)?;
//! let restored = sync.restore()?;          // on resume: latest checkpoint + output artifacts
//! // ... run; after writing run7/checkpoints/step-100/:
//! sync.on_checkpoint("checkpoints/step-100")?;
//! sync.finish()?;                          // when the run completes or stops
//! # Ok::<(), clima_artifact_sync::SyncError>(())
//! ```
//!
//! # Layout
//!
//! ```text
//! run folder                              storage (path or s3://bucket/prefix)
//! run7/diag/energy.csv          <---->    diag/energy.csv
//! run7/checkpoints/step-100/x   <---->    checkpoints/step-100/x
//! run7/.clima-sync/index.json   <---->    .clima-sync/index.json   (sync manifest)
//! ```
//!
//! Files inside a folder passed to [`RunSync::on_checkpoint`] are *checkpoint* files; all other
//! files are *output artifacts*. The sync manifest ([`SyncIndex`]) records, per file, size,
//! mtime, SHA-256 and kind, plus the checkpoint folders and the latest one.
//!
//! # Push (`on_checkpoint`, `finish`)
//!
//! 1. list the checkpoint folder, and, if `sync_artifacts` is on, every other file that is not in
//!    an older checkpoint folder, dropping files matched by an exclude glob;
//! 2. a file whose size and mtime equal its manifest entry is unchanged (no read); otherwise it
//!    is hashed, and sent only if the hash differs;
//! 3. each file is stored whole or not at all (temp file + rename for paths; single PUT or a
//!    completed multipart upload for S3);
//! 4. after all files, the manifest is stored, then written locally. A crash in between only
//!    means the next sync re-hashes (and may re-send) the files of the interrupted one.
//!
//! A sync still running after [`SyncConfig::slow_warning_after`] prints a warning (a [`notice::SyncEvent::SlowSync`])
//! that names the biggest files and is returned in [`SyncReport::slow_warning`].
//!
//! # Restore
//!
//! Reads the stored manifest and downloads the files of the latest checkpoint, and (if
//! `sync_artifacts` is on) the output artifacts, skipping excluded ones. For a file that
//! exists locally: same size and mtime, or same hash, is up to date; a local mtime *newer*
//! than the stored one means the local file is kept (never overwritten) and is sent at the
//! next push; otherwise the stored copy replaces it (temp file + rename). Restored files get
//! the stored mtime, so a restored file that is then appended to differs in size and mtime and
//! is sent in its new state at the next push. Stored files are never deleted by a sync.
//!
//! # MPI
//!
//! All three operations are collective over the context given to [`RunSync::new`]. In
//! [`SyncMode::Root`] (default) rank 0 syncs the shared run folder and broadcasts its outcome;
//! in [`SyncMode::PerRank`] rank `r` syncs `<run_dir>/rank-<r>` (node-local scratch) with
//! `<storage>/rank-<r>`, and a failure on any rank is returned on every rank.

mod config;
mod error;
mod index;
pub mod notice;
#[cfg(feature = "s3")]
mod object;
mod path;
mod run;
mod storage;

/// The contexts `RunSync` is collective over (from `clima-comms`).
pub use clima_comms::{Context, Singleton};
pub use config::{
    SYNC_ARTIFACTS_ENV, SYNC_EXCLUDE_ENV, SYNC_PER_RANK_ENV, SYNC_WARN_AFTER_ENV, SyncConfig,
    SyncMode,
};
pub use error::SyncError;
pub use index::{FileEntry, FileKind, INDEX_KEY, STATE_DIR, SyncIndex, sha256_file};
#[cfg(feature = "s3")]
pub use object::{DEFAULT_PART_SIZE, ObjectStorage};
pub use path::PathStorage;
pub use run::{Restored, RunSync, SyncReport, rank_dir};
pub use storage::{MAX_INDEX_BYTES, Storage, StoredObject, check_key, open_storage};
