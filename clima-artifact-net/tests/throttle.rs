//! The 429 rule of the retry policy against a loopback server, as a caller's loop (the archive
//! client of `clima-artifact-ops`) uses it: a `429 Too Many Requests` waits for its
//! `Retry-After` (read by `retry::retry_after`), within `MAX_RETRY_AFTER`, and a server that
//! keeps answering 429 is given up after `MAX_THROTTLED` waits. No timing is asserted: only the
//! waits the policy chose and the requests the server saw.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use clima_artifact_net::NetConfig;
use clima_artifact_net::retry::{MAX_RETRY_AFTER, MAX_THROTTLED, RetryPolicy, retry_after};

/// A loopback server answering each request with `answer(n)` (`n`: 0-based request number):
/// the status line's code and the extra header lines. Returns its URL and the request count.
fn serve(answer: fn(usize) -> (u16, &'static str)) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/api/records", listener.local_addr().unwrap());
    let count = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&count);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            // The request line and headers, up to the blank line.
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                if line == "\r\n" {
                    break;
                }
                line.clear();
            }
            let n = seen.fetch_add(1, Ordering::SeqCst);
            let (status, headers) = answer(n);
            let body = if status == 200 { "ok" } else { "slow down" };
            let reason = if status == 200 {
                "OK"
            } else {
                "Too Many Requests"
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status} {reason}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (url, count)
}

/// The caller's loop: GET `url` until it is not throttled, waiting as the policy says. The
/// final status and body, and each wait chosen; `None` for the status when the policy gave up.
fn get_throttled(url: &str, sleep: bool) -> (Option<u16>, String, Vec<Duration>) {
    let agent = clima_artifact_net::source::agent(&NetConfig::default()).unwrap();
    let policy = RetryPolicy::default();
    let mut waits = Vec::new();
    let mut throttled = 0;
    loop {
        let mut resp = agent.get(url).call().unwrap();
        let status = resp.status().as_u16();
        let body = resp.body_mut().read_to_string().unwrap();
        if status != 429 {
            return (Some(status), body, waits);
        }
        throttled += 1;
        match policy.next_after_throttle(throttled, retry_after(resp.headers())) {
            Some(wait) => {
                waits.push(wait);
                if sleep {
                    std::thread::sleep(wait);
                }
            }
            None => return (None, body, waits),
        }
    }
}

#[test]
fn a_429_waits_for_its_retry_after_then_the_request_goes_through() {
    let (url, count) = serve(|n| match n {
        0 => (429, "Retry-After: 1\r\n"),
        _ => (200, ""),
    });
    let (status, body, waits) = get_throttled(&url, true);
    assert_eq!(status, Some(200));
    assert_eq!(body, "ok");
    // Exactly the wait the server asked for, once; the request was sent twice.
    assert_eq!(waits, [Duration::from_secs(1)]);
    assert_eq!(count.load(Ordering::SeqCst), 2);
}

#[test]
fn a_retry_after_beyond_the_bound_is_cut_to_it() {
    let (url, count) = serve(|n| match n {
        0 => (429, "Retry-After: 86400\r\n"),
        _ => (200, ""),
    });
    // Not slept: a day, cut to the bound, is still ten minutes.
    let (status, _, waits) = get_throttled(&url, false);
    assert_eq!(status, Some(200));
    assert_eq!(waits, [MAX_RETRY_AFTER]);
    assert!(MAX_RETRY_AFTER <= Duration::from_secs(600));
    assert_eq!(count.load(Ordering::SeqCst), 2);
}

#[test]
fn a_server_that_keeps_throttling_is_given_up_after_the_bound() {
    // No Retry-After: the backoff, never over its cap; not slept.
    let (url, count) = serve(|_| (429, ""));
    let (status, body, waits) = get_throttled(&url, false);
    assert_eq!(status, None, "the policy gives up");
    assert_eq!(body, "slow down");
    assert_eq!(waits.len(), MAX_THROTTLED as usize);
    assert!(
        waits
            .iter()
            .all(|w| *w <= clima_artifact_net::retry::BACKOFF_CAP)
    );
    assert_eq!(waits[0], RetryPolicy::default().base);
    // One request, then one per wait: bounded.
    assert_eq!(count.load(Ordering::SeqCst), MAX_THROTTLED as usize + 1);
}
