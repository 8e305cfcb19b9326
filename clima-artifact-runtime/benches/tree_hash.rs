//! Benches for git tree hashing: whole trees (parallel) and single blobs.
// `criterion_group!` generates undocumented public functions.
#![allow(missing_docs)]

#[allow(dead_code)] // each bench uses part of the shared helpers
mod common;

use std::hint::black_box;
use std::time::Duration;

use clima_artifact_runtime::tree_hash::{BlobHasher, tree_hash};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

fn tree_hashing(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let bytes = common::generate_tree(dir.path(), 32 << 20);
    let mut group = c.benchmark_group("tree_hash");
    group.throughput(Throughput::Bytes(bytes));
    group.bench_function("mixed_tree_32MiB", |b| {
        b.iter(|| black_box(tree_hash(black_box(dir.path())).unwrap()))
    });
    group.finish();
}

fn blob_hashing(c: &mut Criterion) {
    let mut group = c.benchmark_group("blob_hash");
    for (name, len) in [("1KiB", 1usize << 10), ("16MiB", 16 << 20)] {
        let data = common::random_bytes(7, len);
        group.throughput(Throughput::Bytes(len as u64));
        group.bench_function(name, |b| {
            b.iter(|| {
                let mut hasher = BlobHasher::new(data.len() as u64);
                for chunk in data.chunks(256 * 1024) {
                    hasher.update(chunk);
                }
                black_box(hasher.finish().unwrap())
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = tree_hashing, blob_hashing
}
criterion_main!(benches);
