//! Every notice of this crate and the line it prints: today's lines, pinned word for word
//! (the CLI's snapshots and the integration tests read them).

use super::*;
use clima_artifact_progress::notice::{SystemError, line};
use std::io;

/// Each case's level and its text (`Display`, without the prefix).
fn check<E: Event>(cases: Vec<(E, Level, &str)>) {
    for (event, level, text) in cases {
        assert_eq!(event.level(), level, "{event:?}");
        assert_eq!(event.to_string(), text);
    }
}

/// Each case's whole line, prefix and level included.
fn check_lines<E: Event>(cases: Vec<(E, String)>) {
    for (event, text) in cases {
        assert_eq!(line(&event), text, "{event:?}");
    }
}

#[allow(dead_code, reason = "not every crate's reasons carry a system error")]
fn io(kind: io::ErrorKind, message: &str) -> SystemError {
    SystemError::new(kind, message)
}

#[test]
#[allow(
    clippy::too_many_lines,
    reason = "a table of cases: each notice and the line it prints"
)]
fn lock_event_displays_are_todays_lines() {
    let cases: Vec<(LockEvent, Level, &str)> = vec![
        (
            LockEvent::LockWait {
                what: "the install of `era5`".into(),
                path: PathBuf::from("/d/artifacts/ab.lock"),
                holder: "pid 7 on n1".into(),
                timeout: Duration::from_secs(600),
            },
            Level::Info,
            "waiting for the install of `era5`: another process holds its lock \
                 `/d/artifacts/ab.lock`: pid 7 on n1; waiting at most 600 s \
                 (CLIMA_ARTIFACTS_LOCK_TIMEOUT)",
        ),
        (
            LockEvent::LockTaken {
                what: "the install of `era5`".into(),
                waited: Duration::from_millis(2340),
            },
            Level::Info,
            "got the lock for the install of `era5` after waiting 2.3 s",
        ),
        (
            LockEvent::JuliaLockUnusable {
                why: PidfileReason::KeepsChanging {
                    path: PathBuf::from("/d/artifacts/ab.pid"),
                },
                artifact: Some("era5".into()),
            },
            Level::Warning,
            "Julia's lock `/d/artifacts/ab.pid` keeps changing; continuing without it (a \
                 Julia 1.13 process installing `era5` at the same time downloads it too)",
        ),
        (
            LockEvent::JuliaLockWait {
                artifact: "era5".into(),
                holder: "pid 9 on n2".into(),
                path: PathBuf::from("/d/artifacts/ab.pid"),
                timeout: Duration::from_secs(30),
            },
            Level::Info,
            "waiting for a Julia process (pid 9 on n2) installing `era5`: it holds Pkg's \
                 install lock `/d/artifacts/ab.pid`; waiting at most 30 s \
                 (CLIMA_ARTIFACTS_LOCK_TIMEOUT)",
        ),
    ];
    check(cases);
}

