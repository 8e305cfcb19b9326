//! A depot another user can write to: what they plant there never turns into a read
//! or write with our privileges, and bad overrides are errors that name their line, never
//! silence. Each case goes through the public API with a real install over loopback HTTP.

use clima_artifact_runtime::depot::Error as DepotError;
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
            matches!(
                &e,
                Error::Depot(DepotError::OverrideTargetNotADirectory { line: 2, .. })
            ),
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
    assert!(
        matches!(e, Error::Depot(DepotError::OverrideTargetMissing { .. })),
        "{e:?}"
    );
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

/// What a co-user who may rename entries of a shared depot's `artifacts/` (mode 0777 without
/// the sticky bit) does to every install's temp dir: swap folders inside it for a symlink
/// to a folder of theirs (when they can get in), and, once the install has started writing
/// into it, move the temp dir itself away and put such a symlink at its path. Prints how many
/// swaps it made.
const SWAPPER: &str = r#"
import os, sys, time
arts, outside, stop = sys.argv[1:4]
swaps = 0
deadline = time.time() + 60
while time.time() < deadline and not os.path.exists(stop):
    for e in os.listdir(arts):
        p = os.path.join(arts, e)
        if not e.startswith('.') or e == '.locks' or os.path.islink(p) or not os.path.isdir(p):
            continue
        try:
            for sub in os.listdir(p):
                q = os.path.join(p, sub)
                if os.path.isdir(q) and not os.path.islink(q):
                    os.rename(q, q + '.away')
                    os.symlink(outside, q)
                    swaps += 1
        except OSError:
            pass
        try:
            # Once the install has created a folder in it (its link count grows), so the swap
            # lands while files are being written.
            if os.lstat(p).st_nlink <= 2:
                continue
            os.rename(p, os.path.join(arts, 'moved-away-%d' % swaps))
            os.symlink(outside, p)
            swaps += 1
        except OSError:
            pass
    time.sleep(0.0005)
print(swaps)
"#;

/// Issue 25, 1: an install (as root, under umask 000) while another user swaps its temp dir
/// and the folders in it for symlinks. Nothing is written outside the depot, and what is
/// installed (if anything) is the verified folder, never the planted link.
#[test]
fn a_temp_dir_swapped_by_another_user_never_redirects_a_write() {
    if !have_git() {
        return;
    }
    let Some(mut attacker) = clima_artifact_tests::as_other_user() else {
        return;
    };
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path, m| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m));
    let dir = tempfile::tempdir().unwrap();
    mode(dir.path(), 0o755).unwrap();
    let depot = dir.path().join("depot");
    let artifacts = depot.join("artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    mode(&depot, 0o755).unwrap();
    mode(&artifacts, 0o777).unwrap(); // shared, and not sticky
    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    mode(&outside, 0o777).unwrap();
    let stop = dir.path().join("stop");

    let art = TestArtifact::large(2501, 48, 8 << 10);
    let server = TestServer::start();
    server.serve("big.tar.gz", art.tarball.clone());
    server.always(
        "big.tar.gz",
        clima_artifact_tests::Fault::Trickle {
            chunk: 16 << 10,
            delay: std::time::Duration::from_millis(40),
        },
    );
    let swapper = attacker
        // Debian's python3 (CI installs python3-pip): a per-user one under /root is out of
        // the other user's reach.
        .args(["/usr/bin/python3", "-c", SWAPPER])
        .arg(&artifacts)
        .arg(&outside)
        .arg(&stop)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs the other user's swapper");
    // Let the swapper start watching before the install begins.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let config = test_config(std::slice::from_ref(&depot));
    let victim = std::process::Command::new("sh")
        .args(["-c", "umask 000; exec \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_install_one"))
        .args([
            "variant",
            "big",
            &art.tree_hash.to_hex(),
            &art.sha256.to_hex(),
        ])
        .arg(server.url("big.tar.gz"))
        .current_dir(dir.path())
        .envs(clima_artifact_tests::config_env(&config))
        .env("CLIMA_ARTIFACTS_RETRIES", "1")
        .output()
        .unwrap();
    std::fs::write(&stop, b"").unwrap();
    let out = swapper.wait_with_output().unwrap();
    let swaps: u32 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("swapper: {}", String::from_utf8_lossy(&out.stderr)));
    let stderr = String::from_utf8_lossy(&victim.stderr);
    assert!(swaps > 0, "the swapper never caught the temp dir: {stderr}");

    let planted: Vec<_> = std::fs::read_dir(&outside)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        planted.is_empty(),
        "written outside the depot: {planted:?}; {stderr}"
    );
    let dest = artifacts.join(art.tree_hash.to_hex());
    match std::fs::symlink_metadata(&dest) {
        // Caught between the mkdir and the open ("replaced"), or while filling ("moved away").
        Err(_) => assert!(
            !victim.status.success()
                && (stderr.contains("moved away") || stderr.contains("replaced"))
                && stderr.contains("chmod +t"),
            "no artifact and no clear error: {stderr}"
        ),
        Ok(meta) => {
            assert!(
                meta.is_dir(),
                "the installed artifact is a planted link: {meta:?}"
            );
            art.assert_content(&dest);
        }
    }
}

