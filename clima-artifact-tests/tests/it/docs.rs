//! The README and the `docs/` pages against the code they describe: the dev-profile block a
//! model copies is `clima-artifact-build/dev-profile.toml` (that this workspace holds the same
//! block is clima-artifact-build's `this_workspace_optimises_what_the_block_names`),
//! the table of environment variables is the one `clima-artifact-vars` renders, the stated Rust
//! version is the workspace's `rust-version`, the README's set-up commands are the two it
//! promises, and every relative link (with its `#anchor`) leads somewhere.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn read(relative: &str) -> String {
    let path = repo().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The fenced code blocks of a Markdown text: (info string, body).
fn code_blocks(text: &str) -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    let mut open: Option<(String, String)> = None;
    for line in text.lines() {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(info)) => open = Some((info.trim().to_owned(), String::new())),
            (Some(_), Some(_)) => blocks.push(open.take().unwrap()),
            (Some((_, body)), None) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, None) => {}
        }
    }
    blocks
}

/// The text of the `## heading` section (up to the next `## `).
fn section<'a>(text: &'a str, heading: &str) -> &'a str {
    text.split(&format!("\n## {heading}\n"))
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .unwrap_or_else(|| panic!("no section `## {heading}`"))
}

fn toml_table(text: &str, what: &str) -> toml::Table {
    text.parse()
        .unwrap_or_else(|e| panic!("{what} is not valid TOML: {e}"))
}

#[test]
fn the_readme_profile_block_is_dev_profile_toml() {
    let profile = read("clima-artifact-build/dev-profile.toml");
    let readme = read("README.md");
    let blocks: Vec<String> = code_blocks(section(&readme, "Using it in a model"))
        .into_iter()
        .filter(|(info, body)| info == "toml" && body.contains("[profile.dev.package"))
        .map(|(_, body)| body)
        .collect();
    assert_eq!(
        blocks,
        [profile],
        "the README's \"Using it in a model\" must show clima-artifact-build/dev-profile.toml \
         exactly, once"
    );
}

#[test]
fn the_environment_page_is_the_table_of_clima_artifact_vars() {
    let page = read("docs/environment.md");
    let lines: Vec<&str> = page.lines().collect();
    let first = lines
        .iter()
        .position(|l| l.starts_with("| variable |"))
        .expect("docs/environment.md has a table starting `| variable |`");
    let table: String = lines[first..]
        .iter()
        .take_while(|l| l.starts_with('|'))
        .map(|l| format!("{l}\n"))
        .collect();
    let fresh = clima_artifact_vars::markdown_table();
    if table != fresh {
        let stale = table
            .lines()
            .zip(fresh.lines())
            .find(|(a, b)| a != b)
            .map_or("(a row was added or removed)".to_owned(), |(a, b)| {
                format!("page: {a}\ncode: {b}")
            });
        panic!(
            "docs/environment.md is stale (first difference:\n{stale})\nregenerate it with: \
             cargo run -q -p clima-artifact-vars --example environment-table -- \
             docs/environment.md"
        );
    }
}

#[test]
fn the_readme_states_the_workspace_rust_version() {
    let cargo = toml_table(&read("Cargo.toml"), "Cargo.toml");
    let version = cargo["workspace"]["package"]["rust-version"]
        .as_str()
        .unwrap()
        .to_owned();
    let readme = read("README.md");
    assert!(
        readme.contains(&format!("Needs Rust {version} or later")),
        "the README must say `Needs Rust {version} or later` (rust-version in Cargo.toml)"
    );
}

#[test]
fn the_readme_is_short_and_has_the_two_set_up_commands() {
    let readme = read("README.md");
    let lines = readme.lines().count();
    assert!(
        lines <= 170,
        "the README has {lines} lines: keep it to about 150 and move details into docs/"
    );
    let commands: Vec<String> = code_blocks(section(&readme, "Set-up commands"))
        .into_iter()
        .filter(|(info, _)| info == "sh")
        .map(|(_, body)| body)
        .collect();
    assert_eq!(
        commands,
        ["cargo run -p quickstart\n", "./scripts/test.sh\n"]
    );
}

/// Every `.rs` file under `dir`, recursively, appended to `out`.
fn sources(dir: &Path, out: &mut String) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push_str(&std::fs::read_to_string(&path).unwrap());
        }
    }
}

