//! Only the files a run reads: some files of an artifact whose download is a seekable tarball
//! (`docs/seekable.md`), fetched by byte ranges and kept in the depot's partial folder
//! (`<depot>/clima_partial/<hash>/`, see the depot crate's `partial_files`) while the artifact
//! is not installed whole.
//!
//! ```text
//! override or artifacts/<hash> in a depot -> the path inside it (as for any sub-path)
//! every file asked for already fetched    -> its path in the partial folder
//! else, under the artifact's install lock in the first writable depot:
//!   the last bytes (footer, usually the index) -> the index -> authenticate (index-sha256,
//!   bounds, structure, git-tree-sha1 / git-tree-sha256) -> the members of the files asked
//!   for that are not there yet (neighbours in one request; up to `NetConfig::connections`
//!   requests at once) -> each decompressed, its header, block digests and blob id checked
//!   while it is written to a temp file -> read-only -> renamed to its path, all together
//!   once every one was checked
//! not seekable, or a server without ranges -> the whole artifact, installed as always
//! ```
//!
//! Every range answer is checked by the network crate (`ranges`: `206`, the exact
//! `Content-Range`, the same total, a bounded body); what a server sends is trusted only
//! through the authenticated index. A file is visible only once its blob id is the index's.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use clima_artifact_depot::Depot;
use clima_artifact_extract::seekable::remote::{FIRST_TAIL, remote_index};
use clima_artifact_extract::seekable::{Authenticated, Expected, IndexLimits};
use clima_artifact_extract::tree_hash::EntryMode;
use clima_artifact_manifest::{ArtifactVariant, Download};
use clima_artifact_net::trust::redact_url;

use crate::notice::InstallEvent;

use crate::install::{Install, Locked, ManifestPlace, check_room, suggested_overrides_file};
use crate::ranged_source::{
    Ranges, Refusal, fetch_entry, for_each_span, open_with_tail, ordered, remote_refusal,
};
use crate::{Config, Error, Installed, Origin};

/// What [`ensure_files`] made available.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Files {
    /// The full path of each path asked for, in order: inside the installed artifact, or in
    /// the partial folder.
    pub paths: Vec<PathBuf>,
    /// The artifact as a whole, when it is installed (or overridden): the paths are inside
    /// it. `None` when the paths are in a partial folder.
    pub whole: Option<Installed>,
    /// Files fetched by this call.
    pub fetched: usize,
    /// Files asked for that were there already: in the partial folder, or copied (checked)
    /// from a file of the same content the depots held (another version's, say).
    pub held: usize,
    /// Bytes received from the server by this call.
    pub received: u64,
    /// The URL the files came from (without credentials), when some were fetched.
    pub url: Option<String>,
    /// Wall time of the call in seconds.
    pub seconds: f64,
}

impl Files {
    /// Where the files came from, as the provenance report records it: downloaded by this
    /// call (the bytes received), else from the depot (or the whole artifact's origin).
    pub fn origin(&self) -> Origin {
        if let Some(whole) = &self.whole {
            return whole.origin.clone();
        }
        match &self.url {
            Some(url) if self.fetched > 0 => Origin::Downloaded {
                url: url.clone(),
                bytes: self.received,
                received_bytes: Some(self.received),
                reused_bytes: Some(0),
                seconds: self.seconds,
            },
            _ => Origin::Depot,
        }
    }
}

/// Whether a call for a sub-path of `variant` should fetch that file alone when the artifact
/// is not installed: a download says it is seekable (`index-sha256`). (`fetch --only` tries
/// any download: a tarball whose footer says seekable is read by ranges too.)
pub(crate) fn prefers_partial(variant: &ArtifactVariant) -> bool {
    variant.downloads.iter().any(|d| d.index_sha256.is_some())
}

