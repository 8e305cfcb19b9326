//! A broadcast stream: the root of a context sends the bytes of one or more attempts (a
//! download that may be retried) to every other rank, which reads each attempt as an
//! [`std::io::Read`], with checkpoints at which any receiver can stop the stream for everyone.
//! Node-local mode sends an artifact from one node leader to the others this way.
//!
//! ```text
//!  root: producer thread  --BroadcastWriter (Write)-->  bounded channel  --> broadcast_stream
//!        (on the context's thread) broadcasts frames of at most `frame` bytes:
//!          S attempt starts (a header) | D bytes | Z end | A attempt broke
//!          C checkpoint every `check_bytes`: reduce, the first who failed -> K go on | X stop, error
//!          O the producer's outcome
//!  others: receive_stream (on the context's thread) --> bounded channel --> BroadcastReader
//!          (Read), one per attempt, read by the receiver's own thread
//! ```
//!
//! Memory stays bounded: a writer blocks when `in_flight` pieces wait for the broadcast, and a
//! receiver's loop blocks when its reader has that many frames unread, which holds the
//! broadcast of every rank (a slow reader slows the stream, it does not fill memory).

use std::io::{self, Read, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, sync_channel};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::{CollectiveError, Context, WireError, panic_message};

/// The sizes of a stream. Every rank must use the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamLimits {
    /// Largest data frame broadcast at once, in bytes (a larger one does not decode).
    pub frame: usize,
    /// Pieces waiting between a thread and the broadcast, on each side.
    pub in_flight: usize,
    /// Data bytes between two checkpoints.
    pub check_bytes: u64,
}

impl Default for StreamLimits {
    /// Frames of 1 MiB, 16 in flight, a checkpoint every 16 MiB.
    fn default() -> Self {
        StreamLimits {
            frame: 1 << 20,
            in_flight: 16,
            check_bytes: 16 << 20,
        }
    }
}

/// Largest header or error a frame carries, in bytes.
pub const MAX_MESSAGE: usize = 1 << 20;

/// One broadcast of a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// An attempt starts; the JSON of its header.
    Start(Vec<u8>),
    /// Bytes of the current attempt.
    Data(Vec<u8>),
    /// The current attempt's bytes are complete.
    End,
    /// The current attempt broke off (the producer may start another).
    Broke,
    /// A checkpoint: every rank says whether it failed, in a reduce.
    Check,
    /// The checkpoint's verdict: go on.
    GoOn,
    /// The checkpoint's verdict: stop, with the error's wire bytes.
    Stop(Vec<u8>),
    /// The producer's outcome (an error's wire bytes), the last frame.
    Outcome(Result<(), Vec<u8>>),
}

/// What is wrong with bytes that are not a [`Frame`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// No bytes at all.
    #[error("an empty frame")]
    Empty,
    /// A first byte that is no frame's.
    #[error("a frame with the unknown tag {0:#04x}")]
    UnknownTag(u8),
    /// More bytes than a frame of this kind carries.
    #[error("a {kind} frame of {len} bytes, more than the {max} expected")]
    TooLong {
        /// The frame's kind.
        kind: &'static str,
        /// Its bytes after the tag.
        len: usize,
        /// The most it may carry.
        max: usize,
    },
    /// An outcome frame whose status is neither 0 (ok) nor 1 (an error follows).
    #[error("an outcome frame with the status {0:?}")]
    BadOutcome(Option<u8>),
}

const START: u8 = b'S';
const DATA: u8 = b'D';
const END: u8 = b'Z';
const BROKE: u8 = b'A';
const CHECK: u8 = b'C';
const GO_ON: u8 = b'K';
const STOP: u8 = b'X';
const OUTCOME: u8 = b'O';

