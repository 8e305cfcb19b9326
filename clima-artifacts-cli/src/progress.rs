//! What the user sees on stderr while a command works.
//!
//! - On a terminal: bars and spinners (indicatif), the runtime's download bars and notices
//!   drawn as lines of the same display.
//! - Otherwise (a batch job's log, `2>log`, CI): the runtime's plain lines, a start line with
//!   size and host, a progress line at most every 10 s or 10 %, an end line with bytes, time and
//!   rate, and one line per notice (lock waits, retries, fall-throughs); no bars.
//! - With `--json` or `CLIMA_ARTIFACTS_PROGRESS=0`: nothing but warnings and errors.
//!
//! Commands that install many artifacts say a retry's cause once ([`OncePerCause`]): the
//! warnings of other downloads that failed alike are counted, and
//! [`Reports::held_back_line`] says how many at the end.
//!
//! One [`Ui`] is built in `main` and passed to the commands; there is no process-wide
//! reporter.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use clima_artifact_runtime::Config;
use clima_artifact_runtime::progress::{
    DownloadStart, LogLines, OncePerCause, Reporter, Reporting, Silent, TerminalBars, Transfer,
};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::error::CliResult;

/// Whether bars should be drawn.
pub fn enabled() -> bool {
    !clima_artifact_runtime::progress::notice::quiet_by_environment()
        && std::io::stderr().is_terminal()
}

/// What the user sees, for the whole command: built once in `main` (with `--verbose`) and
/// passed to the commands, which pass its [`Reporting`] down to the runtime, the depots and
/// run sync in their configurations. Nothing of it is process-wide.
pub struct Ui {
    /// `--verbose`: details of how downloads went.
    verbose: bool,
    /// The display for several bars (one per parallel job) and the runtime's download bars,
    /// the same one for the whole command; hidden when bars are off.
    multi: MultiProgress,
}

/// How a command that installs or syncs reports: the [`Reporting`] it passes down, whether
/// downloads report progress at all (the runtime's `Config::progress`), and the batch
/// reporter that counts the warnings it held back ([`Reports::held_back_line`]).
pub struct Reports {
    /// Passed down in the command's configurations.
    pub reporting: Reporting,
    /// The runtime's `Config::progress`.
    pub progress: bool,
    grouped: Arc<OncePerCause>,
}

impl Reports {
    /// The line saying how many warnings were not repeated (their cause already told for
    /// another download), if any were held back.
    pub fn held_back_line(&self) -> Option<String> {
        let held = self.grouped.held_back();
        (held > 0).then(|| {
            format!(
                "clima-artifacts: warning: {held} more warning(s) not shown, each with a cause \
                 told above"
            )
        })
    }
}

impl Ui {
    /// The display of a command; `verbose` is `--verbose`.
    pub fn new(verbose: bool) -> Ui {
        let multi = if enabled() {
            MultiProgress::new()
        } else {
            MultiProgress::with_draw_target(ProgressDrawTarget::hidden())
        };
        Ui { verbose, multi }
    }

    /// The reporting of a command that sets up none of its own: today's plain lines
    /// (notices on stderr), details with `--verbose`.
    pub fn reporting(&self) -> Reporting {
        Reporting::default().with_verbose(self.verbose)
    }

    /// The runtime configuration from the environment, reporting as [`Ui::reporting`].
    pub fn config(&self) -> CliResult<Config> {
        let mut config = crate::depots::config()?;
        config.net.reporting = self.reporting();
        Ok(config)
    }

    /// How the runtime reports downloads and notices for this command: bars within
    /// [`Ui::multi`] on a terminal, plain lines otherwise, warnings only when `quiet`
    /// (`--json`) or `CLIMA_ARTIFACTS_PROGRESS=0`; a retry's cause told once for all
    /// downloads.
    pub fn report_to_user(&self, quiet: bool) -> Reports {
        if quiet || clima_artifact_runtime::progress::notice::quiet_by_environment() {
            self.once_per_cause(Arc::new(Silent), false)
        } else if enabled() {
            self.once_per_cause(Arc::new(TerminalBars::within(self.multi())), true)
        } else {
            self.once_per_cause(Arc::new(LogLines::default()), true)
        }
    }

    /// Reports the runtime's notices (lock waits naming the holder, retries, resumed
    /// downloads, warnings) as plain lines and downloads without progress: for `mirror`,
    /// whose own line per artifact says when each is done and whose parallel downloads'
    /// progress lines would bury them. Warnings only when `quiet` (`--json`) or
    /// `CLIMA_ARTIFACTS_PROGRESS=0`.
    pub fn notices_only(&self, quiet: bool) -> Reports {
        if quiet || clima_artifact_runtime::progress::notice::quiet_by_environment() {
            self.once_per_cause(Arc::new(Silent), false)
        } else {
            self.once_per_cause(Arc::new(NoticeLines), true)
        }
    }

    /// `inner`, wrapped so that a retry's cause is told once for all downloads.
    fn once_per_cause(&self, inner: Arc<dyn Reporter>, progress: bool) -> Reports {
        let grouped = Arc::new(OncePerCause::new(inner));
        Reports {
            reporting: Reporting::to(grouped.clone()).with_verbose(self.verbose),
            progress,
            grouped,
        }
    }

    /// The display for several bars (one per parallel job) and the runtime's download bars.
    pub fn multi(&self) -> MultiProgress {
        self.multi.clone()
    }
}

/// See [`Ui::notices_only`]: notices are printed by the trait's default, downloads are silent.
struct NoticeLines;

impl Reporter for NoticeLines {
    fn start(&self, _: &DownloadStart<'_>) -> Box<dyn Transfer> {
        Box::new(Silent)
    }
}

/// A byte-counting bar of `total` bytes with a message.
pub fn bytes(total: u64, message: &str) -> ProgressBar {
    if !enabled() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(
            "{msg:20} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar.set_message(message.to_string());
    bar
}

/// A spinner with a message, for work of unknown length.
pub fn spinner(message: &str) -> ProgressBar {
    if !enabled() {
        return ProgressBar::hidden();
    }
    styled_spinner(ProgressBar::new_spinner(), message)
}

/// A spinner drawn as one line of `multi` (one per parallel job).
pub fn spinner_in(multi: &MultiProgress, message: &str) -> ProgressBar {
    if !enabled() {
        return ProgressBar::hidden();
    }
    styled_spinner(multi.add(ProgressBar::new_spinner()), message)
}

fn styled_spinner(bar: ProgressBar, message: &str) -> ProgressBar {
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.set_message(message.to_string());
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}
