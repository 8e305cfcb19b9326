//! `tree_hash` and the hash computed while extracting, compared with real `git write-tree`, in
//! both of git's object formats: every case is checked against a SHA-1 repository and against a
//! `git init --object-format=sha256` one (`git-tree-sha256`), the SHA-256 hash computed in the
//! same pass as the SHA-1 one.
//!
//! Needs `git` (2.29 or later for SHA-256): fails in CI (`CI=true`) if it is missing, skips with
//! a message otherwise.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;
use std::process::Command;

use clima_artifact_runtime::extract::{ExtractLimits, extract_archive};
use clima_artifact_runtime::tree_hash::{Formats, TreeHashes, tree_hash, tree_hashes};
use clima_artifact_tests::{git_tree_hash, git_tree_hash_sha256, have_git};

/// Both tree hashes of `dir` as real git computes them.
fn git_hashes(dir: &Path) -> TreeHashes {
    TreeHashes {
        sha1: git_tree_hash(dir),
        sha256: Some(git_tree_hash_sha256(dir)),
    }
}

/// `dir` hashes as git does, in SHA-1 alone and in both formats in one pass; returns git's.
fn assert_hashes_like_git(dir: &Path, case: &str) -> TreeHashes {
    let expected = git_hashes(dir);
    assert_eq!(tree_hash(dir).unwrap(), expected.sha1, "{case}");
    assert_eq!(
        tree_hashes(dir, Formats::Sha1AndSha256).unwrap(),
        expected,
        "{case}"
    );
    assert_eq!(
        tree_hashes(dir, Formats::Sha1).unwrap(),
        TreeHashes {
            sha1: expected.sha1,
            sha256: None
        },
        "{case}: SHA-256 only on request"
    );
    expected
}

/// Deterministic pseudo-random bytes (xorshift), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(len + 8);
        while v.len() < len {
            v.extend_from_slice(&self.next().to_le_bytes());
        }
        v.truncate(len);
        v
    }
}

fn write(path: &Path, bytes: &[u8], mode: u32) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, bytes).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// A tree exercising every rule of the module doc. `hostile_links` adds symlinks that
/// extraction refuses (absolute, escaping) but that `tree_hash` must hash like git.
fn build_fixed_tree(root: &Path, hostile_links: bool) {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    // Exec bits: only the owner's counts.
    write(&root.join("plain.txt"), b"plain\n", 0o644);
    write(&root.join("run.sh"), b"#!/bin/sh\necho hi\n", 0o755);
    write(&root.join("owner-only-exec"), b"x", 0o700);
    write(&root.join("group-exec-only"), b"x", 0o654);
    write(&root.join("readonly"), b"ro", 0o444);
    // Names where the `/` rule changes the order.
    write(&root.join("a/inside"), b"in a", 0o644);
    write(&root.join("a.b"), b"a.b", 0o644);
    write(&root.join("a-"), b"a-", 0o644);
    write(&root.join("a0"), b"a0", 0o644);
    write(&root.join("b"), b"file b", 0o644);
    write(&root.join("b-/x"), b"dir b-", 0o644);
    write(&root.join("b.c/x"), b"dir b.c", 0o644);
    write(&root.join("b0/x"), b"dir b0", 0o644);
    // Unicode, spaces and odd bytes in names.
    write(
        &root.join("données météo/température °C.nc"),
        b"unicode",
        0o644,
    );
    write(&root.join("with space/and  two"), b"spaces", 0o644);
    write(&root.join("日本語/ファイル"), b"cjk", 0o644);
    write(&root.join("emoji 🌍"), b"globe", 0o644);
    write(&root.join("-leading-dash"), b"dash", 0o644);
    // Zero-byte and multi-MB files.
    write(&root.join("empty"), b"", 0o644);
    write(&root.join("sub/empty-exec"), b"", 0o755);
    write(
        &root.join("big/random.bin"),
        &rng.bytes(3 * 1024 * 1024 + 17),
        0o644,
    );
    write(
        &root.join("big/zeros.bin"),
        &vec![0u8; 5 * 1024 * 1024],
        0o644,
    );
    // Symlinks: to a file, to a directory (never followed), dangling, nested, into a subdir.
    symlink("plain.txt", root.join("link-to-file")).unwrap();
    symlink("a", root.join("link-to-dir")).unwrap();
    symlink("does/not/exist", root.join("dangling")).unwrap();
    symlink("../plain.txt", root.join("sub/up-link")).unwrap();
    symlink("données météo", root.join("unicode-link")).unwrap();
    if hostile_links {
        symlink("/etc/passwd", root.join("absolute-link")).unwrap();
        symlink("../../outside", root.join("sub/escaping-link")).unwrap();
    }
    // Empty directories, nested empty ones, and a directory holding only empty ones.
    fs::create_dir_all(root.join("empty-dir")).unwrap();
    fs::create_dir_all(root.join("nested/empty/dirs/all/the/way")).unwrap();
    fs::create_dir_all(root.join("a/empty-inside-a")).unwrap();
    // Deep nesting.
    let mut deep = root.join("deep");
    for i in 0..64 {
        deep = deep.join(format!("d{i}"));
    }
    write(&deep.join("bottom"), b"deep", 0o755);
}

