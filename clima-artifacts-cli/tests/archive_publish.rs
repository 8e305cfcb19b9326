//! `publish NAME --archive URL` through the binary, against the loopback InvenioRDM archive of
//! the test crate (`clima_artifact_tests::invenio`): records, versions, resumed drafts,
//! checksums, token and limit errors, and `fetch` of the published file into a fresh depot.

#![allow(
    clippy::too_many_lines,
    reason = "a test reads as one scenario; the 100-line rule (issue 36) is for non-test code"
)]

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use clima_artifact_tests::invenio::{ArchiveFault, InvenioServer, Limits};
use common::{Sandbox, assert_ok};

const TOKEN: &str = "s3cr3t-token-for-the-loopback-archive";

/// A README with every required section, a title and a Contents paragraph.
const README: &str = "# ERA5 sample for tests\n\n## Contents\nMonthly means of u, one CSV.\n\n\
                      ## Sources\nhttps://example.invalid/era5\n\n\
                      ## Creators and citation\nHersbach et al. (2020), doi:10.1002/qj.3803\n\n\
                      ## Preprocessing\nnone\n";

/// What the manifest holds before `create` adds the artifact: other bytes to keep.
const PREAMBLE: &str = "# Inputs of the model; keep this comment.\n\n[other]   # hand-written\n\
                        git-tree-sha1 = \"4b825dc642cb6eb9a060e54bf8d69288fbee4904\"\n\
                        lazy = true\n";

/// Writes `artifacts/<name>/` (recipe writing `script`'s output, and the README) and runs
/// `create --recipe` with a license, maintainer and source DOI.
fn make_artifact(sb: &Sandbox, name: &str, script: &str, license: Option<&str>) {
    let dir = sb.work.join("artifacts").join(name);
    fs::create_dir_all(&dir).unwrap();
    let recipe = dir.join("recipe");
    fs::write(&recipe, format!("#!/bin/sh\nset -eu\n{script}")).unwrap();
    fs::set_permissions(&recipe, fs::Permissions::from_mode(0o755)).unwrap();
    fs::write(dir.join("README.md"), README).unwrap();
    let manifest = sb.work.join("Artifacts.toml");
    if !manifest.exists() {
        fs::write(&manifest, PREAMBLE).unwrap();
    }
    let mut cmd = sb.cli();
    cmd.args(["create", "--recipe", &format!("artifacts/{name}")])
        .args(["-m", "Artifacts.toml", "--maintainer", "Doe, Jane"])
        .args([
            "--doi",
            "10.1002/qj.3803",
            "--source",
            "https://example.invalid/era5",
        ]);
    if let Some(l) = license {
        cmd.args(["--license", l]);
    }
    assert_ok(&cmd.output().unwrap());
}

/// `publish NAME --archive BASE EXTRA...` with the token set.
fn publish(
    sb: &Sandbox,
    server: &InvenioServer,
    name: &str,
    extra: &[&str],
) -> std::process::Output {
    sb.cli()
        .env(clima_artifact_vars::ARCHIVE_TOKEN, TOKEN)
        .args(["publish", name, "--archive", &server.base()])
        .args(extra)
        .output()
        .unwrap()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The single `[name]` entry of the sandbox's manifest.
fn entry(sb: &Sandbox, name: &str) -> clima_artifact_manifest::ArtifactVariant {
    let m = clima_artifact_manifest::Manifest::load(&sb.work.join("Artifacts.toml")).unwrap();
    m.select(name, &clima_artifact_manifest::Platform::host())
        .unwrap()
        .clone()
}

fn published(server: &InvenioServer) -> Vec<clima_artifact_tests::invenio::ArchiveRecord> {
    server
        .records()
        .into_iter()
        .filter(|r| r.published)
        .collect()
}

fn uploads(server: &InvenioServer) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| r.starts_with("PUT ") && r.ends_with("/content"))
        .count()
}

/// `fetch NAME` into a fresh depot, with extra environment; returns the depot.
fn fetch_fresh(sb: &Sandbox, name: &str, env: &[(&str, &str)]) -> PathBuf {
    let depot = sb.root.path().join("fresh-depot");
    let mut cmd = common::cli(&depot, &sb.work);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd
        .args(["fetch", name, "-m", "Artifacts.toml"])
        .output()
        .unwrap();
    assert_ok(&out);
    depot
}

