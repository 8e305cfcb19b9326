//! Servers that never stop: a body that goes on after a good tarball, with and
//! without `size` in the manifest, and a body that trickles. Each install ends in bounded time
//! with an error that names the rule, reading a bounded number of bytes, and leaves the lock
//! free for the next try.

use clima_artifact_runtime::depot::Error as DepotError;
use std::time::{Duration, Instant};

use clima_artifact_runtime::{Config, Error, ensure_variant};
use clima_artifact_tests::{
    Fault, Served, TestArtifact, TestServer, assert_depot_clean, failure_reasons, have_git, served,
    test_config,
};

fn case(seed: u64) -> Option<Served> {
    have_git().then(|| served(TestArtifact::large(seed, 4, 50_000), "a.tar.gz"))
}

trait Install {
    fn install(&self, config: &Config, size: Option<u64>) -> Result<std::path::PathBuf, Error>;
}

impl Install for Served {
    fn install(&self, config: &Config, size: Option<u64>) -> Result<std::path::PathBuf, Error> {
        let mut v = self.art.variant(&[self.server.url("a.tar.gz")]);
        v.downloads[0].size = size;
        ensure_variant("endless", &v, &self.depot, config).map(|i| i.path)
    }
}

#[test]
fn an_endless_body_stops_one_byte_past_the_manifests_size() {
    let Some(c) = case(1411) else { return };
    c.server.always("a.tar.gz", Fault::Endless);
    let config = test_config(std::slice::from_ref(&c.depot));
    let size = c.art.tarball.len() as u64;
    let start = Instant::now();
    let e = c.install(&config, Some(size)).unwrap_err();
    let text = failure_reasons(&e);
    assert!(
        text.contains(&format!("longer than the manifest's size of {size} bytes")),
        "{text}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "{:?}",
        start.elapsed()
    );
    assert_depot_clean(&c.depot);
    // Not retried (a longer body is not transient), and the exact tarball works afterwards.
    assert_eq!(c.server.gets("a.tar.gz"), 1, "{text}");
    let fixed = TestServer::start();
    fixed.serve("a.tar.gz", c.art.tarball.clone());
    let mut v = c.art.variant(&[fixed.url("a.tar.gz")]);
    v.downloads[0].size = Some(size);
    let path = ensure_variant("endless", &v, &c.depot, &config)
        .unwrap()
        .path;
    c.art.assert_content(&path);
}

#[test]
fn an_endless_body_without_size_is_bounded_after_the_archive() {
    let Some(c) = case(1412) else { return };
    c.server.always("a.tar.gz", Fault::Endless);
    let mut config = test_config(std::slice::from_ref(&c.depot));
    config.net.retry.attempts = 1;
    let start = Instant::now();
    let e = c.install(&config, None).unwrap_err();
    let text = failure_reasons(&e);
    assert!(text.contains("kept sending after"), "{text}");
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "{:?}",
        start.elapsed()
    );
    assert_depot_clean(&c.depot);
    // The client stopped reading: the server could not push much more than the archive and
    // the 1 MiB cap (plus what sits in socket buffers).
    std::thread::sleep(Duration::from_millis(300));
    let sent = c.server.bytes_sent();
    let bound = c.art.tarball.len() as u64 + (1 << 20) + (16 << 20);
    assert!(sent < bound, "server pushed {sent} bytes (bound {bound})");
}

#[test]
fn a_trickling_body_is_abandoned_by_the_low_speed_rule_and_releases_the_lock() {
    let Some(c) = case(1413) else { return };
    // 64 bytes every 20 ms = 3.2 KB/s, below the 64 KiB/s limit: abandoned after ~1 s, although
    // bytes keep arriving (the stall timeout never fires).
    c.server.always(
        "a.tar.gz",
        Fault::Trickle {
            chunk: 64,
            delay: Duration::from_millis(20),
        },
    );
    let mut config = test_config(std::slice::from_ref(&c.depot));
    config.net.retry.attempts = 1;
    config.net.low_speed_limit = 64 << 10;
    config.net.low_speed_time = Duration::from_secs(1);
    config.net.stall_timeout = Duration::from_secs(5);
    let start = Instant::now();
    let e = c.install(&config, None).unwrap_err();
    let text = failure_reasons(&e);
    assert!(
        text.contains("too slow") && text.contains("CLIMA_ARTIFACTS_LOW_SPEED_LIMIT"),
        "{text}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "{:?}",
        start.elapsed()
    );
    assert_depot_clean(&c.depot);
    // The lock is free: a second process-like attempt with a normal server gets it at once.
    let fine = TestServer::start();
    fine.serve("a.tar.gz", c.art.tarball.clone());
    let v = c.art.variant(&[fine.url("a.tar.gz")]);
    let quick = Config {
        lock_timeout: Duration::from_secs(1),
        ..config
    };
    let path = ensure_variant("endless", &v, &c.depot, &quick)
        .unwrap()
        .path;
    c.art.assert_content(&path);
}

/// While one install holds the lock on a slow download, a waiter that gives up says who holds
/// it and how far that download is (the holder keeps its line in the lock file up to date).
#[test]
fn a_waiter_sees_how_far_the_lock_holder_is() {
    let Some(c) = case(1414) else { return };
    c.server.always(
        "a.tar.gz",
        Fault::Trickle {
            chunk: 4 << 10,
            delay: Duration::from_millis(100),
        },
    );
    assert!(c.art.tarball.len() > 150_000, "{}", c.art.tarball.len());
    let mut config = test_config(std::slice::from_ref(&c.depot));
    config.net.low_speed_limit = 0;
    std::thread::scope(|s| {
        let holder = s.spawn(|| c.install(&config, None));
        // Let the holder take the lock and report some progress (every 2 s).
        std::thread::sleep(Duration::from_millis(2500));
        let waiter = Config {
            lock_timeout: Duration::from_millis(500),
            ..config.clone()
        };
        let e = c.install(&waiter, None).unwrap_err();
        let text = e.to_string();
        assert!(
            matches!(e, Error::Depot(DepotError::LockTimeout { .. })),
            "{text}"
        );
        assert!(
            text.contains(&format!("pid {}", std::process::id()))
                && text.contains("downloading `endless` from 127.0.0.1:")
                && text.contains(" of "),
            "{text}"
        );
        c.art.assert_content(&holder.join().unwrap().unwrap());
    });
}
