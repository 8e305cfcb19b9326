//! Real `mpirun` tests of collective artifact access, behind the `mpi` feature.
//!
//! Each test starts the loopback [`TestServer`], writes an `Artifacts.toml` pointing at it, runs
//! `mpirun -n N` on a test program from `tests/src/bin/mpi_*.rs` with the depot in the
//! environment, and checks the server's GET counts and every rank's `RESULT` line.
//!
//! Without `mpirun` these tests say `skipped:` (see `clima_artifact_tests::skip`) and pass, except when `CI=true` or
//! `CLIMA_REQUIRE_MPI=1` (then they fail). Each test that really ran touches a file in
//! `$CLIMA_MPI_TEST_MARKER_DIR` (when set), so `scripts/ci-mpi.sh` can prove nothing was skipped.
#![cfg(feature = "mpi")]

use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use clima_artifact_tests::{
    Fault, ManifestEntry, TarballBuilder, TestArtifact, TestServer, write_manifest,
};

/// Longest an `mpirun` may take before the test kills it and fails (a hang).
const MPIRUN_TIMEOUT: Duration = Duration::from_secs(180);

/// How `mpirun` is launched on this machine.
struct Mpirun {
    program: PathBuf,
    openmpi: bool,
}

impl Mpirun {
    /// Finds `mpirun` (or `mpiexec`), or skips / fails as the module docs say.
    fn find(test: &str) -> Option<Mpirun> {
        let program = ["mpirun", "mpiexec"].into_iter().find_map(|name| {
            let out = Command::new(name).arg("--version").output().ok()?;
            let text = String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr);
            Some((PathBuf::from(name), text))
        });
        let Some((program, version)) = program else {
            let required = std::env::var("CI").is_ok_and(|v| v == "true")
                || std::env::var("CLIMA_REQUIRE_MPI").is_ok_and(|v| v == "1");
            assert!(
                !required,
                "{test}: `mpirun` not found but CI=true / CLIMA_REQUIRE_MPI=1: install OpenMPI \
                 or MPICH (e.g. `apt-get install openmpi-bin libopenmpi-dev`)"
            );
            clima_artifact_tests::skip("`mpirun` not found on PATH (no MPI installed)");
            return None;
        };
        if let Some(dir) = std::env::var_os("CLIMA_MPI_TEST_MARKER_DIR") {
            std::fs::create_dir_all(&dir).expect("marker dir");
            std::fs::write(Path::new(&dir).join(test), b"ran\n").expect("marker file");
        }
        let openmpi = version.contains("Open MPI") || version.contains("OpenRTE");
        Some(Mpirun { program, openmpi })
    }

    /// `mpirun -n <n> <program> <args>` (several `-n` groups for MPMD launches).
    fn command(&self, groups: &[(usize, Vec<String>)]) -> Command {
        let mut cmd = Command::new(&self.program);
        if self.openmpi {
            cmd.args(["--allow-run-as-root", "--oversubscribe"]);
            cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
                .env("OMPI_MCA_rmaps_base_oversubscribe", "1")
                .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none");
        }
        for (i, (n, argv)) in groups.iter().enumerate() {
            if i > 0 {
                cmd.arg(":");
            }
            cmd.arg("-n").arg(n.to_string()).args(argv);
        }
        cmd
    }
}

