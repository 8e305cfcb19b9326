//! The CI scripts. `.ci/run` installs what the tests need by Debian package name
//! (scripts/ci-packages.sh), and the README's install line names the same packages;
//! `scripts/test.sh`'s summary counts a test that skipped as skipped, not passed
//! (scripts/test-summary.sh).
//!
//! The detection is run against dpkg databases of our own (`dpkg-query --admindir`): one of a
//! fresh image that ships llvm's `libclang-cpp14` (whose `libclang-cpp.so.14` once fooled a
//! file probe into skipping libclang-dev), and one where everything is installed.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn script(args: &[&str]) -> Vec<String> {
    let out = Command::new("bash")
        .arg(repo().join("scripts/ci-packages.sh"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ci-packages.sh {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// A dpkg admin folder whose `status` file lists `installed` as installed.
fn dpkg_db(dir: &Path, installed: &[&str]) -> PathBuf {
    let admin = dir.join(installed.len().to_string());
    std::fs::create_dir_all(admin.join("info")).unwrap();
    let status: String = installed
        .iter()
        .map(|p| {
            format!(
                "Package: {p}\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1\n\n"
            )
        })
        .collect();
    std::fs::write(admin.join("status"), status).unwrap();
    admin
}

#[test]
fn missing_packages_are_found_by_name_not_by_files() {
    if Command::new("dpkg-query")
        .arg("--version")
        .output()
        .is_err()
    {
        if std::env::var_os("CI").is_some_and(|v| v == "true") {
            panic!("dpkg-query is missing on a CI machine");
        }
        clima_artifact_tests::skip("dpkg-query is not installed (not a Debian machine)");
        return;
    }
    let all = script(&["--list"]);
    for needed in ["libclang-dev", "libopenmpi-dev", "openmpi-bin", "git"] {
        assert!(
            all.iter().any(|p| p == needed),
            "{needed} missing from {all:?}"
        );
    }
    let dir = tempfile::tempdir().unwrap();

    // A fresh image with llvm-14 (libclang-cpp14 ships libclang-cpp.so.14) and nothing else.
    let fresh = dpkg_db(dir.path(), &["libclang-cpp14", "libllvm14", "llvm-14"]);
    let missing = script(&["--missing", "--admindir", fresh.to_str().unwrap()]);
    assert_eq!(missing, all, "on a fresh image every package is missing");

    // Everything installed: nothing to do.
    let names: Vec<&str> = all.iter().map(String::as_str).collect();
    let full = dpkg_db(dir.path(), &names);
    let missing = script(&["--missing", "--admindir", full.to_str().unwrap()]);
    assert_eq!(missing, Vec::<String>::new());

    // One missing package is found alone.
    let without: Vec<&str> = names
        .iter()
        .copied()
        .filter(|p| *p != "libclang-dev")
        .collect();
    let partial = dpkg_db(dir.path(), &without);
    let missing = script(&["--missing", "--admindir", partial.to_str().unwrap()]);
    assert_eq!(missing, ["libclang-dev"]);
}

#[test]
fn the_readme_install_line_names_the_ci_packages() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let line = readme
        .lines()
        .find(|l| l.contains("apt-get install -y"))
        .expect("the README has an apt-get install line");
    let named: std::collections::BTreeSet<&str> = line
        .split("apt-get install -y")
        .nth(1)
        .unwrap()
        .split('`')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    let listed = script(&["--list"]);
    let listed: std::collections::BTreeSet<&str> = listed.iter().map(String::as_str).collect();
    assert_eq!(named, listed, "README: {line}");
}

/// Run as a child process by `the_test_summary_counts_skipped_tests_as_skipped`.
#[test]
#[ignore = "helper: run as a child process by the_test_summary_counts_skipped_tests_as_skipped"]
fn a_test_that_skips() {
    clima_artifact_tests::skip("no frobnicator on this machine");
}

#[test]
fn the_test_summary_counts_skipped_tests_as_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let skips = dir.path().join("skipped");
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "ci_scripts::a_test_that_skips"])
        .env("CLIMA_TEST_SKIP_DIR", &skips)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    // Three tests of which one returned early, in two binaries, and one that failed.
    let log = dir.path().join("log");
    std::fs::write(
        &log,
        "test result: ok. 2 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out\n\
         test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out\n",
    )
    .unwrap();
    let summary = |not_built: Option<&str>| {
        let mut cmd = Command::new("bash");
        cmd.arg(repo().join("scripts/test-summary.sh"))
            .arg(&log)
            .arg(&skips)
            .env_remove("NOT_BUILT");
        if let Some(n) = not_built {
            cmd.env("NOT_BUILT", n);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let text = summary(None);
    assert_eq!(
        text.lines().last(),
        Some("tests: 2 passed, 1 failed, 1 skipped"),
        "{text}"
    );
    assert!(text.contains("1 no frobnicator on this machine"), "{text}");
    assert!(text.contains("it: ci_scripts.a_test_that_skips"), "{text}");
    let text = summary(Some("10 MPI tests (no MPI)"));
    assert!(
        text.contains("10 test(s) not built: MPI tests (no MPI)"),
        "{text}"
    );
    assert_eq!(
        text.lines().last(),
        Some("tests: 2 passed, 1 failed, 11 skipped"),
        "{text}"
    );
}
