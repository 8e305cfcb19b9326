//! `Artifacts.toml`: the manifest that names artifacts and says where to download them.
//!
//! ```toml
//! [era5]                                  # a table entry: one artifact for every platform
//! git-tree-sha1 = "<40 hex>"
//! git-tree-sha256 = "<64 hex>"            # optional: git's SHA-256 tree hash, checked too
//! lazy = true                             # optional
//! license = "CC-BY-4.0"                   # any other key is kept as metadata
//!     [[era5.download]]                   # zero or more, tried in order
//!     url = "https://..."
//!     sha256 = "<64 hex>"
//!     size = 1234                         # optional
//!     index-sha256 = "<64 hex>"           # optional: hash of a seekable tarball's index
//!
//! [[OpenBLAS]]                            # an array entry: one variant per platform
//! os = "linux"
//! arch = "x86_64"
//! libc = "glibc"                          # further string keys are platform tags
//! git-tree-sha1 = "<40 hex>"
//!     [[OpenBLAS.download]]
//!     ...
//! ```

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use toml::de::{DeTable, DeValue};

use crate::location::{
    Locator, a_type, attribute_syntax_errors, entries_in_file_order, key_syntax, to_toml_syntax,
};
use crate::{
    GitTreeSha1, GitTreeSha256, ManifestError, ManifestErrorKind, Platform, SelectError, Sha256,
    metadata,
};

/// File names searched for a manifest, in order (Julia's rule).
pub const MANIFEST_FILE_NAMES: [&str; 2] = ["JuliaArtifacts.toml", "Artifacts.toml"];

/// One `[[name.download]]` source.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Download {
    /// Where to fetch the tarball: `http(s)://`, `file://`, or a path (relative to the manifest's
    /// folder, an extension Julia does not read).
    pub url: String,
    /// The SHA-256 of the tarball bytes.
    pub sha256: Sha256,
    /// The tarball's size in bytes, if the manifest gives it.
    pub size: Option<u64>,
    /// `index-sha256`: the SHA-256 of a seekable tarball's index document (docs/seekable.md),
    /// which covers its block digests. Julia's Pkg ignores the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_sha256: Option<Sha256>,
}

/// The download key holding the SHA-256 of a seekable tarball's index.
pub const INDEX_SHA256: &str = "index-sha256";

/// One concrete artifact: the whole entry of a `[name]` table, or one element of a `[[name]]` array.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ArtifactVariant {
    /// The git tree SHA-1 of the artifact's content; names its depot directory.
    pub git_tree_sha1: GitTreeSha1,
    /// `git-tree-sha256`: the git tree SHA-256 of the same content (git's SHA-256 object
    /// format), if the manifest gives it. An install checks it as well as the SHA-1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_tree_sha256: Option<GitTreeSha256>,
    /// `lazy = true`: installed only when first used, never by an eager prefetch.
    pub lazy: bool,
    /// Download sources, tried in order. Empty: the artifact needs an override.
    pub downloads: Vec<Download>,
    /// Platform tags of a `[[name]]` element (`os`, `arch`, `libc`, ...); `None` for a `[name]` table.
    pub platform: Option<Platform>,
    /// Every other key, as its string value (non-string values are kept in TOML syntax).
    pub metadata: BTreeMap<String, String>,
    /// 1-based line of the entry's header in the manifest.
    pub line: u32,
}

/// An artifact as written in the manifest.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ArtifactEntry {
    /// `[name]`: one variant for every platform.
    Single(ArtifactVariant),
    /// `[[name]]`: one variant per platform.
    PlatformSpecific(Vec<ArtifactVariant>),
}

/// A parsed `Artifacts.toml`.
///
/// Looking an entry up by name ([`Manifest::get`], [`Manifest::select`]) takes constant time:
/// the entries are indexed by name when the manifest is made, and are read-only afterwards
/// (through [`Manifest::artifacts`] and [`Manifest::broken`]) so the index cannot go stale.
/// Serialised as `{ path, artifacts }`; deserialising rebuilds the index.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(from = "ManifestParts")]
pub struct Manifest {
    /// The file it was read from (as given; callers canonicalise if they need to).
    pub path: PathBuf,
    artifacts: Vec<(String, ArtifactEntry)>,
    #[serde(skip)]
    broken: Vec<(String, Vec<ManifestError>)>,
    /// Position in `artifacts` of each name (its first entry, should a hand-made manifest
    /// repeat one; TOML itself forbids duplicate keys).
    #[serde(skip)]
    by_name: HashMap<String, usize>,
    /// Position in `broken` of each name.
    #[serde(skip)]
    broken_by_name: HashMap<String, usize>,
}

/// What a [`Manifest`] deserialises from (its serialised fields), indexed on the way in.
#[derive(serde::Deserialize)]
struct ManifestParts {
    path: PathBuf,
    artifacts: Vec<(String, ArtifactEntry)>,
}

impl From<ManifestParts> for Manifest {
    fn from(parts: ManifestParts) -> Manifest {
        Manifest::new(parts.path, parts.artifacts, Vec::new())
    }
}

/// Each name of `entries` with the position of its first occurrence.
fn index_by_name<T>(entries: &[(String, T)]) -> HashMap<String, usize> {
    let mut index = HashMap::with_capacity(entries.len());
    for (i, (name, _)) in entries.iter().enumerate() {
        index.entry(name.clone()).or_insert(i);
    }
    index
}

/// Why a `name/sub/path` string is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum SubPathError {
    /// The name part is empty.
    #[error("empty artifact name in `{0}`")]
    EmptyName(String),
    /// The sub-path contains `..`.
    #[error("sub-path `{0}` contains `..`; artifact sub-paths must stay inside the artifact")]
    ParentDir(String),
    /// The sub-path is absolute or contains an empty component, `.` or NUL.
    #[error("sub-path `{0}` is not a plain relative path inside the artifact")]
    NotRelative(String),
}

/// Splits `"era5/2008/u.nc"` into `("era5", Some("2008/u.nc"))`; rejects `..`, absolute paths,
/// empty components and NUL bytes.
///
/// One trailing `/` is allowed and ignored (`"era5/"` is `("era5", None)`). Backslashes count as
/// separators when looking for `..`, so `a/..\\b` is rejected on every platform.
pub fn split_name_and_subpath(spec: &str) -> Result<(&str, Option<&str>), SubPathError> {
    let (name, rest) = match spec.split_once('/') {
        Some((name, rest)) => (name, Some(rest)),
        None => (spec, None),
    };
    if name.is_empty() {
        return Err(SubPathError::EmptyName(spec.to_owned()));
    }
    if name.contains('\0') {
        return Err(SubPathError::NotRelative(spec.to_owned()));
    }
    let Some(rest) = rest else {
        return Ok((name, None));
    };
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.is_empty() {
        return Ok((name, None));
    }
    if rest.split(['/', '\\']).any(|c| c == "..") {
        return Err(SubPathError::ParentDir(rest.to_owned()));
    }
    let plain = !rest.contains('\0')
        && !rest.starts_with('\\')
        && rest.split('/').all(|c| !c.is_empty() && c != ".")
        && !looks_like_drive(rest);
    if !plain {
        return Err(SubPathError::NotRelative(rest.to_owned()));
    }
    Ok((name, Some(rest)))
}