#[test]
fn a_recipe_artifact_is_published_with_a_doi_and_fetched_from_the_archive() {
    let sb = Sandbox::new();
    let server = InvenioServer::start(TOKEN);
    make_artifact(
        &sb,
        "era5",
        "echo 1,2,3 > \"$OUT/u.csv\"\n",
        Some("CC-BY-4.0"),
    );
    let before = fs::read_to_string(sb.work.join("Artifacts.toml")).unwrap();
    let out = publish(&sb, &server, "era5", &[]);
    assert_ok(&out);
    assert!(!stderr(&out).contains(TOKEN) && !stdout(&out).contains(TOKEN));
    assert!(stderr(&out).contains("checksum md5:"), "{}", stderr(&out));

    // One record, published, with the tarball and the README as files, and the metadata.
    let records = server.records();
    assert_eq!(records.len(), 1, "{records:?}");
    let r = &records[0];
    assert!(r.published);
    assert_eq!(
        r.files.keys().collect::<Vec<_>>(),
        ["README.md", "era5.tar.gz"]
    );
    assert_eq!(*r.files["README.md"].bytes, README.as_bytes());
    assert_eq!(r.metadata["metadata"], serde_json::Value::Null);
    assert_eq!(r.metadata["title"], "ERA5 sample for tests");
    assert_eq!(r.metadata["resource_type"]["id"], "dataset");
    assert_eq!(r.metadata["rights"][0]["id"], "cc-by-4.0");
    assert_eq!(
        r.metadata["creators"][0]["person_or_org"]["family_name"],
        "Doe"
    );
    assert_eq!(
        r.metadata["creators"][0]["person_or_org"]["given_name"],
        "Jane"
    );
    assert!(
        r.metadata["description"]
            .as_str()
            .unwrap()
            .contains("Monthly means of u"),
        "{}",
        r.metadata
    );
    let related = r.metadata["related_identifiers"].to_string();
    assert!(related.contains("10.1002/qj.3803"), "{related}");

    // The manifest: the source's doi kept, the record's DOIs under keys of their own, and the
    // download; every other byte as it was.
    let doi = r.doi.clone().unwrap();
    assert!(doi.starts_with("10."), "{doi}");
    let concept = r.concept_doi.clone().unwrap();
    assert_ne!(concept, doi);
    let after = fs::read_to_string(sb.work.join("Artifacts.toml")).unwrap();
    let url = format!(
        "{}/api/records/{}/files/era5.tar.gz/content",
        server.base(),
        r.id
    );
    let e = entry(&sb, "era5");
    assert_eq!(e.metadata["doi"], "10.1002/qj.3803");
    assert_eq!(e.metadata["archive-doi"], doi);
    assert_eq!(e.metadata["archive-concept-doi"], concept);
    assert_eq!(
        e.downloads
            .iter()
            .map(|d| d.url.as_str())
            .collect::<Vec<_>>(),
        [url.as_str()]
    );
    let expected = before.replace(
        "recipe = \"artifacts/era5\"\n",
        &format!(
            "recipe = \"artifacts/era5\"\narchive-doi = \"{doi}\"\narchive-concept-doi = \"{concept}\"\n"
        ),
    );
    // `create` made a seekable tarball: its index's hash is recorded too (docs/seekable.md).
    let index = e.downloads[0]
        .index_sha256
        .expect("the published seekable tarball's index-sha256");
    let block = format!(
        "\n    [[era5.download]]\n    index-sha256 = \"{}\"\n    sha256 = \"{}\"\n    size = {}\n    url = \"{url}\"\n",
        index.to_hex(),
        e.downloads[0].sha256.to_hex(),
        r.files["era5.tar.gz"].size
    );
    assert_eq!(after, format!("{expected}{block}"));

    // A fresh depot installs it from the archive, hashes checked.
    let depot = fetch_fresh(&sb, "era5", &[]);
    let installed = depot
        .join("artifacts")
        .join(e.git_tree_sha1.to_hex())
        .join("u.csv");
    assert_eq!(fs::read_to_string(installed).unwrap(), "1,2,3\n");
    let path = InvenioServer::file_path(&r.id, "era5.tar.gz");
    assert!(server.file_server().gets(&path) >= 1);

    // The provenance report of a run using it cites the DOI.
    use clima_artifact_runtime::access_log::{self, AccessEvent};
    access_log::record(AccessEvent {
        name: "era5".into(),
        hash: e.git_tree_sha1,
        path: depot.join("artifacts").join(e.git_tree_sha1.to_hex()),
        origin: access_log::RecordedOrigin::Depot,
        call_site: None,
        manifest: sb.work.join("Artifacts.toml"),
        metadata: e.metadata.clone(),
        rank: 0,
    });
    let report = clima_artifact_runtime::report::report();
    fs::write(sb.work.join("provenance.json"), report.to_json()).unwrap();
    let out = sb
        .cli()
        .args(["report", "provenance.json"])
        .output()
        .unwrap();
    assert_ok(&out);
    let md = stdout(&out);
    assert!(
        md.contains("DOI: [10.1002/qj.3803](https://doi.org/10.1002/qj.3803)."),
        "{md}"
    );
    assert!(
        md.contains(&format!(
            "Archived as [{doi}](https://doi.org/{doi}) (this version; all versions: \
             [{concept}](https://doi.org/{concept}))."
        )),
        "{md}"
    );

    // Again: nothing sent, nothing changed.
    let requests = server.requests().len();
    let out = publish(&sb, &server, "era5", &[]);
    assert_ok(&out);
    assert!(
        stdout(&out).contains("already published"),
        "{}",
        stdout(&out)
    );
    assert_eq!(server.requests().len(), requests);
    assert_eq!(
        fs::read_to_string(sb.work.join("Artifacts.toml")).unwrap(),
        after
    );
}

#[test]
fn a_cut_upload_resumes_the_same_draft_without_a_duplicate() {
    let sb = Sandbox::new();
    let server = InvenioServer::start(TOKEN);
    make_artifact(&sb, "era5", "echo 1 > \"$OUT/u.csv\"\n", Some("CC-BY-4.0"));
    // More cuts than the run's tries: the first run gives up with a draft left.
    for _ in 0..3 {
        server.fault(ArchiveFault::CutUpload { after: 10 });
    }
    let out = publish(&sb, &server, "era5", &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("trying again"), "{}", stderr(&out));
    assert!(published(&server).is_empty());
    assert!(sb.work.join(".era5.publish-state.json").is_file());
    // The rerun continues it.
    let out = publish(&sb, &server, "era5", &[]);
    assert_ok(&out);
    assert!(
        stderr(&out).contains("continuing draft"),
        "{}",
        stderr(&out)
    );
    assert_eq!(server.records_created(), 1);
    assert_eq!(server.records().len(), 1);
    assert_eq!(published(&server).len(), 1);
}

#[test]
fn a_server_error_and_a_429_are_waited_out_and_retried() {
    let sb = Sandbox::new();
    let server = InvenioServer::start(TOKEN);
    make_artifact(&sb, "era5", "echo 1 > \"$OUT/u.csv\"\n", Some("CC-BY-4.0"));
    server.fault(ArchiveFault::TooManyRequests { retry_after: 1 });
    server.fault(ArchiveFault::UploadStatus(503));
    let out = publish(&sb, &server, "era5", &[]);
    assert_ok(&out);
    let err = stderr(&out);
    assert!(
        err.contains("answered 429 Too Many Requests") && err.contains("waiting 1 s (Retry-After)"),
        "{err}"
    );
    assert!(err.contains("503") && err.contains("trying again"), "{err}");
    assert_eq!(published(&server).len(), 1);
    assert_eq!(server.records_created(), 1);
}

#[test]
fn a_wrong_checksum_is_never_published() {
    let sb = Sandbox::new();
    let server = InvenioServer::start(TOKEN);
    make_artifact(&sb, "era5", "echo 1 > \"$OUT/u.csv\"\n", Some("CC-BY-4.0"));
    server.fault(ArchiveFault::WrongChecksum);
    let before = fs::read_to_string(sb.work.join("Artifacts.toml")).unwrap();
    let out = publish(&sb, &server, "era5", &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("checksum mismatch"),
        "{}",
        stderr(&out)
    );
    assert!(
        !server
            .requests()
            .iter()
            .any(|r| r.ends_with("/actions/publish"))
    );
    let drafts = server.records();
    assert_eq!(drafts.len(), 1);
    assert!(!drafts[0].published && !drafts[0].files.contains_key("era5.tar.gz"));
    assert_eq!(
        fs::read_to_string(sb.work.join("Artifacts.toml")).unwrap(),
        before
    );
    // The rerun uploads it again into the same draft.
    assert_ok(&publish(&sb, &server, "era5", &[]));
    assert_eq!(server.records_created(), 1);
    assert_eq!(published(&server).len(), 1);
}

