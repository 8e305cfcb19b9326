//! The census of a community's artifacts: every manifest found under some folders, and per
//! artifact (keyed by its content hash, the `git-tree-sha1`) its names, the manifests naming
//! it, its downloads, what documents it (license, citation, README, recipe) and its
//! [`PROBLEMS`].
//!
//! This module is the pure part: it takes each manifest's text and answers questions about the
//! files next to it through [`Surroundings`]; it never touches the file system or the network
//! itself. The operations crate's `census_walk` (what the CLI's `census` runs) walks the
//! folders and implements [`Surroundings`] without following symlinks.
//!
//! What counts (per artifact, over every manifest entry with its hash):
//! - README: `README.md` next to the manifest, or in the artifact's recipe folder (the
//!   `recipe` key's folder, else `artifacts/<name>/`).
//! - recipe: a `recipe` key, a recipe folder `artifacts/<name>/`, or a `create_artifact.jl`
//!   next to the manifest (the layout of CliMA's artifact collection).
//! - citation: a `citation`, `doi` or `bibtex` key, or a README citation section
//!   ([`readme::CITATION_SECTION`], which accepts `References` and `Citation` too).
//! - license: a `license` key, or a licence a README states ([`readme_license`]: `License:
//!   ...`, `licensed under ...`, a licence section), matched to an SPDX id when it names one
//!   unambiguously and reported as unrecognised otherwise. The README next to a manifest in a
//!   package's folder (a `src` folder and a `Project.toml`, `JuliaProject.toml` or
//!   `Cargo.toml`) states the code's licence, not the data's: its statements are not read.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Component, Path};

use clima_artifact_fs::printable;
use clima_artifact_manifest::{ArtifactEntry, Download, Manifest, metadata, validate};

use crate::readme;
use crate::readme_license::{self, LicenseStatement};

/// The hash is the SHA-1 of the artifact's name, not of content.
pub const PLACEHOLDER_HASH: &str = "placeholder-hash";
/// No entry gives a download: the artifact must come from an override.
pub const NOT_DOWNLOADABLE: &str = "not-downloadable";
/// No entry has a `license` key, and no README states a licence.
pub const NO_LICENSE: &str = "no-license";
/// No `license` key, and the licence a README states is not one the census maps to an SPDX id.
pub const LICENSE_UNRECOGNISED: &str = "license-unrecognised";
/// No `citation`, `doi` or `bibtex` key and no README citation section.
pub const NO_CITATION: &str = "no-citation";
/// No README next to the manifest or in the recipe folder.
pub const NO_README: &str = "no-readme";
/// No `recipe` key, no recipe folder, no `create_artifact.jl` next to the manifest.
pub const NO_RECIPE: &str = "no-recipe";
/// Downloads only from hosts that are not an archive record (a DOI-backed repository such as
/// Zenodo) or a package server: a share link that can change or vanish.
pub const SHARE_LINK_HOST: &str = "share-link-host";
/// A download over unencrypted `http://`.
pub const HTTP_URL: &str = "http-url";
/// One of its names is given other hashes elsewhere (for a `[[name]]` entry: the same name and
/// platform), in the same manifest or another.
pub const NAME_CONFLICT: &str = "name-conflict";
/// The same content is named by several names.
pub const SAME_CONTENT: &str = "same-content";

/// Every problem code, in the order reports list them.
pub const PROBLEMS: [&str; 11] = [
    PLACEHOLDER_HASH,
    NOT_DOWNLOADABLE,
    NO_LICENSE,
    LICENSE_UNRECOGNISED,
    NO_CITATION,
    NO_README,
    NO_RECIPE,
    SHARE_LINK_HOST,
    HTTP_URL,
    NAME_CONFLICT,
    SAME_CONTENT,
];

/// Hosts whose downloads are an archive record (DOI-backed data repositories) or a package
/// server; a host matches itself and its subdomains.
pub const ARCHIVE_HOSTS: [&str; 9] = [
    "zenodo.org",
    "data.caltech.edu",
    "figshare.com",
    "datadryad.org",
    "pangaea.de",
    "doi.org",
    "dataverse.harvard.edu",
    "pkg.julialang.org",
    "storage.julialang.net",
];

/// The script that makes an artifact in CliMA's artifact collection, next to its manifest.
pub const CREATE_SCRIPT: &str = "create_artifact.jl";

