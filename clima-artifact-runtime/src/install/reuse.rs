//! A whole install that reuses what the depots hold: the files of the artifact already
//! fetched one by one (its partial folder), and files of the same content under other
//! artifacts (another version: `crate::held`, found by blob id and size). They are copied into
//! the install's temp dir (their blob ids checked against the authenticated index while they
//! are copied: a file held is trusted no more than a download), and only the members of the
//! other files are fetched, by byte ranges; then the usual commit into `artifacts/<hash>`.
//!
//! ```text
//! partial files here, or a seekable download (`index-sha256`) and a depot holding anything?
//! -> index (last bytes, authenticated) -> enough of it held? (at least 1/10 of the members'
//!   bytes, partial files counted first, then files found held, largest first: else the
//!   ordinary download, over several connections and unpacked on every core, is the faster way)
//! -> each entry in file order: a partial file copied, else a file held copied (blob ids
//!    checked), or, failing both, its members fetched with the rest (up to
//!    `NetConfig::connections` ranges at once) -> every file read-only in the temp dir ->
//!    commit
//! ```
//!
//! Every file of the tree is an entry of the authenticated index whose blob id was checked
//! as it was written, so the tree written is the index's, which is the manifest's
//! (`git-tree-sha1`, and `git-tree-sha256` when the entry has one). Anything that goes wrong
//! with the source gives `None` and the ordinary install, said with a warning.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::io::{BufWriter, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use clima_artifact_depot::{Staging, TempDir};
use clima_artifact_extract::seekable::remote::remote_index;
use clima_artifact_extract::seekable::{Authenticated, Expected, IndexEntry, IndexLimits};
use clima_artifact_extract::tree_hash::EntryMode;
use clima_artifact_fs::Dir;
use clima_artifact_manifest::ArtifactVariant;
use clima_artifact_net::trust::redact_url;

use crate::notice::InstallEvent;

use super::{ManifestPlace, check_room};
use crate::held::{Held, copy_entry_from};
use crate::ranged_source::{
    Destination, Refusal, fetch_entry, for_each_span, open, ordered, remote_refusal,
};
use crate::{Config, Error, Installed, Origin};

/// The share of the members' bytes that must be held already for the reuse to be worth it.
const MIN_HELD_SHARE: u64 = 10;

/// Installs `variant` into the depot of `staging` from its partial files and ranges of its
/// seekable tarball (see the module's documentation). `Ok(None)`: not done (no partial files,
/// too few, no seekable source, or the source failed: said), nothing left behind; the caller
/// installs as usual.
pub(crate) fn install_reusing(
    name: &str,
    variant: &ArtifactVariant,
    manifest: &Path,
    config: &Config,
    staging: &Staging,
) -> Result<Option<Installed>, Error> {
    let depot = staging.depot();
    let hash = variant.git_tree_sha1;
    let held: HashSet<String> = depot.partial_file_paths(&hash).into_iter().collect();
    // Content held under other names (another version, other artifacts: `crate::held`) is
    // looked for only when a download says it is seekable: no request is made for others.
    let seekable = variant.downloads.iter().any(|d| d.index_sha256.is_some());
    if held.is_empty() && !seekable {
        return Ok(None);
    }
    let mut blobs = Held::scan(config);
    if held.is_empty() && blobs.is_empty() {
        return Ok(None);
    }
    let place = ManifestPlace::of(manifest);
    // The first usable download, which the seekable ones come first among.
    let Some(dl) = ordered(variant, config, &place.folder).into_iter().next() else {
        return Ok(None);
    };
    let start = Instant::now();
    let (path, received, reused) = match rebuild(
        name,
        variant,
        dl,
        (&place, config, staging),
        (&held, &mut blobs),
    ) {
        Ok(Some(done)) => done,
        Ok(None) => return Ok(None),
        Err(Refusal::Fatal(e)) => return Err(e),
        Err(Refusal::Whole(why)) => return Ok(said(name, why, config)),
        Err(Refusal::Failed(f)) => return Ok(said(name, f.to_string(), config)),
    };
    config.reporting().emit(InstallEvent::InstalledReusing {
        artifact: name.to_owned(),
        path: path.clone(),
        received,
        copied: reused,
    });
    Ok(Some(Installed {
        path,
        origin: Origin::Downloaded {
            url: redact_url(&dl.url),
            bytes: received + reused,
            received_bytes: Some(received),
            reused_bytes: Some(reused),
            seconds: start.elapsed().as_secs_f64(),
        },
    }))
}

