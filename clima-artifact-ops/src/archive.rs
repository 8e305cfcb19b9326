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
//! address, a path or a message (module `origin`). HTTP failures: `429` waits for `Retry-After` (saying so),
//! `5xx`, broken connections and exchanges over the time bound ([`TIMEOUT_VAR`]) are retried
//! with the download retry policy ([`clima_artifact_net::retry`]), `401`/`403` name the token
//! variable.

mod bounds;
mod origin;
mod state;

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use clima_artifact_fs::printable;
use clima_artifact_manifest::{ArtifactEntry, ArtifactVariant, Manifest, metadata};
use clima_artifact_net::retry::{RetryPolicy, is_transient_io, is_transient_status};
use clima_artifact_runtime::extract::seekable;
use md5::Digest as _;
use serde::Serialize;
use serde_json::{Value, json};
use sha2::Digest as _;

use crate::error::CliError;
use crate::manifest_edit::{EditOutcome, EntryUpdate, NewDownload, invalid_name, upsert_entry};
use bounds::{over_budget, upload_budget};
use origin::{checked_id, checked_key};
use state::{ArchiveState, CLOCK_SLACK, Creating, DraftState, State, Verified};

/// What a line given to `notify` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line {
    /// Progress of an upload (start, every 10 % or 10 s, end): for a terminal or a batch log,
    /// hidden where progress is off.
    Progress,
    /// Something the user should know: a resumed draft, a wait for `Retry-After`, a retry, a
    /// checksum checked.
    Notice,
}

/// The variable holding the archive's personal access token.
pub const TOKEN_VAR: &str = clima_artifact_vars::ARCHIVE_TOKEN;

/// The variable bounding the time of one exchange with the archive.
pub const TIMEOUT_VAR: &str = clima_artifact_vars::ARCHIVE_TIMEOUT;

/// The default bound of one exchange with the archive ([`PublishRequest::timeout`]).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// Most `429` answers waited out for one request before giving up.
const MAX_THROTTLED: u32 = 20;

/// Longest `Retry-After` honoured (a longer one is waited this long).
const MAX_RETRY_AFTER: Duration = Duration::from_secs(600);

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
    /// own), also given to `notify` as notices.
    pub warnings: Vec<String>,
}

/// Why [`publish`] stopped.
#[derive(Debug, Clone)]
pub enum ArchiveError {
    /// Bad input found before any request (no entry, no creators, bad URL, a tarball that does
    /// not hold the artifact, ...).
    Input(String),
    /// The entry has no `license`: an archive record needs its rights.
    NoLicense {
        /// Artifact name.
        name: String,
        /// The manifest.
        manifest: PathBuf,
    },
    /// No token in [`TOKEN_VAR`].
    NoToken {
        /// The archive.
        archive: String,
    },
    /// `401` or `403`.
    Unauthorized {
        /// The status.
        status: u16,
        /// The archive.
        archive: String,
        /// The server's message (escaped).
        message: String,
    },
    /// A file larger than the archive takes.
    TooLarge {
        /// The file.
        file: PathBuf,
        /// Its size.
        size: u64,
        /// The limit it exceeds.
        limit: u64,
        /// What the limit is (`per file`, `per record`).
        what: &'static str,
        /// The archive.
        archive: String,
    },
    /// Metadata the archive rejected: (field, message), escaped.
    Rejected {
        /// The archive.
        archive: String,
        /// Each field and its messages.
        errors: Vec<(String, String)>,
    },
    /// The checksum the archive computed differs from ours; the file was removed from the
    /// draft and nothing was published.
    Checksum {
        /// The file key.
        key: String,
        /// Ours, `md5:<hex>`.
        ours: String,
        /// The archive's (escaped).
        theirs: String,
        /// The draft id.
        draft: String,
    },
    /// Any other failed request (after the retries): method, URL, status (0: no answer),
    /// message (escaped).
    Http {
        /// What was asked.
        what: String,
        /// The status, 0 when there was no answer.
        status: u16,
        /// The server's message or the I/O error.
        message: String,
    },
    /// A local file could not be read or written.
    Io(String),
    /// The state file does not describe this publication (copied from another checkout,
    /// edited, or disagreeing with what the archive says of its draft or record); nothing was
    /// changed.
    State {
        /// The state file.
        file: PathBuf,
        /// What differs (escaped).
        differs: String,
    },
    /// An answer of the archive that cannot be used (an id that is not an id, a DOI that is
    /// not a DOI, a published record without our file); the message is escaped.
    Untrusted(String),
}

impl fmt::Display for ArchiveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArchiveError::Input(m) | ArchiveError::Io(m) | ArchiveError::Untrusted(m) => {
                f.write_str(m)
            }
            ArchiveError::State { file, differs } => write!(
                f,
                "the publish state `{}` does not describe this publication: {differs}; nothing \
                 was changed on the archive or in the manifest. If that file is not this \
                 checkout's (copied from another one, or edited), remove it and run again (`rm \
                 {}`): without it a new record is made, or a new version of the record the \
                 entry's download URL names",
                file.display(),
                clima_artifact_fs::shell_word(&file.to_string_lossy())
            ),
            ArchiveError::NoLicense { name, manifest } => write!(
                f,
                "artifact `{name}` in `{}` has no `license`, which an archive record needs as \
                 its rights; add one (an SPDX id such as `license = \"CC-BY-4.0\"`) and run \
                 again; nothing was sent",
                manifest.display()
            ),
            ArchiveError::NoToken { archive } => write!(
                f,
                "no token for {archive}: set {TOKEN_VAR} to a personal access token of that \
                 archive ({}); nothing was sent",
                token_hint(archive)
            ),
            ArchiveError::Unauthorized {
                status,
                archive,
                message,
            } => write!(
                f,
                "{archive} refused the token in {TOKEN_VAR} ({status}: {message}); it is \
                 missing, expired or lacks the deposit scope: make a new one ({}) and set \
                 {TOKEN_VAR} to it",
                token_hint(archive)
            ),
            ArchiveError::TooLarge {
                file,
                size,
                limit,
                what,
                archive,
            } => write!(
                f,
                "`{}` is {} ({size} bytes), over the limit of {} ({limit} bytes) {what} of \
                 {archive}; nothing was uploaded: split the artifact, or ask the archive for a \
                 larger quota",
                file.display(),
                clima_artifact_fs::human_bytes(*size),
                clima_artifact_fs::human_bytes(*limit)
            ),
            ArchiveError::Rejected { archive, errors } => {
                write!(f, "{archive} rejected the record's metadata:")?;
                for (field, message) in errors {
                    write!(f, " `{field}`: {message};")?;
                }
                f.write_str(
                    " fix the entry's keys (license, description, ...), the recipe README or \
                     --creator, and run again (the draft is kept)",
                )
            }
            ArchiveError::Checksum {
                key,
                ours,
                theirs,
                draft,
            } => write!(
                f,
                "checksum mismatch for `{key}` in draft {draft}: we sent {ours}, the archive \
                 has {theirs}; the file was removed from the draft and nothing was published: \
                 run again to upload it anew"
            ),
            ArchiveError::Http {
                what,
                status: 0,
                message,
            } => write!(f, "{what} failed: {message}"),
            ArchiveError::Http {
                what,
                status,
                message,
            } => write!(f, "{what} failed: {status} {message}"),
        }
    }
}

impl std::error::Error for ArchiveError {}

impl From<ArchiveError> for CliError {
    fn from(e: ArchiveError) -> CliError {
        match e {
            ArchiveError::Input(_)
            | ArchiveError::NoLicense { .. }
            | ArchiveError::NoToken { .. }
            | ArchiveError::TooLarge { .. }
            | ArchiveError::State { .. } => CliError::usage(e.to_string()),
            _ => CliError::failure(e.to_string()),
        }
    }
}

fn from_cli(e: CliError) -> ArchiveError {
    ArchiveError::Input(e.message)
}

/// Where a token of `archive` is made.
pub fn token_hint(archive: &str) -> &'static str {
    if host_of(archive).ends_with("zenodo.org") {
        "on Zenodo: Account settings > Applications > Personal access tokens > New token, \
         scopes deposit:write and deposit:actions"
    } else {
        "in the archive's web page (InvenioRDM, e.g. CaltechDATA): your account menu > \
         Applications > Personal access tokens > New token, scope user:email is not needed"
    }
}

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

