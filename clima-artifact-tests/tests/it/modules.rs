//! No import circle between the modules of a crate (issue 36): in every crate of the
//! workspace, the top-level modules of `src/` (a file or a folder each; the CLI's `cmd/`
//! counts each command apart) import one another without a cycle. A module "imports" another
//! when its non-test code outside comments names `crate::other` (or, inside `cmd/`,
//! `super::other`, `crate::cmd::other` or a bare `cmd::other`): an item under `#[cfg(test)]` (a module, inline or in a file of its own, or any
//! single item) does not count, and what follows it does. A circle listed in `KNOWN` with the
//! reason it stays passes (none is); a new one fails.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// (crate, modules of the circle, sorted): kept on purpose, each with the reason. None today.
const KNOWN: &[(&str, &[&str])] = &[];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The code of `path` that counts (see [`code_in`]).
fn code_of(path: &Path) -> String {
    code_in(&std::fs::read_to_string(path).unwrap())
}

/// The code of `text` that counts: without its `#[cfg(test)]` items, without comment lines.
fn code_in(text: &str) -> String {
    without_tests(text)
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

const TEST_ONLY: &str = "#[cfg(test)]";

/// `text` without the items that `#[cfg(test)]` (outside strings and comments) marks.
fn without_tests(text: &str) -> String {
    let (mut out, mut kept, mut i) = (String::new(), 0, 0);
    while i < text.len() {
        if let Some(end) = literal_end(text, i) {
            i = end;
        } else if text[i..].starts_with(TEST_ONLY) {
            out.push_str(&text[kept..i]);
            i = item_end(text, i + TEST_ONLY.len());
            kept = i;
        } else {
            i += next_len(text, i);
        }
    }
    out.push_str(&text[kept..]);
    out
}

/// The byte length of the character at `at` of `text`.
fn next_len(text: &str, at: usize) -> usize {
    text[at..].chars().next().map_or(1, char::len_utf8)
}

/// Just past the item that starts at `from` (its further attributes included): its first
/// `;` or `,` outside brackets, or the `}` that closes its first brace; or before a `}` that
/// closes what holds it.
fn item_end(text: &str, from: usize) -> usize {
    let (mut depth, mut i) = (0usize, from);
    while i < text.len() {
        if let Some(end) = literal_end(text, i) {
            i = end;
            continue;
        }
        match text.as_bytes()[i] {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' => depth = depth.saturating_sub(1),
            b'}' if depth == 0 => return i,
            b'}' if depth == 1 => return i + 1,
            b'}' => depth -= 1,
            b';' | b',' if depth == 0 => return i + 1,
            _ => {}
        }
        i += next_len(text, i);
    }
    text.len()
}

/// Just past the string, character literal or comment that starts at `at` of `text`, if
/// one does (a lifetime is none).
fn literal_end(text: &str, at: usize) -> Option<usize> {
    let (b, rest) = (text.as_bytes(), &text[at..]);
    let to = |found: Option<usize>, from: usize, len: usize| {
        found.map_or(text.len(), |n| from + n + len)
    };
    if rest.starts_with("//") {
        return Some(to(rest.find('\n'), at, 0));
    }
    if let Some(body) = rest.strip_prefix("/*") {
        return Some(to(body.find("*/"), at + 2, 2));
    }
    let after_ident = at > 0 && (b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_');
    let raw = ["r", "br"].into_iter().find(|p| rest.starts_with(p));
    if let (false, Some(p)) = (after_ident, raw) {
        let hashes = rest[p.len()..].bytes().take_while(|&c| c == b'#').count();
        if rest.as_bytes().get(p.len() + hashes) == Some(&b'"') {
            let body = at + p.len() + hashes + 1;
            let close = format!("\"{}", "#".repeat(hashes));
            return Some(to(text[body..].find(&close), body, close.len()));
        }
    }
    match b[at] {
        b'"' => {
            let mut i = at + 1;
            while i < b.len() {
                match b[i] {
                    b'\\' => i += 2,
                    b'"' => return Some(i + 1),
                    _ => i += 1,
                }
            }
            Some(text.len())
        }
        // `'\''`, `'\u{7b}'`: the escaped character, then up to the closing quote.
        b'\'' if b.get(at + 1) == Some(&b'\\') => {
            let from = (at + 3).min(text.len());
            Some(to(text[from..].find('\''), from, 1))
        }
        b'\'' => {
            let end = at + 1 + text[at + 1..].chars().next()?.len_utf8();
            (b.get(end) == Some(&b'\'')).then_some(end + 1)
        }
        _ => None,
    }
}

/// Identifiers following `prefix` in `code` (`crate::a`, and each item of `crate::{a, b}`),
/// where `prefix` starts a path segment (`cmd::` in `cmd::a` or `crate::cmd::a`, not in
/// `subcmd::a`).
fn names_after(code: &str, prefix: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = BTreeSet::new();
    for (at, _) in code.match_indices(prefix) {
        let within_a_name = code[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        if within_a_name {
            continue;
        }
        let rest = &code[at + prefix.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // The items of the group at its own depth: `{a::{b, c}, d}` -> `a`, `d`.
            let (mut depth, mut start) = (0usize, 0usize);
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        out.insert(ident(group[start..i].trim()));
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.insert(ident(group[start..i].trim()));
                        start = i + 1;
                    }
                    _ => {}
                }
            }
        } else {
            out.insert(ident(rest));
        }
    }
    out.retain(|n| n.chars().next().is_some_and(|c| c.is_ascii_lowercase()));
    out
}

