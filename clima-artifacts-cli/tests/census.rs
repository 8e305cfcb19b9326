//! `census` through the binary: the real manifest corpus laid out as its repositories hold it,
//! and hand-made trees covering every problem code, hidden and symlinked folders, broken files,
//! `--json` and `--depot`.

#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one scenario; the 100-line rule (issue 36) is for non-test code"
)]

mod common;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use common::{Sandbox, assert_ok, json, printed_command};
use serde_json::Value;

/// Every problem code, as the JSON summary must list them.
const CODES: [&str; 11] = [
    "placeholder-hash",
    "not-downloadable",
    "no-license",
    "license-unrecognised",
    "no-citation",
    "no-readme",
    "no-recipe",
    "share-link-host",
    "http-url",
    "name-conflict",
    "same-content",
];

const S1: &str = "750ead63910729c349beaed2a5db79903cbf3a982d0e0578e02994b1e7191c48";
const H1: &str = "b373f1887cff55850cbf76ec005f7d93726ae42e";
const H2: &str = "c373f1887cff55850cbf76ec005f7d93726ae42e";
const H3: &str = "d373f1887cff55850cbf76ec005f7d93726ae42e";
const H4: &str = "e373f1887cff55850cbf76ec005f7d93726ae42e";
const H5: &str = "f373f1887cff55850cbf76ec005f7d93726ae42e";
/// SHA-1 of the name `placeholder`.
const PLACEHOLDER: &str = "ff55435345834a3fe224936776c2aa15f6ed5358";

fn corpus_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("CLIMA_ARTIFACTS_CORPUS_DIR") {
        return Some(PathBuf::from(dir));
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .map(|a| a.join("shared/corpus/julia-artifacts"))
        .find(|p| p.is_dir())
}

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

/// Runs `census ARGS --json` in `sb`, asserting success.
fn census_json(sb: &Sandbox, args: &[&str]) -> Value {
    let out = sb
        .cli()
        .arg("census")
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    assert_ok(&out);
    json(&out)
}