/// A random tree: random names drawn from characters that stress the sort order.
fn build_random_tree(root: &Path, seed: u64) {
    let mut rng = Rng(seed);
    let alphabet = [
        b"a".as_slice(),
        b"b",
        b"-",
        b".",
        b"0",
        b"_",
        b"A",
        b" ",
        "é".as_bytes(),
    ];
    let mut dirs = vec![root.to_path_buf()];
    for _ in 0..120 {
        let parent = dirs[rng.below(dirs.len() as u64) as usize].clone();
        let len = 1 + rng.below(3);
        let mut name = Vec::new();
        for _ in 0..len {
            name.extend_from_slice(alphabet[rng.below(alphabet.len() as u64) as usize]);
        }
        let name = String::from_utf8(name).unwrap();
        if name == "." || name == ".." || name.starts_with(". ") {
            continue;
        }
        let path = parent.join(&name);
        if fs::symlink_metadata(&path).is_ok() {
            continue;
        }
        match rng.below(10) {
            0..=2 => {
                fs::create_dir(&path).unwrap();
                dirs.push(path);
            }
            3 => symlink(format!("target-{}", rng.below(5)), &path).unwrap(),
            _ => {
                let size = match rng.below(8) {
                    0 => 0,
                    1 => 300_000 + rng.below(200_000) as usize,
                    _ => rng.below(2000) as usize,
                };
                let mode = if rng.below(3) == 0 { 0o755 } else { 0o644 };
                write(&path, &rng.bytes(size), mode);
            }
        }
    }
}

#[test]
fn fixed_tree_matches_git() {
    if !have_git() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    build_fixed_tree(dir.path(), true);
    assert_hashes_like_git(dir.path(), "fixed tree");
}

#[test]
fn random_trees_match_git() {
    if !have_git() {
        return;
    }
    for seed in [1u64, 2, 3, 0xdead_beef, 0x1234_5678_9abc] {
        let dir = tempfile::tempdir().unwrap();
        build_random_tree(dir.path(), seed);
        assert_hashes_like_git(dir.path(), &format!("seed {seed}"));
    }
}

#[test]
fn slash_rule_orders_a_directory_after_dot_and_dash_but_before_zero() {
    if !have_git() {
        return;
    }
    // Same names, once with `a` a file and once with `a` a directory: only the `/` rule
    // differs, and both must match git.
    for a_is_dir in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        for name in ["a.b", "a-", "a0", "a!", "a~"] {
            write(&dir.path().join(name), name.as_bytes(), 0o644);
        }
        if a_is_dir {
            write(&dir.path().join("a/x"), b"x", 0o644);
        } else {
            write(&dir.path().join("a"), b"x", 0o644);
        }
        assert_hashes_like_git(dir.path(), &format!("a is a dir: {a_is_dir}"));
    }
}

