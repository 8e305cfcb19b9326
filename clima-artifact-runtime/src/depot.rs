//! Depots: where artifacts live, lookups across depots, override resolution, and the
//! per-artifact locks and temp-dir reclamation that tools (the CLI's `fetch` and `gc`) share
//! with installs.
//!
//! ```text
//! <depot>/                              one entry of CLIMA_ARTIFACTS_DEPOT_PATH (or the cache dir)
//!   artifacts/
//!     <git-tree-sha1>/                  an installed artifact (Julia's layout)
//!     Overrides.toml                    this depot's overrides
//!     .locks/<git-tree-sha1>.lock       per-artifact install locks
//!     .<hash>.clima-install-<host>.<pid>.<rand>/
//!                                       an install in progress (renamed into place when verified)
//!   logs/
//!     artifact_usage.toml               manifests that used this depot (Julia's format; for `gc`)
//!     orphaned.toml                     artifacts gc found unreferenced, and since when
//! ```
//!
//! [`Depot`] owns this layout: every path above is a method of it, and so are the temp dirs
//! of installs and their reclamation, and the usage log. The free functions taking a depot
//! path are shorthands for the same methods.
//!
//! Lookups search every depot in order ([`Config::depots`], then Julia's depots when
//! [`Config::julia_interop`] is set); installs go to the first writable depot of
//! [`Config::depots`] (Julia's depots are searched, never written).
//!
//! Overrides follow Julia: for each hash the earliest depot that mentions it decides; `""` there
//! cancels overrides from later depots. A value is an absolute path (used as is: never hashed,
//! never downloaded) or another hash (followed, with cycles reported; the last hash of a chain
//! must be installed in some depot).

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};

use clima_artifact_manifest::{OverrideTarget, OverridesFile};

use crate::installed::{Installed, Origin};
use crate::{Config, Error, GitTreeSha1};

pub use crate::locked_file::{LockedFile, hostname};
use clima_artifact_vars as vars;

use clima_artifact_manifest::layout::{self, INSTALL_MARK, PROBE_PREFIX};

/// One depot folder and the layout inside it (see the [module docs](self)).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Depot {
    root: PathBuf,
}

impl Depot {
    /// The depot at `root` (nothing is created or checked).
    pub fn new(root: impl Into<PathBuf>) -> Depot {
        Depot { root: root.into() }
    }

    /// The depot folder itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `<depot>/artifacts`.
    pub fn artifacts_dir(&self) -> PathBuf {
        layout::artifacts_dir(&self.root)
    }

    /// `<depot>/artifacts/<hash>`.
    pub fn artifact_dir(&self, hash: &GitTreeSha1) -> PathBuf {
        layout::artifact_dir(&self.root, hash)
    }

    /// The installed copy of `hash` here, if its folder exists (nothing is hashed).
    pub fn installed(&self, hash: &GitTreeSha1) -> Option<PathBuf> {
        Some(self.artifact_dir(hash)).filter(|p| p.is_dir())
    }

    /// `<depot>/artifacts/Overrides.toml`.
    pub fn overrides_path(&self) -> PathBuf {
        layout::overrides_file(&self.root)
    }

    /// `<depot>/artifacts/.locks/<hash>.lock`.
    pub fn lock_path(&self, hash: &GitTreeSha1) -> PathBuf {
        layout::lock_file(&self.root, hash)
    }

    /// `<depot>/logs`.
    pub fn logs_dir(&self) -> PathBuf {
        layout::logs_dir(&self.root)
    }

    /// `<depot>/logs/artifact_usage.toml`: the manifests that used this depot (Julia's format).
    pub fn usage_log(&self) -> PathBuf {
        layout::usage_log(&self.root)
    }

    /// `<depot>/logs/orphaned.toml`: artifacts that gc found unreferenced, and since when.
    pub fn orphan_log(&self) -> PathBuf {
        layout::orphan_log(&self.root)
    }

    /// A fresh temp dir path for an install of `hash` by this process (not created).
    pub fn new_temp_dir(&self, hash: &GitTreeSha1) -> PathBuf {
        self.artifacts_dir()
            .join(clima_artifact_fs::temp_name(&hash.to_hex(), INSTALL_MARK))
    }

    /// The artifact, host tag and pid of the install temp dir named `name`, if it is one.
    pub fn temp_dir_owner(name: &str) -> Option<(GitTreeSha1, &str, i32)> {
        let (hash, host, pid) = clima_artifact_fs::temp_owner(name, INSTALL_MARK)?;
        Some((GitTreeSha1::from_hex(hash).ok()?, host, pid))
    }

