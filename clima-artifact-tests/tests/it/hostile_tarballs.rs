//! Hostile archives: each one is refused or neutralised, and nothing is written outside the
//! extraction directory (a sentinel directory next to it must stay exactly as it was).
//!
//! Headers are written by hand: the `tar` crate's builder refuses most of these on purpose.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use clima_artifact_runtime::extract::{ExtractError, ExtractLimits, Extracted, extract_archive};
use clima_artifact_runtime::tree_hash::tree_hash;

const REGULAR: u8 = b'0';
const HARDLINK: u8 = b'1';
const SYMLINK: u8 = b'2';
const CHAR: u8 = b'3';
const BLOCK: u8 = b'4';
const DIRECTORY: u8 = b'5';
const FIFO: u8 = b'6';

/// Writes `value` as a NUL-terminated, zero-padded octal field.
fn octal(field: &mut [u8], value: u64) {
    let text = format!("{value:0width$o}", width = field.len() - 1);
    assert!(text.len() < field.len(), "{value} does not fit");
    field[..text.len()].copy_from_slice(text.as_bytes());
    field[text.len()] = 0;
}

/// One raw ustar header. Sizes beyond the octal range use GNU base-256.
fn header(name: &[u8], typeflag: u8, mode: u32, size: u64, link: &[u8]) -> [u8; 512] {
    let mut h = [0u8; 512];
    h[..name.len()].copy_from_slice(name);
    octal(&mut h[100..108], u64::from(mode));
    octal(&mut h[108..116], 0);
    octal(&mut h[116..124], 0);
    if size < 8u64.pow(11) {
        octal(&mut h[124..136], size);
    } else {
        h[124] = 0x80;
        h[128..136].copy_from_slice(&size.to_be_bytes());
    }
    octal(&mut h[136..148], 1_700_000_000);
    h[156] = typeflag;
    h[157..157 + link.len()].copy_from_slice(link);
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    octal(&mut h[148..155], u64::from(sum));
    h[155] = b' ';
    h
}

/// A tar stream built entry by entry.
#[derive(Default)]
struct RawTar(Vec<u8>);

impl RawTar {
    fn entry(mut self, name: &str, typeflag: u8, mode: u32, data: &[u8], link: &str) -> Self {
        self.0.extend_from_slice(&header(
            name.as_bytes(),
            typeflag,
            mode,
            data.len() as u64,
            link.as_bytes(),
        ));
        self.0.extend_from_slice(data);
        self.0.resize(self.0.len().next_multiple_of(512), 0);
        self
    }
    fn file(self, name: &str, data: &[u8]) -> Self {
        self.entry(name, REGULAR, 0o644, data, "")
    }
    fn finish(mut self) -> Vec<u8> {
        self.0.extend_from_slice(&[0u8; 1024]);
        self.0
    }
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}

/// A scratch area: `root/dest` (extraction target) and `root/sentinel` (must stay untouched).
struct Scene {
    _root: tempfile::TempDir,
    root: PathBuf,
    dest: PathBuf,
    sentinel: PathBuf,
    before: BTreeMap<PathBuf, String>,
}

/// Every path under `dir` with its kind and content (or link target).
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let meta = fs::symlink_metadata(&path).unwrap();
            let what = if meta.is_symlink() {
                format!("link -> {:?}", fs::read_link(&path).unwrap())
            } else if meta.is_dir() {
                pending.push(path.clone());
                format!("dir {:o}", meta.permissions().mode())
            } else {
                format!(
                    "file {:o} {:?}",
                    meta.permissions().mode(),
                    fs::read(&path).unwrap()
                )
            };
            out.insert(path, what);
        }
    }
    out
}

impl Scene {
    fn new() -> Scene {
        let root_dir = tempfile::tempdir().unwrap();
        let root = root_dir.path().to_path_buf();
        let dest = root.join("dest");
        let sentinel = root.join("sentinel");
        fs::create_dir(&dest).unwrap();
        fs::create_dir(&sentinel).unwrap();
        fs::write(sentinel.join("canary"), b"untouched").unwrap();
        fs::create_dir(sentinel.join("inner")).unwrap();
        let before = snapshot(&sentinel);
        Scene {
            _root: root_dir,
            root,
            dest,
            sentinel,
            before,
        }
    }

