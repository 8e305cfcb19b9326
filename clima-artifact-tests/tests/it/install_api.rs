//! The public `Artifacts` API over a real manifest file.

use clima_artifact_runtime::Origin;
use clima_artifact_runtime::{Artifacts, Error, access_log};
use clima_artifact_tests::{
    ManifestEntry, TestArtifact, TestServer, have_git, success_stdout, test_config, write_manifest,
};

struct Setup {
    _dir: tempfile::TempDir,
    depot: std::path::PathBuf,
    server: TestServer,
    art: TestArtifact,
    manifest: std::path::PathBuf,
}

fn setup() -> Option<Setup> {
    setup_with(31)
}

/// Like [`setup`] with the `era5` content made from `seed`. The provenance registry is global
/// to the test process, so a test counting accesses needs a hash no other test installs.
fn setup_with(seed: u32) -> Option<Setup> {
    if !have_git() {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let depot = dir.path().join("depot");
    let server = TestServer::start();
    let art = TestArtifact::sample(seed);
    server.serve("era5.tar.gz", art.tarball.clone());
    let manifest = write_manifest(
        &dir.path().join("pkg"),
        &[
            ManifestEntry {
                name: "era5",
                hash: art.tree_hash,
                downloads: vec![(server.url("era5.tar.gz"), art.sha256)],
                extra: vec![("license", "CC-BY-4.0")],
            },
            ManifestEntry {
                name: "local_only",
                hash: TestArtifact::sample(32).tree_hash,
                downloads: vec![],
                extra: vec![],
            },
        ],
    );
    Some(Setup {
        _dir: dir,
        depot,
        server,
        art,
        manifest,
    })
}

fn load(s: &Setup) -> Artifacts {
    Artifacts::load(&s.manifest)
        .unwrap_or_else(|e| panic!("{e}"))
        .with_config(test_config(std::slice::from_ref(&s.depot)))
}

#[test]
fn ensure_installed_queries_and_sub_paths() {
    let Some(s) = setup() else { return };
    let a = load(&s);
    assert_eq!(a.hash("era5").unwrap(), s.art.tree_hash);
    assert!(!a.is_installed("era5").unwrap());
    assert_eq!(a.artifact_path("era5").unwrap(), None);

    let dir = a.ensure_installed("era5").unwrap();
    s.art.assert_content(&dir);
    assert!(a.is_installed("era5").unwrap());
    assert_eq!(a.artifact_path("era5").unwrap(), Some(dir.clone()));
    assert_eq!(
        a.ensure_installed("era5/data/values.csv").unwrap(),
        dir.join("data/values.csv")
    );
    let detailed = a.ensure_installed_detailed("era5/bin").unwrap();
    assert_eq!(
        (detailed.path, detailed.origin),
        (dir.join("bin"), Origin::Depot)
    );
    assert_eq!(s.server.gets("era5.tar.gz"), 1);

    let e = a.ensure_installed("era5/data/nope.csv").unwrap_err();
    assert!(matches!(e, Error::SubPathMissing { .. }), "{e:?}");
    assert!(e.to_string().contains("data/nope.csv"), "{e}");
    let e = a.ensure_installed("era5/../etc").unwrap_err();
    assert!(matches!(e, Error::SubPath(_)), "{e:?}");

    let e = a.ensure_installed("eraa5").unwrap_err().to_string();
    assert!(e.contains("eraa5") && e.contains("era5"), "{e}");

    // The usage log records the manifest, like Julia's.
    let log = std::fs::read_to_string(s.depot.join("logs/artifact_usage.toml")).unwrap();
    assert!(log.contains(&s.manifest.display().to_string()), "{log}");
}

#[test]
fn successful_calls_are_recorded_for_provenance() {
    let Some(s) = setup_with(33) else { return };
    let a = load(&s);
    a.ensure_installed("era5").unwrap();
    a.ensure_installed("era5/README.md").unwrap();
    // The registry is process-wide and other tests of this binary record in parallel: this
    // test's artifact (seed 33) is its own, and matching the (temporary) manifest as well keeps
    // the lookup exact even if another test ever reuses that seed.
    let manifest = s.manifest.display().to_string();
    let rec = access_log::snapshot()
        .into_iter()
        .find(|r| r.git_tree_sha1 == s.art.tree_hash && r.manifest == manifest)
        .expect("recorded");
    assert_eq!(rec.name, "era5");
    assert_eq!(rec.accesses, 2);
    assert_eq!(
        rec.metadata.get("license").map(String::as_str),
        Some("CC-BY-4.0")
    );
    assert!(matches!(
        rec.origin,
        access_log::RecordedOrigin::Downloaded { .. }
    ));
}

#[test]
fn from_dir_and_missing_download_section() {
    let Some(s) = setup() else { return };
    let a = Artifacts::from_dir(s.manifest.parent().unwrap())
        .unwrap()
        .with_config(test_config(std::slice::from_ref(&s.depot)));
    let e = a.ensure_installed("local_only").unwrap_err().to_string();
    assert!(e.contains("= \"/path/to/local_only\""), "{e}");
    assert!(e.contains(&s.manifest.display().to_string()), "{e}");
}

#[test]
fn helper_binary_installs_from_a_manifest() {
    let Some(s) = setup() else { return };
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_install_one"))
        .args(["manifest"])
        .arg(&s.manifest)
        .arg("era5/data")
        .env("CLIMA_ARTIFACTS_DEPOT_PATH", &s.depot)
        .output()
        .unwrap();
    let path = success_stdout(out);
    assert_eq!(
        std::path::Path::new(path.trim()),
        s.depot
            .join("artifacts")
            .join(s.art.tree_hash.to_hex())
            .join("data")
    );

    // A bad environment variable is a clear error naming it.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_install_one"))
        .args(["manifest"])
        .arg(&s.manifest)
        .arg("era5")
        .env("CLIMA_ARTIFACTS_DEPOT_PATH", &s.depot)
        .env("CLIMA_ARTIFACTS_STALL_TIMEOUT", "forever")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("CLIMA_ARTIFACTS_STALL_TIMEOUT"), "{err}");
}

