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
//!   while it is written to a temp file -> read-only -> renamed to its path, one by one once
//!   every one was checked (none is visible before that; files whose content a depot held
//!   are copied, checked and renamed before the fetch)
//! not seekable, or a server without ranges -> the whole artifact, installed as always
//! ```
//!
//! One call is one `PartialFetch` value, built once by [`ensure_files`]; its stages run in
//! that order and none calls back up. Reading a download by ranges (its index, remembered for
//! the rest of the process, and its spans) is `ranged_source`'s, which calls nothing here.
//!
//! Every range answer is checked by the network crate (`ranges`: `206`, the exact
//! `Content-Range`, the same total, a bounded body); what a server sends is trusted only
//! through the authenticated index. A file is visible only once its blob id is the index's.

use std::path::{Path, PathBuf};
use std::time::Instant;

use clima_artifact_depot::{Depot, PartialFiles, Staging};
use clima_artifact_extract::seekable::Authenticated;
use clima_artifact_extract::tree_hash::EntryMode;
use clima_artifact_manifest::{ArtifactVariant, Download};
use clima_artifact_net::trust::redact_url;

use crate::install::{Install, Locked, check_room, suggested_overrides_file};
use crate::notice::InstallEvent;
use crate::ranged_source::{Ranges, Refusal, authenticated_index, fetch_entries, ordered};
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
    let fetch = PartialFetch::new(name, variant, manifest, config, paths);
    fetch.run()
}

/// One call of [`ensure_files`], built once. Its stages run in order and none calls back up:
/// the artifact found whole -> every file held already -> the install lock -> for each
/// download, its authenticated index (`ranged_source`: remembered by the process, or read from
/// the tail) -> the entries asked for (or the error of a path that names nothing) -> rounds of
/// (copies of held content, the size policy, the spans fetched, then published once all were checked, the
/// targets of the symlinks) -> the answer. Whether the whole artifact is installed instead is
/// decided in one place, [`PartialFetch::run`].
struct PartialFetch<'a> {
    install: Install<'a>,
    name: &'a str,
    variant: &'a ArtifactVariant,
    config: &'a Config,
    paths: &'a [&'a str],
}

/// Where the stages before a whole install ended.
enum Outcome {
    /// The files, fetched or held.
    Files(Files),
    /// The artifact is installed whole (found, or installed meanwhile by another process).
    Whole(Installed),
    /// Install it whole: why, when a download is not seekable or serves no byte ranges (a
    /// warning); `None` when no download could be tried (only network ones, and offline: the
    /// whole install says so).
    InstallWhole(Option<String>),
}

