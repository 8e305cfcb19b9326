//! One depot's `artifacts/Overrides.toml` (Julia semantics).
//!
//! ```toml
//! 0123...cdef = "/scratch/shared/era5"          # hash -> absolute path
//! 89ab...4567 = "0123...cdef"                   # hash -> another hash (chains are followed)
//! fedc...ba98 = ""                              # removes an override set by a later depot
//!
//! [d6f4376e-aef5-505a-96c1-9c027394607a]        # Julia's UUID tables: kept, not interpreted
//! libfoo = "/opt/libfoo"
//! ```
//!
//! Resolution across depots (earlier depots win) lives in the depot crate
//! (`clima_artifact_depot::Overrides`); this module parses one file.

use std::path::{Path, PathBuf};

use toml::de::DeValue;

use crate::location::{Locator, a_type, entries_in_file_order, quote};
use crate::{GitTreeSha1, ManifestError, ManifestErrorKind};

/// What a hash is overridden with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OverrideTarget {
    /// An absolute path to use as the artifact's content.
    Path(PathBuf),
    /// Another artifact hash to use instead.
    Hash(GitTreeSha1),
    /// `""`: cancel an override from a later depot.
    Remove,
}

/// One `hash = value` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverrideEntry {
    /// The overridden artifact.
    pub hash: GitTreeSha1,
    /// What it is overridden with.
    pub target: OverrideTarget,
    /// 1-based line in the file.
    pub line: u32,
}

/// A parsed `Overrides.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OverridesFile {
    /// The file it came from.
    pub path: PathBuf,
    /// Hash-keyed entries in file order.
    pub entries: Vec<OverrideEntry>,
    /// Names of Julia `[<uuid>]` tables that were present and left alone.
    pub uuid_tables: Vec<String>,
}

impl OverridesFile {
    /// Parses overrides text; errors name the file and line.
    ///
    /// Returns the first error; [`OverridesFile::parse_all`] returns all of them.
    pub fn parse(text: &str, path: &Path) -> Result<OverridesFile, ManifestError> {
        Self::parse_all(text, path).map_err(crate::error::first)
    }

    /// Parses overrides text, collecting every error (never an empty list), in file order.
    pub fn parse_all(text: &str, path: &Path) -> Result<OverridesFile, Vec<ManifestError>> {
        let loc = Locator::new(text, path);
        let doc = loc.parse_document(text)?;
        let mut errors = Vec::new();
        let mut file = OverridesFile {
            path: path.to_path_buf(),
            ..OverridesFile::default()
        };
        // Lines of the hashes seen, to report duplicates that differ only in case.
        let mut seen: Vec<(GitTreeSha1, u32)> = Vec::new();
        for (key, value) in entries_in_file_order(doc.get_ref()) {
            let k: &str = key.get_ref();
            let key_at = key.span().start;
            let line = loc.index.line(key_at);
            if let Ok(hash) = GitTreeSha1::from_hex(k) {
                if let Some((_, first)) = seen.iter().find(|(h, _)| *h == hash) {
                    errors.push(loc.invalid(
                        key_at,
                        None,
                        format!(
                            "`{hash}` is overridden twice (also on line {first}); keep one of the lines"
                        ),
                    ));
                    continue;
                }
                seen.push((hash, line));
                match parse_target(value.get_ref()) {
                    Ok(target) => file.entries.push(OverrideEntry { hash, target, line }),
                    Err(why) => errors.push(loc.invalid(
                        value.span().start,
                        None,
                        format!(
                            "override of `{hash}` {why}; the value must be an absolute path \
                             (`{hash} = \"/abs/path\"`), another 40-hex git-tree-sha1, or \"\" to \
                             cancel an override from a later depot"
                        ),
                    )),
                }
            } else if is_uuid(k) && matches!(value.get_ref(), DeValue::Table(_)) {
                // Julia's per-package overrides: accepted so a shared Julia depot loads, not used.
                file.uuid_tables.push(k.to_owned());
            } else {
                errors.push(loc.invalid(key_at, None, bad_key_message(k, value.get_ref())));
            }
        }
        if errors.is_empty() {
            Ok(file)
        } else {
            errors.sort_by_key(|e| (e.line, e.column));
            Err(errors)
        }
    }

    /// Reads and parses an overrides file; a missing file is an empty set.
    pub fn load(path: &Path) -> Result<OverridesFile, ManifestError> {
        Self::load_all(path).map_err(crate::error::first)
    }

    /// Reads and parses an overrides file, collecting every error; a missing file is an empty set.
    /// The file is read by [`read_overrides_text`] (no other user's symlink followed, regular
    /// files only, bounded); anything else at `path` (a folder, a fifo, a dangling symlink, no
    /// permission) is an error naming it, never silently an empty set.
    pub fn load_all(path: &Path) -> Result<OverridesFile, Vec<ManifestError>> {
        match read_overrides_text(path).map_err(|e| vec![e])? {
            Some(text) => Self::parse_all(&text, path),
            None => Ok(OverridesFile {
                path: path.to_path_buf(),
                ..OverridesFile::default()
            }),
        }
    }

