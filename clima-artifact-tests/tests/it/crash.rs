//! kill -9 of installing processes at random moments (download, extraction, hashing, just
//! before rename): never a wrong artifact at a final path; the next install succeeds, and the
//! killed process's lock and temp dir are reclaimed.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clima_artifact_runtime::Config;
use clima_artifact_runtime::ensure_variant;
use clima_artifact_tests::{
    Fault, TestArtifact, TestServer, config_env, have_git, installed_entries, temp_entries,
    test_config,
};

/// `install_one variant x ...` of `art` from the server's slowed `slow.tar.gz`, in `config`'s
/// environment, its stdout discarded.
fn install_slow(art: &TestArtifact, server: &TestServer, config: &Config) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_install_one"));
    cmd.args([
        "variant",
        "x",
        &art.tree_hash.to_hex(),
        &art.sha256.to_hex(),
    ])
    .arg(server.url("slow.tar.gz"))
    .envs(config_env(config))
    .stdout(Stdio::null());
    cmd
}

#[test]
fn kill_nine_at_random_points_never_corrupts_the_depot() {
    if !have_git() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let depot = dir.path().join("depot");
    let mut config = test_config(std::slice::from_ref(&depot));
    config.lock_timeout = Duration::from_secs(10);
    let server = TestServer::start();
    let art = TestArtifact::large(42, 24, 40_000);
    server.serve("slow.tar.gz", art.tarball.clone());
    server.serve("fast.tar.gz", art.tarball.clone());
    server.always(
        "slow.tar.gz",
        Fault::Trickle {
            chunk: 48 * 1024,
            delay: Duration::from_millis(6),
        },
    );
    let final_dir = depot.join("artifacts").join(art.tree_hash.to_hex());
    let fast = art.variant(&[server.url("fast.tar.gz")]);

    // Time full installs of the slowed source to spread the kills over its whole duration: the
    // fastest of three, as the first can take several times longer (a cold binary, or the
    // other tests of this binary busy on the same cores), and a too long estimate puts most
    // kills after the install has finished.
    let mut full = Duration::MAX;
    for _ in 0..3 {
        let start = Instant::now();
        let status = install_slow(&art, &server, &config).status().unwrap();
        assert!(status.success());
        full = full.min(start.elapsed());
        art.assert_content(&final_dir);
        std::fs::remove_dir_all(&final_dir).unwrap();
    }
    eprintln!("one slowed install takes {full:?} (the fastest of 3)");

    let mut seed = std::process::id() as u64 ^ 0x9e37_79b9_7f4a_7c15;
    let (mut before, mut after) = (0, 0);
    for i in 0..30 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        // Kill anywhere from "just started" to slightly past the typical completion time.
        let delay = full.mul_f64((seed % 1000) as f64 / 1000.0 * 1.1);
        let mut child = install_slow(&art, &server, &config)
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();

        if final_dir.exists() {
            after += 1;
            art.assert_files(&final_dir);
        } else {
            before += 1;
        }
        let got = ensure_variant("x", &fast, &depot, &config)
            .unwrap_or_else(|e| panic!("iteration {i}: {e}"));
        assert_eq!(got.path, final_dir);
        art.assert_files(&final_dir);
        assert_eq!(
            temp_entries(&depot),
            Vec::<String>::new(),
            "iteration {i}: temp dirs of the killed process are reclaimed"
        );
        assert_eq!(installed_entries(&depot).len(), 1);
        std::fs::remove_dir_all(&final_dir).unwrap();
    }
    eprintln!("kills before completion: {before}, after: {after}");
    assert!(
        before >= 10,
        "most kills should land during the install ({before})"
    );
}
