//! Platform tags of `[[name]]` entries and selection of the entry that fits the host, with the
//! rules of Julia's `Base.BinaryPlatforms` (`base/binaryplatforms.jl`):
//!
//! - **Normalisation**: tag names and values are lowercased; `arch` aliases map to Julia's names
//!   (`amd64` -> `x86_64`, `i386`..`i586`/`x86` -> `i686`, `arm64` -> `aarch64`, `arm` ->
//!   `armv7l`, `ppc64le` -> `powerpc64le`, `rv64` -> `riscv64`); `libgfortran_version`,
//!   `libstdcxx_version` and `os_version` are written as full versions (`5` -> `5.0.0`). A
//!   `linux` platform without `libc` is `glibc`, and 32-bit ARM Linux without `call_abi` is
//!   `eabihf`.
//! - **Matching** (`platforms_match`): every tag present on *both* sides must be equal, except
//!   `julia_version` (major and minor only) and the host's `os_version` and `libstdcxx_version`,
//!   which are upper bounds (an entry built for macOS 13 runs on a macOS 14 host). A tag on one
//!   side only does not prevent a match. One addition of ours, which only makes us safer: the
//!   opt-in tags ([`OPT_IN_TAGS`], `sanitize`) fit only a host that sets them.
//! - **Selection** (`select_platform`): among matching entries, the smallest symmetric
//!   difference between the entry's tag names and the host's, then the greatest triplet (so
//!   `libgfortran5` wins over 3 and 4 whatever their order in the file); of entries for the
//!   same platform, the last in the file.
//! - **Triplets**: [`Platform::triplet`] and [`Platform::parse_triplet`] print and read Julia's
//!   triplets (`aarch64-linux-gnu-libgfortran5-cxx11`, `x86_64-apple-darwin20`,
//!   `x86_64-linux-gnu-cuda+11.8`).
//!
//! The host's tags can be extended or changed with `CLIMA_ARTIFACTS_PLATFORM_TAGS`, e.g.
//! `libgfortran_version=5.0.0,cxxstring_abi=cxx11` (an empty value, `libc=`, removes a tag).

use clima_artifact_vars as vars;
use std::collections::BTreeMap;

/// String tags of a platform: at least `os` and `arch`; often `libc`, `libgfortran_version`,
/// `cxxstring_abi`, ... (Julia's `Base.BinaryPlatforms`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Platform {
    /// Tag name -> value, e.g. `os` -> `linux`.
    pub tags: BTreeMap<String, String>,
}

/// No variant of a `[[name]]` entry fits the platform.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum SelectError {
    /// The manifest does not define this name.
    #[error(
        "artifact `{name}` is not defined in `{manifest}`; {}defined: {}",
        did_you_mean(name, defined),
        .defined.join(", ")
    )]
    UnknownName {
        /// The name asked for.
        name: String,
        /// The manifest path.
        manifest: String,
        /// Names the manifest defines.
        defined: Vec<String>,
    },
    /// The manifest defines the name, but its entry could not be read (a lenient load keeps the
    /// others usable, as Julia does); `message` holds the entry's errors with file, line and
    /// column.
    #[error("artifact `{name}` cannot be used: {message}")]
    Broken {
        /// The name asked for.
        name: String,
        /// Its errors.
        message: String,
    },
    /// No variant fits; lists the platforms offered.
    #[error("artifact `{name}` has no variant for this platform ({host}); offered: {}", .offered.join("; "))]
    NoMatch {
        /// The name asked for.
        name: String,
        /// The host platform, rendered.
        host: String,
        /// The platforms the manifest offers, rendered.
        offered: Vec<String>,
    },
}

/// The defined name closest to `name`, if it is close enough to be a likely typo (Jaro-Winkler
/// similarity of at least 0.8). Shared by the compile-time check of `clima_artifact!` and the
/// run-time [`SelectError::UnknownName`] message, so both suggest the same name.
pub fn suggest_name<'a>(name: &str, defined: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    defined
        .into_iter()
        .map(|n| (strsim::jaro_winkler(name, n), n))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, n)| n)
}

