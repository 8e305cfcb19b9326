//! The parallel unpacking against the one-pass extraction of the same file, on 1 to 8
//! workers and budgets from one member at a time up; a member that lies or a worker that
//! panics ends it with an error, never a hang.

use std::io::Write;
use std::path::Path;

use crate::seekable::format::{
    Block, HeaderKind, Index, IndexEntry, MemberEncoder, tar_header, write_tail,
};
use crate::seekable::parallel::{
    DEFAULT_BUDGET, Hook, Parallelism, extract_stream_with, extract_with,
};
use crate::seekable::{Authenticated, Expected, IndexLimits, authenticate, read_index};
use crate::tree_hash::{EntryMode, Formats, TreeBuilder, blob_ids};
use crate::{ExtractError, ExtractLimits, extract_archive};
use clima_artifact_fs::Dir;
use sha2::Digest;

const BLOCK: u64 = 1 << 20;

/// Content that compresses, but not to nothing.
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

/// Files (path, content, executable) and symlinks (path, target) of a test tree, sorted.
fn tree(seed: u32) -> Vec<(String, Vec<u8>, Option<bool>)> {
    let mut t: Vec<(String, Vec<u8>, Option<bool>)> = (0..40u32)
        .map(|i| {
            let path = format!("d{}/f{i:02}", i % 4);
            (
                path,
                bytes(seed + i, 37 + 3001 * i as usize),
                Some(i % 5 == 0),
            )
        })
        .collect();
    t.push(("big".into(), bytes(seed, (3 << 20) + 77), Some(false)));
    t.push(("d1/link".into(), b"../big".to_vec(), None));
    t.push(("empty".into(), Vec::new(), Some(false)));
    t.sort_by(|a, b| a.0.cmp(&b.0));
    t
}

/// A seekable `.tar.gz` of `tree` (blocks of 1 MiB), its index document and tree hash.
fn seekable_of(tree: &[(String, Vec<u8>, Option<bool>)]) -> (Vec<u8>, Vec<u8>, Expected) {
    seekable_lying(tree, &[])
}

/// [`seekable_of`], with the members of each file `lie.0` of `lies` holding `lie.1` (of the
/// same length) where the index says the tree's content.
fn seekable_lying(
    tree: &[(String, Vec<u8>, Option<bool>)],
    lies: &[(&str, &[u8])],
) -> (Vec<u8>, Vec<u8>, Expected) {
    let mut enc = MemberEncoder::new(crate::seekable::Flavour::Gzip).unwrap();
    let (mut file, mut tar, mut entries) = (Vec::new(), 0u64, Vec::new());
    let mut hashes = TreeBuilder::with_formats(Formats::Sha1AndSha256);
    for (path, content, kind) in tree {
        let (mode, header) = match kind {
            Some(executable) => (
                if *executable {
                    EntryMode::Executable
                } else {
                    EntryMode::File
                },
                tar_header(
                    path.as_bytes(),
                    HeaderKind::File {
                        size: content.len() as u64,
                        executable: *executable,
                    },
                ),
            ),
            None => (
                EntryMode::Symlink,
                tar_header(path.as_bytes(), HeaderKind::Symlink(content)),
            ),
        };
        let blob = blob_ids(content, Formats::Sha1AndSha256);
        hashes.insert_bytes(path.as_bytes(), mode, blob);
        let written = match lies.iter().find(|(p, _)| p == path) {
            Some((_, other)) => other,
            None => content.as_slice(),
        };
        let offset = file.len() as u64;
        let padding = vec![0; (512 - content.len() % 512) % 512];
        let mut blocks = Vec::new();
        if kind.is_some() && content.len() as u64 > BLOCK {
            let chunks: Vec<&[u8]> = content.chunks(BLOCK as usize).collect();
            let lies: Vec<&[u8]> = written.chunks(BLOCK as usize).collect();
            for (k, chunk) in chunks.iter().enumerate() {
                let mut plain = if k == 0 { header.clone() } else { Vec::new() };
                plain.extend_from_slice(lies[k]);
                if k + 1 == chunks.len() {
                    plain.extend_from_slice(&padding);
                }
                let member = enc.encode(&plain).unwrap();
                blocks.push(Block {
                    offset: file.len() as u64,
                    length: member.len() as u64,
                    sha256: sha2::Sha256::digest(chunk).into(),
                });
                file.extend_from_slice(&member);
            }
        } else {
            let mut plain = header.clone();
            if kind.is_some() {
                plain.extend_from_slice(written);
                plain.extend_from_slice(&padding);
            }
            file.extend_from_slice(&enc.encode(&plain).unwrap());
        }
        let e = IndexEntry {
            path: path.as_bytes().to_vec(),
            mode,
            size: content.len() as u64,
            blob,
            tar_offset: tar,
            header_len: header.len() as u32,
            offset,
            length: file.len() as u64 - offset,
            blocks,
        };
        tar += e.tar_len();
        entries.push(e);
    }
    let index = Index {
        block_size: BLOCK,
        tar_size: tar,
        data_size: file.len() as u64,
        entries,
    };
    let doc = index.encode();
    let data_size = file.len() as u64;
    write_tail(&mut file, &mut enc, data_size, &doc).unwrap();
    let t = hashes.finish_hashes();
    let expected = Expected {
        tree_sha1: t.sha1,
        tree_sha256: t.sha256,
        index_sha256: Some(clima_artifact_manifest::Sha256(
            sha2::Sha256::digest(&doc).into(),
        )),
    };
    (file, doc, expected)
}