/// Every entry of `dir` with its size and modification time (what must not change).
fn snapshot(dir: &Path) -> Vec<(std::ffi::OsString, u64, std::time::SystemTime)> {
    let mut all: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let meta = e.path().symlink_metadata().unwrap();
            (e.file_name(), meta.len(), meta.modified().unwrap())
        })
        .collect();
    all.sort();
    all
}

/// A shared depot whose `artifacts` folder is another user's symlink to a folder of the
/// victim's: the install refuses, naming the link and what to do, and writes nothing there
/// (no lock, no temp dir, no artifact) and deletes nothing there (an old partial download
/// and a dead process's temp dir, which the 7-day cleanup would remove in a depot of ours).
/// The same rule as `gc`'s.
#[test]
fn a_depot_whose_artifacts_folder_is_another_users_symlink_is_refused() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        clima_artifact_tests::skip("a symlink owned by another user needs root to make");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_server, art, manifest) = served_era5(dir.path(), 1402);
    let victim = dir.path().join("victims-own-artifacts");
    std::fs::create_dir(&victim).unwrap();
    let secret = sentinel(&victim);
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(8 * 24 * 3600);
    let partial = victim.join(format!(
        "{}{}-0123456789abcdef-u0",
        clima_artifact_runtime::manifest::layout::PARTIAL_PREFIX,
        art.tree_hash
    ));
    std::fs::write(&partial, b"the victim's partial download").unwrap();
    let f = std::fs::File::options().write(true).open(&partial).unwrap();
    f.set_modified(old).unwrap();
    drop(f);
    let dead = victim.join(clima_artifact_tests::install_temp_name(
        &art.tree_hash,
        &clima_artifact_tests::host_tag(),
        4_000_000,
    ));
    std::fs::create_dir(&dead).unwrap();
    let before = snapshot(&victim);

    let depot = dir.path().join("shared-depot");
    std::fs::create_dir(&depot).unwrap();
    let link = depot.join("artifacts");
    symlink(&victim, &link).unwrap();
    let other = clima_artifact_tests::OTHER_UID;
    std::os::unix::fs::lchown(&link, Some(other), Some(other)).unwrap();

    let artifacts = Artifacts::load(&manifest)
        .unwrap()
        .with_config(test_config(std::slice::from_ref(&depot)));
    let e = artifacts.ensure_installed("era5").unwrap_err().to_string();
    for part in [
        format!("`{}`", link.display()),
        format!("owned by uid {other}"),
        "nothing was written or removed there".to_owned(),
        "Remove the link".to_owned(),
        "CLIMA_ARTIFACTS_DEPOT_PATH".to_owned(),
    ] {
        assert!(e.contains(&part), "`{part}` not in: {e}");
    }
    assert_unchanged(&secret);
    assert_eq!(
        snapshot(&victim),
        before,
        "the victim's folder changed: {e}"
    );
}