/// Module -> the modules it imports, for the crate whose sources are in `src`.
fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut uses: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel: Vec<String> = path
                .strip_prefix(src)
                .unwrap()
                .with_extension("")
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect();
            let code = code_of(&path);
            let mut used = names_after(&code, "crate::");
            let module = match rel.as_slice() {
                [one] if one == "lib" || one == "main" => "<root>".to_owned(),
                [cmd, file, ..] if cmd == "cmd" && file != "mod" => {
                    // `cmd::x` covers `crate::cmd::x` and a bare `cmd::x` after `use crate::cmd`.
                    for m in names_after(&code, "cmd::")
                        .into_iter()
                        .chain(names_after(&code, "super::"))
                    {
                        used.insert(format!("cmd::{m}"));
                    }
                    format!("cmd::{file}")
                }
                [first, ..] => {
                    if first == "cmd" {
                        for m in names_after(&code, "cmd::") {
                            used.insert(format!("cmd::{m}"));
                        }
                    }
                    first.clone()
                }
                [] => continue,
            };
            uses.entry(module).or_default().extend(used);
        }
    }
    let names: BTreeSet<String> = uses.keys().cloned().collect();
    uses.iter()
        .map(|(m, u)| {
            let u = u
                .iter()
                .filter(|x| *x != m && names.contains(*x))
                .cloned()
                .collect();
            (m.clone(), u)
        })
        .collect()
}

/// The strongly connected components of more than one module (Tarjan), each sorted.
fn circles(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        let g = s.g;
        for w in g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.stack.contains(&w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut part = Vec::new();
            while let Some(w) = s.stack.pop() {
                part.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            if part.len() > 1 {
                part.sort();
                s.out.push(part);
            }
        }
    }
    let mut s = State {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

#[test]
fn no_crate_has_an_import_circle_between_its_modules() {
    let root = repo();
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&root).unwrap() {
        let dir = entry.unwrap().path();
        let src = dir.join("src");
        if !dir.join("Cargo.toml").is_file() || !src.is_dir() {
            continue;
        }
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        for circle in circles(&graph(&src)) {
            let known = KNOWN.iter().any(|(c, m)| {
                *c == name && m.iter().copied().eq(circle.iter().map(String::as_str))
            });
            if !known {
                found.push(format!("{name}: {}", circle.join(" <-> ")));
            }
        }
    }
    assert!(
        found.is_empty(),
        "import circles between modules (move what both need into a module of its own):\n{}",
        found.join("\n")
    );
}

#[test]
fn a_circle_is_found_and_a_chain_is_not() {
    let g = |edges: &[(&str, &str)]| {
        let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, b) in edges {
            g.entry((*a).to_owned())
                .or_default()
                .insert((*b).to_owned());
            g.entry((*b).to_owned()).or_default();
        }
        g
    };
    assert_eq!(
        circles(&g(&[
            ("depot", "install"),
            ("install", "depot"),
            ("lib", "depot")
        ])),
        [["depot".to_owned(), "install".to_owned()]]
    );
    assert!(circles(&g(&[("install", "depot"), ("depot", "installed")])).is_empty());
    assert_eq!(
        names_after("use crate::{depot::{self, lookup}, install};", "crate::"),
        ["depot".to_owned(), "install".to_owned()]
            .into_iter()
            .collect()
    );
}

#[test]
fn a_circle_through_a_bare_cmd_path_is_found() {
    // The CLI's `create` called `cmd::guided::ask` (after `use crate::cmd`), and `guided` used
    // `crate::cmd::create::Plan`: a circle, though one side names no `crate::cmd::guided`.
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    std::fs::create_dir_all(src.join("cmd")).unwrap();
    let write = |rel: &str, text: &str| std::fs::write(src.join(rel), text).unwrap();
    write("main.rs", "mod cmd;\nfn main() { cmd::create::run() }\n");
    write(
        "cmd/mod.rs",
        "pub mod create;\npub mod guided;\npub mod plan;\n",
    );
    write(
        "cmd/create.rs",
        "use crate::cmd;\npub fn run() { let _ = cmd::guided::ask(); }\n",
    );
    write(
        "cmd/guided.rs",
        "use crate::cmd::create::Plan;\npub fn ask() -> Plan { Plan }\n",
    );
    write("cmd/plan.rs", "pub struct Plan;\n");
    assert_eq!(
        circles(&graph(&src)),
        [["cmd::create".to_owned(), "cmd::guided".to_owned()]]
    );
    // What both need in a module of their own: no circle.
    write(
        "cmd/guided.rs",
        "use crate::cmd::plan::Plan;\npub fn ask() -> Plan { Plan }\n",
    );
    assert!(circles(&graph(&src)).is_empty());
    // A name that merely ends in `cmd` is no path to `cmd`.
    assert!(names_after("fn f() { subcmd::guided(); my_cmd::x(); }", "cmd::").is_empty());
}

#[test]
fn code_after_a_test_item_counts_and_the_test_item_does_not() {
    let text = r##"use crate::a;
#[cfg(test)]
mod t {
    use crate::b;
    fn f<'x>(s: &'x str) { let _ = ("}", '{', '\'', '}', r"}", s); }
}
use crate::other;
#[cfg(test)]
use crate::{c, d};
#[cfg(test)]
#[allow(dead_code)]
mod u;
// #[cfg(test)] in a comment hides nothing
const S: &str = "#[cfg(test)]";
struct K {
    #[cfg(test)]
    e: crate::e::E,
    f: crate::f::F,
}
#[cfg(test)]
fn g() -> [u8; 2] { crate::g::two() }
fn h() { crate::last::h() }
"##;
    let names = names_after(&code_in(text), "crate::");
    assert_eq!(
        names,
        ["a", "f", "last", "other"]
            .into_iter()
            .map(str::to_owned)
            .collect(),
        "{}",
        code_in(text)
    );
}
