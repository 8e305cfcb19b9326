//! Seekable tarballs (docs/seekable.md) against the real readers: `create` makes one of a
//! varied tree, and `7z`/`7zz` (`x -so` into `tar x`, and `t`), GNU tar, bsdtar, `gzip -t` or
//! `zstd -t`, and Python's tarfile must each accept it and extract a tree whose hash, by real
//! `git`, is the manifest's `git-tree-sha1`; the installer installs it; a new version keeps the
//! members of unchanged files byte for byte. A missing tool skips through
//! `clima_artifact_tests::skip`, and fails under CI (`.ci/run` installs them all).

mod common;

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use clima_artifact_manifest::{GitTreeSha1, GitTreeSha256, Manifest, Sha256};
use clima_artifact_runtime::extract::seekable::{self, Expected, IndexLimits};
use clima_artifact_tests::{git_tree_hash, git_tree_hash_sha256, have_git, skip};
use common::{Sandbox, assert_ok, cli, json};

/// Bytes of the file that spans several blocks (the default block size is 4 MiB).
const LARGE: usize = (9 << 20) + 123;

/// A tree with what a tarball must carry: nested folders, an executable, symlinks (one with a
/// target over 100 bytes), an empty file, a file of three blocks, a path over 100 bytes, names in
/// several scripts and with spaces, an empty folder (which no tarball holds: git cannot).
fn varied_tree(dir: &Path) {
    let deep = "a/nested/folder/with/a/rather/long/path/so/that/the/tar/header/needs/a/gnu/long/name/record";
    for d in ["bin", "données/été", "日本語", "empty/inside", deep] {
        fs::create_dir_all(dir.join(d)).unwrap();
    }
    fs::write(dir.join("README.md"), "seekable sample\n").unwrap();
    fs::write(dir.join("bin/tool"), "#!/bin/sh\necho tool\n").unwrap();
    fs::set_permissions(dir.join("bin/tool"), fs::Permissions::from_mode(0o755)).unwrap();
    fs::write(dir.join("empty.dat"), "").unwrap();
    fs::write(dir.join("données/été/température.csv"), "t,K\n0,273.15\n").unwrap();
    fs::write(dir.join("日本語/ファイル.txt"), "こんにちは\n").unwrap();
    fs::write(dir.join("name with spaces 🌍.txt"), "earth\n").unwrap();
    fs::write(dir.join(deep).join("leaf.nc"), "deep leaf\n").unwrap();
    let large: Vec<u8> = (0..LARGE as u32)
        .map(|i| {
            if i % 3 == 0 {
                (i.wrapping_mul(2_654_435_761) >> 13) as u8
            } else {
                b'x'
            }
        })
        .collect();
    fs::write(dir.join("large.bin"), large).unwrap();
    std::os::unix::fs::symlink("README.md", dir.join("latest")).unwrap();
    std::os::unix::fs::symlink("../../README.md", dir.join("données/été/readme")).unwrap();
    // A target over 100 bytes: a GNU long link record.
    std::os::unix::fs::symlink(format!("{deep}/leaf.nc"), dir.join("leaf-link")).unwrap();
}

/// A tarball made by `create`, with what the manifest says of it.
struct Made {
    sandbox: Sandbox,
    tarball: PathBuf,
    tree: GitTreeSha1,
    tree_sha256: GitTreeSha256,
    index_sha256: Option<Sha256>,
}

