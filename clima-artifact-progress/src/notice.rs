//! Messages for the person running the program: lock waits, retries, fall-throughs to the next
//! source, skipped restores, anything that went wrong but did not stop the work.
//!
//! The artifact runtime, the depot crate, the network layer and run sync report these here
//! instead of through `tracing`, because a model's author should not have to install a
//! subscriber to learn that a download is being retried or that an install waits for another
//! process's lock. Every notice goes through the [`Reporting`](crate::Reporting) value that
//! the code reporting it was given:
//!
//! - by default ([`print_plain`]), a line on stderr: `clima-artifacts: <text>` for
//!   [`Level::Info`], `clima-artifacts: warning: <text>` for [`Level::Warning`]; info lines
//!   are left out when `CLIMA_ARTIFACTS_PROGRESS=0`, warnings never are; [`Level::Detail`]
//!   lines (why a download took the path it took) only when asked for
//!   ([`Reporting::with_verbose`](crate::Reporting::with_verbose), or
//!   [`verbose_by_environment`]);
//! - or to the reporter the program passed, so that a program that draws its own progress
//!   gets these events too, in the same place as its bars.
//!
//! Each notice is a value of a type that implements [`Event`]: its level, and a `Display`
//! that is the line printed. This crate knows no kind of notice: each domain owns its own
//! notices and their words, as an enum of its own with one variant per kind of notice and its
//! facts as fields (the depot crate's lock waits and upkeep, the network crate's retries and
//! resumes, the runtime's installs and report, run sync's skipped files). Code that reports
//! calls [`Reporting::emit`](crate::Reporting::emit) with one; a reporter receives it in [`Notice::event`] beside the level and
//! text, and a program that wants the facts asks for the domain's type with
//! [`downcast_ref`](trait.Event.html#method.downcast_ref) and matches on it. There is no
//! free-form notice: a new kind of message is a new variant of its domain's enum. A failure
//! of the system in a notice's reason is a [`SystemError`] (its [`std::io::ErrorKind`] and
//! message).
//!
//! Under MPI only the ranks that do the work (the installing root) emit notices, so a job's
//! log shows each one once.

use clima_artifact_vars as vars;
use std::any::Any;
use std::fmt;
use std::io::{self, Write};

/// How much a notice matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// A detail of how the work went (a redirect followed, a server that ignored a range
    /// request, a usage record that could not be written): printed only when [`Reporting::verbose`](crate::Reporting::verbose) is
    /// on, for someone finding out why a download took the path it took.
    Detail,
    /// Progress the user may want to know about: waiting for a lock, resuming a download.
    Info,
    /// Something went wrong and the program worked around it: a retry, a source that failed
    /// and the next one tried, a file not restored, a file that could not be cleaned up.
    Warning,
}

/// What a notice says happened: a kind of notice of some domain, with its facts.
///
/// Implemented by each domain's enum of notices (`clima_artifact_depot::notice::LockEvent`,
/// `clima_artifact_net::notice::NetEvent`, ...). Its `Display` is the notice's line without
/// the `clima-artifacts:` prefix, the text that [`Notice::text`] carries; text that came from
/// a file, a server or an archive is escaped by it ([`printable`]).
pub trait Event: fmt::Display + fmt::Debug + Send + Sync + Any {
    /// How much it matters.
    fn level(&self) -> Level;

    /// For a warning about a failed attempt that a batch tells once per cause
    /// ([`OncePerCause`](crate::OncePerCause)): the kind of notice and its cause (the failure
    /// without its URL, the same for every download that failed alike). `None`, the default,
    /// for every other notice: it is always passed on.
    fn repeated_cause(&self) -> Option<(&'static str, &str)> {
        None
    }
}

impl dyn Event {
    /// The event as its domain's type `T`, if it is one: how a program matches on the facts
    /// of a notice (`notice.event.downcast_ref::<LockEvent>()`).
    pub fn downcast_ref<T: Event>(&self) -> Option<&T> {
        (self as &dyn Any).downcast_ref::<T>()
    }
}

/// One message for the user: what happened ([`Event`]), how much it matters, and the line
/// that says it.
///
/// A reporter that prints lines uses `level` and `text`; a program that draws its own progress
/// can match on `event` instead of reading English (a lock wait, a retry and its delay, a
/// resumed download are variants of their domain's enum with their facts as fields;
/// [`downcast_ref`](trait.Event.html#method.downcast_ref)).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Notice<'a> {
    /// How much it matters (`event.level()`).
    pub level: Level,
    /// The message, one line, without the `clima-artifacts:` prefix: `event`'s `Display`.
    /// Text that came from a file, a server or an archive is escaped ([`printable`]).
    pub text: &'a str,
    /// What happened.
    pub event: &'a dyn Event,
}

impl<'a> Notice<'a> {
    /// The notice of `event` whose line is `text` (`event`'s `Display`), at `event`'s level.
    pub fn new(event: &'a dyn Event, text: &'a str) -> Notice<'a> {
        Notice {
            level: event.level(),
            text,
            event,
        }
    }
}

/// A failure of the system, as a notice carries it: its kind, and its message (the error's
/// `Display`, often naming the file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemError {
    /// The error's kind (`NotFound`, `PermissionDenied`, ...).
    pub kind: io::ErrorKind,
    /// The error's message, as printed.
    pub message: String,
}

impl SystemError {
    /// A failure of `kind` saying `message`.
    pub fn new(kind: io::ErrorKind, message: impl Into<String>) -> SystemError {
        SystemError {
            kind,
            message: message.into(),
        }
    }
}

