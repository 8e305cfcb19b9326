//! Adding or updating one `[name]` entry of an `Artifacts.toml` without disturbing the rest of the
//! file: comments, key order, blank lines and other entries stay as they were (`toml_edit`).
//!
//! New entries are written in the layout Julia's Pkg uses:
//!
//! ```toml
//! [name]
//! git-tree-sha1 = "<40 hex>"
//! lazy = true
//! license = "CC-BY-4.0"
//!
//!     [[name.download]]
//!     sha256 = "<64 hex>"
//!     url = "https://..."
//! ```
//!
//! [`annotate`] sets or removes provenance keys (`license`, `citation`, `doi`, ...) of existing
//! entries without touching their hashes or downloads: what a maintainer does after a census,
//! without the data.
//!
//! Download rules when the entry exists: if the tree hash changed, every old download is removed
//! (its tarball holds the old content); if it is unchanged, old downloads stay valid and are kept,
//! except one with the same URL, which the new download replaces. The new download comes first,
//! or last with [`EntryUpdate::download_last`].

use std::path::Path;

use clima_artifact_manifest::{metadata, provenance};
use toml_edit::{ArrayOfTables, DocumentMut, Item, Key, Table, Value};

use crate::error::{Error, Result};

/// A download to record.
#[derive(Debug, Clone)]
pub struct NewDownload {
    /// Where the tarball will be.
    pub url: String,
    /// Its sha256, lower-case hex.
    pub sha256: String,
    /// Its size in bytes (written as `size`, so a model can refuse or plan a large download
    /// before any request).
    pub size: u64,
    /// The SHA-256 of its index, lower-case hex, for a seekable tarball (written as
    /// `index-sha256`).
    pub index_sha256: Option<String>,
}

