// A sub-path must stay inside the artifact.
fn main() {
    let _ = clima_artifact_runtime::clima_artifact!("profile/../../etc/passwd");
}
