//! Serves one file over loopback HTTP with every connection capped at a rate, as archival
//! servers and object stores cap each stream (for `scripts/bench-parallel.sh`).
//!
//! ```text
//! capped_server <file> <bytes-per-second>
//! ```
//!
//! Prints `http://127.0.0.1:<port>/<file name>` on stdout, then serves until stdin closes.
//! Ranges (`bytes=a-b`, `If-Range`), a strong ETag and `Accept-Ranges: bytes` as a static file
//! host sends them; `GET /__sent/<file name>` answers `<body bytes sent> <most connections at
//! once>`. A rate of `0` is no cap.

use std::io::{Read, Write};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [file, rate] = args.as_slice() else {
        eprintln!("usage: capped_server <file> <bytes-per-second>");
        return ExitCode::from(2);
    };
    let (Ok(bytes), Ok(rate)) = (std::fs::read(file), rate.parse::<u64>()) else {
        eprintln!("capped_server: cannot read `{file}` or the rate `{rate}` is not a number");
        return ExitCode::from(2);
    };
    let name = std::path::Path::new(file)
        .file_name()
        .map_or_else(|| "file".to_owned(), |n| n.to_string_lossy().into_owned());
    let server = clima_artifact_tests::TestServer::start();
    server.serve(&name, bytes);
    server.cap_rate(rate);
    println!("{}", server.url(&name));
    let _ = std::io::stdout().flush();
    // Until whoever started it closes our stdin (or dies).
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    ExitCode::SUCCESS
}
