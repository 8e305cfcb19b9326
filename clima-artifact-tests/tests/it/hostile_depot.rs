//! A depot another user can write to: what they plant there never turns into a read
//! or write with our privileges, and bad overrides are errors that name their line, never
//! silence. Each case goes through the public API with a real install over loopback HTTP.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use clima_artifact_runtime::{Artifacts, Error, Origin, ensure_variant};
use clima_artifact_tests::{
    ManifestEntry, TestArtifact, TestServer, have_git, installed_entries, test_config,
    write_manifest, write_overrides,
};

/// A sentinel file with bytes that must never change.
fn sentinel(dir: &Path) -> PathBuf {
    let p = dir.join("secret-of-another-user");
    std::fs::write(&p, b"precious, must stay exactly like this\n").unwrap();
    p
}

fn assert_unchanged(p: &Path) {
    assert_eq!(
        std::fs::read(p).unwrap(),
        b"precious, must stay exactly like this\n",
        "`{}` was written through a planted symlink",
        p.display()
    );
}

/// A loopback server with `era5` (content from `seed`) and a manifest under `dir/pkg` naming it.
fn served_era5(dir: &Path, seed: u32) -> (TestServer, TestArtifact, PathBuf) {
    let server = TestServer::start();
    let art = TestArtifact::sample(seed);
    server.serve("era5.tar.gz", art.tarball.clone());
    let manifest = write_manifest(
        &dir.join("pkg"),
        &[ManifestEntry {
            name: "era5",
            hash: art.tree_hash,
            downloads: vec![(server.url("era5.tar.gz"), art.sha256)],
            extra: vec![],
        }],
    );
    (server, art, manifest)
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o666) }, 0, "mkfifo");
}

