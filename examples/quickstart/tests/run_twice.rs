//! Runs the quickstart binary against a fresh depot: the first run installs from the shipped
//! tarballs, the second finds everything installed, and an override makes the fourth dataset
//! available.

use std::path::Path;
use std::process::Command;

fn run(depot: &Path, reports: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_quickstart"))
        .env("CLIMA_ARTIFACTS_DEPOT_PATH", depot)
        .env_remove("CLIMA_ARTIFACTS_OFFLINE")
        .arg("--report-dir")
        .arg(reports)
        .output()
        .expect("run quickstart");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "stdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The line about `name` in the "Datasets:" part of the output.
fn dataset_line<'a>(out: &'a str, name: &str) -> &'a str {
    let datasets = out
        .split("\nDatasets:\n")
        .nth(1)
        .unwrap_or_else(|| panic!("{out}"));
    datasets
        .lines()
        .find(|l| l.trim_start().starts_with(name))
        .unwrap_or_else(|| panic!("no line for {name}: {out}"))
}

#[test]
fn first_run_installs_second_run_finds_everything_installed() {
    let depot = tempfile::tempdir().unwrap();
    let reports = tempfile::tempdir().unwrap();

    let first = run(depot.path(), reports.path());
    assert!(
        first.contains(&format!(
            "depot: {} (from CLIMA_ARTIFACTS_DEPOT_PATH)",
            depot.path().display()
        )),
        "{first}"
    );
    for name in ["standard-atmosphere ", "forcing ", "hires-ozone (lazy) "] {
        let line = dataset_line(&first, name);
        assert!(line.contains("installed now"), "{line}");
    }
    assert!(first.contains("profile.csv: 41 levels"), "{first}");
    assert!(first.contains("forcing.csv: 18 years 1850-2020"), "{first}");
    assert!(first.contains("ozone_250m.csv: 201 levels"), "{first}");
    // The artifact without a download section: the error shows the line to add and where.
    assert!(
        first.contains("site-observations    not available"),
        "{first}"
    );
    assert!(
        first.contains("f2e37ce8393132a9470b4405546a1730d42cbc67"),
        "{first}"
    );
    assert!(first.contains("Overrides.toml"), "{first}");
    assert!(first.contains("surface warming 1850-2020: +"), "{first}");
    for hash in [
        "9ac956584f182cbfd7244eaf6d2fc9ee7b03ff2c",
        "b98aa606b385754103cf26dc6f137f028bbd0e6d",
        "bd2d012e31967f7258e900884e90247b9539763c",
    ] {
        assert!(depot.path().join("artifacts").join(hash).is_dir(), "{hash}");
    }

    let second = run(depot.path(), reports.path());
    for name in ["standard-atmosphere ", "forcing ", "hires-ozone (lazy) "] {
        let line = dataset_line(&second, name);
        assert!(line.contains("already installed"), "{line}");
    }

    // Following the advice literally: run the command the first run printed.
    let copy = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/site-observations");
    let command = first
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("echo '"))
        .unwrap_or_else(|| panic!("no command to add the override:\n{first}"));
    assert!(
        command.contains(&format!(
            "f2e37ce8393132a9470b4405546a1730d42cbc67 = \"{}\"",
            copy.display()
        )),
        "{command}"
    );
    assert!(
        command.ends_with(&format!(
            ">> '{}'",
            depot.path().join("artifacts/Overrides.toml").display()
        )),
        "{command}"
    );
    let status = Command::new("sh").arg("-c").arg(command).status().unwrap();
    assert!(status.success(), "{command}");
    let third = run(depot.path(), reports.path());
    assert!(
        third.contains("site-observations    provided by an override"),
        "{third}"
    );
    assert!(third.contains("radiosonde.csv: 5 levels"), "{third}");
    for file in ["provenance.md", "provenance.json", "provenance.bib"] {
        assert!(reports.path().join(file).is_file(), "{file}");
    }
    let md = std::fs::read_to_string(reports.path().join("provenance.md")).unwrap();
    for name in [
        "standard-atmosphere",
        "forcing",
        "hires-ozone",
        "site-observations",
    ] {
        assert!(md.contains(name), "{name} missing from the report:\n{md}");
    }
}

/// The build warning and the run name the same Overrides.toml: with no
/// `CLIMA_ARTIFACTS_DEPOT_PATH`, the example's depot inside `target/`, never `~/.cache`.
#[test]
fn the_build_warning_names_the_overrides_file_the_run_uses() {
    let exe = Path::new(env!("CARGO_BIN_EXE_quickstart"));
    let reports = tempfile::tempdir().unwrap();
    let out = Command::new(exe)
        .env_remove("CLIMA_ARTIFACTS_DEPOT_PATH")
        .env_remove("CLIMA_ARTIFACTS_OFFLINE")
        .arg("--report-dir")
        .arg(reports.path())
        .output()
        .expect("run quickstart");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{stdout}");
    // The run's hint: `echo '<line>' >> '<depot>/artifacts/Overrides.toml'`.
    let used = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("echo ")?.split(" >> ").nth(1))
        .unwrap_or_else(|| panic!("no override hint in:\n{stdout}"))
        .trim_matches('\'')
        .to_owned();
    let target = exe.parent().and_then(Path::parent).unwrap();
    assert_eq!(
        Path::new(&used),
        target.join("quickstart-depot/artifacts/Overrides.toml"),
        "{stdout}"
    );
    // The build script's output for this binary: the newest of target/<profile>/build/quickstart-*.
    let build = exe.parent().unwrap().join("build");
    let newest = std::fs::read_dir(&build)
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            let output = e.path().join("output");
            let name = e.file_name().to_string_lossy().into_owned();
            let modified = std::fs::metadata(&output).ok()?.modified().ok()?;
            (name.starts_with("quickstart-") && !name.starts_with("quickstart-mpi"))
                .then_some((modified, output))
        })
        .max()
        .map(|(_, p)| p)
        .expect("the build script's output");
    let warnings = std::fs::read_to_string(newest).unwrap();
    let named = match option_env!("CLIMA_ARTIFACTS_DEPOT_PATH") {
        // Built with a depot set: the build names that one, as the run would with it set.
        Some(depots) => Path::new(depots.split(':').next().unwrap())
            .join("artifacts/Overrides.toml")
            .display()
            .to_string(),
        None => used,
    };
    assert!(
        warnings.contains(&format!("to `{named}`")),
        "the build warning does not name `{named}`:\n{warnings}"
    );
}