/// Files that, with a `src` folder beside them, make a manifest's folder a package's (Julia's,
/// Rust's), whose README states the code's licence: its licence statements are not read as the
/// data's. (A folder of CliMA's artifact collection has a `Project.toml` for its create script,
/// and no `src`.)
pub const PACKAGE_FILES: [&str; 3] = ["Project.toml", "JuliaProject.toml", "Cargo.toml"];

/// Folder of the conventional recipe folders (`artifacts/<name>/`) next to a manifest.
const RECIPE_FOLDERS: &str = clima_artifact_manifest::layout::PROJECT_RECIPES;

/// Whether a file name is a manifest the census reads: `Artifacts.toml`, `JuliaArtifacts.toml`,
/// or any `*Artifacts.toml` (CliMA's collection has an `OutputArtifacts.toml` per folder).
pub fn is_manifest_name(name: &str) -> bool {
    name.ends_with("Artifacts.toml")
}

/// What the census asks about the files next to a manifest. `rel` is `/`-separated and
/// relative to the manifest's folder, made of plain names only (never `..` or absolute).
pub trait Surroundings {
    /// The text of the regular file `rel`: `Ok(None)` when there is none, `Err` (a message
    /// naming it) when it cannot be read. Implementations bound the size read and never
    /// follow a symlink.
    fn text(&self, rel: &str) -> Result<Option<String>, String>;
    /// Whether `rel` is a regular file (not through a symlink).
    fn is_file(&self, rel: &str) -> bool;
    /// Whether `rel` is a folder (not through a symlink).
    fn is_dir(&self, rel: &str) -> bool;
}

/// One manifest of the census.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CensusManifest {
    /// Its path, as found.
    pub path: String,
    /// How many artifact entries (platform variants counted one by one) it gives.
    pub artifacts: usize,
    /// Why it could not be read or parsed at all (escaped); `None` when it was.
    pub error: Option<String>,
    /// Entries that could not be read, each as `name: error` (escaped); the rest counts.
    pub broken_entries: Vec<String>,
}

/// One entry naming an artifact: the manifest and the name there.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct CensusEntry {
    /// The manifest's path, as found.
    pub manifest: String,
    /// The artifact's name in it.
    pub name: String,
}

/// One artifact of the census: one content hash.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CensusArtifact {
    /// The content hash (40 hex digits).
    pub git_tree_sha1: String,
    /// The names it has, sorted.
    pub names: Vec<String>,
    /// The manifests naming it, in census order.
    pub manifests: Vec<String>,
    /// Each manifest entry naming it (manifest and name), in census order: what a fix edits.
    #[serde(default)]
    pub entries: Vec<CensusEntry>,
    /// Its download URLs, in order of appearance, without repeats.
    pub urls: Vec<String>,
    /// The hosts of those URLs, sorted.
    pub hosts: Vec<String>,
    /// The size of its download, when a manifest gives one (the largest given).
    pub size: Option<u64>,
    /// The platforms of `[[name]]` entries with this hash (`arch=x86_64,os=linux`), sorted.
    pub platforms: Vec<String>,
    /// Its `license` values; then each licence a README states, as `ID (stated in PATH)`
    /// when it names an SPDX id, else `unrecognised statement in PATH: "..."`.
    pub license: Vec<String>,
    /// Its `citation` and `doi` values (`doi:` prefixed), and `README citation section in
    /// PATH` for a README section.
    pub citation: Vec<String>,
    /// Where its recipe is: `recipe = "KEY"` in a manifest, a recipe folder or a create script
    /// (paths as found).
    pub recipe: Vec<String>,
    /// READMEs found for it (paths as found).
    pub readme: Vec<String>,
    /// Where it is installed (`--depot`); `None` when no depot was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installed: Option<Vec<String>>,
    /// Its problems, codes of [`PROBLEMS`], in that order.
    pub problems: Vec<String>,
    /// For a placeholder hash (the SHA-1 of a name) whose name is given a content hash in
    /// another entry (same name and platform): those content hashes. Its `manifests` are then
    /// the manifests that still name the replaced placeholder, whose users lose their override
    /// unless `Overrides.toml` keeps a line for it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replaced_by: Vec<String>,
}

