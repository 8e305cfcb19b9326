//! The global provenance registry under concurrency, the report guard, and gathering over a
//! multi-rank [`Context`] of threads as ranks (`clima_comms::on_thread_ranks`).
//!
//! Every test here touches the process-wide registry, so they all take [`SERIAL`] first; the
//! registry is shared by the whole test binary, which is why these tests live in one file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use clima_artifact_runtime::Context;
use clima_artifact_runtime::GitTreeSha1;
use clima_artifact_runtime::access_log::{
    self, AccessEvent, ArtifactRecord, CallSite, RecordedOrigin,
};
use clima_artifact_runtime::report::{self, Report, ReportGuard};
use clima_comms::on_thread_ranks;

static SERIAL: Mutex<()> = Mutex::new(());

/// Serialises the tests and starts each from an empty registry.
fn exclusive() -> MutexGuard<'static, ()> {
    let guard = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    access_log::clear();
    guard
}

fn hash(byte: u8) -> GitTreeSha1 {
    GitTreeSha1([byte; 20])
}

fn event(name: &str, h: u8, call_site: Option<(&'static str, u32)>, rank: usize) -> AccessEvent {
    AccessEvent {
        name: name.to_owned(),
        hash: hash(h),
        path: PathBuf::from(format!("/depot/artifacts/{}", hash(h))),
        origin: RecordedOrigin::Depot,
        call_site,
        manifest: PathBuf::from("/model/Artifacts.toml"),
        metadata: BTreeMap::from([("license".to_owned(), "CC-BY-4.0".to_owned())]),
        rank,
    }
}

fn find<'a>(records: &'a [ArtifactRecord], name: &str) -> &'a ArtifactRecord {
    records
        .iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no record for `{name}` in {records:#?}"))
}

const LINES: [(&str, u32); 4] = [
    ("src/threads.rs", 1),
    ("src/threads.rs", 2),
    ("src/other.rs", 7),
    ("src/threads.rs", 3),
];

#[test]
fn many_threads_count_exactly() {
    let _serial = exclusive();
    const THREADS: usize = 16;
    const PER_THREAD: u64 = 2000;
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            scope.spawn(move || {
                let own = format!("own_{t:02}");
                // A cached event, as the macro keeps per call site; `record_ref`'s rank wins.
                let cached = event("shared", 1, Some(LINES[t % 4]), 99);
                for i in 0..PER_THREAD {
                    if i % 2 == 0 {
                        access_log::record(event("shared", 1, Some(LINES[t % 4]), t % 3));
                    } else {
                        access_log::record_ref(&cached, t % 3);
                    }
                    // Same content under a second name: a separate record.
                    if i % 2 == 0 {
                        access_log::record(event("shared_alias", 1, None, 0));
                    }
                    access_log::record(event(&own, 2 + t as u8, Some(LINES[0]), t));
                }
                if t == 5 {
                    let mut downloaded = event("shared", 1, None, t % 3);
                    downloaded.origin = RecordedOrigin::Downloaded {
                        url: "https://example.org/shared.tar.gz".into(),
                        bytes: 1234,
                        received_bytes: Some(1234),
                        reused_bytes: Some(0),
                        seconds: 0.5,
                    };
                    access_log::record(downloaded);
                }
            });
        }
    });
    let records = access_log::snapshot();
    assert_eq!(records.len(), THREADS + 2);
    let shared = find(&records, "shared");
    assert_eq!(shared.accesses, THREADS as u64 * PER_THREAD + 1);
    assert_eq!(shared.ranks, [0, 1, 2]);
    let sites: Vec<String> = shared.call_sites.iter().map(ToString::to_string).collect();
    assert_eq!(
        sites,
        [
            "src/other.rs:7",
            "src/threads.rs:1",
            "src/threads.rs:2",
            "src/threads.rs:3"
        ]
    );
    assert_eq!(
        shared.origin,
        RecordedOrigin::Downloaded {
            url: "https://example.org/shared.tar.gz".into(),
            bytes: 1234,
            received_bytes: Some(1234),
            reused_bytes: Some(0),
            seconds: 0.5
        }
    );
    assert_eq!(
        find(&records, "shared_alias").accesses,
        THREADS as u64 * PER_THREAD / 2
    );
    for t in 0..THREADS {
        let own = find(&records, &format!("own_{t:02}"));
        assert_eq!(own.accesses, PER_THREAD);
        assert_eq!(own.ranks, [t]);
        assert_eq!(own.git_tree_sha1, hash(2 + t as u8));
    }
    // Sorted by name.
    let names: Vec<&str> = records.iter().map(|r| r.name.as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted);
}

