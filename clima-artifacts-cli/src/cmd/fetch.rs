//! `fetch`: installs artifacts ahead of time, several at once, one progress line each; when
//! some fail, one line each and one line per cause in the error (those that failed alike
//! share one).

use crate::progress::Ui;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Instant;

use clima_artifact_manifest::{ArtifactVariant, Manifest};
use clima_artifact_runtime::{Origin, ensure_variant};

use crate::args::FetchArgs;
use crate::cmd;
use crate::error::{CliError, CliResult};
use crate::{depots, progress};

/// One artifact's outcome, as printed with `--json`.
#[derive(Debug, serde::Serialize)]
struct Fetched {
    name: String,
    git_tree_sha1: String,
    /// `downloaded`, `already_installed`, `overridden`, `needs_override` (with --all: no
    /// download section and no override yet; a warning, not a failure) or `failed`.
    status: &'static str,
    path: Option<PathBuf>,
    url: Option<String>,
    bytes: Option<u64>,
    /// Of `bytes`, those copied from files the depot held rather than received (only when
    /// some were: a seekable artifact's unchanged files, docs/downloads.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    reused_bytes: Option<u64>,
    seconds: f64,
    error: Option<String>,
    /// What failed without the artifact's name and URLs: the same for artifacts that failed
    /// alike, which the error says once.
    cause: Option<String>,
    /// The error in one line, for the line of this artifact.
    #[serde(skip)]
    error_line: Option<String>,
}

