//! The resolver behind `clima_artifact!`: the static data a call site embeds, its in-memory
//! caches, and the lookup it shares with [`Artifacts`](crate::Artifacts) (host platform
//! selection, install or collective install, sub-path check, provenance record).
//!
//! What one expansion of `clima_artifact!("era5/2008/u.nc", &ctx)` contains (the generated code
//! names these items through `__private`):
//!
//! ```text
//! const _: &[u8] = include_bytes!("/abs/crate/Artifacts.toml");   // edits recompile the caller
//! static SITE: MacroSite = MacroSite {                                 // all data the runtime needs,
//!     manifest: StaticManifest { path, dir, artifacts: &[ .. ] },    // no TOML parsing at run time
//!     subpath: Some("2008/u.nc"), literal: true, file!(), line!(), column!(),
//!     cache: SiteCache::new(),                                       // 2nd call: memory lookup
//! };
//! #[distributed_slice(CALL_SITES)] static DECL: &MacroSite = &SITE;  // the static inventory
//! resolve_literal(&SITE, Some(ctx))
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, OnceLock, RwLock};

use clima_artifact_manifest::{
    ArtifactEntry, ArtifactVariant, Download, GitTreeSha1, GitTreeSha256, Manifest, Platform,
    SelectError, Sha256, split_name_and_subpath,
};

use crate::access_log::{AccessEvent, RecordedOrigin};
pub(crate) use crate::subpath::with_subpath;
use crate::{Config, Context, Error};
use crate::{Installed, Origin};

/// One `[[name.download]]` source, embedded at compile time.
#[derive(Debug)]
pub struct StaticDownload {
    /// URL or path (relative paths resolve against the manifest's folder).
    pub url: &'static str,
    /// SHA-256 of the tarball.
    pub sha256: [u8; 32],
    /// Size in bytes, if the manifest gives it.
    pub size: Option<u64>,
    /// `index-sha256` of a seekable tarball, if the manifest gives it.
    pub index_sha256: Option<[u8; 32]>,
}

/// One variant of an artifact (the whole `[name]` entry, or one `[[name]]` element).
#[derive(Debug)]
pub struct StaticVariant {
    /// Git tree SHA-1 of the content.
    pub git_tree_sha1: [u8; 20],
    /// Git tree SHA-256 of the content (`git-tree-sha256`), if the manifest gives it.
    pub git_tree_sha256: Option<[u8; 32]>,
    /// `lazy = true` in the manifest.
    pub lazy: bool,
    /// Download sources in order.
    pub downloads: &'static [StaticDownload],
    /// Platform tags of a `[[name]]` element; empty for a `[name]` table.
    pub platform: &'static [(&'static str, &'static str)],
    /// Every other key of the entry.
    pub metadata: &'static [(&'static str, &'static str)],
    /// 1-based line of the entry in the manifest.
    pub line: u32,
}

/// One artifact of the manifest with all its platform variants.
#[derive(Debug)]
pub struct StaticArtifact {
    /// Name as written in the manifest.
    pub name: &'static str,
    /// `[[name]]` (one variant per platform) rather than `[name]`.
    pub platform_specific: bool,
    /// The variants, in file order.
    pub variants: &'static [StaticVariant],
}

/// The part of a manifest a call site needs: the named artifact for a literal name, every
/// artifact for a name computed at run time.
#[derive(Debug)]
pub struct StaticManifest {
    /// Absolute path of the manifest file.
    pub path: &'static str,
    /// Its folder (relative download paths resolve against it).
    pub dir: &'static str,
    /// Artifacts embedded for this call site, in file order.
    pub artifacts: &'static [StaticArtifact],
}

