//! Why a publication stopped ([`ArchiveError`]), what each reason tells the user to do, and
//! which of them is bad input and which a failed operation ([`crate::Error`]'s kinds).

use std::fmt;
use std::path::PathBuf;

use crate::error::Error;

use super::TOKEN_VAR;
use super::input::host_of;

/// Why [`publish`](super::publish) stopped.
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

impl From<ArchiveError> for Error {
    fn from(e: ArchiveError) -> Error {
        match e {
            ArchiveError::Input(_)
            | ArchiveError::NoLicense { .. }
            | ArchiveError::NoToken { .. }
            | ArchiveError::TooLarge { .. }
            | ArchiveError::State { .. } => Error::input(e.to_string()),
            _ => Error::failed(e.to_string()),
        }
    }
}

pub(super) fn from_ops(e: Error) -> ArchiveError {
    ArchiveError::Input(e.into_message())
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
