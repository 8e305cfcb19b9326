//! The one-pass install pipeline.
//!
//! An [`Install`] is built once for one variant (from [`Config`], the variant and the place
//! of its manifest) and decides, in this order ([`Install::ensure`]):
//!
//! 1. an override (`Overrides.toml` of any depot) -> use its path; never hashed, never downloaded;
//! 2. `artifacts/<hash>` exists in any depot -> use it (an existence check, nothing is hashed;
//!    for an entry with a `git-tree-sha256`, its recorded SHA-256 tree hash must be the
//!    entry's, or the copy is hashed once and the result recorded: `sha256_copy`);
//! 3. no `[[name.download]]` -> [`Error::NoDownloads`] with the exact `Overrides.toml` line to add;
//! 4. offline (`CLIMA_ARTIFACTS_OFFLINE=1`): network (`http(s)://`) sources are skipped; local
//!    paths and `file://` URLs are still used. No source left -> [`Error::Offline`], naming the
//!    URLs it would have used;
//! 5. lock `artifacts/.locks/<hash>.lock` in the first writable depot, look again (another process
//!    may have finished meanwhile: then as in 2), reclaim temp dirs of dead processes (the
//!    depot's staging);
//! 6. files of the artifact the depots hold already (fetched alone before, or of another
//!    version) -> copied, checked, and only the rest fetched by ranges (`reuse`);
//! 7. else each source in order, transient failures retried with backoff (`attempt`):
//!
//! ```text
//!  reader thread                         |  calling thread
//!  source (HTTP / file) -> SHA-256 ----> bounded channel of 256 KiB buffers
//!                                        |  -> extract (gunzip/zstd, reading those buffers
//!                                        |     in place -> tar -> a writer thread creates
//!                                        |     the files in artifacts/.<hash>.clima-install-
//!                                        |     <host>.<pid>.<rand>/ and hashes every blob)
//!                                        |  -> drain the source to its end
//!                                        |  -> compare sha256, compare git-tree-sha1
//!                                        |  -> rename to artifacts/<hash>
//! ```
//!
//! (a seekable tarball is unpacked on every core instead, its index read first when it can be:
//! `streamed`, else `seekable`). Each step is a stage of its own that this module calls:
//! `sha256_copy` (the check of a copy found), the depot's `Staging` (locks, temp dirs, partial
//! downloads, the rename), `reuse`, `attempt` (the sources, their retries, one attempt's stream
//! and checks, and the stages under it). They take what they need from the `Install` and the
//! staging they are handed; none calls a step of this module back (`reuse` only finds the
//! manifest's folder with [`ManifestPlace::of`]). Steps 1-2 and 5 are also what the other entry
//! points ask: [`Install::found`] (`Artifacts`, node-local mode, the sub-path fetch) and
//! [`Install::lock`] (the sub-path fetch). Bytes received over MPI are installed by
//! [`Install::receive`], with the same staging and checks.
//!
//! Reading (network, TLS, SHA-256), decompression and writing (with SHA-1) run on three threads
//! that share the cores; memory stays constant (at most a few buffers in flight). Nothing
//! unverified ever appears at a final path: a failed attempt removes its temp dir, a killed process
//! leaves one that the next install in the same depot removes (its pid is dead and nobody holds its
//! artifact's lock; only temp dirs of this host are considered). If the final path already exists
//! when renaming, another process won the race: that is success.

mod attempt;
mod reuse;
mod seekable;
mod sha256_copy;
mod streamed;
mod transfer;

use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::Instant;

use clima_artifact_manifest::{ArtifactVariant, Download};
use clima_artifact_net::ranged::Kept;
use clima_artifact_net::source as download;
use clima_artifact_net::{Body, Tap};

use crate::Installed;
use crate::extract::{ExtractError, extract_buffered_at};
use crate::{Config, Error, Sha256, SourceFailure};
use clima_artifact_depot::notice::DepotEvent;
use clima_artifact_depot::{Depot, Stage, Staged, Staging, TempDir, Wait, first_writable, lookup};

pub(crate) use crate::config::suggested_overrides_file;
pub(crate) use attempt::check_room;
use attempt::{Attempt, InstallRequest};