/// The result of a census. JSON: `{"manifests": [...], "artifacts": [...], "summary":
/// {problem: count}}`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CensusReport {
    /// Every manifest found, in the order given.
    pub manifests: Vec<CensusManifest>,
    /// Every artifact, sorted by hash.
    pub artifacts: Vec<CensusArtifact>,
    /// Per problem code (every code of [`PROBLEMS`], zero included): how many artifacts have it.
    pub summary: BTreeMap<String, usize>,
}

/// What is gathered about one hash while manifests are added.
#[derive(Default)]
struct Acc {
    names: BTreeSet<String>,
    manifests: Vec<String>,
    entries: Vec<CensusEntry>,
    urls: Vec<String>,
    hosts: BTreeSet<String>,
    size: Option<u64>,
    platforms: BTreeSet<String>,
    license: BTreeSet<String>,
    /// Which licences: a `license` key, a README statement naming an SPDX id, one naming none.
    license_key: bool,
    license_stated: bool,
    license_unrecognised: bool,
    citation: BTreeSet<String>,
    recipe: BTreeSet<String>,
    readme: BTreeSet<String>,
    downloadable: bool,
    archived: bool,
    http: bool,
}

/// A census being taken: add manifests, then [`Census::finish`].
#[derive(Default)]
pub struct Census {
    manifests: Vec<CensusManifest>,
    by_hash: BTreeMap<String, Acc>,
    /// (name, platform) → hashes, for name conflicts.
    by_name: BTreeMap<(String, Option<String>), BTreeSet<String>>,
}

impl Acc {
    /// Adds what one download source of the hash says: its URL, whether it is plain http, its
    /// host (and whether that is an archive record), and its size (the largest one counts).
    fn add_download(&mut self, d: &Download) {
        self.downloadable = true;
        let url = printable(&d.url).into_owned();
        if !self.urls.contains(&url) {
            self.urls.push(url);
        }
        let scheme_end = d.url.find("://");
        if d.url
            .get(..7)
            .is_some_and(|s| s.eq_ignore_ascii_case("http://"))
        {
            self.http = true;
        }
        if let Some(host) = scheme_end.and_then(|i| host_of(&d.url[i + 3..])) {
            self.archived |= is_archive_host(&host);
            self.hosts.insert(printable(&host).into_owned());
        }
        if let Some(size) = d.size {
            self.size = Some(self.size.map_or(size, |s| s.max(size)));
        }
    }

    /// Adds the license and the citations a variant's metadata `keys` give (in the manifest
    /// `shown`).
    fn add_license_and_citation(&mut self, keys: &BTreeMap<String, String>, shown: &str) {
        if let Some(l) = keys.get(metadata::LICENSE) {
            self.license.insert(printable(l).into_owned());
            self.license_key = true;
        }
        if let Some(c) = keys.get(metadata::CITATION) {
            self.citation.insert(printable(c).into_owned());
        }
        if let Some(d) = keys.get(metadata::DOI) {
            self.citation.insert(format!("doi:{}", printable(d)));
        }
        if keys.contains_key(metadata::BIBTEX) {
            self.citation.insert(format!("bibtex in {shown}"));
        }
    }
}

impl Acc {
    /// Adds what a README found for the hash says: its path, its citation section, the
    /// licences it states.
    fn add_readme(&mut self, r: &Readme) {
        self.readme.insert(r.path.clone());
        if r.cites {
            self.citation
                .insert(format!("README citation section in {}", r.path));
        }
        for s in &r.licenses {
            match s.spdx {
                Some(id) => {
                    self.license_stated = true;
                    self.license.insert(format!("{id} (stated in {})", r.path));
                }
                None => {
                    self.license_unrecognised = true;
                    self.license.insert(format!(
                        "unrecognised statement in {}: \"{}\"",
                        r.path,
                        printable(&s.text)
                    ));
                }
            }
        }
    }
}

/// The recipe folder of the artifact `name` (relative to its manifest's folder, which
/// `around` sees): the `recipe` key's (`key`), else `artifacts/<name>/` if present.
fn recipe_folder(name: &str, key: Option<&str>, around: &dyn Surroundings) -> Option<String> {
    let conventional = format!("{RECIPE_FOLDERS}/{name}");
    match key {
        Some(k) if plain_relative(k) => Some(k.trim_end_matches('/').to_owned()),
        Some(_) => None,
        None => (plain_relative(name) && around.is_dir(&conventional)).then_some(conventional),
    }
}

