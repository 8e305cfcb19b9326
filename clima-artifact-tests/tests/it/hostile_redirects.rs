//! Redirects a hostile server may send: never to link-local (the cloud metadata
//! address) or private addresses from a loopback origin, never from https to http; redirects
//! within the origin's own class still work.
//!
//! The refusals are tested inside a fresh network namespace (`unshare -rn`, only loopback up),
//! so even if the code under test were wrong, no connection could leave this machine. The
//! outer test re-runs this binary there with `--exact`; without `unshare` it skips with a
//! message, except under CI=true, where it fails.

use std::process::Command;

use clima_artifact_runtime::ensure_variant;
use clima_artifact_tests::{
    Fault, TestArtifact, TestServer, failure_reasons, have_git, test_config,
};

const INSIDE: &str = "CLIMA_TEST_INSIDE_NETNS";

#[test]
fn redirects_to_internal_addresses_are_refused_in_a_network_namespace() {
    if !have_git() {
        return;
    }
    let ok = Command::new("unshare")
        .args(["-rn", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true but `unshare -rn` does not work here (needs util-linux and user namespaces)"
        );
        clima_artifact_tests::skip(
            "`unshare -rn` is not available, so the redirect refusals are not run",
        );
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("unshare")
        .args(["-rn", "sh", "-c"])
        .arg("(ip link set lo up 2>/dev/null || ifconfig lo up 2>/dev/null || true) && exec \"$0\" --exact hostile_redirects::refusals_inside_the_namespace --ignored --nocapture")
        .arg(&exe)
        .env(INSIDE, "1")
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "inside the namespace:\n{text}");
    assert!(
        text.contains("1 passed"),
        "the inner test did not run:\n{text}"
    );
}

/// Run by the test above inside the namespace (ignored when run directly).
#[test]
#[ignore = "run by redirects_to_internal_addresses_are_refused_in_a_network_namespace"]
fn refusals_inside_the_namespace() {
    if std::env::var(INSIDE).as_deref() != Ok("1") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let depot = dir.path().join("depot");
    let config = test_config(std::slice::from_ref(&depot));
    let server = TestServer::start();
    let art = TestArtifact::sample(1421);
    server.serve("real.tar.gz", art.tarball.clone());
    for (path, location, part) in [
        (
            "metadata.tar.gz",
            "http://169.254.169.254/latest/meta-data/iam/".to_owned(),
            "link-local",
        ),
        (
            "private.tar.gz",
            "http://10.20.30.40:8080/x.tar.gz".to_owned(),
            "private-network",
        ),
        (
            "mapped.tar.gz",
            "http://[::ffff:192.168.1.1]/x.tar.gz".to_owned(),
            "private-network",
        ),
    ] {
        server.always(path, Fault::Redirect(location.clone()));
        let v = art.variant(&[server.url(path)]);
        let e = ensure_variant("redirected", &v, &depot, &config).unwrap_err();
        let text = failure_reasons(&e);
        assert!(
            text.contains("refused to follow redirect 1")
                && text.contains(&location)
                && text.contains(part),
            "{text}"
        );
        assert_eq!(server.gets(path), 1, "retried a refused redirect: {text}");
    }
    // A redirect that stays on loopback (the origin's own class) is followed.
    server.always("hop.tar.gz", Fault::Redirect("/real.tar.gz".to_owned()));
    let v = art.variant(&[server.url("hop.tar.gz")]);
    let installed = ensure_variant("redirected", &v, &depot, &config).unwrap();
    art.assert_content(&installed.path);
    assert_eq!(server.gets("real.tar.gz"), 1);
}

#[test]
fn a_redirect_loop_is_an_error_naming_it() {
    if !have_git() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let depot = dir.path().join("depot");
    let server = TestServer::start();
    let art = TestArtifact::sample(1422);
    server.always("loop.tar.gz", Fault::Redirect("loop.tar.gz".to_owned()));
    let config = test_config(std::slice::from_ref(&depot));
    let v = art.variant(&[server.url("loop.tar.gz")]);
    let e = ensure_variant("looped", &v, &depot, &config).unwrap_err();
    let text = failure_reasons(&e);
    assert!(text.contains("redirect loop"), "{text}");
    assert_eq!(server.gets("loop.tar.gz"), 11);
}
