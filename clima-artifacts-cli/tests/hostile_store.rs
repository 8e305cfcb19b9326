//! A folder store (`sync push|pull`, `publish --by-hash`) that another user can write to:
//! folder symlinks planted in it lead nowhere outside it, and a planted `index.json` (a fifo, a
//! link to `/dev/zero`, a huge file) is refused at once, by name, in bounded time and memory.
//!
//! The co-user is uid 65534 (via `setpriv`) when the tests run as root; otherwise the links are
//! planted by this user, which exercises the same defence (it does not depend on who owns the
//! link).

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::assert_ok;

const CLI: &str = env!("CARGO_BIN_EXE_clima-artifacts");
const SETPRIV: &str = "/usr/bin/setpriv";

/// Runs the shell `script` as another user (uid/gid 65534) when we are root, else as us.
fn as_co_user(script: &str) {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let mut cmd = if root && Path::new(SETPRIV).exists() {
        let mut c = Command::new(SETPRIV);
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]);
        c.args(["sh", "-c", script]);
        c
    } else {
        eprintln!("note: not root (or no {SETPRIV}): planting as this user");
        let mut c = Command::new("sh");
        c.args(["-c", script]);
        c
    };
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    assert_ok(&out);
}

/// A temp folder others can enter, holding a store everyone may write to (a shared archive)
/// and a victim's folder outside it with a file in it.
struct Shared {
    root: tempfile::TempDir,
    store: PathBuf,
    victim: PathBuf,
}

impl Shared {
    fn new() -> Shared {
        let root = tempfile::tempdir().unwrap();
        fs::set_permissions(root.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let store = root.path().join("store");
        fs::create_dir(&store).unwrap();
        fs::set_permissions(&store, fs::Permissions::from_mode(0o777)).unwrap();
        let victim = root.path().join("victim");
        fs::create_dir(&victim).unwrap();
        fs::write(victim.join("energy.csv"), "the victim's data\n").unwrap();
        fs::write(victim.join("keep"), "keep me\n").unwrap();
        Shared {
            root,
            store,
            victim,
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.path().join(rel)
    }

    /// The victim folder's names and contents (to prove nothing changed there).
    fn victim_state(&self) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = fs::read_dir(&self.victim)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let text = fs::read_to_string(e.path()).unwrap_or_default();
                (e.file_name().to_string_lossy().into_owned(), text)
            })
            .collect();
        v.sort();
        v
    }
}

/// The CLI with a private depot and no progress bars; stdin closed.
fn cli(sh: &Shared) -> Command {
    let mut c = Command::new(CLI);
    c.env("CLIMA_ARTIFACTS_DEPOT_PATH", sh.path("depot"))
        .env("CLIMA_ARTIFACTS_PROGRESS", "0")
        .env_remove("CLIMA_ARTIFACTS_JULIA_INTEROP")
        .env_remove("JULIA_DEPOT_PATH")
        .current_dir(sh.root.path())
        .stdin(Stdio::null());
    c
}

/// How a bounded run went: the output, how long it ran, its peak resident memory.
struct Run {
    output: Output,
    elapsed: Duration,
    peak_rss: u64,
}

/// Runs `cmd` for at most `limit` (then kills it), with at most `max_memory` bytes of address
/// space (so a runaway read stops there instead of exhausting the machine).
// The child is reaped by wait4 (which also reports its peak memory), not by Child::wait.
#[allow(clippy::zombie_processes)]
fn run_bounded(mut cmd: Command, limit: Duration, max_memory: u64) -> Run {
    // SAFETY: setrlimit is async-signal-safe and touches only the child's own limits.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: max_memory as libc::rlim_t,
                rlim_max: max_memory as libc::rlim_t,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let start = Instant::now();
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read both pipes on threads so a chatty child cannot block on a full pipe.
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut stdout, &mut b).ok();
        b
    });
    let err_reader = std::thread::spawn(move || {
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut stderr, &mut b).ok();
        b
    });
    // wait4, not Child::wait: it also says the child's peak resident memory.
    let pid = child.id() as libc::pid_t;
    let mut killed = false;
    let (status, usage) = loop {
        let mut status = 0;
        // SAFETY: an all-zero rusage is a valid value of this plain C struct.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `pid` is our unreaped child; both out-pointers are valid for writes.
        let rc = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        assert!(rc >= 0, "wait4: {}", std::io::Error::last_os_error());
        if rc == pid {
            break (status, usage);
        }
        if start.elapsed() > limit && !killed {
            let _ = child.kill();
            killed = true;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let elapsed = start.elapsed();
    let output = Output {
        status: std::os::unix::process::ExitStatusExt::from_raw(status),
        stdout: out_reader.join().unwrap(),
        stderr: err_reader.join().unwrap(),
    };
    Run {
        output,
        elapsed,
        // ru_maxrss is in KiB on Linux.
        peak_rss: u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024,
    }
}

const TIMEOUT: Duration = Duration::from_secs(30);
const GIB: u64 = 1 << 30;

/// Asserts that a command failed by itself (an exit code, not a kill or an abort), promptly,
/// and returns its stderr.
#[track_caller]
fn failed_promptly(what: &str, run: Run) -> String {
    let Run {
        output: out,
        elapsed,
        ..
    } = run;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        elapsed < TIMEOUT,
        "{what} hung: killed after {elapsed:?}; stderr:\n{stderr}"
    );
    assert!(
        matches!(out.status.code(), Some(c) if c != 0),
        "{what} did not fail with an error ({}); stderr:\n{stderr}",
        out.status
    );
    stderr
}

