//! The `clima-artifacts` binary end to end, on temp depots and a loopback HTTP server.

#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one scenario; the 100-line rule (issue 36) is for non-test code"
)]

mod common;
mod messages;
mod planted_logs;
mod screens;
mod shared_overrides;

use std::fs;
use std::io::Read;
use std::path::Path;

use clima_artifact_tests::TestServer;
use common::{Sandbox, assert_ok, cli, json, sample_tree};
use predicates::prelude::*;

const OTHER_HASH: &str = "b373f1887cff55850cbf76ec005f7d93726ae42e";

fn create_json(sb: &Sandbox, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["create"];
    all.extend_from_slice(args);
    all.push("--json");
    sb.json_ok(&all)
}

#[test]
fn create_twice_gives_the_same_tarball_and_keeps_manifest_comments() {
    let sb = Sandbox::new();
    let data = sb.work.join("era5");
    sample_tree(&data);
    let manifest = sb.work.join("Artifacts.toml");
    let header = format!(
        "# Datasets for the ocean model (keep this comment)\n[other]\ngit-tree-sha1 = \"{OTHER_HASH}\" # pinned\n"
    );
    fs::write(&manifest, &header).unwrap();

    let first = create_json(
        &sb,
        &[
            "era5",
            "--name",
            "era5",
            "--manifest",
            "Artifacts.toml",
            "--tarball-out",
            "one/era5.tar.gz",
            "--url",
            "https://example.invalid/era5.tar.gz",
            "--license",
            "CC-BY-4.0",
        ],
    );
    // Touch everything and change group bits: neither may change the archive.
    for f in ["README.md", "data/v.nc", "data/2008/u.nc"] {
        let file = fs::File::options().write(true).open(data.join(f)).unwrap();
        file.set_modified(
            std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000),
        )
        .unwrap();
    }
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(data.join("README.md"), fs::Permissions::from_mode(0o664)).unwrap();
    let second = create_json(
        &sb,
        &[
            "era5",
            "--name",
            "era5",
            "--manifest",
            "Artifacts.toml",
            "--tarball-out",
            "two/era5.tar.gz",
            "--url",
            "https://example.invalid/era5.tar.gz",
        ],
    );
    assert_eq!(first["sha256"], second["sha256"]);
    assert_eq!(first["git_tree_sha1"], second["git_tree_sha1"]);
    let one = fs::read(sb.work.join("one/era5.tar.gz")).unwrap();
    let two = fs::read(sb.work.join("two/era5.tar.gz")).unwrap();
    assert_eq!(one, two, "tarball bytes differ");
    assert_eq!(second["manifest_change"]["action"], "updated");

    // The hash subcommand agrees and `.git` does not count.
    assert_eq!(
        sb.json_ok(&["hash", "era5", "--json"])["git_tree_sha1"],
        first["git_tree_sha1"]
    );
    sb.cli()
        .args(["hash", "era5"])
        .assert()
        .success()
        .stdout(format!("{}\n", first["git_tree_sha1"].as_str().unwrap()));

    // The archive: sorted, owners and mtimes zeroed, modes normalised, symlink kept, no .git;
    // seekable (docs/seekable.md): files and symlinks only, so no empty folder.
    assert_eq!(
        archived_entries(&one),
        [
            "README.md",
            "bin/run.sh",
            "data/2008/u.nc",
            "data/v.nc",
            "latest"
        ]
    );
    // `--classic`: one stream, with the folders, the empty one too.
    create_json(
        &sb,
        &[
            "era5",
            "--name",
            "era5",
            "--manifest",
            "classic.toml",
            "--classic",
        ],
    );
    assert_eq!(
        archived_entries(&fs::read(sb.work.join("era5.tar.gz")).unwrap()),
        [
            "README.md",
            "bin/",
            "bin/run.sh",
            "data/",
            "data/2008/",
            "data/2008/u.nc",
            "data/v.nc",
            "empty/",
            "latest"
        ]
    );
    // gzip header: no mtime, no file name.
    assert_eq!(&one[4..8], &[0, 0, 0, 0]);
    assert_eq!(one[3] & 0x08, 0, "FNAME flag set");

    // The manifest kept its comments and the other entry, and gained a Julia-style entry.
    let text = fs::read_to_string(&manifest).unwrap();
    assert!(text.starts_with(&header), "{text}");
    assert!(text.contains("[[era5.download]]"), "{text}");
    assert!(text.contains("license = \"CC-BY-4.0\""), "{text}");
    let parsed = clima_artifact_manifest::Manifest::load(&manifest).unwrap();
    let era5 = parsed
        .select("era5", &clima_artifact_manifest::Platform::host())
        .unwrap();
    assert_eq!(
        era5.git_tree_sha1.to_hex(),
        first["git_tree_sha1"].as_str().unwrap()
    );
    assert_eq!(era5.downloads.len(), 1);
    assert_eq!(
        era5.downloads[0].sha256.to_hex(),
        first["sha256"].as_str().unwrap()
    );
}

/// `create` of `era5` (the sample tree) into `manifest`, its tarball served over loopback:
/// the server and the tree hash.
fn create_served_era5(sb: &Sandbox, manifest: &str) -> (TestServer, String) {
    let data = sb.work.join("src-data");
    sample_tree(&data);
    let served = sb.root.path().join("served");
    fs::create_dir_all(&served).unwrap();
    let server = TestServer::start();
    server.serve_dir(&served);
    let url = server.url("era5.tar.gz");
    let created = create_json(
        sb,
        &[
            "src-data",
            "--name",
            "era5",
            "--manifest",
            manifest,
            "--tarball-out",
            served.join("era5.tar.gz").to_str().unwrap(),
            "--url",
            &url,
        ],
    );
    let hash = created["git_tree_sha1"].as_str().unwrap().to_string();
    (server, hash)
}

