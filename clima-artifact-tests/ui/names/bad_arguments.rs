// No name, or too many arguments.
fn main() {
    let _ = clima_artifact_runtime::clima_artifact!();
    let _ = clima_artifact_runtime::clima_artifact!("profile", &clima_artifact_runtime::Singleton, 3);
}
