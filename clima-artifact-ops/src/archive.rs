//! `publish NAME --archive URL`: publish an artifact to an InvenioRDM archive (CaltechDATA,
//! Zenodo, their sandboxes) and record the record's file URL and DOI in `Artifacts.toml`.
//!
//! The steps, each safe to repeat ([`publish`]):
//!
//! 1. Checks that need no request: the entry exists and has a `license`, creators are known,
//!    a token is set ([`TOKEN_VAR`]), the tarball (found, or packed from the installed copy) is
//!    within the archive's limits ([`Limits::for_archive`]).
//! 2. The tarball's git tree hash is checked against the entry (one pass, which also gives
//!    its SHA-256 and MD5; remembered in the state file for reruns).
//! 3. A draft: the one of the state file, else the one an earlier run asked for and was killed
//!    before saving (the state file notes a new record before asking for it; the draft is found
//!    among the user's records, `GET /api/user/records`), else a new version of the record
//!    published before (from the state file or the entry's download URL), else a new record.
//! 4. Metadata (`PUT /api/records/{id}/draft`), from the entry and the recipe README: a
//!    rejected field is reported before any upload.
//! 5. Files: the tarball and the recipe README, each initialised, streamed, committed; the
//!    server's `md5:` checksum must equal the MD5 of the checked content (computed in step 2's
//!    streaming pass), otherwise the file is removed from the draft and nothing is published.
//! 6. Publish (unless `--draft`); the published record is read back (`GET /api/records/{id}`
//!    and its file list, which must show the tarball with our checksum), then the manifest
//!    edit: a `[[NAME.download]]` with the published file's URL (after the existing mirrors, or
//!    first), `archive-doi` and `archive-concept-doi` (the entry's own `doi`, the source's, is
//!    kept).
//!
//! The state file `.<NAME>.publish-state.json` next to the manifest keeps, per archive, the
//! draft id and the published record, so a rerun continues the same draft and a changed
//! artifact becomes a new version of the same record; while a new record's draft is asked for,
//! it notes that request, so that a draft whose answer never arrived (a killed run, a lost
//! answer) is found again rather than made twice. It is bound to what it describes and checked
//! before use (module `state`); what the archive answers is checked before it becomes an
//! address, a path or a message (module `origin`). HTTP failures, all by the retry policy of
//! downloads ([`clima_artifact_net::retry`]): `429` waits for its `Retry-After` (saying so;
//! its 429 rule, bounded by `MAX_THROTTLED` and `MAX_RETRY_AFTER`), `5xx`, broken connections
//! and exchanges over the time bound ([`TIMEOUT_VAR`]) are retried; `401`/`403` name the token
//! variable.
//!
//! The modules follow those seams: `input` (step 1), `tarball` (the tarball found or packed,
//! and checked to hold the entry), `publication` (steps 2 to 6: the draft state machine) and
//! `state` (its file), `client` and `bounds` (HTTP: token, retries, time bounds), `api` (the
//! API's wire shapes), `meta` (the record's metadata), `record` (the manifest edit),
//! `progress` (an upload's lines), `origin` (what of the answers may be used), `error`
//! ([`ArchiveError`]).

mod api;
mod bounds;
mod client;
mod error;
mod input;
mod meta;
mod notice;
mod origin;
mod progress;
mod publication;
mod record;
mod state;
mod tarball;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::manifest_edit::EditOutcome;
use input::Input;
use publication::{Opened, Publication, publish_draft, put_metadata};

pub use api::file_url;
pub use error::{ArchiveError, token_hint};
pub use input::Limits;
pub use notice::{ArchiveEvent, Line};

/// The variable holding the archive's personal access token.
pub const TOKEN_VAR: &str = clima_artifact_vars::ARCHIVE_TOKEN;

/// The variable bounding the time of one exchange with the archive.
pub const TIMEOUT_VAR: &str = clima_artifact_vars::ARCHIVE_TIMEOUT;

