//! `build.rs` helper that validates a crate's `Artifacts.toml` at build time and tells cargo when
//! to rerun.
//!
//! In `build.rs`, the body of `fn main()`:
//!
//! ```no_run
//! clima_artifact_build::validate();
//! ```
//!
//! What it does, on every build script run:
//! - looks for `JuliaArtifacts.toml`, else `Artifacts.toml`, in `CARGO_MANIFEST_DIR` (or the
//!   path given to [`Builder::manifest_path`]);
//! - prints `cargo:rerun-if-changed=` for the manifest in use, so editing it reruns the script
//!   (when neither `JuliaArtifacts.toml` nor `Artifacts.toml` exists, both are listed, so creating
//!   either reruns the failing script). A `JuliaArtifacts.toml` created *next to* an existing
//!   `Artifacts.toml` is not noticed by default: run `touch build.rs` after creating it, or opt in
//!   with [`Builder::watch_absent(true)`](Builder::watch_absent). That is not the default because
//!   cargo treats a listed file that does not exist as changed, so the build script would rerun,
//!   and the crate recompile, on every `cargo build`;
//! - prints `cargo:rerun-if-env-changed=` for the variables that change its output
//!   ([`WATCHED_ENV_VARS`]);
//! - prints every finding of [`clima_artifact_manifest::validate()`] as `cargo:warning=`, plus
//!   the recipe checks: a downloadable artifact with neither a `recipe` nor a `source` key (how
//!   can its data be made again?), and a `recipe` key naming a folder without an executable
//!   `recipe` and a `README.md` ([`Validated::recipes`] lists the artifacts that have one);
//! - on errors prints each one (`file:line:col: artifact `x`: ...`) as `cargo:warning=` and fails
//!   the build (a build script fails by panicking or exiting non-zero).
//!
//! The macro `clima_artifact!` re-reads the manifest at expansion and includes it by absolute
//! path, which covers edits of an existing file; what only a build script can cover is the
//! creation of a file that did not exist and the environment variables.
//!
//! In an unoptimised build (`OPT_LEVEL=0`, cargo's dev profile) it also checks that the root
//! manifest (the nearest ancestor `Cargo.toml` with a `[workspace]` table, else the crate's
//! own) or a cargo config file optimises the crates on the install's hot path, and otherwise
//! warns once, with the block to copy (the file `dev-profile.toml` of this crate): cargo
//! ignores the profile sections of a dependency's workspace, so without them a model's
//! `cargo run` hashes and unpacks data about ten times slower than `cargo run --release`.
//!
//! Optionally [`Builder::constants`] writes typed constants for every artifact into `OUT_DIR`.

use std::fmt;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use clima_artifact_manifest::validate::validate_with;
use clima_artifact_manifest::{ArtifactEntry, Manifest, ManifestError, Warning};

mod dev_profile;

/// The names of files and folders in a depot (`clima_artifact_manifest::layout`), for a build
/// script that names a depot's `Overrides.toml`.
pub use clima_artifact_manifest::layout;
/// The names of the environment variables (the crate `clima-artifact-vars`).
pub use clima_artifact_vars as vars;

/// Environment variables whose value changes what the build script prints: the depot named in
/// override hints, the host platform tags, and the cache directory of the default depot.
pub const WATCHED_ENV_VARS: [&str; 4] = [
    vars::DEPOT_PATH,
    vars::PLATFORM_TAGS,
    vars::XDG_CACHE_HOME,
    vars::BUILD_DENY_WARNINGS,
];

/// Set to `1` to make warnings fail the build (as [`Builder::deny_warnings`] does).
pub const DENY_WARNINGS_ENV: &str = vars::BUILD_DENY_WARNINGS;

