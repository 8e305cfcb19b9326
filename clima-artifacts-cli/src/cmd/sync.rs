//! `sync push|pull RUN_DIR STORAGE_URL`: run sync (the crate `clima-artifact-sync`) from a job
//! script (serial context; settings from the `CLIMA_SYNC_*` variables and flags).

use crate::progress::Ui;
use clima_artifact_sync::Singleton;
use clima_artifact_sync::{RunSync, SyncConfig, open_storage};

use crate::args::{SyncArgs, SyncCommand};
use crate::cmd;
use crate::error::{CliError, CliResult};

/// Entry point of `sync push` and `sync pull`.
pub fn run(command: SyncCommand, ui: &Ui) -> CliResult {
    let (args, checkpoint, push) = match command {
        SyncCommand::Push(a) => (a.common, a.checkpoint, true),
        SyncCommand::Pull(a) => (a.common, None, false),
    };
    let mut config = config(&args)?;
    // Skipped files, slow-sync warnings and cleanups reach stderr as notices (once each).
    config.reporting = ui.report_to_user(args.json).reporting;
    let storage = open_storage(&args.storage_url, &config.reporting)
        .map_err(|e| CliError::usage(e.to_string()))?;
    if push && !args.run_dir.is_dir() {
        return Err(CliError::usage(format!(
            "run folder `{}` does not exist or is not a folder",
            args.run_dir.display()
        )));
    }
    let mut sync = RunSync::new(&args.run_dir, storage, config, &Singleton)
        .map_err(|e| CliError::usage(e.to_string()))?;
    if push {
        let report = match &checkpoint {
            Some(c) => sync.on_checkpoint(c),
            None => sync.finish(),
        }
        .map_err(|e| CliError::failure(e.to_string()))?;
        if args.json {
            return cmd::print_json(&report);
        }
        println!(
            "pushed {} file(s), {} bytes; {} unchanged, {} excluded",
            report.uploaded.len(),
            report.uploaded_bytes,
            report.unchanged,
            report.excluded
        );
        for f in &report.uploaded {
            println!("  {}", clima_artifact_fs::printable(f));
        }
    } else {
        let restored = sync
            .restore()
            .map_err(|e| CliError::failure(e.to_string()))?;
        if args.json {
            return cmd::print_json(&restored);
        }
        println!(
            "pulled {} file(s), {} bytes; {} up to date, {} newer locally (kept)",
            restored.downloaded.len(),
            restored.downloaded_bytes,
            restored.up_to_date,
            restored.kept_newer.len()
        );
        // Names from the store's index (checked, but any name may hold control characters).
        if let Some(c) = &restored.checkpoint {
            println!(
                "latest checkpoint: {}",
                clima_artifact_fs::printable(&c.to_string_lossy())
            );
        }
        for f in &restored.kept_newer {
            println!("  kept newer local {}", clima_artifact_fs::printable(f));
        }
    }
    Ok(())
}

fn config(args: &SyncArgs) -> CliResult<SyncConfig> {
    let mut config = SyncConfig::from_env().map_err(|e| CliError::usage(e.to_string()))?;
    if args.no_artifacts {
        config.sync_artifacts = false;
    }
    config.exclude.extend(args.exclude.iter().cloned());
    if let Some(secs) = args.warn_after {
        config.slow_warning_after = std::time::Duration::from_secs_f64(secs.max(0.0));
    }
    config
        .excludes()
        .map_err(|e| CliError::usage(e.to_string()))?;
    Ok(config)
}
