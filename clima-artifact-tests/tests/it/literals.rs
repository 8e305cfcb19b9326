//! Names that have one home (issue 36, items 3 and 5): the environment variables are spelled
//! only in `clima-artifact-vars`, and the names of the files and folders in a depot only in
//! `clima-artifact-manifest/src/layout.rs`. Everything else takes them from there, so renaming
//! one is a one-line change and a grep for a name finds its one definition.
//!
//! Only string literals of non-test code count: comments and docs may name a variable or a
//! file, and tests may spell what they check. The scan reads every `.rs` file of the members'
//! `src/` folders and build scripts, skipping `tests.rs` files, `tests/` folders and `#[cfg(test)]` items.

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A string literal of non-test code: where it is, and its text (as written, escapes kept).
struct Literal {
    file: PathBuf,
    line: usize,
    text: String,
}

/// The string literals of `src` outside comments and `#[cfg(test)]` items.
fn literals_of(src: &str) -> Vec<(usize, String)> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    // The brace depth, and the depth at which a `#[cfg(test)]` item's block began (skipped
    // until it closes); `pending` is set between the attribute and its item's `{` or `;`.
    let (mut depth, mut skip_from, mut pending) = (0usize, None::<usize>, false);
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    while i < b.len() {
        let c = b[i];
        let rest = &src[i..];
        if c == b'\n' {
            line += 1;
            i += 1;
        } else if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
        } else if rest.starts_with("/*") {
            let mut nest = 0;
            while i < b.len() {
                if src[i..].starts_with("/*") {
                    nest += 1;
                    i += 2;
                } else if src[i..].starts_with("*/") {
                    nest -= 1;
                    i += 2;
                    if nest == 0 {
                        break;
                    }
                } else {
                    line += usize::from(b[i] == b'\n');
                    i += 1;
                }
            }
        } else if rest.starts_with("#[cfg(test)]") {
            pending = true;
            i += "#[cfg(test)]".len();
        } else if c == b'"' || ((c == b'r' || c == b'b' || c == b'c') && is_raw_start(rest)) {
            let start_line = line;
            let (text, len) = string_at(rest);
            line += rest[..len].matches('\n').count();
            if skip_from.is_none() && !pending {
                out.push((start_line, text));
            }
            i += len;
        } else if c == b'\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if rest[1..].starts_with('\\') {
                i += 2 + rest[2..].find('\'').map_or(rest.len() - 2, |e| e + 1);
            } else {
                let ch = rest[1..].chars().next().map_or(0, char::len_utf8);
                i += if rest[1 + ch..].starts_with('\'') {
                    ch + 2
                } else {
                    1
                };
            }
        } else if ident(c) {
            let end = rest.find(|ch: char| !(ch.is_alphanumeric() || ch == '_'));
            i += end.unwrap_or(rest.len());
        } else {
            match c {
                b'{' => {
                    if pending {
                        pending = false;
                        skip_from.get_or_insert(depth);
                    }
                    depth += 1;
                }
                b'}' => {
                    depth = depth.saturating_sub(1);
                    if skip_from == Some(depth) {
                        skip_from = None;
                    }
                }
                b';' if pending => pending = false,
                _ => {}
            }
            i += 1;
        }
    }
    out
}

/// Whether `rest` (at an `r`, `b` or `c`) starts a raw or byte string literal.
fn is_raw_start(rest: &str) -> bool {
    let t = rest.trim_start_matches(['b', 'c']);
    let t = t.strip_prefix('r').unwrap_or(t);
    let prefix = rest.len() - t.len();
    (1..=2).contains(&prefix) && t.trim_start_matches('#').starts_with('"')
}

/// The text of the string literal at the start of `rest` and its length in the source.
fn string_at(rest: &str) -> (String, usize) {
    let open = rest.find('"').unwrap();
    let hashes = rest[..open].matches('#').count();
    let raw = rest[..open].contains('r');
    let body = &rest[open + 1..];
    if raw {
        let close = format!("\"{}", "#".repeat(hashes));
        let end = body.find(&close).unwrap_or(body.len());
        return (body[..end].to_owned(), open + 1 + end + close.len());
    }
    let mut escaped = false;
    for (k, ch) in body.char_indices() {
        match ch {
            '\\' if !escaped => escaped = true,
            '"' if !escaped => return (body[..k].to_owned(), open + 1 + k + 1),
            _ => escaped = false,
        }
    }
    (body.to_owned(), rest.len())
}