/// `C:...`: absolute (or drive-relative) on Windows.
fn looks_like_drive(path: &str) -> bool {
    let b = path.as_bytes();
    b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':'
}

/// Keys of an entry that are not metadata or platform tags.
const GIT_TREE_SHA1: &str = "git-tree-sha1";
/// The key of Pkg's `git-tree-sha256-artifacts` branch.
const GIT_TREE_SHA256: &str = "git-tree-sha256";
const LAZY: &str = "lazy";
const DOWNLOAD: &str = "download";

/// Where an entry sits: `[name]` or element `index` (1-based) of `[[name]]`.
struct EntryCx<'a, 'l> {
    loc: &'a Locator<'l>,
    name: &'a str,
    /// 1-based index among the `[[name]]` elements; `None` for a `[name]` table.
    index: Option<usize>,
    /// Byte offset of the entry's header.
    offset: usize,
}

impl EntryCx<'_, '_> {
    /// "platform variant 2 (line 14): " or "".
    fn prefix(&self) -> String {
        match self.index {
            Some(i) => format!(
                "platform variant {i} (`[[{}]]` on line {}): ",
                self.name,
                self.loc.index.line(self.offset)
            ),
            None => String::new(),
        }
    }

    fn err(&self, offset: usize, message: impl std::fmt::Display) -> ManifestError {
        self.loc.invalid(
            offset,
            Some(self.name),
            format!("{}{message}", self.prefix()),
        )
    }
}

fn parse_variant(
    cx: &EntryCx<'_, '_>,
    table: &DeTable<'_>,
) -> Result<ArtifactVariant, Vec<ManifestError>> {
    let mut errors = Vec::new();
    let mut git_tree_sha1 = None;
    let mut git_tree_sha256 = None;
    let mut lazy = false;
    let mut downloads = Vec::new();
    let mut tags = BTreeMap::new();
    let mut metadata = BTreeMap::new();
    let platform_specific = cx.index.is_some();

    for (key, value) in entries_in_file_order(table) {
        let k: &str = key.get_ref();
        let at = value.span().start;
        match (k, value.get_ref()) {
            (GIT_TREE_SHA1, DeValue::String(s)) => match GitTreeSha1::from_hex(s) {
                Ok(h) => git_tree_sha1 = Some(h),
                Err(e) => errors.push(cx.err(
                    at,
                    format_args!(
                        "`git-tree-sha1` is not a valid hash ({e}); it must be the 40 hex digits \
                         of the git tree hash of the artifact's content"
                    ),
                )),
            },
            (GIT_TREE_SHA1, other) => errors.push(cx.err(
                at,
                format_args!(
                    "`git-tree-sha1` must be a string of 40 hex digits, found {}",
                    a_type(other)
                ),
            )),
            (GIT_TREE_SHA256, DeValue::String(s)) => match GitTreeSha256::from_hex(s) {
                Ok(h) => git_tree_sha256 = Some(h),
                Err(e) => errors.push(cx.err(
                    at,
                    format_args!(
                        "`git-tree-sha256` is not a valid hash ({e}); it must be the 64 hex \
                         digits of the git SHA-256 tree hash of the artifact's content (`clima-artifacts \
                         hash --sha256 DIR` prints it), or be left out"
                    ),
                )),
            },
            (GIT_TREE_SHA256, other) => errors.push(cx.err(
                at,
                format_args!(
                    "`git-tree-sha256` must be a string of 64 hex digits, found {}",
                    a_type(other)
                ),
            )),
            (LAZY, DeValue::Boolean(b)) => lazy = *b,
            (LAZY, other) => errors.push(cx.err(
                at,
                format_args!("`lazy` must be `true` or `false`, found {}", a_type(other)),
            )),
            (DOWNLOAD, value) => parse_downloads(cx, at, value, &mut downloads, &mut errors),
            ("os" | "arch" | "libc", other)
                if platform_specific && !matches!(other, DeValue::String(_)) =>
            {
                errors.push(cx.err(
                    at,
                    format_args!(
                        "platform tag `{k}` must be a string, found {}",
                        a_type(other)
                    ),
                ))
            }
            (_, DeValue::String(s)) if platform_specific && !metadata::KEYS.contains(&k) => {
                tags.insert(k.to_owned(), s.to_string());
            }
            (_, DeValue::String(s)) => {
                metadata.insert(k.to_owned(), s.to_string());
            }
            (_, other) => {
                metadata.insert(k.to_owned(), to_toml_syntax(other));
            }
        }
    }

    if platform_specific {
        errors.extend(missing_platform_tags(cx, table));
    }
    if git_tree_sha1.is_none() && !table.contains_key(GIT_TREE_SHA1) {
        errors.push(missing_git_tree_sha1(cx, table));
    }
    match git_tree_sha1 {
        Some(git_tree_sha1) if errors.is_empty() => Ok(ArtifactVariant {
            git_tree_sha1,
            git_tree_sha256,
            lazy,
            downloads,
            platform: platform_specific.then_some(Platform::from_tags(tags)),
            metadata,
            line: cx.loc.index.line(cx.offset),
        }),
        _ => Err(errors),
    }
}

/// The `[[NAME.download]]` tables of a variant (`value`, its `download` key, at `at`) into
/// `downloads`, what is wrong with them into `errors`.
fn parse_downloads(
    cx: &EntryCx<'_, '_>,
    at: usize,
    value: &DeValue<'_>,
    downloads: &mut Vec<Download>,
    errors: &mut Vec<ManifestError>,
) {
    let DeValue::Array(items) = value else {
        errors.push(cx.err(
            at,
            format_args!(
                "`download` is {}; it must be an array of tables: write \
                 `[[{}.download]]` (double brackets) with `url` and `sha256`",
                a_type(value),
                key_syntax(cx.name)
            ),
        ));
        return;
    };
    for (i, item) in items.iter().enumerate() {
        match item.get_ref() {
            DeValue::Table(t) => match parse_download(cx, i + 1, item.span().start, t) {
                Ok(d) => downloads.push(d),
                Err(e) => errors.extend(e),
            },
            other => errors.push(cx.err(
                item.span().start,
                format_args!(
                    "download {} is {}; each download must be a table with `url` and \
                     `sha256`, written `[[{}.download]]`",
                    i + 1,
                    a_type(other),
                    key_syntax(cx.name)
                ),
            )),
        }
    }
}

/// The error of a platform-specific variant (`[[NAME]]`) without `os` or `arch`, if it lacks one.
fn missing_platform_tags(cx: &EntryCx<'_, '_>, table: &DeTable<'_>) -> Option<ManifestError> {
    let missing: Vec<String> = ["os", "arch"]
        .into_iter()
        .filter(|tag| !table.contains_key(*tag))
        .map(|tag| format!("`{tag}`"))
        .collect();
    if missing.is_empty() {
        return None;
    }
    Some(cx.err(
        cx.offset,
        format_args!(
            "missing platform tag{0} {1}; every `[[{2}]]` entry needs `os` and `arch` \
             (e.g. `os = \"linux\"`, `arch = \"x86_64\"`), or use a single `[{2}]` table \
             if the artifact is the same on every platform",
            if missing.len() > 1 { "s" } else { "" },
            missing.join(" and "),
            key_syntax(cx.name)
        ),
    ))
}