/// `did you mean `x`? ` for [`SelectError::UnknownName`], or nothing.
fn did_you_mean(name: &str, defined: &[String]) -> String {
    match suggest_name(name, defined.iter().map(String::as_str)) {
        Some(s) => format!("did you mean `{s}`? "),
        None => String::new(),
    }
}

/// Tags that a variant may carry only if the host has them too (special builds).
pub const OPT_IN_TAGS: [&str; 1] = ["sanitize"];

/// The environment variable holding extra host tags, `key=value,key=value`.
pub const PLATFORM_TAGS_ENV: &str = vars::PLATFORM_TAGS;

impl Platform {
    /// The platform of this process: `os`, `arch`, `libc` (and extra tags from the
    /// `CLIMA_ARTIFACTS_PLATFORM_TAGS` env var, `key=value,key=value`).
    ///
    /// A malformed variable is reported once on stderr and its bad items are ignored; use
    /// [`Platform::try_host`] to get the error instead.
    pub fn host() -> Platform {
        match Self::try_host() {
            Ok(p) => p,
            Err(message) => {
                static WARNED: std::sync::Once = std::sync::Once::new();
                WARNED.call_once(|| eprintln!("warning: {message}"));
                let mut p = Self::native();
                if let Ok(spec) = std::env::var(PLATFORM_TAGS_ENV) {
                    for item in spec.split(',') {
                        let _ = p.apply_tags(item);
                    }
                }
                p
            }
        }
    }

    /// Like [`Platform::host`], but a malformed `CLIMA_ARTIFACTS_PLATFORM_TAGS` is an error
    /// message naming the variable and the bad item.
    pub fn try_host() -> Result<Platform, String> {
        let mut p = Self::native();
        match std::env::var(PLATFORM_TAGS_ENV) {
            Ok(spec) => p
                .apply_tags(&spec)
                .map_err(|e| format!("{PLATFORM_TAGS_ENV}: {e}"))?,
            Err(std::env::VarError::NotPresent) => {}
            Err(std::env::VarError::NotUnicode(_)) => {
                return Err(format!("{PLATFORM_TAGS_ENV} is not valid UTF-8"));
            }
        }
        Ok(p)
    }

    /// The platform this binary was compiled for, in Julia's names (`linux`/`macos`/`windows`/
    /// `freebsd`; `x86_64`/`aarch64`/`i686`/`armv7l`/`powerpc64le`/...; `glibc`/`musl` on Linux),
    /// without the environment variable.
    pub fn native() -> Platform {
        let os = match std::env::consts::OS {
            "macos" | "ios" => "macos",
            other => other,
        };
        let arch = match std::env::consts::ARCH {
            "x86" => "i686",
            "arm" => "armv7l",
            "powerpc64" if cfg!(target_endian = "little") => "powerpc64le",
            other => other,
        };
        let mut tags = BTreeMap::new();
        tags.insert("os".to_owned(), os.to_owned());
        tags.insert("arch".to_owned(), arch.to_owned());
        if os == "linux" {
            let libc = if cfg!(target_env = "musl") {
                "musl"
            } else {
                "glibc"
            };
            tags.insert("libc".to_owned(), libc.to_owned());
        }
        let mut p = Platform { tags };
        p.normalize();
        p
    }

    /// A platform from `(tag, value)` pairs.
    /// A platform from `(tag, value)` pairs, normalised as Julia's `Platform` constructor
    /// does (see the module doc).
    pub fn from_tags<K: Into<String>, V: Into<String>>(
        tags: impl IntoIterator<Item = (K, V)>,
    ) -> Platform {
        let mut p = Platform {
            tags: tags
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        };
        p.normalize();
        p
    }