/// What an `mpirun` produced.
struct Run {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

/// Runs `cmd` in its own process group; kills the group and panics after [`MPIRUN_TIMEOUT`].
fn run_bounded(cmd: Command, envs: &[(&str, &str)]) -> Run {
    run_bounded_within(cmd, envs, MPIRUN_TIMEOUT)
}

/// [`run_bounded`] with a shorter limit, for runs whose known failure mode is a hang.
fn run_bounded_within(mut cmd: Command, envs: &[(&str, &str)], timeout: Duration) -> Run {
    use std::os::unix::process::CommandExt;
    cmd.env_remove("CLIMA_ARTIFACTS_NODE_LOCAL_DEPOT")
        .envs(envs.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd.spawn().expect("spawn mpirun");
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = drain(Box::new(child.stdout.take().expect("stdout")));
    let err = drain(Box::new(child.stderr.take().expect("stderr")));
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for mpirun") {
            break status;
        }
        if start.elapsed() > timeout {
            // The ranks are not in mpirun's process group (OpenMPI gives each its own) and
            // hold the output pipes: kill mpirun and everything under it.
            kill_tree(child.id());
            let _ = child.wait();
            panic!(
                "mpirun hung for more than {timeout:?} and was killed\nstdout:\n{}\nstderr:\n{}",
                out.join().unwrap_or_default(),
                err.join().unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Run {
        status,
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
    }
}

/// SIGKILLs `pid` and every process under it (their parents as `/proc` says, read first).
fn kill_tree(pid: u32) {
    let mut parents = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(p) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // `pid (comm) state ppid ...`: the name may hold spaces and parentheses.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u32>().ok());
        if let Some(ppid) = ppid {
            parents.push((p, ppid));
        }
    }
    let mut tree = vec![pid];
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        tree.extend(
            parents
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    for p in tree {
        // SAFETY: kill has no memory preconditions; a pid that is gone gives ESRCH.
        unsafe { libc::kill(p as libc::pid_t, libc::SIGKILL) };
    }
}

/// One `RESULT` line of `mpi_fetch`.
#[derive(Debug)]
struct Outcome {
    rank: usize,
    size: usize,
    name: String,
    result: Result<PathBuf, String>,
}

fn outcomes(run: &Run) -> Vec<Outcome> {
    run.stdout
        .lines()
        .filter_map(|l| l.strip_prefix("RESULT "))
        .map(|l| {
            let mut parts = l.splitn(4, ' ');
            let mut field = |key: &str| {
                parts
                    .next()
                    .and_then(|p| p.strip_prefix(key))
                    .unwrap_or_else(|| panic!("bad RESULT line `{l}`"))
                    .to_owned()
            };
            let rank = field("rank=").parse().expect("rank");
            let size = field("size=").parse().expect("size");
            let name = field("name=");
            let rest = parts.next().expect("outcome");
            let result = match rest.strip_prefix("ok path=") {
                Some(p) => Ok(PathBuf::from(p)),
                None => Err(rest.strip_prefix("err=").expect("ok or err").to_owned()),
            };
            Outcome {
                rank,
                size,
                name,
                result,
            }
        })
        .collect()
}

/// A served artifact: its name, tree hash and URL path on the server.
struct Served {
    name: String,
    hash: String,
    url_path: String,
}

/// Serves one small tarball per name and writes `Artifacts.toml` into `dir`.
fn serve_artifacts(server: &TestServer, dir: &Path, names: &[&str]) -> (PathBuf, Vec<Served>) {
    let artifacts: Vec<(String, TestArtifact)> = names
        .iter()
        .map(|name| {
            let artifact = TestArtifact::gzip(
                TarballBuilder::new()
                    .file("data/readme.txt", format!("artifact {name}\n"))
                    .file("data/values.bin", vec![name.len() as u8; 50_000]),
            );
            let url_path = format!("/{name}.tar.gz");
            server.serve(&url_path, artifact.tarball.clone());
            (url_path, artifact)
        })
        .collect();
    let entries: Vec<ManifestEntry<'_>> = names
        .iter()
        .zip(&artifacts)
        .map(|(name, (url_path, a))| ManifestEntry {
            name,
            hash: a.tree_hash,
            downloads: vec![(server.url(url_path), a.sha256)],
            extra: vec![("license", "CC0-1.0")],
        })
        .collect();
    let manifest = write_manifest(dir, &entries);
    let served = names
        .iter()
        .zip(artifacts)
        .map(|(name, (url_path, a))| Served {
            name: name.to_string(),
            hash: a.tree_hash.to_string(),
            url_path,
        })
        .collect();
    (manifest, served)
}

/// What most tests here start from: `mpirun`, a scratch folder, and a loopback server serving
/// one small artifact per name, with the `Artifacts.toml` that lists them. `None` when `mpirun`
/// is missing and the test is skipped (see [`Mpirun::find`]).
fn job(
    test: &str,
    names: &[&str],
) -> Option<(Mpirun, tempfile::TempDir, TestServer, PathBuf, Vec<Served>)> {
    let mpirun = Mpirun::find(test)?;
    let tmp = tempfile::tempdir().expect("tempdir");
    let server = TestServer::start();
    let (manifest, served) = serve_artifacts(&server, tmp.path(), names);
    Some((mpirun, tmp, server, manifest, served))
}

fn fetch_argv(manifest: &Path, names: &[&str], extra: &[&str]) -> Vec<String> {
    let mut argv = vec![
        env!("CARGO_BIN_EXE_mpi_fetch").to_owned(),
        manifest.display().to_string(),
    ];
    argv.extend(names.iter().map(|n| n.to_string()));
    argv.extend(extra.iter().map(|n| n.to_string()));
    argv
}

fn describe(run: &Run) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        run.status, run.stdout, run.stderr
    )
}

/// `n` ranks fetch two artifacts: one GET each, every rank gets the same, installed path.
fn one_get_per_artifact(test: &str, n: usize) {
    let Some((mpirun, tmp, server, manifest, served)) = job(test, &["era5", "rrtmgp"]) else {
        return;
    };
    let depot = tmp.path().join("depot");
    let run = run_bounded(
        mpirun.command(&[(n, fetch_argv(&manifest, &["era5", "rrtmgp"], &[]))]),
        &[("CLIMA_ARTIFACTS_DEPOT_PATH", depot.to_str().expect("utf-8"))],
    );
    assert!(run.status.success(), "{}", describe(&run));
    let all = outcomes(&run);
    assert_eq!(
        all.len(),
        2 * n,
        "one RESULT per rank and artifact\n{}",
        describe(&run)
    );
    for s in &served {
        assert_eq!(server.gets(&s.url_path), 1, "GETs of {}", s.url_path);
        let expected = depot.join("artifacts").join(&s.hash);
        let ranks: BTreeSet<usize> = all
            .iter()
            .filter(|o| o.name == s.name)
            .map(|o| {
                assert_eq!(o.size, n);
                assert_eq!(o.result.as_ref(), Ok(&expected), "rank {}", o.rank);
                o.rank
            })
            .collect();
        assert_eq!(ranks, (0..n).collect(), "every rank reported {}", s.name);
        assert!(expected.join("data/readme.txt").is_file());
    }
}

#[test]
fn mpi_byte_primitives_on_5_ranks() {
    let Some(mpirun) = Mpirun::find("mpi_byte_primitives_on_5_ranks") else {
        return;
    };
    let argv = vec![env!("CARGO_BIN_EXE_mpi_primitives").to_owned()];
    let run = run_bounded(mpirun.command(&[(5, argv)]), &[]);
    assert!(run.status.success(), "{}", describe(&run));
    assert_eq!(
        run.stdout.matches("primitives ok").count(),
        5,
        "{}",
        describe(&run)
    );
}

#[test]
fn mpi_4_ranks_one_get_per_artifact() {
    one_get_per_artifact("mpi_4_ranks_one_get_per_artifact", 4);
}

#[test]
fn mpi_16_ranks_one_get_per_artifact() {
    one_get_per_artifact("mpi_16_ranks_one_get_per_artifact", 16);
}

#[test]
fn mpi_root_cannot_download_every_rank_fails_the_same() {
    let Some((mpirun, tmp, server, manifest, served)) = job(
        "mpi_root_cannot_download_every_rank_fails_the_same",
        &["era5"],
    ) else {
        return;
    };
    let depot = tmp.path().join("depot");
    server.always(&served[0].url_path, Fault::Status(404));
    let started = Instant::now();
    let run = run_bounded(
        mpirun.command(&[(4, fetch_argv(&manifest, &["era5"], &[]))]),
        &[
            ("CLIMA_ARTIFACTS_DEPOT_PATH", depot.to_str().expect("utf-8")),
            ("CLIMA_ARTIFACTS_RETRIES", "1"),
        ],
    );
    assert!(
        !run.status.success(),
        "the job must fail\n{}",
        describe(&run)
    );
    let all = outcomes(&run);
    assert_eq!(all.len(), 4, "every rank reports\n{}", describe(&run));
    let messages: BTreeSet<&str> = all
        .iter()
        .map(|o| o.result.as_ref().expect_err("every rank fails").as_str())
        .collect();
    assert_eq!(
        messages.len(),
        1,
        "the same error everywhere: {messages:#?}"
    );
    let message = messages.into_iter().next().expect("one message");
    assert!(
        message.contains(&server.url(&served[0].url_path)),
        "{message}"
    );
    assert!(message.contains("404"), "{message}");
    assert_eq!(
        server.gets(&served[0].url_path),
        1,
        "only the root tries, once"
    );
    assert!(!depot.join("artifacts").join(&served[0].hash).exists());
    println!("404 run took {:?}", started.elapsed());
}

#[test]
fn mpi_ranks_asking_for_different_artifacts_all_get_an_error() {
    let Some((mpirun, tmp, server, manifest, served)) = job(
        "mpi_ranks_asking_for_different_artifacts_all_get_an_error",
        &["era5", "rrtmgp"],
    ) else {
        return;
    };
    let depot = tmp.path().join("depot");
    let argv = fetch_argv(&manifest, &["era5"], &["--other-on-rank", "2", "rrtmgp"]);
    let run = run_bounded(
        mpirun.command(&[(4, argv)]),
        &[("CLIMA_ARTIFACTS_DEPOT_PATH", depot.to_str().expect("utf-8"))],
    );
    assert!(!run.status.success(), "{}", describe(&run));
    let all = outcomes(&run);
    assert_eq!(all.len(), 4, "{}", describe(&run));
    for o in &all {
        let message = o
            .result
            .as_ref()
            .expect_err("misuse is an error on every rank");
        assert!(message.contains("out of step"), "{message}");
        assert!(message.contains("rank 2 asked for `rrtmgp`"), "{message}");
    }
    for s in &served {
        assert_eq!(
            server.gets(&s.url_path),
            0,
            "nothing is downloaded on misuse"
        );
    }
}

/// The `mpirun` groups of `ranks` ranks grouped into `nodes` "nodes" (consecutive ranks, by
/// `CLIMA_ARTIFACTS_NODE_ID`), node `k` with the node depot `node_depot(k)` and the extra
/// environment `extra(k)`.
fn node_groups(
    ranks: usize,
    nodes: usize,
    node_depot: &dyn Fn(usize) -> PathBuf,
    extra: &dyn Fn(usize) -> Vec<String>,
    argv: &[String],
) -> Vec<(usize, Vec<String>)> {
    (0..nodes)
        .map(|k| {
            let mut cmd = vec![
                "env".to_owned(),
                format!("CLIMA_ARTIFACTS_NODE_ID=node-{k}"),
                format!(
                    "CLIMA_ARTIFACTS_NODE_LOCAL_DEPOT={}",
                    node_depot(k).display()
                ),
            ];
            cmd.extend(extra(k));
            cmd.extend(argv.iter().cloned());
            (ranks / nodes, cmd)
        })
        .collect()
}

/// Nothing but verified artifacts under `depot/artifacts` (no temp dirs, no partial files).
fn assert_nothing_unverified(depot: &Path, allowed: &[&str]) {
    let Ok(entries) = std::fs::read_dir(depot.join("artifacts")) else {
        return;
    };
    for entry in entries {
        let name = entry.expect("entry").file_name();
        let name = name.to_string_lossy();
        assert!(
            allowed.contains(&name.as_ref())
                || name == ".locks"
                || name == "Overrides.toml"
                // Received bytes kept for the next attempt to continue, never an artifact.
                || name.starts_with(clima_artifact_runtime::manifest::layout::PARTIAL_PREFIX),
            "`{name}` left in `{}`",
            depot.display()
        );
    }
}

/// `ranks` ranks as `nodes` nodes: one GET for the whole job, every node depot holds the
/// verified artifact, every rank's path is in its own node's depot, the provenance of each
/// node's copy is recorded; a second run downloads nothing.
fn one_download_per_job(test: &str, ranks: usize, nodes: usize) {
    let Some((mpirun, tmp, server, manifest, served)) = job(test, &["era5"]) else {
        return;
    };
    let shared = tmp.path().join("shared-depot");
    let node_depot = |k: usize| tmp.path().join(format!("node{k}/depot"));
    let reports = tmp.path().join("report");
    let argv = fetch_argv(
        &manifest,
        &["era5"],
        &["--report", reports.to_str().expect("utf-8")],
    );
    let groups = node_groups(ranks, nodes, &node_depot, &|_| vec![], &argv);
    let env = [(
        "CLIMA_ARTIFACTS_DEPOT_PATH",
        shared.to_str().expect("utf-8"),
    )];
    for run_number in 1..=2 {
        let run = run_bounded(mpirun.command(&groups), &env);
        assert!(run.status.success(), "run {run_number}: {}", describe(&run));
        let all = outcomes(&run);
        assert_eq!(all.len(), ranks, "{}", describe(&run));
        for o in &all {
            let k = o.rank / (ranks / nodes);
            let expected = node_depot(k).join("artifacts").join(&served[0].hash);
            assert_eq!(o.result.as_ref(), Ok(&expected), "rank {}", o.rank);
        }
        assert_eq!(
            server.gets(&served[0].url_path),
            1,
            "run {run_number}: one GET for the whole job"
        );
        // The report says where each node's copy came from.
        let (_, records) = report_records(&reports.join("provenance.json"));
        let era5 = &records.iter().find(|(n, _)| n == "era5").expect("era5").1;
        let received: Vec<String> = (1..nodes).map(|k| format!("node-{k}")).collect();
        let markdown = std::fs::read_to_string(reports.join("provenance.md")).expect("md");
        if run_number == 1 {
            assert_eq!(era5["origin"]["kind"], "downloaded", "{era5}");
            assert_eq!(era5["received_by"], serde_json::json!(received), "{era5}");
            assert!(
                markdown.contains("copied over MPI into the node-local depots of"),
                "{markdown}"
            );
        } else {
            assert_eq!(era5["origin"]["kind"], "depot", "{era5}");
            assert!(era5.get("received_by").is_none(), "{era5}");
        }
    }
    for k in 0..nodes {
        let installed = node_depot(k).join("artifacts").join(&served[0].hash);
        assert_eq!(
            std::fs::read_to_string(installed.join("data/readme.txt")).expect("readme"),
            "artifact era5\n",
            "node {k}"
        );
        if clima_artifact_tests::have_git() {
            assert_eq!(
                clima_artifact_tests::git_tree_hash(&installed).to_string(),
                served[0].hash,
                "node {k}: real git agrees with the tree hash"
            );
        }
        assert_nothing_unverified(&node_depot(k), &[&served[0].hash]);
    }
    assert!(!shared.join("artifacts").join(&served[0].hash).exists());
}

#[test]
fn mpi_node_local_4_ranks_as_2_nodes_download_once() {
    one_download_per_job("mpi_node_local_4_ranks_as_2_nodes_download_once", 4, 2);
}

#[test]
fn mpi_node_local_4_ranks_as_4_nodes_download_once() {
    one_download_per_job("mpi_node_local_4_ranks_as_4_nodes_download_once", 4, 4);
}

/// Four "nodes" whose node-local depots are one folder (the same path on a shared filesystem,
/// or on one machine): one GET, one install, every rank's path in that folder, and no wait for
/// the lock that the sender holds (which would stop the stream until
/// CLIMA_ARTIFACTS_LOCK_TIMEOUT, an hour by default).
#[test]
fn mpi_node_local_nodes_sharing_one_depot_install_once() {
    // More than the frames in flight, so that a receiver waiting for the sender's lock would
    // stop the stream.
    let Some((mpirun, tmp, server, artifact, manifest)) =
        big_job("mpi_node_local_nodes_sharing_one_depot_install_once", 40)
    else {
        return;
    };
    let shared = tmp.path().join("shared-depot");
    let same = tmp.path().join("same-node-depot");
    let argv = fetch_argv(&manifest, &["era5"], &[]);
    let groups = node_groups(4, 4, &|_| same.clone(), &|_| vec![], &argv);
    let started = Instant::now();
    let run = run_bounded_within(
        mpirun.command(&groups),
        &[(
            "CLIMA_ARTIFACTS_DEPOT_PATH",
            shared.to_str().expect("utf-8"),
        )],
        Duration::from_secs(60),
    );
    assert!(run.status.success(), "{}", describe(&run));
    let hash = artifact.tree_hash.to_string();
    let expected = same.join("artifacts").join(&hash);
    let all = outcomes(&run);
    assert_eq!(all.len(), 4, "{}", describe(&run));
    for o in &all {
        assert_eq!(o.result.as_ref(), Ok(&expected), "rank {}", o.rank);
    }
    assert_eq!(server.gets("/era5.tar.gz"), 1);
    artifact.assert_files(&expected);
    assert_nothing_unverified(&same, &[&hash]);
    eprintln!("nodes sharing one depot: done in {:?}", started.elapsed());
}

/// Node 1's depot has the artifact's lock held by another process when the copy starts, which
/// lets go 3 s later without installing anything: node 1 does not stall the stream waiting for
/// it, and once the stream ended it takes the lock and downloads the artifact itself. Every
/// rank gets its own node's path.
#[test]
fn mpi_node_local_a_lock_holder_that_installs_nothing_is_outlived() {
    let Some((mpirun, tmp, server, manifest, served)) = job(
        "mpi_node_local_a_lock_holder_that_installs_nothing_is_outlived",
        &["era5"],
    ) else {
        return;
    };
    let shared = tmp.path().join("shared-depot");
    let node_depot = |k: usize| tmp.path().join(format!("node{k}/depot"));
    let hash: clima_artifact_runtime::GitTreeSha1 = served[0].hash.parse().expect("hash");
    let lock = clima_artifact_runtime::manifest::layout::lock_file(&node_depot(1), &hash);
    let held = clima_artifact_runtime::depot::LockedFile::acquire(
        &lock,
        "era5 (the test's)",
        Duration::from_secs(5),
        &clima_artifact_runtime::progress::Reporting::default(),
    )
    .expect("lock");
    assert!(held.is_locked(), "the test holds `{}`", lock.display());
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(3));
        drop(held);
    });
    let argv = fetch_argv(&manifest, &["era5"], &[]);
    let run = run_bounded_within(
        mpirun.command(&node_groups(4, 2, &node_depot, &|_| vec![], &argv)),
        &[(
            "CLIMA_ARTIFACTS_DEPOT_PATH",
            shared.to_str().expect("utf-8"),
        )],
        Duration::from_secs(60),
    );
    release.join().expect("release");
    assert!(run.status.success(), "{}", describe(&run));
    for o in outcomes(&run) {
        let expected = node_depot(o.rank / 2)
            .join("artifacts")
            .join(&served[0].hash);
        assert_eq!(o.result.as_ref(), Ok(&expected), "rank {}", o.rank);
    }
    assert_eq!(
        server.gets(&served[0].url_path),
        2,
        "node 0's download for the job, and node 1's own after the holder let go"
    );
    for k in 0..2 {
        assert_nothing_unverified(&node_depot(k), &[&served[0].hash]);
    }
}

