//! Command-line syntax (clap derive). Each subcommand's behaviour lives in [`crate::cmd`].

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  the command ran and found or hit a problem (verify mismatch, failed download, ...)
  2  bad usage or bad input (unknown flag or artifact, missing/malformed manifest, missing path)

Environment: `clima-artifacts --help` lists every environment variable the tools read";

/// The exit codes and every environment variable (from `clima-artifact-vars`), for `--help`.
fn long_help() -> String {
    format!(
        "{}\n\n{}",
        EXIT_CODES
            .split("\n\nEnvironment:")
            .next()
            .unwrap_or(EXIT_CODES),
        clima_artifact_vars::help_text()
    )
}

/// Manage Julia-compatible input datasets ("artifacts"): create, fetch, verify, override, list,
/// clean up, and report on them.
#[derive(Debug, Parser)]
#[command(name = "clima-artifacts", version, after_long_help = long_help(), after_help = EXIT_CODES)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
    /// Also print details of how the work went (redirects followed, refused ranges, usage
    /// records that could not be written) as `clima-artifacts: detail: ...` lines.
    #[arg(long, short = 'v', global = true)]
    pub verbose: bool,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Make an artifact from a folder (or a recipe's output): tree hash, deterministic .tar.gz,
    /// sha256, manifest entry.
    Create(Box<CreateArgs>),
    /// Scaffold `artifacts/NAME/` next to the manifest: a recipe template and a README template.
    New(NewArgs),
    /// Run artifacts' recipes into a temp folder and compare the result with the pinned content.
    Reproduce(ReproduceArgs),
    /// Print the git tree hash of a folder (the artifact's `git-tree-sha1`).
    Hash(HashArgs),
    /// Install artifacts ahead of time (e.g. on a login node before an offline job).
    Fetch(FetchArgs),
    /// Re-hash installed artifacts and report any whose content changed (exit 1 if any).
    Verify(VerifyArgs),
    /// Show each artifact of a manifest: lazy, downloadable, installed where, overridden, size.
    #[command(visible_alias = "status")]
    List(ListArgs),
    /// Point an artifact at a folder on this machine (Overrides.toml), or remove/list overrides.
    #[command(subcommand)]
    Override(OverrideCommand),
    /// Remove installed artifacts that no recorded manifest references any more.
    Gc(GcArgs),
    /// Render a run's provenance report (JSON written by the runtime) as Markdown, BibTeX or JSON.
    Report(ReportArgs),
    /// Upload a tarball made by `create` to storage, or publish an artifact to an archive
    /// (CaltechDATA, Zenodo) with a DOI, and record its URL and sha256 in the manifest.
    Publish(PublishArgs),
    /// Push a run folder to storage, or pull it back (checkpoints and output artifacts).
    #[command(subcommand)]
    Sync(SyncCommand),
    /// Say which depots, TLS roots, proxies and limits downloads use here (for support).
    Doctor(DoctorArgs),
    /// Set or remove provenance keys (license, citation, doi, ...) of existing entries, keeping
    /// the rest of the manifest as it is; no data needed.
    Annotate(AnnotateArgs),
    /// Survey every Artifacts.toml under some folders: per content hash its names, manifests,
    /// downloads, license, citation, README, recipe and problems (reads manifests only).
    Census(CensusArgs),
    /// Install every downloadable artifact of some manifests into one depot (a cluster's shared
    /// depot), several at once; list the overrides the others need.
    Mirror(MirrorArgs),
    /// Print a shell completion script: `clima-artifacts completions bash > ~/.local/share/bash-completion/completions/clima-artifacts`.
    Completions(CompletionsArgs),
}

