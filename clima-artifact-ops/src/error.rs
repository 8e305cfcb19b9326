//! The error every operation returns: a message that says what went wrong and what to do, and
//! its [`ErrorKind`]: whether the caller's input was at fault or the work failed.
//!
//! The kind is what a caller acts on (the `clima-artifacts` CLI maps [`ErrorKind::Input`] to
//! exit code 2 and [`ErrorKind::Failed`] to exit code 1; a program may retry a failed operation
//! but not a bad input); the message is what a person reads.

use std::fmt;
use std::path::{Path, PathBuf};

/// Who is at fault when an operation stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Bad input: arguments, a missing or malformed manifest or `Overrides.toml`, an unknown
    /// artifact name, a path that does not exist or is of the wrong kind, an archive request
    /// the archive cannot take. Running the operation again unchanged fails again.
    Input,
    /// The operation ran and failed: an I/O error, a failed download or upload, a recipe that
    /// failed, a folder that could not be removed.
    Failed,
}

/// An error that ends an operation: its [`ErrorKind`] and a full, actionable message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
}

impl Error {
    /// An error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
        }
    }

    /// Bad input ([`ErrorKind::Input`]).
    pub fn input(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Input, message)
    }

    /// A failed operation ([`ErrorKind::Failed`]).
    pub fn failed(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Failed, message)
    }

    /// Whether the input was at fault or the work failed.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message, without a leading `error: `.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The message, owned.
    pub fn into_message(self) -> String {
        self.message
    }

    /// The same error, its message prefixed with `what` and `: ` (the kind is kept): say which
    /// step or thing of the caller the error is about.
    pub fn context(self, what: impl fmt::Display) -> Error {
        Error {
            kind: self.kind,
            message: format!("{what}: {}", self.message),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl From<clima_artifact_manifest::ManifestError> for Error {
    fn from(e: clima_artifact_manifest::ManifestError) -> Error {
        Error::input(e.to_string())
    }
}

impl From<clima_artifact_manifest::SelectError> for Error {
    fn from(e: clima_artifact_manifest::SelectError) -> Error {
        Error::input(e.to_string())
    }
}

/// Result type of every operation (`Result<()>` when there is nothing to return).
pub type Result<T = (), E = Error> = std::result::Result<T, E>;

/// A failed I/O action on `path`: "cannot {action} `{path}`: {e}" ([`ErrorKind::Failed`]).
pub fn io_error(action: &str, path: &Path, e: &std::io::Error) -> Error {
    Error::failed(format!("cannot {action} `{}`: {e}", path.display()))
}

/// Reads a text file; a missing file reads as empty (a manifest that is about to be created).
pub fn read_or_empty(path: &Path) -> Result<String> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(io_error("read", path, &e)),
    }
}

/// Writes `text` to `path` atomically ([`clima_artifact_fs::write_atomically`]), creating its
/// folder first.
pub fn write_text(path: &Path, text: &str) -> Result {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir).map_err(|e| io_error("create folder", &dir, &e))?;
    clima_artifact_fs::write_atomically(path, text.as_bytes())
        .map_err(|e| Error::failed(e.to_string()))
}

/// A folder given by the caller: it must exist and be a directory; returned absolute. `what`
/// names it in the message ("override folder").
pub fn existing_dir(path: &Path, what: &str) -> Result<PathBuf> {
    let meta = std::fs::metadata(path)
        .map_err(|e| Error::input(format!("{what} `{}` cannot be used: {e}", path.display())))?;
    if !meta.is_dir() {
        return Err(Error::input(format!(
            "{what} `{}` is not a folder",
            path.display()
        )));
    }
    std::fs::canonicalize(path).map_err(|e| io_error("resolve", path, &e))
}
