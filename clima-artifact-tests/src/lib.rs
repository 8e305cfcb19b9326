//! Shared test support for clima-artifacts integration tests.
//!
//! - [`TestServer`]: a real HTTP/1.1 server on `127.0.0.1:0` (one thread per connection) serving
//!   registered bodies by path, honouring `Range` (`bytes=a-` and `bytes=a-b`) under `If-Range`,
//!   optionally capping each connection's rate and delaying each response (latency), counting GETs per path (also readable over
//!   HTTP at `/__count/<path>`, and body bytes sent and most connections at once at
//!   `/__sent/<path>`, for multi-process tests and benchmarks), with per-path [`Fault`]
//!   injection.
//! - [`invenio::InvenioServer`]: a loopback InvenioRDM archive (CaltechDATA, Zenodo) for
//!   `publish --archive`, its downloads served by a [`TestServer`].
//! - [`TarballBuilder`]: tarballs (plain, gzip, zstd, xz, bzip2) from an in-memory file list,
//!   with their SHA-256 and git tree hash (computed by real `git`, see [`git_tree_hash`]).
//! - [`artifacts_toml`] / [`write_manifest`]: an `Artifacts.toml` for test artifacts.
//! - [`test_config`], [`variant`], [`tree_files`], [`temp_entries`]: small helpers.

pub mod invenio;
mod proxy;
mod server;
mod tls;
pub use proxy::{ConnectProxy, ProxyRules};
pub(crate) use server::reset;
pub use server::{Fault, TestServer, count_over_http};
use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
pub use tls::TlsServer;

use clima_artifact_manifest::{ArtifactVariant, Download, GitTreeSha1, GitTreeSha256, Sha256};
use clima_artifact_runtime::Config;
use clima_artifact_runtime::depot::Depot;
use sha2::Digest;

/// One entry of a test tarball.
#[derive(Debug, Clone)]
pub enum Entry {
    /// A regular file.
    File {
        /// Relative path (`/`-separated).
        path: String,
        /// Content.
        bytes: Vec<u8>,
        /// Owner exec bit.
        exec: bool,
    },
    /// A directory (possibly empty).
    Dir {
        /// Relative path.
        path: String,
    },
    /// A symbolic link.
    Symlink {
        /// Relative path.
        path: String,
        /// Link target.
        target: String,
    },
}

/// Builds tarballs from an in-memory list of entries.
#[derive(Debug, Clone, Default)]
pub struct TarballBuilder {
    entries: Vec<Entry>,
}

