//! Which TLS roots and which hosts without verification downloads use, chosen the
//! way Julia's NetworkOptions chooses them:
//!
//! 1. `CLIMA_ARTIFACTS_CA_ROOTS` (and, with `CLIMA_ARTIFACTS_JULIA_INTEROP=1`,
//!    `JULIA_SSL_CA_ROOTS_PATH`): a PEM bundle file, or a folder of PEM files;
//! 2. else `SSL_CERT_FILE`, else `SSL_CERT_DIR` (as curl, pip and OpenSSL read them);
//! 3. else the system's CA bundle (Debian, RHEL, SUSE, Alpine and macOS locations), where an
//!    institution's admins install its CA;
//! 4. else the Mozilla roots bundled into the binary (webpki-roots).
//!
//! `CLIMA_ARTIFACTS_NO_VERIFY_HOSTS` (and `JULIA_SSL_NO_VERIFY_HOSTS` under interop) names
//! hosts whose certificates are not verified, with a warning each time; the sha256 and the tree
//! hash still protect the content.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ureq::tls::{Certificate, PemItem, RootCerts};

use crate::NetConfig;
use clima_artifact_vars as vars;
use clima_artifact_vars::{CA_ROOTS, NO_VERIFY_HOSTS};

/// System CA bundle locations, first existing wins (as NetworkOptions' list).
const SYSTEM_BUNDLES: [&str; 6] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/pki/tls/cacert.pem",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// Where the roots come from, for messages and `clima-artifacts doctor`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootsSource {
    /// A file or folder named by a variable.
    Variable {
        /// The variable, e.g. `SSL_CERT_FILE`.
        name: String,
        /// Its path.
        path: PathBuf,
    },
    /// The system's bundle.
    System(PathBuf),
    /// The Mozilla roots compiled into the binary.
    Bundled,
}

impl std::fmt::Display for RootsSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RootsSource::Variable { name, path } => write!(f, "`{}` (from {name})", path.display()),
            RootsSource::System(p) => write!(f, "the system's CA bundle `{}`", p.display()),
            RootsSource::Bundled => f.write_str("the Mozilla roots bundled into clima-artifacts"),
        }
    }
}

/// The TLS roots named by a variable, read through `get` in this order (the first set one
/// wins): `CLIMA_ARTIFACTS_CA_ROOTS`, `JULIA_SSL_CA_ROOTS_PATH` when `julia_interop`,
/// `AWS_CA_BUNDLE` when `aws` (the AWS SDKs' variable, for S3 clients), `SSL_CERT_FILE`,
/// `SSL_CERT_DIR`. `None` when none is set: [`roots_source`] then picks the system's bundle or
/// the bundled roots. A variable naming nothing is `Err((variable, value, reason))`.
///
/// Downloads, `publish` and run sync all choose their roots here, so they trust the same ones.
pub fn ca_roots_from_vars(
    get: impl Fn(&str) -> Option<String>,
    julia_interop: bool,
    aws: bool,
) -> Result<Option<(String, PathBuf)>, (String, String, String)> {
    let mut names = vec![vars::CA_ROOTS];
    if julia_interop {
        names.push(vars::JULIA_SSL_CA_ROOTS_PATH);
    }
    if aws {
        names.push(vars::AWS_CA_BUNDLE);
    }
    names.extend([vars::SSL_CERT_FILE, vars::SSL_CERT_DIR]);
    for name in names {
        if let Some(v) = get(name).filter(|v| !v.trim().is_empty()) {
            let path = PathBuf::from(v.trim());
            if !path.exists() {
                return Err((
                    name.to_owned(),
                    v,
                    "no such file or folder; point it at a PEM bundle (or a folder of PEM files) \
                     with the CA certificates to trust"
                        .to_owned(),
                ));
            }
            return Ok(Some((name.to_owned(), path)));
        }
    }
    Ok(None)
}

/// Where the roots for `config` come from.
pub fn roots_source(config: &NetConfig) -> RootsSource {
    if let Some((name, path)) = &config.ca_roots {
        return RootsSource::Variable {
            name: name.clone(),
            path: path.clone(),
        };
    }
    match SYSTEM_BUNDLES.iter().map(Path::new).find(|p| p.is_file()) {
        Some(p) => RootsSource::System(p.to_path_buf()),
        None => RootsSource::Bundled,
    }
}

