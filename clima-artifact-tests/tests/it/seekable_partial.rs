//! Only the files a run reads (issue 49, item 3): some files of an artifact whose download is
//! a seekable tarball, fetched by byte ranges into the depot's partial folder
//! (`<depot>/clima_partial/<hash>/`), each verified against the authenticated index; never
//! `artifacts/<hash>`. A server that lies about a range is caught and named; a server without
//! ranges (or a tarball without an index) gives the whole artifact instead. The CLI's
//! `fetch --only` and `list` are in `clima-artifacts-cli/tests/seekable.rs`.

use std::path::{Path, PathBuf};

use clima_artifact_manifest::{ArtifactVariant, Download, GitTreeSha1, Sha256};
use clima_artifact_ops::tarball::{collect_entries, write_seekable};
use clima_artifact_runtime::extract::seekable::{self, Expected, Flavour, IndexLimits};
use clima_artifact_runtime::{Config, Error, Files, ensure_files, ensure_variant};
use clima_artifact_tests::{TestServer, git_tree_hash, sha256, test_config};

/// Content that compresses a little: a pseudo-random byte every other one.
fn bytes(seed: u32, len: usize) -> Vec<u8> {
    (0..len as u32)
        .map(|i| {
            if i % 2 == 0 {
                (i.wrapping_add(seed).wrapping_mul(2_654_435_761) >> 13) as u8
            } else {
                b'a' + (i % 26) as u8
            }
        })
        .collect()
}

/// A seekable tarball of `files` files in 10 folders (`d<k>/f<i>.txt`), an executable and a
/// file of several 1 MiB blocks.
struct Made {
    dir: tempfile::TempDir,
    bytes: Vec<u8>,
    tree: GitTreeSha1,
    index_sha256: Sha256,
}

