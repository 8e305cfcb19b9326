//! The archive's HTTP client: the bearer token, one JSON request or one streamed upload at a
//! time, retried by the retry policy of downloads ([`clima_artifact_net::retry`]: transient
//! failures, and the 429 rule with `Retry-After`), `401`/`403` naming the token variable. The
//! time bounds of an exchange are in module `bounds`.

use std::io::{self, Read};
use std::time::Duration;

use clima_artifact_fs::printable;
use clima_artifact_net::retry::{RetryPolicy, is_transient_io, is_transient_status, retry_after};
use serde_json::Value;

use super::api::{Upload, http_error};
use super::bounds::{over_budget, upload_budget};
use super::error::from_ops;
use super::progress::{Counted, Progress};
use super::{ArchiveError, ArchiveEvent};
use clima_artifact_runtime::progress::Reporting;

/// The archive's HTTP client: bearer token, retries, `Retry-After`.
pub(super) struct Client<'a> {
    pub(super) base: String,
    pub(super) token: String,
    pub(super) agent: ureq::Agent,
    pub(super) retry: RetryPolicy,
    /// The bound of one exchange ([`PublishRequest::timeout`](super::PublishRequest::timeout)).
    pub(super) timeout: Duration,
    /// The longest a write may wait for the archive to take bytes (the stall timeout).
    pub(super) stall: Duration,
    pub(super) reporting: &'a Reporting,
}

/// One request's outcome before classification.
pub(super) enum Outcome {
    Answer(u16, Option<Duration>, Value),
    Broken(io::Error),
}