    /// Lowercases tag names and values, maps `arch` aliases and version tags to Julia's forms,
    /// and adds Julia's defaults (`libc = glibc` on Linux, `call_abi = eabihf` on 32-bit ARM
    /// Linux).
    pub fn normalize(&mut self) {
        let mut tags: BTreeMap<String, String> = std::mem::take(&mut self.tags)
            .into_iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| (k.to_ascii_lowercase(), v.to_ascii_lowercase()))
            .collect();
        if let Some(arch) = tags.get_mut("arch") {
            *arch = normalize_arch(arch).to_owned();
        }
        for key in VERSION_TAGS {
            if let Some(v) = tags.get_mut(key)
                && let Some(full) = full_version(v)
            {
                *v = full;
            }
        }
        if tags.get("os").map(String::as_str) == Some("linux") {
            tags.entry("libc".to_owned())
                .or_insert_with(|| "glibc".to_owned());
            if matches!(
                tags.get("arch").map(String::as_str),
                Some("armv7l" | "armv6l")
            ) {
                tags.entry("call_abi".to_owned())
                    .or_insert_with(|| "eabihf".to_owned());
            }
        }
        self.tags = tags;
    }

    /// Applies `key=value,key=value` (the syntax of `CLIMA_ARTIFACTS_PLATFORM_TAGS`): sets each
    /// tag, or removes it when the value is empty. Blank items are skipped. On a malformed item
    /// nothing is changed and the error says which item.
    pub fn apply_tags(&mut self, spec: &str) -> Result<(), String> {
        let mut updates = Vec::new();
        for item in spec.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let Some((key, value)) = item.split_once('=') else {
                return Err(format!(
                    "`{item}` is not `key=value` (expected e.g. `libgfortran_version=5.0.0,cxxstring_abi=cxx11`)"
                ));
            };
            let key = key.trim();
            if key.is_empty()
                || !key
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                return Err(format!(
                    "`{item}`: tag names are letters, digits, `_` and `-`"
                ));
            }
            updates.push((key.to_owned(), value.trim().to_owned()));
        }
        for (key, value) in updates {
            if value.is_empty() {
                self.tags.remove(&key);
            } else {
                self.tags.insert(key, value);
            }
        }
        // Normalise the values set, without re-adding a default the spec just removed.
        let removed_libc = !self.tags.contains_key("libc");
        let removed_call_abi = !self.tags.contains_key("call_abi");
        self.normalize();
        if removed_libc && spec.contains("libc=") {
            self.tags.remove("libc");
        }
        if removed_call_abi && spec.contains("call_abi=") {
            self.tags.remove("call_abi");
        }
        Ok(())
    }

    /// Whether a manifest variant with these tags can run on `self` (the host), by Julia's
    /// `platforms_match` with `self` as the host (see the module doc), plus our opt-in tags.
    pub fn matches(&self, variant: &Platform) -> bool {
        variant.tags.iter().all(|(k, v)| match self.tags.get(k) {
            Some(host) => tag_fits(k, host, v),
            None => !OPT_IN_TAGS.contains(&k.as_str()),
        })
    }

    /// Julia's `match_loss`: how many tag names only one of `self` and `other` has (the size
    /// of the symmetric difference); the preference among matching variants, smaller first.
    pub fn match_loss(&self, other: &Platform) -> usize {
        let only_self = self.tags.keys().filter(|k| !other.tags.contains_key(*k));
        let only_other = other.tags.keys().filter(|k| !self.tags.contains_key(*k));
        only_self.count() + only_other.count()
    }

    /// The value of tag `key`, if present.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.tags.get(key).map(String::as_str)
    }

    /// Julia's `triplet(p)`: `arch-os[-libc+call_abi][-libgfortranN][-cxxNN][-libstdcxxN]` then
    /// `-tag+value` for every other tag (sorted by name), e.g.
    /// `aarch64-linux-gnu-libgfortran5-cxx11`, `x86_64-apple-darwin20`, `i686-w64-mingw32`.
    pub fn triplet(&self) -> String {
        let get = |k: &str| self.tags.get(k).map(String::as_str);
        let mut s = get("arch").unwrap_or("unknown").to_owned();
        let major_minor = |v: &str| {
            let mut parts = v.split('.');
            (
                parts.next().unwrap_or("0").to_owned(),
                parts.next().unwrap_or("0").to_owned(),
            )
        };
        match get("os") {
            Some("linux") => s.push_str("-linux"),
            Some("macos") => match get("os_version") {
                Some(v) => s.push_str(&format!("-apple-darwin{}", major_minor(v).0)),
                None => s.push_str("-apple-darwin"),
            },
            Some("windows") => s.push_str("-w64-mingw32"),
            Some("freebsd") => match get("os_version") {
                Some(v) => {
                    let (major, minor) = major_minor(v);
                    s.push_str(&format!("-unknown-freebsd{major}.{minor}"));
                }
                None => s.push_str("-unknown-freebsd"),
            },
            Some("openbsd") => s.push_str("-unknown-openbsd"),
            _ => s.push_str("-unknown"),
        }
        match get("libc") {
            None => {}
            Some("glibc") => s.push_str("-gnu"),
            Some(other) => {
                s.push('-');
                s.push_str(other);
            }
        }
        if let Some(abi) = get("call_abi") {
            s.push_str(abi);
        }
        if let Some(v) = get("libgfortran_version") {
            s.push_str(&format!("-libgfortran{}", major_minor(v).0));
        }
        if let Some(abi) = get("cxxstring_abi") {
            s.push('-');
            s.push_str(abi);
        }
        if let Some(v) = get("libstdcxx_version") {
            s.push_str(&format!(
                "-libstdcxx{}",
                v.rsplit('.').next().unwrap_or("0")
            ));
        }
        for (k, v) in &self.tags {
            if !TRIPLET_TAGS.contains(&k.as_str()) {
                s.push_str(&format!("-{k}+{v}"));
            }
        }
        s
    }

    /// Julia's `parse(Platform, triplet)`: reads a triplet as [`Platform::triplet`] prints it,
    /// and the older forms Julia accepts (`amd64`, `arm-linux-gnueabihf`, `-gcc8` for
    /// `-libgfortran5`, vendor parts such as `x86_64-unknown-linux-gnu`). The error says what
    /// was not understood.
    pub fn parse_triplet(triplet: &str) -> Result<Platform, String> {
        let bad = |why: &str| format!("`{triplet}` is not a platform triplet: {why}");
        let parts: Vec<&str> = triplet.trim().split('-').collect();
        let mut tags = BTreeMap::new();
        let arch = normalize_arch(parts.first().copied().unwrap_or(""));
        if !KNOWN_ARCHES.contains(&arch) {
            return Err(bad(&format!(
                "unknown architecture `{}` (expected one of {})",
                parts.first().copied().unwrap_or(""),
                KNOWN_ARCHES.join(", ")
            )));
        }
        tags.insert("arch".to_owned(), arch.to_owned());
        // The OS, possibly after vendor parts: find the first part that names one.
        let mut i = 1;
        let mut os = None;
        while i < parts.len() && os.is_none() {
            let p = parts[i];
            let (name, version) = if let Some(v) = p.strip_prefix("darwin") {
                ("macos", v)
            } else if let Some(v) = p.strip_prefix("freebsd") {
                ("freebsd", v)
            } else if let Some(v) = p.strip_prefix("openbsd") {
                ("openbsd", v)
            } else if p == "linux" {
                ("linux", "")
            } else if p == "mingw32" && i > 1 && parts[i - 1] == "w64" {
                ("windows", "")
            } else {
                i += 1;
                continue;
            };
            if !version.is_empty() {
                let full = full_version(version)
                    .ok_or_else(|| bad(&format!("bad OS version `{version}`")))?;
                tags.insert("os_version".to_owned(), full);
            }
            os = Some(name);
            i += 1;
        }
        let os = os
            .ok_or_else(|| bad("no operating system (linux, darwin, mingw32, freebsd, openbsd)"))?;
        tags.insert("os".to_owned(), os.to_owned());
        // libc and call ABI, as one part (`gnu`, `gnueabihf`, `musl`, `musleabi`).
        if let Some(p) = parts.get(i) {
            let libc = [("gnu", "glibc"), ("musl", "musl")]
                .into_iter()
                .find(|(prefix, _)| p.starts_with(prefix));
            if let Some((prefix, libc)) = libc {
                let abi = &p[prefix.len()..];
                if !abi.is_empty() && abi != "eabihf" && abi != "eabi" {
                    return Err(bad(&format!("unknown call ABI `{abi}`")));
                }
                tags.insert("libc".to_owned(), libc.to_owned());
                if !abi.is_empty() {
                    tags.insert("call_abi".to_owned(), abi.to_owned());
                }
                i += 1;
            }
        }
        for p in &parts[i.min(parts.len())..] {
            if let Some(n) = p.strip_prefix("libgfortran") {
                let n: u32 = n.parse().map_err(|_| bad(&format!("bad `{p}`")))?;
                tags.insert("libgfortran_version".to_owned(), format!("{n}.0.0"));
            } else if let Some(gcc) = p.strip_prefix("gcc") {
                let v = match gcc {
                    "4" => "3.0.0",
                    "7" => "4.0.0",
                    "8" => "5.0.0",
                    _ => {
                        return Err(bad(&format!(
                            "`{p}`: only gcc4, gcc7 and gcc8 name a libgfortran"
                        )));
                    }
                };
                tags.insert("libgfortran_version".to_owned(), v.to_owned());
            } else if *p == "cxx03" || *p == "cxx11" {
                tags.insert("cxxstring_abi".to_owned(), (*p).to_owned());
            } else if let Some(n) = p.strip_prefix("libstdcxx") {
                let n: u32 = n.parse().map_err(|_| bad(&format!("bad `{p}`")))?;
                tags.insert("libstdcxx_version".to_owned(), format!("3.4.{n}"));
            } else if let Some((k, v)) = p.split_once('+') {
                if k.is_empty() || v.is_empty() {
                    return Err(bad(&format!("bad tag `{p}` (expected `name+value`)")));
                }
                tags.insert(k.to_owned(), v.to_owned());
            } else {
                return Err(bad(&format!("unexpected part `{p}`")));
            }
        }
        Ok(Platform::from_tags(tags))
    }
}

