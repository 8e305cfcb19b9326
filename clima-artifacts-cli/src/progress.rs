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
//! warnings of other downloads that failed alike are counted, and [`held_back_line`] says how
//! many at the end.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use clima_artifact_runtime::progress::{
    DownloadStart, LogLines, OncePerCause, Reporter, Silent, TerminalBars, Transfer, set_reporter,
};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Whether bars should be drawn.
pub fn enabled() -> bool {
    !clima_artifact_runtime::progress::notice::quiet_by_environment()
        && std::io::stderr().is_terminal()
}

/// Sets how the runtime reports downloads and notices for this command, and returns whether
/// downloads report progress at all (the runtime's `Config::progress`): bars within
/// [`multi`] on a terminal, plain lines otherwise, warnings only when `quiet` (`--json`) or
/// `CLIMA_ARTIFACTS_PROGRESS=0`.
pub fn report_to_user(quiet: bool) -> bool {
    if quiet || clima_artifact_runtime::progress::notice::quiet_by_environment() {
        once_per_cause(Arc::new(Silent));
        false
    } else if enabled() {
        once_per_cause(Arc::new(TerminalBars::within(multi())));
        true
    } else {
        once_per_cause(Arc::new(LogLines::default()));
        true
    }
}

/// The reporter set last by [`once_per_cause`].
static GROUPED: Mutex<Option<Arc<OncePerCause>>> = Mutex::new(None);

/// Sets `inner`, wrapped so that a retry's cause is told once for all downloads.
fn once_per_cause(inner: Arc<dyn Reporter>) {
    let grouped = Arc::new(OncePerCause::new(inner));
    set_reporter(grouped.clone());
    *GROUPED.lock().unwrap_or_else(|e| e.into_inner()) = Some(grouped);
}

/// The line saying how many warnings were not repeated (their cause already told for another
/// download), if any were held back.
pub fn held_back_line() -> Option<String> {
    let held = GROUPED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .map_or(0, |g| g.held_back());
    (held > 0).then(|| {
        format!(
            "clima-artifacts: warning: {held} more warning(s) not shown, each with a cause told \
             above"
        )
    })
}

/// Reports the runtime's notices (lock waits naming the holder, retries, resumed downloads,
/// warnings) as plain lines and downloads without progress, and returns the runtime's
/// `Config::progress` to use: for `mirror`, whose own line per artifact says when each is done
/// and whose parallel downloads' progress lines would bury them. Warnings only when `quiet`
/// (`--json`) or `CLIMA_ARTIFACTS_PROGRESS=0`.
pub fn notices_only(quiet: bool) -> bool {
    if quiet || clima_artifact_runtime::progress::notice::quiet_by_environment() {
        once_per_cause(Arc::new(Silent));
        false
    } else {
        once_per_cause(Arc::new(NoticeLines));
        true
    }
}

/// See [`notices_only`]: notices are printed by the trait's default, downloads are silent.
struct NoticeLines;

impl Reporter for NoticeLines {
    fn start(&self, _: &DownloadStart<'_>) -> Box<dyn Transfer> {
        Box::new(Silent)
    }
}

/// The display for several bars (one per parallel job) and the runtime's download bars, the
/// same one for the whole command; hidden when bars are off.
pub fn multi() -> MultiProgress {
    static MULTI: OnceLock<MultiProgress> = OnceLock::new();
    MULTI
        .get_or_init(|| {
            if enabled() {
                MultiProgress::new()
            } else {
                MultiProgress::with_draw_target(ProgressDrawTarget::hidden())
            }
        })
        .clone()
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
