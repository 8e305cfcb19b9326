//! Node-local mode: one download per job, copied over MPI into every node's depot.
//!
//! ```text
//!  every rank    node split (by CLIMA_ARTIFACTS_NODE_ID, else by machine: the distinct node
//!                names merged in a tree), leaders' split
//!  node ranks    wait in a broadcast of their node (no file operations)
//!  leaders  1.   create the node depot, look for the artifact (overrides, node depot, shared
//!                depots) --reduce--> leader 0 (the first failure, the first node that has it,
//!                the first that needs it, the ranges of those that need it): a plan,
//!                broadcast to every leader:
//!                  a node failed -> that error everywhere; every node has it -> done;
//!                  else a source (the first node that has it installed, else the first
//!                  node that needs it)
//!  source   2.   downloads (ensure_variant: retries, several connections, resume) with a tap
//!                on the verified byte stream, or sends a tar of its installed copy
//!           -->  broadcast in frames of at most FRAME bytes to the nodes that need it:
//!                S attempt starts (URL, SHA-256, length) | D bytes | Z end | A attempt broke
//!                C checkpoint every CHECK_BYTES: reduce, the first who failed -> K go on | X stop, error
//!                O the source's outcome
//!  receivers     a bounded channel -> Body (SHA-256) -> extraction -> tree hash -> rename into
//!                the node depot, while the next frames arrive
//!  leaders  3.   all_succeed: every node's outcome; a failure names its node
//!  node ranks    get their leader's path, or the same error
//! ```
//!
//! The source's partial download (a large download's `.partial-*` file) is kept in the first
//! writable shared depot, not in its node depot, which the end of a job may wipe: a killed job's
//! next run continues it. Without a shared depot that can keep it, the log says so.
//!
//! Memory stays bounded: the source's tap blocks when FRAMES_IN_FLIGHT frames wait for the
//! broadcast, and a receiver's broadcast loop blocks when its install has that many frames
//! unread, which holds the broadcast of every node (a slow disk slows the stream, it does not
//! fill memory).

use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, sync_channel};
use std::thread::JoinHandle;

use clima_artifact_manifest::{ArtifactVariant, Download};
use clima_artifact_net::Tap;
use clima_artifact_net::trust::redact_url;
use clima_comms::{CollectiveError, Context, all_succeed, root_decides};

use crate::install::{self, Incoming, Taps};
use crate::installed::{Installed, Origin};
use crate::{Config, Error, depot};

/// Largest frame broadcast at once.
const FRAME: usize = 1 << 20;
/// Frames (of at most FRAME bytes, or tap buffers) waiting between a thread and the broadcast.
const FRAMES_IN_FLIGHT: usize = 16;
/// Bytes between two checks that no receiving node failed.
const CHECK_BYTES: u64 = 16 << 20;

const START: u8 = b'S';
const DATA: u8 = b'D';
const END: u8 = b'Z';
const BROKE: u8 = b'A';
const CHECK: u8 = b'C';
const GO_ON: u8 = b'K';
const STOP: u8 = b'X';
const OUTCOME: u8 = b'O';

/// This node's name in messages and records: `CLIMA_ARTIFACTS_NODE_ID`, else the host name,
/// with control characters escaped (it reaches every rank's error and the job's log).
pub(crate) fn node_name(config: &Config) -> String {
    clima_artifact_fs::printable(&node_key(config)).into_owned()
}

/// This node's name as set, which decides the node split.
fn node_key(config: &Config) -> String {
    config
        .node_id
        .clone()
        .unwrap_or_else(clima_artifact_fs::hostname)
}

