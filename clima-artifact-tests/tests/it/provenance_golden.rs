//! Golden files for the three report formats (`tests/golden/provenance.{md,json,bib}`).
//!
//! The report is built from fixed records (fixed times, paths and sizes) covering: full
//! metadata and a download, an override without any metadata, a depot hit with citation and
//! DOI but no BibTeX (generated `@misc`), the same BibTeX entry under one key in two artifacts,
//! the same content under two keys, two different entries under one key, unparseable BibTeX,
//! and a declared artifact that was not accessed.
//!
//! `UPDATE_GOLDEN=1 cargo test -p clima-artifact-tests --test it provenance_golden` rewrites the
//! files; review the diff before committing.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clima_artifact_runtime::GitTreeSha1;
use clima_artifact_runtime::access_log::{ArtifactRecord, CallSite, RecordedOrigin};
use clima_artifact_runtime::report::{DeclaredArtifact, Report, SCHEMA};

fn hash(hex_digit: char) -> GitTreeSha1 {
    hex_digit.to_string().repeat(40).parse().unwrap()
}

fn site(file: &str, line: u32) -> CallSite {
    CallSite {
        file: file.into(),
        line,
    }
}

fn meta(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

const HERSBACH: &str = "@article{hersbach2020,\n  author = {Hersbach, H. and Bell, B.},\n  \
    title = {The {ERA5} global reanalysis},\n  journal = {Q. J. R. Meteorol. Soc.},\n  \
    year = {2020},\n  doi = {10.1002/qj.3803}\n}";

fn record(
    name: &str,
    h: char,
    origin: RecordedOrigin,
    metadata: &[(&str, &str)],
) -> ArtifactRecord {
    ArtifactRecord {
        name: name.into(),
        git_tree_sha1: hash(h),
        manifest: "/home/model/Artifacts.toml".into(),
        path: format!("/depot/artifacts/{}", hash(h)),
        origin,
        accesses: 1,
        first_access: "2024-05-01T12:00:00.000Z".into(),
        call_sites: vec![site("src/main.rs", 10)],
        ranks: vec![0],
        metadata: meta(metadata),
        received_by: vec![],
    }
}

/// The fixed report every golden file is rendered from.
fn fixture() -> Report {
    let mut era5 = record(
        "era5",
        'a',
        RecordedOrigin::Downloaded {
            url: "https://data.example.org/era5-2008.tar.gz".into(),
            bytes: 12_582_912,
            received_bytes: Some(8_388_608),
            reused_bytes: Some(4_194_304),
            seconds: 3.25,
        },
        &[
            ("description", "ERA5 hourly winds, 2008 subset"),
            ("version", "2023.1"),
            ("license", "CC-BY-4.0"),
            (
                "acknowledgement",
                "Contains modified Copernicus Climate Change Service information (2023).",
            ),
            (
                "citation",
                "Hersbach, H. et al. (2020): The ERA5 global reanalysis. Q. J. R. Meteorol. Soc.",
            ),
            ("doi", "10.1002/qj.3803"),
            ("bibtex", HERSBACH),
            ("source", "https://cds.climate.copernicus.eu"),
            ("maintainer", "Data Team <data@example.org>"),
        ],
    );
    era5.accesses = 12;
    era5.ranks = vec![0, 1, 2, 3];
    era5.call_sites = vec![site("src/dynamics.rs", 42), site("src/main.rs", 10)];
    era5.first_access = "2024-05-01T11:59:58.125Z".into();

    // Same BibTeX entry (same key, same content up to whitespace) as era5.
    let era5_monthly = record(
        "era5_monthly",
        'b',
        RecordedOrigin::Depot,
        &[
            ("description", "ERA5 monthly means | pressure levels"),
            ("version", "2023.1"),
            ("license", "CC-BY-4.0"),
            (
                "acknowledgement",
                "Contains modified Copernicus Climate Change Service information (2023).",
            ),
            ("bibtex", &HERSBACH.replace("\n  ", "\n    ")),
        ],
    );

    let topography = record(
        "topography",
        'c',
        RecordedOrigin::Override {
            overrides_file: "/depot/artifacts/Overrides.toml".into(),
        },
        &[],
    );
    let mut topography = topography;
    topography.path = "/scratch/shared/topography-v2".into();
    topography.call_sites = Vec::new();

    let ocean_mask = record(
        "ocean_mask",
        'd',
        RecordedOrigin::Depot,
        &[
            ("description", "Land-sea mask at 1 degree"),
            ("license", "CC0-1.0"),
            ("citation", "Smith & Jones (2019): A 1° land-sea mask, v3."),
            ("doi", "https://doi.org/10.5281/zenodo.1234567"),
        ],
    );

    let pincus = "@article{pincus2019,\n  author = {Pincus, R. and Mlawer, E. J. and Delamere, J. S.},\n  \
                  title = {Balancing accuracy, efficiency, and flexibility in radiation calculations},\n  \
                  journal = {J. Adv. Model. Earth Syst.},\n  year = {2019}\n}";
    let rrtmgp = record(
        "rrtmgp",
        'e',
        RecordedOrigin::Depot,
        &[
            ("description", "RRTMGP gas optics coefficients"),
            ("version", "1.8"),
            ("license", "BSD-3-Clause"),
            (
                "acknowledgement",
                "We thank the RRTMGP developers for the gas optics tables",
            ),
            ("bibtex", pincus),
        ],
    );
    // The same content under another key, plus a different entry reusing era5's key.
    let rrtmgp_clouds = record(
        "rrtmgp_clouds",
        'f',
        RecordedOrigin::Depot,
        &[
            ("description", "RRTMGP cloud optics"),
            ("version", "1.8"),
            ("license", "BSD-3-Clause"),
            (
                "acknowledgement",
                "We thank the RRTMGP developers for the gas optics tables.",
            ),
            (
                "bibtex",
                &format!(
                    "{}\n\n@misc{{hersbach2020, title = {{Not the same entry}}}}",
                    pincus.replace("pincus2019", "Pincus2019clouds")
                ),
            ),
        ],
    );
    let broken = record(
        "solar_spectrum",
        '1',
        RecordedOrigin::Depot,
        &[
            ("description", "Solar spectral irradiance"),
            ("license", "CC-BY-4.0"),
            (
                "acknowledgement",
                "Solar data courtesy of the SOLARIS-HEPPA project.",
            ),
            (
                "citation",
                "Matthes, K. et al. (2017): Solar forcing for CMIP6.",
            ),
            ("bibtex", "@article{matthes2017, title = {unclosed"),
        ],
    );

    let declared = vec![
        DeclaredArtifact {
            name: "aerosol_climatology".into(),
            manifest: "/home/model/Artifacts.toml".into(),
            git_tree_sha1s: vec![hash('9'), hash('8')],
            lazy: true,
            call_sites: vec![site("src/radiation.rs", 88), site("src/aerosol.rs", 12)],
            metadata: BTreeMap::new(),
        },
        // Accessed, so not listed.
        DeclaredArtifact {
            name: "era5".into(),
            manifest: "/home/model/Artifacts.toml".into(),
            git_tree_sha1s: vec![hash('a')],
            lazy: false,
            call_sites: vec![site("src/main.rs", 10)],
            metadata: BTreeMap::new(),
        },
        // Accessed through another manifest path with the same hash: not listed either.
        DeclaredArtifact {
            name: "topography".into(),
            manifest: "/home/model/../model/Artifacts.toml".into(),
            git_tree_sha1s: vec![hash('c')],
            lazy: false,
            call_sites: Vec::new(),
            metadata: BTreeMap::new(),
        },
    ];

    let mut report = Report::from_parts(
        [
            topography,
            era5,
            ocean_mask,
            rrtmgp,
            era5_monthly,
            rrtmgp_clouds,
            broken,
        ],
        declared,
    );
    report.generated_at = "2024-05-01T12:30:00.000Z".into();
    report.generator = "clima-artifact-runtime (golden test)".into();
    report.communicator_size = 4;
    report
}

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("golden")
}

