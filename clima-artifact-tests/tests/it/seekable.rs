//! Seekable tarballs installed on every core (issue 49, item 2): a download entry with
//! `index-sha256` is unpacked by `CLIMA_ARTIFACTS_INSTALL_THREADS` workers. The tree is the one
//! the one-pass install gives, whatever the number of workers; an index whose tree lies and a
//! member whose content disagrees with the index are refused with nothing in the depot; the
//! descriptors held do not grow with the tree, and the free-space and inode reserves are kept
//! and reported as in one pass (the
//! CLI's `fetch` with the variable set is in `clima-artifacts-cli/tests/seekable.rs`). Tarballs are made by `create`'s writer
//! (`clima_artifact_ops::tarball::write_seekable`), served over loopback.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clima_artifact_manifest::{ArtifactVariant, Download, GitTreeSha1, GitTreeSha256, Sha256};
use clima_artifact_ops::tarball::{collect_entries, write_seekable};
use clima_artifact_runtime::extract::seekable::{self, Flavour};
use clima_artifact_runtime::{Config, Error, Origin, SourceFailure, ensure_variant};
use clima_artifact_tests::{
    Fault, TestServer, assert_depot_clean, git_tree_hash, have_git, sha256, temp_entries,
    test_config,
};

/// Bytes of the file cut into blocks (1 MiB blocks: four of them and a bit).
const LARGE: usize = (4 << 20) + 4321;

/// Content that compresses, but not to nothing: a pseudo-random byte every third.
fn bytes(seed: u32, len: usize) -> Vec<u8> {
    (0..len as u32)
        .map(|i| {
            if i % 3 == 0 {
                (i.wrapping_add(seed).wrapping_mul(2_654_435_761) >> 13) as u8
            } else {
                b'a' + (i % 26) as u8
            }
        })
        .collect()
}

/// A tree of many small files in folders, an executable, symlinks, an empty file and a file
/// of several blocks; `seed` varies the content.
fn tree(dir: &Path, seed: u32) {
    for i in 0..120u32 {
        let sub = dir.join(format!("d{}/e{}", i % 7, i % 3));
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(
            sub.join(format!("f{i}.txt")),
            bytes(seed + i, 100 + 997 * i as usize),
        )
        .unwrap();
    }
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    std::fs::write(dir.join("bin/run"), "#!/bin/sh\necho run\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.join("bin/run"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(dir.join("empty"), "").unwrap();
    std::fs::write(dir.join("large.bin"), bytes(seed, LARGE)).unwrap();
    std::os::unix::fs::symlink("large.bin", dir.join("latest")).unwrap();
    std::os::unix::fs::symlink("../../bin/run", dir.join("d1/e1/run")).unwrap();
}

/// A seekable tarball of `tree(seed)`, with what its manifest entry says.
struct Made {
    _dir: tempfile::TempDir,
    content: PathBuf,
    bytes: Vec<u8>,
    tree: GitTreeSha1,
    index_sha256: Sha256,
}

fn made(seed: u32) -> Made {
    made_with(seed, &[])
}

/// [`made`], with these files' contents replaced.
fn made_with(seed: u32, files: &[(&str, Vec<u8>)]) -> Made {
    made_as(seed, files, Flavour::Gzip)
}

/// [`made_with`], of members of `flavour`.
fn made_as(seed: u32, files: &[(&str, Vec<u8>)], flavour: Flavour) -> Made {
    let dir = tempfile::tempdir().unwrap();
    let content = dir.path().join("content");
    tree(&content, seed);
    for (path, bytes) in files {
        let p = content.join(path);
        let _ = std::fs::remove_file(&p);
        std::fs::write(&p, bytes).unwrap();
    }
    let entries = collect_entries(&content).unwrap();
    let out = dir.path().join("data.tar");
    let tarball = write_seekable(&content, &entries, &out, flavour, 1 << 20, &|_| {})
        .unwrap_or_else(|e| panic!("{e}"));
    Made {
        bytes: std::fs::read(&out).unwrap(),
        content,
        tree: tarball.tree_hash,
        index_sha256: tarball
            .index_sha256
            .expect("a seekable tarball has an index"),
        _dir: dir,
    }
}

/// The entry of `tarball` (`bytes`) served at `url`: its tree hashes and, when `seekable`,
/// its `index-sha256`.
fn variant(
    tree: GitTreeSha1,
    tree_sha256: Option<GitTreeSha256>,
    url: &str,
    bytes: &[u8],
    index_sha256: Option<Sha256>,
) -> ArtifactVariant {
    let mut v = clima_artifact_tests::variant(tree, &[url.to_owned()], sha256(bytes));
    v.git_tree_sha256 = tree_sha256;
    v.downloads = vec![Download {
        url: url.to_owned(),
        sha256: sha256(bytes),
        size: None,
        index_sha256,
    }];
    v
}

/// Every file, symlink and folder under `dir` with its content (a symlink's target) and mode.
fn listing(dir: &Path) -> BTreeMap<PathBuf, (Vec<u8>, u32)> {
    use std::os::unix::fs::MetadataExt;
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(dir).unwrap().to_path_buf();
            let content = if m.is_symlink() {
                std::fs::read_link(&p)
                    .unwrap()
                    .into_os_string()
                    .into_encoded_bytes()
            } else if m.is_dir() {
                todo.push(p.clone());
                Vec::new()
            } else {
                std::fs::read(&p).unwrap()
            };
            let mode = if m.is_symlink() { 0 } else { m.mode() & 0o7777 };
            out.insert(rel, (content, mode));
        }
    }
    out
}

