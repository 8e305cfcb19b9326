//! The runtime's notices, each with the line the user reads: installs ([`InstallEvent`]: the
//! sources tried in turn, what was installed and from where, settings out of range, slow debug
//! builds), collective installs under MPI ([`MpiEvent`]) and the provenance report
//! ([`ReportEvent`]). They implement the progress crate's [`Event`] and are sent to the
//! process's reporter with [`emit`](clima_artifact_progress::Reporting::emit); the progress crate
//! knows none of them.
//! The notices of the crates below are theirs, re-exported here so that a model matching on
//! notices needs this crate alone: [`net`] (retries, resumes, ranged downloads) and [`depot`]
//! (lock waits, Julia's pidfiles, upkeep, the usage log). Run sync's are
//! `clima_artifact_sync::notice`.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use clima_artifact_fs::{human_bytes, printable};
use clima_artifact_progress::notice::{Event, Level};

pub use clima_artifact_depot::notice as depot;
pub use clima_artifact_net::notice as net;

#[cfg(test)]
mod tests;

/// The notices of an install: its sources tried in turn, what was installed and from where,
/// the settings that were out of range, slow debug builds.
///
/// New kinds of notices are added as the work grows: match with a `_` arm.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum InstallEvent {
    /// Detail: a download of `artifact` starts from `url`.
    Downloading {
        /// The artifact's name.
        artifact: String,
        /// The URL, without credentials (escaped by the display).
        url: String,
    },
    /// Warning: a source failed with `error`; the next URL is tried.
    NextSource {
        /// The failure.
        error: String,
        /// The failure without its URL (see [`NetEvent::Retry`](clima_artifact_net::notice::NetEvent::Retry)).
        cause: String,
    },
    /// Warning: the package server could not provide `artifact`; the manifest's URLs are tried.
    PackageServerFallback {
        /// The artifact's name.
        artifact: String,
        /// The failure.
        error: String,
        /// The failure without its URL (see [`NetEvent::Retry`](clima_artifact_net::notice::NetEvent::Retry)).
        cause: String,
    },
    /// Warning: only some files of `artifact` were asked for, but they cannot be fetched
    /// alone (`why`: the tarball is not seekable, or its server does not serve byte ranges):
    /// the artifact is downloaded whole.
    PartialFallback {
        /// The artifact's name.
        artifact: String,
        /// Why (a URL in it without credentials).
        why: String,
    },
    /// Detail: the files the depots hold (fetched one by one before, or the same content in
    /// other artifacts) could not be used for `artifact` (`why`: the server does not serve
    /// byte ranges, say), so it is downloaded whole.
    ReuseFallback {
        /// The artifact's name.
        artifact: String,
        /// Why (a URL in it without credentials).
        why: String,
    },
    /// Detail: `artifact` was installed into `path` by ranges: `received` bytes of its
    /// tarball fetched, and the members of `copied` more not fetched, their files copied (and
    /// checked) from what the depots held.
    InstalledReusing {
        /// The artifact's name.
        artifact: String,
        /// Where it is now (escaped by the display).
        path: PathBuf,
        /// The tarball's bytes received now.
        received: u64,
        /// The tarball's bytes not fetched because their files were copied.
        copied: u64,
    },
    /// Warning: the depot itself failed (its disk full, say): no other source is tried. The
    /// display is the error's own.
    InstallFailed {
        /// The failure.
        error: String,
    },
    /// Warning: a download continued from `kept` bytes kept in `path` failed verification
    /// (`error`); the kept bytes were deleted and the download starts over.
    KeptBytesFailedVerification {
        /// The artifact's name.
        artifact: String,
        /// Bytes that had been kept.
        kept: u64,
        /// The partial download's file.
        path: PathBuf,
        /// The verification's failure.
        error: String,
    },
    /// Detail: `artifact` was installed into `path`, `from` somewhere (the package server,
    /// over MPI; `None`: from the manifest's URL), `reused` bytes of it from an earlier
    /// partial download.
    Installed {
        /// The artifact's name.
        artifact: String,
        /// Where from (`None` for the manifest's URL).
        from: Option<InstalledFrom>,
        /// Where it is now (escaped by the display).
        path: PathBuf,
        /// The tarball's bytes received now.
        received: u64,
        /// Its bytes kept by an earlier attempt.
        reused: u64,
    },
    /// Warning: a debug build installed `artifact` (`bytes`) in `took`, hashing at
    /// `bytes_per_second`: its dependencies are unoptimised.
    SlowDebugBuild {
        /// The artifact's name.
        artifact: String,
        /// Its tarball's size.
        bytes: u64,
        /// How long the install took.
        took: Duration,
        /// The measured SHA-1 speed.
        bytes_per_second: f64,
    },
    /// Warning: a setting was out of range; the nearest allowed value is used.
    ConfigOutOfRange {
        /// The environment variable.
        variable: String,
        /// Its value (escaped by the display).
        value: String,
        /// The least allowed.
        min: u64,
        /// The most allowed.
        max: u64,
        /// What is used.
        used: u64,
    },
    /// Info: the installed copy of `artifact` at `path` has no record of its git tree
    /// SHA-256, which its manifest entry gives: its tree is hashed once, and the result
    /// recorded.
    HashingInstalledCopy {
        /// The artifact's name.
        artifact: String,
        /// The copy's folder.
        path: PathBuf,
    },
}

