//! Editing one depot's `artifacts/Overrides.toml` in place: a Julia-compatible
//! `<git-tree-sha1> = "<absolute path>"` line, with the artifact's name as a trailing comment,
//! added, replaced or removed while every other line (Julia's `[<uuid>]` tables included) stays
//! as it was.
//!
//! ```toml
//! 0123456789abcdef0123456789abcdef01234567 = "/scratch/shared/era5" # era5
//! ```
//!
//! [`set_section`] rewrites the lines a program manages (`clima-artifacts mirror`) as one block
//! between its own comment markers, leaving every line outside the block as it was:
//!
//! ```toml
//! # BEGIN clima-artifacts mirror cluster-a
//! # ...
//! 0123456789abcdef0123456789abcdef01234567 = "/scratch/shared/era5" # era5
//! # END clima-artifacts mirror cluster-a
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clima_artifact_manifest::layout;
use clima_artifact_runtime::depot::LockedFile;
use clima_artifact_runtime::progress::Reporting;
use toml_edit::{DocumentMut, Item, Value};

use crate::error::{Error, Result};

/// Edits `<depot>/artifacts/Overrides.toml` as every writer of it does (`override set`,
/// `override unset`, `mirror`): under the depot's overrides lock
/// (`artifacts/.locks/Overrides.toml.lock`, waited for at most `timeout`), so that no two
/// writers lose each other's edit; the file read by the one rule of every reader
/// ([`clima_artifact_manifest::overrides::read_overrides_text`]: no symlink of another user's
/// followed, on the way or at the file, never blocking on a fifo, regular files only, at most
/// 64 MiB); `edit` given its text (empty when there is none) returns the new text (`None`: no
/// change) and a value for the caller; the new text replaces the file atomically in the folder
/// it was read from. Returns the file's path and `edit`'s value.
///
/// The depot must have passed the depot-opening rule (`first_writable`), which creates its
/// `artifacts` folder.
pub fn edit_depot_file<T>(
    depot: &Path,
    timeout: Duration,
    reporting: &Reporting,
    edit: impl FnOnce(&str, &Path) -> Result<(Option<String>, T)>,
) -> Result<(PathBuf, T)> {
    let file = layout::overrides_file(depot);
    let _lock = LockedFile::acquire(
        &layout::overrides_lock_file(depot),
        &format!("`{}`", file.display()),
        timeout.max(Duration::from_secs(1)),
        reporting,
    )
    .map_err(|e| Error::failed(e.to_string()))?;
    let unreadable = |e: clima_artifact_manifest::ManifestError| {
        Error::failed(format!("{e}; Overrides.toml was not changed"))
    };
    let cannot = |why: String| {
        Error::failed(format!(
            "cannot reach `{}`: {}; Overrides.toml was not changed",
            file.display(),
            clima_artifact_fs::printable(&why)
        ))
    };
    let reached = clima_artifact_fs::reach(&file)
        .map_err(|e| cannot(e.to_string()))?
        .ok_or_else(|| cannot("its folder does not exist".to_owned()))?;
    let text = clima_artifact_manifest::overrides::read_reached(&reached, &file)
        .map_err(unreadable)?
        .unwrap_or_default();
    let (new, value) = edit(&text, &file)?;
    if let Some(new) = new.filter(|n| *n != text) {
        reached.write_atomically(new.as_bytes()).map_err(|e| {
            Error::failed(clima_artifact_fs::printable(&e.to_string()).into_owned())
        })?;
    }
    Ok((file, value))
}

fn parse(text: &str, path: &Path) -> Result<DocumentMut> {
    text.parse().map_err(|e: toml_edit::TomlError| {
        Error::input(format!(
            "`{}` is not valid TOML; fix or remove it before changing overrides: {}",
            path.display(),
            e.to_string().trim_end()
        ))
    })
}

