//! The InvenioRDM API's wire shapes: the download URL of a record's file ([`file_url`]), the
//! record a download URL names, the error lists of its answers, the files a draft receives.

use std::path::PathBuf;

use clima_artifact_fs::printable;
use md5::Digest as _;
use serde_json::Value;

use super::ArchiveError;

/// `{archive}/api/records/{id}/files/{key}/content`.
pub fn file_url(archive: &str, id: &str, key: &str) -> String {
    format!(
        "{}/api/records/{id}/files/{key}/content",
        archive.trim_end_matches('/')
    )
}

/// The record id of a download URL of this archive (`/api/records/{id}/files/...` or
/// `/records/{id}/files/...`), the record a new version continues.
pub(super) fn record_of_urls(
    archive: &str,
    downloads: &[clima_artifact_manifest::Download],
) -> Option<String> {
    downloads.iter().find_map(|d| {
        let rest = d.url.strip_prefix(archive)?;
        let rest = rest
            .strip_prefix("/api/records/")
            .or_else(|| rest.strip_prefix("/records/"))?;
        let (id, tail) = rest.split_once('/')?;
        (tail.starts_with("files/") && !id.is_empty()).then(|| id.to_owned())
    })
}

/// `(field, message)` of an InvenioRDM error list, escaped.
pub(super) fn field_errors(body: &Value) -> Vec<(String, String)> {
    body["errors"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            let field = e["field"].as_str().unwrap_or("?");
            let messages: Vec<String> = match &e["messages"] {
                Value::Array(a) => a
                    .iter()
                    .map(|m| m.as_str().map_or_else(|| m.to_string(), str::to_owned))
                    .collect(),
                Value::String(s) => vec![s.clone()],
                other => vec![other.to_string()],
            };
            (
                printable(field).into_owned(),
                printable(&messages.join(" ")).into_owned(),
            )
        })
        .collect()
}

pub(super) fn http_error(what: &str, status: u16, body: &Value) -> ArchiveError {
    let errors = field_errors(body);
    let mut message = body["message"]
        .as_str()
        .map(|m| printable(m).into_owned())
        .unwrap_or_default();
    for (f, m) in errors {
        message.push_str(&format!(" `{f}`: {m};"));
    }
    ArchiveError::Http {
        what: what.to_owned(),
        status,
        message,
    }
}

/// A file to upload.
pub(super) enum Upload {
    /// A file on disk, streamed, with its MD5 from the verification pass.
    File {
        path: PathBuf,
        size: u64,
        md5: String,
    },
    /// Small bytes (the README).
    Bytes(Vec<u8>),
}

impl Upload {
    pub(super) fn md5(&self) -> String {
        match self {
            Upload::File { md5, .. } => md5.clone(),
            Upload::Bytes(b) => hex::encode(md5::Md5::digest(b)),
        }
    }
}

pub(super) fn files_md5(files: &[(String, Upload)], key: &str) -> String {
    files
        .iter()
        .find(|(k, _)| k == key)
        .map_or_else(String::new, |(_, u)| u.md5())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn record_ids_of_download_urls() {
        let d = |url: &str| clima_artifact_manifest::Download {
            url: url.into(),
            sha256: clima_artifact_manifest::Sha256::from_hex(&"a".repeat(64)).unwrap(),
            size: None,
            index_sha256: None,
        };
        let a = "https://zenodo.org";
        assert_eq!(
            record_of_urls(
                a,
                &[d(
                    "https://zenodo.org/records/123/files/x.tar.gz?download=1"
                )]
            ),
            Some("123".into())
        );
        assert_eq!(
            record_of_urls(a, &[d("https://zenodo.org/api/records/9/files/x/content")]),
            Some("9".into())
        );
        assert_eq!(
            record_of_urls(a, &[d("https://example.org/records/9/files/x")]),
            None
        );
    }

    #[test]
    fn field_errors_are_escaped() {
        let body = json!({"errors": [{"field": "metadata.title", "messages": ["bad\u{1b}[31m"]}]});
        assert_eq!(
            field_errors(&body),
            vec![("metadata.title".to_owned(), "bad\\u{1b}[31m".to_owned())]
        );
    }
}