/// Installs `variant` into a fresh depot with `threads` workers: the installed folder and
/// the depot, or the error.
fn install(
    variant: &ArtifactVariant,
    threads: Option<usize>,
) -> (tempfile::TempDir, PathBuf, Result<PathBuf, Error>) {
    let dir = tempfile::tempdir().unwrap();
    let depot = dir.path().join("depot");
    let config = Config {
        install_threads: threads,
        ..test_config(std::slice::from_ref(&depot))
    };
    let installed = ensure_variant("data", variant, dir.path(), &config).map(|i| i.path);
    (dir, depot, installed)
}

#[test]
fn a_parallel_install_gives_the_tree_of_the_one_pass_install_on_any_number_of_workers() {
    for flavour in [Flavour::Gzip, Flavour::Zstd] {
        same_tree_on_any_number_of_workers(flavour);
    }
}

fn same_tree_on_any_number_of_workers(flavour: Flavour) {
    let m = made_as(1, &[], flavour);
    let name = match flavour {
        Flavour::Gzip => "data.tar.gz",
        Flavour::Zstd => "data.tar.zst",
    };
    let server = TestServer::start();
    server.serve(name, m.bytes.clone());
    let url = server.url(name);
    // Without `index-sha256` the same file installs in one pass, as any tarball.
    let one_pass = variant(m.tree, None, &url, &m.bytes, None);
    let (_d0, _, classic) = install(&one_pass, None);
    let classic = classic.unwrap_or_else(|e| panic!("{e}"));
    let want = listing(&classic);
    assert!(want.len() > 120, "{}", want.len());
    let parallel = variant(m.tree, None, &url, &m.bytes, Some(m.index_sha256));
    for threads in [1, 2, 8] {
        let (_d, depot, got) = install(&parallel, Some(threads));
        let got = got.unwrap_or_else(|e| panic!("{flavour:?}, {threads} workers: {e}"));
        assert_eq!(got, depot.join("artifacts").join(m.tree.to_hex()));
        assert_eq!(listing(&got), want, "{threads} workers");
        if have_git() {
            assert_eq!(git_tree_hash(&got), m.tree, "{threads} workers");
        }
        assert_eq!(temp_entries(&depot), Vec::<String>::new(), "temp dirs left");
    }
    // And the content is the folder the tarball was made of.
    assert_eq!(
        listing(&classic)
            .into_iter()
            .filter(|(p, _)| !p.as_os_str().is_empty())
            .map(|(p, (c, _))| (p, c))
            .collect::<BTreeMap<_, _>>(),
        listing(&m.content)
            .into_iter()
            .map(|(p, (c, _))| (p, c))
            .collect::<BTreeMap<_, _>>()
    );
}

#[test]
fn a_parallel_install_checks_the_git_tree_sha256_too() {
    if !have_git() {
        return;
    }
    let m = made(2);
    let sha256 = clima_artifact_tests::git_tree_hash_sha256(&m.content);
    let server = TestServer::start();
    server.serve("data.tar.gz", m.bytes.clone());
    let url = server.url("data.tar.gz");
    let v = variant(m.tree, Some(sha256), &url, &m.bytes, Some(m.index_sha256));
    let (_d, _depot, got) = install(&v, Some(2));
    let got = got.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(clima_artifact_tests::git_tree_hash_sha256(&got), sha256);
}

/// The one failure of `result`'s download, as text.
fn refusal(result: Result<PathBuf, Error>) -> String {
    let e = result.expect_err("the install must be refused");
    let Error::DownloadFailed { failures, .. } = &e else {
        panic!("{e:?}")
    };
    let text = e.to_string();
    assert!(
        failures
            .iter()
            .all(|f| matches!(f, SourceFailure::Archive { .. })),
        "{failures:?}"
    );
    text
}

#[test]
fn an_index_whose_tree_lies_is_refused_and_nothing_is_installed() {
    let m = made(3);
    let other = made(4);
    let server = TestServer::start();
    server.serve("data.tar.gz", m.bytes.clone());
    let url = server.url("data.tar.gz");
    // The manifest names another tree: the index of this file cannot make it.
    let v = variant(other.tree, None, &url, &m.bytes, Some(m.index_sha256));
    let (_d, depot, result) = install(&v, Some(4));
    let text = refusal(result);
    assert!(text.contains("the index describes tree"), "{text}");
    assert!(text.contains(&other.tree.to_hex()), "{text}");
    assert!(!depot.join("artifacts").join(other.tree.to_hex()).exists());
    assert_depot_clean(&depot);
}

/// Bytes that do not compress (xorshift).
fn random(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 32) as u8
        })
        .collect()
}

