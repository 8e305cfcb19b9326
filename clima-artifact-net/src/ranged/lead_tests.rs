//! [`Large::lead`](super::Large::lead): the connections never fetch more than the lead past
//! the reader, and a reader that moves on wakes the connections waiting for it by its notify,
//! never by their wait's timeout (a lost wake-up stalled node-local downloads for a second).
//! No timing is asserted: only what the partial file received, and how each wait ended.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use clima_artifact_fs::Dir;

use super::workers::{Next, READER_WAIT};
use super::{
    AtomicBool, AtomicU64, BUF, Large, MIN_CHUNK, NetConfig, Record, Shared, State, open_large,
};

/// What a test observes and steers of the waits for the reader.
pub(super) struct Hooks {
    /// Called by a connection about to wait for the reader, under the state's lock.
    before: Mutex<Option<Box<dyn FnMut() + Send>>>,
    /// Waits for the reader that ended by their timeout, not a notify.
    timeouts: AtomicUsize,
    /// The waits' timeout.
    wait: Duration,
}

impl Default for Hooks {
    fn default() -> Hooks {
        Hooks {
            before: Mutex::new(None),
            timeouts: AtomicUsize::new(0),
            wait: READER_WAIT,
        }
    }
}

impl Hooks {
    pub(super) fn before_wait(&self) {
        if let Some(f) = self.before.lock().unwrap().as_mut() {
            f();
        }
    }
    pub(super) fn wait(&self) -> Duration {
        self.wait
    }
    pub(super) fn waited(&self, timed_out: bool) {
        if timed_out {
            self.timeouts.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// A fresh folder under the system's temporary folder.
fn temp_dir(tag: &str) -> std::path::PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let path = std::env::temp_dir().join(format!(
        "clima-net-lead-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    std::fs::create_dir_all(&path).unwrap();
    path
}

/// A download of `chunks` chunks of [`MIN_CHUNK`] bytes with `lead`, made by hand: chunk 0
/// received, chunk 1 taken by another connection, the reader at byte 0.
fn shared(chunks: usize, lead: u64, hooks: Hooks) -> Arc<Shared> {
    let path = temp_dir("shared");
    let dir = Dir::open(&path).unwrap();
    let file = dir.create_new_rw("partial", 0o600).unwrap();
    let record = Record {
        length: chunks as u64 * MIN_CHUNK,
        chunk: MIN_CHUNK,
        validator: "\"v1\"".into(),
        url: "key".into(),
    };
    let mut done = vec![0; chunks];
    done[0] = MIN_CHUNK;
    let mut taken = vec![false; chunks];
    taken[1] = true;
    let mut state = State {
        done,
        taken,
        failures: vec![0; chunks],
        first: 0,
        single: false,
        filler: None,
        leading: false,
        fatal: None,
        workers: 2,
    };
    super::advance(&record, &mut state);
    let config = NetConfig::default();
    Arc::new(Shared {
        file,
        dir,
        name: "partial".into(),
        record,
        url: "http://127.0.0.1:9/a.tar.gz".into(),
        answered: "http://127.0.0.1:9/a.tar.gz".into(),
        agent: crate::source::agent(&config).unwrap(),
        config,
        state: Mutex::new(state),
        cond: Condvar::new(),
        received: AtomicU64::new(MIN_CHUNK),
        open: Default::default(),
        cancel: AtomicBool::new(false),
        resumed_at: 0,
        read: AtomicU64::new(0),
        lead: Some(lead),
        hooks,
    })
}

/// The reader moves on at the worst moment: after a connection found nothing within the lead
/// and before it waits (its lock held). Its notify must still reach the connection, which
/// then takes the chunk now within the lead; before the reader's position was stored under
/// the lock, that notify was lost and the connection slept until its wait's timeout.
#[test]
fn a_reader_that_moves_on_wakes_the_connection_about_to_wait() {
    let (at_wait, at_wait_rx) = mpsc::channel::<()>();
    let (moved, moved_rx) = mpsc::channel::<()>();
    let mut first = true;
    let hooks = Hooks {
        before: Mutex::new(Some(Box::new(move || {
            if std::mem::take(&mut first) {
                at_wait.send(()).unwrap();
                // The reader cannot move on while this lock is held, once it takes the
                // lock to store its position: do not wait for it forever.
                let _ = moved_rx.recv_timeout(Duration::from_millis(300));
            }
        }))),
        // Long enough that a wait ending by its timeout is a lost notify, never a slow reader.
        wait: Duration::from_secs(30),
        ..Hooks::default()
    };
    let s = shared(8, MIN_CHUNK, hooks);
    // The reader at 0 with a lead of one chunk: chunk 1 (taken) is the only one within.
    assert_eq!(s.horizon(), Some(MIN_CHUNK));
    let worker = {
        let s = s.clone();
        std::thread::spawn(move || s.next_for(0))
    };
    at_wait_rx.recv().unwrap();
    // One byte past chunk 1's start: chunk 2 now starts within the lead.
    s.reader_at(MIN_CHUNK + 1);
    let _ = moved.send(());
    let next = worker.join().unwrap();
    assert!(
        matches!(next, Next::Chunk(2)),
        "the chunk now within the lead"
    );
    assert_eq!(
        s.hooks.timeouts.load(Ordering::SeqCst),
        0,
        "the connection was woken by the reader's notify, not by its wait's timeout"
    );
    let _ = std::fs::remove_dir_all(s.dir.path());
}

/// The reader goes away at the same worst moment: the connection about to wait for it must
/// hear of it at once (it stops), not after its wait's timeout.
#[test]
fn a_reader_that_goes_away_stops_the_connection_about_to_wait() {
    let (at_wait, at_wait_rx) = mpsc::channel::<()>();
    let (gone, gone_rx) = mpsc::channel::<()>();
    let mut first = true;
    let hooks = Hooks {
        before: Mutex::new(Some(Box::new(move || {
            if std::mem::take(&mut first) {
                at_wait.send(()).unwrap();
                let _ = gone_rx.recv_timeout(Duration::from_millis(300));
            }
        }))),
        wait: Duration::from_secs(30),
        ..Hooks::default()
    };
    let s = shared(8, MIN_CHUNK, hooks);
    let worker = {
        let s = s.clone();
        std::thread::spawn(move || s.next_for(0))
    };
    at_wait_rx.recv().unwrap();
    s.stop_connections();
    let _ = gone.send(());
    assert!(matches!(worker.join().unwrap(), Next::Stop));
    assert_eq!(
        s.hooks.timeouts.load(Ordering::SeqCst),
        0,
        "the connection was stopped by the notify, not by its wait's timeout"
    );
    let _ = std::fs::remove_dir_all(s.dir.path());
}

/// A loopback server of `data` that serves byte ranges (ETag, `If-Range`), one request per
/// connection. Returns its URL and the count of range requests.
fn serve(data: Arc<Vec<u8>>) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/big.tar.gz", listener.local_addr().unwrap());
    let ranges = Arc::new(AtomicUsize::new(0));
    let counted = ranges.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let (data, counted) = (data.clone(), counted.clone());
            std::thread::spawn(move || answer(stream, &data, &counted));
        }
    });
    (url, ranges)
}

