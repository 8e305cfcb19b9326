// A typo in a literal name fails the build with a suggestion and the defined names; the
// expansion still has type `Result<PathBuf, Error>`, so the lines below add no further errors.
use clima_artifact_runtime::clima_artifact;

fn main() {
    let profile: std::path::PathBuf = clima_artifact!("profil").unwrap();
    let _ = profile.join("profile.csv");
    let _ = clima_artifact!("totally-unrelated", &clima_artifact_runtime::Singleton);
}
