//! Writing the three report files atomically, into a folder or under a file prefix.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::Report;

/// The files written by [`Report::write_all`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportPaths {
    /// The Markdown report (`provenance.md`).
    pub markdown: PathBuf,
    /// The JSON report (`provenance.json`).
    pub json: PathBuf,
    /// The BibTeX file (`provenance.bib`).
    pub bibtex: PathBuf,
}

/// Where the three files go: a folder (`<dir>/provenance<suffix>.*`, the suffix used for
/// per-rank fallback files) or a file prefix (`<prefix>.*`).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Target<'a> {
    /// `write_all(dir)`: the folder is created if needed.
    Dir(&'a Path, &'a str),
    /// `write_with_prefix(prefix)`: `out/run7` gives `out/run7.md`, `.json`, `.bib`.
    Prefix(&'a Path),
}

/// The three file paths of `target`.
fn target_paths(target: Target<'_>) -> ReportPaths {
    let stem: PathBuf = match target {
        Target::Dir(dir, suffix) => dir.join(format!("provenance{suffix}")),
        Target::Prefix(prefix) => prefix.to_path_buf(),
    };
    let with = |ext: &str| {
        let mut name = stem.clone().into_os_string();
        name.push(".");
        name.push(ext);
        PathBuf::from(name)
    };
    ReportPaths {
        markdown: with("md"),
        json: with("json"),
        bibtex: with("bib"),
    }
}

/// Writes the three renderings of `report` next to each other.
pub(crate) fn write_report(report: &Report, target: Target<'_>) -> io::Result<ReportPaths> {
    if let Target::Prefix(prefix) = target
        && (prefix.as_os_str().is_empty() || prefix.file_name().is_none())
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "provenance report: the file prefix `{}` has no file name; give one such as \
                 `out/run7`, or use `write_all` with a folder",
                prefix.display()
            ),
        ));
    }
    let paths = target_paths(target);
    if let Some(parent) = paths.json.parent()
        && !parent.as_os_str().is_empty()
    {
        fs::create_dir_all(parent).map_err(|err| {
            io::Error::new(
                err.kind(),
                format!(
                    "cannot create the provenance report directory `{}`: {err}",
                    parent.display()
                ),
            )
        })?;
    }
    write_atomically(&paths.json, report.to_json().as_bytes())?;
    write_atomically(&paths.markdown, report.to_markdown().as_bytes())?;
    write_atomically(&paths.bibtex, report.to_bibtex().as_bytes())?;
    Ok(paths)
}

/// [`clima_artifact_fs::write_atomically`], its error saying it was the provenance report.
fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    clima_artifact_fs::write_atomically(path, bytes)
        .map_err(|e| io::Error::new(e.kind(), format!("provenance report: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folder_or_prefix() {
        let paths = target_paths(Target::Dir(Path::new("results"), ""));
        assert_eq!(paths.json, Path::new("results/provenance.json"));
        assert_eq!(paths.bibtex, Path::new("results/provenance.bib"));
        let paths = target_paths(Target::Dir(Path::new("not/existing"), ".rank3"));
        assert_eq!(
            paths.markdown,
            Path::new("not/existing/provenance.rank3.md")
        );
        let paths = target_paths(Target::Prefix(Path::new("out/run7")));
        assert_eq!(paths.markdown, Path::new("out/run7.md"));
        assert_eq!(paths.json, Path::new("out/run7.json"));
    }
}