#[test]
fn only_empty_directories_give_the_empty_tree() {
    if !have_git() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("x/y/z")).unwrap();
    fs::create_dir_all(dir.path().join("w")).unwrap();
    let expected = assert_hashes_like_git(dir.path(), "only empty folders");
    assert_eq!(
        expected.sha1.to_hex(),
        "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
    );
    // git's empty tree in the SHA-256 format: the same rule (no empty trees below the root).
    assert_eq!(
        expected.sha256.unwrap().to_hex(),
        "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321"
    );
}

/// Empty folders next to files leave both hashes unchanged (Tar.jl's `skip_empty = true`
/// prunes them the same way for `git-sha1` and `git-sha256`).
#[test]
fn empty_folders_beside_files_do_not_change_either_hash() {
    if !have_git() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write(&dir.path().join("data"), b"data", 0o644);
    write(&dir.path().join("sub/file"), b"sub", 0o755);
    let before = assert_hashes_like_git(dir.path(), "files only");
    fs::create_dir_all(dir.path().join("empty")).unwrap();
    fs::create_dir_all(dir.path().join("sub/empty/deeper")).unwrap();
    assert_eq!(
        assert_hashes_like_git(dir.path(), "with empty folders"),
        before
    );
}

#[test]
fn dot_git_is_skipped_at_every_depth() {
    if !have_git() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write(&dir.path().join("data"), b"data", 0o644);
    write(&dir.path().join("sub/file"), b"sub", 0o644);
    let expected = git_hashes(dir.path());
    // Now add `.git` things that git ignores (not valid repositories, so not submodules).
    write(&dir.path().join(".git/junk"), b"junk", 0o644);
    write(&dir.path().join("sub/.git"), b"not a gitfile", 0o644);
    assert_eq!(assert_hashes_like_git(dir.path(), ".git added"), expected);
}

#[test]
fn errors_name_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let err = tree_hash(&missing).unwrap_err();
    assert!(err.to_string().contains("missing"), "{err}");

    let fifo = dir.path().join("a-fifo");
    let status = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("cannot run mkfifo");
    assert!(status.success());
    let err = tree_hash(dir.path()).unwrap_err();
    assert!(err.to_string().contains("a-fifo"), "{err}");
    let err = tree_hashes(dir.path(), Formats::Sha1AndSha256).unwrap_err();
    assert!(err.to_string().contains("a-fifo"), "{err}");
}

/// Packs `dir` into a tar.gz the way a packager would (symlinks kept as symlinks).
fn tarball(dir: &Path) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut builder = tar::Builder::new(gz);
    builder.follow_symlinks(false);
    builder.append_dir_all(".", dir).unwrap();
    let mut gz = builder.into_inner().unwrap();
    gz.flush().unwrap();
    gz.finish().unwrap()
}

#[test]
fn extraction_hash_matches_git_and_tree_hash() {
    if !have_git() {
        return;
    }
    for seed in [None, Some(7u64), Some(99)] {
        let source = tempfile::tempdir().unwrap();
        match seed {
            None => build_fixed_tree(source.path(), false),
            Some(seed) => build_random_tree(source.path(), seed),
        }
        let expected = git_hashes(source.path());
        let bytes = tarball(source.path());
        for sha256 in [false, true] {
            let dest = tempfile::tempdir().unwrap();
            let extracted = extract_archive(
                bytes.as_slice(),
                dest.path(),
                &ExtractLimits {
                    max_unpacked_bytes: 1 << 30,
                    tree_hash_sha256: sha256,
                    ..ExtractLimits::default()
                },
            )
            .unwrap();
            assert_eq!(extracted.tree_hash, expected.sha1, "seed {seed:?}");
            assert_eq!(
                extracted.tree_hash_sha256,
                expected.sha256.filter(|_| sha256),
                "seed {seed:?}, sha256 asked: {sha256}"
            );
            assert_eq!(
                assert_hashes_like_git(dest.path(), &format!("seed {seed:?} extracted")),
                expected
            );
        }
    }
}