/// A node that has the artifact installed sends it: no download at all.
#[test]
fn mpi_node_local_a_node_that_has_it_sends_it() {
    let Some((mpirun, tmp, server, manifest, served)) =
        job("mpi_node_local_a_node_that_has_it_sends_it", &["era5"])
    else {
        return;
    };
    let shared = tmp.path().join("shared-depot");
    let node_depot = |k: usize| tmp.path().join(format!("node{k}/depot"));
    let argv = fetch_argv(&manifest, &["era5"], &[]);
    let env = [(
        "CLIMA_ARTIFACTS_DEPOT_PATH",
        shared.to_str().expect("utf-8"),
    )];
    // Node 2 alone first (1 GET), then three nodes: node 2 sends its copy to nodes 0 and 1.
    let alone = vec![(
        1,
        node_groups(1, 1, &|_| node_depot(2), &|_| vec![], &argv)[0]
            .1
            .iter()
            .map(|a| a.replace("node-0", "node-2"))
            .collect(),
    )];
    let run = run_bounded(mpirun.command(&alone), &env);
    assert!(run.status.success(), "{}", describe(&run));
    assert_eq!(server.gets(&served[0].url_path), 1);
    let run = run_bounded(
        mpirun.command(&node_groups(3, 3, &node_depot, &|_| vec![], &argv)),
        &env,
    );
    assert!(run.status.success(), "{}", describe(&run));
    assert_eq!(
        server.gets(&served[0].url_path),
        1,
        "the copy came from node 2, not from the server"
    );
    for o in outcomes(&run) {
        let expected = node_depot(o.rank).join("artifacts").join(&served[0].hash);
        assert_eq!(o.result.as_ref(), Ok(&expected), "rank {}", o.rank);
        let readme = expected.join("data/readme.txt");
        assert_eq!(
            std::fs::read_to_string(readme).expect("readme"),
            "artifact era5\n"
        );
    }
}

/// After a plain MPI run (the README's first example) the artifact is in the shared depot:
/// node-local mode then copies nothing, and says so once instead of staying silent.
#[test]
fn mpi_node_local_says_when_the_shared_depot_has_it() {
    let Some((mpirun, tmp, server, manifest, served)) = job(
        "mpi_node_local_says_when_the_shared_depot_has_it",
        &["era5"],
    ) else {
        return;
    };
    let shared = tmp.path().join("shared-depot");
    let node_depot = |k: usize| tmp.path().join(format!("node{k}/depot"));
    let argv = fetch_argv(&manifest, &["era5"], &[]);
    let env = [
        (
            "CLIMA_ARTIFACTS_DEPOT_PATH",
            shared.to_str().expect("utf-8"),
        ),
        ("CLIMA_ARTIFACTS_PROGRESS", "1"),
    ];
    let run = run_bounded(mpirun.command(&[(2, argv.clone())]), &env);
    assert!(run.status.success(), "{}", describe(&run));
    let installed = shared.join("artifacts").join(&served[0].hash);
    let run = run_bounded(
        mpirun.command(&node_groups(4, 2, &node_depot, &|_| vec![], &argv)),
        &env,
    );
    assert!(run.status.success(), "{}", describe(&run));
    for o in outcomes(&run) {
        assert_eq!(o.result.as_ref(), Ok(&installed), "rank {}", o.rank);
    }
    assert_eq!(server.gets(&served[0].url_path), 1, "no second download");
    let line = format!(
        "`era5` found in the shared depot `{}`: nothing copied to node depots",
        shared.display()
    );
    assert_eq!(
        run.stderr.matches(&line).count(),
        1,
        "said once for the job: {line}\n{}",
        describe(&run)
    );
    for k in 0..2 {
        assert!(
            !node_depot(k)
                .join("artifacts")
                .join(&served[0].hash)
                .exists()
        );
    }
}

/// An override on node 0 (the root) is that node's own data, not the artifact: node 0 uses
/// it, and node 1 gets the artifact itself (one download), not a copy of node 0's folder.
#[test]
fn mpi_node_local_an_override_on_one_node_is_not_sent() {
    let Some((mpirun, tmp, server, manifest, served)) = job(
        "mpi_node_local_an_override_on_one_node_is_not_sent",
        &["era5"],
    ) else {
        return;
    };
    let shared = tmp.path().join("shared-depot");
    let node_depot = |k: usize| tmp.path().join(format!("node{k}/depot"));
    let mine = tmp.path().join("node0-own-era5");
    std::fs::create_dir_all(&mine).expect("override folder");
    std::fs::write(mine.join("mine.txt"), "node 0's own data\n").expect("write");
    std::fs::create_dir_all(node_depot(0).join("artifacts")).expect("node 0 depot");
    std::fs::write(
        node_depot(0).join("artifacts/Overrides.toml"),
        format!("{} = \"{}\"\n", served[0].hash, mine.display()),
    )
    .expect("Overrides.toml");
    let argv = fetch_argv(&manifest, &["era5"], &[]);
    let run = run_bounded(
        mpirun.command(&node_groups(4, 2, &node_depot, &|_| vec![], &argv)),
        &[(
            "CLIMA_ARTIFACTS_DEPOT_PATH",
            shared.to_str().expect("utf-8"),
        )],
    );
    assert!(run.status.success(), "{}", describe(&run));
    assert_eq!(server.gets(&served[0].url_path), 1, "node 1 downloads it");
    let installed = node_depot(1).join("artifacts").join(&served[0].hash);
    for o in outcomes(&run) {
        let expected = if o.rank < 2 { &mine } else { &installed };
        assert_eq!(o.result.as_ref(), Ok(expected), "rank {}", o.rank);
    }
    assert_eq!(
        std::fs::read_to_string(installed.join("data/readme.txt")).expect("readme"),
        "artifact era5\n"
    );
    assert!(
        !node_depot(0)
            .join("artifacts")
            .join(&served[0].hash)
            .exists()
    );
}

/// Runs 4 ranks as 2 nodes with `extra(k)` in node k's environment (and node 1's depot on a
/// tmpfs of `node1_tmpfs` bytes when given), and checks that every rank failed with the same
/// error, which contains each of `expected`, and that no depot holds anything unverified.
#[allow(clippy::too_many_arguments)]
fn every_rank_fails_the_same(
    test: &str,
    artifact: TestArtifact,
    sha256: Option<clima_artifact_runtime::Sha256>,
    serve: bool,
    extra: &dyn Fn(usize, &Path) -> Vec<String>,
    node1_tmpfs: Option<&str>,
    expected: &[&str],
) -> Option<(TestServer, tempfile::TempDir)> {
    let mpirun = Mpirun::find(test)?;
    let tmp = tempfile::tempdir().expect("tempdir");
    let shared = tmp.path().join("shared-depot");
    let node_depot = |k: usize| tmp.path().join(format!("node{k}/depot"));
    let mount = match node1_tmpfs {
        Some(size) => Some(crate::disk::Mount::small(&node_depot(1), size)?),
        None => None,
    };
    let server = TestServer::start();
    if serve {
        server.serve("/era5.tar.gz", artifact.tarball.clone());
    }
    let manifest = era5_manifest(&server, tmp.path(), &artifact, sha256);
    let argv = fetch_argv(&manifest, &["era5"], &[]);
    let root = tmp.path().to_path_buf();
    let groups = node_groups(4, 2, &node_depot, &|k| extra(k, &root), &argv);
    let started = Instant::now();
    let run = run_bounded_within(
        mpirun.command(&groups),
        &[
            (
                "CLIMA_ARTIFACTS_DEPOT_PATH",
                shared.to_str().expect("utf-8"),
            ),
            ("CLIMA_ARTIFACTS_RETRIES", "1"),
        ],
        Duration::from_secs(90),
    );
    assert!(!run.status.success(), "{}", describe(&run));
    let all = outcomes(&run);
    assert_eq!(all.len(), 4, "every rank answers: {}", describe(&run));
    let first = all[0].result.as_ref().expect_err("rank 0 failed");
    for o in &all {
        assert_eq!(o.result.as_ref(), Err(first), "rank {} differs", o.rank);
    }
    for e in expected {
        assert!(first.contains(e), "`{e}` not in: {first}");
    }
    eprintln!(
        "{test}: every rank failed the same in {:?}: {first}",
        started.elapsed()
    );
    for k in 0..2 {
        assert_nothing_unverified(&node_depot(k), &[]);
    }
    assert_nothing_unverified(&shared, &[]);
    drop(mount);
    Some((server, tmp))
}