/// **Collective over `ctx`.** The ranks of this node: those with the same
/// `CLIMA_ARTIFACTS_NODE_ID` when any rank sets it (ranks without it are grouped by host name),
/// else those sharing a machine ([`Context::split_by_node`]).
pub(crate) fn split_nodes(ctx: &dyn Context, config: &Config) -> Box<dyn Context> {
    // Every distinct node key once (sorted), merged in a tree: what rank 0 receives and
    // broadcasts grows with the number of nodes, not of ranks.
    let me = (config.node_id.is_some(), node_key(config));
    let mine = serde_json::to_vec(&[&me]).unwrap_or_default();
    let keys = ctx.reduce_to_root(mine, &merge_node_keys).map(|merged| {
        let keys: Vec<(bool, String)> = serde_json::from_slice(&merged).unwrap_or_default();
        if keys.iter().all(|(by_id, _)| !by_id) {
            return Vec::new();
        }
        merged
    });
    let keys: Vec<(bool, String)> =
        serde_json::from_slice(&ctx.broadcast_from_root(keys)).unwrap_or_default();
    if keys.is_empty() {
        return ctx.split_by_node();
    }
    // Every rank decodes the same bytes, so every rank takes this branch. An id and a host name
    // that happen to be spelled alike are different keys, so different nodes. (A key not found,
    // which the merge cannot cause, gets a color of its own.)
    let color = keys.binary_search(&me).map_or(u32::MAX >> 1, |at| {
        u32::try_from(at).unwrap_or(u32::MAX >> 1)
    });
    ctx.split(Some(color), 0)
        .unwrap_or_else(|| Box::new(clima_comms::Singleton))
}

/// The merge of the node split: the sorted union of two sorted lists of node keys.
fn merge_node_keys(lower: Vec<u8>, higher: Vec<u8>) -> Vec<u8> {
    let mut keys: Vec<(bool, String)> = serde_json::from_slice(&lower).unwrap_or_default();
    keys.extend(serde_json::from_slice::<Vec<(bool, String)>>(&higher).unwrap_or_default());
    keys.sort();
    keys.dedup();
    serde_json::to_vec(&keys).unwrap_or_default()
}

/// What a node leader found before anything moves.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
enum Found {
    Have(Installed),
    Need,
    Failed(Vec<u8>),
}

/// What the leaders found, merged on the way to leader 0 (a tree reduce): only the first of
/// each kind, and the leaders that need the artifact as ranges, so it does not grow with the
/// number of nodes when they agree.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Survey {
    /// The leaders whose look-up this holds.
    from: Vec<[usize; 2]>,
    /// The lowest leader that failed: its leader rank, node, world rank and error (wire).
    failed: Option<(usize, String, usize, Vec<u8>)>,
    /// The lowest leader that has it installed in a depot (not an override): rank and node.
    installed: Option<(usize, String)>,
    /// The lowest leader that needs it: rank and node.
    first_need: Option<(usize, String)>,
    /// Every leader that needs it.
    need: Vec<[usize; 2]>,
}

impl Survey {
    /// One leader's look-up.
    fn of(rank: usize, me: &Leader<'_>, found: &Found) -> Survey {
        let mut survey = Survey {
            from: vec![[rank, rank]],
            ..Survey::default()
        };
        match found {
            Found::Have(Installed {
                origin: Origin::Depot,
                ..
            }) => survey.installed = Some((rank, me.node.clone())),
            Found::Have(_) => {}
            Found::Need => {
                survey.first_need = Some((rank, me.node.clone()));
                survey.need = vec![[rank, rank]];
            }
            Found::Failed(wire) => {
                survey.failed = Some((rank, me.node.clone(), me.world_rank, wire.clone()))
            }
        }
        survey
    }

    fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Bytes that do not decode are an empty survey (leader 0 then names the missing leaders).
    fn from_bytes(bytes: &[u8]) -> Survey {
        serde_json::from_slice(bytes).unwrap_or_default()
    }
}

/// The merge of the leaders' look-up: the lower ranks' first of each kind, ranges united.
fn merge_surveys(lower: Vec<u8>, higher: Vec<u8>) -> Vec<u8> {
    let lower = Survey::from_bytes(&lower);
    let higher = Survey::from_bytes(&higher);
    Survey {
        from: clima_comms::union_ranges(&lower.from, &higher.from),
        failed: lower.failed.or(higher.failed),
        installed: lower.installed.or(higher.installed),
        first_need: lower.first_need.or(higher.first_need),
        need: clima_comms::union_ranges(&lower.need, &higher.need),
    }
    .to_bytes()
}