#[test]
fn planted_folder_links_make_neither_publish_nor_push_write_outside_the_store() {
    let sh = Shared::new();
    let victim = sh.victim.display().to_string();
    // The co-user points store folders at the victim's folder, at the top and one level down,
    // and the key of a plain file at the victim's file.
    as_co_user(&format!(
        "cd '{}' && ln -s '{victim}' artifact && ln -s '{victim}' diag && mkdir -m 777 ckpt \
         && ln -s '{victim}' ckpt/1 && ln -s '{victim}/keep' log.txt",
        sh.store.display()
    ));
    let before = sh.victim_state();
    let outside_before: Vec<_> = fs::read_dir(sh.root.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();

    // publish --by-hash would write `artifact/<hash>`, through the link, into the victim's
    // folder.
    let data = sh.path("data");
    fs::create_dir(&data).unwrap();
    fs::write(data.join("energy.csv"), "the publisher's data\n").unwrap();
    let manifest = sh.path("Artifacts.toml");
    let tarball = sh.path("field.tar.gz");
    let out = cli(&sh)
        .args(["create", data.to_str().unwrap(), "--name", "field"])
        .arg("--manifest")
        .arg(&manifest)
        .arg("--tarball-out")
        .arg(&tarball)
        .output()
        .unwrap();
    assert_ok(&out);
    let mut publish = cli(&sh);
    publish
        .arg("publish")
        .arg(&tarball)
        .args(["--to", sh.store.to_str().unwrap(), "--by-hash", "--name"])
        .arg("field")
        .arg("--manifest")
        .arg(&manifest)
        .args(["--public-url", "https://mirror.invalid/"]);
    let err = failed_promptly("publish --by-hash", run_bounded(publish, TIMEOUT, 4 * GIB));
    let link = sh.store.join("artifact").display().to_string();
    assert!(
        err.contains(&format!("`{link}`")) && err.contains("is a symlink, not a folder"),
        "{err}"
    );
    assert!(err.contains("remove it"), "{err}");

    // sync push: a file whose key is a planted link replaces the link, not its target; a file
    // below a planted folder link (top level or deeper) is refused, naming the link.
    let push = |files: &[(&str, &str)], name: &str| {
        let run = sh.path(name);
        for (rel, text) in files {
            let p = run.join(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        }
        let mut c = cli(&sh);
        c.args([
            "sync",
            "push",
            run.to_str().unwrap(),
            sh.store.to_str().unwrap(),
        ]);
        run_bounded(c, TIMEOUT, 4 * GIB)
    };
    assert_ok(&push(&[("log.txt", "the run's log\n")], "run-log").output);
    assert_eq!(
        fs::read_to_string(sh.store.join("log.txt")).unwrap(),
        "the run's log\n"
    );
    assert!(!sh.store.join("log.txt").is_symlink());
    for (i, (rel, link)) in [("diag/energy.csv", "diag"), ("ckpt/1/state.bin", "ckpt/1")]
        .into_iter()
        .enumerate()
    {
        let err = failed_promptly(
            &format!("sync push of {rel}"),
            push(&[(rel, "the run's output\n")], &format!("run-{i}")),
        );
        let link = sh.store.join(link).display().to_string();
        assert!(
            err.contains(&format!("`{link}`")) && err.contains("is a symlink, not a folder"),
            "{rel}: {err}"
        );
    }

    // Nothing outside the store changed or appeared (but what this test made itself).
    assert_eq!(sh.victim_state(), before, "the victim's folder changed");
    let ours = ["data", "Artifacts.toml", "field.tar.gz", "depot"];
    let outside_after: Vec<_> = fs::read_dir(sh.root.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| {
            let n = n.to_string_lossy();
            !ours.contains(&n.as_ref()) && !n.starts_with("run-")
        })
        .collect();
    assert_eq!(outside_after, outside_before);
}

/// A store holding one pushed run, whose `.clima-sync/index.json` the co-user then replaces by
/// running `plant` in `.clima-sync`.
fn store_with_planted_index(plant: &str) -> Shared {
    let sh = Shared::new();
    let run = sh.path("run");
    fs::create_dir_all(run.join("diag")).unwrap();
    fs::write(run.join("diag/energy.csv"), "t,e\n").unwrap();
    let out = cli(&sh)
        .args([
            "sync",
            "push",
            run.to_str().unwrap(),
            sh.store.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_ok(&out);
    let state = sh.store.join(".clima-sync");
    fs::set_permissions(&state, fs::Permissions::from_mode(0o777)).unwrap();
    as_co_user(&format!(
        "cd '{}' && rm -f index.json && {plant}",
        state.display()
    ));
    fs::remove_dir_all(&run).unwrap();
    sh
}

fn pull(sh: &Shared) -> Command {
    let mut c = cli(sh);
    c.args([
        "sync",
        "pull",
        sh.path("run").to_str().unwrap(),
        sh.store.to_str().unwrap(),
    ]);
    c
}

#[test]
fn a_planted_index_fifo_makes_pull_fail_at_once_not_hang() {
    let sh = store_with_planted_index("mkfifo index.json");
    let err = failed_promptly("sync pull", run_bounded(pull(&sh), TIMEOUT, 4 * GIB));
    assert!(
        err.contains("`.clima-sync/index.json`") && err.contains("a fifo"),
        "{err}"
    );
    assert!(err.contains("remove it"), "{err}");
    // A push reads the stored index too (the run folder has no copy of it yet).
    let run = sh.path("run");
    fs::create_dir_all(&run).unwrap();
    fs::write(run.join("x.txt"), "x").unwrap();
    let mut push = cli(&sh);
    push.args([
        "sync",
        "push",
        run.to_str().unwrap(),
        sh.store.to_str().unwrap(),
    ]);
    let err = failed_promptly("sync push", run_bounded(push, TIMEOUT, 4 * GIB));
    assert!(err.contains("a fifo"), "{err}");
}

/// Peak memory a pull may take here: the CLI itself plus at most the 64 MiB index bound.
const PULL_MEMORY: u64 = 256 << 20;

#[test]
fn a_planted_index_link_to_dev_zero_or_a_huge_index_fails_fast_in_bounded_memory() {
    // Never read through the link: an error at once, in a few MiB. (Unbounded, reading
    // /dev/zero grows until the 1 GiB address-space limit of the child stops it.)
    let sh = store_with_planted_index("ln -s /dev/zero index.json");
    let run = run_bounded(pull(&sh), TIMEOUT, GIB);
    let peak = run.peak_rss;
    let err = failed_promptly("sync pull", run);
    assert!(
        err.contains("`.clima-sync/index.json`") && err.contains("is a symlink"),
        "{err}"
    );
    assert!(err.contains("remove it"), "{err}");
    assert!(peak < PULL_MEMORY, "peak RSS {peak} bytes");

    // A regular but huge (sparse) index: refused once past the 64 MiB bound, not read whole.
    let sh = store_with_planted_index("truncate -s 3G index.json");
    let run = run_bounded(pull(&sh), TIMEOUT, GIB);
    let peak = run.peak_rss;
    let err = failed_promptly("sync pull", run);
    assert!(
        err.contains("`.clima-sync/index.json`") && err.contains("larger than 64.0 MiB"),
        "{err}"
    );
    assert!(peak < PULL_MEMORY, "peak RSS {peak} bytes");
}

/// Issue 47, item 7: `sync pull` resumes from a checkpoint folder inside the run only. The
/// latest checkpoint's name is printed escaped (a name may hold control characters); an index
/// that names `/etc` or `../other-run` is refused by name, and no such resume path is printed.
#[test]
fn pull_prints_the_checkpoint_escaped_and_refuses_one_outside_the_run() {
    let sh = Shared::new();
    let run = sh.path("run");
    let odd = "ckpt/step\u{1b}]0;owned\u{7}";
    fs::create_dir_all(run.join(odd)).unwrap();
    fs::write(run.join(odd).join("state.bin"), "state").unwrap();
    let mut push = cli(&sh);
    push.args(["sync", "push"])
        .arg(&run)
        .arg(&sh.store)
        .arg("--checkpoint")
        .arg(run.join(odd));
    assert_ok(&push.output().unwrap());
    fs::remove_dir_all(&run).unwrap();
    let out = pull(&sh).output().unwrap();
    assert_ok(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("latest checkpoint: ") && stdout.contains("ckpt/step\\u{1b}]0;owned\\u{7}"),
        "{stdout}"
    );
    assert!(
        !stdout.contains('\u{1b}') && !stdout.contains('\u{7}'),
        "{stdout:?}"
    );
    assert_eq!(
        fs::read_to_string(run.join(odd).join("state.bin")).unwrap(),
        "state"
    );

    let index_path = sh.store.join(".clima-sync/index.json");
    let index: serde_json::Value = serde_json::from_slice(&fs::read(&index_path).unwrap()).unwrap();
    for planted in ["/etc", "../other-run"] {
        let mut bad = index.clone();
        bad["latest_checkpoint"] = serde_json::json!(planted);
        fs::write(&index_path, bad.to_string()).unwrap();
        fs::remove_dir_all(&run).unwrap();
        let out = pull(&sh).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{planted}: {out:?}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stdout.contains("latest checkpoint"), "{stdout}");
        assert!(
            stderr.contains(&format!("its `latest_checkpoint` names `{planted}`"))
                && stderr.contains("not a folder inside the run folder"),
            "{stderr}"
        );
        fs::create_dir_all(&run).unwrap();
    }
}
