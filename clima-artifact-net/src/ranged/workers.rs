//! The workers of a large download: each takes the next chunk (from the end, while the first
//! response fills the chunks from the start), asks for its range under `If-Range`, writes the
//! bytes into the partial file before the chunk's counter, and gives a chunk back on a break;
//! a connection closes on a 429 or 503 while others run ([`crate::retry`]), and a server that
//! ignores ranges is read as one stream. The shared state (`Shared`) is theirs and the
//! reader's.

use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};
use std::time::Duration;

use crate::notice::{NetEvent, RangeFallbackReason};

use crate::NetError;
use crate::limit::Permit;
use crate::source::{transport_at, validator_of};

use super::{
    BUF, Conn, Failure, HEADER, Record, Shared, State, Stream, content_range, described,
    ranged_stream, whole_stream,
};

/// The longest wait of a connection for the reader (a notify normally ends it first).
pub(super) const READER_WAIT: Duration = Duration::from_secs(1);

/// Moves `state.first` past the complete chunks.
pub(super) fn advance(record: &Record, state: &mut State) {
    while state.first < state.done.len() && state.done[state.first] == record.len(state.first) {
        state.first += 1;
    }
}

pub(super) enum Next {
    Chunk(usize),
    Whole,
    Stop,
}

/// Whether the whole stream at a chunk may write it.
pub(super) enum Claim {
    Mine,
    Complete,
    Others,
}

impl Shared {
    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn stopping(&self) -> bool {
        self.cancel.load(Ordering::Relaxed) || self.state().fatal.is_some()
    }

    pub(super) fn fail(&self, failure: Failure) {
        let changed = matches!(failure, Failure::Changed(_));
        {
            let mut st = self.state();
            if st.fatal.is_none() {
                st.fatal = Some(failure);
            }
        }
        self.cond.notify_all();
        if changed {
            // Bytes of another version of the file are of no use to anyone.
            let _ = self.dir.remove_file_if_same(&self.name, &self.file);
        }
    }

    /// Takes a connection out of the download if others still run (the server limits
    /// connections); the last one stays.
    pub(super) fn retire(&self) -> bool {
        let mut st = self.state();
        let others = st.workers > 1;
        if others {
            st.workers -= 1;
        }
        others
    }

    /// A worker ends (`retired`: it left by [`Shared::retire`], already uncounted).
    pub(super) fn worker_exit(&self, retired: bool) {
        let mut st = self.state();
        if !retired {
            st.workers = st.workers.saturating_sub(1);
        }
        if st.workers == 0 && st.first < st.done.len() && st.fatal.is_none() {
            st.fatal = Some(Failure::Io(
                io::ErrorKind::ConnectionAborted,
                "every connection of the download ended before it was complete".to_owned(),
            ));
        }
        drop(st);
        self.cond.notify_all();
    }

    /// The first byte the connections may not fetch yet (`Large::lead` past the reader),
    /// if any.
    pub(super) fn horizon(&self) -> Option<u64> {
        self.lead.map(|lead| {
            self.read
                .load(Ordering::Relaxed)
                .saturating_add(lead.max(1))
        })
    }

    /// The reader is at byte `pos`: connections waiting for it to come closer may go on.
    /// The position is stored under the state's lock, because a connection reads it and
    /// then waits under that lock ([`Shared::wait_for_reader`]): a notify sent between its
    /// check and its wait would be lost, and it would stall until the wait's timeout.
    pub(super) fn reader_at(&self, pos: u64) {
        let st = self.state();
        self.read.store(pos, Ordering::Relaxed);
        drop(st);
        self.cond.notify_all();
    }

    /// The connections stop (the reader is gone, or the partial file removed). Stored under
    /// the state's lock, as [`Shared::reader_at`] is: a connection that checked it and is about
    /// to wait must not miss the notify.
    pub(super) fn stop_connections(&self) {
        let st = self.state();
        self.cancel.store(true, Ordering::Relaxed);
        drop(st);
        self.cond.notify_all();
    }

