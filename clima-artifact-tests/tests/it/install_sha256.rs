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
    server: TestServer,
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
        server,
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

/// Issue 47, item 6: a copy installed by its git-tree-sha1 alone (here written as Julia's Pkg
/// writes it, with no SHA-256 check) is not used for an entry whose `git-tree-sha256` it does
/// not match: neither a copy of other content under the SHA-1 name (what a SHA-1 collision
/// installs), nor a genuine copy when the entry's SHA-256 differs. The error names the copy
/// and both hashes; nothing is downloaded, nothing removed.
#[test]
fn a_copy_installed_by_sha1_alone_is_refused_when_its_git_tree_sha256_differs() {
    if !have_git() {
        return;
    }
    let art = TestArtifact::sample(78);
    let good = art.builder.git_tree_hash_sha256();
    let other = TestArtifact::sample(79);
    let other_sha256 = other.builder.git_tree_hash_sha256();
    // (content planted under the SHA-1 name, the entry's git-tree-sha256, the copy's)
    for (planted, expected, actual, sha1_matches) in [
        (&other, good, other_sha256, false),
        (&art, other_sha256, good, true),
    ] {
        let s = setup(&art, art.tree_hash, &expected.to_hex());
        let copy = s.depot.join("artifacts").join(art.tree_hash.to_hex());
        planted.builder.write_to(&copy);
        let e = s.artifacts.ensure_installed("era5").unwrap_err();
        let Error::InstalledTreeSha256Mismatch {
            name,
            path,
            expected: want,
            actual: got,
            sha1_matches: sha1,
        } = &e
        else {
            panic!("{e:?}")
        };
        assert_eq!(
            (name.as_str(), path, *want, *got, *sha1),
            ("era5", &copy, expected, actual, Some(sha1_matches))
        );
        let text = e.to_string();
        assert!(
            text.contains(&expected.to_hex())
                && text.contains(&actual.to_hex())
                && text.contains(&copy.display().to_string())
                && text.contains("installed by its git-tree-sha1 alone"),
            "{text}"
        );
        // Its record says so from now on: refused again without hashing, and not exposed by
        // the queries either.
        let text = s
            .artifacts
            .ensure_installed("era5")
            .unwrap_err()
            .to_string();
        assert!(
            text.contains("as recorded when it was first hashed"),
            "{text}"
        );
        assert!(s.artifacts.artifact_path("era5").is_err());
        assert_eq!(s.server.gets("era5.tar.gz"), 0);
        planted.assert_content(&copy);
    }
}

/// The SHA-256 tree of an installed copy is computed once: the result is recorded beside the
/// copy (`artifacts/<sha1>.git-tree-sha256`), bound to that very folder, and later uses read
/// it instead of hashing again. An install that checked both hashes records it at once. A
/// record is not trusted for another folder put at that name, nor when another user owns it.
#[test]
fn the_git_tree_sha256_of_an_installed_copy_is_checked_once_and_recorded() {
    if !have_git() {
        return;
    }
    let art = TestArtifact::sample(80);
    let sha256 = art.builder.git_tree_hash_sha256();
    let s = setup(&art, art.tree_hash, &sha256.to_hex());
    let depot = clima_artifact_runtime::depot::Depot::new(&s.depot);
    let copy = s.depot.join("artifacts").join(art.tree_hash.to_hex());
    let record = s
        .depot
        .join("artifacts")
        .join(format!("{}.git-tree-sha256", art.tree_hash.to_hex()));

    // Installed by SHA-1 alone: hashed on first use, then recorded.
    art.builder.write_to(&copy);
    assert!(!record.exists());
    assert_eq!(s.artifacts.ensure_installed("era5").unwrap(), copy);
    assert_eq!(
        depot.recorded_tree_sha256(&art.tree_hash, &copy),
        Some(sha256)
    );
    // Once: a change deep inside the copy now goes unnoticed by a lookup (as for any
    // installed copy; `clima-artifacts verify` re-hashes on request), proving it was not hashed
    // again.
    let values = copy.join("data/values.csv");
    std::fs::write(&values, "changed\n").unwrap();
    assert_eq!(s.artifacts.ensure_installed("era5").unwrap(), copy);

    // Another folder at the name: the record does not speak for it.
    std::fs::rename(&copy, s.depot.join("moved-away")).unwrap();
    TestArtifact::sample(81).builder.write_to(&copy);
    let e = s.artifacts.ensure_installed("era5").unwrap_err();
    assert!(
        matches!(
            e,
            Error::InstalledTreeSha256Mismatch {
                sha1_matches: Some(false),
                ..
            }
        ),
        "{e:?}"
    );

    // A fresh install checks both hashes in one pass and records the SHA-256 at once.
    clima_artifact_fs::remove_tree(&copy).unwrap();
    std::fs::remove_file(&record).unwrap();
    assert_eq!(s.artifacts.ensure_installed("era5").unwrap(), copy);
    assert_eq!(s.server.gets("era5.tar.gz"), 1);
    assert_eq!(
        depot.recorded_tree_sha256(&art.tree_hash, &copy),
        Some(sha256)
    );

    // A record another user owns is not trusted: a copy of other content under the name, with
    // a record claiming the entry's hash, is hashed and refused.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        clima_artifact_tests::skip("needs root to give the record to another user");
        return;
    }
    clima_artifact_fs::remove_tree(&copy).unwrap();
    TestArtifact::sample(82).builder.write_to(&copy);
    std::fs::remove_file(&record).unwrap();
    depot
        .record_tree_sha256(&art.tree_hash, &copy, &sha256)
        .unwrap();
    let other = clima_artifact_tests::OTHER_UID;
    std::os::unix::fs::chown(&record, Some(other), Some(other)).unwrap();
    assert_eq!(depot.recorded_tree_sha256(&art.tree_hash, &copy), None);
    let e = s.artifacts.ensure_installed("era5").unwrap_err();
    assert!(
        matches!(
            e,
            Error::InstalledTreeSha256Mismatch {
                sha1_matches: Some(false),
                ..
            }
        ),
        "{e:?}"
    );
    // Their file is left alone; this user's finding went to a record this user may write,
    // none of which is at that name.
    assert_eq!(
        std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&record).unwrap()),
        other
    );
}
