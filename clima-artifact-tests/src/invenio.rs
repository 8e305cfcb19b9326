//! A loopback InvenioRDM archive (the REST API CaltechDATA and Zenodo run) for the tests of
//! `publish --archive`, faithful to the documented API where the client depends on it:
//!
//! | request | answer |
//! |---|---|
//! | `POST /api/records` | `201`, a new draft (`is_published: false`, a new parent, `created` now in UTC) |
//! | `GET`/`PUT /api/records/{id}/draft` | the draft; `PUT` replaces its metadata and answers `200` with `errors` when some field is invalid (as InvenioRDM does for drafts) |
//! | `POST /api/records/{id}/draft/files` with `[{"key": ..}]` | `201`, the entries, `status: "pending"` |
//! | `GET /api/records/{id}/draft/files` | the draft's entries |
//! | `PUT /api/records/{id}/draft/files/{key}/content` | the bytes (`Content-Length` or chunked), MD5 computed as they arrive; over the file size limit: `400` |
//! | `POST /api/records/{id}/draft/files/{key}/commit` | `200`, `status: "completed"`, `checksum: "md5:<hex>"`, `size` |
//! | `DELETE /api/records/{id}/draft/files/{key}` | `204` |
//! | `POST /api/records/{id}/draft/actions/publish` | `202`, the record, with `pids.doi.identifier` (the version's DOI, `10.5072/loopback.<id>`), `parent.pids.doi.identifier` (the DOI of every version, `10.5072/loopback.<parent>`) and `links` (a published record's: `files` is `/api/records/{id}/files`); `400` with `errors` (`field`, `messages`) for invalid metadata or a file not committed |
//! | `POST /api/records/{id}/versions` | `201`, a new draft of the same parent (the existing one if there is one) |
//! | `GET /api/records/{id}`, `/api/records/{id}/files` | the published record and its entries (each with `links.content`, `/api/records/{id}/files/{key}/content`); a published record's draft links (`/api/records/{id}/draft/...`) answer `404`, as InvenioRDM's do once the draft is published |
//! | `GET /api/records/{id}/files/{key}/content` | the file, through a [`TestServer`] (so `Range`, `If-Range` and a strong `ETag` behave as there) |
//! | `GET /api/user/records` (`sort`: `newest`, the default, or `oldest`; `size`, default 10; `page`; `allversions`) | the token's drafts and records, `hits.hits` and `hits.total`; of each parent only its latest version unless `allversions=true` |
//!
//! Every request under `/api/records` and `/api/user/records` needs `Authorization: Bearer <token>` except the reads of
//! published records: `401` without a token or with another one, `403` with a read-only one.
//! Faults ([`ArchiveFault`]) apply to the next requests: `429` with `Retry-After`, a `5xx`, a
//! connection cut mid-upload, a wrong checksum, rejected metadata, a new record's draft made but
//! its answer held back (for a client killed while it waits), and the answers of a hostile or
//! broken archive: a publish answer with the draft's links or links to another host, a record
//! id that is not one, an answer trickled one byte at a time, an upload never read. Limits
//! ([`Limits`]): bytes per file, files per record, bytes per record.
//!
//! The binary `invenio_server` runs it as a process of its own (`--help`), to rehearse a publish
//! offline (docs/archive.md).

use std::collections::{BTreeMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use md5::{Digest, Md5};
use serde_json::{Value, json};

use crate::TestServer;

/// The archive's limits (InvenioRDM's defaults: 10 GB per file, 30 GB per record).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest file, bytes.
    pub max_file_size: u64,
    /// Most files in one record.
    pub max_files: usize,
    /// Most bytes in one record.
    pub quota: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_file_size: 10_000_000_000,
            max_files: 100,
            quota: 30_000_000_000,
        }
    }
}

