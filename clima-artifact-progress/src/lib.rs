//! What the user sees while clima-artifacts works: download progress as events, drawn by a
//! [`Reporter`] (as rustup's download crate reports progress events to whoever draws them), and
//! the process's [`notice`]s, sent to the same reporter.
//!
//! Each download calls [`Reporter::start`] with its [`DownloadStart`] (artifact, URL, size if
//! known) and then reports to the returned [`Transfer`]: bytes received so far, then `done` or
//! `failed`. Three reporters ship here, chosen by [`default_reporter`] unless a program passes
//! its own in its [`Reporting`]:
//!
//! | reporter | when | what it prints on stderr |
//! |---|---|---|
//! | [`TerminalBars`] | stderr is a terminal | a progress bar per download (indicatif) |
//! | [`LogLines`] | stderr is not a terminal (batch jobs, CI) | a start line, a progress line at most every 10 s or 10 %, an end line with bytes, time and rate |
//! | [`Silent`] | `CLIMA_ARTIFACTS_PROGRESS=0` | warnings only |
//!
//! [`OncePerCause`] wraps any of them for a batch of installs: a retry warning whose cause
//! (the failure without its URL) was already told for another download is counted, not
//! printed again.
//!
//! Besides downloads, a reporter receives the process's notices ([`Reporter::notice`]): lock
//! waits, retries, fall-throughs to the next source, resumed downloads, skipped restores and
//! other warnings. They are events of the reporter, not `tracing` events, so that they reach
//! the user's stderr without the model's author installing a subscriber, and a program that
//! draws its own progress gets them in the same place as its bars, each as a typed event to
//! `match` on (a lock wait with its holder and timeout, a retry with its delay and attempt)
//! besides its level and line. The network layer, the depot crate, the runtime and run sync
//! all report here, each with notices of its own that implement [`notice::Event`]: this crate
//! knows none of them, and depends on nothing but the ground floor (`clima-artifact-vars`,
//! `clima-artifact-fs`), so none of them needs the others for it.
//!
//! Events come from the thread that reads the download, so implementations are `Send + Sync`
//! and should be cheap (`received` is called for every buffer read, about every 256 KiB).
//!
//! No reporter is set process-wide: a [`Reporting`] value (the reporter, and whether details
//! are shown) is built where a program starts and passed down to whatever reports; its
//! default is the reporters above, chosen from the terminal and the environment. What stays
//! process-wide is only what the environment says (`CLIMA_ARTIFACTS_PROGRESS`,
//! `CLIMA_ARTIFACTS_VERBOSE`), read where a default is used, and the few notices about the
//! process itself that are said once per process whatever reports them (a setting out of
//! range, a slow debug build, a sync folder's leftovers cleaned).

pub mod notice;
mod reporting;

pub use reporting::Reporting;

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clima_artifact_fs::human_bytes;
use notice::{Level, Notice, plain_line, print_plain};

/// What is known when a download starts.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct DownloadStart<'a> {
    /// The artifact's name in its manifest.
    pub artifact: &'a str,
    /// The URL (or path) being read.
    pub url: &'a str,
    /// Its size in bytes: the server's `Content-Length`, else the manifest's `size`.
    pub size: Option<u64>,
    /// Bytes an earlier attempt received and kept, which this download continues from (`0`:
    /// from the start).
    pub resumed_at: u64,
}

impl<'a> DownloadStart<'a> {
    /// The start of a download of `artifact` from `url`, of `size` bytes if known, continuing
    /// from byte `resumed_at` (`0`: from the start).
    pub fn new(artifact: &'a str, url: &'a str, size: Option<u64>, resumed_at: u64) -> Self {
        DownloadStart {
            artifact,
            url,
            size,
            resumed_at,
        }
    }
}