/// Sets `hash = "target"  # name` (replacing any existing line for `hash`) and returns the new
/// text. `path` is used in messages.
pub fn set_override(
    text: &str,
    path: &Path,
    hash: &str,
    target: &str,
    name: Option<&str>,
) -> Result<String> {
    let mut doc = parse(text, path)?;
    let suffix = match name {
        Some(n) => format!(" # {n}"),
        None => String::new(),
    };
    let value = Value::from(target).decorated(" ", suffix);
    // Keys may be written in upper case by hand; replace whichever spelling is there.
    let existing: Option<String> = doc
        .as_table()
        .iter()
        .map(|(k, _)| k.to_string())
        .find(|k| k.eq_ignore_ascii_case(hash));
    match existing {
        Some(k) => {
            doc[k.as_str()] = Item::Value(value);
        }
        None => {
            let prefix = take_file_header(&mut doc);
            let key = toml_edit::Key::new(hash).with_leaf_decor(toml_edit::Decor::new(prefix, " "));
            doc.insert_formatted(&key, Item::Value(value));
        }
    }
    Ok(doc.to_string())
}

/// toml_edit attaches a file's leading comments to whatever follows them. When a new top-level
/// line is added to a file whose first item is a table (Julia's `[<uuid>]`), the comment block
/// that ends with a blank line is the file's header: move it above the new line, so it stays on
/// top; comments directly above the table stay with the table.
fn take_file_header(doc: &mut DocumentMut) -> String {
    if doc.as_table().iter().any(|(_, item)| item.is_value()) {
        return String::new();
    }
    let first = doc
        .as_table_mut()
        .iter_mut()
        .filter_map(|(_, item)| item.as_table_mut())
        .min_by_key(|t| t.position().unwrap_or(isize::MAX));
    let Some(table) = first else {
        return String::new();
    };
    let prefix = table
        .decor()
        .prefix()
        .and_then(|p| p.as_str())
        .unwrap_or("")
        .to_string();
    match prefix.rfind("\n\n") {
        Some(i) => {
            table
                .decor_mut()
                .set_prefix(format!("\n{}", &prefix[i + 2..]));
            prefix[..i + 2].to_string()
        }
        None => String::new(),
    }
}

/// Removes the line for `hash`; `None` if the file has none.
pub fn unset_override(text: &str, path: &Path, hash: &str) -> Result<Option<String>> {
    let mut doc = parse(text, path)?;
    let existing: Option<String> = doc
        .as_table()
        .iter()
        .filter(|(_, v)| v.is_value())
        .map(|(k, _)| k.to_string())
        .find(|k| k.eq_ignore_ascii_case(hash));
    match existing {
        Some(k) => {
            doc.remove(&k);
            Ok(Some(doc.to_string()))
        }
        None => Ok(None),
    }
}

/// Names written as trailing `# name` comments, by lower-case hash. Unparsable files give none.
pub fn comment_names(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Ok(doc) = text.parse::<DocumentMut>() else {
        return out;
    };
    for (k, item) in doc.as_table().iter() {
        let Some(v) = item.as_value() else { continue };
        let Some(suffix) = v.decor().suffix().and_then(|s| s.as_str()) else {
            continue;
        };
        if let Some(comment) = suffix.trim().strip_prefix('#') {
            let name = comment.trim();
            if !name.is_empty() {
                out.insert(k.to_ascii_lowercase(), name.to_string());
            }
        }
    }
    out
}

/// The first line of the block [`set_section`] manages for `id`.
pub fn section_begin(id: &str) -> String {
    format!("# BEGIN clima-artifacts mirror {id}")
}

/// The last line of the block [`set_section`] manages for `id`.
pub fn section_end(id: &str) -> String {
    format!("# END clima-artifacts mirror {id}")
}

/// Whether `id` can name a section: 1 to 64 ASCII letters, digits, `.`, `_` or `-`.
pub fn valid_section_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// One line of a managed section: `hash = "target" # name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SectionLine {
    /// The overridden git-tree-sha1 (lower-case hex).
    pub hash: String,
    /// The absolute folder it points to.
    pub target: String,
    /// The artifact's name(s), written as the trailing comment.
    pub name: Option<String>,
}