fn made(files: u32) -> Made {
    let dir = tempfile::tempdir().unwrap();
    let content = dir.path().join("content");
    for i in 0..files {
        let sub = content.join(format!("d{}", i % 10));
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(
            sub.join(format!("f{i}.txt")),
            bytes(i, 3000 + 13 * i as usize),
        )
        .unwrap();
    }
    std::fs::create_dir_all(content.join("bin")).unwrap();
    std::fs::write(content.join("bin/run"), "#!/bin/sh\necho run\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        content.join("bin/run"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::fs::write(content.join("large.bin"), bytes(7, (2 << 20) + 999)).unwrap();
    let entries = collect_entries(&content).unwrap();
    let out = dir.path().join("data.tar.gz");
    let tarball = write_seekable(&content, &entries, &out, Flavour::Gzip, 1 << 20, &|_| {})
        .unwrap_or_else(|e| panic!("{e}"));
    Made {
        bytes: std::fs::read(&out).unwrap(),
        tree: tarball.tree_hash,
        index_sha256: tarball.index_sha256.unwrap(),
        dir,
    }
}

impl Made {
    fn content(&self) -> PathBuf {
        self.dir.path().join("content")
    }

    /// The entry served at `url`, with `index-sha256` when `keyed`.
    fn variant(&self, url: &str, keyed: bool) -> ArtifactVariant {
        let mut v =
            clima_artifact_tests::variant(self.tree, &[url.to_owned()], sha256(&self.bytes));
        v.downloads = vec![Download {
            url: url.to_owned(),
            sha256: sha256(&self.bytes),
            size: None,
            index_sha256: keyed.then_some(self.index_sha256),
        }];
        v
    }

    /// The authenticated index, read here from the bytes.
    fn index(&self) -> seekable::Authenticated {
        let len = self.bytes.len() as u64;
        let (locator, doc) = seekable::read_index(
            &mut std::io::Cursor::new(&self.bytes),
            len,
            &IndexLimits::default(),
        )
        .unwrap()
        .unwrap();
        let expected = Expected {
            tree_sha1: self.tree,
            tree_sha256: None,
            index_sha256: Some(self.index_sha256),
        };
        seekable::authenticate(&doc, &locator, &expected, &IndexLimits::default()).unwrap()
    }

    /// Bytes of the members of the entry at `path`.
    fn member_bytes(&self, path: &str) -> u64 {
        let auth = self.index();
        auth.index()
            .entries
            .iter()
            .find(|e| e.path == path.as_bytes())
            .map(|e| e.length)
            .unwrap()
    }
}

/// Every file under `dir` (none when it does not exist).
fn files_under(dir: &Path) -> Vec<String> {
    if dir.exists() {
        clima_artifact_tests::tree_files(dir)
    } else {
        Vec::new()
    }
}

fn fresh() -> (tempfile::TempDir, PathBuf, Config) {
    let dir = tempfile::tempdir().unwrap();
    let depot = dir.path().join("depot");
    let config = test_config(std::slice::from_ref(&depot));
    (dir, depot, config)
}

fn fetch(v: &ArtifactVariant, config: &Config, at: &Path, paths: &[&str]) -> Result<Files, Error> {
    ensure_files("data", v, at, config, paths)
}

#[test]
fn one_file_of_many_is_fetched_alone_into_the_partial_folder_and_nothing_else() {
    let m = made(400);
    let server = TestServer::start();
    server.serve("data.tar.gz", m.bytes.clone());
    let v = m.variant(&server.url("data.tar.gz"), true);
    let (dir, depot, config) = fresh();
    let files = fetch(&v, &config, dir.path(), &["d3/f213.txt"]).unwrap();

    let expected = depot
        .join("clima_partial")
        .join(m.tree.to_hex())
        .join("d3/f213.txt");
    assert_eq!(files.paths, vec![expected.clone()]);
    assert_eq!(
        (files.fetched, files.held, files.whole.is_none()),
        (1, 0, true)
    );
    assert_eq!(
        std::fs::read(&expected).unwrap(),
        std::fs::read(m.content().join("d3/f213.txt")).unwrap()
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&expected).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o444, "read-only");
    // Neither Julia nor our lookup may take it for the artifact.
    assert!(!depot.join("artifacts").join(m.tree.to_hex()).exists());
    assert!(ensure_variant_is_not_installed(&v, &config));
    // Bytes: the member, the index and the footer, nothing more (the first request's tail is
    // the footer and the index's end; were the index smaller, that tail alone).
    let auth = m.index();
    let index_len = auth.locator().index_length;
    let bound = m.member_bytes("d3/f213.txt") + (index_len + 66).max(seekable::remote::FIRST_TAIL);
    assert!(
        index_len + 66 > seekable::remote::FIRST_TAIL,
        "the index comes in two parts"
    );
    let sent = server.bytes_sent_for("data.tar.gz");
    assert!(
        sent <= bound,
        "{sent} bytes sent for one file; the file's members, the index and the tail are {bound}"
    );
    assert!(
        sent < m.bytes.len() as u64 / 10,
        "{sent} of {}",
        m.bytes.len()
    );
    assert_eq!(files.received, sent);

    // A second call asks nothing.
    let gets = server.gets("data.tar.gz");
    let again = fetch(&v, &config, dir.path(), &["d3/f213.txt"]).unwrap();
    assert_eq!(
        (again.paths, again.held, again.fetched),
        (vec![expected], 1, 0)
    );
    assert_eq!(server.gets("data.tar.gz"), gets);
}

/// Whether `v` is still missing from the depots of `config` (by the lookup every install
/// makes first).
fn ensure_variant_is_not_installed(v: &ArtifactVariant, config: &Config) -> bool {
    clima_artifact_runtime::depot::lookup(&v.git_tree_sha1, &config.search_depots())
        .unwrap()
        .is_none()
}

