//! The README.md of an artifact's recipe folder (`artifacts/<name>/README.md`): the sections the
//! input-data policy asks for, and the citation section the provenance report quotes.
//!
//! Heading rules: a heading is an ATX heading (`#` to `######`, then a space) outside fenced
//! code blocks (```` ``` ```` or `~~~`), at any level. Its text is compared with the accepted
//! names ignoring case, surrounding spaces, runs of spaces, closing `#`s and a final `:`. A
//! section runs to the next heading of the same or a higher level. A section counts as present
//! only if it has some text besides blank lines and HTML comments (`<!-- ... -->`), so the
//! template written by `clima-artifacts new` is refused until it is filled in.
//!
//! Besides the names of the template, the names real collections use are accepted:
//! `Description` or `Overview` for the contents, `Citation` or `References` for the citation,
//! `Postprocessing` for the preprocessing.

use std::io::Read;
use std::path::Path;

use crate::record::ArtifactRecord;

/// One required section: the name shown in messages and the heading texts accepted for it
/// (lower case).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Section {
    /// The name messages use, as a heading would be written.
    pub name: &'static str,
    /// Accepted heading texts, lower case.
    pub headings: &'static [&'static str],
}

/// The sections every recipe README must have, in the order the template lists them.
pub const SECTIONS: [Section; 4] = [
    Section {
        name: "Contents",
        headings: &["contents", "description", "overview"],
    },
    Section {
        name: "Sources",
        headings: &["sources", "source"],
    },
    CITATION_SECTION,
    Section {
        name: "Preprocessing",
        headings: &[
            "preprocessing",
            "pre-processing",
            "postprocessing",
            "post-processing",
        ],
    },
];

/// The section the provenance report quotes.
pub const CITATION_SECTION: Section = Section {
    name: "Creators and citation",
    headings: &[
        "creators and citation",
        "creators & citation",
        "citation",
        "citations",
        "references",
    ],
};

/// The manifest key naming an artifact's recipe folder, relative to the manifest's folder.
pub const RECIPE_KEY: &str = clima_artifact_manifest::metadata::RECIPE;

/// The README's file name in a recipe folder (and at the top of the artifact's content).
pub const README_FILE: &str = "README.md";

/// Largest README.md read for its citation section.
pub const MAX_README_BYTES: u64 = 1 << 20;

/// Longest citation section quoted in a report (longer ones are cut at a character boundary).
pub const MAX_CITATION_CHARS: usize = 2000;

/// The metadata key under which the runtime records the README's citation section in a report
/// (only when the manifest entry has no key of that name).
pub const README_CITATION_KEY: &str = "readme-citation";

/// A heading line: its level (1-6) and normalised text (lower case, spaces collapsed).
pub(crate) fn heading(line: &str) -> Option<(usize, String)> {
    let trimmed = line.trim_start_matches(' ');
    if line.len() - trimmed.len() > 3 {
        return None;
    }
    let level = trimmed.bytes().take_while(|&b| b == b'#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &trimmed[level..];
    if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    let text = rest
        .trim()
        .trim_end_matches('#')
        .trim()
        .trim_end_matches(':');
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    Some((level, text.to_lowercase()))
}

/// The text of the section whose heading is one of `section`'s, without HTML comments and
/// trimmed; `None` when there is no such heading or its section is empty.
pub fn section_text(readme: &str, section: &Section) -> Option<String> {
    let mut fence: Option<&str> = None;
    let mut open: Option<usize> = None;
    let mut body = String::new();
    for line in readme.lines() {
        let t = line.trim_start();
        if let Some(f) = fence {
            if t.starts_with(f) {
                fence = None;
            }
        } else if t.starts_with("```") || t.starts_with("~~~") {
            fence = Some(&t[..3]);
        } else if let Some((level, text)) = heading(line) {
            if open.is_some_and(|l| level <= l) {
                break;
            }
            if open.is_none() {
                if section.headings.contains(&text.as_str()) {
                    open = Some(level);
                }
                continue;
            }
        }
        if open.is_some() {
            body.push_str(line);
            body.push('\n');
        }
    }
    open?;
    let text = strip_comments(&body).trim().to_owned();
    (!text.is_empty()).then_some(text)
}

/// `text` without `<!-- ... -->` (an unclosed comment runs to the end).
fn strip_comments(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("<!--") {
        out.push_str(&rest[..start]);
        match rest[start + 4..].find("-->") {
            Some(end) => rest = &rest[start + 4 + end + 3..],
            None => return out,
        }
    }
    out.push_str(rest);
    out
}

/// The required sections that `readme` lacks (or leaves empty), in [`SECTIONS`] order.
pub fn missing_sections(readme: &str) -> Vec<&'static str> {
    SECTIONS
        .iter()
        .filter(|s| section_text(readme, s).is_none())
        .map(|s| s.name)
        .collect()
}

