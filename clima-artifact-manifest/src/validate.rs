//! Non-fatal checks for build scripts: missing license or citation, `http://` URLs, artifacts
//! without a download section, entries Julia would read differently, and the syntax of provenance
//! metadata (SPDX license, DOI, BibTeX; see [`provenance`]).

use std::fmt;
use std::path::{Path, PathBuf};

use crate::location::{key_syntax, quote};
use crate::{ArtifactEntry, ArtifactVariant, GitTreeSha1, Manifest, metadata, provenance};
use clima_artifact_vars as vars;
use clima_artifact_vars::MAX_DOWNLOAD_SIZE;

/// Largest download a model starts on first use unless `CLIMA_ARTIFACTS_MAX_DOWNLOAD_SIZE`
/// says otherwise (4 GiB); `validate` warns about larger downloads.
pub const DEFAULT_MAX_DOWNLOAD_SIZE: u64 = 4 << 30;

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

impl fmt::Display for Warning {
    /// `line 12: artifact `era5`: message`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(line) = self.line {
            write!(f, "line {line}: ")?;
        }
        if let Some(a) = &self.artifact {
            write!(f, "artifact `{a}`: ")?;
        }
        f.write_str(&self.message)
    }
}

/// Platform `os` values Julia knows.
const JULIA_OS: [&str; 5] = ["linux", "macos", "windows", "freebsd", "openbsd"];
/// Platform `libc` values Julia knows.
const JULIA_LIBC: [&str; 2] = ["glibc", "musl"];

/// Checks a manifest; the hint for artifacts without downloads names
/// [`default_overrides_file`].
pub fn validate(manifest: &Manifest) -> Vec<Warning> {
    validate_with(manifest, &default_overrides_file())
}

/// Checks a manifest; `overrides_file` is the Overrides.toml that the hint for artifacts without
/// downloads tells the user to edit. Warnings come in file order.
pub fn validate_with(manifest: &Manifest, overrides_file: &Path) -> Vec<Warning> {
    let mut out = Vec::new();
    for (name, entry) in manifest.artifacts() {
        let variants: Vec<&ArtifactVariant> = match entry {
            ArtifactEntry::Single(v) => vec![v],
            ArtifactEntry::PlatformSpecific(vs) => vs.iter().collect(),
        };
        if variants.is_empty() {
            continue;
        }
        let mut warn = |line: u32, message: String| {
            out.push(Warning {
                line: Some(line),
                artifact: Some(name.clone()),
                message,
            });
        };
        check_provenance(name, &variants, &mut warn);
        let platform_specific = matches!(entry, ArtifactEntry::PlatformSpecific(_));
        for (i, v) in variants.iter().enumerate() {
            let which = if platform_specific {
                format!(
                    "platform variant {} ({}) ",
                    i + 1,
                    v.platform.clone().unwrap_or_default()
                )
            } else {
                String::new()
            };
            if is_name_placeholder(name, &v.git_tree_sha1) {
                let message = placeholder_message(name, &manifest.path, None);
                warn(v.line, format!("{which}{message}"));
            }
            if v.downloads.is_empty() {
                warn(
                    v.line,
                    format!(
                        "{which}has no download section, so it must come from an override: add the \
                         line `{} = \"/absolute/path/to/{name}\"` to `{}` (or add a \
                         `[[{}.download]]` section with `url` and `sha256`)",
                        v.git_tree_sha1,
                        overrides_file.display(),
                        key_syntax(name)
                    ),
                );
            }
            for (j, d) in v.downloads.iter().enumerate() {
                if let Some(size) = d.size.filter(|&n| n > DEFAULT_MAX_DOWNLOAD_SIZE) {
                    warn(
                        v.line,
                        format!(
                            "{which}download {} is {:.1} GiB, more than the {} GiB a model downloads \
                             on first use by default ({MAX_DOWNLOAD_SIZE}): users \
                             must fetch it ahead (`clima-artifacts fetch {name}`) or override it; \
                             say so in its description",
                            j + 1,
                            size as f64 / f64::from(1u32 << 30),
                            DEFAULT_MAX_DOWNLOAD_SIZE >> 30
                        ),
                    );
                }
                if d.url
                    .get(..7)
                    .is_some_and(|s| s.eq_ignore_ascii_case("http://"))
                {
                    warn(
                        v.line,
                        format!(
                            "{which}download {} uses unencrypted `{}`; use an https:// URL (the \
                             sha256 still guards the content, but proxies can see and break it)",
                            j + 1,
                            d.url
                        ),
                    );
                }
            }
            if let Some(platform) = &v.platform {
                check_platform(v, &which, platform, &mut warn);
                if let Some(dup) = variants[..i]
                    .iter()
                    .rev()
                    .find(|o| o.platform == v.platform)
                {
                    warn(
                        v.line,
                        format!(
                            "{which}repeats the platform of the variant on line {}; only one of \
                             them can ever be selected (the last one here; Julia's choice may \
                             differ): remove the duplicate",
                            dup.line
                        ),
                    );
                }
            }
        }
    }
    out
}