    /// Waits for the reader to move on, or the download to stop ([`READER_WAIT`] at most:
    /// a notify ends it first). `st` was taken before the reader's position was read.
    pub(super) fn wait_for_reader<'a>(&self, st: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        #[cfg(test)]
        self.hooks.before_wait();
        #[cfg(test)]
        let wait = self.hooks.wait();
        #[cfg(not(test))]
        let wait = READER_WAIT;
        let (st, _waited) = self
            .cond
            .wait_timeout(st, wait)
            .unwrap_or_else(|e| e.into_inner());
        #[cfg(test)]
        self.hooks.waited(_waited.timed_out());
        st
    }

    /// What worker `id` without a stream does next.
    pub(super) fn next_for(&self, id: usize) -> Next {
        let mut st = self.state();
        loop {
            if st.fatal.is_some() || self.cancel.load(Ordering::Relaxed) {
                return Next::Stop;
            }
            if st.single {
                return match st.filler == Some(id) && st.first < st.done.len() {
                    true => Next::Whole,
                    false => Next::Stop,
                };
            }
            let open = |k: &usize| !st.taken[*k] && st.done[*k] < self.record.len(*k);
            // Only chunks that start before the horizon, when the reader bounds the lead.
            let within = self.horizon().map_or(st.done.len(), |h| {
                (h.div_ceil(self.record.chunk) as usize)
                    .max(st.first + 1)
                    .min(st.done.len())
            });
            let mut todo = st.first..within;
            let found = match st.leading {
                true => todo.rfind(open),
                false => todo.find(open),
            };
            if let Some(k) = found {
                st.taken[k] = true;
                return Next::Chunk(k);
            }
            if !(within..st.done.len()).any(|k| open(&k)) {
                return Next::Stop;
            }
            st = self.wait_for_reader(st);
        }
    }

    /// Waits while `pos` is at or past the horizon (the reader is behind by the lead).
    fn wait_behind_horizon(&self, pos: u64) {
        if self.lead.is_none() {
            return;
        }
        let mut st = self.state();
        while self.horizon().is_some_and(|h| pos >= h)
            && st.fatal.is_none()
            && !self.cancel.load(Ordering::Relaxed)
        {
            st = self.wait_for_reader(st);
        }
    }

    /// Gives chunk `k` back after a failure (`progressed`: bytes arrived in this try); an
    /// error past the limit of failures in a row stops the download. Returns whether to go on.
    pub(super) fn give_back(&self, k: usize, progressed: bool, failure: Failure) -> bool {
        let failures = {
            let mut st = self.state();
            st.taken[k] = false;
            st.failures[k] = if progressed { 0 } else { st.failures[k] + 1 };
            st.failures[k]
        };
        self.cond.notify_all();
        let Some(wait) = self.config.retry.next_chunk_try(failures) else {
            self.fail(failure);
            return false;
        };
        std::thread::sleep(wait);
        true
    }

    pub(super) fn work(self: Arc<Self>, id: usize, mut first: Option<(Stream, Option<usize>)>) {
        let mut buf = vec![0u8; BUF];
        let mut retired = false;
        while !self.stopping() {
            let (stream, held) = match first.take() {
                Some((stream, held)) => {
                    let leading = stream.whole;
                    let _conn = Conn::new(&self.open);
                    self.pump(stream, held, &mut buf);
                    if leading {
                        self.state().leading = false;
                        self.cond.notify_all();
                    }
                    continue;
                }
                None => match self.next_for(id) {
                    Next::Stop => break,
                    Next::Chunk(k) => match self.request_chunk(id, k) {
                        Got::Range(stream) => (stream, Some(k)),
                        Got::Whole(stream) => (stream, None),
                        Got::Again => continue,
                        Got::Retire => {
                            retired = true;
                            break;
                        }
                        Got::Leave => break,
                    },
                    Next::Whole => match self.request_whole() {
                        Some(stream) => (stream, None),
                        None => continue,
                    },
                },
            };
            let _conn = Conn::new(&self.open);
            self.pump(stream, held, &mut buf);
        }
        self.worker_exit(retired);
    }

    /// A permit for a request of this download; `None` when the download stops first, or
    /// (for a chunk: `chunk`) goes to one stream, which this connection does not read.
    pub(super) fn permit(&self, chunk: bool) -> Option<Permit> {
        let limit = crate::limit::limit_of(&self.config);
        crate::limit::acquire(&self.answered, limit, &|| {
            self.stopping() || (chunk && self.state().single)
        })
    }

    /// Asks for the rest of chunk `k` (taken by worker `id`).
    pub(super) fn request_chunk(&self, id: usize, k: usize) -> Got {
        let Some(permit) = self.permit(true) else {
            self.release(k);
            return Got::Again;
        };
        let from = self.record.start(k) + self.state().done[k];
        let to = self.record.start(k) + self.record.len(k) - 1;
        let _conn = Conn::new(&self.open);
        let resp = self
            .agent
            .get(&self.answered)
            .header("Range", format!("bytes={from}-{to}"))
            .header("If-Range", &self.record.validator)
            .call();
        let resp = match resp {
            Ok(resp) => resp,
            Err(e) => {
                let e = transport_at(&self.url, &self.answered, &e, &self.config);
                match e.is_transient() {
                    true => drop(self.give_back(k, false, Failure::Net(e))),
                    false => self.fail(Failure::Net(e)),
                }
                return Got::Again;
            }
        };
        let status = resp.status().as_u16();
        let changed = |why: String| {
            self.fail(Failure::Changed(format!(
                "`{}` changed on the server during the download ({why}); starting over",
                crate::trust::redact_url(&self.url)
            )));
            Got::Again
        };
        match status {
            // Every range's validator is the first response's: a server that ignores
            // If-Range may answer with bytes of another version of the file.
            206 if validator_of(&resp).is_some_and(|v| v != self.record.validator) => changed(
                "a range came with another ETag or Last-Modified than the first response's".into(),
            ),
            206 if validator_of(&resp).is_none() => {
                self.config.reporting.emit(NetEvent::RangeFallback {
                    why: RangeFallbackReason::NoValidator,
                });
                self.release(k);
                self.go_single(id);
                Got::Again
            }
            206 => match content_range(&resp) {
                Some((_, _, total)) if total != self.record.length => changed(format!(
                    "it is now {total} bytes, not {}",
                    self.record.length
                )),
                Some((a, b, _)) if (a, b) == (from, to) => {
                    Got::Range(ranged_stream(resp, from, permit))
                }
                other => {
                    self.config.reporting.emit(NetEvent::RangeFallback {
                        why: RangeFallbackReason::OtherRange(described(other)),
                    });
                    self.release(k);
                    self.go_single(id);
                    Got::Again
                }
            },
            200 if validator_of(&resp).as_deref() == Some(self.record.validator.as_str()) => {
                // The server does not serve ranges after all: one stream from now on.
                self.release(k);
                match self.go_single(id) {
                    true => Got::Whole(whole_stream(resp, permit)),
                    false => Got::Leave,
                }
            }
            200 => changed("its ETag or Last-Modified is not the first response's".into()),
            416 => changed("the server says the range is past its end".into()),
            _ => {
                let e = NetError::HttpStatus {
                    url: self.url.clone(),
                    status,
                };
                if crate::retry::retires_connection(status) && self.retire() {
                    // The server limits connections: this one closes, the others go on.
                    self.config.reporting.emit(NetEvent::ConnectionClosed {
                        id: id as u64,
                        status,
                    });
                    self.release(k);
                    return Got::Retire;
                }
                match e.is_transient() {
                    true => drop(self.give_back(k, false, Failure::Net(e))),
                    false => self.fail(Failure::Net(e)),
                }
                Got::Again
            }
        }
    }

    /// A plain GET of the whole file, for one stream: the same validator, or it changed.
    pub(super) fn request_whole(&self) -> Option<Stream> {
        let failed = |f: Failure| {
            match self.config.retry.next_chunk_try(self.whole_failure()) {
                Some(wait) => std::thread::sleep(wait),
                None => self.fail(f),
            }
            None
        };
        let permit = self.permit(false)?;
        let resp = match self.agent.get(&self.answered).call() {
            Ok(resp) => resp,
            Err(e) => {
                let e = transport_at(&self.url, &self.answered, &e, &self.config);
                return match e.is_transient() {
                    true => failed(Failure::Net(e)),
                    false => {
                        self.fail(Failure::Net(e));
                        None
                    }
                };
            }
        };
        let status = resp.status().as_u16();
        match status {
            200 if validator_of(&resp).as_deref() == Some(self.record.validator.as_str())
                && resp.body().content_length() == Some(self.record.length) =>
            {
                Some(whole_stream(resp, permit))
            }
            200 => {
                self.fail(Failure::Changed(format!(
                    "`{}` changed on the server during the download; starting over",
                    crate::trust::redact_url(&self.url)
                )));
                None
            }
            _ => {
                let e = NetError::HttpStatus {
                    url: self.url.clone(),
                    status,
                };
                match e.is_transient() {
                    true => failed(Failure::Net(e)),
                    false => {
                        self.fail(Failure::Net(e));
                        None
                    }
                }
            }
        }
    }

    /// Chunk `k` is no longer being fetched (complete, or given back without a failure).
    pub(super) fn release(&self, k: usize) {
        self.state().taken[k] = false;
        self.cond.notify_all();
    }

    /// One stream from now on; returns whether worker `id` reads it.
    pub(super) fn go_single(&self, id: usize) -> bool {
        let mut st = self.state();
        if !st.single {
            st.single = true;
            st.filler = Some(id);
        }
        st.filler == Some(id)
    }

    /// Whether the whole stream may write chunk `k`; in one-stream mode waits while another
    /// connection still fetches it.
    pub(super) fn claim(&self, k: usize) -> Claim {
        let mut st = self.state();
        loop {
            if st.done[k] == self.record.len(k) {
                return Claim::Complete;
            }
            if !st.taken[k] {
                st.taken[k] = true;
                return Claim::Mine;
            }
            if !st.single || st.fatal.is_some() || self.cancel.load(Ordering::Relaxed) {
                return Claim::Others;
            }
            st = self
                .cond
                .wait_timeout(st, Duration::from_millis(200))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Writes `bytes` at byte `pos` of the file, in chunk `k`, then the chunk's counter.
    pub(super) fn write(&self, k: usize, pos: u64, bytes: &[u8]) -> io::Result<()> {
        self.file.write_all_at(bytes, self.record.data_at() + pos)?;
        let mut st = self.state();
        st.done[k] += bytes.len() as u64;
        self.file
            .write_all_at(&st.done[k].to_le_bytes(), HEADER + 8 * k as u64)?;
        self.received
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        if k == st.first {
            advance(&self.record, &mut st);
            drop(st);
            self.cond.notify_all();
        }
        Ok(())
    }

    /// Reads `stream` into the chunks it covers: a range its one chunk (`held`), the whole
    /// file every chunk it may claim (skipping received bytes). Returns when the stream ends,
    /// breaks or is of no more use.
    pub(super) fn pump(&self, mut stream: Stream, mut held: Option<usize>, buf: &mut [u8]) {
        let mut progressed = false;
        loop {
            self.wait_behind_horizon(stream.pos);
            if self.stopping() || stream.pos >= self.record.length {
                break;
            }
            let k = (stream.pos / self.record.chunk) as usize;
            if held != Some(k) {
                if let Some(h) = held.take() {
                    self.release(h);
                }
                if !stream.whole {
                    return;
                }
                progressed = false;
                match self.claim(k) {
                    Claim::Mine => held = Some(k),
                    Claim::Complete if self.state().single => {
                        let left = self.record.start(k) + self.record.len(k) - stream.pos;
                        if let Err(e) = skip(&mut stream, left, buf) {
                            return self.broken_whole(e);
                        }
                        continue;
                    }
                    Claim::Complete | Claim::Others => return,
                }
            }
            let Some(k) = held else { return };
            let want = self.record.start(k) + self.state().done[k];
            if stream.pos < want {
                let left = want - stream.pos;
                if let Err(e) = skip(&mut stream, left, buf) {
                    self.give_back(k, progressed, Failure::Io(e.kind(), e.to_string()));
                    return;
                }
                continue;
            }
            let end = self.record.start(k) + self.record.len(k);
            let room = (end - stream.pos).min(buf.len() as u64) as usize;
            match stream.reader.read(&mut buf[..room]) {
                Ok(0) => {
                    let e = io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!(
                            "the body ended at byte {} of {}",
                            stream.pos, self.record.length
                        ),
                    );
                    self.give_back(k, progressed, self.io_failure(&e));
                    return;
                }
                Ok(n) => {
                    if let Err(e) = self.write(k, stream.pos, &buf[..n]) {
                        let path = self.dir.path().join(&self.name);
                        self.fail(Failure::Io(
                            e.kind(),
                            format!(
                                "cannot write the partial download `{}`: {e}",
                                path.display()
                            ),
                        ));
                        return;
                    }
                    stream.pos += n as u64;
                    progressed = true;
                    if stream.pos == end {
                        held = None;
                        self.release(k);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let failure = self.io_failure(&e);
                    if crate::retry::is_transient_io(&e) {
                        self.give_back(k, progressed, failure);
                    } else {
                        self.release(k);
                        self.fail(failure);
                    }
                    return;
                }
            }
        }
        if let Some(h) = held {
            self.release(h);
        }
    }

    /// The whole stream broke while skipping received bytes.
    pub(super) fn broken_whole(&self, e: io::Error) {
        let n = self.whole_failure();
        let retried = self.config.retry.next_chunk_try(n).is_some();
        if !retried || !crate::retry::is_transient_io(&e) {
            self.fail(self.io_failure(&e));
        }
    }

    /// Counts a failure of the one stream (against the first chunk not complete, where it
    /// resumes); returns the failures in a row.
    pub(super) fn whole_failure(&self) -> u32 {
        let mut st = self.state();
        let first = st.first.min(st.failures.len().saturating_sub(1));
        st.failures[first] += 1;
        st.failures[first]
    }

    pub(super) fn io_failure(&self, e: &io::Error) -> Failure {
        Failure::Io(
            e.kind(),
            format!(
                "`{}`: {}",
                crate::trust::redact_url(&self.url),
                crate::source::describe_io(e, &self.config)
            ),
        )
    }
}

/// What a chunk request gave.
pub(super) enum Got {
    /// The chunk's range.
    Range(Stream),
    /// The whole file: this worker reads it as the one stream.
    Whole(Stream),
    /// Nothing now; ask again (the chunk was given back, or the download stopped).
    Again,
    /// This connection closes, taken out by [`Shared::retire`].
    Retire,
    /// This connection closes: another one reads the one stream.
    Leave,
}

/// Reads and drops `n` bytes of `stream`.
pub(super) fn skip(stream: &mut Stream, n: u64, buf: &mut [u8]) -> io::Result<()> {
    let mut left = n;
    while left > 0 {
        let want = left.min(buf.len() as u64) as usize;
        match stream.reader.read(&mut buf[..want]) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the body ended early",
                ));
            }
            Ok(got) => {
                left -= got as u64;
                stream.pos += got as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