/// An `Artifacts.toml` in `dir` with `era5` = `artifact` at `/era5.tar.gz` of `server`, with
/// `sha256` in place of the artifact's own when given.
fn era5_manifest(
    server: &TestServer,
    dir: &Path,
    artifact: &TestArtifact,
    sha256: Option<clima_artifact_runtime::Sha256>,
) -> PathBuf {
    write_manifest(
        dir,
        &[ManifestEntry {
            name: "era5",
            hash: artifact.tree_hash,
            downloads: vec![(
                server.url("/era5.tar.gz"),
                sha256.unwrap_or(artifact.sha256),
            )],
            extra: vec![("license", "CC0-1.0")],
        }],
    )
}

/// [`job`] with one artifact, `era5`: a single file of `mb` MiB that gzip cannot shrink,
/// served at `/era5.tar.gz`; gives it and the manifest.
fn big_job(
    test: &str,
    mb: usize,
) -> Option<(Mpirun, tempfile::TempDir, TestServer, TestArtifact, PathBuf)> {
    let mpirun = Mpirun::find(test)?;
    let tmp = tempfile::tempdir().expect("tempdir");
    let server = TestServer::start();
    let content = incompressible(mb << 20, 0x853c_49e6_748f_ea9b);
    let artifact = TestArtifact::gzip(TarballBuilder::new().file("data/big.bin", content));
    server.serve("/era5.tar.gz", artifact.tarball.clone());
    let manifest = era5_manifest(&server, tmp.path(), &artifact, None);
    Some((mpirun, tmp, server, artifact, manifest))
}

/// `len` bytes that gzip cannot shrink (xorshift from `seed`), so a tarball of them is as
/// large as they are.
fn incompressible(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn small_artifact() -> TestArtifact {
    TestArtifact::gzip(
        TarballBuilder::new()
            .file("data/readme.txt", "era5\n")
            .file("data/values.bin", vec![7u8; 100_000]),
    )
}

#[test]
fn mpi_node_local_a_404_is_the_same_error_on_every_rank() {
    every_rank_fails_the_same(
        "mpi_node_local_a_404_is_the_same_error_on_every_rank",
        small_artifact(),
        None,
        false,
        &|_, _| vec![],
        None,
        &["404", "era5"],
    );
}

#[test]
fn mpi_node_local_a_wrong_sha256_is_the_same_error_on_every_rank() {
    every_rank_fails_the_same(
        "mpi_node_local_a_wrong_sha256_is_the_same_error_on_every_rank",
        small_artifact(),
        Some(clima_artifact_runtime::Sha256([9; 32])),
        true,
        &|_, _| vec![],
        None,
        &["sha256", "era5"],
    );
}

/// Node `bad`'s depot cannot be created (a regular file where its folder would be): every
/// rank fails with that node's error, naming it.
fn a_depot_that_cannot_be_created(test: &str, bad: usize) {
    let node = format!("node `node-{bad}`");
    every_rank_fails_the_same(
        test,
        small_artifact(),
        None,
        true,
        &|k, root| {
            if k != bad {
                return vec![];
            }
            let file = root.join("not-a-folder");
            std::fs::write(&file, b"x").expect("write");
            vec![format!(
                "CLIMA_ARTIFACTS_NODE_LOCAL_DEPOT={}",
                file.join("depot").display()
            )]
        },
        None,
        &[&node, "cannot create the node-local depot", "not-a-folder"],
    );
}

#[test]
fn mpi_node_local_a_node_whose_depot_cannot_be_created_fails_every_rank() {
    a_depot_that_cannot_be_created(
        "mpi_node_local_a_node_whose_depot_cannot_be_created_fails_every_rank",
        1,
    );
}

/// The same on the root's node, which is named too.
#[test]
fn mpi_node_local_the_roots_depot_that_cannot_be_created_names_its_node() {
    a_depot_that_cannot_be_created(
        "mpi_node_local_the_roots_depot_that_cannot_be_created_names_its_node",
        0,
    );
}

/// Makes node 1's depot in the scratch folder, with the planting function.
type Prepare<'a> = dyn Fn(&Path, &dyn Fn(&Path)) -> PathBuf + 'a;

/// Node 1's depot is `prepare(root, planted)` (given the scratch folder and a function that
/// plants a fake `artifacts/<hash>/` of the artifact in a folder): every rank fails with node
/// 1's refusal, which contains each of `expected`, and no rank is handed the planted content.
/// Gives the server and the scratch folder (`None` when skipped).
fn a_node_depot_that_is_not_private(
    test: &str,
    prepare: &Prepare<'_>,
    expected: &[&str],
) -> Option<(TestServer, tempfile::TempDir)> {
    let artifact = small_artifact();
    let hash = artifact.tree_hash.to_string();
    let plant = |dir: &Path| {
        let fake = dir.join("artifacts").join(&hash).join("data");
        std::fs::create_dir_all(&fake).expect("planted folder");
        std::fs::write(fake.join("readme.txt"), "planted\n").expect("planted file");
    };
    let expected = [
        &[
            "node `node-1`",
            "not using the node-local depot",
            "unset it",
        ][..],
        expected,
    ]
    .concat();
    every_rank_fails_the_same(
        test,
        artifact,
        None,
        true,
        &|k, root| match k {
            1 => vec![format!(
                "CLIMA_ARTIFACTS_NODE_LOCAL_DEPOT={}",
                prepare(root, &plant).display()
            )],
            _ => vec![],
        },
        None,
        &expected,
    )
}

/// Whether this process is root (needed to make files of another user); says `skipped:`
/// when not.
fn root_or_skip(what: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        clima_artifact_tests::skip(&format!("{what} needs root"));
    }
    root
}

/// Node 1's depot path is another user's symlink to a victim's folder holding a planted
/// artifact: refused before anything is read or written through it.
#[test]
fn mpi_node_local_a_node_depot_through_another_users_symlink_is_refused() {
    if !root_or_skip("a symlink owned by another user") {
        return;
    }
    let victim = std::cell::RefCell::new(PathBuf::new());
    let Some(_scratch) = a_node_depot_that_is_not_private(
        "mpi_node_local_a_node_depot_through_another_users_symlink_is_refused",
        &|root, plant| {
            let target = root.join("victims-folder");
            plant(&target);
            let link = root.join("node1-depot");
            std::os::unix::fs::symlink(&target, &link).expect("symlink");
            let other = clima_artifact_tests::OTHER_UID;
            std::os::unix::fs::lchown(&link, Some(other), Some(other)).expect("lchown");
            *victim.borrow_mut() = target;
            link
        },
        &["node1-depot", "symbolic link owned by uid 65534"],
    ) else {
        return;
    };
    let victim = victim.into_inner();
    let names: Vec<_> = std::fs::read_dir(victim.join("artifacts"))
        .expect("victim's folder")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(
        names.len(),
        1,
        "written into the victim's folder: {names:?}"
    );
}

/// Node 1's depot was created first by another user (root only), or is writable by others,
/// and holds a planted artifact: refused, and no rank uses the planted content.
#[test]
fn mpi_node_local_a_node_depot_not_private_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let test = "mpi_node_local_a_node_depot_not_private_is_refused";
    if a_node_depot_that_is_not_private(
        test,
        &|root, plant| {
            let open = root.join("open-depot");
            plant(&open);
            std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).expect("chmod");
            open
        },
        &[
            "open-depot",
            "can be written by its group or by others (mode 777)",
        ],
    )
    .is_none()
    {
        return;
    }
    if !root_or_skip("a folder owned by another user") {
        return;
    }
    a_node_depot_that_is_not_private(
        test,
        &|root, plant| {
            let theirs = root.join("their-depot");
            plant(&theirs);
            let other = clima_artifact_tests::OTHER_UID;
            for dir in [theirs.clone(), theirs.join("artifacts")] {
                std::os::unix::fs::chown(&dir, Some(other), Some(other)).expect("chown");
            }
            theirs
        },
        &["their-depot", "belongs to uid 65534"],
    );
}

/// A `CLIMA_ARTIFACTS_NODE_ID` with control characters (a terminal title and a screen clear)
/// reaches every rank's error escaped, never raw.
#[test]
fn mpi_node_local_a_node_id_with_control_characters_is_escaped() {
    let id = "node-1\u{1b}]0;pwned\u{7}\u{1b}[2J";
    every_rank_fails_the_same(
        "mpi_node_local_a_node_id_with_control_characters_is_escaped",
        small_artifact(),
        None,
        true,
        &|k, root| {
            if k != 1 {
                return vec![];
            }
            let file = root.join("not-a-folder");
            std::fs::write(&file, b"x").expect("write");
            vec![
                format!("CLIMA_ARTIFACTS_NODE_ID={id}"),
                format!(
                    "CLIMA_ARTIFACTS_NODE_LOCAL_DEPOT={}",
                    file.join("depot").display()
                ),
            ]
        },
        None,
        &["node `node-1\\u{1b}]0;pwned\\u{7}\\u{1b}[2J`"],
    );
}

