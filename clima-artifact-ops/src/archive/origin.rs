//! What of the archive's answers may become an address, a path or a line on the terminal.
//!
//! The download URL recorded in the manifest is never taken from a link of the archive's
//! answers: it is built from `--archive` and the published record's id,
//! `{archive}/api/records/{id}/files/{key}/content` ([`super::file_url`]), once the
//! published record's own file list shows the file with our checksum. Ids, keys and DOIs the
//! archive answers are checked before they go into a request's path, the manifest or a message
//! ([`checked_id`], [`checked_key`], [`checked_doi`]); the one link shown as it is answered, the
//! draft's review page, must be on the archive's own origin ([`same_origin`]).

use serde_json::Value;

use super::ArchiveError;

/// Scheme, host and port of an `http(s)` URL (lower case, the scheme's default port filled
/// in); `None` for another scheme, a URL with user info, or without a host.
fn origin(url: &str) -> Option<(String, String, u16)> {
    let uri: ureq::http::Uri = url.parse().ok()?;
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let default = match scheme.as_str() {
        "https" => 443,
        "http" => 80,
        _ => return None,
    };
    let authority = uri.authority()?;
    let host = authority.host();
    if authority.as_str().contains('@') || host.is_empty() {
        return None;
    }
    let port = authority.port_u16().unwrap_or(default);
    Some((scheme, host.to_ascii_lowercase(), port))
}

/// Whether `url` is on the origin (scheme, host, port) of `archive`.
pub(super) fn same_origin(archive: &str, url: &str) -> bool {
    matches!((origin(archive), origin(url)), (Some(a), Some(b)) if a == b)
}

/// Whether `id` can be a record id of an InvenioRDM archive (`abcde-12345` on CaltechDATA, a
/// number on Zenodo): 1 to 64 ASCII letters, digits, `-` and `_`.
pub(super) fn is_record_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The record id `v` of the archive's answer to `what`, if it is one ([`is_record_id`]).
pub(super) fn checked_id(archive: &str, what: &str, v: &Value) -> Result<String, ArchiveError> {
    match v.as_str() {
        Some(id) if is_record_id(id) => Ok(id.to_owned()),
        _ => Err(ArchiveError::Untrusted(format!(
            "{archive} answered {what} with the record id `{}`, which is not one (letters, \
             digits, `-` and `_` only); nothing more was sent",
            shown(v)
        ))),
    }
}

/// Whether `key` can be a file key of ours: a plain file name, no `/`, no control character,
/// not `.` or `..`.
pub(super) fn is_file_key(key: &str) -> bool {
    !key.is_empty()
        && key != "."
        && key != ".."
        && key.len() <= 255
        && !key.contains('/')
        && !key.contains('\\')
        && !key.chars().any(char::is_control)
}

/// The file key `key` listed in draft `draft` of `archive`, if it is one ([`is_file_key`]):
/// another would go into the path of a request with the token.
pub(super) fn checked_key(archive: &str, draft: &str, key: &str) -> Result<(), ArchiveError> {
    if is_file_key(key) {
        return Ok(());
    }
    Err(ArchiveError::Untrusted(format!(
        "{archive} lists a file `{}` in draft {draft}, which is not a file name; nothing was \
         removed or uploaded: look at the draft in the archive's web page",
        clima_artifact_fs::printable(key)
    )))
}

/// The DOI at `v` of the archive's answer about record `id`: `None` when absent, an error when
/// it is not a DOI (`10.<registrant>/<suffix>`, no spaces or control characters).
pub(super) fn checked_doi(
    archive: &str,
    id: &str,
    which: &str,
    v: &Value,
) -> Result<Option<String>, ArchiveError> {
    let Some(doi) = v.as_str() else {
        return if v.is_null() {
            Ok(None)
        } else {
            Err(bad_doi(archive, id, which, v))
        };
    };
    let ok = doi.len() <= 256
        && doi.starts_with("10.")
        && doi.split_once('/').is_some_and(|(_, s)| !s.is_empty())
        && !doi
            .chars()
            .any(|c| c.is_control() || c.is_whitespace() || c == '"');
    if ok {
        Ok(Some(doi.to_owned()))
    } else {
        Err(bad_doi(archive, id, which, v))
    }
}

fn bad_doi(archive: &str, id: &str, which: &str, v: &Value) -> ArchiveError {
    ArchiveError::Untrusted(format!(
        "{archive} answered `{}` as the {which} of record {id}, which is not a DOI; the manifest \
         was not changed",
        shown(v)
    ))
}

/// What a published record says of itself, checked ([`published_record`]).
pub(super) struct PublishedRecord {
    /// Its DOI (this version's).
    pub(super) doi: Option<String>,
    /// Its parent's DOI (every version's).
    pub(super) concept_doi: Option<String>,
    /// Its parent's id.
    pub(super) parent: Option<String>,
}