/// A fault for the next request of its kind.
#[derive(Debug, Clone)]
pub enum ArchiveFault {
    /// The next request (any) is answered `429` with `Retry-After: <secs>`.
    TooManyRequests {
        /// The `Retry-After` value, seconds.
        retry_after: u64,
    },
    /// The next file upload reads the whole body, then answers this status (a `5xx`).
    UploadStatus(u16),
    /// The next file upload reads this many body bytes, then resets the connection.
    CutUpload {
        /// Body bytes read before the reset.
        after: u64,
    },
    /// The next commit reports a checksum other than the one of the bytes received.
    WrongChecksum,
    /// The next metadata update (and publish) rejects this field with this message.
    RejectField {
        /// The field, e.g. `metadata.rights.0.id`.
        field: String,
        /// The server's message.
        message: String,
    },
    /// The next `POST /api/records` makes the draft, then holds the answer back for this many
    /// seconds and closes the connection without one: what a client killed while it waits for
    /// the answer leaves on the archive.
    StallCreate {
        /// Seconds before the connection is closed.
        secs: u64,
    },
    /// The next publish answers the record with its draft's links (`links.files` is
    /// `/api/records/{id}/draft/files`, which answers `404` once published).
    DraftLinksInPublishAnswer,
    /// The next publish answers the record with every link under `base` (another host, or
    /// `http://` for an `https://` archive) instead of the archive's address.
    ForeignLinksInPublishAnswer {
        /// What replaces the archive's address in the links, e.g. `http://files.invalid`.
        base: String,
    },
    /// The next new record (`POST /api/records`) gets this id (and answers it as such).
    RecordId(String),
    /// The next answer of the JSON API (any request but file content) is sent one byte every
    /// this often (its headers included).
    TrickleAnswer {
        /// Time between two bytes.
        every: Duration,
    },
    /// The next file upload's body is never read: the connection is held open this long, then
    /// closed.
    NeverReadUpload {
        /// Seconds the connection is held.
        secs: u64,
    },
}

/// One file of a draft or record.
#[derive(Debug, Clone)]
pub struct ArchiveFile {
    /// Its key.
    pub key: String,
    /// `pending` or `completed`.
    pub status: String,
    /// Bytes received.
    pub size: u64,
    /// MD5 of the bytes received, hex (what `commit` reports unless faulted).
    pub md5: String,
    /// The checksum `commit` reported (`md5:<hex>`).
    pub checksum: Option<String>,
    /// Its content (empty when the server discards content).
    pub bytes: Arc<Vec<u8>>,
}

/// One record (a draft or published version).
#[derive(Debug, Clone)]
pub struct ArchiveRecord {
    /// Record id (`xxxxx-xxxxx`).
    pub id: String,
    /// The parent (concept) id shared by the versions.
    pub parent: String,
    /// Whether it is published.
    pub published: bool,
    /// The metadata last stored.
    pub metadata: Value,
    /// Its files, by key.
    pub files: BTreeMap<String, ArchiveFile>,
    /// Its DOI once published.
    pub doi: Option<String>,
    /// The DOI of every version (its parent's), once a version is published.
    pub concept_doi: Option<String>,
    /// Version index within the parent (1-based).
    pub index: usize,
    /// When it was created, as InvenioRDM writes it (`2026-12-04T21:55:00.123+00:00`, UTC).
    pub created: String,
}

#[derive(Default)]
struct Inner {
    records: BTreeMap<String, ArchiveRecord>,
    next: u64,
    faults: VecDeque<ArchiveFault>,
    limits: Limits,
    creates: usize,
    requests: Vec<String>,
    discard: bool,
}

struct Shared {
    inner: Mutex<Inner>,
    token: String,
    read_only_token: Mutex<Option<String>>,
    files: TestServer,
}

/// The loopback archive. Dropping it stops it.
pub struct InvenioServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
}

impl InvenioServer {
    /// Starts an archive on `127.0.0.1:<free port>` accepting the bearer token `token`.
    pub fn start(token: &str) -> InvenioServer {
        InvenioServer::start_on(token, 0).expect("bind 127.0.0.1:0")
    }

