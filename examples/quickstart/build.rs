//! Validates `Artifacts.toml` at build time (all errors at once, with file:line:col) and tells
//! cargo to rebuild when it changes or when a `JuliaArtifacts.toml` appears.

fn main() {
    clima_artifact_build::validate();
}
