//! Benches for extraction (decompress + write + hash in one pass) from memory.
// `criterion_group!` generates undocumented public functions.
#![allow(missing_docs)]

#[allow(dead_code)] // each bench uses part of the shared helpers
mod common;

use std::hint::black_box;
use std::io::Write;
use std::time::Duration;

use clima_artifact_extract::{ExtractLimits, extract_archive};
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};

/// What both benches extract: a 32 MiB tree as `.tar.gz` and `.tar`, the folder fresh
/// destinations are made in, and the limits with and without the git tree SHA-256.
struct Case {
    _source: tempfile::TempDir,
    bytes: u64,
    archives: [(&'static str, Vec<u8>); 2],
    /// Fresh destinations next to each other on the same filesystem.
    scratch: tempfile::TempDir,
    /// SHA-1 alone, and also the git tree SHA-256 in the same pass (an entry with a
    /// `git-tree-sha256`): what it costs on top of the SHA-1 alone.
    limits: [(&'static str, ExtractLimits); 2],
}

fn case() -> Case {
    let source = tempfile::tempdir().unwrap();
    let bytes = common::generate_tree(source.path(), 32 << 20);
    let archives = [
        ("tar_gz_32MiB", common::tar_gz(source.path())),
        ("tar_32MiB", common::tar_plain(source.path())),
    ];
    let sha1 = ExtractLimits {
        max_unpacked_bytes: 1 << 34,
        ..ExtractLimits::default()
    };
    let both = ExtractLimits {
        tree_hash_sha256: true,
        ..sha1.clone()
    };
    Case {
        _source: source,
        bytes,
        archives,
        scratch: tempfile::tempdir().unwrap(),
        limits: [("", sha1), ("_sha256_too", both)],
    }
}

fn extraction(c: &mut Criterion) {
    let Case {
        bytes,
        archives,
        scratch,
        limits: variants,
        ..
    } = &case();
    let mut group = c.benchmark_group("extract");
    group.throughput(Throughput::Bytes(*bytes));
    for (name, archive) in archives {
        for (suffix, limits) in variants {
            group.bench_function(format!("{name}{suffix}"), |b| {
                b.iter_batched(
                    || tempfile::tempdir_in(scratch.path()).unwrap(),
                    |dest| {
                        let out = extract_archive(archive.as_slice(), dest.path(), limits).unwrap();
                        black_box(out);
                        dest
                    },
                    BatchSize::PerIteration,
                )
            });
        }
    }
    // Baseline on the same bytes and disk: `tar -xf -` (no hashing, no checks).
    let system_tar = std::process::Command::new("tar")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if system_tar {
        for (name, archive) in archives {
            let flag = if name.starts_with("tar_gz") {
                "-xzf"
            } else {
                "-xf"
            };
            group.bench_function(format!("baseline_system_{name}"), |b| {
                b.iter_batched(
                    || tempfile::tempdir_in(scratch.path()).unwrap(),
                    |dest| {
                        let mut child = std::process::Command::new("tar")
                            .args([flag, "-", "-C"])
                            .arg(dest.path())
                            .stdin(std::process::Stdio::piped())
                            .spawn()
                            .unwrap();
                        child.stdin.take().unwrap().write_all(archive).unwrap();
                        assert!(child.wait().unwrap().success());
                        dest
                    },
                    BatchSize::PerIteration,
                )
            });
        }
    } else {
        eprintln!("skipping the system tar baseline: `tar` not found");
    }
    group.finish();
}

/// CPU seconds (user + system) of this process so far, all threads: the writer thread's
/// hashing included.
fn process_cpu() -> Duration {
    // SAFETY: getrusage only writes the struct it is given.
    let usage = unsafe {
        let mut usage = std::mem::zeroed::<libc::rusage>();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// The CPU time of an extraction, SHA-1 alone and SHA-1 with SHA-256: on a shared machine, CPU
/// time says what the SHA-256 tree hash costs better than wall time, which other processes move.
fn extraction_cpu(c: &mut Criterion) {
    let Case {
        bytes,
        archives,
        scratch,
        limits: variants,
        ..
    } = &case();
    let mut group = c.benchmark_group("extract_cpu");
    group.throughput(Throughput::Bytes(*bytes));
    for (name, archive) in archives {
        for (suffix, limits) in variants {
            group.bench_function(format!("{name}{suffix}"), |b| {
                b.iter_custom(|iters| {
                    let mut cpu = Duration::ZERO;
                    for _ in 0..iters {
                        let dest = tempfile::tempdir_in(scratch.path()).unwrap();
                        let start = process_cpu();
                        let out = extract_archive(archive.as_slice(), dest.path(), limits).unwrap();
                        cpu += process_cpu() - start;
                        black_box(out);
                    }
                    cpu
                })
            });
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(4));
    targets = extraction, extraction_cpu
}
criterion_main!(benches);
