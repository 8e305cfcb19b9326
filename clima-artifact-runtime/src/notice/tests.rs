//! Every notice of this crate and the line it prints: today's lines, pinned word for word
//! (the CLI's snapshots and the integration tests read them).

use super::*;
use clima_artifact_progress::notice::{SystemError, line};
use std::io;

/// Each case's level and its text (`Display`, without the prefix).
fn check<E: Event>(cases: Vec<(E, Level, &str)>) {
    for (event, level, text) in cases {
        assert_eq!(event.level(), level, "{event:?}");
        assert_eq!(event.to_string(), text);
    }
}

/// Each case's whole line, prefix and level included.
fn check_lines<E: Event>(cases: Vec<(E, String)>) {
    for (event, text) in cases {
        assert_eq!(line(&event), text, "{event:?}");
    }
}

#[allow(dead_code, reason = "not every crate's reasons carry a system error")]
fn io(kind: io::ErrorKind, message: &str) -> SystemError {
    SystemError::new(kind, message)
}

#[test]
#[allow(
    clippy::too_many_lines,
    reason = "a table of cases: each notice and the line it prints"
)]
fn install_event_displays_are_todays_lines() {
    let cases: Vec<(InstallEvent, Level, &str)> = vec![
        (
            InstallEvent::Installed {
                artifact: "era5".into(),
                from: Some(InstalledFrom::PackageServer),
                path: PathBuf::from("/d/artifacts/ab"),
                received: 1 << 20,
                reused: 2 << 20,
            },
            Level::Detail,
            "installed `era5` from the package server into `/d/artifacts/ab` (1.0 MiB \
                 received, 2.0 MiB reused from an earlier partial download)",
        ),
        (
            InstallEvent::Installed {
                artifact: "era5".into(),
                from: None,
                path: PathBuf::from("/d/artifacts/ab"),
                received: 5,
                reused: 0,
            },
            Level::Detail,
            "installed `era5` into `/d/artifacts/ab`",
        ),
    ];
    check(cases);
}

/// Every reason of every notice of [`InstallEvent`] that has them, and the line it prints.
#[test]
#[allow(
    clippy::too_many_lines,
    reason = "a table of cases: each reason and the line it prints"
)]
fn every_install_event_reason_prints_todays_line() {
    let p = PathBuf::from;
    let installed = |from| InstallEvent::Installed {
        artifact: "era5".into(),
        from,
        path: p("/d/artifacts/ab"),
        received: 5,
        reused: 0,
    };
    let cases: Vec<(InstallEvent, String)> = vec![
        (
            installed(Some(InstalledFrom::PackageServer)),
            "clima-artifacts: detail: installed `era5` from the package server into \
                 `/d/artifacts/ab`"
                .into(),
        ),
        (
            installed(Some(InstalledFrom::OverMpi)),
            "clima-artifacts: detail: installed `era5` over MPI into `/d/artifacts/ab`".into(),
        ),
        (
            installed(None),
            "clima-artifacts: detail: installed `era5` into `/d/artifacts/ab`".into(),
        ),
        (
            InstallEvent::InstalledReusing {
                artifact: "era5".into(),
                path: p("/d/artifacts/ab"),
                received: 3 << 20,
                copied: 700 << 20,
            },
            "clima-artifacts: detail: installed `era5` into `/d/artifacts/ab` (3.0 MiB \
             received; 700.0 MiB of its tarball not fetched: those files were copied from what \
             the depots held)"
                .into(),
        ),
        (
            InstallEvent::ReuseFallback {
                artifact: "era5".into(),
                why: "`http://h/e.tar.gz` does not serve byte ranges".into(),
            },
            "clima-artifacts: detail: the files the depots hold are not reused for `era5` \
             (`http://h/e.tar.gz` does not serve byte ranges); downloading it whole"
                .into(),
        ),
    ];
    check_lines(cases);
}

#[test]
#[allow(
    clippy::too_many_lines,
    reason = "a table of cases: each notice and the line it prints"
)]
fn report_event_displays_are_todays_lines() {
    let cases: Vec<(ReportEvent, Level, &str)> = vec![
        (
            ReportEvent::RecordsUnreadable {
                first: 1,
                last: 3,
                errors: vec!["unknown tag".into()],
            },
            Level::Warning,
            "provenance records from ranks 1-3 are unreadable and left out of the report \
                 (unknown tag; are all ranks running the same binary?)",
        ),
        // A decoding error may quote the bytes another rank sent: escaped.
        (
            ReportEvent::RecordsUnreadable {
                first: 2,
                last: 2,
                errors: vec!["unknown variant `\u{1b}[2J`".into()],
            },
            Level::Warning,
            "provenance records from rank 2 are unreadable and left out of the report \
                 (unknown variant `\\u{1b}[2J`; are all ranks running the same binary?)",
        ),
        (
            ReportEvent::ReportWritten {
                markdown: "r/a.md".into(),
                json: "r/a.json".into(),
                bibtex: "r/a.bib".into(),
            },
            Level::Info,
            "provenance report written to `r/a.md`, `r/a.json` and `r/a.bib`",
        ),
    ];
    check(cases);
}

#[test]
fn mpi_event_displays_are_todays_lines() {
    let cases: Vec<(MpiEvent, Level, &str)> = vec![
        (
            MpiEvent::ReceivedOverMpi {
                artifact: "era5".into(),
                from_node: "n1\u{1b}[2J".into(),
                path: PathBuf::from("/tmp/node/artifacts/ab"),
            },
            Level::Detail,
            "installed `era5` received over MPI from node `n1\\u{1b}[2J` into \
             `/tmp/node/artifacts/ab`",
        ),
        (
            MpiEvent::FoundInSharedDepot {
                artifact: "era5".into(),
                depot: PathBuf::from("/shared"),
                path: PathBuf::from("/shared/artifacts/ab"),
            },
            Level::Info,
            "`era5` found in the shared depot `/shared`: nothing copied to node depots (every \
             rank reads `/shared/artifacts/ab`; remove it from the shared depot to have \
             node-local copies)",
        ),
    ];
    check(cases);
}
