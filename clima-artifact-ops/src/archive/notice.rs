//! The notices of a publication to an archive ([`ArchiveEvent`]), each with the line the user
//! reads, sent through the caller's [`Reporting`](clima_artifact_runtime::progress::Reporting)
//! like every other notice of clima-artifacts.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use clima_artifact_fs::{human_bytes, printable};
use clima_artifact_runtime::progress::notice::{Event, Level};

/// What a notice of a publication is: progress of an upload, or something the user should
/// know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line {
    /// Progress of an upload (start, every 10 % or 10 s, end): for a terminal or a batch log,
    /// hidden where progress is off.
    Progress,
    /// Something the user should know: a resumed draft, a wait for `Retry-After`, a retry, a
    /// checksum checked.
    Notice,
}

/// What happened while publishing, one variant per kind of notice, with its facts as fields.
/// Its `Display` is the line without the `clima-artifacts:` prefix; text that came from the
/// archive is escaped. Progress of an upload and steps of the publication are
/// [`Level::Info`]; a warning about the record is [`Level::Warning`]. [`ArchiveEvent::line`]
/// says which are progress lines (shown only where progress is on).
///
/// New kinds of notices are added as the work grows: match with a `_` arm.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ArchiveEvent {
    /// The archive answered `429 Too Many Requests`: waiting `wait` (its `Retry-After`).
    Throttled {
        /// The archive.
        archive: String,
        /// The request.
        what: String,
        /// The wait.
        wait: Duration,
    },
    /// A request failed (`reason`, escaped); try `attempt` of `attempts` follows after `wait`.
    Retrying {
        /// The request.
        what: String,
        /// Why it failed (escaped).
        reason: String,
        /// The pause before the next try.
        wait: Duration,
        /// The number of the next try.
        attempt: u32,
        /// How many tries there are.
        attempts: u32,
    },
    /// An upload of `size` bytes starts.
    Uploading {
        /// The file's key (escaped by the display).
        key: String,
        /// Its size.
        size: u64,
    },
    /// An upload goes on: `sent` of `size` bytes.
    UploadProgress {
        /// The file's key (escaped).
        key: String,
        /// Bytes sent.
        sent: u64,
        /// The file's size.
        size: u64,
    },
    /// An upload ended: `sent` bytes in `took`.
    Uploaded {
        /// The file's key (escaped).
        key: String,
        /// Bytes sent.
        sent: u64,
        /// How long it took.
        took: Duration,
    },
    /// Warning: something about the record the user should fix (a record with no
    /// description, say).
    RecordWarning(String),
    /// The draft `id` of an earlier run is continued.
    ContinuingDraft {
        /// The draft's id (escaped by the display).
        id: String,
    },
    /// The draft `id` was published by an earlier run.
    PublishedEarlier {
        /// The record's id (escaped by the display).
        id: String,
    },
    /// The archive made draft `id` before its answer was lost; it is continued.
    DraftAnswerLost {
        /// The draft's id (escaped by the display).
        id: String,
    },
    /// A new draft (or a draft of a new version) `id` was made on `archive`.
    NewDraft {
        /// Whether it is a new version of a published record.
        new_version: bool,
        /// The draft's id (escaped by the display).
        id: String,
        /// The archive.
        archive: String,
    },
    /// The draft `id`, which an earlier run created just before it stopped, is continued.
    ContinuingInterrupted {
        /// The draft's id (escaped by the display).
        id: String,
    },
    /// Several drafts look like the one an earlier run asked for: none is continued.
    AmbiguousDrafts {
        /// Their ids (checked: letters, digits and dashes).
        ids: Vec<String>,
    },
    /// The file `key` is already in the draft.
    AlreadyInDraft {
        /// The file's key (escaped by the display).
        key: String,
    },
    /// The file `key` was committed and the archive's checksum matches.
    Committed {
        /// The file's key (escaped by the display).
        key: String,
        /// The checksum (`md5:...`).
        checksum: String,
    },
    /// The artifact `name` is packed from its installed copy `dir` into `out`.
    Packing {
        /// The artifact.
        name: String,
        /// Its installed copy.
        dir: PathBuf,
        /// The tarball written.
        out: PathBuf,
    },
    /// The tarball at `path` is checked to hold the artifact's content `tree`.
    Checking {
        /// The tarball.
        path: PathBuf,
        /// The git tree SHA-1 it must hold.
        tree: String,
    },
}

impl ArchiveEvent {
    /// Whether this is a progress line (hidden where progress is off) or a notice.
    pub fn line(&self) -> Line {
        match self {
            ArchiveEvent::Uploading { .. }
            | ArchiveEvent::UploadProgress { .. }
            | ArchiveEvent::Uploaded { .. } => Line::Progress,
            _ => Line::Notice,
        }
    }
}

impl Event for ArchiveEvent {
    fn level(&self) -> Level {
        match self {
            ArchiveEvent::RecordWarning(_) => Level::Warning,
            _ => Level::Info,
        }
    }
}

