//! The parallel unpacking against the one-pass extraction of the same file, on 1 to 8
//! workers and budgets from one member at a time up; a member that lies or a worker that
//! panics ends it with an error, never a hang.

use std::io::Write;
use std::path::Path;

use super::format::{Block, HeaderKind, Index, IndexEntry, MemberEncoder, tar_header, write_tail};
use super::parallel::{DEFAULT_BUDGET, Parallelism, extract_with};
use super::{Authenticated, Expected, IndexLimits, authenticate, read_index};
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
    seekable_lying(tree, None)
}

/// [`seekable_of`], with the members of file `lie.0` holding `lie.1` (of the same length)
/// where the index says the tree's content.
fn seekable_lying(
    tree: &[(String, Vec<u8>, Option<bool>)],
    lie: Option<(&str, &[u8])>,
) -> (Vec<u8>, Vec<u8>, Expected) {
    let mut enc = MemberEncoder::new(super::Flavour::Gzip).unwrap();
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
        let written = match lie {
            Some((p, other)) if p == path => other,
            _ => content.as_slice(),
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
    panic_on: Option<usize>,
) -> (std::path::PathBuf, Result<crate::Extracted, ExtractError>) {
    let auth = authenticated(file, expected);
    let tarball = on_disk(dir, file);
    let dest = dir.join(name);
    std::fs::create_dir(&dest).unwrap();
    let d = Dir::open(&dest).unwrap();
    let got = extract_with(&auth, &tarball, &d, &limits(), &how, panic_on);
    (dest, got)
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
        let (file, _, lied) = seekable_lying(&t, Some((path, &other)));
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
        let (_, got) = unpack(dir.path(), &format!("p{i}"), &file, &expected, how, Some(5));
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
