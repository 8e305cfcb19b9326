//! How long one exchange with the archive may take: each request's whole exchange, answer
//! included, within [`super::PublishRequest::timeout`] ([`TIMEOUT_VAR`]), an upload that long
//! again per GiB of its file ([`upload_budget`]); and a write the archive does not take within
//! the stall timeout fails too. A timeout is an [`io::ErrorKind::TimedOut`], which the client
//! tries again as a broken connection, then reports naming the variable.

use std::io;
use std::time::Duration;

use super::TIMEOUT_VAR;
use super::client::{Client, into_io};

impl Client<'_> {
    /// Runs `request` within `budget` (the whole exchange, answer included; a write waiting
    /// longer than the stall timeout fails too); a timeout is an [`io::ErrorKind::TimedOut`]
    /// naming [`TIMEOUT_VAR`].
    pub(super) fn run<S: ureq::AsSendBody>(
        &self,
        request: ureq::http::Request<S>,
        budget: Duration,
    ) -> io::Result<ureq::http::Response<ureq::Body>> {
        let request = self
            .agent
            .configure_request(request)
            .timeout_per_call(Some(budget))
            .timeout_per_write(Some(self.stall))
            .build();
        self.agent.run(request).map_err(|e| match e {
            ureq::Error::Timeout(ureq::Timeout::PerWrite) => io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "the archive took no bytes of the request for {} s ({})",
                    self.stall.as_secs_f64(),
                    clima_artifact_vars::STALL_TIMEOUT
                ),
            ),
            ureq::Error::Timeout(_) => over_budget(budget),
            other => into_io(other),
        })
    }
}

/// The bound of an upload of `size` bytes: `timeout`, and `timeout` again per GiB.
pub(super) fn upload_budget(timeout: Duration, size: u64) -> Duration {
    timeout + timeout.mul_f64(size as f64 / f64::from(1u32 << 30))
}

/// The error of an exchange that took longer than `budget`.
pub(super) fn over_budget(budget: Duration) -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!(
            "no complete answer within {} s ({TIMEOUT_VAR}; raise it on a slow link)",
            budget.as_secs_f64()
        ),
    )
}