impl Frame {
    /// The frame's bytes: its tag, then what it carries.
    pub fn encode(&self) -> Vec<u8> {
        let tagged = |tag: u8, body: &[u8]| {
            let mut out = Vec::with_capacity(body.len() + 1);
            out.push(tag);
            out.extend_from_slice(body);
            out
        };
        match self {
            Frame::Start(header) => tagged(START, header),
            Frame::Data(bytes) => tagged(DATA, bytes),
            Frame::End => vec![END],
            Frame::Broke => vec![BROKE],
            Frame::Check => vec![CHECK],
            Frame::GoOn => vec![GO_ON],
            Frame::Stop(wire) => tagged(STOP, wire),
            Frame::Outcome(Ok(())) => vec![OUTCOME, 0],
            Frame::Outcome(Err(wire)) => [&[OUTCOME, 1][..], wire].concat(),
        }
    }

    /// The frame of `bytes`; a data frame carries at most `max_data` bytes, a header or an
    /// error at most [`MAX_MESSAGE`], the others nothing.
    pub fn decode(mut bytes: Vec<u8>, max_data: usize) -> Result<Frame, FrameError> {
        let (&tag, rest) = bytes.split_first().ok_or(FrameError::Empty)?;
        let (kind, max) = match tag {
            START => ("start", MAX_MESSAGE),
            DATA => ("data", max_data),
            END => ("end", 0),
            BROKE => ("broken attempt", 0),
            CHECK => ("checkpoint", 0),
            GO_ON => ("go-on", 0),
            STOP => ("stop", MAX_MESSAGE),
            OUTCOME => ("outcome", MAX_MESSAGE + 1),
            tag => return Err(FrameError::UnknownTag(tag)),
        };
        if rest.len() > max {
            return Err(FrameError::TooLong {
                kind,
                len: rest.len(),
                max,
            });
        }
        if tag == OUTCOME {
            return match rest.split_first() {
                Some((0, [])) => Ok(Frame::Outcome(Ok(()))),
                Some((1, wire)) => Ok(Frame::Outcome(Err(wire.to_vec()))),
                other => Err(FrameError::BadOutcome(other.map(|(s, _)| *s))),
            };
        }
        bytes.drain(..1);
        Ok(match tag {
            START => Frame::Start(bytes),
            DATA => Frame::Data(bytes),
            END => Frame::End,
            BROKE => Frame::Broke,
            CHECK => Frame::Check,
            GO_ON => Frame::GoOn,
            _ => Frame::Stop(bytes),
        })
    }
}

/// What writers hand the broadcast. Each attempt has a number: a broken attempt's writer may
/// still hand over a last piece, or its end, after the next attempt started, and the
/// broadcast drops what is not the current attempt's.
enum Up {
    Start(u32, Vec<u8>),
    Data(u32, Vec<u8>),
    End(u32),
    Broke(u32),
    Outcome(Result<(), Vec<u8>>),
}

/// The producer's side of [`broadcast_stream`]: starts attempts.
pub struct StreamSender {
    frame: usize,
    tx: SyncSender<Up>,
    stop: Arc<AtomicBool>,
    attempts: AtomicU32,
}

impl StreamSender {
    /// Starts an attempt whose receivers are told `header` first. A header that cannot be
    /// encoded gives a writer whose writes fail (and nothing is broadcast).
    pub fn attempt<H: Serialize>(&self, header: &H) -> BroadcastWriter {
        let id = self.attempts.fetch_add(1, Ordering::Relaxed) + 1;
        let unsendable = match serde_json::to_vec(header) {
            Ok(json) => {
                let _ = self.tx.send(Up::Start(id, json));
                None
            }
            Err(e) => Some(format!("the attempt's header cannot be encoded: {e}")),
        };
        BroadcastWriter {
            id,
            frame: self.frame,
            tx: self.tx.clone(),
            stop: Arc::clone(&self.stop),
            ended: unsendable.is_some(),
            unsendable,
        }
    }

    /// Whether a receiver stopped the stream: writes fail, and no further attempt helps.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Attempts started so far.
    pub fn attempts(&self) -> u32 {
        self.attempts.load(Ordering::Relaxed)
    }
}

/// One attempt's bytes, to the broadcast. Dropped before [`BroadcastWriter::end`], it says
/// the attempt broke. Once the stream stopped, it refuses bytes (so the producer stops).
pub struct BroadcastWriter {
    id: u32,
    frame: usize,
    tx: SyncSender<Up>,
    stop: Arc<AtomicBool>,
    ended: bool,
    unsendable: Option<String>,
}