/// Adds to each record whose entry has a `recipe` key the "Creators and citation" section of
/// that recipe's README.md, as [`README_CITATION_KEY`] (unless the entry has that key itself).
/// Unreadable or absent READMEs are left out: the report does not depend on them.
pub fn with_recipe_citations(mut records: Vec<ArtifactRecord>) -> Vec<ArtifactRecord> {
    for r in &mut records {
        if r.metadata.contains_key(README_CITATION_KEY) {
            continue;
        }
        let Some(key) = r.metadata.get(RECIPE_KEY) else {
            continue;
        };
        if let Some(text) = recipe_citation(Path::new(&r.manifest), key) {
            r.metadata.insert(README_CITATION_KEY.to_owned(), text);
        }
    }
    records
}

/// The citation section of `<manifest's folder>/<key>/README.md`: every folder opened in turn
/// without following a symlink, the README only if it is a regular file of at most
/// [`MAX_README_BYTES`] (UTF-8), the section cut at [`MAX_CITATION_CHARS`] characters.
pub fn recipe_citation(manifest: &Path, key: &str) -> Option<String> {
    let rel = Path::new(key);
    if !rel
        .components()
        .all(|c| matches!(c, std::path::Component::Normal(_)))
    {
        return None;
    }
    let base = match manifest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir = clima_artifact_fs::Dir::open(base)
        .ok()?
        .open_dirs(rel)
        .ok()??;
    let file = dir.open_file(README_FILE).ok()??;
    let mut bytes = Vec::new();
    file.take(MAX_README_BYTES + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    if bytes.len() as u64 > MAX_README_BYTES {
        return None;
    }
    let text = String::from_utf8(bytes).ok()?;
    let section = section_text(&text, &CITATION_SECTION)?;
    Some(match section.char_indices().nth(MAX_CITATION_CHARS) {
        Some((cut, _)) => format!("{}…", &section[..cut]),
        None => section,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FULL: &str = "# era5\n\n## Contents\nu.nc\n\n## SOURCES:\nhttps://x\n\n\
                        ### creators   and Citation ##\nHersbach et al. 2020\n#### note\nmore\n\
                        ## Preprocessing\n```\n## Contents\n```\nregridded\n";

    #[test]
    fn sections_are_found_whatever_their_case_and_level() {
        assert!(missing_sections(FULL).is_empty());
        assert_eq!(
            section_text(FULL, &CITATION_SECTION).as_deref(),
            Some("Hersbach et al. 2020\n#### note\nmore")
        );
    }

    #[test]
    fn the_section_names_of_real_collections_are_accepted() {
        let readme = "# x\n## Overview\nu.nc\n## Source\nhttps://x\n## References\nA et al.\n\
                      ## Postprocessing\nregridded\n";
        assert!(missing_sections(readme).is_empty());
        let readme = "## Description\nu.nc\n## Citation\nB\n";
        assert_eq!(missing_sections(readme), ["Sources", "Preprocessing"]);
        assert_eq!(
            section_text(readme, &CITATION_SECTION).as_deref(),
            Some("B")
        );
    }

    #[test]
    fn missing_empty_and_commented_sections_are_named() {
        let readme = "## Contents\n<!-- what files -->\n\n## Sources\n#no heading\n\
                      ```\n## Preprocessing\n```\n";
        assert_eq!(
            missing_sections(readme),
            ["Contents", "Creators and citation", "Preprocessing"]
        );
        assert_eq!(missing_sections(""), SECTIONS.map(|s| s.name));
    }
}
