//! Messages for the person running the program: lock waits, retries, fall-throughs to the next
//! source, skipped restores, anything that went wrong but did not stop the work.
//!
//! The artifact runtime, the network layer and run sync report these here instead of through
//! `tracing`, because a model's author should not have to install a subscriber to learn that a
//! download is being retried or that an install waits for another process's lock. Every notice
//! goes to the process's one reporter ([`crate::set_reporter`]):
//!
//! - by default ([`print_plain`]), a line on stderr: `clima-artifacts: <text>` for
//!   [`Level::Info`], `clima-artifacts: warning: <text>` for [`Level::Warning`]; info lines
//!   are left out when `CLIMA_ARTIFACTS_PROGRESS=0`, warnings never are; [`Level::Detail`]
//!   lines (why a download took the path it took) only when asked for ([`verbose`]);
//! - or to whatever reporter the program installed, so that a program that draws its own
//!   progress gets these events too, in the same place as its bars.
//!
//! Under MPI only the ranks that do the work (the installing root) emit notices, so a job's
//! log shows each one once.

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

/// One message for the user.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Notice<'a> {
    /// How much it matters.
    pub level: Level,
    /// The message, one line, without the `clima-artifacts:` prefix. Text that came from a
    /// file, a server or an archive is already escaped ([`printable`]).
    pub text: &'a str,
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

/// Emits a notice to the reporter in force ([`crate::set_reporter`], else [`print_plain`]).
/// A [`Level::Detail`] notice is dropped here unless [`verbose`] is on.
pub fn emit(level: Level, text: &str) {
    if level == Level::Detail && !verbose() {
        return;
    }
    let notice = Notice { level, text };
    match crate::installed() {
        Some(reporter) => reporter.notice(&notice),
        None => print_plain(&notice),
    }
}

/// [`emit`] at [`Level::Detail`].
pub fn detail(text: &str) {
    emit(Level::Detail, text);
}

/// [`emit`] at [`Level::Info`].
pub fn info(text: &str) {
    emit(Level::Info, text);
}

/// [`emit`] at [`Level::Warning`].
pub fn warn(text: &str) {
    emit(Level::Warning, text);
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let warning = Notice {
            level: Level::Warning,
            text: "retrying",
        };
        assert_eq!(plain_line(&warning), "clima-artifacts: warning: retrying");
        let info = Notice {
            level: Level::Info,
            text: "waiting",
        };
        assert_eq!(plain_line(&info), "clima-artifacts: waiting");
    }
}

#[cfg(test)]
mod channel_tests {
    use super::*;
    use crate::{DownloadStart, Reporter, Silent, Transfer, set_reporter};
    use std::sync::{Arc, Mutex};

    #[derive(Default)]
    struct Collect(Mutex<Vec<(Level, String)>>);

    impl Reporter for Collect {
        fn start(&self, _: &DownloadStart<'_>) -> Box<dyn Transfer> {
            Box::new(Silent)
        }
        fn notice(&self, notice: &Notice<'_>) {
            let mut seen = self.0.lock().unwrap();
            seen.push((notice.level, notice.text.to_owned()));
        }
    }

    /// One channel: whatever reporter the program set receives every notice, and details only
    /// when verbose is on. (One test: the reporter and the verbosity are process-wide.)
    #[test]
    fn notices_reach_the_reporter_set_and_details_only_when_verbose() {
        let collect = Arc::new(Collect::default());
        set_reporter(collect.clone());
        info("waiting for the lock");
        warn("retrying");
        detail("redirected");
        set_verbose(true);
        detail("a range came without a validator");
        set_verbose(false);
        let seen = collect.0.lock().unwrap().clone();
        assert_eq!(
            seen,
            [
                (Level::Info, "waiting for the lock".to_owned()),
                (Level::Warning, "retrying".to_owned()),
                (Level::Detail, "a range came without a validator".to_owned()),
            ]
        );
        let detail_line = plain_line(&Notice {
            level: Level::Detail,
            text: "x",
        });
        assert_eq!(detail_line, "clima-artifacts: detail: x");
    }
}
