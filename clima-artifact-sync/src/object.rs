//! [`ObjectStorage`]: S3-compatible object storage through the `object_store` crate (feature
//! `s3`).
//!
//! `s3://bucket/prefix` keys map to objects `prefix/<key>`. Endpoint, region and credentials come
//! from the usual variables: `AWS_ENDPOINT_URL` (MinIO, Ceph, moto...), `AWS_REGION`,
//! `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_ALLOW_HTTP=true` for a
//! plain-HTTP endpoint (all read by `AmazonS3Builder::from_env`).
//!
//! Atomicity: an object appears only when its single PUT, or the completion request of its
//! multipart upload, succeeds. Files larger than one part ([`ObjectStorage::with_part_size`],
//! default 8 MiB) go through a multipart upload streamed from disk; a process killed mid-upload
//! leaves an incomplete multipart upload, which is never visible as an object (configure the
//! bucket's lifecycle rule "abort incomplete multipart uploads" to reclaim its parts).

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload, WriteMultipart};

use clima_artifact_net::trust;

use crate::SyncError;
use crate::storage::{MAX_INDEX_BYTES, Storage, StoredObject, bad_url, check_key, storage_error};

/// Default size of one multipart part, and the threshold above which uploads are multipart.
pub const DEFAULT_PART_SIZE: usize = 8 * 1024 * 1024;

/// How many parts of one file are in flight at once.
const PARTS_IN_FLIGHT: usize = 4;

/// An `object_store` store as [`Storage`] (tested against an S3-compatible server).
#[derive(Debug)]
pub struct ObjectStorage {
    store: Arc<dyn ObjectStore>,
    prefix: String,
    url: String,
    part_size: usize,
    runtime: tokio::runtime::Runtime,
}

impl ObjectStorage {
    /// Opens `s3://bucket/prefix` with endpoint and credentials from the `AWS_*` variables.
    pub fn s3(url: &str) -> Result<ObjectStorage, SyncError> {
        ObjectStorage::s3_with(url, &[])
    }

