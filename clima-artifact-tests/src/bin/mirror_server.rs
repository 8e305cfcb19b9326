//! Serves `count` small artifacts over loopback HTTP with `latency` added to every request, and
//! writes their manifest (for `scripts/bench-mirror.sh`).
//!
//! ```text
//! mirror_server <folder> <count> <latency-ms>
//! ```
//!
//! Writes `<folder>/Artifacts.toml` (entries `a00`, `a01`, ... downloading from this server),
//! prints its path on stdout, then serves until stdin closes.

use std::io::{Read, Write};
use std::process::ExitCode;
use std::time::Duration;

use clima_artifact_tests::{ManifestEntry, TestArtifact, TestServer, write_manifest};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [folder, count, latency] = args.as_slice() else {
        eprintln!("usage: mirror_server <folder> <count> <latency-ms>");
        return ExitCode::from(2);
    };
    let (Ok(count), Ok(latency)) = (count.parse::<u32>(), latency.parse::<u64>()) else {
        eprintln!("mirror_server: `{count}` and `{latency}` must be whole numbers");
        return ExitCode::from(2);
    };
    let server = TestServer::start();
    server.set_latency(Duration::from_millis(latency));
    let arts: Vec<TestArtifact> = (0..count).map(|i| TestArtifact::sample(9000 + i)).collect();
    let names: Vec<String> = (0..count).map(|i| format!("a{i:02}")).collect();
    let entries: Vec<ManifestEntry<'_>> = arts
        .iter()
        .zip(&names)
        .map(|(a, name)| {
            let path = format!("{name}.tar.gz");
            server.serve(&path, a.tarball.clone());
            ManifestEntry {
                name,
                hash: a.tree_hash,
                downloads: vec![(server.url(&path), a.sha256)],
                extra: vec![],
            }
        })
        .collect();
    let manifest = write_manifest(std::path::Path::new(folder), &entries);
    println!("{}", manifest.display());
    let _ = std::io::stdout().flush();
    // Until whoever started it closes our stdin (or dies).
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    eprintln!("mirror_server: {} GETs", server.total_gets());
    ExitCode::SUCCESS
}