/// The error of a variant without `git-tree-sha1` (saying, when it has a `git-tree-sha256`, that
/// this one does not replace it).
fn missing_git_tree_sha1(cx: &EntryCx<'_, '_>, table: &DeTable<'_>) -> ManifestError {
    let sha256_alone = if table.contains_key(GIT_TREE_SHA256) {
        " (a `git-tree-sha256` is checked in addition to it, never instead: the SHA-1 names \
         the artifact's folder in a depot, as in Julia)"
    } else {
        ""
    };
    cx.err(
        cx.offset,
        format_args!(
            "missing `git-tree-sha1`; add `git-tree-sha1 = \"<40 hex digits>\"`, the git tree \
             hash of the artifact's content{sha256_alone}"
        ),
    )
}

fn parse_download(
    cx: &EntryCx<'_, '_>,
    index: usize,
    offset: usize,
    table: &DeTable<'_>,
) -> Result<Download, Vec<ManifestError>> {
    let mut errors = Vec::new();
    let mut url = None;
    let mut sha256 = None;
    let mut size = None;
    let mut index_sha256 = None;
    for (key, value) in entries_in_file_order(table) {
        let at = value.span().start;
        match (key.get_ref().as_ref(), value.get_ref()) {
            ("url", DeValue::String(s)) if s.trim().is_empty() => errors.push(cx.err(
                at,
                format_args!("download {index} has an empty `url`; give the tarball's URL or path"),
            )),
            ("url", DeValue::String(s)) => url = Some(s.to_string()),
            ("url", other) => errors.push(cx.err(
                at,
                format_args!("download {index}: `url` must be a string, found {}", a_type(other)),
            )),
            ("sha256", DeValue::String(s)) => match Sha256::from_hex(s) {
                Ok(h) => sha256 = Some(h),
                Err(e) => errors.push(cx.err(
                    at,
                    format_args!(
                        "download {index}: `sha256` is not a valid digest ({e}); it must be the 64 hex \
                         digits of the tarball's SHA-256 (`sha256sum <file>`)"
                    ),
                )),
            },
            ("sha256", other) => errors.push(cx.err(
                at,
                format_args!(
                    "download {index}: `sha256` must be a string of 64 hex digits, found {}",
                    a_type(other)
                ),
            )),
            ("size", DeValue::Integer(i)) => match u64::from_str_radix(i.as_str(), i.radix()) {
                Ok(n) => size = Some(n),
                Err(_) => errors.push(cx.err(
                    at,
                    format_args!(
                        "download {index}: `size` must be a non-negative number of bytes, found `{i}`"
                    ),
                )),
            },
            ("size", other) => errors.push(cx.err(
                at,
                format_args!(
                    "download {index}: `size` must be an integer number of bytes, found {}",
                    a_type(other)
                ),
            )),
            (INDEX_SHA256, DeValue::String(s)) => match Sha256::from_hex(s) {
                Ok(h) => index_sha256 = Some(h),
                Err(e) => errors.push(cx.err(
                    at,
                    format_args!(
                        "download {index}: `{INDEX_SHA256}` is not a valid digest ({e}); it must be \
                         the 64 hex digits `create` printed for the tarball's index, or be left out"
                    ),
                )),
            },
            (INDEX_SHA256, other) => errors.push(cx.err(
                at,
                format_args!(
                    "download {index}: `{INDEX_SHA256}` must be a string of 64 hex digits, found {}",
                    a_type(other)
                ),
            )),
            // Julia ignores other keys of a download entry; so do we.
            _ => {}
        }
    }
    let section = format!("[[{}.download]]", key_syntax(cx.name));
    if !table.contains_key("url") {
        errors.push(cx.err(
            offset,
            format_args!(
                "download {index} (`{section}`) has no `url`; add `url = \"https://...\"` or remove \
                 the section"
            ),
        ));
    }
    if !table.contains_key("sha256") {
        errors.push(cx.err(
            offset,
            format_args!(
                "download {index} (`{section}`) has no `sha256`; add `sha256 = \"<64 hex digits>\"`, \
                 the SHA-256 of the tarball (`sha256sum <file>`)"
            ),
        ));
    }
    match (url, sha256) {
        (Some(url), Some(sha256)) if errors.is_empty() => Ok(Download {
            url,
            sha256,
            size,
            index_sha256,
        }),
        _ => Err(errors),
    }
}

impl Manifest {
    /// Parses manifest text; `path` is used in error messages and to resolve relative URLs.
    ///
    /// Returns the first error; [`Manifest::parse_all`] returns all of them.
    pub fn parse(text: &str, path: &Path) -> Result<Manifest, ManifestError> {
        Self::parse_all(text, path).map_err(crate::error::first)
    }

    /// Parses manifest text, collecting every error (never an empty list) so a build script can
    /// show them all at once. Errors are in file order.
    pub fn parse_all(text: &str, path: &Path) -> Result<Manifest, Vec<ManifestError>> {
        let manifest = Self::parse_lenient(text, path)?;
        if manifest.broken.is_empty() {
            return Ok(manifest);
        }
        let mut errors: Vec<ManifestError> =
            manifest.broken.into_iter().flat_map(|(_, e)| e).collect();
        errors.sort_by_key(|e| (e.line, e.column));
        Err(errors)
    }

