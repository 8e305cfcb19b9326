//! The licence a README states, read as the census reads its citation section: from text the
//! caller read (bounded, without following symlinks), never guessed.
//!
//! What counts as a statement (outside fenced code blocks):
//! - a label: a paragraph, list item or heading that starts with `License:` (or `Licence:`,
//!   `Licenses:`, `Licensing:`, `Data license:`); the statement is what follows the colon;
//! - a sentence saying the data is `licensed under`, `distributed under`, `released under`,
//!   `published under` something, or `under` a named `... License`/`Licence`
//!   (`provided under a Creative Commons BY 4.0 License`);
//! - in a licence section (a heading naming `license`, `licence`, `licensing`, `copyright`,
//!   `terms of use` or `usage restrictions`, at any level): also a sentence naming a known
//!   SPDX id, and when the section holds none of these, its first paragraph.
//!
//! Each statement is then matched to an SPDX id ([`spdx_of`]): an SPDX id written in it
//! (`CC-BY-4.0`, any case, from the common ones that
//! [`known_license`] knows), or a common
//! name that maps to exactly one id: the Creative Commons licences by their elements and
//! version (`Creative Commons Attribution 4.0 International`, `CC BY-NC 4.0`, `Creative Commons
//! 4.0 BY`), `Creative Commons Zero`/`CC0`, the Open Government Licence with its version, the
//! MIT, Apache 2.0 and Open Database licences. A name with a word it does not know inside
//! (`Attribution-NonCommericial`), without a version where one is needed (`CC BY`), naming a
//! licence with several SPDX ids (`GPL 2.0`: only, or later?), or a statement naming two
//! licences, is not matched: [`LicenseStatement::spdx`] is `None` and the census reports the
//! statement as unrecognised, for a person to read.

use clima_artifact_manifest::provenance::known_license;

use crate::readme;

/// Longest statement kept (characters); a longer one is cut with `…`.
pub const MAX_STATEMENT_CHARS: usize = 160;

/// One licence statement of a README.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LicenseStatement {
    /// The statement as written: Markdown links, emphasis and code marks removed, spaces
    /// collapsed, cut at [`MAX_STATEMENT_CHARS`]. Not escaped: it came from a file.
    pub text: String,
    /// The SPDX id it names, when it names exactly one this module recognises.
    pub spdx: Option<&'static str>,
}

/// Words a label starts with (lower case), before its `:`.
const LABELS: [&str; 10] = [
    "license",
    "licence",
    "licenses",
    "licences",
    "license(s)",
    "licence(s)",
    "licensing",
    "data license",
    "data licence",
    "copyright and license",
];

/// Verbs that make a sentence a licence statement whatever follows them.
const VERBS: [&str; 7] = [
    "licensed under",
    "licenced under",
    "license it under",
    "licence it under",
    "distributed under",
    "released under",
    "published under",
];

/// A block of a README: a heading, or a paragraph or list item (its lines joined).
enum Block {
    Heading { level: usize, raw: String },
    Text(String),
}

/// The licence statements of a README, in order, without repeats.
pub fn license_statements(readme: &str) -> Vec<LicenseStatement> {
    let mut found = Found::default();
    for block in blocks(readme) {
        match block {
            Block::Heading { level, raw } => {
                found.heading(level, raw.trim_start_matches('#').trim())
            }
            Block::Text(text) => found.text(text),
        }
    }
    found.close_section();
    found.statements
}

/// The statements found so far, and the licence section open.
#[derive(Default)]
struct Found {
    statements: Vec<LicenseStatement>,
    /// The licence section open: its level, whether it gave a statement, its first paragraph.
    section: Option<(usize, bool, Option<String>)>,
    /// A label without text (`License:` alone): the next paragraph is its statement.
    pending_label: bool,
}

impl Found {
    fn push(&mut self, text: &str) {
        let whole = clean(text);
        let text = cut(&whole);
        if !text.is_empty() && !self.statements.iter().any(|s| s.text == text) {
            let spdx = spdx_of(&whole);
            self.statements.push(LicenseStatement { text, spdx });
        }
        if let Some((_, any, _)) = &mut self.section {
            *any = true;
        }
    }