/// Compares `actual` with the checked-in file, or rewrites it when `UPDATE_GOLDEN=1`.
fn check_golden(file: &str, actual: &str) {
    let path = golden_dir().join(file);
    if std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(golden_dir()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|err| {
        panic!(
            "cannot read golden file `{}` ({err}); run with UPDATE_GOLDEN=1 to create it",
            path.display()
        )
    });
    if expected != actual {
        let first_diff = expected
            .lines()
            .zip(actual.lines())
            .position(|(e, a)| e != a)
            .unwrap_or_else(|| expected.lines().count().min(actual.lines().count()));
        panic!(
            "`{}` differs from the rendered report at line {}:\n  expected: {:?}\n  actual:   {:?}\n\
             run with UPDATE_GOLDEN=1 to accept the new output, then review the diff",
            path.display(),
            first_diff + 1,
            expected.lines().nth(first_diff),
            actual.lines().nth(first_diff),
        );
    }
}

#[test]
fn markdown_matches_golden() {
    check_golden("provenance.md", &fixture().to_markdown());
}

#[test]
fn json_matches_golden() {
    check_golden("provenance.json", &fixture().to_json());
}

#[test]
fn bibtex_matches_golden() {
    check_golden("provenance.bib", &fixture().to_bibtex());
}

#[test]
fn golden_json_re_renders_to_the_same_markdown_and_bibtex() {
    // What the CLI does: read a run's JSON and render it again.
    let json = fixture().to_json();
    let parsed = Report::from_json(&json).unwrap();
    assert_eq!(parsed, fixture());
    assert_eq!(parsed.to_markdown(), fixture().to_markdown());
    assert_eq!(parsed.to_bibtex(), fixture().to_bibtex());
    assert_eq!(parsed.to_json(), json);
}