/// Tags whose values are versions (normalised to `major.minor.patch`).
const VERSION_TAGS: [&str; 3] = ["libgfortran_version", "libstdcxx_version", "os_version"];

/// Tags that the core of a triplet spells out (the others follow as `-tag+value`).
const TRIPLET_TAGS: [&str; 8] = [
    "os",
    "arch",
    "libc",
    "call_abi",
    "libgfortran_version",
    "libstdcxx_version",
    "cxxstring_abi",
    "os_version",
];

/// Architectures Julia knows (also what `validate` warns about).
pub(crate) const KNOWN_ARCHES: [&str; 7] = [
    "x86_64",
    "i686",
    "aarch64",
    "armv7l",
    "armv6l",
    "powerpc64le",
    "riscv64",
];

/// Julia's name for an architecture alias (`CPUID.normalize_arch` and the triplet aliases);
/// unknown names are returned as they are (lowercased by the caller).
fn normalize_arch(arch: &str) -> &str {
    match arch {
        "amd64" | "x86_64" => "x86_64",
        "i386" | "i486" | "i586" | "i686" | "x86" => "i686",
        "arm64" | "aarch64" => "aarch64",
        "arm" | "armv7l" | "armv7" => "armv7l",
        "armv6l" => "armv6l",
        "ppc64le" | "powerpc64le" => "powerpc64le",
        "rv64" | "riscv64" => "riscv64",
        other => other,
    }
}

