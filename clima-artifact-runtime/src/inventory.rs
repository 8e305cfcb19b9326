//! Link-time inventory of the artifacts that `clima_artifact!` call sites in this binary can use.
//!
//! Every expansion of [`clima_artifact!`](crate::clima_artifact) adds one element to the
//! distributed slice `CALL_SITES` (the `linkme` crate collects them at link time, without any
//! code running at start-up). So a binary can list every dataset it may touch without running
//! the simulation, and fetch them all on a login node before an offline batch job:
//!
//! ```no_run
//! use clima_artifact_runtime::{Singleton, inventory};
//!
//! for a in inventory::declared_artifacts() {
//!     println!("{} ({} call sites){}", a.name, a.call_sites.len(), if a.lazy { " lazy" } else { "" });
//! }
//! inventory::prefetch_declared(&Singleton)?;
//! # Ok::<(), clima_artifact_runtime::Error>(())
//! ```
//!
//! A call site with a literal name declares that one artifact; a call site whose name is
//! computed at run time declares every artifact of its manifest (it may use any of them).

use std::collections::{BTreeMap, BTreeSet};

use clima_artifact_manifest::GitTreeSha1;
use linkme::distributed_slice;

use crate::Installed;
use crate::resolve::MacroSite;
use crate::{Context, Error};

/// Every `clima_artifact!` call site linked into this binary (filled by the linker).
#[doc(hidden)]
#[distributed_slice]
pub static CALL_SITES: [&'static MacroSite];

/// An artifact that some `clima_artifact!` call in this binary can use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkedArtifact {
    /// Name as written in the manifest.
    pub name: &'static str,
    /// Absolute path of the manifest that defines it.
    pub manifest: &'static str,
    /// Git tree SHA-1 of each variant (one for a `[name]` entry, one per platform for `[[name]]`).
    pub hashes: Vec<GitTreeSha1>,
    /// Every variant is `lazy = true`: installed on first use only, skipped by default prefetch.
    pub lazy: bool,
    /// At least one variant has a download section (else it needs an `Overrides.toml` entry).
    pub downloadable: bool,
    /// Where the binary may use it, sorted by file and line.
    pub call_sites: Vec<DeclaredCallSite>,
}

/// One `clima_artifact!` call that may use a [`LinkedArtifact`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct DeclaredCallSite {
    /// Source file of the call (`file!()`).
    pub file: &'static str,
    /// Line of the call.
    pub line: u32,
    /// Column of the call.
    pub column: u32,
    /// The name is a literal checked at compile time (`false`: computed at run time, so any
    /// artifact of the manifest may be used here).
    pub literal: bool,
    /// The literal sub-path, if the call names one (`"era5/2008/u.nc"` gives `2008/u.nc`).
    pub subpath: Option<&'static str>,
}

/// Every artifact declared by the call sites linked into this binary, one entry per
/// (manifest, name), sorted by manifest and name.
pub fn declared_artifacts() -> Vec<LinkedArtifact> {
    let mut by_key: BTreeMap<(&'static str, &'static str), LinkedArtifact> = BTreeMap::new();
    for site in CALL_SITES.iter() {
        for artifact in site.manifest.artifacts {
            let entry = by_key
                .entry((site.manifest.path, artifact.name))
                .or_insert_with(|| LinkedArtifact {
                    name: artifact.name,
                    manifest: site.manifest.path,
                    hashes: artifact
                        .variants
                        .iter()
                        .map(|v| GitTreeSha1(v.git_tree_sha1))
                        .collect(),
                    lazy: !artifact.variants.is_empty() && artifact.variants.iter().all(|v| v.lazy),
                    downloadable: artifact.variants.iter().any(|v| !v.downloads.is_empty()),
                    call_sites: Vec::new(),
                });
            let call = DeclaredCallSite {
                file: site.file,
                line: site.line,
                column: site.column,
                literal: site.literal,
                subpath: site.subpath,
            };
            if !entry.call_sites.contains(&call) {
                entry.call_sites.push(call);
            }
        }
    }
    let mut out: Vec<LinkedArtifact> = by_key.into_values().collect();
    for a in &mut out {
        a.call_sites.sort();
    }
    out
}

/// What [`prefetch_declared_with`] fetches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PrefetchOptions {
    /// Also fetch `lazy = true` artifacts (by default they are left for first use, like Julia).
    pub include_lazy: bool,
}

/// One artifact handled by a prefetch.
#[derive(Debug, Clone, PartialEq)]
pub struct Prefetched {
    /// Name as written in the manifest.
    pub name: &'static str,
    /// The manifest that defines it.
    pub manifest: &'static str,
    /// Git tree SHA-1 of the host's variant.
    pub hash: GitTreeSha1,
    /// Where it is and where it came from; `None` when skipped because it is lazy.
    pub installed: Option<Installed>,
}

/// Installs every declared non-lazy artifact (the host's variant of each), collectively over
/// `ctx`: run it on a login node so that an offline job finds everything in the depot.
///
/// Tries every artifact even after a failure; the error then names each one that failed.
/// Prefetching is not an access: nothing is recorded in the provenance registry.
pub fn prefetch_declared(ctx: &dyn Context) -> Result<Vec<Prefetched>, Error> {
    prefetch_declared_with(ctx, PrefetchOptions::default())
}

/// [`prefetch_declared`] with options (for example, lazy artifacts too).
pub fn prefetch_declared_with(
    ctx: &dyn Context,
    options: PrefetchOptions,
) -> Result<Vec<Prefetched>, Error> {
    let config = crate::resolve::current_config()?;
    let mut done = Vec::new();
    let mut failures: Vec<(String, Error)> = Vec::new();
    let mut seen = BTreeSet::new();
    for site in CALL_SITES.iter() {
        for artifact in site.manifest.artifacts {
            if !seen.insert((site.manifest.path, artifact.name)) {
                continue;
            }
            let variant = match site.manifest.select_host(artifact) {
                Ok(v) => v,
                Err(e) => {
                    failures.push((artifact.name.to_owned(), e));
                    continue;
                }
            };
            let hash = variant.git_tree_sha1;
            if variant.lazy && !options.include_lazy {
                done.push(Prefetched {
                    name: artifact.name,
                    manifest: site.manifest.path,
                    hash,
                    installed: None,
                });
                continue;
            }
            let dir = std::path::Path::new(site.manifest.path);
            match crate::collective_install::ensure_collective(
                ctx,
                artifact.name,
                &variant,
                dir,
                &config,
            ) {
                Ok(installed) => done.push(Prefetched {
                    name: artifact.name,
                    manifest: site.manifest.path,
                    hash,
                    installed: Some(installed),
                }),
                Err(e) => failures.push((artifact.name.to_owned(), e)),
            }
        }
    }
    done.sort_by(|a, b| (a.manifest, a.name).cmp(&(b.manifest, b.name)));
    match failures.len() {
        0 => Ok(done),
        1 => Err(failures.remove(0).1),
        _ => Err(Error::PrefetchFailed { failures }),
    }
}
