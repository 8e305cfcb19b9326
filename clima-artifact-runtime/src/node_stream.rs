//! Node-local mode: one download per job, copied over MPI into every node's depot.
//!
//! ```text
//!  every rank    node split (by CLIMA_ARTIFACTS_NODE_ID, else by machine: the distinct node
//!                names merged in a tree), leaders' split
//!  node ranks    wait in a broadcast of their node (no file operations)
//!  leaders  1.   create the node depot, look for the artifact (overrides, node depot, shared
//!                depots) --gather--> leader 0: a plan, broadcast to every leader:
//!                  a node failed -> that error everywhere; every node has it -> done;
//!                  else a source (the first node that has it installed, else the first
//!                  node that needs it)
//!  source   2.   downloads (ensure_variant: retries, several connections, resume) with a tap
//!                on the verified byte stream, or sends a tar of its installed copy
//!           -->  clima_comms::stream: the attempts broadcast in frames to the nodes that
//!                need it (header: URL, SHA-256, length), checkpoints at which a receiving
//!                node that failed stops the stream for all, the source's outcome
//!  receivers     a BroadcastReader -> Body (SHA-256) -> extraction -> tree hash -> rename into
//!                the node depot, while the next frames arrive; a seekable download (its
//!                `index-sha256` in the header) is kept whole, then unpacked on every core
//!  leaders  3.   all_succeed: every node's outcome; a failure names its node
//!  node ranks    get their leader's path, or the same error
//! ```
//!
//! The source's partial download (a large download's `.partial-*` file) is kept in the first
//! writable shared depot, not in its node depot, which the end of a job may wipe: a killed job's
//! next run continues it. Without a shared depot that can keep it, the log says so.
//!
//! Memory stays bounded, by the stream's limits (see [`clima_comms::stream`]): a slow disk
//! slows the stream, it does not fill memory.

use std::io::{self, Write};
use std::path::Path;
use std::thread::JoinHandle;

use crate::notice::MpiEvent;
use clima_artifact_manifest::ArtifactVariant;
use clima_artifact_net::Tap;
use clima_artifact_net::trust::redact_url;
use clima_comms::stream::{
    BroadcastReader, BroadcastWriter, StreamLimits, StreamReceiver, StreamSender, broadcast_stream,
    receive_stream,
};
use clima_comms::{CollectiveError, Context, all_succeed, reduce_values, root_decides};

use crate::depot::Depot;
use crate::install::{self, Fetch, Incoming, Install, Taps};
use crate::{Config, Error};
use crate::{Installed, Origin};

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
/// else those sharing a machine ([`Context::split_by_node`]). A node key that does not arrive
/// intact is the same error on every rank.
pub(crate) fn split_nodes(ctx: &dyn Context, config: &Config) -> Result<Box<dyn Context>, Error> {
    // Every distinct node key once (sorted), merged in a tree: what rank 0 receives and
    // broadcasts grows with the number of nodes, not of ranks.
    let me = (config.node_id.is_some(), node_key(config));
    let merged = reduce_values(ctx, vec![me.clone()], merge_node_keys).map(|keys| {
        keys.map(|keys| {
            if keys.iter().all(|(by_id, _)| !by_id) {
                Vec::new()
            } else {
                keys
            }
        })
    });
    let keys = root_decides::<_, CollectiveError>(ctx, "finding the nodes of the job", || {
        merged.unwrap_or_else(|| Ok(Vec::new()))
    })?;
    if keys.is_empty() {
        return Ok(ctx.split_by_node());
    }
    // Every rank has the same keys, so every rank takes this branch. An id and a host name
    // that happen to be spelled alike are different keys, so different nodes. (A key not found,
    // which the merge cannot cause, gets a color of its own.)
    let color = keys.binary_search(&me).map_or(u32::MAX >> 1, |at| {
        u32::try_from(at).unwrap_or(u32::MAX >> 1)
    });
    Ok(ctx
        .split(Some(color), 0)
        .unwrap_or_else(|| Box::new(clima_comms::Singleton)))
}

/// A node's key: whether it is a `CLIMA_ARTIFACTS_NODE_ID` (else a host name), and the name.
type NodeKey = (bool, String);

/// The merge of the node split: the sorted union of two sorted lists of node keys.
fn merge_node_keys(mut keys: Vec<NodeKey>, theirs: Vec<NodeKey>) -> Vec<NodeKey> {
    keys.extend(theirs);
    keys.sort();
    keys.dedup();
    keys
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
}