/// What the published record `id` of `archive` says of itself (`body`, its `GET
/// /api/records/{id}`) and of its files (`files`, its `GET /api/records/{id}/files`), checked:
/// the same id, its DOIs DOIs ([`checked_doi`]), and the file `key` listed `completed` with the
/// checksum `md5:<md5>` of what was checked and sent.
pub(super) fn published_record(
    archive: &str,
    id: &str,
    key: &str,
    md5: &str,
    body: &Value,
    files: &Value,
) -> Result<PublishedRecord, ArchiveError> {
    let got = checked_id(archive, "the published record", &body["id"])?;
    if got != id {
        return Err(ArchiveError::Untrusted(format!(
            "{archive} answered record {got} when asked for record {id}; the manifest was not \
             changed"
        )));
    }
    let doi = checked_doi(archive, id, "DOI", &body["pids"]["doi"]["identifier"])?;
    let concept_doi = checked_doi(
        archive,
        id,
        "DOI of all versions",
        &body["parent"]["pids"]["doi"]["identifier"],
    )?;
    let ours = format!("md5:{md5}");
    let listed = files["entries"].as_array().into_iter().flatten().any(|e| {
        e["key"].as_str() == Some(key)
            && e["status"].as_str() == Some("completed")
            && e["checksum"].as_str() == Some(ours.as_str())
    });
    if !listed {
        return Err(ArchiveError::Untrusted(format!(
            "record {id} on {archive} does not list `{}` with checksum {ours} among its files; \
             the manifest was not changed: look at the record at {archive}/records/{id}",
            clima_artifact_fs::printable(key)
        )));
    }
    let parent = body["parent"]["id"]
        .as_str()
        .filter(|p| is_record_id(p))
        .map(str::to_owned);
    Ok(PublishedRecord {
        doi,
        concept_doi,
        parent,
    })
}

/// The page where draft `id` is reviewed: the answer's `links.self_html` when it is on the
/// archive's origin, else `{archive}/uploads/{id}` (InvenioRDM's deposit page).
pub(super) fn review_page(archive: &str, id: &str, body: &Value) -> String {
    body["links"]["self_html"]
        .as_str()
        .filter(|u| same_origin(archive, u) && !u.chars().any(char::is_control))
        .map_or_else(|| format!("{archive}/uploads/{id}"), str::to_owned)
}

/// A value of the archive's answer as text for a message, escaped.
pub(super) fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => clima_artifact_fs::printable(s).into_owned(),
        Value::Null => "(none)".into(),
        other => clima_artifact_fs::printable(&other.to_string()).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins() {
        let a = "https://data.caltech.edu";
        assert!(same_origin(
            a,
            "https://data.caltech.edu/api/records/x/files"
        ));
        assert!(same_origin(a, "HTTPS://Data.Caltech.edu:443/x"));
        assert!(!same_origin(a, "http://data.caltech.edu/x"));
        assert!(!same_origin(a, "https://data.caltech.edu.evil.org/x"));
        assert!(!same_origin(
            a,
            "https://evil.org/?https://data.caltech.edu"
        ));
        assert!(!same_origin(a, "https://user@data.caltech.edu/x"));
        assert!(!same_origin(a, "https://data.caltech.edu:8443/x"));
        assert!(same_origin("http://[::1]:8080", "http://[::1]:8080/a"));
        assert!(!same_origin(
            "http://127.0.0.1:8080",
            "http://127.0.0.1:8081/a"
        ));
    }

    #[test]
    fn ids_keys_and_dois() {
        assert!(is_record_id("abcde-12345") && is_record_id("123456"));
        for bad in ["", "a/b", "..", "a b", "x\u{1b}[2J", "a?b", &"x".repeat(65)] {
            assert!(!is_record_id(bad), "{bad:?}");
        }
        assert!(is_file_key("era5.tar.gz") && is_file_key("README.md"));
        for bad in ["", ".", "..", "a/b", "../x", "a\nb"] {
            assert!(!is_file_key(bad), "{bad:?}");
        }
        let doi = |v: Value| checked_doi("https://a", "r", "DOI", &v);
        assert_eq!(doi(Value::Null).unwrap(), None);
        assert_eq!(
            doi(Value::from("10.22002/abc-123")).unwrap().as_deref(),
            Some("10.22002/abc-123")
        );
        for bad in ["10.1/a b", "11.1/x", "10.1", "10.1/\u{1b}[2J"] {
            assert!(doi(Value::from(bad)).is_err(), "{bad:?}");
        }
        assert!(doi(Value::from(3)).is_err());
    }
}