/// `5` -> `5.0.0`, `3.4` -> `3.4.0`, `3.4.26` as is; `None` if not a dotted number.
fn full_version(v: &str) -> Option<String> {
    let parts: Vec<u64> = v
        .split('.')
        .map(|p| p.parse().ok())
        .collect::<Option<Vec<u64>>>()?;
    if parts.is_empty() || parts.len() > 3 {
        return None;
    }
    let at = |i: usize| parts.get(i).copied().unwrap_or(0);
    Some(format!("{}.{}.{}", at(0), at(1), at(2)))
}

/// The numbers of a version tag value, for ordered comparison.
fn version_numbers(v: &str) -> Option<(u64, u64, u64)> {
    let full = full_version(v)?;
    let mut it = full.split('.').map(|p| p.parse().unwrap_or(0));
    Some((it.next()?, it.next()?, it.next()?))
}

/// Whether an entry's value `entry` of tag `key` fits the host's `host` (values normalised).
fn tag_fits(key: &str, host: &str, entry: &str) -> bool {
    match key {
        // Compared on major and minor only.
        "julia_version" => match (version_numbers(host), version_numbers(entry)) {
            (Some(h), Some(e)) => (h.0, h.1) == (e.0, e.1),
            _ => host == entry,
        },
        // The host's value is an upper bound: what the entry was built for must not be newer.
        "os_version" | "libstdcxx_version" => match (version_numbers(host), version_numbers(entry))
        {
            (Some(h), Some(e)) => e <= h,
            _ => host == entry,
        },
        _ => host == entry,
    }
}

