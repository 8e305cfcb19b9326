//! Pkg 1.13's install lock: `<depot>/artifacts/<hash>.pid`, held by `FileWatching.mkpidlock`
//! with `stale_age = 20` (Pkg's `download_artifact`). The Julia holder is emulated as Base's
//! `Pidfile` does it (`base/pidfile.jl`): a real process creates the file with `O_EXCL`, mode
//! `0o444`, content `"<pid> <gethostname()>"` (no newline), refreshes its mtime while it works,
//! renames the artifact it installed into place and removes the pidfile. Stale rule
//! (`stale_pidfile`): older than 20 s and (older than 500 s or, on this host, its pid dead).

use clima_artifact_runtime::depot::Error as DepotError;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant, SystemTime};

use clima_artifact_runtime::{Error, Origin, ensure_variant};
use clima_artifact_tests::{Fault, TestArtifact, have_git, served, test_config};

fn pidfile(depot: &Path, art: &TestArtifact) -> PathBuf {
    depot
        .join("artifacts")
        .join(format!("{}.pid", art.tree_hash.to_hex()))
}

/// Writes a pidfile as `write_pidfile` does, with mtime `age` in the past, mode `0o444`.
fn plant_pidfile(path: &Path, pid: u32, host: &str, age: Duration) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    let f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .unwrap();
    use std::io::Write;
    (&f).write_all(format!("{pid} {host}").as_bytes()).unwrap();
    f.set_modified(SystemTime::now() - age).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o444)).unwrap();
}

/// A pid that was just used by a process that has exited.
fn dead_pid() -> u32 {
    let mut c = Command::new("true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    pid
}

/// A Julia process installing `art`: takes the pidfile (O_EXCL through the shell's noclobber,
/// umask giving 0o444), refreshes its mtime every `refresh`, after `work` renames the artifact
/// it unpacked in a temp folder of the artifacts folder into place, then removes the pidfile.
fn julia_installer(depot: &Path, art: &TestArtifact, work: Duration, refresh: Duration) -> Child {
    let artifacts = depot.join("artifacts");
    let tmp = artifacts.join("jl_tmp_install");
    art.builder.write_to(&tmp);
    let script = r#"
        umask 0222; set -C
        printf '%s %s' "$$" "$HOST" > "$PIDFILE" || exit 3
        end=$(( $(date +%s%N) + WORK_NS ))
        while [ "$(date +%s%N)" -lt "$end" ]; do sleep "$REFRESH"; touch "$PIDFILE"; done
        mv "$TMP" "$DST"
        rm -f "$PIDFILE"
    "#
    .replace("WORK_NS", &work.as_nanos().to_string());
    let child = Command::new("sh")
        .args(["-c", &script])
        .env("HOST", clima_artifact_fs::hostname())
        .env("PIDFILE", pidfile(depot, art))
        .env("REFRESH", refresh.as_secs_f64().to_string())
        .env("TMP", &tmp)
        .env("DST", artifacts.join(art.tree_hash.to_hex()))
        .spawn()
        .unwrap();
    // The shell creates the file before it writes the holder into it: wait for the holder.
    let start = Instant::now();
    while fs::read_to_string(pidfile(depot, art)).map_or(true, |s| s.is_empty()) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the holder never started"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    child
}

#[test]
fn we_wait_for_a_julia_installer_and_use_its_artifact_without_downloading() {
    if !have_git() {
        return;
    }
    let s = served(TestArtifact::sample(71), "a.tar.gz");
    let config = test_config(std::slice::from_ref(&s.depot));
    let mut julia = julia_installer(
        &s.depot,
        &s.art,
        Duration::from_millis(1500),
        Duration::from_millis(300),
    );
    let holder = fs::read_to_string(pidfile(&s.depot, &s.art)).unwrap();
    assert_eq!(
        holder,
        format!("{} {}", julia.id(), clima_artifact_fs::hostname())
    );
    let variant = s.art.variant(&[s.server.url("a.tar.gz")]);
    let got = ensure_variant("a", &variant, &s.depot, &config).unwrap();
    assert!(julia.wait().unwrap().success());
    assert_eq!(got.origin, Origin::Depot);
    assert_eq!(
        s.server.gets("a.tar.gz"),
        0,
        "no download while Julia installs"
    );
    s.art.assert_content(&got.path);
    assert!(!pidfile(&s.depot, &s.art).exists());
}

#[test]
fn a_live_julia_holder_is_waited_on_until_the_lock_timeout_and_named() {
    let s = served(TestArtifact::sample(72), "a.tar.gz");
    let mut config = test_config(std::slice::from_ref(&s.depot));
    config.lock_timeout = Duration::from_millis(600);
    let variant = s.art.variant(&[s.server.url("a.tar.gz")]);
    let path = pidfile(&s.depot, &s.art);
    let host = clima_artifact_fs::hostname();
    // A live pid on this host; another host's, fresh and 100 s old (valid up to 25 x 20 s);
    // a dead pid of this host that is younger than 20 s.
    let live = std::process::id();
    for (pid, host, age) in [
        (live, host.as_str(), 0),
        (1, "julia-node-17", 0),
        (1, "julia-node-17", 100),
        (dead_pid(), host.as_str(), 5),
    ] {
        plant_pidfile(&path, pid, host, Duration::from_secs(age));
        let e = ensure_variant("a", &variant, &s.depot, &config).unwrap_err();
        assert!(
            matches!(e, Error::Depot(DepotError::LockTimeout { .. })),
            "{e}"
        );
        let text = e.to_string();
        assert!(
            text.contains(&format!("a Julia process, pid {pid} on host {host}"))
                && text.contains(&path.display().to_string())
                && text.contains("CLIMA_ARTIFACTS_LOCK_TIMEOUT"),
            "{text}"
        );
        assert_eq!(s.server.gets("a.tar.gz"), 0);
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            format!("{pid} {host}"),
            "a pidfile that is not stale by Julia's rule is left alone"
        );
        fs::remove_file(&path).unwrap();
    }
}

