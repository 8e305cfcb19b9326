//! The state file of `publish --archive`, `.<NAME>.publish-state.json` next to the manifest, and
//! what binds it to the publication it describes.
//!
//! The file decides which draft a rerun empties and fills again, and which record gets a new
//! version, so it is not taken on its word. It names the artifact and the manifest it was written
//! for, and each archive's entry names its archive; a draft's entry keeps the draft's parent
//! (the record every version shares) and the tree hash it was started for, a record's entry its
//! parent and DOI. Before a draft's files are touched or a record gets a new version, these are
//! checked against this run ([`State::bind`]) and against what the archive answers for that
//! draft or record ([`check_draft`], [`check_record`], [`check_files`]); on any disagreement the
//! run stops with an [`ArchiveError::State`] saying what differs, having changed nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::ArchiveError;
use super::origin::{is_file_key, is_record_id, shown};

/// The state file: per archive URL.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct State {
    /// The artifact it is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) name: Option<String>,
    /// The manifest it was written for (absolute, symlinks resolved).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) manifest: Option<PathBuf>,
    #[serde(default)]
    pub(super) archives: BTreeMap<String, ArchiveState>,
    /// The last verified tarball (path, size, mtime) and its hashes.
    #[serde(default)]
    pub(super) verified: Option<Verified>,
}

/// One archive's entry of the [`State`].
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct ArchiveState {
    /// The archive this entry is about (the key it is filed under).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) archive: Option<String>,
    /// The last published record.
    pub(super) record: Option<String>,
    /// Its parent (concept) id.
    pub(super) parent: Option<String>,
    /// Its DOI (the version's).
    pub(super) doi: Option<String>,
    /// Its parent's DOI (every version's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) concept_doi: Option<String>,
    /// SHA-256 of the tarball last published.
    pub(super) published_sha256: Option<String>,
    /// The git tree hash of the artifact last published.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) published_tree: Option<String>,
    /// The draft in progress.
    pub(super) draft: Option<DraftState>,
    /// A new record's draft asked for and not yet answered: written before `POST
    /// /api/records`, replaced by `draft` once the archive answers; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) creating: Option<Creating>,
}

/// What a run asked the archive to create, to find that draft again when the run was killed
/// before it could save the answer.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub(super) struct Creating {
    /// SHA-256 of the tarball it is for.
    pub(super) sha256: String,
    /// The metadata's `title` sent.
    pub(super) title: String,
    /// The metadata's `publication_date` sent.
    pub(super) publication_date: String,
    /// The earliest `created` time the draft can have: the time of the note less
    /// [`CLOCK_SLACK`] for the archive's clock (UTC, `2026-12-04T21:55:00.000Z`).
    pub(super) not_before: String,
}

/// How far the archive's clock may be behind ours when a draft's `created` time is compared
/// with the time its request was noted.
pub(super) const CLOCK_SLACK: std::time::Duration = std::time::Duration::from_secs(600);

/// The draft in progress.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct DraftState {
    pub(super) id: String,
    /// SHA-256 of the tarball it is for.
    pub(super) sha256: String,
    /// The git tree hash of the artifact it was started for.
    #[serde(default)]
    pub(super) tree: Option<String>,
    /// Its parent (concept) id, as the archive answered when the draft was made.
    #[serde(default)]
    pub(super) parent: Option<String>,
    pub(super) new_version: bool,
    /// Files committed with the right checksum: key -> md5.
    #[serde(default)]
    pub(super) done: BTreeMap<String, String>,
}

/// A tarball whose tree hash was checked, and its hashes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Verified {
    pub(super) path: PathBuf,
    pub(super) size: u64,
    pub(super) mtime_ns: u128,
    pub(super) tree: String,
    pub(super) sha256: String,
    pub(super) md5: String,
    /// `index-sha256` of a seekable tarball whose index authenticates against `tree`.
    #[serde(default)]
    pub(super) index_sha256: Option<String>,
}

