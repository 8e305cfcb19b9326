//! `clima-artifacts mirror` end to end: the real binary against the loopback server, two
//! manifests of 20 artifacts, failures, a `kill -9` and a rerun, two mirrors at once on one
//! depot, and the overrides section it keeps in `Overrides.toml`.

#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one scenario; the 100-line rule (issue 36) is for non-test code"
)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use clima_artifact_manifest::layout;
use clima_artifact_tests::{
    Fault, ManifestEntry, TestArtifact, TestServer, config_env, git_tree_hash, temp_entries,
    test_config, write_manifest,
};

/// The binary with the environment of a test (the depot is given with `--depot`).
fn mirror_cmd(depot: &Path) -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("clima-artifacts"));
    for (k, v) in config_env(&test_config(&[depot.to_path_buf()])) {
        cmd.env(k, v);
    }
    cmd.env_remove(clima_artifact_runtime::vars::JULIA_INTEROP)
        .env_remove("JULIA_DEPOT_PATH")
        .env(clima_artifact_runtime::vars::RETRIES, "1")
        .arg("mirror")
        .arg("--depot")
        .arg(depot);
    cmd
}

fn run(cmd: &mut Command) -> Output {
    cmd.stdin(Stdio::null()).output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// 20 artifacts in two manifests (`a00`..`a09` in `one/`, `b10`..`b19` in `two/`, and `two/`
/// also names `a00`'s content as `a00_again`), served at `<name>.tar.gz`.
struct Collection {
    server: TestServer,
    arts: Vec<(String, TestArtifact)>,
    manifests: Vec<PathBuf>,
    _dir: tempfile::TempDir,
    depot: PathBuf,
}

fn collection(make: impl Fn(u32) -> TestArtifact) -> Collection {
    let dir = tempfile::tempdir().unwrap();
    let depot = dir.path().join("depot");
    std::fs::create_dir_all(&depot).unwrap();
    let server = TestServer::start();
    let arts: Vec<(String, TestArtifact)> = (0..20u32)
        .map(|i| {
            let name = format!("{}{i:02}", if i < 10 { 'a' } else { 'b' });
            let art = make(i);
            server.serve(&format!("{name}.tar.gz"), art.tarball.clone());
            (name, art)
        })
        .collect();
    fn entry<'a>(
        server: &TestServer,
        (name, art): &'a (String, TestArtifact),
    ) -> ManifestEntry<'a> {
        ManifestEntry {
            name: name.as_str(),
            hash: art.tree_hash,
            downloads: vec![(server.url(&format!("{name}.tar.gz")), art.sha256)],
            extra: vec![],
        }
    }
    let one: Vec<ManifestEntry<'_>> = arts[..10].iter().map(|a| entry(&server, a)).collect();
    let mut two: Vec<ManifestEntry<'_>> = arts[10..].iter().map(|a| entry(&server, a)).collect();
    let mut again = entry(&server, &arts[0]);
    again.name = "a00_again";
    two.push(again);
    let manifests = vec![
        write_manifest(&dir.path().join("one"), &one),
        write_manifest(&dir.path().join("two"), &two),
    ];
    Collection {
        server,
        arts,
        manifests,
        _dir: dir,
        depot,
    }
}

/// Every entry of the depot's `artifacts/` is a verified artifact of `expected` (its folder
/// hashes, by real git, to its name), a lock folder, or the overrides file: nothing unverified
/// (no install temp dir, no artifact folder with other content), and returns the artifacts.
fn assert_only_verified(depot: &Path, expected: &[&TestArtifact]) -> usize {
    let mut artifacts = 0;
    for e in std::fs::read_dir(layout::artifacts_dir(depot)).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        match layout::Entry::parse(&name) {
            Some(layout::Entry::Artifact(h)) => {
                assert!(
                    expected.iter().any(|a| a.tree_hash == h),
                    "{name} is not an artifact of the manifests"
                );
                let dir = layout::artifacts_dir(depot).join(&name);
                assert_eq!(git_tree_hash(&dir), h, "{name} holds other content");
                artifacts += 1;
            }
            Some(layout::Entry::Locks | layout::Entry::Overrides) => {}
            // Kept bytes of an unfinished download: verified when resumed, never installed as
            // they are.
            Some(layout::Entry::Partial { .. }) => {}
            _ => panic!("unexpected entry `{name}` in the depot"),
        }
    }
    assert_eq!(temp_entries(depot), Vec::<String>::new());
    artifacts
}