/// Small files go to the writer thread in batches: sizes on both sides of the batching limit
/// (64 KiB) and of a batch's capacity, more files than one batch takes, a hard link to a file
/// still waiting in a batch, and a small file replaced by a later entry of the same name. The
/// result must hash, and land on disk, as git sees it.
#[test]
fn batched_small_files_land_and_hash_like_git() {
    if !have_git() {
        return;
    }
    let mut rng = Rng(2026);
    let sizes: Vec<usize> = [0, 1, 65_535, 65_536, 65_537, 200_000, 262_144, 262_145]
        .into_iter()
        .chain((0..150).map(|_| rng.below(70_000) as usize))
        .collect();
    let mut raw = Vec::new();
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    {
        let mut builder = tar::Builder::new(&mut raw);
        let mut add = |name: &str, kind: tar::EntryType, data: &[u8], link: Option<&str>| {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(kind);
            h.set_mode(0o644);
            h.set_size(data.len() as u64);
            if let Some(link) = link {
                h.set_link_name(link).unwrap();
            }
            builder.append_data(&mut h, name, data).unwrap();
        };
        for (i, size) in sizes.iter().enumerate() {
            let name = format!("d{}/f{i:03}", i % 7);
            let data = rng.bytes(*size);
            add(&name, tar::EntryType::Regular, &data, None);
            files.push((name, data));
        }
        // A hard link to the last (small, so batched and not yet written) file.
        let (last, data) = files.last().unwrap().clone();
        add("link-to-last", tar::EntryType::Link, &[], Some(&last));
        files.push(("link-to-last".into(), data));
        // The first small file, replaced by a later entry.
        let replaced = b"the later entry wins".to_vec();
        add("d1/f001", tar::EntryType::Regular, &replaced, None);
        files.retain(|(n, _)| n != "d1/f001");
        files.push(("d1/f001".into(), replaced));
        // More empty files than one batch takes, then a small file replaced by the very next
        // entry (both still in the same batch: the earlier one must be written before it is
        // unlinked).
        for i in 0..300 {
            let name = format!("empty/e{i:03}");
            add(&name, tar::EntryType::Regular, &[], None);
            files.push((name, Vec::new()));
        }
        add("twice", tar::EntryType::Regular, b"first", None);
        add("twice", tar::EntryType::Regular, b"second", None);
        files.push(("twice".into(), b"second".to_vec()));
        builder.finish().unwrap();
    }
    let expected_dir = tempfile::tempdir().unwrap();
    for (name, data) in &files {
        write(&expected_dir.path().join(name), data, 0o644);
    }
    let expected = git_hashes(expected_dir.path());
    for compressed in [false, true] {
        let bytes = if compressed {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            gz.write_all(&raw).unwrap();
            gz.finish().unwrap()
        } else {
            raw.clone()
        };
        let dest = tempfile::tempdir().unwrap();
        let limits = ExtractLimits {
            max_unpacked_bytes: 1 << 30,
            tree_hash_sha256: true,
            ..ExtractLimits::default()
        };
        let extracted = extract_archive(bytes.as_slice(), dest.path(), &limits).unwrap();
        assert_eq!(extracted.tree_hash, expected.sha1);
        assert_eq!(extracted.tree_hash_sha256, expected.sha256);
        assert_eq!(git_hashes(dest.path()), expected);
        for (name, data) in &files {
            assert_eq!(&fs::read(dest.path().join(name)).unwrap(), data, "{name}");
        }
    }
}