/// [`ensure_files`] as a collective call over `ctx` (every rank must make it, as for
/// [`ensure_collective`](crate::ensure_collective)): rank 0 fetches the files once and every
/// rank gets its answer, or the same error. In node-local mode the leader of each node
/// fetches them into its node's depot (a few ranges each: no broadcast of the bytes), and
/// the ranks of a node get their leader's answer.
pub fn ensure_files_collective(
    ctx: &dyn clima_comms::Context,
    name: &str,
    variant: &ArtifactVariant,
    manifest: &Path,
    config: &Config,
    paths: &[&str],
) -> Result<Files, Error> {
    let what = format!("fetching files of artifact `{name}`");
    let Some(node_depot) = &config.node_local_depot else {
        return clima_comms::root_decides(ctx, &what, || {
            ensure_files(name, variant, manifest, config, paths)
        });
    };
    let node = crate::node_stream::split_nodes(ctx, config)?;
    let mut node_config = config.clone();
    node_config.depots.retain(|d| d != node_depot);
    node_config.depots.insert(0, node_depot.clone());
    let mine = clima_comms::root_decides(&*node, &what, || {
        ensure_files(name, variant, manifest, &node_config, paths)
    });
    // Every rank of the job gets an error if any node failed (the lowest node's).
    clima_comms::all_succeed(ctx, mine, |_, e| e)
}

/// Makes the files `paths` (each a file, a symlink, or a folder whose files are all meant)
/// of artifact `name` available: inside the artifact when it is installed (or overridden),
/// else fetched alone from its seekable tarball into the partial folder of the first writable
/// depot. Falls back to installing the whole artifact (with a warning) when its tarball is not
/// seekable or its server serves no byte ranges. `manifest` is as for
/// [`ensure_variant`](crate::ensure_variant).
pub fn ensure_files(
    name: &str,
    variant: &ArtifactVariant,
    manifest: &Path,
    config: &Config,
    paths: &[&str],
) -> Result<Files, Error> {
    let hash = variant.git_tree_sha1;
    let install = Install::new(name, variant, manifest, config);
    if let Some(whole) = install.found()? {
        return inside(name, whole, paths);
    }
    if let Some(held) = all_held(install.depots(), variant, paths) {
        return Ok(held);
    }
    let place = install.manifest();
    let staging = match install.lock()? {
        Locked::Ready(staging) => staging,
        Locked::Installed(whole) => return inside(name, whole, paths),
    };
    let mut failures = Vec::new();
    let mut why_whole = None;
    let sources = ordered(variant, config, &place.folder);
    for (k, dl) in sources.iter().enumerate() {
        match fetch_from(name, variant, dl, place, config, &staging, paths) {
            Ok(files) => return Ok(files),
            Err(Refusal::Whole(why)) => {
                why_whole.get_or_insert(why);
            }
            Err(Refusal::Fatal(e)) => return Err(e),
            Err(Refusal::Failed(f)) => {
                if k + 1 < sources.len() {
                    config.reporting().emit(InstallEvent::NextSource {
                        error: f.to_string(),
                        cause: f.to_string(),
                    });
                }
                failures.push(f);
            }
        }
    }
    drop(staging);
    if let Some(why) = why_whole {
        config.reporting().emit(InstallEvent::PartialFallback {
            artifact: name.to_owned(),
            why,
        });
        let whole = install.ensure(None)?;
        return inside(name, whole, paths);
    }
    if failures.is_empty() {
        // Only network sources, and offline: the whole install says so.
        let whole = install.ensure(None)?;
        return inside(name, whole, paths);
    }
    Err(Error::DownloadFailed {
        name: name.to_owned(),
        hash,
        failures,
        manifest: place.file.clone(),
        overrides_file: suggested_overrides_file(config),
    })
}

/// The paths asked for inside the whole artifact `whole`.
fn inside(name: &str, whole: Installed, paths: &[&str]) -> Result<Files, Error> {
    let paths = paths
        .iter()
        .map(|p| crate::subpath::with_subpath(name, &whole.path, Some(p)))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Files {
        paths,
        whole: Some(whole),
        fetched: 0,
        held: 0,
        received: 0,
        url: None,
        seconds: 0.0,
    })
}

