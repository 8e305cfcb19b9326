//! Disk trouble: a read-only first depot (installs go to the next writable one) and a full
//! disk (a clear error, nothing left behind).

use std::path::{Path, PathBuf};
use std::process::Command;

use clima_artifact_runtime::Error;
use clima_artifact_runtime::{Origin, ensure_variant};
use clima_artifact_tests::{
    TestArtifact, TestServer, assert_depot_clean, have_git, installed_entries, temp_entries,
    test_config,
};

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn in_ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// A tmpfs mounted for the test's lifetime.
struct Mount(PathBuf);

impl Mount {
    fn tmpfs(at: &Path, options: &str) -> Option<Mount> {
        std::fs::create_dir_all(at).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs"])
            .arg(at)
            .output();
        match out {
            Ok(o) if o.status.success() => Some(Mount(at.to_owned())),
            Ok(o) => {
                let why = String::from_utf8_lossy(&o.stderr).into_owned();
                if in_ci() {
                    panic!("cannot mount a tmpfs in CI: {why}");
                }
                eprintln!("skipping: cannot mount a tmpfs ({why})");
                None
            }
            Err(e) => {
                if in_ci() {
                    panic!("cannot run mount in CI: {e}");
                }
                eprintln!("skipping: cannot run mount ({e})");
                None
            }
        }
    }

    fn remount(&self, options: &str) {
        let st = Command::new("mount")
            .args(["-o", &format!("remount,{options}")])
            .arg(&self.0)
            .status()
            .unwrap();
        assert!(st.success(), "remount {options}");
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn read_only_first_depot_installs_into_the_next() {
    if !have_git() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ro = dir.path().join("ro-depot");
    let rw = dir.path().join("rw-depot");
    let server = TestServer::start();
    let art = TestArtifact::sample(11);
    let pre = TestArtifact::sample(12);
    server.serve("a.tar.gz", art.tarball.clone());

    // A read-only first depot that already holds `pre`: a read-only tmpfs as root (permission
    // bits do not stop root), a chmod 0555 folder otherwise.
    let _mount;
    let pre_dir = ro.join("artifacts").join(pre.tree_hash.to_hex());
    if is_root() {
        _mount = match Mount::tmpfs(&ro, "size=4m") {
            Some(m) => m,
            None => return,
        };
        pre.builder.write_to(&pre_dir);
        _mount.remount("ro");
    } else {
        pre.builder.write_to(&pre_dir);
        use std::os::unix::fs::PermissionsExt;
        for d in [ro.join("artifacts"), ro.clone()] {
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o555)).unwrap();
        }
    }
    assert!(
        std::fs::write(ro.join("artifacts/probe"), b"x").is_err(),
        "the first depot must be read-only for this test"
    );

    let config = test_config(&[ro.clone(), rw.clone()]);
    let got = ensure_variant("a", &art.variant(&[server.url("a.tar.gz")]), &rw, &config)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got.path, rw.join("artifacts").join(art.tree_hash.to_hex()));
    art.assert_content(&got.path);
    assert_eq!(temp_entries(&rw), Vec::<String>::new());

    // Lookups still find what the read-only depot holds.
    let found = ensure_variant("pre", &pre.variant(&[]), &rw, &config).unwrap();
    assert_eq!((found.path, found.origin), (pre_dir, Origin::Depot));

    // Only read-only depots: a clear error listing them.
    let config = test_config(std::slice::from_ref(&ro));
    let other = TestArtifact::sample(13);
    server.serve("o.tar.gz", other.tarball.clone());
    let e =
        ensure_variant("o", &other.variant(&[server.url("o.tar.gz")]), &rw, &config).unwrap_err();
    assert!(matches!(e, Error::NoWritableDepot { .. }), "{e:?}");
    let s = e.to_string();
    assert!(
        s.contains(&ro.display().to_string()) && s.contains("CLIMA_ARTIFACTS_DEPOT_PATH"),
        "{s}"
    );
    assert_eq!(server.gets("o.tar.gz"), 0);

    if !is_root() {
        use std::os::unix::fs::PermissionsExt;
        for d in [ro.clone(), ro.join("artifacts")] {
            let _ = std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755));
        }
    }
}

#[test]
fn full_disk_is_a_clear_error_and_leaves_nothing() {
    if !have_git() {
        return;
    }
    if !is_root() {
        eprintln!("skipping: mounting a small tmpfs needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let depot = dir.path().join("small-depot");
    let Some(_mount) = Mount::tmpfs(&depot, "size=1m") else {
        return;
    };
    let server = TestServer::start();
    let art = TestArtifact::large(5, 4, 400_000); // 1.6 MB unpacked into 1 MB
    server.serve("big.tar.gz", art.tarball.clone());
    let config = test_config(std::slice::from_ref(&depot));
    let e = ensure_variant(
        "big",
        &art.variant(&[server.url("big.tar.gz")]),
        &depot,
        &config,
    )
    .unwrap_err();
    let s = e.to_string();
    eprintln!("{s}");
    assert!(s.contains(&server.url("big.tar.gz")), "{s}");
    assert!(
        s.to_lowercase().contains("no space left"),
        "the error says the disk is full: {s}"
    );
    assert_depot_clean(&depot);

    // After freeing space (a bigger disk), the same install works.
    _mount.remount("size=8m");
    let got = ensure_variant(
        "big",
        &art.variant(&[server.url("big.tar.gz")]),
        &depot,
        &config,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    art.assert_files(&got.path);
    assert_eq!(installed_entries(&depot).len(), 1);
}