#[test]
fn a_folder_a_large_file_and_an_executable_are_fetched_and_verified() {
    let m = made(60);
    let server = TestServer::start();
    server.serve("data.tar.gz", m.bytes.clone());
    // Without `index-sha256`: the footer says seekable, the tree alone authenticates.
    let v = m.variant(&server.url("data.tar.gz"), false);
    let (dir, depot, config) = fresh();
    let files = fetch(&v, &config, dir.path(), &["d4/", "large.bin", "bin/run"]).unwrap();
    let root = depot.join("clima_partial").join(m.tree.to_hex());
    assert_eq!(
        files.paths,
        vec![
            root.join("d4"),
            root.join("large.bin"),
            root.join("bin/run")
        ]
    );
    assert_eq!(files.fetched, 6 + 2);
    for name in std::fs::read_dir(m.content().join("d4")).unwrap() {
        let name = name.unwrap().file_name();
        assert_eq!(
            std::fs::read(root.join("d4").join(&name)).unwrap(),
            std::fs::read(m.content().join("d4").join(&name)).unwrap()
        );
    }
    assert_eq!(
        std::fs::read(root.join("large.bin")).unwrap(),
        std::fs::read(m.content().join("large.bin")).unwrap()
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(root.join("bin/run"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o555);
    assert_eq!(
        clima_artifact_runtime::depot::Depot::new(&depot).partial_count(&m.tree),
        Some(62)
    );
}

#[test]
fn a_path_that_is_not_in_the_artifact_is_named() {
    let m = made(20);
    let server = TestServer::start();
    server.serve("data.tar.gz", m.bytes.clone());
    let v = m.variant(&server.url("data.tar.gz"), true);
    let (dir, depot, config) = fresh();
    let err = fetch(&v, &config, dir.path(), &["d3/nope.txt"])
        .unwrap_err()
        .to_string();
    assert!(err.contains("d3/nope.txt"), "{err}");
    assert!(!depot.join("artifacts").join(m.tree.to_hex()).exists());
}

#[test]
fn a_server_that_answers_a_range_with_other_bytes_is_caught_and_named() {
    // Few files: the index comes with the footer, so the lie is in the member.
    for keyed in [true, false] {
        let m = made(8);
        let server = TestServer::start();
        server.serve("data.tar.gz", m.bytes.clone());
        server.corrupt_ranges("data.tar.gz");
        let v = m.variant(&server.url("data.tar.gz"), keyed);
        let (dir, depot, config) = fresh();
        let err = fetch(&v, &config, dir.path(), &["d2/f2.txt"])
            .unwrap_err()
            .to_string();
        assert!(err.contains(&server.url("data.tar.gz")), "{err}");
        assert!(err.contains("d2/f2.txt"), "{err}");
        let root = depot.join("clima_partial").join(m.tree.to_hex());
        assert!(
            !root.join("d2/f2.txt").exists(),
            "nothing unverified is visible"
        );
        assert_eq!(files_under(&root), Vec::<String>::new());
        // No count of files is left for a partial folder that never held one (gc removes a
        // count only with its folder).
        let count = depot
            .join("clima_partial")
            .join(format!("{}.count", m.tree.to_hex()));
        assert!(!count.exists(), "{} left behind", count.display());
        assert!(!depot.join("artifacts").join(m.tree.to_hex()).exists());
    }
}

#[test]
fn a_content_range_other_than_the_one_asked_for_is_refused() {
    let m = made(8);
    let server = TestServer::start();
    server.serve("data.tar.gz", m.bytes.clone());
    server.always("data.tar.gz", clima_artifact_tests::Fault::WrongRange);
    let v = m.variant(&server.url("data.tar.gz"), true);
    let (dir, depot, config) = fresh();
    let err = fetch(&v, &config, dir.path(), &["d2/f2.txt"])
        .unwrap_err()
        .to_string();
    assert!(err.contains("Content-Range"), "{err}");
    assert!(err.contains(&server.url("data.tar.gz")), "{err}");
    assert!(!depot.join("artifacts").join(m.tree.to_hex()).exists());
}

#[test]
fn a_server_without_ranges_gives_the_whole_artifact() {
    let m = made(30);
    let server = TestServer::start();
    server.serve("data.tar.gz", m.bytes.clone());
    server.ignore_ranges("data.tar.gz");
    let v = m.variant(&server.url("data.tar.gz"), true);
    let (dir, depot, config) = fresh();
    let files = fetch(&v, &config, dir.path(), &["d2/f2.txt"]).unwrap();
    let whole = depot.join("artifacts").join(m.tree.to_hex());
    assert_eq!(files.paths, vec![whole.join("d2/f2.txt")]);
    assert!(files.whole.is_some());
    assert_eq!(git_tree_hash(&whole), m.tree);
}

#[test]
fn an_installed_artifact_answers_from_inside_it_and_a_later_install_is_whole() {
    let m = made(30);
    let server = TestServer::start();
    server.serve("data.tar.gz", m.bytes.clone());
    let v = m.variant(&server.url("data.tar.gz"), true);
    let (dir, depot, config) = fresh();
    let part = fetch(&v, &config, dir.path(), &["d1/f1.txt"]).unwrap();
    assert!(part.whole.is_none());
    // A later whole install: the artifact whole, in its usual place; the partial file stays
    // valid for whoever holds its path.
    let whole = ensure_variant("data", &v, dir.path(), &config)
        .unwrap()
        .path;
    assert_eq!(whole, depot.join("artifacts").join(m.tree.to_hex()));
    assert_eq!(git_tree_hash(&whole), m.tree);
    let after = fetch(&v, &config, dir.path(), &["d1/f1.txt"]).unwrap();
    assert_eq!(after.paths, vec![whole.join("d1/f1.txt")]);
    assert!(after.whole.is_some());
    assert_eq!(
        std::fs::read(&part.paths[0]).unwrap(),
        std::fs::read(&after.paths[0]).unwrap()
    );
}

/// The size policy: an artifact too large to download whole on first use stays usable file
/// by file, and the whole install's error says so.
#[test]
fn an_artifact_too_large_to_download_whole_stays_usable_file_by_file() {
    let m = made(100);
    let server = TestServer::start();
    server.serve("data.tar.gz", m.bytes.clone());
    let mut v = m.variant(&server.url("data.tar.gz"), true);
    v.downloads[0].size = Some(m.bytes.len() as u64);
    let (dir, depot, mut config) = fresh();
    config.max_download_size = Some(m.bytes.len() as u64 / 4);
    let err = ensure_variant("data", &v, dir.path(), &config).unwrap_err();
    assert!(matches!(err, Error::DownloadTooLarge { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains("file by file"), "{text}");
    assert!(text.contains("fetch data --only PATH"), "{text}");
    let files = fetch(&v, &config, dir.path(), &["d5/f55.txt"]).unwrap();
    assert_eq!(
        std::fs::read(&files.paths[0]).unwrap(),
        std::fs::read(m.content().join("d5/f55.txt")).unwrap()
    );
    // A file larger than the limit is refused like the whole artifact.
    let err = fetch(&v, &config, dir.path(), &["large.bin"]).unwrap_err();
    assert!(matches!(err, Error::DownloadTooLarge { .. }), "{err}");
    assert!(!depot.join("artifacts").join(m.tree.to_hex()).exists());
}

/// Under a context of several ranks the root fetches once and every rank gets its answer;
/// an error is the same on every rank; in node-local mode each node's leader fetches into its
/// node's depot and its ranks get that path.
#[test]
fn collective_calls_fetch_once_and_every_rank_gets_the_same_answer() {
    let m = made(200);
    let server = TestServer::start();
    server.serve("data.tar.gz", m.bytes.clone());
    let v = m.variant(&server.url("data.tar.gz"), true);
    let (dir, depot, config) = fresh();
    let answers = clima_comms::on_thread_ranks(4, |ctx| {
        clima_artifact_runtime::ensure_files_collective(
            ctx,
            "data",
            &v,
            dir.path(),
            &config,
            &["d7/f117.txt"],
        )
        .map(|f| f.paths)
        .map_err(|e| e.to_string())
    });
    let want = depot
        .join("clima_partial")
        .join(m.tree.to_hex())
        .join("d7/f117.txt");
    assert!(
        answers.iter().all(|a| *a == Ok(vec![want.clone()])),
        "{answers:?}"
    );
    let once = server.gets("data.tar.gz");
    assert!(once <= 3, "{once} requests for one file, fetched once");

    // The same error on every rank.
    let lying = TestServer::start();
    lying.serve("data.tar.gz", m.bytes.clone());
    lying.corrupt_ranges("data.tar.gz");
    let v2 = m.variant(&lying.url("data.tar.gz"), true);
    let (dir2, _depot2, config2) = fresh();
    let answers = clima_comms::on_thread_ranks(3, |ctx| {
        clima_artifact_runtime::ensure_files_collective(
            ctx,
            "data",
            &v2,
            dir2.path(),
            &config2,
            &["d7/f117.txt"],
        )
        .map_err(|e| e.to_string())
    });
    let first = answers[0].clone().unwrap_err();
    assert!(
        answers.iter().all(|a| a.as_ref().err() == Some(&first)),
        "{answers:?}"
    );

    // Node-local: two nodes of two ranks, a depot each.
    let nodes = tempfile::tempdir().unwrap();
    let base = server.gets("data.tar.gz");
    let answers = clima_comms::on_thread_ranks(4, |ctx| {
        let node = ctx.rank() / 2;
        let mut c = config.clone();
        c.node_id = Some(format!("n{node}"));
        c.node_local_depot = Some(nodes.path().join(format!("node{node}")).into());
        clima_artifact_runtime::ensure_files_collective(
            ctx,
            "data",
            &v,
            dir.path(),
            &c,
            &["d8/f18.txt"],
        )
        .map(|f| f.paths)
        .map_err(|e| e.to_string())
    });
    for (rank, a) in answers.iter().enumerate() {
        let want = nodes
            .path()
            .join(format!("node{}", rank / 2))
            .join("clima_partial")
            .join(m.tree.to_hex())
            .join("d8/f18.txt");
        assert_eq!(a, &Ok(vec![want]), "rank {rank}");
    }
    assert!(
        server.gets("data.tar.gz") - base <= 6,
        "at most one fetch per node"
    );
}

/// A whole install after some files were fetched alone copies those (their blob ids checked)
/// and fetches only the rest by ranges; a partial file changed since is not trusted but
/// fetched again; the tree installed is the manifest's.
#[test]
fn a_later_whole_install_reuses_the_files_fetched_and_fetches_only_the_rest() {
    let m = made(100);
    let server = TestServer::start();
    server.serve("data.tar.gz", m.bytes.clone());
    let v = m.variant(&server.url("data.tar.gz"), true);
    let (dir, depot, config) = fresh();
    let part = fetch(&v, &config, dir.path(), &["large.bin", "d1", "d2"]).unwrap();
    assert!(part.whole.is_none());
    // Someone changes a fetched file (its owner can): it must not be reused as it is.
    let changed = depot
        .join("clima_partial")
        .join(m.tree.to_hex())
        .join("d1/f11.txt");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&changed, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(&changed, b"not the content").unwrap();
    let before = server.bytes_sent_for("data.tar.gz");
    let installed = ensure_variant("data", &v, dir.path(), &config).unwrap();
    let whole = depot.join("artifacts").join(m.tree.to_hex());
    assert_eq!(installed.path, whole);
    assert_eq!(git_tree_hash(&whole), m.tree);
    let sent = server.bytes_sent_for("data.tar.gz") - before;
    let reused = m.member_bytes("large.bin");
    // The rest, the index again, the first tail, the changed file, and at most one gap of
    // held bytes between two fetched neighbours.
    let slack = seekable::remote::FIRST_TAIL
        + m.index().locator().index_length
        + m.member_bytes("d1/f11.txt")
        + seekable::remote::MAX_GAP;
    assert!(
        sent + reused <= m.bytes.len() as u64 + slack,
        "{sent} bytes sent for the rest; {reused} of {} were held",
        m.bytes.len()
    );
    match installed.origin {
        clima_artifact_runtime::Origin::Downloaded { reused_bytes, .. } => {
            assert!(reused_bytes.unwrap() >= reused, "{reused_bytes:?}")
        }
        o => panic!("{o:?}"),
    }
    let mode = std::fs::metadata(whole.join("bin/run"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o555);
    let mode = std::fs::metadata(whole.join("large.bin"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o444);
}

/// A file replaced on the server between two range requests is never mixed: a server that
/// honours `If-Range` answers the whole new file (then the whole install's `sha256` refuses
/// it), one that ignores it answers with another ETag or size, refused naming the URL.
#[test]
fn a_file_replaced_between_two_ranges_is_never_mixed() {
    let m = made(200);
    let other = made(201);
    for ignoring in [false, true] {
        let server = TestServer::start();
        server.serve("data.tar.gz", m.bytes.clone());
        let replaced = other.bytes.clone();
        let fault = if ignoring {
            clima_artifact_tests::Fault::ReplaceIgnoringIfRange(replaced)
        } else {
            clima_artifact_tests::Fault::Replace(replaced)
        };
        server.fail_next("data.tar.gz", [clima_artifact_tests::Fault::Pass, fault]);
        let v = m.variant(&server.url("data.tar.gz"), true);
        let (dir, depot, config) = fresh();
        let err = fetch(&v, &config, dir.path(), &["d3/f13.txt"])
            .unwrap_err()
            .to_string();
        assert!(err.contains(&server.url("data.tar.gz")), "{err}");
        if ignoring {
            assert!(err.contains("changed"), "{err}");
        } else {
            assert!(err.contains("sha256 mismatch"), "{err}");
        }
        let root = depot.join("clima_partial").join(m.tree.to_hex());
        assert_eq!(files_under(&root), Vec::<String>::new());
        assert!(!depot.join("artifacts").join(m.tree.to_hex()).exists());
    }
}

/// `gc` collects a partial folder as it collects an installed artifact: kept while a recorded
/// manifest names the artifact, removed (with its count) once none does.
#[test]
fn gc_keeps_a_referenced_partial_folder_and_removes_an_unreferenced_one() {
    let m = made(20);
    let server = TestServer::start();
    server.serve("data.tar.gz", m.bytes.clone());
    let v = m.variant(&server.url("data.tar.gz"), true);
    let (dir, depot, config) = fresh();
    fetch(&v, &config, dir.path(), &["d1/f1.txt"]).unwrap();
    let root = depot.join("clima_partial").join(m.tree.to_hex());
    assert!(root.join("d1/f1.txt").is_file());
    let manifest = |hash: &str| {
        let text = format!("[data]\ngit-tree-sha1 = \"{hash}\"\n");
        clima_artifact_manifest::Manifest::parse(&text, &dir.path().join("Artifacts.toml")).unwrap()
    };
    let options = |hash: &str| clima_artifact_ops::gc::Options {
        manifests: vec![manifest(hash)],
        all_depots: false,
        delay: std::time::Duration::ZERO,
        dry_run: false,
        force: false,
    };
    let kept = clima_artifact_ops::gc::collect(&config, &options(&m.tree.to_hex())).unwrap();
    assert!(kept.unreferenced.is_empty(), "{:?}", kept.unreferenced);
    assert!(root.join("d1/f1.txt").is_file());
    let other = "0123456789abcdef0123456789abcdef01234567";
    let gone = clima_artifact_ops::gc::collect(&config, &options(other)).unwrap();
    assert_eq!(gone.unreferenced.len(), 1, "{:?}", gone.unreferenced);
    assert!(gone.unreferenced[0].removed);
    assert!(!root.exists());
    assert!(
        !depot
            .join("clima_partial")
            .join(format!("{}.count", m.tree.to_hex()))
            .exists()
    );
    assert_eq!(
        files_under(&depot.join("clima_partial")),
        Vec::<String>::new()
    );
}

/// The `Artifacts` API answers a sub-path of a seekable artifact as the macro does.
#[test]
fn the_artifacts_api_fetches_a_sub_path_alone() {
    let m = made(40);
    let server = TestServer::start();
    server.serve("data.tar.gz", m.bytes.clone());
    let dir = tempfile::tempdir().unwrap();
    let depot = dir.path().join("depot");
    let manifest = dir.path().join("Artifacts.toml");
    std::fs::write(
        &manifest,
        format!(
            "[data]\ngit-tree-sha1 = \"{}\"\n[[data.download]]\nurl = \"{}\"\nsha256 = \"{}\"\nindex-sha256 = \"{}\"\n",
            m.tree,
            server.url("data.tar.gz"),
            sha256(&m.bytes).to_hex(),
            m.index_sha256.to_hex()
        ),
    )
    .unwrap();
    let artifacts = clima_artifact_runtime::Artifacts::load(&manifest)
        .unwrap()
        .with_config(test_config(std::slice::from_ref(&depot)));
    let path = artifacts.ensure_installed("data/d6/f16.txt").unwrap();
    assert_eq!(
        path,
        depot
            .join("clima_partial")
            .join(m.tree.to_hex())
            .join("d6/f16.txt")
    );
    assert!(!artifacts.is_installed("data").unwrap());
    // The manifest is in the usage log, so that `gc` keeps the partial folder.
    let log = std::fs::read_to_string(depot.join("logs/artifact_usage.toml")).unwrap();
    assert!(log.contains("Artifacts.toml"), "{log}");
    let whole = artifacts.ensure_installed("data").unwrap();
    assert_eq!(whole, depot.join("artifacts").join(m.tree.to_hex()));
    assert_eq!(
        artifacts.ensure_installed("data/d6/f16.txt").unwrap(),
        whole.join("d6/f16.txt")
    );
}

/// A symlink planted in the partial folder (shared storage is hostile) is never followed: a
/// file under it is neither found there nor written through it.
#[test]
fn a_symlink_planted_in_the_partial_folder_is_never_followed() {
    let m = made(20);
    let server = TestServer::start();
    server.serve("data.tar.gz", m.bytes.clone());
    let v = m.variant(&server.url("data.tar.gz"), true);
    let (dir, depot, config) = fresh();
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("f3.txt"), "planted").unwrap();
    let root = depot.join("clima_partial").join(m.tree.to_hex());
    std::fs::create_dir_all(&root).unwrap();
    std::os::unix::fs::symlink(&elsewhere, root.join("d3")).unwrap();
    let err = fetch(&v, &config, dir.path(), &["d3/f3.txt"])
        .unwrap_err()
        .to_string();
    assert!(err.contains("d3"), "{err}");
    assert_eq!(
        std::fs::read_to_string(elsewhere.join("f3.txt")).unwrap(),
        "planted"
    );
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 1);
}

/// Credentials in the URL never reach a message: the lying server's error names the URL
/// without them.
#[test]
fn a_lying_server_is_named_without_the_credentials_of_its_url() {
    let m = made(8);
    let server = TestServer::start();
    server.serve("data.tar.gz", m.bytes.clone());
    server.corrupt_ranges("data.tar.gz");
    let url = server
        .url("data.tar.gz")
        .replace("http://", "http://reader:s3cr3t-token@");
    let v = m.variant(&url, true);
    let (dir, _depot, config) = fresh();
    let err = fetch(&v, &config, dir.path(), &["d2/f2.txt"])
        .unwrap_err()
        .to_string();
    assert!(!err.contains("s3cr3t"), "{err}");
    assert!(err.contains("***@127.0.0.1"), "{err}");
    assert!(err.contains("d2/f2.txt"), "{err}");
}

/// One file of every other folder, and the large file: members far apart, each its own
/// span (the folders between are more than `MAX_GAP` long).
const SPREAD: [&str; 6] = [
    "d0/f0.txt",
    "d2/f2.txt",
    "d4/f4.txt",
    "d6/f6.txt",
    "d8/f8.txt",
    "large.bin",
];

/// The ranges of a fetch of files far apart go over several connections at once (as a whole
/// download does, up to `NetConfig::connections`), and the server sends what one connection
/// would: the members, the index and the tail.
#[test]
fn the_files_of_one_fetch_come_over_several_connections() {
    let m = made(400);
    let server = TestServer::start();
    server.serve("data.tar.gz", m.bytes.clone());
    // Each answer takes a while to start, as from a distant server: the connections overlap.
    server.set_latency(std::time::Duration::from_millis(100));
    let v = m.variant(&server.url("data.tar.gz"), true);
    let (dir, depot, config) = fresh();
    assert!(config.net.connections > 1);
    let spread = &SPREAD[..5];
    let files = fetch(&v, &config, dir.path(), spread).unwrap();
    assert_eq!(files.fetched, spread.len());
    let root = depot.join("clima_partial").join(m.tree.to_hex());
    for p in spread {
        assert_eq!(
            std::fs::read(root.join(p)).unwrap(),
            std::fs::read(m.content().join(p)).unwrap(),
            "{p}"
        );
    }
    let spans = server.ranges_of("data.tar.gz").len() - 2;
    assert!(spans >= spread.len(), "{spans} span requests");
    let most = server.most_connections("data.tar.gz");
    assert!(
        most > 1 && most <= config.net.connections,
        "{most} requests in flight at once"
    );
    let auth = m.index();
    let members: u64 = spread.iter().map(|p| m.member_bytes(p)).sum();
    let bound = members + (auth.locator().index_length + 66).max(seekable::remote::FIRST_TAIL);
    let sent = server.bytes_sent_for("data.tar.gz");
    assert!(
        sent <= bound,
        "{sent} bytes sent; members, index and tail are {bound}"
    );
    assert_eq!(files.received, sent);
}

/// One range among several answered with other bytes, on one of the connections: the whole
/// fetch fails naming the URL, and none of the files is visible, not even those whose ranges
/// were honest and were checked before the lie was found (they become visible together).
#[test]
fn a_lying_range_on_one_connection_fails_the_whole_fetch_and_leaves_nothing() {
    let m = made(400);
    let server = TestServer::start();
    server.serve("data.tar.gz", m.bytes.clone());
    server.set_latency(std::time::Duration::from_millis(20));
    // The tail, the index's head, one span: honest; the next span's answer lies.
    use clima_artifact_tests::Fault;
    server.fail_next(
        "data.tar.gz",
        [Fault::Pass, Fault::Pass, Fault::Pass, Fault::CorruptRange],
    );
    let v = m.variant(&server.url("data.tar.gz"), true);
    let (dir, depot, config) = fresh();
    let err = fetch(&v, &config, dir.path(), &SPREAD)
        .unwrap_err()
        .to_string();
    assert!(err.contains(&server.url("data.tar.gz")), "{err}");
    assert!(SPREAD.iter().any(|p| err.contains(p)), "{err}");
    let root = depot.join("clima_partial").join(m.tree.to_hex());
    assert_eq!(files_under(&root), Vec::<String>::new(), "nothing visible");
    assert!(!depot.join("artifacts").join(m.tree.to_hex()).exists());
}

/// A second sub-path of an artifact not installed, in the same process, costs only its own
/// members: the index the first call authenticated is remembered (by URL, tree and
/// `index-sha256`), and the first request asks one byte (the file's size and validator). An
/// entry without `index-sha256` (the tree alone authenticates the index, not its offsets) is
/// not remembered: its index is read again.
#[test]
fn a_second_sub_path_fetches_only_its_own_members() {
    let m = made(400);
    for keyed in [true, false] {
        let server = TestServer::start();
        server.serve("data.tar.gz", m.bytes.clone());
        let v = m.variant(&server.url("data.tar.gz"), keyed);
        let (dir, depot, config) = fresh();
        fetch(&v, &config, dir.path(), &["d3/f213.txt"]).unwrap();
        let before = server.bytes_sent_for("data.tar.gz");
        let second = fetch(&v, &config, dir.path(), &["d5/f15.txt"]).unwrap();
        let sent = server.bytes_sent_for("data.tar.gz") - before;
        let root = depot.join("clima_partial").join(m.tree.to_hex());
        assert_eq!(second.fetched, 1);
        assert_eq!(
            std::fs::read(root.join("d5/f15.txt")).unwrap(),
            std::fs::read(m.content().join("d5/f15.txt")).unwrap()
        );
        assert_eq!(second.received, sent);
        let member = m.member_bytes("d5/f15.txt");
        let index_len = m.index().locator().index_length;
        if keyed {
            assert!(
                sent <= member + 1,
                "{sent} bytes sent for a file of {member} bytes of members"
            );
        } else {
            assert!(sent > member + index_len, "{sent} bytes: the index again");
        }
    }
}

/// The whole install that reuses the files fetched before fetches the rest over several
/// connections at once too: with folders held between them (each more than `MAX_GAP` of
/// members), the rest is several spans.
#[test]
fn a_later_whole_install_fetches_the_rest_over_several_connections() {
    let m = made(400);
    let first = TestServer::start();
    first.serve("data.tar.gz", m.bytes.clone());
    let (dir, depot, config) = fresh();
    let held = ["d2/", "d5/", "d8/", "large.bin"];
    fetch(
        &m.variant(&first.url("data.tar.gz"), true),
        &config,
        dir.path(),
        &held,
    )
    .unwrap();
    // The same tarball from another server, whose answers take a while to start.
    let second = TestServer::start();
    second.serve("data.tar.gz", m.bytes.clone());
    second.set_latency(std::time::Duration::from_millis(100));
    let v = m.variant(&second.url("data.tar.gz"), true);
    let installed = ensure_variant("data", &v, dir.path(), &config).unwrap();
    let whole = depot.join("artifacts").join(m.tree.to_hex());
    assert_eq!(installed.path, whole);
    assert_eq!(git_tree_hash(&whole), m.tree);
    match installed.origin {
        clima_artifact_runtime::Origin::Downloaded { reused_bytes, .. } => {
            assert!(reused_bytes.unwrap() >= m.member_bytes("large.bin"))
        }
        o => panic!("{o:?}"),
    }
    let most = second.most_connections("data.tar.gz");
    assert!(
        most > 1 && most <= config.net.connections,
        "{most} requests in flight at once"
    );
}

/// A fetch of many files holds no descriptor per file while it waits to make them visible
/// together: a folder of 100 files is fetched under a limit of 48 descriptors.
#[test]
fn a_fetch_of_many_files_runs_with_few_descriptors() {
    let name = "seekable_partial::a_fetch_of_many_files_runs_with_few_descriptors";
    if !crate::seekable::with_few_descriptors(name, 48) {
        return;
    }
    let m = made(1000);
    let server = TestServer::start();
    server.serve("data.tar.gz", m.bytes.clone());
    let v = m.variant(&server.url("data.tar.gz"), true);
    let (dir, depot, config) = fresh();
    let files = fetch(&v, &config, dir.path(), &["d3"]).unwrap();
    assert_eq!(files.fetched, 100);
    let root = depot.join("clima_partial").join(m.tree.to_hex());
    assert_eq!(files_under(&root.join("d3")).len(), 100);
}