/// Node 1 fails for want of room with `CLIMA_ARTIFACTS_MIN_FREE_SPACE=reserve` (and its depot
/// on a tmpfs of `tmpfs` when given) while `mb` MiB stream to it: every rank fails with node
/// 1's error, which contains each of `expected`, and the download stops at a checkpoint, before
/// the end of the tarball.
fn node_1_without_room(
    test: &str,
    mb: usize,
    reserve: &str,
    tmpfs: Option<&str>,
    expected: &[&str],
    keeps_partial: bool,
) {
    let content = incompressible(mb << 20, 0x2545_f491_4f6c_dd1d);
    let artifact = TestArtifact::gzip(TarballBuilder::new().file("data/big.bin", content));
    let len = artifact.tarball.len() as u64;
    let reserve = format!("CLIMA_ARTIFACTS_MIN_FREE_SPACE={reserve}");
    let Some((server, tmp)) = every_rank_fails_the_same(
        test,
        artifact,
        None,
        true,
        &|k, _| match k {
            1 => vec![reserve.clone()],
            _ => vec![],
        },
        tmpfs,
        &[&["node `node-1`", "era5"][..], expected].concat(),
    ) else {
        return;
    };
    let sent = server.bytes_sent_for("/era5.tar.gz");
    assert!(
        sent < len,
        "the download went on to the end ({sent} of {len} bytes) after node 1 failed"
    );
    // The sender's disk is fine: what it received is kept for the next run to continue, in
    // the shared depot (where the next job sees it).
    let kept = std::fs::read_dir(tmp.path().join("shared-depot/artifacts"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| {
            let name = e.file_name();
            name.to_string_lossy()
                .starts_with(clima_artifact_runtime::manifest::layout::PARTIAL_PREFIX)
        });
    assert_eq!(
        kept, keeps_partial,
        "node 0 keeps its partial download in the shared depot: {keeps_partial}"
    );
}

/// Node 1's depot is a 16 MiB tmpfs and its reserve is off, so nothing refuses up front: the
/// disk fills up while node 1 unpacks the 128 MiB it receives (the next checkpoints, some 16
/// MiB apart, stop the download); node 1's tmpfs holds nothing unverified.
#[test]
fn mpi_node_local_a_node_whose_disk_fills_up_stops_the_download_for_everyone() {
    node_1_without_room(
        "mpi_node_local_a_node_whose_disk_fills_up_stops_the_download_for_everyone",
        128,
        "0",
        Some("16m"),
        &["No space left on device"],
        true,
    );
}

/// Node 1's depot has no room above the free-space reserve for the length the sender announced:
/// node 1 refuses before it unpacks anything.
#[test]
fn mpi_node_local_a_node_without_room_stops_the_download_for_everyone() {
    node_1_without_room(
        "mpi_node_local_a_node_without_room_stops_the_download_for_everyone",
        48,
        "1000T",
        None,
        &[
            "CLIMA_ARTIFACTS_MIN_FREE_SPACE",
            "CLIMA_ARTIFACTS_NODE_LOCAL_DEPOT",
        ],
        false,
    );
}

/// Node 1's depot is a 100 MiB tmpfs with the default free-space reserve, and the tarball
/// (64 MiB) fits, so nothing refuses up front; but it unpacks to 176 MiB (112 MiB of zeros
/// first): the unpacking stops before node 1's disk fills up, and the error names the setting
/// that put the depot there, CLIMA_ARTIFACTS_NODE_LOCAL_DEPOT (not CLIMA_ARTIFACTS_DEPOT_PATH,
/// which is not it).
///
/// The sizes make node 0 stop whatever the timing. Node 1 fails within the first 112 KiB of the
/// stream (the zeros); until then it holds node 0 back by what waits for its unpacking (16
/// frames of 1 MiB, the one being read, the body's 2 MiB). A checkpoint (every 16 MiB)
/// after its failure stops node 0, whose install is then at most 16 pieces of 1 MiB ahead of
/// the broadcast: about 52 MiB in all, less than the 64 MiB of the tarball, so node 0 never
/// installs the artifact before it hears of node 1's failure. With a 24 MiB tarball it could
/// (a node 1 slow to fail answered the first checkpoint, and the stream ended before the next),
/// and its depot held the verified artifact the test finds nowhere.
#[test]
fn mpi_node_local_a_full_node_disk_names_the_node_local_setting() {
    let zeros = (0..112).fold(TarballBuilder::new(), |b, i| {
        b.file(&format!("zeros/{i:03}.bin"), vec![0u8; 1 << 20])
    });
    let tarball = zeros.file(
        "data/big.bin",
        incompressible(64 << 20, 0x9e37_79b9_7f4a_7c15),
    );
    every_rank_fails_the_same(
        "mpi_node_local_a_full_node_disk_names_the_node_local_setting",
        TestArtifact::gzip(tarball),
        None,
        true,
        &|_, _| vec![],
        Some("100m"),
        &[
            "node `node-1`",
            "stopped unpacking",
            "larger filesystem (CLIMA_ARTIFACTS_NODE_LOCAL_DEPOT)",
        ],
    );
}

#[test]
fn mpi_node_local_mode_shared_memory_split() {
    let Some((mpirun, tmp, server, manifest, served)) =
        job("mpi_node_local_mode_shared_memory_split", &["era5"])
    else {
        return;
    };
    let shared = tmp.path().join("shared-depot");
    let node = tmp.path().join("node-tmp/depot");
    let run = run_bounded(
        mpirun.command(&[(4, fetch_argv(&manifest, &["era5"], &[]))]),
        &[
            (
                "CLIMA_ARTIFACTS_DEPOT_PATH",
                shared.to_str().expect("utf-8"),
            ),
            (
                "CLIMA_ARTIFACTS_NODE_LOCAL_DEPOT",
                node.to_str().expect("utf-8"),
            ),
        ],
    );
    assert!(run.status.success(), "{}", describe(&run));
    let expected = node.join("artifacts").join(&served[0].hash);
    let all = outcomes(&run);
    assert_eq!(all.len(), 4, "{}", describe(&run));
    for o in &all {
        assert_eq!(o.result.as_ref(), Ok(&expected), "rank {}", o.rank);
    }
    assert_eq!(server.gets(&served[0].url_path), 1, "one node, one install");
}

/// Git tree SHA-1s of `tests/Artifacts.toml` (read by the `clima_artifact!` calls of the MPI
/// programs at compile time).
const PROFILE: &str = "9ac956584f182cbfd7244eaf6d2fc9ee7b03ff2c";
const FORCING_TABLE: &str = "b98aa606b385754103cf26dc6f137f028bbd0e6d";
const OZONE: &str = "bd2d012e31967f7258e900884e90247b9539763c";
const LOCAL_ONLY: &str = "f2e37ce8393132a9470b4405546a1730d42cbc67";

/// The `RESULT`s of one step (`name=<step>`), checked to be `Ok(expected)` on `ranks`.
fn assert_step(run: &Run, step: &str, ranks: &[usize], expected: &Path) {
    let all = outcomes(run);
    let got: Vec<&Outcome> = all.iter().filter(|o| o.name == step).collect();
    let seen: BTreeSet<usize> = got.iter().map(|o| o.rank).collect();
    assert_eq!(
        seen,
        ranks.iter().copied().collect(),
        "ranks reporting step {step}\n{}",
        describe(run)
    );
    for o in got {
        assert_eq!(
            o.result.as_deref(),
            Ok(expected),
            "step {step}, rank {}",
            o.rank
        );
    }
}

/// Some ranks fill their in-memory cache (a call without a context, a collective call on a
/// split), then all call with the world: nobody hangs, everyone gets the same path, and repeated
/// collective calls on the world still communicate nothing.
#[test]
fn mpi_macro_cache_never_splits_a_collective_call() {
    let Some(mpirun) = Mpirun::find("mpi_macro_cache_never_splits_a_collective_call") else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let depot = tmp.path().join("depot");
    let argv = vec![env!("CARGO_BIN_EXE_mpi_macro_cache").to_owned()];
    // A hang is the failure this test exists for: fail fast rather than after the usual limit.
    let run = run_bounded_within(
        mpirun.command(&[(4, argv)]),
        &[("CLIMA_ARTIFACTS_DEPOT_PATH", depot.to_str().expect("utf-8"))],
        Duration::from_secs(90),
    );
    assert!(run.status.success(), "{}", describe(&run));
    let installed = |hash: &str| depot.join("artifacts").join(hash);
    assert_step(&run, "rank0-serial", &[0], &installed(PROFILE));
    assert_step(
        &run,
        "serial-then-world",
        &[0, 1, 2, 3],
        &installed(PROFILE),
    );
    assert_step(&run, "half-split", &[0, 1], &installed(FORCING_TABLE));
    assert_step(
        &run,
        "split-then-world",
        &[0, 1, 2, 3],
        &installed(FORCING_TABLE),
    );
    assert_step(&run, "odd-serial", &[1, 3], &installed(OZONE));
    assert_step(&run, "dynamic-then-world", &[0, 1, 2, 3], &installed(OZONE));
    // A plain `universe.world()` works as the context of `clima_artifact!`.
    assert_step(&run, "plain-world", &[0, 1, 2, 3], &installed(PROFILE));
    let fast: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.starts_with("FASTPATH "))
        .collect();
    assert_eq!(fast.len(), 4, "{}", describe(&run));
    for line in fast {
        assert!(
            line.ends_with(" collective_primitives=0"),
            "repeated collective calls on the same communicator must be answered from memory: \
             {line}"
        );
    }
}

/// Parses the JSON report and returns its `artifacts` array keyed by name.
fn report_records(json: &Path) -> (serde_json::Value, Vec<(String, serde_json::Value)>) {
    let text = std::fs::read_to_string(json)
        .unwrap_or_else(|e| panic!("cannot read `{}`: {e}", json.display()));
    let report: serde_json::Value = serde_json::from_str(&text).expect("report is JSON");
    let records = report["artifacts"]
        .as_array()
        .expect("`artifacts` array")
        .iter()
        .map(|r| (r["name"].as_str().expect("name").to_owned(), r.clone()))
        .collect();
    (report, records)
}

/// The files of a report directory: exactly the three of one report, no per-rank extras.
fn assert_one_report(dir: &Path) {
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .expect("report dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        ["provenance.bib", "provenance.json", "provenance.md"],
        "one report, written once"
    );
}

/// 4 ranks access artifacts different numbers of times (one through an override); the records
/// of every rank are gathered and rank 0 alone writes one report with the summed counts.
#[test]
fn mpi_report_gathers_every_rank_and_root_writes_once() {
    let Some(mpirun) = Mpirun::find("mpi_report_gathers_every_rank_and_root_writes_once") else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let depot = tmp.path().join("depot");
    let site = tmp.path().join("site-data");
    std::fs::create_dir_all(&site).expect("site dir");
    std::fs::write(site.join("radiosonde.csv"), "z_m,T_K\n0,291.2\n").expect("site file");
    std::fs::create_dir_all(depot.join("artifacts")).expect("depot");
    std::fs::write(
        depot.join("artifacts/Overrides.toml"),
        format!("{LOCAL_ONLY} = \"{}\"\n", site.display()),
    )
    .expect("Overrides.toml");
    let reports = tmp.path().join("reports");
    let argv = vec![
        env!("CARGO_BIN_EXE_mpi_report").to_owned(),
        // A trailing separator makes it a directory (created) rather than a file-name prefix.
        format!("{}/", reports.display()),
    ];
    let run = run_bounded(
        mpirun.command(&[(4, argv)]),
        &[("CLIMA_ARTIFACTS_DEPOT_PATH", depot.to_str().expect("utf-8"))],
    );
    assert!(run.status.success(), "{}", describe(&run));

    // Every access returned the same path on every rank.
    let all = outcomes(&run);
    assert_eq!(all.len(), 10 + 6 + 4, "{}", describe(&run));
    for o in &all {
        let expected = match o.name.as_str() {
            "profile" => depot.join("artifacts").join(PROFILE),
            "local-only" => site.clone(),
            "forcing-table" => depot
                .join("artifacts")
                .join(FORCING_TABLE)
                .join("forcing.csv"),
            other => panic!("unexpected RESULT for {other}"),
        };
        assert_eq!(
            o.result.as_ref(),
            Ok(&expected),
            "{} on rank {}",
            o.name,
            o.rank
        );
    }

    // Exactly rank 0 wrote, and exactly one report exists.
    let json = reports.join("provenance.json");
    let writers: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.starts_with("REPORT "))
        .collect();
    assert_eq!(writers.len(), 4, "{}", describe(&run));
    for line in &writers {
        let expected = if line.starts_with("REPORT rank=0 ") {
            format!("REPORT rank=0 wrote={}", json.display())
        } else {
            format!(
                "{} wrote=none",
                line.split(" wrote=").next().unwrap_or(line)
            )
        };
        assert_eq!(*line, expected);
    }
    assert_one_report(&reports);

    let (report, records) = report_records(&json);
    assert_eq!(report["communicator_size"], 4, "{report:#}");
    let names: Vec<&str> = records.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["forcing-table", "local-only", "profile"],
        "{report:#}"
    );
    for (name, record) in &records {
        let (accesses, origin) = match name.as_str() {
            "profile" => (1 + 2 + 3 + 4, "downloaded"),
            "local-only" => (1 + 2 + 1 + 2, "override"),
            _ => (4, "downloaded"),
        };
        assert_eq!(
            record["ranks"],
            serde_json::json!([0, 1, 2, 3]),
            "{name}: {record:#}"
        );
        assert_eq!(record["accesses"], accesses, "{name}: {record:#}");
        assert_eq!(record["origin"]["kind"], origin, "{name}: {record:#}");
        let sites = record["call_sites"].as_array().expect("call_sites");
        assert!(
            !sites.is_empty()
                && sites.iter().all(|s| s["file"]
                    .as_str()
                    .is_some_and(|f| f.ends_with("mpi_report.rs"))),
            "{name}: {record:#}"
        );
    }
    let local = &records[1].1;
    assert_eq!(local["path"], site.display().to_string(), "{local:#}");
    let markdown = std::fs::read_to_string(reports.join("provenance.md")).expect("markdown");
    for name in names {
        assert!(markdown.contains(&format!("`{name}`")), "{markdown}");
    }
}

