//! Issue 49, item 3 under a real `mpirun`: only the files a run reads, fetched by byte ranges
//! from a seekable artifact by `ensure_files_collective` (what `clima_artifact!("<name>/<path>",
//! &ctx)` calls for a seekable artifact that is not installed), through `mpi_fetch --only`.

use super::*;

/// The file the tests ask for: file 13 of [`serve_seekable`]'s tree, and its content.
const FILE: &str = "d3/f13.bin";

fn file_content() -> Vec<u8> {
    let i = 13u32;
    (0..2_000 + 731 * i).map(|j| (j * 7 + i) as u8).collect()
}

/// What one process fetching [`FILE`] alone asks of a server: the same tarball as `tmp`'s
/// (written by [`serve_seekable`]), served by a server of its own to one `ensure_files` call
/// in a fresh depot. Returns the server's GET count, the start of each range it was asked
/// for, and the bytes it sent.
fn one_process_fetch(tmp: &Path, served_by: &TestServer) -> (usize, Vec<u64>, u64) {
    use clima_artifact_runtime::manifest::{Manifest, Platform};
    let reference = TestServer::start();
    let bytes = std::fs::read(tmp.join("seekable.tar.gz")).expect("tarball");
    reference.serve("/seekable.tar.gz", bytes);
    let text = std::fs::read_to_string(tmp.join("Artifacts.toml")).expect("manifest");
    let text = text.replace(
        &served_by.url("/seekable.tar.gz"),
        &reference.url("/seekable.tar.gz"),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("Artifacts.toml"), text).expect("manifest");
    let manifest = Manifest::load(&dir.path().join("Artifacts.toml")).expect("manifest");
    let variant = manifest.select("era5", &Platform::host()).expect("era5");
    let config = clima_artifact_tests::test_config(&[dir.path().join("depot")]);
    let files =
        clima_artifact_runtime::ensure_files("era5", variant, manifest.dir(), &config, &[FILE])
            .expect("one process fetches the file");
    assert_eq!(files.fetched, 1);
    (
        reference.gets("/seekable.tar.gz"),
        reference.ranges_of("/seekable.tar.gz"),
        reference.bytes_sent_for("/seekable.tar.gz"),
    )
}

/// The regular files under `root` (relative paths), none when it does not exist.
fn files_under(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path.strip_prefix(root).expect("under root");
                found.push(rel.display().to_string());
            }
        }
    }
    found.sort();
    found
}

/// The file fetched into `depot`'s partial folder holds the tree's bytes, read-only, and the
/// artifact is not taken for installed.
fn assert_fetched_alone(depot: &Path, hash: &str) {
    let root = depot.join("clima_partial").join(hash);
    assert_eq!(
        files_under(&root),
        vec![FILE.to_owned()],
        "{}",
        root.display()
    );
    assert_eq!(
        std::fs::read(root.join(FILE)).expect("fetched file"),
        file_content()
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(root.join(FILE))
        .expect("metadata")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o444, "read-only");
    assert!(
        !depot.join("artifacts").join(hash).exists(),
        "a partial fetch is never `artifacts/<hash>`"
    );
    assert_nothing_unverified(depot, &[]);
}

/// Four ranks on one shared depot ask for one file of a seekable artifact: the server sees
/// exactly the requests of one process fetching it alone (the tail with the index, the
/// file's ranges), every rank gets the same path in the depot's partial folder, the file has
/// the tree's bytes, and `artifacts/<hash>` does not exist. A second job asks nothing.
#[test]
fn mpi_partial_4_ranks_fetch_one_file_once() {
    let test = "mpi_partial_4_ranks_fetch_one_file_once";
    let Some(mpirun) = Mpirun::find(test) else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let server = TestServer::start();
    let (manifest, hash) = serve_seekable(&server, tmp.path());
    let depot = tmp.path().join("depot");
    let argv = fetch_argv(&manifest, &["era5"], &["--only", FILE]);
    let env = [("CLIMA_ARTIFACTS_DEPOT_PATH", depot.to_str().expect("utf-8"))];
    let run = run_bounded(mpirun.command(&[(4, argv.clone())]), &env);
    assert!(run.status.success(), "{}", describe(&run));
    let all = outcomes(&run);
    assert_eq!(all.len(), 4, "{}", describe(&run));
    let expected = depot.join("clima_partial").join(&hash).join(FILE);
    for o in &all {
        assert_eq!(o.result.as_ref(), Ok(&expected), "rank {}", o.rank);
    }
    let (gets, ranges, bytes) = one_process_fetch(tmp.path(), &server);
    assert_eq!(
        server.gets("/seekable.tar.gz"),
        gets,
        "the requests of one fetch"
    );
    assert_eq!(server.ranges_of("/seekable.tar.gz"), ranges);
    assert_eq!(server.bytes_sent_for("/seekable.tar.gz"), bytes);
    let tarball = std::fs::metadata(tmp.path().join("seekable.tar.gz"))
        .expect("tarball")
        .len();
    assert!(
        bytes < tarball / 10,
        "{bytes} bytes of {tarball} for one file"
    );
    assert_fetched_alone(&depot, &hash);

    let again = run_bounded(mpirun.command(&[(4, argv)]), &env);
    assert!(again.status.success(), "{}", describe(&again));
    for o in &outcomes(&again) {
        assert_eq!(o.result.as_ref(), Ok(&expected), "rank {}", o.rank);
    }
    assert_eq!(server.gets("/seekable.tar.gz"), gets, "held: no request");
}