    /// Starts an archive on `127.0.0.1:<port>` (`0`: a free one) accepting the bearer token
    /// `token`; the error when that port cannot be had.
    pub fn start_on(token: &str, port: u16) -> std::io::Result<InvenioServer> {
        let listener = TcpListener::bind(("127.0.0.1", port))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner {
                next: 1,
                ..Inner::default()
            }),
            token: token.to_owned(),
            read_only_token: Mutex::new(None),
            files: TestServer::start(),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let (sh, sp) = (shared.clone(), stop.clone());
        std::thread::spawn(move || {
            while !sp.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let sh = sh.clone();
                        std::thread::spawn(move || {
                            let _ = handle(stream, &sh);
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        Ok(InvenioServer { addr, shared, stop })
    }

    /// The archive's URL, `http://127.0.0.1:<port>` (what `--archive` takes).
    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Also accepts `token`, as a token without the deposit scope (answered `403`).
    pub fn add_read_only_token(&self, token: &str) {
        *self.shared.read_only_token.lock().unwrap() = Some(token.to_owned());
    }

    /// Sets the limits.
    pub fn set_limits(&self, limits: Limits) {
        self.shared.inner.lock().unwrap().limits = limits;
    }

    /// Keeps only the size and MD5 of uploaded files, not their bytes (benchmarks of large
    /// uploads; the files cannot be downloaded then).
    pub fn discard_content(&self) {
        self.shared.inner.lock().unwrap().discard = true;
    }

    /// Queues `fault` for the next request of its kind.
    pub fn fault(&self, fault: ArchiveFault) {
        self.shared.inner.lock().unwrap().faults.push_back(fault);
    }

    /// Every record, drafts included, by id.
    pub fn records(&self) -> Vec<ArchiveRecord> {
        self.shared
            .inner
            .lock()
            .unwrap()
            .records
            .values()
            .cloned()
            .collect()
    }

    /// How many `POST /api/records` (new records, not versions) were answered `201`.
    pub fn records_created(&self) -> usize {
        self.shared.inner.lock().unwrap().creates
    }

    /// Every request received so far, as `METHOD path` (status not included).
    pub fn requests(&self) -> Vec<String> {
        self.shared.inner.lock().unwrap().requests.clone()
    }

    /// The loopback file server behind the downloads (its range and GET counts).
    pub fn file_server(&self) -> &TestServer {
        &self.shared.files
    }

    /// The path of a published file on [`InvenioServer::file_server`].
    pub fn file_path(id: &str, key: &str) -> String {
        format!("files/{id}/{key}")
    }
}

impl Drop for InvenioServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

struct Request {
    method: String,
    path: String,
    headers: BTreeMap<String, String>,
}

fn read_head(reader: &mut impl BufRead) -> std::io::Result<Option<Request>> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_owned();
    let path = parts.next().unwrap_or("/").to_owned();
    let mut headers = BTreeMap::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h == "\r\n" || h == "\n" {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
        }
    }
    Ok(Some(Request {
        method,
        path,
        headers,
    }))
}

/// Reads a request body (`Content-Length` or chunked) into `sink`, at most `cut` bytes when
/// given (then returns `Ok(false)`).
fn read_body(
    reader: &mut impl BufRead,
    req: &Request,
    cut: Option<u64>,
    sink: &mut dyn FnMut(&[u8]),
) -> std::io::Result<bool> {
    let mut buf = vec![0u8; 256 * 1024];
    let mut taken = 0u64;
    let mut pass = |reader: &mut dyn Read, mut left: u64| -> std::io::Result<bool> {
        while left > 0 {
            let mut want = left.min(buf.len() as u64);
            if let Some(c) = cut {
                if taken >= c {
                    return Ok(false);
                }
                want = want.min(c - taken);
            }
            let n = reader.read(&mut buf[..want as usize])?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            sink(&buf[..n]);
            taken += n as u64;
            left -= n as u64;
        }
        Ok(true)
    };
    if req
        .headers
        .get("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
    {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size)?;
            let n = u64::from_str_radix(size.trim().split(';').next().unwrap_or(""), 16)
                .map_err(|_| std::io::Error::other("bad chunk size"))?;
            if n == 0 {
                let mut end = String::new();
                reader.read_line(&mut end)?;
                return Ok(true);
            }
            if !pass(reader, n)? {
                return Ok(false);
            }
            let mut crlf = String::new();
            reader.read_line(&mut crlf)?;
        }
    }
    let len = req
        .headers
        .get("content-length")
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    pass(reader, len)
}

fn answer(out: &mut TcpStream, code: u16, extra: &str, body: &Value) -> std::io::Result<()> {
    answer_into(out, code, extra, body)
}

/// Writes the whole answer (status line, headers, JSON body) to `out`.
fn answer_into(out: &mut impl Write, code: u16, extra: &str, body: &Value) -> std::io::Result<()> {
    let text = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    write!(
        out,
        "HTTP/1.1 {code} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n{text}",
        reason(code),
        text.len()
    )?;
    out.flush()
}

fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

fn error(code: u16, message: &str) -> (u16, Value) {
    (code, json!({"status": code, "message": message}))
}

/// Takes the first queued fault that `pick` accepts.
fn take_fault<T>(inner: &mut Inner, pick: impl Fn(&ArchiveFault) -> Option<T>) -> Option<T> {
    let i = inner.faults.iter().position(|f| pick(f).is_some())?;
    inner.faults.remove(i).and_then(|f| pick(&f))
}

