//! The seekable tarball of a download entry read by byte ranges, for the runtime's two users:
//! the fetch of some files (`partial`) and the whole install that reuses files fetched before
//! (`install::reuse`): opening a download (HTTP through the network crate's checked ranges, or
//! a local file), the order downloads are tried in, and what a failure becomes.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use clima_artifact_extract::seekable::remote::{FIRST_TAIL, RangeSource, RemoteError};
use clima_artifact_manifest::{ArtifactVariant, Download};
use clima_artifact_net::NetError;
use clima_artifact_net::ranges::{RangeError, RemoteFile};
use clima_artifact_net::source::{self as download, Location};

use crate::{Config, Error, SourceFailure};

/// A tarball read by ranges: over HTTP, or a local file (`file://`, a path).
pub(crate) enum Ranges {
    Http(Box<RemoteFile>),
    Local { file: File, len: u64, url: String },
}

impl RangeSource for Ranges {
    type Error = RangeError;

    fn len(&self) -> u64 {
        match self {
            Ranges::Http(r) => r.len(),
            Ranges::Local { len, .. } => *len,
        }
    }

    fn read(&mut self, start: u64, len: u64) -> Result<Vec<u8>, RangeError> {
        match self {
            Ranges::Http(r) => r.read(start, len),
            Ranges::Local { file, url, .. } => {
                let mut buf = vec![0; usize::try_from(len).unwrap_or(0)];
                file.read_exact_at(&mut buf, start).map_err(|e| {
                    RangeError::Net(NetError::Transport {
                        url: url.clone(),
                        reason: format!("cannot read bytes {start}..+{len}: {e}"),
                        transient: false,
                    })
                })?;
                Ok(buf)
            }
        }
    }
}

impl Ranges {
    pub(crate) fn received(&self) -> u64 {
        match self {
            Ranges::Http(r) => r.received(),
            Ranges::Local { .. } => 0,
        }
    }
}

/// Why only some files could not be fetched from one download.
pub(crate) enum Refusal {
    /// Not possible from this source: install the whole artifact instead.
    Whole(String),
    /// This source failed: try the next one.
    Failed(SourceFailure),
    /// Not a matter of the source (a path the artifact does not have, a depot that refuses):
    /// the call fails.
    Fatal(Error),
}

/// The downloads of `variant` usable now, those that say they are seekable first.
pub(crate) fn ordered<'a>(
    variant: &'a ArtifactVariant,
    config: &Config,
    folder: &Path,
) -> Vec<&'a Download> {
    let network = |url: &str| matches!(download::locate(url, folder), Location::Http(_));
    let mut usable: Vec<&Download> = variant
        .downloads
        .iter()
        .filter(|d| !config.offline || !network(&d.url))
        .collect();
    usable.sort_by_key(|d| d.index_sha256.is_none());
    usable
}

/// Opens `dl` for reading by ranges: its last bytes and the source.
pub(crate) fn open(
    dl: &Download,
    folder: &Path,
    config: &Config,
) -> Result<(Ranges, Vec<u8>), Refusal> {
    let failed = |error: NetError| Refusal::Failed(SourceFailure::Net { error, attempts: 1 });
    match download::locate(&dl.url, folder) {
        Location::File(path) => {
            let file = File::open(&path).map_err(|e| {
                failed(NetError::LocalSource {
                    url: dl.url.clone(),
                    path: path.clone(),
                    cause: e.into(),
                })
            })?;
            let len = file.metadata().map(|m| m.len()).unwrap_or(0);
            let mut src = Ranges::Local {
                file,
                len,
                url: dl.url.clone(),
            };
            let n = len.min(FIRST_TAIL);
            let tail = src.read(len - n, n).map_err(range_refusal)?;
            Ok((src, tail))
        }
        Location::Unsupported(reason) => Err(failed(NetError::UnsupportedUrl {
            url: dl.url.clone(),
            reason,
        })),
        Location::Http(_) => {
            let agent = download::agent(&config.net).map_err(failed)?;
            let (file, tail) = RemoteFile::open(&agent, &dl.url, &config.net, FIRST_TAIL)
                .map_err(range_refusal)?;
            Ok((Ranges::Http(Box::new(file)), tail))
        }
    }
}

/// What a failure to read a range becomes: no ranges, the whole artifact; else a failure of
/// the source (its error names the URL).
fn range_refusal(e: RangeError) -> Refusal {
    match e {
        RangeError::NoRanges { .. } => Refusal::Whole(e.to_string()),
        RangeError::Net(error) => Refusal::Failed(SourceFailure::Net { error, attempts: 1 }),
    }
}

/// What a failure while reading the tarball of `url` becomes.
pub(crate) fn remote_refusal(url: &str, e: RemoteError<RangeError>) -> Refusal {
    match e {
        RemoteError::Source(e) => range_refusal(e),
        RemoteError::Index(e) => Refusal::Failed(SourceFailure::Archive {
            url: url.to_owned(),
            reason: format!("the seekable tarball, read by byte ranges: {e}"),
        }),
    }
}