/// The state file at `path`: empty when there is none; a file that cannot be read or is not a
/// state file is an error (continuing as if it were empty would make a second draft).
pub(super) fn load(path: &Path) -> Result<State, ArchiveError> {
    let unusable = |why: String| ArchiveError::State {
        file: path.to_path_buf(),
        differs: why,
    };
    match clima_artifact_fs::read_shared_text(path, 1 << 20) {
        Ok(None) => Ok(State::default()),
        Ok(Some(text)) => serde_json::from_str(&text)
            .map_err(|e| unusable(format!("it is not a publish state file ({e})"))),
        Err(e) => Err(unusable(format!("it cannot be read ({e})"))),
    }
}

/// Writes `state` to `path` atomically.
pub(super) fn save(path: &Path, state: &State) -> Result<(), ArchiveError> {
    let text = serde_json::to_string_pretty(state)
        .map_err(|e| ArchiveError::Io(format!("cannot encode the publish state: {e}")))?;
    clima_artifact_fs::write_atomically(path, format!("{text}\n").as_bytes())
        .map_err(|e| ArchiveError::Io(format!("cannot write `{}`: {e}", path.display())))
}

/// `manifest` as the state file names it: absolute, symlinks resolved where it exists.
pub(super) fn manifest_identity(manifest: &Path) -> PathBuf {
    std::fs::canonicalize(manifest)
        .or_else(|_| std::path::absolute(manifest))
        .unwrap_or_else(|_| manifest.to_path_buf())
}

impl State {
    /// Checks that this state describes artifact `name` of `manifest` (as
    /// [`manifest_identity`] names it), and that each archive's entry is filed under its own
    /// archive; then names them, for the next save. A file without these names but with a draft
    /// or a record in it (written by an earlier version, or edited) is refused too: what it
    /// describes cannot be told.
    pub(super) fn bind(
        &mut self,
        file: &Path,
        name: &str,
        manifest: &Path,
    ) -> Result<(), ArchiveError> {
        let differs = |why: String| ArchiveError::State {
            file: file.to_path_buf(),
            differs: why,
        };
        let used = self
            .archives
            .values()
            .any(|a| a.draft.is_some() || a.record.is_some());
        match &self.name {
            Some(n) if n != name => {
                return Err(differs(format!(
                    "it is the publish state of artifact `{}`, not of `{name}`",
                    clima_artifact_fs::printable(n)
                )));
            }
            None if used => {
                return Err(differs(
                    "it does not name the artifact and manifest it describes (written by an \
                     earlier version, or edited)"
                        .into(),
                ));
            }
            _ => {}
        }
        match &self.manifest {
            Some(m) if m != manifest => {
                return Err(differs(format!(
                    "it was written for the manifest `{}`, not `{}` (copied from another \
                     checkout?)",
                    clima_artifact_fs::printable(&m.to_string_lossy()),
                    manifest.display()
                )));
            }
            None if used => {
                return Err(differs(
                    "it does not name the manifest it was written for (written by an earlier \
                     version, or edited)"
                        .into(),
                ));
            }
            _ => {}
        }
        for (key, entry) in &self.archives {
            if let Some(a) = &entry.archive
                && a != key
            {
                return Err(differs(format!(
                    "its entry for {} names the archive {}",
                    clima_artifact_fs::printable(key),
                    clima_artifact_fs::printable(a)
                )));
            }
            // Ids and keys go into the paths of requests sent with the token.
            let draft = entry.draft.as_ref();
            let ids = [&entry.record, &entry.parent]
                .into_iter()
                .flatten()
                .chain(draft.map(|d| &d.id))
                .chain(draft.and_then(|d| d.parent.as_ref()));
            let keys = draft.into_iter().flat_map(|d| d.done.keys());
            if let Some(bad) = ids
                .filter(|id| !is_record_id(id))
                .chain(keys.filter(|k| !is_file_key(k)))
                .next()
            {
                return Err(differs(format!(
                    "its entry for {} has `{}`, which is not a record id or file name",
                    clima_artifact_fs::printable(key),
                    clima_artifact_fs::printable(bad)
                )));
            }
        }
        self.name = Some(name.to_owned());
        self.manifest = Some(manifest.to_path_buf());
        Ok(())
    }
}