fn handle(stream: TcpStream, sh: &Shared) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut reader = BufReader::with_capacity(256 * 1024, stream.try_clone()?);
    let mut out = stream;
    let Some(req) = read_head(&mut reader)? else {
        return Ok(());
    };
    let path = req.path.split('?').next().unwrap_or("").to_owned();
    sh.inner
        .lock()
        .unwrap()
        .requests
        .push(format!("{} {path}", req.method));
    if let Some(retry_after) = take_fault(&mut sh.inner.lock().unwrap(), |f| match f {
        ArchiveFault::TooManyRequests { retry_after } => Some(*retry_after),
        _ => None,
    }) {
        let _ = read_body(&mut reader, &req, None, &mut |_| {});
        let (code, body) = error(429, "Too many requests, slow down.");
        return answer(
            &mut out,
            code,
            &format!("Retry-After: {retry_after}\r\n"),
            &body,
        );
    }
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    // `GET /api/user/records` is routed as `rest == []` with `user` set.
    let user = matches!(parts.as_slice(), ["api", "user", "records"]);
    let rest: Vec<&str> = match parts.as_slice() {
        ["api", "records", rest @ ..] => rest.to_vec(),
        _ if user => Vec::new(),
        _ => {
            let (code, body) = error(404, "The requested URL was not found on the server.");
            return answer(&mut out, code, "", &body);
        }
    };
    // Published files are public; everything else needs the token.
    let public_read = req.method == "GET"
        && !rest.contains(&"draft")
        && sh
            .inner
            .lock()
            .unwrap()
            .records
            .get(rest.first().copied().unwrap_or(""))
            .is_some_and(|r| r.published);
    if !public_read {
        let bearer = req
            .headers
            .get("authorization")
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        let read_only = sh.read_only_token.lock().unwrap().clone();
        match bearer {
            Some(t) if t == sh.token => {}
            Some(t) if read_only.as_deref() == Some(t) => {
                let _ = read_body(&mut reader, &req, None, &mut |_| {});
                let (code, body) = error(
                    403,
                    "You don't have the permission to access the requested resource.",
                );
                return answer(&mut out, code, "", &body);
            }
            _ => {
                let _ = read_body(&mut reader, &req, None, &mut |_| {});
                let (code, body) = error(
                    401,
                    "The server could not verify that you are authorized to access the URL \
                     requested.",
                );
                return answer(&mut out, code, "", &body);
            }
        }
    }
    let base = format!("http://{}", out.local_addr()?);
    match (req.method.as_str(), rest.as_slice()) {
        ("PUT", [id, "draft", "files", key, "content"]) => {
            upload(&mut reader, out, sh, &req, id, key)
        }
        ("GET", [id, "files", key, "content"]) => download(out, sh, &req, id, key),
        _ if user => {
            let (code, answer_body) = if req.method == "GET" {
                let query = req.path.split_once('?').map_or("", |(_, q)| q);
                user_records(sh, &base, query)
            } else {
                error(405, "The method is not allowed for the requested URL.")
            };
            answer(&mut out, code, "", &answer_body)
        }
        _ => json_request(&mut reader, out, sh, &base, &req, &rest),
    }
}

/// A request of the JSON API ([`api`]) under `/api/records`: its body read and parsed, the
/// answer written (or, under [`ArchiveFault::StallCreate`], held back and never written).
fn json_request(
    reader: &mut impl BufRead,
    mut out: TcpStream,
    sh: &Shared,
    base: &str,
    req: &Request,
    rest: &[&str],
) -> std::io::Result<()> {
    let mut body = Vec::new();
    read_body(reader, req, None, &mut |b| body.extend_from_slice(b))?;
    let parsed: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let stall = if req.method == "POST" && rest.is_empty() {
        take_fault(&mut sh.inner.lock().unwrap(), |f| match f {
            ArchiveFault::StallCreate { secs } => Some(*secs),
            _ => None,
        })
    } else {
        None
    };
    let (code, answer_body) = api(sh, base, req.method.as_str(), rest, &parsed);
    if let Some(secs) = stall {
        std::thread::sleep(Duration::from_secs(secs));
        return Ok(());
    }
    let trickle = take_fault(&mut sh.inner.lock().unwrap(), |f| match f {
        ArchiveFault::TrickleAnswer { every } => Some(*every),
        _ => None,
    });
    match trickle {
        Some(every) => {
            let mut whole = Vec::new();
            answer_into(&mut whole, code, "", &answer_body)?;
            for byte in whole {
                out.write_all(&[byte])?;
                out.flush()?;
                std::thread::sleep(every);
            }
            Ok(())
        }
        None => answer(&mut out, code, "", &answer_body),
    }
}

