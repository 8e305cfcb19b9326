//! [`Origin`]: where the data of an artifact came from. One type for every crate that speaks
//! of it: the depot's lookups and staging return it, the runtime's install makes it, and the
//! provenance report stores it (re-exported there as `RecordedOrigin`). Its serde form is part
//! of the documented report schema (`docs/report-schema.md`):
//! `{"kind": "override" | "depot" | "downloaded" | "received", ...}`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// How an artifact was made available, and how a report records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Origin {
    /// An `Overrides.toml` entry points here (never hashed, never downloaded).
    Override {
        /// The overrides file that set it (written to reports as lossy UTF-8).
        #[serde(serialize_with = "lossy_path")]
        overrides_file: PathBuf,
    },
    /// Already installed in a depot.
    Depot,
    /// Downloaded and installed by this call (this run, in a report).
    Downloaded {
        /// The URL that succeeded (without credentials).
        url: String,
        /// The tarball's size: every byte of it verified
        /// (`received_bytes + reused_bytes`).
        bytes: u64,
        /// Bytes of it received from the source by this call. Always given by an install;
        /// `None` only in reports of versions before it was recorded.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        received_bytes: Option<u64>,
        /// Bytes of it reused: kept in a partial download by an earlier process (or an
        /// earlier call) and verified again with the rest (`None` like `received_bytes`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reused_bytes: Option<u64>,
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

impl Origin {
    /// How informative this origin is when several accesses disagree: a download in this run
    /// beats a copy received over MPI, which beats an override, which beats a depot hit.
    fn priority(&self) -> u8 {
        match self {
            Origin::Depot => 0,
            Origin::Override { .. } => 1,
            Origin::Received { .. } => 2,
            Origin::Downloaded { .. } => 3,
        }
    }

    /// Keeps `self` unless `other` is strictly more informative: a download in this run beats
    /// a copy received over MPI, which beats an override, which beats a plain depot hit.
    pub fn merge(&mut self, other: &Origin) {
        if other.priority() > self.priority() {
            *self = other.clone();
        }
    }
}

/// A path as a string, lossy where it is not UTF-8 (a report is JSON text).
fn lossy_path<S: serde::Serializer>(path: &Path, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&path.to_string_lossy())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_overrides_file_that_is_not_utf8_is_written_lossy() {
        use std::os::unix::ffi::OsStrExt;
        let origin = Origin::Override {
            overrides_file: PathBuf::from(std::ffi::OsStr::from_bytes(b"/d/\xffOverrides.toml")),
        };
        let json = serde_json::to_string(&origin).unwrap();
        assert_eq!(
            json,
            r#"{"kind":"override","overrides_file":"/d/\uFFFDOverrides.toml"}"#
                .replace(r"\uFFFD", "\u{FFFD}")
        );
        let back: Origin = serde_json::from_str(&json).unwrap();
        assert!(matches!(back, Origin::Override { .. }));
    }
}
