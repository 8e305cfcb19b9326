//! The one sub-path check of `clima_artifact!`, [`Artifacts`](crate::Artifacts) and the
//! fetch of some files: a path inside an artifact's folder that must exist.

use std::path::{Path, PathBuf};

use crate::Error;

/// `dir` itself, or `dir/sub` if it exists (a symlink inside the artifact counts as present),
/// else [`Error::SubPathMissing`] listing what the artifact's top level holds. The one
/// sub-path check of `clima_artifact!` and [`Artifacts`](crate::Artifacts).
pub(crate) fn with_subpath(name: &str, dir: &Path, sub: Option<&str>) -> Result<PathBuf, Error> {
    let Some(sub) = sub else {
        return Ok(dir.to_owned());
    };
    let full = dir.join(sub);
    if full.symlink_metadata().is_ok() {
        Ok(full)
    } else {
        Err(Error::SubPathMissing {
            name: name.to_owned(),
            subpath: sub.to_owned(),
            artifact_path: dir.to_owned(),
            top_level: list_dir(dir),
        })
    }
}

fn list_dir(dir: &Path) -> String {
    let mut names: Vec<String> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => return "nothing readable".to_owned(),
    };
    names.sort();
    if names.is_empty() {
        return "nothing".to_owned();
    }
    if names.len() > 12 {
        let more = names.len() - 12;
        names.truncate(12);
        names.push(format!("... and {more} more"));
    }
    names.join(", ")
}