    /// The entry for `hash`, if any.    /// The entry for `hash`, if any.
    pub fn get(&self, hash: &GitTreeSha1) -> Option<&OverrideEntry> {
        self.entries.iter().find(|e| &e.hash == hash)
    }
}

/// The text of the overrides file at `path` (`None` when there is none), read as every reader
/// and writer of `Overrides.toml` reads it: reached by [`clima_artifact_fs::reach`] (a symlink
/// that another user owns, on the way or at the file, is refused by name and never followed;
/// this user's and root's are), opened without blocking, a regular file of at most
/// [`MAX_TOML_BYTES`](crate::manifest::MAX_TOML_BYTES), UTF-8. Errors name the file.
pub fn read_overrides_text(path: &Path) -> Result<Option<String>, ManifestError> {
    match clima_artifact_fs::reach(path).map_err(|e| io_error(path, &e))? {
        Some(reached) => read_reached(&reached, path),
        None => Ok(None),
    }
}

/// [`read_overrides_text`] of a file already reached (a writer keeps the [`Reached`] folder to
/// replace the file in); `shown` is the path the caller named, for messages.
///
/// [`Reached`]: clima_artifact_fs::Reached
pub fn read_reached(
    reached: &clima_artifact_fs::Reached,
    shown: &Path,
) -> Result<Option<String>, ManifestError> {
    reached
        .read_text(crate::manifest::MAX_TOML_BYTES)
        .map_err(|e| io_error(shown, &e))
}

/// An I/O error about the overrides file `path`, said as the readers of overrides files have
/// always said it (a folder is "a directory").
fn io_error(path: &Path, e: &std::io::Error) -> ManifestError {
    let foreign = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<clima_artifact_fs::ForeignLink>());
    let message = match (clima_artifact_fs::Unexpected::of(e), foreign) {
        (Some(u), _) if u.found == clima_artifact_fs::EntryKind::Dir => {
            "is a directory; Overrides.toml must be a file".to_owned()
        }
        (_, Some(link)) => format!(
            "{}; it was not followed, and nothing was written or removed there. Remove the link \
             (or have its owner remove it), or take its depot out of {} ({} for a Julia depot)",
            clima_artifact_fs::printable(&link.to_string()),
            clima_artifact_vars::DEPOT_PATH,
            clima_artifact_vars::JULIA_DEPOT_PATH
        ),
        _ => clima_artifact_fs::printable(&e.to_string()).into_owned(),
    };
    ManifestError {
        path: path.to_path_buf(),
        line: None,
        column: None,
        artifact: None,
        kind: ManifestErrorKind::Io(message),
    }
}

/// The target of one `hash = value` line, or why the value is unusable.
fn parse_target(value: &DeValue<'_>) -> Result<OverrideTarget, String> {
    let DeValue::String(s) = value else {
        return Err(format!("is {}, not a string", a_type(value)));
    };
    if s.is_empty() {
        return Ok(OverrideTarget::Remove);
    }
    if let Ok(hash) = GitTreeSha1::from_hex(s) {
        return Ok(OverrideTarget::Hash(hash));
    }
    if s.contains('\0') {
        return Err("contains a NUL byte".to_owned());
    }
    let path = Path::new(s.as_ref());
    if path.is_absolute() {
        return Ok(OverrideTarget::Path(path.to_path_buf()));
    }
    if s.starts_with('~') {
        return Err(format!(
            "is {}, which starts with `~`; write the home directory out in full",
            quote(s)
        ));
    }
    if s.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(format!(
            "is {}, which is neither a path nor a full hash ({} hex digits, a hash has 40)",
            quote(s),
            s.len()
        ));
    }
    Err(format!(
        "is the relative path {}; relative paths are not allowed (they would depend on the \
         working directory)",
        quote(s)
    ))
}

/// The message for a top-level key that is neither a hash nor a UUID table.
fn bad_key_message(key: &str, value: &DeValue<'_>) -> String {
    if is_uuid(key) {
        return format!(
            "`{key}` looks like a package UUID but is {}; Julia's package overrides are tables: \
             `[{key}]` followed by `name = \"/abs/path\"` lines",
            a_type(value)
        );
    }
    if let Err(e) = GitTreeSha1::from_hex(key)
        && key.chars().all(|c| c.is_ascii_hexdigit())
    {
        return format!(
            "`{key}` is not a git-tree-sha1 ({e}); each key must be the full 40-hex hash of the \
             artifact to override"
        );
    }
    format!(
        "`{key}` is not a 40-hex git-tree-sha1 (nor a package UUID table); write \
         `<git-tree-sha1> = \"/abs/path\"`, taking the hash from the artifact's entry in \
         Artifacts.toml"
    )
}

