//! Writing the report collectively, and from a drop guard.

use clima_artifact_progress::Reporting;
use std::io;
use std::path::{Path, PathBuf};

use super::{ReportPaths, report, report_collective};
use crate::notice::ReportEvent;
use clima_comms::Context;
use clima_comms::{CollectiveError, WireError, root_decides};

/// Why rank 0 could not write the gathered report, as it travels to the other ranks.
struct WriteFailed(String);

impl WireError for WriteFailed {
    fn to_wire(&self) -> Vec<u8> {
        self.0.clone().into_bytes()
    }
    fn from_wire(bytes: &[u8]) -> Self {
        WriteFailed(String::from_utf8_lossy(bytes).into_owned())
    }
}

impl From<CollectiveError> for WriteFailed {
    fn from(err: CollectiveError) -> Self {
        WriteFailed(err.to_string())
    }
}

/// Rank 0 builds and writes the gathered report; every rank gets its outcome (through
/// [`root_decides`], so a panic while writing is an error everywhere, not a hang).
pub(super) fn write_collective(
    ctx: &dyn Context,
    dir: &Path,
    reporting: &Reporting,
) -> io::Result<Option<ReportPaths>> {
    let gathered = report_collective(ctx, reporting);
    let mut written = None;
    let outcome = root_decides(ctx, "writing the provenance report", || {
        let report = gathered.ok_or_else(|| {
            WriteFailed(
                "the context's gather_to_root returned nothing on rank 0; fix the Context \
                 implementation"
                    .to_owned(),
            )
        })?;
        let paths = report
            .write_all(dir)
            .map_err(|e| WriteFailed(e.to_string()))?;
        written = Some(paths);
        Ok(())
    });
    match outcome {
        Ok(()) => Ok(written),
        Err(WriteFailed(why)) if ctx.rank() == 0 => Err(io::Error::other(why)),
        Err(WriteFailed(why)) => Err(io::Error::other(format!(
            "rank 0 could not write the provenance report: {why}"
        ))),
    }
}

/// Writes the provenance report when dropped (for example at the end of `main`, or while
/// unwinding from a panic). Errors are printed as warnings (notices), never raised in `drop`;
/// call
/// [`ReportGuard::finish`] to get them instead.
///
/// The collective form ([`ReportGuard::collective`]) must be dropped on every rank, like any
/// collective call. While panicking it does not communicate (the other ranks may never arrive):
/// it writes this rank's own records to `provenance.rank<N>.*` instead.
///
/// Its notices (the report written, a failure, unreadable records of other ranks) go to the
/// default reporting (today's lines on stderr) unless the program passes its own
/// ([`ReportGuard::reporting`]).
#[must_use = "the report is written when the guard is dropped; bind it to a variable"]
pub struct ReportGuard<'ctx> {
    target: PathBuf,
    ctx: Option<&'ctx dyn Context>,
    armed: bool,
    reporting: Reporting,
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
    /// A guard that writes this process's [`report`] into the folder `dir` (see
    /// [`Report::write_all`](super::Report::write_all)) when dropped.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        ReportGuard {
            target: dir.into(),
            ctx: None,
            armed: true,
            reporting: Reporting::default(),
        }
    }
}

impl<'ctx> ReportGuard<'ctx> {
    /// A guard that gathers every rank's records and writes once on rank 0 when dropped
    /// (see [`super::write_all_collective`]). Collective: every rank must create and drop one.
    pub fn collective(ctx: &'ctx dyn Context, dir: impl Into<PathBuf>) -> Self {
        ReportGuard {
            target: dir.into(),
            ctx: Some(ctx),
            armed: true,
            reporting: Reporting::default(),
        }
    }

    /// The same guard, telling its notices through `reporting` (the program's, as its
    /// `Config` holds it: [`Config::reporting`](crate::Config::reporting)).
    pub fn reporting(mut self, reporting: Reporting) -> Self {
        self.reporting = reporting;
        self
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
            Some(ctx) => super::write_all_collective(ctx, &self.target, &self.reporting),
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
                self.reporting
                    .emit(ReportEvent::ReportRankOnly { rank: rank as u64 });
                let mut local = report();
                local.communicator_size = ctx.size();
                local.write_rank_files(&self.target, rank).map(Some)
            }
            _ => self.write(),
        };
        match result {
            Ok(Some(paths)) => self.reporting.emit(ReportEvent::ReportWritten {
                markdown: paths.markdown,
                json: paths.json,
                bibtex: paths.bibtex,
            }),
            Ok(None) => {}
            Err(err) => self.reporting.emit(ReportEvent::ReportFailed {
                error: err.to_string(),
            }),
        }
    }
}
