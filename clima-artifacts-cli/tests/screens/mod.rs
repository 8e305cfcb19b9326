//! The lines users read, held by snapshots (`tests/screens/snapshots/*.snap`): an error of a
//! download, a batch job's log of a fetch, `list`, `reproduce`'s differences and `doctor`. A
//! changed message shows as a diff to review; accept an intended one with
//! `cargo insta review` (or `INSTA_UPDATE=always cargo test -p clima-artifacts-cli --test cli
//! screens` and read the diff in git).
//!
//! What differs between runs and machines is replaced before comparing: the sandbox's path,
//! the loopback server's port, durations, speeds and free space.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::process::Output;

use crate::common::{Sandbox, assert_ok, sample_tree};

/// Runs `check` with the filters that make the output of a run in `sb` the same everywhere.
fn with_filters(sb: &Sandbox, check: impl FnOnce()) {
    let root = fs::canonicalize(sb.root.path()).unwrap();
    let mut settings = insta::Settings::clone_current();
    settings.set_prepend_module_to_snapshot(false);
    for path in [
        root.display().to_string(),
        sb.root.path().display().to_string(),
    ] {
        settings.add_filter(&regex_escape(&path), "[SANDBOX]");
    }
    for (pattern, by) in [
        (r"127\.0\.0\.1:\d+", "[SERVER]"),
        (r"/\S*/clima-recipe-\w+", "[RECIPE TEMP]"),
        (r"\d+(\.\d+)? ?[KMGT]?i?B/s", "[SPEED]"),
        (r"\b\d+(\.\d+)? s\b", "[T] s"),
        (r"\b\d+(\.\d+)? ([KMGT]i)?B free", "[N] free"),
        (
            r"clima-artifacts \d+\.\d+\.\d+",
            "clima-artifacts [VERSION]",
        ),
        (r"(TLS roots: +).*", "${1}[TLS ROOTS]"),
        (r"(host platform: +).*", "${1}[PLATFORM]"),
    ] {
        settings.add_filter(pattern, by);
    }
    settings.bind(check);
}

/// `text` with regex metacharacters escaped (paths of temp folders hold `.`).
fn regex_escape(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let special = "\\.+*?()|[]{}^$#&-~".contains(c);
            special.then_some('\\').into_iter().chain([c])
        })
        .collect()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Stdout and stderr with the exit status, as one screen.
fn screen(out: &Output) -> String {
    format!(
        "exit: {}\n--- stdout\n{}--- stderr\n{}",
        out.status.code().map_or("signal".into(), |c| c.to_string()),
        text(&out.stdout),
        text(&out.stderr)
    )
}

/// `create` of the sample tree as `name`, downloadable from its tarball next to the manifest.
fn create(sb: &Sandbox, name: &str) -> String {
    sample_tree(&sb.work.join(name));
    let url = format!("{name}.tar.gz");
    let out = sb
        .cli()
        .args(["create", name, "--name", name, "--url", &url, "--json"])
        .args(["--license", "CC-BY-4.0", "--source", "https://example.org"])
        .output()
        .unwrap();
    assert_ok(&out);
    let created: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    created["sha256"].as_str().unwrap().to_owned()
}

/// Issue 35, item 6: a wrong sha256 printed "downloaded" before the error, then the error
/// twice.
#[test]
fn a_wrong_sha256_in_a_log() {
    let sb = Sandbox::new();
    let sha = create(&sb, "era5");
    let wrong = format!(
        "{}{}",
        if sha.starts_with('0') { '1' } else { '0' },
        &sha[1..]
    );
    let manifest = sb.work.join("Artifacts.toml");
    let edited = fs::read_to_string(&manifest).unwrap().replace(&sha, &wrong);
    fs::write(&manifest, edited).unwrap();
    let out = sb
        .cli()
        .args(["fetch", "era5"])
        .env("CLIMA_ARTIFACTS_PROGRESS", "1")
        .output()
        .unwrap();
    with_filters(&sb, || {
        insta::assert_snapshot!("wrong_sha256", screen(&out))
    });
}

#[test]
fn a_fetch_in_a_log_then_list() {
    let sb = Sandbox::new();
    create(&sb, "era5");
    fs::create_dir_all(sb.work.join("soil")).unwrap();
    fs::write(sb.work.join("soil/moisture.csv"), "depth,theta\n0.1,0.3\n").unwrap();
    create(&sb, "soil");
    // Data that stays on a cluster, with the placeholder hash CliMA's helper writes
    // (sha1("fluxnet2015")), and an entry without downloads.
    let manifest = sb.work.join("Artifacts.toml");
    let mut text = fs::read_to_string(&manifest).unwrap();
    text.push_str(
        "\n[fluxnet2015]\ngit-tree-sha1 = \"94d6eb8e3bc5fc361a43597ab4fb6941bdbe2850\"\n\
         license = \"CC-BY-4.0\"\n",
    );
    fs::write(&manifest, text).unwrap();
    let fetch = sb
        .cli()
        .args(["fetch", "era5"])
        .env("CLIMA_ARTIFACTS_PROGRESS", "1")
        .output()
        .unwrap();
    let list = sb.cli().arg("list").output().unwrap();
    with_filters(&sb, || {
        insta::assert_snapshot!("fetch_log", screen(&fetch));
        insta::assert_snapshot!("list", screen(&list));
    });
}

#[test]
fn reproduce_names_each_difference() {
    let sb = Sandbox::new();
    let dir = sb.work.join("artifacts/drift");
    fs::create_dir_all(&dir).unwrap();
    let recipe = dir.join("recipe");
    fs::write(
        &recipe,
        "#!/bin/sh\nset -eu\necho a > \"$OUT/a.txt\"\necho run > \"$OUT/run.sh\"\n\
         if [ \"$(cat variant)\" = 1 ]; then\n\
           echo b > \"$OUT/b.txt\"; chmod 755 \"$OUT/run.sh\"; ln -s a.txt \"$OUT/link\"\n\
         else\n\
           chmod 644 \"$OUT/run.sh\"; ln -s run.sh \"$OUT/link\"; echo new > \"$OUT/new.txt\"\n\
         fi\n",
    )
    .unwrap();
    fs::set_permissions(&recipe, fs::Permissions::from_mode(0o755)).unwrap();
    fs::write(
        dir.join("README.md"),
        "# drift\n\n## Contents\na.txt\n\n## Sources\nhttps://example.invalid\n\n\
         ## Creators and citation\nNobody (2026)\n\n## Preprocessing\nnone\n",
    )
    .unwrap();
    fs::write(dir.join("variant"), "1").unwrap();
    let out = sb
        .cli()
        .args([
            "create",
            "--recipe",
            "artifacts/drift",
            "--url",
            "drift.tar.gz",
        ])
        .output()
        .unwrap();
    assert_ok(&out);
    fs::write(dir.join("variant"), "2").unwrap();
    let out = sb.cli().args(["reproduce", "drift"]).output().unwrap();
    with_filters(&sb, || insta::assert_snapshot!("reproduce", screen(&out)));
}

#[test]
fn doctor_on_a_bare_machine() {
    let sb = Sandbox::new();
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("clima-artifacts"))
        .arg("doctor")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", sb.root.path())
        .env(
            "CLIMA_ARTIFACTS_DEPOT_PATH",
            sb.root.path().join("new-depot"),
        )
        .current_dir(&sb.work)
        .output()
        .unwrap();
    with_filters(&sb, || insta::assert_snapshot!("doctor", screen(&out)));
}