/// The merge of the leaders' look-up: the lower ranks' first of each kind, ranges united.
fn merge_surveys(lower: Survey, higher: Survey) -> Survey {
    Survey {
        from: clima_comms::union_ranges(&lower.from, &higher.from),
        failed: lower.failed.or(higher.failed),
        installed: lower.installed.or(higher.installed),
        first_need: lower.first_need.or(higher.first_need),
        need: clima_comms::union_ranges(&lower.need, &higher.need),
    }
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
    pub(crate) node_depot: &'a Depot,
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
    // node and world rank); a part that does not decode is the same error on every leader.
    let survey = reduce_values(
        leaders,
        Survey::of(leaders.rank(), me, &found),
        merge_surveys,
    );
    let plan = root_decides::<Plan, Error>(leaders, "planning the copies over MPI", || {
        let survey = survey.unwrap_or_else(|| Ok(Survey::default()))?;
        plan(survey, leaders.size(), &me.world)
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
    if have.origin != Origin::Depot || have.path.starts_with(me.node_depot.root()) {
        return;
    }
    let depot = have
        .path
        .parent()
        .and_then(Path::parent)
        .unwrap_or(&have.path);
    me.config.reporting().emit(MpiEvent::FoundInSharedDepot {
        artifact: me.name.to_owned(),
        depot: depot.to_path_buf(),
        path: have.path.clone(),
    });
}

/// Step 1 on one leader: the node depot exists and is private, and the artifact is found or
/// not.
fn look(me: &Leader<'_>) -> Found {
    let looked = me
        .node_depot
        .create_private_node()
        .map_err(Error::from)
        .and_then(|()| Install::new(me.name, me.variant, me.manifest_dir, me.config).found());
    match looked {
        Ok(Some(have)) => Found::Have(have),
        Ok(None) => Found::Need,
        Err(e) => Found::Failed(e.to_wire()),
    }
}

/// Leader 0's plan from what the `leaders` leaders found (`survey`).
fn plan(survey: Survey, leaders: usize, world: &str) -> Result<Plan, Error> {
    // A leader whose look-up is missing (which the merge cannot cause).
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

/// The source's [`Taps`]: every attempt's bytes go to the broadcast.
struct ToBroadcast<'a> {
    tx: &'a StreamSender,
    from_node: String,
}

impl ToBroadcast<'_> {
    /// Starts an attempt that sends `incoming`'s bytes.
    fn attempt(&self, incoming: &Incoming) -> AttemptTap {
        AttemptTap(self.tx.attempt(incoming))
    }

    /// Whether a download was broadcast (rather than found installed by this call).
    fn tapped(&self) -> bool {
        self.tx.attempts() > 0
    }
}

impl Taps for ToBroadcast<'_> {
    fn start(&self, download: &Fetch, length: Option<u64>) -> Box<dyn Tap> {
        Box::new(self.attempt(&Incoming {
            from_node: self.from_node.clone(),
            url: Some(redact_url(&download.url)),
            sha256: download.sha256,
            length,
            index_sha256: download.index_sha256,
        }))
    }

    fn stopped(&self) -> bool {
        self.tx.stopped()
    }
}

/// One attempt's bytes, to the broadcast: a download's [`Tap`].
struct AttemptTap(BroadcastWriter);

impl Tap for AttemptTap {
    fn bytes(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.0.write_all(bytes)
    }
    fn end(&mut self) {
        self.0.end();
    }
}