/// Makes one artifact variant available: override, else an installed copy in any depot, else a
/// verified download into the first writable depot. The core every higher-level API calls
/// (the `Artifacts` API, the `clima_artifact!` macro's static path, the MPI root).
///
/// `manifest` is the manifest file the variant comes from (named in messages, so a manifest
/// called `MyArtifacts.toml` is reported as such), or its folder (then the messages name the
/// `JuliaArtifacts.toml`/`Artifacts.toml` found there); relative download paths resolve against
/// its folder. `name` is used in messages.
pub fn ensure_variant(
    name: &str,
    variant: &ArtifactVariant,
    manifest: &Path,
    config: &Config,
) -> Result<Installed, Error> {
    let install = Install::new(name, variant, manifest, config);
    install.ensure(None)
}

/// Where the bytes of a download go besides its own install (node-local mode's fan-out over
/// MPI): every attempt that opens a source starts a [`Tap`], which sees every byte the
/// SHA-256 sees, in order.
pub(crate) trait Taps: Sync {
    /// An attempt starts reading `download` (its `sha256`: the one checked, if any;
    /// `length`: the byte count the source announced or the manifest declared).
    fn start(&self, download: &Fetch, length: Option<u64>) -> Box<dyn Tap>;
    /// Whether the receivers stopped the stream: no further attempt or retry is made.
    fn stopped(&self) -> bool;
}

/// One install of one artifact variant: what every step of it needs, decided once.
pub(crate) struct Install<'a> {
    /// The artifact's name, for messages.
    name: &'a str,
    variant: &'a ArtifactVariant,
    /// Where its manifest is.
    manifest: ManifestPlace,
    config: &'a Config,
    /// Every depot searched for it, in order.
    depots: Vec<Depot>,
}