/// The artifact with this hash.
fn artifact<'a>(report: &'a Value, hash: &str) -> &'a Value {
    report["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["git_tree_sha1"] == hash)
        .unwrap_or_else(|| panic!("{hash} not in the census: {report:#}"))
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

/// The values of the array `field` of these artifacts, sorted, without repeats.
fn union(artifacts: &[&Value], field: &str) -> Vec<String> {
    let all: BTreeSet<String> = artifacts.iter().flat_map(|a| strings(&a[field])).collect();
    all.into_iter().collect()
}

/// The corpus laid out as `<repo>/<path>` (SOURCES.tsv) under `root`.
fn lay_out_corpus(corpus: &Path, root: &Path) {
    let sources = fs::read_to_string(corpus.join("SOURCES.tsv")).unwrap();
    for line in sources.lines().skip(1) {
        let cols: Vec<&str> = line.split('\t').collect();
        let to = root.join(cols[1]).join(cols[2]);
        fs::create_dir_all(to.parent().unwrap()).unwrap();
        fs::copy(corpus.join(cols[0]), to).unwrap();
    }
}

/// The truth here was computed independently by `scripts/census_truth.py` from the corpus.
#[test]
fn census_of_the_corpus_names_its_conflicts_and_shared_contents() {
    let Some(corpus) = corpus_dir() else {
        let msg = "manifest corpus not found (looked for shared/corpus/julia-artifacts in the \
                   ancestors of the CLI package, and $CLIMA_ARTIFACTS_CORPUS_DIR)";
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{msg}; CI must have it"
        );
        clima_artifact_tests::skip(msg);
        return;
    };
    let sb = Sandbox::new();
    let tree = sb.work.join("repos");
    lay_out_corpus(&corpus, &tree);
    // A file that is not TOML, and one with a broken entry: listed, the census goes on.
    write(
        &tree.join("broken/Artifacts.toml"),
        "[x\u{1b}[31m\n= nope\n",
    );
    write(
        &tree.join("half/Artifacts.toml"),
        "[ok]\ngit-tree-sha1 = \"0123456789abcdef0123456789abcdef01234567\"\n[bad]\nlazy = 3\n",
    );
    let report = census_json(&sb, &["repos"]);

    let manifests = report["manifests"].as_array().unwrap();
    assert_eq!(manifests.len(), 54 + 2, "{manifests:#?}");
    let broken = manifests
        .iter()
        .find(|m| m["path"] == "repos/broken/Artifacts.toml")
        .unwrap();
    let error = broken["error"].as_str().unwrap();
    assert!(error.contains("repos/broken/Artifacts.toml"), "{error}");
    assert!(!error.contains('\u{1b}'), "unescaped: {error:?}");
    let half = manifests
        .iter()
        .find(|m| m["path"] == "repos/half/Artifacts.toml")
        .unwrap();
    assert_eq!(half["artifacts"], 1);
    assert!(half["error"].is_null());
    let bad = strings(&half["broken_entries"]);
    assert!(bad.len() == 1 && bad[0].starts_with("bad: "), "{bad:?}");
    // The singular `Artifact.toml` of Pkg's fixtures is not a manifest name the census reads.
    assert!(
        !manifests
            .iter()
            .any(|m| m["path"].as_str().unwrap().ends_with("/Artifact.toml"))
    );

    let artifacts = report["artifacts"].as_array().unwrap();
    // 1122 hashes in the corpus, plus `ok` of the half-broken file.
    assert_eq!(artifacts.len(), 1122 + 1);
    let with = |code: &str| -> Vec<&Value> {
        artifacts
            .iter()
            .filter(|a| strings(&a["problems"]).iter().any(|p| p == code))
            .collect()
    };
    // The two names CliMA's packages give different content, and Tectonic's biber_bin,
    // whose three platforms are each listed four times.
    let conflicts = with("name-conflict");
    assert_eq!(conflicts.len(), 16);
    assert_eq!(
        union(&conflicts, "names"),
        [
            "DYAMOND_SUMMER_ICS_p98deg",
            "biber_bin",
            "precipitation_obs"
        ]
    );
    let dyamond: Vec<&Value> = conflicts
        .iter()
        .copied()
        .filter(|a| a["names"][0] == "DYAMOND_SUMMER_ICS_p98deg")
        .collect();
    assert_eq!(
        union(&dyamond, "manifests"),
        [
            "repos/CliMA/ClimaArtifacts/atmos_dyamond_summer/OutputArtifacts.toml",
            "repos/CliMA/ClimaAtmos.jl/Artifacts.toml"
        ]
    );
    // Content shared by several packages, each under one name.
    let shared: Vec<(String, Vec<String>)> = artifacts
        .iter()
        .filter(|a| a["manifests"].as_array().unwrap().len() > 1)
        .map(|a| {
            (
                a["git_tree_sha1"].as_str().unwrap().to_owned(),
                strings(&a["names"]),
            )
        })
        .collect();
    let expected = [
        ("43563e7631a7eafae1f9f8d9d332e3de44ad7239", "socrates"),
        (
            "517c925535981f9d17ac9e7a65e2c35c3ce9597d",
            "landsea_mask_30arcseconds",
        ),
        (
            "6cddb07eeee2dd46dc5a19e9b2f706302ddba2c9",
            "era5_monthly_averages_surface_single_level_1979_2024",
        ),
        (
            "789c8dd160b022a6c714a102c1495530c7a9d20c",
            "DYAMOND_SUMMER_ICS_p14deg",
        ),
        (
            "a3169bc6de42f7e3f4ca685654ae240dfbf560e3",
            "era5_monthly_averages_atmos_single_level_1979_2024",
        ),
        ("e4044f4093e731021a3e62428f594ee7b5ea56e2", "laskar2004"),
        (
            "fe19d8dbe7a18ff39588e1f718014b0479d9c0f7",
            "earth_orography_60arcseconds",
        ),
    ]
    .map(|(h, n)| (h.to_owned(), vec![n.to_owned()]));
    assert_eq!(shared, expected);
    let summary = &report["summary"];
    assert_eq!(summary["name-conflict"], 16);
    assert_eq!(summary["same-content"], 0);
    assert_eq!(summary["placeholder-hash"], 17);
    assert_eq!(summary["not-downloadable"], 21 + 1);
    assert_eq!(summary["no-license"], 1122 + 1);
    assert_eq!(summary["http-url"], 0);
    // CliMA's collection: every download on one share-link host.
    let box_hosted = artifacts
        .iter()
        .filter(|a| strings(&a["hosts"]) == ["caltech.box.com"])
        .count();
    assert!(box_hosted > 0);
    assert!(
        artifacts
            .iter()
            .filter(|a| strings(&a["hosts"]) == ["caltech.box.com"])
            .all(|a| strings(&a["problems"]).contains(&"share-link-host".to_owned()))
    );
}

