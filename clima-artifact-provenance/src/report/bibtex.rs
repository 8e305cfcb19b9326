//! BibTeX rendering of a [`Report`]: every entry of the accessed artifacts, deduplicated.
//!
//! Sources, per accessed artifact (in report order):
//! 1. its `bibtex` value, which may hold several entries; text between entries is ignored, as
//!    BibTeX itself does;
//! 2. otherwise, when it has a `citation` or `doi`, a generated `@misc{artifact:<name>, ...}`
//!    whose `author` and `year` come from the citation's usual shape (`Authors (2020): ...` or
//!    `Authors, 2020, ...`), the author from `maintainer` when the citation names none.
//!
//! Deduplication: an entry whose key was already emitted is dropped (a `%` note says so when its
//! content differs); an entry whose content (type and fields, whitespace-normalised) equals an
//! emitted entry under another key is dropped too, and the note names the key that stays.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use clima_artifact_manifest::metadata as keys;

use super::{Report, bare_doi, doi_url, meta, one_line};
use crate::record::ArtifactRecord;

/// One entry as found in a `bibtex` value.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct RawEntry {
    /// Entry type in lower case (`article`, `misc`, ...).
    pub kind: String,
    /// Citation key.
    pub key: String,
    /// The entry's text, verbatim from `@` to the closing delimiter.
    pub text: String,
    /// Type and fields without the key, whitespace collapsed: equal for equal content.
    pub fingerprint: String,
}

/// Splits BibTeX text into entries. `@comment` blocks are skipped; `@string` and `@preamble`
/// are rejected because an artifact's reference cannot depend on definitions elsewhere.
pub(super) fn parse_entries(text: &str) -> Result<Vec<RawEntry>, String> {
    let mut entries = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find('@') {
        let after_at = &rest[at + 1..];
        let kind_len = after_at
            .find(|c: char| !c.is_ascii_alphanumeric())
            .unwrap_or(after_at.len());
        let kind = after_at[..kind_len].to_ascii_lowercase();
        if kind.is_empty() {
            return Err(format!(
                "`@` is not followed by an entry type near `{}`",
                excerpt(&rest[at..])
            ));
        }
        let after_kind = after_at[kind_len..].trim_start();
        let open = after_kind.chars().next();
        let close = match open {
            Some('{') => '}',
            Some('(') => ')',
            _ => {
                return Err(format!(
                    "`@{kind}` is not followed by `{{` or `(` near `{}`",
                    excerpt(&rest[at..])
                ));
            }
        };
        let body_start = &after_kind[1..];
        let body_len = balanced_len(body_start, close).ok_or_else(|| {
            format!(
                "entry `@{kind}` starting `{}` has unbalanced braces",
                excerpt(&rest[at..])
            )
        })?;
        let body = &body_start[..body_len];
        let entry_end = (rest.len() - body_start.len()) + body_len + 1;
        let entry_text = rest[at..entry_end].trim().to_owned();
        rest = &rest[entry_end..];
        match kind.as_str() {
            "comment" => continue,
            "string" | "preamble" => {
                return Err(format!(
                    "`@{kind}` is not supported in an artifact's bibtex; write the entry with \
                     its values spelled out"
                ));
            }
            _ => {}
        }
        let (key, fields) = body.split_once(',').unwrap_or((body, ""));
        let key = key.trim();
        if key.is_empty() || key.contains(|c: char| c.is_whitespace() || "{}(),\"#%'=".contains(c))
        {
            return Err(format!(
                "entry `@{kind}` starting `{}` has no valid citation key",
                excerpt(&entry_text)
            ));
        }
        entries.push(RawEntry {
            fingerprint: format!("@{kind} {}", one_line(fields).trim_end_matches(',')),
            kind,
            key: key.to_owned(),
            text: entry_text,
        });
    }
    Ok(entries)
}

