//! The communication context: who is the root, and how the outcome of an install reaches every
//! rank.
//!
//! # Calls with a context are COLLECTIVE
//!
//! **Every rank of the context must make the same call, for the same artifact, in the same
//! order.** A rank that skips a call, or calls for a different artifact, leaves the others waiting
//! in a broadcast (a hang), exactly like a mismatched `MPI_Bcast`. What this module can detect, it
//! turns into an error on every rank instead of a hang or wrong data:
//!
//! - ranks asking for *different* artifacts (name or git-tree-sha1) in the same collective call:
//!   every rank returns [`Error::Other`] naming the ranks and what each asked for;
//! - a failure or a panic of the root's install: every rank returns the same error.
//!
//! What it cannot detect is a rank that never makes the call at all.
//!
//! `clima_artifact!(.., ctx)` answers a repeated call from memory without communicating only
//! when every rank of `ctx` is guaranteed to do the same: it resolved the artifact before in a
//! collective call on the same communicator ([`Context::communicator_id`]). A rank that resolved
//! it alone (no context) or on another communicator still joins the collective call. See the
//! macro's docs, "Calls with a context and the in-memory cache".
//!
//! # Protocol of [`ensure_collective`]
//!
//! ```text
//!  rank:      0 (root)                      1 .. n-1
//!  1. gather  request {name, hash}  <-----  request {name, hash}
//!             compare all requests
//!  2.         install (ensure_variant),
//!             catching panics
//!  3. bcast   'O' + Installed (JSON)  ----> decode, same Ok
//!             or 'E' + Error::to_wire ----> decode, same Err
//!  4. every rank: registry::record(.., rank) on Ok
//! ```
//!
//! Node-local mode ([`Config::node_local_depot`], from env `CLIMA_ARTIFACTS_NODE_LOCAL_DEPOT=<path>`,
//! e.g. `$TMPDIR/depot` on each node): step 1 runs on the whole context, and its verdict is broadcast; then the context is split
//! by node ([`Context::split_by_node`]), rank 0 of each node installs with the node depot placed
//! first in the depot list and broadcasts within its node; finally every node's outcome is gathered
//! to the global root, so if any node failed, every rank returns that error.
//!
//! The byte primitives ([`Context::broadcast_from_root`], [`Context::gather_to_root`]) are public so
//! that other collective steps (the provenance report gathering every rank's records to the root)
//! use the same context.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clima_artifact_manifest::ArtifactVariant;

use crate::install::{Installed, Origin};
use crate::registry::{self, AccessEvent};
use crate::{Config, Error};

/// Environment variable selecting node-local mode: the depot each node's root installs into.
pub const NODE_LOCAL_DEPOT_ENV: &str = "CLIMA_ARTIFACTS_NODE_LOCAL_DEPOT";

