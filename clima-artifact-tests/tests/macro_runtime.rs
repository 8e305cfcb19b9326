//! `clima_artifact!` through the public API, against `tests/Artifacts.toml` (read at compile
//! time) and a temp depot set with `set_macro_config` (tarballs are installed through the real
//! pipeline from the quickstart example's data folder).

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use clima_artifact_runtime::{Config, Error, Singleton, clima_artifact, inventory};

struct Fixture {
    _depot: tempfile::TempDir,
    depot: PathBuf,
    _site: tempfile::TempDir,
    /// The override target of `local-only`.
    site_data: PathBuf,
}

const LOCAL_ONLY: &str = "f2e37ce8393132a9470b4405546a1730d42cbc67";

/// One depot for this test process, with an `Overrides.toml` entry for `local-only`.
static FIXTURE: LazyLock<Fixture> = LazyLock::new(|| {
    let depot = tempfile::tempdir().unwrap();
    let site = tempfile::tempdir().unwrap();
    let site_data = site.path().join("radiosonde");
    std::fs::create_dir_all(&site_data).unwrap();
    std::fs::write(site_data.join("radiosonde.csv"), "z_m,T_K\n0,291.2\n").unwrap();
    std::fs::create_dir_all(depot.path().join("artifacts")).unwrap();
    std::fs::write(
        depot.path().join("artifacts/Overrides.toml"),
        format!("{LOCAL_ONLY} = \"{}\"\n", site_data.display()),
    )
    .unwrap();
    let mut config = Config::from_env().unwrap();
    config.depots = vec![depot.path().into()];
    config.julia_interop = false;
    clima_artifact_runtime::set_macro_config(config).unwrap();
    Fixture {
        depot: depot.path().to_path_buf(),
        _depot: depot,
        _site: site,
        site_data,
    }
});

fn depot() -> &'static Path {
    &FIXTURE.depot
}

#[test]
fn literal_name_installs_into_the_depot() {
    let dir = {
        let _ = depot();
        clima_artifact!("profile").unwrap()
    };
    assert_eq!(
        dir,
        depot().join("artifacts/9ac956584f182cbfd7244eaf6d2fc9ee7b03ff2c")
    );
    let csv = std::fs::read_to_string(dir.join("profile.csv")).unwrap();
    assert!(csv.starts_with("z_m,p_hPa,T_K"), "{csv}");
    // The model's manifest is in the depot's usage log, so a `gc` run from anywhere keeps it.
    let log = std::fs::read_to_string(depot().join("logs/artifact_usage.toml")).unwrap();
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Artifacts.toml");
    assert!(
        log.contains(&format!("[[{:?}]]", manifest.display().to_string())),
        "{log}"
    );
}

#[test]
fn sub_path_and_context_forms() {
    let _ = depot();
    let ctx = Singleton;
    let file = clima_artifact!("forcing-table/forcing.csv", &ctx).unwrap();
    assert!(file.is_file(), "{}", file.display());
    assert!(file.ends_with("b98aa606b385754103cf26dc6f137f028bbd0e6d/forcing.csv"));
    let dyn_ctx: &dyn clima_artifact_runtime::Context = &ctx;
    let dir = clima_artifact!("forcing-table", dyn_ctx).unwrap();
    assert_eq!(file.parent().unwrap(), dir);
}

/// `seekable-many` is a seekable tarball (it has `index-sha256`): a sub-path of it is fetched
/// alone into the depot's partial folder, never as `artifacts/<hash>`; a file already fetched
/// is answered from there, the context form gives the same, and a folder works as well.
#[test]
fn a_sub_path_of_a_seekable_artifact_is_fetched_alone() {
    const HASH: &str = "33f9070fb6eb791887cfd27ed0df6de00667c601";
    let root = depot().join("clima_partial").join(HASH);
    let file = clima_artifact!("seekable-many/year3/u4.csv").unwrap();
    assert_eq!(file, root.join("year3/u4.csv"));
    let csv = std::fs::read_to_string(&file).unwrap();
    assert!(csv.starts_with("3,4,"), "{csv}");
    assert!(!depot().join("artifacts").join(HASH).exists());
    let again = clima_artifact!("seekable-many/year3/u4.csv", &Singleton).unwrap();
    assert_eq!(again, file);
    let folder = clima_artifact!(String::from("seekable-many/year1")).unwrap();
    assert_eq!(folder, root.join("year1"));
    assert_eq!(std::fs::read_dir(&folder).unwrap().count(), 6);
    assert!(!depot().join("artifacts").join(HASH).exists());
}

#[test]
fn a_missing_sub_path_is_a_clear_error() {
    let _ = depot();
    let err = clima_artifact!("profile/no/such.csv").unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("`profile`"), "{msg}");
    assert!(msg.contains("no/such.csv"), "{msg}");
    assert!(msg.contains("profile.csv"), "lists what is there: {msg}");
}

