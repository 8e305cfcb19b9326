//! Compile-fail tests of `clima_artifact!` (trybuild; expected messages in `clima-artifact-tests/ui/**.stderr`).
//!
//! The macro reads the manifest of the crate being compiled. trybuild compiles the files in a
//! generated crate at `<target>/tests/trybuild/clima-artifact-tests/`, so this test places the
//! manifest there before each group: `tests/Artifacts.toml` for `ui/names/`,
//! `ui/malformed/Artifacts.toml` for `ui/malformed/`, and none for `ui/missing/`. The groups run
//! one after the other in this one test because they share that directory.
//! Regenerate the expected output with `TRYBUILD=overwrite cargo test -p clima-artifact-tests --test it ui::`.

use clima_artifact_tests::cargo_target_dir;

#[test]
fn compile_errors() {
    let target = cargo_target_dir();
    // The expected messages name the manifest as `$WORKSPACE/target/tests/trybuild/...`
    // (trybuild replaces the workspace path), so they hold for the default target directory only.
    let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap();
    if target != workspace.join("target") {
        clima_artifact_tests::skip(&format!(
            "the expected messages assume the target directory `{}`, not `{}`",
            workspace.join("target").display(),
            target.display()
        ));
        return;
    }
    let dir = target.join("tests/trybuild/clima-artifact-tests");
    std::fs::create_dir_all(&dir).unwrap();
    let manifest = dir.join("Artifacts.toml");
    let _ = std::fs::remove_file(dir.join("JuliaArtifacts.toml"));

    std::fs::copy("Artifacts.toml", &manifest).unwrap();
    trybuild::TestCases::new().compile_fail("ui/names/*.rs");

    std::fs::copy("ui/malformed/Artifacts.toml", &manifest).unwrap();
    trybuild::TestCases::new().compile_fail("ui/malformed/*.rs");

    std::fs::remove_file(&manifest).unwrap();
    trybuild::TestCases::new().compile_fail("ui/missing/*.rs");
}