#[test]
fn a_missing_or_refused_token_names_the_variable() {
    let sb = Sandbox::new();
    let server = InvenioServer::start(TOKEN);
    server.add_read_only_token("read-only-token");
    make_artifact(&sb, "era5", "echo 1 > \"$OUT/u.csv\"\n", Some("CC-BY-4.0"));
    let var = clima_artifact_vars::ARCHIVE_TOKEN;
    let out = sb
        .cli()
        .env_remove(var)
        .args(["publish", "era5", "--archive", &server.base()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains(var), "{}", stderr(&out));
    assert!(server.requests().is_empty());
    for (token, status) in [("expired-token", "401"), ("read-only-token", "403")] {
        let out = sb
            .cli()
            .env(var, token)
            .args(["publish", "era5", "--archive", &server.base()])
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains(var) && err.contains(status), "{err}");
        assert!(err.contains("Personal access tokens"), "{err}");
        assert!(!err.contains(token), "the token is printed: {err}");
    }
    assert!(server.records().is_empty());
}

#[test]
fn a_file_over_the_limit_is_refused() {
    let sb = Sandbox::new();
    let server = InvenioServer::start(TOKEN);
    make_artifact(&sb, "era5", "echo 1 > \"$OUT/u.csv\"\n", Some("CC-BY-4.0"));
    // Over InvenioRDM's 10 GB per file: refused before any request (a sparse file).
    let big = sb.work.join("big.tar.gz");
    fs::File::create(&big)
        .unwrap()
        .set_len(10_000_000_001)
        .unwrap();
    let out = publish(&sb, &server, "era5", &["--tarball", big.to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("over the limit")
            && err.contains("10000000000 bytes")
            && err.contains("per file"),
        "{err}"
    );
    assert!(server.requests().is_empty());
    // A server with a lower limit than the client knows: its answer, and nothing published.
    server.set_limits(Limits {
        max_file_size: 100,
        ..Limits::default()
    });
    let out = publish(&sb, &server, "era5", &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("File size exceeds the maximum of 100 bytes"),
        "{err}"
    );
    assert!(published(&server).is_empty());
}

#[test]
fn rejected_metadata_names_the_field_and_the_escaped_message() {
    let sb = Sandbox::new();
    let server = InvenioServer::start(TOKEN);
    make_artifact(&sb, "era5", "echo 1 > \"$OUT/u.csv\"\n", Some("CC-BY-4.0"));
    server.fault(ArchiveFault::RejectField {
        field: "metadata.creators.0.person_or_org.family_name".into(),
        message: "Family name must be filled.\u{1b}[2J".into(),
    });
    let out = publish(&sb, &server, "era5", &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(
            "`metadata.creators.0.person_or_org.family_name`: Family name must be filled.\\u{1b}[2J"
        ),
        "{err}"
    );
    assert!(!err.contains('\u{1b}'));
    assert_eq!(
        uploads(&server),
        0,
        "nothing is uploaded after rejected metadata"
    );
    // A license the archive's vocabulary does not have.
    make_artifact(
        &sb,
        "odd",
        "echo 2 > \"$OUT/u.csv\"\n",
        Some("LicenseRef-Custom"),
    );
    let out = publish(&sb, &server, "odd", &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("`metadata.rights.0.id`: Invalid value licenseref-custom."),
        "{err}"
    );
    assert!(published(&server).is_empty());
}

#[test]
fn an_entry_without_a_license_is_refused_before_any_request() {
    let sb = Sandbox::new();
    let server = InvenioServer::start(TOKEN);
    make_artifact(&sb, "era5", "echo 1 > \"$OUT/u.csv\"\n", None);
    let out = publish(&sb, &server, "era5", &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("has no `license`"), "{err}");
    assert!(server.requests().is_empty());
}

/// A plain-http archive that is not this machine would get the token unencrypted: refused
/// before any request, with the message asking for the https:// address.
#[test]
fn a_plain_http_archive_elsewhere_is_refused_before_the_token_is_sent() {
    let sb = Sandbox::new();
    make_artifact(&sb, "era5", "echo 1 > \"$OUT/u.csv\"\n", Some("CC-BY-4.0"));
    let out = sb
        .cli()
        .env(clima_artifact_vars::ARCHIVE_TOKEN, TOKEN)
        .args(["publish", "era5", "--archive", "http://archive.invalid"])
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--archive `http://archive.invalid` is plain http: the token in CLIMA_ARTIFACTS_ARCHIVE_TOKEN would cross the network unencrypted; use the archive's https:// address"),
        "{err}"
    );
    assert!(!err.contains(TOKEN), "{err}");
}

#[test]
fn draft_stops_before_publishing_and_the_next_run_publishes_that_draft() {
    let sb = Sandbox::new();
    let server = InvenioServer::start(TOKEN);
    make_artifact(&sb, "era5", "echo 1 > \"$OUT/u.csv\"\n", Some("CC-BY-4.0"));
    let before = fs::read_to_string(sb.work.join("Artifacts.toml")).unwrap();
    let out = publish(&sb, &server, "era5", &["--draft"]);
    assert_ok(&out);
    let records = server.records();
    assert_eq!(records.len(), 1);
    assert!(!records[0].published);
    assert!(
        stdout(&out).contains(&format!("{}/uploads/{}", server.base(), records[0].id)),
        "{}",
        stdout(&out)
    );
    assert_eq!(
        fs::read_to_string(sb.work.join("Artifacts.toml")).unwrap(),
        before
    );
    let out = publish(&sb, &server, "era5", &[]);
    assert_ok(&out);
    assert!(
        stderr(&out).contains("already in the draft"),
        "{}",
        stderr(&out)
    );
    assert_eq!(uploads(&server), 2, "tarball and README once each");
    assert_eq!(server.records_created(), 1);
    assert_eq!(published(&server)[0].id, records[0].id);
}

#[test]
fn changed_content_becomes_a_new_version_of_the_same_record() {
    let sb = Sandbox::new();
    let server = InvenioServer::start(TOKEN);
    make_artifact(&sb, "era5", "echo 1 > \"$OUT/u.csv\"\n", Some("CC-BY-4.0"));
    assert_ok(&publish(&sb, &server, "era5", &[]));
    let first = published(&server)[0].clone();
    make_artifact(&sb, "era5", "echo 2 > \"$OUT/u.csv\"\n", Some("CC-BY-4.0"));
    // Also without the state file: the record is found from the entry's download URL... which
    // `create` removed with the old content; the state file keeps it.
    let out = publish(&sb, &server, "era5", &[]);
    assert_ok(&out);
    assert!(stdout(&out).contains("new version"), "{}", stdout(&out));
    let all = published(&server);
    assert_eq!(all.len(), 2);
    assert_eq!(
        server.records_created(),
        1,
        "a version, not a second record"
    );
    let second = all.iter().find(|r| r.id != first.id).unwrap();
    assert_eq!(second.parent, first.parent);
    assert_eq!(second.index, 2);
    let e = entry(&sb, "era5");
    assert_eq!(e.metadata["archive-doi"], second.doi.clone().unwrap());
    assert_eq!(
        e.metadata["doi"], "10.1002/qj.3803",
        "the source's DOI is kept"
    );
    let concept = second.concept_doi.clone().unwrap();
    assert_eq!(
        first.concept_doi.as_deref(),
        Some(concept.as_str()),
        "one DOI for every version"
    );
    assert_eq!(e.metadata["archive-concept-doi"], concept);
    assert_eq!(concept, format!("10.5072/loopback.{}", first.parent));
    assert_eq!(e.downloads.len(), 1);
    assert!(e.downloads[0].url.contains(&second.id));
    let related = second.metadata["related_identifiers"].to_string();
    assert!(
        !related.contains(first.doi.as_deref().unwrap()),
        "the previous version's DOI is not a source: {related}"
    );
}

