//! Large downloads: several ranged connections feeding the one verification pass, bytes kept
//! in a partial file that the next process continues, and every way a server can get ranges
//! wrong ending installed or in a clear error.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use clima_artifact_runtime::progress::{DownloadStart, Reporter, Reporting, Silent, Transfer};
use clima_artifact_runtime::{Config, Origin, ensure_variant};
use clima_artifact_tests::{
    Fault, ManifestEntry, Served, TestArtifact, config_env, failure_reasons, have_git,
    partial_entries, served, temp_entries, test_config, write_manifest,
};

const PATH: &str = "large.tar.gz";

/// A ~4 MB incompressible artifact served at [`PATH`], if git is there to hash it.
fn case(seed: u64) -> Option<Served> {
    have_git().then(|| served(TestArtifact::large(seed, 8, 500_000), PATH))
}

/// Downloads of 1 MiB and more are large, over `connections`.
fn config(c: &Served, connections: usize) -> Config {
    let mut config = test_config(std::slice::from_ref(&c.depot));
    config.net.connections = connections;
    config.net.parallel_min_size = 1 << 20;
    config
}

fn install(c: &Served, config: &Config) -> Result<std::path::PathBuf, String> {
    let v = c.art.variant(&[c.server.url(PATH)]);
    match ensure_variant("large", &v, &c.depot, config) {
        Ok(got) => {
            assert!(matches!(got.origin, Origin::Downloaded { .. }));
            c.art.assert_content(&got.path);
            Ok(got.path)
        }
        Err(e) => Err(failure_reasons(&e)),
    }
}

/// The case's artifact is installed, and nothing else is left in its depot.
fn assert_installed_and_clean(c: &Served) {
    let installed = c.depot.join("artifacts").join(c.art.tree_hash.to_hex());
    assert!(installed.is_dir(), "{} is missing", installed.display());
    assert_clean(&c.depot);
}

fn assert_clean(depot: &Path) {
    assert!(temp_entries(depot).is_empty(), "{:?}", temp_entries(depot));
    assert!(
        partial_entries(depot).is_empty(),
        "{:?}",
        partial_entries(depot)
    );
}

/// Records the most connections any download of `artifact` reported open (the client's own
/// count: the server sees a closed connection only when it next writes to it).
struct MostConnections {
    artifact: &'static str,
    most: Arc<AtomicUsize>,
}

struct Counting(Arc<AtomicUsize>);

impl Reporter for MostConnections {
    fn start(&self, download: &DownloadStart<'_>) -> Box<dyn Transfer> {
        match download.artifact == self.artifact {
            true => Box::new(Counting(self.most.clone())),
            false => Box::new(Silent),
        }
    }
}

impl Transfer for Counting {
    fn received(&mut self, _: u64) {}
    fn connections(&mut self, open: usize) {
        self.0.fetch_max(open, Ordering::Relaxed);
    }
    fn done(self: Box<Self>, _: u64, _: Duration) {}
    fn failed(self: Box<Self>, _: &str) {}
}

#[test]
fn a_large_download_opens_several_connections_and_installs() {
    let Some(c) = case(2601) else { return };
    // Capped streams, so that the connections overlap as they do on a real link.
    c.server.cap_rate(4_000_000);
    let most = Arc::new(AtomicUsize::new(0));
    let mut config = Config {
        progress: true,
        ..config(&c, 4)
    };
    // The program's own reporter, passed down in its configuration.
    config.net.reporting = Reporting::to(Arc::new(MostConnections {
        artifact: "large-counted",
        most: most.clone(),
    }));
    let v = c.art.variant(&[c.server.url(PATH)]);
    let got = ensure_variant("large-counted", &v, &c.depot, &config).unwrap();
    c.art.assert_content(&got.path);
    // The server counts several at once; the client never has more open than allowed.
    let at_server = c.server.most_connections(PATH);
    assert!(
        at_server >= 2,
        "connections at once, at the server: {at_server}"
    );
    let at_client = most.load(Ordering::Relaxed);
    assert!(
        (2..=4).contains(&at_client),
        "connections open: {at_client}"
    );
    assert!(c.server.gets(PATH) > 2, "{} requests", c.server.gets(PATH));
    let len = c.art.tarball.len() as u64;
    let sent = c.server.bytes_sent_for(PATH);
    // Each byte once, plus what the first response pushed before it was closed.
    assert!(sent < len + len / 4, "{sent} bytes sent for {len}");
    assert_clean(&c.depot);
}