    /// Parses manifest text with Julia's tolerance: an entry that cannot be read (no
    /// `git-tree-sha1`, a string instead of a table, ...) is kept aside in
    /// [`Manifest::broken`] and fails only when it is looked up; the others stay usable. Only
    /// a file that is not TOML at all is an error.
    pub fn parse_lenient(text: &str, path: &Path) -> Result<Manifest, Vec<ManifestError>> {
        let loc = Locator::new(text, path);
        let doc = loc.parse_document(text).map_err(|mut errors| {
            attribute_syntax_errors(text, &mut errors);
            errors
        })?;
        let mut broken: Vec<(String, Vec<ManifestError>)> = Vec::new();
        let mut artifacts = Vec::new();
        for (key, value) in entries_in_file_order(doc.get_ref()) {
            let name: &str = key.get_ref();
            let header = value.span().start;
            let mut errors = Vec::new();
            match value.get_ref() {
                DeValue::Table(table) => {
                    let cx = EntryCx {
                        loc: &loc,
                        name,
                        index: None,
                        offset: header,
                    };
                    match parse_variant(&cx, table) {
                        Ok(v) => artifacts.push((name.to_owned(), ArtifactEntry::Single(v))),
                        Err(e) => errors.extend(e),
                    }
                }
                DeValue::Array(items) if items.is_empty() => errors.push(loc.invalid(
                    key.span().start,
                    Some(name),
                    format!(
                        "the array lists no platform variants; write one `[[{0}]]` table per \
                         platform, or a single `[{0}]` table",
                        key_syntax(name)
                    ),
                )),
                DeValue::Array(items) => {
                    let mut variants = Vec::new();
                    for (i, item) in items.iter().enumerate() {
                        let cx = EntryCx {
                            loc: &loc,
                            name,
                            index: Some(i + 1),
                            offset: item.span().start,
                        };
                        match item.get_ref() {
                            DeValue::Table(table) => match parse_variant(&cx, table) {
                                Ok(v) => variants.push(v),
                                Err(e) => errors.extend(e),
                            },
                            other => errors.push(loc.invalid(
                                item.span().start,
                                Some(name),
                                format!(
                                    "element {} of the array is {}; each element must be a table \
                                     (`[[{}]]`) with `git-tree-sha1`, `os` and `arch`",
                                    i + 1,
                                    a_type(other),
                                    key_syntax(name)
                                ),
                            )),
                        }
                    }
                    if errors.is_empty() {
                        artifacts
                            .push((name.to_owned(), ArtifactEntry::PlatformSpecific(variants)));
                    }
                }
                other => errors.push(loc.invalid(
                    key.span().start,
                    Some(name),
                    format!(
                        "is {}, not an artifact; an artifact is a table `[{1}]` (or an array of \
                         tables `[[{1}]]`, one per platform) with a `git-tree-sha1`",
                        a_type(other),
                        key_syntax(name)
                    ),
                )),
            }
            if !errors.is_empty() {
                errors.sort_by_key(|e| (e.line, e.column));
                broken.push((name.to_owned(), errors));
            }
        }
        Ok(Manifest::new(path.to_path_buf(), artifacts, broken))
    }

    /// A manifest read from `path` with these entries, in file order, and these entries that
    /// could not be read (each with its errors; see [`Manifest::broken`]).
    pub fn new(
        path: PathBuf,
        artifacts: Vec<(String, ArtifactEntry)>,
        broken: Vec<(String, Vec<ManifestError>)>,
    ) -> Manifest {
        Manifest {
            path,
            by_name: index_by_name(&artifacts),
            broken_by_name: index_by_name(&broken),
            artifacts,
            broken,
        }
    }

    /// Artifacts in file order.
    pub fn artifacts(&self) -> &[(String, ArtifactEntry)] {
        &self.artifacts
    }

    /// Entries that could not be read, with their errors, in file order (only from
    /// [`Manifest::parse_lenient`] / [`Manifest::load_lenient`]; the strict readers fail
    /// instead). Looking one up is a [`SelectError::Broken`] naming file, line and column.
    /// Not serialised.
    pub fn broken(&self) -> &[(String, Vec<ManifestError>)] {
        &self.broken
    }

    /// The errors of the broken entry `name` (see [`Manifest::broken`]), if it is one.
    pub fn broken_entry(&self, name: &str) -> Option<&[ManifestError]> {
        self.broken_by_name
            .get(name)
            .map(|&i| self.broken[i].1.as_slice())
    }

    /// Reads a manifest file with [`Manifest::parse_lenient`]'s tolerance.
    pub fn load_lenient(path: &Path) -> Result<Manifest, ManifestError> {
        let text = read_text(path)?;
        Self::parse_lenient(&text, path).map_err(crate::error::first)
    }

    /// Reads and parses a manifest file.
    pub fn load(path: &Path) -> Result<Manifest, ManifestError> {
        Self::load_all(path).map_err(crate::error::first)
    }

    /// Reads and parses a manifest file, collecting every error (see [`Manifest::parse_all`]).
    pub fn load_all(path: &Path) -> Result<Manifest, Vec<ManifestError>> {
        let text = read_text(path).map_err(|e| vec![e])?;
        Self::parse_all(&text, path)
    }

    /// Finds `JuliaArtifacts.toml`, else `Artifacts.toml`, in `dir`. The error lists where it looked.
    pub fn find_in_dir(dir: &Path) -> Result<PathBuf, ManifestError> {
        let candidates = Self::candidates(dir);
        if let Some(found) = candidates.iter().find(|p| p.is_file()) {
            return Ok(found.clone());
        }
        let tried = candidates
            .iter()
            .map(|p| {
                std::path::absolute(p)
                    .unwrap_or_else(|_| p.clone())
                    .display()
                    .to_string()
            })
            .collect();
        Err(ManifestError {
            path: dir.to_path_buf(),
            line: None,
            column: None,
            artifact: None,
            kind: ManifestErrorKind::NotFound { tried },
        })
    }

    /// Finds the manifest for a program run in `start`, as Julia's `find_artifacts_toml` does:
    /// look in `start` and then each parent folder for `JuliaArtifacts.toml` / `Artifacts.toml`,
    /// and stop at the first project root (a folder with `JuliaProject.toml`, `Project.toml` or
    /// `Cargo.toml`; its manifest, if any, is the answer) or at the filesystem root. The error
    /// lists every path tried.
    pub fn find_upwards(start: &Path) -> Result<PathBuf, ManifestError> {
        const PROJECT_FILES: [&str; 3] = ["JuliaProject.toml", "Project.toml", "Cargo.toml"];
        let mut tried = Vec::new();
        let start = std::path::absolute(start).unwrap_or_else(|_| start.to_path_buf());
        for dir in start.ancestors() {
            let candidates = Self::candidates(dir);
            if let Some(found) = candidates.iter().find(|p| p.is_file()) {
                return Ok(found.clone());
            }
            tried.extend(candidates.iter().map(|p| p.display().to_string()));
            if PROJECT_FILES.iter().any(|f| dir.join(f).is_file()) {
                break;
            }
        }
        Err(ManifestError {
            path: start,
            line: None,
            column: None,
            artifact: None,
            kind: ManifestErrorKind::NotFound { tried },
        })
    }

    /// The files [`Manifest::find_in_dir`] looks for in `dir`, in order of preference.
    pub fn candidates(dir: &Path) -> [PathBuf; 2] {
        MANIFEST_FILE_NAMES.map(|n| dir.join(n))
    }