/// A hand-made collection with each problem code at least once, and artifacts without any.
fn fixture(work: &Path) {
    // a/: documented artifacts with a recipe folder.
    write(
        &work.join("a/Artifacts.toml"),
        &format!(
            r#"[clean]
git-tree-sha1 = "{H1}"
license = "CC-BY-4.0"
doi = "10.5281/zenodo.1"
[[clean.download]]
url = "https://zenodo.org/records/1/files/clean.tar.gz"
sha256 = "{S1}"
size = 1234

[era5]
git-tree-sha1 = "{H2}"
license = "CC-BY-4.0"
citation = "Hersbach et al. (2020)"
recipe = "recipes/era5"
[[era5.download]]
url = "https://pkg.julialang.org/artifact/{H2}"
sha256 = "{S1}"

[placeholder]
git-tree-sha1 = "{PLACEHOLDER}"
license = "MIT"
citation = "c"
"#
        ),
    );
    write(
        &work.join("a/artifacts/clean/README.md"),
        "# clean\n## Overview\nfiles\n",
    );
    write(&work.join("a/recipes/era5/README.md"), "# era5\n");
    // b/: CliMA's collection layout: create script and README with a References section.
    write(
        &work.join("b/OutputArtifacts.toml"),
        &format!(
            "[shared]\ngit-tree-sha1 = \"{H3}\"\nlicense = \"CC0-1.0\"\n[[shared.download]]\n\
             url = \"https://caltech.box.com/shared/static/x.tar.gz\"\nsha256 = \"{S1}\"\n"
        ),
    );
    write(&work.join("b/create_artifact.jl"), "# makes it\n");
    write(
        &work.join("b/README.md"),
        "# Shared\n## Description\nx\n## References\nSomeone (2024)\n",
    );
    // c/: nothing documented; one name with another hash than in a/, one hash with two names.
    write(
        &work.join("c/JuliaArtifacts.toml"),
        &format!(
            "[era5]\ngit-tree-sha1 = \"{H4}\"\n[[era5.download]]\n\
             url = \"http://example.org/era5.tar.gz\"\nsha256 = \"{S1}\"\n\
             [alias]\ngit-tree-sha1 = \"{H3}\"\n"
        ),
    );
    // e/: CliMA's layout again, the README stating the licence in words that name no SPDX id.
    write(
        &work.join("e/OutputArtifacts.toml"),
        &format!(
            "[copernicus]\ngit-tree-sha1 = \"{H5}\"\n[[copernicus.download]]\n\
             url = \"https://zenodo.org/records/5/files/c.tar.gz\"\nsha256 = \"{S1}\"\n"
        ),
    );
    write(&work.join("e/create_artifact.jl"), "# makes it\n");
    write(
        &work.join("e/README.md"),
        "# ERA5\n## References\nHersbach (2020)\n## Licence\nPlease see [License to Use \
         Copernicus Products](https://example.org/l.pdf) for more information.\n",
    );
    // Never searched: hidden folders, .git, target.
    let other = format!("[hidden]\ngit-tree-sha1 = \"{H1}\"\n");
    for d in [".hidden", ".git", "target", "a/.cache"] {
        write(&work.join(d).join("Artifacts.toml"), &other);
    }
}

#[test]
fn census_fixtures_cover_every_problem_code() {
    let sb = Sandbox::new();
    fixture(&sb.work);
    // A symlinked folder leading out of the tree, and a symlinked manifest: not followed.
    let outside = sb.root.path().join("outside");
    write(
        &outside.join("Artifacts.toml"),
        &format!("[far]\ngit-tree-sha1 = \"{H1}\"\n"),
    );
    std::os::unix::fs::symlink(&outside, sb.work.join("link")).unwrap();
    fs::create_dir_all(sb.work.join("d")).unwrap();
    std::os::unix::fs::symlink(
        outside.join("Artifacts.toml"),
        sb.work.join("d/Artifacts.toml"),
    )
    .unwrap();

    let report = census_json(&sb, &["."]);
    let paths: Vec<String> = report["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["path"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        paths,
        [
            "./a/Artifacts.toml",
            "./b/OutputArtifacts.toml",
            "./c/JuliaArtifacts.toml",
            "./d/Artifacts.toml",
            "./e/OutputArtifacts.toml"
        ]
    );
    let linked = &report["manifests"][3];
    assert_eq!(linked["artifacts"], 0);
    assert!(
        linked["error"].as_str().unwrap().contains("symlink"),
        "{linked}"
    );

    let problems = |hash: &str| strings(&artifact(&report, hash)["problems"]);
    assert_eq!(problems(H1), Vec::<String>::new(), "clean");
    assert_eq!(problems(H2), ["name-conflict"], "era5 of a/");
    assert_eq!(
        problems(PLACEHOLDER),
        [
            "placeholder-hash",
            "not-downloadable",
            "no-readme",
            "no-recipe"
        ]
    );
    assert_eq!(
        problems(H3),
        ["share-link-host", "same-content"],
        "shared: cited by its README, made by create_artifact.jl, hosted on a share link"
    );
    assert_eq!(problems(H5), ["license-unrecognised"], "copernicus");
    assert_eq!(
        strings(&artifact(&report, H5)["license"]),
        [
            "unrecognised statement in ./e/README.md: \"Please see License to Use Copernicus \
          Products for more information.\""
        ]
    );
    // era5 of c/: every code but those about hashes and downloads it does not have (and
    // `license-unrecognised`: no README states a licence).
    let not_h4 = [
        "placeholder-hash",
        "not-downloadable",
        "license-unrecognised",
        "same-content",
    ];
    assert_eq!(
        problems(H4),
        CODES
            .into_iter()
            .filter(|c| !not_h4.contains(c))
            .collect::<Vec<_>>()
    );
    // Every code is in the summary, and every one occurs.
    let summary = report["summary"].as_object().unwrap();
    let keys: BTreeSet<&str> = summary.keys().map(String::as_str).collect();
    assert_eq!(keys, CODES.into_iter().collect());
    for code in CODES {
        assert!(summary[code].as_u64().unwrap() >= 1, "{code}: {summary:?}");
    }

    // The --json schema of one artifact.
    let clean = artifact(&report, H1);
    let fields: BTreeSet<&str> = clean
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    for f in ["git_tree_sha1", "names", "manifests", "urls", "problems"] {
        assert!(fields.contains(f), "{f} missing: {clean}");
    }
    assert_eq!(strings(&clean["names"]), ["clean"]);
    assert_eq!(
        clean["entries"],
        serde_json::json!([{"manifest": "./a/Artifacts.toml", "name": "clean"}])
    );
    assert_eq!(strings(&clean["manifests"]), ["./a/Artifacts.toml"]);
    assert_eq!(
        strings(&clean["urls"]),
        ["https://zenodo.org/records/1/files/clean.tar.gz"]
    );
    assert_eq!(strings(&clean["hosts"]), ["zenodo.org"]);
    assert_eq!(clean["size"], 1234);
    assert_eq!(strings(&clean["license"]), ["CC-BY-4.0"]);
    assert_eq!(strings(&clean["citation"]), ["doi:10.5281/zenodo.1"]);
    assert_eq!(strings(&clean["recipe"]), ["./a/artifacts/clean"]);
    assert_eq!(strings(&clean["readme"]), ["./a/artifacts/clean/README.md"]);
    assert!(clean.get("installed").is_none(), "only with --depot");
    let shared = artifact(&report, H3);
    assert_eq!(strings(&shared["names"]), ["alias", "shared"]);
    // Each entry naming it, with its manifest: what a fix edits.
    assert_eq!(
        shared["entries"],
        serde_json::json!([
            {"manifest": "./b/OutputArtifacts.toml", "name": "shared"},
            {"manifest": "./c/JuliaArtifacts.toml", "name": "alias"}
        ])
    );
    assert_eq!(
        strings(&shared["citation"]),
        ["README citation section in ./b/README.md"]
    );
    assert_eq!(strings(&shared["recipe"]), ["./b/create_artifact.jl"]);
    let era5 = artifact(&report, H2);
    assert_eq!(
        strings(&era5["recipe"]),
        ["recipe = \"recipes/era5\" in ./a/Artifacts.toml"]
    );
    assert_eq!(strings(&era5["readme"]), ["./a/recipes/era5/README.md"]);
}

