//! TLS trust as clusters need it, against a real loopback HTTPS server whose
//! certificate comes from a CA made in the test: an unknown CA is an error that says which
//! roots were used and what to set; the CA given by file (CLIMA_ARTIFACTS_CA_ROOTS,
//! SSL_CERT_FILE) or folder (SSL_CERT_DIR) is trusted; a host named in
//! CLIMA_ARTIFACTS_NO_VERIFY_HOSTS works unverified, an unnamed one still fails.

use clima_artifact_runtime::{Config, ensure_variant};
use clima_artifact_tests::{TestArtifact, TlsServer, failure_reasons, have_git, test_config};

fn config_from(depot: &std::path::Path, vars: &[(&str, String)]) -> Config {
    let from_env = Config::from_vars(|k| {
        vars.iter()
            .find(|(name, _)| *name == k)
            .map(|(_, v)| v.clone())
    })
    .unwrap();
    let mut config = test_config(&[depot.to_path_buf()]);
    config.net.ca_roots = from_env.net.ca_roots;
    config.net.no_verify_hosts = from_env.net.no_verify_hosts;
    config
}

#[test]
fn downloads_trust_the_roots_they_are_told_to() {
    if !have_git() {
        return;
    }
    let art = TestArtifact::sample(1701);
    let server = TlsServer::start(art.tarball.clone());
    let v = art.variant(&[server.url("era5.tar.gz")]);
    let dir = tempfile::tempdir().unwrap();

    // The CA is nowhere in the trust store: a clear error naming the roots and the variables.
    let depot = dir.path().join("d0");
    let e = ensure_variant("era5", &v, dir.path(), &config_from(&depot, &[])).unwrap_err();
    let text = failure_reasons(&e);
    assert!(
        text.contains("the certificate of `127.0.0.1` is not trusted by")
            && text.contains("CLIMA_ARTIFACTS_CA_ROOTS")
            && text.contains("CLIMA_ARTIFACTS_NO_VERIFY_HOSTS=127.0.0.1"),
        "{text}"
    );

    let ca = server.ca_pem().display().to_string();
    let ca_dir = server.ca_pem().parent().unwrap().display().to_string();
    for (i, var) in [
        ("CLIMA_ARTIFACTS_CA_ROOTS", ca.clone()),
        ("SSL_CERT_FILE", ca.clone()),
        ("SSL_CERT_DIR", ca_dir.clone()),
    ]
    .into_iter()
    .enumerate()
    {
        let depot = dir.path().join(format!("d{}", i + 1));
        let config = config_from(&depot, std::slice::from_ref(&var));
        assert_eq!(config.net.ca_roots.as_ref().unwrap().0, var.0);
        let got = ensure_variant("era5", &v, dir.path(), &config)
            .unwrap_or_else(|e| panic!("{}: {e}", var.0));
        art.assert_content(&got.path);
    }

    // A named host is not verified (with a warning); another name does not help.
    let depot = dir.path().join("d9");
    let named = config_from(
        &depot,
        &[("CLIMA_ARTIFACTS_NO_VERIFY_HOSTS", "127.0.0.1".to_owned())],
    );
    let got = ensure_variant("era5", &v, dir.path(), &named).unwrap();
    art.assert_content(&got.path);
    let depot = dir.path().join("d10");
    let other = config_from(
        &depot,
        &[(
            "CLIMA_ARTIFACTS_NO_VERIFY_HOSTS",
            "data.example.org".to_owned(),
        )],
    );
    assert!(ensure_variant("era5", &v, dir.path(), &other).is_err());
    // A bad path is a configuration error naming the variable.
    let e = Config::from_vars(|k| (k == "SSL_CERT_FILE").then(|| "/no/such/ca.pem".to_owned()))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("SSL_CERT_FILE") && e.contains("/no/such/ca.pem"),
        "{e}"
    );
}

/// Issue 25, 12: a host named in CLIMA_ARTIFACTS_NO_VERIFY_HOSTS that redirects to another
/// https host does not lend it its exception: the next hop's certificate is verified (and
/// here, from a CA nobody trusts, refused).
#[test]
fn a_redirect_from_a_no_verify_host_verifies_the_next_host() {
    if !have_git() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let art = TestArtifact::sample(2512);
    // `localhost` serves the tarball over TLS with a certificate of an unknown CA.
    let target = TlsServer::start(art.tarball.clone());
    let next = target.url("era5.tar.gz").replace("127.0.0.1", "localhost");
    // `127.0.0.1` (named as not to be verified) redirects there.
    let plain = clima_artifact_tests::TestServer::start();
    plain.always("era5.tar.gz", clima_artifact_tests::Fault::Redirect(next));
    let addr = plain.base().trim_start_matches("http://").parse().unwrap();
    let front = TlsServer::start_forwarding(addr);
    let v = art.variant(&[front.url("era5.tar.gz")]);
    let config = config_from(
        &dir.path().join("depot"),
        &[("CLIMA_ARTIFACTS_NO_VERIFY_HOSTS", "127.0.0.1".to_owned())],
    );
    let e = ensure_variant("era5", &v, dir.path(), &config).unwrap_err();
    let reasons = failure_reasons(&e);
    assert_eq!(plain.gets("era5.tar.gz"), 1, "{reasons}");
    assert!(
        reasons.contains("certificate") && reasons.contains("localhost"),
        "{reasons}"
    );
}
