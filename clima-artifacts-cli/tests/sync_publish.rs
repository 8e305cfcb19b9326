//! `publish` then install through the normal pipeline; `sync push|pull` from a job script.

mod common;

use std::fs;

use assert_cmd::Command;
use common::assert_ok;

fn cli() -> Command {
    let mut c = Command::cargo_bin("clima-artifacts").unwrap();
    c.env("CLIMA_ARTIFACTS_PROGRESS", "0");
    c
}

#[test]
fn publish_then_install_the_published_artifact() {
    let t = tempfile::tempdir().unwrap();
    let data = t.path().join("data");
    fs::create_dir_all(data.join("sub")).unwrap();
    fs::write(data.join("a.txt"), "alpha\n").unwrap();
    fs::write(data.join("sub/b.txt"), "beta\n").unwrap();
    let manifest = t.path().join("Artifacts.toml");
    let tarball = t.path().join("mydata.tar.gz");
    cli()
        .args([
            "create",
            data.to_str().unwrap(),
            "--name",
            "mydata",
            "--manifest",
        ])
        .arg(&manifest)
        .arg("--tarball-out")
        .arg(&tarball)
        .assert()
        .success();
    let archive = t.path().join("archive");
    cli()
        .arg("publish")
        .arg(&tarball)
        .args([
            "--to",
            &format!("file://{}", archive.display()),
            "--name",
            "mydata",
            "--manifest",
        ])
        .arg(&manifest)
        .assert()
        .success();
    assert!(archive.join("mydata.tar.gz").is_file());
    let text = fs::read_to_string(&manifest).unwrap();
    assert!(
        text.contains(&format!(
            "url = \"file://{}/mydata.tar.gz\"",
            archive.display()
        )),
        "{text}"
    );
    assert!(text.contains("sha256 = \""), "{text}");

    // The normal pipeline downloads it from the storage and verifies both hashes.
    fs::remove_file(&tarball).unwrap();
    let depot = t.path().join("depot");
    let config = clima_artifact_runtime::Config {
        depots: vec![depot.clone().into()],
        ..clima_artifact_runtime::Config::from_vars(|_| None).unwrap()
    };
    let artifacts = clima_artifact_runtime::Artifacts::load(&manifest)
        .unwrap()
        .with_config(config);
    let b = artifacts.ensure_installed("mydata/sub/b.txt").unwrap();
    assert_eq!(fs::read_to_string(b).unwrap(), "beta\n");
    assert!(b_in_depot(&depot));

    // A tarball that does not hold the manifest's content is refused before uploading.
    let other = t.path().join("other");
    fs::create_dir_all(&other).unwrap();
    fs::write(other.join("x"), "x").unwrap();
    let other_tar = t.path().join("other.tar.gz");
    let scratch = t.path().join("Scratch.toml");
    cli()
        .args([
            "create",
            other.to_str().unwrap(),
            "--name",
            "other",
            "--manifest",
        ])
        .arg(&scratch)
        .arg("--tarball-out")
        .arg(&other_tar)
        .assert()
        .success();
    let out = cli()
        .arg("publish")
        .arg(&other_tar)
        .args([
            "--to",
            archive.to_str().unwrap(),
            "--name",
            "mydata",
            "--manifest",
        ])
        .arg(&manifest)
        .assert()
        .code(2)
        .get_output()
        .stderr
        .clone();
    assert!(String::from_utf8_lossy(&out).contains("nothing was uploaded"));
    assert!(!archive.join("other.tar.gz").exists());
}

fn b_in_depot(depot: &std::path::Path) -> bool {
    fs::read_dir(depot.join("artifacts"))
        .map(|d| d.count() > 0)
        .unwrap_or(false)
}

