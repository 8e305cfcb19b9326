//! `storage::publish` through the library, as a program other than the CLI would call it: a
//! tarball written by `tarball::write_seekable` goes to a folder storage and its download is
//! recorded in the manifest; a tarball of other content than the entry, a bad name and a file
//! that is not a tarball are bad input, refused before anything is uploaded.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use clima_artifact_ops::storage::{PublishRequest, Step, publish};
use clima_artifact_ops::{ErrorKind, tarball};
use clima_artifact_runtime::extract::seekable::{DEFAULT_BLOCK_SIZE, Flavour};
use clima_artifact_runtime::manifest::{ArtifactEntry, Manifest};

/// A folder with `text` in `a.txt`, and its seekable tarball `out`.
fn made(root: &Path, text: &str, out: &Path) -> tarball::Tarball {
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::write(root.join("a.txt"), text).unwrap();
    std::fs::write(root.join("sub/b.txt"), "beta\n").unwrap();
    let entries = tarball::collect_entries(root).unwrap();
    tarball::write_seekable(
        root,
        &entries,
        out,
        Flavour::Gzip,
        DEFAULT_BLOCK_SIZE,
        &|_| {},
    )
    .unwrap()
}

fn request(tarball: &Path, store: &Path, manifest: &Path, name: &str) -> PublishRequest {
    PublishRequest {
        tarball: tarball.to_path_buf(),
        to: store.display().to_string(),
        public_url: None,
        manifest: manifest.to_path_buf(),
        name: name.to_owned(),
        key: None,
        by_hash: false,
        reporting: clima_artifact_runtime::progress::Reporting::default(),
    }
}

/// Every file below `dir` (relative), sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(read) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in read {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_tarball_goes_to_storage_and_its_download_into_the_manifest() {
    let t = tempfile::tempdir().unwrap();
    let tar_path = t.path().join("mydata.tar.gz");
    let tb = made(&t.path().join("data"), "alpha\n", &tar_path);
    let store = t.path().join("store");
    let manifest = t.path().join("project/Artifacts.toml");

    let steps = RefCell::new(Vec::new());
    let done = publish(&request(&tar_path, &store, &manifest, "mydata"), &|s| {
        steps.borrow_mut().push(match s {
            Step::Uploading { key, storage } => format!("uploading {key} to {storage}"),
            Step::Uploaded => "uploaded".to_owned(),
        });
    })
    .unwrap();

    // The object, byte for byte, under the tarball's file name.
    assert_eq!(files(&store), [PathBuf::from("mydata.tar.gz")]);
    assert_eq!(
        std::fs::read(store.join("mydata.tar.gz")).unwrap(),
        std::fs::read(&tar_path).unwrap()
    );
    assert_eq!(done.bytes, tb.size);
    assert_eq!(done.sha256, tb.sha256.to_hex());
    assert_eq!(done.git_tree_sha1, tb.tree_hash.to_hex());
    assert_eq!(
        done.index_sha256,
        tb.index_sha256.map(|h| h.to_hex()),
        "a seekable tarball's index is recorded"
    );
    assert!(done.index_sha256.is_some());
    assert!(done.url.starts_with("file://"), "{}", done.url);
    assert!(done.url.ends_with("/mydata.tar.gz"), "{}", done.url);
    assert!(done.uploaded_to.ends_with("/mydata.tar.gz"));
    assert_eq!(
        steps.into_inner(),
        [
            format!(
                "uploading mydata.tar.gz to {}",
                done.uploaded_to.trim_end_matches("/mydata.tar.gz")
            ),
            "uploaded".to_owned()
        ]
    );

    // The manifest (made, with its folder) has the entry with that download.
    let text = std::fs::read_to_string(&manifest).unwrap();
    let m = Manifest::parse(&text, &manifest).unwrap();
    let Some(ArtifactEntry::Single(v)) = m.get("mydata") else {
        panic!("no single entry `mydata`:\n{text}");
    };
    assert_eq!(v.git_tree_sha1, tb.tree_hash);
    assert_eq!(v.downloads.len(), 1, "{text}");
    assert_eq!(v.downloads[0].url, done.url);
    assert_eq!(v.downloads[0].sha256, tb.sha256);
    assert_eq!(v.downloads[0].size, Some(tb.size));
}