    /// Removes this user's partial downloads of `hash` (after it was installed, they are of
    /// no use).
    pub(crate) fn remove_partials(&self, hash: &GitTreeSha1) {
        let Ok(dir) = clima_artifact_fs::Dir::open(&self.artifacts_dir()) else {
            return;
        };
        let euid = clima_artifact_fs::euid();
        for entry in dir.entries().unwrap_or_default() {
            let Some(name) = entry.name.to_str() else {
                continue;
            };
            if partial_owner(name) == Some((*hash, euid)) {
                clima_artifact_net::ranged::remove_kept(&dir, name);
            }
        }
    }

    /// Removes the install temp dirs that dead processes of this host left here, and old
    /// writability probes; see [`reclaim_stale_temp_dirs`].
    pub fn reclaim_stale_temp_dirs(&self) -> usize {
        self.reclaim_stale(None)
    }
}

/// Julia's depots: `JULIA_DEPOT_PATH` (colon-separated; an empty entry means the default
/// `~/.julia`, as in Julia), else `~/.julia`.
pub fn julia_depots() -> Vec<PathBuf> {
    let home_julia = dirs::home_dir().map(|h| h.join(".julia"));
    match std::env::var_os(vars::JULIA_DEPOT_PATH) {
        Some(v) if !v.is_empty() => {
            let mut out = Vec::new();
            for part in v.to_string_lossy().split(':') {
                if part.is_empty() {
                    out.extend(home_julia.clone());
                } else {
                    out.push(PathBuf::from(part));
                }
            }
            out.dedup();
            out
        }
        _ => home_julia.into_iter().collect(),
    }
}

/// Every depot searched by lookups, in order: [`Config::depots`], then Julia's depots
/// ([`Config::julia_depots`], else [`julia_depots`]) when [`Config::julia_interop`] is set.
pub fn search_depots(config: &Config) -> Vec<PathBuf> {
    let mut out = config.depots.clone();
    if config.julia_interop {
        let julia = config.julia_depots.clone().unwrap_or_else(julia_depots);
        for d in julia {
            if !out.contains(&d) {
                out.push(d);
            }
        }
    }
    out
}

/// The installed copy of `hash` in the first depot that has it. Checks existence only (no
/// hashing).
pub fn find_installed(depots: &[PathBuf], hash: &GitTreeSha1) -> Option<PathBuf> {
    depots.iter().find_map(|d| Depot::new(d).installed(hash))
}

/// Overrides, then installed copies; `None` when the artifact must be downloaded. Never
/// downloads, never hashes.
pub fn lookup(hash: &GitTreeSha1, depots: &[PathBuf]) -> Result<Option<Installed>, Error> {
    let overrides = Overrides::load(depots)?;
    if let Some(r) = overrides.resolve(hash)? {
        return Ok(Some(Installed {
            path: r.path,
            origin: Origin::Override {
                overrides_file: r.overrides_file,
            },
        }));
    }
    Ok(find_installed(depots, hash).map(|path| Installed {
        path,
        origin: Origin::Depot,
    }))
}

/// The first depot of [`Config::depots`] where a file can be created in `<depot>/artifacts`
/// (created if missing). The error lists each depot and why it was refused.
///
/// A depot whose `artifacts` or `logs` folder is reached through another user's symlink
/// ([`planted_link`]) is refused with [`Error::PlantedDepotLink`] before anything is created
/// in it, and the search stops there (installing into a later depot instead would hide it).
pub fn first_writable(config: &Config, name: &str) -> Result<PathBuf, Error> {
    let mut tried = Vec::new();
    for depot in &config.depots {
        match planted_link(depot) {
            Ok(Some(link)) => {
                return Err(Error::PlantedDepotLink {
                    name: name.to_owned(),
                    depot: depot.clone(),
                    link: clima_artifact_fs::printable(&link.to_string()).into_owned(),
                });
            }
            Ok(None) => {}
            Err(e) => {
                tried.push((
                    depot.clone(),
                    format!("cannot check `{}`: {e}", depot.display()),
                ));
                continue;
            }
        }
        match probe_writable(depot) {
            Ok(()) => return Ok(depot.clone()),
            Err(why) => tried.push((depot.clone(), why)),
        }
    }
    Err(Error::NoWritableDepot {
        name: name.to_owned(),
        tried,
    })
}

/// The rule that keeps installs and `gc` out of a victim's folders: the first symlink on the
/// way to `depot`'s `artifacts` or `logs` folder that neither this user nor root owns
/// (`Ok(None)` when there is none; see [`clima_artifact_fs::foreign_link`]). Another user of a
/// shared depot could point such a link at folders of the victim's (their
/// `~/.julia/artifacts`), for an install to write its locks, partial downloads and temp dirs
/// into, or for the cleanup of stale ones and `gc` to delete in. A user's own symlinks (a depot
/// moved to a bigger disk) are followed.
pub fn planted_link(depot: &Path) -> std::io::Result<Option<clima_artifact_fs::ForeignLink>> {
    let d = Depot::new(depot);
    for folder in [d.artifacts_dir(), d.logs_dir()] {
        if let Some(link) = clima_artifact_fs::foreign_link(&folder)? {
            return Ok(Some(link));
        }
    }
    Ok(None)
}