#[test]
fn one_connection_or_a_server_without_ranges_is_exactly_one_request() {
    let Some(c) = case(2602) else { return };
    install(&c, &config(&c, 1)).unwrap();
    assert_eq!(c.server.gets(PATH), 1);
    assert_eq!(c.server.most_connections(PATH), 1);
    assert_clean(&c.depot);

    let Some(d) = case(2603) else { return };
    d.server.ignore_ranges(PATH);
    install(&d, &config(&d, 8)).unwrap();
    assert_eq!(d.server.gets(PATH), 1);
    assert_eq!(d.server.ranges_of(PATH), Vec::<u64>::new());
    assert_clean(&d.depot);
}

/// Another version of `tarball`: the same length, other bytes (its chunks would splice
/// silently without a validator).
fn other_version(tarball: &[u8]) -> Vec<u8> {
    let mut other = tarball.to_vec();
    for b in other.iter_mut().skip(1000) {
        *b ^= 0x5a;
    }
    other
}

/// Installs in a process while the third request meets another version of the file (served
/// as `replace` says), every later one the original again: a download that took the third
/// answer as a chunk would fail its sha256; one that sees the change starts over and
/// installs. Returns the install's stderr.
fn install_past_a_replaced_file(seed: u64, replace: fn(Vec<u8>) -> Fault) -> Option<String> {
    let c = case(seed)?;
    c.server.cap_rate(4_000_000);
    c.server.fail_next(
        PATH,
        [
            Fault::Pass,
            Fault::Pass,
            replace(other_version(&c.art.tarball)),
            Fault::Replace(c.art.tarball.clone()),
        ],
    );
    let out = install_process(&c, &config(&c, 4)).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("changed on the server"), "{stderr}");
    assert_installed_and_clean(&c);
    Some(stderr)
}

#[test]
fn a_file_replaced_between_chunks_is_never_installed_mixed() {
    install_past_a_replaced_file(2604, Fault::Replace);
}

#[test]
fn range_requests_answered_with_200_or_a_wrong_content_range_get_one_stream() {
    for (seed, fault) in [(2605, Fault::IgnoreRange), (2606, Fault::WrongRange)] {
        let Some(c) = case(seed) else { return };
        c.server.fail_next(PATH, [Fault::Pass]);
        c.server.always(PATH, fault.clone());
        install(&c, &config(&c, 4)).unwrap_or_else(|e| panic!("{fault:?}: {e}"));
        let len = c.art.tarball.len() as u64;
        let sent = c.server.bytes_sent_for(PATH);
        assert!(sent <= 6 * len, "{fault:?}: {sent} bytes sent for {len}");
        assert_clean(&c.depot);
    }
}

#[test]
fn short_stalled_and_failing_chunks_are_retried_where_they_stopped() {
    let Some(c) = case(2607) else { return };
    let quarter = c.art.tarball.len() / 4;
    c.server.cap_rate(4_000_000);
    c.server.fail_next(
        PATH,
        [
            Fault::Pass,
            Fault::Short {
                after: quarter + 1000,
            },
            Fault::Status(503),
            Fault::Stall {
                after: 2 * quarter + 5000,
            },
            Fault::Status(500),
            Fault::Reset {
                after: 3 * quarter + 7,
            },
        ],
    );
    let started = Instant::now();
    install(&c, &config(&c, 4)).unwrap();
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_clean(&c.depot);
}