impl std::fmt::Display for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self.tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(tags: &[(&str, &str)]) -> Platform {
        Platform::from_tags(tags.iter().copied())
    }

    #[test]
    fn native_platform_uses_julia_names() {
        let host = Platform::native();
        let os = host.get("os").unwrap();
        assert_ne!(host.get("arch"), Some("x86"));
        assert_ne!(host.get("arch"), Some("arm"));
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        assert_eq!(host.get("libc"), Some("glibc"));
        #[cfg(target_os = "linux")]
        assert_eq!(os, "linux");
        #[cfg(target_arch = "x86_64")]
        assert_eq!(host.get("arch"), Some("x86_64"));
        #[cfg(not(target_os = "linux"))]
        assert_eq!(host.get("libc"), None);
    }

    #[test]
    fn matching_follows_platforms_match() {
        let host = p(&[("os", "linux"), ("arch", "x86_64"), ("libc", "glibc")]);
        assert!(host.matches(&p(&[("os", "linux"), ("arch", "x86_64")])));
        assert!(host.matches(&p(&[
            ("os", "Linux"),
            ("arch", "X86_64"),
            ("libc", "GLIBC")
        ])));
        // A tag only one side has does not matter...
        assert!(host.matches(&p(&[("os", "linux"), ("arch", "x86_64"), ("cuda", "12.0")])));
        assert!(host.matches(&Platform::default()));
        // ...except our opt-in tags.
        let sanitized = p(&[("os", "linux"), ("arch", "x86_64"), ("sanitize", "memory")]);
        assert!(!host.matches(&sanitized));
        let mut asking = host.clone();
        asking.apply_tags("sanitize=memory").unwrap();
        assert!(asking.matches(&sanitized));
        asking.apply_tags("sanitize=thread").unwrap();
        assert!(!asking.matches(&sanitized));
        assert!(!host.matches(&p(&[("os", "linux"), ("arch", "x86_64"), ("libc", "musl")])));
        assert!(!host.matches(&p(&[("os", "macos"), ("arch", "x86_64")])));
        assert!(!host.matches(&p(&[("os", "linux"), ("arch", "aarch64")])));

        // Tags without a compare strategy must be equal: cuda 11 does not fit an 11.8 host.
        let mut cuda = host.clone();
        cuda.apply_tags("cuda=11.8").unwrap();
        assert!(!cuda.matches(&p(&[("os", "linux"), ("arch", "x86_64"), ("cuda", "11")])));
        assert!(cuda.matches(&p(&[("os", "linux"), ("arch", "x86_64"), ("cuda", "11.8")])));
        // libgfortran_version is a version: 5 is 5.0.0, not 4.0.0.
        let mut gf = host.clone();
        gf.apply_tags("libgfortran_version=5.0.0").unwrap();
        let entry = |v: &str| {
            p(&[
                ("os", "linux"),
                ("arch", "x86_64"),
                ("libgfortran_version", v),
            ])
        };
        assert!(gf.matches(&entry("5")));
        assert!(!gf.matches(&entry("4.0.0")));
        // julia_version: major.minor only.
        let mut jl = host.clone();
        jl.apply_tags("julia_version=1.10.4").unwrap();
        let entry = |v: &str| p(&[("os", "linux"), ("arch", "x86_64"), ("julia_version", v)]);
        assert!(jl.matches(&entry("1.10.0")));
        assert!(!jl.matches(&entry("1.11.0")));
        // os_version and libstdcxx_version of the host are upper bounds.
        let mac14 = p(&[("os", "macos"), ("arch", "aarch64"), ("os_version", "14")]);
        let built = |v: &str| p(&[("os", "macos"), ("arch", "aarch64"), ("os_version", v)]);
        assert!(mac14.matches(&built("13")));
        assert!(mac14.matches(&built("14.0.0")));
        assert!(!mac14.matches(&built("15")));
        let mut cxx = host.clone();
        cxx.apply_tags("libstdcxx_version=3.4.26").unwrap();
        let built = |v: &str| {
            p(&[
                ("os", "linux"),
                ("arch", "x86_64"),
                ("libstdcxx_version", v),
            ])
        };
        assert!(cxx.matches(&built("3.4.18")));
        assert!(!cxx.matches(&built("3.4.29")));
    }

    #[test]
    fn normalisation_and_defaults_as_julia() {
        // A linux entry without libc is glibc; 32-bit ARM linux without call_abi is eabihf.
        assert_eq!(
            p(&[("os", "linux"), ("arch", "x86_64")]).get("libc"),
            Some("glibc")
        );
        let arm = p(&[("os", "Linux"), ("arch", "ARM")]);
        assert_eq!(arm.get("arch"), Some("armv7l"));
        assert_eq!(arm.get("call_abi"), Some("eabihf"));
        assert_eq!(arm.get("os"), Some("linux"));
        assert_eq!(p(&[("os", "macos"), ("arch", "aarch64")]).get("libc"), None);
        for (alias, arch) in [
            ("amd64", "x86_64"),
            ("i386", "i686"),
            ("arm64", "aarch64"),
            ("ppc64le", "powerpc64le"),
            ("arm", "armv7l"),
        ] {
            assert_eq!(
                p(&[("os", "linux"), ("arch", alias)]).get("arch"),
                Some(arch)
            );
        }
        assert_eq!(
            p(&[
                ("os", "linux"),
                ("arch", "x86_64"),
                ("libgfortran_version", "5")
            ])
            .get("libgfortran_version"),
            Some("5.0.0")
        );
        assert_eq!(
            p(&[("os", "linux"), ("arch", "x86_64"), ("libc", "glibc")]).match_loss(&p(&[
                ("os", "linux"),
                ("arch", "x86_64"),
                ("cuda", "12")
            ])),
            1,
            "the entry has libc (Julia's default) and cuda; the host has no cuda"
        );
    }

    #[test]
    fn triplets_print_and_parse_as_julia() {
        for (tags, triplet) in [
            (
                vec![("os", "macos"), ("arch", "x86_64")],
                "x86_64-apple-darwin",
            ),
            (
                vec![("os", "windows"), ("arch", "i686")],
                "i686-w64-mingw32",
            ),
            (
                vec![
                    ("os", "linux"),
                    ("arch", "armv7l"),
                    ("libgfortran_version", "3"),
                ],
                "armv7l-linux-gnueabihf-libgfortran3",
            ),
            (
                vec![
                    ("os", "linux"),
                    ("arch", "aarch64"),
                    ("libgfortran_version", "5"),
                    ("cxxstring_abi", "cxx11"),
                ],
                "aarch64-linux-gnu-libgfortran5-cxx11",
            ),
            (
                vec![
                    ("os", "linux"),
                    ("arch", "x86_64"),
                    ("libc", "musl"),
                    ("cuda", "11.8"),
                ],
                "x86_64-linux-musl-cuda+11.8",
            ),
            (
                vec![
                    ("os", "freebsd"),
                    ("arch", "x86_64"),
                    ("os_version", "13.2"),
                ],
                "x86_64-unknown-freebsd13.2",
            ),
            (
                vec![
                    ("os", "linux"),
                    ("arch", "x86_64"),
                    ("libstdcxx_version", "3.4.26"),
                ],
                "x86_64-linux-gnu-libstdcxx26",
            ),
        ] {
            let platform = p(&tags);
            assert_eq!(platform.triplet(), triplet);
            assert_eq!(
                Platform::parse_triplet(triplet).unwrap(),
                platform,
                "{triplet}"
            );
        }
        // Older spellings Julia reads.
        let old = Platform::parse_triplet("arm-linux-gnueabihf-gcc8").unwrap();
        assert_eq!(old.triplet(), "armv7l-linux-gnueabihf-libgfortran5");
        let vendor = Platform::parse_triplet("amd64-unknown-linux-gnu").unwrap();
        assert_eq!(vendor.triplet(), "x86_64-linux-gnu");
        assert_eq!(
            Platform::parse_triplet("aarch64-apple-darwin20")
                .unwrap()
                .get("os_version"),
            Some("20.0.0")
        );
        for bad in ["", "vax-linux-gnu", "x86_64-plan9", "x86_64-linux-gnu-oops"] {
            assert!(Platform::parse_triplet(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn applies_tag_specs() {
        let mut host = p(&[("os", "linux"), ("arch", "x86_64"), ("libc", "glibc")]);
        host.apply_tags(" libgfortran_version=5.0.0 , cxxstring_abi=cxx11,,libc=")
            .unwrap();
        assert_eq!(
            host.to_string(),
            "arch=x86_64,cxxstring_abi=cxx11,libgfortran_version=5.0.0,os=linux"
        );
        let before = host.clone();
        let e = host.apply_tags("cuda=12,oops").unwrap_err();
        assert!(e.contains("`oops` is not `key=value`"), "{e}");
        assert_eq!(host, before, "nothing applied on error");
        assert!(host.apply_tags("=x").unwrap_err().contains("tag names"));
        assert!(host.apply_tags("a b=x").unwrap_err().contains("tag names"));
        assert!(host.apply_tags("").is_ok());
    }

    #[test]
    fn host_reads_the_environment_variable() {
        // Run the check in a child process so this test's environment change cannot race with
        // other tests of this binary.
        if std::env::var_os("CLIMA_PLATFORM_CHILD").is_some() {
            let host = Platform::host();
            assert_eq!(host.get("cuda"), Some("12.2"));
            assert_eq!(host.get("libc"), None);
            assert!(Platform::try_host().is_ok());
            return;
        }
        passes_in_child(
            "platform::tests::host_reads_the_environment_variable",
            "cuda=12.2,libc=",
        );
        passes_in_child("platform::tests::bad_env_is_an_error", "cuda=12.2,junk");
    }

    /// Runs the test `name` of this binary in a child process with `CLIMA_PLATFORM_CHILD=1` and
    /// the platform tags variable set to `tags`, and asserts that it ran and passed.
    fn passes_in_child(name: &str, tags: &str) {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([name, "--exact", "--nocapture"])
            .env("CLIMA_PLATFORM_CHILD", "1")
            .env(PLATFORM_TAGS_ENV, tags)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed"));
    }

    #[test]
    fn bad_env_is_an_error() {
        if std::env::var_os("CLIMA_PLATFORM_CHILD").is_none() {
            return; // only meaningful in the child started above
        }
        let e = Platform::try_host().unwrap_err();
        assert_eq!(
            e,
            "CLIMA_ARTIFACTS_PLATFORM_TAGS: `junk` is not `key=value` (expected e.g. \
             `libgfortran_version=5.0.0,cxxstring_abi=cxx11`)"
        );
        // `host` keeps the good items.
        assert_eq!(Platform::host().get("cuda"), Some("12.2"));
    }
}
