//! `gc`: removes installed artifacts that no live manifest references, after a grace period
//! (the work is [`clima_artifact_ops::gc`]; this prints its report).

use crate::progress::Ui;
use clima_artifact_ops::gc::{self, Report, Unreferenced};

use crate::args::GcArgs;
use crate::cmd;
use crate::depots;
use crate::error::CliResult;

/// Entry point of `gc`.
pub fn run(args: GcArgs, ui: &Ui) -> CliResult {
    let config = ui.config()?;
    let manifests = args
        .manifest
        .iter()
        .map(|p| cmd::load_manifest(Some(p)))
        .collect::<CliResult<Vec<_>>>()?;
    let report = gc::collect(
        &config,
        &gc::Options {
            manifests,
            all_depots: args.all_depots,
            delay: args.delay,
            dry_run: args.dry_run,
            force: args.force,
        },
    )?;
    if let Some(why) = &report.refusal {
        eprintln!("warning: {why}");
    }
    if args.json {
        cmd::print_json(&report)?;
    } else {
        print_report(&report, args.delay);
    }
    Ok(report.removal_failures()?)
}

/// The report for people: missing manifests, what was (or would be) removed, what waits.
fn print_report(report: &Report, delay: std::time::Duration) {
    for m in &report.manifests {
        if m.status == "missing" {
            println!(
                "manifest {} no longer exists; it stops counting",
                // Recorded by anyone who can write to the depot: escaped.
                clima_artifact_fs::printable(&m.path.display().to_string())
            );
        }
    }
    let verb = if report.dry_run {
        "would remove"
    } else {
        "removed"
    };
    let mut total = 0;
    for u in report.unreferenced.iter().filter(|u| u.due) {
        if u.error.is_none() {
            total += u.bytes;
            println!(
                "{verb} {} ({}; orphaned since {})",
                u.path.display(),
                depots::human_bytes(u.bytes),
                u.orphaned_since
            );
        }
    }
    let waiting: Vec<&Unreferenced> = report.unreferenced.iter().filter(|u| !u.due).collect();
    for u in &waiting {
        println!(
            "{} {} ({}; orphaned since {}, deleted by a gc after the {} delay)",
            if report.dry_run {
                "would keep, orphaned:"
            } else {
                "orphaned:"
            },
            u.path.display(),
            depots::human_bytes(u.bytes),
            u.orphaned_since,
            human_duration(delay)
        );
    }
    println!(
        "{verb} {} artifact(s), {}; {} orphaned and waiting; kept {}",
        report
            .unreferenced
            .iter()
            .filter(|u| u.due && u.error.is_none())
            .count(),
        depots::human_bytes(total),
        waiting.len(),
        report.kept
    );
}

/// `7d`, `12h`, `30m` or `90s`.
fn human_duration(d: std::time::Duration) -> String {
    let s = d.as_secs();
    match s {
        0 => "0s".to_owned(),
        s if s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s % 3600 == 0 => format!("{}h", s / 3600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}