impl TarballBuilder {
    /// An empty tarball.
    pub fn new() -> TarballBuilder {
        TarballBuilder::default()
    }
    /// Adds a regular file (mode 0644).
    pub fn file(mut self, path: &str, bytes: impl Into<Vec<u8>>) -> Self {
        self.entries.push(Entry::File {
            path: path.into(),
            bytes: bytes.into(),
            exec: false,
        });
        self
    }
    /// Adds an executable file (mode 0755).
    pub fn exec(mut self, path: &str, bytes: impl Into<Vec<u8>>) -> Self {
        self.entries.push(Entry::File {
            path: path.into(),
            bytes: bytes.into(),
            exec: true,
        });
        self
    }
    /// Adds a directory.
    pub fn dir(mut self, path: &str) -> Self {
        self.entries.push(Entry::Dir { path: path.into() });
        self
    }
    /// Adds a symlink.
    pub fn symlink(mut self, path: &str, target: &str) -> Self {
        self.entries.push(Entry::Symlink {
            path: path.into(),
            target: target.into(),
        });
        self
    }
    /// The entries so far.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// An uncompressed tar stream.
    pub fn tar(&self) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for e in &self.entries {
            let mut h = tar::Header::new_gnu();
            h.set_mtime(1_600_000_000);
            match e {
                Entry::File { path, bytes, exec } => {
                    h.set_entry_type(tar::EntryType::Regular);
                    h.set_mode(if *exec { 0o755 } else { 0o644 });
                    h.set_size(bytes.len() as u64);
                    b.append_data(&mut h, path, bytes.as_slice()).unwrap();
                }
                Entry::Dir { path } => {
                    h.set_entry_type(tar::EntryType::Directory);
                    h.set_mode(0o755);
                    h.set_size(0);
                    b.append_data(&mut h, path, std::io::empty()).unwrap();
                }
                Entry::Symlink { path, target } => {
                    h.set_entry_type(tar::EntryType::Symlink);
                    h.set_mode(0o777);
                    h.set_size(0);
                    b.append_link(&mut h, path, target).unwrap();
                }
            }
        }
        b.into_inner().unwrap()
    }

    /// A gzip-compressed tarball.
    pub fn gzip(&self) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(&self.tar()).unwrap();
        e.finish().unwrap()
    }

    /// A zstd-compressed tarball.
    pub fn zstd(&self) -> Vec<u8> {
        zstd::encode_all(self.tar().as_slice(), 3).unwrap()
    }

    /// An xz-compressed tarball (`.tar.xz`).
    pub fn xz(&self) -> Vec<u8> {
        let mut w =
            lzma_rust2::XzWriter::new(Vec::new(), lzma_rust2::XzOptions::with_preset(6)).unwrap();
        w.write_all(&self.tar()).unwrap();
        w.finish().unwrap()
    }

    /// A bzip2-compressed tarball (`.tar.bz2`).
    pub fn bzip2(&self) -> Vec<u8> {
        let mut w = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
        w.write_all(&self.tar()).unwrap();
        w.finish().unwrap()
    }

    /// Writes the entries into `dir` (as extraction should).
    pub fn write_to(&self, dir: &Path) {
        for e in &self.entries {
            match e {
                Entry::File { path, bytes, exec } => {
                    let p = dir.join(path);
                    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                    std::fs::write(&p, bytes).unwrap();
                    let mode = if *exec { 0o755 } else { 0o644 };
                    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
                }
                Entry::Dir { path } => std::fs::create_dir_all(dir.join(path)).unwrap(),
                Entry::Symlink { path, target } => {
                    let p = dir.join(path);
                    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                    std::os::unix::fs::symlink(target, &p).unwrap();
                }
            }
        }
    }

    /// The git tree hash of the content, by real `git` (see [`git_tree_hash`]).
    pub fn git_tree_hash(&self) -> GitTreeSha1 {
        let dir = tempfile::tempdir().unwrap();
        self.write_to(dir.path());
        git_tree_hash(dir.path())
    }

    /// The git tree SHA-256 of the content, by real `git` in a SHA-256 repository (see
    /// [`git_tree_hash_sha256`]).
    pub fn git_tree_hash_sha256(&self) -> GitTreeSha256 {
        let dir = tempfile::tempdir().unwrap();
        self.write_to(dir.path());
        git_tree_hash_sha256(dir.path())
    }
}

/// SHA-256 of bytes.
pub fn sha256(bytes: &[u8]) -> Sha256 {
    Sha256(sha2::Sha256::digest(bytes).into())
}

/// Prints the line the MPI test programs (`src/bin/mpi_*.rs`) report one resolution with, the
/// format `tests/it/mpi.rs` parses, and returns whether it succeeded:
///
/// ```text
/// RESULT rank=<r> size=<n> name=<name> ok path=<path>
/// RESULT rank=<r> size=<n> name=<name> err=<message on one line>
/// ```
pub fn print_result(
    rank: usize,
    size: usize,
    name: &str,
    result: Result<&Path, &clima_artifact_runtime::Error>,
) -> bool {
    match result {
        Ok(p) => {
            println!(
                "RESULT rank={rank} size={size} name={name} ok path={}",
                p.display()
            );
            true
        }
        Err(e) => {
            let one_line = e.to_string().replace('\n', " | ");
            println!("RESULT rank={rank} size={size} name={name} err={one_line}");
            false
        }
    }
}