fn host_of(url: &str) -> String {
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
fn token_in_the_clear(archive: &str) -> Option<String> {
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

/// The state file of artifact `name` next to `manifest`.
pub fn state_path(manifest: &Path, name: &str) -> PathBuf {
    let dir = match manifest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    dir.join(format!(".{name}.publish-state.json"))
}

/// Publishes artifact `req.name` to `req.archive`; `notify` receives [`Line`]s (for a
/// terminal or a batch log).
pub fn publish(
    req: &PublishRequest,
    notify: &dyn Fn(Line, &str),
) -> Result<Published, ArchiveError> {
    // 1. Checks without a request.
    let input = Input::check(req, notify)?;
    // 2. The tarball holds the artifact (and its hashes), remembered across runs.
    let mut p = Publication::start(req, input, notify)?;
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

/// Step 1 of [`publish`]: what is known before any request.
struct Input {
    /// The archive's address, without a trailing `/`.
    archive: String,
    /// The manifest's text as read.
    text: String,
    variant: ArtifactVariant,
    license: String,
    /// InvenioRDM's `person_or_org` objects.
    creators: Vec<Value>,
    token: String,
    /// The entry's git tree hash, hex.
    tree: String,
    /// The recipe README (path, text).
    readme: Option<(PathBuf, String)>,
    tarball: PathBuf,
    /// The tarball's size.
    size: u64,
}

impl Input {
    /// The checks that need no request: the entry exists and has a `license`, creators are
    /// known, a token is set, the tarball (found, or packed) is within the archive's limits.
    fn check(req: &PublishRequest, notify: &dyn Fn(Line, &str)) -> Result<Input, ArchiveError> {
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
        let manifest_dir = crate::recipe::manifest_dir(&req.manifest).map_err(from_cli)?;
        let readme = recipe_readme(&variant.metadata, &manifest_dir);
        let tarball = find_or_pack(req, &manifest_dir, &variant, notify)?;
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

/// What step 3 of [`publish`] found: a draft to fill (with the archive's answer), or the
/// record an earlier run published just before it stopped.
enum Opened {
    Draft(DraftState, Value),
    /// The record (its id, the archive's answer).
    Published(String, Value),
}

/// One publication of an artifact to one archive, as far as it got: the checked input, the
/// verified tarball, the state file with this archive's entry (`st`, written back into `state`
/// by [`Publication::save`] between requests, so that a killed run resumes), and the result so
/// far. Each step of [`publish`] is a method.
struct Publication<'a> {
    req: &'a PublishRequest,
    notify: &'a dyn Fn(Line, &str),
    input: Input,
    client: Client<'a>,
    verified: Verified,
    /// The tarball's file key in the record.
    key: String,
    /// The record's metadata (InvenioRDM's schema).
    record_meta: Value,
    state_file: PathBuf,
    state: State,
    /// This archive's entry of `state`, as updated so far.
    st: ArchiveState,
    published: Published,
}

impl<'a> Publication<'a> {
    /// Step 2 of [`publish`]: the tarball's hashes (checked against the entry, or remembered
    /// from an earlier run), the state file, and the client.
    fn start(
        req: &'a PublishRequest,
        input: Input,
        notify: &'a dyn Fn(Line, &str),
    ) -> Result<Publication<'a>, ArchiveError> {
        let state_file = state_path(&req.manifest, &req.name);
        let mut state = state::load(&state_file)?;
        state.bind(
            &state_file,
            &req.name,
            &state::manifest_identity(&req.manifest),
        )?;
        let verified = verify_tarball(
            &input.tarball,
            input.size,
            &input.tree,
            state.verified.as_ref(),
            notify,
        )?;
        state.verified = Some(verified.clone());
        let mut st = state
            .archives
            .get(&input.archive)
            .cloned()
            .unwrap_or_default();
        st.archive = Some(input.archive.clone());
        let key = input
            .tarball
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .filter(|k| !k.is_empty() && !k.contains('/'))
            .unwrap_or_else(|| format!("{}.tar.gz", req.name));
        let published = Published {
            name: req.name.clone(),
            archive: input.archive.clone(),
            record: String::new(),
            parent: st.parent.clone(),
            doi: st.doi.clone(),
            concept_doi: st.concept_doi.clone(),
            url: None,
            draft_url: None,
            draft: req.draft_only,
            new_version: false,
            resumed: false,
            unchanged: false,
            tarball: input.tarball.clone(),
            bytes: input.size,
            sha256: verified.sha256.clone(),
            md5: verified.md5.clone(),
            index_sha256: verified.index_sha256.clone(),
            uploaded: Vec::new(),
            manifest: req.manifest.clone(),
            edit: None,
            state_file: state_file.clone(),
            warnings: Vec::new(),
        };
        let client = Client::new(
            &input.archive,
            &input.token,
            req.timeout.unwrap_or(DEFAULT_TIMEOUT),
            notify,
        )?;
        let own_dois: Vec<String> = st.doi.iter().chain(&st.concept_doi).cloned().collect();
        let (record_meta, warning) = record_metadata(
            req,
            &input.variant.metadata,
            &input.license,
            &input.creators,
            input.readme.as_ref().map(|(_, t)| t.as_str()),
            &own_dois,
        );
        let mut published = published;
        if let Some(w) = warning {
            notify(Line::Notice, &format!("warning: {w}"));
            published.warnings.push(w);
        }
        Ok(Publication {
            req,
            notify,
            input,
            client,
            verified,
            key,
            record_meta,
            state_file,
            state,
            st,
            published,
        })
    }

    /// The record a new draft is a new version of: the one the state file names (published
    /// by an earlier run), else the one the entry's download URL names.
    fn previous(&self) -> Option<String> {
        self.st
            .record
            .clone()
            .or_else(|| record_of_urls(&self.input.archive, &self.input.variant.downloads))
    }

    /// Writes this archive's entry into the state and the state file.
    fn save(&mut self) -> Result<(), ArchiveError> {
        self.state
            .archives
            .insert(self.input.archive.clone(), self.st.clone());
        state::save(&self.state_file, &self.state)
    }

    /// [`Publication::save`] with `draft` as the draft in progress.
    fn save_draft(&mut self, draft: &DraftState) -> Result<(), ArchiveError> {
        self.st.draft = Some(draft.clone());
        self.save()
    }

    /// The record already published with this content (not with `--draft`).
    fn already_published(&self) -> Option<String> {
        let same = self.st.published_sha256.as_deref() == Some(self.verified.sha256.as_str())
            && self.st.published_tree.as_deref() == Some(self.input.tree.as_str());
        self.st
            .record
            .clone()
            .filter(|_| same && !self.req.draft_only)
    }

    /// Nothing to send: `record` goes into the manifest if it is not there yet, once the
    /// archive shows that it is the state file's record and holds this tarball.
    fn unchanged(mut self, record: String) -> Result<Published, ArchiveError> {
        self.published.url = Some(file_url(&self.input.archive, &record, &self.key));
        self.published.record = record.clone();
        self.published.unchanged = true;
        if !recorded_already(self.req, &self.input.tree, &self.published) {
            let body = self.read_published(&record)?;
            state::check_record(
                &self.state_file,
                &self.input.archive,
                &record,
                self.st.parent.as_deref(),
                self.st.doi.as_deref(),
                &body,
            )?;
        }
        self.record_in_manifest()?;
        self.save()?;
        Ok(self.published)
    }

    /// Checks that `record`, named by the state file as published by an earlier run, is on the
    /// archive with the parent and DOI the state file recorded ([`state::check_record`]), before
    /// it gets a new version.
    fn check_previous(&self, record: &str) -> Result<(), ArchiveError> {
        let (status, body) = self
            .client
            .call("GET", &format!("/api/records/{record}"), None)?;
        if status != 200 && status != 404 && status != 410 {
            return Err(http_error(
                &format!("GET {}/api/records/{record}", self.input.archive),
                status,
                &body,
            ));
        }
        state::check_record(
            &self.state_file,
            &self.input.archive,
            record,
            self.st.parent.as_deref(),
            self.st.doi.as_deref(),
            &body,
        )
    }

    /// Reads the published record `id` back: its DOIs (this version's, and every version's),
    /// and its file list, which must show our tarball complete with our MD5; the download URL
    /// is that file's in the published record, never a link of the archive's answers. The
    /// record as the archive answered it.
    fn read_published(&mut self, id: &str) -> Result<Value, ArchiveError> {
        let archive = self.input.archive.clone();
        let (status, body) = self
            .client
            .call("GET", &format!("/api/records/{id}"), None)?;
        if status != 200 || body["is_published"].as_bool() != Some(true) {
            return Err(http_error(
                &format!("reading the published record {id} back"),
                status,
                &body,
            ));
        }
        let (status, files) = self
            .client
            .call("GET", &format!("/api/records/{id}/files"), None)?;
        if status != 200 {
            return Err(http_error(
                &format!("listing the files of the published record {id}"),
                status,
                &files,
            ));
        }
        let record =
            origin::published_record(&archive, id, &self.key, &self.verified.md5, &body, &files)?;
        self.published.doi = record.doi;
        self.published.concept_doi = record.concept_doi;
        self.published.parent = record.parent.or(self.published.parent.take());
        self.published.url = Some(file_url(&archive, id, &self.key));
        Ok(body)
    }

    /// Step 3 of [`publish`]: the draft of the state file, else one an earlier run created
    /// without recording it, else a new version of the record published before, else a new
    /// record; or the record itself when an earlier run published that draft.
    fn open_draft(&mut self) -> Result<Opened, ArchiveError> {
        let resumed = match self.st.draft.clone() {
            Some(d) => self.resume(d)?,
            None => None,
        };
        let (mut draft, body) = match resumed {
            Some(Opened::Published(id, body)) => return Ok(Opened::Published(id, body)),
            Some(Opened::Draft(d, body)) => (d, body),
            None => match self.created_unrecorded()? {
                Some(found) => found,
                None => self.create_draft()?,
            },
        };
        self.published.record = draft.id.clone();
        self.published.new_version = draft.new_version;
        self.published.parent = draft.parent.clone().or(self.published.parent.take());
        if draft.sha256 != self.verified.sha256 {
            // The artifact changed since the draft was started: its files are stale (replaced
            // by `keep_complete_files`, which checks them against `done` first).
            draft.sha256 = self.verified.sha256.clone();
            draft.tree = Some(self.input.tree.clone());
        }
        Ok(Opened::Draft(draft, body))
    }

    /// The draft `d` of the state file: still a draft (continued), published by the earlier
    /// run (with this content: that record; else the record a new version continues), or gone.
    fn resume(&mut self, d: DraftState) -> Result<Option<Opened>, ArchiveError> {
        let (status, body) =
            self.client
                .call("GET", &format!("/api/records/{}/draft", d.id), None)?;
        if status == 200 {
            state::check_draft(&self.state_file, &self.input.archive, &d, &body)?;
            (self.notify)(
                Line::Notice,
                &format!("continuing draft {} of an earlier run", printable(&d.id)),
            );
            self.published.resumed = true;
            return Ok(Some(Opened::Draft(d, body)));
        }
        if status != 404 {
            return Err(http_error(
                &format!("GET {}/api/records/{}/draft", self.input.archive, d.id),
                status,
                &body,
            ));
        }
        // Published by the earlier run just before it stopped?
        let (status, body) = self
            .client
            .call("GET", &format!("/api/records/{}", d.id), None)?;
        if status == 200 && body["is_published"].as_bool() == Some(true) {
            state::check_record(
                &self.state_file,
                &self.input.archive,
                &d.id,
                d.parent.as_deref(),
                None,
                &body,
            )?;
            if d.sha256 == self.verified.sha256 {
                (self.notify)(
                    Line::Notice,
                    &format!("draft {} was published by an earlier run", printable(&d.id)),
                );
                return Ok(Some(Opened::Published(d.id, body)));
            }
            // Published with other content: this content is its next version.
            self.st.record = Some(d.id.clone());
            self.st.parent.clone_from(&d.parent);
            self.st.doi = None;
        }
        self.st.draft = None;
        Ok(None)
    }

    /// A new draft: a new version of the previous record, else a new record. Before a new
    /// record is asked for, the state file says so (`creating`), so that a run killed before
    /// the archive's answer is saved finds that draft again ([`Self::created_unrecorded`]);
    /// a new version needs no such note, the archive answers the parent's existing draft.
    fn create_draft(&mut self) -> Result<(DraftState, Value), ArchiveError> {
        let intent = Creating {
            sha256: self.verified.sha256.clone(),
            title: self.record_meta["metadata"]["title"]
                .as_str()
                .unwrap_or("")
                .to_owned(),
            publication_date: self.record_meta["metadata"]["publication_date"]
                .as_str()
                .unwrap_or("")
                .to_owned(),
            not_before: clima_artifact_fs::utc_timestamp(
                std::time::SystemTime::now()
                    .checked_sub(CLOCK_SLACK)
                    .unwrap_or(std::time::UNIX_EPOCH),
            ),
        };
        let previous = self.previous();
        if let Some(record) = &self.st.record {
            self.check_previous(record)?;
        }
        if previous.is_none() {
            self.st.creating = Some(intent.clone());
            self.save()?;
        }
        // A try whose answer was lost may have made the draft: found, it is the answer.
        // (Asked only after such a try: once asked, a later refusal does not prove that
        // nothing was made.)
        let asked = std::cell::Cell::new(false);
        let made = || {
            asked.set(true);
            let (id, body) = self.find_draft(&intent).ok().flatten()?;
            (self.notify)(
                Line::Notice,
                &format!(
                    "the archive made draft {} before its answer was lost; continuing it",
                    printable(&id)
                ),
            );
            Some(body)
        };
        let created = new_draft(
            &self.client,
            &self.input.archive,
            previous.as_deref(),
            &self.record_meta,
            (&self.verified, &self.input.tree),
            &made,
        );
        if let Err(e) = &created
            && self.st.creating.is_some()
            && !asked.get()
            && refused(e)
        {
            // The archive answered every try, and made nothing.
            self.st.creating = None;
            self.save()?;
        }
        let (d, body) = created?;
        self.st.creating = None;
        self.save_draft(&d)?;
        (self.notify)(
            Line::Notice,
            &format!(
                "{} {} on {}",
                if d.new_version {
                    "new version draft"
                } else {
                    "new draft"
                },
                printable(&d.id),
                self.input.archive
            ),
        );
        Ok((d, body))
    }

    /// The draft of a new record that an earlier run asked for (the state file's `creating`)
    /// but was killed before it saved the archive's answer: the newest of the user's records
    /// (`GET /api/user/records`) that is a draft never published, of a first version, with the
    /// title and publication date that run sent ([`Self::find_draft`]). `None` when there is no
    /// such note or draft.
    fn created_unrecorded(&mut self) -> Result<Option<(DraftState, Value)>, ArchiveError> {
        let Some(intent) = self.st.creating.clone() else {
            return Ok(None);
        };
        if self.previous().is_some() {
            return Ok(None);
        }
        let Some((id, body)) = self.find_draft(&intent)? else {
            return Ok(None);
        };
        (self.notify)(
            Line::Notice,
            &format!(
                "continuing draft {}, which an earlier run created just before it stopped",
                printable(&id)
            ),
        );
        self.published.resumed = true;
        let d = DraftState {
            id,
            sha256: intent.sha256,
            tree: Some(self.input.tree.clone()),
            parent: state::parent_of(&body)
                .filter(|p| origin::is_record_id(p))
                .map(str::to_owned),
            new_version: false,
            done: BTreeMap::new(),
        };
        self.st.creating = None;
        self.save_draft(&d)?;
        Ok(Some((d, body)))
    }

    /// The draft `intent` describes among the user's records (`GET /api/user/records`, newest
    /// first): never published, a first version, no files yet, created after the note, with
    /// the title and publication date sent; its id and the draft as read (`GET
    /// /api/records/{id}/draft`, not the search index's copy). Several such drafts (another
    /// checkout publishing the same name the same day) are none: which is ours cannot be told,
    /// so none is taken over, and the user is told their ids.
    fn find_draft(&self, intent: &Creating) -> Result<Option<(String, Value)>, ArchiveError> {
        let (status, listing) =
            self.client
                .call("GET", "/api/user/records?sort=newest&size=25", None)?;
        if status != 200 {
            return Ok(None);
        }
        // Both UTC, compared to the second (`YYYY-MM-DDTHH:MM:SS`).
        let created_after = |r: &Value| {
            let created = r["created"].as_str().and_then(|c| c.get(..19));
            matches!((created, intent.not_before.get(..19)), (Some(c), Some(n)) if c >= n)
        };
        let ids: Vec<&str> = listing["hits"]["hits"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| {
                r["is_published"].as_bool() == Some(false)
                    && r["versions"]["index"].as_u64() == Some(1)
                    && r["files"]["count"].as_u64().unwrap_or(0) == 0
                    && r["metadata"]["title"].as_str() == Some(intent.title.as_str())
                    && r["metadata"]["publication_date"].as_str()
                        == Some(intent.publication_date.as_str())
                    && created_after(r)
            })
            .filter_map(|r| r["id"].as_str())
            .filter(|id| {
                !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            })
            .collect();
        let id = match ids[..] {
            [id] => id.to_owned(),
            [] => return Ok(None),
            _ => {
                (self.notify)(
                    Line::Notice,
                    &format!(
                        "drafts {} all look like the one an earlier run asked for; none is \
                         continued and a new draft is made (delete those you do not want)",
                        ids.join(", ")
                    ),
                );
                return Ok(None);
            }
        };
        let (status, body) = self
            .client
            .call("GET", &format!("/api/records/{id}/draft"), None)?;
        Ok((status == 200).then_some((id, body)))
    }

    /// Step 5 of [`publish`]: the tarball and the recipe README into `draft`, each file
    /// recorded in the state file once committed with the right checksum.
    fn upload_files(&mut self, draft: &mut DraftState) -> Result<(), ArchiveError> {
        let mut files: Vec<(String, Upload)> = vec![(
            self.key.clone(),
            Upload::File {
                path: self.input.tarball.clone(),
                size: self.input.size,
                md5: self.verified.md5.clone(),
            },
        )];
        if let Some((_, text)) = &self.input.readme {
            files.push((
                crate::recipe::README_FILE.to_owned(),
                Upload::Bytes(text.clone().into_bytes()),
            ));
        }
        keep_complete_files(&self.client, &self.state_file, draft, &files)?;
        for (k, upload) in &files {
            if draft.done.get(k).is_some_and(|m| *m == upload.md5()) {
                (self.notify)(
                    Line::Notice,
                    &format!("`{}` is already in the draft", printable(k)),
                );
                continue;
            }
            let theirs = send_file(&self.client, &draft.id, k, upload)?;
            let sent_md5 = upload.md5();
            let ours = format!("md5:{sent_md5}");
            if theirs != ours {
                self.client.delete_file(&draft.id, k)?;
                draft.done.remove(k);
                self.save_draft(draft)?;
                return Err(ArchiveError::Checksum {
                    key: k.clone(),
                    ours: format!("md5:{}", upload.md5()),
                    theirs: printable(&theirs).into_owned(),
                    draft: draft.id.clone(),
                });
            }
            (self.notify)(
                Line::Notice,
                &format!("`{}` committed, checksum {ours} matches", printable(k)),
            );
            draft.done.insert(k.clone(), sent_md5);
            self.published.uploaded.push(k.clone());
            self.save_draft(draft)?;
        }
        Ok(())
    }

    /// Step 6 of [`publish`] with `--draft`: the draft stays for review, at its web page.
    fn stop_at_draft(
        mut self,
        draft: &DraftState,
        draft_body: &Value,
    ) -> Result<Published, ArchiveError> {
        self.published.draft_url = Some(origin::review_page(
            &self.input.archive,
            &draft.id,
            draft_body,
        ));
        self.save_draft(draft)?;
        Ok(self.published)
    }

    /// After a publish answered `body` for draft `id` (now or by an earlier run): the record
    /// read back ([`Self::read_published`]), the state, the manifest.
    fn finish_published(mut self, id: &str, body: &Value) -> Result<Published, ArchiveError> {
        let answered = checked_id(&self.input.archive, "the publish", &body["id"])?;
        if answered != id {
            return Err(ArchiveError::Untrusted(format!(
                "{} answered record {answered} to the publish of draft {id}; the manifest was \
                 not changed: look at both in the archive's web page",
                self.input.archive
            )));
        }
        self.published.record = id.to_owned();
        self.published.draft = false;
        self.st.record = Some(id.to_owned());
        self.st.parent.clone_from(&self.published.parent);
        self.st.published_sha256 = Some(self.published.sha256.clone());
        self.st.published_tree = Some(self.input.tree.clone());
        self.st.draft = None;
        self.save()?;
        self.read_published(id)?;
        self.st.parent.clone_from(&self.published.parent);
        self.st.doi.clone_from(&self.published.doi);
        self.st.concept_doi.clone_from(&self.published.concept_doi);
        self.save()?;
        self.record_in_manifest()?;
        Ok(self.published)
    }

    /// The edit of the manifest that records the published tarball (`Published::edit`).
    fn record_in_manifest(&mut self) -> Result<(), ArchiveError> {
        let edit = record_in_manifest(
            self.req,
            &self.input.text,
            &self.input.tree,
            &self.published,
        )?;
        self.published.edit = Some(edit);
        Ok(())
    }
}

/// Whether the archive answered `e` to a request, refusing it (so it did nothing), rather than
/// failing to answer.
fn refused(e: &ArchiveError) -> bool {
    match e {
        ArchiveError::Unauthorized { .. } | ArchiveError::Rejected { .. } => true,
        ArchiveError::Http { status, .. } => (400..500).contains(status),
        _ => false,
    }
}

/// Step 1 of [`publish`] for the name and the address: a valid artifact name, and an http(s)
/// `--archive` without credentials in it; the address without a trailing `/`.
fn checked_archive(req: &PublishRequest) -> Result<String, ArchiveError> {
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
fn single_variant(
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
fn check_limits(
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

/// Step 3 of [`publish`] without a draft to continue: a new version of the `previous` record,
/// else a new record with `record_meta` (`made`: the draft a try whose answer was lost made, see
/// [`Client::call_making`]); the draft's state for the artifact `verified` of tree `tree`, and
/// the archive's answer.
fn new_draft(
    client: &Client<'_>,
    archive: &str,
    previous: Option<&str>,
    record_meta: &Value,
    (verified, tree): (&Verified, &str),
    made: &dyn Fn() -> Option<Value>,
) -> Result<(DraftState, Value), ArchiveError> {
    let (status, body, new_version) = match previous {
        Some(prev) => {
            let (s, b) = client.call(
                "POST",
                &format!("/api/records/{prev}/versions"),
                Some(&json!({})),
            )?;
            (s, b, true)
        }
        None => {
            let (s, b) = client.call_making("POST", "/api/records", Some(record_meta), made)?;
            (s, b, false)
        }
    };
    if status != 201 && status != 200 {
        return Err(http_error(
            &format!("creating a draft on {archive}"),
            status,
            &body,
        ));
    }
    let id = checked_id(archive, "the new draft", &body["id"])?;
    let parent = checked_id(archive, "the new draft's parent", &body["parent"]["id"])?;
    let d = DraftState {
        id,
        sha256: verified.sha256.clone(),
        tree: Some(tree.to_owned()),
        parent: Some(parent),
        new_version,
        done: BTreeMap::new(),
    };
    Ok((d, body))
}

/// Step 4 of [`publish`]: sets the metadata of draft `draft_id`, which the archive checks
/// before any upload.
fn put_metadata(
    client: &Client<'_>,
    archive: &str,
    draft_id: &str,
    record_meta: &Value,
) -> Result<(), ArchiveError> {
    let (status, body) = client.call(
        "PUT",
        &format!("/api/records/{draft_id}/draft"),
        Some(record_meta),
    )?;
    if status != 200 {
        return Err(http_error(
            &format!("setting the metadata of draft {draft_id}"),
            status,
            &body,
        ));
    }
    let errors = field_errors(&body);
    if !errors.is_empty() {
        return Err(ArchiveError::Rejected {
            archive: archive.to_owned(),
            errors,
        });
    }
    Ok(())
}

/// Step 5 of [`publish`], before uploading: the files already in the draft, once checked
/// against the state file `state_file` ([`state::check_files`]: none that this run does not
/// upload and the state file never recorded), that are complete and are one of `files` with
/// the same MD5 are marked done; any other is deleted.
fn keep_complete_files(
    client: &Client<'_>,
    state_file: &Path,
    draft: &mut DraftState,
    files: &[(String, Upload)],
) -> Result<(), ArchiveError> {
    let (status, listing) = client.call(
        "GET",
        &format!("/api/records/{}/draft/files", draft.id),
        None,
    )?;
    if status != 200 {
        return Err(http_error(
            &format!("listing the files of draft {}", draft.id),
            status,
            &listing,
        ));
    }
    let present: BTreeMap<String, (String, Option<String>)> = listing["entries"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| {
            Some((
                e["key"].as_str()?.to_owned(),
                (
                    e["status"].as_str().unwrap_or("").to_owned(),
                    e["checksum"].as_str().map(str::to_owned),
                ),
            ))
        })
        .collect();
    for k in present.keys() {
        checked_key(&client.base, &draft.id, k)?;
    }
    let ours: Vec<&str> = files.iter().map(|(k, _)| k.as_str()).collect();
    state::check_files(state_file, &client.base, draft, &present, &ours)?;
    draft.done.retain(|k, _| present.contains_key(k));
    for (k, (status, checksum)) in &present {
        let wanted = files.iter().find(|(w, _)| w == k);
        let good = wanted.is_some_and(|(_, u)| {
            status == "completed" && checksum.as_deref() == Some(&format!("md5:{}", u.md5()))
        });
        if good {
            draft.done.insert(k.clone(), files_md5(files, k));
        } else {
            client.delete_file(&draft.id, k)?;
            draft.done.remove(k);
        }
    }
    Ok(())
}

/// Step 5 of [`publish`] for one file: starts its upload to draft `draft_id`, sends `upload`
/// and commits it; the checksum the archive answers (`md5:...`, empty without one).
fn send_file(
    client: &Client<'_>,
    draft_id: &str,
    k: &str,
    upload: &Upload,
) -> Result<String, ArchiveError> {
    let (status, body) = client.call(
        "POST",
        &format!("/api/records/{draft_id}/draft/files"),
        Some(&json!([{ "key": k }])),
    )?;
    if status != 201 && status != 200 {
        return Err(http_error(
            &format!("starting the upload of `{k}`"),
            status,
            &body,
        ));
    }
    client.upload(draft_id, k, upload)?;
    let (status, body) = client.call(
        "POST",
        &format!("/api/records/{draft_id}/draft/files/{k}/commit"),
        None,
    )?;
    if status != 200 && status != 201 {
        return Err(http_error(
            &format!("committing `{k}` to draft {draft_id}"),
            status,
            &body,
        ));
    }
    Ok(body["checksum"].as_str().unwrap_or("").to_owned())
}

/// Step 6 of [`publish`]: publishes draft `draft_id`; the archive's answer (the record).
fn publish_draft(
    client: &Client<'_>,
    archive: &str,
    draft_id: &str,
) -> Result<Value, ArchiveError> {
    let (status, body) = client.call(
        "POST",
        &format!("/api/records/{draft_id}/draft/actions/publish"),
        None,
    )?;
    if status == 400 {
        let errors = field_errors(&body);
        if !errors.is_empty() {
            return Err(ArchiveError::Rejected {
                archive: archive.to_owned(),
                errors,
            });
        }
    }
    if status != 202 && status != 200 {
        return Err(http_error(
            &format!("publishing draft {draft_id}"),
            status,
            &body,
        ));
    }
    Ok(body)
}

/// The archive's keys of the manifest entry: the record's DOI and its parent's.
fn archive_keys(published: &Published) -> Vec<(&'static str, String)> {
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
fn recorded_already(req: &PublishRequest, tree: &str, published: &Published) -> bool {
    let Ok(text) = std::fs::read_to_string(&req.manifest) else {
        return false;
    };
    recorded_in(&text, req, tree, published)
}

fn recorded_in(text: &str, req: &PublishRequest, tree: &str, published: &Published) -> bool {
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
fn record_in_manifest(
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
    let (new_text, outcome) = upsert_entry(&now, &req.manifest, &update).map_err(from_cli)?;
    if new_text != now {
        clima_artifact_fs::write_atomically(&req.manifest, new_text.as_bytes()).map_err(|e| {
            ArchiveError::Io(format!("cannot write `{}`: {e}", req.manifest.display()))
        })?;
    }
    Ok(outcome)
}

/// `{archive}/api/records/{id}/files/{key}/content`.
pub fn file_url(archive: &str, id: &str, key: &str) -> String {
    format!(
        "{}/api/records/{id}/files/{key}/content",
        archive.trim_end_matches('/')
    )
}

/// The record id of a download URL of this archive (`/api/records/{id}/files/...` or
/// `/records/{id}/files/...`), the record a new version continues.
fn record_of_urls(
    archive: &str,
    downloads: &[clima_artifact_manifest::Download],
) -> Option<String> {
    downloads.iter().find_map(|d| {
        let rest = d.url.strip_prefix(archive)?;
        let rest = rest
            .strip_prefix("/api/records/")
            .or_else(|| rest.strip_prefix("/records/"))?;
        let (id, tail) = rest.split_once('/')?;
        (tail.starts_with("files/") && !id.is_empty()).then(|| id.to_owned())
    })
}

/// The creators, as InvenioRDM's `person_or_org` objects.
fn creators(
    req: &PublishRequest,
    meta: &BTreeMap<String, String>,
) -> Result<Vec<Value>, ArchiveError> {
    let given: Vec<String> = if req.creators.is_empty() {
        meta.get(metadata::MAINTAINER)
            .map(|m| {
                // "Name <email>" or "Name (email)": the name part.
                m.split(['<', '(']).next().unwrap_or("").trim().to_owned()
            })
            .filter(|m| !m.is_empty())
            .into_iter()
            .collect()
    } else {
        req.creators.clone()
    };
    if given.is_empty() {
        return Err(ArchiveError::Input(format!(
            "artifact `{}` has no `maintainer` and no --creator was given; an archive record \
             needs its creators: pass --creator \"Family, Given\" (repeatable)",
            req.name
        )));
    }
    given
        .iter()
        .map(|c| {
            let c = c.trim();
            if c.is_empty() || c.chars().any(char::is_control) {
                return Err(ArchiveError::Input(format!(
                    "--creator `{}` is empty or has control characters; write \"Family, Given\"",
                    printable(c)
                )));
            }
            Ok(match c.split_once(',') {
                Some((family, given)) => json!({"person_or_org": {
                    "type": "personal",
                    "family_name": family.trim(),
                    "given_name": given.trim(),
                }}),
                None => json!({"person_or_org": {"type": "organizational", "name": c}}),
            })
        })
        .collect()
}

/// The recipe README (key and text), when the entry has a recipe folder with one.
fn recipe_readme(
    meta: &BTreeMap<String, String>,
    manifest_dir: &Path,
) -> Option<(PathBuf, String)> {
    let key = meta.get(metadata::RECIPE)?;
    let rel = Path::new(key);
    if !rel
        .components()
        .all(|c| matches!(c, std::path::Component::Normal(_)))
    {
        return None;
    }
    let path = manifest_dir.join(rel).join(crate::recipe::README_FILE);
    let text = clima_artifact_fs::read_shared_text(&path, 1 << 20).ok()??;
    Some((path, text))
}

/// The first paragraph of the README's Contents section (or the first paragraph of text).
fn readme_description(readme: &str) -> Option<String> {
    let contents = clima_artifact_provenance::readme::section_text(
        readme,
        &clima_artifact_provenance::readme::SECTIONS[0],
    )?;
    let para: Vec<&str> = contents
        .lines()
        .skip_while(|l| l.trim().is_empty())
        .take_while(|l| !l.trim().is_empty())
        .collect();
    let para = para.join(" ").trim().to_owned();
    (!para.is_empty()).then_some(para)
}

/// The README's first `# ` heading.
fn readme_title(readme: &str) -> Option<String> {
    readme
        .lines()
        .find_map(|l| l.strip_prefix("# "))
        .map(|t| t.trim().trim_end_matches('#').trim().to_owned())
        .filter(|t| !t.is_empty())
}

/// The record's metadata (InvenioRDM's schema), and a warning when it has no description of
/// its own (neither the entry's `description` nor a README Contents paragraph).
fn record_metadata(
    req: &PublishRequest,
    meta: &BTreeMap<String, String>,
    license: &str,
    creators: &[Value],
    readme: Option<&str>,
    own_dois: &[String],
) -> (Value, Option<String>) {
    let title = readme
        .and_then(readme_title)
        .or_else(|| meta.get(metadata::DESCRIPTION).cloned())
        .unwrap_or_else(|| req.name.clone());
    let mut description = meta.get(metadata::DESCRIPTION).cloned().unwrap_or_default();
    if let Some(d) = readme.and_then(readme_description)
        && d != description
    {
        if !description.is_empty() {
            description.push_str("\n\n");
        }
        description.push_str(&d);
    }
    let mut warning = None;
    if description.trim().is_empty() {
        description = format!("The artifact `{}` of a clima-artifacts manifest.", req.name);
        warning = Some(format!(
            "artifact `{}` has no `description` and no recipe README with a Contents paragraph: \
             the record's description would only be \"{description}\"; add a `description` to \
             the entry in `{}` (or a README.md with a Contents section to its recipe folder) before \
             publishing",
            req.name,
            req.manifest.display()
        ));
    }
    let mut related = Vec::new();
    if let Some(doi) = meta.get(metadata::DOI)
        && !own_dois.contains(doi)
    {
        related.push(json!({"identifier": doi, "scheme": "doi",
            "relation_type": {"id": "isderivedfrom"}}));
    }
    if let Some(src) = meta.get(metadata::SOURCE)
        && (src.starts_with("https://") || src.starts_with("http://"))
    {
        related.push(json!({"identifier": src, "scheme": "url",
            "relation_type": {"id": "isderivedfrom"}}));
    }
    let mut m = json!({
        "resource_type": {"id": "dataset"},
        "title": title,
        "publication_date": today(),
        "creators": creators,
        "description": description,
        "rights": [{"id": license.trim().to_ascii_lowercase()}],
    });
    if !related.is_empty() {
        m["related_identifiers"] = Value::Array(related);
    }
    if let Some(v) = meta.get(metadata::VERSION) {
        m["version"] = json!(v);
    }
    // DataCite needs a publisher; recent InvenioRDM versions ask for it as a field.
    if let Some(publisher) = publisher_of(&req.archive) {
        m["publisher"] = json!(publisher);
    }
    let record = json!({
        "metadata": m,
        "access": {"record": "public", "files": "public"},
        "files": {"enabled": true},
    });
    (record, warning)
}

/// The `publisher` of the known archives (their own name), by host.
fn publisher_of(archive: &str) -> Option<&'static str> {
    let host = host_of(archive);
    if host.ends_with("zenodo.org") {
        Some("Zenodo")
    } else if host.ends_with("caltech.edu") || host.ends_with("caltechlibrary.dev") {
        Some("CaltechDATA")
    } else {
        None
    }
}

/// Today's date, UTC, `YYYY-MM-DD`.
fn today() -> String {
    let days = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400) as i64;
    // Days since 1970-01-01 to a civil date (proleptic Gregorian).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// `(field, message)` of an InvenioRDM error list, escaped.
fn field_errors(body: &Value) -> Vec<(String, String)> {
    body["errors"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            let field = e["field"].as_str().unwrap_or("?");
            let messages: Vec<String> = match &e["messages"] {
                Value::Array(a) => a
                    .iter()
                    .map(|m| m.as_str().map_or_else(|| m.to_string(), str::to_owned))
                    .collect(),
                Value::String(s) => vec![s.clone()],
                other => vec![other.to_string()],
            };
            (
                printable(field).into_owned(),
                printable(&messages.join(" ")).into_owned(),
            )
        })
        .collect()
}

fn http_error(what: &str, status: u16, body: &Value) -> ArchiveError {
    let errors = field_errors(body);
    let mut message = body["message"]
        .as_str()
        .map(|m| printable(m).into_owned())
        .unwrap_or_default();
    for (f, m) in errors {
        message.push_str(&format!(" `{f}`: {m};"));
    }
    ArchiveError::Http {
        what: what.to_owned(),
        status,
        message,
    }
}

/// The tarball to upload: given, found, or packed from the installed copy.
fn find_or_pack(
    req: &PublishRequest,
    manifest_dir: &Path,
    variant: &clima_artifact_manifest::ArtifactVariant,
    notify: &dyn Fn(Line, &str),
) -> Result<PathBuf, ArchiveError> {
    let regular = |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.is_file());
    if let Some(t) = &req.tarball {
        if !regular(t) {
            return Err(ArchiveError::Input(format!(
                "tarball `{}` is not a file; pass the .tar.gz written by `create`",
                t.display()
            )));
        }
        return Ok(t.clone());
    }
    let file = format!("{}.tar.gz", req.name);
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    for dir in [manifest_dir, cwd.as_path()] {
        let p = dir.join(&file);
        if regular(&p) {
            return Ok(p);
        }
    }
    // Pack the installed copy, as `create` would.
    let config = crate::depots::config().map_err(from_cli)?;
    let depots = config.search_depots();
    let Some((_, dir)) = crate::depots::installed_in(&depots, &variant.git_tree_sha1) else {
        return Err(ArchiveError::Input(format!(
            "no tarball of `{}`: found no `{file}` in `{}` or the current folder, and the \
             artifact is not installed; run `clima-artifacts create` (or `fetch {}`) first, or \
             pass --tarball",
            req.name,
            manifest_dir.display(),
            req.name
        )));
    };
    let out = cwd.join(&file);
    notify(
        Line::Notice,
        &format!(
            "packing `{}` from {} into {}",
            req.name,
            dir.display(),
            out.display()
        ),
    );
    let entries = crate::tarball::collect_entries(&dir).map_err(from_cli)?;
    crate::tarball::check_symlinks(&dir, &entries).map_err(from_cli)?;
    let flavour = seekable::Flavour::Gzip;
    let block = seekable::DEFAULT_BLOCK_SIZE;
    let made = crate::tarball::write_seekable(&dir, &entries, &out, flavour, block, &|_| {})
        .map_err(from_cli)?;
    if made.tree_hash != variant.git_tree_sha1 {
        return Err(ArchiveError::Input(format!(
            "the installed copy `{}` has content {}, not {}; run `clima-artifacts verify {}`",
            dir.display(),
            made.tree_hash,
            variant.git_tree_sha1,
            req.name
        )));
    }
    Ok(made.path)
}

/// A reader computing SHA-256 and MD5 of what passes.
struct Hashing<R> {
    inner: R,
    sha256: sha2::Sha256,
    md5: md5::Md5,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        sha2::Digest::update(&mut self.sha256, &buf[..n]);
        md5::Digest::update(&mut self.md5, &buf[..n]);
        Ok(n)
    }
}

fn mtime_ns(meta: &std::fs::Metadata) -> u128 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos())
}

/// Checks that the tarball holds `tree` (unpacking it into a temp folder) and returns its
/// hashes; a tarball verified before (same path, size and mtime) is not read again.
fn verify_tarball(
    tarball: &Path,
    size: u64,
    tree: &str,
    known: Option<&Verified>,
    notify: &dyn Fn(Line, &str),
) -> Result<Verified, ArchiveError> {
    let path = std::path::absolute(tarball).unwrap_or_else(|_| tarball.to_path_buf());
    let meta = std::fs::metadata(&path)
        .map_err(|e| ArchiveError::Io(format!("cannot read `{}`: {e}", path.display())))?;
    let mtime = mtime_ns(&meta);
    if let Some(k) = known
        && k.path == path
        && k.size == size
        && k.mtime_ns == mtime
        && k.tree == tree
    {
        return Ok(k.clone());
    }
    notify(
        Line::Notice,
        &format!(
            "checking that `{}` holds artifact content {tree}",
            path.display()
        ),
    );
    let tmp = tempfile::tempdir()
        .map_err(|e| ArchiveError::Io(format!("cannot create a temporary folder: {e}")))?;
    let dest = tmp.path().join("content");
    std::fs::create_dir(&dest)
        .map_err(|e| ArchiveError::Io(format!("cannot create `{}`: {e}", dest.display())))?;
    let file = std::fs::File::open(&path)
        .map_err(|e| ArchiveError::Io(format!("cannot open `{}`: {e}", path.display())))?;
    let mut reader = Hashing {
        inner: file,
        sha256: sha2::Sha256::new(),
        md5: md5::Md5::new(),
    };
    let extracted = clima_artifact_runtime::extract::extract_archive(
        io::BufReader::with_capacity(1 << 20, &mut reader),
        &dest,
        &clima_artifact_runtime::extract::ExtractLimits {
            max_unpacked_bytes: 1 << 40,
            ..Default::default()
        },
    )
    .map_err(|e| {
        ArchiveError::Input(format!(
            "`{}` is not a usable artifact tarball: {e}; pass the .tar.gz written by `create`",
            path.display()
        ))
    })?;
    // Trailing bytes after the archive's end count in the file's hashes too.
    io::copy(&mut reader, &mut io::sink())
        .map_err(|e| ArchiveError::Io(format!("cannot read `{}`: {e}", path.display())))?;
    let got = extracted.tree_hash.to_hex();
    if got != tree {
        return Err(ArchiveError::Input(format!(
            "`{}` holds artifact content {got}, but the manifest's entry is {tree}; nothing was \
             sent: publish the tarball `create` wrote for this entry, or run `create` again",
            path.display()
        )));
    }
    let index_sha256 = crate::tarball::index_sha256_of(&path, &extracted.tree_hash)
        .map_err(|e| ArchiveError::Input(e.message))?
        .map(|h| h.to_hex());
    Ok(Verified {
        path,
        size,
        mtime_ns: mtime,
        tree: got,
        sha256: hex::encode(reader.sha256.finalize()),
        md5: hex::encode(reader.md5.finalize()),
        index_sha256,
    })
}

/// A file to upload.
enum Upload {
    /// A file on disk, streamed, with its MD5 from the verification pass.
    File {
        path: PathBuf,
        size: u64,
        md5: String,
    },
    /// Small bytes (the README).
    Bytes(Vec<u8>),
}

impl Upload {
    fn md5(&self) -> String {
        match self {
            Upload::File { md5, .. } => md5.clone(),
            Upload::Bytes(b) => hex::encode(md5::Md5::digest(b)),
        }
    }
}

fn files_md5(files: &[(String, Upload)], key: &str) -> String {
    files
        .iter()
        .find(|(k, _)| k == key)
        .map_or_else(String::new, |(_, u)| u.md5())
}

/// The archive's HTTP client: bearer token, retries, `Retry-After`.
struct Client<'a> {
    base: String,
    token: String,
    agent: ureq::Agent,
    retry: RetryPolicy,
    /// The bound of one exchange ([`PublishRequest::timeout`]).
    timeout: Duration,
    /// The longest a write may wait for the archive to take bytes (the stall timeout).
    stall: Duration,
    notify: &'a dyn Fn(Line, &str),
}

/// One request's outcome before classification.
enum Outcome {
    Answer(u16, Option<Duration>, Value),
    Broken(io::Error),
}

impl<'a> Client<'a> {
    fn new(
        base: &str,
        token: &str,
        timeout: Duration,
        notify: &'a dyn Fn(Line, &str),
    ) -> Result<Client<'a>, ArchiveError> {
        let net = crate::depots::config().map_err(from_cli)?.net;
        let agent = clima_artifact_net::source::agent(&net)
            .map_err(|e| ArchiveError::Input(e.to_string()))?;
        Ok(Client {
            base: base.to_owned(),
            token: token.to_owned(),
            agent,
            retry: net.retry,
            timeout,
            stall: net.stall_timeout,
            notify,
        })
    }

    /// Sends one request, `body` made fresh for each try; retries transient failures and
    /// waits out `429`; `401`/`403` are errors naming the token variable.
    fn send(
        &self,
        what: &str,
        attempt: &mut dyn FnMut() -> Outcome,
    ) -> Result<(u16, Value), ArchiveError> {
        let mut failed = 0u32;
        let mut throttled = 0u32;
        loop {
            let (transient, reason) = match attempt() {
                Outcome::Answer(429, retry_after, body) => {
                    throttled += 1;
                    if throttled > MAX_THROTTLED {
                        return Err(http_error(what, 429, &body));
                    }
                    let wait = retry_after
                        .unwrap_or_else(|| self.retry.backoff(throttled))
                        .min(MAX_RETRY_AFTER);
                    (self.notify)(
                        Line::Notice,
                        &format!(
                            "{} answered 429 Too Many Requests to {what}: waiting {} s (Retry-After) \
                         before trying again",
                            self.base,
                            wait.as_secs_f64().ceil() as u64
                        ),
                    );
                    std::thread::sleep(wait);
                    continue;
                }
                Outcome::Answer(status @ (401 | 403), _, body) => {
                    return Err(ArchiveError::Unauthorized {
                        status,
                        archive: self.base.clone(),
                        message: body["message"]
                            .as_str()
                            .map(|m| printable(m).into_owned())
                            .unwrap_or_default(),
                    });
                }
                Outcome::Answer(status, _, body) if is_transient_status(status) => (
                    true,
                    format!("{status} {}", body["message"].as_str().unwrap_or("")),
                ),
                Outcome::Answer(status, _, body) => return Ok((status, body)),
                Outcome::Broken(e) => (is_transient_io(&e), e.to_string()),
            };
            failed += 1;
            let reason = printable(reason.trim()).into_owned();
            match self.retry.next_attempt(failed, transient) {
                Some(wait) => {
                    (self.notify)(
                        Line::Notice,
                        &format!(
                            "{what} failed ({reason}); trying again in {:.1} s (try {} of {})",
                            wait.as_secs_f64(),
                            failed + 1,
                            self.retry.attempts
                        ),
                    );
                    std::thread::sleep(wait);
                }
                None => {
                    return Err(ArchiveError::Http {
                        what: what.to_owned(),
                        status: 0,
                        message: format!("{reason} (after {failed} tries)"),
                    });
                }
            }
        }
    }

    /// A JSON request to `path` (under the archive's URL).
    fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(u16, Value), ArchiveError> {
        self.call_making(method, path, body, &|| None)
    }

    /// [`Client::call`] for a request that makes something (a new record): a try without an
    /// answer (a broken connection, a `5xx`) may have made it all the same, so before the next
    /// try `made` is asked for what the lost answer would have said; found, that is the answer
    /// (`201`) and the request is not sent again.
    fn call_making(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        made: &dyn Fn() -> Option<Value>,
    ) -> Result<(u16, Value), ArchiveError> {
        let url = format!("{}{path}", self.base);
        let what = format!("{method} {url}");
        let text = body.map(Value::to_string);
        let mut unanswered = false;
        self.send(&what, &mut || {
            if unanswered && let Some(found) = made() {
                return Outcome::Answer(201, None, found);
            }
            let builder = ureq::http::Request::builder()
                .method(method)
                .uri(&url)
                .header("Authorization", format!("Bearer {}", self.token))
                .header("Accept", "application/json");
            let result = match &text {
                Some(t) => builder
                    .header("Content-Type", "application/json")
                    .body(t.clone())
                    .map_err(io::Error::other)
                    .and_then(|r| self.run(r, self.timeout)),
                None => builder
                    .body(())
                    .map_err(io::Error::other)
                    .and_then(|r| self.run(r, self.timeout)),
            };
            let outcome = match result {
                Ok(resp) => answer_of(resp, self.timeout),
                Err(e) => Outcome::Broken(e),
            };
            // Once a try went unanswered, every later try asks first: a later answer (a
            // 429, say) does not undo what the lost one may have made.
            unanswered |= match &outcome {
                Outcome::Answer(status, ..) => *status >= 500,
                Outcome::Broken(_) => true,
            };
            outcome
        })
    }

    fn delete_file(&self, id: &str, key: &str) -> Result<(), ArchiveError> {
        let (status, body) = self.call(
            "DELETE",
            &format!("/api/records/{id}/draft/files/{key}"),
            None,
        )?;
        if status == 204 || status == 200 || status == 404 {
            Ok(())
        } else {
            Err(http_error(
                &format!("removing `{key}` from draft {id}"),
                status,
                &body,
            ))
        }
    }

    /// Streams a file's content (the whole file again on each try: the API has no ranges).
    fn upload(&self, id: &str, key: &str, upload: &Upload) -> Result<(), ArchiveError> {
        let url = format!("{}/api/records/{id}/draft/files/{key}/content", self.base);
        let what = format!("uploading `{key}` to draft {id}");
        let (status, body) = self.send(&what, &mut || {
            let (reader, size): (Box<dyn Read>, u64) = match upload {
                Upload::File { path, size, .. } => match std::fs::File::open(path) {
                    Ok(f) => (Box::new(f), *size),
                    Err(e) => return Outcome::Broken(io::Error::new(io::ErrorKind::NotFound, e)),
                },
                Upload::Bytes(b) => (Box::new(io::Cursor::new(b.clone())), b.len() as u64),
            };
            let mut progress = Progress::new(key, size, self.notify);
            let mut body = Counted {
                inner: reader,
                progress: &mut progress,
            };
            let request = ureq::http::Request::builder()
                .method("PUT")
                .uri(&url)
                .header("Authorization", format!("Bearer {}", self.token))
                .header("Content-Type", "application/octet-stream")
                .header("Content-Length", size.to_string())
                .body(ureq::SendBody::from_reader(&mut body));
            let budget = upload_budget(self.timeout, size);
            let result = request
                .map_err(io::Error::other)
                .and_then(|r| self.run(r, budget));
            match result {
                Ok(resp) => {
                    let outcome = answer_of(resp, budget);
                    if matches!(outcome, Outcome::Answer(200..=299, ..)) {
                        progress.done();
                    }
                    outcome
                }
                Err(e) => Outcome::Broken(e),
            }
        })?;
        if !(200..300).contains(&status) {
            return Err(http_error(&what, status, &body));
        }
        Ok(())
    }
}