    fn extract_with(&self, bytes: &[u8], cap: u64) -> Result<Extracted, ExtractError> {
        let result = extract_archive(
            bytes,
            &self.dest,
            &ExtractLimits {
                max_unpacked_bytes: cap,
                ..ExtractLimits::default()
            },
        );
        self.assert_outside_untouched();
        result
    }

    fn extract(&self, bytes: &[u8]) -> Result<Extracted, ExtractError> {
        self.extract_with(bytes, 1 << 30)
    }

    fn assert_outside_untouched(&self) {
        assert_eq!(snapshot(&self.sentinel), self.before, "sentinel changed");
        let mut top: Vec<_> = fs::read_dir(&self.root)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        top.sort();
        assert_eq!(
            top,
            ["dest", "sentinel"],
            "something was written next to dest"
        );
    }

    /// Total bytes of regular files under dest.
    fn bytes_in_dest(&self) -> u64 {
        snapshot(&self.dest)
            .keys()
            .filter_map(|p| fs::symlink_metadata(p).ok())
            .filter(|m| m.is_file())
            .map(|m| m.len())
            .sum()
    }
}

#[track_caller]
fn assert_unsafe(result: Result<Extracted, ExtractError>, entry: &str, reason_part: &str) {
    match result {
        Err(ExtractError::Unsafe { entry: e, reason }) => {
            assert_eq!(e, entry);
            assert!(
                reason.contains(reason_part),
                "reason `{reason}` lacks `{reason_part}`"
            );
        }
        other => panic!("expected Unsafe for `{entry}`, got {other:?}"),
    }
}

