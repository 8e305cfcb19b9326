//! A package server (CLIMA_ARTIFACTS_PKG_SERVER) is tried first and has no sha256 to be
//! checked against: only the tree hash vouches for what it sends. What the tree hash does not
//! cover is never installed from it, and its bodies are bounded like any other download.

use std::path::Path;

use clima_artifact_runtime::ensure_variant;
use clima_artifact_tests::{
    Fault, TarballBuilder, TestArtifact, TestServer, have_git, test_config,
};

/// The artifact's real content.
fn content() -> TarballBuilder {
    TarballBuilder::new()
        .file("README.md", "forcing data\n")
        .file("data/t2m.csv", "t,k\n0,273.15\n".repeat(40))
        .exec("bin/convert.sh", "#!/bin/sh\nexit 0\n")
}

/// Issue 25, 3: a package server (or anyone on the path to an http one) adds a `.git` folder
/// whose config runs a command on `git status`, and empty folders. The tree hash is the same
/// (it covers neither), so the install succeeds: without either of them.
#[test]
fn what_the_tree_hash_does_not_cover_is_never_installed_from_a_package_server() {
    if !have_git() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("fsmonitor-ran");
    let git_config = format!(
        "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tfsmonitor = \"touch {}\"\n",
        marker.display()
    );
    let hostile = content()
        .dir(".git")
        .file(".git/HEAD", "ref: refs/heads/main\n")
        .file(".git/config", git_config)
        .dir(".git/objects")
        .dir(".git/refs")
        .dir("empty")
        .dir("data/also-empty");
    // The manifest's hashes are those of the real content; its own URL answers 404, so the
    // package server's copy is what gets installed.
    let real = TestArtifact::gzip(content());
    let served = TestArtifact::with_bytes(content(), hostile.gzip());
    assert_eq!(real.tree_hash, served.tree_hash);
    let server = TestServer::start();
    server.serve(
        &format!("artifact/{}", real.tree_hash),
        served.tarball.clone(),
    );
    server.always("gone.tar.gz", Fault::Status(404));

    let depot = dir.path().join("depot");
    let mut config = test_config(std::slice::from_ref(&depot));
    config.pkg_server = Some(server.base());
    let got = ensure_variant(
        "forcing",
        &real.variant(&[server.url("gone.tar.gz")]),
        dir.path(),
        &config,
    )
    .unwrap();
    assert_eq!(server.gets(&format!("artifact/{}", real.tree_hash)), 1);
    real.assert_content(&got.path);
    for extra in [".git", "empty", "data/also-empty"] {
        assert!(
            std::fs::symlink_metadata(got.path.join(extra)).is_err(),
            "`{extra}` from the package server was installed"
        );
    }
    // And git inside the artifact has no configuration of the server's to run.
    let _ = std::process::Command::new("git")
        .arg("status")
        .current_dir(&got.path)
        .env("GIT_CEILING_DIRECTORIES", dir.path())
        .output();
    assert!(
        !marker.exists(),
        "git ran the package server's fsmonitor command"
    );
}

/// Issue 25, 5: a package server that sends a long body without a `Content-Length` stops
/// being read past CLIMA_ARTIFACTS_MAX_DOWNLOAD_SIZE (the manifest's `size` is that of its
/// own tarball, not the server's), and the manifest's URL then installs the artifact.
#[test]
fn a_package_server_body_is_bounded_by_the_download_limit() {
    if !have_git() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let real = TestArtifact::gzip(content());
    // An uncompressed tar of 32 MiB of zeros, sent without a length and followed by zeros.
    let long = TarballBuilder::new()
        .file("zeros.bin", vec![0u8; 32 << 20])
        .tar();
    let server = TestServer::start();
    let pkg_path = format!("artifact/{}", real.tree_hash);
    server.serve(&pkg_path, long);
    server.always(&pkg_path, Fault::Endless);
    server.serve("forcing.tar.gz", real.tarball.clone());

    let depot = dir.path().join("depot");
    let mut config = test_config(std::slice::from_ref(&depot));
    config.pkg_server = Some(server.base());
    config.max_download_size = Some(1 << 20);
    let mut variant = real.variant(&[server.url("forcing.tar.gz")]);
    variant.downloads[0].size = Some(real.tarball.len() as u64);
    let got = ensure_variant("forcing", &variant, dir.path(), &config).unwrap();
    real.assert_content(&got.path);
    let sent = server.bytes_sent_for(&pkg_path);
    // The limit, plus what the sockets' buffers took before the reader stopped.
    assert!(
        sent < 8 << 20,
        "{sent} bytes of the package server's body were sent for a limit of 1 MiB"
    );
    assert!(
        !Path::new(&depot.join("artifacts"))
            .join("zeros.bin")
            .exists(),
        "nothing of the server's body is installed"
    );
}

