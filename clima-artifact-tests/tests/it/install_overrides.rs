//! Overrides across depots (Julia semantics plus chains and cycle detection).

use clima_artifact_runtime::depot::Error as DepotError;
use std::path::PathBuf;

use clima_artifact_manifest::GitTreeSha1;
use clima_artifact_runtime::Error;
use clima_artifact_runtime::{Origin, ensure_variant};
use clima_artifact_tests::{
    TestArtifact, TestServer, have_git, installed_entries, test_config, write_overrides,
};

fn h(c: char) -> GitTreeSha1 {
    GitTreeSha1::from_hex(&c.to_string().repeat(40)).unwrap()
}

struct Depots {
    dir: tempfile::TempDir,
    d1: PathBuf,
    d2: PathBuf,
}

fn depots() -> Depots {
    let dir = tempfile::tempdir().unwrap();
    let d1 = dir.path().join("d1");
    let d2 = dir.path().join("d2");
    Depots { dir, d1, d2 }
}

fn target(d: &Depots, name: &str) -> PathBuf {
    let p = d.dir.path().join(name);
    std::fs::create_dir_all(&p).unwrap();
    std::fs::write(p.join("data.nc"), name).unwrap();
    p
}

#[test]
fn path_override_is_used_without_download_or_hashing() {
    if !have_git() {
        return;
    }
    let d = depots();
    let server = TestServer::start();
    let art = TestArtifact::sample(21);
    server.serve("a.tar.gz", art.tarball.clone());
    let shared = target(&d, "shared"); // content does not match the hash: never hashed
    let file = write_overrides(&d.d1, &format!("{} = {:?}\n", art.tree_hash, shared));
    let config = test_config(&[d.d1.clone(), d.d2.clone()]);
    let got = ensure_variant("a", &art.variant(&[server.url("a.tar.gz")]), &d.d1, &config).unwrap();
    assert_eq!(got.path, shared);
    assert_eq!(
        got.origin,
        Origin::Override {
            overrides_file: file
        }
    );
    assert_eq!(server.total_gets(), 0);
    assert!(installed_entries(&d.d1).is_empty());
}

#[test]
fn earlier_depots_win_and_empty_string_removes() {
    let d = depots();
    let (a, b) = (target(&d, "a"), target(&d, "b"));
    let hash = h('1');
    let v = clima_artifact_tests::variant(hash, &[], clima_artifact_tests::sha256(b""));
    let config = test_config(&[d.d1.clone(), d.d2.clone()]);

    write_overrides(&d.d1, &format!("{hash} = {a:?}\n"));
    let f2 = write_overrides(&d.d2, &format!("{hash} = {b:?}\n"));
    assert_eq!(ensure_variant("x", &v, &d.d1, &config).unwrap().path, a);

    // d1 removes the override that d2 sets: not overridden, no downloads => the helpful error.
    write_overrides(&d.d1, &format!("{hash} = \"\"\n"));
    let e = ensure_variant("x", &v, &d.d1, &config).unwrap_err();
    assert!(matches!(e, Error::NoDownloads { .. }), "{e:?}");

    // Without d1's entry, d2's applies.
    write_overrides(&d.d1, "");
    let got = ensure_variant("x", &v, &d.d1, &config).unwrap();
    assert_eq!(
        (got.path, got.origin),
        (b, Origin::Override { overrides_file: f2 })
    );
}