/// Builds `examples/quickstart-mpi` with its `mpi` feature (cargo, into this test's own target
/// dir, so it is the current source) and returns the binary.
fn quickstart_mpi_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("path of this test binary");
    // <target>/<profile>/deps/mpi-<hash>
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("<target>/<profile>");
    let target = profile_dir.parent().expect("<target>");
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace)
        .args([
            "build",
            "-p",
            "quickstart-mpi",
            "--features",
            "quickstart-mpi/mpi",
        ])
        .arg("--target-dir")
        .arg(target);
    if profile_dir.file_name().is_some_and(|p| p == "release") {
        cmd.arg("--release");
    }
    let out = cmd.output().expect("run cargo");
    assert!(
        out.status.success(),
        "cargo build -p quickstart-mpi --features quickstart-mpi/mpi failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    profile_dir.join("quickstart-mpi")
}

/// The MPI example under `mpirun -n 4`: the root installs its data once, rank 0 prints the
/// global diagnostics, and one report lists all four ranks.
#[test]
fn mpi_quickstart_example_on_4_ranks() {
    let Some(mpirun) = Mpirun::find("mpi_quickstart_example_on_4_ranks") else {
        return;
    };
    let binary = quickstart_mpi_binary();
    let tmp = tempfile::tempdir().expect("tempdir");
    let depot = tmp.path().join("depot");
    let reports = tmp.path().join("reports");
    let argv = vec![
        binary.display().to_string(),
        "--report".to_owned(),
        format!("{}/", reports.display()),
    ];
    let run = run_bounded(
        mpirun.command(&[(4, argv)]),
        &[("CLIMA_ARTIFACTS_DEPOT_PATH", depot.to_str().expect("utf-8"))],
    );
    assert!(run.status.success(), "{}", describe(&run));
    assert!(!run.stdout.contains("serial run"), "{}", describe(&run));

    // Rank 0 alone prints the summary; relaxation toward equilibrium shrinks the departure.
    let summary: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.starts_with("64 columns on 4 rank(s), 60 days: RMS departure"))
        .collect();
    assert_eq!(summary.len(), 1, "{}", describe(&run));
    let kelvins: Vec<f64> = summary[0]
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    let [.., before, after] = kelvins[..] else {
        panic!("no RMS values in `{}`", summary[0]);
    };
    assert!(after < before && after >= 0.0, "{}", summary[0]);
    let installed = depot
        .join("artifacts")
        .join("a0445e7010131c0cb2319285eb0f1c80aa0bee72");
    let input = format!(
        "input data: {} (",
        installed.join("equilibrium_profile.csv").display()
    );
    assert_eq!(run.stdout.matches(&input).count(), 1, "{}", describe(&run));
    assert!(installed.join("equilibrium_profile.csv").is_file());
    let written = format!(
        "provenance report: {}",
        reports.join("provenance.md").display()
    );
    assert_eq!(
        run.stdout.matches(&written).count(),
        1,
        "{}",
        describe(&run)
    );

    assert_one_report(&reports);
    let (report, records) = report_records(&reports.join("provenance.json"));
    assert_eq!(report["communicator_size"], 4, "{report:#}");
    assert_eq!(records.len(), 1, "{report:#}");
    let (name, record) = &records[0];
    assert_eq!(name, "column_forcing");
    assert_eq!(
        record["ranks"],
        serde_json::json!([0, 1, 2, 3]),
        "{record:#}"
    );
    assert_eq!(record["accesses"], 4, "{record:#}");
    assert_eq!(record["origin"]["kind"], "downloaded", "{record:#}");
    assert_eq!(record["metadata"]["license"], "CC0-1.0", "{record:#}");
}

/// The pid of the process whose environment holds every one of `vars` (`NAME=value`).
fn process_with_env(vars: &[String]) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.find_map(|entry| {
        let entry = entry.ok()?;
        let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
        let environ = std::fs::read(entry.path().join("environ")).ok()?;
        let set: Vec<&[u8]> = environ.split(|&b| b == 0).collect();
        vars.iter()
            .all(|v| set.contains(&v.as_bytes()))
            .then_some(pid)
    })
}

