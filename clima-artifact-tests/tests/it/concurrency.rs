//! Many threads and processes installing the same artifacts into one depot: one download each,
//! every caller gets the right path, nothing corrupt.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use clima_artifact_runtime::Config;
use clima_artifact_runtime::ensure_variant;
use clima_artifact_tests::{
    Fault, TestArtifact, TestServer, config_env, have_git, installed_entries, success_stdout,
    temp_entries, test_config,
};

fn install_one() -> &'static str {
    env!("CARGO_BIN_EXE_install_one")
}

/// An empty depot in a temp dir with its config, and a server that serves `art` slowly at
/// `x.tar.gz` (so concurrent installers really overlap).
struct SlowSetup {
    _dir: tempfile::TempDir,
    depot: PathBuf,
    config: Config,
    server: TestServer,
}

fn slow_setup(art: &TestArtifact) -> SlowSetup {
    let dir = tempfile::tempdir().unwrap();
    let depot = dir.path().join("depot");
    let config = test_config(std::slice::from_ref(&depot));
    let server = TestServer::start();
    server.serve("x.tar.gz", art.tarball.clone());
    server.always(
        "x.tar.gz",
        Fault::Trickle {
            chunk: art.tarball.len() / 8 + 1,
            delay: Duration::from_millis(15),
        },
    );
    SlowSetup {
        _dir: dir,
        depot,
        config,
        server,
    }
}

#[test]
fn eight_threads_one_get_one_install() {
    if !have_git() {
        return;
    }
    let art = TestArtifact::large(1, 8, 30_000);
    let SlowSetup {
        _dir,
        depot,
        config,
        server,
    } = slow_setup(&art);
    let v = art.variant(&[server.url("x.tar.gz")]);
    let paths: Vec<_> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..8)
            .map(|_| s.spawn(|| ensure_variant("x", &v, &depot, &config)))
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap().unwrap_or_else(|e| panic!("{e}")).path)
            .collect()
    });
    assert_eq!(server.gets("x.tar.gz"), 1);
    assert!(paths.iter().all(|p| p == &paths[0]));
    art.assert_content(&paths[0]);
    assert_eq!(temp_entries(&depot), Vec::<String>::new());
}

#[test]
fn eight_processes_one_get_one_install() {
    if !have_git() {
        return;
    }
    let art = TestArtifact::large(2, 8, 30_000);
    let SlowSetup {
        _dir,
        depot,
        config,
        server,
    } = slow_setup(&art);
    let children: Vec<_> = (0..8)
        .map(|_| {
            Command::new(install_one())
                .args([
                    "variant",
                    "x",
                    &art.tree_hash.to_hex(),
                    &art.sha256.to_hex(),
                ])
                .arg(server.url("x.tar.gz"))
                .envs(config_env(&config))
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let expected = depot.join("artifacts").join(art.tree_hash.to_hex());
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert_eq!(success_stdout(out).trim(), expected.display().to_string());
    }
    assert_eq!(server.gets("x.tar.gz"), 1);
    assert_eq!(
        clima_artifact_tests::count_over_http(&server.base(), "x.tar.gz"),
        1
    );
    art.assert_content(&expected);
    assert_eq!(temp_entries(&depot), Vec::<String>::new());
}

/// 32 processes x 4 artifacts in varying order on one depot, repeated from an empty depot:
/// each artifact downloaded once per round, every process gets the right paths.
#[test]
fn stress_processes_times_artifacts() {
    if !have_git() {
        return;
    }
    let (procs, rounds) = (32, 10);
    let arts: Vec<TestArtifact> = (0..4)
        .map(|i| TestArtifact::large(10 + i, 3, 8_000))
        .collect();
    for round in 0..rounds {
        let dir = tempfile::tempdir().unwrap();
        let depot = dir.path().join("depot");
        let config = test_config(std::slice::from_ref(&depot));
        let server = TestServer::start();
        for (i, a) in arts.iter().enumerate() {
            server.serve(&format!("{i}.tar.gz"), a.tarball.clone());
        }
        let children: Vec<_> = (0..procs)
            .map(|p| {
                // A shell loop installs the 4 artifacts in an order rotated per process.
                let mut script = String::new();
                for k in 0..4 {
                    let i = (p + k + round) % 4;
                    let a = &arts[i];
                    script.push_str(&format!(
                        "\"$BIN\" variant a{i} {} {} {} || exit 1\n",
                        a.tree_hash,
                        a.sha256,
                        server.url(&format!("{i}.tar.gz"))
                    ));
                }
                Command::new("sh")
                    .arg("-c")
                    .arg(script)
                    .env("BIN", install_one())
                    .envs(config_env(&config))
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for c in children {
            let out = c.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "round {round}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let lines: Vec<String> = String::from_utf8(out.stdout)
                .unwrap()
                .lines()
                .map(str::to_owned)
                .collect();
            assert_eq!(lines.len(), 4);
            for l in lines {
                let hash = l.rsplit('/').next().unwrap().to_owned();
                assert!(arts.iter().any(|a| a.tree_hash.to_hex() == hash), "{l}");
            }
        }
        for (i, a) in arts.iter().enumerate() {
            assert_eq!(
                server.gets(&format!("{i}.tar.gz")),
                1,
                "round {round} artifact {i}"
            );
            a.assert_content(&depot.join("artifacts").join(a.tree_hash.to_hex()));
        }
        assert_eq!(installed_entries(&depot).len(), 4);
        assert_eq!(temp_entries(&depot), Vec::<String>::new());
    }
}