#[test]
fn census_prints_a_legend_fixes_and_short_lines_and_says_where_artifacts_are_installed() {
    let sb = Sandbox::new();
    fixture(&sb.work);
    fs::create_dir_all(sb.depot.join("artifacts").join(H1)).unwrap();
    let depot = sb.depot.display().to_string();
    let report = census_json(&sb, &["a", "b/OutputArtifacts.toml", "--depot", &depot]);
    assert_eq!(report["manifests"].as_array().unwrap().len(), 2);
    let installed = |h: &str| strings(&artifact(&report, h)["installed"]);
    assert_eq!(
        installed(H1),
        [sb.depot.join("artifacts").join(H1).display().to_string()]
    );
    assert_eq!(installed(H2), Vec::<String>::new());

    let out = sb.cli().args(["census", "."]).output().unwrap();
    assert_ok(&out);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("# Artifact census\n\n4 manifest(s) (0 unreadable), 6 artifact(s).\n"),
        "{text}"
    );
    // A legend: every code, how many have it, what it means.
    assert!(
        text.contains(
            "| problem | artifacts | meaning |\n|---|---|---|\n\
             | placeholder-hash | 1 | the hash is of the name, not of any content |\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("| name-conflict | 2 | a name given other content elsewhere |\n"),
        "{text}"
    );
    // Under each problem, its fix and the names that have it, per manifest.
    assert!(
        text.contains(
            "### http-url (1)\n\nFix: change the URL to https:// where the server offers it \
             (the sha256 still\nchecks the bytes, but anyone on the way sees and can block the \
             request).\n\n- ./c/JuliaArtifacts.toml: era5\n"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "### name-conflict (2)\n\nFix: make the manifests agree on the content, or \
             rename one of the entries (each\nartifact below lists the manifests naming \
             it).\n\n- ./a/Artifacts.toml: era5\n- ./c/JuliaArtifacts.toml: era5\n"
        ),
        "{text}"
    );
    // Each artifact, its problems wrapped to the width of a terminal.
    assert!(
        text.contains(&format!(
            "- {H4}: era5\n  - manifests: ./c/JuliaArtifacts.toml\n  - hosts: example.org\n\
             \x20 - size: -\n  - license: -\n  - citation: -\n  - recipe: -\n  - readme: -\n\
             \x20 - problems: no-license, no-citation, no-readme, no-recipe, share-link-host,\n\
             \x20   http-url, name-conflict\n"
        )),
        "{text}"
    );
    for line in text.lines() {
        assert!(line.chars().count() <= 80, "longer than 80: {line:?}");
    }
    // The old table of one artifact a line is gone.
    assert!(!text.contains("| git-tree-sha1 |"), "{text}");

    let missing = sb.cli().args(["census", "nowhere"]).output().unwrap();
    assert_eq!(missing.status.code(), Some(2));
}

