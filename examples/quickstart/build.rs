//! Validates `Artifacts.toml` at build time (all errors at once, with file:line:col) and tells
//! cargo to rebuild when it changes or when a `JuliaArtifacts.toml` appears.
//!
//! The override hints name the Overrides.toml of the depot the example will run with: the one
//! `CLIMA_ARTIFACTS_DEPOT_PATH` names, else the example's own `target/quickstart-depot` (see
//! `choose_depot` in `src/main.rs`), never a depot the run does not use.

use std::path::{Path, PathBuf};

fn main() {
    let mut builder = clima_artifact_build::Builder::new();
    if std::env::var_os(clima_artifact_build::vars::DEPOT_PATH).is_none()
        && let Some(target) = target_dir()
    {
        builder = builder.overrides_file(clima_artifact_build::layout::overrides_file(
            &target.join("quickstart-depot"),
        ));
    }
    builder.run_or_panic();
}

/// `target/` of this build, as the binary finds it (`target/<profile>/quickstart`): `OUT_DIR`
/// is `target/<profile>/build/quickstart-<hash>/out`.
fn target_dir() -> Option<PathBuf> {
    let out = PathBuf::from(std::env::var_os("OUT_DIR")?);
    out.ancestors().nth(4).map(Path::to_path_buf)
}
