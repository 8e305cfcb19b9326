//! Hostile indexes of seekable tarballs through the public install API (issue 49, item 5): the
//! lies of `clima-artifact-ops/tests/seekable_index.rs` (which checks the index readers one by
//! one) served to [`ensure_variant`], which unpacks on several workers. The attacker is as strong
//! as can be: the manifest's `sha256` and `index-sha256` are those of the lying file and index,
//! only `git-tree-sha1` is the honest tree's. Each install must be refused with an error that
//! names the artifact and, when the lie is about one entry, that entry's path, and must leave
//! nothing in the depot: no artifact, no temp folder.

use std::fs;
use std::io::Cursor;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use clima_artifact_manifest::{ArtifactVariant, Download, GitTreeSha1, Sha256};
use clima_artifact_ops::tarball::{collect_entries, write_seekable};
use clima_artifact_runtime::extract::seekable::{
    self, Flavour, Index, IndexLimits, MIN_BLOCK_SIZE, MemberEncoder,
};
use clima_artifact_runtime::tree_hash::EntryMode;
use clima_artifact_runtime::{Config, Error, SourceFailure, ensure_variant};
use clima_artifact_tests::{TestServer, assert_depot_clean, sha256, test_config};

/// An honest seekable tarball: its bytes, tree, index document and decoded index.
struct Honest {
    _dir: tempfile::TempDir,
    flavour: Flavour,
    file: Vec<u8>,
    tree: GitTreeSha1,
    doc: Vec<u8>,
    index: Index,
}