/// Why validation failed.
#[derive(Debug)]
pub enum BuildError {
    /// `CARGO_MANIFEST_DIR` is not set: not running under cargo, and no path was given.
    NoManifestDir,
    /// The manifest is missing or invalid; every error found, in file order.
    Manifest(Vec<ManifestError>),
    /// Warnings were found and [`Builder::deny_warnings`] is on.
    DeniedWarnings {
        /// The manifest file.
        path: PathBuf,
        /// How many warnings.
        count: usize,
    },
    /// Writing directives or the constants file failed.
    Io(io::Error),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::NoManifestDir => f.write_str(
                "CARGO_MANIFEST_DIR is not set; call this from a build script, or give the \
                 manifest with Builder::manifest_path",
            ),
            BuildError::Manifest(errors) => {
                write!(f, "{} error(s) in the artifacts manifest:", errors.len())?;
                for e in errors {
                    write!(f, "\n  {e}")?;
                }
                Ok(())
            }
            BuildError::DeniedWarnings { path, count } => write!(
                f,
                "`{}` has {count} warning(s) and warnings are denied; fix them or turn off \
                 deny_warnings / {DENY_WARNINGS_ENV}",
                path.display()
            ),
            BuildError::Io(e) => write!(f, "cannot write build output: {e}"),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BuildError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for BuildError {
    fn from(e: io::Error) -> Self {
        BuildError::Io(e)
    }
}

/// What a successful run found.
#[derive(Debug, Clone)]
pub struct Validated {
    /// The parsed manifest.
    pub manifest: Manifest,
    /// The warnings printed.
    pub warnings: Vec<Warning>,
    /// The constants file written, if [`Builder::constants`] was set.
    pub constants: Option<PathBuf>,
    /// The artifacts with a `recipe` key, in file order: name and recipe folder (the key
    /// resolved against the manifest's folder).
    pub recipes: Vec<(String, PathBuf)>,
}

/// Options for validation; [`validate`] is `Builder::new().run_or_panic()`.
#[derive(Debug, Clone, Default)]
pub struct Builder {
    manifest_dir: Option<PathBuf>,
    manifest_path: Option<PathBuf>,
    deny_warnings: bool,
    constants: Option<String>,
    overrides_file: Option<PathBuf>,
    watch_absent: bool,
}

/// The environment a run sees (injectable for tests).
pub trait Env {
    /// The value of `name`, if set and UTF-8.
    fn var(&self, name: &str) -> Option<String>;
}

/// The process environment.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }
}

impl<F: Fn(&str) -> Option<String>> Env for F {
    fn var(&self, name: &str) -> Option<String> {
        self(name)
    }
}

impl Builder {
    /// Default options: the manifest found in `CARGO_MANIFEST_DIR`, warnings allowed.
    pub fn new() -> Self {
        Self::default()
    }