#[test]
fn the_fixture_covers_what_the_golden_files_claim() {
    let report = fixture();
    assert_eq!(report.schema, SCHEMA);
    let names: Vec<&str> = report.artifacts.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "era5",
            "era5_monthly",
            "ocean_mask",
            "rrtmgp",
            "rrtmgp_clouds",
            "solar_spectrum",
            "topography"
        ]
    );
    assert_eq!(report.declared_not_accessed.len(), 1);
    assert_eq!(
        report.declared_not_accessed[0].call_sites,
        [site("src/aerosol.rs", 12), site("src/radiation.rs", 88)]
    );

    let md = report.to_markdown();
    // The artifact without metadata is reported as such, not described.
    assert!(
        md.contains(
            "- `topography` in `/home/model/Artifacts.toml`: no provenance metadata at all"
        )
    );
    assert!(md.contains("No acknowledgement text is given for `ocean_mask` and `topography`"));
    // Duplicate acknowledgement texts appear once; a missing final period is added.
    assert_eq!(md.matches("Contains modified Copernicus").count(), 1);
    assert!(md.contains("for the gas optics tables. Solar data"));
    assert!(md.contains("[10.5281/zenodo.1234567](https://doi.org/10.5281/zenodo.1234567)"));
    assert!(md.contains("ERA5 monthly means \\| pressure levels"));

    let bib = report.to_bibtex();
    assert_eq!(bib.matches("@article{hersbach2020").count(), 1);
    assert_eq!(
        bib.matches("{hersbach2020").count(),
        1,
        "conflicting key dropped"
    );
    assert_eq!(bib.matches("@article{pincus2019").count(), 1);
    assert!(
        !bib.contains("Pincus2019clouds,"),
        "same content under another key"
    );
    assert!(bib.contains("@misc{artifact:ocean_mask,"));
    assert!(
        bib.contains("@misc{artifact:solar_spectrum,"),
        "fallback after bad bibtex"
    );
    assert!(bib.contains("unbalanced braces"));
    assert!(bib.contains("No reference (bibtex, citation or doi) is given for: topography."));
}