/// `GET /api/user/records?{query}`: the drafts and records of the token's user (every record
/// here), newest first unless `sort=oldest`; of each parent only the latest version unless
/// `allversions=true`; page `page` (from 1) of `size` hits.
fn user_records(sh: &Shared, base: &str, query: &str) -> (u16, Value) {
    let arg = |name: &str| {
        query
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.to_owned())
    };
    let size = arg("size")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(10);
    let page = arg("page")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(1);
    let sort = arg("sort").unwrap_or_else(|| "newest".into());
    if !["newest", "oldest"].contains(&sort.as_str()) || size == 0 || page == 0 {
        return error(400, "Invalid query arguments.");
    }
    let inner = sh.inner.lock().unwrap();
    // Ids begin with the creation counter (`10000 + n`), so their order is the creation order.
    let mut hits: Vec<&ArchiveRecord> = inner
        .records
        .values()
        .filter(|r| {
            arg("allversions").as_deref() == Some("true")
                || !inner
                    .records
                    .values()
                    .any(|o| o.parent == r.parent && o.index > r.index)
        })
        .collect();
    if sort == "newest" {
        hits.reverse();
    }
    let total = hits.len();
    let hits: Vec<Value> = hits
        .into_iter()
        .skip((page - 1) * size)
        .take(size)
        .map(|r| record_json(base, r))
        .collect();
    (
        200,
        json!({
            "hits": {"hits": hits, "total": total},
            "sortBy": sort,
            "links": {"self": format!("{base}/api/user/records?{query}")},
        }),
    )
}

/// The time now as InvenioRDM writes a record's `created` (UTC, an explicit offset).
fn created_now() -> String {
    let z = clima_artifact_fs::utc_timestamp(std::time::SystemTime::now());
    format!("{}+00:00", z.trim_end_matches('Z'))
}

fn record_json(base: &str, r: &ArchiveRecord) -> Value {
    let api = format!("{base}/api/records/{}", r.id);
    let mut parent = json!({"id": r.parent});
    if let Some(doi) = &r.concept_doi {
        parent["pids"] = json!({"doi": {"identifier": doi, "provider": "datacite"}});
    }
    let mut v = json!({
        "id": r.id,
        "parent": parent,
        "is_published": r.published,
        "is_draft": !r.published,
        "status": if r.published { "published" } else { "draft" },
        "metadata": r.metadata,
        "versions": {"index": r.index},
        "created": r.created,
        "files": {"enabled": true, "count": r.files.len()},
        "links": {
            "self": if r.published { api.clone() } else { format!("{api}/draft") },
            "self_html": if r.published { format!("{base}/records/{}", r.id) } else { format!("{base}/uploads/{}", r.id) },
            "files": if r.published { format!("{api}/files") } else { format!("{api}/draft/files") },
            "publish": format!("{api}/draft/actions/publish"),
            "versions": format!("{api}/versions"),
        },
    });
    if let Some(doi) = &r.doi {
        v["pids"] = json!({"doi": {"identifier": doi, "provider": "datacite"}});
        v["links"]["doi"] = json!(format!("https://doi.org/{doi}"));
    }
    v
}

fn file_json(base: &str, r: &ArchiveRecord, f: &ArchiveFile) -> Value {
    let api = if r.published {
        format!("{base}/api/records/{}/files/{}", r.id, f.key)
    } else {
        format!("{base}/api/records/{}/draft/files/{}", r.id, f.key)
    };
    let mut v = json!({
        "key": f.key,
        "status": f.status,
        "links": {"self": api, "content": format!("{api}/content"), "commit": format!("{api}/commit")},
    });
    if f.status == "completed" {
        v["size"] = json!(f.size);
        v["checksum"] = json!(f.checksum);
    }
    v
}

fn entries_json(base: &str, r: &ArchiveRecord) -> Value {
    json!({"entries": r.files.values().map(|f| file_json(base, r, f)).collect::<Vec<_>>()})
}