fn answer(stream: TcpStream, data: &[u8], ranges: &AtomicUsize) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut range = None;
    let mut line = String::new();
    while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
        if line == "\r\n" {
            break;
        }
        let lower = line.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("range: bytes=") {
            let (a, b) = v.trim().split_once('-').unwrap();
            range = Some((a.parse::<usize>().unwrap(), b.parse::<usize>().unwrap()));
        }
        line.clear();
    }
    let mut out = stream;
    let common = "ETag: \"v1\"\r\nAccept-Ranges: bytes\r\nConnection: close\r\n";
    let (head, body) = match range {
        Some((a, b)) => {
            ranges.fetch_add(1, Ordering::SeqCst);
            let head = format!(
                "HTTP/1.1 206 Partial Content\r\n{common}Content-Range: bytes {a}-{b}/{}\r\nContent-Length: {}\r\n\r\n",
                data.len(),
                b + 1 - a
            );
            (head, &data[a..=b])
        }
        None => (
            format!(
                "HTTP/1.1 200 OK\r\n{common}Content-Length: {}\r\n\r\n",
                data.len()
            ),
            data,
        ),
    };
    let _ = out.write_all(head.as_bytes());
    let _ = out.write_all(body);
}

/// Waits until `f` holds (a minute at most: a download that never gets there fails).
fn until(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !f() {
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A download over four connections with a lead of a megabyte: while the reader stands at a
/// byte, the connections fetch what is within the lead and nothing more than a chunk past
/// it; each time the reader moves on, they go on; the reader gets the file's bytes.
#[test]
fn connections_fetch_at_most_the_lead_past_the_reader() {
    let length = 16 * MIN_CHUNK;
    let data: Arc<Vec<u8>> = Arc::new((0..length).map(|i| (i % 251) as u8).collect());
    let (url, ranges) = serve(data.clone());
    let path = temp_dir("http");
    let dir = Dir::open(&path).unwrap();
    let config = NetConfig {
        connections: 4,
        parallel_min_size: 1,
        ..NetConfig::default()
    };
    let room = |_: u64, _: u64| Ok(());
    let lead = 4 * MIN_CHUNK;
    let large = Large {
        dir: &dir,
        name: "big.partial",
        key: "key",
        artifact: "big",
        max_bytes: None,
        room: &room,
        tell: false,
        lead: Some(lead),
    };
    let agent = crate::source::agent(&config).unwrap();
    let source = open_large(&agent, &url, &path, &config, &large).unwrap();
    let kept = source.partial.clone().expect("a large download");
    let mut reader = source.reader;
    let mut got = Vec::new();
    let mut buf = vec![0; 64 * 1024];
    // Where the reader stands still until the connections filled the lead.
    let stops = [
        0,
        MIN_CHUNK + 7,
        6 * MIN_CHUNK,
        9 * MIN_CHUNK + BUF as u64,
        length,
    ];
    for stop in stops {
        while (got.len() as u64) < stop {
            let want = ((stop - got.len() as u64) as usize).min(buf.len());
            let n = reader.read(&mut buf[..want]).unwrap();
            assert!(n > 0, "the download ended at {} of {length}", got.len());
            got.extend_from_slice(&buf[..n]);
        }
        let at = got.len() as u64;
        let within = (at + lead).min(length);
        until(
            &format!("the connections fetch up to byte {within}"),
            || kept.0.received() >= within,
        );
        let received = kept.0.received();
        assert!(
            received <= at + lead + MIN_CHUNK,
            "{received} bytes received with the reader at {at}: more than the lead ({lead}) \
             and a chunk past it"
        );
    }
    let mut rest = Vec::new();
    reader.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());
    assert!(got == *data, "the reader gets the file's bytes, in order");
    assert!(
        ranges.load(Ordering::SeqCst) >= 1,
        "other connections fetched ranges"
    );
    drop(reader);
    kept.remove();
    let _ = std::fs::remove_dir_all(&path);
}
