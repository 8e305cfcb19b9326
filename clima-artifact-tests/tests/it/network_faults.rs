//! Network faults from the loopback server: each ends in success (retry or next URL) or in an
//! error naming every URL and why, with nothing partial left in the depot.

use std::time::Duration;

use clima_artifact_runtime::{Config, Error, NetError, SourceFailure};
use clima_artifact_runtime::{Origin, ensure_variant};
use clima_artifact_tests::{
    Fault, TestArtifact, TestServer, assert_depot_clean, have_git, temp_entries, test_config,
};

struct Case {
    _dir: tempfile::TempDir,
    depot: std::path::PathBuf,
    config: Config,
    server: TestServer,
    art: TestArtifact,
}

fn case() -> Option<Case> {
    if !have_git() {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let depot = dir.path().join("depot");
    let config = test_config(std::slice::from_ref(&depot));
    let server = TestServer::start();
    let art = TestArtifact::large(7, 6, 40_000);
    server.serve("a.tar.gz", art.tarball.clone());
    server.serve("b.tar.gz", art.tarball.clone());
    Some(Case {
        _dir: dir,
        depot,
        config,
        server,
        art,
    })
}

fn install(c: &Case, urls: &[&str]) -> Result<std::path::PathBuf, Error> {
    let urls: Vec<String> = urls.iter().map(|u| c.server.url(u)).collect();
    let v = c.art.variant(&urls);
    ensure_variant("data", &v, c.depot.as_path(), &c.config).map(|i| {
        assert!(matches!(i.origin, Origin::Downloaded { .. }));
        i.path
    })
}

fn assert_success(c: &Case, r: Result<std::path::PathBuf, Error>) {
    let path = r.unwrap_or_else(|e| panic!("install failed: {e}"));
    c.art.assert_content(&path);
    assert_eq!(temp_entries(&c.depot), Vec::<String>::new());
}

/// The error lists every URL with a reason, and the depot holds nothing.
fn assert_failure(c: &Case, r: Result<std::path::PathBuf, Error>, reasons: &[(&str, &str)]) {
    let e = r.expect_err("install should fail");
    let text = e.to_string();
    eprintln!("{text}");
    let Error::DownloadFailed { failures, .. } = &e else {
        panic!("expected DownloadFailed, got {e:?}");
    };
    assert_eq!(failures.len(), reasons.len(), "{text}");
    for (f, (path, why)) in failures.iter().zip(reasons) {
        assert_eq!(f.url(), c.server.url(path), "{text}");
        let line = f.to_string();
        assert!(line.contains(why), "`{why}` not in `{line}`");
        assert!(text.contains(&line), "{text}");
    }
    assert!(
        text.contains("for artifact `data`, or make the data available locally")
            && text.contains("Overrides.toml`:\n    "),
        "{text}"
    );
    assert_depot_clean(&c.depot);
}

#[test]
fn not_found_then_second_url_succeeds_without_retrying_404() {
    let Some(c) = case() else { return };
    c.server.always("a.tar.gz", Fault::Status(404));
    assert_success(&c, install(&c, &["a.tar.gz", "b.tar.gz"]));
    assert_eq!(c.server.gets("a.tar.gz"), 1, "404 is not retried");
    assert_eq!(c.server.gets("b.tar.gz"), 1);
}

#[test]
fn not_found_error_text_says_what_to_do_next() {
    let Some(c) = case() else { return };
    c.server.always("a.tar.gz", Fault::Status(404));
    let e = install(&c, &["a.tar.gz"]).unwrap_err().to_string();
    let (hash, depot) = (c.art.tree_hash, c.depot.display());
    assert_eq!(
        e,
        format!(
            "could not install artifact `data` ({hash}): its download source failed:\n  \
             - HTTP 404 from `{url}`\n\
             check the URL in `{depot}/Artifacts.toml` for artifact `data`, or make the data \
             available locally: point it at a local copy by adding this line to \
             `{depot}/artifacts/Overrides.toml`:\n    {hash} = \"/path/to/data\"",
            url = c.server.url("a.tar.gz"),
        )
    );
    assert_eq!(c.server.gets("a.tar.gz"), 1);
}

#[test]
fn status_500_everywhere_is_retried_then_reported() {
    let Some(c) = case() else { return };
    c.server.always("a.tar.gz", Fault::Status(500));
    c.server.always("b.tar.gz", Fault::Status(403));
    let r = install(&c, &["a.tar.gz", "b.tar.gz"]);
    assert_failure(&c, r, &[("a.tar.gz", "HTTP 500"), ("b.tar.gz", "HTTP 403")]);
    assert_eq!(
        c.server.gets("a.tar.gz"),
        3,
        "retried up to CLIMA_ARTIFACTS_RETRIES"
    );
    assert_eq!(c.server.gets("b.tar.gz"), 1, "403 is not retried");
}

#[test]
fn service_unavailable_twice_then_ok() {
    let Some(c) = case() else { return };
    c.server
        .fail_next("a.tar.gz", [Fault::Status(503), Fault::Status(503)]);
    assert_success(&c, install(&c, &["a.tar.gz"]));
    assert_eq!(c.server.gets("a.tar.gz"), 3);
}

#[test]
fn too_many_requests_is_retried() {
    let Some(c) = case() else { return };
    c.server.fail_next("a.tar.gz", [Fault::Status(429)]);
    assert_success(&c, install(&c, &["a.tar.gz"]));
    assert_eq!(c.server.gets("a.tar.gz"), 2);
}

#[test]
fn reset_mid_body_is_retried() {
    let Some(c) = case() else { return };
    let half = c.art.tarball.len() / 2;
    c.server
        .fail_next("a.tar.gz", [Fault::Reset { after: half }]);
    assert_success(&c, install(&c, &["a.tar.gz"]));
    assert_eq!(c.server.gets("a.tar.gz"), 2);
}

#[test]
fn reset_every_time_is_reported() {
    let Some(c) = case() else { return };
    c.server.always("a.tar.gz", Fault::Reset { after: 1000 });
    let r = install(&c, &["a.tar.gz"]);
    let e = r.as_ref().expect_err("must fail").to_string();
    assert!(e.contains("after 3 attempts"), "{e}");
    assert_failure(&c, r, &[("a.tar.gz", "")]);
}

#[test]
fn short_body_is_detected_and_retried() {
    let Some(c) = case() else { return };
    let n = c.art.tarball.len() - 100;
    c.server.fail_next("a.tar.gz", [Fault::Short { after: n }]);
    assert_success(&c, install(&c, &["a.tar.gz"]));
    assert_eq!(c.server.gets("a.tar.gz"), 2);

    // Always short: an error, never a silently truncated install.
    let Some(c) = case() else { return };
    c.server.always("a.tar.gz", Fault::Short { after: n });
    let r = install(&c, &["a.tar.gz"]);
    assert_failure(&c, r, &[("a.tar.gz", "")]);
}

#[test]
fn stall_beyond_the_timeout_fails_over_to_the_next_url() {
    let Some(mut c) = case() else { return };
    c.config.net.retry.attempts = 1;
    c.server.always("a.tar.gz", Fault::Stall { after: 5000 });
    assert_success(&c, install(&c, &["a.tar.gz", "b.tar.gz"]));

    c.server.always("b.tar.gz", Fault::Stall { after: 0 });
    let _ = std::fs::remove_dir_all(c.depot.join("artifacts"));
    let r = install(&c, &["a.tar.gz", "b.tar.gz"]);
    assert_failure(
        &c,
        r,
        &[
            ("a.tar.gz", "CLIMA_ARTIFACTS_STALL_TIMEOUT"),
            ("b.tar.gz", "CLIMA_ARTIFACTS_STALL_TIMEOUT"),
        ],
    );
}

#[test]
fn slow_trickle_within_the_stall_timeout_succeeds() {
    let Some(c) = case() else { return };
    let chunk = c.art.tarball.len() / 20 + 1;
    c.server.always(
        "a.tar.gz",
        Fault::Trickle {
            chunk,
            delay: Duration::from_millis(30),
        },
    );
    assert_success(&c, install(&c, &["a.tar.gz"]));
    assert_eq!(c.server.gets("a.tar.gz"), 1);
}

#[test]
fn wrong_bytes_on_first_url_good_on_second() {
    let Some(c) = case() else { return };
    let other = TestArtifact::sample(99);
    c.server
        .always("a.tar.gz", Fault::Body(other.tarball.clone()));
    assert_success(&c, install(&c, &["a.tar.gz", "b.tar.gz"]));
    assert_eq!(
        c.server.gets("a.tar.gz"),
        1,
        "a hash mismatch is not retried"
    );

    let Some(c) = case() else { return };
    c.server
        .always("a.tar.gz", Fault::Body(other.tarball.clone()));
    c.server
        .always("b.tar.gz", Fault::Body(b"not a tarball at all".to_vec()));
    let r = install(&c, &["a.tar.gz", "b.tar.gz"]);
    assert_failure(
        &c,
        r,
        &[
            ("a.tar.gz", "sha256 mismatch"),
            ("b.tar.gz", "sha256 mismatch"),
        ],
    );
}

#[test]
fn connection_refused_is_reported_with_the_url() {
    let Some(mut c) = case() else { return };
    c.config.net.retry.attempts = 2;
    // A port nobody listens on: bind, note the port, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/x.tar.gz");
    let v = c.art.variant(std::slice::from_ref(&url));
    let e = ensure_variant("data", &v, &c.depot, &c.config).unwrap_err();
    let s = e.to_string();
    assert!(s.contains(&url) && s.contains("after 2 attempts"), "{s}");
    assert_depot_clean(&c.depot);
}

#[test]
fn errors_that_cannot_succeed_on_retry_are_tried_once() {
    let Some(c) = case() else { return };
    assert_eq!(c.config.net.retry.attempts, 3);
    // A plain-HTTP listener that counts connections; `https://` to it is a TLS error.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let connections = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = connections.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            std::thread::spawn(move || {
                use std::io::{Read, Write};
                let mut buf = [0u8; 1024];
                let _ = stream.read(&mut buf);
                let _ = stream.write_all(
                    b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
            });
        }
    });
    let url = format!("https://127.0.0.1:{port}/x.tar.gz");
    let v = c.art.variant(std::slice::from_ref(&url));
    let e = ensure_variant("data", &v, &c.depot, &c.config).unwrap_err();
    let Error::DownloadFailed { failures, .. } = &e else {
        panic!("{e:?}")
    };
    assert!(
        matches!(
            &failures[0],
            SourceFailure::Net {
                error: NetError::Transport {
                    transient: false,
                    ..
                },
                attempts: 1,
            }
        ),
        "{e:?}"
    );
    assert!(!e.to_string().contains("attempts"), "{e}");
    assert_eq!(
        connections.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "a TLS error is not retried: {e}"
    );
    assert!(
        e.to_string()
            .contains(&format!("`{url}`: TLS or protocol error: ")),
        "{e}"
    );

    // An invalid URL (no host) fails once too, without any connection.
    let v = c.art.variant(&["http:///x.tar.gz".to_owned()]);
    let e = ensure_variant("data", &v, &c.depot, &c.config).unwrap_err();
    let Error::DownloadFailed { failures, .. } = &e else {
        panic!("{e:?}")
    };
    assert!(
        matches!(
            &failures[0],
            SourceFailure::Net {
                error: NetError::Transport { .. },
                attempts: 1
            }
        ),
        "{e:?}"
    );
    assert_depot_clean(&c.depot);
}

