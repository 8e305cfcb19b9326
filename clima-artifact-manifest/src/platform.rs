//! Platform tags of `[[name]]` entries and selection of the entry that fits the host.

use std::collections::BTreeMap;

/// String tags of a platform: at least `os` and `arch`; often `libc`, `libgfortran_version`,
/// `cxxstring_abi`, ... (Julia's `Base.BinaryPlatforms`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Platform {
    /// Tag name -> value, e.g. `os` -> `linux`.
    pub tags: BTreeMap<String, String>,
}

/// No variant of a `[[name]]` entry fits the platform.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectError {
    /// The manifest does not define this name.
    #[error("artifact `{name}` is not defined in `{manifest}`; defined: {}", .defined.join(", "))]
    UnknownName {
        /// The name asked for.
        name: String,
        /// The manifest path.
        manifest: String,
        /// Names the manifest defines.
        defined: Vec<String>,
    },
    /// No variant fits; lists the platforms offered.
    #[error("artifact `{name}` has no variant for this platform ({host}); offered: {}", .offered.join("; "))]
    NoMatch {
        /// The name asked for.
        name: String,
        /// The host platform, rendered.
        host: String,
        /// The platforms the manifest offers, rendered.
        offered: Vec<String>,
    },
}

impl Platform {
    /// The platform of this process: `os`, `arch`, `libc` (and extra tags from the
    /// `CLIMA_ARTIFACTS_PLATFORM_TAGS` env var, `key=value,key=value`).
    pub fn host() -> Platform {
        todo!("manifest helper")
    }

    /// Whether a manifest variant with these tags can run on `self` (the host).
    pub fn matches(&self, variant: &Platform) -> bool {
        todo!("manifest helper {variant:?}")
    }
}

impl std::fmt::Display for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self.tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
        f.write_str(&parts.join(","))
    }
}