/// The stdout (as text) of a finished process; panics with its stderr unless it exited
/// successfully. For helper binaries and tools the tests run.
pub fn success_stdout(out: std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The target directory `cargo metadata` reports for this workspace (trybuild builds under its
/// `tests/trybuild`), found with the `cargo` running the tests.
pub fn cargo_target_dir() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo metadata");
    let meta: serde_json::Value = serde_json::from_slice(success_stdout(out).as_bytes()).unwrap();
    PathBuf::from(meta["target_directory"].as_str().expect("target_directory"))
}

/// Says that the calling test does nothing, and why: prints `skipped: <reason>` on stderr and,
/// when `CLIMA_TEST_SKIP_DIR` is set (`scripts/test.sh` sets it), writes the reason into a file
/// of that folder named after the test binary and the test (the thread's name, which libtest
/// sets to the test's path), so that the script counts the test as skipped, not passed. The
/// caller returns right after.
pub fn skip(reason: &str) {
    eprintln!("skipped: {reason}");
    let Some(dir) = std::env::var_os("CLIMA_TEST_SKIP_DIR") else {
        return;
    };
    let binary = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .map(|s| {
            s.rsplit_once('-')
                .map_or(s.clone(), |(name, _hash)| name.to_owned())
        })
        .unwrap_or_else(|| "test".to_owned());
    let test = std::thread::current()
        .name()
        .unwrap_or("main")
        .replace("::", ".");
    let file = Path::new(&dir).join(format!("{binary}--{test}").replace('/', "_"));
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(file, format!("{reason}\n"));
}

/// The uid [`as_other_user`] runs commands as: `nobody`.
pub const OTHER_UID: u32 = 65534;

/// A command prefix (`setpriv`) that runs what follows as another user ([`OTHER_UID`], no
/// groups): the co-user of a shared depot or store who plants things in it. `None`, after
/// [`skip`] said why, unless this process is root and `/usr/bin/setpriv` exists. In CI
/// (`CI=true`, where tests run as root) a missing setpriv panics.
pub fn as_other_user() -> Option<Command> {
    let setpriv = Path::new("/usr/bin/setpriv");
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if root && !setpriv.exists() && std::env::var("CI").as_deref() == Ok("true") {
        panic!("/usr/bin/setpriv (util-linux) is required in CI");
    }
    if !root || !setpriv.exists() {
        skip("needs root and /usr/bin/setpriv to act as another user");
        return None;
    }
    let mut cmd = Command::new(setpriv);
    cmd.arg(format!("--reuid={OTHER_UID}"))
        .arg(format!("--regid={OTHER_UID}"))
        .args(["--clear-groups", "--"]);
    Some(cmd)
}

/// Whether `git` runs. In CI (`CI=true`) a missing git panics; elsewhere it returns `false`
/// after printing why, so the caller can skip.
pub fn have_git() -> bool {
    let ok = Command::new("git")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("`git` is required in CI but cannot be run");
        }
        skip("`git` is not installed");
    }
    ok
}

/// The git tree hash of `dir` computed by real `git` (`add -A --force` into a scratch
/// repository outside `dir`, then `write-tree`), ignoring user and system git configuration.
pub fn git_tree_hash(dir: &Path) -> GitTreeSha1 {
    GitTreeSha1::from_hex(&git_write_tree(dir, "sha1")).unwrap()
}

/// [`git_tree_hash`] in a repository made with `git init --object-format=sha256`: the git tree
/// SHA-256 of `dir` (`git-tree-sha256`) as real `git` computes it.
pub fn git_tree_hash_sha256(dir: &Path) -> GitTreeSha256 {
    GitTreeSha256::from_hex(&git_write_tree(dir, "sha256")).unwrap()
}