/// The answer without any request when every path asked for is a file already fetched into
/// one of `depots` (a folder needs the index to know its files).
fn all_held(depots: &[Depot], variant: &ArtifactVariant, paths: &[&str]) -> Option<Files> {
    let hash = variant.git_tree_sha1;
    let found = paths
        .iter()
        .map(|p| depots.iter().find_map(|d| d.partial_file(&hash, p)))
        .collect::<Option<Vec<_>>>()?;
    Some(Files {
        held: found.len(),
        paths: found,
        whole: None,
        fetched: 0,
        received: 0,
        url: None,
        seconds: 0.0,
    })
}

/// Fetches the files `paths` of `variant` from `dl` into the partial folder of `staging`.
fn fetch_from(
    name: &str,
    variant: &ArtifactVariant,
    dl: &Download,
    place: &ManifestPlace,
    config: &Config,
    staging: &clima_artifact_depot::Staging,
    paths: &[&str],
) -> Result<Files, Refusal> {
    let start = Instant::now();
    let url = dl.url.as_str();
    let (mut src, auth) = authenticated_index(variant, dl, place, config)?;
    let mut wanted = Vec::new();
    for p in paths {
        let found = auth.select(p);
        if found.is_empty() {
            return Err(Refusal::Fatal(missing(name, &auth, p)));
        }
        wanted.extend(found);
    }
    let depot = staging.depot();
    let hash = variant.git_tree_sha1;
    let entries = &auth.index().entries;
    let is_held = |i: &usize| {
        std::str::from_utf8(&entries[*i].path).is_ok_and(|p| depot.partial_file(&hash, p).is_some())
    };
    let (mut held, mut todo): (Vec<usize>, Vec<usize>) = wanted.iter().partition(|i| is_held(i));
    let files = staging
        .partial_files()
        .map_err(|e| Refusal::Fatal(e.into()))?;
    let mut seen: std::collections::HashSet<usize> = wanted.iter().copied().collect();
    let (mut fetched, mut bytes, mut sizes) = (0, 0, 0);
    // A symlink asked for brings its target (inside the artifact), a few links deep.
    let mut links: Vec<usize> = held.clone();
    for _ in 0..MAX_LINK_ROUNDS {
        // Files the depots hold under other names are copied, checked (`crate::held`), with
        // room for them first; only the rest is fetched and counts as downloaded.
        let copy_room = sizes + todo.iter().map(|i| entries[*i].size).sum::<u64>();
        within_limits(name, (bytes, copy_room), &place.file, config, depot)?;
        let (copied, rest) =
            crate::held::copy_into_partial(&auth, std::mem::take(&mut todo), &files, config)?;
        held.extend(copied);
        todo = rest;
        bytes += todo.iter().map(|i| entries[*i].length).sum::<u64>();
        sizes += todo.iter().map(|i| entries[*i].size).sum::<u64>();
        within_limits(name, (bytes, sizes), &place.file, config, depot)?;
        fetch_entries(
            &auth,
            &mut src,
            &files,
            (url, config.net.connections),
            &todo,
        )?;
        fetched += todo.len();
        links.append(&mut todo);
        let targets = link_targets(&auth, &links, files.path());
        links.clear();
        for t in targets.into_iter().filter(|t| seen.insert(*t)) {
            if is_held(&t) {
                held.push(t);
                links.push(t);
            } else {
                todo.push(t);
            }
        }
        if todo.is_empty() && links.is_empty() {
            break;
        }
    }
    // Counted once files are there: a count beside a folder that never held a file would
    // outlive it (gc removes a count only with its folder).
    record_count(depot, &hash, entries.len());
    let root = files.path().to_path_buf();
    let received = src.received();
    crate::debug_speed::after_install(name, received, start.elapsed(), config.reporting());
    Ok(Files {
        paths: paths
            .iter()
            .map(|p| root.join(p.trim_end_matches('/')))
            .collect(),
        whole: None,
        fetched,
        held: held.len(),
        received,
        url: Some(redact_url(url)),
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// The source of `dl` and its authenticated index: remembered from an earlier fetch of this
/// process ([`IndexKey`]: only the first request is made, for one byte), else read from the
/// tarball's last bytes (and one more request when the index did not fit in them).
fn authenticated_index(
    variant: &ArtifactVariant,
    dl: &Download,
    place: &ManifestPlace,
    config: &Config,
) -> Result<(Ranges, Arc<Authenticated>), Refusal> {
    let url = dl.url.as_str();
    let expected = Expected {
        tree_sha1: variant.git_tree_sha1,
        tree_sha256: variant.git_tree_sha256,
        index_sha256: dl.index_sha256,
    };
    let key = IndexKey::of(url, &expected, config);
    let remembered = key.as_ref().and_then(IndexKey::recall);
    // With the index remembered, the first request only learns the file's size and
    // validator (one byte); else its last bytes bring the footer and the index's end.
    let first_tail = match remembered {
        Some(_) => 1,
        None => FIRST_TAIL,
    };
    let (mut src, tail) = open_with_tail(dl, &place.folder, config, first_tail)?;
    let auth = match remembered {
        Some(auth) => auth,
        None => {
            let limits = IndexLimits {
                max_entries: config.max_entries,
                ..IndexLimits::default()
            };
            let auth = remote_index(&mut src, &tail, &expected, &limits)
                .map_err(|e| remote_refusal(url, e))?
                .ok_or_else(|| {
                    Refusal::Whole(format!(
                        "`{}` is not a seekable tarball (it has no index)",
                        redact_url(url)
                    ))
                })?;
            let auth = Arc::new(auth);
            if let Some(key) = key {
                key.remember(&auth);
            }
            auth
        }
    };
    Ok((src, auth))
}

/// Most authenticated indexes a process remembers (an index of a million files takes some
/// hundred MiB: few are kept, the oldest forgotten first).
const REMEMBERED_INDEXES: usize = 4;

/// What an authenticated index is remembered by, for the rest of the process: the URL it was
/// read from and everything it was authenticated against. Only indexes whose download entry
/// gives `index-sha256` are remembered: that hash covers every byte of the index (offsets and
/// block digests too), so the index is the same whatever the server sends later; a server that
/// then sends other bytes for a member is caught by the member's checks, as always.
#[derive(Clone, PartialEq, Eq)]
struct IndexKey {
    url: String,
    tree_sha1: clima_artifact_manifest::GitTreeSha1,
    tree_sha256: Option<clima_artifact_manifest::GitTreeSha256>,
    index_sha256: clima_artifact_manifest::Sha256,
    max_entries: u64,
}

type Remembered = std::sync::Mutex<Vec<(IndexKey, Arc<Authenticated>)>>;

impl IndexKey {
    fn of(url: &str, expected: &Expected, config: &Config) -> Option<IndexKey> {
        Some(IndexKey {
            url: url.to_owned(),
            tree_sha1: expected.tree_sha1,
            tree_sha256: expected.tree_sha256,
            index_sha256: expected.index_sha256?,
            max_entries: config.max_entries,
        })
    }

    fn remembered() -> std::sync::MutexGuard<'static, Vec<(IndexKey, Arc<Authenticated>)>> {
        static REMEMBERED: Remembered = std::sync::Mutex::new(Vec::new());
        REMEMBERED.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The index authenticated earlier in this process under this key, if any.
    fn recall(&self) -> Option<Arc<Authenticated>> {
        let all = Self::remembered();
        all.iter().find(|(k, _)| k == self).map(|(_, a)| a.clone())
    }

    /// Remembers `auth` under this key (forgetting the oldest beyond
    /// [`REMEMBERED_INDEXES`]).
    fn remember(self, auth: &Arc<Authenticated>) {
        let mut all = Self::remembered();
        all.retain(|(k, _)| *k != self);
        if all.len() >= REMEMBERED_INDEXES {
            all.remove(0);
        }
        all.push((self, auth.clone()));
    }
}

/// How many rounds of symlinks asked for bring their targets (a link to a link ...).
const MAX_LINK_ROUNDS: usize = 8;

/// Refuses a fetch whose members (`bytes`) exceed the model's download limit, or whose files
/// (`sizes`) do not fit the depot above its reserve.
fn within_limits(
    name: &str,
    (bytes, sizes): (u64, u64),
    manifest: &Path,
    config: &Config,
    depot: &Depot,
) -> Result<(), Refusal> {
    if let Some(limit) = config.max_download_size
        && bytes > limit
    {
        return Err(Refusal::Fatal(Error::DownloadTooLarge {
            name: name.to_owned(),
            size: bytes,
            limit,
            from: "the members of the files asked for".to_owned(),
            manifest: manifest.to_path_buf(),
        }));
    }
    check_room(name, (sizes, "the files asked for"), depot, config).map_err(Refusal::Fatal)
}

/// Fetches `todo` (entries of `auth`) from `src` into `files`, neighbours together, over up
/// to `connections` connections at once. Each file is checked as it is written under its
/// temp name; they become visible together once every one was, so a failure anywhere (a
/// range that lies, on any connection) leaves none of them, whatever the order the
/// connections ended in.
fn fetch_entries(
    auth: &Authenticated,
    src: &mut Ranges,
    files: &clima_artifact_depot::PartialFiles<'_>,
    (url, connections): (&str, usize),
    todo: &[usize],
) -> Result<(), Refusal> {
    let pending = std::sync::Mutex::new(Vec::new());
    for_each_span(src, auth, todo, connections, &|i, reader| {
        let staged = fetch_entry(files, auth, i, reader, url)?;
        pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(staged);
        Ok(())
    })?;
    for staged in pending.into_inner().unwrap_or_else(|p| p.into_inner()) {
        staged
            .publish()
            .map_err(|e| crate::ranged_source::Destination::failure(files, url, e.into()))?;
    }
    Ok(())
}

/// The entries that the symlinks among `links` (entries of `auth`, verified in `root`)
/// point to, when their targets stay inside the artifact: a folder's entries too.
fn link_targets(auth: &Authenticated, links: &[usize], root: &Path) -> Vec<usize> {
    let entries = &auth.index().entries;
    let mut out = Vec::new();
    for &i in links {
        let e = &entries[i];
        if e.mode != EntryMode::Symlink {
            continue;
        }
        let Ok(path) = std::str::from_utf8(&e.path) else {
            continue;
        };
        let Ok(target) = std::fs::read_link(root.join(path)) else {
            continue;
        };
        let Some(target) = target.to_str() else {
            continue;
        };
        let mut parts: Vec<&str> = path.split('/').collect();
        parts.pop();
        let mut inside = !target.starts_with('/');
        for c in target.split('/') {
            match c {
                "" | "." => {}
                ".." => inside &= parts.pop().is_some(),
                c => parts.push(c),
            }
        }
        if inside && !parts.is_empty() {
            out.extend(auth.select(&parts.join("/")));
        }
    }
    out
}

/// The error of a path that names nothing in the artifact.
fn missing(name: &str, auth: &Authenticated, path: &str) -> Error {
    let mut top: Vec<String> = auth
        .index()
        .entries
        .iter()
        .map(|e| {
            let p = String::from_utf8_lossy(&e.path);
            p.split('/').next().unwrap_or("").to_owned()
        })
        .collect();
    top.dedup();
    let more = top.len().saturating_sub(12);
    top.truncate(12);
    let mut top_level = top.join(", ");
    if more > 0 {
        top_level.push_str(&format!(", ... and {more} more"));
    }
    Error::SubPathMissing {
        name: name.to_owned(),
        subpath: path.to_owned(),
        artifact_path: PathBuf::from(format!("<{name}>")),
        top_level,
    }
}

/// Writes how many files the artifact has beside its partial folder, for `list` (a count
/// shown, never trusted for anything else); failures are ignored.
fn record_count(depot: &Depot, hash: &clima_artifact_manifest::GitTreeSha1, n: usize) {
    let _ = depot.record_partial_count(hash, n as u64);
}