#[test]
fn chunks_that_keep_failing_end_in_a_clear_error_within_the_bounds() {
    let Some(c) = case(2608) else { return };
    // The first response breaks a quarter in (it would fill every chunk the others do not
    // get otherwise), and every range request after it fails.
    let quarter = c.art.tarball.len() / 4;
    c.server.fail_next(PATH, [Fault::Short { after: quarter }]);
    c.server.always(PATH, Fault::Status(500));
    let started = Instant::now();
    let e = install(&c, &config(&c, 4)).unwrap_err();
    assert!(e.contains("HTTP 500"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(60));
    // What was received stays for a later attempt (the failure may pass), bounded by the
    // tarball's size.
    assert!(temp_entries(&c.depot).is_empty());
    let gets = c.server.gets(PATH);
    assert!(gets < 120, "{gets} requests");
}

/// `install_one` of the case's artifact in a process of its own.
fn install_process(c: &Served, config: &Config) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_install_one"));
    cmd.args([
        "variant",
        "large",
        &c.art.tree_hash.to_hex(),
        &c.art.sha256.to_hex(),
    ])
    .arg(c.server.url(PATH))
    .envs(config_env(config))
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    cmd
}

/// Starts an install in a process, capped at 1 MB/s per connection, and kills it (-9) once
/// the server sent half of the tarball. Returns the bytes sent by then.
fn kill_at_half(c: &Served, config: &Config) -> u64 {
    let half = c.art.tarball.len() as u64 / 2;
    c.server.cap_rate(1_000_000);
    let mut child = install_process(c, config).spawn().unwrap();
    let started = Instant::now();
    while c.server.bytes_sent_for(PATH) < half {
        assert!(started.elapsed() < Duration::from_secs(30), "no progress");
        assert!(child.try_wait().unwrap().is_none(), "finished too early");
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    c.server.cap_rate(0);
    std::thread::sleep(Duration::from_millis(100));
    c.server.bytes_sent_for(PATH)
}

#[test]
fn a_download_killed_half_way_continues_in_the_next_process() {
    let Some(c) = case(2609) else { return };
    let config = config(&c, 4);
    let len = c.art.tarball.len() as u64;
    let before = kill_at_half(&c, &config);
    assert_eq!(
        partial_entries(&c.depot).len(),
        1,
        "the received bytes are kept"
    );
    // The rerun's plain log lines (stderr is not a terminal) say where it resumes and over how
    // many connections it went.
    c.server.cap_rate(2_000_000);
    let out = install_process(&c, &config)
        .env("CLIMA_ARTIFACTS_PROGRESS", "1")
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(log.contains("resuming at "), "{log}");
    assert!(log.contains(" connections"), "{log}");
    assert!(log.contains("reused from an earlier attempt"), "{log}");
    let again = c.server.bytes_sent_for(PATH) - before;
    assert!(
        again < len * 3 / 4,
        "the rerun sent {again} of {len} bytes (the first run {before})"
    );
    assert!(
        before + again < len * 13 / 10,
        "{} bytes in all for {len}",
        before + again
    );
    c.art
        .assert_content(&c.depot.join("artifacts").join(c.art.tree_hash.to_hex()));
    assert_clean(&c.depot);
}

#[test]
fn a_corrupted_kept_prefix_is_detected_deleted_and_refetched() {
    let Some(c) = case(2610) else { return };
    let config = config(&c, 4);
    let len = c.art.tarball.len() as u64;
    let before = kill_at_half(&c, &config);
    let names = partial_entries(&c.depot);
    assert_eq!(names.len(), 1);
    // A byte of the kept tarball's start flipped (the data follows the header and counters).
    let partial = c.depot.join("artifacts").join(&names[0]);
    let mut bytes = std::fs::read(&partial).unwrap();
    let data_at = bytes.len() - len as usize;
    bytes[data_at + 100] ^= 0xff;
    std::fs::write(&partial, &bytes).unwrap();
    let out = install_process(&c, &config).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("failed verification"), "{stderr}");
    assert!(stderr.contains("starts over"), "{stderr}");
    let again = c.server.bytes_sent_for(PATH) - before;
    assert!(again >= len, "refetched whole: {again} of {len}");
    assert_clean(&c.depot);
}