/// The install itself from `dl`: the committed path, the bytes received and the members'
/// bytes reused (the partial files of `held.0`, content found in `held.1`); `None` when too
/// little is held for it to pay.
fn rebuild(
    name: &str,
    variant: &ArtifactVariant,
    dl: &clima_artifact_manifest::Download,
    (place, config, staging): (&ManifestPlace, &Config, &Staging),
    (held, blobs): (&HashSet<String>, &mut Held),
) -> Result<Option<(std::path::PathBuf, u64, u64)>, Refusal> {
    let depot = staging.depot();
    let hash = variant.git_tree_sha1;
    let (mut src, tail) = open(dl, &place.folder, config)?;
    let expected = Expected {
        tree_sha1: hash,
        tree_sha256: variant.git_tree_sha256,
        index_sha256: dl.index_sha256,
    };
    let limits = IndexLimits {
        max_entries: config.max_entries,
        ..IndexLimits::default()
    };
    let Some(auth) = remote_index(&mut src, &tail, &expected, &limits)
        .map_err(|e| remote_refusal(&dl.url, e))?
    else {
        return Ok(None);
    };
    let entries = &auth.index().entries;
    let is_held = |i: usize| std::str::from_utf8(&entries[i].path).is_ok_and(|p| held.contains(p));
    let held_bytes: u64 = (0..entries.len())
        .filter(|i| is_held(*i))
        .map(|i| entries[i].length)
        .sum();
    let need = auth.index().data_size.div_ceil(MIN_HELD_SHARE);
    if held_bytes < need && !blobs.covers(entries, is_held, held_bytes, need) {
        return Ok(None);
    }
    let sizes = entries.iter().map(|e| e.size).sum();
    check_room(name, (sizes, "the files of the artifact"), depot, config)
        .map_err(Refusal::Fatal)?;
    let tmp = staging.temp_dir().map_err(|e| Refusal::Fatal(e.into()))?;
    let tree = Tree::new(&tmp);
    let partial = Dir::open(&depot.partial_files_dir(&hash)).ok();
    let mut todo = Vec::new();
    let mut reused = 0;
    for (i, e) in entries.iter().enumerate() {
        match partial.as_ref().filter(|_| is_held(i)) {
            Some(dir) if tree.copy_held(&auth, i, dir).map_err(Refusal::Fatal)? => {
                reused += e.length;
            }
            _ if blobs.copy_into(e, &tree).map_err(Refusal::Fatal)?.is_some() => {
                reused += e.length;
            }
            _ => todo.push(i),
        }
    }
    // The rest over several connections at once: each file is checked as it is written, and
    // the temp dir is committed only once every one was.
    for_each_span(
        &mut src,
        &auth,
        &todo,
        config.net.connections,
        &|i, reader| fetch_entry(&tree, &auth, i, reader, &dl.url),
    )?;
    drop(tree);
    let path = staging
        .commit(tmp, variant.git_tree_sha256.as_ref())
        .map_err(|e| Refusal::Fatal(e.into()))?;
    Ok(Some((path, src.received(), reused)))
}

/// The detail line that the files the depots hold (fetched before, or of other artifacts) are not
/// reused (`why`), and `None`.
fn said(name: &str, why: String, config: &Config) -> Option<Installed> {
    config.reporting().emit(InstallEvent::ReuseFallback {
        artifact: name.to_owned(),
        why,
    });
    None
}

/// The tree being written in the install's temp dir: its folders, made as files need them
/// (by the connections at once: the folders found are shared).
struct Tree<'a> {
    tmp: &'a TempDir<'a>,
    folders: Mutex<HashMap<Vec<u8>, Dir>>,
}