/// Creates the node-local depot `path` if missing (mode 0o755, whatever the umask adds) and
/// checks that it is private to this user before anything in it is used: no symlink of
/// another user's on the way ([`clima_artifact_fs::foreign_link`]), the folder and its
/// `artifacts` folder owned by this user and writable by nobody else, and `artifacts` no
/// symlink at all (opened without following one). Node depots are trusted like the user's
/// own files (what `artifacts/<hash>/` holds there is used without hashing), so a folder
/// that another user created first, or one they could write to, is refused
/// ([`Error::NodeLocalDepotNotPrivate`]).
pub(crate) fn private_node_depot(path: &Path) -> Result<(), Error> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let refuse = |why: String| Error::NodeLocalDepotNotPrivate {
        path: path.to_path_buf(),
        why: clima_artifact_fs::printable(&why).into_owned(),
    };
    let cannot = |e: std::io::Error| Error::NodeLocalDepot {
        path: path.to_path_buf(),
        cause: e.into(),
    };
    if let Some(link) = clima_artifact_fs::foreign_link(path).map_err(cannot)? {
        return Err(refuse(link.to_string()));
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(path)
        .map_err(cannot)?;
    let root = clima_artifact_fs::Dir::open(path).map_err(cannot)?;
    let artifacts = root.create_dir(layout::ARTIFACTS, 0o755).map_err(|e| {
        match clima_artifact_fs::Unexpected::of(&e) {
            Some(planted) => refuse(planted.to_string()),
            None => cannot(e),
        }
    })?;
    let me = clima_artifact_fs::euid();
    for dir in [&root, &artifacts] {
        let meta = dir.metadata().map_err(cannot)?;
        let shown = dir.path().display();
        if meta.uid() != me {
            return Err(refuse(format!(
                "`{shown}` belongs to uid {}, not to you (uid {me}): its owner can put any \
                 content under `artifacts/<hash>/` for the job to use",
                meta.uid()
            )));
        }
        if meta.mode() & 0o022 != 0 {
            return Err(refuse(format!(
                "`{shown}` can be written by its group or by others (mode {:o}): anyone who \
                 can write there can put content under `artifacts/<hash>/` for the job to use",
                meta.mode() & 0o7777
            )));
        }
    }
    Ok(())
}

/// The artifact and owner uid of the partial download named `name`, if it is one.
fn partial_owner(name: &str) -> Option<(GitTreeSha1, u32)> {
    match layout::Entry::parse(name)? {
        layout::Entry::Partial { artifact, uid, .. } => Some((artifact, uid)),
        _ => None,
    }
}

/// How long a partial download nobody works on is kept for a later attempt to continue:
/// 7 days since it last received a byte.
pub const PARTIAL_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);

/// The name of the partial file a large download of `hash` from `url` by this user keeps its
/// bytes in (in the depot's `artifacts` folder): one per artifact, URL and user, so that any
/// process of the user, on any host sharing the depot, continues it, and users never write to
/// each other's.
pub fn partial_name(hash: &GitTreeSha1, url: &str) -> String {
    layout::Entry::Partial {
        artifact: *hash,
        url_key: &clima_artifact_net::ranged::url_key(url),
        uid: clima_artifact_fs::euid(),
    }
    .name()
}

/// Age after which a leftover probe file is removed (a live probe exists for microseconds).
pub const PROBE_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(60);

fn probe_writable(depot: &Path) -> Result<(), String> {
    let dir = layout::artifacts_dir(depot);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create `{}`: {e}", dir.display()))?;
    // An unnamed file (O_TMPFILE) never appears in the directory, even if we are killed.
    // Where the filesystem does not support it, fall back to a named probe removed at once.
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::OpenOptionsExt;
        if std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_TMPFILE)
            .open(&dir)
            .is_ok()
        {
            return Ok(());
        }
    }
    let probe = dir.join(format!(
        "{PROBE_PREFIX}{}-{}",
        std::process::id(),
        clima_artifact_fs::unique()
    ));
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(format!("cannot create a file in `{}`: {e}", dir.display())),
    }
}

/// Where an override sends an artifact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedOverride {
    /// The directory to use.
    pub path: PathBuf,
    /// The overrides file whose entry for the requested hash applied.
    pub overrides_file: PathBuf,
    /// Hashes followed through hash-to-hash overrides, starting with the requested one.
    pub chain: Vec<GitTreeSha1>,
}

/// The merged overrides of all depots: for each hash, the deciding entry (earliest depot).
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    entries: BTreeMap<GitTreeSha1, (OverrideTarget, PathBuf, u32)>,
    depots: Vec<PathBuf>,
}