/// `create` of `varied_tree` into `file_name` (with `extra` arguments), checked against the
/// tree hashes real git computes for the folder.
fn create(file_name: &str, extra: &[&str]) -> Made {
    let sandbox = Sandbox::new();
    let content = sandbox.root.path().join("content");
    varied_tree(&content);
    let out = cli(&sandbox.depot, &sandbox.work)
        .args([
            "create",
            "content",
            "--name",
            "data",
            "--json",
            "--tarball-out",
        ])
        .arg(sandbox.work.join(file_name))
        // The tarball's own `file://` URL, unless `extra` gives one.
        .args(
            (!extra.contains(&"--url"))
                .then(|| {
                    [
                        "--url".to_owned(),
                        format!("file://{}", sandbox.work.join(file_name).display()),
                    ]
                })
                .into_iter()
                .flatten(),
        )
        .args(extra)
        .current_dir(sandbox.root.path())
        .output()
        .unwrap();
    assert_ok(&out);
    let created = json(&out);
    let manifest_path = sandbox.root.path().join("Artifacts.toml");
    let manifest = Manifest::load(&manifest_path).unwrap();
    let Some(clima_artifact_manifest::ArtifactEntry::Single(v)) = manifest.get("data") else {
        panic!(
            "no entry `data` in {}",
            fs::read_to_string(&manifest_path).unwrap()
        );
    };
    let tree = v.git_tree_sha1;
    assert_eq!(
        tree,
        git_tree_hash(&content),
        "the manifest's tree is the folder's, by git"
    );
    assert_eq!(created["git_tree_sha1"], tree.to_hex());
    let index_sha256 = v.downloads[0].index_sha256;
    assert_eq!(
        created.get("index_sha256").and_then(|h| h.as_str()),
        index_sha256.map(|h| h.to_hex()).as_deref()
    );
    Made {
        tarball: sandbox.work.join(file_name),
        tree_sha256: git_tree_hash_sha256(&content),
        sandbox,
        tree,
        index_sha256,
    }
}

/// The path of `tool` on PATH; `None` after `skip` outside CI, a panic under CI.
fn tool(tool: &str, package: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join(tool))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        let why = format!("`{tool}` is not installed (Debian package `{package}`)");
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("{why}: CI must run this test (scripts/ci-packages.sh installs it)");
        }
        skip(&why);
    }
    found
}

