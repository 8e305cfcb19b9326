//! Markdown rendering of a [`Report`]: for people, and for pasting into papers.

use std::fmt::Write as _;

use clima_artifact_fs::human_bytes;
use clima_artifact_manifest::metadata as keys;

use super::{Report, bibtex, doi_url, meta, one_line};
use crate::readme::{CITATION_SECTION, README_CITATION_KEY, RECIPE_KEY};
use crate::record::{ArtifactRecord, RecordedOrigin};

/// Shown in table cells for a metadata key the manifest entry does not have.
const MISSING: &str = "*not given*";

/// Renders the whole Markdown document.
pub(super) fn render(report: &Report) -> String {
    let mut out = String::new();
    header(&mut out, report);
    datasets(&mut out, report);
    acknowledgements(&mut out, report);
    references(&mut out, report);
    recipes(&mut out, report);
    missing_metadata(&mut out, report);
    access_details(&mut out, report);
    declared_not_accessed(&mut out, report);
    // Exactly one trailing newline.
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}

fn header(out: &mut String, report: &Report) {
    let n = report.artifacts.len();
    let _ = writeln!(out, "# Datasets used by this run\n");
    let _ = writeln!(
        out,
        "{n} {} accessed, from {} {}. Generated {} by {} (report schema `{}`).\n",
        if n == 1 {
            "dataset was"
        } else {
            "datasets were"
        },
        report.communicator_size,
        if report.communicator_size == 1 {
            "rank"
        } else {
            "ranks"
        },
        report.generated_at,
        report.generator,
        report.schema,
    );
}

fn datasets(out: &mut String, report: &Report) {
    let _ = writeln!(out, "## Datasets\n");
    if report.artifacts.is_empty() {
        let _ = writeln!(out, "No dataset was accessed.\n");
        return;
    }
    let _ = writeln!(
        out,
        "| Dataset | Description | Version | License | Obtained from |\n|---|---|---|---|---|"
    );
    for record in &report.artifacts {
        let cell = |key: &str| meta(&record.metadata, key).map_or(MISSING.to_owned(), table_cell);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} |",
            code(&record.name),
            cell(keys::DESCRIPTION),
            cell(keys::VERSION),
            meta(&record.metadata, keys::LICENSE).map_or(MISSING.to_owned(), code),
            table_cell_raw(&origin_text(record)),
        );
    }
    out.push('\n');
}

/// Where the data came from, in words.
fn origin_text(record: &ArtifactRecord) -> String {
    match &record.origin {
        RecordedOrigin::Override { overrides_file } => format!(
            "override: {} (set in {})",
            code(&record.path),
            code(&overrides_file.to_string_lossy())
        ),
        RecordedOrigin::Depot => {
            let source = meta(&record.metadata, keys::SOURCE)
                .map(|s| format!("; original data: {}", link(s)))
                .unwrap_or_default();
            format!(
                "depot: {} (installed before this run{source})",
                code(&record.path)
            )
        }
        RecordedOrigin::Downloaded {
            url,
            bytes,
            reused_bytes,
            seconds,
            ..
        } => {
            let reused = match reused_bytes {
                Some(n) if *n > 0 => format!(
                    ", {} of it reused from an earlier partial download",
                    human_bytes(*n)
                ),
                _ => String::new(),
            };
            format!(
                "downloaded from {} ({} in {}{reused}) to {}{}",
                link(url),
                human_bytes(*bytes),
                human_seconds(*seconds),
                code(&record.path),
                received_by(record)
            )
        }
        RecordedOrigin::Received {
            node,
            from_node,
            url,
            bytes,
            seconds,
        } => {
            let what = match url {
                Some(url) => format!("the tarball it downloaded from {}", link(url)),
                None => "its installed copy".to_owned(),
            };
            format!(
                "received over MPI from node {}: {what} ({} in {}), installed to {} on node {}{}",
                code(from_node),
                human_bytes(*bytes),
                human_seconds(*seconds),
                code(&record.path),
                code(node),
                received_by(record)
            )
        }
    }
}