#[test]
fn the_troubleshooting_errors_quote_the_code() {
    let readme = read("README.md");
    let entries: Vec<&str> = section(&readme, "Troubleshooting")
        .lines()
        .filter(|l| l.starts_with("- **"))
        .collect();
    assert_eq!(entries.len(), 10, "ten errors, one line each: {entries:#?}");
    let mut code = String::new();
    for entry in std::fs::read_dir(repo()).unwrap() {
        let src = entry.unwrap().path().join("src");
        if src.is_dir() {
            sources(&src, &mut code);
        }
    }
    // Messages name environment variables through clima-artifact-vars' constants
    // (`{OFFLINE}` for `CLIMA_ARTIFACTS_OFFLINE`): read them as the user does.
    let vars = read("clima-artifact-vars/src/lib.rs");
    for line in vars.lines() {
        if let Some((ident, rest)) = line.trim().split_once(" = \"")
            && let Some((name, _)) = rest.split_once('"')
            && ident.chars().all(|c| c.is_ascii_uppercase() || c == '_')
        {
            code = code.replace(&format!("{{{ident}}}"), name);
        }
    }
    let mut unquoted = Vec::new();
    for entry in entries {
        // The quoted messages are the code spans before the first `**: `.
        let head = entry.split("**: ").next().unwrap();
        for (i, span) in head.split('`').enumerate() {
            if i % 2 == 0 {
                continue;
            }
            for piece in span.split("...").map(str::trim) {
                if piece.len() > 3 && !code.contains(piece) {
                    unquoted.push(format!("`{piece}` (from `{span}`)"));
                }
            }
        }
    }
    assert!(
        unquoted.is_empty(),
        "README troubleshooting quotes text no error message has:\n{}",
        unquoted.join("\n")
    );
}

/// GitHub's anchor of a heading: lower case, spaces to `-`, other punctuation dropped.
fn anchor(heading: &str) -> String {
    heading
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c.to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}

/// The lines of a Markdown text outside fenced code blocks.
fn prose_lines(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|line| {
            if line.starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// The anchors of a Markdown file's headings (outside code blocks).
fn anchors(text: &str) -> BTreeSet<String> {
    prose_lines(text)
        .into_iter()
        .filter(|line| line.starts_with('#'))
        .map(|line| anchor(line.trim_start_matches('#').trim()))
        .collect()
}

/// The targets of the inline links `[text](target)` of a Markdown text, outside code blocks
/// and code spans.
fn link_targets(text: &str) -> Vec<String> {
    let mut targets = Vec::new();
    for line in prose_lines(text) {
        // Drop code spans: every other piece between backticks.
        let prose: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            if let Some(end) = rest.find(')') {
                targets.push(rest[..end].to_owned());
                rest = &rest[end..];
            }
        }
    }
    targets
}

#[test]
fn every_relative_link_of_the_readme_and_docs_resolves() {
    let mut pages = vec![repo().join("README.md")];
    for entry in std::fs::read_dir(repo().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            pages.push(path);
        }
    }
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        for target in link_targets(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (file, fragment) = target.split_once('#').unwrap_or((&target, ""));
            let resolved = match file {
                "" => page.clone(),
                file => page.parent().unwrap().join(file),
            };
            let shown = page.strip_prefix(repo()).unwrap().display();
            if !resolved.exists() {
                broken.push(format!("{shown}: `{target}`: no such file"));
                continue;
            }
            if !fragment.is_empty() {
                let linked = std::fs::read_to_string(&resolved).unwrap_or_default();
                if !anchors(&linked).contains(fragment) {
                    broken.push(format!("{shown}: `{target}`: no heading with that anchor"));
                }
            }
        }
    }
    assert!(
        checked > 20,
        "only {checked} links found: is the parser broken?"
    );
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn link_and_anchor_parsing() {
    assert_eq!(
        anchor("Several connections, and downloads that continue in the next job"),
        "several-connections-and-downloads-that-continue-in-the-next-job"
    );
    assert_eq!(anchor("Cleaning a depot: gc"), "cleaning-a-depot-gc");
    assert_eq!(
        link_targets(
            "see [a](a.md#x) and `[b](not-a-link)` and [c](https://e.org)\n```\n[d](e)\n```\n"
        ),
        ["a.md#x", "https://e.org"]
    );
}