/// A README read near a manifest: its path as shown, whether it has a citation section, and
/// the licences it states (none read from a package's README).
#[derive(Clone)]
struct Readme {
    path: String,
    cites: bool,
    licenses: Vec<LicenseStatement>,
}

impl Census {
    /// An empty census.
    pub fn new() -> Census {
        Census::default()
    }

    /// Lists a manifest that could not be read (`error` is escaped here).
    pub fn add_unreadable(&mut self, path: &str, error: &str) {
        self.manifests.push(CensusManifest {
            path: printable(path).into_owned(),
            artifacts: 0,
            error: Some(printable(error).into_owned()),
            broken_entries: Vec::new(),
        });
    }

    /// Adds the manifest at `path` (as shown) with this text; files next to it are asked of
    /// `around`. A file that is not TOML is listed with its error; broken entries are listed
    /// and the others counted.
    pub fn add_manifest(&mut self, path: &str, text: &str, around: &dyn Surroundings) {
        let manifest = match Manifest::parse_lenient(text, Path::new(path)) {
            Ok(m) => m,
            Err(errors) => {
                let first = errors.first().map(ToString::to_string).unwrap_or_default();
                return self.add_unreadable(path, &first);
            }
        };
        let shown = printable(path).into_owned();
        let dir = folder_of(&shown);
        let mut readmes: BTreeMap<String, Option<Readme>> = BTreeMap::new();
        let package = around.is_dir("src") && PACKAGE_FILES.iter().any(|f| around.is_file(f));
        let mut read_readme = |rel: String| -> Option<Readme> {
            readmes
                .entry(rel.clone())
                .or_insert_with(|| match around.text(&rel) {
                    Ok(Some(text)) => Some(Readme {
                        path: format!("{dir}{rel}"),
                        cites: readme::section_text(&text, &readme::CITATION_SECTION).is_some(),
                        licenses: if package && rel == readme::README_FILE {
                            Vec::new()
                        } else {
                            readme_license::license_statements(&text)
                        },
                    }),
                    _ => None,
                })
                .clone()
        };
        let create_script = around.is_file(CREATE_SCRIPT);
        let mut count = 0;
        for (name, entry) in manifest.artifacts() {
            let variants = match entry {
                ArtifactEntry::Single(v) => std::slice::from_ref(v),
                ArtifactEntry::PlatformSpecific(vs) => vs.as_slice(),
            };
            let key = variants
                .first()
                .and_then(|v| v.metadata.get(metadata::RECIPE));
            let folder = recipe_folder(name, key.map(String::as_str), around);
            let mut found_readmes = Vec::new();
            found_readmes.extend(read_readme(readme::README_FILE.to_owned()));
            if let Some(f) = &folder {
                found_readmes.extend(read_readme(format!("{f}/{}", readme::README_FILE)));
            }
            for v in variants {
                count += 1;
                let hash = v.git_tree_sha1.to_string();
                let acc = self.by_hash.entry(hash.clone()).or_default();
                acc.names.insert(printable(name).into_owned());
                if acc.manifests.last() != Some(&shown) {
                    acc.manifests.push(shown.clone());
                }
                let entry = CensusEntry {
                    manifest: shown.clone(),
                    name: printable(name).into_owned(),
                };
                if !acc.entries.contains(&entry) {
                    acc.entries.push(entry);
                }
                let platform = v.platform.as_ref().map(ToString::to_string);
                if let Some(p) = &platform {
                    acc.platforms.insert(printable(p).into_owned());
                }
                self.by_name
                    .entry((name.clone(), platform))
                    .or_default()
                    .insert(hash.clone());
                for d in &v.downloads {
                    acc.add_download(d);
                }
                acc.add_license_and_citation(&v.metadata, &shown);
                for r in &found_readmes {
                    acc.add_readme(r);
                }
                if let Some(k) = key {
                    acc.recipe
                        .insert(format!("recipe = \"{}\" in {shown}", printable(k)));
                } else if let Some(f) = &folder {
                    acc.recipe.insert(format!("{dir}{f}"));
                }
                if create_script {
                    acc.recipe.insert(format!("{dir}{CREATE_SCRIPT}"));
                }
            }
        }
        self.manifests.push(CensusManifest {
            path: shown,
            artifacts: count,
            error: None,
            broken_entries: manifest
                .broken()
                .iter()
                .map(|(name, errors)| {
                    let first = errors.first().map(ToString::to_string).unwrap_or_default();
                    printable(&format!("{name}: {first}")).into_owned()
                })
                .collect(),
        });
    }