/// Whether `rank` is in `ranges`.
fn in_ranges(ranges: &[[usize; 2]], rank: usize) -> bool {
    ranges.iter().any(|&[a, b]| a <= rank && rank <= b)
}

/// What every leader is told after the look-up.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
enum Plan {
    /// Every node has the artifact.
    Done,
    /// `source` (a leader rank, on node `source_node`) sends it to every leader in `need`.
    Stream {
        source: usize,
        source_node: String,
        need: Vec<[usize; 2]>,
    },
}

/// Everything a leader's part needs.
pub(crate) struct Leader<'a> {
    pub(crate) name: &'a str,
    pub(crate) variant: &'a ArtifactVariant,
    pub(crate) manifest_dir: &'a Path,
    /// The configuration with the node depot first.
    pub(crate) config: &'a Config,
    pub(crate) node_depot: &'a Path,
    /// This node's name.
    pub(crate) node: String,
    /// This leader's rank in the whole context, and that context's description.
    pub(crate) world_rank: usize,
    pub(crate) world: String,
}

/// **Collective over `leaders`** (one rank per node, rank 0 the root of the whole context):
/// makes the artifact available in every node's depot with at most one download, and returns
/// this node's outcome, or on every leader the same error.
pub(crate) fn lead(leaders: &dyn Context, me: &Leader<'_>) -> Result<Installed, Error> {
    let found = look(me);
    // On leader 0: what the leaders found, merged on the way (the first failure names its
    // node and world rank).
    let survey = leaders
        .reduce_to_root(
            Survey::of(leaders.rank(), me, &found).to_bytes(),
            &merge_surveys,
        )
        .map(|bytes| Survey::from_bytes(&bytes));
    let plan = root_decides::<Plan, Error>(leaders, "planning the copies over MPI", || {
        plan(survey.unwrap_or_default(), leaders.size(), &me.world)
    });
    let own = match (plan, found) {
        (Err(e), _) => Err(e),
        (Ok(Plan::Done), Found::Have(have)) => {
            if leaders.rank() == 0 {
                tell_found_shared(me, &have);
            }
            Ok(have)
        }
        (Ok(Plan::Done), _) => Err(Error::from(CollectiveError::Undecodable {
            rank: me.world_rank,
            why: "the plan says every node has the artifact, and this one has not".into(),
        })),
        (
            Ok(Plan::Stream {
                source,
                source_node,
                need,
            }),
            found,
        ) => {
            let rank = leaders.rank();
            let takes_part = rank == source || in_ranges(&need, rank);
            let key = if rank == source { 0 } else { rank as u32 + 1 };
            let stream = leaders.split(takes_part.then_some(0), key);
            match (stream, found) {
                (Some(stream), found) if stream.rank() == 0 => {
                    let have = match found {
                        Found::Have(have) => Some(have),
                        _ => None,
                    };
                    send(&*stream, me, have)
                }
                (Some(stream), _) => receive(&*stream, me, &source_node),
                (None, Found::Have(have)) => Ok(have),
                (None, _) => Err(Error::from(CollectiveError::Undecodable {
                    rank: me.world_rank,
                    why: "this node needs the artifact but is not part of the copy".into(),
                })),
            }
        }
    };
    // Each leader names its own node in its failure (leader 0's own, and one that names its
    // node already, the stream's verdict, as they are), so that only the first failure travels.
    let own = own.map_err(|e| match e {
        e @ Error::FailedOnNode { .. } => e,
        e if leaders.rank() == 0 => e,
        e => on_node(me, &e),
    });
    all_succeed(leaders, own, |_, e| e)
}

/// `e` on this leader's node, as every rank reports it.
fn on_node(me: &Leader<'_>, e: &Error) -> Error {
    Error::FailedOnNode {
        node: me.node.clone(),
        rank: me.world_rank,
        context: me.world.clone(),
        message: e.to_string(),
    }
}