#[test]
fn a_new_version_is_found_from_the_download_url_without_the_state_file() {
    let sb = Sandbox::new();
    let server = InvenioServer::start(TOKEN);
    make_artifact(&sb, "era5", "echo 1 > \"$OUT/u.csv\"\n", Some("CC-BY-4.0"));
    assert_ok(&publish(&sb, &server, "era5", &[]));
    fs::remove_file(sb.work.join(".era5.publish-state.json")).unwrap();
    // Another tarball of the same content under a new name: a new upload, same record.
    fs::rename(sb.work.join("era5.tar.gz"), sb.work.join("era5-v1b.tar.gz")).unwrap();
    let out = publish(&sb, &server, "era5", &["--tarball", "era5-v1b.tar.gz"]);
    assert_ok(&out);
    assert_eq!(server.records_created(), 1);
    assert_eq!(published(&server).len(), 2);
}

#[test]
fn the_archive_url_goes_after_existing_mirrors_or_first() {
    let sb = Sandbox::new();
    let server = InvenioServer::start(TOKEN);
    for (name, flags) in [("after", &[][..]), ("before", &["--first"][..])] {
        let dir = sb.work.join("artifacts").join(name);
        fs::create_dir_all(&dir).unwrap();
        fs::write(
            dir.join("recipe"),
            format!("#!/bin/sh\necho {name} > \"$OUT/x\"\n"),
        )
        .unwrap();
        fs::set_permissions(dir.join("recipe"), fs::Permissions::from_mode(0o755)).unwrap();
        fs::write(dir.join("README.md"), README).unwrap();
        let mirror = format!("{name}.tar.gz");
        assert_ok(
            &sb.cli()
                .args(["create", "--recipe", &format!("artifacts/{name}")])
                .args([
                    "-m",
                    "Artifacts.toml",
                    "--license",
                    "CC0-1.0",
                    "--url",
                    &mirror,
                ])
                .output()
                .unwrap(),
        );
        let out = publish(
            &sb,
            &server,
            name,
            &[&["--creator", "Roe, Richard"][..], flags].concat(),
        );
        assert_ok(&out);
        let urls: Vec<String> = entry(&sb, name)
            .downloads
            .iter()
            .map(|d| d.url.clone())
            .collect();
        assert_eq!(urls.len(), 2, "{urls:?}");
        let archive_at = urls
            .iter()
            .position(|u| u.starts_with(&server.base()))
            .unwrap();
        assert_eq!(archive_at, if flags.is_empty() { 1 } else { 0 }, "{urls:?}");
        assert!(urls.contains(&mirror));
    }
    let creators: Vec<String> = published(&server)
        .iter()
        .map(|r| r.metadata["creators"][0]["person_or_org"]["family_name"].to_string())
        .collect();
    assert_eq!(creators, ["\"Roe\"", "\"Roe\""]);
}

#[test]
fn the_parallel_downloader_fetches_ranges_from_the_archive() {
    let sb = Sandbox::new();
    let server = InvenioServer::start(TOKEN);
    // About 3 MB of incompressible bytes: several ranged chunks.
    make_artifact(
        &sb,
        "big",
        "head -c 3000000 /dev/urandom > \"$OUT/big.bin\"\n",
        Some("CC-BY-4.0"),
    );
    assert_ok(&publish(&sb, &server, "big", &[]));
    let r = published(&server)[0].clone();
    // A link of 2 MB/s per connection: under load, one connection must not have read the whole
    // file before the others start.
    server.file_server().cap_rate(2_000_000);
    let depot = fetch_fresh(
        &sb,
        "big",
        &[
            (clima_artifact_vars::PARALLEL_MIN_SIZE, "1"),
            (clima_artifact_vars::CONNECTIONS, "4"),
        ],
    );
    let e = entry(&sb, "big");
    let installed = depot.join("artifacts").join(e.git_tree_sha1.to_hex());
    assert_eq!(
        fs::metadata(installed.join("big.bin")).unwrap().len(),
        3_000_000
    );
    let ranges = server
        .file_server()
        .ranges_of(&InvenioServer::file_path(&r.id, "big.tar.gz"));
    assert!(ranges.len() > 1, "ranges asked: {ranges:?}");
}

/// Publishes `era5`, then puts the manifest and the state file back as a run killed between
/// the archive's answer to publish and those writes leaves them: the state still names the
/// draft, the manifest has nothing. The published record.
fn published_then_rewound(
    sb: &Sandbox,
    server: &InvenioServer,
) -> clima_artifact_tests::invenio::ArchiveRecord {
    let manifest = sb.work.join("Artifacts.toml");
    let before = fs::read_to_string(&manifest).unwrap();
    assert_ok(&publish(sb, server, "era5", &[]));
    let r = published(server)[0].clone();
    fs::write(&manifest, &before).unwrap();
    let state_file = sb.work.join(".era5.publish-state.json");
    let mut state: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&state_file).unwrap()).unwrap();
    let archive = &mut state["archives"][server.base()];
    let sha256 = archive["published_sha256"].clone();
    let tree = archive["published_tree"].clone();
    *archive = serde_json::json!({"archive": server.base(), "draft": {
        "id": r.id, "sha256": sha256, "tree": tree, "parent": r.parent, "new_version": false}});
    fs::write(&state_file, state.to_string()).unwrap();
    r
}

