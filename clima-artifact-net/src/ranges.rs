//! Byte ranges of a remote file, each checked: what reading only some files of a seekable
//! tarball needs (its footer, its index, the members of the files a run reads).
//!
//! [`RemoteFile::open`] asks for the file's last bytes with a suffix range
//! (`Range: bytes=-N`); the answer fixes the file's total size, the URL it ends at after its
//! redirects, and its validator (a strong ETag, else Last-Modified). Every later
//! [`RemoteFile::read`] asks that URL for `bytes=a-b` under `If-Range` with the validator.
//! Each answer must be:
//!
//! - `206 Partial Content` with a `Content-Range` that is exactly the range asked for, and the
//!   same total size as the first answer (a file that changed size, or a server that answers
//!   with other bytes than those asked for, is refused with an error naming the URL);
//! - a body of exactly that many bytes: more is never read (the body is cut one byte past
//!   the range and refused), fewer is a body cut short (transient, asked again).
//!
//! A `200` to a range request means the server does not serve ranges (or, under `If-Range`,
//! that the file changed): [`RangeError::NoRanges`], on which the caller falls back to
//! downloading the whole file. Transient failures (resets, stalls, bodies cut short, 5xx, 429,
//! 408) are asked again as [`crate::retry::RetryPolicy::next_attempt`] says.
//!
//! This module knows nothing of tarballs: the bytes are verified by their reader (the
//! extraction crate's `seekable::remote`, against the authenticated index), which is also
//! what catches a server that answers a range with the right `Content-Range` but other bytes.

use std::io::Read;

use crate::source::{CheckedLength, get_following_redirects, header, validator_of};
use crate::trust::redact_url;
use crate::{NetConfig, NetError};

/// Why a range could not be read.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RangeError {
    /// The server answered a range request with the whole file (`200`): it does not serve
    /// ranges, or the file changed since the first request. Download the whole file instead.
    #[error(
        "`{}` answered a range request with the whole file (HTTP 200): the server does not \
         serve byte ranges{}",
        redact_url(url),
        if *changed { ", or the file changed on the server since the first request" } else { "" }
    )]
    NoRanges {
        /// The URL, as given.
        url: String,
        /// Whether the request was made under `If-Range` (the file may have changed).
        changed: bool,
    },
    /// Reaching or reading the server failed, or its answer was not the range asked for.
    #[error(transparent)]
    Net(#[from] NetError),
}

impl RangeError {
    /// Whether asking again may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, RangeError::Net(e) if e.is_transient())
    }
}

/// A remote file read by byte ranges (see the module's documentation).
#[derive(Debug)]
pub struct RemoteFile {
    agent: ureq::Agent,
    config: NetConfig,
    /// The URL as given (named in errors, without credentials when printed).
    url: String,
    /// The URL the first request ended at after its redirects.
    answered: String,
    /// The first answer's validator, sent as `If-Range`.
    validator: Option<String>,
    /// The file's size, from the first answer's `Content-Range`.
    total: u64,
    /// Body bytes received so far (all requests).
    received: u64,
    /// Requests answered so far.
    requests: u64,
}

/// `Content-Range: bytes a-b/total` of `resp`.
fn content_range(resp: &ureq::http::Response<ureq::Body>) -> Option<(u64, u64, u64)> {
    let v = header(resp, "content-range")?;
    let (range, total) = v.strip_prefix("bytes ")?.split_once('/')?;
    let (a, b) = range.split_once('-')?;
    Some((a.parse().ok()?, b.parse().ok()?, total.parse().ok()?))
}

/// What one range request asks for.
#[derive(Debug, Clone, Copy)]
enum Ask {
    /// The last `n` bytes (all of a shorter file).
    Suffix(u64),
    /// `len` bytes from `start` (`len` at least 1).
    Span { start: u64, len: u64 },
}

impl Ask {
    fn header(self) -> String {
        match self {
            Ask::Suffix(n) => format!("bytes=-{n}"),
            Ask::Span { start, len } => format!("bytes={start}-{}", start + len - 1),
        }
    }
}