    /// Looks for the manifest in `dir` instead of `CARGO_MANIFEST_DIR`.
    pub fn manifest_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.manifest_dir = Some(dir.into());
        self
    }

    /// Uses this manifest file instead of searching (relative paths resolve against the
    /// manifest directory).
    pub fn manifest_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.manifest_path = Some(path.into());
        self
    }

    /// Fails the build when there are warnings (also enabled by
    /// `CLIMA_ARTIFACTS_BUILD_DENY_WARNINGS=1`).
    pub fn deny_warnings(mut self, deny: bool) -> Self {
        self.deny_warnings = deny;
        self
    }

    /// Whether to list manifest candidates that do not exist in `cargo:rerun-if-changed`
    /// (default `false`: only existing candidates are listed, both when neither exists). With
    /// `true`, creating a `JuliaArtifacts.toml` next to an `Artifacts.toml` is noticed, at the
    /// price of a rerun and recompile on every build while it is absent.
    pub fn watch_absent(mut self, watch: bool) -> Self {
        self.watch_absent = watch;
        self
    }

    /// Writes `OUT_DIR/<file_name>` with a `pub mod` of constants per artifact; include it with
    /// `include!(concat!(env!("OUT_DIR"), "/<file_name>"));`.
    pub fn constants(mut self, file_name: impl Into<String>) -> Self {
        self.constants = Some(file_name.into());
        self
    }

    /// The Overrides.toml named in hints for artifacts without downloads (default:
    /// [`clima_artifact_manifest::validate::default_overrides_file`]).
    pub fn overrides_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.overrides_file = Some(path.into());
        self
    }

    /// Runs against the process environment, printing directives on stdout.
    pub fn run(&self) -> Result<Validated, BuildError> {
        let stdout = io::stdout();
        let mut lock = stdout.lock();
        self.run_with(&ProcessEnv, &mut lock)
    }

    /// Runs and panics with every error on failure: the way a build script reports failure.
    pub fn run_or_panic(&self) -> Validated {
        match self.run() {
            Ok(v) => v,
            Err(e) => panic!("clima-artifact-build: {e}"),
        }
    }

    /// Runs and exits with status 1 on failure, after printing the errors on stderr (a shorter
    /// cargo message than a panic).
    pub fn run_or_exit(&self) -> Validated {
        match self.run() {
            Ok(v) => v,
            Err(e) => {
                eprintln!("error: clima-artifact-build: {e}");
                std::process::exit(1);
            }
        }
    }

    /// The testable core: reads variables from `env` and writes cargo directives to `out`.
    pub fn run_with(&self, env: &dyn Env, out: &mut dyn Write) -> Result<Validated, BuildError> {
        let dir = match (&self.manifest_dir, env.var("CARGO_MANIFEST_DIR")) {
            (Some(d), _) => d.clone(),
            (None, Some(d)) => PathBuf::from(d),
            (None, None) => return Err(BuildError::NoManifestDir),
        };
        let candidates = Manifest::candidates(&dir);
        let any_exists = candidates.iter().any(|c| c.is_file());
        for candidate in &candidates {
            if self.watch_absent || !any_exists || candidate.is_file() {
                writeln!(out, "cargo:rerun-if-changed={}", candidate.display())?;
            }
        }
        let explicit = self.manifest_path.as_ref().map(|p| dir.join(p));
        if let Some(p) = &explicit {
            writeln!(out, "cargo:rerun-if-changed={}", p.display())?;
        }
        for var in WATCHED_ENV_VARS {
            writeln!(out, "cargo:rerun-if-env-changed={var}")?;
        }
        let slow_debug = dev_profile::check(env, &dir);
        if env.var("OPT_LEVEL").as_deref() == Some("0") {
            // Adding the profile block to the root manifest must rerun the check.
            let root = dev_profile::root_manifest(&dir);
            writeln!(out, "cargo:rerun-if-changed={}", root.display())?;
        }

        let path = match explicit {
            Some(p) => p,
            None => Manifest::find_in_dir(&dir).map_err(|e| fail(out, vec![e]))?,
        };
        let manifest = Manifest::load_all(&path).map_err(|errors| fail(out, errors))?;

        let overrides_file = self
            .overrides_file
            .clone()
            .unwrap_or_else(|| overrides_file_from(env));
        let mut warnings = validate_with(&manifest, &overrides_file);
        let recipes = check_recipes(&manifest, &path, &mut warnings);
        for w in &warnings {
            let line = w.line.map(|l| format!(":{l}")).unwrap_or_default();
            let artifact = w
                .artifact
                .as_ref()
                .map(|a| format!("artifact `{a}`: "))
                .unwrap_or_default();
            directive(
                out,
                "warning",
                &format!("{}{line}: {artifact}{}", path.display(), w.message),
            )?;
        }
        // Not a finding about the manifest: never counted by `deny_warnings`.
        for line in slow_debug.iter().flat_map(dev_profile::warnings) {
            directive(out, "warning", &line)?;
        }
        let deny = self.deny_warnings
            || env
                .var(DENY_WARNINGS_ENV)
                .is_some_and(|v| !matches!(v.trim(), "" | "0" | "false"));
        if deny && !warnings.is_empty() {
            return Err(BuildError::DeniedWarnings {
                path,
                count: warnings.len(),
            });
        }

        let constants = match &self.constants {
            Some(file_name) => {
                let out_dir = env.var("OUT_DIR").ok_or_else(|| {
                    BuildError::Io(io::Error::other(
                        "OUT_DIR is not set; constants can only be generated from a build script",
                    ))
                })?;
                let target = Path::new(&out_dir).join(file_name);
                let code = generate_constants(&manifest);
                if std::fs::read_to_string(&target).ok().as_deref() != Some(code.as_str()) {
                    std::fs::write(&target, code)?;
                }
                Some(target)
            }
            None => None,
        };
        Ok(Validated {
            manifest,
            warnings,
            constants,
            recipes,
        })
    }
}