/// A line [`set_section`] left out because the hash is already set outside the section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SectionConflict {
    /// The hash asked for.
    pub hash: String,
    /// Where it is set instead: `by hand` (outside every managed section) or `by the section
    /// of mirror <id>`.
    pub set_by: String,
    /// Its 1-based line in the file.
    pub line: usize,
}

/// What [`set_section`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SectionEdit {
    /// The new text of the file (the old one when nothing changed).
    pub text: String,
    /// Lines written into the section.
    pub written: Vec<SectionLine>,
    /// Lines left out: their hash is set elsewhere in the file (a second key would make the
    /// file invalid TOML, and the other line is not ours to change).
    pub conflicts: Vec<SectionConflict>,
}

/// Replaces the block of `id` (from [`section_begin`] to [`section_end`]) with `lines`, or
/// adds it above the file's first `[table]` (top-level keys must come before any table), or
/// removes it when `lines` is empty. Every line outside the block is kept byte for byte; a
/// hash already set outside the block (by hand or by another program's block) is left out and
/// reported as a conflict. `path` is used in messages.
///
/// Refused (the file is left alone): text that is not TOML, a block with no end marker or
/// given twice, and a block that someone moved below a table (its keys would belong to it).
pub fn set_section(
    text: &str,
    path: &Path,
    id: &str,
    intro: &str,
    lines: &[SectionLine],
) -> Result<SectionEdit> {
    let (begin, end) = (section_begin(id), section_end(id));
    let all: Vec<&str> = text.split_inclusive('\n').collect();
    let is = |l: &str, marker: &str| l.trim_end() == marker;
    let begins: Vec<usize> = (0..all.len()).filter(|&i| is(all[i], &begin)).collect();
    let block = match begins.as_slice() {
        [] => None,
        [b] => match (b + 1..all.len()).find(|&i| is(all[i], &end)) {
            Some(e) => Some((*b, e)),
            None => {
                return Err(Error::input(format!(
                    "`{}` line {}: `{begin}` has no `{end}` line after it; add it (or remove \
                     the section) by hand",
                    path.display(),
                    b + 1
                )));
            }
        },
        _ => {
            return Err(Error::input(format!(
                "`{}` has `{begin}` more than once; keep one such section and remove the others \
                 by hand",
                path.display()
            )));
        }
    };
    let outside: String = all
        .iter()
        .enumerate()
        .filter(|(i, _)| block.is_none_or(|(b, e)| *i < b || *i > e))
        .map(|(_, l)| *l)
        .collect();
    let doc = parse(&outside, path)?;
    let mut written = Vec::new();
    let mut conflicts = Vec::new();
    for line in lines {
        let taken = doc
            .as_table()
            .iter()
            .any(|(k, v)| v.is_value() && k.eq_ignore_ascii_case(&line.hash));
        if taken {
            conflicts.push(where_set(&all, block, &line.hash));
        } else if !written.iter().any(|w: &SectionLine| w.hash == line.hash) {
            written.push(line.clone());
        }
    }
    let section = section_text(&begin, &end, intro, &written);
    let (at, upto) = match block {
        Some((b, e)) => (b, e + 1),
        None => {
            let at = first_table_block(&all);
            (at, at)
        }
    };
    let mut out = String::with_capacity(text.len() + section.len() + 1);
    for l in &all[..at] {
        out.push_str(l);
    }
    if !section.is_empty() && !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&section);
    // Added above a table: a blank line keeps the table's own comments apart from the block.
    if block.is_none() && !section.is_empty() && at < all.len() {
        out.push('\n');
    }
    for l in &all[upto..] {
        out.push_str(l);
    }
    let check = parse(&out, path)?;
    for l in &written {
        if check.get(&l.hash).and_then(|v| v.as_str()) != Some(l.target.as_str()) {
            return Err(Error::input(format!(
                "`{}`: the section `{begin}` is not at the top level of the file (moved below \
                 a `[table]`?); move it above the first table by hand",
                path.display()
            )));
        }
    }
    Ok(SectionEdit {
        text: out,
        written,
        conflicts,
    })
}