/// What to write into the entry.
#[derive(Debug, Clone)]
pub struct EntryUpdate {
    /// Artifact name.
    pub name: String,
    /// New `git-tree-sha1`, lower-case hex.
    pub tree_hash: String,
    /// New `git-tree-sha256`, lower-case hex, if computed. `None` leaves the key alone when the
    /// content is the same and removes it (stale) when the content changed.
    pub tree_hash_sha256: Option<String>,
    /// Set `lazy = true` (an existing `lazy` key is otherwise left alone).
    pub lazy: bool,
    /// Metadata keys to set (others already present are kept).
    pub metadata: Vec<(&'static str, String)>,
    /// A download to add, if any.
    pub download: Option<NewDownload>,
    /// Remove every download (`create --external`).
    pub remove_downloads: bool,
    /// With a new download: drop the entry's other downloads (re-running `create` with a
    /// corrected URL replaces the old one; `publish` adds a mirror and keeps them).
    pub replace_downloads: bool,
    /// With a new download kept alongside the old ones: put it after them (`publish
    /// --archive` adds a mirror after the existing ones) instead of first.
    pub download_last: bool,
}

/// What happened to the entry.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "action")]
pub enum EditOutcome {
    /// A new entry was appended.
    Added,
    /// An existing entry was updated.
    Updated {
        /// Its `git-tree-sha1` before, if it had one.
        previous_hash: Option<String>,
        /// Downloads dropped because they no longer fit (or `--external`).
        removed_downloads: usize,
    },
}

/// The key of an entry's git tree SHA-256.
const GIT_TREE_SHA256: &str = "git-tree-sha256";

/// Whether the `[name]` entry of manifest text carries a `git-tree-sha256` (then `create`
/// computes the new one too, so the entry never keeps a stale one).
pub fn entry_has_sha256(text: &str, name: &str) -> bool {
    text.parse::<DocumentMut>().is_ok_and(|doc| {
        doc.get(name)
            .and_then(Item::as_table)
            .is_some_and(|t| t.contains_key(GIT_TREE_SHA256))
    })
}

fn set_value(table: &mut Table, key: &str, new: Value) {
    match table.get_mut(key) {
        Some(Item::Value(v)) => {
            let decor = v.decor().clone();
            *v = new;
            *v.decor_mut() = decor;
        }
        _ => {
            table.insert(key, Item::Value(new));
        }
    }
}

fn indented_key(name: &str) -> Key {
    Key::new(name).with_leaf_decor(toml_edit::Decor::new("    ", " "))
}

fn download_table(d: &NewDownload) -> Table {
    let mut t = Table::new();
    t.decor_mut().set_prefix("\n    ");
    if let Some(index) = &d.index_sha256 {
        t.insert_formatted(
            &indented_key(clima_artifact_manifest::manifest::INDEX_SHA256),
            toml_edit::value(index.as_str()),
        );
    }
    t.insert_formatted(&indented_key("sha256"), toml_edit::value(d.sha256.as_str()));
    t.insert_formatted(&indented_key("size"), toml_edit::value(d.size as i64));
    t.insert_formatted(&indented_key("url"), toml_edit::value(d.url.as_str()));
    t
}

/// Applies `update` to manifest text (`path` is for messages) and returns the new text.
pub fn upsert_entry(
    text: &str,
    path: &Path,
    update: &EntryUpdate,
) -> Result<(String, EditOutcome)> {
    let mut doc: DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
        Error::input(format!(
            "`{}` is not valid TOML, so `create` will not edit it: {}",
            path.display(),
            e.to_string().trim_end()
        ))
    })?;
    let name = update.name.as_str();
    let outcome = match doc.get_mut(name) {
        None => {
            let mut t = new_entry_table(update);
            // A file with only comments keeps them as the document's trailing text, which
            // would end up below the new table: move them above it instead.
            let trailing = doc.trailing().as_str().unwrap_or("").to_string();
            if doc.as_table().is_empty() && !trailing.trim().is_empty() {
                let mut head = trailing.trim_end().to_string();
                head.push_str("\n\n");
                t.decor_mut().set_prefix(head);
                doc.set_trailing("");
            } else if !text.trim().is_empty() {
                t.decor_mut().set_prefix("\n");
            }
            doc.insert(name, Item::Table(t));
            EditOutcome::Added
        }
        Some(Item::Table(t)) => {
            let previous_hash = t
                .get("git-tree-sha1")
                .and_then(|i| i.as_str())
                .map(str::to_ascii_lowercase);
            let same_content = previous_hash.as_deref() == Some(update.tree_hash.as_str());
            set_value(t, "git-tree-sha1", Value::from(update.tree_hash.as_str()));
            match &update.tree_hash_sha256 {
                Some(sha256) => set_value(t, GIT_TREE_SHA256, Value::from(sha256.as_str())),
                None if !same_content => {
                    t.remove(GIT_TREE_SHA256);
                }
                None => {}
            }
            if update.lazy {
                set_value(t, "lazy", Value::from(true));
            }
            for (k, v) in &update.metadata {
                set_value(t, k, Value::from(v.as_str()));
            }
            let (aot, removed) = merged_downloads(t, update, same_content, path)?;
            if aot.is_empty() {
                t.remove("download");
            } else {
                t.insert("download", Item::ArrayOfTables(aot));
            }
            EditOutcome::Updated {
                previous_hash,
                removed_downloads: removed,
            }
        }
        Some(Item::ArrayOfTables(_)) => {
            return Err(Error::input(format!(
                "`{}`: artifact `{name}` is platform-specific ([[{name}]]); `create` only writes \
                 single [{name}] entries: choose another name or edit that entry by hand",
                path.display()
            )));
        }
        Some(_) => {
            return Err(Error::input(format!(
                "`{}`: `{name}` is not a table; `create` only edits [{name}] tables: rename or \
                 remove that key first",
                path.display()
            )));
        }
    };
    Ok((doc.to_string(), outcome))
}

