//! At most N requests in flight to one server (scheme, host and port), for the whole process:
//! the first request of a download, every chunk of a large one (re-asked ones included), a
//! resume, and every download of other artifacts from the same server at the same time.
//!
//! A [`Permit`] is taken before a request is sent and lives with its response's body: it is
//! given back once the body is read or dropped (its connection closed), so the next request
//! starts only after the one it replaces ended. Servers that limit connections per client
//! (archives throttle or ban past a few) count exactly these. A response given up before its
//! end (cut short, stalled, too slow, cancelled) is a connection the server is still writing
//! to: it learns of the close late (when a write fails, on its event loop's next turn), and
//! counts the request until then. Such a permit ([`Permit::linger`]) stays taken for
//! [`CLOSE_GRACE`] after its connection closed.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// How long a request whose connection was closed before its response ended still counts
/// as in flight (the time a server may take to notice the close).
pub(crate) const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// Requests in flight per server.
struct Slots {
    busy: Mutex<Busy>,
    freed: Condvar,
}

#[derive(Default)]
struct Busy {
    /// Permits held, per server.
    open: HashMap<String, usize>,
    /// Connections closed before their response ended, per server, and until when each
    /// still counts.
    closing: Vec<(String, Instant)>,
}

impl Busy {
    /// Requests in flight to `server` at `now`.
    fn count(&mut self, server: &str, now: Instant) -> usize {
        self.closing.retain(|(_, until)| *until > now);
        let closing = self.closing.iter().filter(|(s, _)| s == server).count();
        self.open.get(server).copied().unwrap_or(0) + closing
    }
}

fn slots() -> &'static Slots {
    static SLOTS: OnceLock<Slots> = OnceLock::new();
    SLOTS.get_or_init(|| Slots {
        busy: Mutex::new(Busy::default()),
        freed: Condvar::new(),
    })
}

fn lock(slots: &Slots) -> MutexGuard<'_, Busy> {
    slots.busy.lock().unwrap_or_else(|e| e.into_inner())
}

/// One request in flight to a server; given back when dropped.
#[derive(Debug)]
pub(crate) struct Permit {
    server: String,
    /// Its response was given up before its end: it counts [`CLOSE_GRACE`] longer.
    linger: bool,
}

impl Permit {
    /// The response is given up before its end: once dropped (after its connection), the
    /// permit still counts for [`CLOSE_GRACE`].
    pub(crate) fn linger(&mut self) {
        self.linger = true;
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let slots = slots();
        let mut busy = lock(slots);
        if let Some(n) = busy.open.get_mut(&self.server) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                busy.open.remove(&self.server);
            }
        }
        if self.linger {
            let until = Instant::now() + CLOSE_GRACE;
            busy.closing.push((std::mem::take(&mut self.server), until));
        }
        drop(busy);
        slots.freed.notify_all();
    }
}

/// The server `url` is sent to: `scheme://host:port` (the URL itself when it has no host).
fn server_of(url: &str) -> String {
    match crate::redirect::parts(url) {
        Some(p) => format!("{}://{}:{}", p.scheme, p.host.to_ascii_lowercase(), p.port),
        None => url.to_owned(),
    }
}

/// A permit for a request to `url` when fewer than `limit` (at least 1) requests to its
/// server are in flight, waiting for one to end; `None` when `give_up` says so first (asked
/// about every 100 ms while waiting).
pub(crate) fn acquire(url: &str, limit: usize, give_up: &dyn Fn() -> bool) -> Option<Permit> {
    let server = server_of(url);
    let slots = slots();
    let mut busy = lock(slots);
    loop {
        if busy.count(&server, Instant::now()) < limit.max(1) {
            *busy.open.entry(server.clone()).or_insert(0) += 1;
            return Some(Permit {
                server,
                linger: false,
            });
        }
        drop(busy);
        if give_up() {
            return None;
        }
        busy = lock(slots);
        busy = slots
            .freed
            .wait_timeout(busy, Duration::from_millis(100))
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}

/// The most connections one download opens (`CLIMA_ARTIFACTS_CONNECTIONS` is at most this).
pub const MAX_CONNECTIONS: usize = 8;

/// The most requests in flight to one server under `config` (`CLIMA_ARTIFACTS_CONNECTIONS`).
pub(crate) fn limit_of(config: &crate::NetConfig) -> usize {
    config.connections.clamp(1, MAX_CONNECTIONS)
}

/// [`acquire`] without giving up.
pub(crate) fn wait_for(url: &str, limit: usize) -> Permit {
    loop {
        if let Some(p) = acquire(url, limit, &|| false) {
            return p;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permits_are_counted_per_server_and_given_back() {
        let a = wait_for("http://127.0.0.1:9/a", 2);
        let b = wait_for("http://127.0.0.1:9/b", 2);
        assert!(acquire("HTTP://127.0.0.1:9/c", 2, &|| true).is_none());
        // Another port is another server.
        let other = acquire("http://127.0.0.1:10/a", 2, &|| true);
        assert!(other.is_some());
        drop(a);
        let c = acquire("http://127.0.0.1:9/c", 2, &|| true);
        assert!(c.is_some());
        drop((b, c, other));
        assert!(!lock(slots()).open.contains_key("http://127.0.0.1:9"));
    }

    #[test]
    fn a_permit_given_up_early_counts_a_while_after_it_is_dropped() {
        let mut a = wait_for("http://127.0.0.1:11/a", 1);
        a.linger();
        drop(a);
        assert!(acquire("http://127.0.0.1:11/b", 1, &|| true).is_none());
        let mut busy = lock(slots());
        let later = Instant::now() + CLOSE_GRACE;
        assert_eq!(busy.count("http://127.0.0.1:11", later), 0);
        assert!(busy.closing.is_empty());
    }
}