/// Field errors of `metadata`, as InvenioRDM reports them.
fn validate(metadata: &Value, fault: Option<(String, String)>) -> Vec<Value> {
    let mut errors = Vec::new();
    let mut bad = |field: &str, message: &str| {
        errors.push(json!({"field": field, "messages": [message]}));
    };
    let m = metadata;
    if m["title"].as_str().is_none_or(|t| t.trim().is_empty()) {
        bad("metadata.title", "Missing data for required field.");
    }
    if m["resource_type"]["id"].as_str().is_none() {
        bad("metadata.resource_type", "Missing data for required field.");
    }
    let date = m["publication_date"].as_str().unwrap_or("");
    let date_ok = date.len() == 10
        && date.bytes().enumerate().all(|(i, b)| {
            if i == 4 || i == 7 {
                b == b'-'
            } else {
                b.is_ascii_digit()
            }
        });
    if !date_ok {
        bad("metadata.publication_date", "Please provide a valid date.");
    }
    match m["creators"].as_array() {
        Some(c) if !c.is_empty() => {
            for (i, c) in c.iter().enumerate() {
                let p = &c["person_or_org"];
                let named = p["family_name"].as_str().is_some_and(|s| !s.is_empty())
                    || p["name"].as_str().is_some_and(|s| !s.is_empty());
                if !named {
                    bad(
                        &format!("metadata.creators.{i}.person_or_org.family_name"),
                        "Family name must be filled.",
                    );
                }
            }
        }
        _ => bad("metadata.creators", "Missing data for required field."),
    }
    // A small rights vocabulary (lower-case SPDX ids, as InvenioRDM's).
    const RIGHTS: &[&str] = &[
        "cc-by-4.0",
        "cc-by-sa-4.0",
        "cc-by-nc-4.0",
        "cc0-1.0",
        "mit",
        "apache-2.0",
        "odc-by-1.0",
    ];
    if let Some(rights) = m["rights"].as_array() {
        for (i, r) in rights.iter().enumerate() {
            if let Some(id) = r["id"].as_str()
                && !RIGHTS.contains(&id)
            {
                bad(
                    &format!("metadata.rights.{i}.id"),
                    &format!("Invalid value {id}."),
                );
            }
        }
    }
    if let Some((field, message)) = fault {
        bad(&field, &message);
    }
    errors
}