/// `fn main() -> Result<(), Box<dyn Error>>` prints `Debug`: for our errors that is the readable
/// message with what to do, never `Other { message: .. }` or `NoDownloads { name: .. }`.
#[test]
fn main_returning_an_error_prints_a_readable_message() {
    let Some(s) = setup() else { return };
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_main_error"))
        .arg(&s.manifest)
        .arg("local_only")
        .env("CLIMA_ARTIFACTS_DEPOT_PATH", &s.depot)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("Error: artifact `local_only` ("),
        "the first line is the message: {err}"
    );
    assert!(err.contains("has no download section in `"), "{err}");
    assert!(
        err.contains("= \"/path/to/local_only\""),
        "it says what to add: {err}"
    );
    assert!(!err.contains("NoDownloads"), "no struct dump: {err}");
    assert!(
        !err.contains(" {\n") && !err.contains("name: \""),
        "no struct dump: {err}"
    );

    // A missing sub-path: the same readable form, listing what the artifact holds.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_main_error"))
        .arg(&s.manifest)
        .arg("era5/nope.nc")
        .env("CLIMA_ARTIFACTS_DEPOT_PATH", &s.depot)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    // (The download before it logs plain progress lines: stderr is not a terminal here.)
    assert!(
        err.lines()
            .any(|l| l.starts_with("clima-artifacts: downloading `era5` (")),
        "{err}"
    );
    let line = err
        .lines()
        .find(|l| l.starts_with("Error: "))
        .unwrap_or_else(|| panic!("no `Error:` line: {err}"));
    assert!(
        line.starts_with("Error: artifact `era5` has no `nope.nc`"),
        "{err}"
    );
    assert!(
        line.contains("top level holds: ") && line.contains("data"),
        "{err}"
    );
}