/// Small files, an executable, a symlink, 100 KB of noise and a file of three blocks.
fn honest(flavour: Flavour) -> Honest {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("content");
    fs::create_dir_all(root.join("sub")).unwrap();
    fs::write(root.join("a.txt"), "abc").unwrap();
    fs::write(root.join("sub/b.txt"), "bbb\n").unwrap();
    fs::write(root.join("run.sh"), "#!/bin/sh\n").unwrap();
    fs::set_permissions(root.join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("a.txt", root.join("link")).unwrap();
    let mut x = 0x2545_f491_4f6c_dd1du64;
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
    let file = fs::read(&out).unwrap();
    let (_, doc) = seekable::read_index(
        &mut Cursor::new(&file),
        file.len() as u64,
        &IndexLimits::default(),
    )
    .unwrap()
    .unwrap();
    let index = Index::decode(&doc, &IndexLimits::default()).unwrap();
    Honest {
        _dir: dir,
        flavour,
        file,
        tree: made.tree_hash,
        doc,
        index,
    }
}

impl Honest {
    /// The tarball with `data` as its members and `index` as its index, and that index's
    /// document.
    fn rebuilt(&self, data: &[u8], index: &Index) -> (Vec<u8>, Vec<u8>) {
        let mut file = data.to_vec();
        let doc = index.encode();
        let mut encoder = MemberEncoder::new(self.flavour).unwrap();
        seekable::write_tail(&mut file, &mut encoder, data.len() as u64, &doc).unwrap();
        (file, doc)
    }

    /// The tarball with its own members and the index `edit` made of its own.
    fn lying(&self, edit: impl FnOnce(&mut Index)) -> (Vec<u8>, Vec<u8>) {
        let mut index = self.index.clone();
        edit(&mut index);
        self.rebuilt(&self.file[..self.index.data_size as usize], &index)
    }

    /// The position of the entry at `path`.
    fn at(&self, path: &str) -> usize {
        self.index
            .entries
            .iter()
            .position(|e| e.path == path.as_bytes())
            .unwrap()
    }

    /// The tarball with the members of `path` replaced by one member of 32 MiB of zeros
    /// (about as short as the honest one), the index moved to fit, claiming the honest size.
    fn bomb(&self, path: &str) -> (Vec<u8>, Vec<u8>) {
        let i = self.at(path);
        let honest = &self.index.entries[i];
        let bomb = MemberEncoder::new(self.flavour)
            .unwrap()
            .encode(&vec![0; 32 << 20])
            .unwrap();
        assert!(bomb.len() as u64 <= honest.length + 1024, "{}", bomb.len());
        let (start, end) = (
            honest.offset as usize,
            (honest.offset + honest.length) as usize,
        );
        let mut data = self.file[..start].to_vec();
        data.extend_from_slice(&bomb);
        data.extend_from_slice(&self.file[end..self.index.data_size as usize]);
        let delta = bomb.len() as i64 - honest.length as i64;
        let mut index = self.index.clone();
        index.entries[i].length = bomb.len() as u64;
        for e in &mut index.entries[i + 1..] {
            e.offset = e.offset.checked_add_signed(delta).unwrap();
            for b in &mut e.blocks {
                b.offset = b.offset.checked_add_signed(delta).unwrap();
            }
        }
        index.data_size = data.len() as u64;
        self.rebuilt(&data, &index)
    }

    /// The honest tarball with the locator's field at `at` (24: the index's length in the
    /// file) set to `value`.
    fn with_locator_field(&self, at: usize, value: u64) -> Vec<u8> {
        let mut file = self.file.clone();
        let end = file.len() - if self.flavour == Flavour::Gzip { 10 } else { 0 };
        let locator = end - 40;
        file[locator + at..locator + at + 8].copy_from_slice(&value.to_le_bytes());
        file
    }
}

/// Serves `file` and installs it as artifact `hostile` whose entry has the honest `tree`, the
/// file's `sha256` and `index_sha256`, on 3 workers: the refusal's text, after checking that
/// the depot holds nothing.
fn refused(tree: GitTreeSha1, file: &[u8], index_sha256: Sha256) -> String {
    refused_as(tree, file, index_sha256, false)
}

/// [`refused`]; when `large`, the download is a large one (kept in a partial file, which the
/// install reads again instead of a copy of its own), and that file is gone afterwards too.
fn refused_as(tree: GitTreeSha1, file: &[u8], index_sha256: Sha256, large: bool) -> String {
    let server = TestServer::start();
    server.serve("hostile.tar.gz", file.to_vec());
    let url = server.url("hostile.tar.gz");
    let mut v: ArtifactVariant =
        clima_artifact_tests::variant(tree, std::slice::from_ref(&url), sha256(file));
    v.downloads = vec![Download {
        url,
        sha256: sha256(file),
        size: None,
        index_sha256: Some(index_sha256),
    }];
    let dir = tempfile::tempdir().unwrap();
    let depot = dir.path().join("depot");
    let mut config = Config {
        install_threads: Some(3),
        ..test_config(std::slice::from_ref(&depot))
    };
    if large {
        config.net.parallel_min_size = 1 << 10;
        config.net.connections = 2;
    }
    let result = ensure_variant("hostile", &v, dir.path(), &config).map(|i| i.path);
    let e = result.expect_err("the lie was installed");
    let Error::DownloadFailed { failures, .. } = &e else {
        panic!("{e:?}")
    };
    assert!(
        failures
            .iter()
            .all(|f| matches!(f, SourceFailure::Archive { .. })),
        "{failures:?}"
    );
    let installed: PathBuf = depot.join("artifacts").join(tree.to_hex());
    assert!(!installed.exists(), "{}", installed.display());
    assert_depot_clean(&depot);
    let partials = clima_artifact_tests::partial_entries(&depot);
    assert!(partials.is_empty(), "{partials:?}");
    let text = e.to_string();
    assert!(text.contains("artifact `hostile`"), "{text}");
    text
}

/// Each lie about one entry is refused naming that entry (`needle` and the path).
#[test]
fn an_index_that_lies_about_an_entry_is_refused_naming_it_and_nothing_is_installed() {
    type Edit = fn(&Honest, &mut Index);
    let cases: [(&str, &str, Edit); 9] = [
        ("a gap", "sub/b.txt", |h, ix| {
            ix.entries[h.at("sub/b.txt")].offset += 1
        }),
        ("an overlap", "sub/b.txt", |h, ix| {
            ix.entries[h.at("sub/b.txt")].offset -= 1
        }),
        // The earliest member that does not hold what the index says is the one named.
        (
            "tiling offsets that point at another file's bytes",
            "a.txt",
            |h, ix| {
                // `a.txt` then `link`: 5 bytes of the first member given to the second.
                let (a, b) = (h.at("a.txt"), h.at("link"));
                assert_eq!(a + 1, b);
                ix.entries[a].length -= 5;
                ix.entries[b].offset -= 5;
                ix.entries[b].length += 5;
            },
        ),
        ("a size within the padding", "a.txt", |h, ix| {
            ix.entries[h.at("a.txt")].size = 4
        }),
        (
            "a size across a block of the tar stream",
            "a.txt",
            |h, ix| ix.entries[h.at("a.txt")].size = 600,
        ),
        ("a folder's mode", "a.txt", |h, ix| {
            ix.entries[h.at("a.txt")].mode = EntryMode::Directory
        }),
        ("a path out of the artifact", "../a.txt", |h, ix| {
            ix.entries[h.at("a.txt")].path = b"../a.txt".to_vec()
        }),
        ("a block digest", "sub/big.bin", |h, ix| {
            ix.entries[h.at("sub/big.bin")].blocks[1].sha256[0] ^= 1
        }),
        ("a missing block member", "sub/big.bin", |h, ix| {
            ix.entries[h.at("sub/big.bin")].blocks.pop();
        }),
    ];
    for flavour in [Flavour::Gzip, Flavour::Zstd] {
        let h = honest(flavour);
        for (what, path, edit) in cases {
            let (file, doc) = h.lying(|ix| edit(&h, ix));
            let text = refused(h.tree, &file, sha256(&doc));
            assert!(
                text.contains(&format!("`{path}`")),
                "{flavour:?}, {what}: `{path}` not named: {text}"
            );
        }
    }
}

/// Lies the git tree catches (a path, a mode, a blob id) name the trees: which entry lied
/// cannot be told from a tree hash.
#[test]
fn an_index_whose_tree_lies_about_a_path_mode_or_blob_is_refused() {
    type Edit = fn(&Honest, &mut Index);
    let cases: [(&str, Edit); 4] = [
        ("a renamed path", |h, ix| {
            ix.entries[h.at("a.txt")].path = b"a.tx".to_vec()
        }),
        ("an executable bit", |h, ix| {
            ix.entries[h.at("a.txt")].mode = EntryMode::Executable
        }),
        ("an executable made a plain file", |h, ix| {
            ix.entries[h.at("run.sh")].mode = EntryMode::File
        }),
        ("a blob id", |h, ix| {
            ix.entries[h.at("noise.bin")].blob.sha1[0] ^= 1
        }),
    ];
    let h = honest(Flavour::Gzip);
    for (what, edit) in cases {
        let (file, doc) = h.lying(|ix| edit(&h, ix));
        let text = refused(h.tree, &file, sha256(&doc));
        assert!(
            text.contains("lies about a path, mode or blob") && text.contains(&h.tree.to_hex()),
            "{what}: {text}"
        );
    }
}

/// An entry dropped, or an index that ends early, leaves members no entry accounts for.
#[test]
fn an_index_with_a_missing_or_extra_member_is_refused() {
    let h = honest(Flavour::Zstd);
    let (file, doc) = h.lying(|ix| {
        ix.entries.remove(h.at("a.txt"));
    });
    let text = refused(h.tree, &file, sha256(&doc));
    assert!(text.contains("gap or an overlap"), "{text}");
    let (file, doc) = h.lying(|ix| ix.data_size -= 1);
    let text = refused(h.tree, &file, sha256(&doc));
    assert!(text.contains("a missing or extra member"), "{text}");
}

/// A member that inflates far beyond its entry (32 MiB of zeros where 100 KB are due) is
/// stopped at the length the index gives by the worker that reads it, and named.
#[test]
fn a_decompression_bomb_in_one_member_is_refused_naming_its_entry() {
    for flavour in [Flavour::Gzip, Flavour::Zstd] {
        let h = honest(flavour);
        let (file, doc) = h.bomb("noise.bin");
        let text = refused(h.tree, &file, sha256(&doc));
        assert!(text.contains("`noise.bin`"), "{flavour:?}: {text}");
        assert!(text.contains("decompression bomb"), "{flavour:?}: {text}");
    }
}

/// A locator that claims an index longer than the whole file is refused before anything is
/// read or allocated by it.
#[test]
fn an_index_larger_than_the_tarball_is_refused() {
    for flavour in [Flavour::Gzip, Flavour::Zstd] {
        let h = honest(flavour);
        let file = h.with_locator_field(24, h.file.len() as u64 + 1);
        let text = refused(h.tree, &file, sha256(&h.doc));
        assert!(
            text.contains("more than the whole file"),
            "{flavour:?}: {text}"
        );
    }
}

/// A block digest changed (the tree does not cover it) under the manifest's honest
/// `index-sha256`: refused by the index's hash before anything it says is used.
#[test]
fn an_index_that_is_not_the_manifests_is_refused_by_its_hash() {
    let h = honest(Flavour::Gzip);
    let (file, _) = h.lying(|ix| ix.entries[h.at("sub/big.bin")].blocks[0].sha256[0] ^= 1);
    let text = refused(h.tree, &file, sha256(&h.doc));
    assert!(text.contains("`index-sha256`"), "{text}");
    assert!(
        text.contains("not the one the manifest was made with"),
        "{text}"
    );
}

/// The lies about one entry, in a large download read again from its partial file: refused
/// the same, and the partial file removed with the rest (a wrong file is not kept to resume).
#[test]
fn an_index_that_lies_in_a_large_download_is_refused_and_its_partial_file_removed() {
    let h = honest(Flavour::Gzip);
    let (file, doc) = h.lying(|ix| ix.entries[h.at("sub/big.bin")].blocks[1].sha256[0] ^= 1);
    let text = refused_as(h.tree, &file, sha256(&doc), true);
    assert!(text.contains("`sub/big.bin`"), "{text}");
    let (file, doc) = h.bomb("noise.bin");
    let text = refused_as(h.tree, &file, sha256(&doc), true);
    assert!(text.contains("decompression bomb"), "{text}");
}