#[test]
fn mirror_installs_18_of_20_names_the_2_that_failed_then_reruns_with_nothing_to_do() {
    let c = collection(TestArtifact::sample);
    // b13 is missing on the server, b17 is other bytes than the manifest's sha256.
    c.server.always("b13.tar.gz", Fault::Status(404));
    c.server
        .serve("b17.tar.gz", TestArtifact::sample(99).tarball.clone());
    let out = run(mirror_cmd(&c.depot).args(&c.manifests));
    let (so, se) = (stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(1), "{so}\n{se}");
    for failed in ["b13", "b17"] {
        assert!(
            so.lines()
                .any(|l| l.starts_with("failed") && l.contains(failed)),
            "{so}"
        );
        assert!(se.contains(&format!("  {failed}: ")), "{se}");
    }
    assert!(se.contains("2 of 20 could not be mirrored"), "{se}");
    assert!(so.contains("18 of 20 installed (18 now, 2 failed)"), "{so}");
    // a00 and a00_again are one artifact, downloaded once.
    assert!(so.contains("a00, a00_again"), "{so}");
    assert_eq!(c.server.gets("a00.tar.gz"), 1);
    let all: Vec<&TestArtifact> = c.arts.iter().map(|(_, a)| a).collect();
    assert_eq!(assert_only_verified(&c.depot, &all), 18);
    for (name, art) in &c.arts {
        let there = layout::artifact_dir(&c.depot, &art.tree_hash).is_dir();
        assert_eq!(there, name != "b13" && name != "b17", "{name}");
    }
    // The usage log records both manifests, so that gc of the depot keeps their artifacts.
    let log = std::fs::read_to_string(layout::usage_log(&c.depot)).unwrap();
    assert!(log.contains("one/Artifacts.toml") && log.contains("two/Artifacts.toml"));

    // Fixed on the server: the rerun installs the two, and only downloads those.
    let before = c.server.total_gets();
    c.server.always("b13.tar.gz", Fault::Pass);
    c.server.serve("b17.tar.gz", c.arts[17].1.tarball.clone());
    let out = run(mirror_cmd(&c.depot).args(&c.manifests));
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("20 of 20 installed (2 now, 0 failed)"));
    assert_eq!(c.server.total_gets() - before, 2);

    // Everything is there: nothing to do, nothing asked of the server.
    let before = c.server.total_gets();
    let out = run(mirror_cmd(&c.depot).args(&c.manifests));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out).lines().last(),
        Some("nothing to do: 20 of 20 installed"),
        "{}",
        stdout(&out)
    );
    assert_eq!(c.server.total_gets(), before);
    assert_eq!(assert_only_verified(&c.depot, &all), 20);
}