/// A few files, [`FILE`] among them: the index is small enough to come with the tarball's
/// tail (a suffix range, which `corrupt_ranges` leaves alone), so only the file's range lies.
fn few_files(content: &Path) {
    let sub = content.join("d3");
    std::fs::create_dir_all(&sub).expect("folder");
    std::fs::write(content.join(FILE), file_content()).expect("file");
    for i in 0..4u8 {
        std::fs::write(sub.join(format!("g{i}.bin")), vec![i; 5_000]).expect("file");
    }
}

/// A server that answers a range with other bytes (under the right `Content-Range`): every
/// rank reports the same error, naming the URL, and nothing is visible in the depot (no file
/// in the partial folder, no `artifacts/<hash>`). Twice: the lie in the file's member (a
/// small index, which came with the tail: the error names the file too), and in the index
/// (60 files: the index's start is a range of its own).
#[test]
fn mpi_partial_a_lying_range_is_the_same_error_on_every_rank() {
    let test = "mpi_partial_a_lying_range_is_the_same_error_on_every_rank";
    let Some(mpirun) = Mpirun::find(test) else {
        return;
    };
    for lie_in_member in [true, false] {
        let tmp = tempfile::tempdir().expect("tempdir");
        let server = TestServer::start();
        let (manifest, hash) = if lie_in_member {
            serve_seekable_of(&server, tmp.path(), &few_files)
        } else {
            serve_seekable(&server, tmp.path())
        };
        server.corrupt_ranges("/seekable.tar.gz");
        let depot = tmp.path().join("depot");
        let run = run_bounded(
            mpirun.command(&[(4, fetch_argv(&manifest, &["era5"], &["--only", FILE]))]),
            &[
                ("CLIMA_ARTIFACTS_DEPOT_PATH", depot.to_str().expect("utf-8")),
                ("CLIMA_ARTIFACTS_RETRIES", "1"),
            ],
        );
        assert!(!run.status.success(), "{}", describe(&run));
        let all = outcomes(&run);
        assert_eq!(all.len(), 4, "{}", describe(&run));
        let first = all[0].result.as_ref().expect_err("rank 0 failed");
        for o in &all {
            assert_eq!(o.result.as_ref(), Err(first), "rank {} differs", o.rank);
        }
        assert!(
            first.contains(&server.url("/seekable.tar.gz")),
            "the URL is not named: {first}"
        );
        if lie_in_member {
            assert!(first.contains(FILE), "the file is not named: {first}");
            assert_eq!(
                server.ranges_of("/seekable.tar.gz").len(),
                2,
                "the tail with the index, then the file's member"
            );
        }
        // (Beside it, `<hash>.count` may say how many files the authenticated index lists.)
        assert_eq!(
            files_under(&depot.join("clima_partial").join(&hash)),
            Vec::<String>::new(),
            "nothing unverified is visible"
        );
        assert!(!depot.join("artifacts").join(&hash).exists());
        assert_nothing_unverified(&depot, &[]);
    }
}