/// The table of a new entry: its hashes, `lazy`, the metadata keys, and the download if any.
fn new_entry_table(update: &EntryUpdate) -> Table {
    let mut t = Table::new();
    t.insert("git-tree-sha1", toml_edit::value(update.tree_hash.as_str()));
    if let Some(sha256) = &update.tree_hash_sha256 {
        t.insert(GIT_TREE_SHA256, toml_edit::value(sha256.as_str()));
    }
    if update.lazy {
        t.insert("lazy", toml_edit::value(true));
    }
    for (k, v) in &update.metadata {
        t.insert(k, toml_edit::value(v.as_str()));
    }
    if let Some(d) = &update.download {
        let mut aot = ArrayOfTables::new();
        aot.push(download_table(d));
        t.insert("download", Item::ArrayOfTables(aot));
    }
    t
}

/// The downloads an existing entry `t` has after `update` (the new one first, or last with
/// `download_last`), and how many of its own were removed: all when the content changed
/// (`same_content` false), was asked to, or the new one replaces them; else only one with the
/// new one's URL.
fn merged_downloads(
    t: &Table,
    update: &EntryUpdate,
    same_content: bool,
    path: &Path,
) -> Result<(ArrayOfTables, usize)> {
    let name = update.name.as_str();
    let mut removed = 0;
    let mut kept: Vec<Table> = Vec::new();
    match t.get("download") {
        None => {}
        Some(Item::ArrayOfTables(a)) => {
            for d in a.iter() {
                let same_url = update
                    .download
                    .as_ref()
                    .is_some_and(|n| d.get("url").and_then(|u| u.as_str()) == Some(n.url.as_str()));
                let replaced = update.replace_downloads && update.download.is_some();
                if same_content && !update.remove_downloads && !replaced && !same_url {
                    kept.push(d.clone());
                } else {
                    removed += 1;
                }
            }
        }
        Some(_) => {
            return Err(Error::input(format!(
                "`{}`: artifact `{name}` has a `download` key that is not an array of \
                 tables ([[{name}.download]]); fix it by hand first",
                path.display()
            )));
        }
    }
    let mut aot = ArrayOfTables::new();
    if let Some(d) = update.download.as_ref().filter(|_| !update.download_last) {
        aot.push(download_table(d));
    }
    for d in kept {
        aot.push(d);
    }
    if let Some(d) = update.download.as_ref().filter(|_| update.download_last) {
        aot.push(download_table(d));
    }
    Ok((aot, removed))
}

/// The keys [`annotate`] sets: the provenance keys ([`metadata::KEYS`]) and `recipe`.
pub const ANNOTATE_KEYS: [&str; 10] = [
    metadata::DESCRIPTION,
    metadata::VERSION,
    metadata::LICENSE,
    metadata::ACKNOWLEDGEMENT,
    metadata::CITATION,
    metadata::DOI,
    metadata::BIBTEX,
    metadata::SOURCE,
    metadata::MAINTAINER,
    metadata::RECIPE,
];

/// The keys to set and remove on some entries ([`annotate`]).
#[derive(Debug, Clone, Default)]
pub struct Annotation {
    /// `(key, value)` to set (a key already there gets the new value, its comment kept).
    pub set: Vec<(String, String)>,
    /// Keys to remove.
    pub unset: Vec<String>,
}

impl Annotation {
    /// Reads `KEY=VALUE` arguments (`set`) and `KEY` arguments (`unset`), refusing keys other
    /// than [`ANNOTATE_KEYS`], a key given twice, and values [`check_value`] refuses.
    pub fn parse(set: &[String], unset: &[String]) -> Result<Annotation> {
        let mut a = Annotation::default();
        for arg in set {
            let Some((key, value)) = arg.split_once('=') else {
                return Err(Error::input(format!(
                    "`--set {arg}` is not KEY=VALUE (e.g. `--set license=CC-BY-4.0`)"
                )));
            };
            let key = known_key(key.trim())?;
            check_value(key, value).map_err(|why| {
                Error::input(format!("`--set {key}=...`: {why}; nothing was changed"))
            })?;
            a.set.push((key.to_owned(), value.to_owned()));
        }
        for key in unset {
            a.unset.push(known_key(key.trim())?.to_owned());
        }
        let mut keys: Vec<&str> = a.set.iter().map(|(k, _)| k.as_str()).collect();
        keys.extend(a.unset.iter().map(String::as_str));
        keys.sort_unstable();
        if let Some(w) = keys.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::input(format!(
                "the key `{}` is given twice; set or remove each key once",
                w[0]
            )));
        }
        if keys.is_empty() {
            return Err(Error::input(
                "nothing to change: give `--set KEY=VALUE` or `--unset KEY`",
            ));
        }
        Ok(a)
    }
}