/// Says once per job (on leader 0) that node-local mode had nothing to do because the
/// artifact is installed in a shared depot, which every rank reads: otherwise the job is
/// silent, and a user who expected node-local copies cannot tell why there are none.
fn tell_found_shared(me: &Leader<'_>, have: &Installed) {
    if have.origin != Origin::Depot || have.path.starts_with(me.node_depot) {
        return;
    }
    let depot = have
        .path
        .parent()
        .and_then(Path::parent)
        .unwrap_or(&have.path);
    clima_artifact_progress::notice::info(&format!(
        "`{}` found in the shared depot `{}`: nothing copied to node depots (every rank reads \
         `{}`; remove it from the shared depot to have node-local copies)",
        me.name,
        depot.display(),
        have.path.display()
    ));
}

/// Step 1 on one leader: the node depot exists and is private, and the artifact is found or
/// not.
fn look(me: &Leader<'_>) -> Found {
    let looked = depot::private_node_depot(me.node_depot)
        .and_then(|()| depot::lookup(&me.variant.git_tree_sha1, &depot::search_depots(me.config)));
    match looked {
        Ok(Some(have)) => Found::Have(have),
        Ok(None) => Found::Need,
        Err(e) => Found::Failed(e.to_wire()),
    }
}

/// Leader 0's plan from what the `leaders` leaders found (`survey`).
fn plan(survey: Survey, leaders: usize, world: &str) -> Result<Plan, Error> {
    // A leader whose look-up did not arrive (bytes that did not decode).
    let mut next = 0;
    for &[a, b] in survey.from.iter().chain(&[[leaders, leaders]]) {
        if next < a.min(leaders) {
            return Err(Error::from(CollectiveError::Undecodable {
                rank: next,
                why: "its look-up of the artifact did not arrive whole".into(),
            }));
        }
        next = next.max(b.saturating_add(1));
    }
    if let Some((_, node, world_rank, wire)) = survey.failed {
        // The node's own trouble (its depot), named after it, the root's node included.
        return Err(Error::FailedOnNode {
            node,
            rank: world_rank,
            context: world.to_owned(),
            message: Error::from_wire(&wire).to_string(),
        });
    }
    // A node that has it installed sends it (no download at all); an override is not sent
    // (it is that node's own data, not necessarily the artifact): else the first node that
    // needs it downloads it, the root when it does.
    let Some((source, source_node)) = survey.installed.or(survey.first_need.clone()) else {
        return Ok(Plan::Done);
    };
    if survey.first_need.is_none() {
        return Ok(Plan::Done);
    }
    Ok(Plan::Stream {
        source,
        source_node,
        need: survey.need,
    })
}

/// What the source's install thread hands its broadcast loop. Each attempt has a number: a
/// failed attempt's reader may still hand over a last piece, or its end, after the next
/// attempt started, and the loop drops what is not the current attempt's.
enum Up {
    Start(u32, Incoming),
    Data(u32, Vec<u8>),
    End(u32),
    Broke(u32),
    Outcome(Result<Installed, Error>),
}

/// The source's [`Taps`]: every attempt's bytes go to the broadcast loop.
struct ToBroadcast {
    tx: SyncSender<Up>,
    stop: Arc<AtomicBool>,
    from_node: String,
    /// Attempts started so far.
    attempts: AtomicU32,
}

impl ToBroadcast {
    /// Starts an attempt that sends `incoming`'s bytes.
    fn attempt(&self, incoming: Incoming) -> AttemptTap {
        let id = self.attempts.fetch_add(1, Ordering::Relaxed) + 1;
        let _ = self.tx.send(Up::Start(id, incoming));
        AttemptTap {
            id,
            tx: self.tx.clone(),
            stop: Arc::clone(&self.stop),
            ended: false,
        }
    }

    /// Whether a download was broadcast (rather than found installed by this call).
    fn tapped(&self) -> bool {
        self.attempts.load(Ordering::Relaxed) > 0
    }
}