#[test]
fn write_all_writes_the_three_files_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let report = fixture();
    // A directory that exists: provenance.* inside it.
    let paths = report.write_all(dir.path()).unwrap();
    assert_eq!(paths.markdown, dir.path().join("provenance.md"));
    assert_eq!(
        std::fs::read_to_string(&paths.markdown).unwrap(),
        report.to_markdown()
    );
    assert_eq!(
        std::fs::read_to_string(&paths.json).unwrap(),
        report.to_json()
    );
    assert_eq!(
        std::fs::read_to_string(&paths.bibtex).unwrap(),
        report.to_bibtex()
    );
    // Writing again replaces the files; no temporary file is left behind.
    let mut changed = report.clone();
    changed.generated_at = "2025-01-01T00:00:00.000Z".into();
    changed.write_all(dir.path()).unwrap();
    assert!(
        std::fs::read_to_string(&paths.json)
            .unwrap()
            .contains("2025-01-01")
    );
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["provenance.bib", "provenance.json", "provenance.md"]
    );

    // A folder that does not exist yet is created and written into, with or without a
    // trailing separator (it is never taken as a file-name prefix).
    let paths = report.write_all(dir.path().join("out/provenance")).unwrap();
    assert_eq!(
        paths.json,
        dir.path().join("out/provenance").join("provenance.json")
    );
    assert!(paths.markdown.is_file() && paths.bibtex.is_file());
    assert!(!dir.path().join("out/provenance.md").exists());

    // A prefix, in a folder that does not exist yet, with its own function.
    let paths = report
        .write_with_prefix(dir.path().join("runs/run7"))
        .unwrap();
    assert_eq!(paths.json, dir.path().join("runs/run7.json"));
    assert_eq!(
        Report::from_json(&std::fs::read_to_string(&paths.json).unwrap()).unwrap(),
        report
    );
    // The same with a trailing separator.
    let paths = report
        .write_all(format!("{}/new/", dir.path().display()))
        .unwrap();
    assert_eq!(paths.bibtex, dir.path().join("new").join("provenance.bib"));
    assert!(paths.bibtex.is_file());

    // Failure names the path: the parent is a regular file.
    let blocker = dir.path().join("blocker");
    std::fs::write(&blocker, "x").unwrap();
    let err = report.write_all(blocker.join("sub/")).unwrap_err();
    assert!(err.to_string().contains("blocker"), "{err}");
}

/// A generated `@misc` carries `author` and `year` from the citation (the author from
/// `maintainer` when the citation names none), and the header counts "1 entry".
#[test]
fn generated_entries_carry_author_and_year_and_the_count_is_singular() {
    let depot = || RecordedOrigin::Depot;
    let era5 = record(
        "era5",
        'a',
        depot(),
        &[(
            "citation",
            "Hersbach, H. et al. (2020): The ERA5 global reanalysis",
        )],
    );
    let report = Report::from_parts([era5.clone()], Vec::new());
    let bib = report.to_bibtex();
    assert!(
        bib.starts_with("% References of the datasets used by this run (1 entry)."),
        "{bib}"
    );
    assert!(
        bib.contains("  author = {Hersbach, H. and others},\n"),
        "{bib}"
    );
    assert!(bib.contains("  year = {2020},\n"), "{bib}");

    let mask = record(
        "mask",
        'b',
        depot(),
        &[
            ("doi", "10.5281/zenodo.1234567"),
            ("citation", "Land-sea mask, release 2019 of 2018 data"),
            ("maintainer", "Data Team <data@example.org>"),
        ],
    );
    let bib = Report::from_parts([era5, mask], Vec::new()).to_bibtex();
    assert!(bib.contains("(2 entries)"), "{bib}");
    assert!(bib.contains("  author = {Data Team},\n"), "{bib}");
    // "release 2019" is not the shape of a citation's year.
    assert_eq!(bib.matches("  year = ").count(), 1, "{bib}");
    assert!(!bib.contains("data@example.org"), "{bib}");
}