/// A wide tree does not hold a descriptor per folder waiting its turn: 300 folders census
/// fine with 64 descriptors.
#[test]
fn census_of_a_wide_tree_stays_within_few_descriptors() {
    let sb = Sandbox::new();
    for i in 0..300 {
        write(
            &sb.work.join(format!("pkg{i:03}/Artifacts.toml")),
            &format!("[a{i}]\ngit-tree-sha1 = \"{H1}\"\n"),
        );
    }
    let bin = assert_cmd::cargo::cargo_bin("clima-artifacts");
    let out = std::process::Command::new("sh")
        .args(["-c", "ulimit -n 64 && exec \"$0\" census --json ."])
        .arg(bin)
        .current_dir(&sb.work)
        .env("CLIMA_ARTIFACTS_DEPOT_PATH", &sb.depot)
        .output()
        .unwrap();
    assert_ok(&out);
    let report = json(&out);
    let manifests = report["manifests"].as_array().unwrap();
    assert_eq!(manifests.len(), 300);
    assert!(
        manifests.iter().all(|m| m["error"].is_null()),
        "{manifests:#?}"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(strings(&artifact(&report, H1)["names"]).len(), 300);
}

/// SHA-1 of the name `fluxnet2015`: CliMA's placeholder for data that stays on a cluster.
const FLUXNET_PLACEHOLDER: &str = "94d6eb8e3bc5fc361a43597ab4fb6941bdbe2850";

/// Runs a printed command as printed, from `cwd` (a folder with no manifest above it).
fn run_printed(sb: &Sandbox, words: &[String], cwd: &Path) -> std::process::Output {
    sb.cli()
        .current_dir(cwd)
        .args(&words[1..])
        .output()
        .unwrap()
}

/// Issue 47, item 9: the migration of a placeholder hash, each step through the command the
/// tool printed at the step before, run as printed from a folder with no manifest: `override
/// set` names the command that records the real hash (`create --external`, which no message
/// named), that one names the `override set` to run next (which lacked `--manifest` and exited
/// 2), the census lists the manifests that still name the replaced placeholder, and a mirror
/// keeps the placeholder's override line beside the real hash's until no manifest names it.
#[test]
fn a_placeholder_hash_is_replaced_through_the_commands_the_tool_prints() {
    let sb = Sandbox::new();
    let entry = |hash: &str| {
        format!("[fluxnet2015]\ngit-tree-sha1 = \"{hash}\"\nlicense = \"CC-BY-4.0\"\n")
    };
    let collection = sb
        .work
        .join("ClimaArtifacts/fluxnet2015/OutputArtifacts.toml");
    let package = sb.work.join("ClimaLand.jl/Artifacts.toml");
    write(&collection, &entry(FLUXNET_PLACEHOLDER));
    write(&package, &entry(FLUXNET_PLACEHOLDER));
    let data = sb.root.path().join("data/fluxnet2015");
    common::sample_tree(&data);
    let elsewhere = sb.root.path();

    // 1. The override of the placeholder warns, with the command that records the real hash.
    let out = sb
        .cli()
        .args(["override", "set", "fluxnet2015"])
        .arg(&data)
        .arg("--manifest")
        .arg(&collection)
        .output()
        .unwrap();
    assert_ok(&out);
    let create = printed_command(
        &String::from_utf8_lossy(&out.stderr),
        "in the manifest with `",
    );
    let out = run_printed(&sb, &create, elsewhere);
    assert_ok(&out);
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    let real = common::entry_metadata(&collection, "fluxnet2015");
    assert!(
        real.get("license").is_some_and(|l| l == "CC-BY-4.0"),
        "{real:?}"
    );
    let manifest = clima_artifact_manifest::Manifest::load(&collection).unwrap();
    let real = manifest
        .select("fluxnet2015", &clima_artifact_manifest::Platform::host())
        .unwrap()
        .git_tree_sha1
        .to_hex();
    assert_ne!(real, FLUXNET_PLACEHOLDER);
    assert!(
        said.contains(&format!(
            "The placeholder hash {FLUXNET_PLACEHOLDER} was replaced"
        )),
        "{said}"
    );

    // 2. The override it prints runs as printed, from anywhere.
    let set = printed_command(&said, "(or run `");
    let out = run_printed(&sb, &set, elsewhere);
    assert_ok(&out);
    let overrides = fs::read_to_string(sb.depot.join("artifacts/Overrides.toml")).unwrap();
    assert!(overrides.contains(&format!("{real} = ")), "{overrides}");

    // 3. The census lists the manifest that still names the placeholder.
    let report = census_json(&sb, &["."]);
    let old = artifact(&report, FLUXNET_PLACEHOLDER);
    assert_eq!(
        strings(&old["replaced_by"]),
        std::slice::from_ref(&real),
        "{old:#}"
    );
    assert_eq!(
        strings(&old["manifests"]),
        ["./ClimaLand.jl/Artifacts.toml"],
        "{old:#}"
    );
    assert!(artifact(&report, &real).get("replaced_by").is_none());
    let out = sb.cli().args(["census", "."]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!(
            "## Placeholder hashes replaced\n\n\
             These manifests still name a placeholder hash that another entry of the same name \
             replaced with the content's hash: update them to it, and keep an override line for \
             the placeholder until none is left (see the migration in docs/census.md).\n\n\
             | names | placeholder | replaced by | still named in |\n|---|---|---|---|\n\
             | fluxnet2015 | {FLUXNET_PLACEHOLDER} | {real} | ./ClimaLand.jl/Artifacts.toml |\n"
        )),
        "{text}"
    );

    // 4. A mirror of both keeps both lines, so the package's users keep their override.
    let cluster = sb.root.path().join("cluster-depot");
    fs::create_dir_all(&cluster).unwrap();
    let mirror = |package_hash: &str| {
        write(&package, &entry(package_hash));
        let out = sb
            .cli()
            .args(["mirror", "--id", "esm"])
            .arg(&collection)
            .arg(&package)
            .arg("--depot")
            .arg(&cluster)
            .arg("--override")
            .arg(format!("fluxnet2015={}", data.display()))
            .output()
            .unwrap();
        assert_ok(&out);
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        (
            said,
            fs::read_to_string(cluster.join("artifacts/Overrides.toml")).unwrap(),
        )
    };
    let (said, section) = mirror(FLUXNET_PLACEHOLDER);
    let line = |h: &str| format!("{h} = \"{}\" # fluxnet2015\n", data.display());
    assert!(
        section.contains(&line(&real)) && section.contains(&line(FLUXNET_PLACEHOLDER)),
        "{section}"
    );
    assert!(
        said.contains(&format!(
            "kept the line of the placeholder {FLUXNET_PLACEHOLDER} of `fluxnet2015` beside its \
             content hash {real}: still named by {}",
            package.display()
        )),
        "{said}"
    );
    let fetched = sb
        .cli()
        .env("CLIMA_ARTIFACTS_DEPOT_PATH", &cluster)
        .args(["fetch", "fluxnet2015", "--json", "--manifest"])
        .arg(&package)
        .output()
        .unwrap();
    assert_ok(&fetched);
    assert_eq!(json(&fetched)[0]["status"], "overridden");

    // 5. The package updated: the next mirror drops the placeholder's line, the census its row.
    let (_, section) = mirror(&real);
    assert!(
        section.contains(&line(&real)) && !section.contains(FLUXNET_PLACEHOLDER),
        "{section}"
    );
    let report = census_json(&sb, &["."]);
    assert!(
        report["artifacts"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["git_tree_sha1"] != FLUXNET_PLACEHOLDER),
        "{report:#}"
    );
}

