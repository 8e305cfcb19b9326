//! Resumed downloads: a transfer that breaks mid-body continues with
//! `Range: bytes=N-` (guarded by `If-Range`) into the same hash and decompressor, so a 40 GB
//! download interrupted at 39 GB does not start over. A server that ignores ranges gets a clean
//! restart, and the install is verified either way.

use clima_artifact_runtime::{Origin, ensure_variant};
use clima_artifact_tests::{
    Fault, Served, TestArtifact, have_git, served, temp_entries, test_config,
};

fn case(seed: u64) -> Option<Served> {
    // Incompressible content, so the tarball is about as large as the files (~1.2 MB).
    have_git().then(|| served(TestArtifact::large(seed, 6, 200_000), "big.tar.gz"))
}

trait Install {
    fn install(&self) -> std::path::PathBuf;
}

impl Install for Served {
    fn install(&self) -> std::path::PathBuf {
        let config = test_config(std::slice::from_ref(&self.depot));
        let v = self.art.variant(&[self.server.url("big.tar.gz")]);
        let got = ensure_variant("big", &v, &self.depot, &config).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(got.origin, Origin::Downloaded { .. }));
        self.art.assert_content(&got.path);
        assert!(temp_entries(&self.depot).is_empty());
        got.path
    }
}

#[test]
fn a_reset_at_half_resumes_with_a_range_request() {
    let Some(c) = case(1501) else { return };
    let len = c.art.tarball.len() as u64;
    let half = c.art.tarball.len() / 2;
    c.server
        .fail_next("big.tar.gz", [Fault::Reset { after: half }]);
    c.install();
    assert_eq!(c.server.gets("big.tar.gz"), 2);
    let ranges = c.server.ranges_of("big.tar.gz");
    assert_eq!(ranges.len(), 1, "{ranges:?}");
    assert!(ranges[0] > 0 && ranges[0] <= half as u64, "{ranges:?}");
    let served = c.server.bytes_sent_for("big.tar.gz");
    assert!(
        (served as f64) < 1.3 * len as f64,
        "served {served} bytes for a {len}-byte tarball"
    );
}

#[test]
fn a_stall_and_a_short_body_resume_too() {
    let Some(c) = case(1502) else { return };
    let len = c.art.tarball.len();
    c.server.fail_next(
        "big.tar.gz",
        [
            Fault::Stall { after: len / 3 },
            Fault::Short { after: 2 * len / 3 },
        ],
    );
    c.install();
    let ranges = c.server.ranges_of("big.tar.gz");
    assert_eq!(ranges.len(), 2, "{ranges:?}");
    assert!(ranges[0] < ranges[1], "{ranges:?}");
    assert!((c.server.bytes_sent_for("big.tar.gz") as f64) < 1.3 * len as f64);
}

#[test]
fn a_server_that_ignores_ranges_gets_a_clean_restart() {
    let Some(c) = case(1503) else { return };
    let len = c.art.tarball.len();
    c.server.ignore_ranges("big.tar.gz");
    c.server
        .fail_next("big.tar.gz", [Fault::Reset { after: len / 2 }]);
    c.install();
    // No `Accept-Ranges: bytes`: no range request at all, a second full GET.
    assert!(c.server.ranges_of("big.tar.gz").is_empty());
    assert_eq!(c.server.gets("big.tar.gz"), 2);
}

#[test]
fn a_server_that_answers_a_range_with_the_whole_file_gets_a_clean_restart() {
    let Some(c) = case(1504) else { return };
    let len = c.art.tarball.len();
    // It says it does ranges, then answers the range request with 200 and everything.
    c.server.fail_next(
        "big.tar.gz",
        [
            Fault::Reset { after: len / 2 },
            Fault::Body(c.art.tarball.clone()),
        ],
    );
    c.install();
    assert_eq!(c.server.ranges_of("big.tar.gz").len(), 1);
    // The cut first GET, the refused range request, and a full restart.
    assert_eq!(c.server.gets("big.tar.gz"), 3);
}

#[test]
fn a_server_that_breaks_every_time_at_the_same_byte_gives_up() {
    let Some(c) = case(1505) else { return };
    c.server.always("big.tar.gz", Fault::Reset { after: 1000 });
    let config = test_config(std::slice::from_ref(&c.depot));
    let v = c.art.variant(&[c.server.url("big.tar.gz")]);
    let e = ensure_variant("big", &v, &c.depot, &config).unwrap_err();
    let text = e.to_string();
    assert!(text.contains("after 3 attempts"), "{text}");
    // 3 attempts, each: the first GET and at most 3 resumes that receive nothing.
    assert!(
        c.server.gets("big.tar.gz") <= 3 * 4,
        "{}",
        c.server.gets("big.tar.gz")
    );
}

#[test]
fn a_resume_answered_with_another_files_bytes_is_a_clean_restart() {
    let Some(c) = case(1504) else { return };
    let half = c.art.tarball.len() / 2;
    // The same length, other bytes, another ETag: the server ignores If-Range and answers
    // the resume with a `206` of the other file, then serves the original again.
    let mut other = c.art.tarball.clone();
    for b in other.iter_mut().skip(1000) {
        *b ^= 0x5a;
    }
    c.server.fail_next(
        "big.tar.gz",
        [
            Fault::Reset { after: half },
            Fault::ReplaceIgnoringIfRange(other),
            Fault::Replace(c.art.tarball.clone()),
        ],
    );
    c.install();
    assert_eq!(c.server.gets("big.tar.gz"), 3);
}