#[test]
fn partial_downloads_nobody_continued_for_a_week_are_reclaimed() {
    let Some(c) = case(2611) else { return };
    let config = config(&c, 4);
    kill_at_half(&c, &config);
    let names = partial_entries(&c.depot);
    assert_eq!(names.len(), 1);
    let path = c.depot.join("artifacts").join(&names[0]);
    // Young: kept for the next attempt.
    clima_artifact_runtime::depot::Depot::new(&c.depot)
        .reclaim_stale_temp_dirs(&clima_artifact_runtime::progress::Reporting::default());
    assert!(path.exists());
    // Eight days without a byte: reclaimed.
    let old = std::time::SystemTime::now() - Duration::from_secs(8 * 24 * 3600);
    let f = std::fs::File::options().write(true).open(&path).unwrap();
    f.set_modified(old).unwrap();
    drop(f);
    // Nobody holds the artifact's lock now; but a child that another test of this process
    // forked while the reclaim above held the lock shares it until that child execs, which a
    // loaded machine can delay: wait for that, as a later `gc` would simply find it free.
    let depot = clima_artifact_runtime::depot::Depot::new(&c.depot);
    let lock = std::fs::File::open(depot.lock_path(&c.art.tree_hash)).unwrap();
    let started = Instant::now();
    while let Err(std::fs::TryLockError::WouldBlock) = lock.try_lock() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the lock stays held"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(lock);
    // What `gc` runs (the next install in the depot runs the same check).
    assert_eq!(
        depot.reclaim_stale_partials(&clima_artifact_runtime::progress::Reporting::default()),
        1
    );
    assert!(!path.exists(), "{} is still there", path.display());
}