#[test]
fn hash_chains_are_followed_across_depots() {
    let d = depots();
    let (h1, h2, h3) = (h('1'), h('2'), h('3'));
    let end = target(&d, "end");
    let f1 = write_overrides(&d.d1, &format!("{h1} = \"{h2}\"\n"));
    write_overrides(&d.d2, &format!("{h2} = \"{h3}\"\n{h3} = {end:?}\n"));
    let config = test_config(&[d.d1.clone(), d.d2.clone()]);
    let v = clima_artifact_tests::variant(h1, &[], clima_artifact_tests::sha256(b""));
    let got = ensure_variant("x", &v, &d.d1, &config).unwrap();
    assert_eq!(
        (got.path, got.origin),
        (end, Origin::Override { overrides_file: f1 })
    );

    // A chain ending at an installed hash uses the installed copy.
    let installed = d.d2.join("artifacts").join(h('4').to_hex());
    std::fs::create_dir_all(&installed).unwrap();
    write_overrides(&d.d1, &format!("{h1} = \"{}\"\n", h('4')));
    assert_eq!(
        ensure_variant("x", &v, &d.d1, &config).unwrap().path,
        installed
    );

    // ... and one ending at a hash installed nowhere names the file and line.
    write_overrides(&d.d1, &format!("# comment\n{h1} = \"{}\"\n", h('5')));
    let e = ensure_variant("x", &v, &d.d1, &config)
        .unwrap_err()
        .to_string();
    assert!(e.contains("Overrides.toml`") && e.contains("line 2"), "{e}");
    assert!(
        e.contains(&h('5').to_hex()) && e.contains("not installed"),
        "{e}"
    );
}

#[test]
fn cycles_are_reported_with_every_file() {
    let d = depots();
    let (h1, h2, h3) = (h('1'), h('2'), h('3'));
    let f1 = write_overrides(&d.d1, &format!("{h1} = \"{h2}\"\n"));
    let f2 = write_overrides(&d.d2, &format!("{h2} = \"{h3}\"\n{h3} = \"{h1}\"\n"));
    let config = test_config(&[d.d1.clone(), d.d2.clone()]);
    let v = clima_artifact_tests::variant(h1, &[], clima_artifact_tests::sha256(b""));
    let e = ensure_variant("x", &v, &d.d1, &config).unwrap_err();
    let Error::Depot(DepotError::OverrideCycle { chain }) = &e else {
        panic!("{e:?}")
    };
    assert_eq!(
        chain.iter().map(|c| c.0).collect::<Vec<_>>(),
        vec![h1, h2, h3]
    );
    let s = e.to_string();
    assert!(
        s.contains(&f1.display().to_string()) && s.contains(&f2.display().to_string()),
        "{s}"
    );
    assert!(s.contains("cycle"), "{s}");
}

#[test]
fn missing_target_names_the_overrides_file() {
    let d = depots();
    let hash = h('7');
    let missing = d.dir.path().join("gone");
    let f = write_overrides(&d.d2, &format!("{hash} = {missing:?}\n"));
    let config = test_config(&[d.d1.clone(), d.d2.clone()]);
    let v = clima_artifact_tests::variant(hash, &[], clima_artifact_tests::sha256(b""));
    let e = ensure_variant("x", &v, &d.d1, &config).unwrap_err();
    assert!(
        matches!(e, Error::Depot(DepotError::OverrideTargetMissing { .. })),
        "{e:?}"
    );
    let s = e.to_string();
    assert!(
        s.contains(&f.display().to_string()) && s.contains("line 1"),
        "{s}"
    );
    assert!(s.contains(&missing.display().to_string()), "{s}");
}

#[test]
fn malformed_overrides_are_errors_naming_the_file() {
    let d = depots();
    let f = write_overrides(&d.d1, "not toml = = =\n");
    let config = test_config(std::slice::from_ref(&d.d1));
    let v = clima_artifact_tests::variant(h('8'), &[], clima_artifact_tests::sha256(b""));
    let s = ensure_variant("x", &v, &d.d1, &config)
        .unwrap_err()
        .to_string();
    assert!(s.contains(&f.display().to_string()), "{s}");
}

#[test]
fn julia_uuid_tables_are_left_alone() {
    let d = depots();
    let hash = h('9');
    let t = target(&d, "t");
    write_overrides(
        &d.d1,
        &format!(
            "{hash} = {t:?}\n\n[d6f4376e-aef5-505a-96c1-9c027394607a]\nlibfoo = \"/opt/libfoo\"\n"
        ),
    );
    let config = test_config(std::slice::from_ref(&d.d1));
    let v = clima_artifact_tests::variant(hash, &[], clima_artifact_tests::sha256(b""));
    assert_eq!(ensure_variant("x", &v, &d.d1, &config).unwrap().path, t);
}