    /// Ends the licence section: one that gave no statement gives its first paragraph.
    fn close_section(&mut self) {
        if let Some((_, false, Some(first))) = self.section.take() {
            self.push(&first);
        }
    }

    fn heading(&mut self, level: usize, text: &str) {
        self.pending_label = false;
        if self
            .section
            .as_ref()
            .is_some_and(|(open, _, _)| level <= *open)
        {
            self.close_section();
        }
        let label = label_rest(text);
        if self.section.is_none() && (label.is_some() || is_license_heading(text)) {
            self.section = Some((level, false, None));
        }
        match label {
            Some("") => self.pending_label = true,
            Some(rest) => self.push(rest),
            None => {}
        }
    }

    fn text(&mut self, text: String) {
        if std::mem::take(&mut self.pending_label) {
            self.push(&text);
        } else if let Some(rest) = label_rest(&text) {
            if rest.is_empty() {
                self.pending_label = true;
            } else {
                self.push(rest);
            }
        } else {
            let in_section = self.section.is_some();
            for sentence in sentences(&text) {
                if states_license(sentence) || (in_section && !ids_in(sentence).is_empty()) {
                    self.push(sentence);
                }
            }
        }
        if let Some((_, _, first @ None)) = &mut self.section {
            *first = Some(text);
        }
    }
}

/// The README's headings and text blocks, outside fenced code blocks. A blank line, a heading,
/// a list item and a label line each start a new block.
fn blocks(readme: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut text = String::new();
    let mut fence: Option<&str> = None;
    let flush = |text: &mut String, blocks: &mut Vec<Block>| {
        if !text.trim().is_empty() {
            blocks.push(Block::Text(std::mem::take(text)));
        }
        text.clear();
    };
    for line in readme.lines() {
        let t = line.trim_start();
        if let Some(f) = fence {
            if t.starts_with(f) {
                fence = None;
            }
            continue;
        }
        if t.starts_with("```") || t.starts_with("~~~") {
            flush(&mut text, &mut blocks);
            fence = Some(&t[..3]);
        } else if let Some((level, _)) = readme::heading(line) {
            flush(&mut text, &mut blocks);
            blocks.push(Block::Heading {
                level,
                raw: t.to_owned(),
            });
        } else if t.is_empty() {
            flush(&mut text, &mut blocks);
        } else {
            if is_list_item(t) || label_rest(t).is_some() {
                flush(&mut text, &mut blocks);
            }
            if !text.is_empty() {
                text.push(' ');
            }
            text.push_str(t);
        }
    }
    flush(&mut text, &mut blocks);
    blocks
}

fn is_list_item(t: &str) -> bool {
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    t.starts_with("- ")
        || t.starts_with("* ")
        || t.starts_with("+ ")
        || (digits > 0 && (t[digits..].starts_with(". ") || t[digits..].starts_with(") ")))
}

/// What follows a label (`License: CC BY 4.0` gives `CC BY 4.0`; an empty label gives ``),
/// list markers, quote marks and emphasis before it ignored; `None` when `text` is no label.
fn label_rest(text: &str) -> Option<&str> {
    let mut t = text.trim_start_matches(['>', ' ', '\t']);
    if is_list_item(t) {
        t = t.split_once(' ').map_or("", |(_, rest)| rest);
    }
    let t = t.trim_start_matches(['*', '_', ' ']);
    let colon = t.find(':')?;
    let word = t[..colon]
        .trim_end_matches(['*', '_', ' '])
        .to_ascii_lowercase();
    if !LABELS.contains(&word.as_str()) {
        return None;
    }
    Some(t[colon + 1..].trim_start_matches(['*', '_']).trim())
}

/// Whether a heading's text names a licence section.
fn is_license_heading(text: &str) -> bool {
    let lower = text.to_lowercase();
    lower
        .split(|c: char| !c.is_alphanumeric())
        .any(|w| w.starts_with("licen") || w == "copyright")
        || lower.contains("terms of use")
        || lower.contains("usage restrictions")
}

