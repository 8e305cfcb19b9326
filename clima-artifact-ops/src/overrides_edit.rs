//! Editing one depot's `artifacts/Overrides.toml` in place: a Julia-compatible
//! `<git-tree-sha1> = "<absolute path>"` line, with the artifact's name as a trailing comment,
//! added, replaced or removed while every other line (Julia's `[<uuid>]` tables included) stays
//! as it was.
//!
//! ```toml
//! 0123456789abcdef0123456789abcdef01234567 = "/scratch/shared/era5" # era5
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use toml_edit::{DocumentMut, Item, Value};

use crate::error::{CliError, CliResult};

fn parse(text: &str, path: &Path) -> CliResult<DocumentMut> {
    text.parse().map_err(|e: toml_edit::TomlError| {
        CliError::usage(format!(
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
) -> CliResult<String> {
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
pub fn unset_override(text: &str, path: &Path, hash: &str) -> CliResult<Option<String>> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
