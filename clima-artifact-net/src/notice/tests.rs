//! Every notice of this crate and the line it prints: today's lines, pinned word for word
//! (the CLI's snapshots and the integration tests read them).

use super::*;
use clima_artifact_progress::notice::{SystemError, line};
use std::io;

/// Each case's level and its text (`Display`, without the prefix).
fn check<E: Event>(cases: Vec<(E, Level, &str)>) {
    for (event, level, text) in cases {
        assert_eq!(event.level(), level, "{event:?}");
        assert_eq!(event.to_string(), text);
    }
}

/// Each case's whole line, prefix and level included.
fn check_lines<E: Event>(cases: Vec<(E, String)>) {
    for (event, text) in cases {
        assert_eq!(line(&event), text, "{event:?}");
    }
}

#[allow(dead_code, reason = "not every crate's reasons carry a system error")]
fn io(kind: io::ErrorKind, message: &str) -> SystemError {
    SystemError::new(kind, message)
}

#[test]
#[allow(
    clippy::too_many_lines,
    reason = "a table of cases: each notice and the line it prints"
)]
fn net_event_displays_are_todays_lines() {
    let cases: Vec<(NetEvent, Level, &str)> = vec![
        (
            NetEvent::Resuming {
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
            NetEvent::TlsNotVerified {
                host: "evil\u{1b}[2J.org".into(),
            },
            Level::Warning,
            "not verifying the TLS certificate of `evil\\u{1b}[2J.org` \
                 (CLIMA_ARTIFACTS_NO_VERIFY_HOSTS); the sha256 and the tree hash still check \
                 what is downloaded",
        ),
    ];
    check(cases);
}

/// Every reason of every notice of [`NetEvent`] that has them, and the line it prints.
#[test]
#[allow(
    clippy::too_many_lines,
    reason = "a table of cases: each reason and the line it prints"
)]
fn every_net_event_reason_prints_todays_line() {
    let p = PathBuf::from;
    let not_kept = |why| NetEvent::PartialNotKept {
        artifact: "era5".into(),
        why,
    };
    let unusable = |why| NetEvent::PartialUnusable {
        path: p("/d/artifacts/.partial/ab"),
        why,
    };
    let restart = |why| NetEvent::PartialRestart {
        path: p("/d/artifacts/.partial/ab"),
        why,
    };
    let fallback = |why| NetEvent::RangeFallback { why };
    let cases: Vec<(NetEvent, String)> = vec![
        (
            not_kept(PartialNotKeptReason::CannotOpen(io(
                io::ErrorKind::Other,
                "`/d/artifacts/.partial/ab` is a symlink",
            ))),
            "clima-artifacts: warning: the download of `era5` is not kept for resuming: \
                 `/d/artifacts/.partial/ab` is a symlink"
                .into(),
        ),
        (
            not_kept(PartialNotKeptReason::NotOwned {
                path: p("/d/artifacts/.partial/ab"),
                uid: 65534,
            }),
            "clima-artifacts: warning: the download of `era5` is not kept for resuming: \
                 `/d/artifacts/.partial/ab` belongs to uid 65534 or has other links"
                .into(),
        ),
        (
            not_kept(PartialNotKeptReason::CannotCreate(io(
                io::ErrorKind::StorageFull,
                "`/d/artifacts/.partial/ab`: No space left on device (os error 28)",
            ))),
            "clima-artifacts: warning: the download of `era5` is not kept for resuming: \
                 `/d/artifacts/.partial/ab`: No space left on device (os error 28)"
                .into(),
        ),
        (
            unusable(PartialUnusableReason::ShorterThanHeader),
            "clima-artifacts: warning: the kept partial download `/d/artifacts/.partial/ab` \
                 is shorter than its header; removing it and starting over"
                .into(),
        ),
        (
            unusable(PartialUnusableReason::UnreadableHeader),
            "clima-artifacts: warning: the kept partial download `/d/artifacts/.partial/ab` \
                 has no header this version can read, or one out of bounds; removing it and \
                 starting over"
                .into(),
        ),
        (
            unusable(PartialUnusableReason::TooLong {
                length: 5000,
                max: 4096,
            }),
            "clima-artifacts: warning: the kept partial download `/d/artifacts/.partial/ab` \
                 claims a download of 5000 bytes, more than the 4096 it may have; removing it \
                 and starting over"
                .into(),
        ),
        (
            unusable(PartialUnusableReason::Mismatch),
            "clima-artifacts: warning: the kept partial download `/d/artifacts/.partial/ab` \
                 does not match its header or this URL; removing it and starting over"
                .into(),
        ),
        (
            unusable(PartialUnusableReason::Unreadable),
            "clima-artifacts: warning: the kept partial download `/d/artifacts/.partial/ab` \
                 cannot be read; removing it and starting over"
                .into(),
        ),
        (
            unusable(PartialUnusableReason::CountersPastChunks),
            "clima-artifacts: warning: the kept partial download `/d/artifacts/.partial/ab` \
                 has chunk counters past their chunks; removing it and starting over"
                .into(),
        ),
        (
            restart(PartialRestartReason::ValidatorChanged),
            "clima-artifacts: warning: the partial download `/d/artifacts/.partial/ab` cannot \
                 be continued: the server answered its range request with another ETag or \
                 Last-Modified, or none (the file changed, and the server ignores If-Range); \
                 starting over"
                .into(),
        ),
        (
            restart(PartialRestartReason::OtherRange(ContentRange::Bytes {
                first: 0,
                last: 9,
                total: 100,
            })),
            "clima-artifacts: warning: the partial download `/d/artifacts/.partial/ab` cannot \
                 be continued: the server answered its range request with `Content-Range: bytes \
                 0-9/100`; starting over"
                .into(),
        ),
        (
            restart(PartialRestartReason::OtherRange(ContentRange::Unusable)),
            "clima-artifacts: warning: the partial download `/d/artifacts/.partial/ab` cannot \
                 be continued: the server answered its range request with no usable \
                 Content-Range; starting over"
                .into(),
        ),
        (
            restart(PartialRestartReason::FileChanged),
            "clima-artifacts: warning: the partial download `/d/artifacts/.partial/ab` cannot \
                 be continued: the file on the server changed since (another ETag or \
                 Last-Modified); starting over"
                .into(),
        ),
        (
            fallback(RangeFallbackReason::NoValidator),
            "clima-artifacts: detail: a range came without a validator; one stream from now \
                 on"
            .into(),
        ),
        (
            fallback(RangeFallbackReason::OtherRange(ContentRange::Bytes {
                first: 10,
                last: 19,
                total: 100,
            })),
            "clima-artifacts: detail: a range request was answered with `Content-Range: \
                 bytes 10-19/100`; one stream from now on"
                .into(),
        ),
        (
            fallback(RangeFallbackReason::OtherRange(ContentRange::Unusable)),
            "clima-artifacts: detail: a range request was answered with no usable \
                 Content-Range; one stream from now on"
                .into(),
        ),
    ];
    check_lines(cases);
}

#[test]
fn lines_have_the_prefix_and_level() {
    let retry = NetEvent::Retry {
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
    let redirect = NetEvent::Redirect {
        from: "https://a.org/x".into(),
        to: "https://b.org/y".into(),
    };
    assert_eq!(
        line(&redirect),
        "clima-artifacts: detail: redirected from `https://a.org/x` to `https://b.org/y`"
    );
}