/// Length of `text` up to (not including) the `close` delimiter at brace depth 0, if any.
fn balanced_len(text: &str, close: char) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth > 0 => depth -= 1,
            c if c == close && depth == 0 => return Some(i),
            '}' => return None,
            _ => {}
        }
    }
    None
}

/// The first 40 characters of `text` on one line, for messages.
fn excerpt(text: &str) -> String {
    let line = one_line(text);
    match line.char_indices().nth(40) {
        Some((i, _)) => format!("{}...", &line[..i]),
        None => line,
    }
}

/// An entry that will be written, with the artifacts it serves.
#[derive(Debug)]
struct Emitted {
    entry: RawEntry,
    artifacts: Vec<String>,
}

/// The deduplicated entries of a report and, per artifact, the keys that cite it.
#[derive(Debug, Default)]
pub(super) struct Bibliography {
    emitted: Vec<Emitted>,
    notes: Vec<String>,
    keys_by_artifact: BTreeMap<String, Vec<String>>,
}

impl Bibliography {
    /// Collects and deduplicates the entries of every accessed artifact.
    pub(super) fn build(report: &Report) -> Bibliography {
        let mut bib = Bibliography::default();
        for record in &report.artifacts {
            let mut entries = Vec::new();
            if let Some(text) = meta(&record.metadata, keys::BIBTEX) {
                match parse_entries(text) {
                    Ok(parsed) if !parsed.is_empty() => entries = parsed,
                    Ok(_) => bib.notes.push(format!(
                        "artifact `{}`: its bibtex value holds no entry",
                        record.name
                    )),
                    Err(err) => bib.notes.push(format!(
                        "artifact `{}`: its bibtex value was left out: {err}",
                        record.name
                    )),
                }
            }
            if entries.is_empty()
                && let Some(entry) = bib.generated_misc(record)
            {
                entries.push(entry);
            }
            for entry in entries {
                bib.add(&record.name, entry);
            }
        }
        bib
    }

    /// Adds one entry for `artifact`, deduplicating by key, then by content.
    fn add(&mut self, artifact: &str, entry: RawEntry) {
        let by_key = self.emitted.iter().position(|e| e.entry.key == entry.key);
        let by_content = self
            .emitted
            .iter()
            .position(|e| e.entry.fingerprint == entry.fingerprint);
        let index = match (by_key, by_content) {
            (Some(i), _) => {
                if self.emitted[i].entry.fingerprint != entry.fingerprint {
                    // The kept entry is another work: do not claim it cites this artifact.
                    self.notes.push(format!(
                        "artifact `{artifact}`: its entry `{}` was left out because it differs \
                         from the entry with the same key given by `{}`; rename one of the keys",
                        entry.key,
                        self.emitted[i].artifacts.join("`, `")
                    ));
                    return;
                }
                i
            }
            (None, Some(i)) => {
                self.notes.push(format!(
                    "artifact `{artifact}`: entry `{}` has the same content as `{}` and is \
                     written once, as `{}`",
                    entry.key, self.emitted[i].entry.key, self.emitted[i].entry.key
                ));
                i
            }
            (None, None) => {
                self.emitted.push(Emitted {
                    entry,
                    artifacts: Vec::new(),
                });
                self.emitted.len() - 1
            }
        };
        let emitted = &mut self.emitted[index];
        if !emitted.artifacts.iter().any(|a| a == artifact) {
            emitted.artifacts.push(artifact.to_owned());
        }
        let keys = self
            .keys_by_artifact
            .entry(artifact.to_owned())
            .or_default();
        if !keys.contains(&emitted.entry.key) {
            keys.push(emitted.entry.key.clone());
        }
    }

