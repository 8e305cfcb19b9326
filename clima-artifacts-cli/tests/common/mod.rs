//! Support for the CLI tests: a sample artifact folder and a `clima-artifacts` command bound to
//! a temp depot. The loopback HTTP server is the one of the test package
//! (`clima_artifact_tests::TestServer`), shared by every test.

#![allow(dead_code)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Writes a small but varied artifact folder: plain, executable, nested, binary, symlink, an
/// empty folder, a `.git` folder (ignored by hashing and archiving).
pub fn sample_tree(dir: &Path) {
    fs::create_dir_all(dir.join("bin")).unwrap();
    fs::create_dir_all(dir.join("data/2008")).unwrap();
    fs::create_dir_all(dir.join("empty")).unwrap();
    fs::create_dir_all(dir.join(".git")).unwrap();
    fs::write(dir.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    fs::write(dir.join("README.md"), "ERA5 sample\n").unwrap();
    fs::write(dir.join("bin/run.sh"), "#!/bin/sh\necho hi\n").unwrap();
    fs::set_permissions(dir.join("bin/run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    let bytes: Vec<u8> = (0..300_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    fs::write(dir.join("data/2008/u.nc"), bytes).unwrap();
    fs::write(dir.join("data/v.nc"), "v").unwrap();
    std::os::unix::fs::symlink("README.md", dir.join("latest")).unwrap();
}

/// A `clima-artifacts` command with the depot path set, progress off, run in `cwd`.
pub fn cli(depot: &Path, cwd: &Path) -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::cargo_bin("clima-artifacts").unwrap();
    cmd.env("CLIMA_ARTIFACTS_DEPOT_PATH", depot)
        .env("CLIMA_ARTIFACTS_PROGRESS", "0")
        .env_remove("CLIMA_ARTIFACTS_OFFLINE")
        .env_remove("CLIMA_ARTIFACTS_JULIA_INTEROP")
        .env_remove("JULIA_DEPOT_PATH")
        .current_dir(cwd);
    cmd
}

/// Asserts that a command succeeded; the failure message holds its exit status and stderr.
#[track_caller]
pub fn assert_ok(output: &std::process::Output) {
    assert!(
        output.status.success(),
        "{}; stderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Parses a command's stdout as JSON.
pub fn json(output: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// A fresh temp folder with `depot/`, `work/` inside.
pub struct Sandbox {
    /// Owns the folder.
    pub root: tempfile::TempDir,
    /// The depot (`CLIMA_ARTIFACTS_DEPOT_PATH`).
    pub depot: PathBuf,
    /// The working directory of commands.
    pub work: PathBuf,
}

impl Sandbox {
    /// Creates the folders.
    pub fn new() -> Sandbox {
        let root = tempfile::tempdir().unwrap();
        let depot = root.path().join("depot");
        let work = root.path().join("work");
        fs::create_dir_all(&depot).unwrap();
        fs::create_dir_all(&work).unwrap();
        Sandbox { root, depot, work }
    }

    /// A command bound to this sandbox.
    pub fn cli(&self) -> assert_cmd::Command {
        cli(&self.depot, &self.work)
    }

    /// Runs `clima-artifacts ARGS` in this sandbox, asserts that it succeeded (the message holds
    /// its stderr) and parses its stdout as JSON.
    pub fn json_ok(&self, args: &[&str]) -> serde_json::Value {
        let out = self.cli().args(args).output().unwrap();
        assert!(
            out.status.success(),
            "`clima-artifacts {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        json(&out)
    }
}

/// The metadata keys of the host's variant of `name` in the manifest at `manifest`.
pub fn entry_metadata(manifest: &Path, name: &str) -> std::collections::BTreeMap<String, String> {
    let manifest = clima_artifact_manifest::Manifest::load(manifest).unwrap();
    let v = manifest
        .select(name, &clima_artifact_manifest::Platform::host())
        .unwrap();
    v.metadata
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The words of the command printed between backticks after `before` in `text`, checked to be
/// plain words (no quoting needed, so splitting on spaces is what a shell does) of
/// `clima-artifacts`: for running a printed command as printed.
pub fn printed_command(text: &str, before: &str) -> Vec<String> {
    let start = text
        .find(before)
        .unwrap_or_else(|| panic!("`{before}` not in:\n{text}"))
        + before.len();
    let command = &text[start..start + text[start..].find('`').unwrap()];
    assert!(!command.contains(['\'', '"', '\\']), "{command}");
    let words: Vec<String> = command.split_whitespace().map(str::to_owned).collect();
    assert_eq!(words[0], "clima-artifacts", "{command}");
    words
}
