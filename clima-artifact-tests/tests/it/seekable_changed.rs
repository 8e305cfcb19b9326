//! Only what changed (issue 49, item 4): an install of a seekable artifact copies the files the
//! depot already holds under another artifact (version 1, when version 2 is installed; files
//! fetched one by one), found by blob id and size and checked as they are copied, and fetches
//! only the other files' members by ranges. A file of version 1 changed by someone is not
//! copied but fetched; a server without ranges gives the whole download as before. The CLI's
//! `fetch` is in `clima-artifacts-cli/tests/seekable.rs`.

use std::path::{Path, PathBuf};

use clima_artifact_manifest::{ArtifactVariant, Download, GitTreeSha1, Sha256};
use clima_artifact_ops::tarball::{collect_entries, write_seekable};
use clima_artifact_runtime::extract::seekable::{self, Expected, Flavour, IndexLimits};
use clima_artifact_runtime::{Config, Origin, ensure_files, ensure_variant};
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

/// One version of a seekable artifact: `files` files in 10 folders (`d<k>/f<i>.txt`), an
/// executable, a file of several 1 MiB blocks and a symlink; `changed` names a file whose
/// content differs from version 1's (same size).
struct Version {
    dir: tempfile::TempDir,
    bytes: Vec<u8>,
    tree: GitTreeSha1,
    index_sha256: Sha256,
}

const FILES: u32 = 60;