#[test]
fn report_reflects_the_registry() {
    let _serial = exclusive();
    access_log::record(event("era5", 1, Some(("src/main.rs", 3)), 0));
    access_log::record(event("era5", 1, Some(("src/main.rs", 3)), 0));
    let mut over = event("topo", 2, None, 0);
    over.origin = RecordedOrigin::Override {
        overrides_file: "/depot/artifacts/Overrides.toml".into(),
    };
    over.metadata.clear();
    access_log::record(over);

    let report = report::report();
    assert_eq!(report.schema, report::SCHEMA);
    assert_eq!(report.communicator_size, 1);
    assert_eq!(report.artifacts.len(), 2);
    assert_eq!(report.artifacts[0].accesses, 2);
    assert_eq!(
        report.artifacts[1].origin,
        RecordedOrigin::Override {
            overrides_file: "/depot/artifacts/Overrides.toml".into()
        }
    );
    // Times are fresh RFC 3339 UTC stamps, and the first access precedes the report.
    assert!(report.artifacts[0].first_access.ends_with('Z'));
    assert!(report.artifacts[0].first_access <= report.generated_at);
    assert!(
        report
            .to_markdown()
            .contains("`topo` in `/model/Artifacts.toml`: no provenance metadata at all")
    );
}

fn read_report(path: &Path) -> Report {
    Report::from_json(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn guard_writes_on_drop_finish_and_panic_but_not_when_disarmed() {
    let _serial = exclusive();
    access_log::record(event("era5", 1, Some(("src/main.rs", 3)), 0));
    let dir = tempfile::tempdir().unwrap();

    {
        let _guard = ReportGuard::new(dir.path().join("dropped/"));
    }
    let report = read_report(&dir.path().join("dropped/provenance.json"));
    assert_eq!(report.artifacts[0].name, "era5");

    let paths = ReportGuard::new(dir.path().join("finished"))
        .finish()
        .unwrap()
        .unwrap();
    assert_eq!(paths.json, dir.path().join("finished/provenance.json"));
    assert!(paths.markdown.is_file() && paths.bibtex.is_file());

    ReportGuard::new(dir.path().join("disarmed/")).disarm();
    assert!(!dir.path().join("disarmed").exists());

    // A failing write is logged, not raised, from drop.
    std::fs::write(dir.path().join("file"), "x").unwrap();
    drop(ReportGuard::new(dir.path().join("file/sub/")));

    // While unwinding from a panic the guard still writes.
    let target = dir.path().join("panicked/");
    let result = std::thread::spawn(move || {
        let _guard = ReportGuard::new(target);
        panic!("simulated crash in the model");
    })
    .join();
    assert!(result.is_err());
    assert_eq!(
        read_report(&dir.path().join("panicked/provenance.json")).artifacts[0].accesses,
        1
    );
}

/// The records one fake rank would have: `shared` accessed `rank + 1` times from a call site of
/// its own, rank 0 downloaded it, and one artifact only this rank used.
fn records_of(rank: usize) -> Vec<ArtifactRecord> {
    let shared = ArtifactRecord {
        name: "shared".into(),
        git_tree_sha1: hash(1),
        manifest: "/model/Artifacts.toml".into(),
        path: "/depot/artifacts/shared".into(),
        origin: if rank == 0 {
            RecordedOrigin::Downloaded {
                url: "https://example.org/s.tar.gz".into(),
                bytes: 10,
                received_bytes: Some(10),
                reused_bytes: Some(0),
                seconds: 0.25,
            }
        } else {
            RecordedOrigin::Depot
        },
        accesses: rank as u64 + 1,
        first_access: format!("2024-05-01T12:00:{:02}.000Z", 59 - rank),
        call_sites: vec![CallSite {
            file: "src/rank.rs".into(),
            line: 100 + rank as u32,
        }],
        ranks: vec![rank],
        metadata: BTreeMap::from([("license".to_owned(), "CC0-1.0".to_owned())]),
        received_by: vec![],
    };
    let mut only = shared.clone();
    only.name = format!("only_rank_{rank}");
    only.git_tree_sha1 = hash(10 + rank as u8);
    only.accesses = 1;
    only.origin = RecordedOrigin::Depot;
    vec![shared, only]
}

#[test]
fn gathering_merges_every_ranks_records_on_the_root() {
    let _serial = exclusive();
    const SIZE: usize = 5;
    let results = on_thread_ranks(SIZE, |ctx| {
        report::gather_records(
            ctx,
            &records_of(ctx.rank()),
            &clima_artifact_runtime::progress::Reporting::default(),
        )
    });
    for (rank, result) in results.iter().enumerate().skip(1) {
        assert!(result.is_none(), "rank {rank} got records");
    }
    let merged = results[0].as_ref().expect("rank 0 gets the merged records");
    assert_eq!(merged.len(), 1 + SIZE);
    let shared = find(merged, "shared");
    assert_eq!(shared.accesses, (1..=SIZE as u64).sum::<u64>());
    assert_eq!(shared.ranks, (0..SIZE).collect::<Vec<_>>());
    assert_eq!(shared.call_sites.len(), SIZE);
    // The earliest first access wins (rank 4 has :55), and rank 0's download is kept.
    assert_eq!(shared.first_access, "2024-05-01T12:00:55.000Z");
    assert!(matches!(
        shared.origin,
        RecordedOrigin::Downloaded { bytes: 10, .. }
    ));
    for rank in 0..SIZE {
        let only = find(merged, &format!("only_rank_{rank}"));
        assert_eq!(
            (only.accesses, only.ranks.as_slice()),
            (1, [rank].as_slice())
        );
    }
}

#[test]
fn collective_write_happens_once_on_the_root_and_every_rank_learns_the_outcome() {
    let _serial = exclusive();
    // The fake ranks share this process's registry, so each contributes the same snapshot.
    access_log::record(event("era5", 1, Some(("src/main.rs", 3)), 0));
    access_log::record(event("era5", 1, Some(("src/main.rs", 3)), 0));
    let dir = tempfile::tempdir().unwrap();
    const SIZE: usize = 4;

    let results = on_thread_ranks(SIZE, |ctx| {
        report::write_all_collective(
            ctx,
            dir.path().join("out/"),
            &clima_artifact_runtime::progress::Reporting::default(),
        )
    });
    let paths = results[0].as_ref().unwrap().as_ref().unwrap();
    for result in &results[1..] {
        assert!(matches!(result, Ok(None)));
    }
    let written = read_report(&paths.json);
    assert_eq!(written.communicator_size, SIZE);
    assert_eq!(written.artifacts.len(), 1);
    assert_eq!(written.artifacts[0].accesses, 2 * SIZE as u64);
    assert_eq!(
        std::fs::read_dir(dir.path().join("out")).unwrap().count(),
        3
    );

    // The root cannot write: every rank gets an error naming the target.
    std::fs::write(dir.path().join("file"), "x").unwrap();
    let results = on_thread_ranks(SIZE, |ctx| {
        report::write_all_collective(
            ctx,
            dir.path().join("file/sub/"),
            &clima_artifact_runtime::progress::Reporting::default(),
        )
    });
    for (rank, result) in results.iter().enumerate() {
        let err = result.as_ref().unwrap_err().to_string();
        assert!(err.contains("file/sub"), "rank {rank}: {err}");
        if rank > 0 {
            assert!(
                err.starts_with("rank 0 could not write"),
                "rank {rank}: {err}"
            );
        }
    }

    // The collective guard writes once, when every rank drops it.
    on_thread_ranks(SIZE, |ctx| {
        let _guard = ReportGuard::collective(ctx, dir.path().join("guarded/"));
    });
    assert_eq!(
        read_report(&dir.path().join("guarded/provenance.json")).communicator_size,
        SIZE
    );

    // A rank that panics does not communicate (its peers may never come): it writes its own
    // records to rank-suffixed files.
    let target = dir.path().join("crashed/");
    let crashed = on_thread_ranks(2, |ctx| {
        ctx.rank() == 1
            && std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let _guard = ReportGuard::collective(ctx, target.clone());
                panic!("rank 1 crashed");
            }))
            .is_err()
    });
    assert_eq!(crashed, [false, true]);
    let local = read_report(&dir.path().join("crashed/provenance.rank1.json"));
    assert_eq!(local.artifacts[0].accesses, 2);
    assert!(!dir.path().join("crashed/provenance.json").exists());
}

