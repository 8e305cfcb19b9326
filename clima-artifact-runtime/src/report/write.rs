//! Writing the three report files atomically, collectively, and from a drop guard.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::{Report, report, report_collective};
use clima_comms::Context;

/// The files written by [`Report::write_all`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportPaths {
    /// The Markdown report (`provenance.md`).
    pub markdown: PathBuf,
    /// The JSON report (`provenance.json`).
    pub json: PathBuf,
    /// The BibTeX file (`provenance.bib`).
    pub bibtex: PathBuf,
}

/// The three file paths for `dir_or_prefix`, with `suffix` added to the file stem (used for
/// per-rank fallback files).
fn target_paths(dir_or_prefix: &Path, suffix: &str) -> ReportPaths {
    let text = dir_or_prefix.as_os_str().to_string_lossy();
    let is_dir =
        text.is_empty() || text.ends_with(std::path::is_separator) || dir_or_prefix.is_dir();
    let stem: PathBuf = if is_dir {
        dir_or_prefix.join(format!("provenance{suffix}"))
    } else {
        PathBuf::from(format!("{}{suffix}", dir_or_prefix.display()))
    };
    let with = |ext: &str| {
        let mut name = stem.clone().into_os_string();
        name.push(".");
        name.push(ext);
        PathBuf::from(name)
    };
    ReportPaths {
        markdown: with("md"),
        json: with("json"),
        bibtex: with("bib"),
    }
}

/// Writes the three renderings of `report` next to each other.
pub(super) fn write_report(
    report: &Report,
    dir_or_prefix: &Path,
    suffix: &str,
) -> io::Result<ReportPaths> {
    let paths = target_paths(dir_or_prefix, suffix);
    if let Some(parent) = paths.json.parent()
        && !parent.as_os_str().is_empty()
    {
        fs::create_dir_all(parent).map_err(|err| {
            io::Error::new(
                err.kind(),
                format!(
                    "cannot create the provenance report directory `{}`: {err}",
                    parent.display()
                ),
            )
        })?;
    }
    write_atomically(&paths.json, report.to_json().as_bytes())?;
    write_atomically(&paths.markdown, report.to_markdown().as_bytes())?;
    write_atomically(&paths.bibtex, report.to_bibtex().as_bytes())?;
    Ok(paths)
}

/// [`clima_artifact_fs::write_atomically`], its error saying it was the provenance report.
fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    clima_artifact_fs::write_atomically(path, bytes)
        .map_err(|e| io::Error::new(e.kind(), format!("provenance report: {e}")))
}

/// Rank 0 builds and writes the gathered report, then broadcasts the outcome (empty = success,
/// otherwise the error message).
pub(super) fn write_collective(
    ctx: &dyn Context,
    dir_or_prefix: &Path,
) -> io::Result<Option<ReportPaths>> {
    let gathered = report_collective(ctx);
    if ctx.rank() == 0 {
        let result = match gathered {
            Some(report) => report.write_all(dir_or_prefix),
            None => Err(io::Error::other(
                "the context's gather_to_root returned nothing on rank 0; fix the Context \
                 implementation",
            )),
        };
        let status = match &result {
            Ok(_) => Vec::new(),
            Err(err) => err.to_string().into_bytes(),
        };
        ctx.broadcast_from_root(Some(status));
        result.map(Some)
    } else {
        let status = ctx.broadcast_from_root(None);
        if status.is_empty() {
            Ok(None)
        } else {
            Err(io::Error::other(format!(
                "rank 0 could not write the provenance report: {}",
                String::from_utf8_lossy(&status)
            )))
        }
    }
}

/// Writes the provenance report when dropped (for example at the end of `main`, or while
/// unwinding from a panic). Errors are logged with `tracing`, never raised in `drop`; call
/// [`ReportGuard::finish`] to get them instead.
///
/// The collective form ([`ReportGuard::collective`]) must be dropped on every rank, like any
/// collective call. While panicking it does not communicate (the other ranks may never arrive):
/// it writes this rank's own records to `provenance.rank<N>.*` instead.
#[must_use = "the report is written when the guard is dropped; bind it to a variable"]
pub struct ReportGuard<'ctx> {
    target: PathBuf,
    ctx: Option<&'ctx dyn Context>,
    armed: bool,
}

impl std::fmt::Debug for ReportGuard<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReportGuard")
            .field("target", &self.target)
            .field("collective", &self.ctx.map(|c| (c.rank(), c.size())))
            .field("armed", &self.armed)
            .finish()
    }
}

impl ReportGuard<'static> {
    /// A guard that writes this process's [`report`] to `dir_or_prefix` (see
    /// [`Report::write_all`]) when dropped.
    pub fn new(dir_or_prefix: impl Into<PathBuf>) -> Self {
        ReportGuard {
            target: dir_or_prefix.into(),
            ctx: None,
            armed: true,
        }
    }
}

impl<'ctx> ReportGuard<'ctx> {
    /// A guard that gathers every rank's records and writes once on rank 0 when dropped
    /// (see [`super::write_all_collective`]). Collective: every rank must create and drop one.
    pub fn collective(ctx: &'ctx dyn Context, dir_or_prefix: impl Into<PathBuf>) -> Self {
        ReportGuard {
            target: dir_or_prefix.into(),
            ctx: Some(ctx),
            armed: true,
        }
    }

    /// Writes now and returns the outcome instead of logging it; nothing is written on drop.
    /// `Ok(None)` on ranks other than 0 of a collective guard.
    pub fn finish(mut self) -> io::Result<Option<ReportPaths>> {
        self.armed = false;
        self.write()
    }

    /// Drops the guard without writing anything.
    pub fn disarm(mut self) {
        self.armed = false;
    }

    fn write(&self) -> io::Result<Option<ReportPaths>> {
        match self.ctx {
            None => report().write_all(&self.target).map(Some),
            Some(ctx) => super::write_all_collective(ctx, &self.target),
        }
    }
}

impl Drop for ReportGuard<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let result = match self.ctx {
            Some(ctx) if std::thread::panicking() && ctx.size() > 1 => {
                let rank = ctx.rank();
                tracing::warn!(
                    "panicking: writing rank {rank}'s own provenance records without gathering"
                );
                let mut local = report();
                local.communicator_size = ctx.size();
                write_report(&local, &self.target, &format!(".rank{rank}")).map(Some)
            }
            _ => self.write(),
        };
        match result {
            Ok(Some(paths)) => tracing::info!(
                "provenance report written to `{}`, `{}` and `{}`",
                paths.markdown.display(),
                paths.json.display(),
                paths.bibtex.display()
            ),
            Ok(None) => {}
            Err(err) => tracing::error!("could not write the provenance report: {err}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directory_or_prefix() {
        let dir = std::env::temp_dir();
        let paths = target_paths(&dir, "");
        assert_eq!(paths.json, dir.join("provenance.json"));
        assert_eq!(paths.bibtex, dir.join("provenance.bib"));
        let paths = target_paths(Path::new("not/existing/"), ".rank3");
        assert_eq!(
            paths.markdown,
            Path::new("not/existing/provenance.rank3.md")
        );
        let paths = target_paths(Path::new("out/run7"), "");
        assert_eq!(paths.markdown, Path::new("out/run7.md"));
        assert_eq!(paths.json, Path::new("out/run7.json"));
        let paths = target_paths(Path::new(""), "");
        assert_eq!(paths.bibtex, Path::new("provenance.bib"));
    }
}
