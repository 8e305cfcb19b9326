//! `publish`: upload a tarball made by `create` to storage, then record its download URL and
//! sha256 in the manifest entry (format-preserving edit, as `create` does).
//!
//! Before uploading, the tarball is unpacked into a temporary folder (with the runtime's safe
//! extractor) to learn its git tree hash; if the manifest already has an entry for the name with
//! another hash, nothing is uploaded (the tarball does not hold that artifact).

use std::path::Path;

use clima_artifact_fs::printable;
use clima_artifact_runtime::extract::{ExtractLimits, extract_archive};
use clima_artifact_sync::{open_storage, sha256_file};

use crate::archive;
use crate::args::PublishArgs;
use crate::cmd::{self, invalid_name};
use crate::error::{CliError, CliResult, io_error};
use crate::manifest_edit::{EntryUpdate, NewDownload, upsert_entry};

/// Entry point of `publish`.
pub fn run(args: PublishArgs) -> CliResult {
    if args.archive.is_some() {
        return run_archive(args);
    }
    let name = args.name.clone().unwrap_or_default();
    let manifest = args.manifest.clone().unwrap_or_default();
    let to = args.to.clone().unwrap_or_default();
    let tarball = args.target.clone();
    run_storage(args, &name, &manifest, &to, &tarball)
}

/// `publish NAME --archive URL`: the work is [`archive::publish`]; progress lines go to stderr.
fn run_archive(args: PublishArgs) -> CliResult {
    let name = args.target.to_string_lossy().into_owned();
    let manifest = cmd::load_manifest(args.manifest.as_deref())?.path;
    let request = archive::PublishRequest {
        name,
        manifest,
        archive: args.archive.unwrap_or_default(),
        token: std::env::var(archive::TOKEN_VAR).ok(),
        tarball: args.tarball,
        draft_only: args.draft,
        first: args.first,
        creators: args.creator,
        timeout: archive_timeout()?,
    };
    let quiet = args.json;
    // As downloads: progress lines only where progress is on (CLIMA_ARTIFACTS_PROGRESS), notices
    // (resumes, waits, retries, checksums) always, unless the output is JSON.
    let progress = crate::depots::config()?.progress;
    let notify = |kind: archive::Line, line: &str| {
        if !quiet && (progress || kind == archive::Line::Notice) {
            eprintln!("clima-artifacts: {line}");
        }
    };
    let done = archive::publish(&request, &notify)?;
    if args.json {
        return cmd::print_json(&done);
    }
    // The record id and URLs were checked (an id, the archive's origin); the DOIs too. Escaped
    // all the same: they came from the archive.
    let shown = |v: Option<&str>| printable(v.unwrap_or("(none)")).into_owned();
    if done.draft {
        println!(
            "draft {} of `{}` is ready for review (not published): {}\n  run the same command \
             without --draft to publish it",
            shown(Some(&done.record)),
            done.name,
            shown(done.draft_url.as_deref())
        );
        return Ok(());
    }
    let what = if done.unchanged {
        "already published"
    } else if done.new_version {
        "published a new version of"
    } else {
        "published"
    };
    println!(
        "{what} `{}` ({} bytes) on {}\n  record = {}\n  archive-doi = {} (this version)\n  \
         archive-concept-doi = {} (all versions)\n  url = {}\n  sha256 = {}\n  recorded in {}",
        done.name,
        done.bytes,
        done.archive,
        shown(Some(&done.record)),
        shown(done.doi.as_deref()),
        shown(done.concept_doi.as_deref()),
        shown(done.url.as_deref()),
        done.sha256,
        done.manifest.display()
    );
    Ok(())
}

/// [`archive::TIMEOUT_VAR`], when set: seconds.
fn archive_timeout() -> CliResult<Option<std::time::Duration>> {
    let Ok(value) = std::env::var(archive::TIMEOUT_VAR) else {
        return Ok(None);
    };
    clima_artifact_vars::parse_seconds(&value)
        .map(Some)
        .ok_or_else(|| {
            CliError::usage(format!(
                "{}=`{}`: {}",
                archive::TIMEOUT_VAR,
                printable(&value),
                clima_artifact_vars::SECONDS_EXPECTED
            ))
        })
}