/// Receives the progress events of downloads; see the [crate docs](crate).
pub trait Reporter: Send + Sync {
    /// A download begins; the returned [`Transfer`] receives its further events.
    fn start(&self, download: &DownloadStart<'_>) -> Box<dyn Transfer>;

    /// A message for the user that is not a download's progress: waiting for another
    /// process's lock, a retry (with its cause and the next delay), a source that failed and
    /// the next one tried, a resumed download, a skipped restore, a warning. See
    /// [`notice`]; what happened is `notice.event` ([`notice::Event`]). The default prints it
    /// as a plain line on stderr ([`notice::print_plain`]).
    fn notice(&self, notice: &Notice<'_>) {
        print_plain(notice);
    }
}

/// Receives the progress of one download (from [`Reporter::start`]).
pub trait Transfer: Send {
    /// `total` bytes have been received so far (with several connections: by all of them,
    /// bytes kept from an earlier attempt included).
    fn received(&mut self, total: u64);
    /// `open` connections are fetching the download now (called when the number changes,
    /// only for downloads over several connections).
    fn connections(&mut self, open: usize) {
        let _ = open;
    }
    /// The download finished: `bytes` read in `elapsed`. (Verification follows.)
    fn done(self: Box<Self>, bytes: u64, elapsed: Duration);
    /// The download failed; `reason` is the error's message. A transfer dropped without
    /// `done` or `failed` was abandoned.
    fn failed(self: Box<Self>, reason: &str);
}

/// The reporter used where a program gave none: [`Silent`] if `progress` is off,
/// [`TerminalBars`] if stderr is a terminal, else [`LogLines`].
pub fn default_reporter(progress: bool) -> Arc<dyn Reporter> {
    if !progress {
        Arc::new(Silent)
    } else if std::io::stderr().is_terminal() {
        Arc::new(TerminalBars::default())
    } else {
        Arc::new(LogLines::default())
    }
}

/// A reporter for a batch of installs (the CLI's `mirror` and `fetch`): it passes everything
/// to the reporter it wraps, except a warning about a failed attempt (a retry, a source given
/// up for the next, the package server's fallback) whose cause it already passed for another
/// download, or the same one: those it counts ([`OncePerCause::held_back`]). 68 downloads
/// refused by one proxy then log one retry warning, not 136; downloads that fail in different
/// ways each still log theirs. The kind and cause (the failure without its URL) are the
/// event's own to say ([`notice::Event::repeated_cause`]).
pub struct OncePerCause {
    inner: Arc<dyn Reporter>,
    /// Per kind of notice and cause: how many were held back.
    seen: std::sync::Mutex<std::collections::BTreeMap<(&'static str, String), usize>>,
}

impl OncePerCause {
    /// Wraps `inner`, which draws downloads and receives every notice not held back.
    pub fn new(inner: Arc<dyn Reporter>) -> OncePerCause {
        OncePerCause {
            inner,
            seen: std::sync::Mutex::default(),
        }
    }

    /// How many notices were held back, each of a kind and cause passed before.
    pub fn held_back(&self) -> usize {
        self.seen
            .lock()
            .map(|seen| seen.values().sum())
            .unwrap_or(0)
    }
}

impl Reporter for OncePerCause {
    fn start(&self, download: &DownloadStart<'_>) -> Box<dyn Transfer> {
        self.inner.start(download)
    }

    fn notice(&self, notice: &Notice<'_>) {
        let Some((kind, cause)) = notice.event.repeated_cause() else {
            return self.inner.notice(notice);
        };
        {
            let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            let key = (kind, cause.to_owned());
            if let Some(held) = seen.get_mut(&key) {
                *held += 1;
                return;
            }
            seen.insert(key, 0);
        }
        self.inner.notice(notice);
    }
}

/// Reports nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl Reporter for Silent {
    fn start(&self, _: &DownloadStart<'_>) -> Box<dyn Transfer> {
        Box::new(Silent)
    }
    /// Warnings still reach stderr (quiet means no progress, not no warnings), and so do
    /// details when they were asked for ([`Reporting::verbose`]).
    fn notice(&self, notice: &Notice<'_>) {
        if notice.level != Level::Info {
            print_plain(notice);
        }
    }
}

impl Transfer for Silent {
    fn received(&mut self, _: u64) {}
    fn done(self: Box<Self>, _: u64, _: Duration) {}
    fn failed(self: Box<Self>, _: &str) {}
}

/// A progress bar per download on stderr (for terminals), drawn by itself or as a line of an
/// indicatif `MultiProgress` that the program also draws its own lines in
/// ([`TerminalBars::within`]).
#[derive(Debug, Clone, Default)]
pub struct TerminalBars {
    group: Option<indicatif::MultiProgress>,
}

impl TerminalBars {
    /// Bars drawn as lines of `group`, so that parallel downloads and the program's own status
    /// lines (the CLI's `fetch`: one per job) do not overwrite each other. Taking indicatif's
    /// type is the point: this reporter draws indicatif bars into an indicatif display.
    pub fn within(group: indicatif::MultiProgress) -> TerminalBars {
        TerminalBars { group: Some(group) }
    }
}

impl Reporter for TerminalBars {
    fn start(&self, download: &DownloadStart<'_>) -> Box<dyn Transfer> {
        let bar = download_bar(download);
        let bar = match &self.group {
            Some(group) => group.add(bar),
            None => {
                bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
                bar
            }
        };
        bar.set_position(download.resumed_at);
        Box::new(Bar {
            bar,
            artifact: download.artifact.to_owned(),
        })
    }