/// One `clima_artifact!` call site: its embedded data, where it is, and its resolution cache.
#[derive(Debug)]
pub struct MacroSite {
    /// The embedded manifest data.
    pub manifest: StaticManifest,
    /// The name was a string literal (checked at compile time); else it is computed at run time.
    pub literal: bool,
    /// Literal `name/sub/path`: the sub-path part.
    pub subpath: Option<&'static str>,
    /// `file!()` of the call.
    pub file: &'static str,
    /// `line!()` of the call.
    pub line: u32,
    /// `column!()` of the call.
    pub column: u32,
    /// The resolved path of a literal call, filled by the first successful call.
    pub cache: SiteCache,
}

/// Per-call-site memory of the first successful resolution of a literal name.
#[derive(Debug)]
pub struct SiteCache(OnceLock<Resolved>);

impl SiteCache {
    /// An empty cache (usable in a `static`).
    pub const fn new() -> SiteCache {
        SiteCache(OnceLock::new())
    }
}

impl Default for SiteCache {
    fn default() -> Self {
        SiteCache::new()
    }
}

/// A successful resolution, kept in memory for later calls.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The path handed to the caller (artifact directory plus sub-path).
    full_path: PathBuf,
    /// What is recorded in the provenance registry on each later call.
    event: AccessEvent,
    /// The communicators this artifact was resolved on collectively (shared with [`INSTALLED`]).
    confirmed: Arc<Confirmed>,
}

/// The [`Context::communicator_id`]s of the communicators on which this process took part in a
/// successful collective resolution of one artifact (one git tree SHA-1).
///
/// This is what makes the in-memory answer sound for calls with a context: a collective call
/// succeeds on every rank of its communicator or on none, so "this communicator is in the set"
/// has the same truth value on every rank of it, and either all ranks skip the collective
/// protocol or all take part. A call without a context, or a collective call on another
/// communicator, adds nothing, so a rank that resolved the artifact that way still joins the next
/// collective call of its peers instead of leaving them waiting in a broadcast.
#[derive(Debug, Default)]
struct Confirmed(RwLock<Vec<u64>>);

impl Confirmed {
    /// Whether a call with `ctx` may be answered from memory (see the macro's docs).
    fn answers(&self, ctx: Option<&dyn Context>) -> bool {
        match ctx {
            None => true,
            Some(ctx) if ctx.size() <= 1 => true,
            Some(ctx) => ctx.communicator_id().is_some_and(|id| {
                self.0
                    .read()
                    .unwrap_or_else(|e| e.into_inner())
                    .contains(&id)
            }),
        }
    }

    /// Remembers that every rank of `ctx` has just resolved the artifact collectively.
    fn add(&self, ctx: &dyn Context) {
        if ctx.size() <= 1 {
            return;
        }
        if let Some(id) = ctx.communicator_id() {
            let mut ids = self.0.write().unwrap_or_else(|e| e.into_inner());
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
    }
}

impl StaticDownload {
    fn to_download(&self) -> Download {
        Download {
            url: self.url.to_owned(),
            sha256: Sha256(self.sha256),
            size: self.size,
            index_sha256: self.index_sha256.map(Sha256),
        }
    }
}

impl StaticVariant {
    /// The owned form the install pipeline takes.
    pub fn to_variant(&self, platform_specific: bool) -> ArtifactVariant {
        ArtifactVariant {
            git_tree_sha1: GitTreeSha1(self.git_tree_sha1),
            git_tree_sha256: self.git_tree_sha256.map(GitTreeSha256),
            lazy: self.lazy,
            downloads: self
                .downloads
                .iter()
                .map(StaticDownload::to_download)
                .collect(),
            platform: platform_specific.then(|| Platform {
                tags: self
                    .platform
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            }),
            metadata: self
                .metadata
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            line: self.line,
        }
    }
}

impl StaticArtifact {
    /// The owned manifest entry.
    pub fn to_entry(&self) -> ArtifactEntry {
        if self.platform_specific {
            ArtifactEntry::PlatformSpecific(
                self.variants.iter().map(|v| v.to_variant(true)).collect(),
            )
        } else {
            match self.variants.first() {
                Some(v) => ArtifactEntry::Single(v.to_variant(false)),
                None => ArtifactEntry::PlatformSpecific(Vec::new()),
            }
        }
    }
}

impl StaticManifest {
    /// Looks an embedded artifact up by name.
    pub fn get(&self, name: &str) -> Option<&'static StaticArtifact> {
        self.artifacts.iter().find(|a| a.name == name)
    }

