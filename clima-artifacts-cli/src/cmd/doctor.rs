//! `doctor`: what downloads would use on this machine, for a user asking for help or an admin
//! setting up a cluster: depots, TLS roots, hosts without verification, proxies, package
//! server, offline mode and limits. Each depot is diagnosed without writing to it: whether it
//! exists, whether installs can write there, whether its filesystem is read-only, its free
//! space, and which one installs go to.

use crate::progress::Ui;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use clima_artifact_runtime::manifest::layout::artifacts_dir;
use clima_artifact_runtime::trust::redact_url;
use clima_artifact_vars::DEPOT_PATH;

use crate::args::DoctorArgs;
use crate::cmd;
use crate::depots;
use crate::error::CliResult;

/// Entry point of `doctor`.
pub fn run(args: DoctorArgs, ui: &Ui) -> CliResult {
    let config = ui.config()?;
    let checks: Vec<DepotCheck> = config
        .depots
        .iter()
        .map(|d| check_depot(d.root()))
        .collect();
    let installs_go_to = checks.iter().find(|c| c.writable).map(|c| c.path.clone());
    // What the network crate decides from this configuration.
    let net = &config.net;
    let roots = clima_artifact_runtime::trust::roots_source(net).to_string();
    let proxy = |p: &Option<(String, String)>| {
        p.as_ref().map(|(var, url)| {
            format!(
                "{} (from {var})",
                clima_artifact_fs::printable(&redact_url(url))
            )
        })
    };
    let report = serde_json::json!({
        "version": env!("CARGO_PKG_VERSION"),
        "depots": config.depots,
        "depot_checks": checks,
        "installs_go_to": installs_go_to,
        "search_depots": config.search_depots(),
        "tls_roots": roots,
        "no_verify_hosts": net.no_verify_hosts,
        "http_proxy": proxy(&net.proxy.http),
        "https_proxy": proxy(&net.proxy.https),
        "no_proxy": net.proxy.no_proxy,
        "pkg_server": config
            .pkg_server
            .as_deref()
            .map(redact_url),
        "offline": config.offline,
        "max_download_size": config.max_download_size,
        "host_platform": clima_artifact_manifest::Platform::host().triplet(),
    });
    if args.json {
        return cmd::print_json(&report);
    }
    println!("clima-artifacts {}", env!("CARGO_PKG_VERSION"));
    print_depots(&config, &checks, installs_go_to.as_deref());
    println!("TLS roots:            {roots}");
    if !config.net.no_verify_hosts.is_empty() {
        println!(
            "not verified (!):     {}",
            clima_artifact_fs::printable(&config.net.no_verify_hosts.join(", "))
        );
    }
    println!(
        "proxy for http://:    {}",
        proxy(&config.net.proxy.http).unwrap_or_else(|| "none".into())
    );
    println!(
        "proxy for https://:   {}",
        proxy(&config.net.proxy.https).unwrap_or_else(|| "none".into())
    );
    if !config.net.proxy.no_proxy.is_empty() {
        println!(
            "no proxy for:         {}",
            clima_artifact_fs::printable(&config.net.proxy.no_proxy.join(", "))
        );
    }
    println!(
        "package server:       {}",
        config
            .pkg_server
            .as_deref()
            .map_or("none".into(), |u| clima_artifact_fs::printable(
                &redact_url(u)
            )
            .into_owned())
    );
    println!("offline:              {}", config.offline);
    println!(
        "implicit download max: {}",
        config
            .max_download_size
            .map_or("no limit".into(), depots::human_bytes)
    );
    println!(
        "host platform:        {}",
        clima_artifact_manifest::Platform::host().triplet()
    );
    Ok(())
}

/// The depots part of `doctor`'s text: each depot of `config` with what `checks` found,
/// Julia's depots, and where installs go.
fn print_depots(
    config: &clima_artifact_runtime::Config,
    checks: &[DepotCheck],
    installs_go_to: Option<&Path>,
) {
    println!("depots (installs go to the first writable one):");
    for c in checks {
        println!("  {}", shown(&c.path));
        println!("      {}", c.summary());
    }
    for d in config
        .search_depots()
        .iter()
        .filter(|d| !config.depots.contains(d))
    {
        println!(
            "  {} (Julia's depot: searched, never written)",
            shown(d.root())
        );
    }
    match installs_go_to {
        Some(d) => println!("installs go to:       {}", shown(d)),
        None => println!(
            "installs go to:       nowhere: no depot can be written; put a writable folder \
             first in {DEPOT_PATH}"
        ),
    }
}