/// `8-4-4-4-12` hex digits.
fn is_uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.chars().all(|c| c.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const H1: &str = "b373f1887cff55850cbf76ec005f7d93726ae42e";
    const H2: &str = "0000b8078527ddfae5a25d99c3e163cbd9b1e574";
    const H3: &str = "d4d3ca8ed0a55910017bd83cd9a15895b4240a42";

    fn parse(text: &str) -> Result<OverridesFile, ManifestError> {
        OverridesFile::parse(text, Path::new("depot/artifacts/Overrides.toml"))
    }

    fn hash(h: &str) -> GitTreeSha1 {
        GitTreeSha1::from_hex(h).unwrap()
    }

    #[test]
    fn parses_all_forms() {
        let text = format!(
            "# comment\n{H1} = \"/scratch/era5\"\n{} = \"{H1}\"\n\n{H3} = \"\"\n\n\
             [d6f4376e-aef5-505a-96c1-9c027394607a]\nlibfoo = \"/opt/libfoo\"\nbar = \"{H1}\"\n",
            H2.to_uppercase()
        );
        let f = parse(&text).unwrap();
        assert_eq!(f.path, Path::new("depot/artifacts/Overrides.toml"));
        assert_eq!(
            f.entries,
            [
                OverrideEntry {
                    hash: hash(H1),
                    target: OverrideTarget::Path("/scratch/era5".into()),
                    line: 2
                },
                OverrideEntry {
                    hash: hash(H2),
                    target: OverrideTarget::Hash(hash(H1)),
                    line: 3
                },
                OverrideEntry {
                    hash: hash(H3),
                    target: OverrideTarget::Remove,
                    line: 5
                },
            ]
        );
        assert_eq!(f.uuid_tables, ["d6f4376e-aef5-505a-96c1-9c027394607a"]);
        assert_eq!(f.get(&hash(H2)).unwrap().line, 3);
        assert!(f.get(&GitTreeSha1([0; 20])).is_none());
        assert!(parse("").unwrap().entries.is_empty());
    }

    fn err(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    #[test]
    fn rejects_bad_values() {
        assert_eq!(
            err(&format!("{H1} = \"data/era5\"\n")),
            format!(
                "`depot/artifacts/Overrides.toml`:1:44: override of `{H1}` is the relative path \
                 \"data/era5\"; relative paths are not allowed (they would depend on the working \
                 directory); the value must be an absolute path (`{H1} = \"/abs/path\"`), another \
                 40-hex git-tree-sha1, or \"\" to cancel an override from a later depot"
            )
        );
        assert!(
            err(&format!("{H1} = \"~/era5\"\n"))
                .contains("starts with `~`; write the home directory out in full")
        );
        assert!(
            err(&format!("{H1} = \"abc123\"\n"))
                .contains("neither a path nor a full hash (6 hex digits, a hash has 40)")
        );
        assert!(err(&format!("{H1} = 5\n")).contains(":1:44: override of `b373f1887cff55850cbf76ec005f7d93726ae42e` is an integer, not a string;"));
        assert!(err(&format!("{H1} = \"/a\\u0000b\"\n")).contains("NUL"));
    }

    #[test]
    fn rejects_bad_keys() {
        assert_eq!(
            err("era5 = \"/scratch/era5\"\n"),
            "`depot/artifacts/Overrides.toml`:1:1: `era5` is not a 40-hex git-tree-sha1 (nor a \
             package UUID table); write `<git-tree-sha1> = \"/abs/path\"`, taking the hash from the \
             artifact's entry in Artifacts.toml"
        );
        assert!(err("abc123 = \"/x\"\n").contains("`abc123` is not a git-tree-sha1 (expected 40 hex digits, found 6 characters); each key must be the full 40-hex hash"));
        assert!(
            err("d6f4376e-aef5-505a-96c1-9c027394607a = \"/x\"\n")
                .contains("looks like a package UUID but is a string")
        );
        assert!(err("[era5]\nx = 1\n").contains("`era5` is not a 40-hex git-tree-sha1"));
        let dup = err(&format!("{H1} = \"/a\"\n{} = \"/b\"\n", H1.to_uppercase()));
        assert!(dup.contains(":2:1: `b373f1887cff55850cbf76ec005f7d93726ae42e` is overridden twice (also on line 1)"), "{dup}");
        assert!(err("x = \n").contains(":1:5: invalid TOML"));
    }

    #[test]
    fn collects_all_errors_in_order() {
        let text = format!("zzz = \"/a\"\n{H1} = \"rel\"\naaa = \"/b\"\n");
        let errors = OverridesFile::parse_all(&text, Path::new("O.toml")).unwrap_err();
        let lines: Vec<_> = errors.iter().map(|e| e.line.unwrap()).collect();
        assert_eq!(lines, [1, 2, 3]);
    }

    #[test]
    fn loads_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("Overrides.toml");
        let empty = OverridesFile::load(&path).unwrap();
        assert!(empty.entries.is_empty());
        assert_eq!(empty.path, path);
        std::fs::write(&path, format!("{H1} = \"/x\"\n")).unwrap();
        assert_eq!(OverridesFile::load(&path).unwrap().entries.len(), 1);
        let e = OverridesFile::load(dir.path()).unwrap_err();
        assert!(e.to_string().contains("is a directory"), "{e}");
    }
}
