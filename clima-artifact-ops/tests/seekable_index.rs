//! Hostile indexes of seekable tarballs (docs/seekable.md, "Authentication"): a tarball written
//! by `write_seekable`, then its index made to lie about offsets, sizes, modes, paths, blob ids,
//! blocks and members, a decompression bomb put in one member, and a locator that claims an
//! index larger than the file. Each lie is refused with its own error, before anything the
//! index says is used (`authenticate`) or when the member it lies about is read
//! (`verify_file`); none panics.

use std::fs;
use std::io::Cursor;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use clima_artifact_manifest::{GitTreeSha1, GitTreeSha256, Sha256};
use clima_artifact_ops::tarball::{collect_entries, write_seekable};
use clima_artifact_runtime::extract::seekable::{
    self, Authenticated, Expected, Flavour, Index, IndexError, IndexLimits, Locator,
    MIN_BLOCK_SIZE, MemberEncoder,
};
use clima_artifact_runtime::tree_hash::{EntryMode, Formats, tree_hashes};
use sha2::Digest;

/// A seekable tarball and what is known of it.
struct Fixture {
    _dir: tempfile::TempDir,
    flavour: Flavour,
    file: Vec<u8>,
    tree: GitTreeSha1,
    tree_sha256: GitTreeSha256,
    doc: Vec<u8>,
    index: Index,
}

/// Small files, an executable, a symlink, 100 KB of noise and a file of three 1 MiB blocks.
fn fixture(flavour: Flavour) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("content");
    fs::create_dir_all(root.join("sub")).unwrap();
    fs::write(root.join("a.txt"), "abc").unwrap();
    fs::write(root.join("sub/b.txt"), "bbb\n").unwrap();
    fs::write(root.join("run.sh"), "#!/bin/sh\n").unwrap();
    fs::set_permissions(root.join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("a.txt", root.join("link")).unwrap();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let noise: Vec<u8> = (0..100_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 32) as u8
        })
        .collect();
    fs::write(root.join("noise.bin"), &noise).unwrap();
    let big: Vec<u8> = (0..(2 * MIN_BLOCK_SIZE + 5000) as u32)
        .map(|i| (i % 251) as u8)
        .collect();
    fs::write(root.join("sub/big.bin"), big).unwrap();
    let out = dir.path().join("t.tar");
    let entries = collect_entries(&root).unwrap();
    let made = write_seekable(&root, &entries, &out, flavour, MIN_BLOCK_SIZE, &|_| {}).unwrap();
    let hashes = tree_hashes(&root, Formats::Sha1AndSha256).unwrap();
    assert_eq!(made.tree_hash, hashes.sha1);
    let file = fs::read(&out).unwrap();
    let (_, doc) = read(&file).unwrap().unwrap();
    let index = Index::decode(&doc, &IndexLimits::default()).unwrap();
    assert_eq!(made.index_sha256, Some(sha256(&doc)));
    Fixture {
        _dir: dir,
        flavour,
        file,
        tree: hashes.sha1,
        tree_sha256: hashes.sha256.unwrap(),
        doc,
        index,
    }
}

fn sha256(bytes: &[u8]) -> Sha256 {
    Sha256(sha2::Sha256::digest(bytes).into())
}

fn read(file: &[u8]) -> Result<Option<(Locator, Vec<u8>)>, IndexError> {
    seekable::read_index(
        &mut Cursor::new(file),
        file.len() as u64,
        &IndexLimits::default(),
    )
}

impl Fixture {
    /// What the manifest says of the original tarball.
    fn expected(&self) -> Expected {
        Expected {
            tree_sha1: self.tree,
            tree_sha256: Some(self.tree_sha256),
            index_sha256: Some(sha256(&self.doc)),
        }
    }

    /// The index of `file` authenticated against `expected`.
    fn authenticate(file: &[u8], expected: &Expected) -> Result<Authenticated, IndexError> {
        let (locator, doc) = read(file)?.expect("a seekable tarball");
        seekable::authenticate(&doc, &locator, expected, &IndexLimits::default())
    }