#[test]
fn names_computed_at_run_time_are_checked_against_the_embedded_manifest() {
    let _ = depot();
    for name in ["ozone", "ozone/ozone_250m.csv"] {
        let owned = String::from(name);
        let p = clima_artifact!(owned).unwrap();
        assert!(p.exists(), "{}", p.display());
    }
    let borrowed: &str = "forcing-table";
    assert!(clima_artifact!(borrowed, &Singleton).unwrap().is_dir());

    let err = clima_artifact!(format!("ozon{}", "e5")).unwrap_err();
    assert!(matches!(err, Error::Select(_)), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("`ozone5`"), "{msg}");
    assert!(
        msg.contains("profile, forcing-table, ozone, local-only, per-arch"),
        "{msg}"
    );
    // Run-time names get the same did-you-mean as literal names get at compile time, also after
    // the error crossed the wire from an MPI root.
    assert!(msg.contains("; did you mean `ozone`? defined: "), "{msg}");
    assert_eq!(Error::from_wire(&err.to_wire()).to_string(), msg);
    let far = clima_artifact!(String::from("sea-ice-thickness"), &Singleton).unwrap_err();
    let far = far.to_string();
    assert!(far.contains("`sea-ice-thickness` is not defined"), "{far}");
    assert!(
        !far.contains("did you mean"),
        "no suggestion for an unrelated name: {far}"
    );

    let err = clima_artifact!(String::from("ozone/../../etc")).unwrap_err();
    assert!(matches!(err, Error::SubPath(_)), "{err:?}");
}

#[test]
fn the_host_variant_of_a_platform_specific_entry_is_used() {
    let _ = depot();
    let dir = clima_artifact!("per-arch").unwrap();
    let expected = match std::env::consts::ARCH {
        "x86_64" => "forcing.csv",
        "aarch64" => "ozone_250m.csv",
        other => {
            println!("no per-arch variant for {other}; skipping");
            return;
        }
    };
    assert!(dir.join(expected).is_file(), "{}", dir.display());
}

fn local_only_here() -> Result<PathBuf, Error> {
    clima_artifact!("local-only")
}

fn local_only_elsewhere() -> Result<PathBuf, Error> {
    clima_artifact!("local-only/radiosonde.csv")
}

#[test]
fn repeated_calls_are_answered_from_memory() {
    let target = FIXTURE.site_data.clone();
    let first = local_only_here().unwrap();
    assert_eq!(first, target);
    assert!(local_only_elsewhere().unwrap().is_file());

    // Take the override target away: a call that looked at the file system would fail now.
    let moved = target.with_extension("moved");
    std::fs::rename(&target, &moved).unwrap();
    for _ in 0..100 {
        assert_eq!(local_only_here().unwrap(), first);
    }
    // The other call site is answered from memory too (the sub-path was checked once).
    assert_eq!(
        local_only_elsewhere().unwrap(),
        first.join("radiosonde.csv")
    );
    std::fs::rename(&moved, &target).unwrap();

    // Every call was recorded, with both call sites and the override as origin.
    let records = clima_artifact_runtime::access_log::snapshot();
    let record = records.iter().find(|r| r.name == "local-only").unwrap();
    assert_eq!(record.accesses, 103);
    let lines: Vec<u32> = record.call_sites.iter().map(|c| c.line).collect();
    assert_eq!(lines.len(), 2, "{:?}", record.call_sites);
    assert!(
        matches!(
            record.origin,
            clima_artifact_runtime::access_log::RecordedOrigin::Override { .. }
        ),
        "{:?}",
        record.origin
    );
}

#[test]
fn declared_artifacts_lists_the_call_sites_of_this_binary() {
    let declared = inventory::declared_artifacts();
    let names: Vec<&str> = declared.iter().map(|a| a.name).collect();
    // The run-time-name call sites declare every artifact of the manifest.
    assert_eq!(
        names,
        [
            "forcing-table",
            "local-only",
            "ozone",
            "per-arch",
            "profile",
            "seekable-many"
        ]
    );
    let local = declared.iter().find(|a| a.name == "local-only").unwrap();
    assert!(!local.downloadable);
    assert!(!local.lazy);
    assert!(
        local.manifest.ends_with("tests/Artifacts.toml"),
        "{}",
        local.manifest
    );
    let literal: Vec<(u32, Option<&str>)> = local
        .call_sites
        .iter()
        .filter(|s| s.literal)
        .map(|s| (s.line, s.subpath))
        .collect();
    let this_file = include_str!("macro_runtime.rs");
    let line_of = |needle: &str| {
        this_file
            .lines()
            .position(|l| l.contains(needle))
            .map(|i| i as u32 + 1)
            .unwrap()
    };
    assert_eq!(
        literal,
        [
            (line_of("clima_artifact!(\"local-only\")"), None),
            (
                line_of("\"local-only/radiosonde.csv\")"),
                Some("radiosonde.csv")
            ),
        ]
    );
    assert!(
        local
            .call_sites
            .iter()
            .all(|s| s.file.ends_with("macro_runtime.rs"))
    );
    assert!(local.call_sites.iter().any(|s| !s.literal));

    let ozone = declared.iter().find(|a| a.name == "ozone").unwrap();
    assert!(ozone.lazy);
    let per_arch = declared.iter().find(|a| a.name == "per-arch").unwrap();
    assert_eq!(per_arch.hashes.len(), 2);
}

/// Prints the cost of a repeated call (a measurement, not a check: run with
/// `cargo test -p clima-artifact-tests --release --test macro_runtime -- --ignored --nocapture`).
#[test]
#[ignore = "measurement; prints the time per repeated call"]
fn measure_repeated_call() {
    fn profile() -> Result<PathBuf, Error> {
        clima_artifact!("profile/profile.csv")
    }
    let _ = depot();
    profile().unwrap();
    let n = 200_000;
    let start = std::time::Instant::now();
    for _ in 0..n {
        std::hint::black_box(profile().unwrap());
    }
    let per_call = start.elapsed() / n;
    println!("repeated clima_artifact! call: {per_call:?} per call");
}
