//! `publish`: upload a tarball made by `create` to storage ([`storage::publish`]), or publish
//! an artifact to an InvenioRDM archive ([`archive::publish`]); either records the download in
//! the manifest entry. The work is `clima-artifact-ops`'s; this parses and prints.

use crate::progress::Ui;
use clima_artifact_fs::printable;
use clima_artifact_runtime::progress::notice::{self, Notice};
use clima_artifact_runtime::progress::{DownloadStart, Reporter, Reporting, Silent, Transfer};
use std::sync::Arc;

use crate::args::PublishArgs;
use crate::cmd;
use crate::error::{CliError, CliResult};
use crate::{archive, storage};

/// Entry point of `publish`.
pub fn run(args: PublishArgs, ui: &Ui) -> CliResult {
    if args.archive.is_some() {
        return run_archive(args, ui);
    }
    run_storage(args, ui)
}

/// `publish NAME --archive URL`: the work is [`archive::publish`]; progress lines go to stderr.
fn run_archive(args: PublishArgs, ui: &Ui) -> CliResult {
    let name = args.target.to_string_lossy().into_owned();
    let manifest = cmd::load_manifest(args.manifest.as_deref())?.path;
    let request = archive::PublishRequest {
        name,
        manifest,
        archive: args.archive.unwrap_or_default(),
        token: std::env::var(archive::TOKEN_VAR).ok(),
        tarball: args.tarball,
        draft_only: args.draft,
        first: args.first,
        creators: args.creator,
        timeout: archive_timeout()?,
    };
    let quiet = args.json;
    // As downloads: progress lines only where progress is on (CLIMA_ARTIFACTS_PROGRESS), notices
    // (resumes, waits, retries, checksums) always, unless the output is JSON.
    let progress = ui.config()?.progress;
    let reporting = Reporting::to(Arc::new(ArchiveLines { quiet, progress }));
    let done = archive::publish(&request, &reporting)?;
    if args.json {
        return cmd::print_json(&done);
    }
    // The record id and URLs were checked (an id, the archive's origin); the DOIs too. Escaped
    // all the same: they came from the archive.
    let shown = |v: Option<&str>| printable(v.unwrap_or("(none)")).into_owned();
    if done.draft {
        println!(
            "draft {} of `{}` is ready for review (not published): {}\n  run the same command \
             without --draft to publish it",
            shown(Some(&done.record)),
            done.name,
            shown(done.draft_url.as_deref())
        );
        return Ok(());
    }
    let what = if done.unchanged {
        "already published"
    } else if done.new_version {
        "published a new version of"
    } else {
        "published"
    };
    println!(
        "{what} `{}` ({} bytes) on {}\n  record = {}\n  archive-doi = {} (this version)\n  \
         archive-concept-doi = {} (all versions)\n  url = {}\n  sha256 = {}\n  recorded in {}",
        done.name,
        done.bytes,
        done.archive,
        shown(Some(&done.record)),
        shown(done.doi.as_deref()),
        shown(done.concept_doi.as_deref()),
        shown(done.url.as_deref()),
        done.sha256,
        done.manifest.display()
    );
    Ok(())
}

/// [`archive::TIMEOUT_VAR`], when set: seconds.
fn archive_timeout() -> CliResult<Option<std::time::Duration>> {
    let Ok(value) = std::env::var(archive::TIMEOUT_VAR) else {
        return Ok(None);
    };
    clima_artifact_vars::parse_seconds(&value)
        .map(Some)
        .ok_or_else(|| {
            CliError::usage(format!(
                "{}=`{}`: {}",
                archive::TIMEOUT_VAR,
                printable(&value),
                clima_artifact_vars::SECONDS_EXPECTED
            ))
        })
}

/// `publish TARBALL --to STORAGE_URL`: the work is [`storage::publish`]; a spinner while the
/// tarball uploads.
fn run_storage(args: PublishArgs, ui: &Ui) -> CliResult {
    let request = storage::PublishRequest {
        tarball: args.target,
        to: args.to.unwrap_or_default(),
        public_url: args.public_url,
        manifest: args.manifest.unwrap_or_default(),
        name: args.name.unwrap_or_default(),
        key: args.key,
        by_hash: args.by_hash,
        reporting: ui.reporting(),
    };
    let bar = std::cell::RefCell::new(None);
    let step = |step: storage::Step<'_>| match step {
        storage::Step::Uploading { key, storage } => {
            *bar.borrow_mut() = Some(crate::progress::spinner(&format!(
                "uploading {key} to {storage}"
            )));
        }
        storage::Step::Uploaded => {
            if let Some(bar) = bar.borrow_mut().take() {
                bar.finish_and_clear();
            }
        }
    };
    let done = storage::publish(&request, &step)?;
    if args.json {
        // As a JSON value: its keys in the order they have always been printed in.
        let value = serde_json::to_value(&done)
            .map_err(|e| CliError::failure(format!("cannot encode JSON output: {e}")))?;
        return cmd::print_json(&value);
    }
    println!(
        "published `{}` ({} bytes) to {}\n  url = {}\n  sha256 = {}\n  recorded in {}",
        done.name,
        done.bytes,
        done.uploaded_to,
        done.url,
        done.sha256,
        done.manifest.display()
    );
    Ok(())
}

/// How `publish --archive` shows the archive's notices: nothing with `--json`; progress lines
/// of uploads only where progress is on (`CLIMA_ARTIFACTS_PROGRESS`); every other notice as
/// its plain line.
struct ArchiveLines {
    quiet: bool,
    progress: bool,
}

impl Reporter for ArchiveLines {
    fn start(&self, _: &DownloadStart<'_>) -> Box<dyn Transfer> {
        Box::new(Silent)
    }

    fn notice(&self, notice: &Notice<'_>) {
        let shown = match notice.event.downcast_ref::<archive::ArchiveEvent>() {
            Some(event) => self.progress || event.line() == archive::Line::Notice,
            None => true,
        };
        if !self.quiet && shown {
            eprintln!("{}", notice::plain_line(notice));
        }
    }
}