/// A model (here the `install_one` binary, which installs no `tracing` subscriber) shows its
/// retries and fall-throughs on stderr, once each, in the plain style of its download lines.
#[test]
fn a_model_prints_retries_and_fall_throughs_without_a_subscriber() {
    let Some(c) = case() else { return };
    c.server.fail_next("b.tar.gz", [Fault::Status(503)]);
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_install_one"));
    cmd.args([
        "variant",
        "data",
        &c.art.tree_hash.to_hex(),
        &c.art.sha256.to_hex(),
    ])
    .arg(c.server.url("missing.tar.gz"))
    .arg(c.server.url("b.tar.gz"));
    for (k, v) in clima_artifact_tests::config_env(&c.config) {
        cmd.env(k, v);
    }
    let out = cmd.env_remove("CLIMA_ARTIFACTS_PROGRESS").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let warnings: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("clima-artifacts: warning: "))
        .collect();
    assert_eq!(warnings.len(), 2, "{err}");
    assert!(
        warnings[0].contains(&c.server.url("missing.tar.gz"))
            && warnings[0].contains("404")
            && warnings[0].ends_with("trying the next URL"),
        "{err}"
    );
    assert!(
        warnings[1].contains("503") && warnings[1].contains("retrying in"),
        "{err}"
    );
    assert!(
        err.contains("clima-artifacts: downloaded `data`: "),
        "{err}"
    );
}