impl From<&io::Error> for SystemError {
    fn from(e: &io::Error) -> SystemError {
        SystemError::new(e.kind(), e.to_string())
    }
}

impl From<io::Error> for SystemError {
    fn from(e: io::Error) -> SystemError {
        SystemError::from(&e)
    }
}

impl fmt::Display for SystemError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Whether `CLIMA_ARTIFACTS_VERBOSE=1` asks for [`Level::Detail`] notices (a program can ask
/// for them too: [`Reporting::with_verbose`](crate::Reporting::with_verbose)).
pub fn verbose_by_environment() -> bool {
    std::env::var_os(vars::VERBOSE).is_some_and(|v| v == "1")
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

/// The whole line [`print_plain`] prints for `event`, prefix and level included (what the
/// domains' tests pin their notices' lines with).
pub fn line(event: &dyn Event) -> String {
    let text = event.to_string();
    plain_line(&Notice::new(event, &text))
}

/// Writes `notice` as one line on stderr; info notices are left out when
/// `CLIMA_ARTIFACTS_PROGRESS=0` (details, asked for by [`Reporting::verbose`](crate::Reporting::verbose), are not).
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
    fn a_system_error_keeps_its_kind_and_message() {
        let e = io::Error::new(io::ErrorKind::PermissionDenied, "`/d/x`: no");
        let s = SystemError::from(&e);
        assert_eq!(s.kind, io::ErrorKind::PermissionDenied);
        assert_eq!(s.to_string(), "`/d/x`: no");
        assert_eq!(SystemError::from(e), s);
    }
}

#[cfg(test)]
mod channel_tests {
    use super::*;
    use crate::{DownloadStart, OncePerCause, Reporter, Reporting, Silent, Transfer};
    use std::sync::{Arc, Mutex};

    /// A domain's notices, as the domain crates write theirs: an enum, its levels, its lines.
    #[derive(Debug, Clone, PartialEq)]
    enum Domain {
        Wait { secs: u64 },
        Retry { error: String, cause: String },
        Why { first: u64 },
    }

    impl fmt::Display for Domain {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match self {
                Domain::Wait { secs } => write!(f, "waiting at most {secs} s"),
                Domain::Retry { error, .. } => write!(f, "{error}; retrying"),
                Domain::Why { first } => write!(f, "a range from byte {first}"),
            }
        }
    }

    impl Event for Domain {
        fn level(&self) -> Level {
            match self {
                Domain::Wait { .. } => Level::Info,
                Domain::Retry { .. } => Level::Warning,
                Domain::Why { .. } => Level::Detail,
            }
        }
        fn repeated_cause(&self) -> Option<(&'static str, &str)> {
            match self {
                Domain::Retry { cause, .. } => Some(("retry", cause)),
                _ => None,
            }
        }
    }

    /// Another domain's notice: not a `Domain`.
    #[derive(Debug)]
    struct Other;

    impl fmt::Display for Other {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("other")
        }
    }

    impl Event for Other {
        fn level(&self) -> Level {
            Level::Info
        }
    }

    /// A program's own reporter: it keeps the events (as the domain's type), and the lines.
    #[derive(Default)]
    struct Collect(Mutex<Vec<(Level, String, Option<Domain>)>>);

    impl Reporter for Collect {
        fn start(&self, _: &DownloadStart<'_>) -> Box<dyn Transfer> {
            Box::new(Silent)
        }
        fn notice(&self, notice: &Notice<'_>) {
            let mut seen = self.0.lock().unwrap();
            let typed = notice.event.downcast_ref::<Domain>().cloned();
            seen.push((notice.level, notice.text.to_owned(), typed));
        }
    }

    /// One channel: whatever reporter the program passes receives every notice of any
    /// domain, as a typed event it can match on, details only when verbose is on, and a
    /// batch's reporter holds back a retry whose cause it passed before.
    #[test]
    fn notices_of_any_domain_reach_the_reporter_set_typed() {
        let collect = Arc::new(Collect::default());
        let reporting = Reporting::to(collect.clone());
        reporting.emit(Domain::Wait { secs: 10 });
        reporting.emit(Domain::Why { first: 1 });
        reporting
            .clone()
            .with_verbose(true)
            .emit(Domain::Why { first: 2 });
        reporting.emit(Other);
        let batch = Arc::new(OncePerCause::new(collect.clone()));
        let reporting = Reporting::to(batch.clone());
        for url in ["a", "b"] {
            reporting.emit(Domain::Retry {
                error: format!("HTTP 503 from `{url}`"),
                cause: "HTTP 503".into(),
            });
        }
        assert_eq!(batch.held_back(), 1);
        let seen = collect.0.lock().unwrap().clone();
        assert_eq!(
            seen,
            [
                (
                    Level::Info,
                    "waiting at most 10 s".to_owned(),
                    Some(Domain::Wait { secs: 10 })
                ),
                (
                    Level::Detail,
                    "a range from byte 2".to_owned(),
                    Some(Domain::Why { first: 2 })
                ),
                (Level::Info, "other".to_owned(), None),
                (
                    Level::Warning,
                    "HTTP 503 from `a`; retrying".to_owned(),
                    Some(Domain::Retry {
                        error: "HTTP 503 from `a`".into(),
                        cause: "HTTP 503".into()
                    })
                ),
            ]
        );
        assert_eq!(
            line(&Domain::Why { first: 3 }),
            "clima-artifacts: detail: a range from byte 3"
        );
        assert_eq!(
            line(&Domain::Retry {
                error: "x".into(),
                cause: "x".into()
            }),
            "clima-artifacts: warning: x; retrying"
        );
        assert_eq!(line(&Other), "clima-artifacts: other");
    }
}
