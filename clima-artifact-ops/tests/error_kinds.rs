//! ops' own error through the public API, as a program other than the CLI sees it: bad input
//! (a malformed manifest, a missing folder, an archive request for a manifest that is not
//! there) is `ErrorKind::Input`, an operation that ran and failed is `ErrorKind::Failed`, and
//! each message names the path it is about. No exit codes here: those are the CLI's.

use std::path::Path;

use clima_artifact_ops::manifest_edit::{EntryUpdate, upsert_entry};
use clima_artifact_ops::{Error, ErrorKind, archive, error, recipe};

fn update(name: &str) -> EntryUpdate {
    EntryUpdate {
        name: name.to_owned(),
        tree_hash: "11".repeat(20),
        tree_hash_sha256: None,
        lazy: false,
        metadata: Vec::new(),
        download: None,
        remove_downloads: false,
        replace_downloads: false,
        download_last: false,
    }
}

fn assert_names(e: &Error, path: &Path) {
    let shown = path.display().to_string();
    assert!(
        e.message().contains(&shown),
        "the message should name `{shown}`: {e}"
    );
    assert_eq!(e.to_string(), e.message());
}

#[test]
fn a_malformed_manifest_is_bad_input_naming_the_manifest() {
    let path = Path::new("/some/project/Artifacts.toml");
    let e = upsert_entry("[broken\ngit-tree-sha1 = ", path, &update("data")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Input, "{e}");
    assert_names(&e, path);
    assert!(e.message().contains("not valid TOML"), "{e}");
}

#[test]
fn a_missing_folder_is_bad_input_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("no-such-recipe");
    let e = recipe::from_folder(&missing, &tmp.path().join("Artifacts.toml"), "data").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Input, "{e}");
    assert_names(&e, &missing);

    // A file where a folder is expected: bad input too.
    let file = tmp.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let e = error::existing_dir(&file, "override folder").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Input, "{e}");
    assert_names(&e, &file);
    assert!(e.message().contains("is not a folder"), "{e}");
}

#[test]
fn an_operation_that_fails_is_failed_naming_the_path() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("recipe");
    recipe::write_new(&path, "#!/bin/sh\n", 0o755).unwrap();
    // Never over an existing file: the second write fails, and says which file.
    let e = recipe::write_new(&path, "#!/bin/sh\nexit 1\n", 0o755).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Failed, "{e}");
    assert_names(&e, &path);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "#!/bin/sh\n");
}

#[test]
fn context_prefixes_the_message_and_keeps_the_kind() {
    let e = Error::failed("cannot read `x`").context("the output of the recipe of `data`");
    assert_eq!(e.kind(), ErrorKind::Failed);
    assert_eq!(
        e.message(),
        "the output of the recipe of `data`: cannot read `x`"
    );
    let e = Error::input("bad").context("step");
    assert_eq!(e.kind(), ErrorKind::Input);
    assert_eq!(e.into_message(), "step: bad");
}

#[test]
fn an_archive_request_for_a_missing_manifest_is_bad_input_before_any_request() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = tmp.path().join("Artifacts.toml");
    let req = archive::PublishRequest {
        name: "data".to_owned(),
        manifest: manifest.clone(),
        // Nothing listens here; the error comes before any request.
        archive: "http://127.0.0.1:9".to_owned(),
        token: Some("token".to_owned()),
        tarball: None,
        draft_only: true,
        first: false,
        creators: Vec::new(),
        timeout: None,
    };
    let e = Error::from(
        archive::publish(
            &req,
            &clima_artifact_runtime::progress::Reporting::default(),
        )
        .unwrap_err(),
    );
    assert_eq!(e.kind(), ErrorKind::Input, "{e}");
    assert_names(&e, &manifest);
}