#[track_caller]
fn assert_corrupt(result: Result<Extracted, ExtractError>, part: &str) {
    match result {
        Err(ExtractError::Corrupt(message)) => {
            assert!(message.contains(part), "message `{message}` lacks `{part}`")
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

#[test]
fn dot_dot_paths_are_refused() {
    for name in [
        "../sentinel/pwned",
        "ok/../../sentinel/pwned",
        "a/b/../../../x",
    ] {
        let scene = Scene::new();
        let tar = RawTar::default().file(name, b"evil").finish();
        assert_unsafe(scene.extract(&tar), name, "`..`");
        let tar = RawTar::default()
            .entry(name, DIRECTORY, 0o755, b"", "")
            .finish();
        assert_unsafe(scene.extract(&tar), name, "`..`");
    }
}

#[test]
fn absolute_paths_are_refused() {
    let scene = Scene::new();
    let target = scene.sentinel.join("abs-pwned");
    let name = target.to_str().unwrap();
    let tar = RawTar::default().file(name, b"evil").finish();
    assert_unsafe(scene.extract(&tar), name, "absolute");
    assert!(!target.exists());
}

#[test]
fn nul_in_a_pax_path_is_refused() {
    // A pax `path` record can carry bytes a ustar name cannot, NUL included.
    let record = b"path=a\0b\n";
    let line = format!("{} ", record.len() + 3);
    let mut pax = line.into_bytes();
    pax.extend_from_slice(record);
    let scene = Scene::new();
    let tar = RawTar::default()
        .entry("pax", b'x', 0o644, &pax, "")
        .file("placeholder", b"x")
        .finish();
    // Named escaped: no control character from an archive is printed raw.
    assert_unsafe(scene.extract(&tar), "a\\u{0}b", "NUL");
}

#[test]
fn symlink_out_then_write_through_it_is_refused() {
    // Escaping symlinks are refused outright...
    for (name, target) in [
        ("out", "../sentinel"),
        ("d/out", "../../sentinel"),
        ("abs", "/tmp"),
        ("chain", "x/../../sentinel"),
    ] {
        let scene = Scene::new();
        let tar = RawTar::default()
            .entry(name, SYMLINK, 0o777, b"", target)
            .file(&format!("{name}/pwned"), b"evil")
            .finish();
        assert_unsafe(scene.extract(&tar), name, "symlink");
    }
    // ...and a file is never written through an allowed symlink either.
    let scene = Scene::new();
    let tar = RawTar::default()
        .entry("real", DIRECTORY, 0o755, b"", "")
        .entry("inside", SYMLINK, 0o777, b"", "real")
        .file("inside/file", b"through a link")
        .finish();
    assert_unsafe(
        scene.extract(&tar),
        "inside/file",
        "refusing to write through",
    );
    assert!(!scene.dest.join("real/file").exists());
}

#[test]
fn symlink_climbing_through_another_symlink_is_refused() {
    // `up -> ..` alone stays inside (`d/up` is the artifact root), but `d/up/..` is outside:
    // `..` after a name is refused so that such chains cannot be built.
    let scene = Scene::new();
    let tar = RawTar::default()
        .entry("d/up", SYMLINK, 0o777, b"", "..")
        .entry("escape", SYMLINK, 0o777, b"", "d/up/../sentinel")
        .finish();
    assert_unsafe(scene.extract(&tar), "escape", "`..` after a directory name");
}

#[test]
fn hardlinks_outside_or_to_non_files_are_refused() {
    let scene = Scene::new();
    let canary = scene.sentinel.join("canary");
    let cases = [
        (
            "h1",
            "../sentinel/canary".to_string(),
            "outside the artifact",
        ),
        (
            "h2",
            canary.to_str().unwrap().to_string(),
            "outside the artifact",
        ),
        ("h3", "not-in-archive".to_string(), "not a regular file"),
        ("h4", "a-link".to_string(), "not a regular file"),
        ("h5", "a-dir".to_string(), "not a regular file"),
    ];
    for (name, target, reason) in cases {
        let scene = Scene::new();
        let tar = RawTar::default()
            .entry("a-dir", DIRECTORY, 0o755, b"", "")
            .entry("a-link", SYMLINK, 0o777, b"", "a-dir")
            .entry(name, HARDLINK, 0o644, b"", &target)
            .finish();
        assert_unsafe(scene.extract(&tar), name, reason);
    }
    // A hardlink to an earlier file inside the archive works and hashes like a copy.
    let tar = RawTar::default()
        .file("data", b"shared")
        .entry("dir/alias", HARDLINK, 0o644, b"", "data")
        .finish();
    let extracted = scene.extract(&tar).unwrap();
    assert_eq!(fs::read(scene.dest.join("dir/alias")).unwrap(), b"shared");
    assert_eq!(extracted.tree_hash, tree_hash(&scene.dest).unwrap());
}

#[test]
fn devices_and_fifos_are_refused() {
    for (typeflag, reason) in [(CHAR, "device"), (BLOCK, "device"), (FIFO, "fifo")] {
        let scene = Scene::new();
        let tar = RawTar::default()
            .entry("node", typeflag, 0o666, b"", "")
            .finish();
        assert_unsafe(scene.extract(&tar), "node", reason);
        assert!(fs::symlink_metadata(scene.dest.join("node")).is_err());
    }
}

#[test]
fn setuid_setgid_and_sticky_bits_are_dropped() {
    let scene = Scene::new();
    let tar = RawTar::default()
        .entry("suid", REGULAR, 0o4755, b"#!/bin/sh\n", "")
        .entry("sgid", REGULAR, 0o2644, b"data", "")
        .entry("world-writable", REGULAR, 0o666, b"data", "")
        .entry("sticky", DIRECTORY, 0o1777, b"", "")
        .entry("locked", DIRECTORY, 0o000, b"", "")
        .file("locked/inside", b"still writable while extracting")
        .finish();
    let extracted = scene.extract(&tar).unwrap();
    let mode = |p: &str| {
        fs::symlink_metadata(scene.dest.join(p))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    };
    // Files are read-only as Pkg leaves them; folders stay 0o755.
    assert_eq!(mode("suid"), 0o555);
    assert_eq!(mode("sgid"), 0o444);
    assert_eq!(mode("world-writable"), 0o444);
    assert_eq!(mode("sticky"), 0o755);
    assert_eq!(mode("locked"), 0o755);
    assert_eq!(mode("locked/inside"), 0o444);
    assert_eq!(extracted.tree_hash, tree_hash(&scene.dest).unwrap());
}

#[test]
fn duplicate_entries_later_wins_and_never_writes_through_a_link() {
    let scene = Scene::new();
    let tar = RawTar::default()
        .file("same", b"first")
        .file("same", b"second")
        .entry("was-link", SYMLINK, 0o777, b"", "victim")
        .file("was-link", b"replaces the link")
        .entry("was-file", REGULAR, 0o755, b"exec", "")
        .entry("was-file", SYMLINK, 0o777, b"", "same")
        .finish();
    let extracted = scene.extract(&tar).unwrap();
    assert_eq!(fs::read(scene.dest.join("same")).unwrap(), b"second");
    assert!(
        !scene.dest.join("victim").exists(),
        "wrote through a symlink"
    );
    let meta = fs::symlink_metadata(scene.dest.join("was-link")).unwrap();
    assert!(meta.is_file());
    assert_eq!(
        fs::read_link(scene.dest.join("was-file")).unwrap(),
        Path::new("same")
    );
    assert_eq!(extracted.tree_hash, tree_hash(&scene.dest).unwrap());

    // A file where a directory was, or the reverse, is ambiguous: refused.
    let scene = Scene::new();
    let tar = RawTar::default()
        .entry("x", DIRECTORY, 0o755, b"", "")
        .file("x", b"file over dir")
        .finish();
    assert_unsafe(scene.extract(&tar), "x", "directory of the same name");
    let scene = Scene::new();
    let tar = RawTar::default()
        .file("y", b"file")
        .entry("y", DIRECTORY, 0o755, b"", "")
        .finish();
    assert_unsafe(scene.extract(&tar), "y", "not a directory");
}

#[test]
fn a_header_claiming_a_huge_size_is_refused_before_writing() {
    let scene = Scene::new();
    let mut tar = header(b"huge", REGULAR, 0o644, 1 << 50, b"").to_vec();
    tar.extend_from_slice(&[7u8; 4096]);
    match scene.extract_with(&tar, 1 << 20) {
        Err(ExtractError::TooLarge { limit }) => assert_eq!(limit, 1 << 20),
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert_eq!(scene.bytes_in_dest(), 0);
}

#[test]
fn a_gzip_bomb_stops_at_the_cap() {
    let scene = Scene::new();
    let cap = 4 << 20;
    // 64 MiB of zeros in one file (gzip makes that ~64 KiB), then many more in a second.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let zeros = vec![0u8; 1 << 20];
    for name in ["bomb-1", "bomb-2"] {
        gz.write_all(&header(name.as_bytes(), REGULAR, 0o644, 64 << 20, b""))
            .unwrap();
        for _ in 0..64 {
            gz.write_all(&zeros).unwrap();
        }
    }
    gz.write_all(&[0u8; 1024]).unwrap();
    let bomb = gz.finish().unwrap();
    assert!(bomb.len() < 1 << 20, "bomb is {} bytes", bomb.len());
    match scene.extract_with(&bomb, cap) {
        Err(ExtractError::TooLarge { limit }) => assert_eq!(limit, cap),
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert!(scene.bytes_in_dest() <= cap);

    // Many small files adding up past the cap are stopped too (tar headers count).
    let scene = Scene::new();
    let mut tar = RawTar::default();
    for i in 0..200 {
        tar = tar.file(&format!("f{i}"), &[1u8; 30_000]);
    }
    match scene.extract_with(&gzip(&tar.finish()), 1 << 20) {
        Err(ExtractError::TooLarge { .. }) => {}
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert!(scene.bytes_in_dest() <= 1 << 20);
}

#[test]
fn truncated_archives_are_corrupt() {
    let tar = RawTar::default()
        .file("a", &[1u8; 5000])
        .file("b", &[2u8; 5000])
        .finish();
    // Cut inside the data of `a`, plain and gzipped.
    let scene = Scene::new();
    assert_corrupt(scene.extract(&tar[..3000]), "truncated");
    // A file too big to travel in a batch (> 64 KiB), cut inside its data: it says which and
    // how much is missing.
    let big = RawTar::default().file("big", &[3u8; 200_000]).finish();
    let scene = Scene::new();
    assert_corrupt(
        scene.extract(&big[..100_512]),
        "truncated inside `big` (100000 of 200000 bytes missing)",
    );
    let scene = Scene::new();
    let gz = gzip(&tar);
    assert!(matches!(
        scene.extract(&gz[..gz.len() / 2]),
        Err(ExtractError::Corrupt(_))
    ));
    // Cut exactly at a header boundary: no end-of-archive marker.
    let scene = Scene::new();
    let boundary = 512 + 5120;
    assert_corrupt(scene.extract(&tar[..boundary]), "end-of-archive");
    // Cut inside a header.
    let scene = Scene::new();
    assert!(matches!(
        scene.extract(&tar[..boundary + 100]),
        Err(ExtractError::Corrupt(_))
    ));
    // Gzip with a broken CRC at the end.
    let scene = Scene::new();
    let mut bad = gzip(&tar);
    let n = bad.len();
    bad[n - 8] ^= 0xff;
    assert!(matches!(scene.extract(&bad), Err(ExtractError::Corrupt(_))));
}

#[test]
fn non_archives_are_corrupt() {
    let html = b"<!DOCTYPE html><html><body>404 Not Found</body></html>\n".repeat(20);
    for (bytes, part) in [
        (html, "not a tar archive"),
        (Vec::new(), "empty"),
        (b"\xfd7zXZ\0rest of an xz file".to_vec(), "xz"),
        (b"BZh91AY&SY".to_vec(), "bzip2"),
        (b"\x1f\x8bnot really gzip".to_vec(), ""),
    ] {
        let scene = Scene::new();
        assert_corrupt(scene.extract(&bytes), part);
    }
}

#[test]
fn the_destination_must_be_an_empty_directory() {
    let scene = Scene::new();
    fs::write(scene.dest.join("already"), b"x").unwrap();
    let tar = RawTar::default().file("a", b"a").finish();
    assert!(matches!(scene.extract(&tar), Err(ExtractError::Io { .. })));
}

/// Inputs that once crashed or misled a fuzz target (`fuzz/`), named `<target>-<what>`:
/// `extract-*` must extract or fail cleanly (with the hash equal to `tree_hash` on success),
/// `manifest-*` and `overrides-*` must parse or return an error, never panic.
#[test]
fn fuzz_regressions() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/fuzz-regressions");
    let mut seen = 0;
    for entry in fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        let bytes = fs::read(&path).unwrap();
        if name.starts_with("extract-") {
            let scene = Scene::new();
            if let Ok(extracted) = scene.extract_with(&bytes, 4 << 20) {
                assert_eq!(
                    extracted.tree_hash,
                    tree_hash(&scene.dest).unwrap(),
                    "{name}"
                );
            }
        } else if name.starts_with("manifest-") {
            if let Ok(text) = std::str::from_utf8(&bytes) {
                let _ = clima_artifact_manifest::Manifest::parse(text, &path)
                    .map_err(|e| e.to_string());
            }
        } else if name.starts_with("overrides-") {
            if let Ok(text) = std::str::from_utf8(&bytes) {
                let _ = clima_artifact_manifest::OverridesFile::parse(text, &path)
                    .map_err(|e| e.to_string());
            }
        } else {
            continue;
        }
        seen += 1;
    }
    eprintln!("{seen} fuzz regression inputs checked");
}

/// Extracts with a cap on the number of entries.
fn extract_entries(
    scene: &Scene,
    bytes: &[u8],
    max_entries: u64,
) -> Result<Extracted, ExtractError> {
    let result = extract_archive(
        bytes,
        &scene.dest,
        &ExtractLimits {
            max_entries,
            ..ExtractLimits::default()
        },
    );
    scene.assert_outside_untouched();
    result
}

/// Regular files, directories and symlinks under `dir`, counted recursively.
fn count_entries(dir: &Path) -> u64 {
    let mut n = 0;
    for entry in fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        n += 1;
        if entry.file_type().unwrap().is_dir() {
            n += count_entries(&entry.path());
        }
    }
    n
}

#[test]
fn millions_of_empty_entries_stop_at_the_entry_cap() {
    // 30 directories and 300 empty files: a small gzip, but many inodes.
    let mut tar = RawTar::default();
    for d in 0..30 {
        tar = tar.entry(&format!("d{d}/"), DIRECTORY, 0o755, b"", "");
        for f in 0..10 {
            tar = tar.file(&format!("d{d}/f{f}"), b"");
        }
    }
    let bytes = gzip(&tar.finish());
    let scene = Scene::new();
    let e = extract_entries(&scene, &bytes, 100).unwrap_err();
    assert!(
        matches!(e, ExtractError::TooManyEntries { limit: 100 }),
        "{e:?}"
    );
    assert!(
        e.to_string().contains("more than 100 entries")
            && e.to_string().contains("CLIMA_ARTIFACTS_MAX_ENTRIES"),
        "{e}"
    );
    assert!(count_entries(&scene.dest) <= 100);

    // Exactly at the cap is fine.
    let scene = Scene::new();
    let got = extract_entries(&scene, &bytes, 330).unwrap();
    assert_eq!(got.entries, 300);
    assert_eq!(count_entries(&scene.dest), 330);
}

#[test]
fn the_install_pipeline_applies_the_entry_cap_and_bounds_the_drain() {
    use clima_artifact_runtime::ensure_variant;
    use clima_artifact_runtime::{Error, SourceFailure};
    use clima_artifact_tests::{TestServer, assert_depot_clean, sha256, test_config, variant};

    let dir = tempfile::tempdir().unwrap();
    let depot = dir.path().join("depot");
    let mut config = test_config(std::slice::from_ref(&depot));
    config.max_entries = 20;
    let mut tar = RawTar::default();
    for f in 0..50 {
        tar = tar.file(&format!("f{f}"), b"x");
    }
    let tarball = gzip(&tar.finish());
    let hash = "0123456789abcdef0123456789abcdef01234567".parse().unwrap();
    let server = TestServer::start();
    server.serve("t.tar.gz", tarball.clone());
    let urls = [server.url("t.tar.gz")];

    // Right sha256: the cap is the reason, naming the variable.
    let v = variant(hash, &urls, sha256(&tarball));
    let e = ensure_variant("many", &v, dir.path(), &config).unwrap_err();
    let Error::DownloadFailed { failures, .. } = &e else {
        panic!("{e:?}")
    };
    let reason = failures[0].to_string();
    assert!(
        matches!(failures[0], SourceFailure::Archive { .. })
            && reason.contains("more than 20 entries")
            && reason.contains("CLIMA_ARTIFACTS_MAX_ENTRIES"),
        "{reason}"
    );
    assert_depot_clean(&depot);

    // Wrong bytes (tarball then 8 MiB of junk) without a `size`: the drain after the failed
    // unpack is bounded (1 MiB), long before the 8 MiB end, and the error says why.
    let mut long = tarball.clone();
    long.resize(tarball.len() + (8 << 20), 7);
    server.serve("t.tar.gz", long.clone());
    let e = ensure_variant("many", &v, dir.path(), &config).unwrap_err();
    let Error::DownloadFailed { failures, .. } = &e else {
        panic!("{e:?}")
    };
    let reason = failures[0].to_string();
    assert!(
        reason.contains("kept sending after the archive failed to unpack")
            && reason.contains("more than 20 entries")
            && reason.contains("stopped reading 1.0 MiB past it"),
        "{reason}"
    );
    let read: usize = reason
        .split(", at byte ")
        .nth(1)
        .and_then(|rest| rest.split(';').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{reason}"));
    assert!(read > tarball.len() && read < (3 << 20), "{reason}");
    assert_depot_clean(&depot);

    // With the manifest's `size`, the reader stops at byte size + 1.
    let mut v = v.clone();
    v.downloads[0].size = Some(tarball.len() as u64);
    let e = ensure_variant("many", &v, dir.path(), &config).unwrap_err();
    let Error::DownloadFailed { failures, .. } = &e else {
        panic!("{e:?}")
    };
    let reason = failures[0].to_string();
    assert!(
        reason.contains(&format!(
            "longer than the manifest's size of {} bytes: stopped reading at byte {}",
            tarball.len(),
            tarball.len() + 1
        )),
        "{reason}"
    );
    assert_depot_clean(&depot);
}

/// One pax record line, `<len> key=value\n`, its length counting itself.
fn pax_record(key: &str, value: &str) -> String {
    let body = format!(" {key}={value}\n");
    let mut len = body.len() + 1;
    while (len.to_string().len() + body.len()) != len {
        len += 1;
    }
    format!("{len}{body}")
}

#[test]
fn pax_sparse_files_are_refused_as_sparse() {
    // GNU tar --sparse --format=pax (format 1.0): an `x` header with GNU.sparse records, then
    // a "regular" entry under GNUSparseFile.0/ whose data starts with the sparse map.
    let pax: String = [
        ("GNU.sparse.major", "1"),
        ("GNU.sparse.minor", "0"),
        ("GNU.sparse.name", "data/field.nc"),
        ("GNU.sparse.realsize", "1048576"),
    ]
    .iter()
    .map(|(k, v)| pax_record(k, v))
    .collect();
    let mut map = b"1\n0\n512\n".to_vec();
    map.resize(512, 0);
    map.extend_from_slice(&[7u8; 512]);
    let scene = Scene::new();
    let tar = RawTar::default()
        .entry("./PaxHeaders/field.nc", b'x', 0o644, pax.as_bytes(), "")
        .entry("./GNUSparseFile.0/field.nc", REGULAR, 0o644, &map, "")
        .finish();
    assert_unsafe(
        scene.extract(&tar),
        "./GNUSparseFile.0/field.nc",
        "sparse files",
    );
    // The old GNU sparse entry type (`S`) too.
    let scene = Scene::new();
    let mut header = tar::Header::new_gnu();
    header.set_path("old-sparse.nc").unwrap();
    header.set_entry_type(tar::EntryType::GNUSparse);
    header.set_mode(0o644);
    header.set_size(512);
    let gnu = header.as_gnu_mut().unwrap();
    octal(&mut gnu.realsize, 4096);
    octal(&mut gnu.sparse[0].offset, 3584);
    octal(&mut gnu.sparse[0].numbytes, 512);
    header.set_cksum();
    let mut tar = header.as_bytes().to_vec();
    tar.extend_from_slice(&[7u8; 512]);
    tar.extend_from_slice(&[0u8; 1024]);
    assert_unsafe(scene.extract(&tar), "old-sparse.nc", "sparse files");
    assert!(
        std::fs::read_dir(&scene.dest)
            .map(|d| d.count() == 0)
            .unwrap_or(true)
    );
}

#[test]
fn a_hard_links_own_mode_applies_to_its_content_as_in_tar_jl() {
    // A 0o755 hard link to a 0o644 file: the link is an executable file with that content,
    // the target stays a plain file (Tar.jl copies, then applies the link's mode), and the
    // tree hash is what git computes for that tree.
    let scene = Scene::new();
    let tar = RawTar::default()
        .file("data.txt", b"shared bytes")
        .entry("run.sh", HARDLINK, 0o755, b"", "data.txt")
        .entry("same.txt", HARDLINK, 0o644, b"", "data.txt")
        .finish();
    let extracted = scene.extract(&tar).unwrap();
    let meta = |p: &str| fs::symlink_metadata(scene.dest.join(p)).unwrap();
    assert_eq!(meta("data.txt").permissions().mode() & 0o777, 0o444);
    assert_eq!(meta("run.sh").permissions().mode() & 0o777, 0o555);
    assert_eq!(
        fs::read(scene.dest.join("run.sh")).unwrap(),
        b"shared bytes"
    );
    use std::os::unix::fs::MetadataExt;
    // Same mode: one inode; another mode: a copy.
    assert_eq!(meta("same.txt").ino(), meta("data.txt").ino());
    assert_ne!(meta("run.sh").ino(), meta("data.txt").ino());
    assert_eq!(extracted.tree_hash, tree_hash(&scene.dest).unwrap());
    if clima_artifact_tests::have_git() {
        assert_eq!(
            extracted.tree_hash,
            clima_artifact_tests::git_tree_hash(&scene.dest)
        );
    }
}

#[test]
fn a_hard_link_to_itself_gives_the_file_the_links_mode_as_in_tar_jl() {
    // Tar.jl's "self hardlink": `file` (0o644, 1,234 bytes), then a hard link `file -> file`
    // with mode 0o755, extracts and hashes like the one file `file` with mode 0o755.
    let content: Vec<u8> = (0..1234u32).map(|i| (i % 251) as u8).collect();
    let scene = Scene::new();
    let tar = RawTar::default()
        .entry("file", REGULAR, 0o644, &content, "")
        .entry("file", HARDLINK, 0o755, b"", "file")
        .finish();
    let extracted = scene.extract(&tar).unwrap();
    let meta = fs::symlink_metadata(scene.dest.join("file")).unwrap();
    assert!(meta.is_file());
    assert_eq!(meta.permissions().mode() & 0o777, 0o555);
    assert_eq!(fs::read(scene.dest.join("file")).unwrap(), content);

    let one_file = Scene::new();
    let expected = one_file
        .extract(
            &RawTar::default()
                .entry("file", REGULAR, 0o755, &content, "")
                .finish(),
        )
        .unwrap();
    assert_eq!(extracted.tree_hash, expected.tree_hash);
    assert_eq!(extracted.tree_hash, tree_hash(&scene.dest).unwrap());
    if clima_artifact_tests::have_git() {
        assert_eq!(
            extracted.tree_hash,
            clima_artifact_tests::git_tree_hash(&scene.dest)
        );
    }
}

/// Issue 25, 7: many empty files with long paths (12 components of ~250 bytes each) cost
/// memory by their names, not their paths, before the download's sha256 is known to be
/// wrong. 10,000 such entries (a 0.25 MB .tar.gz; 29 MB of paths) took the installer to
/// about 80 MB of RSS when every entry kept its whole path (more than once); now it stays
/// under 48 MB. The peak is the installer's own (`VmHWM` of its process after `exec`, read
/// until it exits).
#[test]
fn long_paths_cost_memory_by_their_names_not_their_paths() {
    let mut b = tar::Builder::new(Vec::new());
    for i in 0..10_000 {
        let mut path: Vec<String> = (0..11)
            .map(|k| format!("d{k:02}{}", "x".repeat(247)))
            .collect();
        path.push(format!("f{i:06}{}", "y".repeat(200)));
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Regular);
        h.set_mode(0o644);
        h.set_size(0);
        b.append_data(&mut h, path.join("/"), std::io::empty())
            .unwrap();
    }
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&b.into_inner().unwrap()).unwrap();
    let tarball = gz.finish().unwrap();
    assert!(tarball.len() < 1 << 20, "{} bytes", tarball.len());
    let server = clima_artifact_tests::TestServer::start();
    server.serve("long.tar.gz", tarball);
    let dir = tempfile::tempdir().unwrap();
    let config = clima_artifact_tests::test_config(&[dir.path().join("depot")]);
    let wrong = clima_artifact_tests::sha256(b"not this tarball");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_install_one"))
        .args([
            "variant",
            "long",
            "0123456789abcdef0123456789abcdef01234567",
        ])
        .arg(wrong.to_hex())
        .arg(server.url("long.tar.gz"))
        .current_dir(dir.path())
        .envs(clima_artifact_tests::config_env(&config))
        .env("CLIMA_ARTIFACTS_RETRIES", "1")
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak_kib = 0u64;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        // VmHWM only grows; the last reading before the exit is the peak (to a few ms).
        let hwm = std::fs::read_to_string(&status_file).ok().and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        });
        peak_kib = peak_kib.max(hwm.unwrap_or(0));
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    assert_eq!(
        status.code(),
        Some(1),
        "the install must fail on the sha256"
    );
    assert!(peak_kib > 0, "never read the installer's VmHWM");
    let peak_mib = peak_kib / 1024;
    assert!(peak_mib < 48, "the installer's peak RSS was {peak_mib} MiB");
    assert_eq!(server.gets("long.tar.gz"), 1);
}