/// The block's text: the `begin` marker, `intro` as comment lines, one `HASH = "TARGET"` line
/// per `written` line (its name as a comment), the `end` marker; empty when nothing is written.
fn section_text(begin: &str, end: &str, intro: &str, written: &[SectionLine]) -> String {
    let mut section = String::new();
    if !written.is_empty() {
        section.push_str(begin);
        section.push('\n');
        for l in intro.lines() {
            section.push_str(&format!("# {}\n", one_line(l)));
        }
        for l in written {
            section.push_str(&format!(
                "{} = {}",
                l.hash,
                clima_artifact_manifest::toml_string(&l.target)
            ));
            if let Some(n) = &l.name {
                section.push_str(&format!(" # {}", one_line(n)));
            }
            section.push('\n');
        }
        section.push_str(end);
        section.push('\n');
    }
    section
}

/// Text from a name or an intro, on one line (control characters as `?`).
fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// The index of the line where a block goes when the file has none: above the comment lines
/// directly over the first `[table]` header, or at the end.
fn first_table_block(lines: &[&str]) -> usize {
    let Some(header) = lines.iter().position(|l| l.trim_start().starts_with('[')) else {
        return lines.len();
    };
    let mut at = header;
    while at > 0 && lines[at - 1].trim_start().starts_with('#') {
        at -= 1;
    }
    at
}