/// Under a batch system stderr is a log file, not a terminal: a download logs a start line
/// (name, size, host), progress lines (every 10% at most once a second, or every ~10 s), and an
/// end line with bytes, time and rate.
#[test]
fn a_download_logs_plain_progress_lines_when_stderr_is_not_a_terminal() {
    if !have_git() {
        return;
    }
    let s = clima_artifact_tests::served(TestArtifact::large(1521, 4, 60_000), "slow.tar.gz");
    // About 3 s in all: 10% steps come at least a second apart.
    let chunk = s.art.tarball.len() / 30 + 1;
    s.server.always(
        "slow.tar.gz",
        clima_artifact_tests::Fault::Trickle {
            chunk,
            delay: std::time::Duration::from_millis(100),
        },
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_install_one"))
        .args([
            "variant",
            "slow",
            &s.art.tree_hash.to_hex(),
            &s.art.sha256.to_hex(),
            &s.server.url("slow.tar.gz"),
        ])
        .current_dir(s.dir.path())
        .env("CLIMA_ARTIFACTS_DEPOT_PATH", &s.depot)
        .env_remove("CLIMA_ARTIFACTS_PROGRESS")
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("clima-artifacts: "))
        .collect();
    assert!(
        lines[0].starts_with("clima-artifacts: downloading `slow` (")
            && lines[0].contains("from 127.0.0.1:"),
        "{err}"
    );
    let progress: Vec<&&str> = lines.iter().filter(|l| l.contains("%), ")).collect();
    assert!(
        (1..=9).contains(&progress.len()),
        "expected some, but at most one per 10%: {err}"
    );
    let last = lines.last().unwrap();
    assert!(
        last.starts_with("clima-artifacts: downloaded `slow`: ")
            && last.contains(" s (")
            && last.ends_with("/s)"),
        "{err}"
    );
}

/// A manifest with its own name (`MyArtifacts.toml`) is named as such in the messages, not as
/// `Artifacts.toml` (the no-download error and a failed download's hint).
#[test]
fn messages_name_the_manifest_file_actually_used() {
    if !have_git() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let depot = dir.path().join("depot");
    let server = TestServer::start();
    let art = TestArtifact::sample(1551);
    let manifest = dir.path().join("MyArtifacts.toml");
    std::fs::write(
        &manifest,
        format!(
            "[local_only]\ngit-tree-sha1 = \"{}\"\n\n[broken]\ngit-tree-sha1 = \"{}\"\n[[broken.download]]\nurl = \"{}\"\nsha256 = \"{}\"\n",
            TestArtifact::sample(1552).tree_hash,
            art.tree_hash,
            server.url("missing.tar.gz"),
            art.sha256
        ),
    )
    .unwrap();
    let a = Artifacts::load(&manifest)
        .unwrap()
        .with_config(test_config(std::slice::from_ref(&depot)));
    for name in ["local_only", "broken"] {
        let e = a.ensure_installed(name).unwrap_err().to_string();
        assert!(e.contains("MyArtifacts.toml"), "{name}: {e}");
        assert!(!e.contains("/Artifacts.toml"), "{name}: {e}");
    }
}

/// Errors are per artifact, as in Julia: a malformed entry fails only when it is looked up, with
/// its file:line:col; the other entries of the manifest stay usable.
#[test]
fn a_broken_entry_fails_alone_and_the_others_stay_usable() {
    let Some(s) = setup_with(1561) else { return };
    let text = std::fs::read_to_string(&s.manifest).unwrap();
    // A top-level string where an artifact table belongs, and a table without its hash.
    let text = format!("not_a_table = \"oops\"\n{text}\n[no_hash]\nlicense = \"MIT\"\n");
    std::fs::write(&s.manifest, &text).unwrap();
    let a = load(&s);
    let path = a.ensure_installed("era5").unwrap();
    s.art.assert_content(&path);
    for name in ["no_hash", "not_a_table"] {
        let e = a.ensure_installed(name).unwrap_err().to_string();
        assert!(
            e.contains(&format!("artifact `{name}` cannot be used"))
                && e.contains(&s.manifest.display().to_string()),
            "{e}"
        );
    }
    let e = a.ensure_installed("no_hash").unwrap_err().to_string();
    assert!(e.contains("git-tree-sha1"), "{e}");
    // The strict reader (what build.rs's validate() and the macro use) still reports them all.
    let errors = clima_artifact_manifest::Manifest::load_all(&s.manifest).unwrap_err();
    assert_eq!(errors.len(), 2, "{errors:?}");
}