#[test]
fn a_mirror_killed_mid_download_completes_on_rerun_with_fewer_gets() {
    // 300 kB of incompressible bytes each, at 600 kB/s per connection: half a second each.
    let c = collection(|i| TestArtifact::large(u64::from(i) + 1, 3, 100_000));
    c.server.cap_rate(600_000);
    let size = c.arts[0].1.tarball.len() as u64;
    let mut child = mirror_cmd(&c.depot)
        .args(&c.manifests)
        .args(["--jobs", "4"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Killed once some artifacts are installed and the next ones are part way through.
    let mut waited = 0;
    loop {
        let installed = clima_artifact_tests::installed_entries(&c.depot).len() as u64;
        if installed >= 4 && c.server.bytes_sent() > installed * size + size / 2 {
            break;
        }
        assert!(waited < 6000, "the mirror made no progress");
        assert!(
            child.try_wait().unwrap().is_none(),
            "the mirror ended early"
        );
        std::thread::sleep(Duration::from_millis(5));
        waited += 1;
    }
    // SAFETY: kill(2) of our own child by its pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    let after_kill = clima_artifact_tests::installed_entries(&c.depot).len();
    assert!(after_kill < 20, "the kill came too late to test anything");
    let all: Vec<&TestArtifact> = c.arts.iter().map(|(_, a)| a).collect();
    // What the killed run installed is verified; its temp folders are left for the next run.
    let gets_first = c.server.total_gets();

    c.server.cap_rate(0);
    let out = run(mirror_cmd(&c.depot).args(&c.manifests));
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    let gets_rerun = c.server.total_gets() - gets_first;
    assert!(
        gets_rerun < 20,
        "the rerun made {gets_rerun} GETs: it downloaded again what was installed"
    );
    assert!(
        stdout(&out).contains("20 of 20 installed"),
        "{}",
        stdout(&out)
    );
    assert_eq!(assert_only_verified(&c.depot, &all), 20);
}

#[test]
fn two_mirrors_at_once_on_one_depot_download_each_artifact_once() {
    let c = collection(|i| TestArtifact::large(u64::from(i) + 100, 2, 50_000));
    c.server.cap_rate(500_000);
    let spawn = || {
        mirror_cmd(&c.depot)
            .env(clima_artifact_runtime::vars::PROGRESS, "1")
            .args(&c.manifests)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (one, two) = (spawn(), spawn());
    let (one, two) = (
        one.wait_with_output().unwrap(),
        two.wait_with_output().unwrap(),
    );
    for o in [&one, &two] {
        assert!(o.status.success(), "{}\n{}", stdout(o), stderr(o));
        assert!(stdout(o).contains("20 of 20 installed"), "{}", stdout(o));
    }
    for (name, _) in &c.arts {
        assert_eq!(c.server.gets(&format!("{name}.tar.gz")), 1, "{name}");
    }
    // The mirror that waits for the other's lock says so, naming the holder's process.
    let both = format!("{}\n{}", stderr(&one), stderr(&two));
    assert!(
        both.contains("waiting for") && both.contains("another process holds its lock"),
        "{both}"
    );
    let all: Vec<&TestArtifact> = c.arts.iter().map(|(_, a)| a).collect();
    assert_eq!(assert_only_verified(&c.depot, &all), 20);
}

const UUID_TABLE: &str = "# Julia's package overrides\n[d6f4376e-aef5-505a-96c1-9c027394607a]\nlibfoo = \"/opt/libfoo\"\n";

#[test]
fn the_overrides_section_keeps_hand_edits_and_a_second_mirrors_section() {
    let dir = tempfile::tempdir().unwrap();
    let depot = dir.path().join("depot");
    std::fs::create_dir_all(&depot).unwrap();
    let server = TestServer::start();
    let art = TestArtifact::sample(1);
    server.serve("era5.tar.gz", art.tarball.clone());
    // `ocean_ics` has the SHA-1 of its name as its hash (a placeholder); `land` no downloads.
    let placeholder =
        clima_artifact_manifest::GitTreeSha1::from_hex("d5162b9d8d4d4ba52b315ab121f017fd8c65f964")
            .unwrap();
    let land = TestArtifact::sample(2).tree_hash;
    let manifest = write_manifest(
        &dir.path().join("proj"),
        &[
            ManifestEntry {
                name: "era5",
                hash: art.tree_hash,
                downloads: vec![(server.url("era5.tar.gz"), art.sha256)],
                extra: vec![],
            },
            ManifestEntry {
                name: "ocean_ics",
                hash: placeholder,
                downloads: vec![(server.url("ocean.tar.gz"), art.sha256)],
                extra: vec![],
            },
            ManifestEntry {
                name: "land",
                hash: land,
                downloads: vec![],
                extra: vec![],
            },
        ],
    );
    let folder = |n: &str| {
        let p = dir.path().join(n);
        std::fs::create_dir_all(&p).unwrap();
        p.display().to_string()
    };
    let hand_hash = "ab".repeat(20);
    let hand = format!("# set by hand\n{hand_hash} = \"/by/hand\"\n\n{UUID_TABLE}");
    let file = clima_artifact_tests::write_overrides(&depot, &hand);

    // Without overrides: both are listed with what to set, nothing is written.
    let out = run(mirror_cmd(&depot).arg(&manifest));
    let so = stdout(&out);
    assert!(out.status.success(), "{so}\n{}", stderr(&out));
    assert!(so.contains("2 artifact(s) cannot be downloaded"), "{so}");
    assert!(so.contains("clima-artifacts override set ocean_ics /path/to/ocean_ics --manifest"));
    assert!(so.contains(&format!(
        "{placeholder} = \"/path/to/ocean_ics\" # ocean_ics"
    )));
    assert!(
        so.contains("clima-artifacts override set land /path/to/land"),
        "{so}"
    );
    assert!(so.contains("SHA-1 of the name `ocean_ics`"), "{so}");
    assert!(
        so.contains("1 of 1 installed") && so.contains("2 need an override"),
        "{so}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), hand);
    assert_eq!(
        server.gets("ocean.tar.gz"),
        0,
        "a placeholder hash is never downloaded"
    );

    // Mirror `one` manages `land`, mirror `two` manages `ocean_ics`.
    let land_dir = folder("land-v1");
    let out = run(mirror_cmd(&depot).arg(&manifest).args([
        "--id",
        "one",
        "--override",
        &format!("land={land_dir}"),
    ]));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("1 overridden, 1 need an override"),
        "{}",
        stdout(&out)
    );
    let from = dir.path().join("ocean-overrides.toml");
    std::fs::write(&from, "ocean_ics = \"ocean-v1\"\n").unwrap();
    let ocean_dir = folder("ocean-v1");
    let out = run(mirror_cmd(&depot)
        .arg(&manifest)
        .args(["--id", "two", "--overrides-from"])
        .arg(&from));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("nothing to do: 1 of 1 installed, 2 overridden"));
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.starts_with(&format!("# set by hand\n{hand_hash} = \"/by/hand\"\n")));
    assert!(text.ends_with(UUID_TABLE), "{text}");
    let parsed = clima_artifact_manifest::OverridesFile::load(&file).unwrap();
    let target = |h| match &parsed.get(&h).unwrap().target {
        clima_artifact_manifest::OverrideTarget::Path(p) => p.display().to_string(),
        other => panic!("{other:?}"),
    };
    assert_eq!(target(land), land_dir);
    assert_eq!(target(placeholder), ocean_dir);

    // A hand edit, then mirror `one` again with another folder: only its own line changes.
    let edited = text.replace("# set by hand\n", "# set by hand, and edited\n");
    std::fs::write(&file, &edited).unwrap();
    let land_v2 = folder("land-v2");
    let out = run(mirror_cmd(&depot).arg(&manifest).args([
        "--id",
        "one",
        "--override",
        &format!("land={land_v2}"),
    ]));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        edited.replace(&land_dir, &land_v2)
    );
    // Mirror `one` asked for what mirror `two` manages: left alone, said.
    let out = run(mirror_cmd(&depot).arg(&manifest).args([
        "--id",
        "one",
        "--override",
        &format!("ocean_ics={land_v2}"),
    ]));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("already set by the section of mirror two"),
        "{}",
        stderr(&out)
    );
    let now = std::fs::read_to_string(&file).unwrap();
    assert!(
        now.contains(&ocean_dir) && !now.contains("mirror one"),
        "{now}"
    );
    assert!(now.contains("# set by hand, and edited\n") && now.ends_with(UUID_TABLE));
}

