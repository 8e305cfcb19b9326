//! Serves one file over loopback HTTP with every connection capped at a rate, as archival
//! servers and object stores cap each stream (for `scripts/bench-parallel.sh`).
//!
//! ```text
//! capped_server <file> <bytes-per-second> [<late-ms>]
//! ```
//!
//! Prints `http://127.0.0.1:<port>/<file name>` on stdout, then serves until stdin closes.
//! Ranges (`bytes=a-b`, `If-Range`), a strong ETag and `Accept-Ranges: bytes` as a static file
//! host sends them; `GET /__sent/<file name>` answers `<body bytes sent> <most connections at
//! once>`. A rate of `0` is no cap. With `<late-ms>`, a connection its client closed stays
//! counted that many milliseconds after the server noticed (a server that notices closes late,
//! `TestServer::notice_closes_late`).

use std::io::{Read, Write};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (file, rate, late) = match args.as_slice() {
        [file, rate] => (file, rate, "0"),
        [file, rate, late] => (file, rate, late.as_str()),
        _ => {
            eprintln!("usage: capped_server <file> <bytes-per-second> [<late-ms>]");
            return ExitCode::from(2);
        }
    };
    let Ok(late) = late.parse::<u64>() else {
        eprintln!("capped_server: the delay `{late}` is not a number of milliseconds");
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
    server.notice_closes_late(std::time::Duration::from_millis(late));
    println!("{}", server.url(&name));
    let _ = std::io::stdout().flush();
    // Until whoever started it closes our stdin (or dies).
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    ExitCode::SUCCESS
}
