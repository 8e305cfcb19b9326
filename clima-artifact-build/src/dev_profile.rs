//! Whether a debug build compiles the install's hot path (hashes, decompressors) unoptimised.
//!
//! Cargo applies `[profile.dev.package.<crate>]` sections only from the root manifest of the
//! workspace being built (and from cargo's config files), never from a dependency's workspace:
//! a model crate outside this repository gets `opt-level = 0` for `zlib-rs`, `sha1`, `sha2`
//! and the other decompressors unless its own root `Cargo.toml` says otherwise, and installs
//! then verify and unpack data about ten times slower than a release build.

use std::path::{Path, PathBuf};

use crate::Env;

/// The profile block a model's root `Cargo.toml` should hold (the README shows the same text).
pub(crate) const BLOCK: &str = include_str!("../dev-profile.toml");

/// Largest `Cargo.toml` or cargo config file read (a real one is a few KiB).
const MAX_READ: u64 = 1 << 20;

/// What the check found: the root manifest it read and the hot crates left at `opt-level = 0`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Unoptimised {
    /// The root `Cargo.toml` whose `[profile.dev]` applies.
    pub root: PathBuf,
    /// Hot-path crates at `opt-level = 0`, sorted by name.
    pub crates: Vec<String>,
}

/// The crates of [`BLOCK`], sorted by name.
pub(crate) fn hot_crates() -> Vec<String> {
    let value: toml::Table = toml::from_str(BLOCK).expect("dev-profile.toml is valid TOML");
    value
        .get("profile")
        .and_then(|p| p.get("dev"))
        .and_then(|d| d.get("package"))
        .and_then(|p| p.as_table())
        .map(|t| t.keys().cloned().collect())
        .unwrap_or_default()
}

/// The files that decide the dev profile of a build rooted at `root`: cargo config files
/// (`.cargo/config.toml` in `dir`'s ancestors, then `$CARGO_HOME/config.toml`), then the root
/// manifest. Only existing files are listed.
fn profile_sources(env: &dyn Env, dir: &Path, root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for ancestor in dir.ancestors() {
        for name in ["config.toml", "config"] {
            let f = ancestor.join(".cargo").join(name);
            if f.is_file() {
                files.push(f);
                break;
            }
        }
    }
    if let Some(home) = env.var("CARGO_HOME") {
        let f = Path::new(&home).join("config.toml");
        if f.is_file() && !files.contains(&f) {
            files.push(f);
        }
    }
    files.push(root.to_path_buf());
    files
}

/// The root manifest of the workspace `dir`'s crate belongs to: the nearest ancestor
/// `Cargo.toml` with a `[workspace]` table, else the crate's own.
pub(crate) fn root_manifest(dir: &Path) -> PathBuf {
    dir.ancestors()
        .map(|a| a.join("Cargo.toml"))
        .find(|f| read_toml(f).is_some_and(|t| t.contains_key("workspace")))
        .unwrap_or_else(|| dir.join("Cargo.toml"))
}

fn read_toml(path: &Path) -> Option<toml::Table> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(MAX_READ)
        .read_to_string(&mut text)
        .ok()?;
    toml::from_str(&text).ok()
}

/// `opt-level` of `[profile.dev.package.<krate>]` (a key `krate@version` counts too), else of
/// `[profile.dev.package."*"]`, in one parsed file; `None` when the file sets neither.
fn package_opt_level(table: &toml::Table, krate: &str) -> Option<bool> {
    let packages = table
        .get("profile")?
        .get("dev")?
        .get("package")?
        .as_table()?;
    let level = |spec: &toml::Value| spec.get("opt-level").map(is_optimised);
    packages
        .iter()
        .find(|(k, _)| k.split('@').next() == Some(krate))
        .and_then(|(_, v)| level(v))
        .or_else(|| packages.get("*").and_then(level))
}

/// Whether an `opt-level` value optimises (`0` and `"0"` do not; `1`-`3`, `"s"`, `"z"` do).
fn is_optimised(v: &toml::Value) -> bool {
    !matches!(v.as_integer(), Some(0)) && v.as_str() != Some("0")
}

/// The check itself: `None` unless this is an unoptimised build (`OPT_LEVEL=0`) whose profile
/// leaves some hot crate unoptimised. Unreadable files count as setting nothing.
pub(crate) fn check(env: &dyn Env, dir: &Path) -> Option<Unoptimised> {
    if env.var("OPT_LEVEL").as_deref() != Some("0") {
        return None;
    }
    let root = root_manifest(dir);
    let tables: Vec<toml::Table> = profile_sources(env, dir, &root)
        .iter()
        .filter_map(|f| read_toml(f))
        .collect();
    let crates: Vec<String> = hot_crates()
        .into_iter()
        .filter(|krate| {
            // The first file that sets it decides (config files take precedence over the
            // manifest, as in cargo).
            !tables
                .iter()
                .find_map(|t| package_opt_level(t, krate))
                .unwrap_or(false)
        })
        .collect();
    (!crates.is_empty()).then_some(Unoptimised { root, crates })
}

/// The warnings printed for `found`: what is slow and why, and the block to copy (one
/// directive per line, since a directive ends at the line end).
pub(crate) fn warnings(found: &Unoptimised) -> Vec<String> {
    let mut lines = vec![format!(
        "clima-artifacts: this debug build compiles {} unoptimised, so installs will hash \
             and unpack data about 10x slower than a release build. Cargo takes profile \
             settings only from the root manifest, not from a dependency: add these lines to \
             `{}` (README, \"Using it in a model\"; it adds a few seconds to the first build):",
        found
            .crates
            .iter()
            .map(|c| format!("`{c}`"))
            .collect::<Vec<_>>()
            .join(", "),
        found.root.display()
    )];
    lines.extend(
        BLOCK
            .lines()
            .filter(|l| !l.trim_start().starts_with('#') && !l.trim().is_empty())
            .map(|l| format!("    {l}")),
    );
    lines
}
