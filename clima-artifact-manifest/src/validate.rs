//! Non-fatal checks for build scripts: missing license or citation, `http://` URLs, artifacts
//! without a download section, entries Julia would read differently.

/// A non-fatal finding about a manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// 1-based line, when known.
    pub line: Option<u32>,
    /// The artifact concerned.
    pub artifact: Option<String>,
    /// What to look at and what to do.
    pub message: String,
}
