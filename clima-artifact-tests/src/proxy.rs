//! A forwarding proxy on loopback for tests: it answers `CONNECT host:port` by opening a tunnel
//! (what ureq does for every target through an HTTP proxy), can require Basic credentials,
//! can refuse everything, and records each target it was asked for.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How the proxy behaves.
#[derive(Debug, Clone, Default)]
pub struct ProxyRules {
    /// Require `Proxy-Authorization: Basic base64(user:password)`; otherwise 407.
    pub credentials: Option<(String, String)>,
    /// Answer every CONNECT with 403.
    pub refuse: bool,
}

/// The proxy; dropping it stops accepting.
pub struct ConnectProxy {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    targets: Arc<Mutex<Vec<String>>>,
}

impl ConnectProxy {
    /// Starts a proxy on `127.0.0.1:<free port>`.
    pub fn start(rules: ProxyRules) -> ConnectProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let targets: Arc<Mutex<Vec<String>>> = Arc::default();
        let (sp, seen) = (stop.clone(), targets.clone());
        let rules = Arc::new(rules);
        std::thread::spawn(move || {
            while !sp.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((client, _)) => {
                        let (seen, rules) = (seen.clone(), rules.clone());
                        std::thread::spawn(move || {
                            let _ = tunnel(client, &seen, &rules);
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        ConnectProxy {
            addr,
            stop,
            targets,
        }
    }

    /// `http://127.0.0.1:<port>` (with `user:password@` when `credentials` are given).
    pub fn url(&self, credentials: Option<(&str, &str)>) -> String {
        match credentials {
            Some((u, p)) => format!("http://{u}:{p}@{}", self.addr),
            None => format!("http://{}", self.addr),
        }
    }

    /// The `host:port` of every CONNECT received, in order (refused ones included).
    pub fn targets(&self) -> Vec<String> {
        self.targets.lock().unwrap().clone()
    }
}

impl Drop for ConnectProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn base64(bytes: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(T[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn tunnel(client: TcpStream, seen: &Mutex<Vec<String>>, rules: &ProxyRules) -> std::io::Result<()> {
    client.set_nonblocking(false)?;
    client.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(client.try_clone()?);
    let mut request = String::new();
    reader.read_line(&mut request)?;
    let mut auth = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" || line == "\n" {
            break;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.trim().eq_ignore_ascii_case("proxy-authorization")
        {
            auth = Some(v.trim().to_owned());
        }
    }
    let mut out = client.try_clone()?;
    let mut parts = request.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    if method != "CONNECT" {
        return write!(
            out,
            "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n"
        );
    }
    seen.lock().unwrap().push(target.to_owned());
    if rules.refuse {
        return write!(out, "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n");
    }
    if let Some((u, p)) = &rules.credentials {
        let expected = format!("Basic {}", base64(format!("{u}:{p}").as_bytes()));
        if auth.as_deref() != Some(expected.as_str()) {
            return write!(
                out,
                "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"test\"\r\nContent-Length: 0\r\n\r\n"
            );
        }
    }
    let upstream = TcpStream::connect(target)?;
    write!(out, "HTTP/1.1 200 Connection established\r\n\r\n")?;
    // Bytes the reader buffered after the headers belong to the tunnel.
    let buffered = reader.buffer().to_vec();
    let mut up_write = upstream.try_clone()?;
    up_write.write_all(&buffered)?;
    let mut up_read = upstream;
    let mut client_read = reader.into_inner();
    let forward = std::thread::spawn(move || {
        let _ = std::io::copy(&mut client_read, &mut up_write);
        let _ = up_write.shutdown(std::net::Shutdown::Write);
    });
    let mut buf = [0u8; 16 * 1024];
    loop {
        match up_read.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if out.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = out.shutdown(std::net::Shutdown::Both);
    let _ = forward.join();
    Ok(())
}
