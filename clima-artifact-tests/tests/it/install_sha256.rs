//! Entries carrying a `git-tree-sha256` (Pkg's `git-tree-sha256-artifacts` naming): an install
//! through the public `Artifacts` API over a real manifest file verifies the content by it as
//! well as by the `git-tree-sha1`, which still names the depot folder. The expected hashes come
//! from real `git` (a SHA-1 and a `--object-format=sha256` repository).

use clima_artifact_runtime::{Artifacts, Error, SourceFailure};
use clima_artifact_tests::{
    Fault, ManifestEntry, TestArtifact, TestServer, assert_depot_clean, have_git, test_config,
    write_manifest,
};

/// A manifest of one artifact `era5` served over loopback, with `sha1` and `sha256` as its
/// tree hashes; returns the loaded API, the depot and the URL.
struct Setup {
    _dir: tempfile::TempDir,
    depot: std::path::PathBuf,
    _server: TestServer,
    url: String,
    artifacts: Artifacts,
}

fn setup(art: &TestArtifact, sha1: clima_artifact_runtime::GitTreeSha1, sha256: &str) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let depot = dir.path().join("depot");
    let server = TestServer::start();
    server.serve("era5.tar.gz", art.tarball.clone());
    let url = server.url("era5.tar.gz");
    let manifest = write_manifest(
        &dir.path().join("pkg"),
        &[ManifestEntry {
            name: "era5",
            hash: sha1,
            downloads: vec![(url.clone(), art.sha256)],
            extra: vec![("git-tree-sha256", sha256)],
        }],
    );
    let artifacts = Artifacts::load(&manifest)
        .unwrap_or_else(|e| panic!("{e}"))
        .with_config(test_config(std::slice::from_ref(&depot)));
    Setup {
        _dir: dir,
        depot,
        _server: server,
        url,
        artifacts,
    }
}

#[test]
fn an_entry_with_a_matching_git_tree_sha256_installs_under_its_sha1() {
    if !have_git() {
        return;
    }
    let art = TestArtifact::sample(71);
    let sha256 = art.builder.git_tree_hash_sha256();
    let s = setup(&art, art.tree_hash, &sha256.to_hex());
    let dir = s.artifacts.ensure_installed("era5").unwrap();
    // The folder keeps the SHA-1 name, as on the Pkg branch (Julia finds it there).
    assert_eq!(dir, s.depot.join("artifacts").join(art.tree_hash.to_hex()));
    art.assert_content(&dir);
    assert_eq!(clima_artifact_tests::git_tree_hash_sha256(&dir), sha256);
    assert_eq!(s.artifacts.hash("era5").unwrap(), art.tree_hash);
}

#[test]
fn a_wrong_git_tree_sha256_refuses_the_install_and_names_both_hashes() {
    if !have_git() {
        return;
    }
    let art = TestArtifact::sample(72);
    let actual = art.builder.git_tree_hash_sha256();
    // The SHA-256 tree hash of other content: the SHA-1 matches, the SHA-256 does not.
    let wrong = TestArtifact::sample(73).builder.git_tree_hash_sha256();
    let s = setup(&art, art.tree_hash, &wrong.to_hex());
    let e = s.artifacts.ensure_installed("era5").unwrap_err();
    let Error::DownloadFailed { failures, .. } = &e else {
        panic!("{e:?}")
    };
    match &failures[0] {
        SourceFailure::TreeHashSha256Mismatch {
            url,
            expected,
            actual: got,
            sha1_matches,
        } => {
            assert_eq!(url, &s.url);
            assert_eq!(*expected, wrong);
            assert_eq!(*got, actual);
            assert!(sha1_matches);
        }
        f => panic!("{f:?}"),
    }
    let text = e.to_string();
    assert!(text.contains("git-tree-sha256 mismatch"), "{text}");
    assert!(
        text.contains(&wrong.to_hex()) && text.contains(&actual.to_hex()),
        "{text}"
    );
    assert!(text.contains("`era5`") && text.contains(&s.url), "{text}");
    assert!(
        text.contains("its git-tree-sha1 matches the manifest's"),
        "{text}"
    );
    assert_depot_clean(&s.depot);
    assert!(!s.artifacts.is_installed("era5").unwrap());
}

#[test]
fn a_wrong_git_tree_sha1_and_sha256_say_neither_matches() {
    if !have_git() {
        return;
    }
    let art = TestArtifact::sample(74);
    let other = TestArtifact::sample(75);
    let wrong = other.builder.git_tree_hash_sha256();
    let s = setup(&art, other.tree_hash, &wrong.to_hex());
    let text = s
        .artifacts
        .ensure_installed("era5")
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("git-tree-sha256 mismatch")
            && text.contains("its git-tree-sha1 does not match either"),
        "{text}"
    );
    assert_depot_clean(&s.depot);
}

/// A package server's tarball has no sha256 to check: with a `git-tree-sha256` in the entry,
/// its content is checked by that too (good: installed; wrong: refused, naming the server's URL).
#[test]
fn a_package_servers_copy_is_checked_by_the_git_tree_sha256() {
    if !have_git() {
        return;
    }
    let art = TestArtifact::sample(76);
    let sha256 = art.builder.git_tree_hash_sha256();
    let wrong = TestArtifact::sample(77).builder.git_tree_hash_sha256();
    for (expected, ok) in [(wrong, false), (sha256, true)] {
        let dir = tempfile::tempdir().unwrap();
        let depot = dir.path().join("depot");
        let server = TestServer::start();
        let path = format!("artifact/{}", art.tree_hash);
        server.serve(&path, art.tarball.clone());
        let mut config = test_config(std::slice::from_ref(&depot));
        config.pkg_server = Some(server.base());
        // The manifest's own URL answers 404: the package server's copy is what is checked.
        server.always("gone.tar.gz", Fault::Status(404));
        let mut variant = art.variant(&[server.url("gone.tar.gz")]);
        variant.git_tree_sha256 = Some(expected);
        let got = clima_artifact_runtime::ensure_variant("era5", &variant, dir.path(), &config);
        assert_eq!(server.gets(&path), 1);
        if ok {
            art.assert_content(&got.unwrap().path);
        } else {
            let text = got.unwrap_err().to_string();
            assert!(
                text.contains("git-tree-sha256 mismatch") && text.contains(&server.url(&path)),
                "{text}"
            );
            assert_depot_clean(&depot);
        }
    }
}
