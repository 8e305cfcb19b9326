//! Messages for the person running the program: lock waits, retries, fall-throughs to the next
//! source, skipped restores, anything that went wrong but did not stop the work.
//!
//! The artifact runtime, the depot crate, the network layer and run sync report these here
//! instead of through `tracing`, because a model's author should not have to install a
//! subscriber to learn that a download is being retried or that an install waits for another
//! process's lock. Every notice
//! goes to the process's one reporter ([`crate::set_reporter`]):
//!
//! - by default ([`print_plain`]), a line on stderr: `clima-artifacts: <text>` for
//!   [`Level::Info`], `clima-artifacts: warning: <text>` for [`Level::Warning`]; info lines
//!   are left out when `CLIMA_ARTIFACTS_PROGRESS=0`, warnings never are; [`Level::Detail`]
//!   lines (why a download took the path it took) only when asked for ([`verbose`]);
//! - or to whatever reporter the program installed, so that a program that draws its own
//!   progress gets these events too, in the same place as its bars.
//!
//! Each notice is an [`Event`]: one variant per kind of notice with its facts as fields, its
//! [`Event::level`], and a `Display` that is the line printed. Code that reports calls
//! [`emit`] with one; a reporter receives it in [`Notice::event`] beside the level and text.
//! There is no free-form notice: a new kind of message is a new variant. Where a notice's
//! cause is one of a few known ones (why a kept partial download is unusable, how a server
//! answered a range request, why a file is not synced), its `why` is a reason enum of its own
//! ([`RangeFallbackReason`], [`NotSyncedReason`], ...) to match on too, whose `Display` is the
//! words of the line; a failure of the system in it is a [`SystemError`] (its
//! [`std::io::ErrorKind`] and message).
//!
//! Under MPI only the ranks that do the work (the installing root) emit notices, so a job's
//! log shows each one once.

mod event;
mod reason;

pub use event::Event;
pub use reason::{
    ContentRange, InstalledFrom, LockFileReason, NotRestoredReason, NotSyncedReason,
    PartialNotKeptReason, PartialOnNodeReason, PartialRestartReason, PartialUnusableReason,
    PidfileReason, Planted, RangeFallbackReason, StaleReason, SystemError, UsageLogUnlockedReason,
    UsageNotRecordedReason,
};

use clima_artifact_vars as vars;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// How much a notice matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// A detail of how the work went (a redirect followed, a server that ignored a range
    /// request, a usage record that could not be written): printed only when [`verbose`] is
    /// on, for someone finding out why a download took the path it took.
    Detail,
    /// Progress the user may want to know about: waiting for a lock, resuming a download.
    Info,
    /// Something went wrong and the program worked around it: a retry, a source that failed
    /// and the next one tried, a file not restored, a file that could not be cleaned up.
    Warning,
}

/// One message for the user: what happened ([`Event`]), how much it matters, and the line
/// that says it.
///
/// A reporter that prints lines uses `level` and `text`; a program that draws its own progress
/// can `match` on `event` instead of reading English (a lock wait, a retry and its delay, a
/// resumed download are variants with their facts as fields).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Notice<'a> {
    /// How much it matters (`event.level()`).
    pub level: Level,
    /// The message, one line, without the `clima-artifacts:` prefix: `event`'s `Display`.
    /// Text that came from a file, a server or an archive is escaped ([`printable`]).
    pub text: &'a str,
    /// What happened.
    pub event: &'a Event,
}

static VERBOSE: AtomicBool = AtomicBool::new(false);

/// Turns [`Level::Detail`] notices on or off for this process (the CLI's `--verbose`). They
/// are also on when `CLIMA_ARTIFACTS_VERBOSE=1`.
pub fn set_verbose(on: bool) {
    VERBOSE.store(on, Ordering::Relaxed);
}

