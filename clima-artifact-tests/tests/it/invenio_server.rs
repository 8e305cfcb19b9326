//! The `invenio_server` binary, the loopback InvenioRDM archive as a process of its own (to
//! rehearse `publish --archive` offline, docs/archive.md): its command line, and that it serves
//! the token it is given.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

fn server() -> Command {
    Command::new(env!("CARGO_BIN_EXE_invenio_server"))
}

/// `--help` prints the usage and starts nothing (it used to start a server whose token was
/// "--help"); a command line without a token, or with an unknown argument, is refused.
#[test]
fn invenio_server_help_prints_the_usage_and_starts_no_server() {
    let out = server()
        .arg("--help")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        text.starts_with("usage: invenio_server --token TOKEN [--port PORT] [--discard]"),
        "{text}"
    );
    assert!(!text.lines().any(|l| l.starts_with("http://")), "{text}");
    for (args, why) in [
        (&[][..], "--token TOKEN is required"),
        (&["--token"][..], "--token needs a value"),
        (&["--token", "--help"][..], "--token needs a value"),
        (&["s3cr3t"][..], "unknown argument `s3cr3t`"),
        (
            &["--token", "t", "--port", "http"][..],
            "--port needs a port number",
        ),
    ] {
        let out = server().args(args).stdin(Stdio::null()).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(why) && err.contains("usage:"),
            "{args:?}: {err}"
        );
        assert!(out.stdout.is_empty(), "{args:?} started a server");
    }
}

/// Sends `POST /api/records` with `token` to the server at `addr`; the answer's status code.
fn create_record(addr: &str, token: &str) -> u16 {
    let mut s = TcpStream::connect(addr).unwrap();
    let body = r#"{"metadata": {"title": "rehearsal"}}"#;
    write!(
        s,
        "POST /api/records HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// `--token` is the token it accepts, and it prints the address it serves on, where it serves
/// until stopped.
#[test]
fn invenio_server_serves_with_the_token_it_is_given() {
    let mut child = server()
        .args(["--token", "rehearsal", "--port", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("http://127.0.0.1:")
        .map(|port| format!("127.0.0.1:{port}"))
        .unwrap_or_else(|| panic!("no address: {line:?}"));
    assert_eq!(create_record(&addr, "rehearsal"), 201);
    assert_eq!(create_record(&addr, "--help"), 401);
    assert!(child.try_wait().unwrap().is_none(), "it stopped serving");
    child.kill().unwrap();
    child.wait().unwrap();
}
