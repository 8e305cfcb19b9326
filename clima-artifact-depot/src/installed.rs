//! What making an artifact available returns: where it is and where it came from. A module of
//! its own: this crate's lookups and install locks (which find installed copies) return it,
//! and so does the runtime's install (which makes them), which re-exports both types.

use std::path::PathBuf;

/// How an artifact was made available.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Origin {
    /// An `Overrides.toml` entry points here (never hashed, never downloaded).
    Override {
        /// The overrides file that set it.
        overrides_file: PathBuf,
    },
    /// Already installed in a depot.
    Depot,
    /// Downloaded and installed by this call.
    Downloaded {
        /// The URL that succeeded.
        url: String,
        /// The tarball's size: every byte of it verified
        /// (`received_bytes + reused_bytes`).
        bytes: u64,
        /// Bytes of it received from the source by this call.
        received_bytes: u64,
        /// Bytes of it reused: kept in a partial download by an earlier process (or an
        /// earlier call) and verified again with the rest.
        reused_bytes: u64,
        /// Wall time of the install in seconds.
        seconds: f64,
    },
    /// Installed by this call into this node's depot from bytes received over MPI (node-local
    /// mode): another node downloaded them once for the whole job, or had them installed.
    Received {
        /// This node (`CLIMA_ARTIFACTS_NODE_ID`, else its host name).
        node: String,
        /// The node that sent them.
        from_node: String,
        /// The URL the sender downloaded them from, or `None` when it sent its installed copy.
        url: Option<String>,
        /// Bytes received.
        bytes: u64,
        /// Wall time of the install in seconds.
        seconds: f64,
    },
}

/// The result of making one artifact available.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Installed {
    /// The artifact's directory (or override target).
    pub path: PathBuf,
    /// Where it came from.
    pub origin: Origin,
}

/// How an access is recorded: the origin in the provenance schema, which keeps the overrides
/// file as (lossy) UTF-8 and always has the received and reused byte counts of a download.
impl From<&Origin> for clima_artifact_provenance::RecordedOrigin {
    fn from(origin: &Origin) -> Self {
        use clima_artifact_provenance::RecordedOrigin as Recorded;
        match origin {
            Origin::Override { overrides_file } => Recorded::Override {
                overrides_file: overrides_file.to_string_lossy().into_owned(),
            },
            Origin::Depot => Recorded::Depot,
            Origin::Downloaded {
                url,
                bytes,
                received_bytes,
                reused_bytes,
                seconds,
            } => Recorded::Downloaded {
                url: url.clone(),
                bytes: *bytes,
                received_bytes: Some(*received_bytes),
                reused_bytes: Some(*reused_bytes),
                seconds: *seconds,
            },
            Origin::Received {
                node,
                from_node,
                url,
                bytes,
                seconds,
            } => Recorded::Received {
                node: node.clone(),
                from_node: from_node.clone(),
                url: url.clone(),
                bytes: *bytes,
                seconds: *seconds,
            },
        }
    }
}
