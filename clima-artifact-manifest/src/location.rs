//! Byte offsets to 1-based line and column numbers, and small helpers over `toml`'s spanned
//! document tree shared by the manifest and overrides parsers.

use std::path::Path;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::{ManifestError, ManifestErrorKind};

/// Maps byte offsets of one text to 1-based (line, column); columns count characters.
pub(crate) struct LineIndex<'a> {
    text: &'a str,
    line_starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    /// Indexes the line starts of `text`.
    pub(crate) fn new(text: &'a str) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        LineIndex { text, line_starts }
    }

    /// 1-based line and character column of byte `offset` (clamped to the text).
    pub(crate) fn line_col(&self, offset: usize) -> (u32, u32) {
        let offset = offset.min(self.text.len());
        let line = self.line_starts.partition_point(|&s| s <= offset) - 1;
        let start = self.line_starts[line];
        let mut end = offset;
        while !self.text.is_char_boundary(end) {
            end -= 1;
        }
        let column = self.text[start..end].chars().count() + 1;
        (to_u32(line + 1), to_u32(column))
    }

    /// 1-based line of byte `offset`.
    pub(crate) fn line(&self, offset: usize) -> u32 {
        self.line_col(offset).0
    }
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Builds located errors for one file.
pub(crate) struct Locator<'a> {
    pub(crate) path: &'a Path,
    pub(crate) index: LineIndex<'a>,
}

impl<'a> Locator<'a> {
    pub(crate) fn new(text: &'a str, path: &'a Path) -> Self {
        Locator {
            path,
            index: LineIndex::new(text),
        }
    }

    /// An [`ManifestErrorKind::Invalid`] error at byte `offset`.
    pub(crate) fn invalid(
        &self,
        offset: usize,
        artifact: Option<&str>,
        message: impl Into<String>,
    ) -> ManifestError {
        self.error(
            Some(offset),
            artifact,
            ManifestErrorKind::Invalid(message.into()),
        )
    }

    /// An error of any kind, at byte `offset` when known.
    pub(crate) fn error(
        &self,
        offset: Option<usize>,
        artifact: Option<&str>,
        kind: ManifestErrorKind,
    ) -> ManifestError {
        let (line, column) = match offset {
            Some(o) => {
                let (l, c) = self.index.line_col(o);
                (Some(l), Some(c))
            }
            None => (None, None),
        };
        ManifestError {
            path: self.path.to_path_buf(),
            line,
            column,
            artifact: artifact.map(str::to_owned),
            kind,
        }
    }

    /// Parses the document; syntax errors (all of them) become [`ManifestErrorKind::Toml`].
    pub(crate) fn parse_document<'i>(
        &self,
        text: &'i str,
    ) -> Result<Spanned<DeTable<'i>>, Vec<ManifestError>> {
        let (doc, errors) = DeTable::parse_recoverable(text);
        if errors.is_empty() {
            return Ok(doc);
        }
        let mut out: Vec<ManifestError> = Vec::new();
        for e in errors {
            let err = self.error(
                e.span().map(|s| s.start),
                None,
                ManifestErrorKind::Toml(toml_message(e.message())),
            );
            if !out.contains(&err) {
                out.push(err);
            }
        }
        Err(out)
    }
}

/// Names the artifact of each TOML syntax error in a manifest: the top-level table or array
/// element whose header is the last one before the error's line. Errors on a header line itself
/// name no artifact (the header may be the broken part, and recovery cannot be trusted there).
pub(crate) fn attribute_syntax_errors(text: &str, errors: &mut [ManifestError]) {
    let index = LineIndex::new(text);
    let (doc, _) = DeTable::parse_recoverable(text);
    let mut starts: Vec<(u32, &str)> = Vec::new();
    for (key, value) in doc.get_ref().iter() {
        let name: &str = key.get_ref();
        match value.get_ref() {
            DeValue::Table(_) => starts.push((index.line(value.span().start), name)),
            DeValue::Array(items) => {
                for item in items.iter() {
                    starts.push((index.line(item.span().start), name));
                }
            }
            _ => {}
        }
    }
    starts.sort_by_key(|(line, _)| *line);
    let lines: Vec<&str> = text.lines().collect();
    for e in errors.iter_mut().filter(|e| e.artifact.is_none()) {
        let Some(line) = e.line else { continue };
        let is_header = lines
            .get(line as usize - 1)
            .is_some_and(|l| l.trim_start().starts_with('['));
        if is_header {
            continue;
        }
        e.artifact = starts
            .iter()
            .rev()
            .find(|(start, _)| *start < line)
            .map(|(_, name)| (*name).to_owned());
    }
}

