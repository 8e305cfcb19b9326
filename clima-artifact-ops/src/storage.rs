//! `publish TARBALL --to STORAGE_URL`: upload a tarball made by `create` to storage (a folder,
//! `file://`, or `s3://` with the `s3` feature of `clima-artifact-sync`), then record its
//! download URL and sha256 in the manifest entry (a format-preserving edit, as `create` does).
//!
//! Before uploading, the tarball is unpacked into a temporary folder (with the runtime's safe
//! extractor) to learn its git tree hash; when the manifest already has an entry of that name
//! with another hash, nothing is uploaded (the tarball does not hold that artifact).

use std::path::{Path, PathBuf};

use clima_artifact_manifest::GitTreeSha1;
use clima_artifact_runtime::extract::{ExtractLimits, extract_archive};
use clima_artifact_sync::{open_storage, sha256_file};
use serde::Serialize;

use crate::error::{Error, Result, io_error};
use crate::manifest_edit::{EditOutcome, EntryUpdate, NewDownload, invalid_name, upsert_entry};

/// What to upload, where, and which entry records it.
#[derive(Debug, Clone)]
pub struct PublishRequest {
    /// Where the storage's notices go (the program's; by default today's lines on stderr).
    pub reporting: clima_artifact_runtime::progress::Reporting,
    /// The `.tar.gz` written by `create`.
    pub tarball: PathBuf,
    /// The storage: a folder, `file:///path` or `s3://bucket/prefix`.
    pub to: String,
    /// The URL the uploaded tarball is downloadable from (ending in `/`: the key is
    /// appended); `None`: the storage's own download URL (`file://` for folders).
    pub public_url: Option<String>,
    /// The manifest whose entry gets the download (created when missing).
    pub manifest: PathBuf,
    /// The artifact's name in the manifest.
    pub name: String,
    /// The object key; `None`: `artifact/<git-tree-sha1>` with [`PublishRequest::by_hash`],
    /// else the tarball's file name.
    pub key: Option<String>,
    /// Store at `artifact/<git-tree-sha1>`, the layout of a Julia package server.
    pub by_hash: bool,
}

/// What [`publish`] did (also the CLI's `--json` output).
#[derive(Debug, Clone, Serialize)]
pub struct Published {
    /// Artifact name.
    pub name: String,
    /// Where the tarball was stored: the storage's URL and the key.
    pub uploaded_to: String,
    /// Bytes sent.
    pub bytes: u64,
    /// The download URL recorded.
    pub url: String,
    /// The tarball's SHA-256.
    pub sha256: String,
    /// The SHA-256 of its index, for a seekable tarball whose index authenticates.
    pub index_sha256: Option<String>,
    /// The tarball's content, hex.
    pub git_tree_sha1: String,
    /// The manifest edited.
    pub manifest: PathBuf,
    /// The manifest edit.
    pub edit: EditOutcome,
}

/// A step of [`publish`] worth showing while it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step<'a> {
    /// The upload of `key` to `storage` starts (it may take a while).
    Uploading {
        /// The object key.
        key: &'a str,
        /// The storage's URL.
        storage: &'a str,
    },
    /// The upload ended (sent or failed).
    Uploaded,
}