/// Whether `hash` is the SHA-1 of the artifact's name rather than of any content: what
/// CliMA's artifact helper records for a dataset too large to upload (it stays on a cluster
/// and is reached through an override). Such a hash can never be verified.
pub fn is_name_placeholder(name: &str, hash: &GitTreeSha1) -> bool {
    use sha1::Digest;
    sha1::Sha1::digest(name.as_bytes()).as_slice() == hash.0
}

/// What to tell the user about an artifact `name` of `manifest` whose hash
/// [`is_name_placeholder`]: why it is a problem, and the command that records the real hash
/// ([`record_hash_command`]).
pub fn placeholder_message(name: &str, manifest: &Path, folder: Option<&Path>) -> String {
    format!(
        "the git-tree-sha1 is the SHA-1 of the name `{name}`, not of content: an override of it \
         cannot be verified, and no download can match it; record the real hash (the tree hash \
         of the folder holding the data) in the manifest with `{}`",
        record_hash_command(name, manifest, folder)
    )
}

/// The command that hashes the folder holding an artifact's data and records that hash (and no
/// download) as the entry `name` of `manifest`: `clima-artifacts create FOLDER --external
/// --name NAME --manifest MANIFEST`, with `folder` (`/path/to/NAME` when it is not known) and
/// the manifest's absolute path, each word quoted for the shell when it needs it.
pub fn record_hash_command(name: &str, manifest: &Path, folder: Option<&Path>) -> String {
    let manifest = std::path::absolute(manifest).unwrap_or_else(|_| manifest.to_path_buf());
    let folder = match folder {
        Some(f) => f.to_string_lossy().into_owned(),
        None => format!("/path/to/{name}"),
    };
    format!(
        "clima-artifacts create {} --external --name {} --manifest {}",
        clima_artifact_fs::shell_word(&folder),
        clima_artifact_fs::shell_word(name),
        clima_artifact_fs::shell_word(&manifest.to_string_lossy())
    )
}

/// Julia-compatibility checks of one `[[name]]` element.
fn check_platform(
    v: &ArtifactVariant,
    which: &str,
    platform: &crate::Platform,
    warn: &mut impl FnMut(u32, String),
) {
    for key in metadata::KEYS {
        if v.metadata.contains_key(key) {
            warn(
                v.line,
                format!(
                    "{which}has `{key}`: Julia reads every extra string key of a `[[name]]` entry \
                     as a platform tag (and may reject its value), so keep provenance keys out of \
                     platform-specific entries if Julia must load this file"
                ),
            );
        }
    }
    let check = |tag: &str, known: &[&str], warn: &mut dyn FnMut(u32, String)| {
        if let Some(value) = platform.get(tag)
            && !known.contains(&value)
        {
            let message = if tag == "libc" && value == "gnu" {
                format!(
                    "{which}has `libc = \"gnu\"`, which Julia rejects: write `libc = \"glibc\"` \
                     (Julia accepts {})",
                    known.join(", ")
                )
            } else {
                format!(
                    "{which}has `{tag} = {}`, which Julia's platform code does not know (it knows \
                     {}); Julia may refuse to load this entry",
                    quote(value),
                    known.join(", ")
                )
            };
            warn(v.line, message);
        }
    };
    check("os", &JULIA_OS, warn);
    check("arch", &crate::platform::KNOWN_ARCHES, warn);
    check("libc", &JULIA_LIBC, warn);
}