impl BroadcastWriter {
    /// The attempt's bytes are complete.
    pub fn end(&mut self) {
        if !self.ended {
            self.ended = true;
            let _ = self.tx.send(Up::End(self.id));
        }
    }

    fn send(&self, bytes: &[u8]) -> io::Result<()> {
        if let Some(why) = &self.unsendable {
            return Err(io::Error::other(why.clone()));
        }
        if self.stop.load(Ordering::Relaxed) {
            return Err(io::Error::other(
                "stopped: a node that receives this download over MPI failed",
            ));
        }
        for piece in bytes.chunks(self.frame) {
            self.tx
                .send(Up::Data(self.id, piece.to_vec()))
                .map_err(|_| io::Error::other("the MPI broadcast of this download stopped"))?;
        }
        Ok(())
    }
}

impl Write for BroadcastWriter {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.send(bytes)?;
        Ok(bytes.len())
    }
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.send(bytes)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for BroadcastWriter {
    fn drop(&mut self) {
        if !self.ended {
            let _ = self.tx.send(Up::Broke(self.id));
        }
    }
}

/// **Collective over `ctx`, on its root.** Runs `produce` in a thread of its own, which sends
/// attempts through the [`StreamSender`], and broadcasts them to the other ranks (which call
/// [`receive_stream`]) until `produce` returns; returns its outcome. At each checkpoint the
/// first receiver that failed (its rank in `ctx` and error, as `on_failure` makes it) stops
/// the stream: then `produce`'s writes fail, and every rank returns that error.
///
/// `what` names the producer in the error that replaces its panic; `no_thread` makes the
/// error of a thread that cannot start.
pub fn broadcast_stream<T, E>(
    ctx: &dyn Context,
    limits: StreamLimits,
    what: &str,
    produce: impl FnOnce(&StreamSender) -> Result<T, E> + Send,
    on_failure: &dyn Fn(usize, E) -> E,
    no_thread: impl FnOnce(io::Error) -> E,
) -> Result<T, E>
where
    T: Send,
    E: WireError + From<CollectiveError> + Send,
{
    let (tx, rx) = sync_channel::<Up>(limits.in_flight);
    let stop = Arc::new(AtomicBool::new(false));
    let sender = StreamSender {
        frame: limits.frame.max(1),
        tx: tx.clone(),
        stop: Arc::clone(&stop),
        attempts: AtomicU32::new(0),
    };
    std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new()
            .name("clima-artifacts-sender".into())
            .spawn_scoped(scope, move || {
                let outcome =
                    catch_unwind(AssertUnwindSafe(|| produce(&sender))).unwrap_or_else(|p| {
                        Err(E::from(CollectiveError::RootPanicked {
                            what: what.to_owned(),
                            message: panic_message(&*p),
                        }))
                    });
                let sent = outcome.as_ref().map(|_| ()).map_err(E::to_wire);
                let _ = sender.tx.send(Up::Outcome(sent));
                outcome
            });
        // Without its thread the producer fails, and the stream still ends the same way.
        let worker = spawned.map_err(|e| {
            let e = no_thread(e);
            let _ = tx.send(Up::Outcome(Err(e.to_wire())));
            e
        });
        drop(tx);
        let pumped = Pump {
            ctx,
            rx: &rx,
            limits,
            on_failure,
        }
        .run(what);
        if pumped.is_err() {
            // A stopped stream: the producer's writes now fail; let it end.
            stop.store(true, Ordering::Relaxed);
            while let Ok(up) = rx.recv() {
                if matches!(up, Up::Outcome(_)) {
                    break;
                }
            }
        }
        let outcome = worker.and_then(|w| {
            // `produce`'s panics are caught: this would be the send's own.
            w.join().unwrap_or_else(|p| {
                Err(E::from(CollectiveError::RootPanicked {
                    what: what.to_owned(),
                    message: panic_message(&*p),
                }))
            })
        });
        pumped.and(outcome)
    })
}

