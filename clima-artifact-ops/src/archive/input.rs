//! Step 1 of [`super::publish`]: what is known before any request. The name and the address
//! ([`checked_archive`]), the entry and its `license`, the creators, the token, the tarball
//! (found, or packed) within the archive's [`Limits`].

use std::path::{Path, PathBuf};

use clima_artifact_fs::printable;
use clima_artifact_manifest::{ArtifactEntry, ArtifactVariant, Manifest, metadata};
use serde::Serialize;
use serde_json::Value;

use crate::manifest_edit::invalid_name;

use super::error::from_ops;
use super::meta::{creators, recipe_readme};
use super::tarball::find_or_pack;
use super::{ArchiveError, PublishRequest, TOKEN_VAR};
use clima_artifact_runtime::progress::Reporting;

/// An archive's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Limits {
    /// Largest file, bytes.
    pub max_file_size: u64,
    /// Most bytes in one record.
    pub quota: u64,
    /// Most files in one record.
    pub max_files: usize,
}

impl Limits {
    /// Zenodo's (50 GB per record, 100 files) or InvenioRDM's defaults (10 GB per file, 30 GB
    /// per record; CaltechDATA's), by the archive's host.
    pub fn for_archive(archive: &str) -> Limits {
        if host_of(archive).ends_with("zenodo.org") {
            Limits {
                max_file_size: 50_000_000_000,
                quota: 50_000_000_000,
                max_files: 100,
            }
        } else {
            Limits {
                max_file_size: 10_000_000_000,
                quota: 30_000_000_000,
                max_files: 100,
            }
        }
    }
}

pub(super) fn host_of(url: &str) -> String {
    url.split("://")
        .nth(1)
        .unwrap_or("")
        .split(['/', ':'])
        .next()
        .unwrap_or("")
        .to_ascii_lowercase()
}

/// Why the token must not go to `archive`: a plain `http://` address of a host other than this
/// machine (loopback) would send it, and the upload, in the clear.
pub(super) fn token_in_the_clear(archive: &str) -> Option<String> {
    let host = host_of(archive);
    let loopback = host == "localhost"
        || host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|a| a.is_loopback())
        || archive.starts_with("http://[::1]");
    (archive.starts_with("http://") && !loopback).then(|| {
        format!(
            "--archive `{}` is plain http: the token in {TOKEN_VAR} would cross the network \
             unencrypted; use the archive's https:// address",
            printable(archive)
        )
    })
}

/// Step 1 of [`publish`](super::publish): what is known before any request.
pub(super) struct Input {
    /// The archive's address, without a trailing `/`.
    pub(super) archive: String,
    /// The manifest's text as read.
    pub(super) text: String,
    pub(super) variant: ArtifactVariant,
    pub(super) license: String,
    /// InvenioRDM's `person_or_org` objects.
    pub(super) creators: Vec<Value>,
    pub(super) token: String,
    /// The entry's git tree hash, hex.
    pub(super) tree: String,
    /// The recipe README (path, text).
    pub(super) readme: Option<(PathBuf, String)>,
    pub(super) tarball: PathBuf,
    /// The tarball's size.
    pub(super) size: u64,
}

impl Input {
    /// The checks that need no request: the entry exists and has a `license`, creators are
    /// known, a token is set, the tarball (found, or packed) is within the archive's limits.
    pub(super) fn check(
        req: &PublishRequest,
        reporting: &Reporting,
    ) -> Result<Input, ArchiveError> {
        let archive = checked_archive(req)?;
        let text = std::fs::read_to_string(&req.manifest).map_err(|e| {
            ArchiveError::Input(format!("cannot read `{}`: {e}", req.manifest.display()))
        })?;
        let manifest = Manifest::parse(&text, &req.manifest)
            .map_err(|e| ArchiveError::Input(e.to_string()))?;
        let variant = single_variant(req, &manifest)?;
        let Some(license) = variant
            .metadata
            .get(metadata::LICENSE)
            .filter(|l| !l.trim().is_empty())
            .cloned()
        else {
            return Err(ArchiveError::NoLicense {
                name: req.name.clone(),
                manifest: req.manifest.clone(),
            });
        };
        let creators = creators(req, &variant.metadata)?;
        let token = match req.token.as_deref().map(str::trim) {
            Some(t) if !t.is_empty() => t.to_owned(),
            _ => return Err(ArchiveError::NoToken { archive }),
        };
        let tree = variant.git_tree_sha1.to_hex();
        let manifest_dir = crate::recipe::manifest_dir(&req.manifest).map_err(from_ops)?;
        let readme = recipe_readme(&variant.metadata, &manifest_dir);
        let tarball = find_or_pack(req, &manifest_dir, &variant, reporting)?;
        let size = std::fs::metadata(&tarball)
            .map_err(|e| ArchiveError::Io(format!("cannot read `{}`: {e}", tarball.display())))?
            .len();
        let readme_size = readme.as_ref().map_or(0, |(_, t)| t.len() as u64);
        check_limits(&archive, &tarball, size, readme_size)?;
        Ok(Input {
            archive,
            text,
            variant,
            license,
            creators,
            token,
            tree,
            readme,
            tarball,
            size,
        })
    }
}