    /// [`Fixture::authenticate`], then every member read against it.
    fn verify(file: &[u8], expected: &Expected) -> Result<(), IndexError> {
        Fixture::authenticate(file, expected)?.verify_file(&mut Cursor::new(file))
    }

    /// The tarball with `data` as its entries' members and `index` as its index; and what a
    /// manifest made from that index would say (same trees, the new index's hash).
    fn rebuilt(&self, data: &[u8], index: &Index) -> (Vec<u8>, Expected) {
        let mut file = data.to_vec();
        let doc = index.encode();
        let mut encoder = MemberEncoder::new(self.flavour).unwrap();
        seekable::write_tail(&mut file, &mut encoder, data.len() as u64, &doc).unwrap();
        let expected = Expected {
            index_sha256: Some(sha256(&doc)),
            ..self.expected()
        };
        (file, expected)
    }

    /// The tarball with its own members and `index`.
    fn with_index(&self, index: &Index) -> (Vec<u8>, Expected) {
        self.rebuilt(&self.file[..self.index.data_size as usize], index)
    }

    /// The position of the entry at `path`.
    fn at(&self, path: &str) -> usize {
        self.index
            .entries
            .iter()
            .position(|e| e.path == path.as_bytes())
            .unwrap()
    }
}

/// Whether an error is of the variant a test expects.
type Kind = fn(&IndexError) -> bool;

/// `result` is an error of the variant `matches` whose message contains `needle`.
#[track_caller]
fn assert_refused<T: std::fmt::Debug>(result: Result<T, IndexError>, matches: Kind, needle: &str) {
    let err = result.expect_err("the lie was accepted");
    assert!(matches(&err), "wrong error: {err:?}");
    assert!(err.to_string().contains(needle), "`{err}` lacks `{needle}`");
}

#[test]
fn an_honest_index_authenticates_and_its_members_verify() {
    for flavour in [Flavour::Gzip, Flavour::Zstd] {
        let f = fixture(flavour);
        let (file, expected) = f.with_index(&f.index);
        assert_eq!(
            file, f.file,
            "{flavour:?}: the same index gives the same bytes"
        );
        Fixture::verify(&file, &expected).unwrap();
        assert_eq!(f.index.entries[f.at("sub/big.bin")].blocks.len(), 3);
        assert!(
            f.index.entries.iter().all(|e| e.path != b"sub"),
            "no folder entries"
        );
    }
}

#[test]
fn offsets_that_leave_a_gap_or_overlap_are_refused() {
    let f = fixture(Flavour::Gzip);
    for delta in [1i64, -1] {
        let mut index = f.index.clone();
        let e = &mut index.entries[1];
        e.offset = e.offset.checked_add_signed(delta).unwrap();
        let (file, expected) = f.with_index(&index);
        assert_refused(
            Fixture::authenticate(&file, &expected),
            |e| matches!(e, IndexError::Layout { .. }),
            "a gap or an overlap",
        );
    }
}

#[test]
fn offsets_that_tile_but_lie_are_caught_when_the_member_is_read() {
    let f = fixture(Flavour::Gzip);
    let mut index = f.index.clone();
    index.entries[0].length -= 5;
    index.entries[1].offset -= 5;
    index.entries[1].length += 5;
    let (file, expected) = f.with_index(&index);
    Fixture::authenticate(&file, &expected).expect("the layout is consistent");
    assert_refused(
        Fixture::verify(&file, &expected),
        |e| matches!(e, IndexError::Member { .. }),
        "a.txt",
    );
}