/// The manifest key naming an artifact's recipe folder (relative to the manifest's folder).
pub const RECIPE_KEY: &str = clima_artifact_manifest::metadata::RECIPE;

/// The artifacts with a recipe, and warnings for downloadable artifacts with neither a recipe
/// nor a `source`, and for recipe folders without their `recipe` or `README.md`.
fn check_recipes(
    manifest: &Manifest,
    path: &Path,
    warnings: &mut Vec<Warning>,
) -> Vec<(String, PathBuf)> {
    let base = path.parent().unwrap_or(Path::new("."));
    let mut recipes = Vec::new();
    for (name, entry) in manifest.artifacts() {
        let variants = match entry {
            ArtifactEntry::Single(v) => std::slice::from_ref(v),
            ArtifactEntry::PlatformSpecific(vs) => vs.as_slice(),
        };
        for v in variants {
            let mut warn = |message: String| {
                warnings.push(Warning {
                    line: Some(v.line),
                    artifact: Some(name.clone()),
                    message,
                })
            };
            let Some(key) = v.metadata.get(RECIPE_KEY) else {
                if !v.downloads.is_empty()
                    && !v
                        .metadata
                        .contains_key(clima_artifact_manifest::metadata::SOURCE)
                {
                    warn(format!(
                        "has a download but neither a `{RECIPE_KEY}` nor a `source` key, so \
                         nothing says how its data can be made again: add `source = \"<URL of \
                         the original data>\"`, or a recipe (`clima-artifacts new {name}`, then \
                         `clima-artifacts create --recipe artifacts/{name}`)"
                    ));
                }
                continue;
            };
            let dir = base.join(key);
            let missing: Vec<&str> = ["recipe", "README.md"]
                .into_iter()
                .filter(|f| !dir.join(f).is_file())
                .collect();
            if !missing.is_empty() {
                warn(format!(
                    "its `{RECIPE_KEY} = \"{key}\"` names `{}`, which has no {}: restore it, or \
                     fix the key (`clima-artifacts new {name}` writes templates)",
                    dir.display(),
                    missing
                        .iter()
                        .map(|f| format!("`{f}`"))
                        .collect::<Vec<_>>()
                        .join(" or ")
                ));
            }
            if !recipes.iter().any(|(n, _)| n == name) {
                recipes.push((name.clone(), dir));
            }
        }
    }
    recipes
}

/// Prints errors as warnings (cargo shows those even when the script then fails) and wraps them.
fn fail(out: &mut dyn Write, errors: Vec<ManifestError>) -> BuildError {
    for e in &errors {
        if let Err(io) = directive(out, "warning", &format!("error: {e}")) {
            return BuildError::Io(io);
        }
    }
    BuildError::Manifest(errors)
}

/// One `cargo:<key>=<value>` line; newlines in the value become separate directives' worth of
/// spaces, since a directive ends at the line end.
fn directive(out: &mut dyn Write, key: &str, value: &str) -> io::Result<()> {
    let one_line = value.replace(['\r', '\n'], " ");
    writeln!(out, "cargo:{key}={one_line}")
}