/// `key` if [`annotate`] sets it, else a usage error listing the keys it does.
fn known_key(key: &str) -> Result<&'static str> {
    ANNOTATE_KEYS
        .iter()
        .find(|k| **k == key)
        .copied()
        .ok_or_else(|| {
            Error::input(format!(
                "`{}` is not a key `annotate` sets; it sets {} (hashes and downloads change \
                 with `create` and `publish`)",
                clima_artifact_fs::printable(key),
                ANNOTATE_KEYS.join(", ")
            ))
        })
}

/// Why `value` cannot be the value of `key`: an SPDX expression with problems (a licence name
/// with spaces, a wrong case, a deprecated id), a malformed DOI or BibTeX entry, an empty value.
pub fn check_value(key: &str, value: &str) -> Result<(), String> {
    let problems = match key {
        metadata::LICENSE => provenance::check_license(value),
        metadata::DOI => provenance::check_doi(value),
        metadata::BIBTEX => provenance::check_bibtex(value).err().into_iter().collect(),
        _ if value.trim().is_empty() => {
            vec!["the value is empty (remove a key with --unset)".into()]
        }
        _ => Vec::new(),
    };
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

/// What [`annotate`] did to one entry.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Annotated {
    /// The artifact's name.
    pub name: String,
    /// Keys set to a new value (or added).
    pub set: Vec<String>,
    /// Keys removed.
    pub removed: Vec<String>,
    /// Keys that already had the value, or to remove that were not there.
    pub unchanged: Vec<String>,
}

/// Sets and removes the keys of `annotation` on the `[name]` entries `names` of manifest text
/// (`path` is for messages), keeping every other byte: comments, key order, the hashes and
/// downloads. A new key goes after the entry's other keys, indented as its `git-tree-sha1`.
/// Refuses (nothing changed) a name with no entry, a `[[name]]` entry (Julia reads extra keys
/// there as platform tags) and a name that is not a table.
pub fn annotate(
    text: &str,
    path: &Path,
    names: &[String],
    annotation: &Annotation,
) -> Result<(String, Vec<Annotated>)> {
    let mut doc: DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
        Error::input(format!(
            "`{}` is not valid TOML, so `annotate` will not edit it: {}",
            path.display(),
            e.to_string().trim_end()
        ))
    })?;
    let mut done = Vec::with_capacity(names.len());
    for name in names {
        let shown = clima_artifact_fs::printable(name);
        let t = match doc.get_mut(name) {
            Some(Item::Table(t)) => t,
            None => {
                return Err(Error::input(format!(
                    "`{}` has no artifact `{shown}`; nothing was changed",
                    path.display()
                )));
            }
            Some(Item::ArrayOfTables(_)) => {
                return Err(Error::input(format!(
                    "`{}`: artifact `{shown}` is platform-specific ([[{shown}]]), where Julia reads \
                     extra keys as platform tags; provenance keys belong in [name] entries only, \
                     so nothing was changed",
                    path.display()
                )));
            }
            Some(_) => {
                return Err(Error::input(format!(
                    "`{}`: `{shown}` is not a [{shown}] table; edit it by hand (nothing was \
                     changed)",
                    path.display()
                )));
            }
        };
        done.push(annotate_table(t, name, annotation));
    }
    Ok((doc.to_string(), done))
}