/// The sentences of a block: split after `;` and a space, and after `.`, `!` or `?`, a space
/// and a capital letter (so that `Inc. under` stays one sentence).
fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let bytes = text.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        let next = bytes.get(i + 2).copied().unwrap_or(b' ');
        let ends = match b {
            b';' => true,
            b'.' | b'!' | b'?' => next.is_ascii_uppercase(),
            _ => false,
        };
        if ends && bytes.get(i + 1) == Some(&b' ') {
            out.push(&text[start..=i]);
            start = i + 1;
        }
    }
    out.push(&text[start..]);
    out.into_iter()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// Whether a sentence states a licence: one of [`VERBS`], or `under` followed by a named
/// licence (`under the Open Government Licence`, not `under license`).
fn states_license(sentence: &str) -> bool {
    let lower = clean(sentence).to_lowercase();
    if VERBS.iter().any(|v| lower.contains(v)) {
        return true;
    }
    lower.match_indices("under ").any(|(i, _)| {
        if i > 0 && lower.as_bytes()[i - 1].is_ascii_alphanumeric() {
            return false;
        }
        let after = &lower[i + "under ".len()..];
        let Some(end) = after.find("licen") else {
            return !names_in(after).is_empty();
        };
        after[..end]
            .split_whitespace()
            .any(|w| !matches!(w, "a" | "an" | "the" | "this" | "that" | "its" | "their"))
    })
}

/// Markdown removed: `[text](url)` becomes `text`, `**`, `__` and backticks go, spaces
/// collapse.
fn clean(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find("](") {
            Some(close) if !after[..close].contains('[') => {
                out.push_str(&after[..close]);
                let target = &after[close + 2..];
                rest = target.find(')').map_or("", |end| &target[end + 1..]);
            }
            _ => {
                out.push('[');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    let out = out.replace("**", "").replace("__", "").replace('`', "");
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn cut(text: &str) -> String {
    match text.char_indices().nth(MAX_STATEMENT_CHARS) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// The SPDX id a statement names, when it names exactly one this module recognises: ids
/// written out and common names (see the [module docs](self)).
pub fn spdx_of(statement: &str) -> Option<&'static str> {
    let mut all = ids_in(statement);
    for id in names_in(&statement.to_lowercase()) {
        if !all.contains(&id) {
            all.push(id);
        }
    }
    match all.as_slice() {
        [one] => Some(one),
        _ => None,
    }
}

/// SPDX ids written out in `text` (any case), in their SPDX spelling.
fn ids_in(text: &str) -> Vec<&'static str> {
    let mut ids = Vec::new();
    for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+'))) {
        let word = word.trim_end_matches(['.', '-']);
        if let Some(id) = known_license(word).filter(|id| !ids.contains(id)) {
            ids.push(id);
        }
    }
    ids
}

/// The words of lower-case `text` for matching names: `Creative Commons` as `cc`, compound
/// elements joined (`non-commercial` as `noncommercial`), split at spaces, hyphens and
/// punctuation other than the `.` of a version.
fn name_words(text: &str) -> Vec<String> {
    let mut t = format!(" {} ", clean(text).to_lowercase());
    for (from, to) in [
        ("creative commons", "cc"),
        ("non-commercial", "noncommercial"),
        ("non commercial", "noncommercial"),
        ("no-derivatives", "noderivatives"),
        ("no derivatives", "noderivatives"),
        ("no-derivs", "noderivs"),
        ("share-alike", "sharealike"),
        ("share alike", "sharealike"),
    ] {
        t = t.replace(from, to);
    }
    t.split(|c: char| !(c.is_alphanumeric() || c == '.'))
        .map(|w| w.trim_matches('.'))
        .filter(|w| !w.is_empty())
        .map(|w| match w.strip_prefix('v') {
            Some(v) if v.starts_with(|c: char| c.is_ascii_digit()) => v.to_owned(),
            _ => w.to_owned(),
        })
        .collect()
}

/// The SPDX ids the common names in lower-case `text` map to.
fn names_in(text: &str) -> Vec<&'static str> {
    let words = name_words(text);
    let mut found = Vec::new();
    let mut add = |id: Option<&'static str>| {
        if let Some(id) = id.filter(|id| !found.contains(id)) {
            found.push(id);
        }
    };
    for (i, w) in words.iter().enumerate() {
        match w.as_str() {
            "cc" => add(creative_commons(&words[i + 1..])),
            "cc0" => add(known_license("CC0-1.0")),
            "odbl" => add(known_license("ODbL-1.0")),
            "mit" if next_is_licence(&words[i + 1..]) => add(known_license("MIT")),
            "apache" if next_is_licence(&words[i + 1..]) => {
                add(version_after(&words[i + 1..]).and_then(|v| match v {
                    "2.0" | "2" => known_license("Apache-2.0"),
                    _ => None,
                }));
            }
            "open" => add(open_licence(&words[i + 1..], &words)),
            _ => {}
        }
    }
    found
}