    /// The report: artifacts sorted by hash, each with its problems, and the summary.
    pub fn finish(self) -> CensusReport {
        let mut conflicting: BTreeSet<&str> = BTreeSet::new();
        for hashes in self.by_name.values().filter(|h| h.len() > 1) {
            conflicting.extend(hashes.iter().map(String::as_str));
        }
        let mut summary: BTreeMap<String, usize> =
            PROBLEMS.iter().map(|p| (p.to_string(), 0)).collect();
        let mut artifacts = Vec::with_capacity(self.by_hash.len());
        for (hash, acc) in &self.by_hash {
            let placeholder = acc.names.iter().any(|n| is_placeholder_of(n, hash));
            let replaced_by = if placeholder {
                self.replacements(hash)
            } else {
                Vec::new()
            };
            let checks = [
                (PLACEHOLDER_HASH, placeholder),
                (NOT_DOWNLOADABLE, !acc.downloadable),
                (NO_LICENSE, acc.license.is_empty()),
                (
                    LICENSE_UNRECOGNISED,
                    acc.license_unrecognised && !acc.license_key && !acc.license_stated,
                ),
                (NO_CITATION, acc.citation.is_empty()),
                (NO_README, acc.readme.is_empty()),
                (NO_RECIPE, acc.recipe.is_empty()),
                (SHARE_LINK_HOST, acc.downloadable && !acc.archived),
                (HTTP_URL, acc.http),
                (NAME_CONFLICT, conflicting.contains(hash.as_str())),
                (SAME_CONTENT, acc.names.len() > 1),
            ];
            let problems: Vec<String> = checks
                .iter()
                .filter(|(_, has)| *has)
                .map(|(p, _)| p.to_string())
                .collect();
            for p in &problems {
                *summary.entry(p.clone()).or_default() += 1;
            }
            artifacts.push(CensusArtifact {
                git_tree_sha1: hash.clone(),
                names: acc.names.iter().cloned().collect(),
                manifests: acc.manifests.clone(),
                entries: acc.entries.clone(),
                urls: acc.urls.clone(),
                hosts: acc.hosts.iter().cloned().collect(),
                size: acc.size,
                platforms: acc.platforms.iter().cloned().collect(),
                license: acc.license.iter().cloned().collect(),
                citation: acc.citation.iter().cloned().collect(),
                recipe: acc.recipe.iter().cloned().collect(),
                readme: acc.readme.iter().cloned().collect(),
                installed: None,
                problems,
                replaced_by,
            });
        }
        CensusReport {
            manifests: self.manifests,
            artifacts,
            summary,
        }
    }
}

impl Census {
    /// The content hashes (not placeholders) that other entries give the names of which `hash`
    /// is the placeholder, with the same platform, sorted.
    fn replacements(&self, hash: &str) -> Vec<String> {
        let mut out: BTreeSet<String> = BTreeSet::new();
        for ((name, _), hashes) in &self.by_name {
            if !hashes.contains(hash) || !is_placeholder_of(name, hash) {
                continue;
            }
            out.extend(
                hashes
                    .iter()
                    .filter(|h| *h != hash && !is_placeholder_of(name, h))
                    .cloned(),
            );
        }
        out.into_iter().collect()
    }
}

/// Whether `hash` is the SHA-1 of `name` (a placeholder, not a content hash).
fn is_placeholder_of(name: &str, hash: &str) -> bool {
    clima_artifact_manifest::GitTreeSha1::from_hex(hash)
        .is_ok_and(|h| validate::is_name_placeholder(name, &h))
}

/// Whether `rel` is a relative path of plain names (no `..`, `.`, root or empty name).
fn plain_relative(rel: &str) -> bool {
    let rel = rel.trim_end_matches('/');
    !rel.is_empty()
        && !rel.contains(['\\', '\0'])
        && rel.split('/').all(|c| !c.is_empty())
        && Path::new(rel)
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
}

