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

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Component, Path};

use clima_artifact_fs::printable;
use clima_artifact_manifest::{ArtifactEntry, Download, Manifest, metadata, validate};

use crate::readme;

/// The hash is the SHA-1 of the artifact's name, not of content.
pub const PLACEHOLDER_HASH: &str = "placeholder-hash";
/// No entry gives a download: the artifact must come from an override.
pub const NOT_DOWNLOADABLE: &str = "not-downloadable";
/// No entry has a `license` key.
pub const NO_LICENSE: &str = "no-license";
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
pub const PROBLEMS: [&str; 10] = [
    PLACEHOLDER_HASH,
    NOT_DOWNLOADABLE,
    NO_LICENSE,
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

/// One artifact of the census: one content hash.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CensusArtifact {
    /// The content hash (40 hex digits).
    pub git_tree_sha1: String,
    /// The names it has, sorted.
    pub names: Vec<String>,
    /// The manifests naming it, in census order.
    pub manifests: Vec<String>,
    /// Its download URLs, in order of appearance, without repeats.
    pub urls: Vec<String>,
    /// The hosts of those URLs, sorted.
    pub hosts: Vec<String>,
    /// The size of its download, when a manifest gives one (the largest given).
    pub size: Option<u64>,
    /// The platforms of `[[name]]` entries with this hash (`arch=x86_64,os=linux`), sorted.
    pub platforms: Vec<String>,
    /// Its `license` values.
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
    urls: Vec<String>,
    hosts: BTreeSet<String>,
    size: Option<u64>,
    platforms: BTreeSet<String>,
    license: BTreeSet<String>,
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

/// A README read near a manifest: its path as shown and whether it has a citation section.
struct Readme {
    path: String,
    cites: bool,
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
        let dir = match shown.rfind('/') {
            Some(i) => &shown[..=i],
            None => "",
        };
        let mut readmes: BTreeMap<String, Option<Readme>> = BTreeMap::new();
        let mut read_readme = |rel: String| -> Option<(String, bool)> {
            readmes
                .entry(rel.clone())
                .or_insert_with(|| match around.text(&rel) {
                    Ok(Some(text)) => Some(Readme {
                        path: format!("{dir}{rel}"),
                        cites: readme::section_text(&text, &readme::CITATION_SECTION).is_some(),
                    }),
                    _ => None,
                })
                .as_ref()
                .map(|r| (r.path.clone(), r.cites))
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
                for (path, cites) in &found_readmes {
                    acc.readme.insert(path.clone());
                    if *cites {
                        acc.citation
                            .insert(format!("README citation section in {path}"));
                    }
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

/// One Markdown table cell: escaped, `|` and newlines made harmless.
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
    /// The report as Markdown: the manifests (with errors), a table of artifacts, the summary.
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
            "## Manifests\n\n| manifest | artifacts | error |\n|---|---|---|"
        );
        for m in &self.manifests {
            let mut error = m.error.clone().unwrap_or_default();
            if !m.broken_entries.is_empty() {
                if !error.is_empty() {
                    error.push_str("; ");
                }
                let _ = write!(error, "broken entries: {}", m.broken_entries.join("; "));
            }
            let error = if error.is_empty() {
                "-".into()
            } else {
                cell(&error)
            };
            let _ = writeln!(out, "| {} | {} | {error} |", cell(&m.path), m.artifacts);
        }
        let installed = self.artifacts.iter().any(|a| a.installed.is_some());
        let _ = write!(
            out,
            "\n## Artifacts\n\n| git-tree-sha1 | names | manifests | hosts | size | license | \
             citation | recipe | readme |{} problems |\n|---|---|---|---|---|---|---|---|---|{}---|\n",
            if installed { " installed |" } else { "" },
            if installed { "---|" } else { "" }
        );
        for a in &self.artifacts {
            let size = a.size.map_or("-".to_owned(), |s| s.to_string());
            let _ = write!(
                out,
                "| {} | {} | {} | {} | {size} | {} | {} | {} | {} |",
                a.git_tree_sha1,
                cell_list(&a.names),
                cell_list(&a.manifests),
                cell_list(&a.hosts),
                cell_list(&a.license),
                cell_list(&a.citation),
                cell_list(&a.recipe),
                cell_list(&a.readme),
            );
            if let Some(places) = &a.installed {
                let _ = write!(out, " {} |", cell_list(places));
            }
            let _ = writeln!(out, " {} |", cell_list(&a.problems));
        }
        self.replaced_markdown(&mut out);
        let _ = writeln!(out, "\n## Summary\n\n| problem | artifacts |\n|---|---|");
        for p in PROBLEMS {
            let _ = writeln!(
                out,
                "| {p} | {} |",
                self.summary.get(p).copied().unwrap_or(0)
            );
        }
        out
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
