//! Downloads through a real forwarding proxy on loopback: http and https (CONNECT)
//! through it, NO_PROXY bypassing it, credentials in the proxy URL, and a proxy that refuses.
//! The proxy records every target, so each test asserts the request really went through it
//! (or around it).

use clima_artifact_runtime::{Config, ProxySettings, ensure_variant};
use clima_artifact_tests::{
    ConnectProxy, ProxyRules, TestArtifact, TestServer, TlsServer, failure_reasons, have_git,
    test_config,
};

fn with_proxy(depot: &std::path::Path, proxy: ProxySettings) -> Config {
    let mut config = test_config(&[depot.to_path_buf()]);
    config.net.proxy = proxy;
    config
}

#[test]
fn http_and_https_go_through_the_proxy_and_no_proxy_goes_around() {
    if !have_git() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let art = TestArtifact::sample(1711);
    let plain = TestServer::start();
    plain.serve("a.tar.gz", art.tarball.clone());
    let tls = TlsServer::start(art.tarball.clone());
    let proxy = ConnectProxy::start(ProxyRules::default());
    let settings = ProxySettings {
        http: Some(("HTTP_PROXY".into(), proxy.url(None))),
        https: Some(("HTTPS_PROXY".into(), proxy.url(None))),
        no_proxy: Vec::new(),
    };

    // http://
    let config = with_proxy(&dir.path().join("d1"), settings.clone());
    let got = ensure_variant(
        "a",
        &art.variant(&[plain.url("a.tar.gz")]),
        dir.path(),
        &config,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    art.assert_content(&got.path);
    let origin = plain.base().trim_start_matches("http://").to_owned();
    assert_eq!(proxy.targets(), [origin]);
    assert_eq!(plain.gets("a.tar.gz"), 1);

    // https:// through a CONNECT tunnel (the test CA trusted).
    let mut config = with_proxy(&dir.path().join("d2"), settings.clone());
    config.net.ca_roots = Some((
        "CLIMA_ARTIFACTS_CA_ROOTS".into(),
        tls.ca_pem().to_path_buf(),
    ));
    let got = ensure_variant(
        "a",
        &art.variant(&[tls.url("a.tar.gz")]),
        dir.path(),
        &config,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    art.assert_content(&got.path);
    assert_eq!(proxy.targets().len(), 2);
    assert_eq!(tls.requests(), 1);

    // NO_PROXY: straight to the server, the proxy sees nothing new.
    let mut bypass = settings.clone();
    bypass.no_proxy = vec!["127.0.0.1".into()];
    let config = with_proxy(&dir.path().join("d3"), bypass);
    ensure_variant(
        "a",
        &art.variant(&[plain.url("a.tar.gz")]),
        dir.path(),
        &config,
    )
    .unwrap();
    assert_eq!(proxy.targets().len(), 2, "NO_PROXY was not honoured");
    assert_eq!(plain.gets("a.tar.gz"), 2);

    // HTTPS_PROXY alone does not apply to http:// (curl's rule), ALL_PROXY does.
    let from_env = |vars: &[(&str, &str)]| {
        Config::from_vars(|k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        })
        .unwrap()
        .net
        .proxy
    };
    let p = from_env(&[("HTTPS_PROXY", "http://p:3128")]);
    assert!(p.for_url("http://data.org/x").is_none());
    assert!(p.for_url("https://data.org/x").is_some());
    let p = from_env(&[("all_proxy", "http://p:3128"), ("no_proxy", ".lab.org")]);
    assert!(p.for_url("http://data.org/x").is_some());
    assert!(p.for_url("https://a.lab.org/x").is_none());
}

#[test]
fn credentials_in_the_proxy_url_and_a_refusing_proxy_is_named() {
    if !have_git() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let art = TestArtifact::sample(1712);
    let plain = TestServer::start();
    plain.serve("a.tar.gz", art.tarball.clone());
    let v = art.variant(&[plain.url("a.tar.gz")]);
    let guarded = ConnectProxy::start(ProxyRules {
        credentials: Some(("alice".into(), "s3cret".into())),
        refuse: false,
    });
    let settings = |url: String| ProxySettings {
        http: Some(("HTTP_PROXY".into(), url)),
        https: None,
        no_proxy: Vec::new(),
    };
    let config = with_proxy(
        &dir.path().join("d1"),
        settings(guarded.url(Some(("alice", "s3cret")))),
    );
    let got = ensure_variant("a", &v, dir.path(), &config).unwrap_or_else(|e| panic!("{e}"));
    art.assert_content(&got.path);
    assert_eq!(guarded.targets().len(), 1);

    // Without credentials: an error that names the proxy (not the origin) and hides nothing
    // secret.
    let config = with_proxy(&dir.path().join("d2"), settings(guarded.url(None)));
    let e = failure_reasons(&ensure_variant("a", &v, dir.path(), &config).unwrap_err());
    assert!(
        e.contains(&format!("the proxy `{}`", guarded.url(None))),
        "{e}"
    );
    assert!(e.contains("HTTP_PROXY"), "{e}");

    let refusing = ConnectProxy::start(ProxyRules {
        credentials: None,
        refuse: true,
    });
    let config = with_proxy(
        &dir.path().join("d3"),
        settings(refusing.url(Some(("bob", "hunter2")))),
    );
    let e = failure_reasons(&ensure_variant("a", &v, dir.path(), &config).unwrap_err());
    assert!(e.contains("did not open a connection"), "{e}");
    assert!(e.contains("http://***@"), "{e}");
    assert!(
        !e.contains("bob"),
        "the user name leaked into the message: {e}"
    );
    assert!(
        !e.contains("hunter2"),
        "the password leaked into the message: {e}"
    );
    assert_eq!(refusing.targets().len(), 1);
    assert_eq!(
        plain.gets("a.tar.gz"),
        1,
        "the origin was reached around the proxy"
    );
}

#[test]
fn every_proxy_failure_names_the_proxy_and_its_variable() {
    let dir = tempfile::tempdir().unwrap();
    let art = TestArtifact::sample(1713);
    let plain = TestServer::start();
    plain.serve("a.tar.gz", art.tarball.clone());
    let tls = TlsServer::start(art.tarball.clone());
    let fails = |depot: &str, settings: ProxySettings, url: String| {
        let config = with_proxy(&dir.path().join(depot), settings);
        failure_reasons(
            &ensure_variant("a", &art.variant(&[url]), dir.path(), &config).unwrap_err(),
        )
    };
    let https = |url: String| ProxySettings {
        http: None,
        https: Some(("HTTPS_PROXY".into(), url)),
        no_proxy: Vec::new(),
    };

    // Nothing listens at the proxy's address: the proxy refused, not the origin.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let proxy_url = format!("http://carol:pa%40ss@{closed}");
    let e = fails("d1", https(proxy_url), tls.url("a.tar.gz"));
    assert!(
        e.contains(&format!(
            "the proxy `http://***@{closed}` (from HTTPS_PROXY) refused the connection"
        )),
        "{e}"
    );
    assert!(
        !e.contains("pa@ss") && !e.contains("word@"),
        "password leaked: {e}"
    );
    assert_eq!(tls.requests(), 0);

    // The tunnel opens but the server's certificate is not trusted: said to be met through
    // the proxy, with the hint about a TLS-inspecting proxy's CA.
    let open = ConnectProxy::start(ProxyRules::default());
    let e = fails("d2", https(open.url(None)), tls.url("a.tar.gz"));
    assert!(
        e.contains(&format!(
            "TLS error through the proxy `{}` (from HTTPS_PROXY)",
            open.url(None)
        )),
        "{e}"
    );
    assert!(e.contains("CLIMA_ARTIFACTS_CA_ROOTS"), "{e}");
    assert_eq!(open.targets().len(), 1);

    // Credentials wanted and not given: the proxy's 407, and where credentials go.
    let guarded = ConnectProxy::start(ProxyRules {
        credentials: Some(("alice".into(), "s3cret".into())),
        refuse: false,
    });
    let http = ProxySettings {
        http: Some(("http_proxy".into(), guarded.url(None))),
        https: None,
        no_proxy: Vec::new(),
    };
    let e = fails("d3", http, plain.url("a.tar.gz"));
    assert!(
        e.contains(&format!(
            "the proxy `{}` (from http_proxy)",
            guarded.url(None)
        )),
        "{e}"
    );
    assert!(e.contains("407") && e.contains("wants credentials"), "{e}");
    assert_eq!(
        plain.gets("a.tar.gz"),
        0,
        "the origin was reached around the proxy"
    );
}