impl<'a> Install<'a> {
    /// The install of `variant` of artifact `name` from `manifest` (the file or its folder,
    /// see [`ensure_variant`]) with `config`.
    pub(crate) fn new(
        name: &'a str,
        variant: &'a ArtifactVariant,
        manifest: &Path,
        config: &'a Config,
    ) -> Install<'a> {
        Install {
            name,
            variant,
            manifest: ManifestPlace::of(manifest),
            config,
            depots: config.search_depots(),
        }
    }

    /// Where the manifest is: the file named in messages and recorded with the access, and
    /// the folder relative download paths resolve against.
    pub(crate) fn manifest(&self) -> &ManifestPlace {
        &self.manifest
    }

    /// Every depot searched for the artifact, in order.
    pub(crate) fn depots(&self) -> &[Depot] {
        &self.depots
    }

    /// [`ensure_variant`], handing the bytes of every download attempt to `taps` as well
    /// (which then needs the whole stream: no files held are reused).
    pub(crate) fn ensure(&self, taps: Option<&dyn Taps>) -> Result<Installed, Error> {
        if let Some(found) = self.found()? {
            return Ok(found);
        }
        let allowed = self.sources()?;
        match self.lock()? {
            Locked::Ready(staging) => self.install(*staging, &allowed, taps),
            Locked::Installed(found) => Ok(found),
        }
    }

    /// The override or installed copy that may be used, if any (steps 1 and 2): never
    /// downloads; for an entry that gives a `git-tree-sha256`, a copy found is checked
    /// (`sha256_copy`).
    pub(crate) fn found(&self) -> Result<Option<Installed>, Error> {
        lookup(&self.variant.git_tree_sha1, &self.depots)?
            .map(|found| sha256_copy::usable(self.name, self.variant, found, self.config))
            .transpose()
    }

    /// The staging of the artifact with its locks held, waiting for another holder (step 5),
    /// or the copy that another process installed meanwhile, checked as in
    /// [`Install::found`].
    pub(crate) fn lock(&self) -> Result<Locked, Error> {
        match self.staging(true)? {
            Staged::Ready(staging) => Ok(Locked::Ready(staging)),
            Staged::Installed(found) => {
                sha256_copy::usable(self.name, self.variant, found, self.config)
                    .map(Locked::Installed)
            }
            // Not when waiting: a holder is waited for, or the wait is an error.
            Staged::Busy => Err(self.busy()),
        }
    }

    /// The downloads of the variant that may be used now: offline, only network sources are
    /// skipped (a local path or `file://` URL is no network access, so such sources still
    /// install: the quickstart ships its data that way).
    fn sources(&self) -> Result<Vec<&'a Download>, Error> {
        let (name, hash) = (self.name, self.variant.git_tree_sha1);
        if self.variant.downloads.is_empty() {
            return Err(Error::NoDownloads {
                name: name.to_owned(),
                hash,
                manifest: self.manifest.file.clone(),
                overrides_file: suggested_overrides_file(self.config),
            });
        }
        let (allowed, skipped): (Vec<_>, Vec<_>) = self
            .variant
            .downloads
            .iter()
            .partition(|d| !self.config.offline || !is_network(&d.url, &self.manifest.folder));
        if allowed.is_empty() {
            return Err(Error::Offline {
                name: name.to_owned(),
                hash,
                depots: self.depots.iter().map(|d| d.root().to_path_buf()).collect(),
                urls: skipped.iter().map(|d| d.url.clone()).collect(),
            });
        }
        Ok(allowed)
    }

    /// Asks the first writable depot for the staging of the artifact (the install's one
    /// question to the depot): its locks, held until the install ends (waiting for another
    /// holder when `wait`: our lock, then Julia's pidfile), another look in every depot
    /// (another process may have installed it meanwhile) and the reclamation of what dead
    /// installs left.
    fn staging(&self, wait: bool) -> Result<Staged, Error> {
        let config = self.config;
        let stage = Stage {
            name: self.name,
            search: &self.depots,
            wait: wait.then_some(Wait {
                timeout: config.lock_timeout,
                tell: config.progress,
            }),
            reporting: config.reporting(),
        };
        let depot = first_writable(&config.depots, self.name)?;
        Ok(depot.stage(&self.variant.git_tree_sha1, stage)?)
    }

    /// The install through `staging` from `allowed` (the downloads usable now): files held
    /// reused with only the rest fetched (not when the bytes also go to other nodes through
    /// `taps`: they need the whole stream), else the sources tried in order.
    fn install(
        &self,
        staging: Staging,
        allowed: &[&Download],
        taps: Option<&dyn Taps>,
    ) -> Result<Installed, Error> {
        let target = InstallTarget::new(staging, self.name, self.config);
        if taps.is_none()
            && let Some(installed) = reuse::install_reusing(
                self.name,
                self.variant,
                &self.manifest.file,
                self.config,
                &target.staging,
            )?
        {
            return Ok(installed);
        }
        attempt::download(self, allowed, target, taps)
    }

    /// Installs the variant on `node` from the tarball bytes of `reader` (received over MPI,
    /// see [`Incoming`]) into the first writable depot, with the same checks as a download:
    /// the lock, another look, room for `length`, SHA-256 (when known), safe extraction, tree
    /// hash, rename. `Ok` with [`Origin::Depot`](crate::Origin::Depot) when the artifact
    /// turned out to be installed already; `Ok(None)`, reading nothing, when another installer
    /// holds the artifact's lock in that depot (a node or process sharing it: waiting here
    /// could wait for the very sender of these bytes), after which [`Install::ensure`] waits
    /// for that installer and uses its copy (or, should it fail, downloads the artifact
    /// itself).
    pub(crate) fn receive(
        &self,
        node: &str,
        incoming: &Incoming,
        reader: Box<dyn Read + Send>,
    ) -> Result<Option<Installed>, Error> {
        let found = match self.staging(false)? {
            Staged::Ready(staging) => {
                let target = InstallTarget::received(*staging);
                return attempt::receive(self, target, (node, incoming, reader)).map(Some);
            }
            Staged::Installed(found) => found,
            Staged::Busy => return Ok(None),
        };
        sha256_copy::usable(self.name, self.variant, found, self.config).map(Some)
    }

    /// The error of a waiting [`Install::staging`] that came back busy, which it never does.
    fn busy(&self) -> Error {
        let (name, hash) = (self.name, self.variant.git_tree_sha1);
        Error::Internal {
            message: format!(
                "the staging of artifact `{name}` ({hash}) was busy although it waited; please \
                 report this"
            ),
        }
    }
}

/// What [`Install::lock`] found.
pub(crate) enum Locked {
    /// The locks are held: install through this staging.
    Ready(Box<Staging>),
    /// Another process (ours or Julia's) installed the artifact while this one waited, or
    /// before it took the locks: its copy, checked.
    Installed(Installed),
}