/// Starts `publish era5` in `sb` with the draft's answer held back, and kills it once the
/// archive has made the draft: the state file never learns the draft's id.
fn killed_once_its_draft_is_made(sb: &Sandbox, server: &InvenioServer) {
    server.fault(ArchiveFault::StallCreate { secs: 20 });
    let mut run = std::process::Command::new(assert_cmd::cargo::cargo_bin("clima-artifacts"))
        .env("CLIMA_ARTIFACTS_DEPOT_PATH", &sb.depot)
        .env("CLIMA_ARTIFACTS_PROGRESS", "0")
        .env_remove("CLIMA_ARTIFACTS_OFFLINE")
        .env_remove("CLIMA_ARTIFACTS_JULIA_INTEROP")
        .env_remove("JULIA_DEPOT_PATH")
        .env(clima_artifact_vars::ARCHIVE_TOKEN, TOKEN)
        .args(["publish", "era5", "--archive", &server.base()])
        .current_dir(&sb.work)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let before = server.records().len();
    while server.records().len() == before {
        assert!(
            run.try_wait().unwrap().is_none(),
            "publish ended before the draft was made"
        );
        assert!(
            started.elapsed() < std::time::Duration::from_secs(120),
            "no draft was made"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // The draft is made, its answer held back: killed now, the run never saw its id.
    run.kill().unwrap();
    run.wait().unwrap();
}

#[test]
fn a_run_stopped_right_after_publishing_records_that_record_on_rerun() {
    let sb = Sandbox::new();
    let server = InvenioServer::start(TOKEN);
    make_artifact(&sb, "era5", "echo 1 > \"$OUT/u.csv\"\n", Some("CC-BY-4.0"));
    let r = published_then_rewound(&sb, &server);
    let out = publish(&sb, &server, "era5", &["--json"]);
    assert_ok(&out);
    let result = common::json(&out);
    assert_eq!(result["doi"], r.doi.clone().unwrap());
    assert_eq!(result["record"], r.id);
    assert!(
        stderr(&out).is_empty(),
        "--json prints no progress: {}",
        stderr(&out)
    );
    assert_eq!(server.records().len(), 1, "no second record");
    assert_eq!(entry(&sb, "era5").metadata["archive-doi"], r.doi.unwrap());
    assert_eq!(entry(&sb, "era5").metadata["doi"], "10.1002/qj.3803");
}

/// As above, but the artifact changed before the rerun: the record the earlier run published
/// is the one the new content continues, as its next version (not a second record with a
/// concept DOI of its own).
#[test]
fn a_changed_artifact_after_a_run_stopped_right_after_publishing_is_its_next_version() {
    let sb = Sandbox::new();
    let server = InvenioServer::start(TOKEN);
    make_artifact(&sb, "era5", "echo 1 > \"$OUT/u.csv\"\n", Some("CC-BY-4.0"));
    let r = published_then_rewound(&sb, &server);
    make_artifact(&sb, "era5", "echo 2 > \"$OUT/u.csv\"\n", Some("CC-BY-4.0"));
    let out = publish(&sb, &server, "era5", &[]);
    assert_ok(&out);
    let all = published(&server);
    let ids: Vec<(&str, &str)> = all
        .iter()
        .map(|x| (x.id.as_str(), x.parent.as_str()))
        .collect();
    assert_eq!(all.len(), 2, "records and parents: {ids:?}");
    let next = all.iter().find(|x| x.id != r.id).unwrap();
    assert_eq!(
        next.parent, r.parent,
        "a second concept record was made: {ids:?}"
    );
    assert_eq!(next.index, 2);
}

/// Killed while the archive's answer to `POST /api/records` was on its way (the draft made on
/// the archive, the state file not naming it yet): the rerun finds that draft among the user's
/// records and continues it, so the archive keeps one record and no empty draft beside it.
#[test]
fn a_run_killed_before_it_saved_a_new_draft_continues_that_draft_on_rerun() {
    let sb = Sandbox::new();
    let server = InvenioServer::start(TOKEN);
    make_artifact(&sb, "era5", "echo 1 > \"$OUT/u.csv\"\n", Some("CC-BY-4.0"));
    killed_once_its_draft_is_made(&sb, &server);
    let state_file = sb.work.join(".era5.publish-state.json");
    let state: serde_json::Value = fs::read_to_string(&state_file)
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap_or_default();
    assert!(
        state["archives"][server.base()]["draft"].is_null(),
        "the killed run recorded the draft: {state}"
    );
    assert_eq!(server.records().len(), 1);
    let out = publish(&sb, &server, "era5", &[]);
    assert_ok(&out);
    assert!(
        stderr(&out).contains("which an earlier run created just before it stopped"),
        "{}",
        stderr(&out)
    );
    assert_eq!(server.records_created(), 1, "no second draft");
    assert_eq!(server.records().len(), 1);
    assert_eq!(published(&server).len(), 1);
    let state: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&state_file).unwrap()).unwrap();
    let archive = &state["archives"][server.base()];
    assert!(archive.get("creating").is_none(), "{state}");
    assert_eq!(archive["record"], published(&server)[0].id);
}

/// A run killed before it saved its new draft, then another checkout opening a draft of the
/// same name the same day (same title and date, newer, with its files): the rerun continues its
/// own empty draft and leaves the other one as it was, unpublished and with its files.
#[test]
fn a_rerun_does_not_take_over_another_checkouts_draft_of_the_same_name() {
    let sb = Sandbox::new();
    let other = Sandbox::new();
    let server = InvenioServer::start(TOKEN);
    make_artifact(&sb, "era5", "echo 1 > \"$OUT/u.csv\"\n", Some("CC-BY-4.0"));
    make_artifact(
        &other,
        "era5",
        "echo 2 > \"$OUT/u.csv\"\n",
        Some("CC-BY-4.0"),
    );
    killed_once_its_draft_is_made(&sb, &server);
    let ours = server.records()[0].id.clone();
    // The other checkout's draft: newer than ours, same title and date, with its files.
    assert_ok(&publish(&other, &server, "era5", &["--draft"]));
    let theirs: Vec<_> = server
        .records()
        .into_iter()
        .filter(|r| r.id != ours)
        .collect();
    assert_eq!(theirs.len(), 1);
    let theirs = theirs[0].clone();
    assert!(!theirs.published && !theirs.files.is_empty());
    assert_eq!(
        theirs.metadata["title"],
        server.records()[0].metadata["title"]
    );

    let out = publish(&sb, &server, "era5", &[]);
    assert_ok(&out);
    assert!(
        stderr(&out).contains(&format!(
            "continuing draft {ours}, which an earlier run created"
        )),
        "{}",
        stderr(&out)
    );
    let after: Vec<_> = server
        .records()
        .into_iter()
        .filter(|r| r.id == theirs.id)
        .collect();
    assert_eq!(after.len(), 1);
    assert!(
        !after[0].published,
        "the other checkout's draft was published"
    );
    assert_eq!(
        after[0].files.keys().collect::<Vec<_>>(),
        theirs.files.keys().collect::<Vec<_>>()
    );
    assert_eq!(published(&server).len(), 1);
    assert_eq!(published(&server)[0].id, ours);
}