/// `m`'s tarball with the members of entry `path` taken from `other`'s (the same tree
/// layout, other content of the same length): the index, and so `index-sha256`, unchanged.
fn spliced(m: &Made, other: &Made, path: &str) -> Vec<u8> {
    let index_of = |bytes: &[u8]| {
        let mut c = std::io::Cursor::new(bytes);
        let (_, doc) = seekable::read_index(&mut c, bytes.len() as u64, &Default::default())
            .unwrap()
            .unwrap();
        seekable::Index::decode(&doc, &Default::default()).unwrap()
    };
    let (ours, theirs) = (index_of(&m.bytes), index_of(&other.bytes));
    let find = |ix: &seekable::Index| {
        ix.entries
            .iter()
            .find(|e| e.path == path.as_bytes())
            .unwrap()
            .clone()
    };
    let (a, b) = (find(&ours), find(&theirs));
    assert_eq!((a.offset, a.length), (b.offset, b.length), "same layout");
    let mut out = m.bytes.clone();
    let span = a.offset as usize..(a.offset + a.length) as usize;
    out[span.clone()].copy_from_slice(&other.bytes[span]);
    out
}

#[test]
fn a_member_whose_content_disagrees_with_the_index_is_refused_and_nothing_is_installed() {
    // A small file and the file of blocks, each on its own.
    for (path, threads) in [("d3/e0/f3.txt", 2), ("large.bin", 8), ("d0/e0/f0.txt", 1)] {
        let len = if path == "large.bin" { LARGE } else { 5000 };
        let content = random(1, len);
        // Two bytes swapped: the same letters, so the same Huffman codes and the same member
        // length, but another blob.
        let mut swapped = content.clone();
        let (i, j) = (len - 300, len - 100);
        assert_ne!(swapped[i], swapped[j]);
        swapped.swap(i, j);
        let m = made_with(5, &[(path, content)]);
        let other = made_with(5, &[(path, swapped)]);
        let bad = spliced(&m, &other, path);
        assert_ne!(bad, m.bytes);
        let server = TestServer::start();
        server.serve("data.tar.gz", bad.clone());
        let url = server.url("data.tar.gz");
        // The entry's `sha256` is the file's as served: only the index can catch it.
        let v = variant(m.tree, None, &url, &bad, Some(m.index_sha256));
        let (_d, depot, result) = install(&v, Some(threads));
        let text = refusal(result);
        assert!(text.contains(path), "{path}: {text}");
        assert!(text.contains("does not have the index's"), "{path}: {text}");
        assert!(!depot.join("artifacts").join(m.tree.to_hex()).exists());
        assert_depot_clean(&depot);
    }
}

/// The index is read first and is honest (its tree is the manifest's), so every member is
/// unpacked and checked while the file arrives; the file's SHA-256 is not the entry's: refused
/// as a wrong download naming its URL, and nothing is visible in the depot (the unpacked
/// files were in the private temp folder, which is gone).
#[test]
fn a_seekable_download_with_the_wrong_sha256_is_refused_and_nothing_is_installed() {
    let m = made(8);
    let server = TestServer::start();
    server.serve("data.tar.gz", m.bytes.clone());
    let url = server.url("data.tar.gz");
    let mut v = variant(m.tree, None, &url, &m.bytes, Some(m.index_sha256));
    v.downloads[0].sha256 = sha256(b"another file");
    let (_d, depot, result) = install(&v, Some(2));
    let e = result.expect_err("a wrong sha256");
    assert_refused_by_sha256(&e, &url, &depot, m.tree);
}

/// `e` is a refusal by the download's SHA-256 on every attempt, naming `url`, and `depot` holds
/// neither the artifact `tree` nor anything of the attempts.
fn assert_refused_by_sha256(e: &Error, url: &str, depot: &Path, tree: GitTreeSha1) {
    let Error::DownloadFailed { failures, .. } = e else {
        panic!("{e:?}")
    };
    assert!(
        failures
            .iter()
            .all(|f| matches!(f, SourceFailure::Sha256Mismatch { .. })),
        "{failures:?}"
    );
    assert!(e.to_string().contains(url), "{e}");
    assert!(!depot.join("artifacts").join(tree.to_hex()).exists());
    assert_depot_clean(depot);
}

/// A seekable download whose connection breaks half-way while its members are unpacked is
/// continued where it broke (a range request, the same SHA-256 and the same workers), and
/// the install is the tree; a body that is another file under the same index is refused by
/// its SHA-256 with nothing visible.
#[test]
fn a_seekable_download_that_breaks_while_it_is_unpacked_is_continued_or_refused() {
    let m = made(11);
    let len = m.bytes.len();
    let server = TestServer::start();
    server.serve("data.tar.gz", m.bytes.clone());
    let url = server.url("data.tar.gz");
    let v = variant(m.tree, None, &url, &m.bytes, Some(m.index_sha256));
    // The first two requests read the index (the file's last 4 KiB, then the rest of the
    // index before them), the third is the body, the fourth continues it.
    let reset = Fault::Reset { after: len / 2 };
    server.fail_next("data.tar.gz", [Fault::Pass, Fault::Pass, reset]);
    let (_d, depot, got) = install(&v, Some(2));
    let got = got.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(server.gets("data.tar.gz"), 4);
    assert_eq!(
        server.ranges_of("data.tar.gz").len(),
        3,
        "the index's two, the resume"
    );
    assert_same_files(&got, &m.content);
    assert_eq!(temp_entries(&depot), Vec::<String>::new(), "temp dirs left");
    // The body is another version's file (its members are not the index's), on every
    // attempt (each asks for the index first: remembered from the install above, it costs
    // a one-byte request, then the body).
    let other = made(12);
    let body = Fault::Body(other.bytes.clone());
    let faults = (0..3).flat_map(|_| [Fault::Pass, body.clone()]);
    server.fail_next("data.tar.gz", faults);
    let (_d, depot, result) = install(&v, Some(2));
    let e = result.expect_err("another file");
    assert_refused_by_sha256(&e, &url, &depot, m.tree);
}

