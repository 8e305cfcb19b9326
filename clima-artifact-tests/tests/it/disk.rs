//! Disk trouble: a read-only first depot (installs go to the next writable one) and a full
//! disk (a clear error, nothing left behind).

use clima_artifact_runtime::depot::Error as DepotError;
use std::path::{Path, PathBuf};
use std::process::Command;

use clima_artifact_runtime::{Config, Error};
use clima_artifact_runtime::{Origin, ensure_variant};
use clima_artifact_tests::{
    TestArtifact, TestServer, assert_depot_clean, have_git, installed_entries, temp_entries,
    test_config,
};

pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn in_ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// A tmpfs mounted for the test's lifetime.
pub(crate) struct Mount(PathBuf);

impl Mount {
    /// A tmpfs of `size` (e.g. `16m`) at `at` (created), unmounted on drop; root only: `None`
    /// after saying why it skips (a failure under CI=true). Its root folder has mode 0755 (not
    /// tmpfs's default 1777), as a depot of one's own has: a node-local depot writable by
    /// others is refused.
    pub(crate) fn small(at: &Path, size: &str) -> Option<Mount> {
        if !is_root() {
            assert!(!in_ci(), "mounting a small tmpfs needs root, and CI=true");
            clima_artifact_tests::skip("mounting a small tmpfs needs root");
            return None;
        }
        Mount::tmpfs(at, &format!("size={size},mode=0755"))
    }

    pub(crate) fn tmpfs(at: &Path, options: &str) -> Option<Mount> {
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
                clima_artifact_tests::skip(&format!("cannot mount a tmpfs ({why})"));
                None
            }
            Err(e) => {
                if in_ci() {
                    panic!("cannot run mount in CI: {e}");
                }
                clima_artifact_tests::skip(&format!("cannot run mount ({e})"));
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
    assert!(
        matches!(e, Error::Depot(DepotError::NoWritableDepot { .. })),
        "{e:?}"
    );
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
    let Some((_dir, depot, _mount)) = small_depot("small-depot", "1m") else {
        return;
    };
    let server = TestServer::start();
    // 6 MB that gzip cannot shrink into 1 MB: the disk fills up in the middle of a file with
    // more of the download to come, and no `size` in the manifest.
    let art = TestArtifact::large(5, 4, 1_500_000);
    server.serve("big.tar.gz", art.tarball.clone());
    server.serve("mirror.tar.gz", art.tarball.clone());
    // No free-space reserve: this is about the write itself failing (the reserve has its own
    // test below).
    let config = Config {
        min_free_space: Some(0),
        ..test_config(std::slice::from_ref(&depot))
    };
    let urls = [server.url("big.tar.gz"), server.url("mirror.tar.gz")];
    let e = ensure_variant("big", &art.variant(&urls), &depot, &config).unwrap_err();
    let s = e.to_string();
    eprintln!("{s}");
    assert!(s.contains(&server.url("big.tar.gz")), "{s}");
    assert!(
        s.to_lowercase().contains("no space left"),
        "the error says the disk is full: {s}"
    );
    // At once, as the depot refusing it; not what reading on past the failed unpacking used
    // to conclude ("the server kept sending after the archive failed to unpack").
    assert!(s.contains("cannot unpack into"), "{s}");
    assert!(!s.contains("kept sending"), "blamed on the server: {s}");
    // Another URL would fill the same disk: it is not tried.
    assert_eq!(server.gets("mirror.tar.gz"), 0, "{s}");
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

/// A temp dir with a tmpfs of `size` (e.g. `8m`) mounted at `<dir>/<name>` (root only; `None`
/// after saying why it skips).
fn small_depot(name: &str, size: &str) -> Option<(tempfile::TempDir, PathBuf, Mount)> {
    if !have_git() {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let depot = dir.path().join(name);
    let mount = Mount::small(&depot, size)?;
    Some((dir, depot, mount))
}

/// A tarball builder with `n` files of 1 MiB of zeros.
fn zeros(n: usize) -> clima_artifact_tests::TarballBuilder {
    (0..n).fold(clima_artifact_tests::TarballBuilder::new(), |b, i| {
        b.file(&format!("zeros/{i:02}.bin"), vec![0u8; 1 << 20])
    })
}

/// A small gzip bomb with a wrong sha256 (64 MiB of zeros in 64 files, ~70 KB compressed) onto
/// an 8 MiB depot filesystem: unpacking stops before the free-space reserve (default 1%) is
/// reached, the filesystem is never full, and the temp dir is gone afterwards.
#[test]
fn a_bomb_stops_at_the_free_space_reserve_and_never_fills_the_disk() {
    let Some((_dir, depot, _mount)) = small_depot("bomb-depot", "8m") else {
        return;
    };
    let bomb = zeros(64).gzip();
    assert!(bomb.len() < 1 << 20, "{} bytes", bomb.len());
    let server = TestServer::start();
    server.serve("bomb.tar.gz", bomb);
    let wrong = clima_artifact_tests::sha256(b"not the bomb");
    let hash = "0123456789abcdef0123456789abcdef01234567".parse().unwrap();
    let v = clima_artifact_tests::variant(hash, &[server.url("bomb.tar.gz")], wrong);
    let config = test_config(std::slice::from_ref(&depot));

    let (_, total) = clima_artifact_runtime::extract::free_space(&depot).unwrap();
    let reserve = clima_artifact_runtime::extract::default_free_reserve(total);
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let (done, depot) = (done.clone(), depot.clone());
        std::thread::spawn(move || {
            let mut lowest = u64::MAX;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok((free, _)) = clima_artifact_runtime::extract::free_space(&depot) {
                    lowest = lowest.min(free);
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            lowest
        })
    };
    let e = ensure_variant("bomb", &v, &depot, &config).unwrap_err();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let lowest = watcher.join().unwrap();
    // The wrong sha256 is what is reported (a wrong download is named as such even when it
    // also failed to unpack); what matters here is that unpacking stopped at the reserve.
    let s = e.to_string();
    assert!(s.contains("sha256 mismatch"), "{s}");
    assert!(
        lowest >= reserve,
        "free space fell to {lowest} bytes, under the reserve of {reserve}"
    );
    assert_depot_clean(&depot);
    let (free_after, _) = clima_artifact_runtime::extract::free_space(&depot).unwrap();
    assert!(
        free_after > total / 2,
        "the temp dir was not removed: {free_after} free"
    );
}

/// The same bomb with its right sha256: the reserve is the error, naming the variable.
#[test]
fn the_free_space_reserve_is_the_error_when_the_download_is_right() {
    let Some((_dir, depot, _mount)) = small_depot("reserve-depot", "8m") else {
        return;
    };
    let art = TestArtifact::gzip(zeros(16));
    let server = TestServer::start();
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
    assert!(
        s.contains("stopped unpacking before") && s.contains("CLIMA_ARTIFACTS_MIN_FREE_SPACE"),
        "{s}"
    );
    assert_depot_clean(&depot);
}

/// A gzip-compressed tar of `1 MiB of zeros` plus `links` hard links to it with another mode
/// (each one a copy on disk, as in Tar.jl), or of `dirs` empty folders.
fn links_and_dirs(links: usize, dirs: usize) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Regular);
    h.set_mode(0o644);
    h.set_size(1 << 20);
    b.append_data(&mut h, "base.bin", std::io::repeat(0).take(1 << 20))
        .unwrap();
    for i in 0..links {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Link);
        h.set_mode(0o755);
        h.set_size(0);
        b.append_link(&mut h, format!("copy{i:03}.bin"), "base.bin")
            .unwrap();
    }
    for i in 0..dirs {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Directory);
        h.set_mode(0o755);
        h.set_size(0);
        b.append_data(&mut h, format!("d{i:05}/"), std::io::empty())
            .unwrap();
    }
    let tar = b.into_inner().unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    std::io::Write::write_all(&mut gz, &tar).unwrap();
    gz.finish().unwrap()
}