/// The root certificates for `config` (read once per path and process).
pub(crate) fn root_certs(config: &NetConfig) -> Result<RootCerts, String> {
    let path = match roots_source(config) {
        RootsSource::Bundled => return Ok(RootCerts::WebPki),
        RootsSource::Variable { path, .. } | RootsSource::System(path) => path,
    };
    static CACHE: Mutex<Vec<(PathBuf, Arc<Vec<Certificate<'static>>>)>> = Mutex::new(Vec::new());
    let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, certs)) = cache.iter().find(|(p, _)| *p == path) {
        return Ok(RootCerts::Specific(Arc::clone(certs)));
    }
    let certs = Arc::new(read_certs(&path)?);
    cache.push((path, Arc::clone(&certs)));
    Ok(RootCerts::Specific(certs))
}

/// Every certificate in the PEM file `path`, or in the PEM files of the folder `path`.
fn read_certs(path: &Path) -> Result<Vec<Certificate<'static>>, String> {
    let mut certs = Vec::new();
    for bytes in clima_artifact_fs::read_ca_bundle(path)? {
        for item in ureq::tls::parse_pem(&bytes) {
            if let Ok(PemItem::Certificate(c)) = item {
                certs.push(c);
            }
        }
    }
    if certs.is_empty() {
        return Err(format!(
            "`{}` holds no PEM certificate (`-----BEGIN CERTIFICATE-----`); point the variable at \
             your institution's CA bundle",
            path.display()
        ));
    }
    Ok(certs)
}

/// Whether `host` is named in [`NetConfig::no_verify_hosts`] (exact names, or `*.domain` /
/// `.domain` for every host below `domain`, as Julia's variable allows).
pub(crate) fn skips_verification(config: &NetConfig, host: &str) -> bool {
    let host = host.to_ascii_lowercase();
    config.no_verify_hosts.iter().any(|pattern| {
        let p = pattern.trim().to_ascii_lowercase();
        if let Some(domain) = p.strip_prefix("*.").or_else(|| p.strip_prefix('.')) {
            host.ends_with(&format!(".{domain}"))
        } else {
            host == p
        }
    })
}

/// `url` without its user info, for messages, logs, `--json` output and `clima-artifacts doctor`
/// (proxy, package-server and manifest URLs carry credentials): `http://***@host:port`. The
/// whole user info is hidden, user name included: a token is often the user name
/// (`https://TOKEN:x-oauth-basic@host`, `https://TOKEN@host`). Whatever the URL's shape:
/// without a scheme (`user:pass@proxy:3128`), with `@` or `/` in the password (the user info
/// ends at the last `@`), or not a URL at all.
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (format!("{scheme}://"), rest),
        None => (String::new(), url),
    };
    match rest.rfind('@') {
        Some(at) => format!("{scheme}***@{}", &rest[at + 1..]),
        None => url.to_owned(),
    }
}

/// The hint a certificate error gets: which roots were used and what to set.
pub(crate) fn certificate_hint(config: &NetConfig, host: &str) -> String {
    format!(
        "the certificate of `{host}` is not trusted by {}; if your network or institution uses \
         its own CA (a TLS-inspecting proxy, an internal server), set {CA_ROOTS} \
         (or SSL_CERT_FILE) to its PEM bundle, or, for this host only, \
         {NO_VERIFY_HOSTS}={host} (the sha256 and tree hash still check the data)",
        roots_source(config)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_patterns() {
        let config = NetConfig {
            no_verify_hosts: vec!["data.lab.org".into(), "*.internal".into(), ".corp".into()],
            ..NetConfig::default()
        };
        assert!(skips_verification(&config, "DATA.lab.org"));
        assert!(skips_verification(&config, "a.b.internal"));
        assert!(skips_verification(&config, "x.corp"));
        assert!(!skips_verification(&config, "internal"));
        assert!(!skips_verification(&config, "evil-data.lab.org"));
    }

    #[test]
    fn credentials_are_redacted_whatever_the_shape() {
        for (url, want) in [
            ("http://proxy:3128", "http://proxy:3128"),
            ("http://u:secret@proxy:3128", "http://***@proxy:3128"),
            ("http://u:se@cr/et@proxy:3128/", "http://***@proxy:3128/"),
            ("u:secret@proxy:3128", "***@proxy:3128"),
            (
                "https://ghp_secrettoken@pkg.example",
                "https://***@pkg.example",
            ),
            // A token as the user name, with a dummy password (GitHub's form).
            (
                "https://secrettoken:x-oauth-basic@host/a.tar.gz",
                "https://***@host/a.tar.gz",
            ),
            ("not a url u:secret@x", "***@x"),
        ] {
            let got = redact_url(url);
            assert_eq!(got, want, "{url}");
            assert!(!got.contains("secret"), "{got}");
        }
    }
}
