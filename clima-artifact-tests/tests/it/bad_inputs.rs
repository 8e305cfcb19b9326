//! Broken `Artifacts.toml` / `Overrides.toml` files in `tests/fixtures/bad/`, each with a sibling
//! `.expected` file holding the exact error text (every error, one per line, in file order).
//!
//! Files named `overrides-*.toml` are parsed as Overrides.toml, all others as Artifacts.toml.
//! They are parsed with the relative path `fixtures/bad/<file>` so the expected text does not
//! depend on where the checkout lives. A `.toml` without `.expected`, an `.expected` without
//! `.toml`, or a file that parses are failures. Set `CLIMA_BLESS=1` to write missing or changed
//! `.expected` files (the test still fails, so review them before committing).

use std::path::{Path, PathBuf};

use clima_artifact_manifest::{Manifest, ManifestError, OverridesFile};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/bad")
}

fn render(errors: &[ManifestError]) -> String {
    let mut s: String = errors.iter().map(|e| format!("{e}\n")).collect();
    if s.is_empty() {
        s.push('\n');
    }
    s
}

/// The errors for one fixture, or `None` if it parses.
fn errors_of(name: &str, text: &str) -> Option<Vec<ManifestError>> {
    let shown = Path::new("fixtures/bad").join(name);
    if name.starts_with("overrides-") {
        OverridesFile::parse_all(text, &shown).err()
    } else {
        Manifest::parse_all(text, &shown).err()
    }
}

#[test]
fn every_bad_input_fails_with_the_expected_text() {
    let dir = fixtures();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let bless = std::env::var_os("CLIMA_BLESS").is_some();
    let mut failures = Vec::new();
    let mut checked = 0;
    for name in &names {
        if let Some(stem) = name.strip_suffix(".expected") {
            if !names.iter().any(|n| n == &format!("{stem}.toml")) {
                failures.push(format!("{name}: no matching {stem}.toml"));
            }
            continue;
        }
        if !name.ends_with(".toml") {
            failures.push(format!(
                "{name}: unexpected file (fixtures are .toml + .expected)"
            ));
            continue;
        }
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        let Some(errors) = errors_of(name, &text) else {
            failures.push(format!("{name}: parsed without error"));
            continue;
        };
        // The first-error API agrees with the all-errors API.
        let first = if name.starts_with("overrides-") {
            OverridesFile::parse(&text, &Path::new("fixtures/bad").join(name)).unwrap_err()
        } else {
            Manifest::parse(&text, &Path::new("fixtures/bad").join(name)).unwrap_err()
        };
        assert_eq!(first, errors[0], "{name}");
        // Every error is located.
        for e in &errors {
            assert!(
                e.line.is_some() && e.column.is_some(),
                "{name}: unlocated error {e}"
            );
        }
        let actual = render(&errors);
        let expected_path = dir.join(name.replace(".toml", ".expected"));
        match std::fs::read_to_string(&expected_path) {
            Ok(expected) if expected == actual => checked += 1,
            Ok(expected) => {
                failures.push(format!(
                    "{name}: error text differs\n--- expected\n{expected}--- actual\n{actual}"
                ));
                if bless {
                    std::fs::write(&expected_path, &actual).unwrap();
                }
            }
            Err(_) => {
                failures.push(format!(
                    "{name}: missing {}\n--- actual\n{actual}",
                    expected_path.display()
                ));
                if bless {
                    std::fs::write(&expected_path, &actual).unwrap();
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} problem(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(checked >= 40, "only {checked} fixtures checked");
}

#[test]
fn loading_from_disk_reports_the_same_errors() {
    // `load_all` (the path build scripts and the runtime use) gives the same text as
    // `parse_all` when given the same relative path; the working directory of integration
    // tests is the package directory.
    let rel = Path::new("fixtures/bad/manifest-many-errors.toml");
    let abs = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    let text = std::fs::read_to_string(&abs).unwrap();
    let from_text = Manifest::parse_all(&text, rel).unwrap_err();
    let from_disk = Manifest::load_all(&abs).unwrap_err();
    assert_eq!(from_text.len(), from_disk.len());
    for (a, b) in from_text.iter().zip(&from_disk) {
        assert_eq!(
            (a.line, a.column, &a.kind, &a.artifact),
            (b.line, b.column, &b.kind, &b.artifact)
        );
        assert_eq!(b.path, abs);
    }
    let rel = Path::new("fixtures/bad/overrides-many-errors.toml");
    let abs = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    assert_eq!(
        OverridesFile::load_all(&abs).unwrap_err().len(),
        OverridesFile::parse_all(&std::fs::read_to_string(&abs).unwrap(), rel)
            .unwrap_err()
            .len()
    );
}

#[test]
fn non_utf8_and_missing_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("Artifacts.toml");
    std::fs::write(&path, b"[era5]\ngit-tree-sha1 = \"\xff\"\n").unwrap();
    let e = Manifest::load(&path).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "`{}`: cannot read file: not UTF-8 (invalid byte at offset 24); TOML files must be UTF-8",
            path.display()
        )
    );
    let e = Manifest::load(&dir.path().join("missing.toml")).unwrap_err();
    assert!(
        e.to_string().contains("missing.toml`: cannot read file: "),
        "{e}"
    );
    // A missing Overrides.toml is simply empty.
    assert!(
        OverridesFile::load(&dir.path().join("Overrides.toml"))
            .unwrap()
            .entries
            .is_empty()
    );
}