/// Which nodes' copies were received over MPI, when any were.
fn received_by(record: &ArtifactRecord) -> String {
    match record.received_by.len() {
        0 => String::new(),
        n => format!(
            "; copied over MPI into the node-local depots of {n} node{} ({})",
            if n == 1 { "" } else { "s" },
            record
                .received_by
                .iter()
                .map(|node| code(node))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn acknowledgements(out: &mut String, report: &Report) {
    let _ = writeln!(out, "## Acknowledgements\n");
    if report.artifacts.is_empty() {
        let _ = writeln!(
            out,
            "No dataset was accessed, so none needs acknowledging.\n"
        );
        return;
    }
    let mut texts: Vec<String> = Vec::new();
    let mut without: Vec<&str> = Vec::new();
    for record in &report.artifacts {
        match meta(&record.metadata, keys::ACKNOWLEDGEMENT) {
            Some(text) => {
                let text = with_final_period(&one_line(text));
                if !texts.contains(&text) {
                    texts.push(text);
                }
            }
            None => without.push(&record.name),
        }
    }
    if texts.is_empty() {
        let _ = writeln!(
            out,
            "None of the datasets used provides acknowledgement text.\n"
        );
    } else {
        let _ = writeln!(out, "{}\n", texts.join(" "));
    }
    if !without.is_empty() {
        let _ = writeln!(
            out,
            "No acknowledgement text is given for {} (no `{}` key in the manifest {}); check {} \
             license and source for attribution requirements before publishing.\n",
            name_list(&without),
            keys::ACKNOWLEDGEMENT,
            if without.len() == 1 {
                "entry"
            } else {
                "entries"
            },
            if without.len() == 1 { "its" } else { "their" },
        );
    }
}

fn references(out: &mut String, report: &Report) {
    let _ = writeln!(out, "## References\n");
    let bib = bibtex::Bibliography::build(report);
    let mut without: Vec<&str> = Vec::new();
    let mut any = false;
    for record in &report.artifacts {
        let citation = meta(&record.metadata, keys::CITATION).map(one_line);
        let doi = meta(&record.metadata, keys::DOI);
        let has_bibtex = meta(&record.metadata, keys::BIBTEX).is_some();
        let archived = archived_as(record);
        if citation.is_none() && doi.is_none() && !has_bibtex && archived.is_none() {
            without.push(&record.name);
            continue;
        }
        any = true;
        let mut line = format!("- {}:", code(&record.name));
        if let Some(citation) = &citation {
            let _ = write!(line, " {}", with_final_period(citation));
        }
        if let Some(doi) = doi {
            let doi = super::bare_doi(doi);
            let _ = write!(line, " DOI: [{doi}]({}).", doi_url(doi));
        }
        if let Some(archived) = &archived {
            let _ = write!(line, " {archived}");
        }
        let bib_keys = bib.keys_for(&record.name);
        if !bib_keys.is_empty() {
            let _ = write!(
                line,
                " BibTeX: {}.",
                bib_keys
                    .iter()
                    .map(|k| code(k))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        if has_bibtex && citation.is_none() && doi.is_none() && bib_keys.is_empty() {
            let _ = write!(
                line,
                " its `{}` value was left out of the BibTeX file (see the note there).",
                keys::BIBTEX
            );
        }
        let _ = writeln!(out, "{line}");
    }
    if any {
        out.push('\n');
    }
    if !without.is_empty() {
        let _ = writeln!(
            out,
            "No reference is given for {} (no `{}`, `{}` or `{}` key).\n",
            name_list(&without),
            keys::CITATION,
            keys::DOI,
            keys::BIBTEX,
        );
    } else if !any {
        let _ = writeln!(out, "No dataset was accessed.\n");
    }
}

/// "Archived as ..." with the archive record's DOIs (`archive-doi`, the version; and
/// `archive-concept-doi`, every version), when the entry has either.
fn archived_as(record: &ArtifactRecord) -> Option<String> {
    let link = |doi: &str| {
        let doi = super::bare_doi(doi);
        format!("[{doi}]({})", doi_url(doi))
    };
    let version = meta(&record.metadata, keys::ARCHIVE_DOI).map(link);
    let all = meta(&record.metadata, keys::ARCHIVE_CONCEPT_DOI).map(link);
    match (version, all) {
        (Some(v), Some(a)) => Some(format!(
            "Archived as {v} (this version; all versions: {a})."
        )),
        (Some(v), None) => Some(format!("Archived as {v} (this version).")),
        (None, Some(a)) => Some(format!("Archived as {a} (all versions).")),
        (None, None) => None,
    }
}

/// Where the datasets made by a recipe can be made again from, with their README's citation
/// section (recorded by the runtime as [`README_CITATION_KEY`]); nothing without recipes.
fn recipes(out: &mut String, report: &Report) {
    let with: Vec<(&ArtifactRecord, &str)> = report
        .artifacts
        .iter()
        .filter_map(|r| meta(&r.metadata, RECIPE_KEY).map(|k| (r, k)))
        .collect();
    if with.is_empty() {
        return;
    }
    let _ = writeln!(out, "## Recipes\n");
    let _ = writeln!(
        out,
        "These datasets can be made again by running their recipe (`clima-artifacts reproduce`); \
         recipe folders are relative to their manifest's folder:\n"
    );
    for (record, key) in with {
        let mut line = format!(
            "- {}: {} (manifest {}).",
            code(&record.name),
            code(key),
            code(&record.manifest)
        );
        if let Some(text) = meta(&record.metadata, README_CITATION_KEY) {
            let _ = write!(
                line,
                " Its README's \"{}\" section: {}",
                CITATION_SECTION.name,
                with_final_period(&one_line(text))
            );
        }
        let _ = writeln!(out, "{line}");
    }
    out.push('\n');
}

/// The metadata a complete entry should have; a reference may be any of citation, doi, bibtex.
fn missing_keys(record: &ArtifactRecord) -> Vec<String> {
    let has = |key: &str| meta(&record.metadata, key).is_some();
    let mut missing: Vec<String> = [
        keys::DESCRIPTION,
        keys::VERSION,
        keys::LICENSE,
        keys::ACKNOWLEDGEMENT,
    ]
    .into_iter()
    .filter(|k| !has(k))
    .map(|k| format!("`{k}`"))
    .collect();
    if !has(keys::CITATION) && !has(keys::DOI) && !has(keys::BIBTEX) {
        missing.push(format!(
            "a reference (`{}`, `{}` or `{}`)",
            keys::CITATION,
            keys::DOI,
            keys::BIBTEX
        ));
    }
    if !has(keys::SOURCE) {
        missing.push(format!("`{}`", keys::SOURCE));
    }
    missing
}

fn missing_metadata(out: &mut String, report: &Report) {
    let incomplete: Vec<(&ArtifactRecord, Vec<String>)> = report
        .artifacts
        .iter()
        .map(|r| (r, missing_keys(r)))
        .filter(|(_, missing)| !missing.is_empty())
        .collect();
    if incomplete.is_empty() {
        return;
    }
    let _ = writeln!(out, "## Missing metadata\n");
    let _ = writeln!(
        out,
        "Add these keys to the artifact entries so future reports are complete:\n"
    );
    for (record, missing) in incomplete {
        let no_metadata = !keys::KEYS
            .iter()
            .any(|k| meta(&record.metadata, k).is_some());
        let _ = writeln!(
            out,
            "- {} in {}: {}{}.",
            code(&record.name),
            code(&record.manifest),
            if no_metadata {
                "no provenance metadata at all; missing "
            } else {
                "missing "
            },
            missing.join(", "),
        );
    }
    out.push('\n');
}

fn access_details(out: &mut String, report: &Report) {
    if report.artifacts.is_empty() {
        return;
    }
    let _ = writeln!(out, "## Access details\n");
    let _ = writeln!(
        out,
        "| Dataset | git-tree-sha1 | Accesses | Ranks | First access | Call sites |\n\
         |---|---|---|---|---|---|"
    );
    for record in &report.artifacts {
        let sites = if record.call_sites.is_empty() {
            "*none recorded*".to_owned()
        } else {
            record
                .call_sites
                .iter()
                .map(|s| code(&s.to_string()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(
            out,
            "| {} | `{}` | {} | {} | {} | {} |",
            code(&record.name),
            record.git_tree_sha1,
            record.accesses,
            rank_ranges(&record.ranks),
            record.first_access,
            table_cell_raw(&sites),
        );
    }
    out.push('\n');
}

fn declared_not_accessed(out: &mut String, report: &Report) {
    if report.declared_not_accessed.is_empty() {
        return;
    }
    let _ = writeln!(out, "## Declared but not accessed\n");
    let _ = writeln!(
        out,
        "The binary can use these datasets, but this run did not:\n"
    );
    for declared in &report.declared_not_accessed {
        let sites = declared
            .call_sites
            .iter()
            .map(|s| code(&s.to_string()))
            .collect::<Vec<_>>()
            .join(", ");
        let hashes = declared
            .git_tree_sha1s
            .iter()
            .map(|h| format!("`{h}`"))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(
            out,
            "- {} from {}{}{}{}",
            code(&declared.name),
            code(&declared.manifest),
            if hashes.is_empty() {
                String::new()
            } else {
                format!(" ({hashes})")
            },
            if declared.lazy { ", lazy" } else { "" },
            if sites.is_empty() {
                String::new()
            } else {
                format!(", declared at {sites}")
            }
        );
    }
    out.push('\n');
}

/// `a`, `a` and `b`, `a`, `b` and `c`.
fn name_list(names: &[&str]) -> String {
    let coded: Vec<String> = names.iter().map(|n| code(n)).collect();
    match coded.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// Ranks as compact ranges: `0-3, 5`.
fn rank_ranges(ranks: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ranks.len() {
        let start = ranks[i];
        let mut end = start;
        while i + 1 < ranks.len() && ranks[i + 1] == end + 1 {
            i += 1;
            end = ranks[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(", ")
}

/// A URL as a Markdown autolink when it is absolute (`scheme://...` without spaces or angle
/// brackets), otherwise as inline code (relative paths are not links in Markdown).
fn link(url: &str) -> String {
    let url = one_line(url);
    let absolute = url.split_once("://").is_some_and(|(scheme, _)| {
        !scheme.is_empty()
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    });
    if absolute && !url.contains([' ', '<', '>']) {
        format!("<{url}>")
    } else {
        code(&url)
    }
}

/// The text with a period appended unless it already ends a sentence.
fn with_final_period(text: &str) -> String {
    if text.ends_with(['.', '!', '?']) {
        text.to_owned()
    } else {
        format!("{text}.")
    }
}

/// Seconds with two decimals; `<0.01 s` for very short times.
fn human_seconds(seconds: f64) -> String {
    if seconds < 0.005 {
        "<0.01 s".to_owned()
    } else {
        format!("{seconds:.2} s")
    }
}

/// Inline code that survives backticks in the text and is safe inside a table cell.
fn code(text: &str) -> String {
    let text = one_line(text);
    if text.contains('`') {
        format!("`` {text} ``")
    } else {
        format!("`{text}`")
    }
}

/// Plain text made safe for a table cell: one line, pipes escaped.
fn table_cell(text: &str) -> String {
    table_cell_raw(&one_line(text))
}

/// Escapes the pipes of an already formatted cell.
fn table_cell_raw(text: &str) -> String {
    text.replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers() {
        assert_eq!(rank_ranges(&[0, 1, 2, 3, 5, 7, 8]), "0-3, 5, 7-8");
        assert_eq!(rank_ranges(&[]), "");
        assert_eq!(name_list(&["a"]), "`a`");
        assert_eq!(name_list(&["a", "b", "c"]), "`a`, `b` and `c`");
        assert_eq!(code("a`b"), "`` a`b ``");
        assert_eq!(table_cell("x |\n y"), "x \\| y");
        assert_eq!(link("https://x.org/a b"), "`https://x.org/a b`");
        assert_eq!(link("https://x.org/a.tar.gz"), "<https://x.org/a.tar.gz>");
        assert_eq!(link("file:///data/a.tar.gz"), "<file:///data/a.tar.gz>");
        assert_eq!(link("data/forcing.tar.gz"), "`data/forcing.tar.gz`");
        assert_eq!(with_final_period("A (2020)"), "A (2020).");
        assert_eq!(with_final_period("Really?"), "Really?");
        assert_eq!(human_seconds(0.001), "<0.01 s");
        assert_eq!(human_seconds(3.25), "3.25 s");
        assert_eq!(human_bytes(1536), "1.5 KiB");
    }
}