/// A body that goes on past the end the index read first gives (here 2 MiB of other bytes
/// after the tarball) is refused once it is 1 MiB past it: the error names the URL and says
/// it is not the tarball of the manifest, the server is not asked again, and nothing is
/// installed.
#[test]
fn a_seekable_download_that_goes_on_past_its_end_is_refused() {
    let m = made(14);
    let server = TestServer::start();
    server.serve("data.tar.gz", m.bytes.clone());
    let url = server.url("data.tar.gz");
    let v = variant(m.tree, None, &url, &m.bytes, Some(m.index_sha256));
    let mut longer = m.bytes.clone();
    longer.extend(std::iter::repeat_n(7u8, 2 << 20));
    // The index's two requests, then the longer body.
    server.fail_next(
        "data.tar.gz",
        [Fault::Pass, Fault::Pass, Fault::Body(longer)],
    );
    let (_d, depot, result) = install(&v, Some(2));
    let e = result.expect_err("a body longer than the tarball");
    let text = e.to_string();
    assert!(
        text.contains("the server kept sending after the end of the seekable tarball"),
        "{text}"
    );
    assert!(
        text.contains("this is not the tarball the manifest describes"),
        "{text}"
    );
    assert!(text.contains(&url), "{text}");
    // The index's two ranges and one body: a download that is not the tarball is not asked
    // for again.
    assert_eq!(server.ranges_of("data.tar.gz").len(), 2);
    assert_eq!(server.gets("data.tar.gz"), 3);
    assert!(!depot.join("artifacts").join(m.tree.to_hex()).exists());
    assert_depot_clean(&depot);
}

/// A server that fails every request is asked as often for a seekable download whose index
/// is read first as for any other download, plus the one request for its tail: the tail is
/// asked once, not retried, and not asked again by the later attempts.
#[test]
fn a_failing_server_is_asked_for_a_seekable_downloads_tail_once() {
    let m = made(13);
    let server = TestServer::start();
    server.serve("data.tar.gz", m.bytes.clone());
    server.always("data.tar.gz", Fault::Status(503));
    let url = server.url("data.tar.gz");
    // No `size`: the index is read first.
    let v = variant(m.tree, None, &url, &m.bytes, Some(m.index_sha256));
    let (_d, depot, result) = install(&v, Some(2));
    let e = result.expect_err("a server that answers 503");
    assert!(e.to_string().contains("503"), "{e}");
    // The download of a file without an index: 3 attempts (test_config's retries), one
    // request each; the index first adds one.
    assert_eq!(server.gets("data.tar.gz"), 3 + 1);
    assert!(!depot.join("artifacts").join(m.tree.to_hex()).exists());
    assert_depot_clean(&depot);
}

/// A seekable download whose index says it unpacks to more than the install allows is
/// refused before its body is read: the install does not read on to hash the rest of it.
#[test]
fn a_seekable_download_too_large_by_its_index_is_refused_without_reading_its_body() {
    let (made, server, url, v) = served_incompressible(4, 1 << 20);
    let len = made.bytes.len() as u64;
    // The whole body would take 4 seconds.
    server.cap_rate(len / 4);
    let dir = tempfile::tempdir().unwrap();
    let depot = dir.path().join("depot");
    let mut config = Config {
        install_threads: Some(2),
        ..test_config(std::slice::from_ref(&depot))
    };
    config.max_unpacked_bytes = 1 << 20;
    let e = ensure_variant("data", &v, dir.path(), &config).expect_err("too large");
    let Error::DownloadFailed { failures, .. } = &e else {
        panic!("{e:?}")
    };
    assert!(
        failures
            .iter()
            .all(|f| matches!(f, SourceFailure::Archive { .. })),
        "{failures:?}"
    );
    assert!(e.to_string().contains(&url), "{e}");
    let sent = server.bytes_sent_for("large.tar.gz");
    assert!(sent < len / 2, "{sent} of {len} bytes sent");
    assert!(!depot.join("artifacts").join(made.tree.to_hex()).exists());
    assert_depot_clean(&depot);
}

