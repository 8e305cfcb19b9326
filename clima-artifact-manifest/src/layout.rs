//! The layout of a depot: the name of every file and folder in it, spelled here and nowhere
//! else (pure names and paths, no I/O; the depot crate, the operations crate (gc, mirror), the
//! census, the build helper and the CLI take them from here, and a test fails on a second
//! spelling in non-test code).
//!
//! ```text
//! <depot>/
//!   artifacts/
//!     <git-tree-sha1>/                 an installed artifact (Julia's layout)
//!     <git-tree-sha1>.pid              Julia 1.13's install pidfile for it
//!     <git-tree-sha1>.git-tree-sha256  the copy's git tree SHA-256, once verified (bound to
//!                                      the folder: device, inode, ctime)
//!     Overrides.toml                   the depot's overrides (Julia's format)
//!     .locks/<git-tree-sha1>.lock      our install lock
//!     .locks/Overrides.toml.lock       our lock of Overrides.toml (held while we edit it)
//!     .<hash>.clima-install-<owner>    an install in progress (renamed into place when verified)
//!     .<hash>.gc-<owner>               an artifact gc is deleting (renamed out of the way first)
//!     .partial-<hash>-<url key>-u<uid> the kept bytes of a large download, for resuming
//!     .probe-<pid>-<rand>              a writability probe (removed at once)
//!   clima_partial/
//!     <git-tree-sha1>/<path>           files of an artifact fetched one by one from its
//!                                      seekable tarball (read-only, each verified), for an
//!                                      artifact not installed whole; outside `artifacts/`,
//!                                      where neither Julia's lookups nor `Pkg.gc()` look
//!     <git-tree-sha1>.count            how many files the whole artifact has (for `list`)
//!     <git-tree-sha1>/.<name>.clima-partial-<owner>
//!                                      such a file being written (renamed when verified)
//!   logs/
//!     artifact_usage.toml              which manifests used this depot (Julia's format)
//!     artifact_usage.toml.pid          Pkg 1.13's lock of that log
//!     .artifact_usage.toml.clima-pending-<owner>
//!                                      a usage entry that could not be written under that
//!                                      lock in time; the next run merges it into the log
//!     orphaned.toml                    what gc found unreferenced, and since when
//!     clima_override_checks.json       `mirror --verify-overrides`: tree hashes of override
//!                                      folders, by size and time
//! ```
//!
//! `<owner>` is the `<host>.<pid>.<random>` tail every temp name of the project carries; the
//! form `.<name><mark><owner>` is written and read in one place,
//! `clima_artifact_fs::temp_name_of`/`split_temp_name` (the temp names here use them too).
//!
//! These names stay in this crate rather than the depot's: the build helper
//! (`clima-artifact-build`, compiled into every model's build script, which depends on this
//! crate alone besides `toml`) gives build scripts the depot's `Overrides.toml` path, and this
//! crate's own `validate` names that file in its warnings; moving the names to the depot crate
//! would put the depot (and its dependencies) under every build script, and splitting them
//! would give the depot's names two homes.

use std::path::{Path, PathBuf};

use crate::GitTreeSha1;