/// Runs `cmd`, asserting it exits 0; returns its stdout.
#[track_caller]
fn run(cmd: &mut Command) -> Vec<u8> {
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Feeds `stdin` to `cmd`, asserting it exits 0.
#[track_caller]
fn run_with_input(cmd: &mut Command, stdin: &[u8]) {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A fresh folder to extract into.
fn fresh(made: &Made, name: &str) -> PathBuf {
    let dir = made.sandbox.root.path().join("x").join(name);
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// The tree `reader` extracted into `dir` must be the manifest's; from a seekable tarball,
/// without a folder that git would leave out (an empty one; a classic tarball keeps those).
#[track_caller]
fn assert_tree(made: &Made, dir: &Path, reader: &str) {
    assert_eq!(
        git_tree_hash(dir),
        made.tree,
        "{reader} extracted another tree"
    );
    assert_eq!(
        dir.join("empty").exists(),
        made.index_sha256.is_none(),
        "{reader}: an empty folder is in a classic tarball only"
    );
}

/// `7z x -so FILE` read to its end (as Tar.jl reads it, Pkg's path), then `tar x`; and `7z t`.
fn seven_zip(made: &Made, exe: &Path, name: &str) {
    let stream = run(Command::new(exe).arg("x").arg("-so").arg(&made.tarball));
    let dir = fresh(made, name);
    run_with_input(Command::new("tar").arg("x").arg("-C").arg(&dir), &stream);
    assert_tree(made, &dir, name);
    // Exit 0: nothing after the payload (7-Zip exits 2 on a trailer or padding).
    run(Command::new(exe).arg("t").arg(&made.tarball));
}

/// Every real reader of the flavour, and the installer.
fn every_reader_extracts_the_manifests_tree(made: &Made, zstd: bool) {
    if !have_git() {
        return;
    }
    // `tar --zstd` and the Python check of `.tar.zst` need `zstd` too.
    if zstd && tool("zstd", "zstd").is_none() {
        return;
    }
    for (exe, package) in [("7z", "p7zip-full"), ("7zz", "7zip")] {
        if let Some(path) = tool(exe, package) {
            seven_zip(made, &path, exe);
        }
    }
    let gnu = fresh(made, "gnu-tar");
    let flag = if zstd { "--zstd" } else { "-z" };
    run(Command::new("tar")
        .args(["-x", flag, "-f"])
        .arg(&made.tarball)
        .arg("-C")
        .arg(&gnu));
    assert_tree(made, &gnu, "GNU tar");
    if let Some(bsdtar) = tool("bsdtar", "libarchive-tools") {
        let dir = fresh(made, "bsdtar");
        run(Command::new(bsdtar)
            .arg("xf")
            .arg(&made.tarball)
            .arg("-C")
            .arg(&dir));
        assert_tree(made, &dir, "bsdtar");
    }
    let (tester, package) = if zstd {
        ("zstd", "zstd")
    } else {
        ("gzip", "gzip")
    };
    if let Some(exe) = tool(tester, package) {
        run(Command::new(exe).arg("-t").arg(&made.tarball));
    }
    if let Some(python) = tool("python3", "python3") {
        let dir = fresh(made, "python");
        if zstd {
            // Python's tarfile reads no zstd before 3.14: the tar stream, from `zstd -dc`.
            let script = "import sys, tarfile\n\
                          tarfile.open(fileobj=sys.stdin.buffer, mode='r|').extractall(sys.argv[1])\n";
            let stream = run(Command::new("zstd").arg("-dc").arg(&made.tarball));
            run_with_input(Command::new(python).args(["-c", script]).arg(&dir), &stream);
        } else {
            // The file opened by name (`r:*`, through gzip.GzipFile, which reads every member).
            let script = "import sys, tarfile\ntarfile.open(sys.argv[2]).extractall(sys.argv[1])\n";
            run(Command::new(python)
                .args(["-c", script])
                .arg(&dir)
                .arg(&made.tarball));
        }
        assert_tree(made, &dir, "Python's tarfile");
    }
    // The installer: `fetch` downloads it from its file:// URL, checks sha256 and tree.
    let out = cli(&made.sandbox.depot, made.sandbox.root.path())
        .args(["fetch", "data"])
        .output()
        .unwrap();
    assert_ok(&out);
    let installed = made
        .sandbox
        .depot
        .join("artifacts")
        .join(made.tree.to_hex());
    assert_eq!(git_tree_hash(&installed), made.tree);
}

/// The index authenticates against the manifest, every member holds what it says, and the
/// file ends with the footer.
fn the_index_authenticates(made: &Made) -> seekable::Authenticated {
    let mut file = fs::File::open(&made.tarball).unwrap();
    let len = file.metadata().unwrap().len();
    let limits = IndexLimits::default();
    let (locator, doc) = seekable::read_index(&mut file, len, &limits)
        .unwrap()
        .expect("a seekable tarball has a footer");
    let expected = Expected {
        tree_sha1: made.tree,
        tree_sha256: Some(made.tree_sha256),
        index_sha256: made.index_sha256,
    };
    let index = seekable::authenticate(&doc, &locator, &expected, &limits).unwrap();
    assert!(index.blocks_trusted());
    index.verify_file(&mut file).unwrap();
    let large = index
        .index()
        .entries
        .iter()
        .find(|e| e.path == b"large.bin")
        .unwrap();
    assert_eq!(large.blocks.len(), 3, "9 MiB in blocks of 4 MiB");
    index
}

#[test]
fn every_reader_extracts_the_manifests_tree_from_a_seekable_tar_gz() {
    let made = create("data.tar.gz", &[]);
    let bytes = fs::read(&made.tarball).unwrap();
    assert_eq!(bytes[..2], [0x1f, 0x8b], "begins with a gzip member");
    the_index_authenticates(&made);
    every_reader_extracts_the_manifests_tree(&made, false);
}

#[test]
fn every_reader_extracts_the_manifests_tree_from_a_seekable_tar_zst() {
    let made = create("data.tar.zst", &[]);
    let bytes = fs::read(&made.tarball).unwrap();
    assert_eq!(
        bytes[..4],
        [0x28, 0xb5, 0x2f, 0xfd],
        "begins with a regular zstd frame"
    );
    the_index_authenticates(&made);
    every_reader_extracts_the_manifests_tree(&made, true);
}

#[test]
fn classic_writes_a_single_stream_that_installs_as_before() {
    let made = create("data.tar.gz", &["--classic"]);
    let mut file = fs::File::open(&made.tarball).unwrap();
    let len = file.metadata().unwrap().len();
    assert_eq!(
        seekable::read_index(&mut file, len, &IndexLimits::default()).unwrap(),
        None,
        "no index in a classic tarball"
    );
    assert_eq!(made.index_sha256, None, "no index-sha256 key");
    every_reader_extracts_the_manifests_tree(&made, false);
}

/// What a new version does to the tree of version 1.
#[derive(Clone, Copy, PartialEq)]
enum Change {
    /// `README.md` edited, nothing else.
    OneFile,
    /// `README.md` edited, `a new file` added, `name with spaces 🌍.txt` removed.
    AddedAndRemoved,
}

/// `create` of version 1 into `file_name`, then of version 2 after `change`: every file of
/// version 2 that version 1 had unchanged has, by the two indexes, the very same member bytes;
/// the changed file's differ; the added file is new; the removed one is gone.
fn a_new_version_keeps_unchanged_members(file_name: &str, change: Change) {
    let v1 = create(file_name, &[]);
    let old = v1.the_members();
    let content = v1.sandbox.root.path().join("content");
    fs::write(content.join("README.md"), "seekable sample, version 2\n").unwrap();
    let (added, removed): (&[u8], &[u8]) = (b"a new file", "name with spaces 🌍.txt".as_bytes());
    if change == Change::AddedAndRemoved {
        fs::write(content.join("a new file"), "new\n").unwrap();
        fs::remove_file(content.join("name with spaces 🌍.txt")).unwrap();
    }
    let v2_name = format!("v2-{file_name}");
    let out = cli(&v1.sandbox.depot, &v1.sandbox.work)
        .args([
            "create",
            "content",
            "--name",
            "data",
            "--json",
            "--tarball-out",
        ])
        .arg(v1.sandbox.work.join(&v2_name))
        .current_dir(v1.sandbox.root.path())
        .output()
        .unwrap();
    assert_ok(&out);
    let created = json(&out);
    let v2 = Made {
        tarball: v1.sandbox.work.join(&v2_name),
        tree: GitTreeSha1::from_hex(created["git_tree_sha1"].as_str().unwrap()).unwrap(),
        tree_sha256: git_tree_hash_sha256(&content),
        index_sha256: created["index_sha256"]
            .as_str()
            .map(|h| Sha256::from_hex(h).unwrap()),
        sandbox: v1.sandbox,
    };
    assert_ne!(v2.tree, v1.tree);
    let magic = |p: &Path| fs::read(p).unwrap()[..4].to_vec();
    assert_eq!(
        magic(&v2.tarball),
        magic(&v1.tarball),
        "{file_name}: the same format"
    );
    let new = v2.the_members();
    let mut same = 0;
    for (path, bytes) in &new {
        if path == b"README.md" || path == added {
            continue;
        }
        assert!(
            Some(bytes) == old.get(path),
            "{file_name}: the members of `{}` changed",
            String::from_utf8_lossy(path)
        );
        same += 1;
    }
    assert_ne!(
        new.get(b"README.md".as_slice()),
        old.get(b"README.md".as_slice()),
        "{file_name}: the changed file's members"
    );
    match change {
        Change::OneFile => {
            assert_eq!(
                same,
                old.len() - 1,
                "{file_name}: every unchanged file compared"
            );
        }
        Change::AddedAndRemoved => {
            assert!(new.contains_key(added) && !old.contains_key(added));
            assert!(old.contains_key(removed) && !new.contains_key(removed));
            assert_eq!(
                same,
                old.len() - 2,
                "{file_name}: every unchanged file compared"
            );
        }
    }
}

#[test]
fn a_new_version_keeps_the_members_of_unchanged_files_byte_for_byte() {
    a_new_version_keeps_unchanged_members("data.tar.gz", Change::AddedAndRemoved);
}

#[test]
fn a_new_version_with_one_file_changed_keeps_every_other_member() {
    a_new_version_keeps_unchanged_members("data.tar.gz", Change::OneFile);
    a_new_version_keeps_unchanged_members("data.tar.zst", Change::OneFile);
}

#[test]
fn a_new_tar_zst_version_with_a_file_added_and_one_removed_keeps_the_other_members() {
    a_new_version_keeps_unchanged_members("data.tar.zst", Change::AddedAndRemoved);
}

impl Made {
    /// Each entry's members (their bytes in the file), by path.
    fn the_members(&self) -> std::collections::BTreeMap<Vec<u8>, Vec<u8>> {
        let bytes = fs::read(&self.tarball).unwrap();
        let index = self.the_index();
        index
            .index()
            .entries
            .iter()
            .map(|e| {
                let range = e.offset as usize..(e.offset + e.length) as usize;
                (e.path.clone(), bytes[range].to_vec())
            })
            .collect()
    }

    fn the_index(&self) -> seekable::Authenticated {
        the_index_authenticates(self)
    }
}

#[test]
fn publish_records_the_index_sha256_only_of_an_index_that_holds() {
    let made = create("data.tar.gz", &[]);
    let manifest = made.sandbox.root.path().join("Artifacts.toml");
    let store = made.sandbox.root.path().join("store");
    let publish = |tarball: &Path| {
        cli(&made.sandbox.depot, made.sandbox.root.path())
            .arg("publish")
            .arg(tarball)
            .args(["--name", "data", "--json", "--manifest"])
            .arg(&manifest)
            .arg("--to")
            .arg(format!("file://{}", store.display()))
            .output()
            .unwrap()
    };
    let out = publish(&made.tarball);
    assert_ok(&out);
    let index = made.index_sha256.unwrap().to_hex();
    assert_eq!(json(&out)["index_sha256"], index.as_str());
    let text = fs::read_to_string(&manifest).unwrap();
    assert_eq!(
        text.matches(&format!("index-sha256 = \"{index}\"")).count(),
        2,
        "{text}"
    );

    // The same tarball whose index lies about a block's digest: installable by any reader, but
    // its index is not published.
    let bytes = fs::read(&made.tarball).unwrap();
    let authenticated = the_index_authenticates(&made);
    let mut index = authenticated.index().clone();
    let large = index
        .entries
        .iter_mut()
        .find(|e| e.path == b"large.bin")
        .unwrap();
    large.blocks[2].sha256[0] ^= 1;
    let mut lying = bytes[..index.data_size as usize].to_vec();
    let mut encoder = seekable::MemberEncoder::new(seekable::Flavour::Gzip).unwrap();
    seekable::write_tail(&mut lying, &mut encoder, index.data_size, &index.encode()).unwrap();
    let lying_path = made.sandbox.work.join("lying.tar.gz");
    fs::write(&lying_path, lying).unwrap();
    let out = publish(&lying_path);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("whose index cannot be used")
            && stderr.contains("block 2's content does not have the index's digest"),
        "{stderr}"
    );
    assert!(!store.join("lying.tar.gz").exists(), "nothing was uploaded");
}

#[test]
fn fetch_unpacks_a_seekable_tarball_with_the_workers_the_variable_says() {
    let made = create("data.tar.gz", &[]);
    assert!(made.index_sha256.is_some());
    for threads in ["1", "3"] {
        let depot = made.sandbox.root.path().join(format!("depot-{threads}"));
        let out = cli(&depot, made.sandbox.root.path())
            .args(["fetch", "data"])
            .env("CLIMA_ARTIFACTS_INSTALL_THREADS", threads)
            .output()
            .unwrap();
        assert_ok(&out);
        let installed = depot.join("artifacts").join(made.tree.to_hex());
        assert_eq!(
            fs::read(installed.join("large.bin")).unwrap(),
            fs::read(made.sandbox.root.path().join("content/large.bin")).unwrap(),
            "{threads} workers"
        );
        if have_git() {
            assert_eq!(git_tree_hash(&installed), made.tree, "{threads} workers");
        }
    }
    // Not a number of workers: refused, naming the variable.
    let out = cli(
        &made.sandbox.root.path().join("depot-0"),
        made.sandbox.root.path(),
    )
    .args(["fetch", "data"])
    .env("CLIMA_ARTIFACTS_INSTALL_THREADS", "0")
    .output()
    .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("CLIMA_ARTIFACTS_INSTALL_THREADS"),
        "{stderr}"
    );
}

/// `fetch NAME --only PATH...` (issue 49, item 3): a file and a folder of a seekable artifact
/// served over loopback come alone, by byte ranges, into the depot's partial folder (the bytes
/// the server sent stay near those files' members and the index); `artifacts/<hash>` is not
/// made; `list` says `partial: N of M files`; a later `fetch NAME` installs the whole artifact.
#[test]
fn fetch_only_fetches_some_files_and_list_says_partial() {
    let server = clima_artifact_tests::TestServer::start();
    let made = create("data.tar.gz", &["--url", &server.url("data.tar.gz")]);
    server.serve("data.tar.gz", fs::read(&made.tarball).unwrap());
    let auth = the_index_authenticates(&made);
    let root = made.sandbox.root.path();
    let depot = root.join("depot-partial");
    let out = cli(&depot, root)
        .args([
            "fetch",
            "data",
            "--json",
            "--only",
            "README.md",
            "données/été",
        ])
        .output()
        .unwrap();
    assert_ok(&out);
    let got = json(&out);
    assert_eq!(got["held_as"], "partial", "{got}");
    assert_eq!(got["fetched"], 3, "{got}");
    let partial = depot.join("clima_partial").join(made.tree.to_hex());
    assert_eq!(
        got["paths"][0].as_str().unwrap(),
        partial.join("README.md").to_str().unwrap()
    );
    assert_eq!(
        fs::read_to_string(partial.join("données/été/température.csv")).unwrap(),
        "t,K\n0,273.15\n"
    );
    assert_eq!(
        fs::read_link(partial.join("données/été/readme")).unwrap(),
        Path::new("../../README.md")
    );
    assert!(!depot.join("artifacts").join(made.tree.to_hex()).exists());
    let members: u64 = auth
        .index()
        .entries
        .iter()
        .filter(|e| e.path == b"README.md" || e.path.starts_with("données/été/".as_bytes()))
        .map(|e| e.length)
        .sum();
    let bound = members
        + auth.locator().index_length
        + seekable::remote::FIRST_TAIL
        + 2 * seekable::remote::MAX_GAP;
    let sent = server.bytes_sent_for("data.tar.gz");
    assert!(sent <= bound, "{sent} bytes sent; bound {bound}");
    assert!(
        sent * 20 < fs::metadata(&made.tarball).unwrap().len(),
        "{sent}"
    );

    // A symlink brings its target: the path returned can be read.
    let out = cli(&depot, root)
        .args(["fetch", "data", "--json", "--only", "leaf-link"])
        .output()
        .unwrap();
    assert_ok(&out);
    assert_eq!(json(&out)["fetched"], 2, "{}", json(&out));
    assert_eq!(
        fs::read_to_string(partial.join("leaf-link")).unwrap(),
        "deep leaf\n"
    );

    let total = auth.index().entries.len();
    let out = cli(&depot, root).args(["list"]).output().unwrap();
    assert_ok(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("partial: 5 of {total} files")),
        "{text}"
    );
    let out = cli(&depot, root).args(["list", "--json"]).output().unwrap();
    let rows = json(&out);
    assert_eq!(rows[0]["partial_files"], 5, "{rows}");

    // The whole artifact afterwards: installed as always, and `--only` answers inside it.
    let out = cli(&depot, root).args(["fetch", "data"]).output().unwrap();
    assert_ok(&out);
    let whole = depot.join("artifacts").join(made.tree.to_hex());
    if have_git() {
        assert_eq!(git_tree_hash(&whole), made.tree);
    }
    let out = cli(&depot, root)
        .args(["fetch", "data", "--json", "--only", "README.md"])
        .output()
        .unwrap();
    assert_ok(&out);
    let got = json(&out);
    assert_eq!(got["held_as"], "whole", "{got}");
    assert_eq!(
        got["paths"][0].as_str().unwrap(),
        whole.join("README.md").to_str().unwrap()
    );
}

