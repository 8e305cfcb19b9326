//! `doctor`: what downloads would use on this machine, for a user asking for help or an admin
//! setting up a cluster: depots, TLS roots, hosts without verification, proxies, package
//! server, offline mode and limits.

use crate::args::DoctorArgs;
use crate::cmd;
use crate::depots;
use crate::error::CliResult;

/// Entry point of `doctor`.
pub fn run(args: DoctorArgs) -> CliResult {
    let config = depots::config()?;
    // What the network crate decides from this configuration.
    let net = config.net();
    let roots = clima_artifact_runtime::trust::roots_source(&net).to_string();
    let proxy = |p: &Option<(String, String)>| {
        p.as_ref().map(|(var, url)| {
            format!(
                "{} (from {var})",
                clima_artifact_runtime::trust::redact_url(url)
            )
        })
    };
    let report = serde_json::json!({
        "version": env!("CARGO_PKG_VERSION"),
        "depots": config.depots,
        "search_depots": depots::search_depots(&config),
        "tls_roots": roots,
        "no_verify_hosts": net.no_verify_hosts,
        "http_proxy": proxy(&net.proxy.http),
        "https_proxy": proxy(&net.proxy.https),
        "no_proxy": net.proxy.no_proxy,
        "pkg_server": config
            .pkg_server
            .as_deref()
            .map(clima_artifact_runtime::trust::redact_url),
        "offline": config.offline,
        "max_download_size": config.max_download_size,
        "host_platform": clima_artifact_manifest::Platform::host().triplet(),
    });
    if args.json {
        return cmd::print_json(&report);
    }
    println!("clima-artifacts {}", env!("CARGO_PKG_VERSION"));
    println!("depots (installs go to the first writable one):");
    for d in &config.depots {
        println!("  {}", d.display());
    }
    println!("TLS roots:            {roots}");
    if !config.no_verify_hosts.is_empty() {
        println!(
            "not verified (!):     {}",
            config.no_verify_hosts.join(", ")
        );
    }
    println!(
        "proxy for http://:    {}",
        proxy(&config.proxy.http).unwrap_or_else(|| "none".into())
    );
    println!(
        "proxy for https://:   {}",
        proxy(&config.proxy.https).unwrap_or_else(|| "none".into())
    );
    if !config.proxy.no_proxy.is_empty() {
        println!("no proxy for:         {}", config.proxy.no_proxy.join(", "));
    }
    println!(
        "package server:       {}",
        config.pkg_server.as_deref().unwrap_or("none")
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
