//! The staging of an install, through the depot's public API only: one stager at a time per
//! artifact and depot, what dead installs left cleaned up, a commit that is one rename and
//! records the git tree SHA-256, and nothing visible when an install is dropped.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use clima_artifact_depot::{Depot, Stage, Staged, Staging, Wait};
use clima_artifact_manifest::layout::Entry;
use clima_artifact_manifest::{GitTreeSha1, GitTreeSha256, Origin};
use clima_artifact_progress::Reporting;

const HASH: GitTreeSha1 = GitTreeSha1([0x5a; 20]);

fn stage(depot: &Depot, wait: Option<Wait>) -> Staged {
    let search = [depot.clone()];
    let stage = Stage {
        name: "demo",
        search: &search,
        wait,
        reporting: &Reporting::default(),
    };
    depot
        .stage(&HASH, stage)
        .expect("staging works in a fresh depot")
}

fn ready(staged: Staged) -> Box<Staging> {
    match staged {
        Staged::Ready(staging) => staging,
        Staged::Installed(i) => panic!("expected a staging, found installed {i:?}"),
        Staged::Busy => panic!("expected a staging, found it busy"),
    }
}

/// The entries of the depot's `artifacts` folder that are ours or Julia's, by kind (the lock
/// folder aside): what another process or Julia would see.
fn visible(depot: &Depot) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(depot.artifacts_dir())
        .map(|rd| {
            rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| Entry::parse(n) != Some(Entry::Locks))
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// Fills a temp dir of `staging` with one file and commits it, with `sha256` recorded.
fn install(staging: &Staging, sha256: Option<&GitTreeSha256>) -> std::path::PathBuf {
    let tmp = staging.temp_dir().unwrap();
    tmp.dir()
        .create_new("data.txt", 0o644)
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"verified"))
        .unwrap();
    staging.commit(tmp, sha256).unwrap()
}

#[test]
fn a_second_stager_is_busy_or_waits_and_then_finds_it_installed() {
    let t = tempfile::tempdir().unwrap();
    let depot = Depot::new(t.path());
    let first = ready(stage(&depot, None));
    // Without waiting: busy while the first holds the locks.
    assert!(matches!(stage(&depot, None), Staged::Busy));
    // Waiting: it gets the copy the first one installs meanwhile, not a staging of its own.
    let waiter = {
        let depot = depot.clone();
        std::thread::spawn(move || {
            let wait = Wait {
                timeout: Duration::from_secs(60),
                tell: false,
            };
            match stage(&depot, Some(wait)) {
                Staged::Installed(found) => found,
                Staged::Ready(_) => panic!("a second staging while the first held the locks"),
                Staged::Busy => panic!("busy although it waited"),
            }
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        !waiter.is_finished(),
        "the waiter did not wait for the lock"
    );
    let dest = install(&first, None);
    drop(first);
    let found = waiter.join().unwrap();
    assert_eq!((found.path, found.origin), (dest, Origin::Depot));
}

#[test]
fn a_waiting_stager_times_out_naming_the_lock() {
    let t = tempfile::tempdir().unwrap();
    let depot = Depot::new(t.path());
    let _first = ready(stage(&depot, None));
    let depot2 = depot.clone();
    let e = std::thread::spawn(move || {
        let search = [depot2.clone()];
        let wait = Wait {
            timeout: Duration::from_millis(300),
            tell: false,
        };
        let stage = Stage {
            name: "demo",
            search: &search,
            wait: Some(wait),
            reporting: &Reporting::default(),
        };
        depot2.stage(&HASH, stage).err().expect("a timeout")
    })
    .join()
    .unwrap();
    let text = e.to_string();
    assert!(
        text.contains(&depot.lock_path(&HASH).display().to_string()),
        "{text}"
    );
}

#[test]
fn a_stale_temp_folder_is_cleaned_and_a_live_one_kept() {
    let t = tempfile::tempdir().unwrap();
    let depot = Depot::new(t.path());
    std::fs::create_dir_all(depot.artifacts_dir()).unwrap();
    let host = clima_artifact_fs::host_tag();
    let temp = |pid: u32| {
        let owner = format!("{host}.{pid}.00000000000000ff");
        let name = Entry::InstallTemp {
            artifact: HASH,
            owner: &owner,
        }
        .name();
        depot.artifacts_dir().join(name)
    };
    // pid 0 is never a process: a dead install's leftovers, with a file in them.
    let dead = temp(0);
    std::fs::create_dir(&dead).unwrap();
    std::fs::write(dead.join("half.nc"), b"half").unwrap();
    // This very process is alive: its folder is not touched.
    let live = temp(std::process::id());
    std::fs::create_dir(&live).unwrap();
    let staging = ready(stage(&depot, None));
    assert!(!dead.exists(), "the dead install's temp folder was left");
    assert!(live.is_dir(), "a live process's temp folder was removed");
    drop(staging);
}

#[test]
fn commit_is_one_rename_into_place_and_records_the_sha256() {
    let t = tempfile::tempdir().unwrap();
    let depot = Depot::new(t.path());
    let staging = ready(stage(&depot, None));
    let tmp = staging.temp_dir().unwrap();
    let tmp_path = tmp.path().to_path_buf();
    // Private while it is filled, and under a temp name nothing takes for the artifact.
    let mode = std::fs::metadata(&tmp_path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    let name = tmp_path.file_name().unwrap().to_str().unwrap();
    assert!(
        matches!(Entry::parse(name), Some(Entry::InstallTemp { artifact, .. }) if artifact == HASH),
        "{name}"
    );
    tmp.dir()
        .create_new("data.txt", 0o644)
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"verified"))
        .unwrap();
    let inode = |p: &Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).unwrap());
    let filled = inode(&tmp_path);
    assert_eq!(depot.installed(&HASH), None, "visible before the commit");
    let sha = GitTreeSha256([0x77; 32]);
    let dest = staging.commit(tmp, Some(&sha)).unwrap();
    // The very folder that was filled, renamed (not copied), 0o755, nothing else left.
    assert_eq!(dest, depot.artifact_dir(&HASH));
    assert_eq!(inode(&dest), filled);
    assert_eq!(std::fs::read(dest.join("data.txt")).unwrap(), b"verified");
    let mode = std::fs::metadata(&dest).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o755);
    assert!(!tmp_path.exists());
    assert_eq!(depot.recorded_tree_sha256(&HASH, &dest), Some(sha));
    drop(staging);
    assert_eq!(
        visible(&depot),
        [
            Entry::Artifact(HASH).name(),
            Entry::TreeSha256Record(HASH).name()
        ]
    );
}

