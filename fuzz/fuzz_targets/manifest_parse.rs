//! Any text: `Manifest::parse` returns Ok or a located error, never panics.
#![no_main]

use std::path::Path;

use clima_artifact_manifest::Manifest;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let path = Path::new("/fuzz/Artifacts.toml");
        if let Err(err) = Manifest::parse(text, path) {
            // Rendering the error must not panic either.
            let _ = err.to_string();
        }
    }
});