impl Overrides {
    /// Loads `<depot>/artifacts/Overrides.toml` of every depot in `depots` (missing files are
    /// empty) and merges them, earlier depots first.
    pub fn load(depots: &[PathBuf]) -> Result<Overrides, Error> {
        let mut entries = BTreeMap::new();
        for depot in depots {
            // A missing file is an empty set; anything else that is not a readable regular
            // file is an error naming it (never silence, or the artifact would be downloaded).
            let file = OverridesFile::load(&layout::overrides_file(depot))?;
            let path = file.path.clone();
            for e in file.entries {
                entries
                    .entry(e.hash)
                    .or_insert((e.target, path.clone(), e.line));
            }
        }
        Ok(Overrides {
            entries,
            depots: depots.to_vec(),
        })
    }

    /// Whether no entry applies to anything.
    pub fn is_empty(&self) -> bool {
        self.entries
            .values()
            .all(|(t, _, _)| matches!(t, OverrideTarget::Remove))
    }

    /// Resolves `hash`: `None` when it is not overridden (or an earlier depot removed the
    /// override). Paths are checked for existence; hashes are followed (cycles are errors) and
    /// the final hash must be installed in a depot.
    pub fn resolve(&self, hash: &GitTreeSha1) -> Result<Option<ResolvedOverride>, Error> {
        let Some((first_target, first_file, _)) = self.entries.get(hash) else {
            return Ok(None);
        };
        if matches!(first_target, OverrideTarget::Remove) {
            return Ok(None);
        }
        let mut chain = vec![*hash];
        let mut steps: Vec<(GitTreeSha1, PathBuf, u32)> = Vec::new();
        let mut cur = *hash;
        loop {
            let (target, file, line) = match self.entries.get(&cur) {
                Some((t, f, l)) if !matches!(t, OverrideTarget::Remove) => (t, f, *l),
                _ => unreachable!("only overridden hashes are followed"),
            };
            steps.push((cur, file.clone(), line));
            match target {
                OverrideTarget::Path(p) => {
                    match std::fs::metadata(p) {
                        Ok(m) if m.is_dir() => {}
                        Ok(m) => {
                            return Err(Error::OverrideTargetNotADirectory {
                                overrides_file: file.clone(),
                                line,
                                hash: cur,
                                target: p.clone(),
                                found: if m.is_file() {
                                    "a regular file".to_owned()
                                } else {
                                    "a special file (device, fifo or socket)".to_owned()
                                },
                            });
                        }
                        Err(_) => {
                            return Err(Error::OverrideTargetMissing {
                                overrides_file: file.clone(),
                                line,
                                hash: cur,
                                target: p.clone(),
                            });
                        }
                    }
                    return Ok(Some(ResolvedOverride {
                        path: p.clone(),
                        overrides_file: first_file.clone(),
                        chain,
                    }));
                }
                OverrideTarget::Hash(next) => {
                    if let Some(pos) = chain.iter().position(|h| h == next) {
                        return Err(Error::OverrideCycle {
                            chain: steps[pos..].to_vec(),
                        });
                    }
                    chain.push(*next);
                    match self.entries.get(next) {
                        Some((t, _, _)) if !matches!(t, OverrideTarget::Remove) => cur = *next,
                        _ => {
                            return match find_installed(&self.depots, next) {
                                Some(path) => Ok(Some(ResolvedOverride {
                                    path,
                                    overrides_file: first_file.clone(),
                                    chain,
                                })),
                                None => Err(Error::OverrideTargetNotInstalled {
                                    overrides_file: file.clone(),
                                    line,
                                    hash: cur,
                                    target: *next,
                                    depots: self.depots.clone(),
                                }),
                            };
                        }
                    }
                }
                OverrideTarget::Remove => unreachable!("filtered above"),
            }
        }
    }
}