    /// The variant of `artifact` for the host platform, selected with the manifest crate's rules.
    pub fn select_host(&self, artifact: &StaticArtifact) -> Result<ArtifactVariant, Error> {
        let manifest = Manifest::new(
            PathBuf::from(self.path),
            vec![(artifact.name.to_owned(), artifact.to_entry())],
            Vec::new(),
        );
        Ok(manifest.select(artifact.name, &Platform::host())?.clone())
    }

    fn unknown(&self, name: &str) -> Error {
        Error::Select(SelectError::UnknownName {
            name: name.to_owned(),
            manifest: self.path.to_owned(),
            defined: self.artifacts.iter().map(|a| a.name.to_owned()).collect(),
        })
    }
}

static CONFIG: OnceLock<Config> = OnceLock::new();

/// Sets the configuration `clima_artifact!` uses in this process (see [`crate::set_macro_config`]).
pub fn set_config(config: Config) -> Result<(), Box<Config>> {
    CONFIG.set(config).map_err(Box::new)
}

/// The configuration in force: the one set by [`set_config`], else the environment's.
pub fn current_config() -> Result<Config, Error> {
    match CONFIG.get() {
        Some(c) => Ok(c.clone()),
        None => Config::from_env(),
    }
}

/// The `ctx` argument of the macro as a `&dyn Context`: `&ctx` of any context type, of
/// `dyn Context`, `&dyn Context`, `Box<dyn Context>`, and (with the `mpi` feature) of rsmpi's
/// `SimpleCommunicator` ([`clima_comms::AsContext`]).
pub fn as_context<C: clima_comms::AsContext + ?Sized>(ctx: &C) -> &dyn Context {
    ctx.as_context()
}

/// Process-wide memory of installed artifacts, keyed by git tree SHA-1, so a second call site
/// (or a run-time name) for the same artifact does no file-system work either.
static INSTALLED: LazyLock<RwLock<HashMap<GitTreeSha1, Known>>> =
    LazyLock::new(|| RwLock::new(HashMap::new()));

#[derive(Debug, Clone)]
struct Known {
    installed: Installed,
    /// The `git-tree-sha256` the copy was checked to have (by an entry that gives one), so
    /// that an entry with another one is not answered from memory.
    verified_sha256: Option<GitTreeSha256>,
    /// Sub-paths already checked to exist, with their full paths.
    subpaths: HashMap<String, PathBuf>,
    /// Communicators on which it was resolved collectively.
    confirmed: Arc<Confirmed>,
}

/// Resolves a call site whose name was a literal checked at compile time.
pub fn resolve_literal(
    site: &'static MacroSite,
    ctx: Option<&dyn Context>,
) -> Result<PathBuf, Error> {
    if let Some(hit) = site.cache.0.get()
        && hit.confirmed.answers(ctx)
    {
        crate::access_log::record_ref(&hit.event, ctx.map_or(0, |c| c.rank()));
        return Ok(hit.full_path.clone());
    }
    let Some(artifact) = site.manifest.artifacts.first() else {
        // The macro embeds the named artifact for every literal call; an empty list can only
        // come from a mismatched macro version.
        return Err(Error::Internal {
            message: format!(
                "call site {}:{} embeds no artifact; please report this",
                site.file, site.line
            ),
        });
    };
    let resolved = resolve(site, artifact, site.subpath, ctx)?;
    let full = resolved.full_path.clone();
    let _ = site.cache.0.set(resolved);
    Ok(full)
}

