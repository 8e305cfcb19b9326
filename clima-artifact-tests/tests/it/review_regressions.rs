//! Regression tests for defects found in review. Each test failed before its fix.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

use clima_artifact_runtime::ensure_variant;
use clima_artifact_tests::{
    TestArtifact, TestServer, config_env, have_git, installed_entries, temp_entries, test_config,
};

/// `true` when the test may run; outside CI a missing `git` skips the test with a message.
fn git_or_skip() -> bool {
    if have_git() {
        return true;
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "git is required in CI"
    );
    false
}

/// The lock only saves duplicate downloads; an install must not fail because the lock file
/// cannot be created or opened (here: something else sits at the lock file's path).
#[test]
fn an_unusable_lock_file_does_not_prevent_the_install() {
    if !git_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let depot = dir.path().join("depot");
    let config = test_config(std::slice::from_ref(&depot));
    let art = TestArtifact::sample(11);
    let server = TestServer::start();
    server.serve("a.tar.gz", art.tarball.clone());
    // A directory where the lock file should be: no process can open it for writing.
    let lock = depot
        .join("artifacts/.locks")
        .join(format!("{}.lock", art.tree_hash));
    std::fs::create_dir_all(&lock).unwrap();

    let got = ensure_variant(
        "a",
        &art.variant(&[server.url("a.tar.gz")]),
        dir.path(),
        &config,
    )
    .unwrap_or_else(|e| panic!("install failed because of the lock file: {e}"));
    art.assert_content(&got.path);
    assert_eq!(temp_entries(&depot), Vec::<String>::new());
}

/// A depot shared by several users (group- or world-writable `artifacts/`): the `.locks`
/// folder created by the first user is not writable by the others, which must still be able
/// to install. Runs the installer as `nobody` (needs root and `setpriv`; skipped otherwise).
#[test]
fn a_shared_depot_whose_lock_folder_belongs_to_another_user_still_installs() {
    if !git_or_skip() {
        return;
    }
    let root = unsafe { libc::geteuid() } == 0;
    let setpriv = Path::new("/usr/bin/setpriv");
    if !root || !setpriv.exists() {
        clima_artifact_tests::skip(
            "needs root and /usr/bin/setpriv to run the installer as another user",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let depot = dir.path().join("depot");
    let artifacts = depot.join("artifacts");
    let locks = artifacts.join(".locks");
    std::fs::create_dir_all(&locks).unwrap();
    std::fs::set_permissions(&depot, std::fs::Permissions::from_mode(0o755)).unwrap();
    // Everyone may install into the depot, but `.locks` is the first user's (root's), 0755.
    std::fs::set_permissions(&artifacts, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::set_permissions(&locks, std::fs::Permissions::from_mode(0o755)).unwrap();

    let config = test_config(std::slice::from_ref(&depot));
    let art = TestArtifact::sample(12);
    let server = TestServer::start();
    server.serve("b.tar.gz", art.tarball.clone());
    let out = Command::new(setpriv)
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(env!("CARGO_BIN_EXE_install_one"))
        .args([
            "variant",
            "b",
            &art.tree_hash.to_hex(),
            &art.sha256.to_hex(),
            &server.url("b.tar.gz"),
        ])
        .current_dir(dir.path())
        .envs(config_env(&config))
        .env("HOME", dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "install as another user failed: {stderr}"
    );
    assert_eq!(installed_entries(&depot), [art.tree_hash.to_hex()]);
    art.assert_content(&artifacts.join(art.tree_hash.to_hex()));
}

/// A temp dir whose pid looks dead from here may belong to a live installer in another PID
/// namespace (a container sharing this host name and the depot). Such an installer holds the
/// artifact's lock: its temp dir must not be deleted under it (deleting a directory that is
/// being renamed into place can leave a final artifact with files missing).
#[test]
fn a_temp_dir_whose_artifact_lock_is_held_is_not_reclaimed() {
    use clima_artifact_runtime::depot::Depot;
    use clima_artifact_runtime::depot::LockedFile;

    let dir = tempfile::tempdir().unwrap();
    let depot = dir.path().join("depot");
    let artifacts = depot.join("artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let hash = clima_artifact_runtime::GitTreeSha1([0x5a; 20]);
    let mut child = Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let tmp = artifacts.join(clima_artifact_tests::install_temp_name(
        &hash,
        &clima_artifact_tests::host_tag(),
        dead,
    ));
    std::fs::create_dir_all(tmp.join("sub")).unwrap();
    std::fs::write(tmp.join("sub/partial"), b"x").unwrap();

    // The "other namespace" installer: holds the artifact's lock while it works.
    let held = LockedFile::acquire(
        &clima_artifact_runtime::manifest::layout::lock_file(&depot, &hash),
        "artifact in another container",
        std::time::Duration::from_secs(1),
        &clima_artifact_runtime::progress::Reporting::default(),
    )
    .unwrap();
    assert!(held.is_locked());
    assert_eq!(
        Depot::new(&depot)
            .reclaim_stale_temp_dirs(&clima_artifact_runtime::progress::Reporting::default()),
        0
    );
    assert!(
        tmp.join("sub/partial").exists(),
        "a locked install's temp dir was deleted"
    );

    // Once nobody holds the lock, the dir really is stale.
    drop(held);
    assert_eq!(
        Depot::new(&depot)
            .reclaim_stale_temp_dirs(&clima_artifact_runtime::progress::Reporting::default()),
        1
    );
    assert!(!tmp.exists());
}

/// A URL scheme the downloader does not speak (`ftp://`, `s3://`) or a `file://` URL naming a
/// remote host used to be read as a local path (`<manifest dir>/ftp:/host/x`, or
/// `host/share/x` relative to the *working directory*), failing with a misleading "No such
/// file" or reading an unrelated local file. The error must name the URL and say what works.
#[test]
fn unsupported_url_schemes_and_remote_file_urls_are_clear_errors() {
    use clima_artifact_runtime::{GitTreeSha1, Sha256};
    let dir = tempfile::tempdir().unwrap();
    let depot = dir.path().join("depot");
    let config = test_config(std::slice::from_ref(&depot));
    for url in [
        "ftp://example.invalid/a.tar.gz",
        "S3://bucket/a.tar.gz",
        "file://fileserver/share/a.tar.gz",
    ] {
        let v = clima_artifact_tests::variant(GitTreeSha1([1; 20]), &[url.into()], Sha256([2; 32]));
        let e = ensure_variant("a", &v, dir.path(), &config)
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("`{url}`")), "{e}");
        assert!(!e.contains("No such file"), "{e}");
        assert!(e.contains("https://") && e.contains("file:///"), "{e}");
    }
    assert_eq!(temp_entries(&depot), Vec::<String>::new());
}
