//! The MPI quickstart, built without MPI, run as a new user runs it: without
//! `CLIMA_ARTIFACTS_DEPOT_PATH` it installs inside `target/`, never into the user's cache.

use std::path::Path;
use std::process::Command;

#[test]
fn without_a_depot_path_it_installs_under_target_not_in_the_users_cache() {
    let exe = Path::new(env!("CARGO_BIN_EXE_quickstart-mpi"));
    let home = tempfile::tempdir().unwrap();
    let reports = tempfile::tempdir().unwrap();
    let out = Command::new(exe)
        .env_remove("CLIMA_ARTIFACTS_DEPOT_PATH")
        .env_remove("CLIMA_ARTIFACTS_OFFLINE")
        .env("HOME", home.path())
        .env("XDG_CACHE_HOME", home.path().join(".cache"))
        .arg("--report")
        .arg(format!("{}/", reports.path().display()))
        .output()
        .expect("run quickstart-mpi");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let depot = exe
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join("quickstart-depot");
    assert!(
        stdout.contains(&format!(
            "depot: {} (the example's default",
            depot.display()
        )),
        "{stdout}"
    );
    let installed = depot
        .join("artifacts")
        .join("a0445e7010131c0cb2319285eb0f1c80aa0bee72");
    assert!(
        installed.join("equilibrium_profile.csv").is_file(),
        "{stdout}"
    );
    assert!(
        stdout.contains(&installed.display().to_string()),
        "{stdout}"
    );
    assert!(
        !home.path().join(".cache").exists(),
        "wrote into the user's cache"
    );
}