/// `git write-tree` of `dir` added to a scratch repository of `object_format`.
fn git_write_tree(dir: &Path, object_format: &str) -> String {
    let git_dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = Command::new("git")
            .env("GIT_DIR", git_dir.path())
            .env("GIT_WORK_TREE", dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env_remove("GIT_INDEX_FILE")
            .args(["-c", "core.fileMode=true", "-c", "core.symlinks=true"])
            .args(["-c", "core.autocrlf=false"])
            .args(["-c", "core.looseCompression=0", "-c", "gc.auto=0"])
            .args(args)
            .current_dir(dir)
            .output()
            .expect("run git");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let object_format = format!("--object-format={object_format}");
    run(&["init", "-q", object_format.as_str()]);
    run(&["add", "-A", "--force", "."]);
    run(&["write-tree"]).trim().to_owned()
}

/// A test artifact ready to serve: its tarball bytes and hashes.
#[derive(Debug, Clone)]
pub struct TestArtifact {
    /// The tarball's content.
    pub builder: TarballBuilder,
    /// The served bytes.
    pub tarball: Vec<u8>,
    /// SHA-256 of `tarball`.
    pub sha256: Sha256,
    /// Git tree hash of the content.
    pub tree_hash: GitTreeSha1,
}

impl TestArtifact {
    /// From a builder, gzip-compressed.
    pub fn gzip(builder: TarballBuilder) -> TestArtifact {
        let tarball = builder.gzip();
        TestArtifact::with_bytes(builder, tarball)
    }

    /// From a builder and the bytes to serve (e.g. [`TarballBuilder::zstd`]).
    pub fn with_bytes(builder: TarballBuilder, tarball: Vec<u8>) -> TestArtifact {
        let tree_hash = builder.git_tree_hash();
        TestArtifact {
            sha256: sha256(&tarball),
            tarball,
            tree_hash,
            builder,
        }
    }

    /// A small artifact with a nested folder, an executable and a symlink; `seed` varies the
    /// content.
    pub fn sample(seed: u32) -> TestArtifact {
        TestArtifact::gzip(
            TarballBuilder::new()
                .file("README.md", format!("sample artifact {seed}\n"))
                .dir("data")
                .file("data/values.csv", format!("x,y\n{seed},2\n").repeat(50))
                .exec("bin/run.sh", "#!/bin/sh\necho hi\n")
                .symlink("latest.csv", "data/values.csv"),
        )
    }

    /// An artifact of `files` files of `size` pseudo-random (incompressible) bytes each.
    pub fn large(seed: u64, files: usize, size: usize) -> TestArtifact {
        let mut b = TarballBuilder::new();
        let mut x = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        for i in 0..files {
            let mut bytes = Vec::with_capacity(size);
            while bytes.len() < size {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                bytes.extend_from_slice(&x.to_le_bytes());
            }
            bytes.truncate(size);
            b = b.file(&format!("part{}/file{i}.bin", i % 4), bytes);
        }
        TestArtifact::gzip(b)
    }

    /// A manifest variant downloading from `urls` in order.
    pub fn variant(&self, urls: &[String]) -> ArtifactVariant {
        variant(self.tree_hash, urls, self.sha256)
    }

    /// Checks that `dir` holds exactly this artifact's content (by real git).
    pub fn assert_content(&self, dir: &Path) {
        assert_eq!(
            git_tree_hash(dir),
            self.tree_hash,
            "content of `{}`",
            dir.display()
        );
    }
}

impl TestArtifact {
    /// Checks that `dir` holds exactly the builder's entries (content, exec bits, symlink
    /// targets; nothing else), without git.
    pub fn assert_files(&self, dir: &Path) {
        let mut expected = Vec::new();
        for e in self.builder.entries() {
            match e {
                Entry::File { path, bytes, exec } => {
                    let p = dir.join(path);
                    let got = std::fs::read(&p)
                        .unwrap_or_else(|err| panic!("cannot read `{}`: {err}", p.display()));
                    assert!(got == *bytes, "content of `{}` differs", p.display());
                    let mode = std::fs::metadata(&p).unwrap().permissions().mode();
                    assert_eq!(mode & 0o100 != 0, *exec, "exec bit of `{}`", p.display());
                    expected.push(path.clone());
                }
                Entry::Symlink { path, target } => {
                    let p = dir.join(path);
                    assert_eq!(std::fs::read_link(&p).unwrap(), Path::new(target));
                    expected.push(path.clone());
                }
                Entry::Dir { .. } => {}
            }
        }
        expected.sort();
        assert_eq!(tree_files(dir), expected, "files in `{}`", dir.display());
    }
}

/// A `[name]`-style variant with these downloads (all with the same `sha256`).
pub fn variant(hash: GitTreeSha1, urls: &[String], sha256: Sha256) -> ArtifactVariant {
    ArtifactVariant {
        git_tree_sha1: hash,
        git_tree_sha256: None,
        lazy: false,
        downloads: urls
            .iter()
            .map(|u| Download {
                url: u.clone(),
                sha256,
                size: None,
                index_sha256: None,
            })
            .collect(),
        platform: None,
        metadata: BTreeMap::new(),
        line: 1,
    }
}

/// An artifact served by a fresh loopback server at one path, and an empty depot in a temp dir.
pub struct Served {
    /// Owns the temp dir holding the depot.
    pub dir: tempfile::TempDir,
    /// `<dir>/depot` (not created yet).
    pub depot: PathBuf,
    /// The server.
    pub server: TestServer,
    /// What it serves.
    pub art: TestArtifact,
}

/// Serves `art`'s tarball at `path` on a new server, with a depot in a new temp dir.
pub fn served(art: TestArtifact, path: &str) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let depot = dir.path().join("depot");
    let server = TestServer::start();
    server.serve(path, art.tarball.clone());
    Served {
        dir,
        depot,
        server,
        art,
    }
}