/// The host of a URL's remainder after `scheme://`, lower case, without user info or port.
fn host_of(rest: &str) -> Option<String> {
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit('@').next()?;
    let host = if let Some(v6) = host.strip_prefix('[') {
        v6.split(']').next()?
    } else {
        host.split(':').next()?
    };
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

/// Whether `host` is one of [`ARCHIVE_HOSTS`] or a subdomain of one.
fn is_archive_host(host: &str) -> bool {
    ARCHIVE_HOSTS.iter().any(|a| {
        host == *a
            || host
                .strip_suffix(a)
                .is_some_and(|prefix| prefix.ends_with('.'))
    })
}

/// What a problem means (a few words, for the legend) and how to fix it.
#[derive(Debug, Clone, Copy)]
pub struct ProblemHelp {
    /// The code, one of [`PROBLEMS`].
    pub code: &'static str,
    /// What it means, in at most 46 characters.
    pub meaning: &'static str,
    /// What to do about it.
    pub fix: &'static str,
    /// The command that does it, with `MANIFEST` and `NAME...` for the manifests and names
    /// listed under it and upper-case words for what the user chooses; empty when none.
    pub command: &'static str,
}

/// The help of every problem, in [`PROBLEMS`] order: the Markdown report's legend and fixes.
pub const HELP: [ProblemHelp; 11] = [
    ProblemHelp {
        code: PLACEHOLDER_HASH,
        meaning: "the hash is of the name, not of any content",
        fix: "make the content and its entry with `create`, which computes the real hash \
              (or give each machine the folder with `override set`)",
        command: "clima-artifacts create FOLDER --name NAME --manifest MANIFEST",
    },
    ProblemHelp {
        code: NOT_DOWNLOADABLE,
        meaning: "no download: only an override provides it",
        fix: "publish it so that the manifest records a download (or give each machine the \
              folder with `override set`)",
        command: "clima-artifacts publish NAME --archive URL --manifest MANIFEST",
    },
    ProblemHelp {
        code: NO_LICENSE,
        meaning: "no `license` key, no licence in a README",
        fix: "find the data's terms and record them as an SPDX id (CC-BY-4.0, CC0-1.0, ...)",
        command: "clima-artifacts annotate --manifest MANIFEST NAME... --set license=ID",
    },
    ProblemHelp {
        code: LICENSE_UNRECOGNISED,
        meaning: "a README's licence names no SPDX id",
        fix: "read the statement (under the artifact's license below) and record the SPDX id \
              it means, or a LicenseRef- id for terms that have none",
        command: "clima-artifacts annotate --manifest MANIFEST NAME... --set license=ID",
    },
    ProblemHelp {
        code: NO_CITATION,
        meaning: "no citation, doi or bibtex, no README section",
        fix: "record the DOI of the dataset or of its paper (or `citation=TEXT`), or add a \
              `Citation` section to its README",
        command: "clima-artifacts annotate --manifest MANIFEST NAME... --set doi=DOI",
    },
    ProblemHelp {
        code: NO_README,
        meaning: "no README.md by the manifest or recipe",
        fix: "write a README.md saying what the data is, where it comes from and how to cite \
              it (`new` scaffolds one in artifacts/NAME/)",
        command: "clima-artifacts new NAME --manifest MANIFEST",
    },
    ProblemHelp {
        code: NO_RECIPE,
        meaning: "no recipe, recipe folder or create script",
        fix: "scaffold a recipe that makes the content again, or point the entry at the \
              folder of an existing one with `annotate --set recipe=FOLDER`",
        command: "clima-artifacts new NAME --manifest MANIFEST",
    },
    ProblemHelp {
        code: SHARE_LINK_HOST,
        meaning: "downloads only from share links, no archive",
        fix: "publish the tarball to an archive with a DOI, which adds its URL as another \
              download (docs/archive.md)",
        command: "clima-artifacts publish NAME --archive URL --manifest MANIFEST",
    },
    ProblemHelp {
        code: HTTP_URL,
        meaning: "a download over plain http://",
        fix: "change the URL to https:// where the server offers it (the sha256 still checks \
              the bytes, but anyone on the way sees and can block the request)",
        command: "",
    },
    ProblemHelp {
        code: NAME_CONFLICT,
        meaning: "a name given other content elsewhere",
        fix: "make the manifests agree on the content, or rename one of the entries (each \
              artifact below lists the manifests naming it)",
        command: "",
    },
    ProblemHelp {
        code: SAME_CONTENT,
        meaning: "the same content under several names",
        fix: "nothing to fix when every name is used; otherwise keep one",
        command: "",
    },
];

/// The width the Markdown report's lines fit in (a word longer than that, a path, stands on a
/// line of its own).
pub const MARKDOWN_WIDTH: usize = 80;

/// `words` after `first` (then `indent` on each further line), wrapped at [`MARKDOWN_WIDTH`]
/// characters, with a final newline.
fn wrap(out: &mut String, first: &str, indent: &str, words: &str) {
    let mut line = first.trim_end().to_owned();
    // Whether the line holds no word yet (only its indentation or list marker).
    let mut empty = line.trim().is_empty() || line.trim() == "-";
    for word in words.split_whitespace() {
        let sep = if line.is_empty() || line.ends_with(' ') {
            ""
        } else {
            " "
        };
        if !empty && line.chars().count() + sep.len() + word.chars().count() > MARKDOWN_WIDTH {
            out.push_str(&line);
            out.push('\n');
            line = indent.to_owned();
        } else {
            line.push_str(sep);
        }
        line.push_str(word);
        empty = false;
    }
    out.push_str(&line);
    out.push('\n');
}

/// A list as text (`-` when empty), escaped.
fn listed(items: &[String]) -> String {
    if items.is_empty() {
        "-".to_owned()
    } else {
        printable(&items.join(", ")).into_owned()
    }
}

/// One item of a list per line (`-` when empty), escaped; for lists whose items hold commas.
fn each_item(out: &mut String, label: &str, items: &[String]) {
    if items.is_empty() {
        let _ = writeln!(out, "  - {label}: -");
        return;
    }
    if items.len() == 1 {
        return wrap(out, &format!("  - {label}:"), "    ", &printable(&items[0]));
    }
    let _ = writeln!(out, "  - {label}:");
    for item in items {
        wrap(out, "    -", "      ", &printable(item));
    }
}

impl CensusReport {
    /// The report as Markdown, in lines of at most [`MARKDOWN_WIDTH`] characters: the
    /// problems (a legend with counts), then under each problem its fix and the names that have
    /// it, per manifest; the manifests; each artifact.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let broken = self.manifests.iter().filter(|m| m.error.is_some()).count();
        let _ = writeln!(
            out,
            "# Artifact census\n\n{} manifest(s) ({} unreadable), {} artifact(s).\n",
            self.manifests.len(),
            broken,
            self.artifacts.len()
        );
        let _ = writeln!(
            out,
            "## Problems\n\n| problem | artifacts | meaning |\n|---|---|---|"
        );
        for h in HELP {
            let n = self.summary.get(h.code).copied().unwrap_or(0);
            let _ = writeln!(out, "| {} | {n} | {} |", h.code, h.meaning);
        }
        for h in HELP {
            self.problem_section(&mut out, &h);
        }
        self.manifests_section(&mut out);
        self.replaced_markdown(&mut out);
        let _ = writeln!(out, "\n## Artifacts\n");
        for a in &self.artifacts {
            artifact_item(&mut out, a);
        }
        out
    }

    /// The section of one problem, when an artifact has it: its fix, and per manifest the
    /// names of the entries that have it.
    fn problem_section(&self, out: &mut String, help: &ProblemHelp) {
        let mut by_manifest: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        let mut count = 0;
        for a in self.artifacts.iter() {
            if !a.problems.iter().any(|p| p == help.code) {
                continue;
            }
            count += 1;
            for e in &a.entries {
                by_manifest.entry(&e.manifest).or_default().insert(&e.name);
            }
        }
        if count == 0 {
            return;
        }
        let _ = writeln!(out, "\n### {} ({count})\n", help.code);
        let mut fix = format!("Fix: {}", help.fix);
        if !help.command.is_empty() {
            fix.push(':');
        } else {
            fix.push('.');
        }
        wrap(out, "", "", &fix);
        if !help.command.is_empty() {
            let _ = writeln!(out, "\n    {}", help.command);
        }
        out.push('\n');
        // Manifests in census order.
        for m in &self.manifests {
            if let Some(names) = by_manifest.get(m.path.as_str()) {
                let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
                wrap(
                    out,
                    &format!("- {}:", printable(&m.path)),
                    "  ",
                    &listed(&names),
                );
            }
        }
    }

    /// The manifests, with their errors and broken entries.
    fn manifests_section(&self, out: &mut String) {
        let _ = writeln!(out, "\n## Manifests\n");
        for m in &self.manifests {
            let mut error = m.error.clone().unwrap_or_default();
            if !m.broken_entries.is_empty() {
                if !error.is_empty() {
                    error.push_str("; ");
                }
                let _ = write!(error, "broken entries: {}", m.broken_entries.join("; "));
            }
            let what = match (m.artifacts, error.is_empty()) {
                (n, true) => format!("{n} artifact(s)"),
                (n, false) => format!("{n} artifact(s); {}", printable(&error)),
            };
            wrap(out, &format!("- {}:", printable(&m.path)), "  ", &what);
        }
    }
}