#[test]
fn sizes_that_lie_are_refused() {
    let f = fixture(Flavour::Zstd);
    let i = f.at("a.txt");
    // Within the tar padding: the layout holds, the member's header says 3.
    let mut index = f.index.clone();
    index.entries[i].size = 4;
    let (file, expected) = f.with_index(&index);
    Fixture::authenticate(&file, &expected).expect("same tree, same layout");
    assert_refused(
        Fixture::verify(&file, &expected),
        |e| matches!(e, IndexError::Member { .. }),
        "tar header is not the one the format prescribes",
    );
    // Across a 512-byte boundary: the tar stream no longer tiles.
    index.entries[i].size = 600;
    let (file, expected) = f.with_index(&index);
    assert_refused(
        Fixture::authenticate(&file, &expected),
        |e| matches!(e, IndexError::Layout { .. }),
        "tar stream",
    );
}

#[test]
fn modes_that_lie_are_refused() {
    let f = fixture(Flavour::Gzip);
    let mut index = f.index.clone();
    index.entries[f.at("a.txt")].mode = EntryMode::Executable;
    let (file, expected) = f.with_index(&index);
    assert_refused(
        Fixture::authenticate(&file, &expected),
        |e| {
            matches!(
                e,
                IndexError::Tree {
                    key: "git-tree-sha1",
                    ..
                }
            )
        },
        "lies about a path, mode or blob",
    );
    index.entries[f.at("a.txt")].mode = EntryMode::Directory;
    let (file, expected) = f.with_index(&index);
    assert_refused(
        Fixture::authenticate(&file, &expected),
        |e| matches!(e, IndexError::Path { .. }),
        "mode 40000",
    );
}

#[test]
fn paths_that_lie_are_refused() {
    let f = fixture(Flavour::Gzip);
    let cases: [(&[u8], Kind, &str); 5] = [
        (
            b"a.tx",
            |e| matches!(e, IndexError::Tree { .. }),
            "lies about a path",
        ),
        (
            b"../a.txt",
            |e| matches!(e, IndexError::Path { .. }),
            "`..` component",
        ),
        (
            b"sub//a.txt",
            |e| matches!(e, IndexError::Path { .. }),
            "empty component",
        ),
        (
            b".git/a.txt",
            |e| matches!(e, IndexError::Path { .. }),
            "`.git`",
        ),
        (b"a\0txt", |e| matches!(e, IndexError::Path { .. }), "NUL"),
    ];
    for (path, matches, needle) in cases {
        let mut index = f.index.clone();
        index.entries[f.at("a.txt")].path = path.to_vec();
        let (file, expected) = f.with_index(&index);
        assert_refused(Fixture::authenticate(&file, &expected), matches, needle);
    }
    // Out of order, and duplicated.
    let mut index = f.index.clone();
    index.entries.swap(0, 1);
    let (file, expected) = f.with_index(&index);
    assert_refused(
        Fixture::authenticate(&file, &expected),
        |e| matches!(e, IndexError::Path { .. }),
        "sorted and unique",
    );
    let mut index = f.index.clone();
    index.entries[1].path = index.entries[0].path.clone();
    let (file, expected) = f.with_index(&index);
    assert_refused(
        Fixture::authenticate(&file, &expected),
        |e| matches!(e, IndexError::Path { .. }),
        "sorted and unique",
    );
    // A file that is a folder too.
    let mut index = f.index.clone();
    let sub = f.at("sub/b.txt");
    index.entries[sub - 1].path = b"sub".to_vec();
    let (file, expected) = f.with_index(&index);
    assert_refused(
        Fixture::authenticate(&file, &expected),
        |e| matches!(e, IndexError::Path { .. }),
        "cannot be a folder",
    );
}

#[test]
fn blob_ids_and_block_digests_that_lie_are_refused() {
    let f = fixture(Flavour::Gzip);
    let mut index = f.index.clone();
    index.entries[f.at("noise.bin")].blob.sha1[0] ^= 1;
    let (file, expected) = f.with_index(&index);
    assert_refused(
        Fixture::authenticate(&file, &expected),
        |e| matches!(e, IndexError::Tree { .. }),
        &f.tree.to_hex(),
    );
    // A block digest: the tree does not cover it, the index hash does.
    let mut index = f.index.clone();
    index.entries[f.at("sub/big.bin")].blocks[1].sha256[0] ^= 1;
    let (file, honest) = f.with_index(&index);
    assert_refused(
        Fixture::authenticate(&file, &f.expected()),
        |e| matches!(e, IndexError::Hash { .. }),
        "index-sha256",
    );
    // Even an index whose hash the manifest would have is caught when the block is read.
    assert_refused(
        Fixture::verify(&file, &honest),
        |e| matches!(e, IndexError::Member { .. }),
        "block 1's content does not have the index's digest",
    );
}

