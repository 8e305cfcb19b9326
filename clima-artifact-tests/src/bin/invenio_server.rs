//! The loopback InvenioRDM archive of the tests as a process of its own: to rehearse `publish
//! --archive` offline (docs/archive.md), and for `scripts/bench-archive-upload.sh`.
//!
//! ```text
//! invenio_server --token TOKEN [--port PORT] [--discard]
//! invenio_server --help
//! ```
//!
//! Prints `http://127.0.0.1:<port>` on stdout, then serves until it is stopped (Ctrl-C, a
//! signal).

use std::io::Write;
use std::process::ExitCode;

const USAGE: &str = "\
usage: invenio_server --token TOKEN [--port PORT] [--discard]
       invenio_server --help

A loopback InvenioRDM archive (the REST API of CaltechDATA and Zenodo, as the tests of
clima-artifacts use it), to rehearse `clima-artifacts publish NAME --archive URL` offline.
It prints its address, http://127.0.0.1:PORT, then serves until it is stopped (Ctrl-C, or
kill). Records live in memory: they are gone when it stops.

options:
  --token TOKEN   the personal access token it accepts (give the same one to publish in
                  CLIMA_ARTIFACTS_ARCHIVE_TOKEN); required
  --port PORT     listen on 127.0.0.1:PORT (default: a free port)
  --discard       keep only the size and MD5 of uploaded files, not their bytes (benchmarks
                  of large uploads; the published files cannot be downloaded then)
  --help          print this and exit

example:
  invenio_server --token rehearsal --port 8765 &
  CLIMA_ARTIFACTS_ARCHIVE_TOKEN=rehearsal clima-artifacts publish era5 --archive http://127.0.0.1:8765
  kill %1
";

/// The command line: token, port, whether to discard uploaded bytes.
struct Options {
    token: String,
    port: u16,
    discard: bool,
}

/// `Ok(None)`: `--help`; `Err`: what is wrong with the command line.
fn parse(args: &[String]) -> Result<Option<Options>, String> {
    let mut token = None;
    let mut port = 0u16;
    let mut discard = false;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--help" | "-h" => return Ok(None),
            "--discard" => discard = true,
            "--token" => match args.next() {
                Some(t) if !t.trim().is_empty() && !t.starts_with('-') => token = Some(t.clone()),
                _ => return Err("--token needs a value (the token publish will send)".into()),
            },
            "--port" => {
                port = args
                    .next()
                    .and_then(|p| p.parse().ok())
                    .ok_or("--port needs a port number, 0 to 65535")?;
            }
            other => {
                return Err(format!(
                    "unknown argument `{}`",
                    other.escape_debug().collect::<String>()
                ));
            }
        }
    }
    let token = token.ok_or("--token TOKEN is required")?;
    Ok(Some(Options {
        token,
        port,
        discard,
    }))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let options = match parse(&args) {
        Ok(Some(o)) => o,
        Ok(None) => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(why) => {
            eprintln!("invenio_server: {why}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let server = match clima_artifact_tests::invenio::InvenioServer::start_on(
        &options.token,
        options.port,
    ) {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "invenio_server: cannot listen on 127.0.0.1:{}: {e}",
                options.port
            );
            return ExitCode::from(1);
        }
    };
    if options.discard {
        server.discard_content();
    }
    println!("{}", server.base());
    let _ = std::io::stdout().flush();
    // The server's threads do the work; this one waits to be stopped.
    loop {
        std::thread::park();
    }
}