#[test]
fn jobs_outside_1_to_64_are_clamped_with_a_warning() {
    let c = collection(TestArtifact::sample);
    for (jobs, used) in [("0", "using 1 "), ("65", "using 64 ")] {
        let out = run(mirror_cmd(&c.depot)
            .arg(&c.manifests[0])
            .args(["--jobs", jobs]));
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(
            stderr(&out).contains(&format!("warning: --jobs {jobs} is outside 1..=64; {used}")),
            "{}",
            stderr(&out)
        );
    }
    let out = run(mirror_cmd(&c.depot)
        .arg(&c.manifests[0])
        .args(["--jobs", "8"]));
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
}

#[test]
fn unreadable_manifests_and_broken_entries_fail_the_run_but_not_the_rest() {
    let c = collection(TestArtifact::sample);
    let bad = c.depot.parent().unwrap().join("bad/Artifacts.toml");
    std::fs::create_dir_all(bad.parent().unwrap()).unwrap();
    std::fs::write(&bad, "[broken]\nsha = 1\n").unwrap();
    let not_toml = c.depot.parent().unwrap().join("not-toml.toml");
    std::fs::write(&not_toml, "[[[").unwrap();
    let out = run(mirror_cmd(&c.depot)
        .arg(&c.manifests[0])
        .arg(&bad)
        .arg(&not_toml));
    let (so, se) = (stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(1), "{so}\n{se}");
    assert!(
        so.contains("10 of 10 installed (10 now, 0 failed), 2 manifest(s) or entries unreadable"),
        "{so}"
    );
    assert!(
        se.contains("[broken]: ") && se.contains("missing `git-tree-sha1`"),
        "{se}"
    );
    assert!(se.contains("not-toml.toml"), "{se}");
}

