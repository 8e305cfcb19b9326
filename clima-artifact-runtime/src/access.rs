//! What the provenance access log records of one resolution, built in one place for the three
//! ways in (the `clima_artifact!` resolver, [`Artifacts`](crate::Artifacts), the collective
//! install).

use std::path::PathBuf;

use clima_artifact_manifest::ArtifactVariant;

use crate::Installed;
use crate::access_log::AccessEvent;

/// The access to `variant` of artifact `name` (defined in `manifest`) that `installed`
/// answered, by `rank`, from `call_site` if a `clima_artifact!` call made it: what the
/// provenance access log records.
pub(crate) fn access_event(
    installed: &Installed,
    name: &str,
    variant: &ArtifactVariant,
    manifest: PathBuf,
    call_site: Option<(&'static str, u32)>,
    rank: usize,
) -> AccessEvent {
    AccessEvent {
        name: name.to_owned(),
        hash: variant.git_tree_sha1,
        path: installed.path.clone(),
        origin: installed.origin.clone(),
        call_site,
        manifest,
        metadata: variant.metadata.clone(),
        rank,
    }
}