#[expect(
    clippy::too_many_lines,
    reason = "the test server's router: one short arm per endpoint of the documented API"
)]
fn api(sh: &Shared, base: &str, method: &str, rest: &[&str], body: &Value) -> (u16, Value) {
    let mut inner = sh.inner.lock().unwrap();
    let not_found = || error(404, "The persistent identifier does not exist.");
    match (method, rest) {
        ("POST", []) => {
            let n = inner.next;
            inner.next += 1;
            let forced = take_fault(&mut inner, |f| match f {
                ArchiveFault::RecordId(id) => Some(id.clone()),
                _ => None,
            });
            let id =
                forced.unwrap_or_else(|| format!("{:05}-{:05}", 10000 + n, (n * 7919) % 100000));
            let parent = format!("{:05}-p{:04}", 20000 + n, n % 10000);
            let r = ArchiveRecord {
                id: id.clone(),
                created: created_now(),
                parent,
                published: false,
                metadata: body["metadata"].clone(),
                files: BTreeMap::new(),
                doi: None,
                concept_doi: None,
                index: 1,
            };
            let v = record_json(base, &r);
            inner.records.insert(id, r);
            inner.creates += 1;
            (201, v)
        }
        ("GET", [id]) => match inner.records.get(*id).filter(|r| r.published) {
            Some(r) => (200, record_json(base, r)),
            None => not_found(),
        },
        ("GET", [id, "files"]) => match inner.records.get(*id).filter(|r| r.published) {
            Some(r) => (200, entries_json(base, r)),
            None => not_found(),
        },
        ("GET", [id, "draft"]) => match inner.records.get(*id).filter(|r| !r.published) {
            Some(r) => (200, record_json(base, r)),
            None => not_found(),
        },
        ("PUT", [id, "draft"]) => {
            let fault = take_fault(&mut inner, |f| match f {
                ArchiveFault::RejectField { field, message } => {
                    Some((field.clone(), message.clone()))
                }
                _ => None,
            });
            let Some(r) = inner.records.get_mut(*id).filter(|r| !r.published) else {
                return not_found();
            };
            r.metadata = body["metadata"].clone();
            let errors = validate(&r.metadata, fault);
            let mut v = record_json(base, r);
            if !errors.is_empty() {
                v["errors"] = Value::Array(errors);
            }
            (200, v)
        }
        ("GET", [id, "draft", "files"]) => match inner.records.get(*id).filter(|r| !r.published) {
            Some(r) => (200, entries_json(base, r)),
            None => not_found(),
        },
        ("POST", [id, "draft", "files"]) => {
            let limits = inner.limits;
            let Some(r) = inner.records.get_mut(*id).filter(|r| !r.published) else {
                return not_found();
            };
            let Some(keys) = body.as_array() else {
                return error(400, "Expected a list of files.");
            };
            for k in keys {
                let Some(key) = k["key"]
                    .as_str()
                    .filter(|k| !k.is_empty() && !k.contains('/'))
                else {
                    return (
                        400,
                        json!({"status": 400, "message": "A validation error occurred.",
                               "errors": [{"field": "key", "messages": ["Invalid file key."]}]}),
                    );
                };
                if r.files.contains_key(key) {
                    return error(400, &format!("File with key {key} already exists."));
                }
                if r.files.len() >= limits.max_files {
                    return error(
                        400,
                        &format!(
                            "Uploading more than {} files is not allowed.",
                            limits.max_files
                        ),
                    );
                }
                r.files.insert(
                    key.to_owned(),
                    ArchiveFile {
                        key: key.to_owned(),
                        status: "pending".into(),
                        size: 0,
                        md5: String::new(),
                        checksum: None,
                        bytes: Arc::new(Vec::new()),
                    },
                );
            }
            (201, entries_json(base, r))
        }
        ("POST", [id, "draft", "files", key, "commit"]) => {
            let wrong = take_fault(&mut inner, |f| {
                matches!(f, ArchiveFault::WrongChecksum).then_some(())
            })
            .is_some();
            let Some(r) = inner.records.get_mut(*id).filter(|r| !r.published) else {
                return not_found();
            };
            let Some(f) = r.files.get_mut(*key) else {
                return not_found();
            };
            if f.md5.is_empty() {
                return error(400, "The file has no content yet.");
            }
            f.status = "completed".into();
            let md5 = if wrong { "0".repeat(32) } else { f.md5.clone() };
            f.checksum = Some(format!("md5:{md5}"));
            let f = f.clone();
            (200, file_json(base, r, &f))
        }
        ("DELETE", [id, "draft", "files", key]) => {
            let Some(r) = inner.records.get_mut(*id).filter(|r| !r.published) else {
                return not_found();
            };
            match r.files.remove(*key) {
                Some(_) => (204, Value::Null),
                None => not_found(),
            }
        }
        ("POST", [id, "draft", "actions", "publish"]) => {
            let fault = take_fault(&mut inner, |f| match f {
                ArchiveFault::RejectField { field, message } => {
                    Some((field.clone(), message.clone()))
                }
                _ => None,
            });
            let Some(r) = inner.records.get(*id).filter(|r| !r.published) else {
                return not_found();
            };
            let mut errors = validate(&r.metadata, fault);
            if r.files.is_empty() {
                errors.push(json!({"field": "files.enabled", "messages": ["Missing uploaded files. To disable files for this record please mark it as metadata-only."]}));
            }
            for f in r.files.values().filter(|f| f.status != "completed") {
                errors.push(json!({"field": "files", "messages": [format!("File {} is not committed.", f.key)]}));
            }
            if !errors.is_empty() {
                return (
                    400,
                    json!({"status": 400, "message": "A validation error occurred.", "errors": errors}),
                );
            }
            let r = inner.records.get_mut(*id).expect("checked above");
            r.published = true;
            r.doi = Some(format!("10.5072/loopback.{}", r.id));
            let concept = format!("10.5072/loopback.{}", r.parent);
            let r = r.clone();
            for other in inner.records.values_mut().filter(|o| o.parent == r.parent) {
                other.concept_doi = Some(concept.clone());
            }
            let r = inner.records[&r.id].clone();
            for f in r.files.values() {
                sh.files
                    .serve(&InvenioServer::file_path(&r.id, &f.key), (*f.bytes).clone());
            }
            let mut v = record_json(base, &r);
            let links = take_fault(&mut inner, |f| match f {
                ArchiveFault::DraftLinksInPublishAnswer => Some(None),
                ArchiveFault::ForeignLinksInPublishAnswer { base } => Some(Some(base.clone())),
                _ => None,
            });
            match links {
                Some(None) => {
                    let mut draft = r.clone();
                    draft.published = false;
                    v["links"] = record_json(base, &draft)["links"].clone();
                }
                Some(Some(foreign)) => {
                    let text = v["links"].to_string().replace(base, &foreign);
                    v["links"] = serde_json::from_str(&text).unwrap_or(Value::Null);
                }
                None => {}
            }
            (202, v)
        }
        ("POST", [id, "versions"]) => {
            let Some(r) = inner.records.get(*id).filter(|r| r.published).cloned() else {
                return not_found();
            };
            if let Some(d) = inner
                .records
                .values()
                .find(|d| d.parent == r.parent && !d.published)
            {
                return (201, record_json(base, d));
            }
            let index = inner
                .records
                .values()
                .filter(|d| d.parent == r.parent)
                .count()
                + 1;
            let n = inner.next;
            inner.next += 1;
            let id = format!("{:05}-{:05}", 10000 + n, (n * 7919) % 100000);
            let mut metadata = r.metadata.clone();
            if let Some(m) = metadata.as_object_mut() {
                m.remove("publication_date");
                m.remove("version");
            }
            let d = ArchiveRecord {
                id: id.clone(),
                created: created_now(),
                parent: r.parent.clone(),
                published: false,
                metadata,
                files: BTreeMap::new(),
                doi: None,
                concept_doi: r.concept_doi.clone(),
                index,
            };
            let v = record_json(base, &d);
            inner.records.insert(id, d);
            (201, v)
        }
        _ => error(404, "The requested URL was not found on the server."),
    }
}