/// The reason of each failed source of an install error (one line each), or the error's own
/// text when it is not a [`clima_artifact_runtime::Error::DownloadFailed`].
pub fn failure_reasons(e: &clima_artifact_runtime::Error) -> String {
    match e {
        clima_artifact_runtime::Error::DownloadFailed { failures, .. } => failures
            .iter()
            .map(|f| f.to_string())
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

/// A configuration for tests: these depots, short timeouts, fast retries, no progress bars.
pub fn test_config(depots: &[PathBuf]) -> Config {
    let mut config = Config {
        depots: depots.iter().map(Depot::new).collect(),
        offline: false,
        julia_interop: false,
        lock_timeout: Duration::from_secs(60),
        max_unpacked_bytes: 1 << 30,
        progress: false,
        ..Config::default()
    };
    config.net.connect_timeout = Duration::from_secs(2);
    config.net.stall_timeout = Duration::from_millis(700);
    config.net.retry.attempts = 3;
    config.net.retry.base = Duration::from_millis(20);
    config
}

/// The environment variables that make a child process use `config`'s depots and timeouts.
pub fn config_env(config: &Config) -> Vec<(String, String)> {
    let depots: Vec<String> = config
        .depots
        .iter()
        .map(|d| d.root().display().to_string())
        .collect();
    vec![
        ("CLIMA_ARTIFACTS_DEPOT_PATH".into(), depots.join(":")),
        (
            "CLIMA_ARTIFACTS_STALL_TIMEOUT".into(),
            config.net.stall_timeout.as_secs_f64().to_string(),
        ),
        (
            "CLIMA_ARTIFACTS_LOCK_TIMEOUT".into(),
            config.lock_timeout.as_secs_f64().to_string(),
        ),
        (
            "CLIMA_ARTIFACTS_RETRIES".into(),
            config.net.retry.attempts.to_string(),
        ),
        (
            "CLIMA_ARTIFACTS_CONNECTIONS".into(),
            config.net.connections.to_string(),
        ),
        (
            "CLIMA_ARTIFACTS_PARALLEL_MIN_SIZE".into(),
            config.net.parallel_min_size.to_string(),
        ),
        ("CLIMA_ARTIFACTS_PROGRESS".into(), "0".into()),
        ("CLIMA_ARTIFACTS_OFFLINE".into(), "0".into()),
    ]
}

/// One artifact of an `Artifacts.toml`: name, hash, and `(url, sha256)` downloads.
pub struct ManifestEntry<'a> {
    /// Artifact name.
    pub name: &'a str,
    /// Git tree hash.
    pub hash: GitTreeSha1,
    /// Downloads in order.
    pub downloads: Vec<(String, Sha256)>,
    /// Extra `key = "value"` lines (metadata).
    pub extra: Vec<(&'a str, &'a str)>,
}

/// The text of an `Artifacts.toml` with these entries (`[name]` tables).
pub fn artifacts_toml(entries: &[ManifestEntry<'_>]) -> String {
    let mut s = String::new();
    for e in entries {
        s.push_str(&format!("[{}]\ngit-tree-sha1 = \"{}\"\n", e.name, e.hash));
        for (k, v) in &e.extra {
            s.push_str(&format!("{k} = {v:?}\n"));
        }
        for (url, sha) in &e.downloads {
            s.push_str(&format!(
                "\n    [[{}.download]]\n    url = {url:?}\n    sha256 = \"{sha}\"\n",
                e.name
            ));
        }
        s.push('\n');
    }
    s
}

/// Writes `Artifacts.toml` into `dir` and returns its path.
pub fn write_manifest(dir: &Path, entries: &[ManifestEntry<'_>]) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let p = dir.join("Artifacts.toml");
    std::fs::write(&p, artifacts_toml(entries)).unwrap();
    p
}

/// Writes `<depot>/artifacts/Overrides.toml` with this text.
pub fn write_overrides(depot: &Path, text: &str) -> PathBuf {
    let dir = depot.join("artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("Overrides.toml");
    std::fs::write(&p, text).unwrap();
    p
}

/// Names in `<depot>/artifacts/` that are partial downloads (`.partial-*`).
pub fn partial_entries(depot: &Path) -> Vec<String> {
    names_in(&depot.join("artifacts"))
        .into_iter()
        .filter(|n| n.starts_with(clima_artifact_runtime::manifest::layout::PARTIAL_PREFIX))
        .collect()
}

/// Names in `<depot>/artifacts/` that are install temp dirs (`.<hash>.clima-install-*`).
pub fn temp_entries(depot: &Path) -> Vec<String> {
    names_in(&depot.join("artifacts"))
        .into_iter()
        .filter(|n| clima_artifact_runtime::depot::Depot::temp_dir_owner(n).is_some())
        .collect()
}

/// The name of the install temp dir of `hash` that process `pid` on host `host` would leave
/// in `<depot>/artifacts/` (`host` as temp names spell it: `.` and `/` as `_`).
pub fn install_temp_name(hash: &GitTreeSha1, host: &str, pid: u32) -> String {
    format!(
        ".{hash}{}{host}.{pid}.00000000000000ff",
        clima_artifact_runtime::manifest::layout::INSTALL_MARK
    )
}

/// This host as temp names spell it (`.` and `/` as `_`).
pub use clima_artifact_fs::host_tag;

/// Names in `<depot>/artifacts/` that look like installed artifacts (40 hex digits).
pub fn installed_entries(depot: &Path) -> Vec<String> {
    names_in(&depot.join("artifacts"))
        .into_iter()
        .filter(|n| n.len() == 40 && n.bytes().all(|b| b.is_ascii_hexdigit()))
        .collect()
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Asserts that a depot holds nothing partial: no temp dirs and no installed artifacts.
pub fn assert_depot_clean(depot: &Path) {
    assert_eq!(temp_entries(depot), Vec::<String>::new(), "temp dirs left");
    assert_eq!(
        installed_entries(depot),
        Vec::<String>::new(),
        "unexpected artifacts"
    );
}

/// Relative paths of every file and symlink under `dir`, sorted.
pub fn tree_files(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                walk(base, &p, out);
            } else {
                out.push(p.strip_prefix(base).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}
