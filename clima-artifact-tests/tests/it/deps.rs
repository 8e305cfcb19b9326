//! No dependency is declared and unused (issue 36, item 5): every `[workspace.dependencies]`
//! entry is taken by some member, and every dependency a member declares is named in its own
//! Rust sources (`name` or `name::`, dashes as underscores). A dependency that only turns on a
//! feature for another crate would say so in a comment beside it and be listed in `ALLOWED`.

use std::path::{Path, PathBuf};

/// (member, dependency) pairs kept on purpose although no source names them.
const ALLOWED: &[(&str, &str)] = &[];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn toml_of(path: &Path) -> toml::Table {
    let text = std::fs::read_to_string(path).unwrap();
    toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The text of every `.rs` file below `dir`, skipping `target` folders.
fn sources(dir: &Path, out: &mut String) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let path = entry.path();
        let kind = entry.file_type().unwrap();
        if kind.is_dir() && entry.file_name() != "target" {
            sources(&path, out);
        } else if kind.is_file() && path.extension().is_some_and(|e| e == "rs") {
            out.push_str(&std::fs::read_to_string(&path).unwrap());
            out.push('\n');
        }
    }
}

/// Whether `text` names the crate `name` as an identifier.
fn names(text: &str, name: &str) -> bool {
    text.match_indices(name).any(|(at, _)| {
        let ident = |c: char| c.is_alphanumeric() || c == '_';
        let before = text[..at].chars().next_back().is_none_or(|c| !ident(c));
        let after = text[at + name.len()..]
            .chars()
            .next()
            .is_none_or(|c| !ident(c));
        before && after
    })
}

fn declared(table: &toml::Table) -> Vec<String> {
    let mut deps = Vec::new();
    let mut take = |t: &toml::Table| {
        for section in ["dependencies", "dev-dependencies", "build-dependencies"] {
            if let Some(d) = t.get(section).and_then(|d| d.as_table()) {
                deps.extend(d.keys().cloned());
            }
        }
    };
    take(table);
    if let Some(targets) = table.get("target").and_then(|t| t.as_table()) {
        for t in targets.values().filter_map(|t| t.as_table()) {
            take(t);
        }
    }
    deps
}

#[test]
fn no_dependency_is_declared_and_unused() {
    let root = repo();
    let workspace = toml_of(&root.join("Cargo.toml"));
    let ws = workspace["workspace"].as_table().unwrap();
    let members: Vec<&str> = ws["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    let mut problems = Vec::new();
    let mut taken = std::collections::BTreeSet::new();
    for member in &members {
        let dir = root.join(member);
        let mut text = String::new();
        sources(&dir, &mut text);
        for dep in declared(&toml_of(&dir.join("Cargo.toml"))) {
            taken.insert(dep.clone());
            let allowed = ALLOWED.contains(&(*member, dep.as_str()));
            if !allowed && !names(&text, &dep.replace('-', "_")) {
                problems.push(format!(
                    "{member}/Cargo.toml declares `{dep}`, which no source names"
                ));
            }
        }
    }
    for dep in ws["dependencies"].as_table().unwrap().keys() {
        if !taken.contains(dep) {
            problems.push(format!(
                "[workspace.dependencies] `{dep}` is taken by no member"
            ));
        }
    }
    assert!(problems.is_empty(), "remove them:\n{}", problems.join("\n"));
}

#[test]
fn crate_names_are_matched_as_whole_identifiers() {
    assert!(names("use sha2::Digest;", "sha2"));
    assert!(names("x = sha2 ;", "sha2"));
    assert!(!names("use sha2x::Digest;", "sha2"));
    assert!(!names("my_sha2::x", "sha2"));
}

/// The crates below the communication layer never depend on it (issue 36, item 5): the network,
/// extraction, file-system, format, depot and progress crates are usable without an MPI-capable
/// crate in their tree, and report to the user through `clima-artifact-progress`.
#[test]
fn the_lower_crates_do_not_depend_on_the_communication_crate() {
    let root = repo();
    let mut problems = Vec::new();
    for member in [
        "clima-artifact-vars",
        "clima-artifact-manifest",
        "clima-artifact-fs",
        "clima-artifact-progress",
        "clima-artifact-extract",
        "clima-artifact-net",
        "clima-artifact-depot",
    ] {
        let deps = declared(&toml_of(&root.join(member).join("Cargo.toml")));
        if deps.iter().any(|d| d == "clima-comms") {
            problems.push(format!("{member} depends on clima-comms"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
