//! Julia interop: with `CLIMA_ARTIFACTS_JULIA_INTEROP=1` (or [`Config::julia_interop`]) the Julia
//! depots are searched after ours, their installed artifacts are used without downloading, and
//! their `Overrides.toml` (with Julia's `[<uuid>]` tables) apply after ours. With interop off
//! they are ignored.
//!
//! Environment variables are process-global, so these tests build the [`Config`] directly
//! ([`Config::julia_depots`]), and one runs a child process to cover the variables themselves.

use std::path::{Path, PathBuf};
use std::process::Command;

use clima_artifact_runtime::Config;
use clima_artifact_runtime::{Origin, ensure_variant};
use clima_artifact_tests::{
    TestArtifact, TestServer, have_git, success_stdout, test_config, write_overrides,
};

struct Setup {
    _dir: tempfile::TempDir,
    root: PathBuf,
    /// Our depot (empty at the start).
    ours: PathBuf,
    /// A Julia depot (`JULIA_DEPOT_PATH`).
    julia: PathBuf,
    server: TestServer,
    /// Installed in the Julia depot, also served over HTTP.
    installed: TestArtifact,
}

/// A Julia depot holding `installed` in `artifacts/<hash>/`, and a server that also serves it.
fn setup() -> Option<Setup> {
    if !have_git() {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let ours = root.join("ours");
    let julia = root.join("julia-depot");
    let installed = TestArtifact::sample(41);
    installed
        .builder
        .write_to(&julia.join("artifacts").join(installed.tree_hash.to_hex()));
    let server = TestServer::start();
    server.serve("installed.tar.gz", installed.tarball.clone());
    Some(Setup {
        _dir: dir,
        root,
        ours,
        julia,
        server,
        installed,
    })
}

fn config(s: &Setup, interop: bool) -> Config {
    Config {
        julia_interop: interop,
        julia_depots: Some(vec![s.julia.clone().into()]),
        ..test_config(std::slice::from_ref(&s.ours))
    }
}

fn folder(root: &Path, name: &str) -> PathBuf {
    let p = root.join(name);
    std::fs::create_dir_all(&p).unwrap();
    std::fs::write(p.join("marker"), name).unwrap();
    p
}

#[test]
fn julia_installed_artifacts_are_found_without_downloading() {
    let Some(s) = setup() else { return };
    let v = s.installed.variant(&[s.server.url("installed.tar.gz")]);
    let got = ensure_variant("installed", &v, &s.root, &config(&s, true)).unwrap();
    assert_eq!(got.origin, Origin::Depot);
    assert_eq!(
        got.path,
        s.julia
            .join("artifacts")
            .join(s.installed.tree_hash.to_hex())
    );
    assert_eq!(s.server.total_gets(), 0, "found in the Julia depot: no GET");
    // Julia's depots are never written.
    assert!(
        !s.ours
            .join("artifacts")
            .join(s.installed.tree_hash.to_hex())
            .exists()
    );

    // Interop off: the Julia depot is ignored and the artifact is downloaded into ours.
    let got = ensure_variant("installed", &v, &s.root, &config(&s, false)).unwrap();
    assert!(
        matches!(got.origin, Origin::Downloaded { .. }),
        "{:?}",
        got.origin
    );
    assert!(got.path.starts_with(&s.ours), "{}", got.path.display());
    s.installed.assert_content(&got.path);
    assert_eq!(s.server.gets("installed.tar.gz"), 1);
}

#[test]
fn julia_overrides_apply_after_ours() {
    let Some(s) = setup() else { return };
    let only_julia = TestArtifact::sample(42);
    let both = TestArtifact::sample(43);
    let julia_only_target = folder(&s.root, "julia-only-target");
    let julia_both_target = folder(&s.root, "julia-both-target");
    let our_both_target = folder(&s.root, "our-both-target");
    let uuid_target = folder(&s.root, "uuid-target");
    // Julia's file, with a `[<uuid>]` table as Pkg writes them.
    let julia_file = write_overrides(
        &s.julia,
        &format!(
            "{} = \"{}\"\n{} = \"{}\"\n\n[a8cc5b0e-0ffa-5ad4-8c14-923d3ee1735f]\nsome_artifact = \"{}\"\n",
            only_julia.tree_hash,
            julia_only_target.display(),
            both.tree_hash,
            julia_both_target.display(),
            uuid_target.display(),
        ),
    );
    let our_file = write_overrides(
        &s.ours,
        &format!("{} = \"{}\"\n", both.tree_hash, our_both_target.display()),
    );
    s.server
        .serve("only-julia.tar.gz", only_julia.tarball.clone());
    s.server.serve("both.tar.gz", both.tarball.clone());
    let v_only_julia = only_julia.variant(&[s.server.url("only-julia.tar.gz")]);
    let v_both = both.variant(&[s.server.url("both.tar.gz")]);

    let on = config(&s, true);
    let got = ensure_variant("only-julia", &v_only_julia, &s.root, &on).unwrap();
    assert_eq!(got.path, julia_only_target);
    assert_eq!(
        got.origin,
        Origin::Override {
            overrides_file: julia_file.clone()
        }
    );
    let got = ensure_variant("both", &v_both, &s.root, &on).unwrap();
    assert_eq!(got.path, our_both_target, "our overrides win over Julia's");
    assert_eq!(
        got.origin,
        Origin::Override {
            overrides_file: our_file.clone()
        }
    );
    assert_eq!(s.server.total_gets(), 0);

    // Interop off: Julia's overrides are ignored (ours still apply).
    let off = config(&s, false);
    let got = ensure_variant("only-julia", &v_only_julia, &s.root, &off).unwrap();
    assert!(
        matches!(got.origin, Origin::Downloaded { .. }),
        "{:?}",
        got.origin
    );
    only_julia.assert_content(&got.path);
    let got = ensure_variant("both", &v_both, &s.root, &off).unwrap();
    assert_eq!(got.path, our_both_target);
    assert_eq!(s.server.gets("only-julia.tar.gz"), 1);
    assert_eq!(s.server.gets("both.tar.gz"), 0);
}

#[test]
fn environment_variables_enable_interop_in_a_child_process() {
    let Some(s) = setup() else { return };
    let run = |interop: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_install_one"))
            .args([
                "variant",
                "installed",
                &s.installed.tree_hash.to_hex(),
                &s.installed.sha256.to_hex(),
                &s.server.url("installed.tar.gz"),
            ])
            .current_dir(&s.root)
            .env("CLIMA_ARTIFACTS_DEPOT_PATH", &s.ours)
            .env("CLIMA_ARTIFACTS_JULIA_INTEROP", interop)
            .env("JULIA_DEPOT_PATH", &s.julia)
            .env("CLIMA_ARTIFACTS_PROGRESS", "0")
            .env_remove("CLIMA_ARTIFACTS_OFFLINE")
            .output()
            .unwrap();
        PathBuf::from(success_stdout(out).trim())
    };
    let julia_copy = s
        .julia
        .join("artifacts")
        .join(s.installed.tree_hash.to_hex());
    assert_eq!(run("1"), julia_copy);
    assert_eq!(s.server.total_gets(), 0);
    let ours = run("0");
    assert!(ours.starts_with(&s.ours), "{}", ours.display());
    assert_eq!(s.server.gets("installed.tar.gz"), 1);
}