/// `<depot>/artifacts`: installed artifacts, their locks and temp entries, `Overrides.toml`.
pub const ARTIFACTS: &str = "artifacts";
/// `<depot>/logs`: the usage and orphan logs.
pub const LOGS: &str = "logs";
/// `<depot>/artifacts/Overrides.toml`.
pub const OVERRIDES: &str = "Overrides.toml";
/// `<depot>/logs/artifact_usage.toml`.
pub const USAGE_LOG: &str = "artifact_usage.toml";
/// `<depot>/logs/orphaned.toml`.
pub const ORPHAN_LOG: &str = "orphaned.toml";
/// The end of the name of an installed copy's git tree SHA-256 record:
/// `<depot>/artifacts/<hash>.git-tree-sha256`.
pub const TREE_SHA256_RECORD: &str = ".git-tree-sha256";
/// The mark of the temp file a record is written to before it is renamed into place:
/// `.<hash>.git-tree-sha256.clima-record-<owner>`.
pub const RECORD_MARK: &str = ".clima-record-";
/// The mark of a usage entry kept for the next run to merge into the usage log:
/// `<depot>/logs/.artifact_usage.toml.clima-pending-<owner>`.
pub const USAGE_PENDING_MARK: &str = ".clima-pending-";
/// `<depot>/logs/clima_override_checks.json`: what `mirror --verify-overrides` found.
pub const OVERRIDE_CHECKS: &str = "clima_override_checks.json";
/// `<depot>/artifacts/.locks`: one install lock file per artifact.
pub const LOCKS: &str = ".locks";
/// The mark of install temp dirs: `.<hash>.clima-install-<owner>`.
pub const INSTALL_MARK: &str = ".clima-install-";
/// The mark of what gc renamed out of the way before deleting it: `.<hash>.gc-<owner>`.
pub const GC_MARK: &str = ".gc-";
/// The start of partial-download names: `.partial-<hash>-<url key>-u<uid>`.
pub const PARTIAL_PREFIX: &str = ".partial-";
/// The start of writability probe names: `.probe-<pid>-<random>`.
pub const PROBE_PREFIX: &str = ".probe-";
/// `<depot>/clima_partial`: files of artifacts fetched one by one (see [`partial_files_dir`]).
pub const PARTIAL_FILES: &str = "clima_partial";
/// The end of the name of the file that records how many files an artifact has, beside its
/// partial folder: `<depot>/clima_partial/<hash>.count`.
pub const PARTIAL_COUNT_SUFFIX: &str = ".count";
/// The mark of a partial file being written: `.<name>.clima-partial-<owner>`.
pub const PARTIAL_FILE_MARK: &str = ".clima-partial-";
/// In a project (not a depot): the folder of per-artifact recipe folders,
/// `artifacts/<name>/` next to the manifest, as CliMA's collection keeps them.
pub const PROJECT_RECIPES: &str = "artifacts";

/// `<depot>/artifacts`.
pub fn artifacts_dir(depot: &Path) -> PathBuf {
    depot.join(ARTIFACTS)
}

/// `<depot>/artifacts/<hash>`.
pub fn artifact_dir(depot: &Path, hash: &GitTreeSha1) -> PathBuf {
    artifacts_dir(depot).join(hash.to_hex())
}

/// `<depot>/artifacts/Overrides.toml`.
pub fn overrides_file(depot: &Path) -> PathBuf {
    artifacts_dir(depot).join(OVERRIDES)
}

/// `<depot>/logs`.
pub fn logs_dir(depot: &Path) -> PathBuf {
    depot.join(LOGS)
}

/// `<depot>/logs/artifact_usage.toml`.
pub fn usage_log(depot: &Path) -> PathBuf {
    logs_dir(depot).join(USAGE_LOG)
}

/// `<depot>/logs/orphaned.toml`.
pub fn orphan_log(depot: &Path) -> PathBuf {
    logs_dir(depot).join(ORPHAN_LOG)
}

/// The file name of Pkg 1.13's pidfile beside `file` (an artifact folder's or the usage
/// log's name): `<file>.pid`.
pub fn pidfile_name(file: &str) -> String {
    format!("{file}.pid")
}

/// The name of an entry of `<depot>/artifacts`, parsed: what [`Entry::parse`] returns and
/// [`Entry::name`] writes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry<'a> {
    /// `<hash>`: an installed artifact.
    Artifact(GitTreeSha1),
    /// `<hash>.pid`: Julia's install pidfile of an artifact.
    JuliaPidfile(GitTreeSha1),
    /// `<hash>.git-tree-sha256`: the git tree SHA-256 of an installed copy, once verified.
    TreeSha256Record(GitTreeSha1),
    /// `Overrides.toml`.
    Overrides,
    /// `.locks`, the folder of install locks.
    Locks,
    /// `.<hash>.clima-install-<owner>`: an install in progress (or left by a dead process).
    InstallTemp {
        /// The artifact being installed.
        artifact: GitTreeSha1,
        /// `<host>.<pid>.<random>`, see `clima_artifact_fs::temp_owner`.
        owner: &'a str,
    },
    /// `.<hash>.gc-<owner>`: an artifact gc renamed out of the way to delete it.
    GcTemp {
        /// The artifact being deleted.
        artifact: GitTreeSha1,
        /// `<host>.<pid>.<random>`.
        owner: &'a str,
    },
    /// `.partial-<hash>-<url key>-u<uid>`: the kept bytes of a download.
    Partial {
        /// The artifact downloaded.
        artifact: GitTreeSha1,
        /// The key of the URL it comes from.
        url_key: &'a str,
        /// The user it belongs to.
        uid: u32,
    },
    /// `.probe-<pid>-<random>`: a writability probe.
    Probe {
        /// `<pid>-<random>`.
        owner: &'a str,
    },
}

