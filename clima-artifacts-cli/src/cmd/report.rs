//! `report`: re-renders a run's JSON provenance report as Markdown, BibTeX or JSON.

use clima_artifact_provenance::Report;

use crate::args::{ReportArgs, ReportFormat};
use crate::cmd;
use crate::error::{CliError, CliResult, io_error};

/// Entry point of `report`.
pub fn run(args: ReportArgs) -> CliResult {
    let text = std::fs::read_to_string(&args.file).map_err(|e| {
        CliError::usage(format!("cannot read report `{}`: {e}", args.file.display()))
    })?;
    let report = Report::from_json(&text).map_err(|e| {
        CliError::usage(format!(
            "`{}` is not a clima-artifacts JSON report: {e}",
            args.file.display()
        ))
    })?;
    let format = if args.json {
        ReportFormat::Json
    } else {
        args.format
    };
    let rendered = match format {
        ReportFormat::Md => report.to_markdown(),
        ReportFormat::Bibtex => report.to_bibtex(),
        ReportFormat::Json => report.to_json(),
    };
    match &args.output {
        Some(path) => cmd::write_atomically(path, &rendered)
            .map_err(|e| CliError::failure(e.message))
            .map(|()| eprintln!("wrote {}", path.display())),
        None => {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            out.write_all(rendered.as_bytes())
                .and_then(|()| {
                    if rendered.ends_with('\n') {
                        Ok(())
                    } else {
                        out.write_all(b"\n")
                    }
                })
                .map_err(|e| io_error("write to", std::path::Path::new("stdout"), &e))
        }
    }
}