    /// Like [`ObjectStorage::s3`], with `options` (e.g. `("aws_endpoint", "http://...")`, keys as
    /// in `object_store`'s `AmazonS3ConfigKey`) taking precedence over the environment.
    pub fn s3_with(url: &str, options: &[(&str, &str)]) -> Result<ObjectStorage, SyncError> {
        let rest = url
            .split_once("://")
            .map(|(_, r)| r)
            .unwrap_or_default()
            .trim_end_matches('/');
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(bad_url(
                url,
                "it names no bucket; write `s3://bucket/prefix`",
            ));
        }
        let mut builder = object_store::aws::AmazonS3Builder::from_env().with_bucket_name(bucket);
        // TLS roots as downloads choose them (clima_artifact_net::trust): an explicit
        // `ca_roots` option, else CLIMA_ARTIFACTS_CA_ROOTS, AWS_CA_BUNDLE, SSL_CERT_FILE or
        // SSL_CERT_DIR (a PEM file or a folder of them), else the system's CA bundle; only
        // without any of them object_store's own roots. Proxies: its HTTP client reads
        // HTTP_PROXY / HTTPS_PROXY / NO_PROXY itself.
        let roots = match options.iter().find(|(k, _)| *k == "ca_roots") {
            Some((_, v)) => Some(("the `ca_roots` option".to_owned(), PathBuf::from(v))),
            None => {
                let named = trust::ca_roots_from_vars(|n| std::env::var(n).ok(), false, true)
                    .map_err(|(var, value, why)| {
                        bad_url(url, &format!("{var}=`{value}`: {why}"))
                    })?;
                let net = clima_artifact_net::NetConfig {
                    ca_roots: named,
                    ..clima_artifact_net::NetConfig::default()
                };
                match trust::roots_source(&net) {
                    trust::RootsSource::Variable { name, path } => Some((name, path)),
                    trust::RootsSource::System(path) => {
                        Some(("the system's CA bundle".to_owned(), path))
                    }
                    _ => None,
                }
            }
        };
        if let Some((from, path)) = roots {
            let client = client_options_with_roots(&path)
                .map_err(|why| bad_url(url, &format!("{why} (TLS roots from {from})")))?;
            builder = builder.with_client_options(client);
        }
        for (key, value) in options.iter().filter(|(k, _)| *k != "ca_roots") {
            let key = key
                .parse()
                .map_err(|e| bad_url(url, &format!("unknown S3 option `{key}`: {e}")))?;
            builder = builder.with_config(key, *value);
        }
        let store = builder
            .build()
            .map_err(|e| bad_url(url, &format!("{e} (check the AWS_* environment variables)")))?;
        ObjectStorage::new(Arc::new(store), prefix, url)
    }

    /// Wraps any `object_store` store (GCS, Azure... are untested); keys go below `prefix`.
    pub fn new(
        store: Arc<dyn ObjectStore>,
        prefix: &str,
        url: &str,
    ) -> Result<ObjectStorage, SyncError> {
        let prefix = prefix.trim_matches('/').to_owned();
        if !prefix.is_empty() {
            check_key(&prefix).map_err(|e| bad_url(url, &e.to_string()))?;
        }
        // Worker threads send parts while the calling thread reads the next one from disk.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| bad_url(url, &format!("cannot start the I/O runtime: {e}")))?;
        Ok(ObjectStorage {
            store,
            prefix,
            url: url.trim_end_matches('/').to_owned(),
            part_size: DEFAULT_PART_SIZE,
            runtime,
        })
    }

    /// Sets the multipart part size (at least 5 MiB for S3, except the last part).
    pub fn with_part_size(mut self, bytes: usize) -> ObjectStorage {
        self.part_size = bytes.max(1);
        self
    }

    fn location(&self, key: &str) -> Result<ObjectPath, SyncError> {
        check_key(key)?;
        let full = if self.prefix.is_empty() {
            key.to_owned()
        } else {
            format!("{}/{key}", self.prefix)
        };
        ObjectPath::parse(&full).map_err(|e| storage_error(&self.url, "name", key, e))
    }

    /// Reads up to `buf.len()` bytes, fewer only at the end of the file.
    fn fill(file: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut n = 0;
        while n < buf.len() {
            match file.read(&mut buf[n..])? {
                0 => break,
                k => n += k,
            }
        }
        Ok(n)
    }

    async fn put_stream(
        &self,
        location: &ObjectPath,
        key: &str,
        local: &Path,
    ) -> Result<u64, SyncError> {
        let mut file = File::open(local).map_err(|e| SyncError::io("open", local, e))?;
        let mut buf = vec![0u8; self.part_size];
        let n = Self::fill(&mut file, &mut buf).map_err(|e| SyncError::io("read", local, e))?;
        if n < self.part_size {
            buf.truncate(n);
            self.store
                .put(location, PutPayload::from(buf))
                .await
                .map_err(|e| storage_error(&self.url, "upload", key, e))?;
            return Ok(n as u64);
        }
        let upload = self
            .store
            .put_multipart(location)
            .await
            .map_err(|e| storage_error(&self.url, "start a multipart upload of", key, e))?;
        let mut writer = WriteMultipart::new_with_chunk_size(upload, self.part_size);
        let mut total = n as u64;
        writer.write(&buf[..n]);
        loop {
            if let Err(e) = writer.wait_for_capacity(PARTS_IN_FLIGHT).await {
                let _ = writer.abort().await;
                return Err(storage_error(&self.url, "upload a part of", key, e));
            }
            let n = match Self::fill(&mut file, &mut buf) {
                Ok(n) => n,
                Err(e) => {
                    let _ = writer.abort().await;
                    return Err(SyncError::io("read", local, e));
                }
            };
            if n == 0 {
                break;
            }
            writer.write(&buf[..n]);
            total += n as u64;
        }
        writer
            .finish()
            .await
            .map_err(|e| storage_error(&self.url, "complete the multipart upload of", key, e))?;
        Ok(total)
    }
}

impl Storage for ObjectStorage {
    fn url(&self) -> String {
        self.url.clone()
    }

    fn put_file(&self, key: &str, local: &Path) -> Result<u64, SyncError> {
        let location = self.location(key)?;
        self.runtime
            .block_on(self.put_stream(&location, key, local))
    }

    fn put_bytes(&self, key: &str, bytes: &[u8]) -> Result<(), SyncError> {
        let location = self.location(key)?;
        self.runtime
            .block_on(self.store.put(&location, PutPayload::from(bytes.to_vec())))
            .map_err(|e| storage_error(&self.url, "upload", key, e))?;
        Ok(())
    }

