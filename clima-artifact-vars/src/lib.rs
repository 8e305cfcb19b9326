//! # clima-artifact-vars
//!
//! The name of every environment variable the clima-artifacts crates read, in one place (as
//! uv keeps its own in `uv-static`). Code reads a variable through its constant, never a string
//! of its own; [`ALL`] lists each with a one-line summary, which the CLI prints in `--help`
//! ([`help_text`]), and with its meaning and default, the table of `docs/environment.md`
//! ([`markdown_table`]; a test fails when that page falls behind this list).
//!
//! How values are read is here too: [`parse_bool`] (for every crate), and the runtime's
//! [`parse_seconds`], [`parse_bytes`], [`parse_count`] (each with the words of its error, e.g.
//! [`BYTES_EXPECTED`]) and [`pkg_server_url`]. (Run sync's one number of seconds, which may be
//! 0, is its own.)
//!
//! Who reads what: the runtime's `Config::from_env` (once per configuration) reads the
//! `CLIMA_ARTIFACTS_*` download and depot variables, the Julia ones under interop (except
//! `JULIA_DEPOT_PATH`, which the depot crate's `julia_depots` reads at lookup time), the TLS and
//! proxy ones through the network crate; `Platform::host` reads [`PLATFORM_TAGS`]; the progress
//! crate [`PROGRESS`] and [`VERBOSE`] for notices; run sync's `SyncConfig::from_env` the
//! `CLIMA_SYNC_*` ones; the CLI's `publish --archive` [`ARCHIVE_TOKEN`] and [`ARCHIVE_TIMEOUT`]; the build helper
//! [`BUILD_DENY_WARNINGS`].

/// One environment variable: its name and what it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Var {
    /// The name, e.g. `CLIMA_ARTIFACTS_DEPOT_PATH`.
    pub name: &'static str,
    /// What it does, in one line (the CLI's `--help`).
    pub summary: &'static str,
    /// Its value when unset, in Markdown (a row of [`markdown_table`]).
    pub default: &'static str,
    /// What it does in full, in Markdown: a row of [`markdown_table`], the table of
    /// `docs/environment.md` (whose relative links are to the other `docs/` pages).
    pub meaning: &'static str,
}