/// Where `hash` is set outside the block `skip`: its line, and whose section it is in.
fn where_set(lines: &[&str], skip: Option<(usize, usize)>, hash: &str) -> SectionConflict {
    let mut owner: Option<String> = None;
    for (i, l) in lines.iter().enumerate() {
        if skip.is_some_and(|(b, e)| i >= b && i <= e) {
            continue;
        }
        let t = l.trim();
        if let Some(id) = t.strip_prefix("# BEGIN clima-artifacts mirror ") {
            owner = Some(id.to_owned());
            continue;
        }
        if t.starts_with("# END clima-artifacts mirror ") {
            owner = None;
            continue;
        }
        let key = t.trim_start_matches(['"', '\'']);
        if key.len() >= 40 && key[..40].eq_ignore_ascii_case(hash) {
            return SectionConflict {
                hash: hash.to_owned(),
                set_by: owner.map_or("by hand".to_owned(), |id| {
                    format!("by the section of mirror {}", one_line(&id))
                }),
                line: i + 1,
            };
        }
    }
    SectionConflict {
        hash: hash.to_owned(),
        set_by: "by hand".to_owned(),
        line: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(hash: &str, target: &str, name: &str) -> SectionLine {
        SectionLine {
            hash: hash.to_owned(),
            target: target.to_owned(),
            name: Some(name.to_owned()),
        }
    }

    #[test]
    fn a_section_is_added_above_tables_replaced_in_place_and_removed() {
        let p = Path::new("Overrides.toml");
        let a = "aa".repeat(20);
        let b = "bb".repeat(20);
        let hand = format!(
            "# hand header\n{b} = \"/by/hand\"\n\n# julia\n[d6f4376e-aef5-505a-96c1-9c027394607a]\nlibfoo = \"/opt\"\n"
        );
        let e = set_section(&hand, p, "x", "intro", &[line(&a, "/s/a", "era5")]).unwrap();
        assert!(e.conflicts.is_empty());
        let doc: DocumentMut = e.text.parse().unwrap();
        assert_eq!(doc[a.as_str()].as_str(), Some("/s/a"));
        assert_eq!(doc[b.as_str()].as_str(), Some("/by/hand"));
        assert!(e.text.contains("# julia\n[d6f4376e"), "{}", e.text);
        assert!(e.text.starts_with("# hand header\n"), "{}", e.text);
        // A second program's block and a hand edit next to ours survive our rewrite.
        let other = set_section(&e.text, p, "y", "", &[line(&"cc".repeat(20), "/c", "c")])
            .unwrap()
            .text;
        let edited = other.replace("# hand header\n", "# hand header, edited\n");
        let again = set_section(&edited, p, "x", "intro", &[line(&a, "/s/a2", "era5")]).unwrap();
        assert_eq!(
            again.text.replace("/s/a2", "/s/a"),
            edited,
            "only our line changed"
        );
        // A hash set by hand or by the other block is not ours to set: left out, reported.
        let c = set_section(&edited, p, "x", "", &[line(&b, "/mine", "b")]).unwrap();
        assert_eq!(c.conflicts.len(), 1);
        assert_eq!(c.conflicts[0].set_by, "by hand");
        let c = set_section(&edited, p, "x", "", &[line(&"cc".repeat(20), "/mine", "c")]).unwrap();
        assert_eq!(c.conflicts[0].set_by, "by the section of mirror y");
        // No lines: the block goes, the rest stays.
        let gone = set_section(&edited, p, "x", "", &[]).unwrap();
        assert!(!gone.text.contains("mirror x"));
        assert!(gone.text.contains("mirror y") && gone.text.contains("/by/hand"));
    }

    #[test]
    fn broken_sections_are_refused() {
        let p = Path::new("Overrides.toml");
        let open = format!("{}\n", section_begin("x"));
        assert!(set_section(&open, p, "x", "", &[]).is_err());
        let twice = format!(
            "{b}\n{e}\n{b}\n{e}\n",
            b = section_begin("x"),
            e = section_end("x")
        );
        assert!(set_section(&twice, p, "x", "", &[]).is_err());
        let moved = format!(
            "[d6f4376e-aef5-505a-96c1-9c027394607a]\n{}\n{}\n",
            section_begin("x"),
            section_end("x")
        );
        let l = line(&"aa".repeat(20), "/a", "a");
        assert!(set_section(&moved, p, "x", "", &[l]).is_err());
        assert!(valid_section_id("cluster-a.1") && !valid_section_id("a b"));
        assert!(!valid_section_id(""));
    }

    const H: &str = "0123456789abcdef0123456789abcdef01234567";

    #[test]
    fn set_replace_unset_keep_the_rest() {
        let original = "# cluster overrides\n\n[d6f4376e-aef5-505a-96c1-9c027394607a]\nlibfoo = \"/opt/libfoo\"\n";
        let p = Path::new("Overrides.toml");
        let text = set_override(original, p, H, "/scratch/era5", Some("era5")).unwrap();
        assert!(
            text.starts_with(&format!("# cluster overrides\n\n{H} = ")),
            "{text}"
        );
        assert!(
            text.contains(&format!("{H} = \"/scratch/era5\" # era5\n")),
            "{text}"
        );
        assert!(text.contains("libfoo = \"/opt/libfoo\""));
        // The hash line must stay at top level (before the uuid table) to mean what it says.
        let doc: DocumentMut = text.parse().unwrap();
        assert_eq!(doc[H].as_str(), Some("/scratch/era5"));
        assert_eq!(
            comment_names(&text).get(H).map(String::as_str),
            Some("era5")
        );

        let text = set_override(&text, p, &H.to_uppercase(), "/other", Some("era5")).unwrap();
        assert_eq!(text.matches("/other").count(), 1);
        assert!(!text.contains("/scratch/era5"));

        let text = unset_override(&text, p, H).unwrap().unwrap();
        assert!(!text.contains(H));
        assert!(text.contains("libfoo"));
        assert_eq!(unset_override(&text, p, H).unwrap(), None);
    }
}