/// Resolves a call site whose `name` or `name/sub/path` is computed at run time, against the
/// whole manifest embedded at compile time.
pub fn resolve_dynamic(
    site: &'static MacroSite,
    spec: &str,
    ctx: Option<&dyn Context>,
) -> Result<PathBuf, Error> {
    let (name, subpath) = split_name_and_subpath(spec)?;
    let artifact = site
        .manifest
        .get(name)
        .ok_or_else(|| site.manifest.unknown(name))?;
    Ok(resolve(site, artifact, subpath, ctx)?.full_path)
}

fn resolve(
    site: &'static MacroSite,
    artifact: &'static StaticArtifact,
    subpath: Option<&str>,
    ctx: Option<&dyn Context>,
) -> Result<Resolved, Error> {
    let variant = site.manifest.select_host(artifact)?;
    let hash = variant.git_tree_sha1;
    let rank = ctx.map_or(0, |c| c.rank());

    // Fast path: this process already resolved the artifact (another call site or run-time name),
    // and, for a call with a context of several ranks, so did every other rank of it.
    let known = INSTALLED
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(&hash)
        .cloned();
    let answers = |k: &Known| {
        k.confirmed.answers(ctx)
            && (variant.git_tree_sha256.is_none()
                || matches!(k.installed.origin, Origin::Override { .. })
                || k.verified_sha256 == variant.git_tree_sha256)
    };
    let installed = match known.filter(answers) {
        Some(k) => {
            let origin = match k.installed.origin {
                Origin::Downloaded { .. } => Origin::Depot,
                o => o,
            };
            Installed {
                path: k.installed.path,
                origin,
            }
        }
        None => {
            let config = current_config()?;
            // The manifest file itself, so messages name it (relative URLs resolve next to it).
            let dir = Path::new(site.manifest.path);
            // Only the file asked for, when the artifact is seekable and not installed.
            if let Some(sub) = subpath
                && let Some(part) = partial_call(site, artifact, &variant, sub, ctx, &config)?
            {
                return Ok(part);
            }
            let installed = match ctx {
                Some(ctx) => {
                    crate::collective_install::ensure_collective_unrecorded(
                        ctx,
                        artifact.name,
                        &variant,
                        dir,
                        &config,
                    )?
                    .0
                }
                None => crate::install::ensure_variant(artifact.name, &variant, dir, &config)?,
            };
            // Every rank of `ctx` got this same `Ok`: remember it before anything local (the
            // sub-path check) can fail, so all ranks agree on the next call.
            if let Some(ctx) = ctx {
                known_entry(hash, &installed, |k| k.confirmed.add(ctx));
            }
            // The model's manifest goes into the depot's usage log, so that `gc` run anywhere
            // keeps what this model uses (once per process, at most once a day; the root only).
            if ctx.is_none_or(|c| c.rank() == 0) {
                clima_artifact_depot::record_usage_of(
                    config.depots.first(),
                    &installed,
                    Path::new(site.manifest.path),
                    config.reporting(),
                );
            }
            installed
        }
    };

    let full_path = match subpath {
        None => installed.path.clone(),
        Some(sub) => subpath_in(artifact.name, &installed.path, sub, &hash)?,
    };

    let confirmed = known_entry(hash, &installed, |k| {
        if variant.git_tree_sha256.is_some() {
            k.verified_sha256 = variant.git_tree_sha256;
        }
        if let Some(sub) = subpath {
            k.subpaths.insert(sub.to_owned(), full_path.clone());
        }
        Arc::clone(&k.confirmed)
    });

    let what = (artifact.name, &variant);
    Ok(recorded(site, what, &installed, full_path, rank, confirmed))
}

