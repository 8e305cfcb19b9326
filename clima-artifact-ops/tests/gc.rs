//! `gc::collect` through the library, as a program other than the CLI would call it: the
//! artifact a given manifest names stays, an unreferenced one is marked first and deleted by
//! a collection after the delay, and a dry run changes nothing.

use std::path::Path;
use std::time::Duration;

use clima_artifact_ops::gc;
use clima_artifact_runtime::{Config, manifest::Manifest};

fn install(depot: &Path, hash: &str) {
    let dir = depot.join("artifacts").join(hash);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("data.txt"), hash).unwrap();
}

#[test]
fn collect_keeps_what_a_manifest_names_and_deletes_the_rest_after_the_delay() {
    let tmp = tempfile::tempdir().unwrap();
    let depot = tmp.path().join("depot");
    let (kept, doomed) = ("11".repeat(20), "22".repeat(20));
    install(&depot, &kept);
    install(&depot, &doomed);
    let manifest_path = tmp.path().join("Artifacts.toml");
    let text = format!("[kept]\ngit-tree-sha1 = \"{kept}\"\n");
    std::fs::write(&manifest_path, &text).unwrap();
    let manifest = Manifest::parse(&text, &manifest_path).unwrap();
    let config = Config {
        depots: vec![depot.clone().into()],
        julia_interop: false,
        ..Config::default()
    };
    let options = |delay, dry_run| gc::Options {
        manifests: vec![manifest.clone()],
        all_depots: false,
        delay,
        dry_run,
        force: false,
    };

    // A dry run with no delay lists the unreferenced one as due and removes nothing.
    let dry = gc::collect(&config, &options(Duration::ZERO, true)).unwrap();
    assert!(dry.dry_run);
    assert_eq!(dry.kept, 1);
    assert_eq!(dry.unreferenced.len(), 1);
    assert!(dry.unreferenced[0].due && !dry.unreferenced[0].removed);
    assert!(depot.join("artifacts").join(&doomed).is_dir());

    // Within the delay: marked as orphaned in logs/orphaned.toml, kept.
    let marked = gc::collect(&config, &options(Duration::from_secs(3600), false)).unwrap();
    assert!(!marked.unreferenced[0].due);
    assert!(depot.join("artifacts").join(&doomed).is_dir());
    let orphans = std::fs::read_to_string(depot.join("logs/orphaned.toml")).unwrap();
    assert!(orphans.contains(&doomed), "{orphans}");

    // After it (no delay): deleted, and the named one kept.
    let done = gc::collect(&config, &options(Duration::ZERO, false)).unwrap();
    assert!(done.unreferenced[0].removed, "{:?}", done.unreferenced);
    done.removal_failures().unwrap();
    assert!(!depot.join("artifacts").join(&doomed).exists());
    assert!(depot.join("artifacts").join(&kept).is_dir());
    assert_eq!(done.manifests[0].status, "given");
}
