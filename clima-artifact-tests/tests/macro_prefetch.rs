//! `inventory::prefetch_declared` fetches every artifact the binary's `clima_artifact!` call sites
//! declare, skips lazy ones unless asked, and names the ones it could not fetch.

use clima_artifact_runtime::inventory::{self, PrefetchOptions};
use clima_artifact_runtime::{Config, Singleton, clima_artifact};

/// Never called: the call sites only need to be linked in to be declared.
#[allow(dead_code)]
fn model() {
    let _ = clima_artifact!("profile/profile.csv");
    let _ = clima_artifact!("ozone", &Singleton);
    let _ = clima_artifact!("local-only");
}

#[test]
fn prefetch_installs_declared_non_lazy_artifacts_and_reports_failures() {
    let depot = tempfile::tempdir().unwrap();
    let mut config = Config::from_env().unwrap();
    config.depots = vec![depot.path().into()];
    config.julia_interop = false;
    clima_artifact_runtime::set_macro_config(config).unwrap();
    let installed = |hash: &str| depot.path().join("artifacts").join(hash).is_dir();

    let names: Vec<&str> = inventory::declared_artifacts()
        .iter()
        .map(|a| a.name)
        .collect();
    assert_eq!(names, ["local-only", "ozone", "profile"]);

    // `local-only` has no download section and no override: the error names it; the others
    // are still handled.
    let err = inventory::prefetch_declared(&Singleton).unwrap_err();
    assert!(err.to_string().contains("local-only"), "{err}");
    assert!(
        installed("9ac956584f182cbfd7244eaf6d2fc9ee7b03ff2c"),
        "profile"
    );
    assert!(
        !installed("bd2d012e31967f7258e900884e90247b9539763c"),
        "lazy ozone"
    );

    // Once an override exists, the prefetch succeeds; lazy ones come along only when asked.
    let site = tempfile::tempdir().unwrap();
    std::fs::write(
        depot.path().join("artifacts/Overrides.toml"),
        format!(
            "f2e37ce8393132a9470b4405546a1730d42cbc67 = \"{}\"\n",
            site.path().display()
        ),
    )
    .unwrap();
    let done = inventory::prefetch_declared(&Singleton).unwrap();
    let skipped: Vec<&str> = done
        .iter()
        .filter(|p| p.installed.is_none())
        .map(|p| p.name)
        .collect();
    assert_eq!(skipped, ["ozone"]);
    assert!(!installed("bd2d012e31967f7258e900884e90247b9539763c"));

    let done =
        inventory::prefetch_declared_with(&Singleton, PrefetchOptions { include_lazy: true })
            .unwrap();
    assert!(done.iter().all(|p| p.installed.is_some()));
    assert!(installed("bd2d012e31967f7258e900884e90247b9539763c"));
    let local = done.iter().find(|p| p.name == "local-only").unwrap();
    assert_eq!(local.installed.as_ref().unwrap().path, site.path());
}