/// Every string literal of the workspace's non-test Rust code, crate by crate (the test
/// support crate is test code throughout).
fn workspace_literals() -> Vec<Literal> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let kind = entry.file_type().unwrap();
            // A unit-test module is `tests.rs` and the folder of its submodules `tests/`
            // (the rule of file_sizes.rs too).
            if kind.is_dir() {
                if entry.file_name() != "tests" {
                    walk(&path, out);
                }
            } else if path.extension().is_some_and(|e| e == "rs") && entry.file_name() != "tests.rs"
            {
                out.push(path);
            }
        }
    }
    let root = repo();
    let mut files = Vec::new();
    let mut members: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("Cargo.toml").is_file())
        .collect();
    members.extend(
        std::fs::read_dir(root.join("examples"))
            .unwrap()
            .flatten()
            .map(|e| e.path()),
    );
    for member in members {
        if member.ends_with("clima-artifact-tests") {
            continue;
        }
        walk(&member.join("src"), &mut files);
        if member.join("build.rs").is_file() {
            files.push(member.join("build.rs"));
        }
    }
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let src = std::fs::read_to_string(&file).unwrap();
        for (line, text) in literals_of(&src) {
            out.push(Literal {
                file: file.strip_prefix(&root).unwrap().to_path_buf(),
                line,
                text,
            });
        }
    }
    out
}

fn listing(found: &[&Literal]) -> String {
    found
        .iter()
        .map(|l| format!("  {}:{}: \"{}\"\n", l.file.display(), l.line, l.text))
        .collect()
}

#[test]
fn environment_variables_are_spelled_only_in_clima_artifact_vars() {
    let all = workspace_literals();
    let found: Vec<&Literal> = all
        .iter()
        .filter(|l| !l.file.starts_with("clima-artifact-vars"))
        .filter(|l| {
            l.text.match_indices("CLIMA_").any(|(at, _)| {
                l.text[at + 6..]
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_uppercase())
            })
        })
        .collect();
    assert!(
        found.is_empty(),
        "name these through clima_artifact_vars (a constant, or a typed limit the caller \
         words), not as literals:\n{}",
        listing(&found)
    );
}

/// The names of a depot's files and folders, as literals would spell them (whole, or as the
/// start of a generated name).
const DEPOT_NAMES: &[&str] = &[
    "artifacts",
    "logs",
    "Overrides.toml",
    "artifact_usage.toml",
    "orphaned.toml",
    ".locks",
    ".partial-",
    ".gc-",
    ".clima-install-",
    ".probe-",
    ".git-tree-sha256",
    ".clima-record-",
    ".clima-pending-",
];

const LAYOUT: &str = "clima-artifact-manifest/src/layout.rs";

#[test]
fn the_names_in_a_depot_are_spelled_in_one_file() {
    let all = workspace_literals();
    let found: Vec<&Literal> = all
        .iter()
        .filter(|l| !l.file.ends_with(LAYOUT))
        .filter(|l| {
            DEPOT_NAMES.iter().any(|n| {
                l.text == *n
                    || (n.ends_with('-') && l.text.starts_with(n))
                    || l.text.ends_with(&format!("/{n}"))
                    || l.text.starts_with(&format!("{n}/"))
            })
        })
        .collect();
    assert!(
        found.is_empty(),
        "take these from clima_artifact_manifest::layout:\n{}",
        listing(&found)
    );
    let layout = std::fs::read_to_string(repo().join(LAYOUT)).unwrap();
    let defined: Vec<String> = literals_of(&layout).into_iter().map(|(_, t)| t).collect();
    for name in DEPOT_NAMES {
        assert!(defined.iter().any(|t| t == name), "{LAYOUT} lacks {name}");
    }
}

/// The scanner itself: comments, raw strings, chars, lifetimes and test items.
#[test]
fn the_literal_scanner_reads_rust_as_rust() {
    let src = r####"
// "in a comment"
/* "block /* nested */ comment" */
fn f<'a>(x: &'a str) -> char { let _ = "one"; let _ = r#"two "quoted""#; '"' }
const C: char = '\'';
#[cfg(test)]
mod tests { fn g() { let _ = "in a test"; { "deeper" }; } }
#[cfg(test)]
use std::fmt;
static S: &[u8] = b"three";
"####;
    let got: Vec<String> = literals_of(src).into_iter().map(|(_, t)| t).collect();
    assert_eq!(got, ["one", "two \"quoted\"", "three"]);
    assert_eq!(literals_of("\n\n\"x\"")[0].0, 3);
}
