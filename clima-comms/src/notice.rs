//! Messages for the person running the program: lock waits, retries, fall-throughs to the next
//! source, skipped restores, anything that went wrong but did not stop the work.
//!
//! The artifact runtime and run sync report these here instead of through `tracing`, because a
//! model's author should not have to install a subscriber to learn that a download is being
//! retried or that an install waits for another process's lock. Every notice goes to one
//! process-wide sink:
//!
//! - by default ([`print_plain`]), a line on stderr: `clima-artifacts: <text>` for
//!   [`Level::Info`], `clima-artifacts: warning: <text>` for [`Level::Warning`]; info lines
//!   are left out when `CLIMA_ARTIFACTS_PROGRESS=0`, warnings never are;
//! - or to whatever [`set_sink`] installed. The runtime's `progress::set_reporter` installs
//!   the reporter's own `notice` method, so a program that draws its own progress gets these
//!   events too, in the same place as its bars.
//!
//! Under MPI only the ranks that do the work (the installing root) emit notices, so a job's
//! log shows each one once.

use clima_artifact_vars as vars;
use std::io::Write;
use std::sync::{Arc, RwLock};

/// How much a notice matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
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

/// Where notices go; see [`set_sink`].
pub type Sink = Arc<dyn Fn(&Notice<'_>) + Send + Sync>;

static SINK: RwLock<Option<Sink>> = RwLock::new(None);

/// Sends every later notice of this process to `sink` instead of [`print_plain`].
pub fn set_sink(sink: Sink) {
    *SINK.write().unwrap_or_else(|e| e.into_inner()) = Some(sink);
}

/// Emits a notice to the sink in force.
pub fn emit(level: Level, text: &str) {
    let notice = Notice { level, text };
    let sink = SINK.read().unwrap_or_else(|e| e.into_inner()).clone();
    match sink {
        Some(sink) => sink(&notice),
        None => print_plain(&notice),
    }
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
        Level::Info => format!("clima-artifacts: {}", notice.text),
        Level::Warning => format!("clima-artifacts: warning: {}", notice.text),
    }
}

/// Writes `notice` as one line on stderr; info notices are left out when
/// `CLIMA_ARTIFACTS_PROGRESS=0`.
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