/// SIGKILLs every process whose environment holds `var` (`NAME=value`): a whole job of the
/// test's (mpirun, its daemons and the ranks). Returns how many it killed.
fn kill_every_process_with(var: &str) -> usize {
    let mut killed = 0;
    let start = Instant::now();
    // A killed process's environment reads empty as soon as it is a zombie.
    while let Some(pid) = process_with_env(&[var.to_owned()]) {
        // SAFETY: kill has no memory preconditions.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        killed += 1;
        if start.elapsed() > Duration::from_secs(10) {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    killed
}

/// A node-local job killed half way through its download, whose node depots are then wiped
/// (as the end of a job does to `$TMPDIR`), and the next job: it continues the download from
/// the partial file kept in the shared depot, so the server sends at most 1.2 times the
/// tarball in all; the shared depot keeps no partial file and no artifact afterwards.
#[test]
fn mpi_node_local_a_killed_job_resumes_in_the_next_job() {
    let Some((mpirun, tmp, server, artifact, manifest)) =
        big_job("mpi_node_local_a_killed_job_resumes_in_the_next_job", 32)
    else {
        return;
    };
    let len = artifact.tarball.len() as u64;
    // 1 MiB/s per connection: half the tarball arrives after about 2 s.
    server.cap_rate(1 << 20);
    let shared = tmp.path().join("shared-depot");
    let node_depot = |k: usize| tmp.path().join(format!("node{k}/depot"));
    let argv = fetch_argv(&manifest, &["era5"], &[]);
    let groups = node_groups(4, 2, &node_depot, &|_| vec![], &argv);
    let job = tmp.path().display().to_string();
    let env = [
        (
            "CLIMA_ARTIFACTS_DEPOT_PATH",
            shared.to_str().expect("utf-8"),
        ),
        ("CLIMA_ARTIFACTS_PARALLEL_MIN_SIZE", "1M"),
        ("CLIMA_TEST_JOB", job.as_str()),
    ];
    std::thread::scope(|s| {
        let killer = s.spawn(|| {
            let start = Instant::now();
            while server.bytes_sent_for("/era5.tar.gz") < len / 2 {
                if start.elapsed() > Duration::from_secs(60) {
                    return 0;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            kill_every_process_with(&format!("CLIMA_TEST_JOB={job}"))
        });
        let run = run_bounded_within(mpirun.command(&groups), &env, Duration::from_secs(90));
        assert!(killer.join().expect("killer") > 0, "{}", describe(&run));
        assert!(!run.status.success(), "killed: {}", describe(&run));
    });
    let first = server.bytes_sent_for("/era5.tar.gz");
    assert!(
        first < len,
        "the first job was killed after {first} of {len} bytes"
    );
    assert_eq!(
        clima_artifact_tests::partial_entries(&shared).len(),
        1,
        "the partial download is kept in the shared depot"
    );
    for k in 0..2 {
        std::fs::remove_dir_all(tmp.path().join(format!("node{k}"))).expect("wipe node depot");
    }
    server.cap_rate(0);
    let run = run_bounded(mpirun.command(&groups), &env);
    assert!(run.status.success(), "{}", describe(&run));
    let hash = artifact.tree_hash.to_string();
    for o in outcomes(&run) {
        let expected = node_depot(o.rank / 2).join("artifacts").join(&hash);
        assert_eq!(o.result.as_ref(), Ok(&expected), "rank {}", o.rank);
    }
    artifact.assert_files(&node_depot(1).join("artifacts").join(&hash));
    let sent = server.bytes_sent_for("/era5.tar.gz");
    assert!(
        sent as f64 <= 1.2 * len as f64,
        "the server sent {sent} bytes in all for a {len}-byte tarball ({first} to the killed job)"
    );
    assert!(clima_artifact_tests::partial_entries(&shared).is_empty());
    assert!(!shared.join("artifacts").join(&hash).exists());
}

/// When the shared depot cannot keep the partial download (here: another installer holds the
/// artifact's lock there), it stays in the node depot, and the log says that a later job
/// would start over and what to do.
#[test]
fn mpi_node_local_a_partial_download_the_next_job_cannot_see_is_said() {
    let Some((mpirun, tmp, server, artifact, manifest)) = big_job(
        "mpi_node_local_a_partial_download_the_next_job_cannot_see_is_said",
        4,
    ) else {
        return;
    };
    let shared = tmp.path().join("shared-depot");
    let node_depot = |k: usize| tmp.path().join(format!("node{k}/depot"));
    let held = clima_artifact_runtime::depot::LockedFile::acquire(
        &clima_artifact_runtime::manifest::layout::lock_file(&shared, &artifact.tree_hash),
        "era5 (the test's)",
        Duration::from_secs(5),
        &clima_artifact_runtime::progress::Reporting::default(),
    )
    .expect("lock");
    let argv = fetch_argv(&manifest, &["era5"], &[]);
    let run = run_bounded(
        mpirun.command(&node_groups(4, 2, &node_depot, &|_| vec![], &argv)),
        &[
            (
                "CLIMA_ARTIFACTS_DEPOT_PATH",
                shared.to_str().expect("utf-8"),
            ),
            ("CLIMA_ARTIFACTS_PARALLEL_MIN_SIZE", "1M"),
            ("CLIMA_ARTIFACTS_PROGRESS", "1"),
        ],
    );
    drop(held);
    assert!(run.status.success(), "{}", describe(&run));
    assert!(server.gets("/era5.tar.gz") > 0);
    for line in [
        format!(
            "the partial download of `era5` is kept in the node-local depot `{}`",
            node_depot(0).display()
        ),
        "another installer holds its lock in the shared depot".to_owned(),
        "a later job starts this download over".to_owned(),
        "CLIMA_ARTIFACTS_DEPOT_PATH".to_owned(),
    ] {
        assert!(
            run.stderr.contains(&line),
            "`{line}` not said: {}",
            describe(&run)
        );
    }
}

/// A node leader killed in the middle of the copy: the job ends (mpirun fails), it does not
/// hang.
#[test]
fn mpi_node_local_a_leader_that_dies_ends_the_job() {
    let Some((mpirun, tmp, server, artifact, manifest)) =
        big_job("mpi_node_local_a_leader_that_dies_ends_the_job", 8)
    else {
        return;
    };
    server.cap_rate(2 << 20);
    let node_depot = |k: usize| tmp.path().join(format!("node{k}/depot"));
    let argv = fetch_argv(&manifest, &["era5"], &[]);
    let groups = node_groups(4, 2, &node_depot, &|_| vec![], &argv);
    let depot_var = format!(
        "CLIMA_ARTIFACTS_NODE_LOCAL_DEPOT={}",
        node_depot(1).display()
    );
    let killed = std::thread::scope(|s| {
        let killer = s.spawn(|| {
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(60) {
                if server.bytes_sent_for("/era5.tar.gz") > 1 << 20 {
                    // Rank 2 leads node 1 (OpenMPI, MPICH and PMIx name the rank differently).
                    let leader = ["OMPI_COMM_WORLD_RANK=2", "PMI_RANK=2", "PMIX_RANK=2"]
                        .iter()
                        .find_map(|rank| process_with_env(&[depot_var.clone(), rank.to_string()]));
                    if let Some(pid) = leader {
                        // SAFETY: kill has no memory preconditions.
                        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
                        return Some(pid);
                    }
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            None
        });
        let started = Instant::now();
        let run = run_bounded_within(mpirun.command(&groups), &[], Duration::from_secs(90));
        let pid = killer.join().expect("killer");
        assert!(
            pid.is_some(),
            "the leader of node 1 was not found: {}",
            describe(&run)
        );
        assert!(!run.status.success(), "{}", describe(&run));
        eprintln!(
            "the job ended {:?} after it started, the leader being killed",
            started.elapsed()
        );
        pid
    });
    assert!(killed.is_some());
    assert!(
        !node_depot(1)
            .join("artifacts")
            .join(artifact.tree_hash.to_string())
            .exists()
    );
}

/// Whether `strace` runs here; when it does not, the test is skipped (said on stderr), and under
/// CI=true that fails instead.
fn strace_found() -> bool {
    if Command::new("strace").arg("-V").output().is_ok() {
        return true;
    }
    let required = std::env::var("CI").is_ok_and(|v| v == "true");
    assert!(!required, "strace not found but CI=true: install strace");
    clima_artifact_tests::skip("`strace` not found");
    false
}

/// The start of a rank's command line that runs the rest under `strace` with `flags` (`-f`,
/// or `-f -y`), tracing file and descriptor calls into `traces/trace.<rank>` (the folder is
/// made here).
fn under_strace(traces: &Path, flags: &str) -> Vec<String> {
    std::fs::create_dir_all(traces).expect("traces");
    vec![
        "sh".to_owned(),
        "-c".to_owned(),
        format!(
            "exec strace {flags} -qq -e trace=%file,%desc -o {}/trace.$OMPI_COMM_WORLD_RANK$PMI_RANK \"$@\"",
            traces.display()
        ),
        "sh".to_owned(),
    ]
}

/// [`traced_paths_between_markers`] of `rank`'s trace in `traces`.
fn traced_paths_of(traces: &Path, rank: usize, root: &str) -> Vec<String> {
    let log =
        std::fs::read_to_string(traces.join(format!("trace.{rank}"))).expect("a trace per rank");
    traced_paths_between_markers(&log, rank, root)
}

/// Lines of an `strace` log between the markers of `mpi_fetch` that name a path under `root`.
fn traced_paths_between_markers(log: &str, rank: usize, root: &str) -> Vec<String> {
    let (begin, end) = (
        format!("/MPI_FETCH_BEGIN_{rank}\""),
        format!("/MPI_FETCH_END_{rank}\""),
    );
    let mut inside = false;
    let mut found = Vec::new();
    for line in log.lines() {
        if line.contains(&begin) {
            inside = true;
        } else if line.contains(&end) {
            inside = false;
        } else if inside && line.contains(root) {
            found.push(line.to_owned());
        }
    }
    found
}

/// Under `strace`, 4 ranks as 2 nodes: the ranks that lead no node make no file operation on
/// a depot or the manifest while they resolve the artifact, fresh install or already
/// installed; the leaders do (so the check can fail).
#[test]
fn mpi_node_local_only_leaders_touch_the_depots() {
    let Some((mpirun, tmp, server, manifest, served)) =
        job("mpi_node_local_only_leaders_touch_the_depots", &["era5"])
    else {
        return;
    };
    if !strace_found() {
        return;
    }
    let root = tmp.path().to_str().expect("utf-8").to_owned();
    let shared = tmp.path().join("shared-depot");
    let node_depot = |k: usize| tmp.path().join(format!("node{k}/depot"));
    let traces = tmp.path().join("traces");
    let mut argv = under_strace(&traces, "-f");
    argv.extend(fetch_argv(&manifest, &["era5"], &[]));
    let groups = node_groups(4, 2, &node_depot, &|_| vec![], &argv);
    for run_number in 1..=2 {
        let run = run_bounded(
            mpirun.command(&groups),
            &[(
                "CLIMA_ARTIFACTS_DEPOT_PATH",
                shared.to_str().expect("utf-8"),
            )],
        );
        assert!(run.status.success(), "run {run_number}: {}", describe(&run));
        let mut counts = Vec::new();
        for rank in 0..4 {
            let touched = traced_paths_of(&traces, rank, &root);
            if rank % 2 == 1 {
                assert!(
                    touched.is_empty(),
                    "run {run_number}: rank {rank} leads no node, yet:\n{}",
                    touched.join("\n")
                );
            }
            counts.push(touched.len());
        }
        assert!(
            counts[0] > 0 && counts[2] > 0,
            "run {run_number}: the leaders' file operations were not seen: {counts:?}"
        );
        eprintln!("run {run_number}: file operations on depots per rank: {counts:?}");
    }
    assert_eq!(server.gets(&served[0].url_path), 1);
}

/// A seekable tarball of 60 files (one of several 1 MiB blocks) made by `create`'s writer, and
/// the manifest that serves it from `server` at `/seekable.tar.gz` with its `index-sha256`.
fn serve_seekable(server: &TestServer, dir: &Path) -> (PathBuf, String) {
    serve_seekable_of(server, dir, &|content| {
        for i in 0..60u32 {
            let sub = content.join(format!("d{}", i % 5));
            std::fs::create_dir_all(&sub).expect("folder");
            let body: Vec<u8> = (0..2_000 + 731 * i).map(|j| (j * 7 + i) as u8).collect();
            std::fs::write(sub.join(format!("f{i}.bin")), body).expect("file");
        }
        let large = incompressible((3 << 20) + 17, 9);
        std::fs::write(content.join("large.bin"), large).expect("large");
    })
}

/// [`serve_seekable`] of the tree `fill` writes into the folder it is given.
fn serve_seekable_of(server: &TestServer, dir: &Path, fill: &dyn Fn(&Path)) -> (PathBuf, String) {
    use clima_artifact_ops::tarball::{collect_entries, write_seekable};
    let content = dir.join("content");
    std::fs::create_dir_all(&content).expect("content");
    fill(&content);
    let entries = collect_entries(&content).expect("entries");
    let out = dir.join("seekable.tar.gz");
    let flavour = clima_artifact_runtime::extract::seekable::Flavour::Gzip;
    let made = write_seekable(&content, &entries, &out, flavour, 1 << 20, &|_| {})
        .unwrap_or_else(|e| panic!("{e}"));
    let bytes = std::fs::read(&out).expect("tarball");
    server.serve("/seekable.tar.gz", bytes.clone());
    let text = format!(
        "[era5]\ngit-tree-sha1 = \"{}\"\n\n[[era5.download]]\nurl = {:?}\nsha256 = \"{}\"\n\
         index-sha256 = \"{}\"\n",
        made.tree_hash,
        server.url("/seekable.tar.gz"),
        clima_artifact_tests::sha256(&bytes),
        made.index_sha256.expect("an index"),
    );
    let manifest = dir.join("Artifacts.toml");
    std::fs::write(&manifest, text).expect("manifest");
    (manifest, made.tree_hash.to_string())
}

/// Issue 49, item 2: in the shared-depot mode the root installs a seekable tarball alone, as
/// a single process does: its index first (range requests for the file's last bytes), then
/// one GET of the body, whose members it unpacks while they arrive; every rank gets the same
/// verified path, and nothing unverified is left.
#[test]
fn mpi_shared_depot_the_root_reads_a_seekable_tarballs_index_first() {
    let test = "mpi_shared_depot_the_root_reads_a_seekable_tarballs_index_first";
    let Some(mpirun) = Mpirun::find(test) else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let server = TestServer::start();
    let (manifest, hash) = serve_seekable(&server, tmp.path());
    let depot = tmp.path().join("depot");
    let run = run_bounded(
        mpirun.command(&[(4, fetch_argv(&manifest, &["era5"], &[]))]),
        &[
            ("CLIMA_ARTIFACTS_DEPOT_PATH", depot.to_str().expect("utf-8")),
            ("CLIMA_ARTIFACTS_INSTALL_THREADS", "2"),
        ],
    );
    assert!(run.status.success(), "{}", describe(&run));
    let all = outcomes(&run);
    assert_eq!(all.len(), 4, "{}", describe(&run));
    let expected = depot.join("artifacts").join(&hash);
    for o in &all {
        assert_eq!(o.result.as_ref(), Ok(&expected), "rank {}", o.rank);
    }
    let ranges = server.ranges_of("/seekable.tar.gz").len();
    assert!(ranges >= 1, "the index was not read first");
    assert_eq!(
        server.gets("/seekable.tar.gz"),
        ranges + 1,
        "the index's ranges, then one GET of the body"
    );
    assert_eq!(
        std::fs::read(expected.join("large.bin")).expect("large.bin"),
        incompressible((3 << 20) + 17, 9)
    );
    if clima_artifact_tests::have_git() {
        assert_eq!(
            clima_artifact_tests::git_tree_hash(&expected).to_string(),
            hash
        );
    }
    assert_nothing_unverified(&depot, &[&hash]);
}

/// Issue 49, item 2: in node-local mode a node that receives a seekable tarball over MPI
/// unpacks it on every core as the sender does (its `index-sha256` travels with the bytes):
/// under `strace -f -y`, the receiving leader keeps the tarball whole in its node depot's
/// temp dir (the seekable install's spool, which the one-pass install never makes) before it
/// unpacks it; one GET for the job, every node's copy hashes to the manifest's tree, and
/// nothing unverified is left in any depot.
#[test]
fn mpi_node_local_a_seekable_tarball_is_unpacked_on_every_core_on_each_node() {
    let test = "mpi_node_local_a_seekable_tarball_is_unpacked_on_every_core_on_each_node";
    let Some(mpirun) = Mpirun::find(test) else {
        return;
    };
    if !strace_found() {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let server = TestServer::start();
    let (manifest, hash) = serve_seekable(&server, tmp.path());
    let shared = tmp.path().join("shared-depot");
    let node_depot = |k: usize| tmp.path().join(format!("node{k}/depot"));
    let traces = tmp.path().join("traces");
    let mut argv = under_strace(&traces, "-f -y");
    argv.extend(fetch_argv(&manifest, &["era5"], &[]));
    let groups = node_groups(4, 2, &node_depot, &|_| vec![], &argv);
    let run = run_bounded(
        mpirun.command(&groups),
        &[
            (
                "CLIMA_ARTIFACTS_DEPOT_PATH",
                shared.to_str().expect("utf-8"),
            ),
            ("CLIMA_ARTIFACTS_INSTALL_THREADS", "2"),
        ],
    );
    assert!(run.status.success(), "{}", describe(&run));
    let all = outcomes(&run);
    assert_eq!(all.len(), 4, "{}", describe(&run));
    for o in &all {
        let expected = node_depot(o.rank / 2).join("artifacts").join(&hash);
        assert_eq!(o.result.as_ref(), Ok(&expected), "rank {}", o.rank);
    }
    assert_eq!(server.gets("/seekable.tar.gz"), 1, "one GET for the job");
    for k in 0..2 {
        let installed = node_depot(k).join("artifacts").join(&hash);
        assert_eq!(
            std::fs::read(installed.join("large.bin")).expect("large.bin"),
            incompressible((3 << 20) + 17, 9),
            "node {k}"
        );
        if clima_artifact_tests::have_git() {
            assert_eq!(
                clima_artifact_tests::git_tree_hash(&installed).to_string(),
                hash,
                "node {k}: real git agrees with the tree hash"
            );
        }
        assert_nothing_unverified(&node_depot(k), &[&hash]);
    }
    assert_nothing_unverified(&shared, &[]);
    // Rank 2 leads node 1, which received the bytes: its seekable install kept them whole.
    let log = std::fs::read_to_string(traces.join("trace.2")).expect("rank 2's trace");
    let node1 = node_depot(1).join("artifacts");
    let node1 = node1.to_str().expect("utf-8");
    let spooled: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(node1) && l.contains("\"tarball\"") && l.contains("O_CREAT"))
        .collect();
    assert!(
        !spooled.is_empty(),
        "node 1's leader did not keep the received seekable tarball for the parallel unpack \
         (one pass?)\n{}",
        describe(&run)
    );
}

/// A node that receives a seekable tarball it has no room to unpack (node 1's depot a 40 MiB
/// tmpfs: the 8 MiB tarball it keeps fits, the 56 MiB it unpacks to does not) refuses it
/// before writing a file, with the node-local setting in the error, which every rank
/// reports; node 1's depot keeps nothing (neither the tarball nor a temp folder), node 0 the
/// verified artifact only.
#[test]
fn mpi_node_local_a_node_without_room_for_a_seekable_tarball_fails_every_rank_cleanly() {
    let test = "mpi_node_local_a_node_without_room_for_a_seekable_tarball_fails_every_rank_cleanly";
    let Some(mpirun) = Mpirun::find(test) else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let server = TestServer::start();
    let (manifest, hash) = serve_seekable_of(&server, tmp.path(), &|content| {
        let zeros = content.join("zeros");
        std::fs::create_dir_all(&zeros).expect("zeros");
        for i in 0..48 {
            std::fs::write(zeros.join(format!("{i:02}.bin")), vec![0u8; 1 << 20]).expect("zeros");
        }
        let big = incompressible(8 << 20, 0x9e37_79b9_7f4a_7c15);
        std::fs::write(content.join("big.bin"), big).expect("big");
    });
    let shared = tmp.path().join("shared-depot");
    let node_depot = |k: usize| tmp.path().join(format!("node{k}/depot"));
    let Some(_mount) = crate::disk::Mount::small(&node_depot(1), "40m") else {
        return;
    };
    let argv = fetch_argv(&manifest, &["era5"], &[]);
    let groups = node_groups(4, 2, &node_depot, &|_| vec![], &argv);
    let run = run_bounded(
        mpirun.command(&groups),
        &[
            (
                "CLIMA_ARTIFACTS_DEPOT_PATH",
                shared.to_str().expect("utf-8"),
            ),
            ("CLIMA_ARTIFACTS_RETRIES", "1"),
            ("CLIMA_ARTIFACTS_INSTALL_THREADS", "2"),
        ],
    );
    assert!(!run.status.success(), "{}", describe(&run));
    let all = outcomes(&run);
    assert_eq!(all.len(), 4, "{}", describe(&run));
    let first = all[0].result.as_ref().expect_err("rank 0 failed");
    for o in &all {
        assert_eq!(o.result.as_ref(), Err(first), "rank {} differs", o.rank);
    }
    for e in [
        "node `node-1`",
        "era5",
        "stopped unpacking",
        "larger filesystem (CLIMA_ARTIFACTS_NODE_LOCAL_DEPOT)",
    ] {
        assert!(first.contains(e), "`{e}` not in: {first}");
    }
    assert_eq!(server.gets("/seekable.tar.gz"), 1);
    assert_nothing_unverified(&node_depot(1), &[]);
    assert_nothing_unverified(&node_depot(0), &[&hash]);
    assert_nothing_unverified(&shared, &[]);
}

mod partial;

/// What rank `rank` of an `mpi_fetch` run said its collective step `step` cost (its `STEP` line:
/// `clima_comms::traffic` counts, see `mpi_fetch`'s docs), by field.
fn step_counts(run: &Run, rank: usize, step: &str) -> std::collections::HashMap<String, u64> {
    let prefix = format!("STEP rank={rank} step={step} ");
    let line = run
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no `{prefix}` line\n{}", describe(run)));
    line.split(' ')
        .filter_map(|kv| kv.split_once('='))
        .filter_map(|(k, v)| Some((k.to_owned(), v.parse().ok()?)))
        .collect()
}

/// 32 ranks (issue 40, the size CI affords of "hundreds of ranks without hundreds of requests"),
/// under `strace`, shared depot: one GET; the ranks other than 0 make no file operation on the
/// depot or the manifest; and what rank 0 receives in the install and in the collective report
/// is O(log2 P): at most log2(P) messages of a size that does not grow with P. (Before the tree
/// reduce, rank 0 received 31 messages in each step, 1.6 kB / 15 kB; now 5, 0.35 kB / 2.6 kB.) Counts only,
/// never times.
#[test]
fn mpi_32_ranks_one_get_no_file_operations_and_log_p_bytes_at_the_root() {
    const P: usize = 32;
    let test = "mpi_32_ranks_one_get_no_file_operations_and_log_p_bytes_at_the_root";
    let Some((mpirun, tmp, server, manifest, served)) = job(test, &["era5"]) else {
        return;
    };
    if !strace_found() {
        return;
    }
    let root = tmp.path().to_str().expect("utf-8").to_owned();
    let depot = tmp.path().join("depot");
    let report = tmp.path().join("report");
    let traces = tmp.path().join("traces");
    let mut argv = under_strace(&traces, "-f");
    let report_arg = report.display().to_string();
    argv.extend(fetch_argv(&manifest, &["era5"], &["--report", &report_arg]));
    let run = run_bounded(
        mpirun.command(&[(P, argv)]),
        &[("CLIMA_ARTIFACTS_DEPOT_PATH", depot.to_str().expect("utf-8"))],
    );
    assert!(run.status.success(), "{}", describe(&run));
    assert_eq!(server.gets(&served[0].url_path), 1);
    let expected = depot.join("artifacts").join(&served[0].hash);
    let all = outcomes(&run);
    assert_eq!(all.len(), P, "{}", describe(&run));
    assert!(all.iter().all(|o| o.result.as_ref() == Ok(&expected)));
    assert_one_report(&report);

    for rank in 0..P {
        let touched = traced_paths_of(&traces, rank, &root);
        if rank == 0 {
            assert!(
                !touched.is_empty(),
                "rank 0's file operations were not seen"
            );
        } else {
            assert!(
                touched.is_empty(),
                "rank {rank} is not the root, yet:\n{}",
                touched.join("\n")
            );
        }
    }

    let log2_p = P.trailing_zeros() as u64;
    for (step, bytes_per_message) in [("install", 256), ("report", 2048)] {
        let root_got = step_counts(&run, 0, step);
        eprintln!("rank 0, {step}: {root_got:?}");
        assert!(
            root_got["received_messages"] <= log2_p,
            "{step}: rank 0 received more than log2(P) = {log2_p} messages: {root_got:?}"
        );
        assert!(
            root_got["received_bytes"] <= bytes_per_message * log2_p,
            "{step}: rank 0 received more than {bytes_per_message} x log2(P) bytes: {root_got:?}"
        );
        // Every other rank sends its part once, and receives at most log2(P) parts.
        for rank in 1..P {
            let got = step_counts(&run, rank, step);
            assert!(
                got["received_messages"] <= log2_p + 1,
                "rank {rank}: {got:?}"
            );
        }
    }
}
