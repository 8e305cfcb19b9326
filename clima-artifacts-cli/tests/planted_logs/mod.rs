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

/// Runs `script` with `sh -c` as the other user of a shared depot; `None` when the test
/// cannot act as another user (it then skips).
fn as_other_user(script: &str) -> Option<()> {
    let mut cmd = clima_artifact_tests::as_other_user()?;
    let st = cmd.args(["sh", "-c", script]).status().unwrap();
    assert!(st.success(), "the other user's commands failed: {script}");
    Some(())
}

/// A shared depot (world-writable) of a sandbox, inside folders everyone may enter.
fn shared_depot() -> Sandbox {
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::new();
    for dir in [sb.root.path(), &sb.work] {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o755)).unwrap();
    }
    fs::set_permissions(&sb.depot, fs::Permissions::from_mode(0o777)).unwrap();
    sb
}

/// Issue 25, 2: another user makes a shared depot's `artifacts` a symlink to the victim's
/// own artifacts folder and marks what is there as long orphaned: the victim's `gc` refuses
/// to act through the link and deletes nothing. The victim's own symlinked `artifacts`
/// (a depot moved to a bigger disk) is collected as usual.
#[test]
fn gc_never_deletes_through_an_artifacts_link_another_user_planted() {
    let sb = shared_depot();
    let hash = "0123456789abcdef0123456789abcdef01234567";
    let victims = sb.root.path().join("victim/.julia/artifacts");
    fs::create_dir_all(victims.join(hash)).unwrap();
    fs::write(victims.join(hash).join("results.nc"), "years of work").unwrap();
    let artifacts = sb.depot.join("artifacts");
    let script = format!(
        "ln -s '{}' '{}' && mkdir '{logs}' && printf '\"%s\" = 2020-01-01T00:00:00Z\\n' \
         '{}/{hash}' > '{logs}/orphaned.toml'",
        victims.display(),
        artifacts.display(),
        artifacts.display(),
        logs = sb.depot.join("logs").display(),
    );
    if as_other_user(&script).is_none() {
        return;
    }
    let out = sb
        .cli()
        .args(["gc", "--force"])
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert!(
        victims.join(hash).join("results.nc").exists(),
        "gc deleted the victim's folder through the planted link: {err}"
    );
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("owned by uid 65534") && err.contains("nothing was removed"),
        "{err}"
    );

    // The victim's own link to a folder of theirs: followed, collected.
    fs::remove_file(&artifacts).unwrap();
    fs::remove_dir_all(sb.depot.join("logs")).unwrap();
    let own = sb.root.path().join("bigdisk/artifacts");
    fs::create_dir_all(own.join(hash)).unwrap();
    std::os::unix::fs::symlink(&own, &artifacts).unwrap();
    let out = sb
        .cli()
        .args(["gc", "--force", "--delay", "0"])
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!own.join(hash).exists(), "{}", text(&out.stdout));
}

/// Issue 25, 10: another user makes a shared depot's `logs` a symlink to the victim's
/// `~/.julia/logs`: neither `fetch` (the usage log; it refuses the depot) nor `gc` (the
/// orphan and usage logs) creates or rewrites anything there.
#[test]
fn a_logs_link_another_user_planted_is_never_written_through() {
    let sb = shared_depot();
    let victim_logs = sb.root.path().join("victim/.julia/logs");
    fs::create_dir_all(&victim_logs).unwrap();
    let julia_orphans = "\"/home/victim/.julia/artifacts/aa\" = 2026-11-30T00:00:00Z\n";
    fs::write(victim_logs.join("orphaned.toml"), julia_orphans).unwrap();
    let script = format!(
        "ln -s '{}' '{}'",
        victim_logs.display(),
        sb.depot.join("logs").display()
    );
    if as_other_user(&script).is_none() {
        return;
    }
    let art = clima_artifact_tests::TestArtifact::sample(2510);
    let server = clima_artifact_tests::TestServer::start();
    server.serve("s.tar.gz", art.tarball.clone());
    let manifest = clima_artifact_tests::write_manifest(
        &sb.work,
        &[clima_artifact_tests::ManifestEntry {
            name: "s",
            hash: art.tree_hash,
            downloads: vec![(server.url("s.tar.gz"), art.sha256)],
            extra: vec![],
        }],
    );
    let out = sb
        .cli()
        .args(["fetch", "s", "--manifest"])
        .arg(&manifest)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    // Installs apply gc's rule to the depot's own folders (issue 35, item 9): refused, named.
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("logs` is a symbolic link owned by uid"),
        "{}",
        text(&out.stderr)
    );
    let out = sb
        .cli()
        .args(["gc", "--manifest"])
        .arg(&manifest)
        .timeout(Duration::from_secs(30))
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "gc wrote through the planted logs link"
    );
    let mut names: Vec<_> = fs::read_dir(&victim_logs)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["orphaned.toml"], "{}", text(&out.stderr));
    assert_eq!(
        fs::read_to_string(victim_logs.join("orphaned.toml")).unwrap(),
        julia_orphans,
        "Julia's orphan entries were rewritten"
    );
}
