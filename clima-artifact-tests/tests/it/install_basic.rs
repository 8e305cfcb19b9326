//! The install pipeline end to end over loopback HTTP and local files.

use clima_artifact_runtime::depot::Depot;
use clima_artifact_runtime::{Config, Error, SourceFailure};
use clima_artifact_runtime::{Origin, ensure_variant};
use clima_artifact_tests::{
    TarballBuilder, TestArtifact, TestServer, assert_depot_clean, have_git, installed_entries,
    temp_entries, test_config, tree_files,
};

fn setup() -> Option<(tempfile::TempDir, std::path::PathBuf, Config)> {
    if !have_git() {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let depot = dir.path().join("depot");
    let config = test_config(std::slice::from_ref(&depot));
    Some((dir, depot, config))
}

#[test]
fn installs_then_reinstall_is_a_no_op() {
    let Some((_d, depot, config)) = setup() else {
        return;
    };
    let server = TestServer::start();
    let art = TestArtifact::sample(1);
    server.serve("s.tar.gz", art.tarball.clone());
    let v = art.variant(&[server.url("s.tar.gz")]);

    let first = ensure_variant("sample", &v, &depot, &config).unwrap();
    assert_eq!(
        first.path,
        depot.join("artifacts").join(art.tree_hash.to_hex())
    );
    match &first.origin {
        Origin::Downloaded { url, bytes, .. } => {
            assert_eq!(url, &server.url("s.tar.gz"));
            assert_eq!(*bytes, art.tarball.len() as u64);
        }
        o => panic!("expected a download, got {o:?}"),
    }
    art.assert_content(&first.path);
    assert_eq!(
        tree_files(&first.path),
        ["README.md", "bin/run.sh", "data/values.csv", "latest.csv"]
    );
    assert_eq!(
        std::fs::read_link(first.path.join("latest.csv")).unwrap(),
        std::path::Path::new("data/values.csv")
    );
    assert_eq!(temp_entries(&depot), Vec::<String>::new());

    // Installed read-only, as Pkg's set_readonly leaves an artifact: no regular file has a
    // write bit; folders keep 0o755 (so any gc can remove the artifact); symlinks as they are.
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &str| {
        std::fs::symlink_metadata(first.path.join(p))
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(mode("README.md"), 0o444);
    assert_eq!(mode("bin/run.sh"), 0o555);
    assert_eq!(mode("bin"), 0o755);
    assert_eq!(mode("."), 0o755);
    assert!(
        std::fs::symlink_metadata(first.path.join("latest.csv"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let again = ensure_variant("sample", &v, &depot, &config).unwrap();
    assert_eq!(again.origin, Origin::Depot);
    assert_eq!(again.path, first.path);
    assert_eq!(server.gets("s.tar.gz"), 1, "re-install must not download");

    // Read-only files in writable folders: removing the artifact (as any gc does) works.
    std::fs::remove_dir_all(&first.path).unwrap();
    assert!(!first.path.exists());
}

/// The mode bits (with setuid, setgid and sticky) of `root/p`, not following a symlink.
fn mode_of(root: &std::path::Path, p: &str) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::symlink_metadata(root.join(p))
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

/// The modes an install promises for the trees of the mode tests (`README.md`, the executable
/// `bin/run.sh` and `data_file`): files 0o444, executables 0o555, folders 0o755 (no setgid bit
/// passed on).
fn assert_promised_modes(root: &std::path::Path, data_file: &str, what: &str) {
    assert_eq!(mode_of(root, "README.md"), 0o444, "{what}");
    assert_eq!(mode_of(root, "bin/run.sh"), 0o555, "{what}");
    assert_eq!(mode_of(root, data_file), 0o444, "{what}");
    assert_eq!(mode_of(root, "bin"), 0o755, "{what}");
    assert_eq!(mode_of(root, "data"), 0o755, "{what}");
}

/// The read-only modes do not depend on the umask: a strict one (which removes bits we
/// promise, so they are set again), the usual one and none at all (where the mode given at
/// creation is final and no extra chmod is made). Each install runs in its own process, as the
/// umask is per process.
#[test]
fn installed_modes_are_the_same_under_any_umask() {
    let Some((dir, _depot, config)) = setup() else {
        return;
    };
    let server = TestServer::start();
    // More small files than one hand-off batch takes (256), so several batches are written.
    let mut builder = TarballBuilder::new()
        .file("README.md", "read me")
        .exec("bin/run.sh", "#!/bin/sh\n");
    for i in 0..300 {
        builder = builder.file(
            &format!("data/part-{i:03}.csv"),
            format!("{i}\n").repeat(i % 7),
        );
    }
    let art = TestArtifact::gzip(builder);
    server.serve("m.tar.gz", art.tarball.clone());
    for umask in ["077", "022", "002", "000"] {
        let depot = dir.path().join(format!("depot-{umask}"));
        let mut config = config.clone();
        config.depots = vec![depot.clone().into()];
        let out = std::process::Command::new("sh")
            .args(["-c", &format!("umask {umask} && exec \"$0\" \"$@\"")])
            .arg(env!("CARGO_BIN_EXE_install_one"))
            .args([
                "variant",
                "m",
                &art.tree_hash.to_hex(),
                &art.sha256.to_hex(),
            ])
            .arg(server.url("m.tar.gz"))
            .envs(clima_artifact_tests::config_env(&config))
            .output()
            .unwrap();
        let path = std::path::PathBuf::from(clima_artifact_tests::success_stdout(out).trim());
        art.assert_content(&path);
        assert_promised_modes(&path, "data/part-299.csv", &format!("umask {umask}"));
        // The artifact's own folder too: 0o755 whatever the umask (umask 002 left it 0o775
        // and 000 left it 0o777, writable by other users).
        assert_eq!(
            mode_of(&path, ""),
            0o755,
            "the artifact's folder, umask {umask}"
        );
        std::fs::remove_dir_all(&path).unwrap();
    }
    assert_eq!(server.gets("m.tar.gz"), 4);
}

/// On shared project folders new modes are not the umask's alone: a default POSIX ACL replaces
/// it (here `d:o::---`, which would leave 0o440 files), and a setgid folder passes its bit on
/// to new subfolders. Installed modes are the same there.
#[test]
fn modes_are_the_same_in_setgid_and_default_acl_folders() {
    use clima_artifact_runtime::extract::{ExtractLimits, extract_archive};
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    use std::path::Path;
    let builder = TarballBuilder::new()
        .file("README.md", "read me")
        .exec("bin/run.sh", "#!/bin/sh\n")
        .file("data/values.csv", "1,2\n");
    let tarball = builder.gzip();
    let dir = tempfile::tempdir().unwrap();
    let check = |dest: &Path, what: &str| {
        extract_archive(tarball.as_slice(), dest, &ExtractLimits::default()).unwrap();
        assert_promised_modes(dest, "data/values.csv", what);
    };

    let setgid = dir.path().join("setgid");
    std::fs::create_dir(&setgid).unwrap();
    std::fs::set_permissions(&setgid, std::fs::Permissions::from_mode(0o2755)).unwrap();
    assert_eq!(mode_of(dir.path(), "setgid") & 0o2000, 0o2000);
    check(&setgid, "setgid folder");

    // A default ACL of user::rwx, group::r-x, other::--- (the kernel's xattr form: version 2,
    // then (tag, permissions, id) entries in tag order).
    let acl = dir.path().join("acl");
    std::fs::create_dir(&acl).unwrap();
    let mut value = 2u32.to_le_bytes().to_vec();
    for (tag, perm) in [(0x01u16, 7u16), (0x04, 5), (0x20, 0)] {
        value.extend_from_slice(&tag.to_le_bytes());
        value.extend_from_slice(&perm.to_le_bytes());
        value.extend_from_slice(&u32::MAX.to_le_bytes());
    }
    let path = std::ffi::CString::new(acl.as_os_str().as_bytes()).unwrap();
    // SAFETY: NUL-terminated strings and a buffer of the given length, all alive for the call.
    let set = unsafe {
        libc::setxattr(
            path.as_ptr(),
            c"system.posix_acl_default".as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    if set != 0 {
        let e = std::io::Error::last_os_error();
        assert!(
            std::env::var_os("CI").is_none() || e.raw_os_error() == Some(libc::EOPNOTSUPP),
            "cannot set a default ACL on {}: {e}",
            acl.display()
        );
        eprintln!(
            "skipping the ACL half: {} has no POSIX ACLs ({e})",
            acl.display()
        );
        return;
    }
    // Without a chmod after creation, the ACL leaves other users nothing.
    let probe = acl.join("probe");
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o444)
        .open(&probe)
        .unwrap();
    assert_eq!(mode_of(&acl, "probe"), 0o440, "the default ACL is in force");
    std::fs::remove_file(&probe).unwrap();
    check(&acl, "default ACL folder");
}

#[test]
fn zstd_xz_bzip2_and_plain_tar_and_local_sources() {
    let Some((dir, depot, config)) = setup() else {
        return;
    };
    let b = TarballBuilder::new()
        .file("a.txt", "alpha\n")
        .file("nested/deeper/b.txt", "beta\n");
    // Every format Pkg installs (it reads .tar.xz and .tar.bz2 through p7zip), by magic bytes.
    for (i, bytes) in [b.zstd(), b.xz(), b.bzip2(), b.tar()]
        .into_iter()
        .enumerate()
    {
        let art = TestArtifact::with_bytes(b.clone(), bytes);
        let file = dir.path().join(format!("src{i}.bin"));
        std::fs::write(&file, &art.tarball).unwrap();
        // Relative to the manifest folder, then as a file:// URL.
        let v = art.variant(&[format!("src{i}.bin")]);
        let got = ensure_variant("local", &v, dir.path(), &config).unwrap();
        art.assert_content(&got.path);
        std::fs::remove_dir_all(&got.path).unwrap();
        let v = art.variant(&[format!("file://{}", file.display())]);
        let got = ensure_variant("local", &v, dir.path(), &config).unwrap();
        art.assert_content(&got.path);
        std::fs::remove_dir_all(&got.path).unwrap();
    }
    assert_eq!(temp_entries(&depot), Vec::<String>::new());
}

#[test]
fn sha256_mismatch_is_an_error_and_leaves_nothing() {
    let Some((_d, depot, config)) = setup() else {
        return;
    };
    let server = TestServer::start();
    let art = TestArtifact::sample(2);
    server.serve("s.tar.gz", art.tarball.clone());
    let mut v = art.variant(&[server.url("s.tar.gz")]);
    v.downloads[0].sha256 = clima_artifact_tests::sha256(b"something else");
    let e = ensure_variant("sample", &v, &depot, &config).unwrap_err();
    let Error::DownloadFailed { failures, .. } = &e else {
        panic!("{e:?}")
    };
    match &failures[0] {
        SourceFailure::Sha256Mismatch {
            url,
            expected,
            actual,
            bytes,
        } => {
            assert_eq!(url, &server.url("s.tar.gz"));
            assert_eq!(*expected, v.downloads[0].sha256);
            assert_eq!(*actual, art.sha256);
            assert_eq!(*bytes, art.tarball.len() as u64);
        }
        f => panic!("{f:?}"),
    }
    let s = e.to_string();
    assert!(
        s.contains("sha256 mismatch") && s.contains(&art.sha256.to_hex()),
        "{s}"
    );
    assert_depot_clean(&depot);
}

#[test]
fn tree_hash_mismatch_is_an_error_and_leaves_nothing() {
    let Some((_d, depot, config)) = setup() else {
        return;
    };
    let server = TestServer::start();
    let art = TestArtifact::sample(3);
    server.serve("s.tar.gz", art.tarball.clone());
    let wrong = TestArtifact::sample(4).tree_hash;
    let mut v = art.variant(&[server.url("s.tar.gz")]);
    v.git_tree_sha1 = wrong;
    let e = ensure_variant("sample", &v, &depot, &config).unwrap_err();
    let s = e.to_string();
    assert!(s.contains("git-tree-sha1 mismatch"), "{s}");
    assert!(
        s.contains(&wrong.to_hex()) && s.contains(&art.tree_hash.to_hex()),
        "{s}"
    );
    assert!(s.contains(&server.url("s.tar.gz")), "{s}");
    assert_depot_clean(&depot);
}

#[test]
fn offline_mode_never_touches_the_network() {
    let Some((_d, depot, mut config)) = setup() else {
        return;
    };
    config.offline = true;
    let server = TestServer::start();
    let art = TestArtifact::sample(5);
    server.serve("s.tar.gz", art.tarball.clone());
    let v = art.variant(&[server.url("s.tar.gz")]);
    let e = ensure_variant("sample", &v, &depot, &config).unwrap_err();
    assert!(matches!(e, Error::Offline { .. }), "{e:?}");
    let s = e.to_string();
    assert!(
        s.contains("CLIMA_ARTIFACTS_OFFLINE") && s.contains("`sample`"),
        "{s}"
    );
    assert!(s.contains(&depot.display().to_string()), "{s}");
    assert!(s.contains(&format!("`{}`", server.url("s.tar.gz"))), "{s}");
    assert!(
        s.contains("run `clima-artifacts fetch` on a machine with network access")
            && s.contains("or unset CLIMA_ARTIFACTS_OFFLINE"),
        "{s}"
    );
    assert_eq!(server.total_gets(), 0);

    // Once installed (online), offline lookups succeed without the network.
    config.offline = false;
    ensure_variant("sample", &v, &depot, &config).unwrap();
    config.offline = true;
    let got = ensure_variant("sample", &v, &depot, &config).unwrap();
    assert_eq!(got.origin, Origin::Depot);
    assert_eq!(server.total_gets(), 1);
}

#[test]
fn offline_mode_still_installs_from_local_sources() {
    let Some((dir, depot, mut config)) = setup() else {
        return;
    };
    config.offline = true;
    let server = TestServer::start();
    let art = TestArtifact::sample(15);
    server.serve("s.tar.gz", art.tarball.clone());
    let file = dir.path().join("data").join("s.tar.gz");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, &art.tarball).unwrap();
    // A network URL first: skipped offline, never fetched; the relative path installs.
    let v = art.variant(&[server.url("s.tar.gz"), "data/s.tar.gz".into()]);
    let got = ensure_variant("sample", &v, dir.path(), &config).unwrap();
    assert!(
        matches!(&got.origin, Origin::Downloaded { url, .. } if url == "data/s.tar.gz"),
        "{:?}",
        got.origin
    );
    art.assert_content(&got.path);
    std::fs::remove_dir_all(&got.path).unwrap();
    // A `file:///` URL is local too.
    let v = art.variant(&[format!("file://{}", file.display())]);
    let got = ensure_variant("sample", &v, dir.path(), &config).unwrap();
    art.assert_content(&got.path);
    assert_eq!(server.total_gets(), 0);
    assert_eq!(temp_entries(&depot), Vec::<String>::new());

    // A local source that fails offline: the error lists it and the skipped network URL.
    std::fs::remove_dir_all(&got.path).unwrap();
    let v = art.variant(&[server.url("s.tar.gz"), "data/missing.tar.gz".into()]);
    let e = ensure_variant("sample", &v, dir.path(), &config)
        .unwrap_err()
        .to_string();
    assert!(e.contains("missing.tar.gz"), "{e}");
    assert!(
        e.contains(&format!(
            "`{}`: not tried: CLIMA_ARTIFACTS_OFFLINE is set",
            server.url("s.tar.gz")
        )),
        "{e}"
    );
    assert_eq!(server.total_gets(), 0);
}

#[test]
fn no_download_section_says_which_override_line_to_add() {
    let Some((dir, depot, config)) = setup() else {
        return;
    };
    std::fs::write(dir.path().join("Artifacts.toml"), "").unwrap();
    let art = TestArtifact::sample(6);
    let v = art.variant(&[]);
    let e = ensure_variant("era5", &v, dir.path(), &config).unwrap_err();
    let s = e.to_string();
    let line = format!("{} = \"/path/to/era5\"", art.tree_hash);
    assert!(s.contains(&line), "{s}");
    let file = depot.join("artifacts").join("Overrides.toml");
    assert!(s.contains(&format!("`{}`", file.display())), "{s}");
    assert!(
        s.contains(&dir.path().join("Artifacts.toml").display().to_string()),
        "{s}"
    );
}

#[test]
fn stale_temp_dirs_of_dead_processes_are_reclaimed() {
    let Some((_d, depot, config)) = setup() else {
        return;
    };
    let server = TestServer::start();
    let art = TestArtifact::sample(7);
    server.serve("s.tar.gz", art.tarball.clone());
    let host = clima_artifact_tests::host_tag();
    let arts = depot.join("artifacts");
    std::fs::create_dir_all(&arts).unwrap();
    // A dead pid (a child that already exited), a live one (ours), another host.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let h = art.tree_hash;
    let temp = |host: &str, pid| clima_artifact_tests::install_temp_name(&h, host, pid);
    let stale = arts.join(temp(&host, dead));
    let live = arts.join(temp(&host, std::process::id()));
    let remote = arts.join(temp("other-host", dead));
    for d in [&stale, &live, &remote] {
        std::fs::create_dir_all(d.join("sub")).unwrap();
        std::fs::write(d.join("sub/partial"), b"x").unwrap();
    }
    let v = art.variant(&[server.url("s.tar.gz")]);
    ensure_variant("sample", &v, &depot, &config).unwrap();
    assert!(!stale.exists(), "dead process's temp dir is reclaimed");
    assert!(live.exists() && remote.exists(), "others are left alone");
    assert_eq!(
        Depot::new(&depot)
            .reclaim_stale_temp_dirs(&clima_artifact_runtime::progress::Reporting::default()),
        0
    );
    assert_eq!(installed_entries(&depot), [art.tree_hash.to_hex()]);
}

#[test]
fn git_agrees_with_the_extractor_on_a_tricky_tree() {
    let Some((_d, depot, config)) = setup() else {
        return;
    };
    let b = TarballBuilder::new()
        .file("a b/ü.txt", "unicode and spaces\n")
        .file("a.b", "sorts before a/\n")
        .file("a/x", "x")
        .file("a-", "dash")
        .file("empty", "")
        .dir("empty-dir")
        .exec("tool", "#!/bin/sh\n")
        .symlink("dangling", "does/not/exist");
    let art = TestArtifact::gzip(b);
    let server = TestServer::start();
    server.serve("t.tar.gz", art.tarball.clone());
    let got = ensure_variant(
        "t",
        &art.variant(&[server.url("t.tar.gz")]),
        &depot,
        &config,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    art.assert_content(&got.path);
}

#[test]
fn leftover_probe_files_are_reclaimed_and_probes_leave_nothing() {
    let Some((_d, depot, config)) = setup() else {
        return;
    };
    let arts = depot.join("artifacts");
    std::fs::create_dir_all(&arts).unwrap();
    // Left by a process killed during the writability probe: an old one and a fresh one.
    let old = arts.join(".probe-4242-1");
    let fresh = arts.join(".probe-4243-2");
    for p in [&old, &fresh] {
        std::fs::write(p, b"").unwrap();
    }
    let two_minutes_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(120);
    std::fs::File::options()
        .write(true)
        .open(&old)
        .unwrap()
        .set_modified(two_minutes_ago)
        .unwrap();

    let server = TestServer::start();
    let art = TestArtifact::sample(16);
    server.serve("s.tar.gz", art.tarball.clone());
    let v = art.variant(&[server.url("s.tar.gz")]);
    ensure_variant("sample", &v, &depot, &config).unwrap();
    assert!(!old.exists(), "an old probe file is reclaimed");
    assert!(fresh.exists(), "a fresh one may belong to a live probe");
    let probes: Vec<String> = std::fs::read_dir(&arts)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".probe-"))
        .collect();
    assert_eq!(probes, [".probe-4243-2"], "the probe itself left nothing");
}

#[test]
fn a_zip_file_gets_an_error_that_says_to_repack_it() {
    let Some((dir, _depot, config)) = setup() else {
        return;
    };
    // The first bytes of a zip file (local file header).
    let mut zip = b"PK\x03\x04\x14\x00\x00\x00\x08\x00".to_vec();
    zip.resize(200, 0);
    std::fs::write(dir.path().join("data.zip"), &zip).unwrap();
    let hash = "0123456789abcdef0123456789abcdef01234567".parse().unwrap();
    let v = clima_artifact_tests::variant(
        hash,
        &["data.zip".to_owned()],
        clima_artifact_tests::sha256(&zip),
    );
    let e = ensure_variant("zipped", &v, dir.path(), &config).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("this is a zip file, not a tar archive") && text.contains("repack"),
        "{text}"
    );
    assert!(!text.contains("cksum"), "{text}");
}