fn into_io(e: ureq::Error) -> io::Error {
    match e {
        ureq::Error::Io(e) => e,
        ureq::Error::Timeout(_) => io::Error::new(io::ErrorKind::TimedOut, e.to_string()),
        ureq::Error::ConnectionFailed => {
            io::Error::new(io::ErrorKind::ConnectionRefused, e.to_string())
        }
        other => io::Error::other(other.to_string()),
    }
}

/// The archive's answer `resp`, its body read within what is left of `budget`: a body that
/// does not arrive in time is a broken exchange ([`over_budget`]), tried again.
fn answer_of(mut resp: ureq::http::Response<ureq::Body>, budget: Duration) -> Outcome {
    let status = resp.status().as_u16();
    let retry_after = resp
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let text = match resp
        .body_mut()
        .with_config()
        .limit(8 << 20)
        .read_to_string()
    {
        Ok(t) => t,
        Err(ureq::Error::Timeout(_)) => return Outcome::Broken(over_budget(budget)),
        Err(ureq::Error::Io(e)) if e.kind() == io::ErrorKind::TimedOut => {
            return Outcome::Broken(over_budget(budget));
        }
        Err(_) => String::new(),
    };
    let body = serde_json::from_str(&text).unwrap_or(Value::Null);
    Outcome::Answer(status, retry_after, body)
}

