// `name//abs` asks for an absolute sub-path: rejected.
fn main() {
    let _ = clima_artifact_runtime::clima_artifact!("profile//etc/passwd");
}