/// A rank whose gathered bytes arrive corrupted (as a buggy user `Context` might deliver them).
struct Corrupting<'a>(&'a dyn Context);

impl Context for Corrupting<'_> {
    fn rank(&self) -> usize {
        self.0.rank()
    }
    fn size(&self) -> usize {
        self.0.size()
    }
    fn barrier(&self) {
        self.0.barrier();
    }
    fn broadcast_from_root(&self, data: Option<Vec<u8>>) -> Vec<u8> {
        self.0.broadcast_from_root(data)
    }
    fn gather_to_root(&self, data: Vec<u8>) -> Option<Vec<Vec<u8>>> {
        let data = if self.rank() == 1 {
            b"\x00not json".to_vec()
        } else {
            data
        };
        self.0.gather_to_root(data)
    }
    fn split_by_node(&self) -> Box<dyn Context> {
        self.0.split_by_node()
    }
    fn split(&self, color: Option<u32>, key: u32) -> Option<Box<dyn Context>> {
        self.0.split(color, key)
    }
}

#[test]
fn unreadable_records_from_one_rank_are_left_out_not_fatal() {
    let _serial = exclusive();
    let results = on_thread_ranks(3, |ctx| {
        report::gather_records(
            &Corrupting(ctx),
            &records_of(ctx.rank()),
            &clima_artifact_runtime::progress::Reporting::default(),
        )
    });
    let merged = results[0].as_ref().unwrap();
    let names: Vec<&str> = merged.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["only_rank_0", "only_rank_2", "shared"]);
    assert_eq!(find(merged, "shared").ranks, [0, 2]);
    assert_eq!(find(merged, "shared").accesses, 1 + 3);
}