fn authenticated(file: &[u8], expected: &Expected) -> Authenticated {
    let len = file.len() as u64;
    let (locator, doc) = read_index(
        &mut std::io::Cursor::new(file),
        len,
        &IndexLimits::default(),
    )
    .unwrap()
    .unwrap();
    authenticate(&doc, &locator, expected, &IndexLimits::default()).unwrap()
}

fn limits() -> ExtractLimits {
    ExtractLimits {
        tree_hash_sha256: true,
        ..ExtractLimits::default()
    }
}

/// The tarball as a file of `dir`.
fn on_disk(dir: &Path, file: &[u8]) -> std::fs::File {
    let path = dir.join("t.tar.gz");
    std::fs::File::create(&path)
        .unwrap()
        .write_all(file)
        .unwrap();
    std::fs::File::open(&path).unwrap()
}

/// Runs the parallel unpacking of `file` into a fresh folder of `dir`.
fn unpack(
    dir: &Path,
    name: &str,
    file: &[u8],
    expected: &Expected,
    how: Parallelism,
    hook: Option<Hook>,
) -> (std::path::PathBuf, Result<crate::Extracted, ExtractError>) {
    let auth = authenticated(file, expected);
    let tarball = on_disk(dir, file);
    let dest = dir.join(name);
    std::fs::create_dir(&dest).unwrap();
    let d = Dir::open(&dest).unwrap();
    let at = dir.join("t.tar.gz");
    let got = extract_with(&auth, (&tarball, &at), &d, &limits(), &how, hook);
    (dest, got)
}

/// Runs the parallel unpacking of `file` read as a stream (in reads of at most 10,000 bytes,
/// cut after `cut` bytes) into a fresh folder of `dir`; also the bytes left in the stream.
fn unpack_stream(
    dir: &Path,
    name: &str,
    (file, cut): (&[u8], usize),
    expected: &Expected,
    how: Parallelism,
    hook: Option<Hook>,
) -> (Result<crate::Extracted, ExtractError>, usize) {
    let auth = authenticated(file, expected);
    let dest = dir.join(name);
    std::fs::create_dir(&dest).unwrap();
    let d = Dir::open(&dest).unwrap();
    let mut stream = std::io::BufReader::with_capacity(10_000, &file[..cut.min(file.len())]);
    let got = extract_stream_with(&auth, &mut stream, &d, (&limits(), &how), hook);
    let mut rest = Vec::new();
    std::io::Read::read_to_end(&mut stream, &mut rest).unwrap();
    (got, rest.len())
}