/// License, citation, DOI and BibTeX checks of an artifact (all its variants).
fn check_provenance(name: &str, variants: &[&ArtifactVariant], warn: &mut impl FnMut(u32, String)) {
    let line = variants[0].line;
    let values = |key: &str| {
        let mut found: Vec<(u32, &str)> = Vec::new();
        for v in variants {
            if let Some(value) = v.metadata.get(key)
                && !found.iter().any(|(_, seen)| *seen == value)
            {
                found.push((v.line, value));
            }
        }
        found
    };
    if values(metadata::LICENSE).is_empty() {
        warn(
            line,
            format!(
                "no `license` metadata; add `license = \"<SPDX expression>\"` (e.g. `CC-BY-4.0`) to \
                 `[{}]` so reports can say how the data may be used",
                key_syntax(name)
            ),
        );
    }
    if values(metadata::CITATION).is_empty()
        && values(metadata::DOI).is_empty()
        && values(metadata::BIBTEX).is_empty()
    {
        warn(
            line,
            format!(
                "no `citation` metadata; add `citation = \"...\"` (and `doi`/`bibtex` if the data \
                 has them) to `[{}]` so reports can say how to cite it",
                key_syntax(name)
            ),
        );
    }
    for (line, license) in values(metadata::LICENSE) {
        for problem in provenance::check_license(license) {
            warn(line, format!("`license = {}`: {problem}", quote(license)));
        }
    }
    for (line, doi) in values(metadata::DOI) {
        for problem in provenance::check_doi(doi) {
            warn(line, format!("`doi`: {problem}"));
        }
    }
    for (line, bibtex) in values(metadata::BIBTEX) {
        if let Err(problem) = provenance::check_bibtex(bibtex) {
            warn(line, format!("`bibtex` does not parse: {problem}"));
        }
    }
}

/// The Overrides.toml that hints point to: `artifacts/Overrides.toml` in the first entry of
/// `CLIMA_ARTIFACTS_DEPOT_PATH`, else in the default depot (the user cache directory's
/// `clima-artifacts`: `$XDG_CACHE_HOME` or `~/.cache` on Linux, `~/Library/Caches` on macOS,
/// `%LOCALAPPDATA%` on Windows).
pub fn default_overrides_file() -> PathBuf {
    let from_env = std::env::var_os(vars::DEPOT_PATH)
        .and_then(|v| std::env::split_paths(&v).find(|p| !p.as_os_str().is_empty()));
    let depot = from_env.unwrap_or_else(|| default_cache_dir().join("clima-artifacts"));
    crate::layout::overrides_file(&depot)
}

