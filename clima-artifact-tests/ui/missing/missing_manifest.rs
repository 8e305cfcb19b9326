// The crate has no Artifacts.toml: the error says where it looked and what to do.
fn main() {
    let _ = clima_artifact_runtime::clima_artifact!("profile");
}