/// Whether [`Level::Detail`] notices are shown: [`set_verbose`], or `CLIMA_ARTIFACTS_VERBOSE=1`.
pub fn verbose() -> bool {
    VERBOSE.load(Ordering::Relaxed) || std::env::var_os(vars::VERBOSE).is_some_and(|v| v == "1")
}

/// Emits `event` as a notice to the reporter in force ([`crate::set_reporter`], else
/// [`print_plain`]), at its [`Event::level`]. A [`Level::Detail`] notice is dropped here
/// unless [`verbose`] is on (before its text is made).
pub fn emit(event: Event) {
    let level = event.level();
    if level == Level::Detail && !verbose() {
        return;
    }
    let text = event.to_string();
    let notice = Notice {
        level,
        text: &text,
        event: &event,
    };
    match crate::installed() {
        Some(reporter) => reporter.notice(&notice),
        None => print_plain(&notice),
    }
}

/// Whether `CLIMA_ARTIFACTS_PROGRESS=0` asks for quiet (warnings and errors only).
pub fn quiet_by_environment() -> bool {
    std::env::var_os(vars::PROGRESS).is_some_and(|v| v == "0")
}

/// The plain line of `notice` (no newline), as [`print_plain`] writes it.
pub fn plain_line(notice: &Notice<'_>) -> String {
    match notice.level {
        Level::Detail => format!("clima-artifacts: detail: {}", notice.text),
        Level::Info => format!("clima-artifacts: {}", notice.text),
        Level::Warning => format!("clima-artifacts: warning: {}", notice.text),
    }
}

/// Writes `notice` as one line on stderr; info notices are left out when
/// `CLIMA_ARTIFACTS_PROGRESS=0` (details, asked for by [`verbose`], are not).
pub fn print_plain(notice: &Notice<'_>) {
    if notice.level == Level::Info && quiet_by_environment() {
        return;
    }
    let _ = writeln!(std::io::stderr().lock(), "{}", plain_line(notice));
}

pub use clima_artifact_fs::printable;

