//! The end-of-run provenance report of this process (or of every rank): the records of the
//! [`access_log`](mod@crate::access_log) and the call sites of the inventory, in the report of
//! `clima-artifact-provenance` (schema, Markdown, JSON, BibTeX), re-exported here.
//!
//! Typical use at the end of a simulation:
//!
//! ```no_run
//! // Serial: writes results/provenance.{md,json,bib}.
//! clima_artifact_runtime::report::write_all("results/")?;
//! // Or keep a guard alive for the whole run; it writes when dropped.
//! let _guard = clima_artifact_runtime::report::ReportGuard::new("results/");
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Under MPI, [`write_all_collective`] brings the records of every rank to rank 0 (merged in a
//! tree on the way, see [`gather_records`]), which writes the files once.

mod guard;

use clima_artifact_progress::Reporting;
use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use crate::access_log::{self, ArtifactRecord, CallSite};
use crate::notice::ReportEvent;
use clima_artifact_provenance::readme;
use clima_comms::{CollectiveError, Context};

pub use clima_artifact_provenance::report::{
    DeclaredArtifact, GENERATOR, Report, ReportError, ReportPaths, SCHEMA,
};
pub use guard::ReportGuard;

/// Artifacts declared by `clima_artifact!` call sites linked into this binary.
fn declared_in_binary() -> Vec<DeclaredArtifact> {
    crate::inventory::declared_artifacts()
        .into_iter()
        .map(declared)
        .collect()
}

/// The report of this process: every access recorded so far, plus the declared artifacts that
/// were not accessed.
pub fn report() -> Report {
    Report::from_parts(
        readme::with_recipe_citations(access_log::snapshot()),
        declared_in_binary(),
    )
}

/// Builds this process's [`report`] and writes it into the folder `dir` (created if needed)
/// with [`Report::write_all`].
pub fn write_all(dir: impl AsRef<Path>) -> io::Result<ReportPaths> {
    report().write_all(dir)
}

/// Brings the `local` records of every rank of `ctx` to rank 0 and merges them there (accesses
/// summed, call sites and ranks united). Collective; rank 0 gets `Some`, the others `None`.
///
/// The records merge on the way, in the tree of [`Context::reduce_to_root`] (through
/// [`clima_comms::reduce_outcomes`]), with their ranks as ranges: when every rank accessed the
/// same artifacts, rank 0 receives `ceil(log2 P)` messages of about one rank's records each,
/// whatever the number of ranks. Records that arrive unreadable are left out, with a warning
/// that names their ranks and says what was wrong with them, told through `reporting`.
///
/// [`report_collective`] calls this with [`access_log::snapshot`]; it is public for contexts whose
/// ranks do not each have their own registry (tests with threads as ranks).
pub fn gather_records(
    ctx: &dyn Context,
    local: &[ArtifactRecord],
    reporting: &Reporting,
) -> Option<Vec<ArtifactRecord>> {
    let merged = clima_comms::reduce_outcomes(ctx, Part::of(ctx.rank(), local), merge_parts)?;
    let part = Part::or_unreadable(merged);
    for warning in part.unreadable_ranks(ctx.size()) {
        reporting.emit(warning);
    }
    Some(part.into_records())
}

/// The records of some ranks as they travel to rank 0: each record's ranks as ranges (its
/// `ranks` list left empty), the ranks whose records the part holds, and why the parts that
/// could not be read were not (their ranks are those missing from `from`).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Part {
    from: Vec<[usize; 2]>,
    records: Vec<(ArtifactRecord, Vec<[usize; 2]>)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    unreadable: Vec<String>,
}

impl Part {
    fn of(rank: usize, local: &[ArtifactRecord]) -> Part {
        Part {
            from: vec![[rank, rank]],
            records: local
                .iter()
                .map(|r| {
                    let ranges = clima_comms::rank_ranges(&r.ranks);
                    let mut r = r.clone();
                    r.ranks.clear();
                    (r, ranges)
                })
                .collect(),
            unreadable: Vec::new(),
        }
    }

    /// The part that arrived, or for one that could not be read, a part of no rank that
    /// says why (what was wrong with its bytes: the rank an `Undecodable` names is the one
    /// that merged them, not whose they were).
    fn or_unreadable(arrived: Result<Part, CollectiveError>) -> Part {
        arrived.unwrap_or_else(|e| Part {
            from: Vec::new(),
            records: Vec::new(),
            unreadable: vec![match e {
                CollectiveError::Undecodable { why, .. } => why,
                other => other.to_string(),
            }],
        })
    }

    /// One warning per run of ranks of `0..size` whose records are not in this part, saying
    /// why (the errors met on the way).
    fn unreadable_ranks(&self, size: usize) -> Vec<ReportEvent> {
        let mut out = Vec::new();
        let mut next = 0;
        for &[a, b] in self.from.iter().chain(&[[size, size]]) {
            let missing = next..a.min(size);
            if !missing.is_empty() {
                out.push(ReportEvent::RecordsUnreadable {
                    first: missing.start as u64,
                    last: (missing.end - 1) as u64,
                    errors: self.unreadable.clone(),
                });
            }
            next = next.max(b.saturating_add(1));
        }
        out
    }

