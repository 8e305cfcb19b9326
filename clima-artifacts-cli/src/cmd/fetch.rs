//! `fetch`: installs artifacts ahead of time, several at once, one progress line each.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Instant;

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
    seconds: f64,
    error: Option<String>,
}

/// Entry point of `fetch`.
pub fn run(args: FetchArgs) -> CliResult {
    let manifest = cmd::load_manifest(args.manifest.manifest.as_deref())?;
    if args.names.is_empty() && !args.all {
        return Err(CliError::usage(
            "name the artifacts to fetch, or pass --all (add --include-lazy for lazy ones too)",
        ));
    }
    cmd::check_names(&manifest, &args.names)?;
    let mut jobs = Vec::new();
    // A broken entry cannot be fetched: with --all it fails the command.
    if args.all
        && let Some((name, errors)) = manifest.broken.first()
    {
        return Err(CliError::usage(format!(
            "artifact `{name}` cannot be fetched: {}",
            errors[0]
        )));
    }
    if args.all {
        for name in manifest.names() {
            let variant = match cmd::select_for(&manifest, name, args.platform.platform.as_ref()) {
                Ok(v) => v,
                // Another platform's artifact: nothing to fetch here.
                Err(_) => continue,
            };
            if variant.lazy && !args.include_lazy {
                continue;
            }
            jobs.push((name.to_string(), variant.clone()));
        }
    } else {
        for name in &args.names {
            jobs.push((
                name.clone(),
                cmd::select_for(&manifest, name, args.platform.platform.as_ref())?.clone(),
            ));
        }
    }
    let mut config = depots::config()?;
    // An explicit fetch is how a user says "yes, download it": no size limit here
    // (CLIMA_ARTIFACTS_MAX_DOWNLOAD_SIZE limits what a model downloads on first use).
    config.max_download_size = None;
    // On a terminal the runtime's download bars become lines of this display, next to one
    // status line per artifact; in a log, plain lines; with --json, warnings only.
    config.progress = progress::report_to_user(args.json);
    let multi = progress::multi();

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
                    let start = Instant::now();
                    let outcome = ensure_variant(name, variant, &manifest.path, &config);
                    let seconds = start.elapsed().as_secs_f64();
                    let mut f = Fetched {
                        name: name.clone(),
                        git_tree_sha1: variant.git_tree_sha1.to_hex(),
                        status: "failed",
                        path: None,
                        url: None,
                        bytes: None,
                        seconds,
                        error: None,
                    };
                    // With --all, an entry without downloads is not a failure (Julia's
                    // select_downloadable_artifacts leaves such entries out): it is reported
                    // with the override line to add.
                    let outcome = match outcome {
                        Err(e @ clima_artifact_runtime::Error::NoDownloads { .. }) if args.all => {
                            f.status = "needs_override";
                            f.error = Some(e.to_string());
                            bar.finish_with_message(format!("{name}: needs an override"));
                            if let Ok(mut r) = results.lock() {
                                r.push((index, f));
                            }
                            continue;
                        }
                        other => other,
                    };
                    match outcome {
                        Ok(installed) => {
                            f.path = Some(installed.path);
                            match installed.origin {
                                Origin::Override { .. } => f.status = "overridden",
                                Origin::Depot => f.status = "already_installed",
                                Origin::Downloaded {
                                    url,
                                    bytes,
                                    seconds,
                                } => {
                                    f.status = "downloaded";
                                    f.url = Some(url);
                                    f.bytes = Some(bytes);
                                    f.seconds = seconds;
                                }
                            }
                            bar.finish_with_message(format!(
                                "{name}: {}",
                                f.status.replace('_', " ")
                            ));
                        }
                        Err(e) => {
                            f.error = Some(e.to_string());
                            bar.finish_with_message(format!("{name}: failed"));
                        }
                    }
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
    let failed: Vec<&Fetched> = results.iter().filter(|f| f.status == "failed").collect();
    let needs_override: Vec<&Fetched> = results
        .iter()
        .filter(|f| f.status == "needs_override")
        .collect();
    if failed.len() < results.len() {
        // Lets `gc` know this manifest's artifacts are in use.
        depots::record_usage(&config, &manifest.path);
    }

    if args.json {
        cmd::print_json(&results)?;
    } else {
        if results.is_empty() {
            println!(
                "nothing to fetch (every artifact is lazy or for another platform; try --include-lazy)"
            );
        }
        for f in &results {
            match (&f.path, &f.error) {
                (Some(path), _) => {
                    let extra = match (f.bytes, &f.url) {
                        (Some(b), Some(u)) => {
                            format!(
                                " ({} from {u} in {:.1} s)",
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
                (None, _) => println!("{:<24} failed", f.name),
            }
        }
    }
    for f in &needs_override {
        eprintln!(
            "warning: {}",
            f.error.as_deref().unwrap_or("needs an override")
        );
    }
    if failed.is_empty() {
        return Ok(());
    }
    Err(CliError::failure(format!(
        "{} of {} artifact(s) could not be installed:\n{}",
        failed.len(),
        results.len(),
        failed
            .iter()
            .map(|f| format!("  {}: {}", f.name, f.error.as_deref().unwrap_or("")))
            .collect::<Vec<_>>()
            .join("\n")
    )))
}
