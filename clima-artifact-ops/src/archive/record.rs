//! The manifest edit of step 6 of [`super::publish`]: the published file's download,
//! `archive-doi` and `archive-concept-doi`, made once (a rerun finds it recorded).

use clima_artifact_manifest::{ArtifactEntry, Manifest, metadata};

use crate::manifest_edit::{EditOutcome, EntryUpdate, NewDownload, upsert_entry};

use super::error::from_ops;
use super::{ArchiveError, PublishRequest, Published};

/// The archive's keys of the manifest entry: the record's DOI and its parent's.
pub(super) fn archive_keys(published: &Published) -> Vec<(&'static str, String)> {
    [
        (metadata::ARCHIVE_DOI, &published.doi),
        (metadata::ARCHIVE_CONCEPT_DOI, &published.concept_doi),
    ]
    .into_iter()
    .filter_map(|(k, v)| v.clone().map(|v| (k, v)))
    .collect()
}

/// Whether the manifest `req.manifest` already records `published` for the entry of `tree`:
/// its download, and its DOIs.
pub(super) fn recorded_already(req: &PublishRequest, tree: &str, published: &Published) -> bool {
    let Ok(text) = std::fs::read_to_string(&req.manifest) else {
        return false;
    };
    recorded_in(&text, req, tree, published)
}

pub(super) fn recorded_in(
    text: &str,
    req: &PublishRequest,
    tree: &str,
    published: &Published,
) -> bool {
    let Ok(m) = Manifest::parse(text, &req.manifest) else {
        return false;
    };
    let Some(ArtifactEntry::Single(v)) = m.get(&req.name) else {
        return false;
    };
    v.git_tree_sha1.to_hex() == tree
        && archive_keys(published)
            .iter()
            .all(|(k, doi)| v.metadata.get(*k) == Some(doi))
        && v.downloads.iter().any(|d| {
            Some(&d.url) == published.url.as_ref() && d.sha256.to_hex() == published.sha256
        })
}

/// The manifest edit: the download, `archive-doi` and `archive-concept-doi` (the entry's `doi`,
/// the source's, stays as it is).
pub(super) fn record_in_manifest(
    req: &PublishRequest,
    text: &str,
    tree: &str,
    published: &Published,
) -> Result<EditOutcome, ArchiveError> {
    let meta = archive_keys(published);
    let update = EntryUpdate {
        name: req.name.clone(),
        tree_hash: tree.to_owned(),
        tree_hash_sha256: None,
        lazy: false,
        metadata: meta,
        download: published.url.clone().map(|url| NewDownload {
            url,
            sha256: published.sha256.clone(),
            size: published.bytes,
            index_sha256: published.index_sha256.clone(),
        }),
        remove_downloads: false,
        replace_downloads: false,
        download_last: !req.first,
    };
    // Re-read: the manifest may have changed while the upload ran.
    let now = std::fs::read_to_string(&req.manifest).unwrap_or_else(|_| text.to_owned());
    // Already recorded (a rerun): leave the file, and the downloads' order, as they are.
    if recorded_in(&now, req, tree, published) {
        return Ok(EditOutcome::Updated {
            previous_hash: Some(tree.to_owned()),
            removed_downloads: 0,
        });
    }
    let (new_text, outcome) = upsert_entry(&now, &req.manifest, &update).map_err(from_ops)?;
    if new_text != now {
        clima_artifact_fs::write_atomically(&req.manifest, new_text.as_bytes()).map_err(|e| {
            ArchiveError::Io(format!("cannot write `{}`: {e}", req.manifest.display()))
        })?;
    }
    Ok(outcome)
}