    /// A `@misc` entry for an artifact with a `citation` or `doi` but no usable `bibtex`.
    // Long: one BibTeX field per metadata key, in the order the entry is written.
    fn generated_misc(&self, record: &ArtifactRecord) -> Option<RawEntry> {
        let citation = meta(&record.metadata, keys::CITATION).map(one_line);
        let doi = meta(&record.metadata, keys::DOI).map(bare_doi);
        if citation.is_none() && doi.is_none() {
            return None;
        }
        let mut key = format!("artifact:{}", key_part(&record.name));
        if self.emitted.iter().any(|e| e.entry.key == key) {
            key = format!("{key}:{}", &record.git_tree_sha1.to_hex()[..7]);
        }
        let title = meta(&record.metadata, keys::DESCRIPTION)
            .map_or_else(|| format!("Dataset {}", record.name), one_line);
        let (cited_authors, year) = citation.as_deref().map_or((None, None), authors_and_year);
        let author = cited_authors.or_else(|| {
            meta(&record.metadata, keys::MAINTAINER)
                .map(maintainer_name)
                .filter(|m| !m.is_empty())
        });
        let mut fields: Vec<(&str, String)> = Vec::new();
        if let Some(author) = author {
            fields.push(("author", latex(&author)));
        }
        fields.push(("title", format!("{{{}}}", latex(&title))));
        if let Some(year) = year {
            fields.push(("year", year));
        }
        if let Some(citation) = &citation {
            fields.push(("note", latex(citation)));
        }
        if let Some(version) = meta(&record.metadata, keys::VERSION) {
            fields.push(("version", latex(&one_line(version))));
        }
        if let Some(doi) = doi {
            fields.push(("doi", doi.replace(['{', '}'], "")));
        }
        let url = meta(&record.metadata, keys::SOURCE)
            .map(one_line)
            .or_else(|| doi.map(doi_url));
        if let Some(url) = url {
            fields.push(("url", url.replace(['{', '}'], "")));
        }
        let mut text = format!("@misc{{{key},\n");
        for (name, value) in &fields {
            let _ = writeln!(text, "  {name} = {{{value}}},");
        }
        text.push('}');
        let body = fields
            .iter()
            .map(|(name, value)| format!("{name} = {{{value}}}"))
            .collect::<Vec<_>>()
            .join(", ");
        Some(RawEntry {
            kind: "misc".to_owned(),
            fingerprint: format!("@misc {}", one_line(&body)),
            key,
            text,
        })
    }

    /// Keys that cite `artifact` (after deduplication).
    pub(super) fn keys_for(&self, artifact: &str) -> &[String] {
        self.keys_by_artifact
            .get(artifact)
            .map_or(&[], Vec::as_slice)
    }
}

/// The authors and the year of a citation written as `Authors (2020): title`,
/// `Authors (2020) title` or `Authors, 2020: title`: the year is the first number from 1800 to
/// 2099 that stands alone after `(`, `[` or `,`; the authors are what comes before it (`et al.`
/// and `&` as BibTeX writes them). Any other shape gives neither.
fn authors_and_year(citation: &str) -> (Option<String>, Option<String>) {
    let bytes = citation.as_bytes();
    let is_year = |i: usize| {
        bytes.get(i..i + 4).is_some_and(|y| {
            y.iter().all(u8::is_ascii_digit)
                && (b"1800".as_slice()..b"2100".as_slice()).contains(&y)
        }) && bytes.get(i + 4).is_none_or(|b| !b.is_ascii_alphanumeric())
            && citation[..i].trim_end().ends_with(['(', '[', ','])
    };
    let Some(at) = (0..bytes.len()).find(|&i| citation.is_char_boundary(i) && is_year(i)) else {
        return (None, None);
    };
    let year = citation[at..at + 4].to_owned();
    let before = citation[..at]
        .trim_end()
        .trim_end_matches(['(', '[', ',', ';', ':', '.'])
        .trim();
    let authors = before
        .replace(" et al.", " and others")
        .replace(" et al", " and others")
        .replace(" & ", " and ");
    let authors = authors.trim_end_matches([',', ';']).trim().to_owned();
    ((!authors.is_empty()).then_some(authors), Some(year))
}

/// A maintainer's name without an e-mail address (`Data Team <data@example.org>`).
fn maintainer_name(maintainer: &str) -> String {
    one_line(maintainer.split('<').next().unwrap_or(maintainer))
}