#[test]
fn a_commit_without_sha256_records_nothing_and_a_second_finds_it_installed() {
    let t = tempfile::tempdir().unwrap();
    let depot = Depot::new(t.path());
    let staging = ready(stage(&depot, None));
    let dest = install(&staging, None);
    assert_eq!(depot.recorded_tree_sha256(&HASH, &dest), None);
    drop(staging);
    match stage(&depot, None) {
        Staged::Installed(found) => assert_eq!(found.path, dest),
        _ => panic!("staged again although installed"),
    }
}

#[test]
fn a_dropped_staging_leaves_nothing_visible() {
    let t = tempfile::tempdir().unwrap();
    let depot = Depot::new(t.path());
    let staging = ready(stage(&depot, None));
    let tmp = staging.temp_dir().unwrap();
    tmp.dir()
        .create_new("half.nc", 0o644)
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"unverified"))
        .unwrap();
    let partial = staging.partial("http://127.0.0.1:1/x.tar.gz").unwrap();
    partial.dir.create_new(&partial.name, 0o600).unwrap();
    assert!(staging.remove_partial(&partial));
    drop(tmp);
    drop(staging);
    assert_eq!(visible(&depot), Vec::<String>::new());
    assert_eq!(depot.installed(&HASH), None);
    // And the locks are free again.
    drop(ready(stage(&depot, None)));
}

#[test]
fn partials_are_named_for_artifact_url_and_user_and_may_live_elsewhere() {
    let t = tempfile::tempdir().unwrap();
    let node = Depot::new(t.path().join("node"));
    let shared = Depot::new(t.path().join("shared"));
    let mut staging = ready(stage(&node, None));
    let url = "https://example.org/data.tar.gz";
    let here = staging.partial(url).unwrap();
    assert_eq!(here.dir.path(), node.artifacts_dir());
    assert_eq!(here.name, clima_artifact_depot::partial_name(&HASH, url));
    match Entry::parse(&here.name) {
        Some(Entry::Partial {
            artifact,
            url_key,
            uid,
        }) => {
            assert_eq!(
                (artifact, url_key, uid),
                (HASH, here.key.as_str(), clima_artifact_fs::euid())
            );
        }
        other => panic!("{other:?}"),
    }
    assert_ne!(
        staging
            .partial("https://example.org/other.tar.gz")
            .unwrap()
            .key,
        here.key
    );
    // Kept in the shared depot, whose lock of the artifact is held meanwhile.
    staging
        .keep_partials_in(std::slice::from_ref(&shared))
        .unwrap();
    assert_eq!(staging.partials_depot(), &shared);
    assert_eq!(
        staging.partial(url).unwrap().dir.path(),
        shared.artifacts_dir()
    );
    assert!(matches!(stage(&shared, None), Staged::Busy));
    drop(staging);
    drop(ready(stage(&shared, None)));
}