    /// The folder containing the manifest (relative download paths resolve against it).
    pub fn dir(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("."))
    }

    /// Looks an artifact up by name (constant time: commands that walk every entry, such as
    /// `list` and `fetch --all`, look each one up).
    pub fn get(&self, name: &str) -> Option<&ArtifactEntry> {
        self.by_name.get(name).map(|&i| &self.artifacts[i].1)
    }

    /// Names in file order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.artifacts.iter().map(|(n, _)| n.as_str())
    }

    /// The variant of `name` for `platform` (the host's, usually: [`Platform::host`]).
    ///
    /// A `[name]` table fits every platform. Among `[[name]]` variants, those that
    /// [`Platform::matches`] are candidates, chosen as Julia's `select_platform` does: the
    /// smallest [`Platform::match_loss`], then the greatest [`Platform::triplet`]; of entries
    /// for the same platform, the last in the file (Julia keys its choice by platform).
    pub fn select(&self, name: &str, platform: &Platform) -> Result<&ArtifactVariant, SelectError> {
        if let Some(errors) = self.broken_entry(name) {
            return Err(SelectError::Broken {
                name: name.to_owned(),
                message: errors
                    .iter()
                    .map(|e| e.to_string())
                    .collect::<Vec<_>>()
                    .join("; "),
            });
        }
        let entry = self.get(name).ok_or_else(|| SelectError::UnknownName {
            name: name.to_owned(),
            manifest: self.path.display().to_string(),
            defined: self.names().map(str::to_owned).collect(),
        })?;
        match entry {
            ArtifactEntry::Single(v) => Ok(v),
            ArtifactEntry::PlatformSpecific(variants) => variants
                .iter()
                .filter_map(|v| {
                    let tags = v.platform.as_ref()?;
                    platform
                        .matches(tags)
                        .then(|| (platform.match_loss(tags), tags.triplet(), v))
                })
                // Julia's select_platform: smallest loss, then the greatest triplet. Entries
                // equal on both have the same platform: Julia keys its choice by platform, so
                // the last one in the file replaces the others, and so does `max_by` here.
                .max_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)))
                .map(|(_, _, v)| v)
                .ok_or_else(|| SelectError::NoMatch {
                    name: name.to_owned(),
                    host: platform.to_string(),
                    offered: variants
                        .iter()
                        .map(|v| v.platform.clone().unwrap_or_default().to_string())
                        .collect(),
                }),
        }
    }
}

/// The largest TOML file read (manifests and overrides files are kilobytes; this bounds what a
/// planted or runaway file can make us read into memory).
pub const MAX_TOML_BYTES: u64 = 64 << 20;