/// Issue 49, item 2: the index of a seekable download is read first (a range request for the
/// file's last bytes), so its members are unpacked while the rest of the body arrives: files
/// of the artifact are in the install's private temp folder before the server has sent the
/// body's last byte (the body paced to about 4 seconds), and nothing is at the final path
/// until the install is verified whole.
#[test]
fn a_seekable_download_is_unpacked_while_the_rest_of_it_arrives() {
    let m = made(10);
    let len = m.bytes.len() as u64;
    let server = TestServer::start();
    server.serve("data.tar.gz", m.bytes.clone());
    server.cap_rate(len / 4);
    let url = server.url("data.tar.gz");
    let v = variant(m.tree, None, &url, &m.bytes, Some(m.index_sha256));
    let dir = tempfile::tempdir().unwrap();
    let depot = dir.path().join("depot");
    let config = Config {
        install_threads: Some(2),
        ..test_config(std::slice::from_ref(&depot))
    };
    let artifacts = depot.join("artifacts");
    let installed = artifacts.join(m.tree.to_hex());
    let (seen, got) = std::thread::scope(|s| {
        let install = s.spawn(|| ensure_variant("data", &v, dir.path(), &config));
        let mut seen = None;
        while !install.is_finished() && seen.is_none() {
            // `bin/run` is the first entry of the file: unpacked from its first bytes.
            let unpacked = temp_entries(&depot)
                .iter()
                .any(|t| artifacts.join(t).join("bin/run").is_file());
            if unpacked {
                // Read after the file was seen: the bytes sent by then are at most these.
                seen = Some((server.bytes_sent_for("data.tar.gz"), installed.exists()));
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        (seen, install.join().unwrap())
    });
    let got = got.unwrap_or_else(|e| panic!("{e}"));
    let (sent, visible) = seen.expect("no file was unpacked before the install ended");
    assert!(
        sent < len,
        "a file was unpacked only after {sent} bytes were sent (the body is {len})"
    );
    assert!(
        !visible,
        "the artifact was visible before its download ended"
    );
    assert_eq!(got.path, installed);
    assert_same_files(&installed, &m.content);
    assert_eq!(temp_entries(&depot), Vec::<String>::new(), "temp dirs left");
}

#[test]
fn an_entry_with_index_sha256_whose_file_has_no_index_installs_in_one_pass() {
    // A single-stream tarball of the same tree (tar's own writer, gzip): no footer.
    let m = made(9);
    let mut builder = tar::Builder::new(Vec::new());
    builder.follow_symlinks(false);
    builder.append_dir_all(".", &m.content).unwrap();
    let tar = builder.into_inner().unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &tar).unwrap();
    let classic = gz.finish().unwrap();
    let server = TestServer::start();
    server.serve("data.tar.gz", classic.clone());
    let url = server.url("data.tar.gz");
    let v = variant(m.tree, None, &url, &classic, Some(m.index_sha256));
    let (_d, depot, got) = install(&v, Some(2));
    let got = got.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got, depot.join("artifacts").join(m.tree.to_hex()));
    if have_git() {
        assert_eq!(git_tree_hash(&got), m.tree);
    }
    assert_eq!(temp_entries(&depot), Vec::<String>::new(), "temp dirs left");
}

/// A seekable install refused by the depot's free-space reserve says so as the one-pass
/// install does: the reserve, and the setting that put the depot there.
#[test]
fn a_seekable_install_without_room_names_the_reserve_and_the_depot_setting() {
    // 256 MiB of zeros (a sparse file) make a tarball of a few hundred KiB.
    let dir = tempfile::tempdir().unwrap();
    let content = dir.path().join("content");
    std::fs::create_dir(&content).unwrap();
    std::fs::File::create(content.join("zeros.bin"))
        .unwrap()
        .set_len(256 << 20)
        .unwrap();
    std::fs::write(content.join("small.txt"), "small").unwrap();
    let entries = collect_entries(&content).unwrap();
    let out = dir.path().join("data.tar");
    let tarball = write_seekable(&content, &entries, &out, Flavour::Gzip, 1 << 20, &|_| {})
        .unwrap_or_else(|e| panic!("{e}"));
    let bytes = std::fs::read(&out).unwrap();
    assert!(bytes.len() < 8 << 20, "{}", bytes.len());
    let server = TestServer::start();
    server.serve("data.tar.gz", bytes.clone());
    let url = server.url("data.tar.gz");
    let v = variant(tarball.tree_hash, None, &url, &bytes, tarball.index_sha256);
    let depot = dir.path().join("depot");
    // Room for the tarball and 64 MiB more, not for what it unpacks to.
    let (free, _) = clima_artifact_runtime::extract::free_space(dir.path()).unwrap();
    let reserve = free - bytes.len() as u64 - (64 << 20);
    let config = Config {
        install_threads: Some(2),
        min_free_space: Some(reserve),
        ..test_config(std::slice::from_ref(&depot))
    };
    let e = ensure_variant("data", &v, dir.path(), &config).expect_err("no room");
    let Error::DownloadFailed { failures, .. } = &e else {
        panic!("{e:?}")
    };
    assert!(
        matches!(failures[..], [SourceFailure::Install { .. }]),
        "{failures:?}"
    );
    let text = e.to_string();
    assert!(text.contains("stopped unpacking before"), "{text}");
    assert!(text.contains("CLIMA_ARTIFACTS_MIN_FREE_SPACE"), "{text}");
    assert!(text.contains("CLIMA_ARTIFACTS_DEPOT_PATH"), "{text}");
    assert!(
        !depot
            .join("artifacts")
            .join(tarball.tree_hash.to_hex())
            .exists()
    );
    assert_depot_clean(&depot);
}