/// `doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `annotate`.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
pub struct AnnotateArgs {
    /// The artifacts whose entry to change (each a `[name]` entry of the manifest).
    #[arg(value_name = "NAME", required = true)]
    pub names: Vec<String>,
    /// Set a key: `license=CC-BY-4.0`, `doi=10.5194/essd-13-4349-2021`, `citation=...`
    /// (description, version, license, acknowledgement, citation, doi, bibtex, source,
    /// maintainer, recipe); repeatable. A license must be an SPDX expression, a DOI well-formed.
    #[arg(long, value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Remove a key; repeatable.
    #[arg(long, value_name = "KEY")]
    pub unset: Vec<String>,
    #[command(flatten)]
    pub manifest: ManifestArg,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `census`.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
pub struct CensusArgs {
    /// Folders to search (or manifest files): every `Artifacts.toml`, `JuliaArtifacts.toml` and
    /// `*Artifacts.toml` below them, skipping `.git`, `target` and hidden folders and never
    /// following a symlink.
    #[arg(value_name = "PATH", required = true)]
    pub paths: Vec<PathBuf>,
    /// Also say where each artifact is installed in this depot (repeatable).
    #[arg(long, value_name = "DIR")]
    pub depot: Vec<PathBuf>,
    /// Print the result as JSON (`{"manifests", "artifacts", "summary"}`).
    #[arg(long)]
    pub json: bool,
}

/// `mirror`.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
pub struct MirrorArgs {
    /// The manifests whose artifacts to install (this machine's variants, lazy ones included).
    #[arg(value_name = "MANIFEST", required = true)]
    pub manifests: Vec<PathBuf>,
    /// The depot to install into (it must exist); only it is searched and written.
    #[arg(long, value_name = "DIR")]
    pub depot: PathBuf,
    /// How many artifacts to install at once (1 to 64; Julia's Pkg uses 8).
    #[arg(long, short = 'j', default_value_t = 8)]
    pub jobs: u64,
    /// Set an override in this mirror's section of the depot's Overrides.toml: an artifact
    /// name (or git-tree-sha1) of the manifests, `=`, a folder (repeatable). Given at all, the
    /// section holds exactly these (and --overrides-from's); not given, it is left as it is.
    #[arg(long = "override", value_name = "NAME=PATH")]
    pub overrides: Vec<String>,
    /// Read the overrides from a TOML file of `NAME = "/path"` lines (relative paths are
    /// relative to the file); an empty file removes the section.
    #[arg(long, value_name = "FILE")]
    pub overrides_from: Option<PathBuf>,
    /// The id of this mirror's section of Overrides.toml (default: made from the manifests'
    /// paths); two mirrors of one depot need different ids.
    #[arg(long, value_name = "ID")]
    pub id: Option<String>,
    /// Hash the folder of every overridden artifact and warn when it does not hold the content
    /// the manifests name (remembered by each folder's size and time, so a later run hashes
    /// only folders that changed).
    #[arg(long)]
    pub verify_overrides: bool,
    #[command(flatten)]
    pub platform: PlatformArg,
    /// Print the summary as JSON (the per-artifact lines go to stderr).
    #[arg(long)]
    pub json: bool,
}

/// `completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Where the manifest is: `--manifest PATH`, else `JuliaArtifacts.toml`/`Artifacts.toml` found
/// from the current folder upwards.
#[derive(Debug, Args, Clone)]
pub struct ManifestArg {
    /// The Artifacts.toml to use (default: JuliaArtifacts.toml or Artifacts.toml in the current
    /// folder or the nearest parent folder that has one, up to the project root).
    #[arg(long, short = 'm', value_name = "PATH")]
    pub manifest: Option<PathBuf>,
}

/// `create`.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
pub struct CreateArgs {
    /// The folder holding the artifact's content (asked for with --guided if omitted).
    #[arg(value_name = "DIR", required_unless_present_any = ["guided", "recipe"], conflicts_with = "recipe")]
    pub dir: Option<PathBuf>,
    /// Artifact name in the manifest (default with --recipe: the recipe folder's name).
    #[arg(long, short = 'n', required_unless_present_any = ["guided", "recipe"])]
    pub name: Option<String>,
    /// Make the content by running the recipe of this folder (`artifacts/<name>`, inside the
    /// manifest's folder): its output plus its README.md, recorded as `recipe = "..."`.
    #[arg(long, value_name = "FOLDER", conflicts_with = "external")]
    pub recipe: Option<PathBuf>,
    /// With --recipe: kill the recipe (its whole process group) after this long: `90s`, `30m`,
    /// `2h` (default: no limit).
    #[arg(long, value_name = "DURATION", requires = "recipe", value_parser = parse_delay)]
    pub timeout: Option<std::time::Duration>,
    /// The Artifacts.toml to add the entry to (default: the one found from the current folder
    /// upwards, as every command does; with none found, `Artifacts.toml` here, created).
    #[arg(long, short = 'm', value_name = "PATH")]
    pub manifest: Option<PathBuf>,
    /// URL the tarball will be downloadable from (written as the entry's download url).
    #[arg(long)]
    pub url: Option<String>,
    /// Where to write the tarball (default: `<NAME>.tar.gz` in the current folder); a name
    /// ending in `.tar.zst` gives zstd members (Julia's Pkg unpacks those from 1.13 on).
    #[arg(long, value_name = "PATH")]
    pub tarball_out: Option<PathBuf>,
    /// Write a classic single-stream tarball instead of a seekable one (independent members
    /// and an index, which every tar reader unpacks the same: docs/seekable.md).
    #[arg(long, conflicts_with = "external")]
    pub classic: bool,
    /// Mark the artifact `lazy = true` (installed on first use, skipped by `fetch --all`).
    #[arg(long)]
    pub lazy: bool,
    /// Data too large to distribute: tree hash only, no tarball, no download section; prints the
    /// Overrides.toml line for the cluster's admins.
    #[arg(long, conflicts_with_all = ["url", "tarball_out"])]
    pub external: bool,
    /// Ask for each setting interactively (line-based prompts; works with piped answers too).
    #[arg(long)]
    pub guided: bool,
    /// SPDX license expression, e.g. CC-BY-4.0.
    #[arg(long)]
    pub license: Option<String>,
    /// Human-readable citation.
    #[arg(long)]
    pub citation: Option<String>,
    /// One line saying what the dataset is.
    #[arg(long)]
    pub description: Option<String>,
    /// DOI of the dataset or its paper, e.g. 10.5194/essd-13-4349-2021.
    #[arg(long)]
    pub doi: Option<String>,
    /// The dataset's own version or release, e.g. `v2.1` (the manifest's `version` key).
    #[arg(long = "version", id = "dataset_version", value_name = "VERSION")]
    pub dataset_version: Option<String>,
    /// Text to paste into a paper's acknowledgements.
    #[arg(long)]
    pub acknowledgement: Option<String>,
    /// URL of the original data.
    #[arg(long, value_name = "URL")]
    pub source: Option<String>,
    /// Who to contact about this artifact (also the author of generated BibTeX entries).
    #[arg(long)]
    pub maintainer: Option<String>,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `new`.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
pub struct NewArgs {
    /// Name of the artifact (and of its folder `artifacts/NAME`, made next to the manifest; with
    /// no manifest found, in the current folder).
    pub name: String,
    #[command(flatten)]
    pub manifest: ManifestArg,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `reproduce`.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["names", "all"])))]