/// Issue 47, item 2: `--depot` names a shared folder's symlink that another user planted,
/// pointing at a folder of the victim's. The path used to be resolved before the check of the
/// links on the way, so artifacts, locks and the overrides section went into the link's
/// target. Now the mirror refuses, naming the link and its owner, and nothing is downloaded or
/// written there (the rule `fetch` and `gc` apply). A depot through the user's own link is
/// mirrored into as before.
#[test]
fn a_depot_given_through_another_users_symlink_is_refused_and_nothing_is_written_there() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        clima_artifact_tests::skip("a symlink owned by another user needs root to make");
        return;
    }
    let c = collection(TestArtifact::sample);
    let top = c.depot.parent().unwrap().to_path_buf();
    let victim = top.join("victims-own-depot");
    std::fs::create_dir(&victim).unwrap();
    let planted = top.join("shared-depot");
    std::os::unix::fs::symlink(&victim, &planted).unwrap();
    let other = clima_artifact_tests::OTHER_UID;
    std::os::unix::fs::lchown(&planted, Some(other), Some(other)).unwrap();
    let folder = top.join("a00-data");
    std::fs::create_dir(&folder).unwrap();

    let out = run(mirror_cmd(&planted)
        .arg(&c.manifests[0])
        .arg("--override")
        .arg(format!("a00={}", folder.display())));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{}\n{err}", stdout(&out));
    assert!(
        err.contains(&format!("`{}`", planted.display()))
            && err.contains(&format!("owned by uid {other}"))
            && err.contains("nothing was removed or written there"),
        "{err}"
    );
    let written: Vec<_> = std::fs::read_dir(&victim).unwrap().collect();
    assert!(written.is_empty(), "written through the link: {written:?}");
    assert_eq!(c.server.total_gets(), 0);

    // The user's own link to the depot is followed.
    let own = top.join("my-depot-link");
    std::os::unix::fs::symlink(&c.depot, &own).unwrap();
    let out = run(mirror_cmd(&own).arg(&c.manifests[0]));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("10 of 10 installed"),
        "{}",
        stdout(&out)
    );
    let all: Vec<&TestArtifact> = c.arts.iter().map(|(_, a)| a).collect();
    assert_eq!(assert_only_verified(&c.depot, &all), 10);
}