/// Step 1 of [`publish`](super::publish) for the name and the address: a valid artifact name, and an http(s)
/// `--archive` without credentials in it; the address without a trailing `/`.
pub(super) fn checked_archive(req: &PublishRequest) -> Result<String, ArchiveError> {
    if let Some(why) = invalid_name(&req.name) {
        return Err(ArchiveError::Input(format!(
            "artifact name `{}`: {why}",
            printable(&req.name)
        )));
    }
    let archive = req.archive.trim_end_matches('/').to_owned();
    if !(archive.starts_with("https://") || archive.starts_with("http://"))
        || host_of(&archive).is_empty()
    {
        return Err(ArchiveError::Input(format!(
            "--archive `{}` is not an http(s) URL; pass the archive's address, e.g. \
             https://data.caltech.edu or https://zenodo.org (sandboxes: \
             https://data.caltechlibrary.dev, https://sandbox.zenodo.org)",
            printable(&archive)
        )));
    }
    if archive
        .split("://")
        .nth(1)
        .unwrap_or("")
        .split('/')
        .next()
        .unwrap_or("")
        .contains('@')
    {
        return Err(ArchiveError::Input(format!(
            "--archive `{}` carries credentials; pass the archive's plain address and the token \
             in {TOKEN_VAR}",
            clima_artifact_net::trust::redact_url(&archive)
        )));
    }
    if let Some(why) = token_in_the_clear(&archive) {
        return Err(ArchiveError::Input(why));
    }
    Ok(archive)
}

/// The artifact `req.name` of `manifest`, which must have it as a single `[NAME]` entry.
pub(super) fn single_variant(
    req: &PublishRequest,
    manifest: &Manifest,
) -> Result<ArtifactVariant, ArchiveError> {
    match manifest.get(&req.name) {
        Some(ArtifactEntry::Single(v)) => Ok(v.clone()),
        Some(_) => Err(ArchiveError::Input(format!(
            "artifact `{}` is platform-specific ([[{}]]); publish each platform's tarball \
             with `publish TARBALL --to ...` instead",
            req.name, req.name
        ))),
        None => Err(ArchiveError::Input(format!(
            "`{}` has no artifact `{}`; make it first with `clima-artifacts create`",
            req.manifest.display(),
            req.name
        ))),
    }
}

/// The archive's limits (per file, per record) for the tarball of `size` bytes and a README of
/// `readme_size`.
pub(super) fn check_limits(
    archive: &str,
    tarball: &Path,
    size: u64,
    readme_size: u64,
) -> Result<(), ArchiveError> {
    let limits = Limits::for_archive(archive);
    if size > limits.max_file_size {
        return Err(ArchiveError::TooLarge {
            file: tarball.to_path_buf(),
            size,
            limit: limits.max_file_size,
            what: "per file",
            archive: archive.to_owned(),
        });
    }
    if size + readme_size > limits.quota {
        return Err(ArchiveError::TooLarge {
            file: tarball.to_path_buf(),
            size: size + readme_size,
            limit: limits.quota,
            what: "per record (all its files)",
            archive: archive.to_owned(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_never_goes_over_plain_http_except_to_this_machine() {
        assert!(token_in_the_clear("http://zenodo.org").is_some());
        assert!(token_in_the_clear("http://data.caltech.edu:80/x").is_some());
        assert!(token_in_the_clear("https://zenodo.org").is_none());
        assert!(token_in_the_clear("http://127.0.0.1:8080").is_none());
        assert!(token_in_the_clear("http://localhost:8080").is_none());
        assert!(token_in_the_clear("http://[::1]:8080").is_none());
    }

    #[test]
    fn limits_by_host() {
        assert_eq!(
            Limits::for_archive("https://sandbox.zenodo.org").max_file_size,
            50_000_000_000
        );
        assert_eq!(
            Limits::for_archive("https://data.caltech.edu/").max_file_size,
            10_000_000_000
        );
        assert_eq!(
            Limits::for_archive("https://data.caltech.edu").quota,
            30_000_000_000
        );
    }
}