fn default_cache_dir() -> PathBuf {
    let home = || {
        std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("~"))
    };
    if cfg!(target_os = "windows") {
        std::env::var_os("LOCALAPPDATA")
            .map(PathBuf::from)
            .unwrap_or_else(|| home().join("AppData").join("Local"))
    } else if cfg!(target_os = "macos") {
        home().join("Library").join("Caches")
    } else {
        std::env::var_os(vars::XDG_CACHE_HOME)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .unwrap_or_else(|| home().join(".cache"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H1: &str = "b373f1887cff55850cbf76ec005f7d93726ae42e";
    const S1: &str = "750ead63910729c349beaed2a5db79903cbf3a982d0e0578e02994b1e7191c48";

    fn warnings(text: &str) -> Vec<String> {
        let m = Manifest::parse(text, Path::new("Artifacts.toml")).unwrap();
        validate_with(&m, Path::new("/depot/artifacts/Overrides.toml"))
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn a_hash_that_is_the_sha1_of_the_name_is_called_a_placeholder() {
        // As CliMA's helper writes for data that stays on a cluster (fluxnet2015 in the corpus).
        let text = "[fluxnet2015]\ngit-tree-sha1 = \"94d6eb8e3bc5fc361a43597ab4fb6941bdbe2850\"\n\
                    license = \"CC-BY-4.0\"\n";
        let w = warnings(text);
        let placeholder: Vec<&String> = w
            .iter()
            .filter(|w| w.contains("SHA-1 of the name"))
            .collect();
        assert_eq!(placeholder.len(), 1, "{w:#?}");
        assert!(
            placeholder[0].contains(
                "artifact `fluxnet2015`: the git-tree-sha1 is the SHA-1 of the name \
                 `fluxnet2015`, not of content: an override of it cannot be verified"
            ) && placeholder[0].contains(&format!(
                "record the real hash (the tree hash of the folder holding the data) in the \
                 manifest with `clima-artifacts create /path/to/fluxnet2015 --external --name \
                 fluxnet2015 --manifest {}`",
                std::path::absolute("Artifacts.toml").unwrap().display()
            )),
            "{}",
            placeholder[0]
        );
        // The same name with a content hash, or another name with this hash: no such warning.
        let real = text.replace("94d6eb8e3bc5fc361a43597ab4fb6941bdbe2850", H1);
        let renamed = text.replace("[fluxnet2015]", "[fluxnet2016]");
        for t in [real, renamed] {
            assert!(
                !warnings(&t).iter().any(|w| w.contains("SHA-1 of the name")),
                "{t}"
            );
        }
    }

    #[test]
    fn clean_manifest_has_no_warnings() {
        let text = format!(
            r#"[era5]
git-tree-sha1 = "{H1}"
license = "CC-BY-4.0"
citation = "Hersbach et al. (2020)"
doi = "10.1002/qj.3803"
bibtex = "@article{{h2020, title = {{ERA5}}, year = 2020}}"
[[era5.download]]
url = "https://example.org/a.tar.gz"
sha256 = "{S1}"
"#
        );
        assert_eq!(warnings(&text), Vec::<String>::new());
    }

    #[test]
    fn warns_about_missing_provenance_downloads_and_http() {
        let text = format!(
            r#"[bare]
git-tree-sha1 = "{H1}"

["with.dot"]
git-tree-sha1 = "{H1}"
license = "MIT"
doi = "https://doi.org/10.1002/qj.3803"
bibtex = "@article{{x, title = {{open}}"
[["with.dot".download]]
url = "http://example.org/a.tar.gz"
sha256 = "{S1}"
"#
        );
        assert_eq!(
            warnings(&text),
            [
                "line 1: artifact `bare`: no `license` metadata; add `license = \"<SPDX expression>\"` \
                 (e.g. `CC-BY-4.0`) to `[bare]` so reports can say how the data may be used",
                "line 1: artifact `bare`: no `citation` metadata; add `citation = \"...\"` (and \
                 `doi`/`bibtex` if the data has them) to `[bare]` so reports can say how to cite it",
                "line 1: artifact `bare`: has no download section, so it must come from an \
                 override: add the line `b373f1887cff55850cbf76ec005f7d93726ae42e = \
                 \"/absolute/path/to/bare\"` to `/depot/artifacts/Overrides.toml` (or add a \
                 `[[bare.download]]` section with `url` and `sha256`)",
                "line 4: artifact `with.dot`: `doi`: write the bare DOI `10.1002/qj.3803` without \
                 `https://doi.org/` (reports add the resolver link)",
                "line 4: artifact `with.dot`: `bibtex` does not parse: line 1 of the BibTeX: the \
                 text ends where `}` is expected",
                "line 4: artifact `with.dot`: download 1 uses unencrypted \
                 `http://example.org/a.tar.gz`; use an https:// URL (the sha256 still guards the \
                 content, but proxies can see and break it)",
            ]
        );
    }

    #[test]
    fn warns_about_downloads_above_the_implicit_limit() {
        let entry = |size: u64| {
            format!(
                "[era5]\ngit-tree-sha1 = \"{H1}\"\nlicense = \"CC-BY-4.0\"\ncitation = \"x\"\n\
                 [[era5.download]]\nurl = \"https://example.org/a.tar.gz\"\nsha256 = \"{S1}\"\n\
                 size = {size}\n"
            )
        };
        let m = Manifest::parse(&entry(5 << 30), Path::new("A.toml")).unwrap();
        let w: Vec<String> = validate(&m).iter().map(|w| w.to_string()).collect();
        assert!(
            w.iter()
                .any(|w| w.contains("5.0 GiB") && w.contains("CLIMA_ARTIFACTS_MAX_DOWNLOAD_SIZE")),
            "{w:?}"
        );
        let m = Manifest::parse(&entry(1 << 30), Path::new("A.toml")).unwrap();
        assert!(validate(&m).iter().all(|w| !w.message.contains("GiB")));
    }

    #[test]
    fn warns_about_bad_license_syntax() {
        let text = format!(
            "[a]\ngit-tree-sha1 = \"{H1}\"\ncitation = \"x\"\nlicense = \"CC BY 4.0\"\n[[a.download]]\nurl = \"https://x\"\nsha256 = \"{S1}\"\n"
        );
        assert_eq!(
            warnings(&text),
            [
                "line 1: artifact `a`: `license = \"CC BY 4.0\"`: `BY` follows a license id without \
              an operator; join ids with `AND`, `OR` or `WITH` (a license name with spaces is not \
              an SPDX id)"
            ]
        );
    }

    #[test]
    fn warns_about_what_julia_reads_differently() {
        let text = format!(
            r#"[[lib]]
os = "linux"
arch = "x86_64"
libc = "gnu"
license = "MIT"
citation = "c"
git-tree-sha1 = "{H1}"
[[lib.download]]
url = "https://x"
sha256 = "{S1}"
[[lib]]
os = "linux"
arch = "x86_64"
libc = "gnu"
git-tree-sha1 = "{H1}"
[[lib.download]]
url = "https://y"
sha256 = "{S1}"
[[lib]]
os = "plan9"
arch = "mips"
git-tree-sha1 = "{H1}"
[[lib.download]]
url = "https://y"
sha256 = "{S1}"
"#
        );
        let w = warnings(&text);
        let expected = [
            "line 1: artifact `lib`: platform variant 1 (arch=x86_64,libc=gnu,os=linux) has \
             `license`: Julia reads every extra string key of a `[[name]]` entry as a platform tag \
             (and may reject its value), so keep provenance keys out of platform-specific entries \
             if Julia must load this file",
            "line 1: artifact `lib`: platform variant 1 (arch=x86_64,libc=gnu,os=linux) has \
             `citation`: Julia reads every extra string key of a `[[name]]` entry as a platform tag \
             (and may reject its value), so keep provenance keys out of platform-specific entries \
             if Julia must load this file",
            "line 1: artifact `lib`: platform variant 1 (arch=x86_64,libc=gnu,os=linux) has \
             `libc = \"gnu\"`, which Julia rejects: write `libc = \"glibc\"` (Julia accepts \
             glibc, musl)",
            "line 11: artifact `lib`: platform variant 2 (arch=x86_64,libc=gnu,os=linux) has \
             `libc = \"gnu\"`, which Julia rejects: write `libc = \"glibc\"` (Julia accepts \
             glibc, musl)",
            "line 11: artifact `lib`: platform variant 2 (arch=x86_64,libc=gnu,os=linux) repeats \
             the platform of the variant on line 1; only one of them can ever be selected (the last \
             one here; Julia's choice may differ): remove the duplicate",
            "line 19: artifact `lib`: platform variant 3 (arch=mips,os=plan9) has `os = \"plan9\"`, \
             which Julia's platform code does not know (it knows linux, macos, windows, freebsd, \
             openbsd); Julia may refuse to load this entry",
            "line 19: artifact `lib`: platform variant 3 (arch=mips,os=plan9) has `arch = \
             \"mips\"`, which Julia's platform code does not know (it knows x86_64, i686, aarch64, \
             armv7l, armv6l, powerpc64le, riscv64); Julia may refuse to load this entry",
        ];
        assert_eq!(w, expected);
    }

    #[test]
    fn default_overrides_file_ends_in_the_depot() {
        let p = default_overrides_file();
        assert!(p.ends_with("artifacts/Overrides.toml"), "{}", p.display());
    }
}
