//! `publish`: upload a tarball made by `create` to storage, then record its download URL and
//! sha256 in the manifest entry (format-preserving edit, as `create` does).
//!
//! Before uploading, the tarball is unpacked into a temporary folder (with the runtime's safe
//! extractor) to learn its git tree hash; if the manifest already has an entry for the name with
//! another hash, nothing is uploaded (the tarball does not hold that artifact).

use std::path::Path;

use clima_artifact_runtime::extract::{ExtractLimits, extract_archive};
use clima_artifact_sync::{open_storage, sha256_file};

use crate::args::PublishArgs;
use crate::cmd::{self, invalid_name};
use crate::error::{CliError, CliResult, io_error};
use crate::manifest_edit::{EntryUpdate, NewDownload, upsert_entry};

/// Entry point of `publish`.
// Long: the steps of `publish` in order (check, upload, verify, record), each a few lines.
pub fn run(args: PublishArgs) -> CliResult {
    if let Some(why) = invalid_name(&args.name) {
        return Err(CliError::usage(format!(
            "artifact name `{}`: {why}",
            args.name
        )));
    }
    let meta = std::fs::metadata(&args.tarball).map_err(|e| {
        CliError::usage(format!(
            "tarball `{}` cannot be used: {e}",
            args.tarball.display()
        ))
    })?;
    if !meta.is_file() {
        return Err(CliError::usage(format!(
            "tarball `{}` is not a file; pass the .tar.gz written by `create`",
            args.tarball.display()
        )));
    }
    let tree_hash = tree_hash_of(&args.tarball)?;
    let key = match &args.key {
        Some(k) => k.clone(),
        None if args.by_hash => format!("artifact/{tree_hash}"),
        None => args
            .tarball
            .file_name()
            .and_then(|n| n.to_str())
            .map(str::to_owned)
            .ok_or_else(|| {
                CliError::usage("the tarball's file name is not UTF-8; pass --key NAME")
            })?,
    };
    clima_artifact_sync::check_key(&key).map_err(|e| CliError::usage(e.to_string()))?;

    let text = cmd::read_or_empty(&args.manifest)?;
    if let Some(existing) = existing_hash(&text, &args.name)
        && existing != tree_hash
    {
        return Err(CliError::usage(format!(
            "`{}` holds artifact content {tree_hash}, but `{}` says `{}` is {existing}; \
                 nothing was uploaded. Publish the tarball `create` wrote for `{}`, or run \
                 `create` again",
            args.tarball.display(),
            args.manifest.display(),
            args.name,
            args.name
        )));
    }
    let storage = open_storage(&args.to).map_err(|e| CliError::usage(e.to_string()))?;
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
    let sha256 = sha256_file(&args.tarball).map_err(|e| CliError::failure(e.to_string()))?;
    let bar = crate::progress::spinner(&format!("uploading {key} to {}", storage.url()));
    let sent = storage.put_file(&key, &args.tarball);
    bar.finish_and_clear();
    let sent = sent.map_err(|e| CliError::failure(e.to_string()))?;

    let update = EntryUpdate {
        name: args.name.clone(),
        tree_hash: tree_hash.clone(),
        tree_hash_sha256: None,
        lazy: false,
        metadata: Vec::new(),
        download: Some(NewDownload {
            url: url.clone(),
            sha256: sha256.clone(),
            size: sent,
        }),
        remove_downloads: false,
        replace_downloads: false,
    };
    let (new_text, outcome) = upsert_entry(&text, &args.manifest, &update)?;
    cmd::write_atomically(&args.manifest, &new_text)?;
    if args.json {
        return cmd::print_json(&serde_json::json!({
            "name": args.name,
            "uploaded_to": format!("{}/{key}", storage.url().trim_end_matches('/')),
            "bytes": sent,
            "url": url,
            "sha256": sha256,
            "git_tree_sha1": tree_hash,
            "manifest": args.manifest,
            "edit": outcome,
        }));
    }
    println!(
        "published `{}` ({sent} bytes) to {}/{key}\n  url = {url}\n  sha256 = {sha256}\n  recorded in {}",
        args.name,
        storage.url().trim_end_matches('/'),
        args.manifest.display()
    );
    Ok(())
}

/// The git tree hash of the tarball's content (unpacked into a temporary folder).
fn tree_hash_of(tarball: &Path) -> CliResult<String> {
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
    Ok(extracted.tree_hash.to_hex())
}

/// The `git-tree-sha1` of `[name]` in the manifest text, if present.
fn existing_hash(text: &str, name: &str) -> Option<String> {
    let doc: toml_edit::DocumentMut = text.parse().ok()?;
    doc.get(name)?
        .get("git-tree-sha1")?
        .as_str()
        .map(str::to_ascii_lowercase)
}
