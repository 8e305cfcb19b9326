//! `mirror`: parses the arguments, runs [`clima_artifact_ops::mirror::mirror`], and prints one line per
//! artifact as it finishes, then the overrides still needed, the section written and the
//! totals; when installs failed, one line per cause (not per artifact) in the error.

use crate::progress::Ui;
use std::sync::Mutex;

use clima_artifact_fs::printable;
use clima_artifact_ops::mirror::{self, MirrorOptions, OverrideRequest, Status, Summary};
use clima_artifact_ops::override_check::Check;

use crate::args::MirrorArgs;
use crate::cmd;
use crate::depots;
use crate::error::{CliError, CliResult};

/// Entry point of `mirror`.
pub fn run(args: MirrorArgs, ui: &Ui) -> CliResult {
    let (jobs, warning) = mirror::clamp_jobs(args.jobs);
    if let Some(w) = warning {
        eprintln!("warning: {w}");
    }
    for m in &args.manifests {
        if !m.is_file() {
            return Err(CliError::usage(format!(
                "manifest `{}` does not exist or is not a file",
                m.display()
            )));
        }
    }
    let mut requests: Vec<OverrideRequest> = args
        .overrides
        .iter()
        .map(|s| OverrideRequest::parse(s))
        .collect::<clima_artifact_ops::Result<_>>()?;
    if let Some(file) = &args.overrides_from {
        requests.extend(OverrideRequest::load_file(file)?);
    }
    let given = !args.overrides.is_empty() || args.overrides_from.is_some();
    let mut config = ui.config()?;
    config.max_download_size = None;
    // Lock waits (another mirror, or a job, installing the same artifact) and retries are
    // shown; eight downloads' progress lines are not.
    let reports = ui.notices_only(args.json);
    config.progress = reports.progress;
    config.net.reporting = reports.reporting.clone();
    let options = MirrorOptions {
        manifests: args.manifests.clone(),
        depot: args.depot.clone(),
        jobs,
        platform: args
            .platform
            .platform
            .clone()
            .unwrap_or_else(clima_artifact_manifest::Platform::host),
        overrides: given.then_some(requests),
        section_id: args.id.clone(),
        verify_overrides: args.verify_overrides,
        config,
    };
    let out = Mutex::new(());
    let json = args.json;
    let summary = mirror::mirror(&options, &|o| {
        let _one_at_a_time = out.lock();
        let line = line_of(o);
        // In a log, one line per artifact as it finishes; with --json they go to stderr.
        if json {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    })?;
    if json {
        cmd::print_json(&summary)?;
    } else {
        print_summary(&summary);
    }
    for w in summary.outcomes.iter().filter_map(override_warning) {
        eprintln!("warning: {w}");
    }
    for w in &summary.warnings {
        eprintln!("warning: {}", printable(w));
    }
    if let Some(line) = reports.held_back_line() {
        eprintln!("{line}");
    }
    if summary.failed() {
        return Err(failure(&summary));
    }
    Ok(())
}

/// The error of a run where something failed: one line per cause of the failed installs
/// (artifacts that failed alike share one), one per unreadable manifest or entry, and what to
/// do.
fn failure(summary: &Summary) -> CliError {
    let failed: Vec<(String, String)> = summary
        .outcomes
        .iter()
        .filter(|o| o.status == Status::Failed)
        .map(|o| {
            let cause = o.cause.as_deref().or(o.error.as_deref()).unwrap_or("");
            (names(o), cause.to_owned())
        })
        .collect();
    let mut lines = cmd::grouped_failures(&failed);
    lines.extend(summary.problems.iter().map(|p| {
        format!(
            "  {}{}: {}",
            p.manifest.display(),
            p.name
                .as_deref()
                .map_or(String::new(), |n| format!(" [{}]", printable(n))),
            printable(&p.message)
        )
    }));
    if !failed.is_empty() {
        lines.push(
            "  check the URLs, and the proxies and TLS roots (`clima-artifacts doctor`), or give \
             a folder holding each with `--override NAME=PATH`; `--json` has each one's whole \
             error"
                .to_owned(),
        );
    }
    CliError::failure(format!(
        "{} of {} could not be mirrored:\n{}",
        failed.len() + summary.problems.len(),
        summary.outcomes.len() + summary.problems.len(),
        lines.join("\n")
    ))
}

fn names(o: &mirror::Outcome) -> String {
    printable(&o.names.join(", ")).into_owned()
}

fn size(o: &mirror::Outcome) -> String {
    o.bytes.map_or("-".to_owned(), depots::human_bytes)
}

/// The line of one artifact, as it finishes.
fn line_of(o: &mirror::Outcome) -> String {
    let hash = &o.git_tree_sha1.to_hex()[..12];
    match o.status {
        Status::Failed => format!(
            "failed          {} ({hash}) after {:.1} s: {}",
            names(o),
            o.seconds,
            printable(o.error_line.as_deref().or(o.error.as_deref()).unwrap_or(""))
        ),
        Status::NeedsOverride => format!(
            "needs-override  {} ({hash}): {}",
            names(o),
            o.fix.as_ref().map_or("", |f| f.reason.as_str())
        ),
        status => format!(
            "{:<15} {} ({hash}, {}, {:.1} s){}",
            status.word(),
            names(o),
            size(o),
            o.seconds,
            match &o.override_check {
                Some(Check::Verified { cached: false }) => ", verified",
                Some(Check::Verified { cached: true }) => ", verified (unchanged since hashed)",
                Some(Check::Mismatch { .. }) => ", OTHER CONTENT than the manifests name",
                Some(Check::Placeholder) => ", placeholder hash: cannot be verified",
                Some(Check::Error { .. }) => ", could not be verified",
                Some(Check::NotVerified) | None => "",
            }
        ),
    }
}

/// The warning about an overridden artifact whose folder does not hold, or cannot be shown to
/// hold, the content the manifests name; with the command that records the folder's hash.
fn override_warning(o: &mirror::Outcome) -> Option<String> {
    let path = o.path.as_deref()?;
    let name = o.names.first()?;
    let manifest = o.manifests.first()?;
    let record = clima_artifact_manifest::validate::record_hash_command(name, manifest, Some(path));
    let who = format!("`{}` ({})", names(o), o.git_tree_sha1);
    let folder = printable(&path.display().to_string()).into_owned();
    match o.override_check.as_ref()? {
        Check::Placeholder => Some(format!(
            "{who} is overridden by its placeholder hash (the SHA-1 of its name), which no \
             content matches: the folder `{folder}` cannot be verified. Record its real hash \
             with `{record}`"
        )),
        Check::Mismatch { actual, .. } => Some(format!(
            "{who}: its override `{folder}` holds other content (git-tree-sha1 {actual}) than \
             the manifests name: point the override at the folder holding that content or, if \
             this folder's content is the one wanted, record its hash with `{record}`"
        )),
        Check::Error { message } => Some(format!(
            "{who}: its override `{folder}` could not be verified: {}",
            printable(message)
        )),
        Check::Verified { .. } | Check::NotVerified => None,
    }
}

/// The overrides still needed, the override folders not hashed, the section written.
fn print_overrides(s: &Summary, needs: &[&mirror::Outcome]) {
    if !needs.is_empty() {
        println!(
            "{} artifact(s) cannot be downloaded; set an override for each (a folder holding \
             its content), e.g.:",
            needs.len()
        );
        for o in needs {
            if let Some(f) = &o.fix {
                println!("  {}  ({})", names(o), f.reason);
                println!("    {}", f.command);
                println!(
                    "    or the line `{}` in {}",
                    f.line,
                    f.overrides_file.display()
                );
            }
        }
    }
    let unverified = s
        .outcomes
        .iter()
        .filter(|o| matches!(o.override_check, Some(Check::NotVerified)))
        .count();
    if unverified > 0 {
        println!(
            "{unverified} overridden folder(s) used as they are, not hashed: --verify-overrides \
             checks that they hold the content the manifests name (hashing only folders whose \
             size or time changed since)"
        );
    }
    if let Some(sec) = &s.overrides {
        println!(
            "overrides: {} line(s) in the section `{}` of {}{}",
            sec.written.len(),
            sec.id,
            sec.file.display(),
            if sec.changed { "" } else { " (unchanged)" }
        );
        for k in &sec.placeholders_kept {
            println!(
                "  kept the line of the placeholder {} of `{}` beside its content hash {}: \
                 still named by {}",
                k.placeholder,
                printable(&k.names.join(", ")),
                k.replaced_by,
                k.manifests
                    .iter()
                    .map(|m| m.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        for (hash, set_by, line) in &sec.conflicts {
            eprintln!(
                "warning: override of {hash} not written: it is already set {set_by} (line \
                 {line} of {}); change or remove that line first",
                sec.file.display()
            );
        }
    }
}

/// The overrides still needed, the section written, the last line (each artifact had its line
/// as it finished; a table of them again would double the log).
fn print_summary(s: &Summary) {
    let (have, of) = s.installed_of();
    let needs: Vec<&mirror::Outcome> = s
        .outcomes
        .iter()
        .filter(|o| o.status == Status::NeedsOverride)
        .collect();
    if !s.nothing_to_do() {
        // Each artifact had its line as it finished: the totals follow.
        println!();
    }
    print_overrides(s, &needs);
    if s.other_platform > 0 {
        println!(
            "{} entr{} for other platforms skipped",
            s.other_platform,
            if s.other_platform == 1 { "y" } else { "ies" }
        );
    }
    let overridden = s.count(Status::Overridden);
    let extra = match (overridden, needs.len()) {
        (0, 0) => String::new(),
        (o, 0) => format!(", {o} overridden"),
        (0, n) => format!(", {n} need an override"),
        (o, n) => format!(", {o} overridden, {n} need an override"),
    };
    let extra = match s.problems.len() {
        0 => extra,
        n => format!("{extra}, {n} manifest(s) or entries unreadable"),
    };
    if s.nothing_to_do() {
        println!("nothing to do: {have} of {of} installed{extra}");
    } else {
        println!(
            "{have} of {of} installed ({} now, {} failed){extra} in {}, {:.1} s",
            s.count(Status::Installed),
            s.count(Status::Failed),
            s.depot.display(),
            s.seconds
        );
    }
}