#[test]
fn planted_symlinks_at_the_lock_and_the_usage_log_are_never_followed() {
    if !have_git() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let depot = dir.path().join("depot");
    let secret = sentinel(dir.path());
    let (_server, art, manifest) = served_era5(dir.path(), 1401);
    // The attacker plants both before our first run.
    std::fs::create_dir_all(depot.join("artifacts/.locks")).unwrap();
    std::fs::create_dir_all(depot.join("logs")).unwrap();
    symlink(
        &secret,
        depot.join(format!("artifacts/.locks/{}.lock", art.tree_hash)),
    )
    .unwrap();
    symlink(&secret, depot.join("logs/artifact_usage.toml")).unwrap();

    let artifacts = Artifacts::load(&manifest)
        .unwrap()
        .with_config(test_config(std::slice::from_ref(&depot)));
    let path = artifacts.ensure_installed("era5").unwrap();
    art.assert_content(&path);
    assert_unchanged(&secret);
    // The planted links are still links (left alone, not replaced by files holding our data).
    assert!(
        std::fs::symlink_metadata(depot.join("logs/artifact_usage.toml"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

/// Installs `era5` of `manifest` into `depot` on a thread of its own: its outcome, or `None`
/// when it has not finished after a minute (a hang: the thread is left behind).
fn install_era5_within_a_minute(manifest: &Path, depot: &Path) -> Option<Result<PathBuf, String>> {
    let (tx, rx) = std::sync::mpsc::channel();
    let config = test_config(&[depot.to_path_buf()]);
    let manifest = manifest.to_path_buf();
    std::thread::spawn(move || {
        let artifacts = Artifacts::load(&manifest).unwrap().with_config(config);
        let _ = tx.send(
            artifacts
                .ensure_installed("era5")
                .map_err(|e| e.to_string()),
        );
    });
    rx.recv_timeout(std::time::Duration::from_secs(60)).ok()
}

#[test]
fn a_fifo_at_the_lock_or_the_usage_log_does_not_hang_the_install() {
    if !have_git() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let depot = dir.path().join("depot");
    let (_server, art, manifest) = served_era5(dir.path(), 1402);
    std::fs::create_dir_all(depot.join("artifacts/.locks")).unwrap();
    std::fs::create_dir_all(depot.join("logs")).unwrap();
    mkfifo(&depot.join(format!("artifacts/.locks/{}.lock", art.tree_hash)));
    mkfifo(&depot.join("logs/artifact_usage.toml"));
    let got = install_era5_within_a_minute(&manifest, &depot);
    art.assert_content(&got.expect("the install hung on a planted fifo").unwrap());
}

/// The reclaiming of a dead process's temp dir probes that artifact's lock: a fifo planted
/// there (with a stale temp dir beside it) must not hang every install in the depot.
#[test]
fn a_fifo_at_a_stale_temp_dirs_lock_does_not_hang_the_reclaim() {
    if !have_git() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let depot = dir.path().join("depot");
    let (_server, art, manifest) = served_era5(dir.path(), 1403);
    let other = clima_artifact_runtime::GitTreeSha1([0x77; 20]);
    std::fs::create_dir_all(depot.join("artifacts/.locks")).unwrap();
    let fifo = depot.join(format!("artifacts/.locks/{other}.lock"));
    mkfifo(&fifo);
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let stale = depot
        .join("artifacts")
        .join(clima_artifact_tests::install_temp_name(
            &other,
            &clima_artifact_tests::host_tag(),
            dead,
        ));
    std::fs::create_dir_all(stale.join("sub")).unwrap();
    let got = install_era5_within_a_minute(&manifest, &depot);
    art.assert_content(
        &got.expect("the install hung probing a planted fifo lock")
            .unwrap(),
    );
    assert!(
        !stale.exists(),
        "the dead process's temp dir was not reclaimed"
    );
    let kind = std::fs::symlink_metadata(&fifo).unwrap().file_type();
    use std::os::unix::fs::FileTypeExt;
    assert!(kind.is_fifo(), "the planted fifo was replaced");
}

struct Bad {
    _dir: tempfile::TempDir,
    depot: PathBuf,
    art: TestArtifact,
    server: TestServer,
    root: PathBuf,
}

fn bad_setup(seed: u32) -> Option<Bad> {
    if !have_git() {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let depot = dir.path().join("depot");
    let server = TestServer::start();
    let art = TestArtifact::sample(seed);
    server.serve("a.tar.gz", art.tarball.clone());
    let root = dir.path().to_path_buf();
    Some(Bad {
        _dir: dir,
        depot,
        art,
        server,
        root,
    })
}

impl Bad {
    fn ensure(&self) -> Result<clima_artifact_runtime::Installed, Error> {
        let config = test_config(std::slice::from_ref(&self.depot));
        let variant = self.art.variant(&[self.server.url("a.tar.gz")]);
        ensure_variant("a", &variant, &self.root, &config)
    }
}

#[test]
fn an_override_must_point_at_a_directory() {
    let Some(b) = bad_setup(1403) else { return };
    let file = b.root.join("a-file.nc");
    std::fs::write(&file, "x").unwrap();
    for (target, found) in [
        (file.clone(), "a regular file"),
        (PathBuf::from("/dev/null"), "a special file"),
    ] {
        let overrides = write_overrides(
            &b.depot,
            &format!("# comment\n{} = {:?}\n", b.art.tree_hash, target),
        );
        let e = b.ensure().unwrap_err();
        assert!(
            matches!(&e, Error::OverrideTargetNotADirectory { line: 2, .. }),
            "{e:?}"
        );
        let text = e.to_string();
        assert!(
            text.contains(&overrides.display().to_string())
                && text.contains("line 2")
                && text.contains(&target.display().to_string())
                && text.contains(found),
            "{text}"
        );
    }
    // A dangling symlink as the target is missing, named as such.
    let dangling = b.root.join("dangling");
    symlink(b.root.join("nowhere"), &dangling).unwrap();
    write_overrides(&b.depot, &format!("{} = {:?}\n", b.art.tree_hash, dangling));
    let e = b.ensure().unwrap_err();
    assert!(matches!(e, Error::OverrideTargetMissing { .. }), "{e:?}");
    // Nothing was downloaded instead.
    assert_eq!(b.server.total_gets(), 0);
    assert!(installed_entries(&b.depot).is_empty());
}

#[test]
fn an_overrides_file_that_is_not_a_regular_file_is_an_error_not_silence() {
    let Some(b) = bad_setup(1404) else { return };
    let path = b.depot.join("artifacts/Overrides.toml");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();

    let expect_error = |what: &str, part: &str| {
        let e = b.ensure().unwrap_err().to_string();
        assert!(
            e.contains(&path.display().to_string()) && e.contains(part),
            "{what}: {e}"
        );
    };
    std::fs::create_dir(&path).unwrap();
    expect_error("a directory", "directory");
    std::fs::remove_dir(&path).unwrap();

    symlink(b.root.join("no-such-file"), &path).unwrap();
    expect_error("a dangling symlink", "does not exist");
    std::fs::remove_file(&path).unwrap();

    mkfifo(&path);
    let (tx, rx) = std::sync::mpsc::channel();
    let (depot, root, variant) = (
        b.depot.clone(),
        b.root.clone(),
        b.art.variant(&[b.server.url("a.tar.gz")]),
    );
    std::thread::spawn(move || {
        let config = test_config(std::slice::from_ref(&depot));
        let _ = tx.send(ensure_variant("a", &variant, &root, &config).map_err(|e| e.to_string()));
    });
    let e = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("reading a fifo Overrides.toml hung")
        .unwrap_err();
    assert!(e.contains("not a regular file"), "a fifo: {e}");
    std::fs::remove_file(&path).unwrap();
    assert_eq!(b.server.total_gets(), 0, "downloaded instead of failing");

    // A symlink to a real overrides file is fine (users keep them elsewhere).
    let real = b.root.join("my-overrides.toml");
    let target = b.root.join("shared-copy");
    std::fs::create_dir(&target).unwrap();
    std::fs::write(&real, format!("{} = {:?}\n", b.art.tree_hash, target)).unwrap();
    symlink(&real, &path).unwrap();
    let got = b.ensure().unwrap();
    assert_eq!(got.path, target);
    assert!(matches!(got.origin, Origin::Override { .. }));
}