/// How recent an entry of a manifest in the usage log must be for [`record_usage`] to skip
/// writing another one (so the log grows by at most one entry per manifest and day; `gc`
/// compacts it).
pub const USAGE_RECORD_EVERY: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// Records that `manifest` used the depot, in `<depot>/logs/artifact_usage.toml` (Julia's format:
/// `[["<manifest>"]]` with a `time`), once per process and depot, and only when the log has no
/// entry of that manifest from the last [`USAGE_RECORD_EVERY`]. Best effort: failures are
/// logged at debug level and otherwise ignored. The CLI's `gc` reads this file and keeps every
/// artifact a recorded manifest names.
pub fn record_usage(depot: &Path, manifest: &Path) {
    static DONE: LazyLock<Mutex<HashSet<(PathBuf, PathBuf)>>> =
        LazyLock::new(|| Mutex::new(HashSet::new()));
    let key = (depot.to_owned(), manifest.to_owned());
    {
        let mut done = DONE.lock().unwrap_or_else(|p| p.into_inner());
        if !done.insert(key) {
            return;
        }
    }
    let depot = Depot::new(depot);
    let logs = depot.logs_dir();
    let path = depot.usage_log();
    let entry = format!(
        "[[{}]]\ntime = {}\n",
        clima_artifact_manifest::toml_string(&manifest.to_string_lossy()),
        clima_artifact_fs::utc_timestamp(std::time::SystemTime::now())
    );
    // Checked first: on the first lookup of a model's run this is usually all there is to do
    // (four system calls), and it needs no `logs` folder.
    let since = std::time::SystemTime::now()
        .checked_sub(USAGE_RECORD_EVERY)
        .map(clima_artifact_fs::utc_timestamp);
    if let Some(since) = since
        && recorded_since(&path, &manifest.to_string_lossy(), &since)
    {
        return;
    }
    // Through another user's symlink the entry would land in their target (say, the
    // victim's own `~/.julia/logs`): not written, and said once.
    if let Ok(Some(link)) = clima_artifact_fs::foreign_link(&logs) {
        clima_artifact_progress::notice::warn(&format!(
            "not recording usage in `{}`: {link}; remove the link",
            path.display()
        ));
        return;
    }
    if let Err(e) = std::fs::create_dir_all(&logs) {
        clima_artifact_progress::notice::detail(&format!(
            "cannot record usage in `{}`: {e}",
            path.display()
        ));
        return;
    }
    let _julia = usage_log_pidlock(&logs);
    match append_to_regular_file(&path, entry.as_bytes()) {
        Ok(()) => {}
        Err(Append::Planted(what)) => clima_artifact_progress::notice::warn(&format!(
            "not recording usage in `{}`: it is {what}, not a regular file (planted by someone \
             with write access to the depot?); left alone and not followed: remove it",
            path.display()
        )),
        Err(Append::Io(e)) => clima_artifact_progress::notice::detail(&format!(
            "cannot record usage in `{}`: {e}",
            path.display()
        )),
    }
}

/// Pkg's lock of a depot's usage log, held while this value lives (see [`lock_usage_log`]).
#[must_use = "the lock is released when this value is dropped"]
pub struct UsageLogLock {
    _held: Option<crate::julia_lock::JuliaPidfile>,
}

/// Takes Pkg's lock of `depot`'s `logs/artifact_usage.toml` (the pidfile Julia 1.13's
/// `write_env_usage` and `gc` take) before rewriting the log, as `clima-artifacts gc` does when
/// it compacts it: waited for at most 10 s, then the caller goes on without it (a log that
/// cannot be locked is still better compacted than never).
pub fn lock_usage_log(depot: &Path) -> UsageLogLock {
    UsageLogLock {
        _held: usage_log_pidlock(&Depot::new(depot).logs_dir()),
    }
}

/// Pkg's lock of the usage log (`write_env_usage`: `mkpidlock("<log>.pid", stale_age = 3)`),
/// waited for at most 10 s (Julia holds it for a read and a rename); `None` when it cannot be
/// had (the entry is appended anyway: usage records are best effort).
fn usage_log_pidlock(logs: &Path) -> Option<crate::julia_lock::JuliaPidfile> {
    use crate::julia_lock::{JuliaPidfile, Take};
    let start = std::time::Instant::now();
    loop {
        match JuliaPidfile::try_take_file(logs, "artifact_usage.toml.pid", 3.0) {
            Take::Held(pidfile) => return Some(pidfile),
            Take::Unusable(why) => {
                clima_artifact_progress::notice::detail(&format!(
                    "{why}; recording usage without it"
                ));
                return None;
            }
            Take::Busy(holder) if start.elapsed() > std::time::Duration::from_secs(10) => {
                clima_artifact_progress::notice::detail(&format!(
                    "the usage log's lock is held by {}; recording usage without it",
                    holder.describe()
                ));
                return None;
            }
            Take::Busy(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
        }
    }
}

/// Records that `manifest` used the artifact `installed` (see [`record_usage`]): in the first
/// depot of `config`, and in the depot that holds the artifact when that is another one. Julia's
/// `Pkg.gc()` reads only the usage logs of the depots it collects, and since Pkg 1.13 deletes
/// an unreachable artifact at once: a Julia user whose first depot is the shared depot that
/// holds this artifact must find its manifest in that depot's log.
pub(crate) fn record_usage_of(config: &Config, installed: &crate::Installed, manifest: &Path) {
    let first = config.depots.first();
    if let Some(first) = first {
        record_usage(first, manifest);
    }
    if matches!(installed.origin, crate::Origin::Override { .. }) {
        return;
    }
    let holder = installed
        .path
        .parent()
        .filter(|a| a.file_name() == Some(std::ffi::OsStr::new(layout::ARTIFACTS)))
        .and_then(Path::parent);
    if let Some(holder) = holder
        && Some(holder) != first.map(PathBuf::as_path)
    {
        record_usage(holder, manifest);
    }
}

/// Whether the usage log at `path` has an entry of `manifest` with a `time` at or after `since`
/// (both RFC 3339 UTC, which compare as text). The log is read without following a symlink, as
/// a regular file only, and at most its last 16 MiB.
fn recorded_since(path: &Path, manifest: &str, since: &str) -> bool {
    use std::io::{Seek, SeekFrom};
    use std::os::unix::fs::OpenOptionsExt;
    const MAX: u64 = 16 << 20;
    let Ok(mut f) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
    else {
        return false;
    };
    let Ok(meta) = f.metadata() else { return false };
    if !meta.is_file() {
        return false;
    }
    let tail = meta.len() > MAX;
    if tail && f.seek(SeekFrom::Start(meta.len() - MAX)).is_err() {
        return false;
    }
    // Read what fstat promised, in as few reads as it takes (usually one).
    let mut bytes = vec![0u8; meta.len().min(MAX) as usize];
    let Ok(filled) = clima_artifact_fs::read_full(&mut f, &mut bytes) else {
        return false;
    };
    bytes.truncate(filled);
    if tail {
        // Reading from the middle of the log: start at the next whole line (the cut may be
        // inside a character).
        let start = bytes
            .iter()
            .position(|&b| b == b'\n')
            .map_or(bytes.len(), |i| i + 1);
        bytes.drain(..start);
    }
    let Ok(text) = String::from_utf8(bytes) else {
        // Not UTF-8 (or cut inside a character at the start): treat as not recorded.
        return false;
    };
    let header = format!("[[{}]]", clima_artifact_manifest::toml_string(manifest));
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim() != header {
            continue;
        }
        if let Some(time) = lines
            .next()
            .and_then(|l| l.trim().strip_prefix("time"))
            .map(|rest| rest.trim_start().trim_start_matches('=').trim())
            && time >= since
        {
            return true;
        }
    }
    false
}

