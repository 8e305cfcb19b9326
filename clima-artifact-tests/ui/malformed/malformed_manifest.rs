// The crate's Artifacts.toml (tests/ui/malformed/Artifacts.toml) has a bad hash: the error gives
// its file, line and column.
fn main() {
    let _ = clima_artifact_runtime::clima_artifact!("profile");
}
