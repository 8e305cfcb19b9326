//! Any bytes: `extract_archive` into a temp dir with a small cap never panics, never writes
//! outside the temp dir, and on success its hash equals `tree_hash` of what it wrote.
#![no_main]

use std::fs;

use clima_artifact_runtime::extract::{ExtractLimits, extract_archive};
use clima_artifact_runtime::tree_hash::tree_hash;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let root = tempfile::tempdir().expect("temp dir");
    let dest = root.path().join("dest");
    fs::create_dir(&dest).expect("dest");
    let limits = ExtractLimits {
        max_unpacked_bytes: 4 << 20,
    };
    let result = extract_archive(data, &dest, &limits);
    // Nothing may appear next to `dest`.
    let siblings: Vec<_> = fs::read_dir(root.path())
        .expect("list root")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(siblings, ["dest"], "extraction wrote outside its directory");
    if let Ok(extracted) = result {
        let _ = extracted.unpacked_bytes;
        assert_eq!(
            extracted.tree_hash,
            tree_hash(&dest).expect("tree_hash of the extracted tree"),
            "hash computed while extracting differs from tree_hash"
        );
    }
});
