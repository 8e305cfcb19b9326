//! Platform tags of `[[name]]` entries and selection of the entry that fits the host.
//!
//! Matching follows Julia's rule in spirit: a manifest variant fits the host when every tag
//! present on *both* sides has the same value (compared ignoring ASCII case, and for dotted
//! version numbers up to the shorter one, so a host `libgfortran_version=5` fits `5.0.0`). A tag
//! present on only one side does not prevent a match, except the opt-in tags ([`OPT_IN_TAGS`],
//! e.g. `sanitize = "memory"`): a variant carrying one fits only a host that sets it, so a
//! sanitizer build is never picked for an ordinary host. The host always has `os` and `arch`,
//! and `libc` on Linux, so those three are always compared when the variant has them. Among
//! several fitting variants [`Manifest::select`](crate::Manifest::select) takes the one sharing
//! the most equal tags with the host, and among equals the one written last in the file (for
//! binary wrappers that is usually the newest `libgfortran_version`).

//! The host's tags can be extended or changed with `CLIMA_ARTIFACTS_PLATFORM_TAGS`, e.g.
//! `libgfortran_version=5.0.0,cxxstring_abi=cxx11` (an empty value, `libc=`, removes a tag).

use std::collections::BTreeMap;

/// String tags of a platform: at least `os` and `arch`; often `libc`, `libgfortran_version`,
/// `cxxstring_abi`, ... (Julia's `Base.BinaryPlatforms`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Platform {
    /// Tag name -> value, e.g. `os` -> `linux`.
    pub tags: BTreeMap<String, String>,
}

/// No variant of a `[[name]]` entry fits the platform.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
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
pub const PLATFORM_TAGS_ENV: &str = "CLIMA_ARTIFACTS_PLATFORM_TAGS";

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
        Platform { tags }
    }

    /// A platform from `(tag, value)` pairs.
    pub fn from_tags<K: Into<String>, V: Into<String>>(
        tags: impl IntoIterator<Item = (K, V)>,
    ) -> Platform {
        Platform {
            tags: tags
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
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
        Ok(())
    }

    /// Whether a manifest variant with these tags can run on `self` (the host): every tag present
    /// on both sides is equal (see the module doc), and the variant has no [`OPT_IN_TAGS`] the
    /// host lacks.
    pub fn matches(&self, variant: &Platform) -> bool {
        variant.tags.iter().all(|(k, v)| match self.tags.get(k) {
            Some(mine) => same_value(mine, v),
            None => !OPT_IN_TAGS.contains(&k.as_str()),
        })
    }

    /// How many tags `self` and `other` both have with equal values: the preference among
    /// matching variants.
    pub fn shared_tags(&self, other: &Platform) -> usize {
        other
            .tags
            .iter()
            .filter(|(k, v)| {
                self.tags
                    .get(*k)
                    .is_some_and(|mine| mine.eq_ignore_ascii_case(v))
            })
            .count()
    }

    /// The value of tag `key`, if present.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.tags.get(key).map(String::as_str)
    }
}

/// Tag values are equal ignoring ASCII case; dotted numeric versions are compared up to the
/// shorter one (`5` equals `5.0.0`, `4.0.0` does not).
fn same_value(a: &str, b: &str) -> bool {
    if a.eq_ignore_ascii_case(b) {
        return true;
    }
    fn numeric(s: &str) -> Option<Vec<&str>> {
        let parts: Vec<&str> = s.split('.').collect();
        parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()))
            .then_some(parts)
    }
    match (numeric(a), numeric(b)) {
        (Some(x), Some(y)) => x
            .iter()
            .zip(&y)
            .all(|(p, q)| p.trim_start_matches('0') == q.trim_start_matches('0')),
        _ => false,
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
    fn matching_compares_shared_tags_only() {
        let host = p(&[("os", "linux"), ("arch", "x86_64"), ("libc", "glibc")]);
        assert!(host.matches(&p(&[("os", "linux"), ("arch", "x86_64")])));
        assert!(host.matches(&p(&[
            ("os", "Linux"),
            ("arch", "X86_64"),
            ("libc", "GLIBC")
        ])));
        assert!(host.matches(&p(&[("os", "linux"), ("arch", "x86_64"), ("cuda", "12.0")])));
        assert!(host.matches(&Platform::default()));
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
        assert_eq!(
            host.shared_tags(&p(&[("os", "linux"), ("arch", "x86_64"), ("cuda", "12")])),
            2
        );
        assert_eq!(
            host.shared_tags(&p(&[("os", "linux"), ("libc", "glibc")])),
            2
        );
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
