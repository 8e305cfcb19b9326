//! The retry policy of downloads, in one place: which failures are worth another try, how
//! many tries, and how long to wait before each. Every loop that tries again asks it: the
//! install's attempts per URL (`clima-artifact-runtime`), a broken transfer resumed in the
//! same pass ([`crate::body`]), the chunks of a download over several connections
//! ([`crate::ranged`]), and the requests of the archive client of `clima-artifact-ops`, whose
//! `429 Too Many Requests` answers wait for their `Retry-After`
//! ([`RetryPolicy::next_after_throttle`]).
//!
//! | loop | gives up after | waits before try `n` |
//! |---|---|---|
//! | attempts of one URL (whole pipeline again) | [`RetryPolicy::attempts`] attempts in all | `base * 2^(n-1)`, at most [`BACKOFF_CAP`] |
//! | a chunk, or the one stream of a ranged download | [`MAX_CHUNK_FAILURES`] failures in a row without a byte | the same |
//! | a broken transfer resumed where it broke | [`MAX_RESUMES`] resumes, or [`MAX_RESUMES_WITHOUT_PROGRESS`] in a row without a byte | `base * 2^k` after `k` resumes in a row without a byte (`k` at most 5) |
//! | a request answered `429 Too Many Requests` (an archive's API) | [`MAX_THROTTLED`] such answers | the answer's `Retry-After` ([`retry_after`]), at most [`MAX_RETRY_AFTER`]; without one, the backoff |
//!
//! Transient: refused, reset, aborted, unreachable or timed-out connections, stalls, bodies
//! cut short, temporary DNS failures ([`is_transient_io`]); HTTP 5xx, 429 and 408
//! ([`is_transient_status`]). A 429 or 503 answering a range request while other connections
//! run closes that connection instead of retrying it ([`retires_connection`]): the server
//! limits connections per client.

use std::io;
use std::time::Duration;

/// Longest wait between two tries.
pub const BACKOFF_CAP: Duration = Duration::from_secs(30);

/// Failures in a row, without a byte received, after which a chunk (or the one stream of a
/// ranged download) stops the download.
pub const MAX_CHUNK_FAILURES: u32 = 5;

/// Most resumes of one transfer within one pass.
pub const MAX_RESUMES: u32 = 50;

/// Resumes in a row without a byte received after which a transfer is given up.
pub const MAX_RESUMES_WITHOUT_PROGRESS: u32 = 3;

/// Most `429 Too Many Requests` answers waited out for one request before giving up.
pub const MAX_THROTTLED: u32 = 20;

/// Longest `Retry-After` honoured: a longer one is waited this long, then the request is
/// tried again (and counts towards [`MAX_THROTTLED`]).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(600);

/// How often, and after how long, a failed download is tried again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts of one URL in all, for transient failures (`CLIMA_ARTIFACTS_RETRIES`).
    pub attempts: u32,
    /// The first wait; each further one doubles, up to [`BACKOFF_CAP`].
    pub base: Duration,
}

impl Default for RetryPolicy {
    /// 3 attempts, 0.5 s before the first retry.
    fn default() -> RetryPolicy {
        RetryPolicy {
            attempts: 3,
            base: Duration::from_millis(500),
        }
    }
}

impl RetryPolicy {
    /// The wait before retry number `retry` (1-based): `base * 2^(retry-1)`, at most
    /// [`BACKOFF_CAP`].
    pub fn backoff(&self, retry: u32) -> Duration {
        let factor = 1u32 << retry.saturating_sub(1).min(10);
        (self.base * factor).min(BACKOFF_CAP)
    }

    /// After `failed` attempts of one URL (the last one failed, `transient` or not): the wait
    /// before the next attempt, or `None` to give up on this URL.
    pub fn next_attempt(&self, failed: u32, transient: bool) -> Option<Duration> {
        (transient && failed < self.attempts).then(|| self.backoff(failed))
    }

    /// After `failures` failures in a row of a chunk (or the one stream) without a byte: the
    /// wait before it is asked again, or `None` to stop the download.
    pub fn next_chunk_try(&self, failures: u32) -> Option<Duration> {
        (failures < MAX_CHUNK_FAILURES).then(|| self.backoff(failures.max(1)))
    }

    /// A transfer broke after `resumes` resumes, `stuck` of the last ones in a row without a
    /// byte (counting this break): the wait before it resumes, or `None` to give up.
    pub fn next_resume(&self, resumes: u32, stuck: u32) -> Option<Duration> {
        (resumes < MAX_RESUMES && stuck <= MAX_RESUMES_WITHOUT_PROGRESS)
            .then(|| self.base * (1 << stuck.min(5)))
    }

    /// After the `throttled`-th `429 Too Many Requests` answer (1-based) to one request, whose
    /// `Retry-After` asked for `retry_after` ([`retry_after`]): the wait before it is sent
    /// again (that, else the backoff, at most [`MAX_RETRY_AFTER`]), or `None` to give up after
    /// more than [`MAX_THROTTLED`]. Throttling is not a failure: it does not count towards
    /// [`RetryPolicy::attempts`].
    pub fn next_after_throttle(
        &self,
        throttled: u32,
        retry_after: Option<Duration>,
    ) -> Option<Duration> {
        (throttled <= MAX_THROTTLED).then(|| {
            retry_after
                .unwrap_or_else(|| self.backoff(throttled))
                .min(MAX_RETRY_AFTER)
        })
    }
}

