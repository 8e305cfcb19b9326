//! Finding, parsing and checking the manifest at expansion time: ordinary functions that return
//! the message of the compile error to show, unit-tested without a compiler.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use clima_artifact_manifest::manifest::MANIFEST_FILE_NAMES;
use clima_artifact_manifest::{Manifest, ManifestErrorKind, split_name_and_subpath};

/// A literal `name` or `name/sub/path` that the manifest defines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Checked {
    pub name: String,
    pub subpath: Option<String>,
}

/// Manifests parsed by earlier expansions in this compiler process, with the bytes they were
/// parsed from (a crate with many call sites parses its manifest once).
static PARSED: Mutex<Option<ParsedCache>> = Mutex::new(None);

/// Manifest path -> (bytes it was parsed from, result).
type ParsedCache = HashMap<PathBuf, (Vec<u8>, Manifest)>;

/// Finds `JuliaArtifacts.toml`, else `Artifacts.toml`, in `crate_dir` and parses it. The
/// manifest's `path` is absolute and canonical (it goes into `include_bytes!`).
pub(crate) fn load_manifest(crate_dir: &Path) -> Result<Manifest, String> {
    let found = Manifest::find_in_dir(crate_dir).map_err(|e| match e.kind {
        ManifestErrorKind::NotFound { .. } => missing_message(crate_dir),
        _ => e.to_string(),
    })?;
    let path = found.canonicalize().unwrap_or(found);
    let bytes = std::fs::read(&path).map_err(|e| {
        format!(
            "cannot read the artifact manifest `{}`: {e}",
            path.display()
        )
    })?;
    let mut cache = PARSED.lock().unwrap_or_else(PoisonError::into_inner);
    let cache = cache.get_or_insert_with(HashMap::new);
    if let Some((old, manifest)) = cache.get(&path)
        && *old == bytes
    {
        return Ok(manifest.clone());
    }
    let text = String::from_utf8(bytes.clone()).map_err(|e| {
        format!(
            "malformed artifact manifest `{}`: not UTF-8 (byte {})",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })?;
    let manifest =
        Manifest::parse(&text, &path).map_err(|e| format!("malformed artifact manifest: {e}"))?;
    cache.insert(path, (bytes, manifest.clone()));
    Ok(manifest)
}

fn missing_message(crate_dir: &Path) -> String {
    let tried: Vec<String> = MANIFEST_FILE_NAMES
        .iter()
        .map(|f| format!("`{}`", crate_dir.join(f).display()))
        .collect();
    format!(
        "no artifact manifest for this crate: looked for {} (the crate's directory, \
         CARGO_MANIFEST_DIR); create `Artifacts.toml` next to `Cargo.toml`, and call \
         `clima_artifact_build::validate()` from build.rs so cargo rebuilds when it appears",
        tried.join(" and ")
    )
}

/// Checks a literal `name` or `name/sub/path` against the manifest.
pub(crate) fn check_literal(manifest: &Manifest, spec: &str) -> Result<Checked, String> {
    let (name, subpath) = split_name_and_subpath(spec).map_err(|e| {
        format!("invalid artifact name `{spec}`: {e}; write `name` or `name/relative/path`")
    })?;
    if manifest.get(name).is_none() {
        let names: Vec<&str> = manifest.names().collect();
        let hint = match suggest(name, &names) {
            Some(s) => format!("did you mean `{s}`? "),
            None => String::new(),
        };
        return Err(format!(
            "artifact `{name}` is not defined in `{}`; {hint}defined: {}",
            manifest.path.display(),
            defined_list(&names)
        ));
    }
    Ok(Checked {
        name: name.to_owned(),
        subpath: subpath.map(str::to_owned),
    })
}

/// The defined name closest to `name`, if it is close enough to be a likely typo.
pub(crate) fn suggest<'a>(name: &str, names: &[&'a str]) -> Option<&'a str> {
    clima_artifact_manifest::suggest_name(name, names.iter().copied())
}

/// `a, b, c`, or `(none)`; long lists are cut after 30 names.
pub(crate) fn defined_list(names: &[&str]) -> String {
    const MAX: usize = 30;
    if names.is_empty() {
        return "(none: the manifest defines no artifact)".to_owned();
    }
    let mut s = names
        .iter()
        .take(MAX)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > MAX {
        s.push_str(&format!(", ... and {} more", names.len() - MAX));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOML: &str = r#"
[era5]
git-tree-sha1 = "0123456789abcdef0123456789abcdef01234567"

[rrtmgp]
git-tree-sha1 = "1123456789abcdef0123456789abcdef01234567"
lazy = true
"#;

    fn manifest(dir: &Path) -> Manifest {
        std::fs::write(dir.join("Artifacts.toml"), TOML).unwrap();
        load_manifest(dir).unwrap()
    }

    #[test]
    fn suggests_close_names_only() {
        let names = ["era5", "rrtmgp", "topography"];
        assert_eq!(suggest("era", &names), Some("era5"));
        assert_eq!(suggest("rrtmpg", &names), Some("rrtmgp"));
        assert_eq!(suggest("topgraphy", &names), Some("topography"));
        assert_eq!(suggest("xyz", &names), None);
    }

    #[test]
    fn lists_names_and_cuts_long_lists() {
        assert_eq!(defined_list(&["a", "b"]), "a, b");
        let many: Vec<String> = (0..35).map(|i| format!("n{i}")).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        assert!(defined_list(&refs).ends_with("n29, ... and 5 more"));
        assert!(defined_list(&[]).contains("none"));
    }

    #[test]
    fn checks_literals() {
        let dir = tempfile::tempdir().unwrap();
        let m = manifest(dir.path());
        assert!(m.path.is_absolute());
        assert_eq!(
            check_literal(&m, "era5/2008/u.nc").unwrap(),
            Checked {
                name: "era5".into(),
                subpath: Some("2008/u.nc".into())
            }
        );
        let err = check_literal(&m, "era").unwrap_err();
        assert!(err.contains("did you mean `era5`?"), "{err}");
        assert!(err.contains("defined: era5, rrtmgp"), "{err}");
        assert!(check_literal(&m, "era5/../x").unwrap_err().contains(".."));
        assert!(check_literal(&m, "era5//abs").is_err());
    }

    #[test]
    fn missing_and_malformed_manifests_say_where() {
        let dir = tempfile::tempdir().unwrap();
        let err = load_manifest(dir.path()).unwrap_err();
        assert!(err.contains("JuliaArtifacts.toml"), "{err}");
        assert!(err.contains(&dir.path().display().to_string()), "{err}");

        std::fs::write(
            dir.path().join("Artifacts.toml"),
            "[era5]\ngit-tree-sha1 = \"zz\"\n",
        )
        .unwrap();
        let err = load_manifest(dir.path()).unwrap_err();
        assert!(err.starts_with("malformed artifact manifest"), "{err}");
        assert!(err.contains("Artifacts.toml`:2"), "{err}");
    }

    #[test]
    fn reparses_after_an_edit() {
        let dir = tempfile::tempdir().unwrap();
        let m = manifest(dir.path());
        assert_eq!(m.names().count(), 2);
        std::fs::write(
            dir.path().join("Artifacts.toml"),
            "[only]\ngit-tree-sha1 = \"0123456789abcdef0123456789abcdef01234567\"\n",
        )
        .unwrap();
        let m = load_manifest(dir.path()).unwrap();
        assert_eq!(m.names().collect::<Vec<_>>(), ["only"]);
    }
}
