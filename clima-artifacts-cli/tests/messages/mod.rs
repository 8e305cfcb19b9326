//! What a user sees on stderr when stderr is not a terminal (a batch job's log, `2>log`):
//! download start, progress and end lines, lock waits naming the holder, retries and
//! fall-throughs; and that `--json` and `CLIMA_ARTIFACTS_PROGRESS=0` keep it to warnings.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clima_artifact_tests::{Fault, ManifestEntry, TestArtifact, TestServer, write_manifest};

use crate::common::{Sandbox, assert_ok, json};

/// An artifact of about 320 KiB of incompressible bytes, served slowly enough (16 KiB every
/// `delay`) that a download takes a while, and a manifest naming it `a` at `urls` (paths on
/// `server`, in order).
fn slow_artifact(
    sb: &Sandbox,
    server: &TestServer,
    delay: Duration,
    urls: &[&str],
) -> TestArtifact {
    let art = TestArtifact::large(23, 5, 64 * 1024);
    server.serve("a.tar.gz", art.tarball.clone());
    server.always(
        "a.tar.gz",
        Fault::Trickle {
            chunk: 16 * 1024,
            delay,
        },
    );
    write_manifest(
        &sb.work,
        &[ManifestEntry {
            name: "a",
            hash: art.tree_hash,
            downloads: urls.iter().map(|u| (server.url(u), art.sha256)).collect(),
            extra: Vec::new(),
        }],
    );
    art
}

/// `clima-artifacts` with progress left to its defaults (the common `cli` turns it off).
fn fetch_cmd(sb: &Sandbox, depot: &Path) -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("clima-artifacts"));
    cmd.env("CLIMA_ARTIFACTS_DEPOT_PATH", depot)
        .env_remove("CLIMA_ARTIFACTS_PROGRESS")
        .env_remove("CLIMA_ARTIFACTS_OFFLINE")
        .env_remove("JULIA_DEPOT_PATH")
        .current_dir(&sb.work);
    cmd
}

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn fetch_in_a_log_prints_start_progress_and_end_lines() {
    let sb = Sandbox::new();
    let server = TestServer::start();
    let art = slow_artifact(&sb, &server, Duration::from_millis(100), &["a.tar.gz"]);
    let out = fetch_cmd(&sb, &sb.depot.join("plain"))
        .args(["fetch", "a"])
        .output()
        .unwrap();
    assert_ok(&out);
    let err = stderr_of(&out);
    let host = server.base().trim_start_matches("http://").to_owned();
    let size = clima_artifact_fs::human_bytes(art.tarball.len() as u64);
    assert!(
        err.contains(&format!(
            "clima-artifacts: downloading `a` ({size}) from {host}\n"
        )),
        "no start line with size and host:\n{err}"
    );
    assert!(
        err.lines().any(
            |l| l.starts_with("clima-artifacts: `a`: ") && l.contains(&format!(" of {size} ("))
        ),
        "no progress line:\n{err}"
    );
    let end = err
        .lines()
        .find(|l| l.starts_with(&format!("clima-artifacts: downloaded `a`: {size} in ")))
        .unwrap_or_else(|| panic!("no end line with bytes and time:\n{err}"));
    assert!(end.ends_with("/s)"), "no rate in the end line: {end}");
    assert_eq!(err.matches("downloading `a`").count(), 1, "{err}");

    // --json and CLIMA_ARTIFACTS_PROGRESS=0: nothing on stderr (no warning happened).
    let out = fetch_cmd(&sb, &sb.depot.join("json"))
        .args(["fetch", "a", "--json"])
        .output()
        .unwrap();
    assert_ok(&out);
    assert_eq!(json(&out)[0]["status"], "downloaded");
    assert_eq!(stderr_of(&out), "", "--json printed progress");
    let out = fetch_cmd(&sb, &sb.depot.join("quiet"))
        .env("CLIMA_ARTIFACTS_PROGRESS", "0")
        .args(["fetch", "a"])
        .output()
        .unwrap();
    assert_ok(&out);
    assert_eq!(
        stderr_of(&out),
        "",
        "CLIMA_ARTIFACTS_PROGRESS=0 printed progress"
    );
}

#[test]
fn retries_and_fall_throughs_are_warned_once_even_with_json() {
    let sb = Sandbox::new();
    let server = TestServer::start();
    // The first URL is not there (404: the next URL), the second fails once with a 503.
    slow_artifact(&sb, &server, Duration::ZERO, &["gone.tar.gz", "a.tar.gz"]);
    server.fail_next("a.tar.gz", [Fault::Status(503)]);
    let out = fetch_cmd(&sb, &sb.depot)
        .args(["fetch", "a", "--json"])
        .output()
        .unwrap();
    assert_ok(&out);
    assert_eq!(json(&out)[0]["status"], "downloaded");
    let err = stderr_of(&out);
    let lines: Vec<&str> = err.lines().collect();
    let gone = server.url("gone.tar.gz");
    let fell = lines
        .iter()
        .filter(|l| l.starts_with("clima-artifacts: warning: ") && l.contains(&gone))
        .collect::<Vec<_>>();
    assert_eq!(fell.len(), 1, "{err}");
    assert!(
        fell[0].contains("404") && fell[0].ends_with("; trying the next URL"),
        "{err}"
    );
    let retried = lines
        .iter()
        .filter(|l| l.contains("503") && l.contains("retrying in"))
        .collect::<Vec<_>>();
    assert_eq!(retried.len(), 1, "{err}");
    assert!(
        retried[0].starts_with("clima-artifacts: warning: "),
        "{err}"
    );
    assert!(
        retried[0].contains("retrying in 0.5 s (attempt 2 of 3"),
        "{err}"
    );
    assert_eq!(lines.len(), 2, "only the two warnings:\n{err}");
}

#[test]
fn a_waiting_fetch_names_the_holder_its_progress_and_the_variable() {
    let sb = Sandbox::new();
    let server = TestServer::start();
    let art = slow_artifact(&sb, &server, Duration::from_millis(150), &["a.tar.gz"]);
    let mut first = fetch_cmd(&sb, &sb.depot)
        .env("CLIMA_ARTIFACTS_PROGRESS", "0")
        .args(["fetch", "a"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the first fetch holds the lock and says how far it is.
    let lock = sb
        .depot
        .join("artifacts/.locks")
        .join(format!("{}.lock", art.tree_hash));
    let start = Instant::now();
    while !std::fs::read_to_string(&lock).is_ok_and(|s| s.contains("downloading")) {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the first fetch never took the lock"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = fetch_cmd(&sb, &sb.depot)
        .args(["fetch", "a"])
        .output()
        .unwrap();
    assert_ok(&out);
    assert!(first.wait().unwrap().success());
    let err = stderr_of(&out);
    let waiting = err
        .lines()
        .find(|l| l.starts_with("clima-artifacts: waiting for artifact `a`"))
        .unwrap_or_else(|| panic!("no lock-wait line:\n{err}"));
    let holder = format!("pid {} on {}", first.id(), clima_artifact_fs::hostname());
    assert!(
        waiting.contains(&holder),
        "the holder is not named: {waiting}"
    );
    assert!(
        waiting.contains(": downloading"),
        "the holder's progress is missing: {waiting}"
    );
    assert!(
        waiting.contains("CLIMA_ARTIFACTS_LOCK_TIMEOUT"),
        "{waiting}"
    );
    assert!(
        err.contains("clima-artifacts: got the lock for artifact `a`"),
        "the end of the wait is not said:\n{err}"
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("already installed"),
        "{out:?}"
    );
    assert_eq!(server.gets("a.tar.gz"), 1);
}