/// What Pkg 1.13's `gc` reads of `<depot>/logs/artifact_usage.toml` (`reduce_usage!` in Pkg's
/// `src/API.jl`): each key a manifest path, its value an array of tables whose `time` is a
/// datetime `DateTime(info["time"])` takes (Base's TOML parser accepts no offset but `Z`).
/// Returns the keys whose file exists (`filter(Pkg.isfile_nothrow, ...)`).
fn julia_gc_reads(depot: &std::path::Path) -> Vec<std::path::PathBuf> {
    let text = std::fs::read_to_string(depot.join("logs/artifact_usage.toml")).unwrap();
    let doc: toml::Table = text.parse().unwrap();
    let mut files = Vec::new();
    for (file, infos) in &doc {
        for info in infos.as_array().unwrap_or_else(|| panic!("{text}")) {
            let time = info["time"]
                .as_datetime()
                .unwrap_or_else(|| panic!("{text}"));
            assert!(time.date.is_some() && time.time.is_some(), "{text}");
            assert!(
                matches!(time.offset, None | Some(toml::value::Offset::Z)),
                "{text}"
            );
        }
        let path = std::path::PathBuf::from(file);
        if path.is_absolute() && path.is_file() {
            files.push(path);
        }
    }
    files
}

#[test]
fn the_depot_holding_an_artifact_records_its_manifest_for_julias_gc() {
    let Some(s) = setup_with(34) else { return };
    // Our first depot is private; the artifact is in a shared depot further down the path,
    // the first depot of a Julia user whose `Pkg.gc()` deletes what its logs do not reach.
    let shared = s._dir.path().join("shared");
    s.art
        .builder
        .write_to(&shared.join("artifacts").join(s.art.tree_hash.to_hex()));
    let a = load(&s).with_config(test_config(&[s.depot.clone(), shared.clone()]));
    let got = a.ensure_installed_detailed("era5").unwrap();
    assert_eq!(got.origin, Origin::Depot);
    assert!(got.path.starts_with(&shared));
    assert_eq!(s.server.gets("era5.tar.gz"), 0);
    assert_eq!(julia_gc_reads(&shared), vec![s.manifest.clone()]);
    assert_eq!(julia_gc_reads(&s.depot), vec![s.manifest.clone()]);
}

#[test]
fn a_usage_entry_is_not_lost_while_julia_rewrites_the_usage_log() {
    let Some(s) = setup_with(35) else { return };
    let logs = s.depot.join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let log = logs.join("artifact_usage.toml");
    let pidfile = logs.join("artifact_usage.toml.pid");
    let julia_manifest = s._dir.path().join("julia/Artifacts.toml");
    std::fs::create_dir_all(julia_manifest.parent().unwrap()).unwrap();
    std::fs::write(&julia_manifest, "").unwrap();
    // Pkg's `write_env_usage`: under `mkpidlock("<log>.pid", stale_age = 3)` (O_EXCL, 0o444,
    // "<pid> <host>"), read the log, add its entry, and replace the log by an atomic rename.
    let script = r#"
        umask 0222; set -C
        printf '%s %s' "$$" "$HOST" > "$PIDFILE" || exit 3
        umask 022; set +C
        old=$(cat "$LOG" 2>/dev/null)
        sleep 1
        printf '%s\n[["%s"]]\ntime = 2026-01-02T03:04:05.678\n' "$old" "$MANIFEST" > "$LOG.tmp"
        mv "$LOG.tmp" "$LOG"
        rm -f "$PIDFILE"
    "#;
    let mut julia = std::process::Command::new("sh")
        .args(["-c", script])
        .env("HOST", clima_artifact_fs::hostname())
        .env("PIDFILE", &pidfile)
        .env("LOG", &log)
        .env("MANIFEST", &julia_manifest)
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
    load(&s).ensure_installed("era5").unwrap();
    assert!(julia.wait().unwrap().success());
    let mut read = julia_gc_reads(&s.depot);
    read.sort();
    let mut want = vec![s.manifest.clone(), julia_manifest];
    want.sort();
    assert_eq!(read, want, "{}", std::fs::read_to_string(&log).unwrap());
    assert!(!pidfile.exists());
}
