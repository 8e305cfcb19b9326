//! Builds and runs `tests/fixtures/renamed-dep`, a crate that depends on the runtime as `arty`:
//! the macro's expansion must name only `$crate`, so every form works under the new name.
//!
//! The fixture is copied to a temp dir (its runtime path made absolute, the workspace's
//! Cargo.lock copied so `--offline` resolves the same versions) and built into
//! `<target>/tests/trybuild`, the directory the UI tests' trybuild build already uses, with the
//! same rustflags, so the dependencies compiled there are reused where cargo can.

use std::path::Path;
use std::process::Command;

use clima_artifact_tests::cargo_target_dir;

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dest = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), dest).unwrap();
        }
    }
}

#[test]
fn a_renamed_runtime_dependency_works() {
    let tests_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let workspace = tests_dir.parent().unwrap();
    let krate = tempfile::tempdir().unwrap();
    copy_dir(&tests_dir.join("fixtures/renamed-dep"), krate.path());
    let toml_path = krate.path().join("Cargo.toml");
    let toml = std::fs::read_to_string(&toml_path).unwrap().replace(
        "../../../clima-artifact-runtime",
        &workspace
            .join("clima-artifact-runtime")
            .display()
            .to_string(),
    );
    std::fs::write(&toml_path, toml).unwrap();
    std::fs::copy(
        workspace.join("Cargo.lock"),
        krate.path().join("Cargo.lock"),
    )
    .unwrap();

    // A depot whose Overrides.toml provides `station`.
    let depot = tempfile::tempdir().unwrap();
    let station = tempfile::tempdir().unwrap();
    std::fs::write(station.path().join("radiosonde.csv"), "z_m,T_K\n0,291.2\n").unwrap();
    std::fs::create_dir_all(depot.path().join("artifacts")).unwrap();
    std::fs::write(
        depot.path().join("artifacts/Overrides.toml"),
        format!(
            "f2e37ce8393132a9470b4405546a1730d42cbc67 = \"{}\"\n",
            station.path().display()
        ),
    )
    .unwrap();

    let flags = r#"["--cfg", "trybuild", "--verbose", "-A", "dead_code"]"#;
    let out = Command::new(cargo())
        .current_dir(krate.path())
        .env(
            "CARGO_TARGET_DIR",
            cargo_target_dir().join("tests/trybuild"),
        )
        .env_remove("RUSTFLAGS")
        .env("CARGO_INCREMENTAL", "0")
        .env("CLIMA_ARTIFACTS_DEPOT_PATH", depot.path())
        .args(["run", "--quiet", "--offline"])
        .arg(format!("--config=build.rustflags={flags}"))
        .output()
        .expect("run cargo");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stdout.contains(&format!("station: {}", station.path().display())),
        "{stdout}"
    );
    assert!(stdout.contains("file: z_m,T_K\n0,291.2"), "{stdout}");
    assert!(
        stdout.contains("declared: station at 3 call sites"),
        "{stdout}"
    );
}