macro_rules! vars {
    ($($(#[$doc:meta])* $konst:ident = $name:literal, $summary:literal,
        default: $default:literal, $meaning:literal;)*) => {
        $($(#[$doc])* pub const $konst: &str = $name;)*
        /// Every variable, in the order of the table of `docs/environment.md`.
        pub const ALL: &[Var] = &[$(Var {
            name: $konst,
            summary: $summary,
            default: $default,
            meaning: $meaning,
        }),*];
    };
}

vars! {
    /// Depots to search, colon-separated; installs go to the first writable one.
    DEPOT_PATH = "CLIMA_ARTIFACTS_DEPOT_PATH",
        "colon-separated depots; installs and overrides go to the first writable one",
        default: "`$XDG_CACHE_HOME/clima-artifacts` (`~/.cache/clima-artifacts`)",
        "colon-separated depots; lookups search all, installs go to the first writable one; an empty entry is the default depot at that position, as in Julia (`/scratch/depot:` = that depot, then the default); see [depots.md](depots.md)";
    /// `1`: never touch the network.
    OFFLINE = "CLIMA_ARTIFACTS_OFFLINE", "1: never touch the network (local sources still install)",
        default: "`0`",
        "`1`: never touch the network; local-path and `file://` download sources still install, an artifact with only `http(s)://` sources is a clear error";
    /// `1`: also search Julia's depots and their overrides.
    JULIA_INTEROP = "CLIMA_ARTIFACTS_JULIA_INTEROP",
        "1: also search Julia's depots (JULIA_DEPOT_PATH) and their overrides",
        default: "`0`",
        "`1`: also search Julia depots (`JULIA_DEPOT_PATH`, default `~/.julia`) and their `Overrides.toml` (see [julia.md](julia.md))";
    /// TCP connect timeout, seconds.
    CONNECT_TIMEOUT = "CLIMA_ARTIFACTS_CONNECT_TIMEOUT", "TCP connect timeout, seconds (30)",
        default: "`30`",
        "TCP connect timeout, seconds";
    /// Seconds without a byte before a download is abandoned.
    STALL_TIMEOUT = "CLIMA_ARTIFACTS_STALL_TIMEOUT",
        "abandon a download after this many seconds without a byte (60)",
        default: "`60`",
        "abandon a download after this many seconds without a byte";
    /// The low-speed rule's limit, bytes per second.
    LOW_SPEED_LIMIT = "CLIMA_ARTIFACTS_LOW_SPEED_LIMIT",
        "abandon a download slower than this per second over LOW_SPEED_TIME (1K; 0 = off)",
        default: "`1K`",
        "abandon a download slower than this (bytes per second, `K`/`M` suffixes) on average over `CLIMA_ARTIFACTS_LOW_SPEED_TIME`, as curl's `--speed-limit`; `0` turns it off";
    /// The low-speed rule's window, seconds.
    LOW_SPEED_TIME = "CLIMA_ARTIFACTS_LOW_SPEED_TIME", "the window of the low-speed rule, seconds (60)",
        default: "`60`",
        "the window of the low-speed rule, seconds";
    /// Attempts per URL on transient failures.
    RETRIES = "CLIMA_ARTIFACTS_RETRIES", "attempts per URL on transient failures (3)",
        default: "`3`",
        "attempts per URL on transient failures (connect, reset, 5xx, 429)";
    /// Seconds to wait for another process's install lock.
    LOCK_TIMEOUT = "CLIMA_ARTIFACTS_LOCK_TIMEOUT",
        "seconds to wait for another process installing the same artifact (3600)",
        default: "`3600`",
        "seconds to wait for another process installing the same artifact";
    /// Cap on one artifact's unpacked size.
    MAX_UNPACKED_BYTES = "CLIMA_ARTIFACTS_MAX_UNPACKED_BYTES", "cap on one artifact's unpacked size (1T)",
        default: "`1T`",
        "cap on one artifact's unpacked size (`K`, `M`, `G`, `T` suffixes)";
    /// A Julia package server tried before the manifest's URLs.
    PKG_SERVER = "CLIMA_ARTIFACTS_PKG_SERVER",
        "a Julia package server (or publish --by-hash host) tried before the manifest's URLs",
        default: "unset (then `JULIA_PKG_SERVER`)",
        "a Julia package server, or a folder/bucket laid out by `publish --by-hash` and served as static files: `<server>/artifact/<git-tree-sha1>` is tried before the manifest's URLs (verified by its tree hash alone, so what the tree hash does not cover is dropped: a `.git` folder and empty folders are never installed from it; its body is bounded by `CLIMA_ARTIFACTS_MAX_DOWNLOAD_SIZE`; on failure the manifest's URLs are used); a bare host gets `https://`; credentials in it are never printed; empty = off";
    /// Largest download a model starts on first use.
    MAX_DOWNLOAD_SIZE = "CLIMA_ARTIFACTS_MAX_DOWNLOAD_SIZE",
        "largest download a model starts on first use (4G; 0 = no limit; fetch is never limited)",
        default: "`4G`",
        "largest download a model starts on first use (`clima_artifact!`, `Artifacts::ensure_installed`); larger ones fail before any request (by the manifest's `size`) or right after the response headers, saying how to `clima-artifacts fetch` them (explicit fetches are never limited) or override them; `K`/`M`/`G`/`T`; `0` = no limit";
    /// Most connections of one large download.
    CONNECTIONS = "CLIMA_ARTIFACTS_CONNECTIONS",
        "most connections of one large download, 1 to 8 (8; 1 = one stream)",
        default: "`8`",
        "most requests in flight to one server during one large download, `1` to `8` (a value out of range is clamped, with a warning); `1` keeps one stream (see [downloads.md](downloads.md#several-connections-and-downloads-that-continue-in-the-next-job))";
    /// Smallest download fetched over several connections and kept for resuming.
    PARALLEL_MIN_SIZE = "CLIMA_ARTIFACTS_PARALLEL_MIN_SIZE",
        "downloads this large use several connections and resume across processes (64M)",
        default: "`64M`",
        "downloads at least this large (by `Content-Length`) from servers that serve byte ranges use several connections and keep their bytes in `artifacts/.partial-*` so that the next process continues them; `K`/`M`/`G`/`T`";
    /// Workers that unpack a seekable tarball.
    INSTALL_THREADS = "CLIMA_ARTIFACTS_INSTALL_THREADS",
        "workers that unpack a seekable tarball, 1 to 256 (the available cores)",
        default: "the available cores",
        "workers (1 to 256; a larger number is refused) that decompress, check and write the members of a seekable tarball (a download entry with `index-sha256`) at once, within 48 MiB of members in flight; `1` unpacks on one core; single-stream tarballs unpack in one pass whatever it says (see [downloads.md](downloads.md#seekable-tarballs-on-every-core))";
    /// Free space an install leaves on the depot's filesystem.
    MIN_FREE_SPACE = "CLIMA_ARTIFACTS_MIN_FREE_SPACE",
        "free space an install leaves on the depot's filesystem (1% or 1G; 0 = off)",
        default: "1% of the filesystem or 1 GiB, whichever is smaller",
        "free space an install leaves on the depot's filesystem: unpacking stops with an error (temp dir removed) before going below it; `K`/`M`/`G`/`T` suffixes; `0` turns it off";
    /// Cap on one artifact's number of archive entries.
    MAX_ENTRIES = "CLIMA_ARTIFACTS_MAX_ENTRIES", "cap on one artifact's archive entries (10000000)",
        default: "`10000000`",
        "cap on one artifact's number of archive entries (files, directories, links)";
    /// MPI node-local mode: a depot private to each node.
    NODE_LOCAL_DEPOT = "CLIMA_ARTIFACTS_NODE_LOCAL_DEPOT",
        "MPI node-local mode: one download per job, copied over MPI into each node's depot",
        default: "unset",
        "MPI node-local mode: each node's artifacts go into this node-private depot (a local SSD, `$TMPDIR`); the job downloads once and the tarball is copied over MPI to one rank per node, which verifies and installs it (see [mpi.md](mpi.md#node-local-depots-one-download-per-job))";
    /// Which "node" this process is on, for node-local mode (testing and diagnostics).
    NODE_ID = "CLIMA_ARTIFACTS_NODE_ID",
        "ranks with the same value form one node in node-local mode (testing; unset = by machine)",
        default: "unset",
        "node-local mode, for testing and diagnostics: ranks with the same value (any string) form one \"node\", instead of the ranks sharing a machine, so several nodes can be tried on one machine";
    /// Extra host platform tags.
    PLATFORM_TAGS = "CLIMA_ARTIFACTS_PLATFORM_TAGS",
        "extra host platform tags, key=value,... (e.g. libgfortran_version=5.0.0)",
        default: "unset",
        "extra host platform tags, `key=value,...` (e.g. `libgfortran_version=5.0.0`)";
    /// `0`: no download progress and no informational notices.
    PROGRESS = "CLIMA_ARTIFACTS_PROGRESS",
        "0: no download progress or informational notices (warnings still show)",
        default: "`1`",
        "`0` hides download progress and informational notices, keeping warnings: by default a bar per download when stderr is a terminal, otherwise plain log lines (start with size and host, progress at most every 10 s or 10 %, end with bytes, time and rate) for batch logs, in models and in the CLI alike (the CLI's `--json` is quiet the same way); lock waits (naming the holder, its progress and `CLIMA_ARTIFACTS_LOCK_TIMEOUT`), retries (cause and next delay), fall-throughs to the next source and skipped restores are printed in the same style, `clima-artifacts: warning: ...` for warnings, with no `tracing` subscriber needed; a program can report all of it its own way (its reporter in `progress::Reporting`, passed in its configuration)";
    /// `1`: details of how downloads went (redirects, ranges refused) as notices.
    VERBOSE = "CLIMA_ARTIFACTS_VERBOSE",
        "1: also print details of how the work went (redirects, refused ranges)",
        default: "`0`",
        "`1` also prints `clima-artifacts: detail: ...` lines: redirects followed, a server that answered a range request with the whole file, usage records that could not be written (the CLI's `--verbose` does the same)";
    /// TLS roots: a PEM bundle or a folder of PEM files.
    CA_ROOTS = "CLIMA_ARTIFACTS_CA_ROOTS", "TLS roots: a PEM bundle or a folder of PEM files",
        default: "system bundle",
        "TLS roots (a PEM bundle or folder): for an institution's CA or a TLS-inspecting proxy; otherwise the system's CA bundle, else the bundled Mozilla roots. Downloads, `publish` and `sync` choose them in one order: this, then `JULIA_SSL_CA_ROOTS_PATH` (under interop), `AWS_CA_BUNDLE` (S3 sync only), `SSL_CERT_FILE`, `SSL_CERT_DIR`";
    /// Hosts whose certificates are not verified.
    NO_VERIFY_HOSTS = "CLIMA_ARTIFACTS_NO_VERIFY_HOSTS",
        "hosts (*.domain too) whose TLS certificates are not verified (the hashes still are)",
        default: "unset",
        "hosts (`*.domain` too) whose certificates are not verified, with a warning each time; the hashes still check the data";
    /// The personal access token of an InvenioRDM archive (CaltechDATA, Zenodo) for `publish --archive`.
    ARCHIVE_TOKEN = "CLIMA_ARTIFACTS_ARCHIVE_TOKEN",
        "publish --archive: personal access token of the InvenioRDM archive (never printed)",
        default: "unset",
        "`publish NAME --archive URL`: the personal access token of the InvenioRDM archive (CaltechDATA, Zenodo or their sandboxes), sent as a bearer header and never printed; see [archive.md](archive.md)";
    /// `publish --archive`: the longest one exchange with the archive may take, seconds.
    ARCHIVE_TIMEOUT = "CLIMA_ARTIFACTS_ARCHIVE_TIMEOUT",
        "publish --archive: seconds one exchange with the archive may take, plus as long per GiB uploaded (600)",
        default: "`600`",
        "`publish NAME --archive URL`: the longest one exchange with the archive may take, from the request to the end of the answer, seconds; a file upload may take that long again per GiB of the file (the default asks for about 1.7 MiB/s on average: raise it on a slower link). An exchange over it is tried again, as a broken connection is, then fails naming this variable; see [archive.md](archive.md)";
    /// `1`: the build helper's warnings fail the build.
    BUILD_DENY_WARNINGS = "CLIMA_ARTIFACTS_BUILD_DENY_WARNINGS",
        "1: clima_artifact_build::validate() fails the build on warnings",
        default: "`0`",
        "`1`: `clima_artifact_build::validate()` fails the build on a warning (CI of a model)";
    /// Run sync: also push the run's output artifacts.
    SYNC_ARTIFACTS = "CLIMA_SYNC_ARTIFACTS", "run sync: 0 moves only checkpoints, not output artifacts",
        default: "on",
        "run sync: `0` moves only checkpoints, not output artifacts (see [sync.md](sync.md))";
    /// Run sync: globs of files never synced.
    SYNC_EXCLUDE = "CLIMA_SYNC_EXCLUDE", "run sync: colon-separated globs of files never synced, either way",
        default: "none",
        "run sync: colon-separated globs of files never synced, either way";
    /// Run sync: seconds after which a sync warns that it is slow.
    SYNC_WARN_AFTER = "CLIMA_SYNC_WARN_AFTER", "run sync: warn when a sync takes longer than this, seconds (60)",
        default: "`60`",
        "run sync: seconds before a slow sync warns";
    /// Run sync: every rank syncs its own folder.
    SYNC_PER_RANK = "CLIMA_SYNC_PER_RANK", "run sync: 1 when every rank writes a run folder of its own",
        default: "`0`",
        "run sync: `1` when every rank has a run folder of its own";
    /// Julia's depots (read under interop).
    JULIA_DEPOT_PATH = "JULIA_DEPOT_PATH", "Julia's depots, searched with CLIMA_ARTIFACTS_JULIA_INTEROP=1 (~/.julia)",
        default: "`~/.julia`",
        "Julia's depots, searched after ours with `CLIMA_ARTIFACTS_JULIA_INTEROP=1`; their `artifacts/Overrides.toml` apply";
    /// Julia's package server (when CLIMA_ARTIFACTS_PKG_SERVER is unset).
    JULIA_PKG_SERVER = "JULIA_PKG_SERVER", "Julia's package server, used when CLIMA_ARTIFACTS_PKG_SERVER is unset",
        default: "unset",
        "Julia's package server, used as `CLIMA_ARTIFACTS_PKG_SERVER` when that is unset";
    /// Julia's TLS roots (read under interop).
    JULIA_SSL_CA_ROOTS_PATH = "JULIA_SSL_CA_ROOTS_PATH", "TLS roots, under interop (after CLIMA_ARTIFACTS_CA_ROOTS)",
        default: "unset",
        "TLS roots under interop, read after `CLIMA_ARTIFACTS_CA_ROOTS`";
    /// Julia's hosts without verification (read under interop).
    JULIA_SSL_NO_VERIFY_HOSTS = "JULIA_SSL_NO_VERIFY_HOSTS", "hosts not verified, under interop",
        default: "unset",
        "hosts whose certificates are not verified, under interop, as `CLIMA_ARTIFACTS_NO_VERIFY_HOSTS`";
    /// TLS roots as curl, pip and OpenSSL read them: a PEM bundle.
    SSL_CERT_FILE = "SSL_CERT_FILE", "TLS roots (a PEM bundle) when CLIMA_ARTIFACTS_CA_ROOTS is unset",
        default: "unset",
        "TLS roots (a PEM bundle) when `CLIMA_ARTIFACTS_CA_ROOTS` is unset";
    /// TLS roots as OpenSSL reads them: a folder of PEM files.
    SSL_CERT_DIR = "SSL_CERT_DIR", "TLS roots (a folder of PEM files) when SSL_CERT_FILE is unset",
        default: "unset",
        "TLS roots (a folder of PEM files) when `SSL_CERT_FILE` is unset";
    /// TLS roots of the AWS SDKs (for S3 run sync).
    AWS_CA_BUNDLE = "AWS_CA_BUNDLE", "TLS roots for S3 run sync, before SSL_CERT_FILE",
        default: "unset",
        "TLS roots of S3 run sync, read before `SSL_CERT_FILE`";
    /// The proxy of `http://` URLs.
    HTTP_PROXY = "HTTP_PROXY", "proxy for http:// URLs (http_proxy too)",
        default: "unset",
        "as curl reads it (`http_proxy` too): the proxy of `http://` URLs; credentials in the URL (`http://user:pass@proxy:3128`); `clima-artifacts doctor` shows what is in use";
    /// The proxy of `https://` URLs.
    HTTPS_PROXY = "HTTPS_PROXY", "proxy for https:// URLs (https_proxy too)",
        default: "unset",
        "as curl reads it (`https_proxy` too): the proxy of `https://` URLs, through a CONNECT tunnel; credentials in the URL";
    /// The proxy of both when the specific one is unset.
    ALL_PROXY = "ALL_PROXY", "proxy for both when the specific one is unset (all_proxy too)",
        default: "unset",
        "the proxy of both `http://` and `https://` URLs when those are unset (`all_proxy` too)";
    /// Hosts reached without a proxy.
    NO_PROXY = "NO_PROXY", "hosts reached without a proxy, comma-separated (no_proxy too)",
        default: "unset",
        "comma-separated hosts (`.domain`, `*.domain`, `*`) reached directly, not through a proxy (`no_proxy` too)";
    /// Where the default depot goes (`$XDG_CACHE_HOME/clima-artifacts`).
    XDG_CACHE_HOME = "XDG_CACHE_HOME", "the default depot is $XDG_CACHE_HOME/clima-artifacts (~/.cache)",
        default: "`~/.cache`",
        "where the default depot goes: `$XDG_CACHE_HOME/clima-artifacts`";
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

/// A positive number of seconds below 10^9, fractions allowed (`30`, `0.5`); `None` for
/// anything else, which callers report with [`SECONDS_EXPECTED`].
pub fn parse_seconds(value: &str) -> Option<std::time::Duration> {
    match value.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 && s < 1e9 => Some(std::time::Duration::from_secs_f64(s)),
        _ => None,
    }
}

/// What a variable of seconds accepts, for the error about a value [`parse_seconds`] refused.
pub const SECONDS_EXPECTED: &str = "expected a positive number of seconds, e.g. 30 or 0.5";

/// A positive number of bytes, optionally with a binary suffix `K`, `M`, `G` or `T` (any
/// case: `500G` is 500 GiB); `None` for anything else, zero and overflow included, which
/// callers report with [`BYTES_EXPECTED`].
pub fn parse_bytes(value: &str) -> Option<u64> {
    let t = value.trim();
    let (digits, shift) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let shift = match c.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                _ => return None,
            };
            (&t[..i], shift)
        }
        _ => (t, 0),
    };
    match digits.trim().parse::<u64>() {
        Ok(n) if n > 0 => n.checked_mul(1 << shift),
        _ => None,
    }
}