impl RemoteFile {
    /// Opens `url` (an `http(s)://` URL) by asking for its last `suffix` bytes (at least 1):
    /// returns the file and those bytes (all of the file when it is shorter).
    pub fn open(
        agent: &ureq::Agent,
        url: &str,
        config: &NetConfig,
        suffix: u64,
    ) -> Result<(RemoteFile, Vec<u8>), RangeError> {
        let mut file = RemoteFile {
            agent: agent.clone(),
            config: config.clone(),
            url: url.to_owned(),
            answered: url.to_owned(),
            validator: None,
            total: 0,
            received: 0,
            requests: 0,
        };
        let tail = file.retrying(Ask::Suffix(suffix.max(1)))?;
        Ok((file, tail))
    }

    /// The file's size in bytes.
    pub fn len(&self) -> u64 {
        self.total
    }

    /// Whether the file is empty.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// The URL as given.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Body bytes received so far, all requests together.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// Range requests answered so far.
    pub fn requests(&self) -> u64 {
        self.requests
    }

    /// Another reader of the same file, for a connection of its own: it asks the URL the first
    /// answer ended at, under the same validator, and checks every answer against the same
    /// total size; its counters start at zero (see [`RemoteFile::add_counts`]).
    pub fn another(&self) -> RemoteFile {
        RemoteFile {
            agent: self.agent.clone(),
            config: self.config.clone(),
            url: self.url.clone(),
            answered: self.answered.clone(),
            validator: self.validator.clone(),
            total: self.total,
            received: 0,
            requests: 0,
        }
    }

    /// Adds the bytes received and requests answered of `other` (made by
    /// [`RemoteFile::another`]) to this reader's counters.
    pub fn add_counts(&mut self, other: &RemoteFile) {
        self.received += other.received;
        self.requests += other.requests;
    }

    /// The `len` bytes of the file from byte `start` (`len` 0 asks nothing). A range past the
    /// end of the file is an error before any request.
    pub fn read(&mut self, start: u64, len: u64) -> Result<Vec<u8>, RangeError> {
        if len == 0 {
            return Ok(Vec::new());
        }
        if start.checked_add(len).is_none_or(|end| end > self.total) {
            return Err(self.refused(format!(
                "bytes {start}..+{len} were asked of a file of {} bytes",
                self.total
            )));
        }
        self.retrying(Ask::Span { start, len })
    }

    fn refused(&self, reason: String) -> RangeError {
        RangeError::Net(NetError::Transport {
            url: self.url.clone(),
            reason,
            transient: false,
        })
    }

    /// [`RemoteFile::once`], asked again after transient failures as the retry policy says.
    fn retrying(&mut self, ask: Ask) -> Result<Vec<u8>, RangeError> {
        let mut failed = 0;
        loop {
            match self.once(ask) {
                Ok(bytes) => return Ok(bytes),
                Err(e) => {
                    failed += 1;
                    match self.config.retry.next_attempt(failed, e.is_transient()) {
                        Some(wait) => std::thread::sleep(wait),
                        None => return Err(e),
                    }
                }
            }
        }
    }