/// The default bound of one exchange with the archive ([`PublishRequest::timeout`]).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// What to publish, and how.
#[derive(Debug, Clone)]
pub struct PublishRequest {
    /// Artifact name in the manifest.
    pub name: String,
    /// The manifest.
    pub manifest: PathBuf,
    /// The archive, e.g. `https://data.caltech.edu`.
    pub archive: String,
    /// The personal access token (from [`TOKEN_VAR`]); `None` or empty is an error before any
    /// request.
    pub token: Option<String>,
    /// The tarball to upload; default: `<NAME>.tar.gz` in the manifest's folder or the current
    /// folder, else packed from the installed copy into the current folder.
    pub tarball: Option<PathBuf>,
    /// Stop before publishing (the draft stays for review).
    pub draft_only: bool,
    /// Record the new download before the existing ones.
    pub first: bool,
    /// Creators as `Family, Given` (or an organisation's name); default: the entry's
    /// `maintainer`.
    pub creators: Vec<String>,
    /// The longest one exchange with the archive may take (from the request to the end of the
    /// answer); an upload may take that long again per GiB of its file. An exchange over it is
    /// tried again as a broken connection is. `None`: [`DEFAULT_TIMEOUT`].
    pub timeout: Option<Duration>,
}

/// What [`publish`] did.
#[derive(Debug, Clone, Serialize)]
pub struct Published {
    /// Artifact name.
    pub name: String,
    /// The archive.
    pub archive: String,
    /// The record (or draft) id.
    pub record: String,
    /// The parent (concept) id shared by every version.
    pub parent: Option<String>,
    /// The record's DOI (this version's), once published: the manifest's `archive-doi`.
    pub doi: Option<String>,
    /// The DOI of every version (the parent's, Zenodo's "concept DOI"), once published: the
    /// manifest's `archive-concept-doi`.
    pub concept_doi: Option<String>,
    /// The download URL recorded (once published).
    pub url: Option<String>,
    /// Where to review the draft in a browser (with `--draft`).
    pub draft_url: Option<String>,
    /// Whether it stopped at the draft.
    pub draft: bool,
    /// Whether this is a new version of a record published before.
    pub new_version: bool,
    /// Whether an earlier, interrupted run's draft was continued.
    pub resumed: bool,
    /// Whether it was already published with this content (nothing was sent).
    pub unchanged: bool,
    /// The tarball.
    pub tarball: PathBuf,
    /// Its size.
    pub bytes: u64,
    /// Its SHA-256 (the manifest's `sha256`).
    pub sha256: String,
    /// Its MD5 (the archive's checksum).
    pub md5: String,
    /// The SHA-256 of its index, for a seekable tarball whose index authenticates (the
    /// manifest's `index-sha256`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index_sha256: Option<String>,
    /// The files uploaded by this run (keys); files already in the draft are skipped.
    pub uploaded: Vec<String>,
    /// The manifest edited.
    pub manifest: PathBuf,
    /// The manifest edit, once published.
    pub edit: Option<EditOutcome>,
    /// The state file.
    pub state_file: PathBuf,
    /// What the user should fix before publishing (a record without a description of its
    /// own), also told as notices ([`ArchiveEvent::RecordWarning`]).
    pub warnings: Vec<String>,
}

/// The state file of artifact `name` next to `manifest`.
pub fn state_path(manifest: &Path, name: &str) -> PathBuf {
    let dir = match manifest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    dir.join(format!(".{name}.publish-state.json"))
}

/// Publishes artifact `req.name` to `req.archive`; its notices ([`ArchiveEvent`]: steps,
/// upload progress, retries, warnings) go through `reporting`.
pub fn publish(
    req: &PublishRequest,
    reporting: &clima_artifact_runtime::progress::Reporting,
) -> Result<Published, ArchiveError> {
    // 1. Checks without a request.
    let input = Input::check(req, reporting)?;
    // 2. The tarball holds the artifact (and its hashes), remembered across runs.
    let mut p = Publication::start(req, input, reporting)?;
    // Already published with this content: only the manifest may need the record.
    if let Some(record) = p.already_published() {
        return p.unchanged(record);
    }
    // 3. The draft, unless an earlier run published it already.
    let (id, body) = match p.open_draft()? {
        Opened::Published(id, body) => (id, body),
        Opened::Draft(mut draft, draft_body) => {
            // 4. Metadata, checked before any upload.
            put_metadata(&p.client, &p.input.archive, &draft.id, &p.record_meta)?;
            // 5. Files.
            p.upload_files(&mut draft)?;
            // 6. Publish.
            if req.draft_only {
                return p.stop_at_draft(&draft, &draft_body);
            }
            let body = publish_draft(&p.client, &p.input.archive, &draft.id)?;
            (draft.id, body)
        }
    };
    p.finish_published(&id, &body)
}
