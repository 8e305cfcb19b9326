//! `override set`, `unset` and `list` on a shared depot's `Overrides.toml` (issue 47, item 1):
//! another user's symlink there is never followed (no secret read, none rewritten into the
//! depot), a fifo there never hangs them, and every writer takes the overrides lock that
//! `mirror` takes, so an edit made beside another writer is never lost.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clima_artifact_manifest::layout;

use crate::common::Sandbox;

const ERA5: &str = "0123456789abcdef0123456789abcdef01234567";
const LAND: &str = "89abcdef0123456789abcdef0123456789abcdef";

/// A sandbox whose manifest names `era5` and `land` (no downloads: overrides provide them),
/// with a folder for each, and its depot's `artifacts` folder.
fn external_pair() -> (Sandbox, PathBuf, PathBuf) {
    let sb = Sandbox::new();
    fs::write(
        sb.work.join("Artifacts.toml"),
        format!("[era5]\ngit-tree-sha1 = \"{ERA5}\"\n\n[land]\ngit-tree-sha1 = \"{LAND}\"\n"),
    )
    .unwrap();
    let (era5, land) = (sb.root.path().join("era5"), sb.root.path().join("land"));
    for d in [&era5, &land] {
        fs::create_dir_all(d).unwrap();
        fs::write(d.join("data.nc"), "x").unwrap();
    }
    fs::create_dir_all(sb.depot.join("artifacts")).unwrap();
    (sb, era5, land)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn mkfifo(path: &Path) {
    let made = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(made.success());
}

/// Another user plants a symlink at the shared depot's `Overrides.toml` to a file only root
/// may read (a secret that happens to be TOML); root runs `override set`, `unset` and `list`.
/// Before: `set` read the secret through the link and wrote it, with the new line, as a 0644
/// `Overrides.toml` in the depot. Now each refuses the link by name and owner, prints nothing
/// of the secret, and leaves the link and the secret as they were. A fifo in its place: each
/// fails at once (before, `set` hung reading it).
#[test]
fn override_commands_never_follow_another_users_overrides_link_nor_hang_on_a_fifo() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        clima_artifact_tests::skip("a symlink owned by another user needs root to make");
        return;
    }
    let (sb, era5, _) = external_pair();
    let secret = sb.root.path().join("root-only.toml");
    fs::write(&secret, "api_token = \"s3cr3t-value\"\n").unwrap();
    fs::set_permissions(&secret, fs::Permissions::from_mode(0o600)).unwrap();
    let file = layout::overrides_file(&sb.depot);
    std::os::unix::fs::symlink(&secret, &file).unwrap();
    let other = clima_artifact_tests::OTHER_UID;
    std::os::unix::fs::lchown(&file, Some(other), Some(other)).unwrap();

    let era5 = era5.to_str().unwrap();
    let commands: [&[&str]; 4] = [
        &["override", "set", "era5", era5],
        &["override", "unset", "era5"],
        &["override", "list"],
        &["list"],
    ];
    for args in commands {
        let out = sb
            .cli()
            .args(args)
            .timeout(Duration::from_secs(30))
            .output()
            .unwrap();
        let all = text(&out.stdout) + &text(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded: {all}");
        assert!(
            all.contains(&format!("`{}`", file.display()))
                && all.contains(&format!("owned by uid {other}")),
            "{args:?}: {all}"
        );
        assert!(
            !all.contains("s3cr3t"),
            "{args:?} printed the secret: {all}"
        );
        let meta = fs::symlink_metadata(&file).unwrap();
        assert!(meta.is_symlink(), "{args:?} replaced the planted link");
        assert_eq!(
            fs::read_to_string(&secret).unwrap(),
            "api_token = \"s3cr3t-value\"\n"
        );
        for e in fs::read_dir(sb.depot.join("artifacts")).unwrap() {
            let p = e.unwrap().path();
            if p.is_file() && !fs::symlink_metadata(&p).unwrap().is_symlink() {
                let bytes = fs::read(&p).unwrap();
                assert!(
                    !text(&bytes).contains("s3cr3t"),
                    "{args:?} wrote the secret into `{}`",
                    p.display()
                );
            }
        }
    }

    fs::remove_file(&file).unwrap();
    mkfifo(&file);
    for args in &commands[..2] {
        let start = Instant::now();
        let out = sb
            .cli()
            .args(*args)
            .timeout(Duration::from_secs(30))
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert!(
            start.elapsed() < Duration::from_secs(30) && out.status.code() == Some(1),
            "{args:?} hung or did not fail: {out:?}"
        );
        assert!(
            err.contains("special file") && err.contains("Overrides.toml was not changed"),
            "{args:?}: {err}"
        );
    }
}

/// `clima-artifacts ARGS` of the sandbox as a child process (stdout and stderr piped).
fn spawn(sb: &Sandbox, args: &[&str]) -> std::process::Child {
    Command::new(assert_cmd::cargo::cargo_bin("clima-artifacts"))
        .env("CLIMA_ARTIFACTS_DEPOT_PATH", &sb.depot)
        .env("CLIMA_ARTIFACTS_PROGRESS", "0")
        .env_remove("CLIMA_ARTIFACTS_JULIA_INTEROP")
        .env_remove("JULIA_DEPOT_PATH")
        .current_dir(&sb.work)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Plays the other writer (`mirror` rewriting its section): holds the depot's overrides lock,
/// reads the file, lets `args` run (up to 3 s, or until it ends), writes its own edit of what
/// it read (`line` appended), and releases the lock; then `args` must have succeeded. Returns
/// the file's text at the end.
fn beside_a_locked_writer(sb: &Sandbox, args: &[&str], line: &str) -> String {
    let file = layout::overrides_file(&sb.depot);
    let lock = clima_artifact_runtime::depot::LockedFile::acquire(
        &layout::overrides_lock_file(&sb.depot),
        "the test's edit",
        Duration::from_secs(10),
        &clima_artifact_runtime::progress::Reporting::default(),
    )
    .unwrap();
    assert!(lock.is_locked());
    let read = fs::read_to_string(&file).unwrap_or_default();
    let mut child = spawn(sb, args);
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() && start.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(20));
    }
    clima_artifact_fs::write_atomically(&file, format!("{read}{line}\n").as_bytes()).unwrap();
    drop(lock);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    fs::read_to_string(&file).unwrap()
}

/// Item 1, the lost edit: `override set` and `unset` ran beside a `mirror` rewriting its
/// section without taking its lock, so one of the two edits was lost. Each now waits for the
/// lock and edits what the other writer left: both edits are in the file.
#[test]
fn override_set_and_unset_wait_for_the_overrides_lock_so_no_edit_is_lost() {
    let (sb, era5, _) = external_pair();
    let by_mirror = format!("{LAND} = \"/groups/esm/land\" # land");
    let after_set = beside_a_locked_writer(
        &sb,
        &["override", "set", "era5", era5.to_str().unwrap()],
        &by_mirror,
    );
    assert!(
        after_set.contains(&format!("{ERA5} = ")) && after_set.contains(&by_mirror),
        "an edit was lost:\n{after_set}"
    );
    let other = format!("{} = \"/groups/esm/other\"", "ab".repeat(20));
    let after_unset = beside_a_locked_writer(&sb, &["override", "unset", "era5"], &other);
    assert!(
        !after_unset.contains(ERA5)
            && after_unset.contains(&by_mirror)
            && after_unset.contains(&other),
        "an edit was lost:\n{after_unset}"
    );
}