/// Issue 47, item 10: overrides were trusted silently. A placeholder override is warned about
/// on every run, with the command that records the real hash; other override folders are
/// counted as not hashed, and `--verify-overrides` hashes them, warns about one holding other
/// content (with the command that records its hash, which runs as printed), and remembers each
/// folder by its size and time so that the next run hashes only the folder that changed.
#[test]
fn overrides_are_verified_on_request_remembered_by_size_and_time_and_placeholders_warned() {
    if !clima_artifact_tests::have_git() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let depot = dir.path().join("depot");
    std::fs::create_dir_all(&depot).unwrap();
    let folder = |n: &str, content: &str| {
        let p = dir.path().join(n);
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("data.nc"), content).unwrap();
        p
    };
    let (era5, land, ocean) = (
        folder("era5", "era5 data"),
        folder("land", "not the land data"),
        folder("ocean", "ocean data"),
    );
    let era5_hash = git_tree_hash(&era5);
    let land_hash = TestArtifact::sample(2).tree_hash;
    let placeholder =
        clima_artifact_manifest::GitTreeSha1::from_hex("d5162b9d8d4d4ba52b315ab121f017fd8c65f964")
            .unwrap();
    let manifest = write_manifest(
        &dir.path().join("proj"),
        &[
            ("era5", era5_hash),
            ("land", land_hash),
            ("ocean_ics", placeholder),
        ]
        .map(|(name, hash)| ManifestEntry {
            name,
            hash,
            downloads: vec![],
            extra: vec![],
        }),
    );
    let mirror = |extra: &[&str]| {
        let out = run(mirror_cmd(&depot)
            .arg(&manifest)
            .arg("--override")
            .arg(format!("era5={}", era5.display()))
            .arg("--override")
            .arg(format!("land={}", land.display()))
            .arg("--override")
            .arg(format!("ocean_ics={}", ocean.display()))
            .args(extra));
        assert!(out.status.success(), "{}", stderr(&out));
        out
    };
    let record = |name: &str, path: &Path| {
        format!(
            "clima-artifacts create {} --external --name {name} --manifest {}",
            path.display(),
            manifest.display()
        )
    };

    // Without --verify-overrides: the placeholder is warned about, the rest counted.
    let out = mirror(&[]);
    let (so, se) = (stdout(&out), stderr(&out));
    assert!(
        se.contains(&format!(
            "warning: `ocean_ics` ({placeholder}) is overridden by its placeholder hash (the \
             SHA-1 of its name), which no content matches: the folder `{}` cannot be verified. \
             Record its real hash with `{}`",
            ocean.display(),
            record("ocean_ics", &ocean)
        )),
        "{se}"
    );
    assert!(
        so.contains("2 overridden folder(s) used as they are, not hashed: --verify-overrides"),
        "{so}"
    );
    assert!(!se.contains("`land`"), "{se}");

    // Verified: era5 holds its content, land other content (said, with what to run).
    let out = mirror(&["--verify-overrides"]);
    let (so, se) = (stdout(&out), stderr(&out));
    let actual = git_tree_hash(&land);
    assert!(
        so.lines()
            .any(|l| l.starts_with("overridden      era5 (") && l.ends_with(", verified")),
        "{so}"
    );
    assert!(
        so.lines().any(|l| l.starts_with("overridden      land (")
            && l.ends_with(", OTHER CONTENT than the manifests name")),
        "{so}"
    );
    let warning = format!(
        "warning: `land` ({land_hash}): its override `{}` holds other content (git-tree-sha1 \
         {actual}) than the manifests name: point the override at the folder holding that \
         content or, if this folder's content is the one wanted, record its hash with `{}`",
        land.display(),
        record("land", &land)
    );
    assert!(se.contains(&warning), "{se}");
    assert!(layout::override_checks_file(&depot).is_file());

    // The next run knows both folders by their size and time; a changed folder is hashed again.
    let checks = |out: &Output| -> Vec<(String, serde_json::Value)> {
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["outcomes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| {
                (
                    o["names"][0].as_str().unwrap().to_owned(),
                    o["override_check"].clone(),
                )
            })
            .collect()
    };
    let out = mirror(&["--verify-overrides", "--json"]);
    let got = checks(&out);
    assert_eq!(
        got[0].1,
        serde_json::json!({"status": "verified", "cached": true})
    );
    assert_eq!(got[1].1["cached"], true, "{got:?}");
    assert_eq!(got[2].1, serde_json::json!({"status": "placeholder"}));
    std::fs::write(land.join("more.nc"), "more").unwrap();
    let out = mirror(&["--verify-overrides", "--json"]);
    let got = checks(&out);
    assert_eq!(got[0].1["cached"], true);
    assert_eq!(
        (&got[1].1["cached"], got[1].1["actual"].as_str()),
        (
            &serde_json::json!(false),
            Some(git_tree_hash(&land).to_hex().as_str())
        ),
        "{got:?}"
    );

    // The command the warning printed runs as printed; land then verifies.
    let out = mirror(&["--verify-overrides"]);
    let words = common::printed_command(
        &stderr(&out),
        "if this folder's content is the one wanted, record its hash with `",
    );
    let recorded = Command::new(assert_cmd::cargo::cargo_bin("clima-artifacts"))
        .args(&words[1..])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(recorded.status.success(), "{}", stderr(&recorded));
    let out = mirror(&["--verify-overrides"]);
    assert!(
        stdout(&out)
            .lines()
            .any(|l| l.starts_with("overridden      land (") && l.ends_with(", verified")),
        "{}",
        stdout(&out)
    );
    assert!(!stderr(&out).contains("`land`"), "{}", stderr(&out));
}