    /// One request for `ask`, its answer checked.
    fn once(&mut self, ask: Ask) -> Result<Vec<u8>, RangeError> {
        // The first answer fixes the total (never 0); a reader made by `another` has it.
        let first = self.total == 0;
        let mut headers = vec![("Range", ask.header())];
        if let Some(v) = &self.validator {
            headers.push(("If-Range", v.clone()));
        }
        let target = self.answered.clone();
        let reply =
            get_following_redirects(&self.agent, &self.url, &target, &self.config, &headers)?;
        let resp = reply.resp;
        let status = resp.status().as_u16();
        match status {
            206 => {}
            200 => {
                return Err(RangeError::NoRanges {
                    url: self.url.clone(),
                    changed: !first,
                });
            }
            status => {
                return Err(RangeError::Net(NetError::HttpStatus {
                    url: self.url.clone(),
                    status,
                }));
            }
        }
        let got = content_range(&resp);
        let (start, len) = match (ask, got) {
            (Ask::Suffix(n), Some((a, b, total))) if first && total > 0 => {
                let want = n.min(total);
                if (a, b) != (total - want, total - 1) {
                    return Err(self.wrong_range(&ask, &resp));
                }
                self.total = total;
                self.answered = reply.answered.clone();
                self.validator = validator_of(&resp);
                (a, want)
            }
            (Ask::Span { start, len }, Some((a, b, total)))
                if (a, b) == (start, start + len - 1) && total == self.total =>
            {
                if let (Some(was), Some(now)) = (&self.validator, validator_of(&resp))
                    && *was != now
                {
                    return Err(self.refused(format!(
                        "the server answered bytes {start}-{} with another ETag or \
                         Last-Modified ({now}) than the first answer ({was}): the file changed \
                         on the server",
                        start + len - 1
                    )));
                }
                (start, len)
            }
            _ => return Err(self.wrong_range(&ask, &resp)),
        };
        let body = resp.into_body().into_reader();
        let mut reader = CheckedLength::new(body, Some(len), Some(reply.permit)).take(len + 1);
        let mut out = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
        reader.read_to_end(&mut out).map_err(|e| {
            let transient = crate::retry::is_transient_io(&e);
            RangeError::Net(NetError::Transport {
                url: self.url.clone(),
                reason: format!(
                    "reading bytes {start}-{}: {}",
                    start + len - 1,
                    crate::source::describe_io(&e, &self.config)
                ),
                transient,
            })
        })?;
        self.received += out.len() as u64;
        self.requests += 1;
        if out.len() as u64 != len {
            return Err(self.refused(format!(
                "the server sent {} bytes for the {len} bytes from byte {start} it announced",
                out.len()
            )));
        }
        Ok(out)
    }

    /// The error of an answer whose `Content-Range` is not the range asked for.
    fn wrong_range(&self, ask: &Ask, resp: &ureq::http::Response<ureq::Body>) -> RangeError {
        let said = header(resp, "content-range").unwrap_or_else(|| "(none)".into());
        let total = if self.total > 0 {
            format!(" of a file of {} bytes", self.total)
        } else {
            String::new()
        };
        self.refused(format!(
            "asked for `{}`{total}, the server answered `Content-Range: {}`: it does not serve \
             the byte ranges it is asked for (or the file changed)",
            ask.header(),
            clima_artifact_fs::printable(&said)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;

    /// A loopback server of a 100-byte file with an ETag, one request per connection: the
    /// first request (a suffix range) is answered `206`, every later one under `If-Range: "v1"`
    /// `200` with the whole file (the file changed, as a server honouring `If-Range` says it),
    /// and one without that validator `400`.
    fn serve_then_whole() -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/a.tar.gz", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for (n, stream) in listener.incoming().enumerate() {
                let Ok(mut stream) = stream else { return };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let (mut line, mut if_range) = (String::new(), false);
                while reader.read_line(&mut line).is_ok_and(|k| k > 2) {
                    if_range |= line.eq_ignore_ascii_case("if-range: \"v1\"\r\n");
                    line.clear();
                }
                let body = [7u8; 100];
                let head = match (n, if_range) {
                    (0, _) => "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 90-99/100\r\n\
                               Content-Length: 10\r\n"
                        .to_owned(),
                    (_, true) => "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n".to_owned(),
                    // Without the validator: not the answer the test looks for.
                    (_, false) => "HTTP/1.1 400 Bad Request\r\nContent-Length: 100\r\n".to_owned(),
                };
                let body = if n == 0 { &body[90..] } else { &body[..] };
                let _ = write!(stream, "{head}ETag: \"v1\"\r\nConnection: close\r\n\r\n");
                let _ = stream.write_all(body);
            }
        });
        url
    }

    /// A reader made for another connection asks under the first answer's validator, and a
    /// `200` to it says the file may have changed, as the first reader's would.
    #[test]
    fn another_reader_keeps_the_first_answers_validator_and_size() {
        let url = serve_then_whole();
        let config = NetConfig::default();
        let agent = crate::source::agent(&config).unwrap();
        let (first, tail) = RemoteFile::open(&agent, &url, &config, 10).unwrap();
        assert_eq!((first.len(), tail.len()), (100, 10));
        let mut other = first.another();
        assert_eq!(other.len(), 100);
        match other.read(0, 10) {
            Err(RangeError::NoRanges { changed, .. }) => {
                assert!(changed, "a 200 under If-Range may be a changed file")
            }
            e => panic!("{e:?}"),
        }
    }
}