fn next_is_licence(words: &[String]) -> bool {
    words.first().is_some_and(|w| w.starts_with("licen"))
}

/// The first version number among the next few words (`version 2.0`, `v3.0`, `2.0`).
fn version_after(words: &[String]) -> Option<&str> {
    words
        .iter()
        .take(4)
        .map(String::as_str)
        .find(|w| w.starts_with(|c: char| c.is_ascii_digit()))
}

/// `open government licence [version]` and `open database licence` (after the word `open`).
fn open_licence(words: &[String], all: &[String]) -> Option<&'static str> {
    let second = words.first()?.as_str();
    if !words.get(1).is_some_and(|w| w.starts_with("licen")) {
        return None;
    }
    match second {
        "database" => known_license("ODbL-1.0"),
        "government" => {
            let canada = all.iter().any(|w| w == "canada");
            match (version_after(&words[2..]), canada) {
                (Some("2.0" | "2"), true) => known_license("OGL-Canada-2.0"),
                (Some("1.0" | "1"), false) => known_license("OGL-UK-1.0"),
                (Some("3.0" | "3"), false) => known_license("OGL-UK-3.0"),
                // 2.0 is both the UK's and Canada's; no version names none.
                _ => None,
            }
        }
        _ => None,
    }
}

/// The Creative Commons licence named by the words after `cc` / `Creative Commons`: its
/// elements (`by`/`attribution`, `nc`, `nd`, `sa`, `zero`) and version, up to `license`, or to
/// the first other word after the version. An unknown word before the version names nothing.
fn creative_commons(words: &[String]) -> Option<&'static str> {
    let (mut by, mut nc, mut nd, mut sa, mut zero) = (false, false, false, false, false);
    let mut version: Option<&str> = None;
    for w in words {
        match w.as_str() {
            "by" | "attribution" => by = true,
            "nc" | "noncommercial" => nc = true,
            "nd" | "noderivatives" | "noderivs" => nd = true,
            "sa" | "sharealike" => sa = true,
            "zero" | "0" => zero = true,
            "1.0" | "2.0" | "2.5" | "3.0" | "4.0" if version.is_none() => version = Some(w),
            "international" | "generic" | "unported" => {}
            "license" | "licence" | "licenses" | "licences" => break,
            _ if version.is_some() || zero => break,
            _ => return None,
        }
    }
    if zero {
        return (!(by || nc || nd || sa) && matches!(version, None | Some("1.0")))
            .then_some("CC0-1.0")
            .and_then(known_license);
    }
    if !by || (nd && sa) {
        return None;
    }
    let id = format!(
        "CC-BY{}{}{}-{}",
        if nc { "-NC" } else { "" },
        if nd { "-ND" } else { "" },
        if sa { "-SA" } else { "" },
        version?
    );
    known_license(&id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(readme: &str) -> Vec<(String, Option<&'static str>)> {
        license_statements(readme)
            .into_iter()
            .map(|s| (s.text, s.spdx))
            .collect()
    }

    #[test]
    fn names_map_to_one_spdx_id_or_none() {
        let cases = [
            (
                "Creative Commons Attribution 4.0 International",
                Some("CC-BY-4.0"),
            ),
            ("CC BY 4.0", Some("CC-BY-4.0")),
            ("Creative Commons 4.0 BY", Some("CC-BY-4.0")),
            ("Creative Commons Zero", Some("CC0-1.0")),
            ("Creative Commons Zero (CC0)", Some("CC0-1.0")),
            (
                "Creative Commons Attribution-Noncommercial-Noderivatives 4.0 International",
                Some("CC-BY-NC-ND-4.0"),
            ),
            (
                "Creative Commons Attribution-ShareAlike 4.0 International",
                Some("CC-BY-SA-4.0"),
            ),
            (
                "Creative Commons BY-NC 4.0 International for non-commercial use only",
                Some("CC-BY-NC-4.0"),
            ),
            // A misspelt element is not guessed; the id written beside it counts.
            (
                "Creative Commons Attribution-NonCommericial 4.0 International",
                None,
            ),
            (
                "Creative Commons Attribution-NonCommericial 4.0 International (CC-BY-NC-4.0)",
                Some("CC-BY-NC-4.0"),
            ),
            ("cc-by-4.0", Some("CC-BY-4.0")),
            ("the Open Government License v3.0", Some("OGL-UK-3.0")),
            ("the Open Government Licence (OGL)", None),
            ("the MIT license", Some("MIT")),
            ("Apache License, Version 2.0", Some("Apache-2.0")),
            ("CC BY", None),
            ("GPL 2.0", None),
            ("public domain", None),
            ("CC0 for one file and CC-BY-4.0 for the other", None),
            ("Creative Commons Attribution 4.0 (CC-BY-SA-4.0)", None),
        ];
        for (text, want) in cases {
            assert_eq!(spdx_of(text), want, "{text}");
        }
    }

    #[test]
    fn labels_sentences_and_licence_sections_are_statements() {
        let readme = "# x\n\nLicense: Creative Commons Zero\n\n- **License:** CC BY 4.0\n\n\
                      ### License: CC BY-SA 4.0\n\nThe data is provided by Soil Inc. under a \
                      Creative Commons BY 4.0 License. It was used herein under license.\n\n\
                      ```\nLicense: MIT\n```\n";
        assert_eq!(
            ids(readme),
            [
                ("Creative Commons Zero".to_owned(), Some("CC0-1.0")),
                ("CC BY 4.0".to_owned(), Some("CC-BY-4.0")),
                ("CC BY-SA 4.0".to_owned(), Some("CC-BY-SA-4.0")),
                (
                    "The data is provided by Soil Inc. under a Creative Commons BY 4.0 License."
                        .to_owned(),
                    Some("CC-BY-4.0")
                ),
            ]
        );
        // An empty label takes the text after it; a section without a statement gives its
        // first paragraph, unrecognised; an id in a mixed section counts.
        let readme = "License:\nThis resource is available under the Open Government Licence \
                      (OGL)\n\n## Licence\nPlease see [Terms](https://x/t.pdf) for more.\n\n\
                      More text.\n## Source, provenance, license\nFrom X (CC-BY-4.0) sites.\n";
        assert_eq!(
            ids(readme),
            [
                (
                    "This resource is available under the Open Government Licence (OGL)".to_owned(),
                    None
                ),
                ("Please see Terms for more.".to_owned(), None),
                ("From X (CC-BY-4.0) sites.".to_owned(), Some("CC-BY-4.0")),
            ]
        );
        let code_only = "This code is licensed under GPL 2.0; the data too.\n";
        assert_eq!(
            ids(code_only),
            [("This code is licensed under GPL 2.0;".to_owned(), None)]
        );
        assert!(ids("# Data\nNo word about terms.\n").is_empty());
        let long = format!("License: {}", "x ".repeat(200));
        let text = &license_statements(&long)[0].text;
        assert!(text.ends_with('…') && text.chars().count() == MAX_STATEMENT_CHARS + 1);
    }
}