impl<'a> PartialFetch<'a> {
    /// The fetch of `paths` of artifact `name` (as for [`ensure_files`]).
    fn new(
        name: &'a str,
        variant: &'a ArtifactVariant,
        manifest: &'a Path,
        config: &'a Config,
        paths: &'a [&'a str],
    ) -> PartialFetch<'a> {
        PartialFetch {
            install: Install::new(name, variant, manifest, config),
            name,
            variant,
            config,
            paths,
        }
    }

    /// The stages, then the one decision: the files, or the paths inside the whole artifact
    /// (found, or installed now).
    fn run(&self) -> Result<Files, Error> {
        let outcome = self.stages()?;
        let whole = match outcome {
            Outcome::Files(files) => return Ok(files),
            Outcome::Whole(whole) => whole,
            Outcome::InstallWhole(why) => {
                if let Some(why) = why {
                    self.config.reporting().emit(InstallEvent::PartialFallback {
                        artifact: self.name.to_owned(),
                        why,
                    });
                }
                self.install.ensure(None)?
            }
        };
        let paths = self
            .paths
            .iter()
            .map(|p| crate::subpath::with_subpath(self.name, &whole.path, Some(p)))
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

    /// Found whole, held already, else fetched under the install lock (released before a
    /// whole install takes it again).
    fn stages(&self) -> Result<Outcome, Error> {
        if let Some(whole) = self.install.found()? {
            return Ok(Outcome::Whole(whole));
        }
        if let Some(held) = self.all_held() {
            return Ok(Outcome::Files(held));
        }
        match self.install.lock()? {
            Locked::Ready(staging) => self.try_downloads(&staging),
            Locked::Installed(whole) => Ok(Outcome::Whole(whole)),
        }
    }

    /// The answer without any request when every path asked for is a file already fetched
    /// into one of the depots (a folder needs the index to know its files).
    fn all_held(&self) -> Option<Files> {
        let hash = self.variant.git_tree_sha1;
        let depots = self.install.depots();
        let found = self
            .paths
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

    /// The downloads tried in order into `staging`'s partial folder: the first that gives the
    /// files is the answer; a download that cannot serve them alone asks for the whole
    /// install; only failures is an error naming each.
    fn try_downloads(&self, staging: &Staging) -> Result<Outcome, Error> {
        let place = self.install.manifest();
        let mut failures = Vec::new();
        let mut why_whole = None;
        let sources = ordered(self.variant, self.config, &place.folder);
        for (k, dl) in sources.iter().enumerate() {
            match self.fetch_from(dl, staging) {
                Ok(files) => return Ok(Outcome::Files(files)),
                Err(Refusal::Whole(why)) => {
                    why_whole.get_or_insert(why);
                }
                Err(Refusal::Fatal(e)) => return Err(e),
                Err(Refusal::Failed(f)) => {
                    if k + 1 < sources.len() {
                        self.config.reporting().emit(InstallEvent::NextSource {
                            error: f.to_string(),
                            cause: f.to_string(),
                        });
                    }
                    failures.push(f);
                }
            }
        }
        if why_whole.is_some() || failures.is_empty() {
            return Ok(Outcome::InstallWhole(why_whole));
        }
        Err(Error::DownloadFailed {
            name: self.name.to_owned(),
            hash: self.variant.git_tree_sha1,
            failures,
            manifest: place.file.clone(),
            overrides_file: suggested_overrides_file(self.config),
        })
    }

    /// Fetches the files asked for from `dl` into the partial folder of `staging`.
    fn fetch_from(&self, dl: &Download, staging: &Staging) -> Result<Files, Refusal> {
        let start = Instant::now();
        let url = dl.url.as_str();
        let place = self.install.manifest();
        let (mut src, auth) = authenticated_index(self.variant, dl, &place.folder, self.config)?;
        let wanted = self.wanted(&auth)?;
        let files = staging
            .partial_files()
            .map_err(|e| Refusal::Fatal(e.into()))?;
        let depot = staging.depot();
        let (fetched, held) = self.rounds(&auth, (&mut src, url), (&files, depot), wanted)?;
        // Counted once files are there: a count beside a folder that never held a file would
        // outlive it (gc removes a count only with its folder). A count shown by `list`,
        // never trusted for anything else: a failure to write it is ignored.
        let count = auth.index().entries.len() as u64;
        let _ = depot.record_partial_count(&self.variant.git_tree_sha1, count);
        let root = files.path().to_path_buf();
        let received = src.received();
        let reporting = self.config.reporting();
        crate::debug_speed::after_install(self.name, received, start.elapsed(), reporting);
        Ok(Files {
            paths: self
                .paths
                .iter()
                .map(|p| root.join(p.trim_end_matches('/')))
                .collect(),
            whole: None,
            fetched,
            held,
            received,
            url: Some(redact_url(url)),
            seconds: start.elapsed().as_secs_f64(),
        })
    }

    /// The entries of `auth` the paths asked for name, or the error of the first path that
    /// names nothing.
    fn wanted(&self, auth: &Authenticated) -> Result<Vec<usize>, Refusal> {
        let mut wanted = Vec::new();
        for p in self.paths {
            let found = auth.select(p);
            if found.is_empty() {
                return Err(Refusal::Fatal(missing(self.name, auth, p)));
            }
            wanted.extend(found);
        }
        Ok(wanted)
    }

    /// Brings `wanted` (entries of `auth`) into `files` of `depot`, with the targets of the
    /// symlinks among them (a few links deep): held ones stay, content the depots hold under
    /// other names is copied (checked), the rest is fetched from `src`, each round within the
    /// size policy. Returns how many were fetched and how many were held or copied.
    fn rounds(
        &self,
        auth: &Authenticated,
        (src, url): (&mut Ranges, &str),
        (files, depot): (&PartialFiles<'_>, &Depot),
        wanted: Vec<usize>,
    ) -> Result<(usize, usize), Refusal> {
        let hash = self.variant.git_tree_sha1;
        let entries = &auth.index().entries;
        let is_held = |i: &usize| {
            std::str::from_utf8(&entries[*i].path)
                .is_ok_and(|p| depot.partial_file(&hash, p).is_some())
        };
        let (mut held, mut todo): (Vec<usize>, Vec<usize>) =
            wanted.iter().partition(|i| is_held(i));
        let mut seen: std::collections::HashSet<usize> = wanted.into_iter().collect();
        let (mut fetched, mut bytes, mut sizes) = (0, 0, 0);
        // A symlink asked for brings its target (inside the artifact), a few links deep.
        let mut links: Vec<usize> = held.clone();
        for _ in 0..MAX_LINK_ROUNDS {
            // Files the depots hold under other names are copied, checked (`crate::held`),
            // with room for them first; only the rest is fetched and counts as downloaded.
            let copy_room = sizes + todo.iter().map(|i| entries[*i].size).sum::<u64>();
            self.within_limits((bytes, copy_room), depot)?;
            let (copied, rest) = crate::held::copy_into_partial(
                auth,
                std::mem::take(&mut todo),
                files,
                self.config,
            )?;
            held.extend(copied);
            todo = rest;
            bytes += todo.iter().map(|i| entries[*i].length).sum::<u64>();
            sizes += todo.iter().map(|i| entries[*i].size).sum::<u64>();
            self.within_limits((bytes, sizes), depot)?;
            fetch_entries(auth, src, files, (url, self.config.net.connections), &todo)?;
            fetched += todo.len();
            links.append(&mut todo);
            let targets = link_targets(auth, &links, files.path());
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
        Ok((fetched, held.len()))
    }

    /// Refuses a fetch whose members (`bytes`) exceed the model's download limit, or whose
    /// files (`sizes`) do not fit `depot` above its reserve.
    fn within_limits(&self, (bytes, sizes): (u64, u64), depot: &Depot) -> Result<(), Refusal> {
        if let Some(limit) = self.config.max_download_size
            && bytes > limit
        {
            return Err(Refusal::Fatal(Error::DownloadTooLarge {
                name: self.name.to_owned(),
                size: bytes,
                limit,
                from: "the members of the files asked for".to_owned(),
                manifest: self.install.manifest().file.clone(),
            }));
        }
        check_room(
            self.name,
            (sizes, "the files asked for"),
            depot,
            self.config,
        )
        .map_err(Refusal::Fatal)
    }
}

/// How many rounds of symlinks asked for bring their targets (a link to a link ...).
const MAX_LINK_ROUNDS: usize = 8;

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