impl fmt::Display for ArchiveEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use ArchiveEvent::*;
        match self {
            Throttled {
                archive,
                what,
                wait,
            } => write!(
                f,
                "{archive} answered 429 Too Many Requests to {what}: waiting {} s (Retry-After) \
                 before trying again",
                wait.as_secs_f64().ceil() as u64
            ),
            Retrying {
                what,
                reason,
                wait,
                attempt,
                attempts,
            } => write!(
                f,
                "{what} failed ({reason}); trying again in {:.1} s (try {attempt} of {attempts})",
                wait.as_secs_f64()
            ),
            Uploading { key, size } => {
                write!(f, "uploading `{}` ({})", printable(key), human_bytes(*size))
            }
            UploadProgress { key, sent, size } => write!(
                f,
                "uploading `{key}`: {} % ({} of {})",
                sent * 100 / (*size).max(1),
                human_bytes(*sent),
                human_bytes(*size)
            ),
            Uploaded { key, sent, took } => {
                let secs = took.as_secs_f64();
                write!(
                    f,
                    "uploaded `{key}`: {} in {secs:.1} s ({}/s)",
                    human_bytes(*sent),
                    human_bytes((*sent as f64 / secs.max(1e-3)) as u64)
                )
            }
            RecordWarning(w) => f.write_str(w),
            ContinuingDraft { id } => {
                write!(f, "continuing draft {} of an earlier run", printable(id))
            }
            PublishedEarlier { id } => {
                write!(f, "draft {} was published by an earlier run", printable(id))
            }
            DraftAnswerLost { id } => write!(
                f,
                "the archive made draft {} before its answer was lost; continuing it",
                printable(id)
            ),
            NewDraft {
                new_version,
                id,
                archive,
            } => write!(
                f,
                "{} {} on {archive}",
                if *new_version {
                    "new version draft"
                } else {
                    "new draft"
                },
                printable(id)
            ),
            ContinuingInterrupted { id } => write!(
                f,
                "continuing draft {}, which an earlier run created just before it stopped",
                printable(id)
            ),
            AmbiguousDrafts { ids } => write!(
                f,
                "drafts {} all look like the one an earlier run asked for; none is continued \
                 and a new draft is made (delete those you do not want)",
                ids.join(", ")
            ),
            AlreadyInDraft { key } => write!(f, "`{}` is already in the draft", printable(key)),
            Committed { key, checksum } => write!(
                f,
                "`{}` committed, checksum {checksum} matches",
                printable(key)
            ),
            Packing { name, dir, out } => write!(
                f,
                "packing `{name}` from {} into {}",
                dir.display(),
                out.display()
            ),
            Checking { path, tree } => write!(
                f,
                "checking that `{}` holds artifact content {tree}",
                path.display()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clima_artifact_runtime::progress::notice::line;

    /// The lines `publish --archive` printed before these were notices, word for word.
    #[test]
    fn lines_are_the_ones_publish_printed() {
        let cases: Vec<(ArchiveEvent, Line, &str)> = vec![
            (
                ArchiveEvent::Throttled {
                    archive: "https://a.org".into(),
                    what: "POST /api/records".into(),
                    wait: Duration::from_millis(2100),
                },
                Line::Notice,
                "clima-artifacts: https://a.org answered 429 Too Many Requests to POST \
                 /api/records: waiting 3 s (Retry-After) before trying again",
            ),
            (
                ArchiveEvent::Retrying {
                    what: "PUT x".into(),
                    reason: "503 busy".into(),
                    wait: Duration::from_millis(1500),
                    attempt: 2,
                    attempts: 4,
                },
                Line::Notice,
                "clima-artifacts: PUT x failed (503 busy); trying again in 1.5 s (try 2 of 4)",
            ),
            (
                ArchiveEvent::Uploading {
                    key: "a\u{1b}.tar.gz".into(),
                    size: 2 << 20,
                },
                Line::Progress,
                "clima-artifacts: uploading `a\\u{1b}.tar.gz` (2.0 MiB)",
            ),
            (
                ArchiveEvent::UploadProgress {
                    key: "a.tar.gz".into(),
                    sent: 1 << 20,
                    size: 4 << 20,
                },
                Line::Progress,
                "clima-artifacts: uploading `a.tar.gz`: 25 % (1.0 MiB of 4.0 MiB)",
            ),
            (
                ArchiveEvent::Uploaded {
                    key: "a.tar.gz".into(),
                    sent: 4 << 20,
                    took: Duration::from_secs(2),
                },
                Line::Progress,
                "clima-artifacts: uploaded `a.tar.gz`: 4.0 MiB in 2.0 s (2.0 MiB/s)",
            ),
            (
                ArchiveEvent::RecordWarning("the record has no description".into()),
                Line::Notice,
                "clima-artifacts: warning: the record has no description",
            ),
            (
                ArchiveEvent::NewDraft {
                    new_version: true,
                    id: "ab-12".into(),
                    archive: "https://a.org".into(),
                },
                Line::Notice,
                "clima-artifacts: new version draft ab-12 on https://a.org",
            ),
            (
                ArchiveEvent::AmbiguousDrafts {
                    ids: vec!["a1".into(), "b2".into()],
                },
                Line::Notice,
                "clima-artifacts: drafts a1, b2 all look like the one an earlier run asked for; \
                 none is continued and a new draft is made (delete those you do not want)",
            ),
            (
                ArchiveEvent::Committed {
                    key: "README.md".into(),
                    checksum: "md5:00ff".into(),
                },
                Line::Notice,
                "clima-artifacts: `README.md` committed, checksum md5:00ff matches",
            ),
        ];
        for (event, kind, text) in cases {
            assert_eq!(event.line(), kind, "{event:?}");
            assert_eq!(line(&event), text);
        }
    }
}