impl<'a> Client<'a> {
    pub(super) fn new(
        base: &str,
        token: &str,
        timeout: Duration,
        reporting: &'a Reporting,
    ) -> Result<Client<'a>, ArchiveError> {
        let net = crate::depots::config().map_err(from_ops)?.net;
        let agent = clima_artifact_net::source::agent(&net)
            .map_err(|e| ArchiveError::Input(e.to_string()))?;
        Ok(Client {
            base: base.to_owned(),
            token: token.to_owned(),
            agent,
            retry: net.retry,
            timeout,
            stall: net.stall_timeout,
            reporting,
        })
    }

    /// Sends one request, `body` made fresh for each try; retries transient failures and
    /// waits out `429`; `401`/`403` are errors naming the token variable.
    pub(super) fn send(
        &self,
        what: &str,
        attempt: &mut dyn FnMut() -> Outcome,
    ) -> Result<(u16, Value), ArchiveError> {
        let mut failed = 0u32;
        let mut throttled = 0u32;
        loop {
            let (transient, reason) = match attempt() {
                Outcome::Answer(429, retry_after, body) => {
                    throttled += 1;
                    let Some(wait) = self.retry.next_after_throttle(throttled, retry_after) else {
                        return Err(http_error(what, 429, &body));
                    };
                    self.reporting.emit(ArchiveEvent::Throttled {
                        archive: self.base.clone(),
                        what: what.to_owned(),
                        wait,
                    });
                    std::thread::sleep(wait);
                    continue;
                }
                Outcome::Answer(status @ (401 | 403), _, body) => {
                    return Err(ArchiveError::Unauthorized {
                        status,
                        archive: self.base.clone(),
                        message: body["message"]
                            .as_str()
                            .map(|m| printable(m).into_owned())
                            .unwrap_or_default(),
                    });
                }
                Outcome::Answer(status, _, body) if is_transient_status(status) => (
                    true,
                    format!("{status} {}", body["message"].as_str().unwrap_or("")),
                ),
                Outcome::Answer(status, _, body) => return Ok((status, body)),
                Outcome::Broken(e) => (is_transient_io(&e), e.to_string()),
            };
            failed += 1;
            let reason = printable(reason.trim()).into_owned();
            match self.retry.next_attempt(failed, transient) {
                Some(wait) => {
                    self.reporting.emit(ArchiveEvent::Retrying {
                        what: what.to_owned(),
                        reason: reason.clone(),
                        wait,
                        attempt: failed + 1,
                        attempts: self.retry.attempts,
                    });
                    std::thread::sleep(wait);
                }
                None => {
                    return Err(ArchiveError::Http {
                        what: what.to_owned(),
                        status: 0,
                        message: format!("{reason} (after {failed} tries)"),
                    });
                }
            }
        }
    }

    /// A JSON request to `path` (under the archive's URL).
    pub(super) fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(u16, Value), ArchiveError> {
        self.call_making(method, path, body, &|| None)
    }

    /// [`Client::call`] for a request that makes something (a new record): a try without an
    /// answer (a broken connection, a `5xx`) may have made it all the same, so before the next
    /// try `made` is asked for what the lost answer would have said; found, that is the answer
    /// (`201`) and the request is not sent again.
    pub(super) fn call_making(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        made: &dyn Fn() -> Option<Value>,
    ) -> Result<(u16, Value), ArchiveError> {
        let url = format!("{}{path}", self.base);
        let what = format!("{method} {url}");
        let text = body.map(Value::to_string);
        let mut unanswered = false;
        self.send(&what, &mut || {
            if unanswered && let Some(found) = made() {
                return Outcome::Answer(201, None, found);
            }
            let builder = ureq::http::Request::builder()
                .method(method)
                .uri(&url)
                .header("Authorization", format!("Bearer {}", self.token))
                .header("Accept", "application/json");
            let result = match &text {
                Some(t) => builder
                    .header("Content-Type", "application/json")
                    .body(t.clone())
                    .map_err(io::Error::other)
                    .and_then(|r| self.run(r, self.timeout)),
                None => builder
                    .body(())
                    .map_err(io::Error::other)
                    .and_then(|r| self.run(r, self.timeout)),
            };
            let outcome = match result {
                Ok(resp) => answer_of(resp, self.timeout),
                Err(e) => Outcome::Broken(e),
            };
            // Once a try went unanswered, every later try asks first: a later answer (a
            // 429, say) does not undo what the lost one may have made.
            unanswered |= match &outcome {
                Outcome::Answer(status, ..) => *status >= 500,
                Outcome::Broken(_) => true,
            };
            outcome
        })
    }

    pub(super) fn delete_file(&self, id: &str, key: &str) -> Result<(), ArchiveError> {
        let (status, body) = self.call(
            "DELETE",
            &format!("/api/records/{id}/draft/files/{key}"),
            None,
        )?;
        if status == 204 || status == 200 || status == 404 {
            Ok(())
        } else {
            Err(http_error(
                &format!("removing `{key}` from draft {id}"),
                status,
                &body,
            ))
        }
    }

    /// Streams a file's content (the whole file again on each try: the API has no ranges).
    pub(super) fn upload(&self, id: &str, key: &str, upload: &Upload) -> Result<(), ArchiveError> {
        let url = format!("{}/api/records/{id}/draft/files/{key}/content", self.base);
        let what = format!("uploading `{key}` to draft {id}");
        let (status, body) = self.send(&what, &mut || {
            let (reader, size): (Box<dyn Read>, u64) = match upload {
                Upload::File { path, size, .. } => match std::fs::File::open(path) {
                    Ok(f) => (Box::new(f), *size),
                    Err(e) => return Outcome::Broken(io::Error::new(io::ErrorKind::NotFound, e)),
                },
                Upload::Bytes(b) => (Box::new(io::Cursor::new(b.clone())), b.len() as u64),
            };
            let mut progress = Progress::new(key, size, self.reporting);
            let mut body = Counted {
                inner: reader,
                progress: &mut progress,
            };
            let request = ureq::http::Request::builder()
                .method("PUT")
                .uri(&url)
                .header("Authorization", format!("Bearer {}", self.token))
                .header("Content-Type", "application/octet-stream")
                .header("Content-Length", size.to_string())
                .body(ureq::SendBody::from_reader(&mut body));
            let budget = upload_budget(self.timeout, size);
            let result = request
                .map_err(io::Error::other)
                .and_then(|r| self.run(r, budget));
            match result {
                Ok(resp) => {
                    let outcome = answer_of(resp, budget);
                    if matches!(outcome, Outcome::Answer(200..=299, ..)) {
                        progress.done();
                    }
                    outcome
                }
                Err(e) => Outcome::Broken(e),
            }
        })?;
        if !(200..300).contains(&status) {
            return Err(http_error(&what, status, &body));
        }
        Ok(())
    }
}

pub(super) fn into_io(e: ureq::Error) -> io::Error {
    match e {
        ureq::Error::Io(e) => e,
        ureq::Error::Timeout(_) => io::Error::new(io::ErrorKind::TimedOut, e.to_string()),
        ureq::Error::ConnectionFailed => {
            io::Error::new(io::ErrorKind::ConnectionRefused, e.to_string())
        }
        other => io::Error::other(other.to_string()),
    }
}

/// The archive's answer `resp`, its body read within what is left of `budget`: a body that
/// does not arrive in time is a broken exchange ([`over_budget`]), tried again.
pub(super) fn answer_of(mut resp: ureq::http::Response<ureq::Body>, budget: Duration) -> Outcome {
    let status = resp.status().as_u16();
    let retry_after = retry_after(resp.headers());
    let text = match resp
        .body_mut()
        .with_config()
        .limit(8 << 20)
        .read_to_string()
    {
        Ok(t) => t,
        Err(ureq::Error::Timeout(_)) => return Outcome::Broken(over_budget(budget)),
        Err(ureq::Error::Io(e)) if e.kind() == io::ErrorKind::TimedOut => {
            return Outcome::Broken(over_budget(budget));
        }
        Err(_) => String::new(),
    };
    let body = serde_json::from_str(&text).unwrap_or(Value::Null);
    Outcome::Answer(status, retry_after, body)
}
