//! The record's metadata (InvenioRDM's schema) from the manifest entry and the recipe README:
//! title, description, creators, rights, related identifiers, version, publisher, date.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use clima_artifact_fs::printable;
use clima_artifact_manifest::metadata;
use serde_json::{Value, json};

use super::input::host_of;
use super::{ArchiveError, PublishRequest};

/// The creators, as InvenioRDM's `person_or_org` objects.
pub(super) fn creators(
    req: &PublishRequest,
    meta: &BTreeMap<String, String>,
) -> Result<Vec<Value>, ArchiveError> {
    let given: Vec<String> = if req.creators.is_empty() {
        meta.get(metadata::MAINTAINER)
            .map(|m| {
                // "Name <email>" or "Name (email)": the name part.
                m.split(['<', '(']).next().unwrap_or("").trim().to_owned()
            })
            .filter(|m| !m.is_empty())
            .into_iter()
            .collect()
    } else {
        req.creators.clone()
    };
    if given.is_empty() {
        return Err(ArchiveError::Input(format!(
            "artifact `{}` has no `maintainer` and no --creator was given; an archive record \
             needs its creators: pass --creator \"Family, Given\" (repeatable)",
            req.name
        )));
    }
    given
        .iter()
        .map(|c| {
            let c = c.trim();
            if c.is_empty() || c.chars().any(char::is_control) {
                return Err(ArchiveError::Input(format!(
                    "--creator `{}` is empty or has control characters; write \"Family, Given\"",
                    printable(c)
                )));
            }
            Ok(match c.split_once(',') {
                Some((family, given)) => json!({"person_or_org": {
                    "type": "personal",
                    "family_name": family.trim(),
                    "given_name": given.trim(),
                }}),
                None => json!({"person_or_org": {"type": "organizational", "name": c}}),
            })
        })
        .collect()
}

/// The recipe README (key and text), when the entry has a recipe folder with one.
pub(super) fn recipe_readme(
    meta: &BTreeMap<String, String>,
    manifest_dir: &Path,
) -> Option<(PathBuf, String)> {
    let key = meta.get(metadata::RECIPE)?;
    let rel = Path::new(key);
    if !rel
        .components()
        .all(|c| matches!(c, std::path::Component::Normal(_)))
    {
        return None;
    }
    let path = manifest_dir.join(rel).join(crate::recipe::README_FILE);
    let text = clima_artifact_fs::read_shared_text(&path, 1 << 20).ok()??;
    Some((path, text))
}

/// The first paragraph of the README's Contents section (or the first paragraph of text).
pub(super) fn readme_description(readme: &str) -> Option<String> {
    let contents = clima_artifact_provenance::readme::section_text(
        readme,
        &clima_artifact_provenance::readme::SECTIONS[0],
    )?;
    let para: Vec<&str> = contents
        .lines()
        .skip_while(|l| l.trim().is_empty())
        .take_while(|l| !l.trim().is_empty())
        .collect();
    let para = para.join(" ").trim().to_owned();
    (!para.is_empty()).then_some(para)
}

/// The README's first `# ` heading.
pub(super) fn readme_title(readme: &str) -> Option<String> {
    readme
        .lines()
        .find_map(|l| l.strip_prefix("# "))
        .map(|t| t.trim().trim_end_matches('#').trim().to_owned())
        .filter(|t| !t.is_empty())
}

/// The record's metadata (InvenioRDM's schema), and a warning when it has no description of
/// its own (neither the entry's `description` nor a README Contents paragraph).
pub(super) fn record_metadata(
    req: &PublishRequest,
    meta: &BTreeMap<String, String>,
    license: &str,
    creators: &[Value],
    readme: Option<&str>,
    own_dois: &[String],
) -> (Value, Option<String>) {
    let title = readme
        .and_then(readme_title)
        .or_else(|| meta.get(metadata::DESCRIPTION).cloned())
        .unwrap_or_else(|| req.name.clone());
    let mut description = meta.get(metadata::DESCRIPTION).cloned().unwrap_or_default();
    if let Some(d) = readme.and_then(readme_description)
        && d != description
    {
        if !description.is_empty() {
            description.push_str("\n\n");
        }
        description.push_str(&d);
    }
    let mut warning = None;
    if description.trim().is_empty() {
        description = format!("The artifact `{}` of a clima-artifacts manifest.", req.name);
        warning = Some(format!(
            "artifact `{}` has no `description` and no recipe README with a Contents paragraph: \
             the record's description would only be \"{description}\"; add a `description` to \
             the entry in `{}` (or a README.md with a Contents section to its recipe folder) before \
             publishing",
            req.name,
            req.manifest.display()
        ));
    }
    let mut related = Vec::new();
    if let Some(doi) = meta.get(metadata::DOI)
        && !own_dois.contains(doi)
    {
        related.push(json!({"identifier": doi, "scheme": "doi",
            "relation_type": {"id": "isderivedfrom"}}));
    }
    if let Some(src) = meta.get(metadata::SOURCE)
        && (src.starts_with("https://") || src.starts_with("http://"))
    {
        related.push(json!({"identifier": src, "scheme": "url",
            "relation_type": {"id": "isderivedfrom"}}));
    }
    let mut m = json!({
        "resource_type": {"id": "dataset"},
        "title": title,
        "publication_date": today(),
        "creators": creators,
        "description": description,
        "rights": [{"id": license.trim().to_ascii_lowercase()}],
    });
    if !related.is_empty() {
        m["related_identifiers"] = Value::Array(related);
    }
    if let Some(v) = meta.get(metadata::VERSION) {
        m["version"] = json!(v);
    }
    // DataCite needs a publisher; recent InvenioRDM versions ask for it as a field.
    if let Some(publisher) = publisher_of(&req.archive) {
        m["publisher"] = json!(publisher);
    }
    let record = json!({
        "metadata": m,
        "access": {"record": "public", "files": "public"},
        "files": {"enabled": true},
    });
    (record, warning)
}

/// The `publisher` of the known archives (their own name), by host.
pub(super) fn publisher_of(archive: &str) -> Option<&'static str> {
    let host = host_of(archive);
    if host.ends_with("zenodo.org") {
        Some("Zenodo")
    } else if host.ends_with("caltech.edu") || host.ends_with("caltechlibrary.dev") {
        Some("CaltechDATA")
    } else {
        None
    }
}

/// Today's date, UTC, `YYYY-MM-DD`.
pub(super) fn today() -> String {
    let days = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400) as i64;
    // Days since 1970-01-01 to a civil date (proleptic Gregorian).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publishers_by_host() {
        assert_eq!(publisher_of("https://sandbox.zenodo.org"), Some("Zenodo"));
        assert_eq!(
            publisher_of("https://data.caltech.edu"),
            Some("CaltechDATA")
        );
        assert_eq!(
            publisher_of("https://data.caltechlibrary.dev/"),
            Some("CaltechDATA")
        );
        assert_eq!(publisher_of("http://127.0.0.1:8080"), None);
    }

    #[test]
    fn dates_are_civil() {
        let t = today();
        assert_eq!(t.len(), 10, "{t}");
        assert!(t.starts_with("20"), "{t}");
    }
}