/// [`annotate`] on one entry's table.
fn annotate_table(t: &mut Table, name: &str, annotation: &Annotation) -> Annotated {
    let mut out = Annotated {
        name: name.to_owned(),
        set: Vec::new(),
        removed: Vec::new(),
        unchanged: Vec::new(),
    };
    let indent: String = t
        .key("git-tree-sha1")
        .and_then(|k| k.leaf_decor().prefix())
        .and_then(|p| p.as_str())
        .map(|p| p.rsplit('\n').next().unwrap_or("").to_owned())
        .filter(|p| p.chars().all(|c| c == ' ' || c == '\t'))
        .unwrap_or_default();
    for (key, value) in &annotation.set {
        if t.get(key).and_then(Item::as_str) == Some(value.as_str()) {
            out.unchanged.push(key.clone());
            continue;
        }
        if t.contains_key(key) {
            set_value(t, key, Value::from(value.as_str()));
        } else {
            let k =
                Key::new(key.as_str()).with_leaf_decor(toml_edit::Decor::new(indent.as_str(), " "));
            t.insert_formatted(&k, toml_edit::value(value.as_str()));
        }
        out.set.push(key.clone());
    }
    for key in &annotation.unset {
        if t.remove(key).is_some() {
            out.removed.push(key.clone());
        } else {
            out.unchanged.push(key.clone());
        }
    }
    out
}