/// What a variable of bytes accepts, for the error about a value [`parse_bytes`] refused.
pub const BYTES_EXPECTED: &str =
    "expected a positive number of bytes, optionally with a suffix K, M, G or T (e.g. 500G)";

/// A whole number from 1 to `u32::MAX` (a count of attempts, entries, connections); `None`
/// otherwise.
pub fn parse_count(value: &str) -> Option<u64> {
    value
        .trim()
        .parse::<u64>()
        .ok()
        .filter(|n| (1..=u64::from(u32::MAX)).contains(n))
}

/// [`PKG_SERVER`] (else [`JULIA_PKG_SERVER`]) as a URL without a trailing `/`: empty
/// is none, and as Pkg reads it a bare host name means https.
pub fn pkg_server_url(v: &str) -> Option<String> {
    let v = v.trim().trim_end_matches('/');
    match v {
        "" => None,
        _ if v.contains("://") => Some(v.to_owned()),
        _ => Some(format!("https://{v}")),
    }
}

/// The Markdown table of every variable (`| variable | meaning | default |`, one row each, in
/// the order of [`ALL`]), ending with a newline: the table of `docs/environment.md`, which
/// `cargo run -p clima-artifact-vars --example environment-table -- docs/environment.md`
/// rewrites in place.
pub fn markdown_table() -> String {
    let cell = |text: &str| text.replace('|', "\\|");
    let mut table = String::from("| variable | meaning | default |\n|---|---|---|\n");
    for var in ALL {
        table.push_str(&format!(
            "| `{}` | {} | {} |\n",
            var.name,
            cell(var.meaning),
            cell(var.default)
        ));
    }
    table
}

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
    fn the_table_has_a_row_with_meaning_and_default_for_each() {
        let table = markdown_table();
        assert_eq!(table.lines().count(), ALL.len() + 2);
        for var in ALL {
            assert!(
                !var.meaning.is_empty() && !var.default.is_empty(),
                "{}",
                var.name
            );
            let row = format!("| `{}` | {} | {} |", var.name, var.meaning, var.default);
            assert!(table.contains(&row), "{row}");
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

    #[test]
    fn package_servers_are_read_as_pkg_reads_them() {
        assert_eq!(
            pkg_server_url(" pkg.julialang.org/ ").as_deref(),
            Some("https://pkg.julialang.org")
        );
        assert_eq!(
            pkg_server_url("http://127.0.0.1:8080//").as_deref(),
            Some("http://127.0.0.1:8080")
        );
        assert_eq!(pkg_server_url(" "), None);
    }

    #[test]
    fn seconds_bytes_and_counts() {
        assert_eq!(
            parse_seconds(" 2.5 "),
            Some(std::time::Duration::from_millis(2500))
        );
        for bad in ["0", "-1", "soon", "inf", "NaN", "1e9", ""] {
            assert_eq!(parse_seconds(bad), None, "{bad}");
        }
        assert_eq!(parse_bytes("3G"), Some(3 << 30));
        assert_eq!(parse_bytes(" 12 k"), Some(12 << 10));
        assert_eq!(parse_bytes("7"), Some(7));
        for bad in ["0", "0T", "12Q", "G", "-1", "20000000T", ""] {
            assert_eq!(parse_bytes(bad), None, "{bad}");
        }
        assert_eq!(parse_count("5"), Some(5));
        assert_eq!(
            parse_count(&u32::MAX.to_string()),
            Some(u64::from(u32::MAX))
        );
        for bad in ["0", "many", "-3", "4294967296", "1.5"] {
            assert_eq!(parse_count(bad), None, "{bad}");
        }
    }
}
