//! Tells a model whose debug build installs a large artifact slowly why, once per process.
//!
//! Cargo builds dependencies with the profile of the workspace being built: a model crate
//! outside this repository compiles the hashes and decompressors unoptimised in `cargo run`
//! unless its root `Cargo.toml` holds the block of README "Using it in a model" (the build
//! script of `clima-artifact-build` warns about it too, but build warnings scroll by). After
//! an install of [`LARGE`] bytes or more, a debug build times SHA-1 over a few MiB; below
//! [`SLOW`] bytes per second it is unoptimised (optimised SHA-1 runs at 0.5-2 GB/s on one
//! core, unoptimised at a few tens of MB/s), and the log says so.

use clima_artifact_progress::Reporting;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::notice::InstallEvent;
use sha1::Digest;

/// Installs smaller than this are fast enough either way.
const LARGE: u64 = 64 << 20;

/// Hash speed (bytes per second) under which the hot path counts as unoptimised.
const SLOW: f64 = 200e6;

/// Bytes hashed by the probe.
const PROBE: usize = 4 << 20;

static PROBED: AtomicBool = AtomicBool::new(false);

/// Called after an install of `bytes`; probes (once per process, in debug builds only) and
/// warns when the hot path is unoptimised.
pub(crate) fn after_install(name: &str, bytes: u64, took: Duration, reporting: &Reporting) {
    if !cfg!(debug_assertions) || bytes < LARGE || PROBED.swap(true, Ordering::Relaxed) {
        return;
    }
    if let Some(event) = slow(name, bytes, took, probe()) {
        reporting.emit(event);
    }
}

/// SHA-1 speed of this build, in bytes per second.
fn probe() -> f64 {
    let data = vec![0x5a_u8; PROBE];
    let start = Instant::now();
    let digest = sha1::Sha1::digest(&data);
    std::hint::black_box(digest);
    PROBE as f64 / start.elapsed().as_secs_f64().max(1e-9)
}

/// The warning for a hash speed of `speed` bytes per second, if it is slow.
fn slow(name: &str, bytes: u64, took: Duration, speed: f64) -> Option<InstallEvent> {
    (speed < SLOW).then(|| InstallEvent::SlowDebugBuild {
        artifact: name.to_owned(),
        bytes,
        took,
        bytes_per_second: speed,
    })
}

/// The text of [`slow`]'s warning.
#[cfg(test)]
fn judge(name: &str, bytes: u64, took: Duration, speed: f64) -> Option<String> {
    slow(name, bytes, took, speed).map(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_hash_is_explained_and_a_fast_one_is_not() {
        let took = Duration::from_millis(26_600);
        let text = judge("era5", 200 << 20, took, 35e6).unwrap();
        for needle in [
            "artifact `era5` (200 MiB) took 26.6 s",
            "hashes at 35 MB/s",
            "\"Using it in a model\"",
            "the `[profile.dev.package]` block",
            "cargo run --release",
        ] {
            assert!(text.contains(needle), "{needle}: {text}");
        }
        assert_eq!(judge("era5", 200 << 20, took, 900e6), None);
    }
}