/// The lines of a batch whose 68 downloads are all refused by one proxy (nothing listens at
/// its address), as `mirror` and `fetch --all` log them: one line per artifact, no escaped
/// line break inside a line, the cause said once for all 68 (the retries' too), the proxy's
/// password hidden, the origin never reached.
#[test]
fn a_batch_refused_by_one_proxy_logs_a_line_per_artifact_and_its_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let origin = TestServer::start();
    let mut manifest = String::new();
    for i in 0..68 {
        manifest.push_str(&format!(
            "[a{i:02}]\ngit-tree-sha1 = \"{:040x}\"\n[[a{i:02}.download]]\nurl = \"{}\"\n\
             sha256 = \"{}\"\n\n",
            i + 1,
            origin.url(&format!("a{i:02}.tar.gz")),
            "ab".repeat(32)
        ));
    }
    let manifest_path = dir.path().join("coll/Artifacts.toml");
    std::fs::create_dir_all(manifest_path.parent().unwrap()).unwrap();
    std::fs::write(&manifest_path, manifest).unwrap();
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let proxy = format!("http://maint:s3cret@{closed}");
    let shown_proxy = format!("`http://***@{closed}` (from HTTP_PROXY)");

    for (what, depot_name) in [("mirror", "d1"), ("fetch", "d2")] {
        let depot = dir.path().join(depot_name);
        std::fs::create_dir_all(&depot).unwrap();
        let mut cmd = mirror_cmd(&depot);
        if what == "fetch" {
            cmd = Command::new(assert_cmd::cargo::cargo_bin("clima-artifacts"));
            for (k, v) in config_env(&test_config(std::slice::from_ref(&depot))) {
                cmd.env(k, v);
            }
            cmd.args(["fetch", "--all", "-j", "16", "--manifest"])
                .arg(&manifest_path);
        } else {
            cmd.args(["--jobs", "16"]).arg(&manifest_path);
        }
        // A batch job's log: not a terminal, progress on, one retry per download.
        cmd.env_remove(clima_artifact_runtime::vars::PROGRESS)
            .env(clima_artifact_runtime::vars::RETRIES, "2")
            .env("HTTP_PROXY", &proxy)
            .env_remove("http_proxy")
            .env_remove("HTTPS_PROXY")
            .env_remove("https_proxy")
            .env_remove("NO_PROXY")
            .env_remove("no_proxy");
        let out = run(&mut cmd);
        let (so, se) = (stdout(&out), stderr(&out));
        assert_eq!(out.status.code(), Some(1), "{what}:\n{so}\n{se}");
        let lines: Vec<&str> = so
            .lines()
            .chain(se.lines())
            .filter(|l| !l.trim().is_empty())
            .collect();
        // Besides the artifacts' lines: the totals, one retry warning, how many were not
        // shown, the error, its one cause and what to do.
        assert!(
            lines.len() <= 68 + 6,
            "{what}: {} lines for 68 artifacts:\n{so}\n{se}",
            lines.len()
        );
        for line in &lines {
            assert!(
                !line.contains("\\n"),
                "{what}: an escaped line break: {line}"
            );
            assert!(
                !line.contains("s3cret"),
                "{what}: the password leaked: {line}"
            );
        }
        // One line of its own per artifact, saying it failed and why.
        for i in 0..68 {
            let own: Vec<&&str> = lines
                .iter()
                .filter(|l| {
                    l.starts_with(&format!("failed          a{i:02} ("))
                        || l.starts_with(&format!("a{i:02}  "))
                })
                .collect();
            assert_eq!(own.len(), 1, "{what}: a{i:02}: {own:?}\n{so}\n{se}");
            assert!(
                own[0].contains(&format!("the proxy {shown_proxy} refused the connection")),
                "{what}: {}",
                own[0]
            );
        }
        // The cause once, for all 68; the retries' once, and how many were not repeated.
        let grouped: Vec<&&str> = lines
            .iter()
            .filter(|l| {
                l.starts_with(&format!(
                    "  68 failed: the proxy {shown_proxy} refused the connection"
                ))
            })
            .collect();
        assert_eq!(grouped.len(), 1, "{what}:\n{se}");
        assert!(
            grouped[0].ends_with(": a00, a01, a02, a03, a04, a05, a06, a07 and 60 more"),
            "{what}: {}",
            grouped[0]
        );
        let retries = lines.iter().filter(|l| l.contains("retrying in")).count();
        assert_eq!(retries, 1, "{what}:\n{se}");
        assert!(
            se.contains("clima-artifacts: warning: 67 more warning(s) not shown, each with a cause told above"),
            "{what}:\n{se}"
        );
        assert_eq!(
            origin.total_gets(),
            0,
            "the origin was reached around the proxy"
        );
    }
}
