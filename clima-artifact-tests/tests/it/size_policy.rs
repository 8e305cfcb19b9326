//! The size policy of implicit downloads: a model's first use of an artifact larger
//! than `CLIMA_ARTIFACTS_MAX_DOWNLOAD_SIZE` fails before any request when the manifest declares
//! `size`, else right after the response headers; the error says how to fetch it explicitly.
//! A declared size that does not fit on the depot's filesystem fails before any request too.

use clima_artifact_runtime::{Config, Error, ensure_variant};
use clima_artifact_tests::{
    TestArtifact, assert_depot_clean, failure_reasons, have_git, served, test_config,
};

#[test]
fn a_declared_size_over_the_limit_fails_before_any_request() {
    if !have_git() {
        return;
    }
    let s = served(TestArtifact::large(1511, 4, 50_000), "big.tar.gz");
    let size = s.art.tarball.len() as u64;
    let mut v = s.art.variant(&[s.server.url("big.tar.gz")]);
    v.downloads[0].size = Some(size);
    let config = Config {
        max_download_size: Some(size - 1),
        ..test_config(std::slice::from_ref(&s.depot))
    };
    let e = ensure_variant("era5", &v, s.dir.path(), &config).unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, Error::DownloadTooLarge { .. }), "{text}");
    assert!(
        text.contains("CLIMA_ARTIFACTS_MAX_DOWNLOAD_SIZE")
            && text.contains("clima-artifacts fetch era5 --manifest")
            && text.contains("the manifest's `size`"),
        "{text}"
    );
    assert_eq!(s.server.total_gets(), 0, "a request was made");

    // No limit (what `clima-artifacts fetch` uses): it installs.
    let explicit = Config {
        max_download_size: None,
        ..config
    };
    let got = ensure_variant("era5", &v, s.dir.path(), &explicit).unwrap();
    s.art.assert_content(&got.path);
}

#[test]
fn without_a_declared_size_the_content_length_is_checked_before_the_body() {
    if !have_git() {
        return;
    }
    let s = served(TestArtifact::large(1512, 4, 50_000), "big.tar.gz");
    let size = s.art.tarball.len() as u64;
    let v = s.art.variant(&[s.server.url("big.tar.gz")]);
    let config = Config {
        max_download_size: Some(size / 2),
        ..test_config(std::slice::from_ref(&s.depot))
    };
    let e = ensure_variant("era5", &v, s.dir.path(), &config).unwrap_err();
    let text = failure_reasons(&e);
    assert!(
        text.contains("Content-Length") && text.contains("CLIMA_ARTIFACTS_MAX_DOWNLOAD_SIZE"),
        "{text}"
    );
    assert_eq!(s.server.gets("big.tar.gz"), 1, "retried: {text}");
    // The headers were read, the body was not (a little may sit in socket buffers).
    assert_depot_clean(&s.depot);
}

#[test]
fn a_declared_size_larger_than_the_free_space_fails_before_any_request() {
    if !have_git() {
        return;
    }
    let s = served(TestArtifact::sample(1513), "a.tar.gz");
    std::fs::create_dir_all(s.depot.join("artifacts")).unwrap();
    let mut v = s.art.variant(&[s.server.url("a.tar.gz")]);
    v.downloads[0].size = Some(1 << 60); // an exabyte: no filesystem here has that
    let config = Config {
        max_download_size: None,
        ..test_config(std::slice::from_ref(&s.depot))
    };
    let e = ensure_variant("huge", &v, s.dir.path(), &config).unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, Error::NoRoom { .. }), "{text}");
    assert!(
        text.contains("free") && text.contains(&s.depot.display().to_string()),
        "{text}"
    );
    assert!(text.contains("(its size in the manifest)"), "{text}");
    assert_eq!(s.server.total_gets(), 0);
}