    fn get_file(&self, key: &str, dest: &Path, max_bytes: u64) -> Result<u64, SyncError> {
        use futures_util::StreamExt;
        let location = self.location(key)?;
        self.runtime.block_on(async {
            let got = self
                .store
                .get(&location)
                .await
                .map_err(|e| storage_error(&self.url, "download", key, e))?;
            let mut out = crate::storage::create_download_file(dest)?;
            let mut stream = got.into_stream();
            let mut total = 0u64;
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|e| storage_error(&self.url, "download", key, e))?;
                // Never write more than the index records (plus the one byte that proves it).
                let room = max_bytes.saturating_add(1).saturating_sub(total);
                let take = chunk.len().min(usize::try_from(room).unwrap_or(usize::MAX));
                out.write_all(&chunk[..take])
                    .map_err(|e| SyncError::io("write", dest, e))?;
                total += take as u64;
                if total > max_bytes {
                    return Err(SyncError::LargerThanRecorded {
                        url: self.url.clone(),
                        key: key.to_owned(),
                        max: max_bytes,
                    });
                }
            }
            Ok(total)
        })
    }

    fn get_bytes(&self, key: &str) -> Result<Option<Vec<u8>>, SyncError> {
        use futures_util::StreamExt;
        let location = self.location(key)?;
        let too_large = || SyncError::TooLarge {
            url: self.url.clone(),
            key: key.to_owned(),
            max: MAX_INDEX_BYTES,
            max_text: clima_artifact_fs::human_bytes(MAX_INDEX_BYTES),
        };
        self.runtime.block_on(async {
            let got = match self.store.get(&location).await {
                Ok(got) => got,
                Err(object_store::Error::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(storage_error(&self.url, "download", key, e)),
            };
            // Bounded like the folder store's read: refused by its announced size, and
            // counted while streaming in case the body is longer than announced.
            if got.meta.size > MAX_INDEX_BYTES {
                return Err(too_large());
            }
            let mut bytes = Vec::new();
            let mut stream = got.into_stream();
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|e| storage_error(&self.url, "download", key, e))?;
                if (bytes.len() + chunk.len()) as u64 > MAX_INDEX_BYTES {
                    return Err(too_large());
                }
                bytes.extend_from_slice(&chunk);
            }
            Ok(Some(bytes))
        })
    }

    fn list(&self, prefix: &str) -> Result<Vec<StoredObject>, SyncError> {
        use futures_util::TryStreamExt;
        let root = if self.prefix.is_empty() {
            None
        } else {
            Some(ObjectPath::from(self.prefix.as_str()))
        };
        let metas: Vec<object_store::ObjectMeta> = self
            .runtime
            .block_on(self.store.list(root.as_ref()).try_collect())
            .map_err(|e| storage_error(&self.url, "list", prefix, e))?;
        let strip = if self.prefix.is_empty() {
            String::new()
        } else {
            format!("{}/", self.prefix)
        };
        let mut out: Vec<StoredObject> = metas
            .into_iter()
            .filter_map(|m| {
                let key = m.location.as_ref().strip_prefix(strip.as_str())?.to_owned();
                key.starts_with(prefix)
                    .then_some(StoredObject { key, size: m.size })
            })
            .collect();
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    fn download_url(&self, _key: &str) -> Option<String> {
        None
    }
}

/// Client options for S3 that trust the PEM certificates at `path` (a file or a folder of them),
/// with the `AWS_*` client settings of the environment applied on top (as `from_env` applies
/// them; setting the client options replaces the ones it read).
fn client_options_with_roots(path: &Path) -> Result<object_store::ClientOptions, String> {
    let mut client = object_store::ClientOptions::new();
    let mut n = 0;
    for pem in clima_artifact_fs::read_ca_bundle(path)? {
        if let Ok(certs) = object_store::Certificate::from_pem_bundle(&pem) {
            for c in certs {
                client = client.with_root_certificate(c);
                n += 1;
            }
        }
    }
    if n == 0 {
        return Err(format!("`{}` holds no PEM certificate", path.display()));
    }
    for (key, value) in std::env::vars() {
        if key.starts_with("AWS_")
            && let Ok(object_store::aws::AmazonS3ConfigKey::Client(k)) =
                key.to_ascii_lowercase().parse()
        {
            client = client.with_config(k, value);
        }
    }
    Ok(client)
}
