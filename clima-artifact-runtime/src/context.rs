//! The communication context: who is the root, and how the outcome reaches every rank
//! (specified in full by the MPI helper).

/// A communicator over which artifact access is collective.
///
/// Every method is collective: all ranks of the communicator must call it in the same order.
pub trait Context: Send + Sync {
    /// This process's rank, `0..size()`.
    fn rank(&self) -> usize;
    /// Number of ranks.
    fn size(&self) -> usize;
    /// Waits until every rank reached this point.
    fn barrier(&self);
    /// Rank 0 passes `Some(bytes)`, the others `None`; every rank gets rank 0's bytes.
    fn broadcast_from_root(&self, data: Option<Vec<u8>>) -> Vec<u8>;
    /// Every rank passes its bytes; rank 0 gets all of them in rank order, the others `None`.
    fn gather_to_root(&self, data: Vec<u8>) -> Option<Vec<Vec<u8>>>;
    /// A context over the ranks that share this node (shared-memory split).
    fn split_by_node(&self) -> Box<dyn Context>;
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
}

/// Collective install: rank 0 of `ctx` calls [`crate::install::ensure_variant`] and broadcasts the
/// outcome (path and origin, or the error); every rank returns the same thing. In node-local mode
/// one rank per node installs into its node's depot. Owned by the MPI helper.
pub fn ensure_collective(
    ctx: &dyn Context,
    name: &str,
    variant: &clima_artifact_manifest::ArtifactVariant,
    manifest_dir: &std::path::Path,
    config: &crate::Config,
) -> Result<crate::install::Installed, crate::Error> {
    todo!(
        "MPI helper {} {name} {variant:?} {} {config:?}",
        ctx.rank(),
        manifest_dir.display()
    )
}