/// `artifacts/Overrides.toml` in the first `CLIMA_ARTIFACTS_DEPOT_PATH` entry, else the default.
fn overrides_file_from(env: &dyn Env) -> PathBuf {
    match env.var(vars::DEPOT_PATH) {
        Some(v) => match std::env::split_paths(&v).find(|p| !p.as_os_str().is_empty()) {
            Some(depot) => clima_artifact_manifest::layout::overrides_file(&depot),
            None => clima_artifact_manifest::validate::default_overrides_file(),
        },
        None => clima_artifact_manifest::validate::default_overrides_file(),
    }
}

/// Rust source with one module per artifact: `NAME` and, for `[name]` tables, `GIT_TREE_SHA1`
/// and `LAZY`; plus `ALL`, every name in file order.
pub fn generate_constants(manifest: &Manifest) -> String {
    let mut s = String::from(
        "// Generated by clima-artifact-build from the artifacts manifest. Do not edit.\n\
         /// Artifacts declared in the manifest.\n\
         #[allow(dead_code)]\n\
         pub mod artifacts {\n",
    );
    s.push_str(&format!(
        "    /// Every artifact name, in file order.\n    pub const ALL: &[&str] = &[{}];\n",
        manifest
            .names()
            .map(|n| format!("{n:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let mut used = std::collections::BTreeSet::new();
    for (name, entry) in manifest.artifacts() {
        let mut ident = rust_ident(name);
        while !used.insert(ident.clone()) {
            ident.push('_');
        }
        s.push_str(&format!(
            "    /// Artifact `{}`.\n    pub mod {ident} {{\n",
            name.replace('`', "'")
        ));
        s.push_str(&format!("        /// The name to pass to `clima_artifact!`.\n        pub const NAME: &str = {name:?};\n"));
        match entry {
            ArtifactEntry::Single(v) => {
                s.push_str(&format!(
                    "        /// The git tree SHA-1 of its content.\n        pub const GIT_TREE_SHA1: &str = \"{}\";\n",
                    v.git_tree_sha1
                ));
                s.push_str(&format!(
                    "        /// Whether it is installed only on first use.\n        pub const LAZY: bool = {};\n",
                    v.lazy
                ));
                s.push_str(&format!(
                    "        /// Its recipe folder, relative to the manifest (`recipe` key).\n        pub const RECIPE: Option<&str> = {};\n",
                    match v.metadata.get(RECIPE_KEY) {
                        Some(r) => format!("Some({r:?})"),
                        None => "None".to_owned(),
                    }
                ));
            }
            ArtifactEntry::PlatformSpecific(vs) => {
                s.push_str(&format!(
                    "        /// How many platform variants the manifest lists.\n        pub const PLATFORM_VARIANTS: usize = {};\n",
                    vs.len()
                ));
            }
        }
        s.push_str("    }\n");
    }
    s.push_str("}\n");
    s
}

/// A lower-case Rust identifier for an artifact name (`clm_data_0.9x1.25` -> `clm_data_0_9x1_25`).
fn rust_ident(name: &str) -> String {
    let mut id: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    if id.is_empty() || id.starts_with(|c: char| c.is_ascii_digit()) {
        id.insert(0, '_');
    }
    const KEYWORDS: [&str; 38] = [
        "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum",
        "extern", "false", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move",
        "mut", "pub", "ref", "return", "self", "static", "struct", "super", "trait", "true",
        "type", "unsafe", "use", "where", "while", "gen",
    ];
    if KEYWORDS.contains(&id.as_str()) || id == "_" {
        id.push('_');
    }
    id
}

/// Validates the crate's manifest from `build.rs`; panics with every error (that fails the
/// build) and prints warnings as `cargo:warning=`.
pub fn validate() -> Validated {
    Builder::new().run_or_panic()
}

/// Like [`validate`], but exits with status 1 instead of panicking.
pub fn validate_or_exit() -> Validated {
    Builder::new().run_or_exit()
}

#[cfg(test)]
mod tests;
