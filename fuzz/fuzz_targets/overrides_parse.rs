//! Any text: `OverridesFile::parse` returns Ok or a located error, never panics.
#![no_main]

use std::path::Path;

use clima_artifact_manifest::OverridesFile;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let path = Path::new("/fuzz/artifacts/Overrides.toml");
        if let Err(err) = OverridesFile::parse(text, path) {
            let _ = err.to_string();
        }
    }
});
