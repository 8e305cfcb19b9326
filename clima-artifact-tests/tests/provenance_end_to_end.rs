//! The report of real `clima_artifact!` accesses: installs through the real pipeline into a temp
//! depot (tarballs of the quickstart example, referenced by `tests/Artifacts.toml`), an override,
//! repeated calls, and a declared call site that never runs.
//!
//! One test function, because the registry and the macro configuration are process-wide.

use std::path::Path;

use clima_artifact_runtime::access_log::RecordedOrigin;
use clima_artifact_runtime::{Config, Report, clima_artifact, report};

const PROFILE: &str = "9ac956584f182cbfd7244eaf6d2fc9ee7b03ff2c";
const LOCAL_ONLY: &str = "f2e37ce8393132a9470b4405546a1730d42cbc67";

fn line_of(needle: &str) -> u32 {
    include_str!("provenance_end_to_end.rs")
        .lines()
        .position(|l| l.contains(needle))
        .map(|i| i as u32 + 1)
        .unwrap_or_else(|| panic!("`{needle}` not in this file"))
}

#[test]
fn report_of_real_accesses() {
    let depot = tempfile::tempdir().unwrap();
    let site = tempfile::tempdir().unwrap();
    std::fs::write(site.path().join("radiosonde.csv"), "z_m,T_K\n0,291.2\n").unwrap();
    let overrides = depot.path().join("artifacts/Overrides.toml");
    std::fs::create_dir_all(overrides.parent().unwrap()).unwrap();
    std::fs::write(
        &overrides,
        format!("{LOCAL_ONLY} = \"{}\"\n", site.path().display()),
    )
    .unwrap();
    let mut config = Config::from_env().unwrap();
    config.depots = vec![depot.path().into()];
    config.julia_interop = false;
    clima_artifact_runtime::set_macro_config(config).unwrap();

    for _ in 0..3 {
        clima_artifact!("profile").unwrap(); // site: profile loop
    }
    let csv = clima_artifact!("profile/profile.csv").unwrap(); // site: profile csv
    assert!(csv.is_file());
    let local = clima_artifact!("local-only").unwrap(); // site: override
    assert_eq!(local, site.path());
    if std::hint::black_box(false) {
        // Declared, never accessed.
        let _ = clima_artifact!("ozone");
    }

    let report = report();
    let names: Vec<&str> = report.artifacts.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["local-only", "profile"]);

    let profile = &report.artifacts[1];
    assert_eq!(profile.git_tree_sha1.to_hex(), PROFILE);
    assert_eq!(profile.accesses, 4);
    assert_eq!(profile.ranks, [0]);
    assert_eq!(
        Path::new(&profile.path),
        depot.path().join("artifacts").join(PROFILE)
    );
    assert!(
        profile.manifest.ends_with("Artifacts.toml"),
        "{}",
        profile.manifest
    );
    let lines: Vec<u32> = profile.call_sites.iter().map(|s| s.line).collect();
    assert_eq!(
        lines,
        [
            line_of("// site: profile loop"),
            line_of("// site: profile csv")
        ]
    );
    assert!(
        profile
            .call_sites
            .iter()
            .all(|s| s.file.ends_with("provenance_end_to_end.rs"))
    );
    match &profile.origin {
        RecordedOrigin::Downloaded { url, bytes, .. } => {
            assert!(url.contains("standard-atmosphere.tar.gz"), "{url}");
            assert!(*bytes > 0);
        }
        other => panic!("profile was installed by this run, got {other:?}"),
    }
    assert_eq!(
        profile.metadata["description"],
        "Idealised standard atmosphere"
    );
    assert_eq!(profile.metadata["license"], "CC0-1.0");

    let local = &report.artifacts[0];
    assert_eq!(
        local.origin,
        RecordedOrigin::Override {
            overrides_file: overrides.to_string_lossy().into_owned().into()
        }
    );
    assert!(local.metadata.is_empty());

    // Declared call sites that did not run: at least `ozone` (run-time-name call sites in other
    // test binaries do not count; this binary has only literal ones).
    let declared: Vec<&str> = report
        .declared_not_accessed
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    assert_eq!(declared, ["ozone"]);
    assert!(report.declared_not_accessed[0].lazy);

    let md = report.to_markdown();
    assert!(md.contains(
        "| `profile` | Idealised standard atmosphere | *not given* | `CC0-1.0` | downloaded from"
    ));
    assert!(md.contains("`local-only` in"));
    assert!(md.contains("no provenance metadata at all"));
    assert!(md.contains("## Declared but not accessed"));

    let out = tempfile::tempdir().unwrap();
    let paths = report.write_all(out.path()).unwrap();
    let reread = Report::from_json(&std::fs::read_to_string(&paths.json).unwrap()).unwrap();
    assert_eq!(reread, report);
    // Nothing cites anything here, and the BibTeX says so.
    let bib = std::fs::read_to_string(&paths.bibtex).unwrap();
    assert!(bib.contains("(0 entries)"), "{bib}");
    assert!(bib.contains("given for: local-only, profile."), "{bib}");
}