/// The root's broadcast loop.
struct Pump<'a, E> {
    ctx: &'a dyn Context,
    rx: &'a Receiver<Up>,
    limits: StreamLimits,
    on_failure: &'a dyn Fn(usize, E) -> E,
}

impl<E: WireError + From<CollectiveError>> Pump<'_, E> {
    /// Frames out of the channel until the producer's outcome, which it broadcasts; `Err`
    /// when a checkpoint stopped the stream.
    fn run(&self, what: &str) -> Result<(), E> {
        let mut since_check = 0u64;
        let mut pending: Option<Up> = None;
        let mut current = 0u32;
        loop {
            let up = pending.take().or_else(|| self.rx.recv().ok());
            let frame = match up {
                None => Frame::Outcome(Err(E::from(CollectiveError::RootPanicked {
                    what: what.to_owned(),
                    message: "the sending thread stopped".into(),
                })
                .to_wire())),
                Some(Up::Start(id, header)) => {
                    current = id;
                    Frame::Start(header)
                }
                // What an earlier attempt's writer handed over late: not part of the stream.
                Some(Up::Data(id, _) | Up::End(id) | Up::Broke(id)) if id != current => continue,
                Some(Up::Data(_, bytes)) => {
                    let bytes = self.coalesce(bytes, current, &mut pending);
                    since_check += bytes.len() as u64;
                    Frame::Data(bytes)
                }
                Some(Up::End(_)) => Frame::End,
                Some(Up::Broke(_)) => Frame::Broke,
                Some(Up::Outcome(outcome)) => Frame::Outcome(outcome),
            };
            let last = matches!(frame, Frame::Outcome(_));
            self.ctx.broadcast_from_root(Some(frame.encode()));
            if last {
                return Ok(());
            }
            if since_check >= self.limits.check_bytes {
                since_check = 0;
                self.checkpoint()?;
            }
        }
    }

    /// `bytes` and what of the current attempt already waits, up to one frame; anything
    /// else that waits is left in `pending`.
    fn coalesce(&self, mut bytes: Vec<u8>, current: u32, pending: &mut Option<Up>) -> Vec<u8> {
        while bytes.len() < self.limits.frame {
            match self.rx.try_recv() {
                Ok(Up::Data(id, more))
                    if id == current && bytes.len() + more.len() <= self.limits.frame =>
                {
                    bytes.extend_from_slice(&more)
                }
                Ok(other) => {
                    *pending = Some(other);
                    break;
                }
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
            }
        }
        bytes
    }

    /// Every receiver says whether it failed for good; the first failure stops the stream on
    /// every rank.
    fn checkpoint(&self) -> Result<(), E> {
        self.ctx.broadcast_from_root(Some(Frame::Check.encode()));
        let first = self
            .ctx
            .reduce_to_root(Vec::new(), &first_failure)
            .unwrap_or_default();
        let failed = first.split_first_chunk::<8>().map(|(r, wire)| {
            let r = usize::try_from(u64::from_le_bytes(*r)).unwrap_or(usize::MAX);
            (self.on_failure)(r, E::from_wire(wire))
        });
        let verdict = match &failed {
            None => Frame::GoOn,
            Some(e) => Frame::Stop(e.to_wire()),
        };
        self.ctx.broadcast_from_root(Some(verdict.encode()));
        failed.map_or(Ok(()), Err)
    }
}

/// The merge of a checkpoint: empty when every receiver of the range is fine, else the lowest
/// failing one's rank (`u64`, little endian) and error.
fn first_failure(lower: Vec<u8>, higher: Vec<u8>) -> Vec<u8> {
    if lower.is_empty() { higher } else { lower }
}

/// What a receiving rank does with the attempts of a stream ([`receive_stream`] calls it on
/// the context's thread; it must not block on its readers).
pub trait StreamReceiver<H> {
    /// The error type of the stream.
    type Error: WireError;
    /// An attempt starts: `header` says what comes, and its bytes come from `reader` (read
    /// them in a thread of your own).
    fn start(&mut self, header: H, reader: BroadcastReader);
    /// A frame that did not decode (so this rank cannot receive the stream); the current
    /// attempt's reader was cut off.
    fn undecodable(&mut self, error: CollectiveError);
    /// At a checkpoint: this rank's failure for good, if any, which stops the stream on
    /// every rank.
    fn failed(&mut self) -> Option<Self::Error>;
}