    /// Printed above the bars, so that they are not drawn over.
    fn notice(&self, notice: &Notice<'_>) {
        match &self.group {
            Some(group) if !group.is_hidden() => {
                let _ = group.println(plain_line(notice));
            }
            _ => print_plain(notice),
        }
    }
}

/// A bar in indicatif's style for `download`, not yet drawn anywhere.
fn download_bar(download: &DownloadStart<'_>) -> indicatif::ProgressBar {
    let bar = match download.size {
        Some(n) => indicatif::ProgressBar::with_draw_target(
            Some(n),
            indicatif::ProgressDrawTarget::hidden(),
        )
        .with_style(
            indicatif::ProgressStyle::with_template(
                "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
        ),
        None => {
            indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::hidden())
                .with_style(
                    indicatif::ProgressStyle::with_template(
                        "{spinner} {msg} {bytes} {bytes_per_sec}",
                    )
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
                )
        }
    };
    bar.set_message(format!("downloading {}", download.artifact));
    bar
}

/// The [`Transfer`] of a bar.
struct Bar {
    bar: indicatif::ProgressBar,
    artifact: String,
}

impl Transfer for Bar {
    fn received(&mut self, total: u64) {
        self.bar.set_position(total);
    }
    fn connections(&mut self, open: usize) {
        self.bar.set_message(match open {
            0 | 1 => format!("downloading {}", self.artifact),
            n => format!("downloading {} ({n} connections)", self.artifact),
        });
    }
    fn done(self: Box<Self>, _: u64, _: Duration) {
        self.bar.finish_and_clear();
    }
    fn failed(self: Box<Self>, _: &str) {
        self.bar.abandon();
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        if !self.bar.is_finished() {
            self.bar.finish_and_clear();
        }
    }
}

/// Plain log lines on stderr, for batch jobs whose only window is a log file:
///
/// ```text
/// clima-artifacts: downloading `era5` (57.0 MiB) from example.org
/// clima-artifacts: `era5`: 23.1 MiB of 57.0 MiB (40%), 4.6 MiB/s
/// clima-artifacts: downloaded `era5`: 57.0 MiB in 12.3 s (4.6 MiB/s)
/// ```
///
/// A large download over several connections says how many are open, and one that continues
/// bytes kept by an earlier attempt says where it resumes, and at the end how many bytes it
/// received and how many it reused (the rate counts received bytes only):
///
/// ```text
/// clima-artifacts: downloading `fluxnet` (41.0 GiB) from example.org, resuming at 20.5 GiB of 41.0 GiB
/// clima-artifacts: `fluxnet`: 24.6 GiB of 41.0 GiB (60%), 78.2 MiB/s over 8 connections
/// clima-artifacts: downloaded `fluxnet`: 41.0 GiB in 270.1 s: 20.5 GiB received (77.7 MiB/s over 8 connections), 20.5 GiB reused from an earlier attempt
/// ```
///
/// A progress line is printed at most every `interval` (10 s by default) and at least every
/// 10 % of a download of known size, never more often than once a second.
#[derive(Debug, Clone)]
pub struct LogLines {
    /// Longest time between two progress lines.
    pub interval: Duration,
}

impl Default for LogLines {
    fn default() -> Self {
        LogLines {
            interval: Duration::from_secs(10),
        }
    }
}

impl Reporter for LogLines {
    fn start(&self, download: &DownloadStart<'_>) -> Box<dyn Transfer> {
        let size = download
            .size
            .map(|n| format!(" ({})", human_bytes(n)))
            .unwrap_or_default();
        let resuming = match (download.resumed_at, download.size) {
            (0, _) => String::new(),
            (at, Some(n)) => format!(", resuming at {} of {}", human_bytes(at), human_bytes(n)),
            (at, None) => format!(", resuming at {}", human_bytes(at)),
        };
        log_line(&format!(
            "downloading `{}`{size} from {}{resuming}",
            download.artifact,
            host_of(download.url)
        ));
        Box::new(LogTransfer {
            artifact: download.artifact.to_owned(),
            size: download.size,
            interval: self.interval,
            started: Instant::now(),
            last_line: Instant::now(),
            last_tenth: download
                .size
                .filter(|&n| n > 0)
                .map_or(0, |n| download.resumed_at.saturating_mul(10) / n),
            resumed_at: download.resumed_at,
            connections: 0,
            most: 0,
        })
    }
}

struct LogTransfer {
    artifact: String,
    size: Option<u64>,
    interval: Duration,
    started: Instant,
    last_line: Instant,
    last_tenth: u64,
    /// Bytes kept from an earlier attempt (not counted in the rate).
    resumed_at: u64,
    /// Connections open now, and the most that were, when several are.
    connections: usize,
    most: usize,
}

impl Transfer for LogTransfer {
    fn received(&mut self, total: u64) {
        let since = self.last_line.elapsed();
        let tenth = self
            .size
            .filter(|&n| n > 0)
            .map(|n| total.saturating_mul(10) / n);
        let new_tenth = tenth.is_some_and(|t| t > self.last_tenth && t < 10);
        if since < Duration::from_secs(1) || !(new_tenth || since >= self.interval) {
            return;
        }
        self.last_line = Instant::now();
        if let Some(t) = tenth {
            self.last_tenth = t;
        }
        let rate = rate(
            total.saturating_sub(self.resumed_at),
            self.started.elapsed(),
        );
        let over = match self.connections {
            0 | 1 => String::new(),
            n => format!(" over {n} connections"),
        };
        let line = match self.size {
            Some(n) if n > 0 => format!(
                "`{}`: {} of {} ({}%), {rate}{over}",
                self.artifact,
                human_bytes(total),
                human_bytes(n),
                total.saturating_mul(100) / n
            ),
            _ => format!("`{}`: {}, {rate}{over}", self.artifact, human_bytes(total)),
        };
        log_line(&line);
    }