/// Issue 25, 14: an archive entry named with terminal escape sequences (retitle, clear the
/// screen) and a forged log line: the error that names it prints it escaped.
#[test]
fn archive_entry_names_are_printed_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let hostile = content().symlink(
        "\u{1b}]0;pwned\u{7}\u{1b}[2J\nerror: forged line",
        "/etc/\u{1b}[31mpasswd",
    );
    let real = TestArtifact::gzip(content());
    let server = TestServer::start();
    server.serve(&format!("artifact/{}", real.tree_hash), hostile.gzip());
    server.always("gone.tar.gz", Fault::Status(404));
    let depot = dir.path().join("depot");
    let mut config = test_config(std::slice::from_ref(&depot));
    config.pkg_server = Some(server.base());
    let e = ensure_variant(
        "forcing",
        &real.variant(&[server.url("gone.tar.gz")]),
        dir.path(),
        &config,
    )
    .unwrap_err();
    let text = format!("{e}");
    assert!(text.contains("pwned"), "{text}");
    assert!(
        !text.contains('\u{1b}') && !text.contains("\nerror: forged"),
        "raw control characters in: {text:?}"
    );
    assert!(text.contains("\\u{1b}]0;pwned"), "{text}");
}

/// Issue 25, 13: credentials in the package server's URL (a token as user name or password)
/// are never printed: not in the warning that it failed, not in the final error.
#[test]
fn credentials_in_the_package_server_url_are_never_printed() {
    let dir = tempfile::tempdir().unwrap();
    let real = TestArtifact::gzip(content());
    let server = TestServer::start();
    server.always(&format!("artifact/{}", real.tree_hash), Fault::Status(503));
    server.always("gone.tar.gz", Fault::Status(404));
    let config = test_config(&[dir.path().join("depot")]);
    let with_token = server
        .base()
        .replace("http://", "http://alice:s3cret-t0ken@");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_install_one"))
        .args([
            "variant",
            "forcing",
            &real.tree_hash.to_hex(),
            &real.sha256.to_hex(),
        ])
        .arg(server.url("gone.tar.gz"))
        .current_dir(dir.path())
        .envs(clima_artifact_tests::config_env(&config))
        .env("CLIMA_ARTIFACTS_PKG_SERVER", &with_token)
        .env("CLIMA_ARTIFACTS_RETRIES", "1")
        .output()
        .unwrap();
    let all =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{all}");
    assert!(all.contains("503") && all.contains("/artifact/"), "{all}");
    assert!(
        !all.contains("s3cret-t0ken"),
        "the token was printed: {all}"
    );
}

/// Issue 37, item 4: a package server answers `bytes=a-b` with 206 (as PkgServer.jl does), so
/// its copy of a large artifact is fetched over several connections like any URL; with no
/// sha256 known for it, the tree hash is the only check, and a copy whose content differs is
/// refused however it arrived.
#[test]
fn a_package_servers_large_copy_comes_over_several_ranged_connections() {
    if !have_git() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let art = TestArtifact::large(3704, 8, 500_000);
    let path = format!("artifact/{}", art.tree_hash);
    let server = TestServer::start();
    // Capped streams, so that the connections overlap as on a real link (uncapped, loopback
    // can deliver the whole file over the first connection before a second one opens).
    server.cap_rate(4_000_000);
    server.serve(&path, art.tarball.clone());
    server.always("gone.tar.gz", Fault::Status(404));
    let depot = dir.path().join("depot");
    let mut config = clima_artifact_runtime::Config {
        pkg_server: Some(server.base()),
        ..test_config(std::slice::from_ref(&depot))
    };
    config.net.connections = 4;
    config.net.parallel_min_size = 1 << 20;
    let variant = art.variant(&[server.url("gone.tar.gz")]);
    let got = ensure_variant("large", &variant, dir.path(), &config).unwrap();
    art.assert_content(&got.path);
    assert!(
        server.ranges_of(&path).len() >= 2,
        "ranges asked: {:?}",
        server.ranges_of(&path)
    );
    assert!(server.most_connections(&path) >= 2);
    assert!(server.most_connections(&path) <= 4);
    // Every chunk is asked for once: no range is repeated (what the server pushes into the
    // socket of the first response before it is closed depends on loopback buffers, so its
    // byte count is no measure here; parallel.rs bounds it for a slower first response).
    let mut ranges = server.ranges_of(&path);
    let asked = ranges.len();
    ranges.sort_unstable();
    ranges.dedup();
    assert_eq!(
        ranges.len(),
        asked,
        "a range asked twice: {:?}",
        server.ranges_of(&path)
    );

    // Another content under the same name, over ranges too: refused by the tree hash alone
    // (the manifest's sha256 is that of its own URL's tarball, never applied to this copy).
    let other = TestArtifact::large(3705, 8, 500_000);
    let fresh = dir.path().join("fresh");
    server.serve(&path, other.tarball.clone());
    let config = clima_artifact_runtime::Config {
        depots: vec![fresh.clone().into()],
        ..config
    };
    let e = ensure_variant("large", &variant, dir.path(), &config).unwrap_err();
    let reasons = clima_artifact_tests::failure_reasons(&e);
    assert!(reasons.contains("git-tree-sha1 mismatch"), "{reasons}");
    assert!(
        !fresh
            .join("artifacts")
            .join(art.tree_hash.to_hex())
            .exists()
    );
}