/// 64 thread ranks that accessed the same artifact from the same call site: the records merge in
/// a tree on the way to the root, which receives log2(64) = 6 messages of about one rank's
/// records each (ranks travel as ranges), not 63 (issue 40).
#[test]
fn gathering_64_ranks_brings_the_root_log_p_messages_of_one_ranks_size() {
    let _serial = exclusive();
    let same = |rank: usize| {
        let mut records = records_of(rank % 32);
        records.retain(|r| r.name == "shared");
        records[0].ranks = vec![rank];
        records[0].accesses = rank as u64 + 1;
        records[0].call_sites[0].line = 100;
        records[0].origin = RecordedOrigin::Depot;
        records
    };
    let one_rank = serde_json::to_vec(&same(0)).unwrap().len() as u64;
    let results = on_thread_ranks(64, |ctx| {
        let before = clima_comms::traffic::this_thread();
        let merged = report::gather_records(
            ctx,
            &same(ctx.rank()),
            &clima_artifact_runtime::progress::Reporting::default(),
        );
        (merged, clima_comms::traffic::this_thread().since(&before))
    });
    let (merged, root) = &results[0];
    let merged = merged.as_ref().unwrap();
    assert_eq!(merged.len(), 1);
    assert_eq!(merged[0].ranks, (0..64).collect::<Vec<_>>());
    assert_eq!(merged[0].accesses, (1..=64).sum::<u64>());
    assert_eq!(root.received_messages, 6, "{root}");
    assert!(
        root.received_bytes <= 6 * 2 * one_rank,
        "{root}; one rank's records are {one_rank} bytes"
    );
    assert!(
        results[1..]
            .iter()
            .all(|(m, t)| m.is_none() && t.sent_messages == 1)
    );
}
