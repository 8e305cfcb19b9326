//! A loopback HTTPS server whose certificate comes from a CA made for the test (rcgen), so TLS
//! trust can be tested for real: unknown CA, a CA given by file or folder, skipped hosts.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// An HTTPS server on `127.0.0.1:<port>` serving one body at every path; its certificate is for
/// `localhost` and `127.0.0.1`, issued by a CA whose PEM is written to a file.
pub struct TlsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    requests: Arc<AtomicUsize>,
    ca_pem: PathBuf,
    _dir: tempfile::TempDir,
}

/// What the server does with each connection.
#[derive(Clone)]
enum Mode {
    Serve(Arc<Vec<u8>>),
    Forward(SocketAddr),
}

impl TlsServer {
    /// Starts serving `body`.
    pub fn start(body: Vec<u8>) -> TlsServer {
        Self::start_mode(Mode::Serve(Arc::new(body)))
    }

    /// Starts a TLS front for the plain TCP server at `upstream` (e.g. an S3 test server):
    /// each connection's decrypted bytes are forwarded both ways.
    pub fn start_forwarding(upstream: SocketAddr) -> TlsServer {
        Self::start_mode(Mode::Forward(upstream))
    }

    fn start_mode(mode: Mode) -> TlsServer {
        let dir = tempfile::tempdir().unwrap();
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "clima-artifacts test CA");
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let leaf_key = rcgen::KeyPair::generate().unwrap();
        let leaf_params =
            rcgen::CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
                .unwrap();
        let leaf = leaf_params.signed_by(&leaf_key, &issuer).unwrap();
        let ca_pem = dir.path().join("test-ca.pem");
        std::fs::write(&ca_pem, ca_cert.pem()).unwrap();

        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![leaf.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into()),
            )
            .unwrap();
        let config = Arc::new(config);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(AtomicUsize::new(0));
        let (sp, count) = (stop.clone(), requests.clone());
        std::thread::spawn(move || {
            while !sp.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let (config, count, mode) = (config.clone(), count.clone(), mode.clone());
                        std::thread::spawn(move || {
                            let _ = match mode {
                                Mode::Serve(body) => serve_one(stream, config, &count, &body),
                                Mode::Forward(up) => forward_one(stream, config, &count, up),
                            };
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        TlsServer {
            addr,
            stop,
            requests,
            ca_pem,
            _dir: dir,
        }
    }

    /// `https://127.0.0.1:<port>/<path>`.
    pub fn url(&self, path: &str) -> String {
        format!("https://{}/{}", self.addr, path.trim_start_matches('/'))
    }

    /// The PEM file of the CA that issued the server's certificate.
    pub fn ca_pem(&self) -> &Path {
        &self.ca_pem
    }

    /// HTTP requests that completed a TLS handshake and were answered.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::Relaxed)
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn forward_one(
    stream: std::net::TcpStream,
    config: Arc<rustls::ServerConfig>,
    count: &AtomicUsize,
    upstream: SocketAddr,
) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_millis(50)))?;
    let conn = rustls::ServerConnection::new(config).map_err(std::io::Error::other)?;
    let mut tls = rustls::StreamOwned::new(conn, stream);
    let mut up = std::net::TcpStream::connect(upstream)?;
    up.set_read_timeout(Some(Duration::from_millis(50)))?;
    count.fetch_add(1, Ordering::Relaxed);
    let mut buf = vec![0u8; 64 * 1024];
    let mut last = std::time::Instant::now();
    while let Some(sent) = relay(&mut tls, &mut up, &mut buf)? {
        let Some(received) = relay(&mut up, &mut tls, &mut buf)? else {
            break;
        };
        if sent || received {
            last = std::time::Instant::now();
        } else if last.elapsed() > Duration::from_secs(30) {
            break;
        }
    }
    tls.conn.send_close_notify();
    let _ = tls.flush();
    Ok(())
}

/// Moves what `from` has ready (within its read timeout) into `to`, flushed: `Some(true)` if
/// bytes moved, `Some(false)` if none were ready, `None` once `from` has ended or failed.
fn relay(
    from: &mut impl std::io::Read,
    to: &mut impl Write,
    buf: &mut [u8],
) -> std::io::Result<Option<bool>> {
    match from.read(buf) {
        Ok(0) => Ok(None),
        Ok(n) => {
            to.write_all(&buf[..n])?;
            to.flush()?;
            Ok(Some(true))
        }
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            Ok(Some(false))
        }
        Err(_) => Ok(None),
    }
}

fn serve_one(
    stream: std::net::TcpStream,
    config: Arc<rustls::ServerConfig>,
    count: &AtomicUsize,
    body: &[u8],
) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let conn = rustls::ServerConnection::new(config).map_err(std::io::Error::other)?;
    let mut tls = rustls::StreamOwned::new(conn, stream);
    let mut reader = BufReader::new(&mut tls);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" || line == "\n" {
            break;
        }
    }
    drop(reader);
    count.fetch_add(1, Ordering::Relaxed);
    write!(
        tls,
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    tls.write_all(body)?;
    tls.flush()?;
    tls.conn.send_close_notify();
    let _ = tls.flush();
    Ok(())
}