/// Why `name` cannot be an artifact name, if it cannot (`/` would clash with `name/sub/path`).
pub fn invalid_name(name: &str) -> Option<&'static str> {
    if name.trim().is_empty() {
        Some("the name is empty")
    } else if name.contains('/') || name.contains('\\') {
        Some("the name must not contain `/` or `\\` (they separate sub-paths)")
    } else if name.chars().any(|c| c.is_control() || c.is_whitespace()) {
        Some("the name must not contain spaces or control characters")
    } else if name.starts_with('.') {
        Some("the name must not start with `.`")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H1: &str = "1111111111111111111111111111111111111111";
    const H2: &str = "2222222222222222222222222222222222222222";
    const S1: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

    fn update(hash: &str, url: Option<&str>) -> EntryUpdate {
        EntryUpdate {
            name: "era5".into(),
            tree_hash: hash.into(),
            tree_hash_sha256: None,
            lazy: false,
            metadata: vec![("license", "CC-BY-4.0".into())],
            download: url.map(|u| NewDownload {
                url: u.into(),
                sha256: S1.into(),
                size: 317,
                index_sha256: None,
            }),
            remove_downloads: false,
            replace_downloads: false,
            download_last: false,
        }
    }

    #[test]
    fn adds_entry_in_pkg_layout_and_keeps_comments() {
        let text = "# keep me\n[other] # and me\ngit-tree-sha1 = \"".to_string() + H2 + "\"\n";
        let (out, outcome) = upsert_entry(
            &text,
            Path::new("A.toml"),
            &update(H1, Some("https://x/e.tar.gz")),
        )
        .unwrap();
        assert_eq!(outcome, EditOutcome::Added);
        assert!(out.starts_with(&text), "{out}");
        assert!(out.contains("\n\n[era5]\ngit-tree-sha1 = \""), "{out}");
        assert!(
            out.contains("\n    [[era5.download]]\n    sha256 = \""),
            "{out}"
        );
        let parsed: toml_edit::DocumentMut = out.parse().unwrap();
        assert_eq!(
            parsed["era5"]["download"][0]["url"].as_str(),
            Some("https://x/e.tar.gz")
        );
    }

    #[test]
    fn git_tree_sha256_is_written_kept_or_dropped_as_the_content_says() {
        let s256 = |c: &str| c.repeat(64);
        let text = format!(
            "[era5]\ngit-tree-sha1 = \"{H2}\"\ngit-tree-sha256 = \"{}\"\n",
            s256("b")
        );
        assert!(entry_has_sha256(&text, "era5"));
        assert!(!entry_has_sha256(&text, "other"));
        assert!(!entry_has_sha256("not toml [", "era5"));
        // A new value replaces the old one in place.
        let mut u = update(H1, None);
        u.tree_hash_sha256 = Some(s256("c"));
        let (out, _) = upsert_entry(&text, Path::new("A.toml"), &u).unwrap();
        assert!(
            out.contains(&format!("git-tree-sha256 = \"{}\"", s256("c")))
                && !out.contains(&s256("b")),
            "{out}"
        );
        // Without one, new content drops the stale value; the same content keeps it.
        let (out, _) = upsert_entry(&text, Path::new("A.toml"), &update(H1, None)).unwrap();
        assert!(!out.contains("git-tree-sha256"), "{out}");
        let (out, _) = upsert_entry(&text, Path::new("A.toml"), &update(H2, None)).unwrap();
        assert!(out.contains(&s256("b")), "{out}");
        // A new entry gets it under its git-tree-sha1.
        let (out, _) = upsert_entry("", Path::new("A.toml"), &u).unwrap();
        assert!(
            out.contains(&format!(
                "git-tree-sha1 = \"{H1}\"\ngit-tree-sha256 = \"{}\"\n",
                s256("c")
            )),
            "{out}"
        );
    }

    #[test]
    fn comment_only_file_keeps_its_comments_on_top() {
        let (out, _) =
            upsert_entry("# my datasets\n", Path::new("A.toml"), &update(H1, None)).unwrap();
        assert!(out.starts_with("# my datasets\n\n[era5]\n"), "{out}");
    }

    #[test]
    fn update_with_new_hash_drops_stale_downloads_and_keeps_value_comments() {
        let text = format!(
            "[era5]\ngit-tree-sha1 = \"{H2}\" # the hash\nnote = \"x\"\n\n    [[era5.download]]\n    url = \"https://old\"\n    sha256 = \"{S1}\"\n"
        );
        let (out, outcome) = upsert_entry(&text, Path::new("A.toml"), &update(H1, None)).unwrap();
        assert_eq!(
            outcome,
            EditOutcome::Updated {
                previous_hash: Some(H2.into()),
                removed_downloads: 1
            }
        );
        assert!(
            out.contains(&format!("git-tree-sha1 = \"{H1}\" # the hash")),
            "{out}"
        );
        assert!(out.contains("note = \"x\""));
        assert!(!out.contains("https://old"));
    }

    #[test]
    fn update_with_same_hash_keeps_other_downloads() {
        let text = format!(
            "[era5]\ngit-tree-sha1 = \"{H1}\"\n[[era5.download]]\nurl = \"https://mirror\"\nsha256 = \"{S1}\"\n[[era5.download]]\nurl = \"https://new\"\nsha256 = \"{S1}\"\n"
        );
        let (out, _) =
            upsert_entry(&text, Path::new("A.toml"), &update(H1, Some("https://new"))).unwrap();
        let parsed: toml_edit::DocumentMut = out.parse().unwrap();
        let d = parsed["era5"]["download"].as_array_of_tables().unwrap();
        assert_eq!(d.len(), 2);
        assert_eq!(d.get(0).unwrap()["url"].as_str(), Some("https://new"));
        assert_eq!(d.get(1).unwrap()["url"].as_str(), Some("https://mirror"));
    }

    #[test]
    fn refuses_platform_entries_and_bad_toml() {
        let text = format!("[[era5]]\ngit-tree-sha1 = \"{H1}\"\nos = \"linux\"\n");
        let err = upsert_entry(&text, Path::new("A.toml"), &update(H1, None)).unwrap_err();
        assert!(
            err.message().contains("platform-specific"),
            "{}",
            err.message()
        );
        let err = upsert_entry("[era5", Path::new("A.toml"), &update(H1, None)).unwrap_err();
        assert!(
            err.message().contains("`A.toml` is not valid TOML"),
            "{}",
            err.message()
        );
    }
}