/// `--only` with several artifacts, or with a path that is not in the artifact, is refused
/// with what to do.
#[test]
fn fetch_only_refuses_several_artifacts_and_missing_paths() {
    let made = create("data.tar.gz", &[]);
    let root = made.sandbox.root.path();
    let depot = root.join("depot-refused");
    let out = cli(&depot, root)
        .args(["fetch", "data", "data", "--only", "README.md"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("one artifact"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = cli(&depot, root)
        .args(["fetch", "data", "--only", "no/such/file"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no/such/file"), "{stderr}");
    assert!(!depot.join("artifacts").join(made.tree.to_hex()).exists());
}

/// Only what changed (issue 49, item 4), through the CLI: with version 1 installed, `fetch` of
/// version 2 (one small file changed) copies every other file from version 1's folder,
/// checked, and receives only that file's members, the index and the tail; the installed tree
/// is version 2's, by git.
#[test]
fn fetch_of_a_new_version_receives_only_the_changed_file() {
    let server = clima_artifact_tests::TestServer::start();
    let v1 = create("v1.tar.gz", &["--url", &server.url("v1.tar.gz")]);
    server.serve("v1.tar.gz", fs::read(&v1.tarball).unwrap());
    let root = v1.sandbox.root.path().to_path_buf();
    let root = root.as_path();
    let v1_tree = v1.tree;
    let depot = root.join("depot-versions");
    let out = cli(&depot, root).args(["fetch", "data"]).output().unwrap();
    assert_ok(&out);
    let content = root.join("content");
    fs::write(content.join("README.md"), "seekable sample, version 2\n").unwrap();
    let out = cli(&v1.sandbox.depot, &v1.sandbox.work)
        .args(["create", "content", "--name", "data", "--json"])
        .arg("--tarball-out")
        .arg(v1.sandbox.work.join("v2.tar.gz"))
        .args(["--url", &server.url("v2.tar.gz")])
        .current_dir(root)
        .output()
        .unwrap();
    assert_ok(&out);
    let created = json(&out);
    let v2 = Made {
        tarball: v1.sandbox.work.join("v2.tar.gz"),
        tree: GitTreeSha1::from_hex(created["git_tree_sha1"].as_str().unwrap()).unwrap(),
        tree_sha256: git_tree_hash_sha256(&content),
        index_sha256: created["index_sha256"]
            .as_str()
            .map(|h| Sha256::from_hex(h).unwrap()),
        sandbox: v1.sandbox,
    };
    assert_ne!(v2.tree, v1_tree);
    server.serve("v2.tar.gz", fs::read(&v2.tarball).unwrap());
    let out = cli(&depot, root).args(["fetch", "data"]).output().unwrap();
    assert_ok(&out);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("copied from files the depot held"), "{said}");
    let whole = depot.join("artifacts").join(v2.tree.to_hex());
    assert_eq!(git_tree_hash(&whole), v2.tree);
    if have_git() {
        assert_eq!(git_tree_hash(&content), v2.tree);
    }
    let auth = the_index_authenticates(&v2);
    let readme = auth
        .index()
        .entries
        .iter()
        .find(|e| e.path == b"README.md")
        .unwrap()
        .length;
    let bound = readme
        + auth.locator().index_length
        + seekable::remote::FIRST_TAIL
        + seekable::remote::MAX_GAP;
    let sent = server.bytes_sent_for("v2.tar.gz");
    assert!(
        sent <= bound,
        "{sent} bytes sent for version 2; bound {bound}"
    );
    assert!(
        sent * 20 < fs::metadata(&v2.tarball).unwrap().len(),
        "{sent}"
    );
    // Version 1 is still there, unchanged.
    let one = depot.join("artifacts").join(v1_tree.to_hex());
    assert_eq!(git_tree_hash(&one), v1_tree);
}

/// `--only` on a classic (single-stream) tarball cannot fetch files alone: it says so and
/// installs the whole artifact, and gives the paths inside it.
#[test]
fn fetch_only_of_a_classic_tarball_installs_it_whole_and_says_so() {
    let made = create("data.tar.gz", &["--classic"]);
    assert!(made.index_sha256.is_none());
    let root = made.sandbox.root.path();
    let depot = root.join("depot-classic");
    let out = cli(&depot, root)
        .args(["fetch", "data", "--json", "--only", "README.md"])
        .output()
        .unwrap();
    assert_ok(&out);
    let got = json(&out);
    assert_eq!(got["held_as"], "whole", "{got}");
    let whole = depot.join("artifacts").join(made.tree.to_hex());
    assert_eq!(
        got["paths"][0].as_str().unwrap(),
        whole.join("README.md").to_str().unwrap()
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cannot fetch only some files of `data`"),
        "{stderr}"
    );
}