/// A folder of CliMA's collection: a manifest with one entry `name`, a create script, and this
/// README.
fn clima_folder(root: &Path, folder: &str, name: &str, hash: &str, readme: &str) {
    write(
        &root.join(folder).join("OutputArtifacts.toml"),
        &format!(
            "[{name}]\ngit-tree-sha1 = \"{hash}\"\n[[{name}.download]]\n\
             url = \"https://zenodo.org/records/1/files/{name}.tar.gz\"\nsha256 = \"{S1}\"\n"
        ),
    );
    write(
        &root.join(folder).join("create_artifact.jl"),
        "# makes it\n",
    );
    write(&root.join(folder).join("README.md"), readme);
}

/// The licences of READMEs, in the ways CliMA's collection states them: labels, sentences,
/// licence sections, names mapped to SPDX ids; what names none is reported as such, a
/// package's README (the code's licence) and a symlinked README are not read.
#[test]
fn census_reads_the_licences_readmes_state() {
    let sb = Sandbox::new();
    let w = &sb.work;
    let hash = |i: u32| format!("{i:040x}");
    let cases: [(&str, &str); 8] = [
        (
            "label",
            "# Aerosols\n\nLicense: Creative Commons Attribution 4.0 International\n",
        ),
        (
            "sentence",
            "# Albedo\n## Citation\nX (2020)\n## License\nThis dataset is distributed under the \
             Creative Commons Attribution-ShareAlike 4.0 International License, permitting use \
             provided the work is cited.\n",
        ),
        (
            "zero",
            "# LWP\n\n## License\n\nCreative Commons Zero (CC0)\n\nFor more, see NASA.\n",
        ),
        (
            "typo",
            "# Snow\n\nLicense: Creative Commons Attribution-NonCommericial 4.0 International\n",
        ),
        (
            "typo_id",
            "# Snow\n\nLicense: Creative Commons Attribution-NonCommericial 4.0 International \
             (CC-BY-NC-4.0)\n",
        ),
        (
            "two",
            "# ILAMB\n# Licenses\n### 1. `et.nc`\nLicense: Creative Commons Zero\n\n\
             ### 2. `gpp.nc`\nLicense: Creative Commons 4.0 BY\n",
        ),
        (
            "hostile",
            "# X\n## Licence\nPlease see \u{1b}]0;owned\u{7} the terms.\n",
        ),
        ("none", "# Orography\n\nMade from ETOPO.\n"),
    ];
    for (i, (folder, readme)) in cases.iter().enumerate() {
        clima_folder(w, folder, folder, &hash(i as u32 + 1), readme);
    }
    // A manifest key wins over what the README says.
    clima_folder(
        w,
        "keyed",
        "keyed",
        &hash(20),
        "License: see the data policy\n",
    );
    let keyed = w.join("keyed/OutputArtifacts.toml");
    let text = fs::read_to_string(&keyed).unwrap();
    fs::write(
        &keyed,
        text.replace("\n[[keyed", "\nlicense = \"CC0-1.0\"\n[[keyed"),
    )
    .unwrap();
    // A Julia package: its README states the code's licence, its recipe README the data's.
    write(
        &w.join("pkg/Artifacts.toml"),
        &format!(
            "[code]\ngit-tree-sha1 = \"{}\"\n[data]\ngit-tree-sha1 = \"{}\"\n",
            hash(30),
            hash(31)
        ),
    );
    write(&w.join("pkg/Project.toml"), "name = \"Pkg\"\n");
    write(&w.join("pkg/src/Pkg.jl"), "module Pkg end\n");
    write(
        &w.join("pkg/README.md"),
        "# Pkg.jl\n\nThis package is licensed under the MIT License.\n",
    );
    write(
        &w.join("pkg/artifacts/data/README.md"),
        "# data\n\n- **License:** CC BY 4.0\n",
    );
    // A README that is a symlink to a file elsewhere: not followed, not read.
    clima_folder(w, "link", "link", &hash(40), "");
    fs::remove_file(w.join("link/README.md")).unwrap();
    let outside = sb.root.path().join("outside-README.md");
    fs::write(&outside, "License: MIT\n").unwrap();
    std::os::unix::fs::symlink(&outside, w.join("link/README.md")).unwrap();

    let report = census_json(&sb, &["."]);
    let of = |i: u32| artifact(&report, &hash(i));
    let license = |i: u32| strings(&of(i)["license"]);
    // The problems about licences (the READMEs here cite nothing).
    let problems = |i: u32| -> Vec<String> {
        strings(&of(i)["problems"])
            .into_iter()
            .filter(|p| p.contains("license"))
            .collect()
    };
    assert_eq!(license(1), ["CC-BY-4.0 (stated in ./label/README.md)"]);
    assert_eq!(
        license(2),
        ["CC-BY-SA-4.0 (stated in ./sentence/README.md)"]
    );
    assert_eq!(license(3), ["CC0-1.0 (stated in ./zero/README.md)"]);
    assert_eq!(
        license(4),
        [
            "unrecognised statement in ./typo/README.md: \"Creative Commons \
          Attribution-NonCommericial 4.0 International\""
        ]
    );
    assert_eq!(license(5), ["CC-BY-NC-4.0 (stated in ./typo_id/README.md)"]);
    assert_eq!(
        license(6),
        [
            "CC-BY-4.0 (stated in ./two/README.md)",
            "CC0-1.0 (stated in ./two/README.md)"
        ]
    );
    assert_eq!(
        license(7),
        [
            "unrecognised statement in ./hostile/README.md: \"Please see \\u{1b}]0;owned\\u{7} \
          the terms.\""
        ]
    );
    assert!(license(8).is_empty());
    assert_eq!(
        license(20),
        [
            "CC0-1.0",
            "unrecognised statement in ./keyed/README.md: \"see the data policy\""
        ]
    );
    for i in [1, 2, 3, 5, 6, 20] {
        assert_eq!(problems(i), Vec::<String>::new(), "{i}: {:#}", of(i));
    }
    for i in [4, 7] {
        assert_eq!(problems(i), ["license-unrecognised"], "{i}");
    }
    assert_eq!(problems(8), ["no-license"]);
    // The package's README is read (for citations) but its licence is the code's.
    assert_eq!(strings(&of(30)["readme"]), ["./pkg/README.md"]);
    assert!(license(30).is_empty());
    assert_eq!(problems(30), ["no-license"]);
    assert_eq!(
        license(31),
        ["CC-BY-4.0 (stated in ./pkg/artifacts/data/README.md)"]
    );
    // The symlinked README is neither read nor counted.
    assert!(license(40).is_empty() && strings(&of(40)["readme"]).is_empty());
    assert_eq!(report["summary"]["license-unrecognised"], 2);

    // The Markdown says the same, escaped, and lists the names under each problem.
    let out = sb.cli().args(["census", "."]).output().unwrap();
    assert_ok(&out);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{7}'),
        "{text}"
    );
    assert!(
        text.contains(
            "### license-unrecognised (2)\n\nFix: read the statement (under the artifact's \
             license below) and record the SPDX\nid it means, or a LicenseRef- id for terms \
             that have none:\n\n    \
             clima-artifacts annotate --manifest MANIFEST NAME... --set license=ID\n\n\
             - ./hostile/OutputArtifacts.toml: hostile\n- ./typo/OutputArtifacts.toml: typo\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("  - license:\n    - CC-BY-4.0 (stated in ./two/README.md)\n"),
        "{text}"
    );
}