/// A communicator over which artifact access is collective.
///
/// **Every method is collective**: all ranks of the communicator must call it, in the same
/// order, or the program hangs (as with any MPI collective). Rank 0 is the root.
///
/// Implemented by [`Singleton`] (serial runs) and, with the `mpi` feature, by
/// `MpiContext` (rsmpi communicators). Implement it for your own communication layer by
/// providing a byte broadcast, a byte gather and a node split.
pub trait Context: Send + Sync {
    /// This process's rank, `0..size()`.
    fn rank(&self) -> usize;
    /// Number of ranks.
    fn size(&self) -> usize;
    /// Waits until every rank reached this point.
    fn barrier(&self);
    /// Rank 0 passes `Some(bytes)`, the others `None`; every rank gets rank 0's bytes.
    ///
    /// Non-root ranks ignore what they pass (only the root's bytes count).
    fn broadcast_from_root(&self, data: Option<Vec<u8>>) -> Vec<u8>;
    /// Every rank passes its bytes; rank 0 gets all of them in rank order, the others `None`.
    fn gather_to_root(&self, data: Vec<u8>) -> Option<Vec<Vec<u8>>>;
    /// A context over the ranks that share this node (shared-memory split).
    fn split_by_node(&self) -> Box<dyn Context>;
    /// A short description used in error messages, e.g. `MPI_COMM_WORLD (16 ranks)`.
    fn describe(&self) -> String {
        format!("a context of {} rank(s)", self.size())
    }
    /// An identity of the communicator, which lets repeated `clima_artifact!(.., ctx)` calls be
    /// answered from memory without communicating (see the macro's docs, "Calls with a context
    /// and the in-memory cache").
    ///
    /// Contract: within one process, two contexts return the same `Some(id)` **if and only if**
    /// they are the same communicator (same ranks, same MPI context), for as long as either is
    /// alive. `None` (the default) is always sound: every call with a context of more than one
    /// rank then goes through the collective protocol, one gather and one broadcast per call.
    /// `MpiContext` implements it (`MPI_COMM_WORLD` has a fixed id, every other communicator a
    /// fresh one); one-rank contexts such as [`Singleton`] need none.
    fn communicator_id(&self) -> Option<u64> {
        None
    }
}

/// The serial context: one rank, nothing to coordinate.
#[derive(Debug, Clone, Copy, Default)]
pub struct Singleton;

impl Context for Singleton {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn barrier(&self) {}
    fn broadcast_from_root(&self, data: Option<Vec<u8>>) -> Vec<u8> {
        data.unwrap_or_default()
    }
    fn gather_to_root(&self, data: Vec<u8>) -> Option<Vec<Vec<u8>>> {
        Some(vec![data])
    }
    fn split_by_node(&self) -> Box<dyn Context> {
        Box::new(Singleton)
    }
    fn describe(&self) -> String {
        "the serial context (1 rank)".to_owned()
    }
}

macro_rules! forward_context {
    ($($ty:ty),*) => {$(
        impl<T: Context + ?Sized> Context for $ty {
            fn rank(&self) -> usize {
                (**self).rank()
            }
            fn size(&self) -> usize {
                (**self).size()
            }
            fn barrier(&self) {
                (**self).barrier()
            }
            fn broadcast_from_root(&self, data: Option<Vec<u8>>) -> Vec<u8> {
                (**self).broadcast_from_root(data)
            }
            fn gather_to_root(&self, data: Vec<u8>) -> Option<Vec<Vec<u8>>> {
                (**self).gather_to_root(data)
            }
            fn split_by_node(&self) -> Box<dyn Context> {
                (**self).split_by_node()
            }
            fn describe(&self) -> String {
                (**self).describe()
            }
            fn communicator_id(&self) -> Option<u64> {
                (**self).communicator_id()
            }
        }
    )*};
}
forward_context!(&T, Box<T>, Arc<T>);

/// Collective install: rank 0 of `ctx` calls [`crate::install::ensure_variant`] and broadcasts the
/// outcome (path and origin, or the error); every rank returns the same thing. In node-local mode
/// one rank per node installs into its node's depot.
///
/// **Collective over `ctx`: every rank must call this with the same artifact, in the same order
/// as its other collective calls.** Ranks that ask for different artifacts all get an error (see
/// the [module docs](self)). Every rank records its successful access in the
/// [`registry`] with its rank; the manifest is located in `manifest_dir`.
pub fn ensure_collective(
    ctx: &dyn Context,
    name: &str,
    variant: &ArtifactVariant,
    manifest_dir: &Path,
    config: &Config,
) -> Result<Installed, Error> {
    let manifest = clima_artifact_manifest::Manifest::find_in_dir(manifest_dir)
        .unwrap_or_else(|_| manifest_dir.join("Artifacts.toml"));
    ensure_collective_at(ctx, name, variant, &manifest, None, config)
}