impl Event for InstallEvent {
    fn level(&self) -> Level {
        use InstallEvent::*;
        match self {
            HashingInstalledCopy { .. } => Level::Info,
            Downloading { .. }
            | Installed { .. }
            | InstalledReusing { .. }
            | ReuseFallback { .. } => Level::Detail,
            NextSource { .. }
            | PackageServerFallback { .. }
            | PartialFallback { .. }
            | InstallFailed { .. }
            | KeptBytesFailedVerification { .. }
            | SlowDebugBuild { .. }
            | ConfigOutOfRange { .. } => Level::Warning,
        }
    }

    fn repeated_cause(&self) -> Option<(&'static str, &str)> {
        match self {
            InstallEvent::NextSource { cause, .. } => Some(("next source", cause)),
            InstallEvent::PackageServerFallback { cause, .. } => Some(("package server", cause)),
            _ => None,
        }
    }
}

impl fmt::Display for InstallEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use InstallEvent::*;
        match self {
            Downloading { artifact, url } => {
                write!(f, "downloading `{artifact}` from `{}`", printable(url))
            }
            NextSource { error, .. } => write!(f, "{error}; trying the next URL"),
            PackageServerFallback {
                artifact, error, ..
            } => write!(
                f,
                "the package server could not provide `{artifact}` ({error}); trying the \
                 manifest's URLs"
            ),
            PartialFallback { artifact, why } => write!(
                f,
                "cannot fetch only some files of `{artifact}` ({}); downloading it whole",
                printable(why)
            ),
            ReuseFallback { artifact, why } => write!(
                f,
                "the files the depots hold are not reused for `{artifact}` ({}); downloading it \
                 whole",
                printable(why)
            ),
            InstalledReusing {
                artifact,
                path,
                received,
                copied,
            } => write!(
                f,
                "installed `{artifact}` into `{}` ({} received; {} of its tarball not fetched: \
                 those files were copied from what the depots held)",
                printable(&path.display().to_string()),
                human_bytes(*received),
                human_bytes(*copied)
            ),
            InstallFailed { error } => f.write_str(error),
            KeptBytesFailedVerification {
                artifact,
                kept,
                path,
                error,
            } => write!(
                f,
                "the download of `{artifact}` continued from {} kept in `{}` by an earlier \
                 attempt, and failed verification ({error}); the kept bytes were deleted and \
                 the download starts over",
                human_bytes(*kept),
                path.display()
            ),
            Installed {
                artifact,
                from,
                path,
                received,
                reused,
            } => installed_line(f, artifact, from.as_ref(), path, (*received, *reused)),
            SlowDebugBuild {
                artifact,
                bytes,
                took,
                bytes_per_second,
            } => write!(
                f,
                "artifact `{artifact}` ({:.0} MiB) took {:.1} s to install: this debug build \
                 hashes at {:.0} MB/s, since its hashing and decompression crates are compiled \
                 unoptimised (cargo applies the dev-profile settings of the model's own \
                 workspace only). Add the `[profile.dev.package]` block of the clima-artifacts \
                 README (\"Using it in a model\") to your workspace's root Cargo.toml, or use \
                 `cargo run --release`: installs then run about 10x faster",
                *bytes as f64 / f64::from(1 << 20),
                took.as_secs_f64(),
                bytes_per_second / 1e6
            ),
            ConfigOutOfRange {
                variable,
                value,
                min,
                max,
                used,
            } => write!(
                f,
                "{variable}=`{}` is out of range ({min} to {max}): using {used}",
                printable(value)
            ),
            HashingInstalledCopy { artifact, path } => write!(
                f,
                "hashing the installed copy of `{artifact}` at `{}` once: its manifest entry \
                 gives a git-tree-sha256, and this copy was installed by its git-tree-sha1 \
                 alone (the result is recorded beside it)",
                printable(&path.display().to_string())
            ),
        }
    }
}

/// The line of [`InstallEvent::Installed`].
fn installed_line(
    f: &mut fmt::Formatter<'_>,
    artifact: &str,
    from: Option<&InstalledFrom>,
    path: &std::path::Path,
    (received, reused): (u64, u64),
) -> fmt::Result {
    let from = match from {
        None => String::new(),
        Some(words) => format!(" {words}"),
    };
    write!(
        f,
        "installed `{artifact}`{from} into `{}`",
        printable(&path.display().to_string())
    )?;
    match reused {
        0 => Ok(()),
        n => write!(
            f,
            " ({} received, {} reused from an earlier partial download)",
            human_bytes(received),
            human_bytes(n)
        ),
    }
}