/// `toml`'s messages, made one line and given a hint for the most common slip.
fn toml_message(message: &str) -> String {
    let one_line = message.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.starts_with("duplicate key") {
        format!("{one_line}; each artifact name and key may appear only once")
    } else {
        format!("{one_line}; fix the TOML syntax at this position")
    }
}

/// The entries of a table in file order (the parser keeps them sorted by name).
pub(crate) fn entries_in_file_order<'t, 'i>(
    table: &'t DeTable<'i>,
) -> Vec<(
    &'t Spanned<std::borrow::Cow<'i, str>>,
    &'t Spanned<DeValue<'i>>,
)> {
    let mut entries: Vec<_> = table.iter().collect();
    entries.sort_by_key(|(k, _)| (k.span().start, k.span().end));
    entries
}

/// "a string", "an integer", ... for messages.
pub(crate) fn a_type(value: &DeValue<'_>) -> &'static str {
    match value {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a datetime",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

/// Renders a value back to TOML syntax (used for non-string metadata).
pub(crate) fn to_toml_syntax(value: &DeValue<'_>) -> String {
    match value {
        DeValue::String(s) => quote(s),
        DeValue::Integer(i) => i.to_string(),
        DeValue::Float(f) => f.to_string(),
        DeValue::Boolean(b) => b.to_string(),
        DeValue::Datetime(d) => d.to_string(),
        DeValue::Array(a) => {
            let items: Vec<String> = a.iter().map(|v| to_toml_syntax(v.get_ref())).collect();
            format!("[{}]", items.join(", "))
        }
        DeValue::Table(t) => {
            let items: Vec<String> = entries_in_file_order(t)
                .into_iter()
                .map(|(k, v)| {
                    format!(
                        "{} = {}",
                        key_syntax(k.get_ref()),
                        to_toml_syntax(v.get_ref())
                    )
                })
                .collect();
            if items.is_empty() {
                "{}".to_owned()
            } else {
                format!("{{ {} }}", items.join(", "))
            }
        }
    }
}

/// A TOML basic string literal for `s`, quotes included (`a"b` -> `"a\"b"`), for code that
/// writes TOML by hand (messages here, Julia's usage log in the depot crate, the edits of
/// the operations crate).
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A key as written in TOML: bare when possible, quoted otherwise.
pub(crate) fn key_syntax(key: &str) -> String {
    if !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        key.to_owned()
    } else {
        quote(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column() {
        let idx = LineIndex::new("ab\ncdé\n\nx");
        assert_eq!(idx.line_col(0), (1, 1));
        assert_eq!(idx.line_col(2), (1, 3));
        assert_eq!(idx.line_col(3), (2, 1));
        // after the two-byte `é`: column counts characters
        assert_eq!(idx.line_col(7), (2, 4));
        assert_eq!(idx.line_col(8), (3, 1));
        assert_eq!(idx.line_col(9), (4, 1));
        assert_eq!(idx.line_col(999), (4, 2));
    }

    #[test]
    fn renders_toml_syntax() {
        let doc = DeTable::parse(
            "a = [1, 2.5, true, \"x\\\"y\"]\nb = { c = 1979-05-27, \"d e\" = 0x1f }\n",
        )
        .unwrap();
        let t = doc.get_ref();
        assert_eq!(
            to_toml_syntax(t.get("a").unwrap().get_ref()),
            "[1, 2.5, true, \"x\\\"y\"]"
        );
        assert_eq!(
            to_toml_syntax(t.get("b").unwrap().get_ref()),
            "{ c = 1979-05-27, \"d e\" = 0x1f }"
        );
    }
}
