//! 16 independent processes (no MPI) install the same artifact into one shared depot at the same
//! time: the per-artifact lock lets exactly one of them download (one GET), and every process
//! prints the same installed path.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clima_artifact_tests::{
    Fault, ManifestEntry, TestArtifact, TestServer, config_env, test_config, write_manifest,
};

const PROCESSES: usize = 16;

#[test]
fn sixteen_processes_on_a_shared_depot_download_once() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let depot = tmp.path().join("shared-depot");
    let server = TestServer::start();
    let artifact = TestArtifact::large(16, 8, 64 * 1024);
    server.serve("/era5.tar.gz", artifact.tarball.clone());
    // Slow the one download down so that every process starts while it is still running.
    server.always(
        "/era5.tar.gz",
        Fault::Trickle {
            chunk: 64 * 1024,
            delay: Duration::from_millis(40),
        },
    );
    let manifest = write_manifest(
        tmp.path(),
        &[ManifestEntry {
            name: "era5",
            hash: artifact.tree_hash,
            downloads: vec![(server.url("/era5.tar.gz"), artifact.sha256)],
            extra: vec![],
        }],
    );
    let env = config_env(&test_config(std::slice::from_ref(&depot)));

    let started = Instant::now();
    let children: Vec<_> = (0..PROCESSES)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_install_one"))
                .arg("manifest")
                .arg(&manifest)
                .arg("era5")
                .envs(env.iter().map(|(k, v)| (k, v)))
                .env_remove("CLIMA_ARTIFACTS_NODE_LOCAL_DEPOT")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn install_one")
        })
        .collect();
    let outputs: Vec<_> = children
        .into_iter()
        .map(|c| c.wait_with_output().expect("wait for install_one"))
        .collect();

    let expected = depot.join("artifacts").join(artifact.tree_hash.to_string());
    for (i, out) in outputs.iter().enumerate() {
        assert!(
            out.status.success(),
            "process {i} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let path = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        assert_eq!(path, expected.display().to_string(), "process {i}");
    }
    assert_eq!(
        server.gets("/era5.tar.gz"),
        1,
        "exactly one process downloads"
    );
    artifact.assert_content(&expected);
    // Nothing but the artifact (and lock files) is left in the depot: no stray temp dirs.
    let leftovers: Vec<String> = std::fs::read_dir(depot.join("artifacts"))
        .expect("artifacts dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n != &artifact.tree_hash.to_string() && !n.contains("lock"))
        .collect();
    assert!(leftovers.is_empty(), "left in the depot: {leftovers:?}");
    println!("{PROCESSES} processes took {:?}", started.elapsed());
}