#[test]
fn create_fetch_verify_then_tamper() {
    let sb = Sandbox::new();
    let (server, hash) = create_served_era5(&sb, "Artifacts.toml");

    let fetched = sb.json_ok(&["fetch", "era5", "--json"]);
    assert_eq!(fetched[0]["status"], "downloaded");
    assert_eq!(server.gets("/era5.tar.gz"), 1);
    let installed = sb.depot.join("artifacts").join(&hash);
    assert!(installed.join("data/2008/u.nc").is_file());

    // fetch recorded the manifest in the depot's usage log, so gc keeps the artifact.
    let gc = sb.json_ok(&["gc", "--dry-run", "--json"]);
    assert_eq!(gc["unreferenced"].as_array().unwrap().len(), 0, "{gc}");
    assert_eq!(gc["kept"], 1);

    // Fetching again is a no-op; --all picks it up too.
    assert_eq!(
        sb.json_ok(&["fetch", "--all", "--json"])[0]["status"],
        "already_installed"
    );
    assert_eq!(server.gets("/era5.tar.gz"), 1);

    sb.cli()
        .args(["verify", "era5"])
        .assert()
        .success()
        .stdout(predicate::str::contains("ok"));
    let out = sb.cli().args(["list", "--json"]).output().unwrap();
    let listed = json(&out);
    assert_eq!(listed[0]["name"], "era5");
    assert_eq!(listed[0]["downloadable"], true);
    assert_eq!(listed[0]["installed_path"], installed.display().to_string());
    assert!(listed[0]["size_bytes"].as_u64().unwrap() >= 300_000);
    sb.cli()
        .arg("status")
        .assert()
        .success()
        .stdout(predicate::str::contains("installed"));

    // Tamper with one file: verify names the artifact and the file, and exits 1.
    let victim = installed.join("data/v.nc");
    let mut perms = fs::metadata(&victim).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    fs::set_permissions(&victim, perms).unwrap();
    fs::write(&victim, "tampered").unwrap();
    sb.cli()
        .args(["verify", "--all"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("CHANGED"))
        .stderr(predicate::str::contains("artifact `era5`"))
        .stderr(predicate::str::contains("data/v.nc"));
    let out = sb
        .cli()
        .args(["verify", "era5", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json(&out)[0]["status"], "changed");
}

#[test]
fn external_create_override_set_and_runtime_resolution() {
    let sb = Sandbox::new();
    let data = sb.root.path().join("scratch/era5");
    sample_tree(&data);
    let out = sb
        .cli()
        .args([
            "create",
            data.to_str().unwrap(),
            "--name",
            "era5",
            "--manifest",
            "Artifacts.toml",
            "--external",
        ])
        .output()
        .unwrap();
    assert_ok(&out);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let hash_out = sb
        .cli()
        .args(["hash", data.to_str().unwrap()])
        .output()
        .unwrap();
    let hash = String::from_utf8_lossy(&hash_out.stdout).trim().to_string();
    let line = format!(
        "{hash} = \"{}\" # era5",
        fs::canonicalize(&data).unwrap().display()
    );
    assert!(
        stdout.lines().any(|l| l == line),
        "no overrides line `{line}` in:\n{stdout}"
    );
    let text = fs::read_to_string(sb.work.join("Artifacts.toml")).unwrap();
    assert!(!text.contains("download"), "{text}");
    assert!(!sb.work.join("era5.tar.gz").exists());

    // Without an override the artifact is missing; a wrong folder fails --verify.
    let wrong = sb.root.path().join("wrong");
    fs::create_dir_all(&wrong).unwrap();
    fs::write(wrong.join("x"), "x").unwrap();
    sb.cli()
        .args([
            "override",
            "set",
            "era5",
            wrong.to_str().unwrap(),
            "--verify",
        ])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("expects"));
    assert!(!sb.depot.join("artifacts/Overrides.toml").exists());
    sb.cli()
        .args(["override", "set", "era5", "/does/not/exist"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("/does/not/exist"));

    // A relative path is made absolute.
    sb.cli()
        .current_dir(sb.root.path())
        .args([
            "override",
            "set",
            "era5",
            "scratch/era5",
            "--verify",
            "--manifest",
            "work/Artifacts.toml",
        ])
        .assert()
        .success();
    let overrides = fs::read_to_string(sb.depot.join("artifacts/Overrides.toml")).unwrap();
    let abs = fs::canonicalize(&data).unwrap();
    assert!(
        overrides.contains(&format!("{hash} = \"{}\" # era5", abs.display())),
        "{overrides}"
    );

    // The runtime resolves to the override.
    let artifacts = clima_artifact_runtime::Artifacts::load(sb.work.join("Artifacts.toml"))
        .unwrap()
        .with_config(runtime_config(&sb.depot));
    assert_eq!(artifacts.ensure_installed("era5").unwrap(), abs);

    let out = sb
        .cli()
        .args(["override", "list", "--json"])
        .output()
        .unwrap();
    let listed = json(&out);
    assert_eq!(listed[0]["name"], "era5");
    assert_eq!(listed[0]["git_tree_sha1"], hash);
    assert_eq!(listed[0]["target"], abs.display().to_string());
    sb.cli()
        .args(["list"])
        .assert()
        .success()
        .stdout(predicate::str::contains("overridden"));

    let unset = sb.json_ok(&["override", "unset", "era5", "--json"]);
    assert_eq!(unset["git_tree_sha1"], hash, "{unset}");
    assert_eq!(unset["name"], "era5", "{unset}");
    let overrides = fs::read_to_string(sb.depot.join("artifacts/Overrides.toml")).unwrap();
    assert!(!overrides.contains(&hash));
    // `set --json` says what was written where.
    let set = sb.json_ok(&["override", "set", "era5", abs.to_str().unwrap(), "--json"]);
    assert_eq!(set["path"], abs.display().to_string(), "{set}");
    assert!(
        set["overrides_file"]
            .as_str()
            .unwrap()
            .ends_with("Overrides.toml")
    );
    sb.cli()
        .args(["override", "unset", "era5"])
        .assert()
        .success();
    sb.cli()
        .args(["override", "unset", "era5"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("has no override"));
}

fn runtime_config(depot: &Path) -> clima_artifact_runtime::Config {
    clima_artifact_runtime::Config {
        depots: vec![depot.into()],
        offline: true,
        progress: false,
        ..clima_artifact_runtime::Config::default()
    }
}

#[test]
fn gc_dry_run_lists_exactly_the_unreferenced_artifacts() {
    let sb = Sandbox::new();
    let hashes: Vec<String> = (1..=5).map(|i| format!("{i}").repeat(40)).collect();
    let art = sb.depot.join("artifacts");
    for h in &hashes {
        fs::create_dir_all(art.join(h)).unwrap();
        fs::write(art.join(h).join("f"), h).unwrap();
    }
    // A stray non-artifact entry is left alone.
    fs::create_dir_all(art.join("not-a-hash")).unwrap();
    let live = sb.work.join("live/Artifacts.toml");
    let gone = sb.work.join("gone/Artifacts.toml");
    fs::create_dir_all(live.parent().unwrap()).unwrap();
    fs::write(
        &live,
        format!("[a]\ngit-tree-sha1 = \"{}\"\n[[b]]\nos = \"windows\"\narch = \"x86_64\"\ngit-tree-sha1 = \"{}\"\n", hashes[0], hashes[1]),
    )
    .unwrap();
    // `gone` referenced hash 3 but no longer exists.
    fs::create_dir_all(sb.depot.join("logs")).unwrap();
    fs::write(
        sb.depot.join("logs/artifact_usage.toml"),
        format!(
            "[[\"{}\"]]\ntime = 2024-01-01T00:00:00Z\n\n[[\"{}\"]]\ntime = 2024-01-02T00:00:00Z\n",
            live.display(),
            gone.display()
        ),
    )
    .unwrap();
    // Hash 4 is the target of an override chain, so it stays.
    fs::write(
        art.join("Overrides.toml"),
        format!("{} = \"{}\"\n", "9".repeat(40), hashes[3]),
    )
    .unwrap();

    let report = sb.json_ok(&["gc", "--dry-run", "--json"]);
    let listed: Vec<&str> = report["unreferenced"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["git_tree_sha1"].as_str().unwrap())
        .collect();
    assert_eq!(listed, [hashes[2].as_str(), hashes[4].as_str()]);
    assert_eq!(report["kept"], 3);
    for h in &hashes {
        assert!(art.join(h).is_dir(), "dry run removed {h}");
    }
    sb.cli()
        .args(["gc", "--dry-run"])
        .assert()
        .success()
        .stdout(predicate::str::contains("would remove"))
        .stdout(predicate::str::contains(gone.display().to_string()));

    // A gc killed between its rename and its delete left a folder; the dry run keeps it, the
    // next real gc removes it (its process is gone). A live process's folder is kept.
    let host = clima_artifact_fs::host_tag();
    let mut exited = std::process::Command::new("true").spawn().unwrap();
    let dead = exited.id();
    exited.wait().unwrap();
    let killed = art.join(format!(
        ".{}.gc-{host}.{dead}.00000000000000aa",
        "a".repeat(40)
    ));
    let live = art.join(format!(
        ".{}.gc-{host}.{}.00000000000000bb",
        "b".repeat(40),
        std::process::id()
    ));
    for d in [&killed, &live] {
        fs::create_dir_all(d.join("data")).unwrap();
        fs::write(d.join("data/x.nc"), "x").unwrap();
    }
    assert_eq!(sb.json_ok(&["gc", "--dry-run", "--json"])["reclaimed"], 0);
    assert!(killed.is_dir());

    // The first real gc only marks the unreferenced ones as orphaned (Pkg.gc's grace period).
    let report = sb.json_ok(&["gc", "--json"]);
    assert_eq!(report["reclaimed"], 1, "{report}");
    assert!(!killed.exists(), "the killed gc's folder is still there");
    assert!(live.is_dir(), "a live gc's folder was removed");
    let marked: Vec<bool> = report["unreferenced"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["removed"].as_bool().unwrap() || u["due"].as_bool().unwrap())
        .collect();
    assert_eq!(marked, [false, false], "{report}");
    for h in &hashes {
        assert!(art.join(h).is_dir(), "the first gc removed {h}");
    }
    let orphaned = fs::read_to_string(sb.depot.join("logs/orphaned.toml")).unwrap();
    assert!(
        orphaned.contains(&hashes[2])
            && orphaned.contains(&hashes[4])
            && !orphaned.contains(&hashes[0]),
        "{orphaned}"
    );
    // A second gc within the delay keeps them, with the same orphaned-since time.
    let again = sb.json_ok(&["gc", "--json"]);
    assert_eq!(
        again["unreferenced"][0]["orphaned_since"],
        report["unreferenced"][0]["orphaned_since"]
    );
    assert!(art.join(&hashes[2]).is_dir());
    // --dry-run --delay 0 shows what would go, and removes nothing.
    let dry = sb.json_ok(&["gc", "--dry-run", "--delay", "0", "--json"]);
    assert_eq!(dry["unreferenced"][0]["due"], true, "{dry}");
    assert!(art.join(&hashes[2]).is_dir());

    sb.cli().args(["gc", "--delay", "0"]).assert().success();
    let left: Vec<bool> = hashes.iter().map(|h| art.join(h).is_dir()).collect();
    assert_eq!(left, [true, true, false, true, false]);
    assert!(art.join("not-a-hash").is_dir());
    let orphaned = fs::read_to_string(sb.depot.join("logs/orphaned.toml")).unwrap();
    assert!(!orphaned.contains(&hashes[2]), "{orphaned}");
}

/// gc collects only the first depot unless --all-depots; an orphan referenced again leaves the
/// orphan list; the usage log is compacted to one entry per manifest.
#[test]
fn gc_collects_the_first_depot_only_and_compacts_the_usage_log() {
    let sb = Sandbox::new();
    let shared = sb.root.path().join("shared-depot");
    let h_mine = "1".repeat(40);
    let h_shared = "2".repeat(40);
    fs::create_dir_all(sb.depot.join("artifacts").join(&h_mine)).unwrap();
    fs::create_dir_all(shared.join("artifacts").join(&h_shared)).unwrap();
    let manifest = sb.work.join("Artifacts.toml");
    fs::write(
        &manifest,
        format!("[kept]\ngit-tree-sha1 = \"{}\"\n", "3".repeat(40)),
    )
    .unwrap();
    fs::create_dir_all(sb.depot.join("logs")).unwrap();
    let line = |t: &str| format!("[[{:?}]]\ntime = {t}\n", manifest.display().to_string());
    fs::write(
        sb.depot.join("logs/artifact_usage.toml"),
        line("2024-01-01T00:00:00Z")
            + &line("2024-03-01T00:00:00Z")
            + &line("2024-02-01T00:00:00Z"),
    )
    .unwrap();
    let depot_path = format!("{}:{}", sb.depot.display(), shared.display());
    let run = |args: &[&str]| {
        let out = sb
            .cli()
            .env("CLIMA_ARTIFACTS_DEPOT_PATH", &depot_path)
            .args(args)
            .output()
            .unwrap();
        assert_ok(&out);
        json(&out)
    };
    let report = run(&["gc", "--delay", "0", "--json"]);
    assert!(!sb.depot.join("artifacts").join(&h_mine).exists());
    assert!(
        shared.join("artifacts").join(&h_shared).is_dir(),
        "the shared depot was collected"
    );
    assert_eq!(report["collected"].as_array().unwrap().len(), 1, "{report}");
    let log = fs::read_to_string(sb.depot.join("logs/artifact_usage.toml")).unwrap();
    assert_eq!(log.matches("[[").count(), 1, "{log}");
    assert!(log.contains("2024-03-01T00:00:00Z"), "{log}");

    let report = run(&["gc", "--delay", "0", "--all-depots", "--json"]);
    assert!(!shared.join("artifacts").join(&h_shared).exists());
    assert_eq!(report["collected"].as_array().unwrap().len(), 2, "{report}");
}

#[test]
fn gc_refuses_to_empty_a_depot_without_recorded_manifests() {
    let sb = Sandbox::new();
    let h = "7".repeat(40);
    fs::create_dir_all(sb.depot.join("artifacts").join(&h)).unwrap();
    sb.cli()
        .args(["gc"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--force"));
    assert!(sb.depot.join("artifacts").join(&h).is_dir());
}

#[test]
fn bad_arguments_give_clear_messages_and_nonzero_exits() {
    let sb = Sandbox::new();
    sb.cli()
        .assert()
        .code(2)
        .stderr(predicate::str::contains("Usage"));
    sb.cli()
        .args(["create", "somewhere"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--name"));
    sb.cli()
        .args(["hash", "/no/such/folder"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("/no/such/folder"));
    sb.cli()
        .args(["fetch", "era5"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("Artifacts.toml"));
    fs::write(
        sb.work.join("Artifacts.toml"),
        format!("[era5]\ngit-tree-sha1 = \"{OTHER_HASH}\"\n"),
    )
    .unwrap();
    sb.cli()
        .args(["fetch", "era6", "nope"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "`era6` (did you mean `era5`?), `nope` not defined",
        ))
        .stderr(predicate::str::contains("defined: era5"));
    sb.cli()
        .args(["verify"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--all"));
    sb.cli()
        .args(["report", "--format", "pdf", "x.json"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("pdf"));
    fs::write(sb.work.join("Broken.toml"), "[era5\n").unwrap();
    sb.cli()
        .args(["list", "--manifest", "Broken.toml"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("Broken.toml"));
    // Not installed, no download: fetch fails with exit 1 and says what to do.
    sb.cli()
        .args(["fetch", "era5"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("era5"));
    sb.cli()
        .args(["create", "--name", "a/b", "--manifest", "A.toml", "."])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("invalid artifact name"));
    for sub in [
        "create",
        "new",
        "reproduce",
        "hash",
        "fetch",
        "verify",
        "list",
        "status",
        "gc",
        "report",
        "override",
    ] {
        sb.cli()
            .args([sub, "--help"])
            .assert()
            .success()
            .stdout(predicate::str::contains("Usage"));
    }
    sb.cli()
        .args(["verify", "--help"])
        .assert()
        .stdout(predicate::str::contains("Exit codes"));
}

#[test]
fn guided_create_driven_by_piped_stdin() {
    let sb = Sandbox::new();
    sample_tree(&sb.work.join("My Data"));
    // Answers: folder, name (invalid first, then valid), manifest (default), external? (no),
    // lazy? (yes), description, license, citation, doi, tarball path (default), url (base + /),
    // proceed (default yes).
    // Then version, acknowledgement, source, maintainer.
    let answers = "My Data\nbad/name\nmydata\n\nn\ny\nA test dataset\nCC-BY-4.0\nDoe et al. (2024)\n10.1234/abcd\nv2\nThanks.\nhttps://src.example.invalid\nJane Doe\n\nhttps://data.example.invalid/files/\n\n";
    let out = sb
        .cli()
        .args(["create", "--guided"])
        .write_stdin(answers)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "stdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("Artifact name [My_Data]: "), "{stdout}");
    assert!(stdout.contains("must not contain `/`"), "{stdout}");
    let manifest =
        clima_artifact_manifest::Manifest::load(&sb.work.join("Artifacts.toml")).unwrap();
    let v = manifest
        .select("mydata", &clima_artifact_manifest::Platform::host())
        .unwrap();
    assert!(v.lazy);
    for (key, value) in [
        ("license", "CC-BY-4.0"),
        ("citation", "Doe et al. (2024)"),
        ("doi", "10.1234/abcd"),
        ("version", "v2"),
        ("acknowledgement", "Thanks."),
        ("source", "https://src.example.invalid"),
        ("maintainer", "Jane Doe"),
    ] {
        assert_eq!(
            v.metadata.get(key).map(String::as_str),
            Some(value),
            "{key}"
        );
    }
    assert_eq!(
        v.downloads[0].url,
        "https://data.example.invalid/files/mydata.tar.gz"
    );
    assert!(sb.work.join("mydata.tar.gz").is_file());

    // Declining at the end writes nothing.
    let out = sb
        .cli()
        .args([
            "create",
            "--guided",
            "--name",
            "other",
            "--manifest",
            "Other.toml",
            "My Data",
        ])
        .write_stdin("\n\n\ny\n\n\n\n\n\n\n\n\n\nn\n")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(!sb.work.join("Other.toml").exists());
}

#[test]
fn report_renders_a_json_report() {
    use clima_artifact_runtime::access_log::{ArtifactRecord, CallSite, RecordedOrigin};
    let sb = Sandbox::new();
    let record = ArtifactRecord {
        name: "era5".into(),
        git_tree_sha1: OTHER_HASH.parse().unwrap(),
        manifest: "/m/Artifacts.toml".into(),
        path: "/depot/artifacts/x".into(),
        origin: RecordedOrigin::Depot,
        accesses: 2,
        first_access: "2024-05-01T12:00:00.000Z".into(),
        call_sites: vec![CallSite {
            file: "src/main.rs".into(),
            line: 3,
        }],
        ranks: vec![0],
        metadata: [
            ("license".to_string(), "CC-BY-4.0".to_string()),
            (
                "citation".to_string(),
                "Hersbach et al. (2020), ERA5".to_string(),
            ),
            ("doi".to_string(), "10.1002/qj.3803".to_string()),
        ]
        .into_iter()
        .collect(),
        received_by: vec![],
    };
    let report = clima_artifact_runtime::report::Report::from_parts([record], []);
    let file = sb.work.join("provenance.json");
    fs::write(&file, report.to_json()).unwrap();

    sb.cli()
        .args(["report", "provenance.json"])
        .assert()
        .success()
        .stdout(predicate::str::contains("era5"))
        .stdout(predicate::str::contains("Hersbach et al. (2020)"));
    sb.cli()
        .args(["report", "provenance.json", "--format", "bibtex"])
        .assert()
        .success()
        .stdout(predicate::str::contains("10.1002/qj.3803"));
    let out = sb
        .cli()
        .args(["report", "provenance.json", "-f", "json"])
        .output()
        .unwrap();
    assert_ok(&out);
    assert_eq!(String::from_utf8_lossy(&out.stdout), report.to_json());
    sb.cli()
        .args([
            "report",
            "provenance.json",
            "-f",
            "md",
            "-o",
            "out/report.md",
        ])
        .assert()
        .success();
    let mut md = String::new();
    fs::File::open(sb.work.join("out/report.md"))
        .unwrap()
        .read_to_string(&mut md)
        .unwrap();
    assert!(md.contains("era5"));

    fs::write(sb.work.join("bad.json"), "{\"schema\": \"other/9\"}").unwrap();
    sb.cli()
        .args(["report", "bad.json"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("bad.json"))
        .stderr(predicate::str::contains("schema"));
}

#[test]
fn hash_matches_git_write_tree() {
    if std::process::Command::new("git")
        .arg("--version")
        .output()
        .is_err()
    {
        assert!(std::env::var("CI").is_err(), "git is required in CI");
        clima_artifact_tests::skip("git is not installed");
        return;
    }
    let sb = Sandbox::new();
    let data = sb.work.join("tree");
    sample_tree(&data);
    fs::remove_dir_all(data.join(".git")).unwrap();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(&data)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    let expected = git(&["write-tree"]);
    sb.cli()
        .args(["hash", "tree"])
        .assert()
        .success()
        .stdout(format!("{expected}\n"));
    // The tarball's own tree (computed while archiving) agrees as well.
    let created = create_json(&sb, &["tree", "--name", "t", "--manifest", "A.toml"]);
    assert_eq!(created["git_tree_sha1"], expected);
}

/// `create --url .../` appends the tarball's name and writes `size`; re-running `create` with a
/// corrected URL replaces the old download entry; an explicit `fetch` is not held back by the
/// size limit of implicit downloads.
#[test]
fn create_writes_size_and_a_folder_url_and_fetch_ignores_the_implicit_limit() {
    let sb = Sandbox::new();
    let data = sb.work.join("src-data");
    sample_tree(&data);
    let served = sb.root.path().join("served");
    fs::create_dir_all(&served).unwrap();
    let server = TestServer::start();
    server.serve_dir(&served);
    let tarball = served.join("era5.tar.gz");
    let wrong = format!("{}/wrong-folder/", server.base());
    let args = |url: &str| {
        vec![
            "src-data".to_owned(),
            "--name".into(),
            "era5".into(),
            "--manifest".into(),
            "Artifacts.toml".into(),
            "--tarball-out".into(),
            tarball.display().to_string(),
            "--url".into(),
            url.to_owned(),
        ]
    };
    let first: Vec<String> = args(&wrong);
    create_json(&sb, &first.iter().map(String::as_str).collect::<Vec<_>>());
    let text = fs::read_to_string(sb.work.join("Artifacts.toml")).unwrap();
    assert!(
        text.contains(&format!("url = \"{wrong}era5.tar.gz\"")),
        "{text}"
    );
    let size = fs::metadata(&tarball).unwrap().len();
    assert!(text.contains(&format!("size = {size}")), "{text}");

    // The corrected URL replaces the wrong one (same content, so same hash).
    let right = format!("{}/", server.base());
    let second: Vec<String> = args(&right);
    create_json(&sb, &second.iter().map(String::as_str).collect::<Vec<_>>());
    let text = fs::read_to_string(sb.work.join("Artifacts.toml")).unwrap();
    assert_eq!(text.matches("[[era5.download]]").count(), 1, "{text}");
    assert!(
        text.contains(&format!("url = \"{right}era5.tar.gz\"")),
        "{text}"
    );
    assert!(!text.contains("wrong-folder"), "{text}");

    // `list` shows the declared size of what is not installed yet.
    let listed = sb.json_ok(&["list", "--json"]);
    assert_eq!(listed[0]["declared_size"], size, "{listed}");
    let out = sb.cli().arg("list").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains('~'), "{text}");

    // A limit far below the size does not stop an explicit fetch.
    let out = sb
        .cli()
        .env("CLIMA_ARTIFACTS_MAX_DOWNLOAD_SIZE", "1K")
        .args(["fetch", "era5", "--json"])
        .output()
        .unwrap();
    assert_ok(&out);
    assert_eq!(json(&out)[0]["status"], "downloaded");
    assert_eq!(server.gets("/era5.tar.gz"), 1);
}

/// Rough edges: a did-you-mean for unknown names, shell completions, `--json` on
/// `report`, no panic when stdout closes early, and per-subcommand help.
#[test]
fn cli_polish_suggestions_completions_json_and_closed_stdout() {
    let sb = Sandbox::new();
    fs::write(
        sb.work.join("Artifacts.toml"),
        format!("[era5_monthly]\ngit-tree-sha1 = \"{OTHER_HASH}\"\n"),
    )
    .unwrap();
    sb.cli()
        .args(["fetch", "era5_montly"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("did you mean `era5_monthly`?"));
    sb.cli()
        .args(["verify", "era5_mothly"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("did you mean `era5_monthly`?"));

    for shell in ["bash", "zsh", "fish"] {
        sb.cli()
            .args(["completions", shell])
            .assert()
            .success()
            .stdout(predicate::str::contains("clima-artifacts"))
            .stdout(predicate::str::contains("fetch"));
    }

    // `list --json | head -c 1` on far more output than a pipe buffers: the early close of
    // the pipe is not a panic.
    let many: String = (0..1500)
        .map(|i| format!("[data_{i:04}]\ngit-tree-sha1 = \"{OTHER_HASH}\"\n"))
        .collect();
    fs::write(sb.work.join("Artifacts.toml"), many).unwrap();
    let exe = assert_cmd::cargo::cargo_bin("clima-artifacts");
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("\"{}\" list --json | head -c 1", exe.display()))
        .current_dir(&sb.work)
        .env("CLIMA_ARTIFACTS_DEPOT_PATH", &sb.depot)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.stdout, b"[");

    let pull_help = sb.cli().args(["sync", "pull", "--help"]).output().unwrap();
    let text = String::from_utf8_lossy(&pull_help.stdout);
    assert!(!text.contains("--checkpoint"), "{text}");
    let push_help = sb.cli().args(["sync", "push", "--help"]).output().unwrap();
    assert!(String::from_utf8_lossy(&push_help.stdout).contains("--checkpoint"));
}

#[test]
fn report_takes_json_like_every_other_command() {
    let sb = Sandbox::new();
    let report = clima_artifact_runtime::report::Report::from_parts(Vec::new(), Vec::new());
    let file = sb.work.join("provenance.json");
    fs::write(&file, report.to_json()).unwrap();
    let parsed = sb.json_ok(&["report", file.to_str().unwrap(), "--json"]);
    assert!(
        parsed["schema"].is_string() || parsed.is_object(),
        "{parsed}"
    );
}

/// A model installs a dataset through the runtime; `gc` run later from another project (no
/// --manifest, another folder) keeps it, because the model recorded its manifest.
#[test]
fn a_model_installed_artifact_survives_gc_run_from_elsewhere() {
    let sb = Sandbox::new();
    let data = sb.work.join("src-data");
    sample_tree(&data);
    let served = sb.root.path().join("served");
    fs::create_dir_all(&served).unwrap();
    let server = TestServer::start();
    server.serve_dir(&served);
    let url = format!("{}/", server.base());
    create_json(
        &sb,
        &[
            "src-data",
            "--name",
            "era5",
            "--manifest",
            "Artifacts.toml",
            "--tarball-out",
            served.join("era5.tar.gz").to_str().unwrap(),
            "--url",
            &url,
        ],
    );
    // The "model": the runtime API, online, into the sandbox depot.
    let config = clima_artifact_runtime::Config {
        offline: false,
        ..runtime_config(&sb.depot)
    };
    let path = clima_artifact_runtime::Artifacts::load(sb.work.join("Artifacts.toml"))
        .unwrap()
        .with_config(config)
        .ensure_installed("era5")
        .unwrap();
    assert!(path.is_dir());

    // Another project: gc with no manifest given, at once.
    let elsewhere = sb.root.path().join("other-project");
    fs::create_dir_all(&elsewhere).unwrap();
    let out = cli(&sb.depot, &elsewhere)
        .args(["gc", "--delay", "0", "--json"])
        .output()
        .unwrap();
    assert_ok(&out);
    let report = json(&out);
    assert_eq!(report["kept"], 1, "{report}");
    assert!(path.is_dir(), "gc removed the model's dataset");
}

/// `fetch --platform` and `list --platform` act for another host: a login node (x86_64)
/// prefetching the aarch64 build its compute nodes will use.
#[test]
fn fetch_and_list_for_another_platform() {
    if !clima_artifact_tests::have_git() {
        return;
    }
    let sb = Sandbox::new();
    let server = TestServer::start();
    let x86 = clima_artifact_tests::TestArtifact::sample(1531);
    let arm = clima_artifact_tests::TestArtifact::sample(1532);
    server.serve("x86.tar.gz", x86.tarball.clone());
    server.serve("arm.tar.gz", arm.tarball.clone());
    let entry = |arch: &str, a: &clima_artifact_tests::TestArtifact, file: &str| {
        format!(
            "[[lib]]\nos = \"linux\"\narch = \"{arch}\"\nlibgfortran_version = \"5.0.0\"\ngit-tree-sha1 = \"{}\"\n[[lib.download]]\nurl = \"{}\"\nsha256 = \"{}\"\n",
            a.tree_hash,
            server.url(file),
            a.sha256
        )
    };
    fs::write(
        sb.work.join("Artifacts.toml"),
        entry("x86_64", &x86, "x86.tar.gz") + &entry("aarch64", &arm, "arm.tar.gz"),
    )
    .unwrap();
    let listed = sb.json_ok(&[
        "list",
        "--platform",
        "aarch64-linux-gnu-libgfortran5",
        "--json",
    ]);
    assert_eq!(
        listed[0]["git_tree_sha1"],
        arm.tree_hash.to_hex(),
        "{listed}"
    );
    let fetched = sb.json_ok(&[
        "fetch",
        "lib",
        "--platform",
        "aarch64-linux-gnu-libgfortran5",
        "--json",
    ]);
    assert_eq!(fetched[0]["status"], "downloaded", "{fetched}");
    assert!(
        sb.depot
            .join("artifacts")
            .join(arm.tree_hash.to_hex())
            .is_dir()
    );
    assert_eq!(server.gets("x86.tar.gz"), 0);
    // A bad triplet is a usage error that says so.
    sb.cli()
        .args(["list", "--platform", "vax-linux-gnu"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("unknown architecture `vax`"));
}

/// Without --manifest, the manifest is found from the current folder upwards, as Julia's
/// find_artifacts_toml does, stopping at the project root.
#[test]
fn the_manifest_is_found_from_a_subfolder_of_the_project() {
    let sb = Sandbox::new();
    fs::write(sb.work.join("Cargo.toml"), "[package]\nname = \"model\"\n").unwrap();
    fs::write(
        sb.work.join("Artifacts.toml"),
        format!("[era5]\ngit-tree-sha1 = \"{OTHER_HASH}\"\n"),
    )
    .unwrap();
    let deep = sb.work.join("src/physics");
    fs::create_dir_all(&deep).unwrap();
    let out = cli(&sb.depot, &deep)
        .args(["list", "--json"])
        .output()
        .unwrap();
    assert_ok(&out);
    assert_eq!(json(&out)[0]["name"], "era5");
}

/// `fetch --all` installs every downloadable entry and lists those without a download section
/// as warnings with the override line to add (Julia's select_downloadable_artifacts skips
/// them); it exits 0. Naming such an entry is still an error.
#[test]
fn fetch_all_skips_entries_that_need_an_override() {
    if !clima_artifact_tests::have_git() {
        return;
    }
    let sb = Sandbox::new();
    let server = TestServer::start();
    let art = clima_artifact_tests::TestArtifact::sample(1541);
    server.serve("a.tar.gz", art.tarball.clone());
    fs::write(
        sb.work.join("Artifacts.toml"),
        format!(
            "[local_only]\ngit-tree-sha1 = \"{OTHER_HASH}\"\n\n[era5]\ngit-tree-sha1 = \"{}\"\n[[era5.download]]\nurl = \"{}\"\nsha256 = \"{}\"\n",
            art.tree_hash,
            server.url("a.tar.gz"),
            art.sha256
        ),
    )
    .unwrap();
    let out = sb
        .cli()
        .args(["fetch", "--all", "--json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let report = json(&out);
    assert_eq!(report[0]["status"], "needs_override", "{report}");
    assert_eq!(report[1]["status"], "downloaded", "{report}");
    assert!(
        stderr.contains("warning:")
            && stderr.contains(&format!("{OTHER_HASH} = \"/path/to/local_only\"")),
        "{stderr}"
    );
    sb.cli().args(["fetch", "local_only"]).assert().code(1);
}

/// Details of how a download went (here: a redirect, with the user info of the URL redacted)
/// are printed only with `--verbose`, in the notices' style.
#[test]
fn verbose_shows_the_redirect_a_download_followed() {
    if !clima_artifact_tests::have_git() {
        return;
    }
    let server = TestServer::start();
    let art = clima_artifact_tests::TestArtifact::sample(1543);
    server.serve("real.tar.gz", art.tarball.clone());
    server.always(
        "hop.tar.gz",
        clima_artifact_tests::Fault::Redirect("/real.tar.gz".to_owned()),
    );
    let url = server
        .url("hop.tar.gz")
        .replace("http://", "http://someone:s3cret@");
    let fetch = |verbose: bool| {
        let sb = Sandbox::new();
        fs::write(
            sb.work.join("Artifacts.toml"),
            format!(
                "[era5]\ngit-tree-sha1 = \"{}\"\n[[era5.download]]\nurl = \"{url}\"\nsha256 = \"{}\"\n",
                art.tree_hash, art.sha256
            ),
        )
        .unwrap();
        let mut cmd = sb.cli();
        if verbose {
            cmd.arg("--verbose");
        }
        let out = cmd.args(["fetch", "era5"]).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        stderr
    };
    let quiet = fetch(false);
    assert!(!quiet.contains("detail:"), "{quiet}");
    let stderr = fetch(true);
    assert!(
        stderr.contains("clima-artifacts: detail: redirected from `http://")
            && stderr.contains("/real.tar.gz`"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("s3cret"),
        "the password was printed: {stderr}"
    );
}

/// An explicit `fetch` of an entry without `size`, from a server that announces a petabyte
/// (with ranges and an ETag), fails at the response's headers on the free-space rule: no
/// download starts, no partial file or temp dir is made, the request is not retried, and the
/// message names the free space and the variable that sets the reserve.
#[test]
fn fetch_refuses_a_petabyte_content_length_at_the_headers() {
    if !clima_artifact_tests::have_git() {
        return;
    }
    let server = TestServer::start();
    let art = clima_artifact_tests::TestArtifact::sample(1547);
    server.serve("pb.tar.gz", art.tarball.clone());
    server.always(
        "pb.tar.gz",
        clima_artifact_tests::Fault::Announce(1_000_000_000_000_000),
    );
    let sb = Sandbox::new();
    fs::write(
        sb.work.join("Artifacts.toml"),
        format!(
            "[x]\ngit-tree-sha1 = \"{}\"\n[[x.download]]\nurl = \"{}\"\nsha256 = \"{}\"\n",
            art.tree_hash,
            server.url("pb.tar.gz"),
            art.sha256
        ),
    )
    .unwrap();
    // Progress on: its log lines would say "downloading `x` (909.5 TiB)" had it started.
    let out = sb
        .cli()
        .env("CLIMA_ARTIFACTS_PROGRESS", "1")
        .args(["fetch", "x"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("needs 909.5 TiB (the Content-Length of `http://")
            && stderr.contains("free above the reserve")
            && stderr.contains("CLIMA_ARTIFACTS_MIN_FREE_SPACE"),
        "{stderr}"
    );
    assert!(!stderr.contains("downloading `x`"), "{stderr}");
    assert_eq!(server.gets("pb.tar.gz"), 1, "{stderr}");
    assert!(
        clima_artifact_tests::partial_entries(&sb.depot).is_empty()
            && clima_artifact_tests::temp_entries(&sb.depot).is_empty(),
        "{:?}",
        fs::read_dir(sb.depot.join("artifacts")).map(|d| d.count())
    );
}

/// `list` shows every entry, broken ones with their error, and exits 0 (listing is not using);
/// fetching or verifying a broken entry fails.
#[test]
fn list_shows_broken_entries_and_fetch_refuses_them() {
    let sb = Sandbox::new();
    fs::write(
        sb.work.join("Artifacts.toml"),
        format!("[good]\ngit-tree-sha1 = \"{OTHER_HASH}\"\n\n[bad]\nlicense = \"MIT\"\n"),
    )
    .unwrap();
    let listed = sb.json_ok(&["list", "--json"]);
    assert_eq!(listed[0]["name"], "good");
    assert_eq!(listed[1]["name"], "bad");
    let error = listed[1]["error"].as_str().unwrap();
    assert!(
        error.contains("Artifacts.toml`:4:1") && error.contains("git-tree-sha1"),
        "{error}"
    );
    sb.cli()
        .arg("list")
        .assert()
        .success()
        .stdout(predicate::str::contains("broken"));
    sb.cli()
        .args(["fetch", "bad"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot be used"));
    sb.cli().args(["fetch", "--all"]).assert().code(2);
    sb.cli().args(["verify", "--all"]).assert().code(2);
}

/// `doctor` says which roots and proxies are in use, hiding proxy passwords.
#[test]
fn doctor_shows_roots_and_proxies() {
    let sb = Sandbox::new();
    let ca = sb.root.path().join("ca.pem");
    fs::write(&ca, "-----BEGIN CERTIFICATE-----\n").unwrap();
    let out = sb
        .cli()
        .env("SSL_CERT_FILE", &ca)
        .env("HTTPS_PROXY", "http://alice:s3cret@proxy.lab.org:3128")
        .env("NO_PROXY", "localhost,.lab.org")
        .env_remove("HTTP_PROXY")
        .env_remove("ALL_PROXY")
        .env_remove("CLIMA_ARTIFACTS_CA_ROOTS")
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    assert_ok(&out);
    let report = json(&out);
    assert!(
        report["tls_roots"]
            .as_str()
            .unwrap()
            .contains("from SSL_CERT_FILE"),
        "{report}"
    );
    assert_eq!(
        report["https_proxy"],
        "http://***@proxy.lab.org:3128 (from HTTPS_PROXY)"
    );
    assert!(report["http_proxy"].is_null(), "{report}");
    assert!(!report.to_string().contains("s3cret"));
    assert!(!report.to_string().contains("alice"));
}

/// Every environment variable of `clima_artifact_vars::ALL` is listed by `--help` and named in
/// the table of `docs/environment.md`, so neither can fall behind the code.
#[test]
fn help_and_environment_page_name_every_environment_variable() {
    let sb = Sandbox::new();
    let out = sb.cli().arg("--help").output().unwrap();
    assert_ok(&out);
    let help = String::from_utf8(out.stdout).unwrap();
    let page =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/environment.md"))
            .unwrap();
    let mut missing = Vec::new();
    for var in clima_artifact_vars::ALL {
        if !help.contains(var.name) {
            missing.push(format!("--help: {}", var.name));
        }
        if !page.contains(&format!("| `{}` |", var.name)) {
            missing.push(format!("docs/environment.md: {}", var.name));
        }
    }
    assert!(missing.is_empty(), "not named: {missing:?}");
}

/// `create` without `--manifest` finds the project's manifest from a subfolder, as every other
/// command does (it used to require `--manifest`).
#[test]
fn create_finds_the_manifest_upwards_like_every_command() {
    let sb = Sandbox::new();
    fs::write(sb.work.join("Cargo.toml"), "[package]\nname = \"m\"\n").unwrap();
    fs::write(sb.work.join("Artifacts.toml"), "").unwrap();
    let sub = sb.work.join("src/deep");
    sample_tree(&sub.join("era5"));
    let out = cli(&sb.depot, &sub)
        .args(["create", "era5", "--name", "era5", "--json"])
        .output()
        .unwrap();
    assert_ok(&out);
    let manifest =
        clima_artifact_manifest::Manifest::load(&sb.work.join("Artifacts.toml")).unwrap();
    assert!(manifest.get("era5").is_some());
    assert!(!sub.join("Artifacts.toml").exists());
}

/// The help of `--manifest` says where the default is looked for: upwards, not "in the
/// current folder" only.
#[test]
fn manifest_help_says_the_search_goes_upwards() {
    let sb = Sandbox::new();
    for sub in ["fetch", "list", "create", "reproduce"] {
        let out = sb.cli().args([sub, "--help"]).output().unwrap();
        assert_ok(&out);
        let help = String::from_utf8_lossy(&out.stdout).replace('\n', " ");
        let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
        let at = help.find("--manifest").expect("a --manifest option");
        let text = &help[at..(at + 300).min(help.len())];
        assert!(
            text.contains("parent folder") || text.contains("upwards"),
            "{sub}: {text}"
        );
        assert!(
            !text.contains("Artifacts.toml in the current folder)"),
            "{sub}: {text}"
        );
    }
}

/// `create` writes every provenance key the report asks for: `version`, `acknowledgement`,
/// `source` (and `maintainer`) have flags.
#[test]
fn create_takes_version_acknowledgement_source_and_maintainer() {
    let sb = Sandbox::new();
    sample_tree(&sb.work.join("era5"));
    create_json(
        &sb,
        &[
            "era5",
            "--name",
            "era5",
            "--version",
            "v5.1",
            "--acknowledgement",
            "ERA5 data were provided by ECMWF.",
            "--source",
            "https://cds.climate.copernicus.eu",
            "--maintainer",
            "Jane Doe",
        ],
    );
    let metadata = common::entry_metadata(&sb.work.join("Artifacts.toml"), "era5");
    let get = |k: &str| metadata.get(k).map(String::as_str);
    assert_eq!(get("version"), Some("v5.1"));
    assert_eq!(
        get("acknowledgement"),
        Some("ERA5 data were provided by ECMWF.")
    );
    assert_eq!(get("source"), Some("https://cds.climate.copernicus.eu"));
    assert_eq!(get("maintainer"), Some("Jane Doe"));
    // The top-level `--version` still prints the tool's version.
    sb.cli()
        .arg("--version")
        .assert()
        .success()
        .stdout(predicate::str::starts_with("clima-artifacts "));
}

/// An out-of-range `CLIMA_ARTIFACTS_CONNECTIONS` does not stop a command that downloads
/// nothing: it is clamped, with one warning.
#[test]
fn out_of_range_connections_is_clamped_with_a_warning() {
    let sb = Sandbox::new();
    fs::write(
        sb.work.join("Artifacts.toml"),
        format!("[other]\ngit-tree-sha1 = \"{OTHER_HASH}\"\n"),
    )
    .unwrap();
    let out = sb
        .cli()
        .args(["list"])
        .env("CLIMA_ARTIFACTS_CONNECTIONS", "16")
        .output()
        .unwrap();
    assert_ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.matches("CLIMA_ARTIFACTS_CONNECTIONS").count(),
        1,
        "{stderr}"
    );
    assert!(stderr.contains("using 8"), "{stderr}");
    // Not a number at all is still refused.
    sb.cli()
        .args(["list"])
        .env("CLIMA_ARTIFACTS_CONNECTIONS", "many")
        .assert()
        .code(2);
}

/// `gc --dry-run` lists what a depot without recorded manifests would lose, and exits 0: a dry
/// run removes nothing, so there is nothing to refuse.
#[test]
fn gc_dry_run_lists_even_without_recorded_manifests() {
    let sb = Sandbox::new();
    let h = "7".repeat(40);
    fs::create_dir_all(sb.depot.join("artifacts").join(&h)).unwrap();
    fs::write(sb.depot.join("artifacts").join(&h).join("f"), "x").unwrap();
    let out = sb
        .cli()
        .args(["gc", "--dry-run", "--delay", "0"])
        .output()
        .unwrap();
    assert_ok(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(&h), "{stdout}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--force"));
    assert!(sb.depot.join("artifacts").join(&h).is_dir());
}

/// A `file://` URL naming the tarball just written: nothing to upload, and no "upload it so
/// that it is served at" where it already is.
#[test]
fn create_with_a_file_url_of_the_tarball_itself_says_nothing_to_upload() {
    let sb = Sandbox::new();
    sample_tree(&sb.work.join("era5"));
    let tarball = sb.work.join("era5.tar.gz");
    let url = format!("file://{}", tarball.display());
    let out = sb
        .cli()
        .args(["create", "era5", "--name", "era5", "--url", &url])
        .output()
        .unwrap();
    assert_ok(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("next: upload"), "{stdout}");
    assert!(stdout.contains("nothing to upload"), "{stdout}");
    // Elsewhere, the hint stays.
    let out = sb
        .cli()
        .args([
            "create",
            "era5",
            "--name",
            "era5",
            "--url",
            "https://example.invalid/era5.tar.gz",
        ])
        .output()
        .unwrap();
    assert_ok(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("next: upload"));
}

/// `doctor` diagnoses each depot (exists, writable, free space) and says where installs go;
/// the package server's credentials are never printed.
#[test]
fn doctor_diagnoses_depots_and_hides_the_package_servers_token() {
    let sb = Sandbox::new();
    let blocker = sb.root.path().join("a-file");
    fs::write(&blocker, "not a folder").unwrap();
    let unusable = blocker.join("depot");
    let missing = sb.root.path().join("new-depot");
    let path = format!(
        "{}:{}:{}",
        unusable.display(),
        missing.display(),
        sb.depot.display()
    );
    let doctor = |json: bool| {
        let mut cmd = sb.cli();
        cmd.env("CLIMA_ARTIFACTS_DEPOT_PATH", &path)
            .env(
                "CLIMA_ARTIFACTS_PKG_SERVER",
                "http://mirror:T0KEN-s3cret@127.0.0.1:9/pkg",
            )
            .arg("doctor");
        if json {
            cmd.arg("--json");
        }
        let out = cmd.output().unwrap();
        assert_ok(&out);
        out
    };
    let text = String::from_utf8_lossy(&doctor(false).stdout).into_owned();
    assert!(!text.contains("T0KEN-s3cret"), "{text}");
    assert!(text.contains("http://***@127.0.0.1:9/pkg"), "{text}");
    assert!(!text.contains("mirror"), "{text}");
    assert!(
        text.contains(&format!("installs go to:       {}", missing.display())),
        "{text}"
    );
    assert!(text.contains("not writable"), "{text}");
    assert!(text.contains("does not exist"), "{text}");
    assert!(text.contains(" free"), "{text}");
    let report = json(&doctor(true));
    assert!(!report.to_string().contains("T0KEN-s3cret"), "{report}");
    assert_eq!(report["installs_go_to"], missing.display().to_string());
    let checks = report["depot_checks"].as_array().unwrap();
    assert_eq!(checks.len(), 3);
    assert_eq!(checks[0]["writable"], false);
    assert_eq!(checks[1]["exists"], false);
    assert_eq!(checks[1]["writable"], true);
    assert_eq!(checks[2]["exists"], true);
    assert!(checks[2]["free_bytes"].as_u64().unwrap() > 0);
    assert_eq!(checks[2]["read_only"], false);
    // Nothing was written to diagnose them.
    assert!(!missing.exists());
}

/// Issue 37, item 3: a hash that is the SHA-1 of the artifact's name (CliMA's placeholder for
/// data that stays on a cluster) is named as such by `list`, refused by `override set
/// --verify`, and warned about by a plain `override set`.
#[test]
fn a_placeholder_hash_is_named_by_list_and_refused_by_override_set_verify() {
    let sb = Sandbox::new();
    // sha1("fluxnet2015"), as in CliMA's ClimaArtifacts collection.
    fs::write(
        sb.work.join("Artifacts.toml"),
        "[fluxnet2015]\ngit-tree-sha1 = \"94d6eb8e3bc5fc361a43597ab4fb6941bdbe2850\"\n\
         license = \"CC-BY-4.0\"\n",
    )
    .unwrap();
    let data = sb.root.path().join("fluxnet");
    sample_tree(&data);
    let data = data.to_str().unwrap();

    let out = sb.cli().args(["list"]).output().unwrap();
    assert_ok(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("placeholder hash: the SHA-1 of the name, not of content"),
        "{stdout}"
    );
    let listed = sb.json_ok(&["list", "--json"]);
    assert_eq!(listed[0]["placeholder_hash"], true, "{listed}");

    let out = sb
        .cli()
        .args(["override", "set", "fluxnet2015", data, "--verify"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "the git-tree-sha1 is the SHA-1 of the name `fluxnet2015`, not of content: an \
             override of it cannot be verified"
        ) && stderr.contains(&format!(
            "record the real hash (the tree hash of the folder holding the data) in the \
             manifest with `clima-artifacts create {data} --external --name fluxnet2015 \
             --manifest {}`",
            sb.work.join("Artifacts.toml").display()
        )) && stderr.contains("the override was not written"),
        "{stderr}"
    );
    assert!(!sb.depot.join("artifacts/Overrides.toml").exists());

    // Without --verify it is written, with the same warning.
    let out = sb
        .cli()
        .args(["override", "set", "fluxnet2015", data])
        .output()
        .unwrap();
    assert_ok(&out);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("SHA-1 of the name `fluxnet2015`"),
        "{out:?}"
    );
    let overrides = fs::read_to_string(sb.depot.join("artifacts/Overrides.toml")).unwrap();
    assert!(
        overrides.contains("94d6eb8e3bc5fc361a43597ab4fb6941bdbe2850 = "),
        "{overrides}"
    );
}

/// A sandbox with [`sample_tree`] in `work/era5` and its git tree SHA-1 and SHA-256 by real git
/// (modes, a symlink, an empty folder and a `.git` folder: none may make us differ from git);
/// `None` without git.
fn sample_with_git_hashes() -> Option<(Sandbox, std::path::PathBuf, String, String)> {
    if !clima_artifact_tests::have_git() {
        return None;
    }
    let sb = Sandbox::new();
    let data = sb.work.join("era5");
    sample_tree(&data);
    let sha1 = clima_artifact_tests::git_tree_hash(&data).to_hex();
    let sha256 = clima_artifact_tests::git_tree_hash_sha256(&data).to_hex();
    Some((sb, data, sha1, sha256))
}

/// `hash --sha256` prints both tree hashes as manifest lines (and in `--json`), equal to what
/// real git computes in a SHA-1 and a SHA-256 repository; without it the output is unchanged.
#[test]
fn hash_prints_the_git_tree_sha256_on_request() {
    let Some((sb, _, sha1, sha256)) = sample_with_git_hashes() else {
        return;
    };
    sb.cli()
        .args(["hash", "era5", "--sha256"])
        .assert()
        .success()
        .stdout(format!(
            "git-tree-sha1 = \"{sha1}\"\ngit-tree-sha256 = \"{sha256}\"\n"
        ));
    let both = sb.json_ok(&["hash", "era5", "--sha256", "--json"]);
    assert_eq!(both["git_tree_sha1"], sha1.as_str());
    assert_eq!(both["git_tree_sha256"], sha256.as_str());
    let one = sb.json_ok(&["hash", "era5", "--json"]);
    assert_eq!(one["git_tree_sha1"], sha1.as_str());
    assert!(one.get("git_tree_sha256").is_none(), "{one}");
    sb.cli()
        .args(["hash", "era5"])
        .assert()
        .success()
        .stdout(format!("{sha1}\n"));
}

/// `verify` checks an installed copy by the entry's `git-tree-sha256` too: a right one passes,
/// a wrong one (the SHA-1 matching) is reported as such, in text and JSON.
#[test]
fn verify_checks_the_git_tree_sha256_when_the_entry_has_one() {
    let Some((sb, data, sha1, sha256)) = sample_with_git_hashes() else {
        return;
    };
    let installed = sb.depot.join("artifacts").join(&sha1);
    fs::create_dir_all(installed.parent().unwrap()).unwrap();
    let status = std::process::Command::new("cp")
        .args(["-a"])
        .arg(&data)
        .arg(&installed)
        .status()
        .unwrap();
    assert!(status.success());
    let manifest = |sha256: &str| {
        fs::write(
            sb.work.join("Artifacts.toml"),
            format!("[era5]\ngit-tree-sha1 = \"{sha1}\"\ngit-tree-sha256 = \"{sha256}\"\n"),
        )
        .unwrap()
    };
    manifest(&sha256);
    let ok = sb.json_ok(&["verify", "era5", "--json"]);
    assert_eq!(ok[0]["status"], "ok", "{ok}");
    let listed = sb.json_ok(&["list", "--json"]);
    assert_eq!(listed[0]["git_tree_sha256"], sha256.as_str(), "{listed}");
    assert_eq!(ok[0]["expected_sha256"], sha256.as_str());
    assert_eq!(ok[0]["actual_sha256"], sha256.as_str());

    let wrong = "ab".repeat(32);
    manifest(&wrong);
    let out = sb
        .cli()
        .args(["verify", "era5", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let changed = json(&out);
    assert_eq!(changed[0]["status"], "changed", "{changed}");
    assert_eq!(changed[0]["actual"], sha1.as_str());
    assert_eq!(changed[0]["actual_sha256"], sha256.as_str());
    sb.cli()
        .args(["verify", "era5"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("CHANGED"))
        .stderr(predicate::str::contains(format!(
            "artifact `era5` at `{}`: content changed (git-tree-sha256 {wrong} expected, \
             {sha256} found, although its git-tree-sha1 matches",
            installed.display()
        )));
}

/// `create` on an entry that carries a `git-tree-sha256` writes the new content's one (as real
/// git computes it), so the entry never keeps a stale SHA-256 that would fail every install.
#[test]
fn create_updates_the_git_tree_sha256_of_an_entry_that_has_one() {
    let Some((sb, _, sha1, sha256)) = sample_with_git_hashes() else {
        return;
    };
    let manifest = sb.work.join("Artifacts.toml");
    fs::write(
        &manifest,
        format!(
            "[era5]\ngit-tree-sha1 = \"{OTHER_HASH}\"\ngit-tree-sha256 = \"{}\" # kept comment\n",
            "ab".repeat(32)
        ),
    )
    .unwrap();
    let created = create_json(
        &sb,
        &["era5", "--name", "era5", "--manifest", "Artifacts.toml"],
    );
    assert_eq!(created["git_tree_sha1"], sha1.as_str());
    assert_eq!(created["git_tree_sha256"], sha256.as_str());
    let text = fs::read_to_string(&manifest).unwrap();
    assert!(
        text.contains(&format!("git-tree-sha1 = \"{sha1}\""))
            && text.contains(&format!("git-tree-sha256 = \"{sha256}\" # kept comment")),
        "{text}"
    );
    // An entry without one stays without.
    let plain = create_json(
        &sb,
        &["era5", "--name", "plain", "--manifest", "Artifacts.toml"],
    );
    assert!(plain.get("git_tree_sha256").is_none(), "{plain}");
}

/// Julia 1.13 rewrites `logs/artifact_usage.toml` under `mkpidlock("<log>.pid", stale_age =
/// 3)`: gc compacts the log only once that pidfile is gone, so neither rewrite loses the
/// other's entries.
#[test]
fn gc_compacts_the_usage_log_only_under_julias_lock_of_it() {
    let sb = Sandbox::new();
    let manifest = sb.work.join("Artifacts.toml");
    fs::write(
        &manifest,
        format!("[kept]\ngit-tree-sha1 = \"{}\"\n", "3".repeat(40)),
    )
    .unwrap();
    let logs = sb.depot.join("logs");
    fs::create_dir_all(&logs).unwrap();
    let line = |t: &str| format!("[[{:?}]]\ntime = {t}\n", manifest.display().to_string());
    let log = logs.join("artifact_usage.toml");
    fs::write(
        &log,
        line("2024-01-01T00:00:00Z") + &line("2024-03-01T00:00:00Z"),
    )
    .unwrap();
    // A live Julia holder: this test process's pid on this host, in Julia's format; kept fresh
    // (touched) as Julia's refresh timer does, until it is released.
    let pidfile = logs.join("artifact_usage.toml.pid");
    let host = clima_artifact_fs::hostname();
    fs::write(&pidfile, format!("{} {host}", std::process::id())).unwrap();
    let gc = std::process::Command::new(assert_cmd::cargo::cargo_bin("clima-artifacts"))
        .args(["gc", "--delay", "0", "--json"])
        .env("CLIMA_ARTIFACTS_DEPOT_PATH", &sb.depot)
        .env_remove("JULIA_DEPOT_PATH")
        .current_dir(&sb.work)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let during = fs::read_to_string(&log).unwrap();
    assert_eq!(
        during.matches("[[").count(),
        2,
        "compacted under Julia's lock: {during}"
    );
    fs::remove_file(&pidfile).unwrap();
    let out = gc.wait_with_output().unwrap();
    assert_ok(&out);
    let after = fs::read_to_string(&log).unwrap();
    assert_eq!(after.matches("[[").count(), 1, "{after}");
    assert!(!pidfile.exists(), "gc left its own pidfile behind");
}

/// Issue 47, item 8: a token in a URL's user name (`https://TOKEN:x-oauth-basic@host`, GitHub's
/// form) is printed by nothing: not by `-v`, not in `--json`, not in an error (a failed or an
/// offline download), not by `doctor`, which hides the whole user info. `doctor` also prints
/// the depot paths it was given, and the depot variable's error, with control characters
/// escaped.
#[test]
fn a_token_in_a_urls_user_name_is_never_printed() {
    if !clima_artifact_tests::have_git() {
        return;
    }
    const TOKEN: &str = "ghp_T0kenInTheUserName";
    let server = TestServer::start();
    let art = clima_artifact_tests::TestArtifact::sample(1547);
    server.serve("era5.tar.gz", art.tarball.clone());
    server.always("gone.tar.gz", clima_artifact_tests::Fault::Status(404));
    let with_token = |path: &str| {
        server
            .url(path)
            .replace("http://", &format!("http://{TOKEN}:x-oauth-basic@"))
    };
    let sb = Sandbox::new();
    fs::write(
        sb.work.join("Artifacts.toml"),
        format!(
            "[era5]\ngit-tree-sha1 = \"{h}\"\n[[era5.download]]\nurl = \"{}\"\nsha256 = \"{s}\"\n\
             [gone]\ngit-tree-sha1 = \"{}\"\n[[gone.download]]\nurl = \"{}\"\nsha256 = \"{s}\"\n",
            with_token("era5.tar.gz"),
            "4".repeat(40),
            with_token("gone.tar.gz"),
            h = art.tree_hash,
            s = art.sha256,
        ),
    )
    .unwrap();
    let printed = |out: &std::process::Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    // Offline: the error names the URLs it would have used.
    let offline = sb
        .cli()
        .env("CLIMA_ARTIFACTS_OFFLINE", "1")
        .args(["fetch", "era5"])
        .output()
        .unwrap();
    assert_eq!(offline.status.code(), Some(1), "{}", printed(&offline));
    let text = printed(&offline);
    assert!(text.contains("http://***@127.0.0.1:"), "{text}");
    assert!(!text.contains(TOKEN), "the token was printed: {text}");
    // Verbose, with JSON: the download's URL in the notices and in the report.
    let fetched = sb
        .cli()
        .env("CLIMA_ARTIFACTS_PROGRESS", "1")
        .args(["--verbose", "fetch", "era5", "--json"])
        .output()
        .unwrap();
    assert_ok(&fetched);
    let text = printed(&fetched);
    assert!(!text.contains(TOKEN), "the token was printed: {text}");
    let report = json(&fetched);
    assert_eq!(report[0]["status"], "downloaded", "{report}");
    assert!(
        report[0]["url"]
            .as_str()
            .unwrap()
            .starts_with("http://***@127.0.0.1:"),
        "{report}"
    );
    // A failing download: its error, in text and in JSON.
    for json_flag in [false, true] {
        let mut cmd = sb.cli();
        cmd.args(["--verbose", "fetch", "gone"]);
        if json_flag {
            cmd.arg("--json");
        }
        let failed = cmd.output().unwrap();
        assert_eq!(failed.status.code(), Some(1), "{}", printed(&failed));
        let text = printed(&failed);
        assert!(text.contains("404"), "{text}");
        assert!(!text.contains(TOKEN), "the token was printed: {text}");
    }
    // `doctor`, with the token in the package server's and the proxy's URL.
    for json_flag in [false, true] {
        let mut cmd = sb.cli();
        cmd.env(
            "CLIMA_ARTIFACTS_PKG_SERVER",
            format!("https://{TOKEN}:x-oauth-basic@pkg.example"),
        )
        .env("HTTPS_PROXY", format!("http://{TOKEN}@proxy.example:3128"))
        .arg("doctor");
        if json_flag {
            cmd.arg("--json");
        }
        let out = cmd.output().unwrap();
        assert_ok(&out);
        let text = printed(&out);
        assert!(
            text.contains("https://***@pkg.example") && text.contains("http://***@proxy.example"),
            "{text}"
        );
        assert!(!text.contains(TOKEN), "the token was printed: {text}");
    }
    // Depot paths with control characters: escaped, in the listing and in the error.
    let odd = sb.root.path().join("depot\u{1b}]0;owned\u{7}");
    let out = sb
        .cli()
        .env("CLIMA_ARTIFACTS_DEPOT_PATH", &odd)
        .arg("doctor")
        .output()
        .unwrap();
    assert_ok(&out);
    let text = printed(&out);
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{7}'),
        "{text:?}"
    );
    assert!(text.contains("depot\\u{1b}]0;owned\\u{7}"), "{text}");
    let out = sb
        .cli()
        .env("CLIMA_ARTIFACTS_DEPOT_PATH", "relative\u{1b}[2J/depot")
        .arg("doctor")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", printed(&out));
    let text = printed(&out);
    assert!(!text.contains('\u{1b}'), "{text:?}");
    assert!(
        text.contains("CLIMA_ARTIFACTS_DEPOT_PATH=`relative\\u{1b}[2J/depot`"),
        "{text}"
    );
}

/// Issue 47, item 5: a Julia process that holds the usage log's lock for longer than a run
/// waits (`write_env_usage` on a slow shared filesystem: read the log, ..., rename over it)
/// loses no entry. `fetch` neither appends to the log it is about to replace nor drops its
/// entry: the entry is kept beside the log; `gc` waits for the lock as Julia would (the
/// holder keeps it fresh), then merges the kept entry and compacts, keeping the Julia
/// writer's entry too.
#[test]
fn no_usage_entry_is_lost_while_julia_holds_the_logs_lock_for_long() {
    let sb = Sandbox::new();
    let hash = "5".repeat(40);
    let manifest = sb.work.join("Artifacts.toml");
    fs::write(&manifest, format!("[kept]\ngit-tree-sha1 = \"{hash}\"\n")).unwrap();
    fs::create_dir_all(sb.depot.join("artifacts").join(&hash)).unwrap();
    fs::write(sb.depot.join("artifacts").join(&hash).join("a"), "a").unwrap();
    let old = sb.root.path().join("old/Artifacts.toml");
    let julia = sb.root.path().join("julia/Artifacts.toml");
    for m in [&old, &julia] {
        fs::create_dir_all(m.parent().unwrap()).unwrap();
        fs::write(m, "").unwrap();
    }
    let logs = sb.depot.join("logs");
    fs::create_dir_all(&logs).unwrap();
    let log = logs.join("artifact_usage.toml");
    let entry = |m: &Path, t: &str| format!("[[{:?}]]\ntime = {t}\n", m.display().to_string());
    let before = entry(&old, "2024-01-01T00:00:00Z") + &entry(&old, "2024-03-01T00:00:00Z");
    fs::write(&log, &before).unwrap();
    // Pkg's `write_env_usage` under `mkpidlock("<log>.pid", stale_age = 3)` (O_EXCL, 0o444,
    // "<pid> <host>", refreshed every second), holding it for 15 s before its rename.
    let pidfile = logs.join("artifact_usage.toml.pid");
    let script = r#"
        umask 0222; set -C
        printf '%s %s' "$$" "$HOST" > "$PIDFILE" || exit 3
        umask 022; set +C
        old=$(cat "$LOG")
        end=$(( $(date +%s) + 15 ))
        while [ "$(date +%s)" -lt "$end" ]; do sleep 1; touch "$PIDFILE"; done
        printf '%s\n[["%s"]]\ntime = 2026-01-02T03:04:05.678\n' "$old" "$MANIFEST" > "$LOG.tmp"
        mv "$LOG.tmp" "$LOG"
        rm -f "$PIDFILE"
    "#;
    let mut holder = std::process::Command::new("sh")
        .args(["-c", script])
        .env("HOST", clima_artifact_fs::hostname())
        .env("PIDFILE", &pidfile)
        .env("LOG", &log)
        .env("MANIFEST", &julia)
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while !pidfile.exists() {
        assert!(
            start.elapsed().as_secs() < 10,
            "the Julia side never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // `fetch` waits its 10 s, then keeps its entry: the log Julia is replacing is untouched.
    let fetched = sb.cli().args(["fetch", "kept"]).output().unwrap();
    assert_ok(&fetched);
    assert!(
        pidfile.exists(),
        "the Julia side let go too early for this test"
    );
    assert_eq!(fs::read_to_string(&log).unwrap(), before);
    // `gc` waits for the lock while its holder is alive, then merges and compacts.
    let gc = std::process::Command::new(assert_cmd::cargo::cargo_bin("clima-artifacts"))
        .args(["gc", "--delay", "0", "--json"])
        .env("CLIMA_ARTIFACTS_DEPOT_PATH", &sb.depot)
        .env("CLIMA_ARTIFACTS_PROGRESS", "0")
        .env_remove("JULIA_DEPOT_PATH")
        .current_dir(&sb.work)
        .output()
        .unwrap();
    assert!(holder.wait().unwrap().success());
    assert_ok(&gc);
    let after = fs::read_to_string(&log).unwrap();
    let manifest = fs::canonicalize(&manifest).unwrap();
    for m in [&old, &julia, &manifest] {
        assert_eq!(
            after
                .matches(&format!("[[{:?}]]", m.display().to_string()))
                .count(),
            1,
            "{}: {after}",
            m.display()
        );
    }
    let report: serde_json::Value = serde_json::from_slice(&gc.stdout).unwrap();
    assert_eq!(report["kept"], 1, "{report}");
    let left: Vec<String> = fs::read_dir(&logs)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "artifact_usage.toml" && n != "orphaned.toml")
        .collect();
    assert!(left.is_empty(), "left in logs: {left:?}");
}

/// The entries of a tarball made by `create` (every gzip member read), each checked: owners
/// and mtimes zeroed, modes normalised, symlinks 0o755 of size 0 as Tar.create writes them.
fn archived_entries(tarball: &[u8]) -> Vec<String> {
    let mut archive = tar::Archive::new(flate2::read::MultiGzDecoder::new(tarball));
    let mut seen = Vec::new();
    for entry in archive.entries().unwrap() {
        let entry = entry.unwrap();
        let h = entry.header();
        assert_eq!(h.mtime().unwrap(), 0);
        assert_eq!(h.uid().unwrap(), 0);
        assert_eq!(h.gid().unwrap(), 0);
        assert_eq!(h.username().unwrap(), Some(""));
        let path = entry.path().unwrap().display().to_string();
        let mode = h.mode().unwrap();
        match path.as_str() {
            "bin/run.sh" => assert_eq!(mode, 0o755),
            "README.md" => assert_eq!(mode, 0o644),
            // As Tar.create: symlinks and directories 0o755 with size 0.
            "latest" => {
                assert_eq!(
                    entry.link_name().unwrap().unwrap().to_str(),
                    Some("README.md")
                );
                assert_eq!((mode, h.size().unwrap()), (0o755, 0));
            }
            "bin/" | "data/" | "empty/" => assert_eq!((mode, h.size().unwrap()), (0o755, 0)),
            _ => {}
        }
        seen.push(path);
    }
    seen
}

/// Issue 47, item 10: `verify --include-overrides` found an override's folder changed and
/// advised "delete that folder and run fetch"; for an entry with no download that folder is the
/// only copy. It now says never to delete it, and prints the command that records the folder's
/// hash, which runs as printed from anywhere, after which the override verifies.
#[test]
fn verify_never_advises_deleting_an_overrides_folder() {
    let sb = Sandbox::new();
    let data = sb.root.path().join("scratch/era5");
    sample_tree(&data);
    let data_s = data.to_str().unwrap();
    assert_ok(
        &sb.cli()
            .args(["create", data_s, "--name", "era5", "--external"])
            .output()
            .unwrap(),
    );
    assert_ok(
        &sb.cli()
            .args(["override", "set", "era5", data_s])
            .output()
            .unwrap(),
    );
    fs::write(data.join("data/v.nc"), "changed by hand").unwrap();

    let out = sb
        .cli()
        .args(["verify", "era5", "--include-overrides"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!err.contains("delete that folder"), "{err}");
    let manifest = sb.work.join("Artifacts.toml");
    let record = format!(
        "clima-artifacts create {} --external --name era5 --manifest {}",
        fs::canonicalize(&data).unwrap().display(),
        manifest.display()
    );
    assert!(
        err.contains(&format!(
            "this folder is an override's (set in `{}`), possibly the only copy of the data: do \
             not delete it; point the override at the folder that holds the content the \
             manifest names or, if this folder's content is the one wanted, record its hash \
             with `{record}`",
            sb.depot.join("artifacts/Overrides.toml").display()
        )),
        "{err}"
    );
    let out = sb
        .cli()
        .args(["verify", "era5", "--include-overrides", "--json"])
        .output()
        .unwrap();
    assert!(json(&out)[0]["override_file"].is_string(), "{out:?}");

    // Run as printed, from a folder with no manifest: the hash recorded, then the override
    // that `create` prints for it, and the override verifies.
    let words = common::printed_command(&err, "record its hash with `");
    let out = sb
        .cli()
        .current_dir(sb.root.path())
        .args(&words[1..])
        .output()
        .unwrap();
    assert_ok(&out);
    let words = common::printed_command(&String::from_utf8_lossy(&out.stdout), "(or run `");
    assert_ok(
        &sb.cli()
            .current_dir(sb.root.path())
            .args(&words[1..])
            .output()
            .unwrap(),
    );
    assert_ok(
        &sb.cli()
            .args(["verify", "era5", "--include-overrides"])
            .output()
            .unwrap(),
    );
}

/// Issue 47, item 9: the two hints of `list`'s table run as printed from a folder with no
/// manifest (they were `run \`clima-artifacts fetch\`` and `needs \`clima-artifacts override
/// set\``, neither naming the artifact or the manifest): the first installs the missing
/// artifact, the second, with its folder word replaced by the data's folder, sets the override.
#[test]
fn the_hints_of_lists_table_run_as_printed() {
    let sb = Sandbox::new();
    let manifest = sb.work.join("project/Artifacts.toml");
    fs::create_dir_all(manifest.parent().unwrap()).unwrap();
    let (_server, hash) = create_served_era5(&sb, manifest.to_str().unwrap());
    let mut text = fs::read_to_string(&manifest).unwrap();
    text.push_str("\n[local_only]\ngit-tree-sha1 = \"");
    text.push_str(&hash.replace(&hash[..1], if &hash[..1] == "a" { "b" } else { "a" }));
    text.push_str("\"\n");
    fs::write(&manifest, &text).unwrap();

    let elsewhere = sb.root.path().join("elsewhere");
    fs::create_dir_all(&elsewhere).unwrap();
    let out = sb
        .cli()
        .current_dir(&elsewhere)
        .args(["list", "--manifest"])
        .arg(&manifest)
        .output()
        .unwrap();
    assert_ok(&out);
    let table = String::from_utf8_lossy(&out.stdout).into_owned();

    let fetch = common::printed_command(&table, "downloadable: run `");
    let out = sb
        .cli()
        .current_dir(&elsewhere)
        .args(&fetch[1..])
        .output()
        .unwrap();
    assert_ok(&out);
    assert!(sb.depot.join("artifacts").join(&hash).is_dir(), "{table}");

    let set = common::printed_command(&table, "no download: set its folder with `");
    let folder = sb.root.path().join("local-data");
    sample_tree(&folder);
    let words: Vec<String> = set
        .iter()
        .map(|w| match w.as_str() {
            "FOLDER" => folder.to_str().unwrap().to_owned(),
            _ => w.clone(),
        })
        .collect();
    assert!(
        words.iter().any(|w| *w == folder.to_str().unwrap()),
        "{table}"
    );
    let out = sb
        .cli()
        .current_dir(&elsewhere)
        .args(&words[1..])
        .output()
        .unwrap();
    assert_ok(&out);
    let overrides = fs::read_to_string(sb.depot.join("artifacts/Overrides.toml")).unwrap();
    assert!(overrides.contains(folder.to_str().unwrap()), "{overrides}");
}
