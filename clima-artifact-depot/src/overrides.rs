//! Overrides across depots, as Julia reads them: for each hash the earliest depot that
//! mentions it decides; `""` there cancels overrides from later depots. A value is an
//! absolute path (used as is: never hashed, never downloaded) or another hash (followed, with
//! cycles reported; the last hash of a chain must be installed in some depot).

use std::collections::BTreeMap;
use std::path::PathBuf;

use clima_artifact_manifest::{GitTreeSha1, OverrideTarget, OverridesFile};

use crate::Error;
use crate::depot::{Depot, find_installed};
use crate::installed::{Installed, Origin};

/// Where an override sends an artifact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedOverride {
    /// The directory to use.
    pub path: PathBuf,
    /// The overrides file whose entry for the requested hash applied.
    pub overrides_file: PathBuf,
    /// Hashes followed through hash-to-hash overrides, starting with the requested one.
    pub chain: Vec<GitTreeSha1>,
}

/// The merged overrides of all depots: for each hash, the deciding entry (earliest depot).
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    entries: BTreeMap<GitTreeSha1, (OverrideTarget, PathBuf, u32)>,
    depots: Vec<Depot>,
}

impl Overrides {
    /// Loads `<depot>/artifacts/Overrides.toml` of every depot in `depots` (missing files are
    /// empty) and merges them, earlier depots first.
    pub fn load(depots: &[Depot]) -> Result<Overrides, Error> {
        let mut entries = BTreeMap::new();
        for depot in depots {
            // A missing file is an empty set; anything else that is not a readable regular
            // file is an error naming it (never silence, or the artifact would be downloaded).
            let file = OverridesFile::load(&depot.overrides_path())?;
            let path = file.path.clone();
            for e in file.entries {
                entries
                    .entry(e.hash)
                    .or_insert((e.target, path.clone(), e.line));
            }
        }
        Ok(Overrides {
            entries,
            depots: depots.to_vec(),
        })
    }

    /// Whether no entry applies to anything.
    pub fn is_empty(&self) -> bool {
        self.entries
            .values()
            .all(|(t, _, _)| matches!(t, OverrideTarget::Remove))
    }

    /// Resolves `hash`: `None` when it is not overridden (or an earlier depot removed the
    /// override). Paths are checked for existence; hashes are followed (cycles are errors) and
    /// the final hash must be installed in a depot.
    pub fn resolve(&self, hash: &GitTreeSha1) -> Result<Option<ResolvedOverride>, Error> {
        let Some((first_target, first_file, _)) = self.entries.get(hash) else {
            return Ok(None);
        };
        if matches!(first_target, OverrideTarget::Remove) {
            return Ok(None);
        }
        let mut chain = vec![*hash];
        let mut steps: Vec<(GitTreeSha1, PathBuf, u32)> = Vec::new();
        let mut cur = *hash;
        loop {
            let (target, file, line) = match self.entries.get(&cur) {
                Some((t, f, l)) if !matches!(t, OverrideTarget::Remove) => (t, f, *l),
                _ => unreachable!("only overridden hashes are followed"),
            };
            steps.push((cur, file.clone(), line));
            match target {
                OverrideTarget::Path(p) => {
                    match std::fs::metadata(p) {
                        Ok(m) if m.is_dir() => {}
                        Ok(m) => {
                            return Err(Error::OverrideTargetNotADirectory {
                                overrides_file: file.clone(),
                                line,
                                hash: cur,
                                target: p.clone(),
                                found: if m.is_file() {
                                    "a regular file".to_owned()
                                } else {
                                    "a special file (device, fifo or socket)".to_owned()
                                },
                            });
                        }
                        Err(_) => {
                            return Err(Error::OverrideTargetMissing {
                                overrides_file: file.clone(),
                                line,
                                hash: cur,
                                target: p.clone(),
                            });
                        }
                    }
                    return Ok(Some(ResolvedOverride {
                        path: p.clone(),
                        overrides_file: first_file.clone(),
                        chain,
                    }));
                }
                OverrideTarget::Hash(next) => {
                    if let Some(pos) = chain.iter().position(|h| h == next) {
                        return Err(Error::OverrideCycle {
                            chain: steps[pos..].to_vec(),
                        });
                    }
                    chain.push(*next);
                    match self.entries.get(next) {
                        Some((t, _, _)) if !matches!(t, OverrideTarget::Remove) => cur = *next,
                        _ => {
                            return match find_installed(&self.depots, next) {
                                Some(path) => Ok(Some(ResolvedOverride {
                                    path,
                                    overrides_file: first_file.clone(),
                                    chain,
                                })),
                                None => Err(Error::OverrideTargetNotInstalled {
                                    overrides_file: file.clone(),
                                    line,
                                    hash: cur,
                                    target: *next,
                                    depots: self
                                        .depots
                                        .iter()
                                        .map(|d| d.root().to_path_buf())
                                        .collect(),
                                }),
                            };
                        }
                    }
                }
                OverrideTarget::Remove => unreachable!("filtered above"),
            }
        }
    }
}

/// Overrides, then installed copies; `None` when the artifact must be downloaded. Never
/// downloads, never hashes.
pub fn lookup(hash: &GitTreeSha1, depots: &[Depot]) -> Result<Option<Installed>, Error> {
    let overrides = Overrides::load(depots)?;
    if let Some(r) = overrides.resolve(hash)? {
        return Ok(Some(Installed {
            path: r.path,
            origin: Origin::Override {
                overrides_file: r.overrides_file,
            },
        }));
    }
    Ok(find_installed(depots, hash).map(|path| Installed {
        path,
        origin: Origin::Depot,
    }))
}