/// Sends `dir` (an installed artifact) as an uncompressed tarball through `taps`: the
/// receivers check its tree hash, which is all that names the content.
fn send_installed(taps: &ToBroadcast<'_>, dir: &Path) -> io::Result<()> {
    let mut tap = taps.attempt(&Incoming {
        from_node: taps.from_node.clone(),
        url: None,
        sha256: None,
        length: None,
        index_sha256: None,
    });
    {
        // Whole frames, not the tar writer's small pieces.
        let mut out = io::BufWriter::with_capacity(StreamLimits::default().frame, &mut tap.0);
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
    broadcast_stream(
        stream,
        StreamLimits::default(),
        "sending an artifact over MPI",
        |tx| {
            let taps = ToBroadcast {
                tx,
                from_node: me.node.clone(),
            };
            produce(me, have, &taps)
        },
        // A receiver's failure is named after its node already.
        &|_, e| e,
        |e| {
            Error::io(
                "start a thread to send over MPI into",
                me.node_depot.root(),
                e,
            )
        },
    )
}

/// The source's install, in the sending thread: its copy sent as a tarball, else a download
/// whose every attempt is broadcast (or, installed meanwhile by another process, that copy).
fn produce(
    me: &Leader<'_>,
    have: Option<Installed>,
    taps: &ToBroadcast<'_>,
) -> Result<Installed, Error> {
    let sent = |got: Installed| {
        send_installed(taps, &got.path)
            .map_err(|e| Error::io("send over MPI the installed copy", &got.path, e))
            .map(|()| got)
    };
    match have {
        Some(have) => sent(have),
        None => {
            let got =
                Install::new(me.name, me.variant, me.manifest_dir, me.config).ensure(Some(taps));
            match got {
                // Installed meanwhile by another process: send that copy.
                Ok(got) if !taps.tapped() => sent(got),
                other => other,
            }
        }
    }
}

/// A receiver's attempt: installed (or found installed), or `None` when another installer
/// holds the artifact's lock in this node's depot (see [`Install::receive`]).
type Received = Result<Option<Installed>, Error>;

/// A receiver's installs into this node's depot: one ordinary install per attempt of the
/// sender, whose source is the attempt's [`BroadcastReader`].
struct Installs<'a, 'b> {
    me: &'a Leader<'b>,
    current: Option<JoinHandle<Received>>,
    /// The last finished attempt's outcome, and whether it ended for good.
    finished: Option<(Received, bool)>,
}

impl Installs<'_, '_> {
    /// Waits for the current attempt (its reader ended or was cut off) and keeps its outcome.
    fn settle(&mut self) {
        let Some(worker) = self.current.take() else {
            return;
        };
        let outcome = worker.join().unwrap_or_else(|p| {
            Err(Error::from(CollectiveError::RootPanicked {
                what: format!("installing artifact `{}` received over MPI", self.me.name),
                message: clima_comms::panic_message(&*p),
            }))
        });
        let for_good = for_good(&outcome);
        self.finished = Some((outcome, for_good));
    }

    /// Installed, or this node cannot: later attempts change nothing.
    fn done(&self) -> bool {
        self.finished
            .as_ref()
            .is_some_and(|(_, for_good)| *for_good)
    }
}

impl StreamReceiver<Incoming> for Installs<'_, '_> {
    type Error = Error;

    fn start(&mut self, incoming: Incoming, reader: BroadcastReader) {
        self.settle();
        if self.done() {
            return;
        }
        let me = self.me;
        let (name, variant, manifest) = (
            me.name.to_owned(),
            me.variant.clone(),
            me.manifest_dir.to_path_buf(),
        );
        let (config, node) = (me.config.clone(), me.node.clone());
        let spawned = std::thread::Builder::new()
            .name("clima-artifacts-receiver".into())
            .spawn(move || {
                Install::new(&name, &variant, &manifest, &config).receive(
                    &node,
                    &incoming,
                    Box::new(reader),
                )
            });
        match spawned {
            Ok(worker) => self.current = Some(worker),
            // This node cannot install: it says so at the next check.
            Err(e) => {
                let e = Error::io("start a thread to install into", me.node_depot.root(), e);
                self.finished = Some((Err(e), true));
            }
        }
    }

    fn undecodable(&mut self, error: CollectiveError) {
        self.settle();
        if !self.done() {
            self.finished = Some((Err(Error::from(error)), true));
        }
    }

    /// This node's failure for good, named after it.
    fn failed(&mut self) -> Option<Error> {
        if self.current.as_ref().is_some_and(JoinHandle::is_finished) {
            self.settle();
        }
        match &self.finished {
            Some((Err(e), true)) => Some(on_node(self.me, e)),
            _ => None,
        }
    }
}

/// A receiver: installs what the source broadcasts into this node's depot.
fn receive(stream: &dyn Context, me: &Leader<'_>, from_node: &str) -> Result<Installed, Error> {
    let mut installs = Installs {
        me,
        current: None,
        finished: None,
    };
    let sent = receive_stream(stream, StreamLimits::default(), &mut installs);
    installs.settle();
    // The sender's failure, or the checkpoint's that stopped the stream: as every rank has it.
    sent?;
    let own = match installs.finished {
        Some((Ok(Some(installed)), _)) => Ok(installed),
        // The depot's other installer had it: its copy once it let go (or, if it failed, a
        // download of this node's own).
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
    own.map_err(|e| match e {
        e @ Error::FailedOnNode { .. } => e,
        e => on_node(me, &e),
    })
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
            let node = split_nodes(ctx, &config).unwrap();
            // The world rank of the node's first rank, broadcast within the node.
            let first =
                clima_comms::broadcast_value(&*node, (node.rank() == 0).then(|| ctx.rank()));
            (first.unwrap(), node.size())
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