/// What the census asks for, done without the data: `annotate` sets and removes keys of
/// existing entries (the command the census prints, filled in, runs), keeps every other byte
/// of the manifest, and refuses what it must not write, leaving the file as it was.
#[test]
fn annotate_sets_the_keys_the_census_asks_for_and_keeps_the_rest() {
    let sb = Sandbox::new();
    let manifest = sb.work.join("coll/Artifacts.toml");
    let original = format!(
        "# CliMA's datasets\n[era5] # reanalysis\n    git-tree-sha1 = \"{H1}\"\n    \
         description = \"old\"  # to drop\n    license = \"MIT\" # wrong\n\n    \
         [[era5.download]]\n    url = \"https://caltech.box.com/s/e.gz\"\n    sha256 = \"{S1}\"\n\
         [\"clm_data_0.9x1.25\"]\ngit-tree-sha1 = \"{H2}\"\n\n[[plat]]\ngit-tree-sha1 = \"{H3}\"\n\
         os = \"linux\"\narch = \"x86_64\"\n"
    );
    write(&manifest, &original);
    write(&sb.work.join("coll/README.md"), "# datasets\n");
    let before = census_json(&sb, &["coll"]);
    for h in [H1, H2] {
        assert!(
            strings(&artifact(&before, h)["problems"]).contains(&"no-citation".to_owned()),
            "{before:#}"
        );
    }
    assert!(strings(&artifact(&before, H2)["problems"]).contains(&"no-license".to_owned()));

    // The command the census prints for `no-license`, filled in, as a maintainer runs it.
    let out = sb.cli().args(["census", "coll"]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let printed = text
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("clima-artifacts annotate") && l.ends_with("license=ID"))
        .unwrap_or_else(|| panic!("no annotate command for no-license: {text}"));
    let filled = printed
        .replace("MANIFEST", "coll/Artifacts.toml")
        .replace("NAME...", "clm_data_0.9x1.25 era5")
        .replace("license=ID", "license=CC-BY-4.0");
    let mut args: Vec<&str> = filled.split_whitespace().skip(1).collect();
    args.extend([
        "--set",
        "doi=10.5194/essd-13-4349-2021",
        "--unset",
        "description",
    ]);
    let out = sb.cli().args(&args).output().unwrap();
    assert_ok(&out);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "clm_data_0.9x1.25: set license, doi; unchanged description\n\
         era5: set license, doi; removed description\nwritten: coll/Artifacts.toml\n"
    );
    let expected = format!(
        "# CliMA's datasets\n[era5] # reanalysis\n    git-tree-sha1 = \"{H1}\"\n    \
         license = \"CC-BY-4.0\" # wrong\n    doi = \"10.5194/essd-13-4349-2021\"\n\n    \
         [[era5.download]]\n    url = \"https://caltech.box.com/s/e.gz\"\n    sha256 = \"{S1}\"\n\
         [\"clm_data_0.9x1.25\"]\ngit-tree-sha1 = \"{H2}\"\nlicense = \"CC-BY-4.0\"\n\
         doi = \"10.5194/essd-13-4349-2021\"\n\n[[plat]]\ngit-tree-sha1 = \"{H3}\"\n\
         os = \"linux\"\narch = \"x86_64\"\n"
    );
    let edited = fs::read_to_string(&manifest).unwrap();
    assert_eq!(edited, expected);
    let after = census_json(&sb, &["coll"]);
    for h in [H1, H2] {
        let problems = strings(&artifact(&after, h)["problems"]);
        assert!(
            !problems
                .iter()
                .any(|p| p == "no-license" || p == "no-citation"),
            "{h}: {problems:?}"
        );
    }
    // The same again changes nothing, and says so.
    let out = sb
        .cli()
        .args(["annotate", "era5", "--set", "license=CC-BY-4.0", "--json"])
        .args(["--manifest", "coll/Artifacts.toml"])
        .output()
        .unwrap();
    assert_ok(&out);
    let said = json(&out);
    assert_eq!(said["changed"], false);
    assert_eq!(strings(&said["entries"][0]["unchanged"]), ["license"]);

    // Refused, each with a message saying why, the file left byte for byte.
    let refused: [(&[&str], &str); 7] = [
        (&["plat", "--set", "license=MIT"], "platform-specific"),
        (
            &["era5", "--set", "git-tree-sha1=00"],
            "not a key `annotate` sets",
        ),
        (
            &["era5", "--set", "license=CC BY 4.0"],
            "a license name with spaces is not an SPDX id",
        ),
        (&["era5", "--set", "doi=nonsense"], "`--set doi=...`"),
        (&["eraa5", "--set", "license=MIT"], "did you mean `era5`?"),
        (&["era5"], "nothing to change"),
        (
            &["era5", "--set", "license=MIT", "--unset", "license"],
            "given twice",
        ),
    ];
    for (args, why) in refused {
        let out = sb
            .cli()
            .arg("annotate")
            .args(args)
            .args(["--manifest", "coll/Artifacts.toml"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(why), "{args:?}: {err}");
        assert_eq!(fs::read_to_string(&manifest).unwrap(), expected, "{args:?}");
    }
}