    /// The lines of [`Part::unreadable_ranks`].
    #[cfg(test)]
    fn left_out(&self, size: usize) -> Vec<String> {
        let events = self.unreadable_ranks(size);
        events.iter().map(ToString::to_string).collect()
    }

    fn into_records(self) -> Vec<ArtifactRecord> {
        let records = self.records.into_iter().map(|(mut r, ranges)| {
            r.ranks = clima_comms::ranks_of(&ranges);
            r
        });
        access_log::merge_records(records)
    }
}

/// The most distinct errors a part keeps to tell why parts were unreadable (however many ranks
/// failed).
const MAX_REASONS: usize = 4;

/// The merge of [`gather_records`]: records of the same artifact merged, ranks united; a side
/// that could not be read adds no rank, only its error.
fn merge_parts(
    lower: Result<Part, CollectiveError>,
    higher: Result<Part, CollectiveError>,
) -> Result<Part, CollectiveError> {
    let mut part = Part::or_unreadable(lower);
    let theirs = Part::or_unreadable(higher);
    part.from = clima_comms::union_ranges(&part.from, &theirs.from);
    for why in theirs.unreadable {
        if part.unreadable.len() < MAX_REASONS && !part.unreadable.contains(&why) {
            part.unreadable.push(why);
        }
    }
    for (record, ranges) in theirs.records {
        match part
            .records
            .iter_mut()
            .find(|(r, _)| r.key() == record.key())
        {
            Some((mine, my_ranges)) => {
                mine.merge(&record);
                *my_ranges = clima_comms::union_ranges(my_ranges, &ranges);
            }
            None => part.records.push((record, ranges)),
        }
    }
    Ok(part)
}

/// Collective [`report`]: gathers every rank's records to rank 0 of `ctx`, which gets the merged
/// report; the other ranks get `None`. Every rank of `ctx` must call it. Records that arrive
/// unreadable are told through `reporting` ([`gather_records`]).
pub fn report_collective(ctx: &dyn Context, reporting: &Reporting) -> Option<Report> {
    let records = gather_records(ctx, &access_log::snapshot(), reporting)?;
    let mut report =
        Report::from_parts(readme::with_recipe_citations(records), declared_in_binary());
    report.communicator_size = ctx.size();
    Some(report)
}

/// Collective [`write_all`]: rank 0 writes the merged report once and tells every rank the
/// outcome, so all ranks return an error if the write failed. Rank 0 gets the paths, the others
/// `Ok(None)`. Every rank of `ctx` must call it. Records that arrive unreadable are told
/// through `reporting`.
pub fn write_all_collective(
    ctx: &dyn Context,
    dir: impl AsRef<Path>,
    reporting: &Reporting,
) -> io::Result<Option<ReportPaths>> {
    guard::write_collective(ctx, dir.as_ref(), reporting)
}

/// A call site's declaration, as the report lists it.
fn declared(declared: crate::inventory::LinkedArtifact) -> DeclaredArtifact {
    DeclaredArtifact {
        name: declared.name.to_owned(),
        manifest: declared.manifest.to_owned(),
        git_tree_sha1s: declared.hashes,
        lazy: declared.lazy,
        call_sites: declared
            .call_sites
            .iter()
            .map(|site| CallSite {
                file: site.file.to_owned(),
                line: site.line,
            })
            .collect(),
        metadata: BTreeMap::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn undecodable(rank: usize, why: &str) -> Result<Part, CollectiveError> {
        Err(CollectiveError::Undecodable {
            rank,
            why: why.to_owned(),
        })
    }

    /// A part that does not decode is no empty default: its ranks are told as left out, with
    /// the reason, and the readable parts stay.
    #[test]
    fn a_part_that_does_not_decode_is_told_with_its_reason() {
        let lower = merge_parts(Ok(Part::of(0, &[])), undecodable(0, "unknown tag 0x00")).unwrap();
        let part = merge_parts(Ok(lower), Ok(Part::of(2, &[]))).unwrap();
        assert_eq!(part.from, [[0, 0], [2, 2]]);
        let warnings = part.left_out(3);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].contains("from rank 1 are unreadable"),
            "{warnings:?}"
        );
        assert!(warnings[0].contains("unknown tag 0x00"), "{warnings:?}");

        // Nothing readable reached rank 0: every rank is told, with why.
        let warnings = Part::or_unreadable(undecodable(0, "unknown tag 0x00")).left_out(3);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("ranks 0-2") && warnings[0].contains("unknown tag"));

        // Every part read: no warning.
        let all = merge_parts(Ok(Part::of(0, &[])), Ok(Part::of(1, &[]))).unwrap();
        assert!(all.left_out(2).is_empty());
    }

    /// Many ranks failing keep a few distinct reasons, not one per rank.
    #[test]
    fn reasons_are_bounded() {
        let mut part = Part::of(0, &[]);
        for rank in 1..100 {
            let why = format!("unknown tag {}", rank % 10);
            part = merge_parts(Ok(part), undecodable(rank, &why)).unwrap();
        }
        assert_eq!(part.unreadable[..2], ["unknown tag 1", "unknown tag 2"]);
        assert_eq!(part.unreadable.len(), MAX_REASONS);
        assert_eq!(part.left_out(100).len(), 1);
    }
}