/// The notices of collective installs under MPI: copies received from another node, an
/// artifact found in a shared depot that every rank reads.
///
/// New kinds of notices are added as the work grows: match with a `_` arm.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum MpiEvent {
    /// Detail: `artifact` was received over MPI from `from_node` and installed into `path`.
    ReceivedOverMpi {
        /// The artifact's name.
        artifact: String,
        /// The node that sent it (escaped by the display).
        from_node: String,
        /// Where it is now (escaped by the display).
        path: PathBuf,
    },
    /// Info: `artifact` is in the shared depot `depot`, at `path`: no node-local copies.
    FoundInSharedDepot {
        /// The artifact's name.
        artifact: String,
        /// The shared depot.
        depot: PathBuf,
        /// The artifact's folder.
        path: PathBuf,
    },
}

impl Event for MpiEvent {
    fn level(&self) -> Level {
        use MpiEvent::*;
        match self {
            FoundInSharedDepot { .. } => Level::Info,
            ReceivedOverMpi { .. } => Level::Detail,
        }
    }
}

impl fmt::Display for MpiEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use MpiEvent::*;
        match self {
            ReceivedOverMpi {
                artifact,
                from_node,
                path,
            } => write!(
                f,
                "installed `{artifact}` received over MPI from node `{}` into `{}`",
                printable(from_node),
                printable(&path.display().to_string())
            ),
            FoundInSharedDepot {
                artifact,
                depot,
                path,
            } => write!(
                f,
                "`{artifact}` found in the shared depot `{}`: nothing copied to node depots \
                 (every rank reads `{}`; remove it from the shared depot to have node-local \
                 copies)",
                depot.display(),
                path.display()
            ),
        }
    }
}

/// The notices of the provenance report of a run.
///
/// New kinds of notices are added as the work grows: match with a `_` arm.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ReportEvent {
    /// Info: the provenance report was written.
    ReportWritten {
        /// Its Markdown file.
        markdown: PathBuf,
        /// Its JSON file.
        json: PathBuf,
        /// Its BibTeX file.
        bibtex: PathBuf,
    },
    /// Warning: the provenance report could not be written.
    ReportFailed {
        /// The error.
        error: String,
    },
    /// Warning: rank `rank` panics and writes its own records without gathering.
    ReportRankOnly {
        /// The rank.
        rank: u64,
    },
    /// Warning: the provenance records of ranks `first` to `last` are unreadable and left out
    /// of the report.
    RecordsUnreadable {
        /// The first rank.
        first: u64,
        /// The last rank.
        last: u64,
        /// Why (a few distinct reasons; escaped by the `Display`, since decoding errors may
        /// quote the bytes received).
        errors: Vec<String>,
    },
}

impl Event for ReportEvent {
    fn level(&self) -> Level {
        use ReportEvent::*;
        match self {
            ReportWritten { .. } => Level::Info,
            ReportFailed { .. } | ReportRankOnly { .. } | RecordsUnreadable { .. } => {
                Level::Warning
            }
        }
    }
}

impl fmt::Display for ReportEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use ReportEvent::*;
        match self {
            ReportWritten {
                markdown,
                json,
                bibtex,
            } => write!(
                f,
                "provenance report written to `{}`, `{}` and `{}`",
                markdown.display(),
                json.display(),
                bibtex.display()
            ),
            ReportFailed { error } => write!(f, "could not write the provenance report: {error}"),
            ReportRankOnly { rank } => write!(
                f,
                "panicking: writing rank {rank}'s own provenance records without gathering"
            ),
            RecordsUnreadable {
                first,
                last,
                errors,
            } => {
                let ranks = if first == last {
                    format!("rank {first}")
                } else {
                    format!("ranks {first}-{last}")
                };
                let why = match errors.as_slice() {
                    [] => String::new(),
                    errors => format!(
                        " ({}; are all ranks running the same binary?)",
                        printable(&errors.join("; "))
                    ),
                };
                write!(
                    f,
                    "provenance records from {ranks} are unreadable and left out of the \
                     report{why}"
                )
            }
        }
    }
}

/// Where an installed artifact's bytes came from, when not from the manifest's URL
/// ([`InstallEvent::Installed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum InstalledFrom {
    /// The package server's copy.
    PackageServer,
    /// Another node's download or installed copy, received over MPI.
    OverMpi,
}

impl fmt::Display for InstalledFrom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            InstalledFrom::PackageServer => "from the package server",
            InstalledFrom::OverMpi => "over MPI",
        })
    }
}