/// Issue 49, item 2: the members taken from the tarball as it arrives give the tree of the
/// file read at its offsets, on any number of workers and budget, and the stream is left at
/// the end of the members (the end-of-archive member, the index and the footer unread).
#[test]
fn a_tarball_read_as_it_arrives_unpacks_to_the_same_tree_and_leaves_its_tail() {
    let t = tree(6);
    let (file, _, expected) = seekable_of(&t);
    let data_size = authenticated(&file, &expected).index().data_size as usize;
    let dir = tempfile::tempdir().unwrap();
    let want = {
        let how = Parallelism::with_threads(Some(1));
        let (dest, got) = unpack(dir.path(), "file", &file, &expected, how, None);
        got.unwrap();
        crate::tree_hash::tree_hashes(&dest, Formats::Sha1AndSha256).unwrap()
    };
    for threads in [1, 2, 8] {
        for budget in [1, 3 << 20, DEFAULT_BUDGET] {
            let name = format!("s{threads}-{budget}");
            let how = Parallelism { threads, budget };
            let cut = (&file[..], file.len());
            let (got, rest) = unpack_stream(dir.path(), &name, cut, &expected, how, None);
            let got = got.unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(got.tree_hash, expected.tree_sha1, "{name}");
            assert_eq!(got.tree_hash_sha256, expected.tree_sha256, "{name}");
            assert_eq!(rest, file.len() - data_size, "{name}");
            let dest = dir.path().join(&name);
            let on_disk = crate::tree_hash::tree_hashes(&dest, Formats::Sha1AndSha256).unwrap();
            assert_eq!(on_disk, want, "{name}");
        }
    }
}

/// A stream that ends inside the members, a member that lies, a worker that panics: each
/// ends the unpacking of a stream with its error, never a hang of the workers waiting for
/// their turn to read.
#[test]
fn a_stream_cut_short_a_lie_or_a_panic_ends_the_unpacking_with_an_error() {
    let t = tree(7);
    let (file, _, expected) = seekable_of(&t);
    let dir = tempfile::tempdir().unwrap();
    let auth = authenticated(&file, &expected);
    // Cut in the middle of the member of an entry, which is named.
    let cut_in = auth
        .index()
        .entries
        .iter()
        .find(|e| e.length > 100 && e.offset > 1000)
        .unwrap();
    let cut = (cut_in.offset + cut_in.length / 2) as usize;
    let path = String::from_utf8(cut_in.path.clone()).unwrap();
    for threads in [1, 4] {
        let how = Parallelism {
            threads,
            budget: DEFAULT_BUDGET,
        };
        let name = format!("cut{threads}");
        let (got, _) = unpack_stream(dir.path(), &name, (&file, cut), &expected, how, None);
        let e = got.expect_err("a stream cut short").to_string();
        assert!(e.contains("the download stopped"), "{e}");
        assert!(e.contains(&format!("`{path}`")), "{e}");
        let name = format!("panic{threads}");
        let panic = Some(Hook::Panic(5));
        let all = (&file[..], file.len());
        let (got, _) = unpack_stream(dir.path(), &name, all, &expected, how, panic);
        let e = got.expect_err("a worker panicked").to_string();
        assert!(e.contains("failed unexpectedly"), "{e}");
    }
    let real = &t.iter().find(|e| e.0 == "big").unwrap().1;
    let mut other = real.clone();
    *other.last_mut().unwrap() ^= 1;
    let (file, _, lied) = seekable_lying(&t, &[("big", &other)]);
    let how = Parallelism::with_threads(Some(3));
    let all = (&file[..], file.len());
    let (got, _) = unpack_stream(dir.path(), "lie", all, &lied, how, None);
    let e = got.expect_err("a lie").to_string();
    assert!(
        e.contains("`big`") && e.contains("does not have the index's"),
        "{e}"
    );
}