/// Records the access of `site` to `what` (an artifact's name and variant), which
/// `installed` answered (`full_path` with the sub-path), by `rank`, and returns the resolution
/// that later calls answer with: the same access, but nothing is downloaded then.
fn recorded(
    site: &'static MacroSite,
    (name, variant): (&str, &ArtifactVariant),
    installed: &Installed,
    full_path: PathBuf,
    rank: usize,
    confirmed: Arc<Confirmed>,
) -> Resolved {
    let event = crate::access::access_event(
        installed,
        name,
        variant,
        PathBuf::from(site.manifest.path),
        Some((site.file, site.line)),
        rank,
    );
    crate::access_log::record(event.clone());
    let mut later = event;
    if let RecordedOrigin::Downloaded { .. } = later.origin {
        later.origin = RecordedOrigin::Depot;
    }
    Resolved {
        full_path,
        event: later,
        confirmed,
    }
}

/// The answer to a call for `sub` of a seekable artifact that is not installed: the file
/// fetched alone (or found fetched) into a partial folder (`crate::partial`). `None` when the
/// artifact is not seekable or turned out installed whole (the usual path answers then).
/// Not kept in [`INSTALLED`], which holds whole artifacts only: another sub-path of the same
/// artifact is fetched by its own call.
fn partial_call(
    site: &'static MacroSite,
    artifact: &'static StaticArtifact,
    variant: &ArtifactVariant,
    sub: &str,
    ctx: Option<&dyn Context>,
    config: &Config,
) -> Result<Option<Resolved>, Error> {
    if !crate::partial::prefers_partial(variant) {
        return Ok(None);
    }
    if ctx.is_none_or(|c| c.size() <= 1)
        && clima_artifact_depot::lookup(&variant.git_tree_sha1, &config.search_depots())?.is_some()
    {
        return Ok(None);
    }
    let manifest = Path::new(site.manifest.path);
    let files = match ctx {
        Some(ctx) => crate::partial::ensure_files_collective(
            ctx,
            artifact.name,
            variant,
            manifest,
            config,
            &[sub],
        )?,
        None => crate::partial::ensure_files(artifact.name, variant, manifest, config, &[sub])?,
    };
    if files.whole.is_some() {
        return Ok(None);
    }
    let Some(full_path) = files.paths.first().cloned() else {
        return Ok(None);
    };
    // The model's manifest goes into the usage log, so that `gc` keeps the partial folder
    // (the root only, as for whole artifacts).
    if ctx.is_none_or(|c| c.rank() == 0)
        && let Some(first) = config.depots.first()
    {
        first.record_usage(manifest, config.reporting());
    }
    let installed = Installed {
        path: full_path.clone(),
        origin: files.origin(),
    };
    let confirmed = Arc::new(Confirmed::default());
    if let Some(ctx) = ctx {
        confirmed.add(ctx);
    }
    let rank = ctx.map_or(0, |c| c.rank());
    let what = (artifact.name, variant);
    Ok(Some(recorded(
        site, what, &installed, full_path, rank, confirmed,
    )))
}

/// Runs `f` on the [`INSTALLED`] entry of `hash`, creating it from `installed` if missing.
fn known_entry<T>(hash: GitTreeSha1, installed: &Installed, f: impl FnOnce(&mut Known) -> T) -> T {
    let mut map = INSTALLED.write().unwrap_or_else(|e| e.into_inner());
    let entry = map.entry(hash).or_insert_with(|| Known {
        installed: installed.clone(),
        verified_sha256: None,
        subpaths: HashMap::new(),
        confirmed: Arc::default(),
    });
    f(entry)
}

/// `dir/sub`, which must exist; looks in the process-wide memory first.
fn subpath_in(name: &str, dir: &Path, sub: &str, hash: &GitTreeSha1) -> Result<PathBuf, Error> {
    if let Some(known) = INSTALLED
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(hash)
        .and_then(|k| k.subpaths.get(sub).cloned())
    {
        return Ok(known);
    }
    with_subpath(name, dir, Some(sub))
}

/// What an expansion returns after a compile error, so the caller sees no follow-up type errors.
/// Never runs: the crate does not compile.
pub fn after_compile_error() -> Result<PathBuf, Error> {
    Err(Error::Internal {
        message: "clima_artifact! failed to expand".to_owned(),
    })
}