#[test]
fn missing_or_extra_members_are_refused() {
    let f = fixture(Flavour::Zstd);
    let mut index = f.index.clone();
    index.entries.remove(f.at("a.txt"));
    let (file, expected) = f.with_index(&index);
    assert!(matches!(
        Fixture::authenticate(&file, &expected),
        Err(IndexError::Layout { .. })
    ));
    let mut index = f.index.clone();
    index.entries[f.at("sub/big.bin")].blocks.pop();
    let (file, expected) = f.with_index(&index);
    assert_refused(
        Fixture::authenticate(&file, &expected),
        |e| matches!(e, IndexError::Layout { .. }),
        "blocks",
    );
    let mut index = f.index.clone();
    index.data_size -= 1;
    let (file, expected) = f.with_index(&index);
    assert_refused(
        Fixture::authenticate(&file, &expected),
        |e| matches!(e, IndexError::Layout { .. }),
        "a missing or extra member",
    );
}

#[test]
fn a_decompression_bomb_in_one_member_stops_at_the_length_the_index_gives() {
    for flavour in [Flavour::Gzip, Flavour::Zstd] {
        let f = fixture(flavour);
        let i = f.at("noise.bin");
        let honest = &f.index.entries[i];
        // 32 MiB of zeros in about as many bytes as the honest member.
        let bomb = MemberEncoder::new(flavour)
            .unwrap()
            .encode(&vec![0; 32 << 20])
            .unwrap();
        assert!(
            bomb.len() as u64 <= honest.length + 1024,
            "{flavour:?}: {}",
            bomb.len()
        );
        let (start, end) = (
            honest.offset as usize,
            (honest.offset + honest.length) as usize,
        );
        let mut data = f.file[..start].to_vec();
        data.extend_from_slice(&bomb);
        data.extend_from_slice(&f.file[end..f.index.data_size as usize]);
        let delta = bomb.len() as i64 - honest.length as i64;
        let mut index = f.index.clone();
        index.entries[i].length = bomb.len() as u64;
        for e in &mut index.entries[i + 1..] {
            e.offset = e.offset.checked_add_signed(delta).unwrap();
            for b in &mut e.blocks {
                b.offset = b.offset.checked_add_signed(delta).unwrap();
            }
        }
        index.data_size = data.len() as u64;
        let (file, expected) = f.rebuilt(&data, &index);
        Fixture::authenticate(&file, &expected).expect("the bomb's size is plausible");
        assert_refused(
            Fixture::verify(&file, &expected),
            |e| matches!(e, IndexError::Member { .. }),
            "decompression bomb",
        );
    }
}

/// The tarball with the locator's field at `at` (16: index offset, 24: length, 32: size) set.
fn with_locator_field(f: &Fixture, at: usize, value: u64) -> Vec<u8> {
    let mut file = f.file.clone();
    let end = file.len() - if f.flavour == Flavour::Gzip { 10 } else { 0 };
    let locator = end - 40;
    file[locator + at..locator + at + 8].copy_from_slice(&value.to_le_bytes());
    file
}

