//! At most N requests in flight to one server (scheme, host and port), for the whole process:
//! the first request of a download, every chunk of a large one (re-asked ones included), a
//! resume, and every download of other artifacts from the same server at the same time.
//!
//! A [`Permit`] is taken before a request is sent and lives with its response's body: it is
//! given back once the body is read or dropped (its connection closed), so the next request
//! starts only after the one it replaces ended. Servers that limit connections per client
//! (archives throttle or ban past a few) count exactly these.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

/// Requests in flight per server.
struct Slots {
    busy: Mutex<HashMap<String, usize>>,
    freed: Condvar,
}

fn slots() -> &'static Slots {
    static SLOTS: OnceLock<Slots> = OnceLock::new();
    SLOTS.get_or_init(|| Slots {
        busy: Mutex::new(HashMap::new()),
        freed: Condvar::new(),
    })
}

fn lock(slots: &Slots) -> MutexGuard<'_, HashMap<String, usize>> {
    slots.busy.lock().unwrap_or_else(|e| e.into_inner())
}

/// One request in flight to a server; given back when dropped.
#[derive(Debug)]
pub(crate) struct Permit {
    server: String,
}

impl Drop for Permit {
    fn drop(&mut self) {
        let slots = slots();
        let mut busy = lock(slots);
        if let Some(n) = busy.get_mut(&self.server) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                busy.remove(&self.server);
            }
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
        let n = busy.entry(server.clone()).or_insert(0);
        if *n < limit.max(1) {
            *n += 1;
            return Some(Permit { server });
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
        assert!(lock(slots()).get("http://127.0.0.1:9").is_none());
    }
}