/// Two runs (two checkouts) killed before they saved their drafts of the same name the same
/// day: which empty draft is whose cannot be told, so the rerun takes over neither, names
/// both, and makes its own.
#[test]
fn a_rerun_that_cannot_tell_which_draft_is_its_own_names_them_and_takes_none() {
    let sb = Sandbox::new();
    let other = Sandbox::new();
    let server = InvenioServer::start(TOKEN);
    make_artifact(&sb, "era5", "echo 1 > \"$OUT/u.csv\"\n", Some("CC-BY-4.0"));
    make_artifact(
        &other,
        "era5",
        "echo 2 > \"$OUT/u.csv\"\n",
        Some("CC-BY-4.0"),
    );
    killed_once_its_draft_is_made(&sb, &server);
    killed_once_its_draft_is_made(&other, &server);
    let drafts: Vec<String> = server.records().into_iter().map(|r| r.id).collect();
    assert_eq!(drafts.len(), 2);
    let out = publish(&sb, &server, "era5", &[]);
    assert_ok(&out);
    let err = stderr(&out);
    let named = err
        .lines()
        .find(|l| l.contains("all look like the one an earlier run asked for"))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(
        drafts.iter().all(|id| named.contains(id.as_str()))
            && named.contains("none is continued and a new draft is made"),
        "{named}"
    );
    // Both are left as they were: empty, unpublished; a third record is the one published.
    for r in server
        .records()
        .into_iter()
        .filter(|r| drafts.contains(&r.id))
    {
        assert!(!r.published && r.files.is_empty(), "{} was used", r.id);
    }
    let published = published(&server);
    assert_eq!(published.len(), 1);
    assert!(!drafts.contains(&published[0].id));
}

/// The answer to `POST /api/records` lost on the way (the draft made, the connection closed
/// without an answer): the next try finds that draft among the user's records instead of
/// making a second one.
#[test]
fn a_lost_answer_to_a_new_draft_does_not_make_a_second_draft() {
    let sb = Sandbox::new();
    let server = InvenioServer::start(TOKEN);
    make_artifact(&sb, "era5", "echo 1 > \"$OUT/u.csv\"\n", Some("CC-BY-4.0"));
    server.fault(ArchiveFault::StallCreate { secs: 0 });
    let out = publish(&sb, &server, "era5", &[]);
    assert_ok(&out);
    let err = stderr(&out);
    assert!(
        err.contains("trying again") && err.contains("before its answer was lost"),
        "{err}"
    );
    assert_eq!(server.records_created(), 1, "no second draft");
    assert_eq!(server.records().len(), 1);
    assert_eq!(published(&server).len(), 1);
}

/// The manifest path a state file names: the sandbox's, symlinks resolved.
fn manifest_of(sb: &Sandbox) -> String {
    fs::canonicalize(sb.work.join("Artifacts.toml"))
        .unwrap()
        .display()
        .to_string()
}

/// A state file copied from another checkout (the same artifact name, other content, a draft of
/// its own on the archive) is refused before anything is asked of the archive: the other
/// checkout's draft keeps its files, unpublished. Removed as the message says, the run makes a
/// record of its own.
#[test]
fn a_state_file_copied_from_another_checkout_is_refused_and_its_draft_left_alone() {
    let sb = Sandbox::new();
    let other = Sandbox::new();
    let server = InvenioServer::start(TOKEN);
    make_artifact(&sb, "era5", "echo 1 > \"$OUT/u.csv\"\n", Some("CC-BY-4.0"));
    make_artifact(
        &other,
        "era5",
        "echo 2 > \"$OUT/u.csv\"\n",
        Some("CC-BY-4.0"),
    );
    assert_ok(&publish(&other, &server, "era5", &["--draft"]));
    let theirs = server.records()[0].clone();
    let state_file = sb.work.join(".era5.publish-state.json");
    fs::copy(other.work.join(".era5.publish-state.json"), &state_file).unwrap();
    let before = fs::read_to_string(sb.work.join("Artifacts.toml")).unwrap();
    let requests = server.requests().len();

    let out = publish(&sb, &server, "era5", &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "it was written for the manifest `{}`, not `{}`",
            manifest_of(&other),
            manifest_of(&sb)
        )),
        "{err}"
    );
    assert!(
        err.contains("nothing was changed on the archive or in the manifest")
            && err.contains(&format!("(`rm {}`)", state_file.display())),
        "{err}"
    );
    assert_eq!(server.requests().len(), requests, "the archive was asked");
    let now = server.records();
    assert_eq!(now.len(), 1, "{now:?}");
    assert!(
        !now[0].published,
        "the other checkout's draft was published"
    );
    let md5s = |r: &clima_artifact_tests::invenio::ArchiveRecord| {
        r.files
            .values()
            .map(|f| (f.key.clone(), f.md5.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(md5s(&now[0]), md5s(&theirs), "its files were replaced");
    assert_eq!(
        fs::read_to_string(sb.work.join("Artifacts.toml")).unwrap(),
        before
    );

    // As the message says: without it, a record of its own.
    fs::remove_file(&state_file).unwrap();
    assert_ok(&publish(&sb, &server, "era5", &[]));
    let ours = published(&server);
    assert_eq!(ours.len(), 1);
    assert_ne!(ours[0].id, theirs.id);
    let still = server
        .records()
        .into_iter()
        .find(|r| r.id == theirs.id)
        .unwrap();
    assert!(!still.published);
    assert_eq!(md5s(&still), md5s(&theirs));
}

/// A state file edited to name another artifact's record, or another artifact's state file put
/// in its place: no version is added to that record; the run stops saying what differs. With
/// its own state file back, the next version goes to its own record.
#[test]
fn an_edited_state_file_never_adds_a_version_to_another_artifacts_record() {
    let sb = Sandbox::new();
    let server = InvenioServer::start(TOKEN);
    make_artifact(&sb, "era5", "echo 1 > \"$OUT/u.csv\"\n", Some("CC-BY-4.0"));
    make_artifact(&sb, "sst", "echo 3 > \"$OUT/t.csv\"\n", Some("CC-BY-4.0"));
    assert_ok(&publish(&sb, &server, "era5", &[]));
    assert_ok(&publish(&sb, &server, "sst", &[]));
    let by_key = |key: &str| {
        published(&server)
            .into_iter()
            .find(|r| r.files.contains_key(key))
            .unwrap()
    };
    let (era5, sst) = (by_key("era5.tar.gz"), by_key("sst.tar.gz"));
    make_artifact(&sb, "era5", "echo 2 > \"$OUT/u.csv\"\n", Some("CC-BY-4.0"));
    let state_file = sb.work.join(".era5.publish-state.json");
    let own = fs::read_to_string(&state_file).unwrap();
    let versions_of = |parent: &str| {
        server
            .records()
            .iter()
            .filter(|r| r.parent == parent)
            .count()
    };

    // The record edited to sst's.
    let mut state: serde_json::Value = serde_json::from_str(&own).unwrap();
    state["archives"][server.base()]["record"] = sst.id.clone().into();
    fs::write(&state_file, state.to_string()).unwrap();
    let out = publish(&sb, &server, "era5", &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "record {} on {}: its parent is `{}` on the archive, the state file says `{}`",
            sst.id,
            server.base(),
            sst.parent,
            era5.parent
        )),
        "{err}"
    );
    assert_eq!(versions_of(&sst.parent), 1, "a version was added to sst");
    assert_eq!(server.records().len(), 2, "a draft was made");

    // sst's state file in era5's place.
    fs::copy(sb.work.join(".sst.publish-state.json"), &state_file).unwrap();
    let out = publish(&sb, &server, "era5", &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("it is the publish state of artifact `sst`, not of `era5`"),
        "{err}"
    );
    assert_eq!(versions_of(&sst.parent), 1, "a version was added to sst");

    // A record that is not an id, which would go into a request's path with the token.
    let mut state: serde_json::Value = serde_json::from_str(&own).unwrap();
    state["archives"][server.base()]["record"] = "../../user/records".into();
    fs::write(&state_file, state.to_string()).unwrap();
    let requests = server.requests().len();
    let out = publish(&sb, &server, "era5", &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("has `../../user/records`, which is not a record id or file name"),
        "{err}"
    );
    assert_eq!(server.requests().len(), requests, "the archive was asked");

    // Its own state file back: the next version of its own record.
    fs::write(&state_file, &own).unwrap();
    assert_ok(&publish(&sb, &server, "era5", &[]));
    assert_eq!(versions_of(&era5.parent), 2);
    assert_eq!(versions_of(&sst.parent), 1);
}