#[test]
fn an_index_larger_than_the_tarball_or_the_limit_is_refused() {
    for flavour in [Flavour::Gzip, Flavour::Zstd] {
        let f = fixture(flavour);
        let len = f.file.len() as u64;
        assert_refused(
            read(&with_locator_field(&f, 24, len + 1)),
            |e| matches!(e, IndexError::TooLarge(_)),
            "more than the whole file",
        );
        assert_refused(
            read(&with_locator_field(&f, 32, 300 << 20)),
            |e| matches!(e, IndexError::TooLarge(_)),
            "the limit is",
        );
        // A document longer than the locator says: decompression stops there.
        assert_refused(
            read(&with_locator_field(&f, 32, f.doc.len() as u64 - 1)),
            |e| matches!(e, IndexError::TooLarge(_)),
            "decompression bomb",
        );
        assert_refused(
            read(&with_locator_field(&f, 16, 3)),
            |e| matches!(e, IndexError::Locator(_)),
            "does not end where the footer starts",
        );
    }
}

#[test]
fn an_index_claiming_more_entries_than_it_holds_is_refused() {
    let f = fixture(Flavour::Gzip);
    let mut doc = f.doc.clone();
    doc[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
    let mut file = f.file[..f.index.data_size as usize].to_vec();
    let mut encoder = MemberEncoder::new(Flavour::Gzip).unwrap();
    seekable::write_tail(&mut file, &mut encoder, f.index.data_size, &doc).unwrap();
    let expected = Expected {
        index_sha256: None,
        ..f.expected()
    };
    assert_refused(
        Fixture::authenticate(&file, &expected),
        |e| matches!(e, IndexError::TooLarge(_)),
        "entries",
    );
}

#[test]
fn the_sha256_tree_needs_the_sha256_ids_and_must_match() {
    let f = fixture(Flavour::Gzip);
    let mut index = f.index.clone();
    for e in &mut index.entries {
        e.blob.sha256 = None;
    }
    let (file, expected) = f.with_index(&index);
    assert_eq!(
        Fixture::authenticate(&file, &expected).unwrap_err(),
        IndexError::NoSha256Ids
    );
    let sha1_only = Expected {
        tree_sha256: None,
        ..expected
    };
    Fixture::authenticate(&file, &sha1_only).expect("SHA-1 alone needs no SHA-256 ids");
    let mut index = f.index.clone();
    index.entries[0].blob.sha256.as_mut().unwrap()[0] ^= 1;
    let (file, expected) = f.with_index(&index);
    assert_refused(
        Fixture::authenticate(&file, &expected),
        |e| {
            matches!(
                e,
                IndexError::Tree {
                    key: "git-tree-sha256",
                    ..
                }
            )
        },
        &f.tree_sha256.to_hex(),
    );
}

#[test]
fn a_classic_tarball_has_no_index() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("c");
    fs::create_dir_all(&root).unwrap();
    fs::write(root.join("x"), "x").unwrap();
    let out = dir.path().join("c.tar.gz");
    let entries = collect_entries(&root).unwrap();
    let made = clima_artifact_ops::tarball::write_tarball(&root, &entries, &out, &|_| {}).unwrap();
    assert_eq!(made.index_sha256, None);
    assert_eq!(read(&fs::read(Path::new(&out)).unwrap()), Ok(None));
}

#[test]
fn an_empty_artifact_is_an_end_of_archive_member_and_its_index() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("empty");
    fs::create_dir_all(root.join("only/folders")).unwrap();
    let out = dir.path().join("e.tar.gz");
    let entries = collect_entries(&root).unwrap();
    let made = write_seekable(
        &root,
        &entries,
        &out,
        Flavour::Gzip,
        MIN_BLOCK_SIZE,
        &|_| {},
    )
    .unwrap();
    let file = fs::read(&out).unwrap();
    assert_eq!(file[..2], [0x1f, 0x8b]);
    let (locator, doc) = read(&file).unwrap().unwrap();
    let expected = Expected {
        tree_sha1: made.tree_hash,
        tree_sha256: None,
        index_sha256: made.index_sha256,
    };
    let index = seekable::authenticate(&doc, &locator, &expected, &IndexLimits::default()).unwrap();
    assert!(index.index().entries.is_empty());
    index.verify_file(&mut Cursor::new(&file)).unwrap();
    assert_eq!(
        made.tree_hash.to_hex(),
        "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
    );
}
