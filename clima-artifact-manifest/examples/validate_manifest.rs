//! Prints the parse errors or validation warnings of the manifests given as arguments.
//!
//! `cargo run -p clima-artifact-manifest --example validate_manifest -- path/Artifacts.toml ...`

use std::path::Path;
use std::process::ExitCode;

use clima_artifact_manifest::{Manifest, validate};

fn main() -> ExitCode {
    let mut failed = false;
    for arg in std::env::args().skip(1) {
        match Manifest::load_all(Path::new(&arg)) {
            Ok(m) => {
                for w in validate(&m) {
                    println!("{arg}: warning: {w}");
                }
            }
            Err(errors) => {
                failed = true;
                for e in errors {
                    println!("error: {e}");
                }
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
