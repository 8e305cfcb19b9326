//! Runtime configuration, read from environment variables (specified in full by the install helper).

use std::path::PathBuf;
use std::time::Duration;

/// Settings of the install pipeline and lookups. [`Config::from_env`] reads the `CLIMA_ARTIFACTS_*`
/// variables; fields are public so tests and tools can build one directly.
#[derive(Debug, Clone)]
pub struct Config {
    /// Depots searched in order; installs go to the first writable one.
    pub depots: Vec<PathBuf>,
    /// Never touch the network (`CLIMA_ARTIFACTS_OFFLINE=1`).
    pub offline: bool,
    /// Also search Julia depots (`JULIA_DEPOT_PATH`, default `~/.julia`) and their overrides.
    pub julia_interop: bool,
    /// TCP connect timeout.
    pub connect_timeout: Duration,
    /// Longest time without receiving a byte before a download is abandoned.
    pub stall_timeout: Duration,
    /// Attempts per URL for transient failures.
    pub retries: u32,
    /// How long to wait for another process's lock on an artifact.
    pub lock_timeout: Duration,
    /// Cap on the unpacked size of one artifact.
    pub max_unpacked_bytes: u64,
    /// Show progress bars (when stderr is a terminal).
    pub progress: bool,
}
