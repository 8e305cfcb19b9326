//! Progress bars on stderr, drawn only when stderr is a terminal (and `CLIMA_ARTIFACTS_PROGRESS`
//! is not `0`), so piped output and logs stay clean.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Whether bars should be drawn.
pub fn enabled() -> bool {
    let env_off = std::env::var("CLIMA_ARTIFACTS_PROGRESS").is_ok_and(|v| v == "0");
    !env_off && std::io::stderr().is_terminal()
}

/// A container for several bars (one per parallel job), hidden when bars are off.
pub fn multi() -> MultiProgress {
    if enabled() {
        MultiProgress::new()
    } else {
        MultiProgress::with_draw_target(ProgressDrawTarget::hidden())
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