/// Why [`append_to_regular_file`] did not append.
enum Append {
    /// Something other than a regular file is at the path (what it is).
    Planted(&'static str),
    /// Any other failure.
    Io(std::io::Error),
}

/// Appends `bytes` in one write to the regular file at `path` (created if missing), for files
/// in folders others may write to: a symlink at `path` is never followed (`O_NOFOLLOW`) and a
/// fifo never blocks (`O_NONBLOCK`); only a regular file is written.
fn append_to_regular_file(path: &Path, bytes: &[u8]) -> Result<(), Append> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => Append::Planted("a symlink"),
            _ => Append::Io(e),
        })?;
    let meta = f.metadata().map_err(Append::Io)?;
    if !meta.is_file() {
        return Err(Append::Planted("a special file"));
    }
    // One write: appends from concurrent processes do not interleave.
    f.write_all(bytes).map_err(Append::Io)
}

/// Removes the install temp dirs (`<depot>/artifacts/.<hash>.clima-install-*`) left by dead
/// processes of this host, and writability probe files (`.probe-*`, see [`PROBE_PREFIX`])
/// older than [`PROBE_MAX_AGE`], and this user's partial downloads ([`PARTIAL_PREFIX`](layout::PARTIAL_PREFIX)) that
/// received nothing for [`PARTIAL_MAX_AGE`] while nobody holds their artifact's lock. Returns
/// how many temp dirs were removed.
///
/// A pid that looks dead may be a live process in another PID namespace (a container with the
/// same host name sharing the depot), so a temp dir is also left alone while anyone holds the
/// lock of its artifact: a live installer always does (where `flock` works).
pub fn reclaim_stale_temp_dirs(depot: &Path) -> usize {
    Depot::new(depot).reclaim_stale_temp_dirs()
}

impl Depot {
    /// [`reclaim_stale_temp_dirs`], called while this process holds the lock of `holding` (so that
    /// lock says nothing about other processes).
    pub(crate) fn reclaim_stale(&self, holding: Option<&GitTreeSha1>) -> usize {
        // Never clean up through another user's link (see [`planted_link`]).
        if !matches!(planted_link(&self.root), Ok(None)) {
            return 0;
        }
        let dir = self.artifacts_dir();
        let Ok(rd) = std::fs::read_dir(&dir) else {
            return 0;
        };
        let host = clima_artifact_fs::host_tag();
        let mut removed = 0;
        for entry in rd.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            match layout::Entry::parse(name) {
                Some(layout::Entry::Probe { .. }) => {
                    remove_if_older(&entry.path(), PROBE_MAX_AGE);
                    continue;
                }
                Some(layout::Entry::Partial { artifact, uid, .. }) => {
                    let _ = self.reclaim_partial(name, &artifact, uid, holding);
                    continue;
                }
                _ => {}
            }
            let Some((hash, tmp_host, pid)) = Depot::temp_dir_owner(name) else {
                continue;
            };
            if tmp_host != host || clima_artifact_fs::pid_alive(pid) {
                continue;
            }
            // Held until the dir is gone, so no installer of this artifact starts meanwhile.
            let _lock = if holding == Some(&hash) {
                None
            } else {
                match try_lock_existing(&self.lock_path(&hash)) {
                    LockProbe::Held => {
                        clima_artifact_progress::notice::detail(&format!(
                            "keeping `{}`: its artifact's lock is held (pid {pid} may live in \
                         another PID namespace)",
                            entry.path().display()
                        ));
                        continue;
                    }
                    LockProbe::Free(file) => Some(file),
                    LockProbe::Unknown => None,
                }
            };
            clima_artifact_progress::notice::info(&format!(
                "removing `{}` left by dead process {pid}",
                entry.path().display()
            ));
            crate::temp_dir::remove_tree(&entry.path());
            removed += 1;
        }
        removed
    }
}