#[test]
fn by_hash_stores_at_the_package_server_path_and_a_public_url_is_recorded() {
    let t = tempfile::tempdir().unwrap();
    let tar_path = t.path().join("x.tar.gz");
    let tb = made(&t.path().join("data"), "alpha\n", &tar_path);
    let store = t.path().join("store");
    let manifest = t.path().join("Artifacts.toml");
    let req = PublishRequest {
        by_hash: true,
        public_url: Some("https://mirror.example.org/".to_owned()),
        ..request(&tar_path, &store, &manifest, "mydata")
    };
    let done = publish(&req, &|_| {}).unwrap();
    let key = format!("artifact/{}", tb.tree_hash.to_hex());
    assert_eq!(files(&store), [PathBuf::from(&key)]);
    assert_eq!(done.url, format!("https://mirror.example.org/{key}"));
    assert!(
        std::fs::read_to_string(&manifest)
            .unwrap()
            .contains(&done.url)
    );
}

#[test]
fn other_content_than_the_entry_is_refused_before_any_upload() {
    let t = tempfile::tempdir().unwrap();
    let first = t.path().join("first.tar.gz");
    made(&t.path().join("one"), "alpha\n", &first);
    let store = t.path().join("store");
    let manifest = t.path().join("Artifacts.toml");
    publish(&request(&first, &store, &manifest, "mydata"), &|_| {}).unwrap();
    let before = std::fs::read_to_string(&manifest).unwrap();

    // Another content under the same name: refused, nothing uploaded, manifest unchanged.
    let second = t.path().join("second.tar.gz");
    made(&t.path().join("two"), "changed\n", &second);
    let uploads = RefCell::new(0);
    let e = publish(&request(&second, &store, &manifest, "mydata"), &|s| {
        if matches!(s, Step::Uploading { .. }) {
            *uploads.borrow_mut() += 1;
        }
    })
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Input, "{e}");
    assert!(e.message().contains("nothing was uploaded"), "{e}");
    assert!(e.message().contains(&manifest.display().to_string()), "{e}");
    assert_eq!(uploads.into_inner(), 0);
    assert_eq!(files(&store), [PathBuf::from("first.tar.gz")]);
    assert_eq!(std::fs::read_to_string(&manifest).unwrap(), before);
}

#[test]
fn a_bad_name_or_a_file_that_is_no_tarball_is_bad_input_naming_it() {
    let t = tempfile::tempdir().unwrap();
    let store = t.path().join("store");
    let manifest = t.path().join("Artifacts.toml");
    let tar_path = t.path().join("x.tar.gz");
    made(&t.path().join("data"), "alpha\n", &tar_path);

    let e = publish(&request(&tar_path, &store, &manifest, "bad name/"), &|_| {}).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Input, "{e}");
    assert!(e.message().contains("artifact name"), "{e}");

    let junk = t.path().join("junk.tar.gz");
    std::fs::write(&junk, "not a tarball").unwrap();
    let e = publish(&request(&junk, &store, &manifest, "mydata"), &|_| {}).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Input, "{e}");
    assert!(e.message().contains(&junk.display().to_string()), "{e}");

    let missing = t.path().join("missing.tar.gz");
    let e = publish(&request(&missing, &store, &manifest, "mydata"), &|_| {}).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Input, "{e}");
    assert!(e.message().contains(&missing.display().to_string()), "{e}");

    assert!(files(&store).is_empty(), "nothing uploaded");
    assert!(!manifest.exists(), "no manifest written");
}
