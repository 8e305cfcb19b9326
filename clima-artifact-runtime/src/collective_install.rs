//! Collective installs: who installs an artifact under MPI, and how its outcome reaches every
//! rank. The contexts themselves ([`Context`], [`Singleton`](clima_comms::Singleton),
//! `MpiContext`) and the generic "root decides" step live in `clima-comms`.
//!
//! # Calls with a context are COLLECTIVE
//!
//! **Every rank of the context must make the same call, for the same artifact, in the same
//! order.** A rank that skips a call, or calls for a different artifact, leaves the others waiting
//! in a broadcast (a hang), exactly like a mismatched `MPI_Bcast`. What can be detected becomes
//! an error on every rank instead of a hang or wrong data:
//!
//! - ranks asking for *different* artifacts (name or git-tree-sha1) in the same collective call:
//!   every rank returns [`Error::RanksOutOfStep`] naming the ranks and what each asked for;
//! - a failure or a panic of the root's install: every rank returns the same error.
//!
//! What cannot be detected is a rank that never makes the call at all.
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
//!  1. gather  request {name, hash}  <-----  request {name, hash}     (clima_comms::requests_agree)
//!             compare all requests
//!  2. bcast   install (ensure_variant,       decode, same Ok / Err   (clima_comms::root_decides)
//!             panics caught) -> Ok / Err ---->
//!  3. every rank: access_log::record(.., rank) on Ok
//! ```
//!
//! Node-local mode ([`Config::node_local_depot`], from env `CLIMA_ARTIFACTS_NODE_LOCAL_DEPOT=<path>`,
//! e.g. `$TMPDIR/depot` on each node): step 1 runs on the whole context, and its verdict is
//! broadcast; then the context is split into nodes (by `CLIMA_ARTIFACTS_NODE_ID` when set, else
//! by machine) and one leader per node; the leaders make the artifact available in every node
//! depot with one download for the whole job, copied over MPI ([`crate::node_stream`]), and
//! each leader hands its node's path, or the error every leader got, to the ranks of its node.

use std::path::{Path, PathBuf};

use clima_artifact_manifest::ArtifactVariant;
use clima_comms::{Context, requests_agree, root_decides};

use crate::Installed;
use crate::access_log;
use crate::depot::Depot;
use crate::install::Install;
use crate::{Config, Error};

/// Collective install: rank 0 of `ctx` calls [`crate::ensure_variant`] and broadcasts the
/// outcome (path and origin, or the error); every rank returns the same thing. In node-local mode
/// one rank per node installs into its node's depot.
///
/// **Collective over `ctx`: every rank must call this with the same artifact, in the same order
/// as its other collective calls.** Ranks that ask for different artifacts all get
/// [`Error::RanksOutOfStep`] (see docs/mpi.md). Every rank records its successful
/// access in the provenance [`access_log`] with its rank. `manifest_dir` is the manifest file
/// or its folder (see [`ensure_variant`](crate::ensure_variant)).
pub fn ensure_collective(
    ctx: &dyn Context,
    name: &str,
    variant: &ArtifactVariant,
    manifest_dir: &Path,
    config: &Config,
) -> Result<Installed, Error> {
    // The manifest file is found on the installing ranks and sent with the answer, so the
    // other ranks make no file operation at all.
    let (installed, manifest) =
        ensure_collective_unrecorded(ctx, name, variant, manifest_dir, config)?;
    access_log::record(crate::access::access_event(
        &installed,
        name,
        variant,
        manifest,
        None,
        ctx.rank(),
    ));
    Ok(installed)
}

/// The manifest file that `manifest_dir` names (see `ManifestPlace`).
fn manifest_file(manifest_dir: &Path) -> PathBuf {
    crate::install::ManifestPlace::of(manifest_dir).file
}