/// Links in the archive's answers are never recorded: a publish answered with the draft's
/// links (`/draft/files`, which a real archive answers `404` once published) or with links to
/// another host and scheme. The download recorded is the published record's own file on the
/// archive's origin, and a fresh depot installs from it.
#[test]
fn the_download_recorded_is_the_published_file_whatever_links_the_archive_answers() {
    let sb = Sandbox::new();
    let server = InvenioServer::start(TOKEN);
    let faults = [
        ("era5", ArchiveFault::DraftLinksInPublishAnswer),
        (
            "sst",
            ArchiveFault::ForeignLinksInPublishAnswer {
                base: "https://files.invalid".into(),
            },
        ),
    ];
    for (name, fault) in faults {
        make_artifact(
            &sb,
            name,
            &format!("echo {name} > \"$OUT/{name}.csv\"\n"),
            Some("CC-BY-4.0"),
        );
        server.fault(fault);
        assert_ok(&publish(&sb, &server, name, &[]));
        let key = format!("{name}.tar.gz");
        let r = published(&server)
            .into_iter()
            .find(|r| r.files.contains_key(&key))
            .unwrap();
        let url = format!("{}/api/records/{}/files/{key}/content", server.base(), r.id);
        let e = entry(&sb, name);
        let urls: Vec<&str> = e.downloads.iter().map(|d| d.url.as_str()).collect();
        assert_eq!(urls, [url.as_str()], "{name}");
        let depot = fetch_fresh(&sb, name, &[]);
        assert!(
            depot
                .join("artifacts")
                .join(e.git_tree_sha1.to_hex())
                .join(format!("{name}.csv"))
                .is_file()
        );
    }
}

/// A record id with escape sequences and a forged log line in it: refused as soon as it is
/// answered, never put into a request's path, never printed raw.
#[test]
fn a_record_id_that_is_not_one_is_refused_and_printed_escaped() {
    let sb = Sandbox::new();
    let server = InvenioServer::start(TOKEN);
    make_artifact(&sb, "era5", "echo 1 > \"$OUT/u.csv\"\n", Some("CC-BY-4.0"));
    let before = fs::read_to_string(sb.work.join("Artifacts.toml")).unwrap();
    server.fault(ArchiveFault::RecordId(
        "x\u{1b}]0;owned\u{7}\nclima-artifacts: published era5".into(),
    ));
    let out = publish(&sb, &server, "era5", &[]);
    let (err, text) = (stderr(&out), stdout(&out));
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("with the record id `x\\u{1b}]0;owned\\u{7}\\nclima-artifacts: published era5`, which is not one"),
        "{err}"
    );
    assert!(!err.contains('\u{1b}') && !text.contains('\u{1b}'), "{err}");
    assert!(
        !err.lines()
            .any(|l| l.starts_with("clima-artifacts: published")),
        "{err}"
    );
    assert!(
        server
            .requests()
            .iter()
            .all(|r| !r.contains("owned") && !r.contains('\u{1b}')),
        "{:?}",
        server.requests()
    );
    assert_eq!(
        fs::read_to_string(sb.work.join("Artifacts.toml")).unwrap(),
        before
    );
}

/// `publish NAME` with each exchange bounded to `secs` seconds and 2 tries, which must fail
/// (exit 1) within 60 s (it is killed then, and the test fails); its stderr.
fn publish_past_the_bound(sb: &Sandbox, server: &InvenioServer, name: &str, secs: &str) -> String {
    let out = sb
        .cli()
        .env(clima_artifact_vars::ARCHIVE_TOKEN, TOKEN)
        .env(clima_artifact_vars::ARCHIVE_TIMEOUT, secs)
        .env(clima_artifact_vars::RETRIES, "2")
        .args(["publish", name, "--archive", &server.base()])
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(
        out.status.code(),
        Some(1),
        "still running after 60 s: {err}"
    );
    err
}

/// An archive answering one byte every 2 s: each exchange is bounded in total time
/// (`CLIMA_ARTIFACTS_ARCHIVE_TIMEOUT`), tried again, and the run fails saying so, instead of
/// waiting for the whole answer.
#[test]
fn a_trickling_answer_is_cut_at_the_time_bound_and_named() {
    let sb = Sandbox::new();
    let server = InvenioServer::start(TOKEN);
    make_artifact(&sb, "era5", "echo 1 > \"$OUT/u.csv\"\n", Some("CC-BY-4.0"));
    for _ in 0..10 {
        server.fault(ArchiveFault::TrickleAnswer {
            every: std::time::Duration::from_secs(2),
        });
    }
    let err = publish_past_the_bound(&sb, &server, "era5", "1");
    assert!(
        err.contains(
            "no complete answer within 1 s (CLIMA_ARTIFACTS_ARCHIVE_TIMEOUT; raise it on a slow \
             link) (after 2 tries)"
        ),
        "{err}"
    );
    assert!(published(&server).is_empty());
}

/// An archive that never reads an upload (the connection open, nothing taken): the upload is
/// bounded in time too, tried again, and the run fails saying so.
#[test]
fn an_upload_the_archive_never_reads_is_cut_and_named() {
    let sb = Sandbox::new();
    let server = InvenioServer::start(TOKEN);
    // More than the socket buffers of both ends take.
    make_artifact(
        &sb,
        "big",
        "head -c 24000000 /dev/urandom > \"$OUT/big.bin\"\n",
        Some("CC-BY-4.0"),
    );
    for _ in 0..2 {
        server.fault(ArchiveFault::NeverReadUpload { secs: 120 });
    }
    let err = publish_past_the_bound(&sb, &server, "big", "2");
    assert!(
        err.contains("uploading `big.tar.gz`")
            && err.contains("CLIMA_ARTIFACTS_ARCHIVE_TIMEOUT")
            && err.contains("(after 2 tries)"),
        "{err}"
    );
    assert!(published(&server).is_empty());
}

