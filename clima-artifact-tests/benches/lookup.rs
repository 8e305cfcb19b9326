//! Lookup latency of an installed artifact: the repeated `clima_artifact!` call
//! (answered from its call site's cache), a call through `Artifacts::ensure_installed` (looks in
//! the depots every time, like a first call without the process-wide set-up), and the bare
//! depot lookup. The true first call in a fresh process is measured by `scripts/bench.sh` with
//! the `bench_lookup` binary, since criterion runs every closure many times in one process.
// `criterion_group!` generates undocumented public functions.
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::Duration;

use clima_artifact_runtime::{Artifacts, clima_artifact, depot, set_macro_config};
use criterion::{Criterion, criterion_group, criterion_main};

fn lookups(c: &mut Criterion) {
    let depot_dir = tempfile::tempdir().unwrap();
    let config = clima_artifact_tests::test_config(&[depot_dir.path().to_path_buf()]);
    set_macro_config(config.clone()).unwrap();
    // Installs `profile` from the quickstart tarball (a path relative to tests/Artifacts.toml).
    let first = clima_artifact!("profile").unwrap();
    let artifacts = Artifacts::from_dir(env!("CARGO_MANIFEST_DIR"))
        .unwrap()
        .with_config(config.clone());
    assert_eq!(artifacts.ensure_installed("profile").unwrap(), first);
    let hash = artifacts.hash("profile").unwrap();
    let depots = config.search_depots();

    let mut group = c.benchmark_group("lookup_installed");
    group.bench_function("macro_repeated_call", |b| {
        b.iter(|| black_box(clima_artifact!("profile").unwrap()))
    });
    group.bench_function("api_ensure_installed", |b| {
        b.iter(|| black_box(artifacts.ensure_installed(black_box("profile")).unwrap()))
    });
    group.bench_function("install_lookup", |b| {
        b.iter(|| black_box(depot::lookup(black_box(&hash), &depots).unwrap()))
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = lookups
}
criterion_main!(benches);