/// The archive's `parent.id` of a draft or record `body`.
pub(super) fn parent_of(body: &Value) -> Option<&str> {
    body["parent"]["id"].as_str()
}

/// Checks the archive's answer `body` for the draft `d` of the state file `file`: the same id,
/// still a draft, of the parent the draft was made in.
pub(super) fn check_draft(
    file: &Path,
    archive: &str,
    d: &DraftState,
    body: &Value,
) -> Result<(), ArchiveError> {
    let differs = |why: String| ArchiveError::State {
        file: file.to_path_buf(),
        differs: format!("draft {} on {archive}: {why}", d.id),
    };
    if body["id"].as_str() != Some(d.id.as_str()) {
        return Err(differs(format!(
            "the archive answered record `{}` for it",
            shown(&body["id"])
        )));
    }
    let Some(parent) = d.parent.as_deref() else {
        return Err(differs(
            "the state file does not say which record it belongs to (no `parent`)".into(),
        ));
    };
    if parent_of(body) != Some(parent) {
        return Err(differs(format!(
            "it belongs to the record (parent) `{}` on the archive, the state file says `{parent}`",
            shown(&body["parent"]["id"])
        )));
    }
    Ok(())
}

/// Checks the archive's answer `body` for the record `id` that the state file `file` says was
/// published with the parent `parent` and the DOI `doi`: the same id, published, the same
/// parent and DOI.
pub(super) fn check_record(
    file: &Path,
    archive: &str,
    id: &str,
    parent: Option<&str>,
    doi: Option<&str>,
    body: &Value,
) -> Result<(), ArchiveError> {
    let differs = |why: String| ArchiveError::State {
        file: file.to_path_buf(),
        differs: format!("record {id} on {archive}: {why}"),
    };
    if body["id"].as_str() != Some(id) || body["is_published"].as_bool() != Some(true) {
        return Err(differs(
            "the archive has no published record of that id".into(),
        ));
    }
    let Some(parent) = parent else {
        return Err(differs(
            "the state file does not say which record it belongs to (no `parent`)".into(),
        ));
    };
    if parent_of(body) != Some(parent) {
        return Err(differs(format!(
            "its parent is `{}` on the archive, the state file says `{parent}`",
            shown(&body["parent"]["id"])
        )));
    }
    if let Some(doi) = doi {
        let theirs = body["pids"]["doi"]["identifier"].as_str();
        if theirs != Some(doi) {
            return Err(differs(format!(
                "its DOI is `{}` on the archive, the state file says `{}`",
                shown(&body["pids"]["doi"]["identifier"]),
                clima_artifact_fs::printable(doi)
            )));
        }
    }
    Ok(())
}

/// Checks the files the archive lists in draft `d` (`present`: key -> status and checksum)
/// before any is deleted: each is one this run uploads (`ours`) or one the state file recorded
/// as committed, and a committed one the state file recorded has the checksum it recorded.
pub(super) fn check_files(
    file: &Path,
    archive: &str,
    d: &DraftState,
    present: &BTreeMap<String, (String, Option<String>)>,
    ours: &[&str],
) -> Result<(), ArchiveError> {
    let differs = |why: String| ArchiveError::State {
        file: file.to_path_buf(),
        differs: format!("draft {} on {archive}: {why}", d.id),
    };
    for (key, (status, checksum)) in present {
        let recorded = d.done.get(key);
        if recorded.is_none() && !ours.contains(&key.as_str()) {
            return Err(differs(format!(
                "it holds the file `{}`, which this artifact does not upload and the state file \
                 never recorded",
                clima_artifact_fs::printable(key)
            )));
        }
        if let Some(md5) = recorded
            && status == "completed"
            && checksum.as_deref() != Some(format!("md5:{md5}").as_str())
        {
            return Err(differs(format!(
                "its file `{}` has checksum `{}`, the state file recorded md5:{md5}",
                clima_artifact_fs::printable(key),
                clima_artifact_fs::printable(checksum.as_deref().unwrap_or("(none)"))
            )));
        }
    }
    Ok(())
}
