//! The tarball of step 1 and 2 of [`super::publish`]: found or packed from the installed copy
//! ([`find_or_pack`]), then checked to hold the entry's content, with its SHA-256 and MD5 from
//! the same pass ([`verify_tarball`]).

use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use clima_artifact_runtime::extract::seekable;
use md5::Digest as _;
use sha2::Digest as _;

use super::error::from_ops;
use super::state::Verified;
use super::{ArchiveError, ArchiveEvent, PublishRequest};
use clima_artifact_runtime::progress::Reporting;

/// The tarball to upload: given, found, or packed from the installed copy.
pub(super) fn find_or_pack(
    req: &PublishRequest,
    manifest_dir: &Path,
    variant: &clima_artifact_manifest::ArtifactVariant,
    reporting: &Reporting,
) -> Result<PathBuf, ArchiveError> {
    let regular = |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.is_file());
    if let Some(t) = &req.tarball {
        if !regular(t) {
            return Err(ArchiveError::Input(format!(
                "tarball `{}` is not a file; pass the .tar.gz written by `create`",
                t.display()
            )));
        }
        return Ok(t.clone());
    }
    let file = format!("{}.tar.gz", req.name);
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    for dir in [manifest_dir, cwd.as_path()] {
        let p = dir.join(&file);
        if regular(&p) {
            return Ok(p);
        }
    }
    // Pack the installed copy, as `create` would.
    let config = crate::depots::config().map_err(from_ops)?;
    let depots = config.search_depots();
    let Some((_, dir)) = crate::depots::installed_in(&depots, &variant.git_tree_sha1) else {
        return Err(ArchiveError::Input(format!(
            "no tarball of `{}`: found no `{file}` in `{}` or the current folder, and the \
             artifact is not installed; run `clima-artifacts create` (or `fetch {}`) first, or \
             pass --tarball",
            req.name,
            manifest_dir.display(),
            req.name
        )));
    };
    let out = cwd.join(&file);
    reporting.emit(ArchiveEvent::Packing {
        name: req.name.clone(),
        dir: dir.clone(),
        out: out.clone(),
    });
    let entries = crate::tarball::collect_entries(&dir).map_err(from_ops)?;
    crate::tarball::check_symlinks(&dir, &entries).map_err(from_ops)?;
    let flavour = seekable::Flavour::Gzip;
    let block = seekable::DEFAULT_BLOCK_SIZE;
    let made = crate::tarball::write_seekable(&dir, &entries, &out, flavour, block, &|_| {})
        .map_err(from_ops)?;
    if made.tree_hash != variant.git_tree_sha1 {
        return Err(ArchiveError::Input(format!(
            "the installed copy `{}` has content {}, not {}; run `clima-artifacts verify {}`",
            dir.display(),
            made.tree_hash,
            variant.git_tree_sha1,
            req.name
        )));
    }
    Ok(made.path)
}

/// A reader computing SHA-256 and MD5 of what passes.
pub(super) struct Hashing<R> {
    pub(super) inner: R,
    pub(super) sha256: sha2::Sha256,
    pub(super) md5: md5::Md5,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        sha2::Digest::update(&mut self.sha256, &buf[..n]);
        md5::Digest::update(&mut self.md5, &buf[..n]);
        Ok(n)
    }
}

pub(super) fn mtime_ns(meta: &std::fs::Metadata) -> u128 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos())
}

/// Checks that the tarball holds `tree` (unpacking it into a temp folder) and returns its
/// hashes; a tarball verified before (same path, size and mtime) is not read again.
pub(super) fn verify_tarball(
    tarball: &Path,
    size: u64,
    tree: &str,
    known: Option<&Verified>,
    reporting: &Reporting,
) -> Result<Verified, ArchiveError> {
    let path = std::path::absolute(tarball).unwrap_or_else(|_| tarball.to_path_buf());
    let meta = std::fs::metadata(&path)
        .map_err(|e| ArchiveError::Io(format!("cannot read `{}`: {e}", path.display())))?;
    let mtime = mtime_ns(&meta);
    if let Some(k) = known
        && k.path == path
        && k.size == size
        && k.mtime_ns == mtime
        && k.tree == tree
    {
        return Ok(k.clone());
    }
    reporting.emit(ArchiveEvent::Checking {
        path: path.clone(),
        tree: tree.to_owned(),
    });
    let tmp = tempfile::tempdir()
        .map_err(|e| ArchiveError::Io(format!("cannot create a temporary folder: {e}")))?;
    let dest = tmp.path().join("content");
    std::fs::create_dir(&dest)
        .map_err(|e| ArchiveError::Io(format!("cannot create `{}`: {e}", dest.display())))?;
    let file = std::fs::File::open(&path)
        .map_err(|e| ArchiveError::Io(format!("cannot open `{}`: {e}", path.display())))?;
    let mut reader = Hashing {
        inner: file,
        sha256: sha2::Sha256::new(),
        md5: md5::Md5::new(),
    };
    let extracted = clima_artifact_runtime::extract::extract_archive(
        io::BufReader::with_capacity(1 << 20, &mut reader),
        &dest,
        &clima_artifact_runtime::extract::ExtractLimits {
            max_unpacked_bytes: 1 << 40,
            ..Default::default()
        },
    )
    .map_err(|e| {
        ArchiveError::Input(format!(
            "`{}` is not a usable artifact tarball: {e}; pass the .tar.gz written by `create`",
            path.display()
        ))
    })?;
    // Trailing bytes after the archive's end count in the file's hashes too.
    io::copy(&mut reader, &mut io::sink())
        .map_err(|e| ArchiveError::Io(format!("cannot read `{}`: {e}", path.display())))?;
    let got = extracted.tree_hash.to_hex();
    if got != tree {
        return Err(ArchiveError::Input(format!(
            "`{}` holds artifact content {got}, but the manifest's entry is {tree}; nothing was \
             sent: publish the tarball `create` wrote for this entry, or run `create` again",
            path.display()
        )));
    }
    let index_sha256 = crate::tarball::index_sha256_of(&path, &extracted.tree_hash)
        .map_err(|e| ArchiveError::Input(e.into_message()))?
        .map(|h| h.to_hex());
    Ok(Verified {
        path,
        size,
        mtime_ns: mtime,
        tree: got,
        sha256: hex::encode(reader.sha256.finalize()),
        md5: hex::encode(reader.md5.finalize()),
        index_sha256,
    })
}