/// The folder part of a shown path, with its trailing `/` (empty for a bare file name).
fn folder_of(shown: &str) -> &str {
    shown.rfind('/').map_or("", |i| &shown[..=i])
}

/// One artifact as a list item: its hash and names, then its manifests, hosts, size,
/// license, citation, recipe, README, installed copies and problems.
fn artifact_item(out: &mut String, a: &CensusArtifact) {
    wrap(
        out,
        &format!("- {}:", a.git_tree_sha1),
        "    ",
        &listed(&a.names),
    );
    let size = a.size.map_or("-".to_owned(), |s| s.to_string());
    wrap(out, "  - manifests:", "    ", &listed(&a.manifests));
    wrap(out, "  - hosts:", "    ", &listed(&a.hosts));
    let _ = writeln!(out, "  - size: {size}");
    each_item(out, "license", &a.license);
    each_item(out, "citation", &a.citation);
    wrap(out, "  - recipe:", "    ", &listed(&a.recipe));
    wrap(out, "  - readme:", "    ", &listed(&a.readme));
    if let Some(places) = &a.installed {
        wrap(out, "  - installed:", "    ", &listed(places));
    }
    wrap(out, "  - problems:", "    ", &listed(&a.problems));
}

/// `text` as one Markdown table cell: escaped, `|` quoted, on one line.
fn cell(text: &str) -> String {
    printable(text)
        .replace('|', "\\|")
        .replace(['\n', '\r'], " ")
}