#[test]
fn stale_julia_pidfiles_are_taken_over_as_julia_would() {
    if !have_git() {
        return;
    }
    let s = served(TestArtifact::sample(73), "a.tar.gz");
    let config = test_config(std::slice::from_ref(&s.depot));
    let variant = s.art.variant(&[s.server.url("a.tar.gz")]);
    let path = pidfile(&s.depot, &s.art);
    let host = clima_artifact_fs::hostname();
    // A dead pid of this host, 21 s old; another host's, older than 25 x 20 s.
    for (pid, host, age) in [(dead_pid(), host.as_str(), 21), (1, "julia-node-17", 501)] {
        plant_pidfile(&path, pid, host, Duration::from_secs(age));
        let got = ensure_variant("a", &variant, &s.depot, &config).unwrap();
        assert!(matches!(got.origin, Origin::Downloaded { .. }));
        s.art.assert_content(&got.path);
        assert!(!path.exists(), "our pidfile is removed when we are done");
        clima_artifact_fs::remove_tree(&got.path).unwrap();
    }
    assert_eq!(s.server.gets("a.tar.gz"), 2);
}

#[test]
fn while_we_install_we_hold_julias_pidfile_and_keep_it_fresh() {
    if !have_git() {
        return;
    }
    // About 12 s of download: longer than the 10 s refresh interval.
    let s = served(TestArtifact::large(74, 4, 3000), "slow.tar.gz");
    s.server.always(
        "slow.tar.gz",
        Fault::Trickle {
            chunk: s.art.tarball.len() / 120 + 1,
            delay: Duration::from_millis(100),
        },
    );
    let config = test_config(std::slice::from_ref(&s.depot));
    let variant = s.art.variant(&[s.server.url("slow.tar.gz")]);
    let path = pidfile(&s.depot, &s.art);
    std::thread::scope(|scope| {
        let install = scope.spawn(|| ensure_variant("a", &variant, &s.depot, &config));
        let start = Instant::now();
        while !path.exists() {
            assert!(start.elapsed() < Duration::from_secs(10), "no pidfile");
            std::thread::sleep(Duration::from_millis(5));
        }
        let meta = fs::symlink_metadata(&path).unwrap();
        assert!(meta.is_file());
        assert_eq!(
            meta.permissions().mode() & 0o222,
            0,
            "read-only, as Julia's"
        );
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            format!("{} {}", std::process::id(), clima_artifact_fs::hostname())
        );
        // Age it as a Julia waiter would see a holder that stopped refreshing: 15 s.
        let f = fs::File::open(&path).unwrap();
        f.set_modified(SystemTime::now() - Duration::from_secs(15))
            .unwrap();
        let aged = Instant::now();
        let mut refreshed = false;
        while aged.elapsed() < Duration::from_secs(11) && path.exists() {
            let age = SystemTime::now()
                .duration_since(fs::metadata(&path).unwrap().modified().unwrap())
                .unwrap_or_default();
            if age < Duration::from_secs(5) {
                refreshed = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(refreshed, "the holder refreshes the mtime every 10 s");
        let got = install.join().unwrap().unwrap();
        s.art.assert_content(&got.path);
    });
    assert!(!path.exists());
}

#[test]
fn a_symlink_planted_as_the_pidfile_is_neither_followed_nor_removed() {
    if !have_git() {
        return;
    }
    let s = served(TestArtifact::sample(75), "a.tar.gz");
    let config = test_config(std::slice::from_ref(&s.depot));
    let variant = s.art.variant(&[s.server.url("a.tar.gz")]);
    let secret = s.dir.path().join("secret");
    fs::write(&secret, b"precious").unwrap();
    let path = pidfile(&s.depot, &s.art);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&secret, &path).unwrap();
    let got = ensure_variant("a", &variant, &s.depot, &config).unwrap();
    s.art.assert_content(&got.path);
    assert_eq!(fs::read(&secret).unwrap(), b"precious");
    assert!(
        fs::symlink_metadata(&path)
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

/// Issue 47, item 5: a pidfile dated in the future (a clock set wrong, a planted file) whose
/// holder is dead on this host no longer blocks every install of the artifact until its date:
/// it is stale whatever its time. One of a live holder, or of another host, is still waited
/// for.
#[test]
fn a_future_dated_pidfile_of_a_dead_local_holder_is_taken_over() {
    if !have_git() {
        return;
    }
    let s = served(TestArtifact::sample(74), "a.tar.gz");
    let mut config = test_config(std::slice::from_ref(&s.depot));
    config.lock_timeout = Duration::from_millis(600);
    let variant = s.art.variant(&[s.server.url("a.tar.gz")]);
    let path = pidfile(&s.depot, &s.art);
    let host = clima_artifact_fs::hostname();
    let plant_future = |pid: u32, host: &str| {
        plant_pidfile(&path, pid, host, Duration::ZERO);
        let f = fs::File::open(&path).unwrap();
        f.set_modified(SystemTime::now() + Duration::from_secs(24 * 3600))
            .unwrap();
    };
    // Waited for: a live holder of this host, and another host's (which cannot be checked).
    for (pid, host) in [(std::process::id(), host.as_str()), (1, "julia-node-17")] {
        plant_future(pid, host);
        let e = ensure_variant("a", &variant, &s.depot, &config).unwrap_err();
        assert!(
            matches!(e, Error::Depot(DepotError::LockTimeout { .. })),
            "{e}"
        );
        assert_eq!(s.server.gets("a.tar.gz"), 0);
        fs::remove_file(&path).unwrap();
    }
    // Taken over: a dead holder of this host, a day ahead.
    plant_future(dead_pid(), &host);
    let got = ensure_variant("a", &variant, &s.depot, &config).unwrap();
    assert!(matches!(got.origin, Origin::Downloaded { .. }));
    s.art.assert_content(&got.path);
    assert!(!path.exists(), "our pidfile is removed when we are done");
}