/// `publish TARBALL --to STORAGE_URL`.
// Long: the steps of `publish` in order (check, upload, verify, record), each a few lines.
fn run_storage(
    args: PublishArgs,
    name: &str,
    manifest: &Path,
    to: &str,
    tarball: &Path,
) -> CliResult {
    if let Some(why) = invalid_name(name) {
        return Err(CliError::usage(format!("artifact name `{}`: {why}", name)));
    }
    let meta = std::fs::metadata(tarball).map_err(|e| {
        CliError::usage(format!(
            "tarball `{}` cannot be used: {e}",
            tarball.display()
        ))
    })?;
    if !meta.is_file() {
        return Err(CliError::usage(format!(
            "tarball `{}` is not a file; pass the .tar.gz written by `create`",
            tarball.display()
        )));
    }
    let tree_hash = tree_hash_of(tarball)?;
    let index_sha256 = crate::tarball::index_sha256_of(tarball, &tree_hash)?.map(|h| h.to_hex());
    let tree_hash = tree_hash.to_hex();
    let key = match &args.key {
        Some(k) => k.clone(),
        None if args.by_hash => format!("artifact/{tree_hash}"),
        None => tarball
            .file_name()
            .and_then(|n| n.to_str())
            .map(str::to_owned)
            .ok_or_else(|| {
                CliError::usage("the tarball's file name is not UTF-8; pass --key NAME")
            })?,
    };
    clima_artifact_sync::check_key(&key).map_err(|e| CliError::usage(e.to_string()))?;

    let text = cmd::read_or_empty(manifest)?;
    if let Some(existing) = existing_hash(&text, name)
        && existing != tree_hash
    {
        return Err(CliError::usage(format!(
            "`{}` holds artifact content {tree_hash}, but `{}` says `{}` is {existing}; \
                 nothing was uploaded. Publish the tarball `create` wrote for `{}`, or run \
                 `create` again",
            tarball.display(),
            manifest.display(),
            name,
            name
        )));
    }
    let storage = open_storage(to).map_err(|e| CliError::usage(e.to_string()))?;
    let url = match &args.public_url {
        Some(u) if u.ends_with('/') => format!("{u}{key}"),
        Some(u) => u.clone(),
        None => storage.download_url(&key).ok_or_else(|| {
            CliError::usage(format!(
                "`{}` gives no public download URL for its objects; pass --public-url with the \
                 https:// URL the uploaded tarball will be downloadable from (ending in `/` to \
                 append `{key}`)",
                storage.url()
            ))
        })?,
    };
    let sha256 = sha256_file(tarball).map_err(|e| CliError::failure(e.to_string()))?;
    let bar = crate::progress::spinner(&format!("uploading {key} to {}", storage.url()));
    let sent = storage.put_file(&key, tarball);
    bar.finish_and_clear();
    let sent = sent.map_err(|e| CliError::failure(e.to_string()))?;

    let update = EntryUpdate {
        name: name.to_owned(),
        tree_hash: tree_hash.clone(),
        tree_hash_sha256: None,
        lazy: false,
        metadata: Vec::new(),
        download: Some(NewDownload {
            url: url.clone(),
            sha256: sha256.clone(),
            size: sent,
            index_sha256: index_sha256.clone(),
        }),
        remove_downloads: false,
        replace_downloads: false,
        download_last: false,
    };
    let (new_text, outcome) = upsert_entry(&text, manifest, &update)?;
    cmd::write_atomically(manifest, &new_text)?;
    if args.json {
        return cmd::print_json(&serde_json::json!({
            "name": name,
            "uploaded_to": format!("{}/{key}", storage.url().trim_end_matches('/')),
            "bytes": sent,
            "url": url,
            "sha256": sha256,
            "index_sha256": index_sha256,
            "git_tree_sha1": tree_hash,
            "manifest": manifest,
            "edit": outcome,
        }));
    }
    println!(
        "published `{}` ({sent} bytes) to {}/{key}\n  url = {url}\n  sha256 = {sha256}\n  recorded in {}",
        name,
        storage.url().trim_end_matches('/'),
        manifest.display()
    );
    Ok(())
}

/// The git tree hash of the tarball's content (unpacked into a temporary folder).
fn tree_hash_of(tarball: &Path) -> CliResult<clima_artifact_manifest::GitTreeSha1> {
    let tmp = tempfile::tempdir()
        .map_err(|e| io_error("create a temporary folder in", &std::env::temp_dir(), &e))?;
    let dest = tmp.path().join("content");
    std::fs::create_dir(&dest).map_err(|e| io_error("create", &dest, &e))?;
    let file = std::fs::File::open(tarball).map_err(|e| io_error("open", tarball, &e))?;
    let extracted = extract_archive(
        std::io::BufReader::new(file),
        &dest,
        &ExtractLimits {
            max_unpacked_bytes: 1 << 40,
            ..ExtractLimits::default()
        },
    )
    .map_err(|e| {
        CliError::usage(format!(
            "`{}` is not a usable artifact tarball: {e}; pass the .tar.gz written by `create`",
            tarball.display()
        ))
    })?;
    Ok(extracted.tree_hash)
}

/// The `git-tree-sha1` of `[name]` in the manifest text, if present.
fn existing_hash(text: &str, name: &str) -> Option<String> {
    let doc: toml_edit::DocumentMut = text.parse().ok()?;
    doc.get(name)?
        .get("git-tree-sha1")?
        .as_str()
        .map(str::to_ascii_lowercase)
}