#[test]
fn every_number_of_workers_and_budget_writes_the_one_pass_tree() {
    let t = tree(1);
    let (file, _, expected) = seekable_of(&t);
    let dir = tempfile::tempdir().unwrap();
    let classic = dir.path().join("classic");
    std::fs::create_dir(&classic).unwrap();
    let one = extract_archive(file.as_slice(), &classic, &limits()).unwrap();
    assert_eq!(one.tree_hash, expected.tree_sha1);
    assert_eq!(one.tree_hash_sha256, expected.tree_sha256);
    let want = crate::tree_hash::tree_hashes(&classic, Formats::Sha1AndSha256).unwrap();
    for threads in [1, 2, 8] {
        for budget in [1, 3 << 20, DEFAULT_BUDGET] {
            let name = format!("p{threads}-{budget}");
            let how = Parallelism { threads, budget };
            let (dest, got) = unpack(dir.path(), &name, &file, &expected, how, None);
            let got = got.unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(got.tree_hash, expected.tree_sha1, "{name}");
            assert_eq!(got.tree_hash_sha256, expected.tree_sha256, "{name}");
            assert_eq!(got.entries, t.len() as u64);
            // What is on disk, hashed again, is the tree.
            let on_disk = crate::tree_hash::tree_hashes(&dest, Formats::Sha1AndSha256).unwrap();
            assert_eq!(on_disk, want, "{name}");
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &str| {
                std::fs::metadata(dest.join(p))
                    .unwrap()
                    .permissions()
                    .mode()
            };
            assert_eq!(mode("d0/f00") & 0o777, 0o555, "{name}");
            assert_eq!(mode("big") & 0o777, 0o444, "{name}");
            assert_eq!(mode("d0") & 0o777, 0o755, "{name}");
        }
    }
}

#[test]
fn a_member_that_lies_ends_the_unpacking_with_an_error_naming_it() {
    let t = tree(2);
    let (_, _, expected) = seekable_of(&t);
    let dir = tempfile::tempdir().unwrap();
    for (path, threads, budget) in [("d2/f06", 8, 1), ("big", 2, 1), ("d3/f39", 3, 1 << 20)] {
        let real = &t.iter().find(|e| e.0 == path).unwrap().1;
        // Only the last byte differs (for the big file, in its last block).
        let mut other = real.clone();
        *other.last_mut().unwrap() ^= 1;
        let (file, _, lied) = seekable_lying(&t, &[(path, &other)]);
        // The index describes the tree (its offsets are the lying file's).
        assert_eq!(
            (lied.tree_sha1, lied.tree_sha256),
            (expected.tree_sha1, expected.tree_sha256)
        );
        let how = Parallelism { threads, budget };
        let name = format!("{}-{threads}", path.replace('/', "_"));
        let (_, got) = unpack(dir.path(), &name, &file, &lied, how, None);
        let e = got.expect_err(path).to_string();
        assert!(e.contains(path), "{e}");
        assert!(e.contains("does not have the index's"), "{e}");
    }
}

#[test]
fn a_worker_that_panics_ends_the_unpacking_with_an_error_not_a_hang() {
    let t = tree(3);
    let (file, _, expected) = seekable_of(&t);
    let dir = tempfile::tempdir().unwrap();
    for (i, (threads, budget)) in [(1, 1), (4, 1), (8, DEFAULT_BUDGET)]
        .into_iter()
        .enumerate()
    {
        let how = Parallelism { threads, budget };
        let (_, got) = unpack(
            dir.path(),
            &format!("p{i}"),
            &file,
            &expected,
            how,
            Some(Hook::Panic(5)),
        );
        let e = got.expect_err("a worker panicked").to_string();
        assert!(e.contains("failed unexpectedly"), "{e}");
    }
}