use std::io::Read as _;

/// Installs `tarball` (its sha256 right, its tree hash made up) into `depot`, watching the
/// filesystem's free bytes and inodes while it runs: the error and the lowest of each.
fn install_watching(depot: &Path, tarball: Vec<u8>) -> (String, u64, u64) {
    let server = TestServer::start();
    server.serve("t.tar.gz", tarball.clone());
    let sha = clima_artifact_tests::sha256(&tarball);
    let hash = "89abcdef0123456789abcdef0123456789abcdef".parse().unwrap();
    let v = clima_artifact_tests::variant(hash, &[server.url("t.tar.gz")], sha);
    let config = test_config(&[depot.to_path_buf()]);
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let (done, depot) = (done.clone(), depot.to_path_buf());
        std::thread::spawn(move || {
            let (mut bytes, mut inodes) = (u64::MAX, u64::MAX);
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let space = clima_artifact_fs::Dir::open(&depot).and_then(|d| d.space());
                if let Ok(space) = space {
                    bytes = bytes.min(space.available);
                    inodes = inodes.min(space.inodes.map_or(u64::MAX, |(free, _)| free));
                }
                std::thread::sleep(std::time::Duration::from_micros(500));
            }
            (bytes, inodes)
        })
    };
    let e = ensure_variant("t", &v, depot, &config).unwrap_err();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let (bytes, inodes) = watcher.join().unwrap();
    assert_depot_clean(depot);
    (e.to_string(), bytes, inodes)
}

/// Issue 25, 6: hard links with another mode than their target are copies. A 10 KiB archive
/// of 40 such links to a 1 MiB file stops at the free-space reserve of an 8 MiB filesystem
/// instead of filling it.
#[test]
fn hard_link_copies_count_against_the_free_space_reserve() {
    let Some((_dir, depot, _mount)) = small_depot("links-depot", "8m") else {
        return;
    };
    let tarball = links_and_dirs(40, 0);
    assert!(tarball.len() < 16 << 10, "{} bytes", tarball.len());
    let (_, total) = clima_artifact_runtime::extract::free_space(&depot).unwrap();
    let reserve = clima_artifact_runtime::extract::default_free_reserve(total);
    let (e, lowest, _) = install_watching(&depot, tarball);
    assert!(e.contains("stopped unpacking before"), "{e}");
    assert!(
        lowest >= reserve,
        "free space fell to {lowest} bytes, under the reserve of {reserve}"
    );
}

/// Issue 25, 6: folders cost inodes (and blocks, on most filesystems). 6,000 empty folders
/// onto a filesystem of 2,000 inodes stop at its inode reserve instead of using them all up.
#[test]
fn folders_count_against_the_reserve_of_inodes() {
    if !have_git() || !is_root() {
        clima_artifact_tests::skip("mounting a small tmpfs needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let depot = dir.path().join("inodes-depot");
    let Some(_mount) = Mount::tmpfs(&depot, "size=64m,nr_inodes=2000") else {
        return;
    };
    let (e, _, lowest) = install_watching(&depot, links_and_dirs(0, 6000));
    assert!(e.contains("runs out of inodes"), "{e}");
    assert!(
        lowest >= 20,
        "free inodes fell to {lowest}, under the reserve of 20"
    );
}