/// Every reason of every notice of [`LockEvent`] that has them, and the line it prints.
#[test]
#[allow(
    clippy::too_many_lines,
    reason = "a table of cases: each reason and the line it prints"
)]
fn every_lock_event_reason_prints_todays_line() {
    let p = PathBuf::from;
    let lock_file = |why| LockEvent::LockFileUnusable { why };
    let julia = |why| LockEvent::JuliaLockUnusable {
        why,
        artifact: None,
    };
    let stale = |why| LockEvent::StalePidfileRemoved {
        path: p("/d/artifacts/ab.pid"),
        holder: "pid 7 on host n1".into(),
        why,
    };
    let denied = io(
        io::ErrorKind::PermissionDenied,
        "Permission denied (os error 13)",
    );
    let cases: Vec<(LockEvent, String)> = vec![
        (
            lock_file(LockFileReason::CannotCreateFolder {
                folder: p("/d/artifacts/.locks"),
                error: denied.clone(),
            }),
            "clima-artifacts: warning: cannot create lock folder `/d/artifacts/.locks`: \
                 Permission denied (os error 13); continuing without the lock"
                .into(),
        ),
        (
            lock_file(LockFileReason::CannotOpen {
                path: p("/d/a.lock"),
                error: denied.clone(),
            }),
            "clima-artifacts: warning: cannot open lock file `/d/a.lock`: Permission denied \
                 (os error 13); continuing without the lock"
                .into(),
        ),
        (
            lock_file(LockFileReason::CannotInspect {
                path: p("/d/a.lock"),
                error: denied.clone(),
            }),
            "clima-artifacts: warning: cannot inspect lock file `/d/a.lock`: Permission \
                 denied (os error 13); continuing without the lock"
                .into(),
        ),
        (
            lock_file(LockFileReason::Planted {
                path: p("/d/a.lock"),
                what: Planted::Symlink,
            }),
            "clima-artifacts: warning: the lock file `/d/a.lock` is a symlink, not a regular \
                 file (planted by someone with write access to the depot?); it is left alone and \
                 not followed: remove it; continuing without the lock"
                .into(),
        ),
        (
            lock_file(LockFileReason::Planted {
                path: p("/d/a.lock"),
                what: Planted::Folder,
            }),
            "clima-artifacts: warning: the lock file `/d/a.lock` is a folder, not a regular \
                 file (planted by someone with write access to the depot?); it is left alone and \
                 not followed: remove it; continuing without the lock"
                .into(),
        ),
        (
            lock_file(LockFileReason::Planted {
                path: p("/d/a.lock"),
                what: Planted::SpecialFile,
            }),
            "clima-artifacts: warning: the lock file `/d/a.lock` is a special file (fifo, \
                 socket or device), not a regular file (planted by someone with write access to \
                 the depot?); it is left alone and not followed: remove it; continuing without \
                 the lock"
                .into(),
        ),
        // The system's message is escaped: the pidfile's folder is the depot's.
        (
            julia(PidfileReason::CannotTakeInstallLock {
                path: p("/d/artifacts/ab.pid"),
                error: io(io::ErrorKind::Other, "bad \u{1b}[2J"),
            }),
            "clima-artifacts: warning: cannot take Julia's install lock \
                 `/d/artifacts/ab.pid` (bad \\u{1b}[2J); continuing without it"
                .into(),
        ),
        (
            julia(PidfileReason::CannotTake {
                path: p("/d/artifacts/ab.pid"),
                error: denied.clone(),
            }),
            "clima-artifacts: warning: cannot take Julia's lock `/d/artifacts/ab.pid` \
                 (Permission denied (os error 13)); continuing without it"
                .into(),
        ),
        (
            julia(PidfileReason::KeepsChanging {
                path: p("/d/artifacts/ab.pid"),
            }),
            "clima-artifacts: warning: Julia's lock `/d/artifacts/ab.pid` keeps changing; \
                 continuing without it"
                .into(),
        ),
        (
            stale(StaleReason::ProcessGone),
            "clima-artifacts: removed the stale pidfile `/d/artifacts/ab.pid` of pid 7 on \
                 host n1 (its process is gone)"
                .into(),
        ),
        (
            stale(StaleReason::NotRefreshed {
                age: Duration::from_millis(40_400),
            }),
            "clima-artifacts: removed the stale pidfile `/d/artifacts/ab.pid` of pid 7 on \
                 host n1 (not refreshed for 40 s)"
                .into(),
        ),
    ];
    check_lines(cases);
}

#[test]
#[allow(
    clippy::too_many_lines,
    reason = "a table of cases: each notice and the line it prints"
)]
fn depot_event_displays_are_todays_lines() {
    let cases: Vec<(DepotEvent, Level, &str)> = vec![
        (
            DepotEvent::LeftoverKept {
                path: PathBuf::from("/d/artifacts/.tmp-x"),
                pid: 42,
            },
            Level::Detail,
            "keeping `/d/artifacts/.tmp-x`: its artifact's lock is held (pid 42 may live in \
                 another PID namespace)",
        ),
        (
            DepotEvent::PartialOnNode {
                artifact: "era5".into(),
                depot: PathBuf::from("/tmp/node"),
                why: PartialOnNodeReason::NoSharedDepot {
                    error: "read-only".into(),
                },
            },
            Level::Info,
            "the partial download of `era5` is kept in the node-local depot `/tmp/node`, \
                 which the end of the job may wipe: no shared depot can keep it (read-only); a \
                 later job starts this download over. Set CLIMA_ARTIFACTS_DEPOT_PATH to a \
                 writable shared folder to continue it in the next job",
        ),
    ];
    check(cases);
}