impl Depot {
    /// Removes the partial download `name` (of `hash`, owned by `uid`) if it is this user's,
    /// received nothing for [`PARTIAL_MAX_AGE`], and nobody holds its artifact's lock (a live
    /// installer of any host always does, where `flock` works).
    fn reclaim_partial(
        &self,
        name: &str,
        hash: &GitTreeSha1,
        uid: u32,
        holding: Option<&GitTreeSha1>,
    ) -> bool {
        let path = self.artifacts_dir().join(name);
        let old = std::fs::symlink_metadata(&path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > PARTIAL_MAX_AGE);
        if uid != clima_artifact_fs::euid() || !old {
            return false;
        }
        let _lock = match holding == Some(hash) {
            true => None,
            false => match try_lock_existing(&self.lock_path(hash)) {
                LockProbe::Held => return false,
                LockProbe::Free(file) => Some(file),
                LockProbe::Unknown => None,
            },
        };
        let Ok(dir) = clima_artifact_fs::Dir::open(&self.artifacts_dir()) else {
            return false;
        };
        let removed = clima_artifact_net::ranged::remove_kept(&dir, name);
        if removed {
            clima_artifact_progress::notice::info(&format!(
                "removed the partial download `{}`: nothing was added to it for {} days",
                path.display(),
                PARTIAL_MAX_AGE.as_secs() / 86400
            ));
        }
        removed
    }
}

/// Removes this user's partial downloads in `depot` that received nothing for
/// [`PARTIAL_MAX_AGE`] while nobody holds their artifact's lock (what `gc` does besides
/// collecting artifacts). Returns how many were removed.
pub fn reclaim_stale_partials(depot: &Path) -> usize {
    let depot = Depot::new(depot);
    let Ok(dir) = clima_artifact_fs::Dir::open(&depot.artifacts_dir()) else {
        return 0;
    };
    let mut removed = 0;
    for entry in dir.entries().unwrap_or_default() {
        let Some(name) = entry.name.to_str() else {
            continue;
        };
        if let Some((hash, uid)) = partial_owner(name)
            && depot.reclaim_partial(name, &hash, uid, None)
        {
            removed += 1;
        }
    }
    removed
}

/// Removes the file at `path` if it was last modified more than `age` ago.
fn remove_if_older(path: &Path, age: std::time::Duration) {
    let old = std::fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|elapsed| elapsed > age);
    if old {
        clima_artifact_progress::notice::info(&format!(
            "removing leftover probe file `{}`",
            path.display()
        ));
        let _ = std::fs::remove_file(path);
    }
}

enum LockProbe {
    /// Another open file description holds the lock.
    Held,
    /// Now locked by us (released when the file is dropped).
    Free(std::fs::File),
    /// No lock file, or locks do not work here.
    Unknown,
}