/// Reads a file as UTF-8 text; errors name the file. Only a regular file is read (a symlink to
/// one is fine): a fifo neither blocks (it is opened with `O_NONBLOCK`) nor is read, a device is
/// refused, and more than [`MAX_TOML_BYTES`] is an error.
pub(crate) fn read_text(path: &Path) -> Result<String, ManifestError> {
    use std::io::Read;
    let io = |message: String| ManifestError {
        path: path.to_path_buf(),
        line: None,
        column: None,
        artifact: None,
        kind: ManifestErrorKind::Io(message),
    };
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC);
    }
    let file = options.open(path).map_err(|e| io(e.to_string()))?;
    let meta = file.metadata().map_err(|e| io(e.to_string()))?;
    if meta.is_dir() {
        return Err(io("is a directory, not a TOML file".to_owned()));
    }
    if !meta.is_file() {
        return Err(io(
            "is not a regular file (a fifo, socket or device); TOML files must be regular files"
                .to_owned(),
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len().min(MAX_TOML_BYTES) as usize);
    (&file)
        .take(MAX_TOML_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io(e.to_string()))?;
    if bytes.len() as u64 > MAX_TOML_BYTES {
        return Err(io(format!(
            "is larger than {} MiB; this is not a manifest or overrides file",
            MAX_TOML_BYTES >> 20
        )));
    }
    String::from_utf8(bytes).map_err(|e| {
        io(format!(
            "not UTF-8 (invalid byte at offset {}); TOML files must be UTF-8",
            e.utf8_error().valid_up_to()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const H1: &str = "b373f1887cff55850cbf76ec005f7d93726ae42e";
    const H2: &str = "0000b8078527ddfae5a25d99c3e163cbd9b1e574";
    const S1: &str = "750ead63910729c349beaed2a5db79903cbf3a982d0e0578e02994b1e7191c48";

    fn parse(text: &str) -> Result<Manifest, ManifestError> {
        Manifest::parse(text, Path::new("dir/Artifacts.toml"))
    }

    fn err(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    #[test]
    fn splits_names_and_subpaths() {
        assert_eq!(split_name_and_subpath("era5"), Ok(("era5", None)));
        assert_eq!(split_name_and_subpath("era5/"), Ok(("era5", None)));
        assert_eq!(
            split_name_and_subpath("era5/2008/u.nc"),
            Ok(("era5", Some("2008/u.nc")))
        );
        assert_eq!(
            split_name_and_subpath("era5/2008/"),
            Ok(("era5", Some("2008")))
        );
        assert_eq!(
            split_name_and_subpath("clm_data_0.9x1.25/a..b"),
            Ok(("clm_data_0.9x1.25", Some("a..b")))
        );
        assert_eq!(
            split_name_and_subpath(""),
            Err(SubPathError::EmptyName(String::new()))
        );
        assert_eq!(
            split_name_and_subpath("/etc/passwd"),
            Err(SubPathError::EmptyName("/etc/passwd".into()))
        );
        assert_eq!(
            split_name_and_subpath("era5/../x"),
            Err(SubPathError::ParentDir("../x".into()))
        );
        assert_eq!(
            split_name_and_subpath("era5/a/.."),
            Err(SubPathError::ParentDir("a/..".into()))
        );
        assert_eq!(
            split_name_and_subpath("era5/a\\..\\b"),
            Err(SubPathError::ParentDir("a\\..\\b".into()))
        );
        for bad in [
            "era5//etc",
            "era5/a//b",
            "era5/./a",
            "era5/a\0b",
            "era5/C:/x",
            "era5/\\\\srv",
        ] {
            assert!(
                matches!(
                    split_name_and_subpath(bad),
                    Err(SubPathError::NotRelative(_))
                ),
                "{bad:?}"
            );
        }
        assert!(matches!(
            split_name_and_subpath("er\0a5"),
            Err(SubPathError::NotRelative(_))
        ));
        assert!(
            SubPathError::ParentDir("../x".into())
                .to_string()
                .contains("`../x`")
        );
    }

    #[test]
    fn parses_table_entries() {
        let text = format!(
            r#"# header comment
[era5]
git-tree-sha1 = "{H1}"
lazy = true
license = "CC-BY-4.0"
size_hint = 12
tags = ["a", 1]

    [[era5.download]]
    url = "https://example.org/era5.tar.gz"
    sha256 = "{S1}"
    size = 1234

    [[era5.download]]
    sha256 = "{S1}"
    url = "mirror/era5.tar.gz"
    comment = "ignored"

["clm_data_0.9x1.25"]
git-tree-sha1 = "{H2}"
inline = {{ a = 1, b = "x" }}
"#
        );
        let m = parse(&text).unwrap();
        assert_eq!(m.names().collect::<Vec<_>>(), ["era5", "clm_data_0.9x1.25"]);
        assert_eq!(m.dir(), Path::new("dir"));
        let ArtifactEntry::Single(v) = m.get("era5").unwrap() else {
            panic!("not single")
        };
        assert_eq!(v.git_tree_sha1.to_hex(), H1);
        assert!(v.lazy);
        assert_eq!(v.line, 2);
        assert_eq!(v.platform, None);
        assert_eq!(v.downloads.len(), 2);
        assert_eq!(v.downloads[0].url, "https://example.org/era5.tar.gz");
        assert_eq!(v.downloads[0].size, Some(1234));
        assert_eq!(v.downloads[1].url, "mirror/era5.tar.gz");
        assert_eq!(v.downloads[1].size, None);
        assert_eq!(v.downloads[1].sha256.to_hex(), S1);
        assert_eq!(v.metadata["license"], "CC-BY-4.0");
        assert_eq!(v.metadata["size_hint"], "12");
        assert_eq!(v.metadata["tags"], "[\"a\", 1]");
        assert_eq!(v.metadata.len(), 3);
        let ArtifactEntry::Single(c) = m.get("clm_data_0.9x1.25").unwrap() else {
            panic!("not single")
        };
        assert!(!c.lazy);
        assert!(c.downloads.is_empty());
        assert_eq!(c.line, 19);
        assert_eq!(c.metadata["inline"], "{ a = 1, b = \"x\" }");
        assert!(m.get("nope").is_none());
    }

    #[test]
    fn parses_inline_and_platform_entries() {
        let text = format!(
            r#"
inline_one = {{ git-tree-sha1 = "{H1}", download = [{{ url = "u", sha256 = "{S1}" }}] }}

[[lib]]
arch = "x86_64"
os = "linux"
libc = "glibc"
libgfortran_version = "5.0.0"
license = "MIT"
lazy = true
git-tree-sha1 = "{H1}"
    [[lib.download]]
    url = "https://a/x86_64.tar.gz"
    sha256 = "{S1}"

[[lib]]
arch = "aarch64"
os = "macos"
git-tree-sha1 = "{H2}"
"#
        );
        let m = parse(&text).unwrap();
        assert_eq!(m.names().collect::<Vec<_>>(), ["inline_one", "lib"]);
        let ArtifactEntry::Single(i) = &m.artifacts()[0].1 else {
            panic!()
        };
        assert_eq!(i.downloads[0].url, "u");
        assert_eq!(i.line, 2);
        let ArtifactEntry::PlatformSpecific(vs) = m.get("lib").unwrap() else {
            panic!("not platform specific")
        };
        assert_eq!(vs.len(), 2);
        let p = vs[0].platform.as_ref().unwrap();
        assert_eq!(
            p.to_string(),
            "arch=x86_64,libc=glibc,libgfortran_version=5.0.0,os=linux"
        );
        assert_eq!(vs[0].metadata["license"], "MIT");
        assert!(vs[0].lazy);
        assert_eq!(vs[0].line, 4);
        assert_eq!(vs[1].line, 16);
        assert!(!vs[1].lazy);
        assert_eq!(vs[1].platform.as_ref().unwrap().get("os"), Some("macos"));
    }

    #[test]
    fn ties_go_to_the_greatest_triplet_whatever_the_order_in_the_file() {
        // Julia's select_platform: equal loss, then reverse-sorted triplets, so libgfortran5
        // wins over 4 and 3 for a host that does not say which it has.
        for order in [[3, 5, 4], [5, 4, 3], [4, 3, 5]] {
            let text: String = order
                .iter()
                .map(|v| {
                    format!(
                        "[[lib]]\nos = \"linux\"\narch = \"x86_64\"\nlibgfortran_version = \"{v}.0.0\"\ngit-tree-sha1 = \"{H1}\"\ndescription = \"gf{v}\"\n"
                    )
                })
                .collect();
            let m = parse(&text).unwrap();
            let host = Platform::from_tags([("os", "linux"), ("arch", "x86_64")]);
            let picked = m.select("lib", &host).unwrap();
            assert_eq!(picked.metadata["description"], "gf5", "order {order:?}");
        }
    }

    #[test]
    fn finds_the_manifest_upwards_and_stops_at_the_project_root() {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("model");
        let deep = project.join("src/sub");
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::write(project.join("Project.toml"), "name = \"Model\"\n").unwrap();
        std::fs::write(project.join("Artifacts.toml"), "").unwrap();
        assert_eq!(
            Manifest::find_upwards(&deep).unwrap(),
            project.join("Artifacts.toml")
        );
        // JuliaArtifacts.toml is preferred, as in Julia.
        std::fs::write(project.join("JuliaArtifacts.toml"), "").unwrap();
        assert_eq!(
            Manifest::find_upwards(&deep).unwrap(),
            project.join("JuliaArtifacts.toml")
        );
        // A project root without a manifest ends the search: a manifest above it is not used.
        std::fs::write(dir.path().join("Artifacts.toml"), "").unwrap();
        let other = dir.path().join("other/src");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(dir.path().join("other/Cargo.toml"), "").unwrap();
        let e = Manifest::find_upwards(&other).unwrap_err().to_string();
        assert!(e.contains("other/Artifacts.toml"), "{e}");
        // Without any project root, the walk reaches the manifest above.
        let loose = dir.path().join("loose/a/b");
        std::fs::create_dir_all(&loose).unwrap();
        assert_eq!(
            Manifest::find_upwards(&loose).unwrap(),
            dir.path().join("Artifacts.toml")
        );
    }

    #[test]
    fn selects_variants() {
        let text = format!(
            r#"
[[lib]]
os = "linux"
arch = "x86_64"
libc = "musl"
git-tree-sha1 = "{H1}"
[[lib]]
os = "linux"
arch = "x86_64"
git-tree-sha1 = "{H2}"
[[lib]]
os = "linux"
arch = "x86_64"
libc = "glibc"
libgfortran_version = "4.0.0"
git-tree-sha1 = "{H1}"
[[lib]]
os = "linux"
arch = "x86_64"
libc = "glibc"
libgfortran_version = "5.0.0"
git-tree-sha1 = "{H2}"
[[lib]]
os = "macos"
arch = "aarch64"
git-tree-sha1 = "{H1}"
[single]
git-tree-sha1 = "{H1}"
"#
        );
        let m = parse(&text).unwrap();
        let glibc = Platform::from_tags([("os", "linux"), ("arch", "x86_64"), ("libc", "glibc")]);
        // The variant without libc is glibc (Julia's default) and has exactly the host's tag
        // names (loss 0): it beats the libgfortran ones (loss 1).
        assert_eq!(m.select("lib", &glibc).unwrap().line, 7);
        let mut gf5 = glibc.clone();
        gf5.apply_tags("libgfortran_version=5").unwrap();
        assert_eq!(m.select("lib", &gf5).unwrap().line, 17);
        let mut gf4 = glibc.clone();
        gf4.apply_tags("libgfortran_version=4.0.0").unwrap();
        assert_eq!(m.select("lib", &gf4).unwrap().line, 11);
        let musl = Platform::from_tags([("os", "linux"), ("arch", "x86_64"), ("libc", "musl")]);
        assert_eq!(m.select("lib", &musl).unwrap().line, 2);
        // Case of values does not matter.
        let mac = Platform::from_tags([("os", "MacOS"), ("arch", "aarch64")]);
        assert_eq!(m.select("lib", &mac).unwrap().line, 23);
        let win = Platform::from_tags([("os", "windows"), ("arch", "x86_64")]);
        let e = m.select("lib", &win).unwrap_err();
        assert_eq!(
            e.to_string(),
            "artifact `lib` has no variant for this platform (arch=x86_64,os=windows); offered: \
             arch=x86_64,libc=musl,os=linux; arch=x86_64,libc=glibc,os=linux; \
             arch=x86_64,libc=glibc,libgfortran_version=4.0.0,os=linux; \
             arch=x86_64,libc=glibc,libgfortran_version=5.0.0,os=linux; arch=aarch64,os=macos"
        );
        assert_eq!(m.select("single", &win).unwrap().line, 27);
        let e = m.select("nope", &win).unwrap_err();
        assert_eq!(
            e.to_string(),
            "artifact `nope` is not defined in `dir/Artifacts.toml`; defined: lib, single"
        );
        // A likely typo gets a suggestion (the run-time names of `clima_artifact!` and the
        // `Artifacts` API report this error).
        let e = m.select("singel", &win).unwrap_err();
        assert_eq!(
            e.to_string(),
            "artifact `singel` is not defined in `dir/Artifacts.toml`; did you mean `single`? \
             defined: lib, single"
        );
    }

    #[test]
    fn reads_git_tree_sha256_beside_git_tree_sha1() {
        let h256 = "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321";
        let m = parse(&format!(
            "[a]\ngit-tree-sha1 = \"{H1}\"\ngit-tree-sha256 = \"{}\"\n[b]\ngit-tree-sha1 = \"{H2}\"\n",
            h256.to_uppercase()
        ))
        .unwrap();
        let Some(ArtifactEntry::Single(a)) = m.get("a") else {
            panic!("a is a table")
        };
        assert_eq!(a.git_tree_sha256.unwrap().to_hex(), h256);
        assert!(!a.metadata.contains_key("git-tree-sha256"), "not metadata");
        let Some(ArtifactEntry::Single(b)) = m.get("b") else {
            panic!("b is a table")
        };
        assert_eq!(b.git_tree_sha256, None);
    }

    #[test]
    fn reports_bad_git_tree_sha256_with_position() {
        assert_eq!(
            err(&format!(
                "[era5]\ngit-tree-sha1 = \"{H1}\"\ngit-tree-sha256 = \"{H1}\"\n"
            )),
            "`dir/Artifacts.toml`:3:19: artifact `era5`: `git-tree-sha256` is not a valid hash \
             (expected 64 hex digits, found 40 characters); it must be the 64 hex digits of the git \
             SHA-256 tree hash of the artifact's content (`clima-artifacts hash --sha256 DIR` \
             prints it), or be left out"
        );
        assert_eq!(
            err(&format!(
                "[[lib]]\nos = \"linux\"\narch = \"x86_64\"\ngit-tree-sha1 = \"{H1}\"\ngit-tree-sha256 = 5\n"
            )),
            "`dir/Artifacts.toml`:5:19: artifact `lib`: platform variant 1 (`[[lib]]` on line 1): \
             `git-tree-sha256` must be a string of 64 hex digits, found an integer"
        );
        assert_eq!(
            err(&format!(
                "[era5]\ngit-tree-sha256 = \"{}\"\n",
                "a".repeat(64)
            )),
            "`dir/Artifacts.toml`:1:1: artifact `era5`: missing `git-tree-sha1`; add \
             `git-tree-sha1 = \"<40 hex digits>\"`, the git tree hash of the artifact's content \
             (a `git-tree-sha256` is checked in addition to it, never instead: the SHA-1 names the \
             artifact's folder in a depot, as in Julia)"
        );
    }

    #[test]
    fn reports_toml_errors_with_position() {
        assert_eq!(
            err("[era5]\ngit-tree-sha1 = \"abc\n"),
            "`dir/Artifacts.toml`:2:21: artifact `era5`: invalid TOML: invalid basic string, expected `\"`; fix the TOML syntax at this position"
        );
        let e = parse("[a]\nx = 1\n[a]\ny = 2\n").unwrap_err();
        assert_eq!((e.line, e.column), (Some(3), Some(2)));
        assert_eq!(e.artifact, None, "errors on header lines name no artifact");
        assert!(e.to_string().contains("duplicate key"), "{e}");
        // A broken header is not blamed on the artifact above it.
        let e = parse(&format!("[a]\ngit-tree-sha1 = \"{H1}\"\n[b\n")).unwrap_err();
        assert_eq!((e.line, e.artifact), (Some(3), None));
        // A later line of an array entry names its artifact.
        let e = parse("[[lib]]\nos = \"linux\"\n[[lib]]\nos = \"mac\nos\"\n").unwrap_err();
        assert_eq!((e.line, e.artifact.as_deref()), (Some(5), Some("lib")));
    }

    #[test]
    fn reports_structural_errors() {
        assert_eq!(
            err("era5 = \"x\"\n"),
            "`dir/Artifacts.toml`:1:1: artifact `era5`: is a string, not an artifact; an artifact is \
             a table `[era5]` (or an array of tables `[[era5]]`, one per platform) with a `git-tree-sha1`"
        );
        assert_eq!(
            err("[era5]\nlazy = true\n"),
            "`dir/Artifacts.toml`:1:1: artifact `era5`: missing `git-tree-sha1`; add \
             `git-tree-sha1 = \"<40 hex digits>\"`, the git tree hash of the artifact's content"
        );
        assert_eq!(
            err("[era5]\ngit-tree-sha1 = \"abc\"\n"),
            "`dir/Artifacts.toml`:2:17: artifact `era5`: `git-tree-sha1` is not a valid hash \
             (expected 40 hex digits, found 3 characters); it must be the 40 hex digits of the git \
             tree hash of the artifact's content"
        );
        assert!(err("[era5]\ngit-tree-sha1 = 5\n").contains(":2:17: artifact `era5`: `git-tree-sha1` must be a string of 40 hex digits, found an integer"));
        assert!(
            err(&format!(
                "[era5]\ngit-tree-sha1 = \"{H1}\"\nlazy = \"yes\"\n"
            ))
            .contains(":3:8: artifact `era5`: `lazy` must be `true` or `false`, found a string")
        );
        assert!(err(&format!("[era5]\ngit-tree-sha1 = \"{H1}\"\n[era5.download]\nurl = \"u\"\n")).contains(":3:1: artifact `era5`: `download` is a table; it must be an array of tables: write `[[era5.download]]`"));
        assert!(
            err(&format!(
                "[era5]\ngit-tree-sha1 = \"{H1}\"\ndownload = [\"u\"]\n"
            ))
            .contains(":3:13: artifact `era5`: download 1 is a string;")
        );
        assert!(err("x = []\n").contains("the array lists no platform variants"));
        assert!(
            err("x = [1]\n").contains(":1:6: artifact `x`: element 1 of the array is an integer")
        );
    }

    #[test]
    fn reports_download_errors() {
        let base = format!("[\"a.b\"]\ngit-tree-sha1 = \"{H1}\"\n[[\"a.b\".download]]\n");
        assert_eq!(
            err(&format!("{base}url = \"https://x\"\n")),
            "`dir/Artifacts.toml`:3:1: artifact `a.b`: download 1 (`[[\"a.b\".download]]`) has no \
             `sha256`; add `sha256 = \"<64 hex digits>\"`, the SHA-256 of the tarball (`sha256sum <file>`)"
        );
        assert_eq!(
            err(&format!("{base}sha256 = \"{S1}\"\n")),
            "`dir/Artifacts.toml`:3:1: artifact `a.b`: download 1 (`[[\"a.b\".download]]`) has no \
             `url`; add `url = \"https://...\"` or remove the section"
        );
        assert!(err(&format!("{base}url = \"u\"\nsha256 = \"{}\"\n", &S1[1..])).contains(":5:10: artifact `a.b`: download 1: `sha256` is not a valid digest (expected 64 hex digits, found 63 characters)"));
        assert!(
            err(&format!("{base}url = \"u\"\nsha256 = \"{}z\"\n", &S1[1..]))
                .contains("`z` is not a hex digit")
        );
        assert!(
            err(&format!("{base}url = 1\nsha256 = \"{S1}\"\n")).contains(
                ":4:7: artifact `a.b`: download 1: `url` must be a string, found an integer"
            )
        );
        assert!(err(&format!("{base}url = \" \"\nsha256 = \"{S1}\"\n")).contains("empty `url`"));
        assert!(err(&format!("{base}url = \"u\"\nsha256 = \"{S1}\"\nsize = -1\n")).contains(":6:8: artifact `a.b`: download 1: `size` must be a non-negative number of bytes, found `-1`"));
        assert!(
            err(&format!(
                "{base}url = \"u\"\nsha256 = \"{S1}\"\nsize = 1.5\n"
            ))
            .contains("`size` must be an integer number of bytes, found a float")
        );
        assert!(
            err(&format!("{base}url = \"u\"\nsha256 = 3\n"))
                .contains("`sha256` must be a string of 64 hex digits, found an integer")
        );
    }

    #[test]
    fn reports_platform_errors_and_collects_all() {
        let text = format!(
            "[[lib]]\nos = \"linux\"\ngit-tree-sha1 = \"{H1}\"\n[[lib]]\nos = 1\narch = \"x86_64\"\ngit-tree-sha1 = \"{H1}\"\n[bad]\n"
        );
        let errors = Manifest::parse_all(&text, Path::new("A.toml")).unwrap_err();
        let shown: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "`A.toml`:1:1: artifact `lib`: platform variant 1 (`[[lib]]` on line 1): missing \
                 platform tag `arch`; every `[[lib]]` entry needs `os` and `arch` (e.g. `os = \
                 \"linux\"`, `arch = \"x86_64\"`), or use a single `[lib]` table if the artifact is \
                 the same on every platform",
                "`A.toml`:5:6: artifact `lib`: platform variant 2 (`[[lib]]` on line 4): platform \
                 tag `os` must be a string, found an integer",
                "`A.toml`:8:1: artifact `bad`: missing `git-tree-sha1`; add `git-tree-sha1 = \
                 \"<40 hex digits>\"`, the git tree hash of the artifact's content",
            ]
        );
        // `parse` returns the first of them.
        assert_eq!(
            Manifest::parse(&text, Path::new("A.toml"))
                .unwrap_err()
                .to_string(),
            shown[0]
        );
    }

    #[test]
    fn lookups_by_name_find_every_entry_and_broken_one() {
        let mut text = String::new();
        for i in 0..500 {
            text += &format!("[a{i}]\ngit-tree-sha1 = \"{H1}\"\n");
        }
        text += "[broken]\nlazy = true\n";
        let m = Manifest::parse_lenient(&text, Path::new("A.toml")).unwrap();
        assert_eq!(m.artifacts().len(), 500);
        for i in [0, 1, 250, 499] {
            let name = format!("a{i}");
            assert!(m.get(&name).is_some(), "{name}");
            assert!(m.broken_entry(&name).is_none());
            m.select(&name, &Platform::host()).unwrap();
        }
        assert!(m.get("a500").is_none() && m.get("broken").is_none());
        assert_eq!(m.broken().len(), 1);
        let errors = m.broken_entry("broken").unwrap();
        assert!(errors[0].to_string().contains("missing `git-tree-sha1`"));
        assert!(matches!(
            m.select("broken", &Platform::host()),
            Err(SelectError::Broken { .. })
        ));
        // A hand-made manifest that repeats a name: the first entry wins, as a scan would.
        let first = m.artifacts()[0].1.clone();
        let mut other = first.clone();
        if let ArtifactEntry::Single(v) = &mut other {
            v.lazy = !v.lazy;
        }
        assert_ne!(first, other);
        let made = Manifest::new(
            PathBuf::from("B.toml"),
            vec![("x".into(), first.clone()), ("x".into(), other)],
            Vec::new(),
        );
        assert_eq!(made.get("x"), Some(&first));
        assert_eq!(made.names().collect::<Vec<_>>(), ["x", "x"]);
    }

    #[test]
    fn parses_empty_and_comment_only_files() {
        assert!(parse("").unwrap().artifacts().is_empty());
        assert!(parse("# nothing here\n\n").unwrap().artifacts().is_empty());
    }

    #[test]
    fn loads_and_finds_files() {
        let dir = tempfile::tempdir().unwrap();
        let e = Manifest::find_in_dir(dir.path()).unwrap_err();
        let shown = e.to_string();
        assert!(
            shown.contains("no JuliaArtifacts.toml or Artifacts.toml found"),
            "{shown}"
        );
        assert!(shown.contains(&dir.path().join("JuliaArtifacts.toml").display().to_string()));
        assert!(shown.contains(&dir.path().join("Artifacts.toml").display().to_string()));

        let plain = dir.path().join("Artifacts.toml");
        std::fs::write(&plain, format!("[a]\ngit-tree-sha1 = \"{H1}\"\n")).unwrap();
        assert_eq!(Manifest::find_in_dir(dir.path()).unwrap(), plain);
        let julia = dir.path().join("JuliaArtifacts.toml");
        std::fs::write(&julia, format!("[b]\ngit-tree-sha1 = \"{H2}\"\n")).unwrap();
        assert_eq!(Manifest::find_in_dir(dir.path()).unwrap(), julia);
        let m = Manifest::load(&julia).unwrap();
        assert_eq!(m.path, julia);
        assert_eq!(m.names().collect::<Vec<_>>(), ["b"]);

        let missing = dir.path().join("nope.toml");
        let e = Manifest::load(&missing).unwrap_err();
        assert!(matches!(e.kind, ManifestErrorKind::Io(_)));
        assert!(
            e.to_string()
                .starts_with(&format!("`{}`: cannot read file:", missing.display()))
        );

        let binary = dir.path().join("bin.toml");
        std::fs::write(&binary, b"[a]\n\xff\n").unwrap();
        assert!(
            Manifest::load(&binary)
                .unwrap_err()
                .to_string()
                .contains("not UTF-8 (invalid byte at offset 4)")
        );
    }

    #[test]
    fn single_entry_fits_any_platform() {
        let m = parse(&format!("[a]\ngit-tree-sha1 = \"{H1}\"\n")).unwrap();
        let v = m.select("a", &Platform::default()).unwrap();
        assert_eq!(v.git_tree_sha1.to_hex(), H1);
    }
}
