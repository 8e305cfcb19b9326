//! `census`: every manifest under some folders, per artifact its names, downloads,
//! documentation and problems. The walk is [`crate::census_walk`], the classification
//! [`clima_artifact_provenance::census`].

use clima_artifact_manifest::GitTreeSha1;
use clima_artifact_runtime::depot::Depot;

use crate::args::CensusArgs;
use crate::census_walk;
use crate::cmd;
use crate::error::{CliError, CliResult};

/// Entry point of `census`.
pub fn run(args: CensusArgs) -> CliResult {
    for path in &args.paths {
        if std::fs::metadata(path).is_err() {
            return Err(CliError::usage(format!(
                "`{}` does not exist (or cannot be reached); give folders or manifest files",
                path.display()
            )));
        }
    }
    let mut report = census_walk::take(&args.paths).finish();
    if !args.depot.is_empty() {
        let depots: Vec<Depot> = args.depot.iter().map(Depot::new).collect();
        for a in &mut report.artifacts {
            let places = match GitTreeSha1::from_hex(&a.git_tree_sha1) {
                Ok(hash) => depots
                    .iter()
                    .filter_map(|d| d.installed(&hash))
                    .map(|p| p.display().to_string())
                    .collect(),
                Err(_) => Vec::new(),
            };
            a.installed = Some(places);
        }
    }
    if args.json {
        cmd::print_json(&report)
    } else {
        print!("{}", report.markdown());
        Ok(())
    }
}
