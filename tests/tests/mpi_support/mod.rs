//! Minimal support for the MPI and multi-process tests: a loopback HTTP server that counts GETs
//! per path, and a gzip tarball builder whose git tree hash comes from real `git`.
//!
//! (Kept local to these tests so they do not wait on the shared `clima_artifact_tests` support;
//! the shapes match it so switching is an import change.)

#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use sha2::Digest;

#[derive(Default)]
struct State {
    files: HashMap<String, Arc<Vec<u8>>>,
    gets: HashMap<String, usize>,
}

/// A loopback HTTP/1.1 server: `GET /path` returns the bytes served at that path, else 404.
pub struct TestServer {
    addr: std::net::SocketAddr,
    state: Arc<Mutex<State>>,
}

impl TestServer {
    /// Binds `127.0.0.1:0` and serves on a background thread until the process ends.
    pub fn start() -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let addr = listener.local_addr().expect("local addr");
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let state = shared.clone();
                std::thread::spawn(move || {
                    let _ = handle(stream, &state);
                });
            }
        });
        TestServer { addr, state }
    }

    /// Serves `bytes` at `path` (which starts with `/`).
    pub fn serve(&self, path: &str, bytes: Vec<u8>) {
        let mut s = self.state.lock().expect("server state");
        s.files.insert(path.to_owned(), Arc::new(bytes));
    }

    /// Stops serving `path`: later GETs get 404.
    pub fn remove(&self, path: &str) {
        self.state.lock().expect("server state").files.remove(path);
    }

    /// The full URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// GET requests received for `path` so far (404s included).
    pub fn get_count(&self, path: &str) -> usize {
        let s = self.state.lock().expect("server state");
        s.gets.get(path).copied().unwrap_or(0)
    }
}

fn handle(stream: TcpStream, state: &Mutex<State>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request = String::new();
    reader.read_line(&mut request)?;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header == "\r\n" || header == "\n" {
            break;
        }
    }
    let mut parts = request.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let body = {
        let mut s = state.lock().expect("server state");
        if method == "GET" {
            *s.gets.entry(path.to_owned()).or_default() += 1;
        }
        s.files.get(path).cloned()
    };
    let mut out = stream;
    match body {
        Some(bytes) => {
            write!(
                out,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Type: application/gzip\r\nConnection: close\r\n\r\n",
                bytes.len()
            )?;
            if method == "GET" {
                out.write_all(&bytes)?;
            }
        }
        None => write!(
            out,
            "HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\nConnection: close\r\n\r\nnot found"
        )?,
    }
    out.flush()
}

/// A built tarball and the digests a manifest needs.
pub struct Tarball {
    /// The `.tar.gz` bytes.
    pub bytes: Vec<u8>,
    /// Hex SHA-256 of `bytes`.
    pub sha256: String,
    /// Hex git tree SHA-1 of the unpacked content, computed by real `git`.
    pub tree_hash: String,
}

/// Builds a `.tar.gz` of regular files.
#[derive(Default)]
pub struct TarballBuilder {
    files: Vec<(String, Vec<u8>)>,
}

impl TarballBuilder {
    /// An empty builder.
    pub fn new() -> TarballBuilder {
        TarballBuilder::default()
    }

    /// Adds a regular file (mode 644) at `path`.
    pub fn file(mut self, path: &str, bytes: &[u8]) -> TarballBuilder {
        self.files.push((path.to_owned(), bytes.to_vec()));
        self
    }

    /// The gzip tarball, its SHA-256 and its git tree hash.
    pub fn build_gz(self) -> Tarball {
        let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(
            Vec::new(),
            flate2::Compression::fast(),
        ));
        for (path, bytes) in &self.files {
            let mut header = tar::Header::new_gnu();
            header.set_size(bytes.len() as u64);
            header.set_mode(0o644);
            header.set_cksum();
            tar.append_data(&mut header, path, &bytes[..]).expect("tar entry");
        }
        let bytes = tar
            .into_inner()
            .expect("tar")
            .finish()
            .expect("gzip");
        let sha256 = hex(&sha2::Sha256::digest(&bytes));
        let tree_hash = git_tree_hash(&self.files);
        Tarball {
            bytes,
            sha256,
            tree_hash,
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `git write-tree` of the files, in a scratch repository.
fn git_tree_hash(files: &[(String, Vec<u8>)]) -> String {
    let repo = tempfile::tempdir().expect("tempdir");
    let git = |args: &[&str], dir: &Path| {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("run `git` (needed to compute tree hashes)");
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8(out.stdout).expect("utf-8")
    };
    git(&["init", "-q"], repo.path());
    for (path, bytes) in files {
        let full = repo.path().join(path);
        std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
        std::fs::write(full, bytes).expect("write");
    }
    git(&["add", "-A"], repo.path());
    git(&["write-tree"], repo.path()).trim().to_owned()
}
