//! An installed copy used for an entry that gives a `git-tree-sha256`.
//!
//! The folder is named by the git tree SHA-1 (Julia's layout, which Pkg's
//! `git-tree-sha256-artifacts` branch keeps), so a copy found there may have been installed by
//! SHA-1 alone: by Julia, from a package server through Julia, by an older clima-artifacts.
//! Before such a copy is used for an entry with a `git-tree-sha256`, its SHA-256 tree hash
//! must be the entry's: it is read from the copy's record (`artifacts/<hash>.git-tree-sha256`,
//! written when it was installed with both checks or hashed before; see the depot crate's
//! `Depot::recorded_tree_sha256` for what makes a record trusted), else the copy is hashed
//! once (SHA-1 and SHA-256 in one read) and the result recorded for the next runs. An
//! override is never hashed.

use std::path::Path;

use crate::notice::InstallEvent;
use clima_artifact_depot::Depot;
use clima_artifact_depot::notice::DepotEvent;
use clima_artifact_extract::tree_hash::{Formats, tree_hashes};
use clima_artifact_manifest::ArtifactVariant;
use clima_artifact_manifest::layout::ARTIFACTS;
use clima_artifact_progress::Reporting;

use crate::{Config, Error, GitTreeSha1, GitTreeSha256, Installed, Origin};

/// `found` (what a lookup gave for artifact `name`) when it may be used for `variant`: an
/// override, a copy for an entry without `git-tree-sha256`, or a copy whose SHA-256 tree hash
/// is recorded or computed now to be the entry's; else
/// [`Error::InstalledTreeSha256Mismatch`].
pub(crate) fn usable(
    name: &str,
    variant: &ArtifactVariant,
    found: Installed,
    config: &Config,
) -> Result<Installed, Error> {
    let Some(expected) = variant.git_tree_sha256 else {
        return Ok(found);
    };
    if !matches!(found.origin, Origin::Depot) {
        return Ok(found);
    }
    let hash = variant.git_tree_sha1;
    let copy = found.path.as_path();
    let places = record_places(copy, config);
    let recorded = places
        .iter()
        .find_map(|d| d.recorded_tree_sha256(&hash, copy));
    let (actual, sha1_matches) = match recorded {
        Some(sha256) => (sha256, None),
        None => {
            let (sha256, sha1) = hash_once(name, &hash, copy, &places, config.reporting())?;
            (sha256, Some(sha1 == hash))
        }
    };
    if actual != expected {
        return Err(Error::InstalledTreeSha256Mismatch {
            name: name.to_owned(),
            path: found.path,
            expected,
            actual,
            sha1_matches,
        });
    }
    Ok(found)
}

/// Where a record of `copy` is looked for and written, in order: the depot that holds it when
/// that is one of this process's own depots (Julia's depots are never written), then this
/// process's depots (the node-local one first, as installs search them).
fn record_places(copy: &Path, config: &Config) -> Vec<Depot> {
    let ours: Vec<Depot> = config
        .node_local_depot
        .iter()
        .chain(&config.depots)
        .cloned()
        .collect();
    let holder = copy
        .parent()
        .filter(|a| a.file_name() == Some(std::ffi::OsStr::new(ARTIFACTS)))
        .and_then(Path::parent)
        .and_then(|root| ours.iter().find(|d| d.root() == root));
    let mut places: Vec<Depot> = holder.cloned().into_iter().collect();
    places.extend(ours.iter().filter(|d| Some(*d) != holder).cloned());
    places
}

/// Hashes the copy `copy` of `hash` (artifact `name`) once, SHA-1 and SHA-256 from one read,
/// and records its SHA-256 in the first of `places` that takes it; returns both.
fn hash_once(
    name: &str,
    hash: &GitTreeSha1,
    copy: &Path,
    places: &[Depot],
    reporting: &Reporting,
) -> Result<(GitTreeSha256, GitTreeSha1), Error> {
    reporting.emit(InstallEvent::HashingInstalledCopy {
        artifact: name.to_owned(),
        path: copy.to_path_buf(),
    });
    let hashes = tree_hashes(copy, Formats::Sha1AndSha256)
        .map_err(|e| Error::io("hash the installed copy", copy, e))?;
    let Some(sha256) = hashes.sha256 else {
        return Err(Error::Internal {
            message: format!(
                "hashing `{}` gave no git tree SHA-256; please report this",
                copy.display()
            ),
        });
    };
    let mut last = None;
    for depot in places {
        let recorded = std::fs::create_dir_all(depot.artifacts_dir())
            .and_then(|()| depot.record_tree_sha256(hash, copy, &sha256));
        match recorded {
            Ok(()) => return Ok((sha256, hashes.sha1)),
            Err(e) => last = Some(e),
        }
    }
    reporting.emit(DepotEvent::TreeSha256NotRecorded {
        path: copy.to_path_buf(),
        error: last.map_or_else(|| "no depot of this process".to_owned(), |e| e.to_string()),
    });
    Ok((sha256, hashes.sha1))
}