/// Every reason of every notice of [`DepotEvent`] that has them, and the line it prints.
#[test]
#[allow(
    clippy::too_many_lines,
    reason = "a table of cases: each reason and the line it prints"
)]
fn every_depot_event_reason_prints_todays_line() {
    let p = PathBuf::from;
    let on_node = |why| DepotEvent::PartialOnNode {
        artifact: "era5".into(),
        depot: p("/tmp/node"),
        why,
    };
    let cases: Vec<(DepotEvent, String)> = vec![
        (
            on_node(PartialOnNodeReason::SharedLockHeld {
                depot: p("/shared"),
            }),
            "clima-artifacts: the partial download of `era5` is kept in the node-local depot \
                 `/tmp/node`, which the end of the job may wipe: another installer holds its \
                 lock in the shared depot `/shared`; a later job starts this download over. Set \
                 CLIMA_ARTIFACTS_DEPOT_PATH to a writable shared folder to continue it in the \
                 next job"
                .into(),
        ),
        (
            on_node(PartialOnNodeReason::NoSharedDepot {
                error: "no writable depot".into(),
            }),
            "clima-artifacts: the partial download of `era5` is kept in the node-local depot \
                 `/tmp/node`, which the end of the job may wipe: no shared depot can keep it (no \
                 writable depot); a later job starts this download over. Set \
                 CLIMA_ARTIFACTS_DEPOT_PATH to a writable shared folder to continue it in the \
                 next job"
                .into(),
        ),
    ];
    check_lines(cases);
}

/// Every reason of every notice of [`UsageEvent`] that has them, and the line it prints.
#[test]
#[allow(
    clippy::too_many_lines,
    reason = "a table of cases: each reason and the line it prints"
)]
fn every_usage_event_reason_prints_todays_line() {
    let p = PathBuf::from;
    let usage = |why| UsageEvent::UsageNotRecorded {
        path: p("/d/logs/artifact_usage.toml"),
        why,
    };
    let unlocked = |why| UsageEvent::UsageLogUnlocked { why };
    let denied = io(
        io::ErrorKind::PermissionDenied,
        "Permission denied (os error 13)",
    );
    let link = ForeignLink {
        link: p("/d/logs"),
        owner: 4242,
    };
    let me = clima_artifact_fs::euid();
    let cases: Vec<(UsageEvent, String)> = vec![
        (
            usage(UsageNotRecordedReason::ForeignLink(link)),
            format!(
                "clima-artifacts: warning: not recording usage in \
                     `/d/logs/artifact_usage.toml`: `/d/logs` is a symbolic link owned by uid \
                     4242, neither you (uid {me}) nor root: another user may have planted it to \
                     make you act on their target; remove the link"
            ),
        ),
        (
            usage(UsageNotRecordedReason::Planted(Planted::Symlink)),
            "clima-artifacts: warning: not recording usage in `/d/logs/artifact_usage.toml`: \
                 it is a symlink, not a regular file (planted by someone with write access to \
                 the depot?); left alone and not followed: remove it"
                .into(),
        ),
        (
            usage(UsageNotRecordedReason::Planted(Planted::SpecialFile)),
            "clima-artifacts: warning: not recording usage in `/d/logs/artifact_usage.toml`: \
                 it is a special file, not a regular file (planted by someone with write access \
                 to the depot?); left alone and not followed: remove it"
                .into(),
        ),
        (
            unlocked(UsageLogUnlockedReason::Pidfile(PidfileReason::CannotTake {
                path: p("/d/logs/artifact_usage.toml.pid"),
                error: denied.clone(),
            })),
            "clima-artifacts: detail: cannot take Julia's lock \
                 `/d/logs/artifact_usage.toml.pid` (Permission denied (os error 13)); recording \
                 usage without it"
                .into(),
        ),
        (
            unlocked(UsageLogUnlockedReason::Held {
                holder: "pid 9 on host n2".into(),
            }),
            "clima-artifacts: detail: the usage log's lock is held by pid 9 on host n2; \
                 recording usage without it"
                .into(),
        ),
    ];
    check_lines(cases);
}