/// [`ensure_collective`] without the provenance record, for callers that record the access
/// themselves (the `clima_artifact!` resolver), with the manifest file the installing rank
/// found. Same collective semantics.
pub(crate) fn ensure_collective_unrecorded(
    ctx: &dyn Context,
    name: &str,
    variant: &ArtifactVariant,
    manifest_dir: &Path,
    config: &Config,
) -> Result<(Installed, PathBuf), Error> {
    let verdict = check_requests(ctx, name, variant);
    if let Some(node_depot) = &config.node_local_depot {
        return ensure_node_local(
            ctx,
            name,
            variant,
            manifest_dir,
            config,
            node_depot,
            verdict,
        );
    }
    // Steps 1-2 on the whole context; the misuse verdict travels with the outcome.
    root_decides(ctx, &format!("installing artifact `{name}`"), || {
        verdict.unwrap_or(Ok(()))?;
        let install = Install::new(name, variant, manifest_dir, config);
        let installed = install.ensure(None)?;
        Ok((installed, install.manifest().file.clone()))
    })
}

fn ensure_node_local(
    ctx: &dyn Context,
    name: &str,
    variant: &ArtifactVariant,
    manifest_dir: &Path,
    config: &Config,
    node_depot: &Depot,
    verdict: Option<Result<(), Error>>,
) -> Result<(Installed, PathBuf), Error> {
    // 1. Misuse check on the whole context; the verdict must reach everyone before anyone splits.
    root_decides(ctx, "checking the requests of every rank", || {
        verdict.unwrap_or(Ok(()))
    })?;

    // 2. The nodes, and one leader per node (rank 0 of the context leads its node).
    let node = crate::node_stream::split_nodes(ctx, config)?;
    let leaders = ctx.split((node.rank() == 0).then_some(0), 0);

    // 3. The leaders make the artifact available on every node with one download at most;
    //    the other ranks wait for their leader's outcome (an error is the same everywhere).
    let mut node_config = config.clone();
    node_config.depots.retain(|d| d != node_depot);
    node_config.depots.insert(0, node_depot.clone());
    root_decides(&*node, &format!("installing artifact `{name}`"), || {
        let Some(leaders) = leaders.as_deref() else {
            return Err(Error::from(clima_comms::CollectiveError::Undecodable {
                rank: ctx.rank(),
                why: "the first rank of a node is not among the node leaders".into(),
            }));
        };
        let me = crate::node_stream::Leader {
            name,
            variant,
            manifest_dir,
            config: &node_config,
            node_depot,
            node: crate::node_stream::node_name(config),
            world_rank: ctx.rank(),
            world: ctx.describe(),
        };
        crate::node_stream::lead(leaders, &me).map(|i| (i, manifest_file(manifest_dir)))
    })
}

/// Step 1: gathers every rank's `(name, hash)` to the root, which compares them. `Some` on the
/// root (`Err` if ranks disagree), `None` elsewhere.
fn check_requests(
    ctx: &dyn Context,
    name: &str,
    variant: &ArtifactVariant,
) -> Option<Result<(), Error>> {
    let hash = variant.git_tree_sha1.to_hex();
    let request = (name.to_owned(), hash.clone());
    let mismatches = requests_agree(ctx, &request)?;
    if mismatches.is_empty() {
        return Some(Ok(()));
    }
    Some(Err(Error::RanksOutOfStep {
        context: ctx.describe(),
        root_request: format!("`{name}` ({hash})"),
        mismatches: mismatches
            .into_iter()
            .map(|(rank, theirs)| {
                let what = match theirs {
                    Some((n, h)) => format!("`{n}` ({h})"),
                    None => "something unreadable".to_owned(),
                };
                (rank, what)
            })
            .collect(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clima_comms::Singleton;

    #[test]
    fn singleton_requests_always_agree() {
        let v = ArtifactVariant {
            git_tree_sha1: clima_artifact_manifest::GitTreeSha1([7; 20]),
            git_tree_sha256: None,
            lazy: false,
            downloads: vec![],
            platform: None,
            metadata: Default::default(),
            line: 1,
        };
        assert!(matches!(
            check_requests(&Singleton, "era5", &v),
            Some(Ok(()))
        ));
    }

    #[test]
    fn outcomes_round_trip_through_the_root() {
        let sent = Installed {
            path: std::path::PathBuf::from("/depot/artifacts/abc"),
            origin: crate::Origin::Downloaded {
                url: "http://127.0.0.1:1/x.tar.gz".into(),
                bytes: 12345,
                received_bytes: Some(12000),
                reused_bytes: Some(345),
                seconds: 0.25,
            },
        };
        let back = root_decides::<_, Error>(&Singleton, "x", || Ok(sent.clone())).unwrap();
        assert_eq!(back, sent);
    }
}