/// The wait a response's `Retry-After` header asks for, when it has one in seconds
/// (`Retry-After: 120`). An HTTP date, or anything else, is `None` (the caller's backoff
/// applies); a huge number is kept as it is, for [`RetryPolicy::next_after_throttle`] to bound.
pub fn retry_after(headers: &ureq::http::HeaderMap) -> Option<Duration> {
    headers
        .get(ureq::http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(Duration::from_secs)
}

/// Whether an HTTP status may go away on retry: 5xx, 429 (too many requests), 408.
pub fn is_transient_status(status: u16) -> bool {
    status >= 500 || status == 429 || status == 408
}

/// Whether a status answering a range request, while other connections run, means the
/// server limits connections per client: that connection closes, the others go on.
pub fn retires_connection(status: u16) -> bool {
    matches!(status, 429 | 503)
}

/// Whether an I/O error met while connecting to or reading from a server may go away on
/// retry: refused, reset, aborted or unreachable connections, timeouts and stalls, bodies cut
/// short, temporary DNS failures. Not TLS failures (`InvalidData`, e.g. a bad certificate or
/// a server that does not speak TLS) or DNS "no such host".
pub fn is_transient_io(e: &io::Error) -> bool {
    use io::ErrorKind as K;
    match e.kind() {
        K::ConnectionRefused
        | K::ConnectionReset
        | K::ConnectionAborted
        | K::NotConnected
        | K::BrokenPipe
        | K::TimedOut
        | K::WouldBlock
        | K::UnexpectedEof
        | K::Interrupted
        | K::HostUnreachable
        | K::NetworkUnreachable
        | K::NetworkDown
        | K::AddrNotAvailable => true,
        // getaddrinfo failures have no kind of their own; only EAI_AGAIN is temporary.
        _ => e
            .to_string()
            .contains("Temporary failure in name resolution"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_schedule_is_pinned() {
        let p = RetryPolicy::default();
        // Attempts of one URL: 3 in all, 0.5 s then 1 s; a permanent failure is not retried.
        assert_eq!(p.next_attempt(1, true), Some(ms(500)));
        assert_eq!(p.next_attempt(2, true), Some(ms(1000)));
        assert_eq!(p.next_attempt(3, true), None);
        assert_eq!(p.next_attempt(1, false), None);
        // Doubling, capped at 30 s.
        let waits: Vec<Duration> = (1..=8).map(|n| p.backoff(n)).collect();
        let expected = [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000].map(ms);
        assert_eq!(waits, expected);
        assert_eq!(
            RetryPolicy {
                base: Duration::from_secs(10),
                ..p
            }
            .backoff(9),
            BACKOFF_CAP
        );
        // A chunk: 5 failures in a row without a byte stop the download.
        let chunk: Vec<Option<Duration>> = (0..=5).map(|n| p.next_chunk_try(n)).collect();
        let expected = [
            Some(500),
            Some(500),
            Some(1000),
            Some(2000),
            Some(4000),
            None,
        ];
        assert_eq!(chunk, expected.map(|w| w.map(ms)));
        // A resumed transfer: doubling per resume without a byte, 3 such in a row at most,
        // 50 resumes in all.
        assert_eq!(p.next_resume(0, 0), Some(ms(500)));
        assert_eq!(p.next_resume(10, 1), Some(ms(1000)));
        assert_eq!(p.next_resume(10, 3), Some(ms(4000)));
        assert_eq!(p.next_resume(10, 4), None);
        assert_eq!(p.next_resume(50, 0), None);
    }

    #[test]
    fn throttling_waits_as_asked_within_bounds() {
        let p = RetryPolicy::default();
        // The server's wait, else the backoff; never over the cap.
        assert_eq!(p.next_after_throttle(1, Some(ms(2000))), Some(ms(2000)));
        assert_eq!(p.next_after_throttle(1, None), Some(ms(500)));
        assert_eq!(p.next_after_throttle(3, None), Some(ms(2000)));
        assert_eq!(
            p.next_after_throttle(1, Some(Duration::from_secs(86_400))),
            Some(MAX_RETRY_AFTER)
        );
        // A zero wait is honoured as such.
        assert_eq!(p.next_after_throttle(1, Some(Duration::ZERO)), Some(ms(0)));
        // At most MAX_THROTTLED waits for one request.
        assert!(p.next_after_throttle(MAX_THROTTLED, None).is_some());
        assert_eq!(p.next_after_throttle(MAX_THROTTLED + 1, Some(ms(1))), None);
    }

    #[test]
    fn retry_after_takes_seconds_only() {
        let with = |v: &str| {
            let mut h = ureq::http::HeaderMap::new();
            h.insert(
                ureq::http::header::RETRY_AFTER,
                ureq::http::HeaderValue::from_str(v).unwrap(),
            );
            retry_after(&h)
        };
        assert_eq!(with("120"), Some(Duration::from_secs(120)));
        assert_eq!(with(" 7 "), Some(Duration::from_secs(7)));
        assert_eq!(with("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(with("-1"), None);
        assert_eq!(with("1.5"), None);
        assert_eq!(retry_after(&ureq::http::HeaderMap::new()), None);
    }

    #[test]
    fn transient_classification() {
        assert!(is_transient_status(503) && is_transient_status(429) && is_transient_status(500));
        assert!(is_transient_status(408));
        assert!(!is_transient_status(404) && !is_transient_status(403));
        assert!(retires_connection(429) && retires_connection(503) && !retires_connection(500));
        for kind in [
            io::ErrorKind::ConnectionReset,
            io::ErrorKind::TimedOut,
            io::ErrorKind::UnexpectedEof,
        ] {
            assert!(is_transient_io(&io::Error::from(kind)), "{kind:?}");
        }
        assert!(!is_transient_io(&io::Error::from(
            io::ErrorKind::InvalidData
        )));
        assert!(!is_transient_io(&io::Error::other(
            "failed to lookup address: Name or service not known"
        )));
        assert!(is_transient_io(&io::Error::other(
            "Temporary failure in name resolution"
        )));
    }
}
