//! No import circle between the modules of a crate (issue 36): in every crate of the
//! workspace, the top-level modules of `src/` (a file or a folder each; the CLI's `cmd/`
//! counts each command apart) import one another without a cycle. A module "imports" another
//! when its non-test code outside comments names `crate::other` (or `super::other` inside
//! `cmd/`). A circle listed in `KNOWN` with
//! the reason it stays passes (none is); a new one fails.

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

/// The code of `path` that counts: before any `#[cfg(test)]`, without comment lines.
fn code_of(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let text = text.split("#[cfg(test)]").next().unwrap_or("");
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Identifiers following `prefix` in `code` (`crate::a`, and each item of `crate::{a, b}`).
fn names_after(code: &str, prefix: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = BTreeSet::new();
    for (at, _) in code.match_indices(prefix) {
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
                    for m in names_after(&code, "crate::cmd::")
                        .into_iter()
                        .chain(names_after(&code, "super::"))
                    {
                        used.insert(format!("cmd::{m}"));
                    }
                    format!("cmd::{file}")
                }
                [first, ..] => {
                    if first == "cmd" {
                        for m in names_after(&code, "crate::cmd::") {
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