impl<'a> Entry<'a> {
    /// What the name `name` of an entry of `<depot>/artifacts` is, if it is one of ours or
    /// Julia's; `None` for anything else (which nothing of ours touches).
    pub fn parse(name: &'a str) -> Option<Entry<'a>> {
        let hash = |h: &str| GitTreeSha1::from_hex(h).ok();
        match name {
            OVERRIDES => return Some(Entry::Overrides),
            LOCKS => return Some(Entry::Locks),
            _ => {}
        }
        if let Some(rest) = name.strip_prefix(PARTIAL_PREFIX) {
            let (h, rest) = rest.split_once('-')?;
            let (url_key, uid) = rest.rsplit_once("-u")?;
            return Some(Entry::Partial {
                artifact: hash(h)?,
                url_key,
                uid: uid.parse().ok()?,
            });
        }
        if let Some(owner) = name.strip_prefix(PROBE_PREFIX) {
            return Some(Entry::Probe { owner });
        }
        if name.starts_with('.') {
            let temp = |mark| {
                let (h, owner) = clima_artifact_fs::split_temp_name(name, mark)?;
                Some((hash(h).filter(|_| h.len() == 40)?, owner))
            };
            if let Some((artifact, owner)) = temp(INSTALL_MARK) {
                return Some(Entry::InstallTemp { artifact, owner });
            }
            if let Some((artifact, owner)) = temp(GC_MARK) {
                return Some(Entry::GcTemp { artifact, owner });
            }
            return None;
        }
        if let Some(h) = name.strip_suffix(".pid") {
            return Some(Entry::JuliaPidfile(hash(h)?));
        }
        if let Some(h) = name.strip_suffix(TREE_SHA256_RECORD) {
            return Some(Entry::TreeSha256Record(hash(h)?));
        }
        (name.len() == 40)
            .then(|| hash(name))
            .flatten()
            .map(Entry::Artifact)
    }

    /// The file name this entry has in `<depot>/artifacts`.
    pub fn name(&self) -> String {
        match self {
            Entry::Artifact(h) => h.to_hex(),
            Entry::JuliaPidfile(h) => pidfile_name(&h.to_hex()),
            Entry::TreeSha256Record(h) => format!("{h}{TREE_SHA256_RECORD}"),
            Entry::Overrides => OVERRIDES.to_owned(),
            Entry::Locks => LOCKS.to_owned(),
            Entry::InstallTemp { artifact, owner } => {
                clima_artifact_fs::temp_name_of(&artifact.to_hex(), INSTALL_MARK, owner)
            }
            Entry::GcTemp { artifact, owner } => {
                clima_artifact_fs::temp_name_of(&artifact.to_hex(), GC_MARK, owner)
            }
            Entry::Partial {
                artifact,
                url_key,
                uid,
            } => format!("{PARTIAL_PREFIX}{artifact}-{url_key}-u{uid}"),
            Entry::Probe { owner } => format!("{PROBE_PREFIX}{owner}"),
        }
    }

    /// The artifact this entry belongs to, if any.
    pub fn artifact(&self) -> Option<GitTreeSha1> {
        match *self {
            Entry::Artifact(h)
            | Entry::JuliaPidfile(h)
            | Entry::TreeSha256Record(h)
            | Entry::InstallTemp { artifact: h, .. }
            | Entry::GcTemp { artifact: h, .. }
            | Entry::Partial { artifact: h, .. } => Some(h),
            Entry::Overrides | Entry::Locks | Entry::Probe { .. } => None,
        }
    }
}

/// `<depot>/clima_partial/<hash>`: the files of artifact `hash` fetched one by one, at their
/// paths in the artifact, when the artifact is not installed whole.
pub fn partial_files_dir(depot: &Path, hash: &GitTreeSha1) -> PathBuf {
    depot.join(PARTIAL_FILES).join(hash.to_hex())
}

/// `<depot>/artifacts/.locks/<hash>.lock`.
pub fn lock_file(depot: &Path, hash: &GitTreeSha1) -> PathBuf {
    artifacts_dir(depot)
        .join(LOCKS)
        .join(format!("{}.lock", hash.to_hex()))
}

/// `<depot>/artifacts/.locks/Overrides.toml.lock`: the lock every writer of the depot's
/// `Overrides.toml` (`override set`, `unset`, `mirror`) holds while it rewrites it.
pub fn overrides_lock_file(depot: &Path) -> PathBuf {
    artifacts_dir(depot)
        .join(LOCKS)
        .join(format!("{OVERRIDES}.lock"))
}

/// `<depot>/artifacts/<hash>.git-tree-sha256`: the record of the git tree SHA-256 of the
/// installed copy of `hash` (see the depot crate's `Depot::recorded_tree_sha256`).
pub fn tree_sha256_record(depot: &Path, hash: &GitTreeSha1) -> PathBuf {
    artifacts_dir(depot).join(Entry::TreeSha256Record(*hash).name())
}

/// `<depot>/logs/clima_override_checks.json`: the tree hashes `mirror --verify-overrides` found
/// for override folders, with each folder's size and time.
pub fn override_checks_file(depot: &Path) -> PathBuf {
    logs_dir(depot).join(OVERRIDE_CHECKS)
}

/// `<depot>/artifacts/<hash>.pid`: Julia 1.13's install pidfile of `hash`.
pub fn julia_pidfile(depot: &Path, hash: &GitTreeSha1) -> PathBuf {
    artifacts_dir(depot).join(Entry::JuliaPidfile(*hash).name())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_parses_back_from_its_name() {
        let h = GitTreeSha1::from_hex(&"ab".repeat(20)).unwrap();
        let all = [
            Entry::Artifact(h),
            Entry::JuliaPidfile(h),
            Entry::TreeSha256Record(h),
            Entry::Overrides,
            Entry::Locks,
            Entry::InstallTemp {
                artifact: h,
                owner: "node7.4242.00000000000000ff",
            },
            Entry::GcTemp {
                artifact: h,
                owner: "n.1.2",
            },
            Entry::Partial {
                artifact: h,
                url_key: "44573502db60dd3c",
                uid: 1000,
            },
            Entry::Probe { owner: "12-34" },
        ];
        for e in all {
            let name = e.name();
            assert_eq!(Entry::parse(&name), Some(e), "{name}");
        }
        assert_eq!(
            all[5].name(),
            format!(
                ".{}.clima-install-node7.4242.00000000000000ff",
                "ab".repeat(20)
            )
        );
    }

    #[test]
    fn temp_names_made_by_the_fs_crate_parse_as_their_entries() {
        // The form is written in one place (`clima_artifact_fs::temp_name_of`): a fresh temp
        // name of this process, made there, is the entry the layout reads.
        let h = GitTreeSha1::from_hex(&"cd".repeat(20)).unwrap();
        for (mark, gc) in [(INSTALL_MARK, false), (GC_MARK, true)] {
            let name = clima_artifact_fs::temp_name(&h.to_hex(), mark);
            let (_, owner) = clima_artifact_fs::split_temp_name(&name, mark).unwrap();
            let want = match gc {
                false => Entry::InstallTemp { artifact: h, owner },
                true => Entry::GcTemp { artifact: h, owner },
            };
            assert_eq!(Entry::parse(&name), Some(want), "{name}");
            assert_eq!(want.name(), name);
        }
    }

    #[test]
    fn names_that_are_not_ours_are_none() {
        for name in [
            "",
            "README",
            "zz",
            &"ab".repeat(21),
            &format!("{}.lock", "ab".repeat(20)),
            &format!(".{}.other-x", "ab".repeat(20)),
            ".partial-zz-1-u2",
            &format!(".partial-{}-k-uX", "ab".repeat(20)),
            ".hidden",
        ] {
            assert_eq!(Entry::parse(name), None, "{name}");
        }
    }
}
