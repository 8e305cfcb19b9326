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
fn sync_event_displays_are_todays_lines() {
    let cases: Vec<(SyncEvent, Level, &str)> = vec![
        (
            SyncEvent::NotRestored {
                path: PathBuf::from("out/a.nc"),
                from: Some("file:///s".into()),
                why: NotRestoredReason::ContentMismatch {
                    sha256: "ab".into(),
                    recorded: "cd".into(),
                },
            },
            Level::Warning,
            "not restoring `out/a.nc` from `file:///s`: its content (sha256 ab) is not what \
                 the sync index records (cd); it was changed or only half uploaded",
        ),
        (
            // A name from a planted sync index: escaped, as is the storage URL.
            SyncEvent::NotRestored {
                path: PathBuf::from("out/\u{1b}[2Ja.nc"),
                from: Some("file:///s\u{7}".into()),
                why: NotRestoredReason::Refused("refused".into()),
            },
            Level::Warning,
            "not restoring `out/\\u{1b}[2Ja.nc` from `file:///s\\u{7}`: refused",
        ),
        (
            SyncEvent::NotSynced {
                path: PathBuf::from("diag/e\nforged.csv"),
                why: NotSyncedReason::VanishedDuringSync,
            },
            Level::Warning,
            "not syncing `diag/e\\nforged.csv`: it vanished during the sync",
        ),
        (
            SyncEvent::SlowSync {
                what: "the sync of outputs".into(),
                took: Duration::from_millis(75_040),
                after: Duration::from_secs(60),
                biggest: vec![("a.nc".into(), 3 << 30), ("b.nc".into(), 1 << 20)],
            },
            Level::Warning,
            "the sync of outputs has taken 75.0 s (more than the 60.0 s set by \
                 slow_warning_after / CLIMA_SYNC_WARN_AFTER); the biggest files are `a.nc` \
                 (3.0 GiB), `b.nc` (1.0 MiB). If another component already uploads them, add \
                 exclude globs for them (CLIMA_SYNC_EXCLUDE), or turn sync_artifacts off \
                 (CLIMA_SYNC_ARTIFACTS=0) to move only checkpoints",
        ),
    ];
    check(cases);
}

/// Every reason of every notice of [`SyncEvent`] that has them, and the line it prints.
#[test]
#[allow(
    clippy::too_many_lines,
    reason = "a table of cases: each reason and the line it prints"
)]
fn every_sync_event_reason_prints_todays_line() {
    let p = PathBuf::from;
    let synced = |why| SyncEvent::NotSynced {
        path: p("out/a.nc"),
        why,
    };
    let restored = |from: Option<&str>, why| SyncEvent::NotRestored {
        path: p("out/a.nc"),
        from: from.map(str::to_owned),
        why,
    };
    let cases: Vec<(SyncEvent, String)> = vec![
        (
            synced(NotSyncedReason::NameNotUtf8),
            "clima-artifacts: warning: not syncing `out/a.nc`: its name is not UTF-8; rename \
                 it to sync it"
                .into(),
        ),
        (
            synced(NotSyncedReason::VanishedWhileListing),
            "clima-artifacts: warning: not syncing `out/a.nc`: it vanished while listing".into(),
        ),
        (
            synced(NotSyncedReason::VanishedDuringSync),
            "clima-artifacts: warning: not syncing `out/a.nc`: it vanished during the sync".into(),
        ),
        (
            restored(
                None,
                NotRestoredReason::LocalNewer {
                    storage: "file:///s".into(),
                },
            ),
            "clima-artifacts: warning: not restoring `out/a.nc`: the local file is newer \
                 than the stored copy in `file:///s`; kept as it is"
                .into(),
        ),
        // The recorded hash is the storage's index's: escaped.
        (
            restored(
                Some("file:///s"),
                NotRestoredReason::ContentMismatch {
                    sha256: "ab".into(),
                    recorded: "\u{1b}[2J".into(),
                },
            ),
            "clima-artifacts: warning: not restoring `out/a.nc` from `file:///s`: its \
                 content (sha256 ab) is not what the sync index records (\\u{1b}[2J); it was \
                 changed or only half uploaded"
                .into(),
        ),
        (
            restored(
                None,
                NotRestoredReason::Refused(
                    "`out/a.nc` in `file:///s` is a symlink, not a regular file".into(),
                ),
            ),
            "clima-artifacts: warning: not restoring `out/a.nc`: `out/a.nc` in `file:///s` \
                 is a symlink, not a regular file"
                .into(),
        ),
    ];
    check_lines(cases);
}