/// Uploads `req.tarball` to `req.to` and records it in `req.manifest`; `step` is told when
/// the upload starts and ends (for a spinner). Bad input (a bad name, a tarball that is not a
/// file or not an artifact, one that holds other content than the entry, an unusable storage
/// URL or key) is refused before anything is uploaded.
pub fn publish(req: &PublishRequest, step: &dyn Fn(Step<'_>)) -> Result<Published> {
    let checked = check(req)?;
    let storage = open_storage(&req.to, &req.reporting).map_err(|e| Error::input(e.to_string()))?;
    let key = &checked.key;
    let url = match &req.public_url {
        Some(u) if u.ends_with('/') => format!("{u}{key}"),
        Some(u) => u.clone(),
        None => storage.download_url(key).ok_or_else(|| {
            Error::input(format!(
                "`{}` gives no public download URL for its objects; pass --public-url with the \
                 https:// URL the uploaded tarball will be downloadable from (ending in `/` to \
                 append `{key}`)",
                storage.url()
            ))
        })?,
    };
    let sha256 = sha256_file(&req.tarball).map_err(|e| Error::failed(e.to_string()))?;
    let storage_url = storage.url();
    step(Step::Uploading {
        key,
        storage: &storage_url,
    });
    let sent = storage.put_file(key, &req.tarball);
    step(Step::Uploaded);
    let sent = sent.map_err(|e| Error::failed(e.to_string()))?;

    let update = EntryUpdate {
        name: req.name.clone(),
        tree_hash: checked.tree_hash.clone(),
        tree_hash_sha256: None,
        lazy: false,
        metadata: Vec::new(),
        download: Some(NewDownload {
            url: url.clone(),
            sha256: sha256.clone(),
            size: sent,
            index_sha256: checked.index_sha256.clone(),
        }),
        remove_downloads: false,
        replace_downloads: false,
        download_last: false,
    };
    let (new_text, edit) = upsert_entry(&checked.text, &req.manifest, &update)?;
    crate::error::write_text(&req.manifest, &new_text)?;
    Ok(Published {
        name: req.name.clone(),
        uploaded_to: format!("{}/{key}", storage_url.trim_end_matches('/')),
        bytes: sent,
        url,
        sha256,
        index_sha256: checked.index_sha256,
        git_tree_sha1: checked.tree_hash,
        manifest: req.manifest.clone(),
        edit,
    })
}

/// What [`check`] found: the tarball's content and index hash, the key, the manifest's text.
struct Checked {
    tree_hash: String,
    index_sha256: Option<String>,
    key: String,
    text: String,
}

/// The checks before any upload: the name, the tarball (a file holding an artifact), the key,
/// and an existing entry of the name, which must have the tarball's content.
fn check(req: &PublishRequest) -> Result<Checked> {
    let (name, tarball) = (req.name.as_str(), req.tarball.as_path());
    if let Some(why) = invalid_name(name) {
        return Err(Error::input(format!("artifact name `{name}`: {why}")));
    }
    let meta = std::fs::metadata(tarball).map_err(|e| {
        Error::input(format!(
            "tarball `{}` cannot be used: {e}",
            tarball.display()
        ))
    })?;
    if !meta.is_file() {
        return Err(Error::input(format!(
            "tarball `{}` is not a file; pass the .tar.gz written by `create`",
            tarball.display()
        )));
    }
    let tree = tree_hash_of(tarball)?;
    let index_sha256 = crate::tarball::index_sha256_of(tarball, &tree)?.map(|h| h.to_hex());
    let tree_hash = tree.to_hex();
    let key = match &req.key {
        Some(k) => k.clone(),
        None if req.by_hash => format!("artifact/{tree_hash}"),
        None => tarball
            .file_name()
            .and_then(|n| n.to_str())
            .map(str::to_owned)
            .ok_or_else(|| Error::input("the tarball's file name is not UTF-8; pass --key NAME"))?,
    };
    clima_artifact_sync::check_key(&key).map_err(|e| Error::input(e.to_string()))?;
    let text = crate::error::read_or_empty(&req.manifest)?;
    if let Some(existing) = existing_hash(&text, name)
        && existing != tree_hash
    {
        return Err(Error::input(format!(
            "`{}` holds artifact content {tree_hash}, but `{}` says `{name}` is {existing}; \
             nothing was uploaded. Publish the tarball `create` wrote for `{name}`, or run \
             `create` again",
            tarball.display(),
            req.manifest.display(),
        )));
    }
    Ok(Checked {
        tree_hash,
        index_sha256,
        key,
        text,
    })
}

/// The git tree hash of the tarball's content (unpacked into a temporary folder).
fn tree_hash_of(tarball: &Path) -> Result<GitTreeSha1> {
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
        Error::input(format!(
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
