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
mod tests;
