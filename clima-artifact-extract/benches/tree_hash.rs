//! Benches for git tree hashing: whole trees (parallel) and single blobs.
// `criterion_group!` generates undocumented public functions.
#![allow(missing_docs)]

#[allow(dead_code)] // each bench uses part of the shared helpers
mod common;

use std::hint::black_box;
use std::process::Command;
use std::time::Duration;

use clima_artifact_extract::tree_hash::{BlobHasher, tree_hash};
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};

fn tree_hashing(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let bytes = common::generate_tree(dir.path(), 32 << 20);
    let mut group = c.benchmark_group("tree_hash");
    group.throughput(Throughput::Bytes(bytes));
    group.bench_function("mixed_tree_32MiB", |b| {
        b.iter(|| black_box(tree_hash(black_box(dir.path())).unwrap()))
    });
    // Baselines on the same tree, same run: `git add -A && git write-tree` in a fresh
    // repository (outside the tree), and `sha1sum` over every file's bytes.
    if tool_works("git") {
        group.bench_function("baseline_git_add_write_tree", |b| {
            b.iter_batched(
                || tempfile::tempdir().unwrap(),
                |repo| {
                    let git = |args: &[&str]| {
                        let out = Command::new("git")
                            .arg(format!("--git-dir={}", repo.path().display()))
                            .arg(format!("--work-tree={}", dir.path().display()))
                            .args(["-c", "core.fileMode=true", "-c", "core.symlinks=true"])
                            .args(args)
                            .env("GIT_CONFIG_NOSYSTEM", "1")
                            .env("GIT_CONFIG_GLOBAL", "/dev/null")
                            .output()
                            .unwrap();
                        assert!(out.status.success(), "{out:?}");
                        out.stdout
                    };
                    git(&["init", "-q"]);
                    git(&["add", "-A"]);
                    black_box(git(&["write-tree"]));
                    repo
                },
                BatchSize::PerIteration,
            )
        });
    } else {
        eprintln!("skipping the git baseline: `git` not found");
    }
    if tool_works("sha1sum") {
        group.bench_function("baseline_sha1sum_all_bytes", |b| {
            b.iter(|| {
                let out = Command::new("sh")
                    .arg("-c")
                    .arg("find . -type f -print0 | xargs -0 cat | sha1sum")
                    .current_dir(dir.path())
                    .output()
                    .unwrap();
                assert!(out.status.success());
                black_box(out.stdout)
            })
        });
    } else {
        eprintln!("skipping the sha1sum baseline: `sha1sum` not found");
    }
    group.finish();
}

fn tool_works(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
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
                black_box(hasher.finish().unwrap().sha1)
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
