//! Runtime configuration, read from environment variables.
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `CLIMA_ARTIFACTS_DEPOT_PATH` | colon-separated depots; installs go to the first writable one; an empty entry is the default depot at that position (as in Julia's `JULIA_DEPOT_PATH`), so `/scratch/depot:` adds the default after `/scratch/depot` | `$XDG_CACHE_HOME/clima-artifacts` (`~/.cache/clima-artifacts`) |
//! | `CLIMA_ARTIFACTS_OFFLINE` | `1`: never touch the network; local-path and `file://` download sources still install | `0` |
//! | `CLIMA_ARTIFACTS_JULIA_INTEROP` | `1`: also search Julia depots (`JULIA_DEPOT_PATH`, default `~/.julia`) and their overrides | `0` |
//! | `CLIMA_ARTIFACTS_CONNECT_TIMEOUT` | TCP connect timeout, seconds | `30` |
//! | `CLIMA_ARTIFACTS_STALL_TIMEOUT` | abandon a download after this many seconds without a byte | `60` |
//! | `CLIMA_ARTIFACTS_LOW_SPEED_LIMIT` | with `..._LOW_SPEED_TIME`, as curl's `--speed-limit`/`--speed-time`: abandon a download that averages fewer bytes per second than this over that many seconds (a trickling server must not hold the install lock forever); `0` turns it off | `1K` |
//! | `CLIMA_ARTIFACTS_LOW_SPEED_TIME` | the window of the low-speed rule, seconds | `60` |
//! | `CLIMA_ARTIFACTS_RETRIES` | attempts per URL for transient failures (connect, reset, 5xx, 429) | `3` |
//! | `CLIMA_ARTIFACTS_LOCK_TIMEOUT` | seconds to wait for another process installing the same artifact | `3600` |
//! | `CLIMA_ARTIFACTS_MAX_UNPACKED_BYTES` | cap on one artifact's unpacked size; suffixes `K`, `M`, `G`, `T` (powers of 1024) | `1T` |
//! | `CLIMA_ARTIFACTS_CA_ROOTS` (and `JULIA_SSL_CA_ROOTS_PATH` under interop), else `SSL_CERT_FILE`, else `SSL_CERT_DIR` | TLS roots: a PEM bundle or a folder of PEM files (an institution's CA, a TLS-inspecting proxy); without them the system's CA bundle, else the bundled Mozilla roots (see [`trust`](crate::trust)) | system bundle |
//! | `CLIMA_ARTIFACTS_NO_VERIFY_HOSTS` (and `JULIA_SSL_NO_VERIFY_HOSTS` under interop) | comma-separated hosts (`*.domain` for a domain) whose certificates are not verified, with a warning on each use; the hashes still check the data | unset |
//! | `CLIMA_ARTIFACTS_PKG_SERVER` (else `JULIA_PKG_SERVER`) | a Julia package server, or any static host laid out by `publish --by-hash`: `<server>/artifact/<git-tree-sha1>` is tried before the manifest's URLs (verified by its tree hash; a failure falls through to them); a bare host gets `https://`; empty = off | unset |
//! | `CLIMA_ARTIFACTS_MAX_DOWNLOAD_SIZE` | largest download a model may start on first use (`clima_artifact!`, `Artifacts::ensure_installed`); larger ones fail before any request (by the manifest's `size`) or right after the response headers (by `Content-Length`), saying how to fetch them explicitly (`clima-artifacts fetch NAME`, never limited) or override them; `K`/`M`/`G`/`T` suffixes; `0` = no limit | `4G` |
//! | `CLIMA_ARTIFACTS_CONNECTIONS` | most connections of one large download (1 to 8): a download of at least `..._PARALLEL_MIN_SIZE` bytes from a server that serves byte ranges with an ETag or Last-Modified is fetched in chunks over this many ranged connections, fed in order to the same verification pass; `1` keeps one stream. Also the most requests this process has in flight to one server at once (first requests, chunks, retries and other downloads included) | `8` |
//! | `CLIMA_ARTIFACTS_PARALLEL_MIN_SIZE` | smallest `Content-Length` downloaded that way; such a download also keeps what it received in `<depot>/artifacts/.partial-*` so that the next attempt, of any process on any host sharing the depot, continues it; `K`/`M`/`G`/`T` suffixes | `64M` |
//! | `CLIMA_ARTIFACTS_MIN_FREE_SPACE` | free space an install leaves on the depot's filesystem: unpacking stops with an error (and its temp dir is removed) before going below it; `K`/`M`/`G`/`T` suffixes; `0` turns it off | 1% of the filesystem or 1 GiB, whichever is smaller |
//! | `CLIMA_ARTIFACTS_INSTALL_THREADS` | workers that decompress, check and write the members of a seekable tarball at once (1 to 256) | the available cores |
//! | `CLIMA_ARTIFACTS_MAX_ENTRIES` | cap on one artifact's number of archive entries (files, directories, links) | `10000000` |
//! | `CLIMA_ARTIFACTS_NODE_LOCAL_DEPOT` | MPI node-local mode: a depot path private to each node; the job downloads once and the tarball is copied over MPI to one rank per node, which verifies and installs it there | unset |
//! | `CLIMA_ARTIFACTS_NODE_ID` | in node-local mode, ranks with the same value (any string) form one node, instead of the ranks sharing a machine: a knob for testing and diagnosing node-local mode on one machine | unset |
//! | `CLIMA_ARTIFACTS_PROGRESS` | `0` hides download progress (bars on a terminal, plain lines otherwise) and informational notices (lock waits, resumes); warnings still show | `1` |
//! | `CLIMA_ARTIFACTS_PLATFORM_TAGS` | extra host platform tags `key=value,...` (read by [`Platform::host`](clima_artifact_manifest::Platform::host)) | unset |
//!
//! Booleans accept `1/0`, `true/false`, `yes/no`, `on/off`. Durations accept fractional seconds.
//! A value that cannot be used is an [`Error::Config`] naming the variable.

use clima_artifact_progress::Reporting;
use std::path::PathBuf;
use std::time::Duration;

use clima_artifact_net::{NetConfig, ProxySettings};

use crate::Error;
use crate::notice::InstallEvent;
use clima_artifact_depot::Depot;
use clima_artifact_vars as vars;

/// Settings of the install pipeline and lookups. [`Config::from_env`] reads the `CLIMA_ARTIFACTS_*`
/// variables (the table of docs/environment.md); fields are public so tests and tools can build one
/// directly, e.g. `Config { depots: vec![Depot::new(dir)], ..Config::default() }`.
#[derive(Debug, Clone)]
pub struct Config {
    /// Depots searched in order; installs go to the first writable one.
    pub depots: Vec<Depot>,
    /// Never touch the network (`CLIMA_ARTIFACTS_OFFLINE=1`); local-path and `file://`
    /// download sources are still used.
    pub offline: bool,
    /// Also search Julia depots (`JULIA_DEPOT_PATH`, default `~/.julia`) and their overrides.
    pub julia_interop: bool,
    /// Julia's depots to search when [`Config::julia_interop`] is set; `None` reads
    /// `JULIA_DEPOT_PATH` (default `~/.julia`) at lookup time (see
    /// [`julia_depots`](crate::depot::julia_depots)).
    pub julia_depots: Option<Vec<Depot>>,
    /// The network settings of downloads, as the network crate takes them: timeouts
    /// (`CLIMA_ARTIFACTS_CONNECT_TIMEOUT`, `..._STALL_TIMEOUT`), the low-speed rule
    /// (`..._LOW_SPEED_LIMIT`, `..._LOW_SPEED_TIME`), the retry policy (`..._RETRIES`, and
    /// the backoff), TLS roots and hosts without verification, proxies (`HTTP_PROXY`, ...),
    /// connections of a large download (`..._CONNECTIONS`, `..._PARALLEL_MIN_SIZE`). Their
    /// defaults are [`NetConfig::default`]'s, held there alone. It also holds where
    /// everything the user sees goes, [`NetConfig::reporting`] ([`Config::reporting`]): a
    /// program that draws its own progress sets `config.net.reporting =
    /// Reporting::to(its_reporter)`.
    pub net: NetConfig,
    /// How long to wait for another process's lock on an artifact.
    pub lock_timeout: Duration,
    /// Cap on the unpacked size of one artifact.
    pub max_unpacked_bytes: u64,
    /// Cap on the number of archive entries of one artifact (`CLIMA_ARTIFACTS_MAX_ENTRIES`).
    pub max_entries: u64,
    /// A Julia package server (or a folder/bucket served as one): `<server>/artifact/<hash>`
    /// is tried before the manifest's URLs (`CLIMA_ARTIFACTS_PKG_SERVER`, else
    /// `JULIA_PKG_SERVER`; `None`: not used).
    pub pkg_server: Option<String>,
    /// Largest download started implicitly, by a model's first use
    /// (`CLIMA_ARTIFACTS_MAX_DOWNLOAD_SIZE`; `None`: no limit). Explicit fetches (the CLI's
    /// `fetch`) set it to `None`.
    pub max_download_size: Option<u64>,
    /// Free space an install leaves on the depot's filesystem
    /// (`CLIMA_ARTIFACTS_MIN_FREE_SPACE`); `None`: 1% of the filesystem or 1 GiB, whichever is
    /// smaller; `Some(0)`: not checked.
    pub min_free_space: Option<u64>,
    /// Report download progress (bars on a terminal, plain lines otherwise) and informational
    /// notices such as lock waits and resumed downloads (`CLIMA_ARTIFACTS_PROGRESS`); `false`
    /// keeps only warnings (see [`progress`](crate::progress)).
    pub progress: bool,
    /// MPI node-local mode (`CLIMA_ARTIFACTS_NODE_LOCAL_DEPOT`): a depot private to each node.
    pub node_local_depot: Option<Depot>,
    /// Which node this process counts as in node-local mode (`CLIMA_ARTIFACTS_NODE_ID`): ranks
    /// with the same value form one node; `None` groups the ranks that share a machine.
    pub node_id: Option<String>,
    /// Workers that unpack a seekable tarball (`CLIMA_ARTIFACTS_INSTALL_THREADS`, 1 to 256);
    /// `None`: the available cores.
    pub install_threads: Option<usize>,
}

/// Default of [`Config::max_download_size`]: 4 GiB (the limit `validate` warns about).
pub const DEFAULT_MAX_DOWNLOAD_SIZE: u64 =
    clima_artifact_manifest::validate::DEFAULT_MAX_DOWNLOAD_SIZE;

/// Default of [`Config::max_entries`]: 10 million archive entries.
pub const DEFAULT_MAX_ENTRIES: u64 = clima_artifact_extract::DEFAULT_MAX_ENTRIES;

/// Name of the depot folder under the user cache directory.
pub const CACHE_DIR_NAME: &str = "clima-artifacts";

impl Default for Config {
    /// Built-in defaults (no environment variables read): the user cache depot, online, the
    /// network's defaults ([`NetConfig::default`]: 30 s connect, 60 s stall, abandon below
    /// 1 KiB/s over 60 s, 3 attempts, ...), 1 h lock wait, 1 TiB and 10 million entries caps,
    /// progress on.
    fn default() -> Config {
        Config {
            depots: default_depot().into_iter().map(Depot::new).collect(),
            offline: false,
            julia_interop: false,
            julia_depots: None,
            net: NetConfig::default(),
            lock_timeout: Duration::from_secs(3600),
            max_unpacked_bytes: clima_artifact_extract::DEFAULT_MAX_UNPACKED_BYTES,
            max_entries: DEFAULT_MAX_ENTRIES,
            min_free_space: None,
            max_download_size: Some(DEFAULT_MAX_DOWNLOAD_SIZE),
            pkg_server: None,
            progress: true,
            node_local_depot: None,
            node_id: None,
            install_threads: None,
        }
    }
}

/// The default depot: `<user cache dir>/clima-artifacts` (XDG: `$XDG_CACHE_HOME` or `~/.cache`).
pub fn default_depot() -> Option<PathBuf> {
    dirs::cache_dir().map(|d| d.join(CACHE_DIR_NAME))
}

/// The `Overrides.toml` that error messages suggest adding a line to: the first depot's of
/// `config`, whose entries win over all others.
pub(crate) fn suggested_overrides_file(config: &Config) -> PathBuf {
    match config.depots.first() {
        Some(first) => first.overrides_path(),
        None => Depot::new(default_depot().unwrap_or_else(|| "<depot>".into())).overrides_path(),
    }
}

impl Config {
    /// Where downloads' progress and every notice of an install go (held in
    /// [`Config::net`], passed down to the depot, the network and the runtime; by default
    /// today's lines on stderr: [`Reporting::default`]).
    pub fn reporting(&self) -> &Reporting {
        &self.net.reporting
    }

    /// Every depot lookups search, in order: [`Config::depots`], then Julia's depots
    /// ([`Config::julia_depots`], else [`julia_depots`](crate::depot::julia_depots)) when
    /// [`Config::julia_interop`] is set.
    pub fn search_depots(&self) -> Vec<Depot> {
        let julia = self.julia_interop.then(|| {
            self.julia_depots
                .clone()
                .unwrap_or_else(clima_artifact_depot::julia_depots)
        });
        clima_artifact_depot::search_order(&self.depots, julia)
    }

    /// Reads the `CLIMA_ARTIFACTS_*` environment variables (the table of docs/environment.md); unset
    /// variables keep their [`Default`]. A bad value is an [`Error::Config`] naming the variable.
    pub fn from_env() -> Result<Config, Error> {
        Config::from_vars(|k| std::env::var_os(k).map(|v| v.to_string_lossy().into_owned()))
    }

    /// Like [`Config::from_env`], reading variables through `get` (for tests and tools).
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<Config, Error> {
        let mut c = Config::default();
        // Each variable once: its name, the field it sets, and how its value is read.
        let set = |name: &str| get(name).map(|v| (name.to_owned(), v));
        let read = |name: &str| set(name).map(|(n, v)| parse_bool(&n, &v)).transpose();
        if let Some(v) = get(vars::DEPOT_PATH).filter(|v| !v.is_empty()) {
            c.depots = parse_depots(&v)?;
        }
        if let Some(b) = read(vars::OFFLINE)? {
            c.offline = b;
        }
        if let Some(b) = read(vars::JULIA_INTEROP)? {
            c.julia_interop = b;
        }
        if let Some(b) = read(vars::PROGRESS)? {
            c.progress = b;
        }
        let seconds = |name: &str, field: &mut Duration| -> Result<(), Error> {
            if let Some((n, v)) = set(name) {
                *field = parse_seconds(&n, &v)?;
            }
            Ok(())
        };
        seconds(vars::CONNECT_TIMEOUT, &mut c.net.connect_timeout)?;
        seconds(vars::STALL_TIMEOUT, &mut c.net.stall_timeout)?;
        seconds(vars::LOW_SPEED_TIME, &mut c.net.low_speed_time)?;
        seconds(vars::LOCK_TIMEOUT, &mut c.lock_timeout)?;
        // `0` turns these limits off.
        let zero_or_bytes = |n: &str, v: &str| match v.trim() {
            "0" => Ok(None),
            _ => parse_bytes(n, v).map(Some),
        };
        if let Some((n, v)) = set(vars::LOW_SPEED_LIMIT) {
            c.net.low_speed_limit = zero_or_bytes(&n, &v)?.unwrap_or(0);
        }
        if let Some((n, v)) = set(vars::MAX_DOWNLOAD_SIZE) {
            c.max_download_size = zero_or_bytes(&n, &v)?;
        }
        if let Some((n, v)) = set(vars::MIN_FREE_SPACE) {
            c.min_free_space = Some(zero_or_bytes(&n, &v)?.unwrap_or(0));
        }
        if let Some((n, v)) = set(vars::MAX_UNPACKED_BYTES) {
            c.max_unpacked_bytes = parse_bytes(&n, &v)?;
        }
        if let Some((n, v)) = set(vars::RETRIES) {
            c.net.retry.attempts = parse_count(&n, &v, "attempts")? as u32;
        }
        if let Some((n, v)) = set(vars::CONNECTIONS) {
            let most = clima_artifact_net::ranged::MAX_CONNECTIONS;
            c.net.connections = match v.trim().parse::<usize>() {
                Ok(k) if (1..=most).contains(&k) => k,
                // Out of range: the nearest allowed number, said once, so a command that
                // downloads nothing (`list`) is not stopped by it.
                Ok(k) => {
                    let used = k.clamp(1, most);
                    static TOLD: std::sync::Once = std::sync::Once::new();
                    TOLD.call_once(|| {
                        c.net.reporting.emit(InstallEvent::ConfigOutOfRange {
                            variable: n.clone(),
                            value: v.clone(),
                            min: 1,
                            max: most as u64,
                            used: used as u64,
                        });
                    });
                    used
                }
                Err(_) => {
                    let reason = format!("expected a number of connections from 1 to {most}");
                    return Err(bad(&n, &v, &reason));
                }
            };
        }
        if let Some((n, v)) = set(vars::PARALLEL_MIN_SIZE) {
            c.net.parallel_min_size = parse_bytes(&n, &v)?;
        }
        if let Some((n, v)) = set(vars::INSTALL_THREADS) {
            c.install_threads = Some(parse_threads(&n, &v)?);
        }
        if let Some((n, v)) = set(vars::MAX_ENTRIES) {
            c.max_entries = parse_count(&n, &v, "archive entries")?;
        }
        if let Some(v) = get(vars::PKG_SERVER).or_else(|| get(vars::JULIA_PKG_SERVER)) {
            c.pkg_server = vars::pkg_server_url(&v);
        }
        c.read_trust_and_proxy(&get)?;
        if let Some(v) = get(vars::NODE_LOCAL_DEPOT) {
            let p = PathBuf::from(&v);
            if v.is_empty() || p.is_relative() {
                return Err(bad(
                    vars::NODE_LOCAL_DEPOT,
                    &v,
                    "expected an absolute path to a directory on node-local storage",
                ));
            }
            c.node_local_depot = Some(Depot::new(p));
        }
        c.node_id = get(vars::NODE_ID).filter(|v| !v.is_empty());
        Ok(c)
    }

    /// The part of [`Config::from_vars`] that reads how servers are trusted and reached: the CA
    /// roots, the hosts whose certificates are not checked (Julia's list too with
    /// [`Config::julia_interop`], so that must be read before), and the proxy settings.
    fn read_trust_and_proxy(&mut self, get: &impl Fn(&str) -> Option<String>) -> Result<(), Error> {
        let config_error = |(variable, value, reason)| Error::Config {
            variable,
            value,
            reason,
        };
        self.net.ca_roots =
            clima_artifact_net::trust::ca_roots_from_vars(get, self.julia_interop, false)
                .map_err(config_error)?;
        let mut hosts_vars = vec![vars::NO_VERIFY_HOSTS];
        if self.julia_interop {
            hosts_vars.push(vars::JULIA_SSL_NO_VERIFY_HOSTS);
        }
        for v in hosts_vars.into_iter().filter_map(get) {
            let hosts = v.split(',').map(str::trim).filter(|h| !h.is_empty());
            self.net.no_verify_hosts.extend(hosts.map(str::to_owned));
        }
        self.net.proxy = ProxySettings::from_vars(get).map_err(config_error)?;
        Ok(())
    }
}

/// `CLIMA_ARTIFACTS_DEPOT_PATH`: as Julia reads `JULIA_DEPOT_PATH`, an empty entry is the
/// default depot at that position (`/scratch/depot:` = that depot, then the default one).
fn parse_depots(v: &str) -> Result<Vec<Depot>, Error> {
    let mut depots: Vec<PathBuf> = Vec::new();
    for part in v.split(':') {
        let depot = if part.is_empty() {
            default_depot().ok_or_else(|| {
                bad(
                    vars::DEPOT_PATH,
                    v,
                    "an empty entry means the default depot, but this system has no user cache \
                     directory; list every depot explicitly",
                )
            })?
        } else {
            PathBuf::from(part)
        };
        if !depots.contains(&depot) {
            depots.push(depot);
        }
    }
    if let Some(rel) = depots.iter().find(|d| d.is_relative()) {
        return Err(bad(
            vars::DEPOT_PATH,
            v,
            &format!("`{}` is a relative path; use absolute paths", rel.display()),
        ));
    }
    Ok(depots.into_iter().map(Depot::new).collect())
}

/// A whole number of `what`, at least 1.
fn parse_count(variable: &str, v: &str, what: &str) -> Result<u64, Error> {
    vars::parse_count(v).ok_or_else(|| {
        let reason = format!("expected a whole number of {what}, at least 1");
        bad(variable, v, &reason)
    })
}

/// A number of workers, from 1 to the most a seekable install starts.
fn parse_threads(variable: &str, v: &str) -> Result<usize, Error> {
    let most = clima_artifact_extract::seekable::MAX_THREADS;
    match vars::parse_count(v) {
        Some(k) if k <= most as u64 => Ok(k as usize),
        _ => {
            let reason = format!("expected a number of workers from 1 to {most}");
            Err(bad(variable, v, &reason))
        }
    }
}

fn bad(variable: &str, value: &str, reason: &str) -> Error {
    Error::Config {
        variable: variable.to_owned(),
        value: value.to_owned(),
        reason: reason.to_owned(),
    }
}

fn parse_bool(variable: &str, v: &str) -> Result<bool, Error> {
    vars::parse_bool(v).ok_or_else(|| bad(variable, v, vars::BOOL_EXPECTED))
}

fn parse_seconds(variable: &str, v: &str) -> Result<Duration, Error> {
    vars::parse_seconds(v).ok_or_else(|| bad(variable, v, vars::SECONDS_EXPECTED))
}

fn parse_bytes(variable: &str, v: &str) -> Result<u64, Error> {
    vars::parse_bytes(v).ok_or_else(|| bad(variable, v, vars::BYTES_EXPECTED))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn cfg(vars: &[(&str, &str)]) -> Result<Config, Error> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_vars(|k| m.get(k).cloned())
    }

    #[test]
    fn install_threads_are_refused_beyond_the_cap_naming_the_variable_and_the_range() {
        let threads = |v: &str| cfg(&[("CLIMA_ARTIFACTS_INSTALL_THREADS", v)]);
        assert_eq!(threads("1").unwrap().install_threads, Some(1));
        assert_eq!(threads("256").unwrap().install_threads, Some(256));
        for v in ["257", "100000", "18446744073709551615", "0"] {
            let e = threads(v).expect_err(v).to_string();
            assert!(e.contains("CLIMA_ARTIFACTS_INSTALL_THREADS"), "{e}");
            assert!(e.contains("from 1 to 256"), "{e}");
        }
    }

    #[test]
    fn reads_every_variable() {
        let c = cfg(&[
            ("CLIMA_ARTIFACTS_DEPOT_PATH", "/a:/b::"),
            ("CLIMA_ARTIFACTS_OFFLINE", "1"),
            ("CLIMA_ARTIFACTS_JULIA_INTEROP", "yes"),
            ("CLIMA_ARTIFACTS_CONNECT_TIMEOUT", "2.5"),
            ("CLIMA_ARTIFACTS_STALL_TIMEOUT", "7"),
            ("CLIMA_ARTIFACTS_RETRIES", "5"),
            ("CLIMA_ARTIFACTS_LOCK_TIMEOUT", "9"),
            ("CLIMA_ARTIFACTS_MAX_UNPACKED_BYTES", "3G"),
            ("CLIMA_ARTIFACTS_MAX_ENTRIES", "1000"),
            ("CLIMA_ARTIFACTS_NODE_LOCAL_DEPOT", "/tmp/node"),
            ("CLIMA_ARTIFACTS_NODE_ID", "rack2-n07"),
            ("CLIMA_ARTIFACTS_PROGRESS", "off"),
        ])
        .unwrap();
        let default = default_depot().unwrap();
        assert_eq!(
            c.depots,
            vec![Depot::new("/a"), Depot::new("/b"), Depot::new(default)]
        );
        assert!(c.offline && c.julia_interop && !c.progress);
        assert_eq!(c.net.connect_timeout, Duration::from_millis(2500));
        assert_eq!(c.net.stall_timeout, Duration::from_secs(7));
        assert_eq!(c.net.retry.attempts, 5);
        assert_eq!(c.lock_timeout, Duration::from_secs(9));
        assert_eq!(c.max_unpacked_bytes, 3 << 30);
        assert_eq!(c.max_entries, 1000);
        assert_eq!(c.node_local_depot, Some(Depot::new("/tmp/node")));
        assert_eq!(c.node_id.as_deref(), Some("rack2-n07"));
    }

    #[test]
    fn the_network_defaults_are_the_network_crates() {
        use clima_artifact_net::retry::RetryPolicy;
        // Held once, in the network crate: what a model gets without any variable set is
        // what `NetConfig::default()` and `RetryPolicy::default()` say, field for field.
        assert_eq!(Config::default().net, NetConfig::default());
        assert_eq!(cfg(&[]).unwrap().net, NetConfig::default());
        assert_eq!(Config::default().net.retry, RetryPolicy::default());
        // A variable changes its field alone; the rest keep the network crate's defaults.
        let c = cfg(&[("CLIMA_ARTIFACTS_RETRIES", "7")]).unwrap();
        let want = NetConfig {
            retry: RetryPolicy {
                attempts: 7,
                ..RetryPolicy::default()
            },
            ..NetConfig::default()
        };
        assert_eq!(c.net, want);
    }

    #[test]
    fn empty_depot_path_entries_are_the_default_depot_in_place() {
        let default = default_depot().unwrap();
        let depots = |v: &str| -> Vec<PathBuf> {
            let c = cfg(&[("CLIMA_ARTIFACTS_DEPOT_PATH", v)]).unwrap();
            c.depots.iter().map(|d| d.root().to_path_buf()).collect()
        };
        let p = |s: &str| PathBuf::from(s);
        assert_eq!(depots("/a::/b"), vec![p("/a"), default.clone(), p("/b")]);
        assert_eq!(depots(":/a"), vec![default.clone(), p("/a")]);
        assert_eq!(depots("/a:"), vec![p("/a"), default.clone()]);
        assert_eq!(depots(":"), vec![default.clone()]);
        assert_eq!(depots("/a:/a:"), vec![p("/a"), default.clone()]);
        // Set but empty: the same as unset.
        let defaults: Vec<PathBuf> = Config::default()
            .depots
            .iter()
            .map(|d| d.root().to_path_buf())
            .collect();
        assert_eq!(depots(""), defaults);
    }

    #[test]
    fn bad_values_name_the_variable() {
        for (k, v) in [
            ("CLIMA_ARTIFACTS_OFFLINE", "maybe"),
            ("CLIMA_ARTIFACTS_STALL_TIMEOUT", "-1"),
            ("CLIMA_ARTIFACTS_CONNECT_TIMEOUT", "soon"),
            ("CLIMA_ARTIFACTS_RETRIES", "0"),
            ("CLIMA_ARTIFACTS_MAX_UNPACKED_BYTES", "12Q"),
            ("CLIMA_ARTIFACTS_MAX_ENTRIES", "0"),
            ("CLIMA_ARTIFACTS_MAX_ENTRIES", "many"),
            ("CLIMA_ARTIFACTS_DEPOT_PATH", "relative/depot"),
            ("CLIMA_ARTIFACTS_NODE_LOCAL_DEPOT", "rel"),
        ] {
            let e = cfg(&[(k, v)]).unwrap_err().to_string();
            assert!(e.contains(k) && e.contains(v), "{e}");
        }
    }
}
