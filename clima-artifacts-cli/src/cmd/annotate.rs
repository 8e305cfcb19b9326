//! `annotate`: sets or removes provenance keys of existing entries
//! ([`clima_artifact_ops::manifest_edit::annotate`]), checks that the manifest still loads, and
//! writes it atomically.

use clima_artifact_fs::printable;
use clima_artifact_manifest::Manifest;

use crate::args::AnnotateArgs;
use crate::cmd;
use crate::error::{CliError, CliResult, io_error};
use crate::manifest_edit::{Annotated, Annotation, annotate};

/// Entry point of `annotate`.
pub fn run(args: AnnotateArgs) -> CliResult {
    let annotation = Annotation::parse(&args.set, &args.unset)?;
    let manifest = cmd::load_manifest(args.manifest.manifest.as_deref())?;
    cmd::check_names(&manifest, &args.names)?;
    let path = manifest.path.clone();
    let text = std::fs::read_to_string(&path).map_err(|e| io_error("read", &path, &e))?;
    let (new_text, done) = annotate(&text, &path, &args.names, &annotation)?;
    if new_text != text {
        let parsed = Manifest::parse_lenient(&new_text, &path).map_err(|errors| {
            let first = errors.first().map(ToString::to_string).unwrap_or_default();
            CliError::usage(format!(
                "`{}` would not load after the change, so it was left unchanged: {first}",
                path.display()
            ))
        })?;
        if let Some((name, errors)) = parsed.broken().iter().find(|(n, _)| args.names.contains(n)) {
            return Err(CliError::usage(format!(
                "the entry `{}` of `{}` would not load after the change, so the manifest was \
                 left unchanged: {}",
                printable(name),
                path.display(),
                errors.first().map(ToString::to_string).unwrap_or_default()
            )));
        }
        cmd::write_atomically(&path, &new_text)?;
    }
    if args.json {
        return cmd::print_json(&serde_json::json!({
            "manifest": path,
            "changed": new_text != text,
            "entries": done,
        }));
    }
    for a in &done {
        println!("{}", line_of(a));
    }
    if new_text == text {
        println!("{} unchanged", path.display());
    } else {
        println!("written: {}", path.display());
    }
    Ok(())
}

/// `era5: set license, doi; removed citation; unchanged source`.
fn line_of(a: &Annotated) -> String {
    let mut parts = Vec::new();
    for (what, keys) in [
        ("set", &a.set),
        ("removed", &a.removed),
        ("unchanged", &a.unchanged),
    ] {
        if !keys.is_empty() {
            parts.push(format!("{what} {}", keys.join(", ")));
        }
    }
    format!("{}: {}", printable(&a.name), parts.join("; "))
}
