//! Reads and parses each manifest named on the command line (Julia's tolerance: broken entries
//! kept aside) and prints how many files, entries and errors there were: the baseline of
//! `scripts/bench-census.sh`, everything the census does but the walk and the classification.
//!
//! `cargo run --release -p clima-artifact-manifest --example parse_manifests -- FILE...`

use std::path::Path;

use clima_artifact_manifest::Manifest;

fn main() {
    let (mut files, mut entries, mut errors) = (0usize, 0usize, 0usize);
    for arg in std::env::args_os().skip(1) {
        files += 1;
        match Manifest::load_lenient(Path::new(&arg)) {
            Ok(m) => entries += m.artifacts().len() + m.broken().len(),
            Err(_) => errors += 1,
        }
    }
    println!("{files} files, {entries} entries, {errors} unreadable");
}