/// The whole line [`print_plain`] prints for `event`, prefix and level included (for the
/// tests that pin them).
#[cfg(test)]
fn line(event: &Event) -> String {
    let text = event.to_string();
    plain_line(&Notice {
        level: event.level(),
        text: &text,
        event,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::time::Duration;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(printable("plain `name`"), "plain `name`");
        assert_eq!(
            printable("a\u{1b}]0;title\u{7}b\r\nforged\u{9b}2J"),
            "a\\u{1b}]0;title\\u{7}b\\r\\nforged\\u{9b}2J"
        );
    }

    #[test]
    fn lines_have_the_prefix_and_level() {
        let retry = Event::Retry {
            error: "HTTP 503 from `https://example.org/a.tar.gz`".into(),
            cause: "HTTP 503".into(),
            delay: Duration::from_millis(1500),
            attempt: 2,
            attempts: 4,
        };
        assert_eq!(
            line(&retry),
            "clima-artifacts: warning: HTTP 503 from `https://example.org/a.tar.gz`; retrying in \
             1.5 s (attempt 2 of 4, CLIMA_ARTIFACTS_RETRIES)"
        );
        let redirect = Event::Redirect {
            from: "https://a.org/x".into(),
            to: "https://b.org/y".into(),
        };
        assert_eq!(
            line(&redirect),
            "clima-artifacts: detail: redirected from `https://a.org/x` to `https://b.org/y`"
        );
    }

    /// The displays are the lines the CLI's snapshots and the integration tests read: pinned.
    #[test]
    #[allow(
        clippy::too_many_lines,
        reason = "a table of cases: each notice and the line it prints"
    )]
    fn displays_are_todays_lines() {
        let cases: Vec<(Event, Level, &str)> = vec![
            (
                Event::LockWait {
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
                Event::LockTaken {
                    what: "the install of `era5`".into(),
                    waited: Duration::from_millis(2340),
                },
                Level::Info,
                "got the lock for the install of `era5` after waiting 2.3 s",
            ),
            (
                Event::JuliaLockUnusable {
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
                Event::Resuming {
                    artifact: "era5".into(),
                    at: 3 << 20,
                    of: 8 << 20,
                    kept_in: PathBuf::from("/d/artifacts/p"),
                },
                Level::Info,
                "resuming the download of `era5` at 3.0 MiB of 8.0 MiB (kept in \
                 `/d/artifacts/p` by an earlier attempt)",
            ),
            (
                Event::TlsNotVerified {
                    host: "evil\u{1b}[2J.org".into(),
                },
                Level::Warning,
                "not verifying the TLS certificate of `evil\\u{1b}[2J.org` \
                 (CLIMA_ARTIFACTS_NO_VERIFY_HOSTS); the sha256 and the tree hash still check \
                 what is downloaded",
            ),
            (
                Event::Installed {
                    artifact: "era5".into(),
                    from: Some(InstalledFrom::PackageServer),
                    path: PathBuf::from("/d/artifacts/ab"),
                    received: 1 << 20,
                    reused: 2 << 20,
                },
                Level::Detail,
                "installed `era5` from the package server into `/d/artifacts/ab` (1.0 MiB \
                 received, 2.0 MiB reused from an earlier partial download)",
            ),
            (
                Event::Installed {
                    artifact: "era5".into(),
                    from: None,
                    path: PathBuf::from("/d/artifacts/ab"),
                    received: 5,
                    reused: 0,
                },
                Level::Detail,
                "installed `era5` into `/d/artifacts/ab`",
            ),
            (
                Event::RecordsUnreadable {
                    first: 1,
                    last: 3,
                    errors: vec!["unknown tag".into()],
                },
                Level::Warning,
                "provenance records from ranks 1-3 are unreadable and left out of the report \
                 (unknown tag; are all ranks running the same binary?)",
            ),
            // A decoding error may quote the bytes another rank sent: escaped.
            (
                Event::RecordsUnreadable {
                    first: 2,
                    last: 2,
                    errors: vec!["unknown variant `\u{1b}[2J`".into()],
                },
                Level::Warning,
                "provenance records from rank 2 are unreadable and left out of the report \
                 (unknown variant `\\u{1b}[2J`; are all ranks running the same binary?)",
            ),
            (
                Event::NotRestored {
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
                Event::NotRestored {
                    path: PathBuf::from("out/\u{1b}[2Ja.nc"),
                    from: Some("file:///s\u{7}".into()),
                    why: NotRestoredReason::Refused("refused".into()),
                },
                Level::Warning,
                "not restoring `out/\\u{1b}[2Ja.nc` from `file:///s\\u{7}`: refused",
            ),
            (
                Event::NotSynced {
                    path: PathBuf::from("diag/e\nforged.csv"),
                    why: NotSyncedReason::VanishedDuringSync,
                },
                Level::Warning,
                "not syncing `diag/e\\nforged.csv`: it vanished during the sync",
            ),
            (
                Event::ReportWritten {
                    markdown: "r/a.md".into(),
                    json: "r/a.json".into(),
                    bibtex: "r/a.bib".into(),
                },
                Level::Info,
                "provenance report written to `r/a.md`, `r/a.json` and `r/a.bib`",
            ),
            (
                Event::SlowSync {
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
            (
                Event::LeftoverKept {
                    path: PathBuf::from("/d/artifacts/.tmp-x"),
                    pid: 42,
                },
                Level::Detail,
                "keeping `/d/artifacts/.tmp-x`: its artifact's lock is held (pid 42 may live in \
                 another PID namespace)",
            ),
            (
                Event::JuliaLockWait {
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
            (
                Event::PartialOnNode {
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
        for (event, level, text) in cases {
            assert_eq!(event.level(), level, "{event:?}");
            assert_eq!(event.to_string(), text);
        }
    }
}

#[cfg(test)]
mod channel_tests {
    use super::*;
    use crate::{DownloadStart, Reporter, Silent, Transfer, set_reporter};
    use std::path::PathBuf;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    /// A program's own reporter: it keeps the events, and the lines.
    #[derive(Default)]
    struct Collect(Mutex<Vec<(Level, String, Event)>>);

    impl Reporter for Collect {
        fn start(&self, _: &DownloadStart<'_>) -> Box<dyn Transfer> {
            Box::new(Silent)
        }
        fn notice(&self, notice: &Notice<'_>) {
            let mut seen = self.0.lock().unwrap();
            seen.push((notice.level, notice.text.to_owned(), notice.event.clone()));
        }
    }

    /// One channel: whatever reporter the program set receives every notice, as a typed
    /// event it can match on, and details only when verbose is on. (One test: the reporter
    /// and the verbosity are process-wide.)
    #[test]
    fn notices_reach_the_reporter_set_typed_and_details_only_when_verbose() {
        let collect = Arc::new(Collect::default());
        set_reporter(collect.clone());
        emit(Event::LockWait {
            what: "the install of `era5`".into(),
            path: PathBuf::from("/d/a.lock"),
            holder: "another process".into(),
            timeout: Duration::from_secs(10),
        });
        emit(Event::Retry {
            error: "timed out".into(),
            cause: "timed out".into(),
            delay: Duration::from_secs(2),
            attempt: 2,
            attempts: 3,
        });
        emit(Event::Redirect {
            from: "a".into(),
            to: "b".into(),
        });
        set_verbose(true);
        emit(Event::RangeFallback {
            why: RangeFallbackReason::NoValidator,
        });
        emit(Event::RangeFallback {
            why: RangeFallbackReason::OtherRange(ContentRange::Bytes {
                first: 0,
                last: 99,
                total: 1000,
            }),
        });
        set_verbose(false);
        let seen = collect.0.lock().unwrap().clone();
        let lines: Vec<_> = seen.iter().map(|(l, t, _)| (*l, t.as_str())).collect();
        assert_eq!(
            lines,
            [
                (
                    Level::Info,
                    "waiting for the install of `era5`: another process holds its lock \
                     `/d/a.lock`: another process; waiting at most 10 s \
                     (CLIMA_ARTIFACTS_LOCK_TIMEOUT)"
                ),
                (
                    Level::Warning,
                    "timed out; retrying in 2.0 s (attempt 2 of 3, CLIMA_ARTIFACTS_RETRIES)"
                ),
                (
                    Level::Detail,
                    "a range came without a validator; one stream from now on"
                ),
                (
                    Level::Detail,
                    "a range request was answered with `Content-Range: bytes 0-99/1000`; one \
                     stream from now on"
                ),
            ]
        );
        // What a program drawing its own progress does: tell a lock wait from a retry, and a
        // server that sent ranges without a validator from one that ignored the range asked
        // for, without reading the text.
        let said: Vec<String> = seen
            .iter()
            .map(|(_, _, event)| match event {
                Event::LockWait { timeout, .. } => format!("lock wait, {} s", timeout.as_secs()),
                Event::Retry {
                    attempt, attempts, ..
                } => format!("retry {attempt}/{attempts}"),
                Event::RangeFallback {
                    why: RangeFallbackReason::NoValidator,
                } => "one stream: no validator".to_owned(),
                Event::RangeFallback {
                    why: RangeFallbackReason::OtherRange(ContentRange::Bytes { first, last, .. }),
                } => format!("one stream: got bytes {first}-{last}"),
                _ => "other".to_owned(),
            })
            .collect();
        assert_eq!(
            said,
            [
                "lock wait, 10 s",
                "retry 2/3",
                "one stream: no validator",
                "one stream: got bytes 0-99"
            ]
        );
        let x = Event::RangeFallback {
            why: RangeFallbackReason::NoValidator,
        };
        let detail_line = plain_line(&Notice {
            level: Level::Detail,
            text: "x",
            event: &x,
        });
        assert_eq!(detail_line, "clima-artifacts: detail: x");
    }
}
