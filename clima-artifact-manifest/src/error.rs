//! Errors of manifest and overrides parsing, located by file, line and column.

use std::path::PathBuf;

/// A manifest or overrides file could not be used. Displays as
/// `path:line:col: artifact `name`: message`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[error("{}", self.render())]
pub struct ManifestError {
    /// The file concerned.
    pub path: PathBuf,
    /// 1-based line, when known.
    pub line: Option<u32>,
    /// 1-based column, when known.
    pub column: Option<u32>,
    /// The artifact concerned, when known.
    pub artifact: Option<String>,
    /// What is wrong.
    pub kind: ManifestErrorKind,
}

/// What is wrong in a manifest or overrides file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum ManifestErrorKind {
    /// The file could not be read.
    #[error("cannot read file: {0}")]
    Io(String),
    /// No manifest in a folder; lists the files tried.
    #[error("no JuliaArtifacts.toml or Artifacts.toml found; looked for {}", .tried.join(", "))]
    NotFound {
        /// Absolute paths that were tried.
        tried: Vec<String>,
    },
    /// The TOML itself does not parse.
    #[error("invalid TOML: {0}")]
    Toml(String),
    /// Anything else, with a message that says what to do.
    #[error("{0}")]
    Invalid(String),
}

impl ManifestError {
    fn render(&self) -> String {
        let mut s = format!("`{}`", self.path.display());
        if let Some(line) = self.line {
            s.push_str(&format!(":{line}"));
            if let Some(col) = self.column {
                s.push_str(&format!(":{col}"));
            }
        }
        s.push_str(": ");
        if let Some(a) = &self.artifact {
            s.push_str(&format!("artifact `{a}`: "));
        }
        s.push_str(&self.kind.to_string());
        s
    }
}

/// The first of a non-empty error list (a placeholder error if a caller broke that promise).
pub(crate) fn first(errors: Vec<ManifestError>) -> ManifestError {
    errors.into_iter().next().unwrap_or_else(|| ManifestError {
        path: std::path::PathBuf::new(),
        line: None,
        column: None,
        artifact: None,
        kind: ManifestErrorKind::Invalid("unknown error".to_owned()),
    })
}