/// [`ensure_collective`] with the manifest file and the `clima_artifact!` call site known, so the
/// provenance record carries them. Same collective semantics.
pub fn ensure_collective_at(
    ctx: &dyn Context,
    name: &str,
    variant: &ArtifactVariant,
    manifest: &Path,
    call_site: Option<(&'static str, u32)>,
    config: &Config,
) -> Result<Installed, Error> {
    let manifest_dir = manifest.parent().unwrap_or(Path::new("."));
    let installed = ensure_collective_unrecorded(ctx, name, variant, manifest_dir, config)?;
    registry::record(AccessEvent {
        name: name.to_owned(),
        hash: variant.git_tree_sha1,
        path: installed.path.clone(),
        origin: installed.origin.clone(),
        call_site,
        manifest: manifest.to_path_buf(),
        metadata: variant.metadata.clone(),
        rank: ctx.rank(),
    });
    Ok(installed)
}

/// [`ensure_collective`] without the registry record, for callers that record the access
/// themselves (the `clima_artifact!` resolver). Same collective semantics.
pub fn ensure_collective_unrecorded(
    ctx: &dyn Context,
    name: &str,
    variant: &ArtifactVariant,
    manifest_dir: &Path,
    config: &Config,
) -> Result<Installed, Error> {
    match node_local_depot(config) {
        None => {
            // Steps 1-3 on the whole context; the misuse verdict travels with the outcome.
            let verdict = check_requests(ctx, name, variant);
            let outcome = (ctx.rank() == 0).then(|| {
                encode_outcome(&match verdict {
                    Some(Err(e)) => Err(e),
                    _ => install_on_root(name, variant, manifest_dir, config),
                })
            });
            decode_outcome(&ctx.broadcast_from_root(outcome))
        }
        Some(node_depot) => {
            ensure_node_local(ctx, name, variant, manifest_dir, config, &node_depot)
        }
    }
}

/// The node depot if node-local mode is on ([`Config::node_local_depot`], read by
/// [`Config::from_env`] from [`NODE_LOCAL_DEPOT_ENV`]).
fn node_local_depot(config: &Config) -> Option<PathBuf> {
    config.node_local_depot.clone()
}

fn ensure_node_local(
    ctx: &dyn Context,
    name: &str,
    variant: &ArtifactVariant,
    manifest_dir: &Path,
    config: &Config,
    node_depot: &Path,
) -> Result<Installed, Error> {
    // 1. Misuse check on the whole context; the verdict must reach everyone before anyone splits.
    let verdict = check_requests(ctx, name, variant);
    let verdict = (ctx.rank() == 0).then(|| {
        encode_outcome(&match verdict {
            Some(Err(e)) => Err(e),
            _ => Ok(Installed {
                path: PathBuf::new(),
                origin: Origin::Depot,
            }),
        })
    });
    decode_outcome(&ctx.broadcast_from_root(verdict))?;

    // 2. One installer per node, into the node depot (placed first).
    let node = ctx.split_by_node();
    let local = (node.rank() == 0).then(|| {
        let result = std::fs::create_dir_all(node_depot)
            .map_err(|e| Error::Other {
                message: format!(
                    "cannot create the node-local depot `{}` (set by {NODE_LOCAL_DEPOT_ENV}): \
                     {e}; point {NODE_LOCAL_DEPOT_ENV} at a writable folder on each node, or \
                     unset it to install into the shared depot",
                    node_depot.display()
                ),
                path: Some(node_depot.to_path_buf()),
            })
            .and_then(|()| {
                let mut node_config = config.clone();
                node_config.depots.retain(|d| d != node_depot);
                node_config.depots.insert(0, node_depot.to_path_buf());
                install_on_root(name, variant, manifest_dir, &node_config)
            });
        encode_outcome(&result)
    });
    let local_bytes = node.broadcast_from_root(local);
    drop(node);

    // 3. Agreement across nodes: if any node failed, everyone fails with that error.
    let gathered = ctx.gather_to_root(local_bytes.clone());
    let global = gathered.map(|all| {
        match all
            .iter()
            .enumerate()
            .find(|(_, b)| b.first() != Some(&OK_TAG))
        {
            Some((rank, bytes)) => {
                let err = annotate(decode_outcome(bytes), rank, ctx);
                encode_outcome(&Err(err))
            }
            None => vec![OK_TAG],
        }
    });
    let global = ctx.broadcast_from_root(global);
    if global.first() == Some(&OK_TAG) {
        decode_outcome(&local_bytes)
    } else {
        decode_outcome(&global)
    }
}

fn annotate(outcome: Result<Installed, Error>, rank: usize, ctx: &dyn Context) -> Error {
    match outcome {
        Err(e) if rank == 0 => e,
        Err(e) => Error::Other {
            message: format!("on the node of rank {rank} of {}: {e}", ctx.describe()),
            path: None,
        },
        Ok(_) => Error::Other {
            message: format!("internal error: rank {rank} reported an unreadable outcome"),
            path: None,
        },
    }
}

/// Step 1: gathers every rank's `(name, hash)` to the root, which compares them. `Some` on the
/// root (`Err` if ranks disagree), `None` elsewhere.
fn check_requests(
    ctx: &dyn Context,
    name: &str,
    variant: &ArtifactVariant,
) -> Option<Result<(), Error>> {
    let hash = variant.git_tree_sha1.to_hex();
    let request = serde_json::to_vec(&(name, &hash)).unwrap_or_default();
    let all = ctx.gather_to_root(request)?;
    let mut mismatches = Vec::new();
    for (rank, bytes) in all.iter().enumerate() {
        let theirs: Option<(String, String)> = serde_json::from_slice(bytes).ok();
        match theirs {
            Some((n, h)) if n == name && h == hash => {}
            Some((n, h)) => mismatches.push(format!("rank {rank} asked for `{n}` ({h})")),
            None => mismatches.push(format!("rank {rank} sent an unreadable request")),
        }
    }
    if mismatches.is_empty() {
        return Some(Ok(()));
    }
    let shown = mismatches.len().min(8);
    let more = if mismatches.len() > shown {
        format!(" and {} more", mismatches.len() - shown)
    } else {
        String::new()
    };
    Some(Err(Error::Other {
        message: format!(
            "collective artifact access out of step on {}: rank 0 asked for `{name}` ({hash}), but \
             {}{more}. Calls with a context are collective: every rank must ask for the same \
             artifact in the same order (or use the serial context for rank-specific artifacts)",
            ctx.describe(),
            mismatches[..shown].join(", "),
        ),
        path: None,
    }))
}

/// Step 2 on a root: the install, with panics turned into an error that can be broadcast.
fn install_on_root(
    name: &str,
    variant: &ArtifactVariant,
    manifest_dir: &Path,
    config: &Config,
) -> Result<Installed, Error> {
    guard_panics(name, || {
        crate::install::ensure_variant(name, variant, manifest_dir, config)
    })
}

/// Runs `install`, turning a panic into an [`Error`] so the root still reaches its broadcast.
fn guard_panics(
    name: &str,
    install: impl FnOnce() -> Result<Installed, Error>,
) -> Result<Installed, Error> {
    catch_unwind(AssertUnwindSafe(install)).unwrap_or_else(|payload| {
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a non-string panic payload".to_owned());
        Err(Error::Other {
            message: format!(
                "the root rank panicked while installing artifact `{name}`: {what}; this is a \
                 bug, please report it with the output above"
            ),
            path: None,
        })
    })
}

const OK_TAG: u8 = b'O';
const ERR_TAG: u8 = b'E';

/// Encodes an outcome as `'O' + JSON(Installed)` or `'E' + Error::to_wire`.
fn encode_outcome(outcome: &Result<Installed, Error>) -> Vec<u8> {
    match outcome {
        Ok(installed) => match serde_json::to_vec(installed) {
            Ok(json) => [&[OK_TAG][..], &json].concat(),
            Err(e) => encode_outcome(&Err(Error::Other {
                message: format!(
                    "cannot send the installed path `{}` to the other ranks: {e}",
                    installed.path.display()
                ),
                path: Some(installed.path.clone()),
            })),
        },
        Err(e) => [&[ERR_TAG][..], &e.to_wire()].concat(),
    }
}

/// Inverse of [`encode_outcome`].
fn decode_outcome(bytes: &[u8]) -> Result<Installed, Error> {
    match bytes.split_first() {
        Some((&OK_TAG, json)) => match serde_json::from_slice::<Installed>(json) {
            Ok(installed) => Ok(installed),
            Err(e) => Err(garbled(&e.to_string())),
        },
        Some((&ERR_TAG, wire)) => Err(Error::from_wire(wire)),
        _ => Err(garbled("unknown tag")),
    }
}

fn garbled(why: &str) -> Error {
    Error::Other {
        message: format!(
            "the root rank's answer could not be decoded ({why}); are all ranks running the same \
             binary?"
        ),
        path: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn installed(origin: Origin) -> Installed {
        Installed {
            path: PathBuf::from("/depot/artifacts/abc"),
            origin,
        }
    }

    #[test]
    fn outcomes_round_trip() {
        for origin in [
            Origin::Depot,
            Origin::Override {
                overrides_file: "/d/artifacts/Overrides.toml".into(),
            },
            Origin::Downloaded {
                url: "http://127.0.0.1:1/x.tar.gz".into(),
                bytes: 12345,
                seconds: 0.25,
            },
        ] {
            let sent = installed(origin);
            let back = decode_outcome(&encode_outcome(&Ok(sent.clone()))).expect("round trip");
            assert_eq!(back, sent);
        }
        let err: Result<Installed, Error> = Err(Error::Other {
            message: "no route to `http://x`".into(),
            path: Some("/p".into()),
        });
        let back = decode_outcome(&encode_outcome(&err)).unwrap_err();
        assert_eq!(back.to_string(), "no route to `http://x`");
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for bytes in [&b""[..], b"X", b"O{not json"] {
            let e = decode_outcome(bytes).unwrap_err();
            assert!(e.to_string().contains("could not be decoded"), "{e}");
        }
    }

    #[test]
    fn singleton_primitives() {
        let s = Singleton;
        assert_eq!(s.broadcast_from_root(Some(vec![1, 2])), vec![1, 2]);
        assert_eq!(s.gather_to_root(vec![3]), Some(vec![vec![3]]));
        assert_eq!(s.split_by_node().size(), 1);
        let boxed: Box<dyn Context> = Box::new(Singleton);
        let by_ref: &dyn Context = &&boxed;
        assert_eq!(by_ref.size(), 1);
    }

    #[test]
    fn singleton_requests_always_agree() {
        let v = variant();
        assert!(matches!(
            check_requests(&Singleton, "era5", &v),
            Some(Ok(()))
        ));
    }

    #[test]
    fn panics_in_the_root_become_errors() {
        let e = guard_panics("era5", || panic!("disk on fire {}", 42)).unwrap_err();
        assert!(
            e.to_string()
                .contains("panicked while installing artifact `era5`"),
            "{e}"
        );
        assert!(e.to_string().contains("disk on fire 42"), "{e}");
        let e = guard_panics("era5", || std::panic::panic_any(7_u8)).unwrap_err();
        assert!(e.to_string().contains("non-string panic payload"), "{e}");
    }

    fn variant() -> ArtifactVariant {
        ArtifactVariant {
            git_tree_sha1: clima_artifact_manifest::GitTreeSha1([7; 20]),
            lazy: false,
            downloads: vec![],
            platform: None,
            metadata: Default::default(),
            line: 1,
        }
    }
}