/// The body of an upload, counted for the progress lines. No hash here: the file's MD5 and
/// SHA-256 come from the one pass that checked its tree hash, and the archive's MD5 of what it
/// received is compared with that MD5, so a file that changed after the check (or bytes
/// changed on the way) fails the comparison; hashing again while sending would only take a
/// core from the transfer.
struct Counted<'p, 'n> {
    inner: Box<dyn Read>,
    progress: &'p mut Progress<'n>,
}

impl Read for Counted<'_, '_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.add(n as u64);
        Ok(n)
    }
}

/// Progress lines of one upload: at the start, every 10 % or 10 s, and at the end.
struct Progress<'n> {
    key: String,
    size: u64,
    sent: u64,
    started: Instant,
    last: Instant,
    last_tenth: u64,
    notify: &'n dyn Fn(Line, &str),
}

impl<'n> Progress<'n> {
    fn new(key: &str, size: u64, notify: &'n dyn Fn(Line, &str)) -> Progress<'n> {
        notify(
            Line::Progress,
            &format!(
                "uploading `{}` ({})",
                printable(key),
                clima_artifact_fs::human_bytes(size)
            ),
        );
        let now = Instant::now();
        Progress {
            key: printable(key).into_owned(),
            size,
            sent: 0,
            started: now,
            last: now,
            last_tenth: 0,
            notify,
        }
    }

    fn add(&mut self, n: u64) {
        self.sent += n;
        let tenth = (self.sent * 10).checked_div(self.size).unwrap_or(10);
        if self.sent < self.size
            && (tenth > self.last_tenth || self.last.elapsed() >= Duration::from_secs(10))
        {
            self.last_tenth = tenth;
            self.last = Instant::now();
            (self.notify)(
                Line::Progress,
                &format!(
                    "uploading `{}`: {} % ({} of {})",
                    self.key,
                    self.sent * 100 / self.size.max(1),
                    clima_artifact_fs::human_bytes(self.sent),
                    clima_artifact_fs::human_bytes(self.size)
                ),
            );
        }
    }

    fn done(&self) {
        let secs = self.started.elapsed().as_secs_f64();
        (self.notify)(
            Line::Progress,
            &format!(
                "uploaded `{}`: {} in {secs:.1} s ({}/s)",
                self.key,
                clima_artifact_fs::human_bytes(self.sent),
                clima_artifact_fs::human_bytes((self.sent as f64 / secs.max(1e-3)) as u64)
            ),
        );
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_token_never_goes_over_plain_http_except_to_this_machine() {
        assert!(token_in_the_clear("http://zenodo.org").is_some());
        assert!(token_in_the_clear("http://data.caltech.edu:80/x").is_some());
        assert!(token_in_the_clear("https://zenodo.org").is_none());
        assert!(token_in_the_clear("http://127.0.0.1:8080").is_none());
        assert!(token_in_the_clear("http://localhost:8080").is_none());
        assert!(token_in_the_clear("http://[::1]:8080").is_none());
    }

    use super::*;

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

    #[test]
    fn publishers_by_host() {
        assert_eq!(publisher_of("https://sandbox.zenodo.org"), Some("Zenodo"));
        assert_eq!(
            publisher_of("https://data.caltech.edu"),
            Some("CaltechDATA")
        );
        assert_eq!(
            publisher_of("https://data.caltechlibrary.dev/"),
            Some("CaltechDATA")
        );
        assert_eq!(publisher_of("http://127.0.0.1:8080"), None);
    }

    #[test]
    fn dates_are_civil() {
        let t = today();
        assert_eq!(t.len(), 10, "{t}");
        assert!(t.starts_with("20"), "{t}");
    }

    #[test]
    fn record_ids_of_download_urls() {
        let d = |url: &str| clima_artifact_manifest::Download {
            url: url.into(),
            sha256: clima_artifact_manifest::Sha256::from_hex(&"a".repeat(64)).unwrap(),
            size: None,
            index_sha256: None,
        };
        let a = "https://zenodo.org";
        assert_eq!(
            record_of_urls(
                a,
                &[d(
                    "https://zenodo.org/records/123/files/x.tar.gz?download=1"
                )]
            ),
            Some("123".into())
        );
        assert_eq!(
            record_of_urls(a, &[d("https://zenodo.org/api/records/9/files/x/content")]),
            Some("9".into())
        );
        assert_eq!(
            record_of_urls(a, &[d("https://example.org/records/9/files/x")]),
            None
        );
    }

    #[test]
    fn field_errors_are_escaped() {
        let body = json!({"errors": [{"field": "metadata.title", "messages": ["bad\u{1b}[31m"]}]});
        assert_eq!(
            field_errors(&body),
            vec![("metadata.title".to_owned(), "bad\\u{1b}[31m".to_owned())]
        );
    }
}
