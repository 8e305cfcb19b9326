//! `gc` in a depot whose `logs/` another user can write to: a planted fifo, a symlink to a
//! secret or to `/dev/zero`, and control characters in a recorded manifest path neither hang
//! it, nor make it read through the link, print the secret, grow without bound, or reach the
//! terminal raw.

use std::fs;
use std::time::Duration;

use crate::common::Sandbox;

fn gc(sb: &Sandbox) -> std::process::Output {
    sb.cli()
        .args(["gc", "--dry-run", "--force"])
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn gc_neither_hangs_on_follows_nor_prints_planted_logs() {
    let sb = Sandbox::new();
    let logs = sb.depot.join("logs");
    fs::create_dir_all(&logs).unwrap();
    fs::create_dir_all(sb.depot.join("artifacts")).unwrap();

    // A fifo as the orphan log: opened without blocking, refused by name.
    let orphans = logs.join("orphaned.toml");
    let made = std::process::Command::new("mkfifo")
        .arg(&orphans)
        .status()
        .unwrap();
    assert!(made.success());
    let out = gc(&sb);
    assert!(!out.status.success(), "a fifo was read as a log");
    let err = text(&out.stderr);
    assert!(
        err.contains("orphaned.toml") && err.contains("special file"),
        "{err}"
    );
    fs::remove_file(&orphans).unwrap();

    // The usage log a symlink to someone's secret: not followed, the secret not printed.
    let secret = sb.root.path().join("secret.toml");
    fs::write(&secret, "[\"s3cr3t-token\"]\nnot toml at all = = =\n").unwrap();
    let usage = logs.join("artifact_usage.toml");
    std::os::unix::fs::symlink(&secret, &usage).unwrap();
    let out = gc(&sb);
    assert!(!out.status.success());
    let all = text(&out.stderr) + &text(&out.stdout);
    assert!(all.contains("is a symlink"), "{all}");
    assert!(!all.contains("s3cr3t"), "the secret was printed: {all}");

    // A symlink to /dev/zero: refused at once, never read.
    fs::remove_file(&usage).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &usage).unwrap();
    let out = gc(&sb);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("is a symlink"),
        "{}",
        text(&out.stderr)
    );

    // A recorded manifest path with an escape sequence (retitle the terminal, clear it) is
    // printed escaped.
    fs::remove_file(&usage).unwrap();
    fs::write(
        &usage,
        "[[\"/tmp/x\\u001b]0;pwned\\u0007\\u001b[2J/Artifacts.toml\"]]\ntime = 2026-01-01T00:00:00.000Z\n",
    )
    .unwrap();
    let out = gc(&sb);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(stdout.contains("no longer exists"), "{stdout}");
    assert!(
        !stdout.contains('\u{1b}') && !stdout.contains('\u{7}'),
        "raw control characters: {stdout:?}"
    );
    assert!(stdout.contains("\\u{1b}]0;pwned"), "{stdout}");
}