/// The inode reserve holds for a seekable install as for the one-pass install: 3,000 files in
/// 300 folders onto a filesystem of 2,000 inodes are refused before anything is written,
/// naming the inodes and the depot setting, instead of failing once the inodes are gone.
#[test]
fn a_seekable_install_keeps_the_inode_reserve() {
    if !have_git() || !crate::disk::is_root() {
        clima_artifact_tests::skip("mounting a small tmpfs needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let content = dir.path().join("content");
    for i in 0..3000 {
        let sub = content.join(format!("d{:03}", i % 300));
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(sub.join(format!("f{i}")), format!("file {i}")).unwrap();
    }
    let entries = collect_entries(&content).unwrap();
    let out = dir.path().join("data.tar");
    let tarball = write_seekable(&content, &entries, &out, Flavour::Gzip, 1 << 20, &|_| {})
        .unwrap_or_else(|e| panic!("{e}"));
    let bytes = std::fs::read(&out).unwrap();
    let server = TestServer::start();
    server.serve("data.tar.gz", bytes.clone());
    let url = server.url("data.tar.gz");
    let v = variant(tarball.tree_hash, None, &url, &bytes, tarball.index_sha256);
    let depot = dir.path().join("inodes-depot");
    let Some(_mount) = crate::disk::Mount::tmpfs(&depot, "size=64m,nr_inodes=2000") else {
        return;
    };
    let config = Config {
        install_threads: Some(2),
        ..test_config(std::slice::from_ref(&depot))
    };
    let e = ensure_variant("data", &v, dir.path(), &config).expect_err("too few inodes");
    let text = e.to_string();
    assert!(text.contains("runs out of inodes"), "{text}");
    assert!(text.contains("CLIMA_ARTIFACTS_DEPOT_PATH"), "{text}");
    assert!(
        !depot
            .join("artifacts")
            .join(tarball.tree_hash.to_hex())
            .exists()
    );
    assert_depot_clean(&depot);
}

/// Set in the child process of the tests below, whose descriptors are limited.
const FEW_DESCRIPTORS: &str = "CLIMA_TEST_FEW_DESCRIPTORS";

/// In the test process: runs test `name` again in a child whose soft limit of descriptors is
/// `limit`, checks that it passed, and returns `false`. In that child: `true`.
pub(crate) fn with_few_descriptors(name: &str, limit: u32) -> bool {
    if std::env::var_os(FEW_DESCRIPTORS).is_some() {
        return true;
    }
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -n {limit} && exec \"$0\" \"$@\""))
        .arg(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(FEW_DESCRIPTORS, "1")
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("1 passed"), "{text}");
    false
}

/// Installs the seekable tarball of `content` with 4 workers: the installed folder.
fn install_tree(content: &Path) -> (tempfile::TempDir, PathBuf) {
    let entries = collect_entries(content).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("data.tar");
    let tarball = write_seekable(content, &entries, &out, Flavour::Gzip, 1 << 20, &|_| {})
        .unwrap_or_else(|e| panic!("{e}"));
    let bytes = std::fs::read(&out).unwrap();
    let server = TestServer::start();
    server.serve("data.tar.gz", bytes.clone());
    let url = server.url("data.tar.gz");
    let v = variant(tarball.tree_hash, None, &url, &bytes, tarball.index_sha256);
    let (d, _depot, result) = install(&v, Some(4));
    let path = result.unwrap_or_else(|e| panic!("{e}"));
    assert!(path.ends_with(tarball.tree_hash.to_hex()));
    (d, path)
}

/// Descriptors do not grow with the folders of a seekable tarball: 2,000 of them install
/// under a limit of 512 descriptors, as they do in one pass.
#[test]
fn a_seekable_tree_of_2000_folders_installs_with_512_descriptors() {
    let name = "seekable::a_seekable_tree_of_2000_folders_installs_with_512_descriptors";
    if !with_few_descriptors(name, 512) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for i in 0..2000 {
        let sub = dir.path().join(format!("d{i:04}"));
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(sub.join("f"), format!("file {i}")).unwrap();
    }
    let (_d, path) = install_tree(dir.path());
    assert_eq!(std::fs::read(path.join("d1999/f")).unwrap(), b"file 1999");
}

/// Nor with its files of several blocks: 150 of them install under a limit of 128.
#[test]
fn a_seekable_tree_of_150_files_of_blocks_installs_with_128_descriptors() {
    let name = "seekable::a_seekable_tree_of_150_files_of_blocks_installs_with_128_descriptors";
    if !with_few_descriptors(name, 128) {
        return;
    }
    // Sparse files of zeros, two blocks each: a small tarball.
    let dir = tempfile::tempdir().unwrap();
    for i in 0..150 {
        std::fs::File::create(dir.path().join(format!("z{i:03}")))
            .unwrap()
            .set_len((1 << 20) + 1)
            .unwrap();
    }
    let (_d, path) = install_tree(dir.path());
    assert_eq!(
        std::fs::metadata(path.join("z149")).unwrap().len(),
        (1 << 20) + 1
    );
}