/// What a node that receives an artifact's bytes over MPI is told about them.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Incoming {
    /// The node that sends them.
    pub(crate) from_node: String,
    /// The URL the sender reads them from (without credentials), or `None` for a copy of its
    /// installed artifact.
    pub(crate) url: Option<String>,
    /// The SHA-256 they must have, when it is known (a manifest URL's download).
    pub(crate) sha256: Option<Sha256>,
    /// How many bytes come, when known.
    pub(crate) length: Option<u64>,
    /// The entry's `index-sha256` when they are a seekable tarball of a manifest URL: the
    /// node then unpacks them on every core, as the sender does (`seekable.rs`).
    #[serde(default)]
    pub(crate) index_sha256: Option<Sha256>,
}

/// An install's staging in its depot, and what the install says about it.
struct InstallTarget {
    /// The locks, the temp dirs, the partial downloads and the final rename.
    staging: Staging,
    /// Said once when a partial file is kept where the next job may not find it.
    partials_note: Option<DepotEvent>,
}

impl InstallTarget {
    /// The target of a download through `staging`. In node-local mode (the staging is in the
    /// node depot, which the end of a job may wipe), the download's partial file goes to the
    /// first writable shared depot of `config`, so that the next job continues it; without
    /// one (or while another installer holds its lock) it stays in the node depot, and the
    /// note says so.
    fn new(mut staging: Staging, name: &str, config: &Config) -> InstallTarget {
        let node = staging.depot().clone();
        let mut partials_note = None;
        if config.node_local_depot.as_ref() == Some(&node) {
            let mut shared = config.depots.clone();
            shared.retain(|d| *d != node);
            if let Err(why) = staging.keep_partials_in(&shared) {
                partials_note = Some(DepotEvent::PartialOnNode {
                    artifact: name.to_owned(),
                    depot: node.root().to_path_buf(),
                    why,
                });
            }
        }
        InstallTarget {
            staging,
            partials_note,
        }
    }

    /// The target of an install of bytes received over MPI (which keeps no partial file).
    fn received(staging: Staging) -> InstallTarget {
        InstallTarget {
            staging,
            partials_note: None,
        }
    }
}

/// Whether fetching `url` would use the network (`http(s)://`); local paths, `file://` URLs
/// and unsupported schemes (which fail without any access) are not.
pub(crate) fn is_network(url: &str, manifest_dir: &Path) -> bool {
    matches!(
        download::locate(url, manifest_dir),
        download::Location::Http(_)
    )
}

/// Where the manifest of a variant is, decided once: the file that messages name, and the
/// folder that relative download paths resolve against.
#[derive(Debug, Clone)]
pub(crate) struct ManifestPlace {
    /// The manifest file (named in messages).
    pub(crate) file: PathBuf,
    /// Its folder.
    pub(crate) folder: PathBuf,
}

impl ManifestPlace {
    /// `manifest` is the manifest file, or a folder: then the file is its
    /// `JuliaArtifacts.toml` or `Artifacts.toml` (the first that exists; `Artifacts.toml` if
    /// neither does).
    pub(crate) fn of(manifest: &Path) -> ManifestPlace {
        if manifest.is_file() {
            let folder = manifest.parent().unwrap_or(Path::new("."));
            return ManifestPlace {
                file: manifest.to_path_buf(),
                folder: folder.to_path_buf(),
            };
        }
        let file = clima_artifact_manifest::Manifest::candidates(manifest)
            .into_iter()
            .find(|p| p.is_file())
            .unwrap_or_else(|| manifest.join("Artifacts.toml"));
        ManifestPlace {
            file,
            folder: manifest.to_path_buf(),
        }
    }
}

/// What an attempt reads: a URL, the SHA-256 its bytes must have when one is known (a manifest
/// URL's; not the package server's, nor an installed copy's sent over MPI, which the tree
/// hash alone verifies), and the size declared.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Fetch {
    pub(crate) url: String,
    pub(crate) sha256: Option<Sha256>,
    pub(crate) size: Option<u64>,
    /// The entry's `index-sha256`: a seekable tarball, installed on every core.
    pub(crate) index_sha256: Option<Sha256>,
}

impl From<&Download> for Fetch {
    fn from(dl: &Download) -> Fetch {
        Fetch {
            url: dl.url.clone(),
            sha256: Some(dl.sha256),
            size: dl.size,
            index_sha256: dl.index_sha256,
        }
    }
}