pub struct ReproduceArgs {
    /// Artifacts whose recipe to run.
    #[arg(value_name = "NAMES", conflicts_with = "all")]
    pub names: Vec<String>,
    /// Every artifact of the manifest that has a `recipe` key.
    #[arg(long)]
    pub all: bool,
    /// Kill a recipe (its whole process group) after this long: `90s`, `30m`, `2h` (default:
    /// no limit).
    #[arg(long, value_name = "DURATION", value_parser = parse_delay)]
    pub timeout: Option<std::time::Duration>,
    #[command(flatten)]
    pub manifest: ManifestArg,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `hash`.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
pub struct HashArgs {
    /// The folder to hash (`.git` is skipped, empty folders do not count, as in git).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// Also compute the git tree SHA-256 (`git-tree-sha256`, git's SHA-256 object format) in
    /// the same pass, and print both as manifest lines.
    #[arg(long)]
    pub sha256: bool,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `fetch`.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
pub struct FetchArgs {
    /// Artifacts to install (lazy ones included when named).
    #[arg(value_name = "NAMES", conflicts_with = "all")]
    pub names: Vec<String>,
    /// Install every non-lazy artifact of the manifest.
    #[arg(long)]
    pub all: bool,
    /// With --all, also install lazy artifacts.
    #[arg(long, requires = "all")]
    pub include_lazy: bool,
    /// Fetch only these files (or folders: every file below) of the one artifact named, from
    /// its seekable tarball by byte ranges, into the depot's partial folder; the whole artifact
    /// when it is not seekable or its server serves no ranges.
    #[arg(long, value_name = "PATH", num_args = 1.., conflicts_with = "all")]
    pub only: Vec<String>,
    /// How many artifacts to install at once.
    #[arg(long, short = 'j', default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub jobs: u16,
    #[command(flatten)]
    pub manifest: ManifestArg,
    #[command(flatten)]
    pub platform: PlatformArg,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `--platform TRIPLET`: act for another host.
#[derive(Debug, Args, Clone)]
pub struct PlatformArg {
    /// Pick `[[name]]` variants for this Julia platform triplet instead of this machine, e.g.
    /// `aarch64-linux-gnu-libgfortran5` (a login node fetching for its compute nodes).
    #[arg(long, value_name = "TRIPLET", value_parser = parse_platform)]
    pub platform: Option<clima_artifact_manifest::Platform>,
}

fn parse_platform(text: &str) -> Result<clima_artifact_manifest::Platform, String> {
    clima_artifact_manifest::Platform::parse_triplet(text)
}

/// `verify`.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["names", "all"])))]
pub struct VerifyArgs {
    /// Artifacts to verify.
    #[arg(value_name = "NAMES", conflicts_with = "all")]
    pub names: Vec<String>,
    /// Verify every artifact of the manifest that is installed.
    #[arg(long)]
    pub all: bool,
    /// Also hash overridden folders (may be slow: they can be very large).
    #[arg(long)]
    pub include_overrides: bool,
    #[command(flatten)]
    pub manifest: ManifestArg,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `list` / `status`.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
pub struct ListArgs {
    #[command(flatten)]
    pub manifest: ManifestArg,
    #[command(flatten)]
    pub platform: PlatformArg,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `override ...`.
#[derive(Debug, Subcommand)]
pub enum OverrideCommand {
    /// Use PATH as the content of artifact NAME on this machine (first writable depot's Overrides.toml).
    Set(OverrideSetArgs),
    /// Remove the override of NAME from the first writable depot's Overrides.toml.
    Unset(OverrideUnsetArgs),
    /// List the overrides of every depot (names from the manifest or the `# name` comments).
    List(OverrideListArgs),
}

/// `override set`.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
pub struct OverrideSetArgs {
    /// Artifact name in the manifest, or its 40-hex git-tree-sha1.
    pub name: String,
    /// Folder with the artifact's content (made absolute).
    pub path: PathBuf,
    /// Hash PATH and refuse unless it matches the manifest's git-tree-sha1.
    #[arg(long)]
    pub verify: bool,
    #[command(flatten)]
    pub manifest: ManifestArg,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `override unset`.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
pub struct OverrideUnsetArgs {
    /// Artifact name in the manifest, or its 40-hex git-tree-sha1.
    pub name: String,
    #[command(flatten)]
    pub manifest: ManifestArg,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `override list`.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
pub struct OverrideListArgs {
    /// Manifest used to name hashes (default: one found from the current folder upwards, if any).
    #[arg(long, short = 'm', value_name = "PATH")]
    pub manifest: Option<PathBuf>,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `gc`.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
pub struct GcArgs {
    /// Only print what would be removed.
    #[arg(long)]
    pub dry_run: bool,
    /// Also keep everything referenced by these manifests (in addition to the recorded ones).
    #[arg(long, short = 'm', value_name = "PATH")]
    pub manifest: Vec<PathBuf>,
    /// Proceed even when no live manifest is recorded (which would remove every installed artifact).
    #[arg(long)]
    pub force: bool,
    /// How long an unreferenced artifact stays marked as orphaned (in the depot's
    /// `logs/orphaned.toml`, as Julia's Pkg.gc does) before it is deleted: `7d` (default),
    /// `12h`, `30m`, `90s`, or `0` to delete at once.
    #[arg(long, value_name = "DURATION", default_value = "7d", value_parser = parse_delay)]
    pub delay: std::time::Duration,
    /// Collect every configured depot, not only the first (a shared cluster depot further down
    /// the path is otherwise never collected by an ordinary user's gc).
    #[arg(long)]
    pub all_depots: bool,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `7d`, `12h`, `30m`, `90s`, `90` (seconds) or `0`.
fn parse_delay(text: &str) -> Result<std::time::Duration, String> {
    let t = text.trim();
    let (digits, unit) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&t[..i], c.to_ascii_lowercase()),
        _ => (t, 's'),
    };
    let n: f64 = digits
        .parse()
        .ok()
        .filter(|n: &f64| n.is_finite() && *n >= 0.0)
        .ok_or_else(|| format!("`{text}` is not a duration; use e.g. 7d, 12h, 30m, 90s or 0"))?;
    let secs = match unit {
        'd' => n * 86_400.0,
        'h' => n * 3600.0,
        'm' => n * 60.0,
        's' => n,
        _ => return Err(format!("`{text}`: the unit must be d, h, m or s")),
    };
    Ok(std::time::Duration::from_secs_f64(secs))
}

/// Output formats of `report`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    /// Markdown for people: datasets table, acknowledgements, references.
    Md,
    /// BibTeX with every citation, deduplicated.
    Bibtex,
    /// The JSON schema again (normalised).
    Json,
}

/// `report`.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
pub struct ReportArgs {
    /// A JSON report written by the runtime at the end of a run.
    #[arg(value_name = "FILE.json")]
    pub file: PathBuf,
    /// Output format.
    #[arg(long, short = 'f', value_enum, default_value_t = ReportFormat::Md)]
    pub format: ReportFormat,
    /// The same as `--format json` (every command that prints results takes `--json`).
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// Write to this file instead of stdout.
    #[arg(long, short = 'o', value_name = "PATH")]
    pub output: Option<PathBuf>,
}

/// `publish`.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
pub struct PublishArgs {
    /// With --to: the .tar.gz written by `create`. With --archive: the artifact's NAME.
    #[arg(value_name = "TARBALL|NAME")]
    pub target: PathBuf,
    /// Storage to upload to: a folder, `file:///path` or `s3://bucket/prefix` (S3 needs the `s3`
    /// build feature; endpoint and credentials from AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ...).
    #[arg(
        long,
        value_name = "STORAGE_URL",
        required_unless_present = "archive",
        conflicts_with = "archive"
    )]
    pub to: Option<String>,
    /// Publish to this InvenioRDM archive instead, as a record with a DOI:
    /// <https://data.caltech.edu>, <https://zenodo.org>, or a sandbox (token in
    /// CLIMA_ARTIFACTS_ARCHIVE_TOKEN, time bound of each exchange in
    /// CLIMA_ARTIFACTS_ARCHIVE_TIMEOUT; see docs/archive.md).
    #[arg(long, value_name = "URL")]
    pub archive: Option<String>,
    /// With --archive: stop before publishing and print the draft's address for review.
    #[arg(long, requires = "archive")]
    pub draft: bool,
    /// With --archive: record the archive's URL before the entry's other downloads (default:
    /// after them).
    #[arg(long, requires = "archive")]
    pub first: bool,
    /// With --archive: a creator of the record, "Family, Given" (or an organisation's name);
    /// repeatable; default: the entry's `maintainer`.
    #[arg(long, value_name = "NAME", requires = "archive")]
    pub creator: Vec<String>,
    /// With --archive: the tarball to upload (default: `NAME.tar.gz` next to the manifest or
    /// here, else packed from the installed copy).
    #[arg(long, value_name = "PATH", requires = "archive")]
    pub tarball: Option<PathBuf>,
    /// The URL the uploaded tarball is downloadable from (ending in `/`: the key is appended).
    /// Default: the storage's own URL (`file://` for folders); required for S3.
    #[arg(long, value_name = "URL", conflicts_with = "archive")]
    pub public_url: Option<String>,
    /// The Artifacts.toml whose entry gets the download (with --to: created if missing; with
    /// --archive: default, the one found from the current folder upwards).
    #[arg(
        long,
        short = 'm',
        value_name = "PATH",
        required_unless_present = "archive"
    )]
    pub manifest: Option<PathBuf>,
    /// Artifact name in the manifest (with --to).
    #[arg(
        long,
        short = 'n',
        required_unless_present = "archive",
        conflicts_with = "archive"
    )]
    pub name: Option<String>,
    /// Object key in the storage (default: the tarball's file name).
    #[arg(long, conflicts_with_all = ["by_hash", "archive"])]
    pub key: Option<String>,
    /// Store the tarball at `artifact/<git-tree-sha1>`, the layout of a Julia package server:
    /// a static host (nginx, S3) serving that folder or bucket is then an artifact mirror that
    /// Julia (`JULIA_PKG_SERVER`) and clima-artifacts (`CLIMA_ARTIFACTS_PKG_SERVER`) use
    /// before the manifest's URLs.
    #[arg(long, conflicts_with = "archive")]
    pub by_hash: bool,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `sync ...`.
#[derive(Debug, Subcommand)]
pub enum SyncCommand {
    /// Upload changed files of RUN_DIR (checkpoints and output artifacts) to STORAGE_URL.
    Push(SyncPushArgs),
    /// Download the latest checkpoint and the output artifacts; newer local files are kept.
    Pull(SyncPullArgs),
}

/// `sync push`.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
pub struct SyncPushArgs {
    #[command(flatten)]
    pub common: SyncArgs,
    /// This folder, inside RUN_DIR, is a checkpoint: it is sent even with --no-artifacts and
    /// becomes the latest checkpoint (the one `sync pull` restores).
    #[arg(long, value_name = "DIR")]
    pub checkpoint: Option<PathBuf>,
}

/// `sync pull`.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
pub struct SyncPullArgs {
    #[command(flatten)]
    pub common: SyncArgs,
}

/// What `sync push` and `sync pull` share.
#[derive(Debug, Args)]
pub struct SyncArgs {
    /// The run folder.
    #[arg(value_name = "RUN_DIR")]
    pub run_dir: PathBuf,
    /// A folder, `file:///path` or `s3://bucket/prefix`.
    #[arg(value_name = "STORAGE_URL")]
    pub storage_url: String,
    /// Move only checkpoints, no output artifacts (also CLIMA_SYNC_ARTIFACTS=0).
    #[arg(long)]
    pub no_artifacts: bool,
    /// Never move files matching this glob (repeatable; also CLIMA_SYNC_EXCLUDE, `:`-separated).
    #[arg(long, value_name = "GLOB")]
    pub exclude: Vec<String>,
    /// Warn when the sync takes longer than this many seconds (also CLIMA_SYNC_WARN_AFTER).
    #[arg(long, value_name = "SECONDS")]
    pub warn_after: Option<f64>,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}