/// Bytes for a reader, as they arrive.
enum Down {
    Data(Vec<u8>),
    End,
    Broke,
}

/// **Collective over `ctx`, on every rank but the root** (which calls
/// [`broadcast_stream`]): hands each attempt to `receiver` and answers the checkpoints, until
/// the producer's outcome. `Err` is the producer's error or the one that stopped the stream,
/// the same on every rank. A frame that does not decode goes to
/// [`StreamReceiver::undecodable`], and the stream goes on (so no rank is left waiting).
pub fn receive_stream<H, R>(
    ctx: &dyn Context,
    limits: StreamLimits,
    receiver: &mut R,
) -> Result<(), R::Error>
where
    H: DeserializeOwned,
    R: StreamReceiver<H>,
{
    let mut tx: Option<SyncSender<Down>> = None;
    let undecodable = |why: String| CollectiveError::Undecodable { rank: 0, why };
    loop {
        let frame = match Frame::decode(ctx.broadcast_from_root(None), limits.frame) {
            Ok(frame) => frame,
            Err(e) => {
                tx = None;
                receiver.undecodable(undecodable(e.to_string()));
                continue;
            }
        };
        match frame {
            Frame::Start(header) => {
                tx = None;
                match serde_json::from_slice::<H>(&header) {
                    Ok(header) => {
                        let (down, rx) = sync_channel(limits.in_flight);
                        tx = Some(down);
                        receiver.start(header, BroadcastReader::new(rx));
                    }
                    Err(e) => receiver.undecodable(undecodable(e.to_string())),
                }
            }
            Frame::Data(bytes) => forward(&mut tx, Down::Data(bytes)),
            Frame::End => forward(&mut tx, Down::End),
            Frame::Broke => forward(&mut tx, Down::Broke),
            Frame::Check => {
                let status = receiver
                    .failed()
                    .map(|e| [&(ctx.rank() as u64).to_le_bytes()[..], &e.to_wire()].concat())
                    .unwrap_or_default();
                ctx.reduce_to_root(status, &first_failure);
                match Frame::decode(ctx.broadcast_from_root(None), limits.frame) {
                    Ok(Frame::GoOn) => {}
                    Ok(Frame::Stop(wire)) => return Err(R::Error::from_wire(&wire)),
                    Ok(other) => receiver.undecodable(undecodable(format!(
                        "a checkpoint's verdict that is a {other:?} frame"
                    ))),
                    Err(e) => receiver.undecodable(undecodable(e.to_string())),
                }
            }
            Frame::GoOn | Frame::Stop(_) => receiver.undecodable(undecodable(
                "a checkpoint's verdict without a checkpoint".to_owned(),
            )),
            Frame::Outcome(Ok(())) => return Ok(()),
            Frame::Outcome(Err(wire)) => return Err(R::Error::from_wire(&wire)),
        }
    }
}

/// Hands `down` to the current reader; one that stopped reading has its outcome waiting:
/// nothing to do.
fn forward(tx: &mut Option<SyncSender<Down>>, down: Down) {
    if tx.as_ref().is_some_and(|t| t.send(down).is_err()) {
        *tx = None;
    }
}

/// One attempt's bytes on a receiving rank ([`StreamReceiver::start`]): they end where the
/// attempt ended, and reading fails where it broke off.
pub struct BroadcastReader {
    rx: Receiver<Down>,
    current: Vec<u8>,
    pos: usize,
    ended: bool,
}

impl BroadcastReader {
    fn new(rx: Receiver<Down>) -> BroadcastReader {
        BroadcastReader {
            rx,
            current: Vec::new(),
            pos: 0,
            ended: false,
        }
    }
}