/// A list as one cell (`-` when empty).
fn cell_list(items: &[String]) -> String {
    if items.is_empty() {
        "-".to_owned()
    } else {
        cell(&items.join(", "))
    }
}

impl CensusReport {
    /// The section of placeholder hashes that another entry replaced with a content hash: the
    /// manifests still naming each (none when there is none).
    fn replaced_markdown(&self, out: &mut String) {
        let replaced: Vec<&CensusArtifact> = self
            .artifacts
            .iter()
            .filter(|a| !a.replaced_by.is_empty())
            .collect();
        if replaced.is_empty() {
            return;
        }
        let _ = write!(
            out,
            "\n## Placeholder hashes replaced\n\nThese manifests still name a placeholder hash \
             that another entry of the same name replaced with the content's hash: update them \
             to it, and keep an override line for the placeholder until none is left (see the \
             migration in docs/census.md).\n\n| names | placeholder | replaced by | still named \
             in |\n|---|---|---|---|\n"
        );
        for a in replaced {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} |",
                cell_list(&a.names),
                a.git_tree_sha1,
                cell_list(&a.replaced_by),
                cell_list(&a.manifests)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_read_from_urls() {
        assert_eq!(
            host_of("u:p@Zenodo.org:443/x").as_deref(),
            Some("zenodo.org")
        );
        assert_eq!(host_of("[::1]:80/x").as_deref(), Some("::1"));
        assert!(is_archive_host("sandbox.zenodo.org"));
        assert!(!is_archive_host("notzenodo.org"));
        assert!(!is_archive_host("caltech.box.com"));
        assert!(plain_relative("artifacts/era5/"));
        assert!(!plain_relative("../x") && !plain_relative("/x") && !plain_relative("a//b"));
    }
}