/// A seekable tarball of incompressible files (`files` of `size` bytes), served at
/// `large.tar.gz`: the server, its URL and the manifest entry.
fn served_incompressible(files: usize, size: usize) -> (Made, TestServer, String, ArtifactVariant) {
    let dir = tempfile::tempdir().unwrap();
    let content = dir.path().join("content");
    std::fs::create_dir(&content).unwrap();
    for i in 0..files {
        std::fs::write(
            content.join(format!("f{i}.bin")),
            random(i as u64 + 7, size),
        )
        .unwrap();
    }
    let entries = collect_entries(&content).unwrap();
    let out = dir.path().join("data.tar");
    let tarball = write_seekable(&content, &entries, &out, Flavour::Gzip, 1 << 20, &|_| {})
        .unwrap_or_else(|e| panic!("{e}"));
    let made = Made {
        bytes: std::fs::read(&out).unwrap(),
        content,
        tree: tarball.tree_hash,
        index_sha256: tarball.index_sha256.expect("an index"),
        _dir: dir,
    };
    let server = TestServer::start();
    server.serve("large.tar.gz", made.bytes.clone());
    let url = server.url("large.tar.gz");
    let v = variant(made.tree, None, &url, &made.bytes, Some(made.index_sha256));
    (made, server, url, v)
}

/// `installed` holds the files of `content`, byte for byte (modes aside: installed files are
/// read-only).
fn assert_same_files(installed: &Path, content: &Path) {
    let (got, want) = (listing(installed), listing(content));
    let names = |l: &BTreeMap<PathBuf, (Vec<u8>, u32)>| l.keys().cloned().collect::<Vec<_>>();
    assert_eq!(names(&got), names(&want));
    for (path, (bytes, _)) in &want {
        assert!(got[path].0 == *bytes, "{} differs", path.display());
    }
}

/// A configuration where downloads of 1 MiB and more are large (kept in a partial file).
fn large_config(depot: &Path) -> Config {
    let mut config = Config {
        install_threads: Some(2),
        ..test_config(std::slice::from_ref(&depot.to_path_buf()))
    };
    config.net.parallel_min_size = 1 << 20;
    config.net.connections = 3;
    config
}

/// Issue 49, item 2: a large seekable download is kept in its partial file, and the parallel
/// install reads it again from there, not from a second copy in the staging's temp folder.
/// Shown by disk use: on a filesystem with room for the tarball and the unpacked files once
/// (24 MiB of incompressible files, a 56 MiB tmpfs), the install succeeds; with a second copy
/// (72 MiB) it could not. The partial file is gone afterwards, nothing else is left.
#[test]
fn a_large_seekable_download_is_read_from_its_partial_file_without_a_second_copy() {
    if !crate::disk::is_root() {
        clima_artifact_tests::skip("mounting a small tmpfs needs root");
        return;
    }
    let (made, _server, _url, v) = served_incompressible(6, 4 << 20);
    assert!(made.bytes.len() > 24 << 20, "{}", made.bytes.len());
    let dir = tempfile::tempdir().unwrap();
    let depot = dir.path().join("small-depot");
    let Some(_mount) = crate::disk::Mount::tmpfs(&depot, "size=56m,mode=0755") else {
        return;
    };
    let config = Config {
        min_free_space: Some(1 << 20),
        ..large_config(&depot)
    };
    let installed = ensure_variant("data", &v, dir.path(), &config)
        .unwrap_or_else(|e| panic!("{e}"))
        .path;
    assert_same_files(&installed, &made.content);
    assert_eq!(temp_entries(&depot), Vec::<String>::new(), "temp dirs left");
    assert!(
        clima_artifact_tests::partial_entries(&depot).is_empty(),
        "{:?}",
        clima_artifact_tests::partial_entries(&depot)
    );
}

