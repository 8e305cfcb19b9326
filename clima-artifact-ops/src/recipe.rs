//! Recipes: the folder `artifacts/<name>/` next to a manifest holds an executable `recipe` that
//! makes the artifact's content, and a `README.md` with the sections the input-data policy asks
//! for ([`clima_artifact_provenance::readme`]).
//!
//! A recipe is run with the output folder (a fresh temp folder, never a depot) as its first
//! argument and as `$OUT`, the recipe folder as working directory, and the caller's environment
//! plus `ARTIFACT_NAME`. It runs with the rights of the user who runs `clima-artifacts`. Its
//! stdout and stderr go to the CLI's stderr as it runs (stdout stays free for `--json`). It runs
//! in a process group of its own: `--timeout` kills that whole group, as do SIGINT, SIGTERM
//! and SIGHUP sent to the CLI (Ctrl-C at the terminal reaches only the CLI's group), and
//! processes still in it when the recipe exits are killed too. Its output is then checked (no symlink pointing out of
//! it, no `README.md` at the top, which is the recipe folder's README's place) and the README is
//! copied in.

use std::ffi::OsString;
use std::fs;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use clima_artifact_fs::printable;
use clima_artifact_provenance::readme;

use crate::error::{Error, Result, io_error};
use crate::tarball::{self, EntryKind};

/// The executable in a recipe folder.
pub const RECIPE_FILE: &str = "recipe";
/// The README in a recipe folder, copied to the top of the artifact's content.
pub use readme::README_FILE;
/// The manifest key recording where the recipe folder is, relative to the manifest's folder.
pub use readme::RECIPE_KEY;
/// The variable holding the artifact's name in the recipe's environment.
pub const NAME_ENV: &str = "ARTIFACT_NAME";
/// The variable holding the output folder in the recipe's environment.
pub const OUT_ENV: &str = "OUT";
use readme::MAX_README_BYTES;
/// Most symlinks followed while resolving one link of the output.
const MAX_HOPS: usize = 40;

/// A checked recipe folder.
#[derive(Debug, Clone)]
pub struct Recipe {
    /// The artifact it makes.
    pub name: String,
    /// The folder, absolute.
    pub dir: PathBuf,
    /// The `recipe` key: the folder relative to the manifest's folder, `/`-separated.
    pub key: String,
    /// The README's text.
    pub readme: String,
}

/// The absolute folder of `manifest` (which need not exist yet).
pub fn manifest_dir(manifest: &Path) -> Result<PathBuf> {
    let abs = std::path::absolute(manifest).map_err(|e| io_error("resolve", manifest, &e))?;
    let dir = abs.parent().map(Path::to_path_buf).unwrap_or(abs);
    Ok(fs::canonicalize(&dir).unwrap_or(dir))
}

/// The recipe folder given to `create --recipe`: it must be inside the manifest's folder, so the
/// recorded key works in every clone.
pub fn from_folder(folder: &Path, manifest: &Path, name: &str) -> Result<Recipe> {
    let dir = crate::error::existing_dir(folder, "recipe folder")?;
    let base = manifest_dir(manifest)?;
    let key = match dir.strip_prefix(&base) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("/"),
        _ => {
            return Err(Error::input(format!(
                "the recipe folder `{}` is not inside the manifest's folder `{}`; put it there \
                 (the convention is `artifacts/{name}` next to the manifest, which \
                 `clima-artifacts new {name}` makes) so the path recorded in the manifest works \
                 in every clone",
                dir.display(),
                base.display()
            )));
        }
    };
    check(name, dir, key, &base)
}