/// Node-local mode, 4 ranks as 2 nodes: each node's leader fetches the file once (the
/// requests of one process fetching it, twice in all) into its node depot, and each rank gets
/// the path in its own node's depot; the shared depot holds nothing.
#[test]
fn mpi_partial_node_local_each_leader_fetches_once_into_its_node_depot() {
    let test = "mpi_partial_node_local_each_leader_fetches_once_into_its_node_depot";
    let Some(mpirun) = Mpirun::find(test) else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let server = TestServer::start();
    let (manifest, hash) = serve_seekable(&server, tmp.path());
    let shared = tmp.path().join("shared-depot");
    let node_depot = |k: usize| tmp.path().join(format!("node{k}/depot"));
    let argv = fetch_argv(&manifest, &["era5"], &["--only", FILE]);
    let groups = node_groups(4, 2, &node_depot, &|_| vec![], &argv);
    let run = run_bounded(
        mpirun.command(&groups),
        &[(
            "CLIMA_ARTIFACTS_DEPOT_PATH",
            shared.to_str().expect("utf-8"),
        )],
    );
    assert!(run.status.success(), "{}", describe(&run));
    let all = outcomes(&run);
    assert_eq!(all.len(), 4, "{}", describe(&run));
    for o in &all {
        let expected = node_depot(o.rank / 2)
            .join("clima_partial")
            .join(&hash)
            .join(FILE);
        assert_eq!(o.result.as_ref(), Ok(&expected), "rank {}", o.rank);
    }
    let (gets, ranges, bytes) = one_process_fetch(tmp.path(), &server);
    assert_eq!(
        server.gets("/seekable.tar.gz"),
        2 * gets,
        "one fetch per node"
    );
    let mut twice: Vec<u64> = ranges.iter().chain(&ranges).copied().collect();
    twice.sort_unstable();
    let mut seen = server.ranges_of("/seekable.tar.gz");
    seen.sort_unstable();
    assert_eq!(seen, twice, "each leader's ranges are one fetch's");
    assert_eq!(server.bytes_sent_for("/seekable.tar.gz"), 2 * bytes);
    for k in 0..2 {
        assert_fetched_alone(&node_depot(k), &hash);
    }
    assert_eq!(
        files_under(&shared.join("clima_partial")),
        Vec::<String>::new()
    );
    assert_nothing_unverified(&shared, &[]);
}

/// Under `strace`, 4 ranks ask for the file, on one shared depot and then as 2 nodes with
/// node-local depots: only the ranks that fetch (rank 0; then each node's leader) make a file
/// operation on a depot or the manifest while the call runs, the others wait for their
/// answer; the fetching ranks do (so the check can fail).
#[test]
fn mpi_partial_only_the_fetching_ranks_touch_the_depots() {
    let test = "mpi_partial_only_the_fetching_ranks_touch_the_depots";
    let Some(mpirun) = Mpirun::find(test) else {
        return;
    };
    if !strace_found() {
        return;
    }
    for node_local in [false, true] {
        let tmp = tempfile::tempdir().expect("tempdir");
        let server = TestServer::start();
        let (manifest, _hash) = serve_seekable(&server, tmp.path());
        let root = tmp.path().to_str().expect("utf-8").to_owned();
        let shared = tmp.path().join("shared-depot");
        let node_depot = |k: usize| tmp.path().join(format!("node{k}/depot"));
        let traces = tmp.path().join("traces");
        let mut argv = under_strace(&traces, "-f");
        argv.extend(fetch_argv(&manifest, &["era5"], &["--only", FILE]));
        let groups = if node_local {
            node_groups(4, 2, &node_depot, &|_| vec![], &argv)
        } else {
            vec![(4, argv)]
        };
        let run = run_bounded(
            mpirun.command(&groups),
            &[(
                "CLIMA_ARTIFACTS_DEPOT_PATH",
                shared.to_str().expect("utf-8"),
            )],
        );
        assert!(run.status.success(), "{}", describe(&run));
        assert_eq!(outcomes(&run).len(), 4, "{}", describe(&run));
        let fetchers: &[usize] = if node_local { &[0, 2] } else { &[0] };
        for rank in 0..4 {
            let touched = traced_paths_of(&traces, rank, &root);
            if fetchers.contains(&rank) {
                assert!(
                    !touched.is_empty(),
                    "node-local {node_local}: rank {rank}'s file operations were not seen"
                );
            } else {
                assert!(
                    touched.is_empty(),
                    "node-local {node_local}: rank {rank} fetches nothing, yet:\n{}",
                    touched.join("\n")
                );
            }
        }
    }
}