/// Tries, without blocking and without creating anything, to lock an existing lock file. The
/// file is opened without following a symlink and without blocking on a fifo (anyone who can
/// write to the depot can plant either), and must be a regular file.
fn try_lock_existing(path: &Path) -> LockProbe {
    let Ok(Some(file)) = clima_artifact_fs::open_shared_file(path) else {
        return LockProbe::Unknown;
    };
    match file.try_lock() {
        Ok(()) => LockProbe::Free(file),
        Err(std::fs::TryLockError::WouldBlock) => LockProbe::Held,
        Err(std::fs::TryLockError::Error(_)) => LockProbe::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_temp_dirs_name_their_artifact_host_and_pid() {
        let hash = GitTreeSha1::from_hex(&"ab".repeat(20)).unwrap();
        let depot = Depot::new("/d");
        let tmp = depot.new_temp_dir(&hash);
        assert_eq!(tmp.parent(), Some(Path::new("/d/artifacts")));
        let name = tmp.file_name().unwrap().to_str().unwrap();
        let (h, host, pid) = Depot::temp_dir_owner(name).unwrap();
        assert_eq!(
            (h, host, pid),
            (
                hash,
                clima_artifact_fs::host_tag().as_str(),
                std::process::id() as i32
            )
        );
        assert_eq!(
            Depot::temp_dir_owner(&format!(".{}.clima-install-n7.12.00ff", "ab".repeat(20))),
            Some((hash, "n7", 12))
        );
        assert_eq!(Depot::temp_dir_owner(".zz.clima-install-n7.12.00ff"), None);
        assert_eq!(Depot::temp_dir_owner(&"ab".repeat(20)), None);
    }

    #[test]
    fn first_writable_skips_unusable_depots() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a-file");
        std::fs::write(&file, b"x").unwrap();
        let good = dir.path().join("good");
        let config = Config {
            depots: vec![file.clone(), good.clone()],
            ..Config::default()
        };
        assert_eq!(first_writable(&config, "x").unwrap(), good);
        let config = Config {
            depots: vec![file.clone()],
            ..Config::default()
        };
        let e = first_writable(&config, "x").unwrap_err().to_string();
        assert!(
            e.contains("a-file") && e.contains("CLIMA_ARTIFACTS_DEPOT_PATH"),
            "{e}"
        );
    }

    #[test]
    fn usage_log_appends_once_per_process() {
        let dir = tempfile::tempdir().unwrap();
        record_usage(dir.path(), Path::new("/p/Artifacts.toml"));
        record_usage(dir.path(), Path::new("/p/Artifacts.toml"));
        record_usage(dir.path(), Path::new("/q/\"odd\".toml"));
        let s = std::fs::read_to_string(dir.path().join("logs/artifact_usage.toml")).unwrap();
        assert_eq!(s.matches("[[").count(), 2, "{s}");
        assert!(s.contains("[[\"/p/Artifacts.toml\"]]\ntime = "), "{s}");
        assert!(s.contains("[[\"/q/\\\"odd\\\".toml\"]]"), "{s}");
    }

    #[test]
    fn usage_log_gets_at_most_one_entry_per_manifest_and_day() {
        let dir = tempfile::tempdir().unwrap();
        let logs = dir.path().join("logs");
        std::fs::create_dir_all(&logs).unwrap();
        let log = logs.join("artifact_usage.toml");
        let now = clima_artifact_fs::utc_timestamp(std::time::SystemTime::now());
        std::fs::write(
            &log,
            format!("[[\"/day/Artifacts.toml\"]]\ntime = {now}\n[[\"/old/Artifacts.toml\"]]\ntime = 2020-01-01T00:00:00Z\n"),
        )
        .unwrap();
        // Recorded today already (by another process): not written again.
        record_usage(dir.path(), Path::new("/day/Artifacts.toml"));
        // Recorded long ago: a new entry.
        record_usage(dir.path(), Path::new("/old/Artifacts.toml"));
        let s = std::fs::read_to_string(&log).unwrap();
        assert_eq!(s.matches("[[\"/day/Artifacts.toml\"]]").count(), 1, "{s}");
        assert_eq!(s.matches("[[\"/old/Artifacts.toml\"]]").count(), 2, "{s}");
    }

    /// A log over 16 MiB is read from its last 16 MiB; a cut inside a character there must not
    /// hide today's entry (it would be written again on every run).
    #[test]
    fn a_long_log_cut_inside_a_character_still_finds_todays_entry() {
        let dir = tempfile::tempdir().unwrap();
        let logs = dir.path().join("logs");
        std::fs::create_dir_all(&logs).unwrap();
        let log = logs.join("artifact_usage.toml");
        let now = clima_artifact_fs::utc_timestamp(std::time::SystemTime::now());
        let entry = format!("[[\"/day/Artifacts.toml\"]]\ntime = {now}\n");
        // Old entries of a manifest with a non-ASCII name (two-byte characters), so that the
        // 16 MiB cut falls inside a character, then today's entry.
        let old = "[[\"/données/Artifacts.toml\"]]\ntime = 2020-01-01T00:00:00Z\n";
        let old_part = old.repeat((16 << 20) / old.len() + 10);
        // Pad between the old entries and today's so that the cut (16 MiB from the end) falls
        // on the second byte of an `é`.
        let cut = old_part.len() + entry.len() - (16 << 20);
        let e = cut
            + old_part.as_bytes()[cut..]
                .windows(2)
                .position(|w| w == "é".as_bytes())
                .unwrap();
        let pad = e + 1 - cut;
        let text = format!("{old_part}{}\n{entry}", "#".repeat(pad - 1));
        let cut = text.len() - (16 << 20);
        assert!(
            !text.is_char_boundary(cut),
            "the test must cut inside a character"
        );
        std::fs::write(&log, &text).unwrap();
        record_usage(dir.path(), Path::new("/day/Artifacts.toml"));
        let after = std::fs::read_to_string(&log).unwrap();
        assert_eq!(after.len(), text.len(), "today's entry was written again");
    }

    #[test]
    fn usage_log_never_follows_a_planted_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        std::fs::create_dir(dir.path().join("logs")).unwrap();
        std::os::unix::fs::symlink(&victim, dir.path().join("logs/artifact_usage.toml")).unwrap();
        record_usage(dir.path(), Path::new("/planted/Artifacts.toml"));
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
    }
}