#[test]
fn a_symlink_out_of_the_artifact_is_refused() {
    let mut t = tree(4);
    t.push(("zz".into(), b"../../etc/passwd".to_vec(), None));
    let (file, _, expected) = seekable_of(&t);
    let dir = tempfile::tempdir().unwrap();
    let how = Parallelism {
        threads: 2,
        budget: DEFAULT_BUDGET,
    };
    let (dest, got) = unpack(dir.path(), "x", &file, &expected, how, None);
    let e = got.expect_err("a link out of the artifact").to_string();
    assert!(e.contains("points outside the artifact"), "{e}");
    assert!(std::fs::symlink_metadata(dest.join("zz")).is_err());
}

#[test]
fn of_two_members_that_lie_the_earlier_is_reported_on_any_number_of_workers() {
    let t = tree(5);
    let dir = tempfile::tempdir().unwrap();
    // The big file (first in the file) lies in its first block (1 MiB), a small file after it
    // too: the small one is checked sooner (the big one's worker made to wait), and yet the
    // big one is the error.
    let lie = |path: &str, at: usize| {
        let mut other = t.iter().find(|e| e.0 == path).unwrap().1.clone();
        other[at] ^= 1;
        other
    };
    let (big, small) = (lie("big", 1000), lie("d0/f00", 30));
    let (file, _, lied) = seekable_lying(&t, &[("big", &big), ("d0/f00", &small)]);
    let mut seen = Vec::new();
    for round in 0..4 {
        for threads in [1, 8] {
            let how = Parallelism {
                threads,
                budget: DEFAULT_BUDGET,
            };
            let name = format!("r{round}-{threads}");
            // Entry 0 is the big file.
            let slow = Some(Hook::Slow(0));
            let (_, got) = unpack(dir.path(), &name, &file, &lied, how, slow);
            seen.push(got.expect_err(&name).to_string());
        }
    }
    assert!(seen[0].contains("`big`"), "{}", seen[0]);
    assert!(seen[0].contains("block 0"), "{}", seen[0]);
    for e in &seen {
        assert_eq!(e, &seen[0]);
    }
}

/// Set in the child process of the test below, whose descriptors are limited.
const FEW_DESCRIPTORS: &str = "CLIMA_TEST_FEW_DESCRIPTORS";

#[test]
fn a_tree_of_2000_folders_unpacks_with_512_descriptors() {
    let name = "seekable::tests::parallel::a_tree_of_2000_folders_unpacks_with_512_descriptors";
    if std::env::var_os(FEW_DESCRIPTORS).is_none() {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg("ulimit -n 512 && exec \"$0\" \"$@\"")
            .arg(std::env::current_exe().unwrap())
            .args([name, "--exact", "--nocapture", "--test-threads=1"])
            .env(FEW_DESCRIPTORS, "1")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{text}");
        assert!(text.contains("1 passed"), "{text}");
        return;
    }
    // 2,000 folders of one file each, and files of several blocks among them.
    let mut t: Vec<(String, Vec<u8>, Option<bool>)> = (0..2000u32)
        .map(|i| (format!("d{i:04}/f"), bytes(i, 100), Some(false)))
        .collect();
    for i in 0..6u32 {
        t.push((format!("d{i:04}/g"), bytes(i, (2 << 20) + 9), Some(false)));
    }
    t.sort_by(|a, b| a.0.cmp(&b.0));
    let (file, _, expected) = seekable_of(&t);
    let dir = tempfile::tempdir().unwrap();
    for threads in [1, 4] {
        let how = Parallelism {
            threads,
            budget: DEFAULT_BUDGET,
        };
        let (dest, got) = unpack(
            dir.path(),
            &format!("p{threads}"),
            &file,
            &expected,
            how,
            None,
        );
        let got = got.unwrap_or_else(|e| panic!("{threads}: {e}"));
        assert_eq!(got.tree_hash, expected.tree_sha1);
        assert_eq!(
            std::fs::read(dest.join("d1999/f")).unwrap(),
            bytes(1999, 100)
        );
    }
}
