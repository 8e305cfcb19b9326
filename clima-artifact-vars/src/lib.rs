//! # clima-artifact-vars
//!
//! The name of every environment variable the clima-artifacts crates read, in one place (as
//! uv keeps its own in `uv-static`). Code reads a variable through its constant, never a string
//! of its own; [`ALL`] lists each with a one-line summary, which the CLI prints in `--help`
//! ([`help_text`]) and a test holds against the README's table of variables.
//!
//! Who reads what: the runtime's `Config::from_env` (once per configuration) reads the
//! `CLIMA_ARTIFACTS_*` download and depot variables, the Julia ones under interop, the TLS and
//! proxy ones through the network crate; `Platform::host` reads [`PLATFORM_TAGS`]; run sync's
//! `SyncConfig::from_env` the `CLIMA_SYNC_*` ones; the build helper [`BUILD_DENY_WARNINGS`].

/// One environment variable: its name and what it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Var {
    /// The name, e.g. `CLIMA_ARTIFACTS_DEPOT_PATH`.
    pub name: &'static str,
    /// What it does, in one line.
    pub summary: &'static str,
}

macro_rules! vars {
    ($($(#[$doc:meta])* $konst:ident = $name:literal, $summary:literal;)*) => {
        $($(#[$doc])* pub const $konst: &str = $name;)*
        /// Every variable, in the order of the README's table.
        pub const ALL: &[Var] = &[$(Var { name: $konst, summary: $summary }),*];
    };
}

vars! {
    /// Depots to search, colon-separated; installs go to the first writable one.
    DEPOT_PATH = "CLIMA_ARTIFACTS_DEPOT_PATH",
        "colon-separated depots; installs and overrides go to the first writable one";
    /// `1`: never touch the network.
    OFFLINE = "CLIMA_ARTIFACTS_OFFLINE", "1: never touch the network (local sources still install)";
    /// `1`: also search Julia's depots and their overrides.
    JULIA_INTEROP = "CLIMA_ARTIFACTS_JULIA_INTEROP",
        "1: also search Julia's depots (JULIA_DEPOT_PATH) and their overrides";
    /// TCP connect timeout, seconds.
    CONNECT_TIMEOUT = "CLIMA_ARTIFACTS_CONNECT_TIMEOUT", "TCP connect timeout, seconds (30)";
    /// Seconds without a byte before a download is abandoned.
    STALL_TIMEOUT = "CLIMA_ARTIFACTS_STALL_TIMEOUT",
        "abandon a download after this many seconds without a byte (60)";
    /// The low-speed rule's limit, bytes per second.
    LOW_SPEED_LIMIT = "CLIMA_ARTIFACTS_LOW_SPEED_LIMIT",
        "abandon a download slower than this per second over LOW_SPEED_TIME (1K; 0 = off)";
    /// The low-speed rule's window, seconds.
    LOW_SPEED_TIME = "CLIMA_ARTIFACTS_LOW_SPEED_TIME", "the window of the low-speed rule, seconds (60)";
    /// Attempts per URL on transient failures.
    RETRIES = "CLIMA_ARTIFACTS_RETRIES", "attempts per URL on transient failures (3)";
    /// Seconds to wait for another process's install lock.
    LOCK_TIMEOUT = "CLIMA_ARTIFACTS_LOCK_TIMEOUT",
        "seconds to wait for another process installing the same artifact (3600)";
    /// Cap on one artifact's unpacked size.
    MAX_UNPACKED_BYTES = "CLIMA_ARTIFACTS_MAX_UNPACKED_BYTES", "cap on one artifact's unpacked size (1T)";
    /// A Julia package server tried before the manifest's URLs.
    PKG_SERVER = "CLIMA_ARTIFACTS_PKG_SERVER",
        "a Julia package server (or publish --by-hash host) tried before the manifest's URLs";
    /// Largest download a model starts on first use.
    MAX_DOWNLOAD_SIZE = "CLIMA_ARTIFACTS_MAX_DOWNLOAD_SIZE",
        "largest download a model starts on first use (4G; 0 = no limit; fetch is never limited)";
    /// Most connections of one large download.
    CONNECTIONS = "CLIMA_ARTIFACTS_CONNECTIONS",
        "most connections of one large download, 1 to 8 (8; 1 = one stream)";
    /// Smallest download fetched over several connections and kept for resuming.
    PARALLEL_MIN_SIZE = "CLIMA_ARTIFACTS_PARALLEL_MIN_SIZE",
        "downloads this large use several connections and resume across processes (64M)";
    /// Free space an install leaves on the depot's filesystem.
    MIN_FREE_SPACE = "CLIMA_ARTIFACTS_MIN_FREE_SPACE",
        "free space an install leaves on the depot's filesystem (1% or 1G; 0 = off)";
    /// Cap on one artifact's number of archive entries.
    MAX_ENTRIES = "CLIMA_ARTIFACTS_MAX_ENTRIES", "cap on one artifact's archive entries (10000000)";
    /// MPI node-local mode: a depot private to each node.
    NODE_LOCAL_DEPOT = "CLIMA_ARTIFACTS_NODE_LOCAL_DEPOT",
        "MPI node-local mode: one download per job, copied over MPI into each node's depot";
    /// Which "node" this process is on, for node-local mode (testing and diagnostics).
    NODE_ID = "CLIMA_ARTIFACTS_NODE_ID",
        "ranks with the same value form one node in node-local mode (testing; unset = by machine)";
    /// Extra host platform tags.
    PLATFORM_TAGS = "CLIMA_ARTIFACTS_PLATFORM_TAGS",
        "extra host platform tags, key=value,... (e.g. libgfortran_version=5.0.0)";
    /// `0`: no download progress and no informational notices.
    PROGRESS = "CLIMA_ARTIFACTS_PROGRESS",
        "0: no download progress or informational notices (warnings still show)";
    /// TLS roots: a PEM bundle or a folder of PEM files.
    CA_ROOTS = "CLIMA_ARTIFACTS_CA_ROOTS", "TLS roots: a PEM bundle or a folder of PEM files";
    /// Hosts whose certificates are not verified.
    NO_VERIFY_HOSTS = "CLIMA_ARTIFACTS_NO_VERIFY_HOSTS",
        "hosts (*.domain too) whose TLS certificates are not verified (the hashes still are)";
    /// `1`: the build helper's warnings fail the build.
    BUILD_DENY_WARNINGS = "CLIMA_ARTIFACTS_BUILD_DENY_WARNINGS",
        "1: clima_artifact_build::validate() fails the build on warnings";
    /// Run sync: also push the run's output artifacts.
    SYNC_ARTIFACTS = "CLIMA_SYNC_ARTIFACTS", "run sync: 0 moves only checkpoints, not output artifacts";
    /// Run sync: globs of files never synced.
    SYNC_EXCLUDE = "CLIMA_SYNC_EXCLUDE", "run sync: colon-separated globs of files never synced, either way";
    /// Run sync: seconds after which a sync warns that it is slow.
    SYNC_WARN_AFTER = "CLIMA_SYNC_WARN_AFTER", "run sync: warn when a sync takes longer than this, seconds (60)";
    /// Run sync: every rank syncs its own folder.
    SYNC_PER_RANK = "CLIMA_SYNC_PER_RANK", "run sync: 1 when every rank writes a run folder of its own";
    /// Julia's depots (read under interop).
    JULIA_DEPOT_PATH = "JULIA_DEPOT_PATH", "Julia's depots, searched with CLIMA_ARTIFACTS_JULIA_INTEROP=1 (~/.julia)";
    /// Julia's package server (when CLIMA_ARTIFACTS_PKG_SERVER is unset).
    JULIA_PKG_SERVER = "JULIA_PKG_SERVER", "Julia's package server, used when CLIMA_ARTIFACTS_PKG_SERVER is unset";
    /// Julia's TLS roots (read under interop).
    JULIA_SSL_CA_ROOTS_PATH = "JULIA_SSL_CA_ROOTS_PATH", "TLS roots, under interop (after CLIMA_ARTIFACTS_CA_ROOTS)";
    /// Julia's hosts without verification (read under interop).
    JULIA_SSL_NO_VERIFY_HOSTS = "JULIA_SSL_NO_VERIFY_HOSTS", "hosts not verified, under interop";
    /// TLS roots as curl, pip and OpenSSL read them: a PEM bundle.
    SSL_CERT_FILE = "SSL_CERT_FILE", "TLS roots (a PEM bundle) when CLIMA_ARTIFACTS_CA_ROOTS is unset";
    /// TLS roots as OpenSSL reads them: a folder of PEM files.
    SSL_CERT_DIR = "SSL_CERT_DIR", "TLS roots (a folder of PEM files) when SSL_CERT_FILE is unset";
    /// TLS roots of the AWS SDKs (for S3 run sync).
    AWS_CA_BUNDLE = "AWS_CA_BUNDLE", "TLS roots for S3 run sync, before SSL_CERT_FILE";
    /// The proxy of `http://` URLs.
    HTTP_PROXY = "HTTP_PROXY", "proxy for http:// URLs (http_proxy too)";
    /// The proxy of `https://` URLs.
    HTTPS_PROXY = "HTTPS_PROXY", "proxy for https:// URLs (https_proxy too)";
    /// The proxy of both when the specific one is unset.
    ALL_PROXY = "ALL_PROXY", "proxy for both when the specific one is unset (all_proxy too)";
    /// Hosts reached without a proxy.
    NO_PROXY = "NO_PROXY", "hosts reached without a proxy, comma-separated (no_proxy too)";
    /// Where the default depot goes (`$XDG_CACHE_HOME/clima-artifacts`).
    XDG_CACHE_HOME = "XDG_CACHE_HOME", "the default depot is $XDG_CACHE_HOME/clima-artifacts (~/.cache)";
}

/// `1/0`, `true/false`, `yes/no`, `on/off` (any case, surrounding spaces ignored; empty is
/// `false`); `None` for anything else, which callers report with [`BOOL_EXPECTED`].
pub fn parse_bool(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" | "" => Some(false),
        _ => None,
    }
}

/// What a boolean variable accepts, for the error about a value [`parse_bool`] refused.
pub const BOOL_EXPECTED: &str = "expected 1 or 0 (or true/false, yes/no, on/off)";

/// Every variable with its summary, one per line and aligned, under the heading
/// `Environment:` (the CLI's `--help` ends with it).
pub fn help_text() -> String {
    let width = ALL.iter().map(|v| v.name.len()).max().unwrap_or(0);
    let mut text = String::from("Environment:");
    for var in ALL {
        text.push_str(&format!("\n  {:width$}  {}", var.name, var.summary));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_listed_in_the_help() {
        let mut names: Vec<&str> = ALL.iter().map(|v| v.name).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(names.len(), before, "a variable is listed twice");
        let help = help_text();
        for var in ALL {
            assert!(help.contains(var.name), "{}", var.name);
        }
    }

    #[test]
    fn booleans() {
        for (text, want) in [
            ("1", Some(true)),
            (" Yes ", Some(true)),
            ("off", Some(false)),
        ] {
            assert_eq!(parse_bool(text), want, "{text}");
        }
        assert_eq!(parse_bool("maybe"), None);
    }
}
