//! The CLI's error type and its exit codes. The operations of `clima-artifact-ops` return their
//! own [`clima_artifact_ops::Error`]; its kind becomes the exit code here, and only here.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clima_artifact_ops::ErrorKind;

/// Exit code of a successful run.
pub const EXIT_OK: u8 = 0;
/// Exit code when the command ran but found or hit a problem (verify mismatch, failed download,
/// `override set --verify` mismatch, a directory `gc` could not remove).
pub const EXIT_FAILURE: u8 = 1;
/// Exit code for bad usage or bad input: unknown flags, unknown artifact names, a missing or
/// malformed manifest, a path that does not exist.
pub const EXIT_USAGE: u8 = 2;

/// An error that ends the command: a message for stderr and the exit code to return.
#[derive(Debug)]
pub struct CliError {
    /// The full, actionable message (printed after `error: `).
    pub message: String,
    /// [`EXIT_FAILURE`] or [`EXIT_USAGE`].
    pub code: u8,
}

impl CliError {
    /// A problem found while doing the work (exit code [`EXIT_FAILURE`]).
    pub fn failure(message: impl Into<String>) -> CliError {
        CliError {
            message: message.into(),
            code: EXIT_FAILURE,
        }
    }

    /// Bad arguments or bad input files (exit code [`EXIT_USAGE`]).
    pub fn usage(message: impl Into<String>) -> CliError {
        CliError {
            message: message.into(),
            code: EXIT_USAGE,
        }
    }

    /// The process exit code.
    pub fn exit_code(&self) -> ExitCode {
        ExitCode::from(self.code)
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CliError {}

/// An operation's error: bad input exits 2, a failed operation 1.
impl From<clima_artifact_ops::Error> for CliError {
    fn from(e: clima_artifact_ops::Error) -> CliError {
        match e.kind() {
            ErrorKind::Input => CliError::usage(e.into_message()),
            _ => CliError::failure(e.into_message()),
        }
    }
}

impl From<clima_artifact_ops::archive::ArchiveError> for CliError {
    fn from(e: clima_artifact_ops::archive::ArchiveError) -> CliError {
        clima_artifact_ops::Error::from(e).into()
    }
}

impl From<clima_artifact_manifest::ManifestError> for CliError {
    fn from(e: clima_artifact_manifest::ManifestError) -> CliError {
        CliError::usage(e.to_string())
    }
}

impl From<clima_artifact_manifest::SelectError> for CliError {
    fn from(e: clima_artifact_manifest::SelectError) -> CliError {
        CliError::usage(e.to_string())
    }
}

/// Result type of every command.
pub type CliResult<T = ()> = Result<T, CliError>;

/// Formats an I/O error about `path` as a failure message.
pub fn io_error(action: &str, path: &Path, e: &std::io::Error) -> CliError {
    clima_artifact_ops::error::io_error(action, path, e).into()
}

/// A folder given by the user: must exist and be a directory; returned absolute.
pub fn existing_dir(path: &Path, what: &str) -> CliResult<PathBuf> {
    Ok(clima_artifact_ops::error::existing_dir(path, what)?)
}