/// `path` as printed: depot paths come from environment variables (ours and Julia's), which
/// whoever set up the job may have filled with control characters; they are escaped.
fn shown(path: &Path) -> String {
    clima_artifact_fs::printable(&path.to_string_lossy()).into_owned()
}

/// What `doctor` finds about one depot (nothing is written to find it).
#[derive(Debug, serde::Serialize)]
struct DepotCheck {
    path: PathBuf,
    /// The depot folder exists.
    exists: bool,
    /// Its `artifacts` folder exists.
    artifacts_exists: bool,
    /// Installs can write here: `artifacts` is writable, or can be made in the nearest existing
    /// folder on its path.
    writable: bool,
    /// The filesystem holding it (or its nearest existing parent) is mounted read-only.
    read_only: bool,
    /// Bytes free for unprivileged users on that filesystem.
    free_bytes: Option<u64>,
    /// Why it cannot be written, when it cannot.
    problem: Option<String>,
}

impl DepotCheck {
    /// One line for people: `exists, writable, 12.3 GiB free` or what is wrong.
    fn summary(&self) -> String {
        let mut parts = vec![
            if self.exists {
                "exists"
            } else {
                "does not exist (made by the first install)"
            }
            .to_string(),
        ];
        parts.push(
            match (self.read_only, self.writable) {
                (true, _) => "read-only filesystem",
                (false, true) => "writable",
                (false, false) => "not writable",
            }
            .to_string(),
        );
        if let Some(free) = self.free_bytes {
            parts.push(format!("{} free", depots::human_bytes(free)));
        }
        if let Some(p) = &self.problem {
            parts.push(clima_artifact_fs::printable(p).into_owned());
        }
        parts.join(", ")
    }
}

/// Diagnoses `depot` without writing to it.
fn check_depot(depot: &Path) -> DepotCheck {
    let artifacts = artifacts_dir(depot);
    let exists = depot.is_dir();
    let artifacts_exists = artifacts.is_dir();
    // The folder an install writes into first: `artifacts`, else the nearest existing entry
    // on its path (where it would create the missing folders: it must be a folder).
    let target = artifacts
        .ancestors()
        .find(|p| std::fs::metadata(p).is_ok())
        .unwrap_or(Path::new("/"));
    let free_bytes = clima_artifact_runtime::extract::free_space(target)
        .ok()
        .map(|(free, _)| free);
    let read_only = mounted_read_only(target);
    let access = if target.is_dir() {
        can_write(target)
    } else {
        Err(std::io::Error::other(
            "not a folder, so the depot cannot be made under it",
        ))
    };
    let problem = match (&access, read_only) {
        (_, true) => Some(format!(
            "`{}` is on a read-only filesystem: usable for lookups only",
            target.display()
        )),
        (Err(e), false) => Some(format!("`{}`: {e}", target.display())),
        (Ok(()), false) => None,
    };
    DepotCheck {
        path: depot.to_path_buf(),
        exists,
        artifacts_exists,
        writable: access.is_ok() && !read_only,
        read_only,
        free_bytes,
        problem,
    }
}

/// Whether this process may create entries in the folder `dir` (write and search rights,
/// checked with the effective ids, as an install would use them).
fn can_write(dir: &Path) -> std::io::Result<()> {
    let c = CString::new(dir.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // SAFETY: `c` is NUL-terminated; faccessat only reads it.
    let rc = unsafe {
        libc::faccessat(
            libc::AT_FDCWD,
            c.as_ptr(),
            libc::W_OK | libc::X_OK,
            libc::AT_EACCESS,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Whether the filesystem holding `path` is mounted read-only.
fn mounted_read_only(path: &Path) -> bool {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a zeroed statvfs is a valid out-parameter.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is NUL-terminated and `st` is valid for writes during the call.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return false;
    }
    st.f_flag & libc::ST_RDONLY != 0
}