fn version(changed: Option<u32>) -> Version {
    let dir = tempfile::tempdir().unwrap();
    let content = dir.path().join("content");
    for i in 0..FILES {
        let sub = content.join(format!("d{}", i % 10));
        std::fs::create_dir_all(&sub).unwrap();
        let seed = if changed == Some(i) { i + 1000 } else { i };
        std::fs::write(
            sub.join(format!("f{i}.txt")),
            bytes(seed, 20_000 + 13 * i as usize),
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
    std::os::unix::fs::symlink("d1/f1.txt", content.join("latest")).unwrap();
    let entries = collect_entries(&content).unwrap();
    let out = dir.path().join("data.tar.gz");
    let tarball = write_seekable(&content, &entries, &out, Flavour::Gzip, 1 << 20, &|_| {})
        .unwrap_or_else(|e| panic!("{e}"));
    Version {
        bytes: std::fs::read(&out).unwrap(),
        tree: tarball.tree_hash,
        index_sha256: tarball.index_sha256.unwrap(),
        dir,
    }
}

impl Version {
    fn content(&self) -> PathBuf {
        self.dir.path().join("content")
    }

    /// The entry served at `url`.
    fn variant(&self, url: &str) -> ArtifactVariant {
        let mut v =
            clima_artifact_tests::variant(self.tree, &[url.to_owned()], sha256(&self.bytes));
        v.downloads = vec![Download {
            url: url.to_owned(),
            sha256: sha256(&self.bytes),
            size: None,
            index_sha256: Some(self.index_sha256),
        }];
        v
    }

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

    /// What a ranged read of `paths`' files costs at most: their members, the index, the
    /// first tail (footer included) and one gap between neighbours.
    fn ranged_bound(&self, paths: &[&str]) -> u64 {
        paths.iter().map(|p| self.member_bytes(p)).sum::<u64>()
            + self.index().locator().index_length
            + seekable::remote::FIRST_TAIL
            + seekable::remote::MAX_GAP
    }
}

/// Version 1 and version 2 (file `d3/f13.txt` changed), each served; version 1 installed
/// into a fresh depot.
struct Setup {
    v1: Version,
    v2: Version,
    server: TestServer,
    dir: tempfile::TempDir,
    depot: PathBuf,
    config: Config,
}

fn setup() -> Setup {
    let (v1, v2) = (version(None), version(Some(13)));
    assert_ne!(v1.tree, v2.tree);
    let server = TestServer::start();
    server.serve("v1.tar.gz", v1.bytes.clone());
    server.serve("v2.tar.gz", v2.bytes.clone());
    let dir = tempfile::tempdir().unwrap();
    let depot = dir.path().join("depot");
    let config = test_config(std::slice::from_ref(&depot));
    let one = v1.variant(&server.url("v1.tar.gz"));
    ensure_variant("data", &one, dir.path(), &config).unwrap();
    assert_eq!(git_tree_hash(&installed(&depot, &v1.tree)), v1.tree);
    Setup {
        v1,
        v2,
        server,
        dir,
        depot,
        config,
    }
}

fn installed(depot: &Path, tree: &GitTreeSha1) -> PathBuf {
    depot.join("artifacts").join(tree.to_hex())
}

fn reused(origin: &Origin) -> u64 {
    match origin {
        Origin::Downloaded { reused_bytes, .. } => reused_bytes.unwrap(),
        o => panic!("{o:?}"),
    }
}

#[test]
fn version_2_with_one_file_changed_fetches_only_that_file_and_copies_the_rest() {
    let s = setup();
    let two = s.v2.variant(&s.server.url("v2.tar.gz"));
    let done = ensure_variant("data", &two, s.dir.path(), &s.config).unwrap();
    let whole = installed(&s.depot, &s.v2.tree);
    assert_eq!(done.path, whole);
    assert_eq!(git_tree_hash(&whole), s.v2.tree, "the manifest's tree");
    let sent = s.server.bytes_sent_for("v2.tar.gz");
    let bound = s.v2.ranged_bound(&["d3/f13.txt"]);
    assert!(
        sent <= bound,
        "{sent} bytes sent for version 2; the changed file's members, the index and the tail \
         are {bound} (the tarball is {})",
        s.v2.bytes.len()
    );
    assert!(sent * 20 < s.v2.bytes.len() as u64, "{sent}");
    assert!(
        reused(&done.origin) >= s.v2.member_bytes("large.bin"),
        "{:?}",
        done.origin
    );
    // Copies, read-only, not links to version 1's files (which stay as they were).
    use std::os::unix::fs::MetadataExt;
    let (a, b) = (
        std::fs::metadata(whole.join("large.bin")).unwrap(),
        std::fs::metadata(installed(&s.depot, &s.v1.tree).join("large.bin")).unwrap(),
    );
    assert_ne!(a.ino(), b.ino());
    assert_eq!((a.nlink(), a.mode() & 0o777), (1, 0o444));
    assert_eq!(
        std::fs::metadata(whole.join("bin/run")).unwrap().mode() & 0o777,
        0o555
    );
    assert_eq!(
        std::fs::read_link(whole.join("latest")).unwrap(),
        Path::new("d1/f1.txt")
    );
    assert_eq!(git_tree_hash(&installed(&s.depot, &s.v1.tree)), s.v1.tree);
}

#[test]
fn a_file_changed_in_version_1s_folder_is_not_copied_but_fetched() {
    let s = setup();
    // Someone makes a file of version 1 writable and changes it, keeping its size.
    let changed = installed(&s.depot, &s.v1.tree).join("large.bin");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&changed, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut other = std::fs::read(&changed).unwrap();
    other[12345] ^= 0xff;
    std::fs::write(&changed, &other).unwrap();
    let two = s.v2.variant(&s.server.url("v2.tar.gz"));
    let done = ensure_variant("data", &two, s.dir.path(), &s.config).unwrap();
    let whole = installed(&s.depot, &s.v2.tree);
    assert_eq!(git_tree_hash(&whole), s.v2.tree, "the manifest's tree");
    assert_eq!(
        std::fs::read(whole.join("large.bin")).unwrap(),
        std::fs::read(s.v2.content().join("large.bin")).unwrap()
    );
    let sent = s.server.bytes_sent_for("v2.tar.gz");
    let fetched = s.v2.member_bytes("large.bin") + s.v2.member_bytes("d3/f13.txt");
    assert!(
        sent >= fetched,
        "{sent} < {fetched}: large.bin was not fetched"
    );
    let bound = s.v2.ranged_bound(&["d3/f13.txt", "large.bin"]) + seekable::remote::MAX_GAP;
    assert!(sent <= bound, "{sent} > {bound}");
    assert!(reused(&done.origin) > 0);
}

#[test]
fn a_server_without_ranges_gives_the_whole_download_as_before() {
    let s = setup();
    s.server.ignore_ranges("v2.tar.gz");
    let two = s.v2.variant(&s.server.url("v2.tar.gz"));
    let done = ensure_variant("data", &two, s.dir.path(), &s.config).unwrap();
    let whole = installed(&s.depot, &s.v2.tree);
    assert_eq!(done.path, whole);
    assert_eq!(git_tree_hash(&whole), s.v2.tree);
    assert!(s.server.bytes_sent_for("v2.tar.gz") >= s.v2.bytes.len() as u64);
    assert_eq!(reused(&done.origin), 0);
}

#[test]
fn a_file_of_version_2_fetched_alone_is_copied_from_version_1_when_unchanged() {
    let s = setup();
    let two = s.v2.variant(&s.server.url("v2.tar.gz"));
    let files = ensure_files("data", &two, s.dir.path(), &s.config, &["large.bin"]).unwrap();
    assert_eq!((files.fetched, files.held), (0, 1));
    let path = s
        .depot
        .join("clima_partial")
        .join(s.v2.tree.to_hex())
        .join("large.bin");
    assert_eq!(files.paths, vec![path.clone()]);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        std::fs::read(s.v2.content().join("large.bin")).unwrap()
    );
    // No member was asked for: the index and the tail only.
    let sent = s.server.bytes_sent_for("v2.tar.gz");
    let bound = s.v2.index().locator().index_length + seekable::remote::FIRST_TAIL;
    assert!(sent <= bound, "{sent} > {bound}");
    // The changed file is fetched.
    let files = ensure_files("data", &two, s.dir.path(), &s.config, &["d3/f13.txt"]).unwrap();
    assert_eq!((files.fetched, files.held), (1, 0));
    assert_eq!(
        std::fs::read(&files.paths[0]).unwrap(),
        std::fs::read(s.v2.content().join("d3/f13.txt")).unwrap()
    );
}

/// The walk of the depots for content held is bounded (at most 1 million entries, or
/// `max_entries` when lower): a depot searched first whose artifacts exceed the bound hides
/// version 1 behind it, and version 2 is then downloaded whole, correctly; within the bound,
/// version 1 is found as before.
#[test]
fn the_walk_of_the_depots_stops_at_its_bound_and_the_rest_is_fetched() {
    let s = setup();
    // A depot searched first, with an artifact of 120 files of other content.
    let first = s.dir.path().join("first-depot");
    let other = first.join("artifacts").join("ab".repeat(20));
    std::fs::create_dir_all(&other).unwrap();
    for i in 0..120 {
        std::fs::write(other.join(format!("x{i}")), format!("other {i}")).unwrap();
    }
    let two = s.v2.variant(&s.server.url("v2.tar.gz"));
    let mut config = test_config(&[first.clone(), s.depot.clone()]);
    // Enough for version 2's entries (files and folders), not for the walk to reach version 1.
    config.max_entries = 100;
    let done = ensure_variant("data", &two, s.dir.path(), &config).unwrap();
    assert_eq!(done.path, installed(&first, &s.v2.tree));
    assert_eq!(git_tree_hash(&done.path), s.v2.tree);
    assert!(
        s.server.bytes_sent_for("v2.tar.gz") >= s.v2.bytes.len() as u64,
        "downloaded whole"
    );
    // Within the bound (the default), version 1 behind the same depot is found.
    std::fs::remove_dir_all(installed(&first, &s.v2.tree)).unwrap();
    let before = s.server.bytes_sent_for("v2.tar.gz");
    let config = test_config(&[first.clone(), s.depot.clone()]);
    let done = ensure_variant("data", &two, s.dir.path(), &config).unwrap();
    assert_eq!(git_tree_hash(&done.path), s.v2.tree);
    let sent = s.server.bytes_sent_for("v2.tar.gz") - before;
    assert!(sent <= s.v2.ranged_bound(&["d3/f13.txt"]), "{sent}");
}