#[test]
fn a_symlink_planted_at_the_partial_name_is_never_written_through() {
    let Some(c) = case(2612) else { return };
    let config = config(&c, 4);
    let victim = c.dir.path().join("victim.txt");
    std::fs::write(&victim, b"precious").unwrap();
    let name = clima_artifact_runtime::depot::partial_name(&c.art.tree_hash, &c.server.url(PATH));
    let artifacts = c.depot.join("artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    std::os::unix::fs::symlink(&victim, artifacts.join(&name)).unwrap();
    install(&c, &config).unwrap();
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    assert!(
        std::fs::symlink_metadata(artifacts.join(&name))
            .unwrap()
            .file_type()
            .is_symlink(),
        "the planted link is left alone, not removed"
    );
}

#[test]
fn never_more_requests_in_flight_than_connections_allow() {
    for (seed, connections) in [(2613, 8), (2614, 2)] {
        let Some(c) = case(seed) else { return };
        // Capped streams, so that every connection overlaps the others; a chunk cut short and
        // one that fails are asked again.
        c.server.cap_rate(1_000_000);
        let third = c.art.tarball.len() / 3;
        c.server.fail_next(
            PATH,
            [
                Fault::Pass,
                Fault::Short { after: third },
                Fault::Status(500),
            ],
        );
        install(&c, &config(&c, connections)).unwrap();
        let at_server = c.server.most_connections(PATH);
        assert!(
            at_server <= connections,
            "{at_server} requests at once at the server, {connections} allowed"
        );
        assert!(at_server >= 2, "{at_server} requests at once");
        assert!(c.server.gets(PATH) > 3, "{} requests", c.server.gets(PATH));
        assert_clean(&c.depot);
    }
}

#[test]
fn a_server_that_notices_closes_late_never_counts_more_requests_than_allowed() {
    let Some(c) = case(2621) else { return };
    // Slow streams, so that every connection is busy when the stalled chunk is given up and
    // asked again; the server counts a request whose client closed its connection for 300 ms
    // after it noticed the close.
    c.server.cap_rate(100_000);
    c.server.notice_closes_late(Duration::from_millis(300));
    c.server
        .fail_next(PATH, [Fault::Pass, Fault::Stall { after: 0 }]);
    let mut config = config(&c, 8);
    config.net.stall_timeout = Duration::from_secs(1);
    install(&c, &config).unwrap();
    let at_server = c.server.most_connections(PATH);
    assert!(
        at_server <= 8,
        "{at_server} requests at once at the server, 8 allowed"
    );
    assert!(at_server >= 4, "{at_server} requests at once");
    assert!(c.server.gets(PATH) > 9, "{} requests", c.server.gets(PATH));
    assert_clean(&c.depot);
}

/// A client that closes the connection mid-body (a ranged connection done with its part)
/// finds the bytes it was sent counted by the test server, not none of them: the counts that
/// other tests bound (bytes sent for a download that stopped early) hold what really left.
#[test]
fn the_test_server_counts_the_bytes_of_a_response_cut_short() {
    use std::io::{Read, Write};
    let server = clima_artifact_tests::TestServer::start();
    let body = vec![7u8; 16 << 20];
    server.serve("cut.bin", body);
    let addr = server.base().trim_start_matches("http://").to_owned();
    let mut conn = std::net::TcpStream::connect(&addr).expect("connect");
    write!(
        conn,
        "GET /cut.bin HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .expect("request");
    // The head, then 4 MiB of the body.
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        conn.read_exact(&mut byte).expect("head");
        head.push(byte[0]);
    }
    let mut got = vec![0u8; 4 << 20];
    conn.read_exact(&mut got).expect("4 MiB of the body");
    drop(conn);
    // The server learns of the close when a write fails; its count is final once the request
    // is no longer in flight, which a fresh request after it cannot tell: wait for the count.
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.bytes_sent_for("cut.bin") < 4 << 20 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let sent = server.bytes_sent_for("cut.bin");
    assert!(
        sent >= 4 << 20,
        "{sent} bytes counted, 4 MiB read by the client"
    );
    assert!(sent < 16 << 20, "{sent} bytes counted of a body cut short");
}

/// `1.9 MiB` (as the log prints sizes) in bytes.
fn parse_size(text: &str) -> f64 {
    let (n, unit) = text.split_once(' ').unwrap_or((text, "B"));
    let scale = match unit {
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        _ => 1.0,
    };
    n.parse::<f64>()
        .unwrap_or_else(|_| panic!("a size: {text}"))
        * scale
}

#[test]
fn a_resumed_download_reports_the_bytes_received_and_reused_apart() {
    let Some(c) = case(2615) else { return };
    let config = config(&c, 4);
    let len = c.art.tarball.len() as u64;
    kill_at_half(&c, &config);
    assert_eq!(partial_entries(&c.depot).len(), 1);
    // The rerun installs through a manifest (as a model does) and writes its report.
    let manifest = write_manifest(
        &c.dir.path().join("model"),
        &[ManifestEntry {
            name: "large",
            hash: c.art.tree_hash,
            downloads: vec![(c.server.url(PATH), c.art.sha256)],
            extra: vec![],
        }],
    );
    let report = c.dir.path().join("report");
    let out = Command::new(env!("CARGO_BIN_EXE_install_one"))
        .arg("manifest")
        .arg(&manifest)
        .arg("large")
        .envs(config_env(&config))
        .env("CLIMA_ARTIFACTS_PROGRESS", "1")
        .env("INSTALL_ONE_REPORT", &report)
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");

    let json = std::fs::read_to_string(report.join("provenance.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    let origin = &json["artifacts"][0]["origin"];
    assert_eq!(origin["kind"], "downloaded", "{origin}");
    let n = |k: &str| {
        origin[k]
            .as_u64()
            .unwrap_or_else(|| panic!("{k} in {origin}"))
    };
    assert_eq!(n("bytes"), len, "{origin}");
    assert!(n("reused_bytes") > 0, "{origin}");
    assert!(n("received_bytes") < len, "{origin}");
    assert_eq!(n("received_bytes") + n("reused_bytes"), len, "{origin}");
    let md = std::fs::read_to_string(report.join("provenance.md")).unwrap();
    assert!(
        md.contains("reused from an earlier partial download"),
        "{md}"
    );

    // The end line: `downloaded `large`: 3.8 MiB in 0.9 s: 1.9 MiB received (...), 1.9 MiB
    // reused from an earlier attempt`.
    let end = log
        .lines()
        .find(|l| l.contains("downloaded `large`"))
        .unwrap_or_else(|| panic!("no end line in {log}"));
    let after = |word: &str| {
        let at = end
            .find(word)
            .unwrap_or_else(|| panic!("no `{word}` in {end}"));
        let before: Vec<&str> = end[..at].split_whitespace().rev().take(2).collect();
        parse_size(&format!("{} {}", before[1], before[0]))
    };
    let (received, reused) = (
        after(" received ("),
        after(" reused from an earlier attempt"),
    );
    assert!(reused > 0.0, "{end}");
    // Each printed to a tenth of its unit.
    let off = (received + reused - len as f64).abs();
    assert!(
        off <= 0.1 * 1024.0 * 1024.0,
        "{end}: {received} + {reused} for {len}"
    );
    assert_clean(&c.depot);
}

#[test]
fn a_server_ignoring_if_range_never_gets_another_files_bytes_spliced_in() {
    // The other version's range comes as a `206` under its own ETag: every 206's validator
    // is checked.
    let Some(stderr) = install_past_a_replaced_file(2616, Fault::ReplaceIgnoringIfRange) else {
        return;
    };
    assert!(stderr.contains("another ETag or Last-Modified"), "{stderr}");
    assert!(!stderr.contains("sha256"), "{stderr}");

    // A kept partial file whose continuation comes from the other version: dropped, not
    // continued (and found out only by the sha256).
    let Some(d) = case(2617) else { return };
    let config = config(&d, 4);
    kill_at_half(&d, &config);
    assert_eq!(partial_entries(&d.depot).len(), 1);
    d.server.fail_next(
        PATH,
        [
            Fault::ReplaceIgnoringIfRange(other_version(&d.art.tarball)),
            Fault::Replace(d.art.tarball.clone()),
        ],
    );
    let out = install_process(&d, &config).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("cannot be continued"), "{stderr}");
    assert!(!stderr.contains("failed verification"), "{stderr}");
    assert_clean(&d.depot);
}

#[test]
fn the_low_speed_rule_counts_the_bytes_of_every_connection() {
    let Some(c) = case(2618) else { return };
    // Eight streams capped at 160 kB/s each: 1.28 MB/s in all, each one below the rule's
    // 512 KiB/s, and the bytes in order (one stream's) too.
    c.server.cap_rate(160_000);
    let mut config = config(&c, 8);
    config.net.low_speed_limit = 512 << 10;
    config.net.low_speed_time = Duration::from_secs(1);
    config.net.retry.attempts = 1;
    install(&c, &config).unwrap();
    let at_server = c.server.most_connections(PATH);
    assert!(at_server >= 4, "{at_server} connections at once");
    assert_clean(&c.depot);
}

#[test]
fn a_kept_partial_file_whose_header_claims_terabytes_is_a_warning_and_a_fresh_start() {
    use sha2::Digest;
    let Some(c) = case(2619) else { return };
    let config = config(&c, 4);
    let url = c.server.url(PATH);
    // A partial file of this user's whose header claims 8 TiB in 256 KiB chunks (32 Mi
    // counters, 256 MiB of them) and that has exactly the size that header implies, sparse
    // (1 PiB, 32 GiB of counters, is past what ext4 takes). Believed, it asks for 8 TiB of
    // free space on every install.
    let length: u64 = 8 << 40;
    let chunk: u64 = 256 << 10;
    let key: String = sha2::Sha256::digest(url.as_bytes())[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let mut header = format!(
        "clima-artifacts partial download 1\nlength {length}\nchunk {chunk}\nvalidator \"x\"\nurl-sha256 {key}\n"
    )
    .into_bytes();
    header.resize(4096, 0);
    let data_at = 4096 + (8 * length.div_ceil(chunk)).next_multiple_of(4096);
    let artifacts = c.depot.join("artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let name = clima_artifact_runtime::depot::partial_name(&c.art.tree_hash, &url);
    let path = artifacts.join(&name);
    std::fs::write(&path, &header).unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    if let Err(e) = f.set_len(data_at + length) {
        clima_artifact_tests::skip(&format!("no sparse file of 8 TiB here: {e}"));
        return;
    }
    drop(f);
    let out = install_process(&c, &config).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("warning"), "{stderr}");
    assert!(stderr.contains(&name), "{stderr}");
    assert!(stderr.contains("starting over"), "{stderr}");
    assert_installed_and_clean(&c);
}

#[test]
fn no_room_for_a_large_download_names_the_servers_content_length() {
    let Some(c) = case(2620) else { return };
    // No `size` in the manifest: the room needed is known from the server's Content-Length.
    let config = Config {
        min_free_space: Some(1 << 60),
        ..config(&c, 4)
    };
    let e = install(&c, &config).unwrap_err();
    assert!(e.contains("free above the reserve"), "{e}");
    assert!(e.contains("the server's Content-Length of"), "{e}");
    assert!(!e.contains("declared size"), "{e}");
    assert_clean(&c.depot);
}