fn upload(
    reader: &mut impl BufRead,
    out: TcpStream,
    sh: &Shared,
    req: &Request,
    id: &str,
    key: &str,
) -> std::io::Result<()> {
    let mut out = out;
    let (limits, discard, known) = {
        let inner = sh.inner.lock().unwrap();
        let known = inner
            .records
            .get(id)
            .filter(|r| !r.published)
            .and_then(|r| r.files.get(key))
            .is_some();
        (inner.limits, inner.discard, known)
    };
    if !known {
        let _ = read_body(reader, req, None, &mut |_| {});
        let (code, body) = error(404, "The file does not exist; initialise it first.");
        return answer(&mut out, code, "", &body);
    }
    let never_read = take_fault(&mut sh.inner.lock().unwrap(), |f| match f {
        ArchiveFault::NeverReadUpload { secs } => Some(*secs),
        _ => None,
    });
    if let Some(secs) = never_read {
        std::thread::sleep(Duration::from_secs(secs));
        return Ok(());
    }
    let fault = take_fault(&mut sh.inner.lock().unwrap(), |f| match f {
        ArchiveFault::UploadStatus(c) => Some((Some(*c), None)),
        ArchiveFault::CutUpload { after } => Some((None, Some(*after))),
        _ => None,
    });
    let (status, cut) = fault.unwrap_or((None, None));
    let mut md5 = Md5::new();
    let mut bytes = Vec::new();
    let mut size = 0u64;
    let mut too_big = false;
    let whole = read_body(reader, req, cut, &mut |b| {
        size += b.len() as u64;
        if size > limits.max_file_size {
            too_big = true;
            return;
        }
        md5.update(b);
        if !discard {
            bytes.extend_from_slice(b);
        }
    });
    match whole {
        Ok(false) => {
            crate::reset(out);
            return Ok(());
        }
        Err(e) => return Err(e),
        Ok(true) => {}
    }
    if let Some(code) = status {
        let (code, body) = error(code, "Internal server error.");
        return answer(&mut out, code, "", &body);
    }
    if too_big {
        let (code, body) = error(
            400,
            &format!(
                "File size exceeds the maximum of {} bytes.",
                limits.max_file_size
            ),
        );
        return answer(&mut out, code, "", &body);
    }
    let mut inner = sh.inner.lock().unwrap();
    let quota = inner.limits.quota;
    let Some(r) = inner.records.get_mut(id) else {
        drop(inner);
        let (code, body) = error(404, "The record does not exist.");
        return answer(&mut out, code, "", &body);
    };
    let others: u64 = r
        .files
        .values()
        .filter(|f| f.key != key)
        .map(|f| f.size)
        .sum();
    if others + size > quota {
        drop(inner);
        let (code, body) = error(
            400,
            &format!("The record's files exceed its quota of {quota} bytes."),
        );
        return answer(&mut out, code, "", &body);
    }
    let f = r.files.get_mut(key).expect("checked above");
    f.size = size;
    f.md5 = hex::encode(md5.finalize());
    f.bytes = Arc::new(bytes);
    f.status = "pending".into();
    f.checksum = None;
    let v = json!({"key": key, "status": "pending"});
    drop(inner);
    answer(&mut out, 200, "", &v)
}

/// A published file, relayed from the file server (the request's `Range` and `If-Range` go
/// through, the answer comes back as it is).
fn download(
    mut out: TcpStream,
    sh: &Shared,
    req: &Request,
    id: &str,
    key: &str,
) -> std::io::Result<()> {
    let exists = sh
        .inner
        .lock()
        .unwrap()
        .records
        .get(id)
        .is_some_and(|r| r.published && r.files.contains_key(key));
    if !exists {
        let (code, body) = error(404, "The file does not exist.");
        return answer(&mut out, code, "", &body);
    }
    let url = sh.files.url(&InvenioServer::file_path(id, key));
    let addr = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap_or("")
        .to_owned();
    let mut upstream = TcpStream::connect(&addr)?;
    let path = &url["http://".len() + addr.len()..];
    let mut head = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for h in ["range", "if-range"] {
        if let Some(v) = req.headers.get(h) {
            head.push_str(&format!("{h}: {v}\r\n"));
        }
    }
    head.push_str("\r\n");
    upstream.write_all(head.as_bytes())?;
    std::io::copy(&mut upstream, &mut out)?;
    out.flush()
}