/// The recipe of artifact `name` whose manifest entry says `recipe = key`.
pub fn from_entry(name: &str, key: &str, manifest: &Path) -> Result<Recipe> {
    let rel = Path::new(key);
    if key.is_empty() || !rel.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(Error::input(format!(
            "`{}`: artifact `{name}` has `recipe = \"{}\"`, which is not a relative path inside \
             the manifest's folder (no leading `/`, no `..`); write it as `artifacts/{name}`",
            manifest.display(),
            printable(key)
        )));
    }
    let base = manifest_dir(manifest)?;
    let path = base.join(rel);
    // Resolved (symlinks followed): a folder committed as a link to elsewhere is refused below.
    let dir = crate::error::existing_dir(&path, &format!("recipe folder of artifact `{name}`"))?;
    if !dir.starts_with(&base) {
        return Err(outside(name, &path, &dir, &base));
    }
    check(name, dir, key.to_owned(), &base)
}

/// The error for a recipe folder or file at `path` that resolves (through symlinks) to
/// `resolved`, outside the manifest's folder `base`.
fn outside(name: &str, path: &Path, resolved: &Path, base: &Path) -> Error {
    Error::input(format!(
        "the recipe of artifact `{name}`, `{}`, resolves through a symlink to `{}`, outside the \
         manifest's folder `{}`: a recipe must live in the manifest's tree, so that what runs is \
         what the repository holds; replace the link with the recipe itself",
        path.display(),
        resolved.display(),
        base.display()
    ))
}

/// Checks the folder's `recipe` (an executable file inside `base`, the manifest's folder, once
/// symlinks are resolved) and README.md (present, its sections).
fn check(name: &str, dir: PathBuf, key: String, base: &Path) -> Result<Recipe> {
    let script = dir.join(RECIPE_FILE);
    if let Ok(resolved) = fs::canonicalize(&script)
        && !resolved.starts_with(base)
    {
        return Err(outside(name, &script, &resolved, base));
    }
    match fs::metadata(&script) {
        Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => {}
        Ok(m) if m.is_file() => {
            return Err(Error::input(format!(
                "`{}` is not executable: run `chmod +x {}`",
                script.display(),
                script.display()
            )));
        }
        Ok(_) => {
            return Err(Error::input(format!(
                "`{}` is not a file; a recipe folder holds an executable file named `{RECIPE_FILE}`",
                script.display()
            )));
        }
        Err(e) => {
            return Err(Error::input(format!(
                "`{}` cannot be used ({e}); a recipe folder holds an executable file named \
                 `{RECIPE_FILE}` (`clima-artifacts new {name}` writes a template)",
                script.display()
            )));
        }
    }
    let readme_path = dir.join(README_FILE);
    let readme = clima_artifact_fs::read_shared_text(&readme_path, MAX_README_BYTES)
        .map_err(|e| Error::input(format!("the recipe's README cannot be used: {e}")))?
        .ok_or_else(|| {
            Error::input(format!(
                "`{}` is missing; a recipe folder holds a README.md with the sections {} \
                 (`clima-artifacts new {name}` writes a template)",
                readme_path.display(),
                section_list(&readme::SECTIONS.map(|s| s.name))
            ))
        })?;
    let missing = readme::missing_sections(&readme);
    if !missing.is_empty() {
        return Err(Error::input(format!(
            "`{}` lacks the section(s) {} (or they have no text): add a heading for each (e.g. `## {}`, matched \
             ignoring case) with text under it (HTML comments do not count)",
            readme_path.display(),
            section_list(&missing),
            missing[0]
        )));
    }
    Ok(Recipe {
        name: name.to_owned(),
        dir,
        key,
        readme,
    })
}