impl<'a> Tree<'a> {
    fn new(tmp: &'a TempDir<'a>) -> Tree<'a> {
        Tree {
            tmp,
            folders: Mutex::new(HashMap::new()),
        }
    }

    fn failed(&self, what: &str, rel: &[u8], e: std::io::Error) -> Error {
        Error::io(what, self.tmp.path().join(OsStr::from_bytes(rel)), e)
    }

    /// The folder of `path` (a `/`-separated relative path from an authenticated index) and
    /// its name; folders are made `0o755` as the extraction makes them.
    fn parent_of<'p>(&self, path: &'p [u8]) -> Result<(Dir, &'p OsStr), Error> {
        let (parent, name) = match path.iter().rposition(|b| *b == b'/') {
            Some(at) => (&path[..at], &path[at + 1..]),
            None => (&path[..0], path),
        };
        let mut folders = self.folders.lock().unwrap_or_else(|p| p.into_inner());
        if !folders.contains_key(parent) {
            let mut at = 0;
            let mut dir = self
                .tmp
                .dir()
                .try_clone()
                .map_err(|e| self.failed("open", b"", e))?;
            for component in parent.split(|b| *b == b'/').filter(|c| !c.is_empty()) {
                at += component.len() + usize::from(at > 0);
                let prefix = &parent[..at];
                dir = match folders.get(prefix) {
                    Some(d) => d.try_clone().map_err(|e| self.failed("open", prefix, e))?,
                    None => {
                        let d = dir
                            .create_dir(OsStr::from_bytes(component), 0o755)
                            .and_then(|d| d.set_mode(0o755).map(|()| d))
                            .map_err(|e| self.failed("create", prefix, e))?;
                        let kept = d.try_clone().map_err(|e| self.failed("open", prefix, e))?;
                        folders.insert(prefix.to_vec(), kept);
                        d
                    }
                };
            }
            folders.insert(parent.to_vec(), dir);
        }
        let dir = folders[parent]
            .try_clone()
            .map_err(|e| self.failed("open", parent, e))?;
        Ok((dir, OsStr::from_bytes(name)))
    }

    /// Copies entry `i`'s file from the partial folder `held` into the tree, checking its blob
    /// id against the index's: `false` (nothing left in the tree) when it is not there, not a
    /// regular file, or not the content the index says (then it is fetched with the rest).
    fn copy_held(&self, auth: &Authenticated, i: usize, held: &Dir) -> Result<bool, Error> {
        let e = &auth.index().entries[i];
        if e.mode == EntryMode::Symlink {
            return Ok(false);
        }
        let rel = Path::new(OsStr::from_bytes(&e.path));
        let (Some(parent), Some(file_name)) = (rel.parent(), rel.file_name()) else {
            return Ok(false);
        };
        let Ok(Some(mut from)) = held
            .open_dirs(parent)
            .and_then(|d| d.map_or(Ok(None), |d| d.open_file(file_name)))
        else {
            return Ok(false);
        };
        Ok(copy_entry_from(self, e, &mut from)?.is_some())
    }
}

impl Destination for Tree<'_> {
    type Done<'d>
        = ()
    where
        Self: 'd;

    fn path_of(&self, e: &IndexEntry) -> PathBuf {
        self.tmp.path().join(OsStr::from_bytes(&e.path))
    }

    fn failure(&self, _url: &str, error: Error) -> Refusal {
        Refusal::Fatal(error)
    }

    fn refuses(&self, _e: &IndexEntry, _url: &str) -> Option<Refusal> {
        None
    }

    fn symlink(&self, e: &IndexEntry, target: &[u8]) -> Result<(), Error> {
        let (dir, name) = self.parent_of(&e.path)?;
        dir.symlink(OsStr::from_bytes(target), name)
            .map_err(|err| Error::io("create", dir.path().join(name), err))
    }

    fn file<'d, E>(
        &'d self,
        e: &IndexEntry,
        write: &mut dyn FnMut(&mut dyn Write) -> Result<bool, E>,
    ) -> Result<Result<Option<()>, E>, Error> {
        let (dir, name) = self.parent_of(&e.path)?;
        let file = dir
            .create_new(name, 0o600)
            .map_err(|err| Error::io("create", dir.path().join(name), err))?;
        let written = write(&mut BufWriter::with_capacity(1 << 20, &file));
        if !matches!(written, Ok(true)) {
            drop(file);
            dir.remove_file(name)
                .map_err(|err| Error::io("remove", dir.path().join(name), err))?;
            return Ok(written.map(|_| None));
        }
        set_read_only(&file, e.mode)
            .map_err(|err| Error::io("finish", dir.path().join(name), err))?;
        Ok(Ok(Some(())))
    }
}

/// The read-only mode the extraction leaves installed files with.
fn set_read_only(file: &std::fs::File, mode: EntryMode) -> std::io::Result<()> {
    file.set_permissions(std::fs::Permissions::from_mode(
        mode.installed_permissions(),
    ))
}