/// An artifact name reduced to characters safe in a citation key.
fn key_part(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Text made safe for a BibTeX field: LaTeX specials escaped, unbalanced braces removed.
fn latex(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' | '%' | '$' | '#' | '_' => {
                out.push('\\');
                out.push(c);
            }
            '{' | '}' | '\\' => {}
            c => out.push(c),
        }
    }
    out
}

/// Renders the deduplicated bibliography of `report`.
pub(super) fn render(report: &Report) -> String {
    let bib = Bibliography::build(report);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "% References of the datasets used by this run ({} {}).\n\
         % Generated {} by {} (report schema {}).",
        bib.emitted.len(),
        if bib.emitted.len() == 1 {
            "entry"
        } else {
            "entries"
        },
        report.generated_at,
        report.generator,
        report.schema
    );
    for note in &bib.notes {
        let _ = writeln!(out, "% Note: {note}.");
    }
    let uncited: Vec<&str> = report
        .artifacts
        .iter()
        .filter(|r| bib.keys_for(&r.name).is_empty())
        .map(|r| r.name.as_str())
        .collect();
    if !uncited.is_empty() {
        let _ = writeln!(
            out,
            "% No reference (bibtex, citation or doi) is given for: {}.",
            uncited.join(", ")
        );
    }
    for emitted in &bib.emitted {
        let _ = writeln!(
            out,
            "\n% Cited for: {}\n{}",
            emitted.artifacts.join(", "),
            emitted.entry.text
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_several_entries_and_skips_comments() {
        let text = "junk before\n@Article{smith2020,\n  title = {A {nested} title},\n  year = 2020\n}\n\
                    @comment{ignored {entirely}}\n@misc(k2, note = \"x\")";
        let entries = parse_entries(text).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].kind, "article");
        assert_eq!(entries[0].key, "smith2020");
        assert!(entries[0].text.starts_with("@Article{smith2020,"));
        assert!(entries[0].text.ends_with('}'));
        assert_eq!(
            entries[0].fingerprint,
            "@article title = {A {nested} title}, year = 2020"
        );
        assert_eq!(entries[1].key, "k2");
        assert_eq!(entries[1].text, "@misc(k2, note = \"x\")");
    }

    #[test]
    fn rejects_malformed_entries_with_a_reason() {
        for (text, expected) in [
            ("@article{k, title = {unclosed}", "unbalanced"),
            ("@article(k, title = x})", "unbalanced"),
            ("@ {k}", "entry type"),
            ("@article k", "`{` or `(`"),
            ("@article{, title = {x}}", "citation key"),
            ("@string{a = {b}}", "not supported"),
        ] {
            let err = parse_entries(text).unwrap_err();
            assert!(err.contains(expected), "{text}: {err}");
        }
        assert!(parse_entries("no entries here").unwrap().is_empty());
    }

    #[test]
    fn arbitrary_text_never_panics() {
        // Deterministic pseudo-random strings over the characters the parser cares about.
        const ALPHABET: [&str; 14] = [
            "@",
            "{",
            "}",
            "(",
            ")",
            ",",
            " ",
            "\n",
            "a",
            "k",
            "=",
            "\"",
            "é",
            "@article{",
        ];
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..20_000 {
            let mut text = String::new();
            for _ in 0..(state % 24) {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1);
                text.push_str(ALPHABET[(state >> 33) as usize % ALPHABET.len()]);
            }
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            if let Ok(entries) = parse_entries(&text) {
                for entry in entries {
                    assert!(text.contains(&entry.text), "{text:?} -> {entry:?}");
                    assert!(!entry.key.is_empty());
                }
            }
        }
    }

    #[test]
    fn latex_and_keys() {
        assert_eq!(latex("R&D 50% {x}_1"), "R\\&D 50\\% x\\_1");
        assert_eq!(key_part("era5/u v"), "era5_u_v");
    }
}