/// A large seekable download that broke is continued by the next attempt from its partial
/// file (as any process sharing the depot would: the file is found by its name), and the
/// bytes kept are reused, not fetched again, by the parallel install that reads them there.
#[test]
fn a_broken_large_seekable_download_is_continued_and_unpacked_from_its_partial_file() {
    let (made, server, _url, v) = served_incompressible(4, 2 << 20);
    let len = made.bytes.len();
    let dir = tempfile::tempdir().unwrap();
    let depot = dir.path().join("depot");
    let mut config = large_config(&depot);
    config.net.retry.attempts = 1;
    // The first request reads the index (the file's last bytes); the download's first
    // response breaks half-way, every request after it fails.
    server.fail_next(
        "large.tar.gz",
        [Fault::Pass, Fault::Short { after: len / 2 }],
    );
    server.always("large.tar.gz", Fault::Status(500));
    let e = ensure_variant("data", &v, dir.path(), &config).expect_err("the server fails");
    assert!(e.to_string().contains("HTTP 500"), "{e}");
    let kept = clima_artifact_tests::partial_entries(&depot);
    assert_eq!(kept.len(), 1, "the received bytes are kept: {kept:?}");
    server.wait_until_idle("large.tar.gz");
    let sent_before = server.bytes_sent_for("large.tar.gz");
    server.always("large.tar.gz", Fault::Pass);
    let got = ensure_variant("data", &v, dir.path(), &config).unwrap_or_else(|e| panic!("{e}"));
    let Origin::Downloaded {
        reused_bytes: Some(reused),
        ..
    } = got.origin
    else {
        panic!("{:?}", got.origin)
    };
    assert!(reused >= len as u64 / 2, "{reused} of {len} reused");
    let again = server.bytes_sent_for("large.tar.gz") - sent_before;
    assert!(again <= len as u64 - reused, "{again} sent again");
    assert_same_files(&got.path, &made.content);
    assert_eq!(temp_entries(&depot), Vec::<String>::new(), "temp dirs left");
    assert!(clima_artifact_tests::partial_entries(&depot).is_empty());
}

/// Issue 49, item 4's look-up: after a seekable install, every file of the artifact is found
/// in the depot by the blob id and size its index gives (what a ranged install of a next
/// version asks), with the bytes of that file; a file changed in the depot afterwards is not.
#[test]
fn the_files_of_an_installed_artifact_are_found_by_their_blob_ids() {
    use clima_artifact_runtime::depot::{BlobLimits, Blobs};
    use clima_artifact_runtime::tree_hash::EntryMode;
    use std::io::Read;
    let m = made(8);
    let server = TestServer::start();
    server.serve("data.tar.gz", m.bytes.clone());
    let url = server.url("data.tar.gz");
    let v = variant(m.tree, None, &url, &m.bytes, Some(m.index_sha256));
    let dir = tempfile::tempdir().unwrap();
    let depot = dir.path().join("depot");
    let config = Config {
        install_threads: Some(2),
        ..test_config(std::slice::from_ref(&depot))
    };
    let installed = ensure_variant("data", &v, dir.path(), &config)
        .unwrap_or_else(|e| panic!("{e}"))
        .path;
    let mut c = std::io::Cursor::new(&m.bytes);
    let (_, doc) = seekable::read_index(&mut c, m.bytes.len() as u64, &Default::default())
        .unwrap()
        .unwrap();
    let index = seekable::Index::decode(&doc, &Default::default()).unwrap();
    let mut blobs = Blobs::scan(&config.search_depots(), BlobLimits::default());
    assert!(blobs.complete());
    let mut files = 0;
    for e in index
        .entries
        .iter()
        .filter(|e| e.mode != EntryMode::Symlink)
    {
        let path = String::from_utf8(e.path.clone()).unwrap();
        let mut found = blobs
            .find(&e.blob.sha1, e.size)
            .unwrap_or_else(|| panic!("`{path}` not found by its blob id"));
        let mut bytes = Vec::new();
        found.file.read_to_end(&mut bytes).unwrap();
        assert!(
            bytes == std::fs::read(m.content.join(&path)).unwrap(),
            "`{path}`: other bytes"
        );
        files += 1;
    }
    assert!(files > 100, "{files}");
    // The large file rewritten in place (its owner made it writable): no longer found.
    let large = installed.join("large.bin");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&large, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(&large, random(3, LARGE)).unwrap();
    let e = index
        .entries
        .iter()
        .find(|e| e.path == b"large.bin")
        .unwrap();
    assert!(blobs.find(&e.blob.sha1, e.size).is_none());
}

/// The same look-up finds a file fetched alone (`ensure_files`, into the depot's partial
/// folder), which a later install of the whole artifact or of a next version can copy.
#[test]
fn a_file_fetched_alone_is_found_by_its_blob_id() {
    use clima_artifact_runtime::depot::{BlobLimits, Blobs};
    use std::io::Read;
    let m = made(9);
    let server = TestServer::start();
    server.serve("data.tar.gz", m.bytes.clone());
    let url = server.url("data.tar.gz");
    let v = variant(m.tree, None, &url, &m.bytes, Some(m.index_sha256));
    let dir = tempfile::tempdir().unwrap();
    let depot = dir.path().join("depot");
    let config = test_config(std::slice::from_ref(&depot));
    let path = "d4/e1/f25.txt";
    let files = clima_artifact_runtime::ensure_files("data", &v, dir.path(), &config, &[path])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(files.fetched, 1);
    let content = std::fs::read(m.content.join(path)).unwrap();
    let mut blob = format!("blob {}\0", content.len()).into_bytes();
    blob.extend_from_slice(&content);
    let id: [u8; 20] = <sha1::Sha1 as sha1::Digest>::digest(&blob).into();
    let mut blobs = Blobs::scan(&config.search_depots(), BlobLimits::default());
    let mut found = blobs
        .find(&id, content.len() as u64)
        .expect("the fetched file is found");
    assert_eq!(found.path, files.paths[0]);
    let mut bytes = Vec::new();
    found.file.read_to_end(&mut bytes).unwrap();
    assert!(bytes == content);
}
