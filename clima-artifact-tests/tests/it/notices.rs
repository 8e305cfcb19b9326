//! One channel for the notices of every domain: whatever reporter the program passes (in its
//! [`Reporting`]) receives every notice, as a typed event of its domain it can match on (the
//! depot's lock wait, the network's retry and range fallback), and details only when verbose
//! is on.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clima_artifact_runtime::notice::depot::LockEvent;
use clima_artifact_runtime::notice::net::{ContentRange, NetEvent, RangeFallbackReason};
use clima_artifact_runtime::progress::notice::{self, Level, Notice};
use clima_artifact_runtime::progress::{DownloadStart, Reporter, Reporting, Silent, Transfer};

/// What a program keeps of a notice: its level, its line, and its facts when it knows the
/// domain.
#[derive(Debug, Clone)]
enum Seen {
    Lock(LockEvent),
    Net(NetEvent),
    Other,
}

/// A program's own reporter: it keeps the events, and the lines.
#[derive(Default)]
struct Collect(Mutex<Vec<(Level, String, Seen)>>);

impl Reporter for Collect {
    fn start(&self, _: &DownloadStart<'_>) -> Box<dyn Transfer> {
        Box::new(Silent)
    }
    fn notice(&self, notice: &Notice<'_>) {
        let typed = if let Some(e) = notice.event.downcast_ref::<LockEvent>() {
            Seen::Lock(e.clone())
        } else if let Some(e) = notice.event.downcast_ref::<NetEvent>() {
            Seen::Net(e.clone())
        } else {
            Seen::Other
        };
        let mut seen = self.0.lock().unwrap();
        seen.push((notice.level, notice.text.to_owned(), typed));
    }
}

#[test]
fn notices_reach_the_reporter_set_typed_and_details_only_when_verbose() {
    let collect = Arc::new(Collect::default());
    let reporting = Reporting::to(collect.clone());
    reporting.emit(LockEvent::LockWait {
        what: "the install of `era5`".into(),
        path: PathBuf::from("/d/a.lock"),
        holder: "another process".into(),
        timeout: Duration::from_secs(10),
    });
    reporting.emit(NetEvent::Retry {
        error: "timed out".into(),
        cause: "timed out".into(),
        delay: Duration::from_secs(2),
        attempt: 2,
        attempts: 3,
    });
    reporting.emit(NetEvent::Redirect {
        from: "a".into(),
        to: "b".into(),
    });
    let verbose = reporting.clone().with_verbose(true);
    verbose.emit(NetEvent::RangeFallback {
        why: RangeFallbackReason::NoValidator,
    });
    verbose.emit(NetEvent::RangeFallback {
        why: RangeFallbackReason::OtherRange(ContentRange::Bytes {
            first: 0,
            last: 99,
            total: 1000,
        }),
    });
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
            Seen::Lock(LockEvent::LockWait { timeout, .. }) => {
                format!("lock wait, {} s", timeout.as_secs())
            }
            Seen::Net(NetEvent::Retry {
                attempt, attempts, ..
            }) => format!("retry {attempt}/{attempts}"),
            Seen::Net(NetEvent::RangeFallback {
                why: RangeFallbackReason::NoValidator,
            }) => "one stream: no validator".to_owned(),
            Seen::Net(NetEvent::RangeFallback {
                why: RangeFallbackReason::OtherRange(ContentRange::Bytes { first, last, .. }),
            }) => format!("one stream: got bytes {first}-{last}"),
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
    let x = NetEvent::RangeFallback {
        why: RangeFallbackReason::NoValidator,
    };
    let detail_line = notice::plain_line(&Notice::new(&x, "x"));
    assert_eq!(detail_line, "clima-artifacts: detail: x");
}