/// A record whose description would only be the placeholder (no `description`, no recipe
/// README): a warning before anything is published, on stderr and in `--json`.
#[test]
fn a_record_without_a_description_is_warned_about() {
    let sb = Sandbox::new();
    let server = InvenioServer::start(TOKEN);
    let data = sb.work.join("data");
    fs::create_dir_all(&data).unwrap();
    fs::write(data.join("u.csv"), "1\n").unwrap();
    let create = |extra: &[&str]| {
        assert_ok(
            &sb.cli()
                .args(["create", "data", "--name", "bare", "-m", "Artifacts.toml"])
                .args(["--license", "CC-BY-4.0", "--maintainer", "Doe, Jane"])
                .args(extra)
                .output()
                .unwrap(),
        );
    };
    create(&[]);
    let out = publish(&sb, &server, "bare", &["--draft"]);
    assert_ok(&out);
    let err = stderr(&out);
    assert!(
        err.contains(
            "clima-artifacts: warning: artifact `bare` has no `description` and no recipe README \
             with a Contents paragraph"
        ),
        "{err}"
    );
    let out = publish(&sb, &server, "bare", &["--draft", "--json"]);
    assert_ok(&out);
    let warnings = common::json(&out)["warnings"].clone();
    assert!(
        warnings[0]
            .as_str()
            .is_some_and(|w| w.contains("has no `description`")),
        "{warnings}"
    );
    // With a description: no warning.
    create(&["--description", "One CSV of u"]);
    let out = publish(&sb, &server, "bare", &["--draft"]);
    assert_ok(&out);
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
}

/// `create` without a download suggests publishing to an archive, with a command that runs as
/// printed (here with the loopback archive's address in place of CaltechDATA's).
#[test]
fn create_suggests_publish_to_an_archive_with_a_command_that_runs() {
    let sb = Sandbox::new();
    let server = InvenioServer::start(TOKEN);
    let data = sb.work.join("data");
    fs::create_dir_all(&data).unwrap();
    fs::write(data.join("u.csv"), "1\n").unwrap();
    fs::create_dir_all(sb.work.join("model")).unwrap();
    fs::create_dir_all(sb.work.join("out")).unwrap();
    let out = sb
        .cli()
        .args([
            "create",
            "data",
            "--name",
            "era5",
            "-m",
            "model/Artifacts.toml",
        ])
        .args(["--license", "CC-BY-4.0", "--maintainer", "Doe, Jane"])
        .args(["--description", "u", "--tarball-out", "out/era5.tar.gz"])
        .output()
        .unwrap();
    assert_ok(&out);
    let text = stdout(&out);
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("clima-artifacts publish era5 --archive https://data.caltech.edu"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(text.contains(clima_artifact_vars::ARCHIVE_TOKEN), "{text}");
    let args: Vec<String> = line
        .split_whitespace()
        .skip(1)
        .map(|w| w.replace("https://data.caltech.edu", &server.base()))
        .collect();
    let out = sb
        .cli()
        .env(clima_artifact_vars::ARCHIVE_TOKEN, TOKEN)
        .args(&args)
        .output()
        .unwrap();
    assert_ok(&out);
    let drafts = server.records();
    assert_eq!(drafts.len(), 1);
    assert!(!drafts[0].published && drafts[0].files.contains_key("era5.tar.gz"));
}

/// Each entry's member bytes in the seekable tarball `bytes`, by path (read by its index).
fn members_of(bytes: &[u8]) -> std::collections::BTreeMap<Vec<u8>, Vec<u8>> {
    use clima_artifact_runtime::extract::seekable::{self, Index, IndexLimits};
    let limits = IndexLimits::default();
    let mut file = std::io::Cursor::new(bytes);
    let (_, doc) = seekable::read_index(&mut file, bytes.len() as u64, &limits)
        .unwrap()
        .expect("a seekable tarball");
    let index = Index::decode(&doc, &limits).unwrap();
    index
        .entries
        .iter()
        .map(|e| {
            let range = e.offset as usize..(e.offset + e.length) as usize;
            (e.path.clone(), bytes[range].to_vec())
        })
        .collect()
}

/// Issue 49, item 4: a new version published to the archive (`create --recipe`, then
/// `publish`) with one file changed, one added and one removed keeps the members of every
/// other file byte for byte, by the indexes of the two tarballs the archive received.
#[test]
fn a_published_new_version_keeps_the_members_of_unchanged_files() {
    let sb = Sandbox::new();
    let server = InvenioServer::start(TOKEN);
    let files = "for i in 1 2 3 4 5; do seq 1 $((i * 700)) > \"$OUT/f$i.csv\"; done\n";
    let v1 = format!("{files}echo 1 > \"$OUT/u.csv\"\necho old > \"$OUT/gone.txt\"\n");
    make_artifact(&sb, "era5", &v1, Some("CC-BY-4.0"));
    assert_ok(&publish(&sb, &server, "era5", &[]));
    let v2 = format!("{files}echo 2 > \"$OUT/u.csv\"\necho new > \"$OUT/added.txt\"\n");
    make_artifact(&sb, "era5", &v2, Some("CC-BY-4.0"));
    assert_ok(&publish(&sb, &server, "era5", &[]));
    let mut all = published(&server);
    assert_eq!(all.len(), 2);
    all.sort_by_key(|r| r.index);
    let tarball = |r: &clima_artifact_tests::invenio::ArchiveRecord| {
        members_of(&r.files["era5.tar.gz"].bytes)
    };
    let (old, new) = (tarball(&all[0]), tarball(&all[1]));
    let unchanged: Vec<String> = (1..=5).map(|i| format!("f{i}.csv")).collect();
    for path in &unchanged {
        let key = path.as_bytes();
        assert!(
            old.contains_key(key) && old.get(key) == new.get(key),
            "the members of `{path}` changed"
        );
    }
    let (changed, added, removed) = (b"u.csv".as_slice(), b"added.txt".as_slice(), b"gone.txt");
    assert_ne!(old.get(changed), new.get(changed));
    assert!(new.contains_key(added) && !old.contains_key(added));
    assert!(old.contains_key(removed.as_slice()) && !new.contains_key(removed.as_slice()));
    assert_eq!(
        new.len(),
        old.len(),
        "one added, one removed: {:?}",
        new.keys()
            .map(|k| String::from_utf8_lossy(k))
            .collect::<Vec<_>>()
    );
}