impl Taps for ToBroadcast {
    fn start(&self, download: &Download, check_sha256: bool, length: Option<u64>) -> Box<dyn Tap> {
        Box::new(self.attempt(Incoming {
            from_node: self.from_node.clone(),
            url: Some(redact_url(&download.url)),
            sha256: check_sha256.then_some(download.sha256),
            length,
        }))
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// One attempt's bytes, to the broadcast loop; dropped before its end, it says the attempt
/// broke. Once the stream stopped, it refuses bytes, so the download stops.
struct AttemptTap {
    id: u32,
    tx: SyncSender<Up>,
    stop: Arc<AtomicBool>,
    ended: bool,
}

impl AttemptTap {
    fn send(&self, bytes: &[u8]) -> io::Result<()> {
        if self.stop.load(Ordering::Relaxed) {
            return Err(io::Error::other(
                "stopped: a node that receives this download over MPI failed",
            ));
        }
        self.tx
            .send(Up::Data(self.id, bytes.to_vec()))
            .map_err(|_| io::Error::other("the MPI broadcast of this download stopped"))
    }
}

impl Tap for AttemptTap {
    fn bytes(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.send(bytes)
    }
    fn end(&mut self) {
        self.ended = true;
        let _ = self.tx.send(Up::End(self.id));
    }
}

impl Drop for AttemptTap {
    fn drop(&mut self) {
        if !self.ended {
            let _ = self.tx.send(Up::Broke(self.id));
        }
    }
}

impl Write for AttemptTap {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.send(bytes)?;
        Ok(bytes.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Sends `dir` (an installed artifact) as an uncompressed tarball through `taps`: the
/// receivers check its tree hash, which is all that names the content.
fn send_installed(taps: &ToBroadcast, dir: &Path) -> io::Result<()> {
    let mut tap = taps.attempt(Incoming {
        from_node: taps.from_node.clone(),
        url: None,
        sha256: None,
        length: None,
    });
    {
        // Whole frames, not the tar writer's small pieces.
        let mut out = io::BufWriter::with_capacity(FRAME, &mut tap);
        let mut tar = tar::Builder::new(&mut out);
        tar.follow_symlinks(false);
        tar.mode(tar::HeaderMode::Deterministic);
        tar.append_dir_all(".", dir)?;
        tar.finish()?;
        drop(tar);
        out.flush()?;
    }
    tap.end();
    Ok(())
}

/// The source: downloads (or has) the artifact and broadcasts its bytes to the stream's other
/// ranks (the leaders that need it).
fn send(
    stream: &dyn Context,
    me: &Leader<'_>,
    have: Option<Installed>,
) -> Result<Installed, Error> {
    if stream.size() == 1 {
        // Nobody to send to (one node): the install as without MPI.
        return match have {
            Some(have) => Ok(have),
            None => install::ensure_variant(me.name, me.variant, me.manifest_dir, me.config),
        };
    }
    let (tx, rx) = sync_channel::<Up>(FRAMES_IN_FLIGHT);
    let stop = Arc::new(AtomicBool::new(false));
    let taps = ToBroadcast {
        tx,
        stop: Arc::clone(&stop),
        from_node: me.node.clone(),
        attempts: AtomicU32::new(0),
    };
    std::thread::scope(|scope| {
        let outcome_tx = taps.tx.clone();
        let spawned = std::thread::Builder::new()
            .name("clima-artifacts-sender".into())
            .spawn_scoped(scope, move || {
                let outcome = match have {
                    Some(have) => send_installed(&taps, &have.path)
                        .map_err(|e| Error::io("send over MPI the installed copy", &have.path, e))
                        .map(|()| have),
                    None => {
                        let got = install::ensure_variant_tapped(
                            me.name,
                            me.variant,
                            me.manifest_dir,
                            me.config,
                            Some(&taps),
                        );
                        match got {
                            // Installed meanwhile by another process: send that copy.
                            Ok(got) if !taps.tapped() => send_installed(&taps, &got.path)
                                .map_err(|e| {
                                    Error::io("send over MPI the installed copy", &got.path, e)
                                })
                                .map(|()| got),
                            other => other,
                        }
                    }
                };
                let _ = taps.tx.send(Up::Outcome(outcome));
            });
        // Without its thread the install fails, and the stream still ends the same way.
        let worker = spawned
            .map_err(|e| {
                let e = Error::io("start a thread to send over MPI into", me.node_depot, e);
                let _ = outcome_tx.send(Up::Outcome(Err(e)));
            })
            .ok();
        drop(outcome_tx);
        let result = broadcast_loop(stream, &rx, &stop);
        if result.is_err() {
            // A stopped stream: the install thread's tap now fails; let it end.
            while let Ok(up) = rx.recv() {
                if matches!(up, Up::Outcome(_)) {
                    break;
                }
            }
        }
        if let Some(worker) = worker {
            let _ = worker.join();
        }
        result.and_then(|outcome| outcome)
    })
}

/// The source's broadcast loop: frames out of `rx` until the install's outcome, which it
/// broadcasts and returns; `Err` when a checkpoint stopped the stream (then `stop` is set).
fn broadcast_loop(
    stream: &dyn Context,
    rx: &Receiver<Up>,
    stop: &AtomicBool,
) -> Result<Result<Installed, Error>, Error> {
    let mut since_check = 0u64;
    let mut pending: Option<Up> = None;
    let mut current = 0u32;
    loop {
        let up = match pending.take() {
            Some(up) => up,
            None => match rx.recv() {
                Ok(up) => up,
                Err(_) => Up::Outcome(Err(Error::from(CollectiveError::RootPanicked {
                    what: "sending an artifact over MPI".into(),
                    message: "the install thread stopped".into(),
                }))),
            },
        };
        let frame = match up {
            Up::Start(id, incoming) => {
                current = id;
                [
                    &[START][..],
                    &serde_json::to_vec(&incoming).unwrap_or_default(),
                ]
                .concat()
            }
            // What an earlier attempt's reader handed over late: not part of the stream.
            Up::Data(id, _) | Up::End(id) | Up::Broke(id) if id != current => continue,
            Up::Data(_, mut bytes) => {
                // Coalesce what is already waiting, up to one frame.
                while bytes.len() < FRAME {
                    match rx.try_recv() {
                        Ok(Up::Data(id, more)) if id == current => bytes.extend_from_slice(&more),
                        Ok(other) => {
                            pending = Some(other);
                            break;
                        }
                        Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
                    }
                }
                since_check += bytes.len() as u64;
                let mut frame = Vec::with_capacity(bytes.len() + 1);
                frame.push(DATA);
                frame.extend_from_slice(&bytes);
                frame
            }
            Up::End(_) => vec![END],
            Up::Broke(_) => vec![BROKE],
            Up::Outcome(outcome) => {
                let frame = match &outcome {
                    Ok(_) => vec![OUTCOME, 0],
                    Err(e) => [&[OUTCOME, 1][..], &e.to_wire()].concat(),
                };
                stream.broadcast_from_root(Some(frame));
                return Ok(outcome);
            }
        };
        stream.broadcast_from_root(Some(frame));
        if since_check >= CHECK_BYTES {
            since_check = 0;
            if let Some(e) = checkpoint(stream) {
                stop.store(true, Ordering::Relaxed);
                return Err(e);
            }
        }
    }
}

/// A checkpoint on the source: every receiver says whether it failed for good (its failure
/// already named after its node); the first failure stops the stream on every rank.
fn checkpoint(stream: &dyn Context) -> Option<Error> {
    stream.broadcast_from_root(Some(vec![CHECK]));
    let first = stream
        .reduce_to_root(Vec::new(), &first_failure)
        .unwrap_or_default();
    let failed = (!first.is_empty()).then(|| Error::from_wire(&first));
    let verdict = match &failed {
        None => vec![GO_ON],
        Some(e) => [&[STOP][..], &e.to_wire()].concat(),
    };
    stream.broadcast_from_root(Some(verdict));
    failed
}

/// The merge of a checkpoint: empty when every receiver of the range is fine, else the lowest
/// failing one's error, on its node (wire form).
fn first_failure(lower: Vec<u8>, higher: Vec<u8>) -> Vec<u8> {
    if lower.is_empty() { higher } else { lower }
}

/// Bytes for a receiver's install, as they arrive.
enum Down {
    Data(Vec<u8>),
    End,
    Broke,
}

/// The install's side of the channel: the bytes of one attempt.
struct FromBroadcast {
    rx: Receiver<Down>,
    current: Vec<u8>,
    pos: usize,
    ended: bool,
}

impl Read for FromBroadcast {
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

/// One attempt's install on a receiver.
struct Receiving {
    tx: Option<SyncSender<Down>>,
    worker: JoinHandle<Received>,
}

/// A receiver's attempt: installed (or found installed), or `None` when another installer
/// holds the artifact's lock in this node's depot (see [`install::install_received`]).
type Received = Result<Option<Installed>, Error>;

/// A receiver: installs what the source broadcasts into this node's depot.
fn receive(stream: &dyn Context, me: &Leader<'_>, from_node: &str) -> Result<Installed, Error> {
    let mut current: Option<Receiving> = None;
    // The last finished attempt's outcome, and whether it ended for good.
    let mut finished: Option<(Received, bool)> = None;
    let finish = |r: Receiving| -> (Received, bool) {
        drop(r.tx);
        let outcome = r.worker.join().unwrap_or_else(|p| {
            Err(Error::from(CollectiveError::RootPanicked {
                what: format!("installing artifact `{}` received over MPI", me.name),
                message: clima_comms::panic_message(&*p),
            }))
        });
        let for_good = for_good(&outcome);
        (outcome, for_good)
    };
    loop {
        let frame = stream.broadcast_from_root(None);
        let Some((&tag, rest)) = frame.split_first() else {
            continue;
        };
        match tag {
            START => {
                if let Some(r) = current.take() {
                    finished = Some(finish(r));
                }
                if finished.as_ref().is_some_and(|(_, for_good)| *for_good) {
                    continue; // installed, or this node cannot: later attempts change nothing
                }
                let incoming: Incoming = match serde_json::from_slice(rest) {
                    Ok(i) => i,
                    Err(e) => {
                        finished = Some((
                            Err(Error::from(CollectiveError::Undecodable {
                                rank: 0,
                                why: e.to_string(),
                            })),
                            true,
                        ));
                        continue;
                    }
                };
                let (tx, rx) = sync_channel(FRAMES_IN_FLIGHT);
                let reader = FromBroadcast {
                    rx,
                    current: Vec::new(),
                    pos: 0,
                    ended: false,
                };
                let (name, variant, manifest) = (
                    me.name.to_owned(),
                    me.variant.clone(),
                    me.manifest_dir.to_path_buf(),
                );
                let (config, node) = (me.config.clone(), me.node.clone());
                let spawned = std::thread::Builder::new()
                    .name("clima-artifacts-receiver".into())
                    .spawn(move || {
                        install::install_received(
                            &name,
                            &variant,
                            &manifest,
                            &config,
                            &node,
                            &incoming,
                            Box::new(reader),
                        )
                    });
                match spawned {
                    Ok(worker) => {
                        current = Some(Receiving {
                            tx: Some(tx),
                            worker,
                        });
                    }
                    // This node cannot install: it says so at the next check.
                    Err(e) => {
                        let e = Error::io("start a thread to install into", me.node_depot, e);
                        finished = Some((Err(e), true));
                    }
                }
            }
            DATA | END | BROKE => {
                if let Some(r) = current.as_mut() {
                    let down = match tag {
                        DATA => Down::Data(rest.to_vec()),
                        END => Down::End,
                        _ => Down::Broke,
                    };
                    // An install that stopped reading has its outcome waiting: nothing to do.
                    if let Some(tx) = &r.tx
                        && tx.send(down).is_err()
                    {
                        r.tx = None;
                    }
                }
            }
            CHECK => {
                if current.as_ref().is_some_and(|r| r.worker.is_finished())
                    && let Some(r) = current.take()
                {
                    finished = Some(finish(r));
                }
                let status = match &finished {
                    Some((Err(e), true)) => on_node(me, e).to_wire(),
                    _ => Vec::new(),
                };
                stream.reduce_to_root(status, &first_failure);
                let verdict = stream.broadcast_from_root(None);
                if let Some((&STOP, wire)) = verdict.split_first() {
                    if let Some(r) = current.take() {
                        let _ = finish(r);
                    }
                    return Err(Error::from_wire(wire));
                }
            }
            OUTCOME => {
                if let Some(r) = current.take() {
                    finished = Some(finish(r));
                }
                if let Some((&1, wire)) = rest.split_first() {
                    return Err(Error::from_wire(wire));
                }
                let own = match finished {
                    Some((Ok(Some(installed)), _)) => Ok(installed),
                    // The depot's other installer had it: its copy once it let go (or, if it
                    // failed, a download of this node's own).
                    Some((Ok(None), _)) => {
                        install::ensure_variant(me.name, me.variant, me.manifest_dir, me.config)
                    }
                    Some((Err(e), _)) => Err(e),
                    None => Err(Error::ReceiveFailed {
                        name: me.name.to_owned(),
                        hash: me.variant.git_tree_sha1,
                        from_node: from_node.to_owned(),
                        failure: Box::new(crate::SourceFailure::Archive {
                            url: format!("the broadcast of node `{from_node}`"),
                            reason: "the sending node finished without sending anything".into(),
                        }),
                    }),
                };
                // This node's own failure, named after it (leader 0's too).
                return own.map_err(|e| match e {
                    e @ Error::FailedOnNode { .. } => e,
                    e => Error::FailedOnNode {
                        node: me.node.clone(),
                        rank: me.world_rank,
                        context: me.world.clone(),
                        message: e.to_string(),
                    },
                });
            }
            _ => {}
        }
    }
}

/// Whether a receiver's attempt ended for good: installed, or failed for a reason of this
/// node (its depot, its disk), which no later attempt of the sender mends; not when the
/// sender's attempt broke off or its bytes were wrong (the sender sees that too).
fn for_good(outcome: &Received) -> bool {
    match outcome {
        Ok(_) => true,
        Err(Error::ReceiveFailed { failure, .. }) => {
            matches!(**failure, crate::SourceFailure::Install { .. })
        }
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The node of each of 5 thread ranks: `(its first rank, node size)`, by `node_id`.
    fn nodes_of(ids: [Option<&str>; 5]) -> Vec<(usize, usize)> {
        clima_comms::on_thread_ranks(5, |ctx| {
            let config = Config {
                node_id: ids[ctx.rank()].map(str::to_owned),
                ..Config::default()
            };
            let node = split_nodes(ctx, &config);
            // The world rank of the node's first rank, broadcast within the node.
            let first = node.broadcast_from_root(
                (node.rank() == 0).then(|| serde_json::to_vec(&ctx.rank()).unwrap_or_default()),
            );
            (
                serde_json::from_slice(&first).unwrap_or(usize::MAX),
                node.size(),
            )
        })
    }

    #[test]
    fn ranks_with_the_same_node_id_form_one_node() {
        let host = clima_artifact_fs::hostname();
        // "a" twice, "b" twice, and a rank whose id is spelled like the host name.
        let got = nodes_of([Some("a"), Some("b"), Some("a"), Some(&host), Some("b")]);
        assert_eq!(got, vec![(0, 2), (1, 2), (0, 2), (3, 1), (1, 2)]);
    }

    #[test]
    fn an_id_spelled_like_a_host_name_is_not_that_host() {
        let host = clima_artifact_fs::hostname();
        // Ranks 0 and 1 have no id (grouped by host name); rank 2 names the host as its id.
        let got = nodes_of([None, None, Some(&host), Some("x"), Some("x")]);
        assert_eq!(got, vec![(0, 2), (0, 2), (2, 1), (3, 2), (3, 2)]);
    }
}