impl Read for BroadcastReader {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.pos >= self.current.len() {
            if self.ended {
                return Ok(0);
            }
            match self.rx.recv() {
                Ok(Down::Data(bytes)) => {
                    self.current = bytes;
                    self.pos = 0;
                }
                Ok(Down::End) => self.ended = true,
                Ok(Down::Broke) | Err(_) => {
                    return Err(io::Error::other(
                        "the sending node's attempt broke off (it tries again, or says why it \
                         failed)",
                    ));
                }
            }
        }
        let n = out.len().min(self.current.len() - self.pos);
        out[..n].copy_from_slice(&self.current[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::on_thread_ranks;
    use crate::test_error::TestError;
    use std::thread::JoinHandle;

    #[test]
    fn frames_round_trip() {
        for frame in [
            Frame::Start(br#"{"url":"x"}"#.to_vec()),
            Frame::Data(vec![7; 100]),
            Frame::Data(Vec::new()),
            Frame::End,
            Frame::Broke,
            Frame::Check,
            Frame::GoOn,
            Frame::Stop(b"why".to_vec()),
            Frame::Outcome(Ok(())),
            Frame::Outcome(Err(b"failed".to_vec())),
        ] {
            assert_eq!(Frame::decode(frame.encode(), 100), Ok(frame));
        }
    }

    #[test]
    fn bad_frames_are_errors_that_say_what_is_wrong() {
        let too_long = |kind, len, max| Err(FrameError::TooLong { kind, len, max });
        let cases: Vec<(Vec<u8>, Result<Frame, FrameError>)> = vec![
            (vec![], Err(FrameError::Empty)),
            (b"Q".to_vec(), Err(FrameError::UnknownTag(b'Q'))),
            (
                [&[DATA][..], &[0; 101]].concat(),
                too_long("data", 101, 100),
            ),
            (b"Zx".to_vec(), too_long("end", 1, 0)),
            (b"Cxy".to_vec(), too_long("checkpoint", 2, 0)),
            (
                [&[START][..], &vec![b' '; MAX_MESSAGE + 1]].concat(),
                too_long("start", MAX_MESSAGE + 1, MAX_MESSAGE),
            ),
            // Truncated outcomes, and one with bytes after its "ok".
            (vec![OUTCOME], Err(FrameError::BadOutcome(None))),
            (vec![OUTCOME, 2], Err(FrameError::BadOutcome(Some(2)))),
            (vec![OUTCOME, 0, 0], Err(FrameError::BadOutcome(Some(0)))),
        ];
        for (bytes, expected) in cases {
            assert_eq!(Frame::decode(bytes, 100), expected);
        }
        let e = Frame::decode([&[DATA][..], &[0; 11]].concat(), 10).unwrap_err();
        assert_eq!(
            e.to_string(),
            "a data frame of 11 bytes, more than the 10 expected"
        );
    }

    /// A receiver that reads each attempt in a thread, and fails for good from the start when
    /// `fails` is set.
    struct Collect {
        attempts: Vec<(String, JoinHandle<io::Result<Vec<u8>>>)>,
        fails: Option<TestError>,
        undecodable: Vec<CollectiveError>,
        checks: usize,
    }

    impl StreamReceiver<String> for Collect {
        type Error = TestError;
        fn start(&mut self, header: String, mut reader: BroadcastReader) {
            let read = std::thread::spawn(move || {
                let mut all = Vec::new();
                reader.read_to_end(&mut all).map(|_| all)
            });
            self.attempts.push((header, read));
        }
        fn undecodable(&mut self, error: CollectiveError) {
            self.undecodable.push(error);
        }
        fn failed(&mut self) -> Option<TestError> {
            self.checks += 1;
            self.fails.clone()
        }
    }

    fn receiver(fails: Option<TestError>) -> Collect {
        Collect {
            attempts: Vec::new(),
            fails,
            undecodable: Vec::new(),
            checks: 0,
        }
    }

    const SMALL: StreamLimits = StreamLimits {
        frame: 1000,
        in_flight: 2,
        check_bytes: 5000,
    };

    fn named(rank: usize, e: TestError) -> TestError {
        TestError::Own(format!("on rank {rank}: {e}"))
    }

    #[test]
    fn every_rank_reads_each_attempt_with_checkpoints_between() {
        let content: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
        let out = on_thread_ranks(4, |ctx| {
            if ctx.rank() == 0 {
                let sent = broadcast_stream(
                    ctx,
                    SMALL,
                    "sending",
                    |tx| {
                        let mut first = tx.attempt(&"one");
                        first.write_all(&content[..3000])?;
                        drop(first); // broke off
                        let mut second = tx.attempt(&"two");
                        // Pieces smaller and larger than a frame.
                        for piece in content.chunks(2500).flat_map(|c| c.chunks(777)) {
                            second.write_all(piece)?;
                        }
                        second.write_all(&[])?;
                        second.end();
                        Ok(tx.attempts())
                    },
                    &named,
                    |e| TestError::Own(e.to_string()),
                );
                return (Vec::new(), sent.map_err(|e| e.to_string()), 0);
            }
            let mut r = receiver(None);
            let outcome = receive_stream(ctx, SMALL, &mut r);
            assert!(r.undecodable.is_empty());
            let got = r
                .attempts
                .into_iter()
                .map(|(h, t)| (h, t.join().unwrap().map_err(|e| e.to_string())))
                .collect::<Vec<_>>();
            (
                got,
                outcome.map(|()| 0).map_err(|e| e.to_string()),
                r.checks,
            )
        });
        assert_eq!(out[0].1, Ok(2));
        for (got, outcome, checks) in &out[1..] {
            assert_eq!(outcome, &Ok(0));
            assert_eq!(got.len(), 2);
            assert_eq!(got[0].0, "one");
            let broke = got[0].1.as_ref().unwrap_err();
            assert!(broke.contains("attempt broke off"), "{broke}");
            assert_eq!(got[1], ("two".to_owned(), Ok(content.clone())));
            // 23,000 bytes in frames of at most 1,000 (a larger one would not have decoded): a
            // checkpoint after each 5,000 or a little more.
            assert!((3..=4).contains(checks), "{checks} checkpoints");
        }
    }

    #[test]
    fn a_receiver_that_fails_stops_the_stream_on_every_rank() {
        let out = on_thread_ranks(4, |ctx| {
            if ctx.rank() == 0 {
                let sent = broadcast_stream(
                    ctx,
                    SMALL,
                    "sending",
                    |tx| {
                        let mut w = tx.attempt(&"only");
                        loop {
                            if let Err(e) = w.write_all(&[1; 400]) {
                                assert!(tx.stopped());
                                return Err(TestError::Own(e.to_string()));
                            }
                        }
                    },
                    &named,
                    |e| TestError::Own(e.to_string()),
                );
                return sent;
            }
            let fails = (ctx.rank() >= 2).then(|| TestError::Own(format!("disk {}", ctx.rank())));
            let mut r = receiver(fails);
            let outcome = receive_stream(ctx, SMALL, &mut r);
            for (_, t) in r.attempts {
                assert!(t.join().unwrap().is_err(), "cut off");
            }
            outcome
        });
        for o in out {
            assert_eq!(o, Err(TestError::Own("on rank 2: Own(\"disk 2\")".into())));
        }
    }

    #[test]
    fn a_frame_that_does_not_decode_is_reported_and_the_stream_goes_on() {
        let out = on_thread_ranks(3, |ctx| {
            if ctx.rank() == 0 {
                for bytes in [b"Q".to_vec(), b"S{not json".to_vec(), vec![GO_ON]] {
                    ctx.broadcast_from_root(Some(bytes));
                }
                ctx.broadcast_from_root(Some(Frame::Outcome(Ok(())).encode()));
                return Ok(Vec::new());
            }
            let mut r = receiver(None);
            receive_stream::<String, _>(ctx, SMALL, &mut r).map(|()| r.undecodable)
        });
        for bad in &out[1..] {
            let bad = bad.as_ref().unwrap();
            assert_eq!(bad.len(), 3, "{bad:?}");
            assert!(
                bad[0].to_string().contains("unknown tag 0x51"),
                "{}",
                bad[0]
            );
        }
    }
}