/// Entry point of `fetch`.
pub fn run(args: FetchArgs, ui: &Ui) -> CliResult {
    let manifest = cmd::load_manifest(args.manifest.manifest.as_deref())?;
    if !args.only.is_empty() {
        return super::fetch_only::run(&args, &manifest, install_config(ui, args.json)?.0);
    }
    let jobs = jobs(&manifest, &args)?;
    let (config, reports) = install_config(ui, args.json)?;
    let multi = ui.multi();

    let queue = Mutex::new(jobs.iter().enumerate());
    let results: Mutex<Vec<(usize, Fetched)>> = Mutex::new(Vec::new());
    let workers = usize::from(args.jobs).min(jobs.len()).max(1);
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                loop {
                    let next = queue.lock().map(|mut q| q.next()).unwrap_or(None);
                    let Some((index, (name, variant))) = next else {
                        break;
                    };
                    let bar = progress::spinner_in(&multi, &format!("{name}: installing"));
                    let f = fetch_one(name, variant, &manifest.path, &config, args.all);
                    let said = match f.status {
                        "needs_override" => "needs an override".to_owned(),
                        status => status.replace('_', " "),
                    };
                    bar.finish_with_message(format!("{name}: {said}"));
                    if let Ok(mut r) = results.lock() {
                        r.push((index, f));
                    }
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_default();
    results.sort_by_key(|(i, _)| *i);
    let results: Vec<Fetched> = results.into_iter().map(|(_, f)| f).collect();
    if results.iter().any(|f| f.status != "failed") {
        // Lets `gc` know this manifest's artifacts are in use.
        depots::record_usage(&config, &manifest.path);
    }
    if args.json {
        cmd::print_json(&results)?;
    } else {
        print_results(&results);
    }
    for f in results.iter().filter(|f| f.status == "needs_override") {
        eprintln!(
            "warning: {}",
            f.error.as_deref().unwrap_or("needs an override")
        );
    }
    if let Some(line) = reports.held_back_line() {
        eprintln!("{line}");
    }
    let failed: Vec<(String, String)> = results
        .iter()
        .filter(|f| f.status == "failed")
        .map(|f| (f.name.clone(), f.cause.clone().unwrap_or_default()))
        .collect();
    let only = results.iter().filter(|f| f.status == "failed");
    match (failed.len(), only.filter_map(|f| f.error.as_deref()).next()) {
        (0, _) => return Ok(()),
        // One failure: its whole message, with the Overrides.toml line to add.
        (1, Some(error)) => {
            return Err(CliError::failure(format!(
                "1 of {} artifact(s) could not be installed:\n  {}: {error}",
                results.len(),
                failed[0].0
            )));
        }
        _ => {}
    }
    let mut lines = cmd::grouped_failures(&failed);
    lines.push(
        "  check the URLs, and the proxies and TLS roots (`clima-artifacts doctor`), or point \
         each at a folder holding it (`clima-artifacts override set NAME FOLDER`); `--json` \
         has each one's whole error"
            .to_owned(),
    );
    Err(CliError::failure(format!(
        "{} of {} artifact(s) could not be installed:\n{}",
        failed.len(),
        results.len(),
        lines.join("\n")
    )))
}

/// The runtime configuration of an explicit install (`fetch`, and `reproduce` getting the
/// pinned content to compare with): `quiet` is `--json`. Also how it reports, for the line of
/// the warnings held back at the end.
pub fn install_config(
    ui: &Ui,
    quiet: bool,
) -> CliResult<(clima_artifact_runtime::Config, progress::Reports)> {
    let mut config = depots::config()?;
    // An explicit fetch is how a user says "yes, download it": no size limit here
    // (CLIMA_ARTIFACTS_MAX_DOWNLOAD_SIZE limits what a model downloads on first use).
    config.max_download_size = None;
    // On a terminal the runtime's download bars become lines of this display, next to one
    // status line per artifact; in a log, plain lines; with --json, warnings only.
    let reports = ui.report_to_user(quiet);
    config.progress = reports.progress;
    config.net.reporting = reports.reporting.clone();
    Ok((config, reports))
}

/// The artifacts to fetch, each with its variant for the platform: the names given, or with
/// `--all` every artifact of the manifest for this platform (lazy ones with `--include-lazy`).
fn jobs(manifest: &Manifest, args: &FetchArgs) -> CliResult<Vec<(String, ArtifactVariant)>> {
    if args.names.is_empty() && !args.all {
        return Err(CliError::usage(
            "name the artifacts to fetch, or pass --all (add --include-lazy for lazy ones too)",
        ));
    }
    cmd::check_names(manifest, &args.names)?;
    let platform = args.platform.platform.as_ref();
    if !args.all {
        return args
            .names
            .iter()
            .map(|name| {
                Ok((
                    name.clone(),
                    cmd::select_for(manifest, name, platform)?.clone(),
                ))
            })
            .collect();
    }
    // A broken entry cannot be fetched: with --all it fails the command.
    if let Some((name, errors)) = manifest.broken().first() {
        return Err(CliError::usage(format!(
            "artifact `{name}` cannot be fetched: {}",
            errors[0]
        )));
    }
    let mut jobs = Vec::new();
    for name in manifest.names() {
        // Another platform's artifact: nothing to fetch here.
        let Ok(variant) = cmd::select_for(manifest, name, platform) else {
            continue;
        };
        if !variant.lazy || args.include_lazy {
            jobs.push((name.to_string(), variant.clone()));
        }
    }
    Ok(jobs)
}

/// Installs one artifact and says how it went. With `--all` (`all`), an entry without
/// downloads is not a failure (Julia's select_downloadable_artifacts leaves such entries out):
/// it is reported with the override line to add.
fn fetch_one(
    name: &str,
    variant: &ArtifactVariant,
    manifest: &std::path::Path,
    config: &clima_artifact_runtime::Config,
    all: bool,
) -> Fetched {
    let start = Instant::now();
    let outcome = ensure_variant(name, variant, manifest, config);
    let mut f = Fetched {
        name: name.to_owned(),
        git_tree_sha1: variant.git_tree_sha1.to_hex(),
        status: "failed",
        path: None,
        url: None,
        bytes: None,
        reused_bytes: None,
        seconds: start.elapsed().as_secs_f64(),
        error: None,
        cause: None,
        error_line: None,
    };
    match outcome {
        Err(e @ clima_artifact_runtime::Error::NoDownloads { .. }) if all => {
            f.status = "needs_override";
            f.error = Some(e.to_string());
        }
        Err(e) => {
            f.error = Some(e.to_string());
            f.cause = Some(e.cause());
            f.error_line = Some(e.one_line());
        }
        Ok(installed) => {
            f.path = Some(installed.path);
            match installed.origin {
                Origin::Override { .. } => f.status = "overridden",
                Origin::Depot => f.status = "already_installed",
                Origin::Downloaded {
                    url,
                    bytes,
                    seconds,
                    reused_bytes,
                    ..
                } => {
                    f.status = "downloaded";
                    f.url = Some(url);
                    f.bytes = Some(bytes);
                    f.reused_bytes = reused_bytes.filter(|n| *n > 0);
                    f.seconds = seconds;
                }
                // Only collective installs receive over MPI; `fetch` runs alone.
                Origin::Received {
                    url,
                    bytes,
                    seconds,
                    ..
                } => {
                    f.status = "received";
                    f.url = url;
                    f.bytes = Some(bytes);
                    f.seconds = seconds;
                }
            }
        }
    }
    f
}

/// The outcome of each artifact, one line each, for people.
fn print_results(results: &[Fetched]) {
    if results.is_empty() {
        println!(
            "nothing to fetch (every artifact is lazy or for another platform; try --include-lazy)"
        );
    }
    for f in results {
        match (&f.path, &f.error) {
            (Some(path), _) => {
                let extra = match (f.bytes, &f.url) {
                    (Some(b), Some(u)) => {
                        let copied = f.reused_bytes.map_or(String::new(), |r| {
                            format!(
                                "; {} of it copied from files the depot held",
                                depots::human_bytes(r)
                            )
                        });
                        format!(
                            " ({} from {u} in {:.1} s{copied})",
                            depots::human_bytes(b),
                            f.seconds
                        )
                    }
                    _ => String::new(),
                };
                println!(
                    "{:<24} {:<18} {}{extra}",
                    f.name,
                    f.status.replace('_', " "),
                    path.display()
                );
            }
            (None, _) if f.status == "needs_override" => {
                println!("{:<24} needs an override (no download section)", f.name)
            }
            (None, line) => println!(
                "{:<24} failed: {}",
                f.name,
                clima_artifact_fs::printable(
                    f.error_line.as_deref().or(line.as_deref()).unwrap_or("")
                )
            ),
        }
    }
}