/// `` `A`, `B` `` for messages.
fn section_list(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A recipe's finished, checked output: the content folder, README.md included. The temp
/// folder holding it is removed when this is dropped.
#[derive(Debug)]
pub struct Output {
    _tmp: tempfile::TempDir,
    /// The content folder (absolute, without symlinks in its own path).
    pub dir: PathBuf,
}

/// Runs `recipe` into a fresh temp folder, checks its output and copies its README in.
pub fn run(recipe: &Recipe, timeout: Option<Duration>) -> Result<Output> {
    let tmp = tempfile::Builder::new()
        .prefix("clima-recipe-")
        .tempdir()
        .map_err(|e| io_error("create a temp folder in", &std::env::temp_dir(), &e))?;
    let out = tmp.path().join("out");
    fs::create_dir(&out).map_err(|e| io_error("create folder", &out, &e))?;
    fs::set_permissions(&out, fs::Permissions::from_mode(0o755))
        .map_err(|e| io_error("set the mode of", &out, &e))?;
    let out = fs::canonicalize(&out).map_err(|e| io_error("resolve", &out, &e))?;
    execute(recipe, &out, timeout)?;
    check_output(recipe, &out)?;
    write_new(&out.join(README_FILE), &recipe.readme, 0o644)?;
    Ok(Output {
        _tmp: tmp,
        dir: out,
    })
}

/// Creates `path` exclusively (never through a symlink or over a file) with exactly `mode`.
pub fn write_new(path: &Path, text: &str, mode: u32) -> Result {
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(|e| io_error("create", path, &e))?;
    file.write_all(text.as_bytes())
        .map_err(|e| io_error("write", path, &e))?;
    // The umask may have removed bits (a recipe must be executable).
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .map_err(|e| io_error("set the mode of", path, &e))
}

/// Sends SIGKILL to the process group `pgid` (ignoring a group that no longer exists).
fn kill_group(pgid: u32) {
    if let Ok(pgid) = libc::pid_t::try_from(pgid) {
        // SAFETY: kill(2) with a negative pid signals that process group; no memory involved.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}

/// The last of SIGINT, SIGTERM, SIGHUP received while a recipe runs (0: none).
static INTERRUPTED: AtomicI32 = AtomicI32::new(0);

extern "C" fn note_signal(sig: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    INTERRUPTED.store(sig, Ordering::SeqCst);
}

/// While alive, SIGINT, SIGTERM and SIGHUP are noted in [`INTERRUPTED`] instead of ending the
/// CLI: the recipe runs in a process group of its own, so Ctrl-C at the terminal reaches only
/// the CLI, which must then kill the recipe's group itself. Dropping restores the previous
/// handlers.
struct SignalGuard {
    previous: Vec<(libc::c_int, libc::sighandler_t)>,
}

const FORWARDED: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

impl SignalGuard {
    fn install() -> SignalGuard {
        INTERRUPTED.store(0, Ordering::SeqCst);
        let handler = note_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        let previous = FORWARDED
            .iter()
            // SAFETY: signal(2) with a handler that only stores to an atomic.
            .map(|&sig| (sig, unsafe { libc::signal(sig, handler) }))
            .collect();
        SignalGuard { previous }
    }
}

impl Drop for SignalGuard {
    fn drop(&mut self) {
        for &(sig, old) in &self.previous {
            if old != libc::SIG_ERR {
                // SAFETY: restores the disposition signal(2) returned for this signal.
                unsafe {
                    libc::signal(sig, old);
                }
            }
        }
    }
}

/// Runs the recipe in its own process group, output to our stderr, until it exits or `timeout`.
fn execute(recipe: &Recipe, out: &Path, timeout: Option<Duration>) -> Result {
    let script = recipe.dir.join(RECIPE_FILE);
    let stderr = std::io::stderr();
    let _ = writeln!(
        stderr.lock(),
        "running recipe `{}` of artifact `{}` into `{}`",
        script.display(),
        recipe.name,
        out.display()
    );
    let to_stderr = std::os::fd::AsFd::as_fd(&stderr)
        .try_clone_to_owned()
        .map_err(|e| io_error("duplicate", Path::new("standard error"), &e))?;
    // Before the spawn, so no signal falls between; exec gives the recipe default handlers.
    let signals = SignalGuard::install();
    let mut child = Command::new(&script)
        .arg(out)
        .current_dir(&recipe.dir)
        .env(OUT_ENV, out)
        .env(NAME_ENV, &recipe.name)
        .stdin(Stdio::null())
        .stdout(Stdio::from(to_stderr))
        .stderr(Stdio::inherit())
        .process_group(0)
        .spawn()
        .map_err(|e| {
            let why = match e.raw_os_error() {
                Some(libc::ENOEXEC) => {
                    "it has no `#!` line naming its interpreter: start it with e.g. `#!/bin/sh`"
                        .to_owned()
                }
                Some(libc::EACCES) => {
                    "permission denied: make it (and its interpreter) executable".to_owned()
                }
                Some(libc::ENOENT) => "its `#!` interpreter was not found".to_owned(),
                _ => e.to_string(),
            };
            Error::failed(format!(
                "cannot run the recipe `{}`: {why}",
                script.display()
            ))
        })?;
    let pgid = child.id();
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => {
                kill_group(pgid);
                let _ = child.wait();
                return Err(io_error("wait for the recipe", &script, &e));
            }
        }
        let sig = INTERRUPTED.load(Ordering::SeqCst);
        if sig != 0 {
            kill_group(pgid);
            let _ = child.wait();
            drop(signals);
            return Err(Error::failed(format!(
                "interrupted (signal {sig}) while the recipe `{}` of artifact `{}` ran; it and \
                 the processes it started (its process group) were killed",
                script.display(),
                recipe.name
            )));
        }
        if let Some(limit) = timeout
            && start.elapsed() >= limit
        {
            // Killed before it is reaped, so the group id cannot have been reused.
            kill_group(pgid);
            let _ = child.wait();
            return Err(Error::failed(format!(
                "the recipe `{}` of artifact `{}` was still running after {} (--timeout); it and \
                 the processes it started (its process group) were killed: make it finish \
                 sooner or give a longer --timeout",
                script.display(),
                recipe.name,
                human_duration(limit)
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // Processes it left running in its group must not write into the output while it is
    // hashed and archived.
    kill_group(pgid);
    drop(signals);
    if status.success() {
        return Ok(());
    }
    let how = match (status.code(), status.signal()) {
        (Some(code), _) => format!("it exited with status {code}"),
        (None, Some(sig)) => format!("it was killed by signal {sig}"),
        _ => format!("it ended with {status}"),
    };
    Err(Error::failed(format!(
        "the recipe `{}` of artifact `{}` failed: {how} (its output is above); fix it and run \
         again",
        script.display(),
        recipe.name
    )))
}

/// `90 s`, `30 min`, `2 h` for messages.
fn human_duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 120.0 {
        format!("{s:.0} s")
    } else if s < 7200.0 {
        format!("{:.0} min", s / 60.0)
    } else {
        format!("{:.1} h", s / 3600.0)
    }
}

/// Refuses an output with a symlink that resolves outside it, or with its own top-level
/// README.md. Nothing outside the output is read: links are resolved one at a time, and only
/// links inside the output are read.
fn check_output(recipe: &Recipe, out: &Path) -> Result {
    let entries = tarball::collect_entries(out).map_err(|e| {
        e.context(format_args!(
            "the output of the recipe of `{}`",
            recipe.name
        ))
    })?;
    for e in &entries {
        let EntryKind::Symlink(target) = &e.kind else {
            continue;
        };
        let rel = Path::new(std::ffi::OsStr::from_bytes(&e.rel));
        let shown = printable(&rel.to_string_lossy()).into_owned();
        let target = printable(&target.to_string_lossy()).into_owned();
        match resolve_link(out, rel) {
            Resolved::Inside => {}
            Resolved::Outside => {
                return Err(Error::failed(format!(
                    "the recipe of `{}` left a symlink `{shown}` pointing outside its output \
                     folder (to `{target}`): a recipe must write only inside its output folder \
                     ($OUT), and installers refuse such links; make it a relative link to a \
                     file inside the output, or copy the data",
                    recipe.name
                )));
            }
            Resolved::Loop => {
                return Err(Error::failed(format!(
                    "the recipe of `{}` left a symlink `{shown}` (to `{target}`) that does not \
                     resolve (more than {MAX_HOPS} links, a loop?); fix the recipe",
                    recipe.name
                )));
            }
        }
    }
    if !entries
        .iter()
        .any(|e| matches!(e.kind, EntryKind::File { .. } | EntryKind::Symlink(_)))
    {
        return Err(Error::failed(format!(
            "the recipe `{}` of artifact `{}` exited successfully but wrote nothing into its \
             output folder (empty folders do not count); make it write the data into the folder \
             given as its first argument and as $OUT",
            recipe.dir.join(RECIPE_FILE).display(),
            recipe.name
        )));
    }
    if fs::symlink_metadata(out.join(README_FILE)).is_ok() {
        return Err(Error::failed(format!(
            "the recipe of `{}` wrote `{README_FILE}` at the top of its output; that place is \
             for the recipe folder's `{}`, which is copied there: make the recipe write it \
             elsewhere or not at all",
            recipe.name,
            recipe.dir.join(README_FILE).display()
        )));
    }
    Ok(())
}

/// Where a symlink of the output leads.
#[derive(Debug, PartialEq, Eq)]
enum Resolved {
    /// Inside the output folder (or to a name that does not exist there).
    Inside,
    /// Outside it (an absolute target, or `..` above its top).
    Outside,
    /// Too many links.
    Loop,
}

/// One step of a link target: up a folder, or into a name.
enum Step {
    Up,
    Into(OsString),
}

/// The steps of `target`, last first (so that popping walks it); `None` for an absolute target.
fn steps(target: &Path) -> Option<Vec<Step>> {
    let mut out = Vec::new();
    for c in target.components() {
        match c {
            Component::RootDir | Component::Prefix(_) => return None,
            Component::CurDir => {}
            Component::ParentDir => out.push(Step::Up),
            Component::Normal(n) => out.push(Step::Into(n.to_owned())),
        }
    }
    out.reverse();
    Some(out)
}

/// Resolves the symlink `rel` of `root` (whose own path has no symlinks) the way the kernel
/// would, but only ever looking inside `root`.
fn resolve_link(root: &Path, rel: &Path) -> Resolved {
    let mut at: Vec<OsString> = rel
        .parent()
        .map(|p| p.iter().map(|c| c.to_owned()).collect())
        .unwrap_or_default();
    let mut pending = vec![Step::Into(
        rel.file_name().map(|n| n.to_owned()).unwrap_or_default(),
    )];
    let mut hops = 0;
    while let Some(step) = pending.pop() {
        match step {
            Step::Up => {
                if at.pop().is_none() {
                    return Resolved::Outside;
                }
            }
            Step::Into(name) => {
                at.push(name);
                let here: PathBuf = root.join(at.iter().collect::<PathBuf>());
                let is_link = fs::symlink_metadata(&here).is_ok_and(|m| m.file_type().is_symlink());
                if !is_link {
                    continue;
                }
                hops += 1;
                if hops > MAX_HOPS {
                    return Resolved::Loop;
                }
                at.pop();
                let Ok(target) = fs::read_link(&here) else {
                    return Resolved::Loop;
                };
                match steps(&target) {
                    Some(s) => pending.extend(s),
                    None => return Resolved::Outside,
                }
            }
        }
    }
    Resolved::Inside
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn links_are_resolved_through_other_links() {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        fs::create_dir_all(root.join("sub")).unwrap();
        fs::write(root.join("a"), "a").unwrap();
        symlink("../a", root.join("sub/ok")).unwrap();
        symlink("..", root.join("sub/up")).unwrap();
        // Lexically inside (sub/up/.. looks like sub), really the parent of root.
        symlink("up/..", root.join("sub/sneaky")).unwrap();
        symlink("/etc/passwd", root.join("abs")).unwrap();
        symlink("loop2", root.join("loop1")).unwrap();
        symlink("loop1", root.join("loop2")).unwrap();
        symlink("missing/x", root.join("dangling")).unwrap();
        let r = |p: &str| resolve_link(&root, Path::new(p));
        assert_eq!(r("sub/ok"), Resolved::Inside);
        assert_eq!(r("sub/up"), Resolved::Inside);
        assert_eq!(r("sub/sneaky"), Resolved::Outside);
        assert_eq!(r("abs"), Resolved::Outside);
        assert_eq!(r("loop1"), Resolved::Loop);
        assert_eq!(r("dangling"), Resolved::Inside);
    }
}
