//! The one value through which everything the user sees is reported ([`Reporting`]): built at
//! each entry point (the CLI's `main`, a model's `Config`) and passed down to every crate that
//! reports, instead of a reporter set process-wide.

use std::fmt;
use std::sync::Arc;

use crate::notice::{Event, Level, Notice, print_plain};
use crate::{DownloadStart, Reporter, Silent, Transfer, default_reporter};

/// Where downloads' progress and notices go, and whether details are shown: one value, built
/// where a program starts and passed down (the runtime's `Config` holds it in its network
/// settings; run sync's `SyncConfig` holds one; the depot's functions that report take it).
///
/// Its default ([`Reporting::default`]) is what a model gets with no set-up, today's lines:
/// a bar per download on a terminal, plain lines otherwise, nothing but warnings with
/// `CLIMA_ARTIFACTS_PROGRESS=0` (the reporter is chosen at each download, as
/// [`default_reporter`]), notices as plain lines on stderr ([`print_plain`]), details with
/// `CLIMA_ARTIFACTS_VERBOSE=1`. A program that draws its own progress passes its reporter
/// ([`Reporting::to`]): it receives every download and every notice, the depot's, the
/// network's, the runtime's and run sync's.
///
/// Cloning is cheap (a shared pointer). Two values are equal when they report to the same
/// reporter (the default, or the same `Arc`) with the same verbosity.
#[derive(Clone, Default)]
pub struct Reporting {
    /// The program's reporter; `None`: the default.
    to: Option<Arc<dyn Reporter>>,
    /// Details asked for by the program (the CLI's `--verbose`); `CLIMA_ARTIFACTS_VERBOSE=1`
    /// turns them on too.
    verbose: bool,
}

impl Reporting {
    /// Reports to `reporter`: every download whose progress is on, and every notice.
    pub fn to(reporter: Arc<dyn Reporter>) -> Reporting {
        Reporting {
            to: Some(reporter),
            verbose: false,
        }
    }

    /// The same, with [`Level::Detail`] notices shown (`on`) or left to
    /// `CLIMA_ARTIFACTS_VERBOSE` (`!on`).
    #[must_use]
    pub fn with_verbose(mut self, on: bool) -> Reporting {
        self.verbose = on;
        self
    }

    /// Whether [`Level::Detail`] notices are shown: asked for ([`Reporting::with_verbose`]),
    /// or `CLIMA_ARTIFACTS_VERBOSE=1`.
    pub fn verbose(&self) -> bool {
        self.verbose || crate::notice::verbose_by_environment()
    }

    /// Emits `event` as a notice to the reporter, at its [`Event::level`]; without one
    /// ([`Reporting::default`]), as a plain line ([`print_plain`]). A [`Level::Detail`]
    /// notice is dropped here unless [`Reporting::verbose`] (before its text is made).
    pub fn emit(&self, event: impl Event) {
        let event: &dyn Event = &event;
        if event.level() == Level::Detail && !self.verbose() {
            return;
        }
        let text = event.to_string();
        let notice = Notice::new(event, &text);
        match &self.to {
            Some(reporter) => reporter.notice(&notice),
            None => print_plain(&notice),
        }
    }

    /// The reporter of a download whose progress is on (`progress`) or off: the program's,
    /// else [`default_reporter`]; off always means [`Silent`].
    pub fn reporter(&self, progress: bool) -> Arc<dyn Reporter> {
        match &self.to {
            Some(r) if progress => r.clone(),
            _ => default_reporter(progress),
        }
    }

    /// Starts the report of a download whose progress is on (`progress`) or off
    /// ([`Reporting::reporter`]).
    pub fn start(&self, progress: bool, download: &DownloadStart<'_>) -> Box<dyn Transfer> {
        if !progress {
            return Silent.start(download);
        }
        self.reporter(progress).start(download)
    }
}

impl fmt::Debug for Reporting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reporting")
            .field(
                "to",
                &self
                    .to
                    .as_ref()
                    .map_or("the default", |_| "a program's reporter"),
            )
            .field("verbose", &self.verbose)
            .finish()
    }
}

impl PartialEq for Reporting {
    fn eq(&self, other: &Reporting) -> bool {
        let same = match (&self.to, &other.to) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        same && self.verbose == other.verbose
    }
}
