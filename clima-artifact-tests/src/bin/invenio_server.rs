//! The loopback InvenioRDM archive of the tests as a process of its own, for
//! `scripts/bench-archive-upload.sh`.
//!
//! ```text
//! invenio_server <token> [--keep]
//! ```
//!
//! Prints `http://127.0.0.1:<port>` on stdout, then serves until stdin closes. Uploaded bytes
//! are hashed (MD5, as the archive does) and dropped unless `--keep` is given, so a benchmark of
//! large uploads needs no memory for them.

use std::io::{Read, Write};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (token, keep) = match args.as_slice() {
        [t] => (t, false),
        [t, k] if k == "--keep" => (t, true),
        _ => {
            eprintln!("usage: invenio_server <token> [--keep]");
            return ExitCode::from(2);
        }
    };
    let server = clima_artifact_tests::invenio::InvenioServer::start(token);
    if !keep {
        server.discard_content();
    }
    println!("{}", server.base());
    let _ = std::io::stdout().flush();
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    ExitCode::SUCCESS
}
