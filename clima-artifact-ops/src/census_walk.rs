//! The walk of `census`: finds the manifests under the given paths and shows the census the
//! files next to each ([`Surroundings`]), never following a symlink below a given path and
//! reading every file with a size bound.

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use clima_artifact_fs::{Dir, EntryKind};
use clima_artifact_manifest::manifest::MAX_TOML_BYTES;
use clima_artifact_provenance::census::{Census, Surroundings, is_manifest_name};
use clima_artifact_provenance::readme::MAX_README_BYTES;

/// Folder names never searched (besides hidden ones): build output.
const SKIPPED: [&str; 1] = ["target"];

/// A census of every manifest under `paths` (folders, or manifest files named directly).
/// Unreadable manifests are listed with their error; unreadable folders are reported on
/// stderr and skipped.
pub fn take(paths: &[PathBuf]) -> Census {
    let mut census = Census::new();
    for path in paths {
        if path.is_dir() {
            match Dir::open(path) {
                Ok(dir) => walk(&mut census, dir),
                Err(e) => warn(&e),
            }
        } else {
            // A file named directly: its folder is the one it is in.
            let (parent, name) = match (path.parent(), path.file_name()) {
                (Some(p), Some(n)) => (
                    if p.as_os_str().is_empty() {
                        Path::new(".")
                    } else {
                        p
                    },
                    n,
                ),
                _ => (Path::new("."), path.as_os_str()),
            };
            match Dir::open(parent) {
                Ok(dir) => add(&mut census, &dir, name, &path.display().to_string()),
                Err(e) => census.add_unreadable(&path.display().to_string(), &e.to_string()),
            }
        }
    }
    census
}

fn warn(e: &std::io::Error) {
    eprintln!(
        "warning: {}; skipped",
        clima_artifact_fs::printable(&e.to_string())
    );
}

/// Depth-first, entries in name order, manifests of a folder before its sub-folders. A
/// sub-folder is opened only when its turn comes, so the descriptors open at once are those of
/// the folders on the current path (not one per folder waiting in a wide tree).
fn walk(census: &mut Census, root: Dir) {
    let mut stack: Vec<(Rc<Dir>, OsString)> = Vec::new();
    let mut next = Some(root);
    loop {
        let dir = match next.take() {
            Some(dir) => Rc::new(dir),
            None => match stack.pop() {
                Some((parent, name)) => match parent.open_dir(&name) {
                    Ok(Some(dir)) => Rc::new(dir),
                    Ok(None) => continue,
                    Err(e) => {
                        warn(&e);
                        continue;
                    }
                },
                None => return,
            },
        };
        let mut entries = match dir.entries() {
            Ok(e) => e,
            Err(e) => {
                warn(&e);
                continue;
            }
        };
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        let mut subdirs = Vec::new();
        for e in entries {
            let name = e.name.to_string_lossy();
            match e.kind {
                EntryKind::Dir if name.starts_with('.') || SKIPPED.contains(&name.as_ref()) => {}
                EntryKind::Dir => subdirs.push((Rc::clone(&dir), e.name.clone())),
                _ if !is_manifest_name(&name) => {}
                EntryKind::File => add(
                    census,
                    &dir,
                    &e.name,
                    &dir.path().join(&e.name).display().to_string(),
                ),
                other => census.add_unreadable(
                    &dir.path().join(&e.name).display().to_string(),
                    &format!("is {}, not a regular file; not followed", other.described()),
                ),
            }
        }
        stack.extend(subdirs.into_iter().rev());
    }
}

/// Reads the manifest `name` of `dir` (bounded, not through a symlink) into the census.
fn add(census: &mut Census, dir: &Dir, name: &OsStr, shown: &str) {
    match read_bounded(dir, name, MAX_TOML_BYTES) {
        Ok(Some(text)) => census.add_manifest(shown, &text, &Near(dir)),
        Ok(None) => census.add_unreadable(shown, "vanished while the census ran"),
        Err(e) => census.add_unreadable(shown, &e),
    }
}

/// The regular file `name` of `dir` as UTF-8 text of at most `max` bytes.
fn read_bounded(dir: &Dir, name: &OsStr, max: u64) -> Result<Option<String>, String> {
    let Some(file) = dir.open_file(name).map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    let shown = || dir.path().join(name).display().to_string();
    let mut bytes = Vec::new();
    (&file)
        .take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read `{}`: {e}", shown()))?;
    if bytes.len() as u64 > max {
        return Err(format!(
            "`{}` is larger than {max} bytes; not read (this is not a manifest or README)",
            shown()
        ));
    }
    String::from_utf8(bytes).map(Some).map_err(|e| {
        format!(
            "`{}` is not UTF-8 (invalid byte at offset {})",
            shown(),
            e.utf8_error().valid_up_to()
        )
    })
}

/// The files next to a manifest, reached through its folder's descriptor.
struct Near<'a>(&'a Dir);

impl Near<'_> {
    /// The folder holding `rel`'s last component (reached without following symlinks) and that
    /// component.
    fn parent<'r>(&self, rel: &'r str) -> Option<(Option<Dir>, &'r str)> {
        let mut parts: Vec<&str> = rel.split('/').collect();
        let last = parts.pop()?;
        let mut at: Option<Dir> = None;
        for p in parts {
            let next = at.as_ref().unwrap_or(self.0).open_dir(p).ok()??;
            at = Some(next);
        }
        Some((at, last))
    }

    fn kind(&self, rel: &str) -> Option<EntryKind> {
        let (at, last) = self.parent(rel)?;
        let e = at.as_ref().unwrap_or(self.0).entry(last).ok()??;
        Some(e.kind)
    }
}

impl Surroundings for Near<'_> {
    fn text(&self, rel: &str) -> Result<Option<String>, String> {
        let Some((at, last)) = self.parent(rel) else {
            return Ok(None);
        };
        read_bounded(
            at.as_ref().unwrap_or(self.0),
            OsStr::new(last),
            MAX_README_BYTES,
        )
    }

    fn is_file(&self, rel: &str) -> bool {
        self.kind(rel) == Some(EntryKind::File)
    }

    fn is_dir(&self, rel: &str) -> bool {
        self.kind(rel) == Some(EntryKind::Dir)
    }
}