#[test]
fn sync_push_and_pull_from_a_job_script() {
    let t = tempfile::tempdir().unwrap();
    let run = t.path().join("run");
    fs::create_dir_all(run.join("ckpt/1")).unwrap();
    fs::write(run.join("ckpt/1/s.bin"), "s").unwrap();
    fs::write(run.join("log.txt"), "l").unwrap();
    fs::write(run.join("big.nc"), "n").unwrap();
    let store = t.path().join("store");
    let out = cli()
        .args([
            "sync",
            "push",
            run.to_str().unwrap(),
            store.to_str().unwrap(),
        ])
        .args(["--checkpoint", "ckpt/1", "--exclude", "*.nc", "--json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let report: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(
        report["uploaded"],
        serde_json::json!(["ckpt/1/s.bin", "log.txt"])
    );
    assert!(!store.join("big.nc").exists());
    fs::remove_dir_all(&run).unwrap();
    cli()
        .args([
            "sync",
            "pull",
            run.to_str().unwrap(),
            store.to_str().unwrap(),
        ])
        .assert()
        .success()
        .stdout(predicates::str::contains("latest checkpoint"));
    assert_eq!(fs::read_to_string(run.join("log.txt")).unwrap(), "l");
    cli()
        .args(["sync", "push", run.to_str().unwrap(), "s3://bucket/x"])
        .env("CLIMA_SYNC_ARTIFACTS", "maybe")
        .assert()
        .code(2)
        .stderr(predicates::str::contains("CLIMA_SYNC_ARTIFACTS"));
}

/// `publish --by-hash` lays out `artifact/<git-tree-sha1>`; a plain static host serving that
/// folder is a package-server mirror: with CLIMA_ARTIFACTS_PKG_SERVER set, installs come from it
/// before the manifest's URLs (verified by tree hash), and fall through to them when it fails.
#[test]
fn publish_by_hash_makes_a_folder_a_package_server_mirror() {
    let t = tempfile::tempdir().unwrap();
    let data = t.path().join("data");
    fs::create_dir_all(&data).unwrap();
    fs::write(data.join("field.nc"), "pretend netcdf\n").unwrap();
    let manifest = t.path().join("Artifacts.toml");
    let tarball = t.path().join("field.tar.gz");
    let origin = clima_artifact_tests::TestServer::start();
    let served = t.path().join("origin");
    fs::create_dir_all(&served).unwrap();
    origin.serve_dir(&served);
    cli()
        .args([
            "create",
            data.to_str().unwrap(),
            "--name",
            "field",
            "--manifest",
        ])
        .arg(&manifest)
        .arg("--tarball-out")
        .arg(served.join("field.tar.gz"))
        .args(["--url", &origin.url("field.tar.gz")])
        .assert()
        .success();
    fs::copy(served.join("field.tar.gz"), &tarball).unwrap();
    let mirror = t.path().join("mirror");
    let out = cli()
        .arg("publish")
        .arg(&tarball)
        .args([
            "--to",
            mirror.to_str().unwrap(),
            "--by-hash",
            "--name",
            "field",
            "--json",
            "--manifest",
        ])
        .arg(&manifest)
        .args(["--public-url", "https://mirror.invalid/"])
        .output()
        .unwrap();
    assert_ok(&out);
    let hash = clima_artifact_manifest::Manifest::load(&manifest)
        .unwrap()
        .artifacts()[0]
        .1
        .clone();
    let hash = match hash {
        clima_artifact_manifest::ArtifactEntry::Single(v) => v.git_tree_sha1.to_hex(),
        other => panic!("{other:?}"),
    };
    assert!(mirror.join("artifact").join(&hash).is_file());

    // The mirror, served by a plain static file server.
    let pkg_server = clima_artifact_tests::TestServer::start();
    pkg_server.serve_dir(&mirror);
    let fetch = |depot: &std::path::Path, server: &str| {
        cli()
            .env("CLIMA_ARTIFACTS_DEPOT_PATH", depot)
            .env("CLIMA_ARTIFACTS_PKG_SERVER", server)
            .args(["fetch", "field", "--json", "--manifest"])
            .arg(&manifest)
            .output()
            .unwrap()
    };
    let out = fetch(&t.path().join("depot1"), &pkg_server.base());
    assert_ok(&out);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report[0]["url"],
        format!("{}/artifact/{hash}", pkg_server.base()),
        "{report}"
    );
    // Timed like any download (it once said 0 s for the package server).
    assert!(report[0]["seconds"].as_f64().unwrap() > 0.0, "{report}");
    assert_eq!(
        origin.gets("/field.tar.gz"),
        0,
        "the manifest's URL was used"
    );

    // A server without it (404): the manifest's URL is used.
    let empty = clima_artifact_tests::TestServer::start();
    let out = fetch(&t.path().join("depot2"), &empty.base());
    assert_ok(&out);
    assert_eq!(empty.gets(&format!("/artifact/{hash}")), 1);
    assert_eq!(origin.gets("/field.tar.gz"), 1);
}