    fn connections(&mut self, open: usize) {
        self.connections = open;
        self.most = self.most.max(open);
    }

    fn done(self: Box<Self>, bytes: u64, elapsed: Duration) {
        let over = match self.most {
            0 | 1 => String::new(),
            n => format!(" over {n} connections"),
        };
        let received = bytes.saturating_sub(self.resumed_at);
        let rate = rate(received, elapsed);
        let how = match self.resumed_at.min(bytes) {
            0 => format!(" ({rate}{over})"),
            reused => format!(
                ": {} received ({rate}{over}), {} reused from an earlier attempt",
                human_bytes(received),
                human_bytes(reused)
            ),
        };
        log_line(&format!(
            "downloaded `{}`: {} in {:.1} s{how}",
            self.artifact,
            human_bytes(bytes),
            elapsed.as_secs_f64(),
        ));
    }

    fn failed(self: Box<Self>, reason: &str) {
        log_line(&format!("download of `{}` failed: {reason}", self.artifact));
    }
}

fn rate(bytes: u64, elapsed: Duration) -> String {
    let secs = elapsed.as_secs_f64().max(1e-3);
    format!("{}/s", human_bytes((bytes as f64 / secs) as u64))
}

/// The host of a URL (`https://host:port/path` -> `host:port`), or the URL itself for paths;
/// never the user info (`user:token@`).
pub fn host_of(url: &str) -> &str {
    match url.split_once("://") {
        // Without the user info: `user:token@host` names only `host`.
        Some((_, rest)) if !rest.starts_with('/') => {
            let authority = rest.split('/').next().unwrap_or(rest);
            authority.rsplit('@').next().unwrap_or(authority)
        }
        _ => url,
    }
}

fn log_line(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "clima-artifacts: {line}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts() {
        assert_eq!(
            host_of("https://example.org:8443/a/b.tar.gz"),
            "example.org:8443"
        );
        assert_eq!(host_of("file:///data/x.tar.gz"), "file:///data/x.tar.gz");
        assert_eq!(host_of("data/x.tar.gz"), "data/x.tar.gz");
    }
}
