//! Run sync against a real S3-compatible server (`moto_server`, see `scripts/s3-test-server.sh
//! install`) started on loopback by each test; uploads are counted from the server's request log.
//! Outside CI the tests skip with a message when the server cannot be started; in CI
//! (`CI=true`) they fail, and they fail if the `s3` feature is off.

#[cfg(not(feature = "s3"))]
#[test]
fn s3_tests_need_the_s3_feature() {
    let msg = "the S3 sync tests need `--features clima-artifact-sync/s3`";
    assert!(std::env::var("CI").as_deref() != Ok("true"), "{msg}");
    clima_artifact_tests::skip(msg);
}

#[cfg(feature = "s3")]
mod s3 {
    use std::fs;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::path::{Path, PathBuf};
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    use clima_artifact_sync::Singleton;
    use clima_artifact_sync::{ObjectStorage, RunSync, Storage, SyncConfig};

    /// A moto_server on a free loopback port, killed on drop; its request log in a file.
    struct Moto {
        child: Child,
        port: u16,
        log: PathBuf,
        _dir: tempfile::TempDir,
    }

    impl Drop for Moto {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    impl Moto {
        /// Starts a moto server of this test's own. The port comes from binding port 0, so
        /// parallel tests can be handed the same free port; the loser's moto exits ("Address
        /// already in use") while a bare connect would reach the winner's server, which goes
        /// away when that test ends. So the server counts as ready only once *its own* log
        /// says it is running on the port, and a server that exited is retried on a new port.
        fn start() -> Option<Moto> {
            let exe =
                std::env::var("CLIMA_SYNC_MOTO_SERVER").unwrap_or_else(|_| "moto_server".into());
            for _attempt in 0..5 {
                let dir = tempfile::tempdir().unwrap();
                let log = dir.path().join("moto.log");
                let port = TcpListener::bind("127.0.0.1:0")
                    .unwrap()
                    .local_addr()
                    .unwrap()
                    .port();
                let spawned = Command::new(&exe)
                    .args(["-H", "127.0.0.1", "-p", &port.to_string()])
                    .stdout(Stdio::null())
                    .stderr(fs::File::create(&log).unwrap())
                    .spawn();
                let child = match spawned {
                    Ok(c) => c,
                    Err(e) => {
                        return skip(&format!(
                            "cannot start `{exe}`: {e}; run scripts/s3-test-server.sh install"
                        ));
                    }
                };
                let mut moto = Moto {
                    child,
                    port,
                    log,
                    _dir: dir,
                };
                let running = format!("Running on http://127.0.0.1:{port}");
                let deadline = Instant::now() + Duration::from_secs(30);
                while Instant::now() < deadline {
                    if matches!(moto.child.try_wait(), Ok(Some(_))) {
                        break; // lost the port to another test: try another one
                    }
                    let said = fs::read_to_string(&moto.log).unwrap_or_default();
                    if said.contains(&running) && TcpStream::connect(("127.0.0.1", port)).is_ok() {
                        return Some(moto);
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                if moto.child.try_wait().ok().flatten().is_none() {
                    return skip(&format!(
                        "`{exe}` did not listen on port {port} within 30 s"
                    ));
                }
            }
            skip(&format!("`{exe}` could not get a free port in 5 attempts"))
        }

        fn endpoint(&self) -> String {
            format!("http://127.0.0.1:{}", self.port)
        }

        fn options(&self) -> Vec<(&'static str, String)> {
            vec![
                ("aws_endpoint", self.endpoint()),
                ("aws_allow_http", "true".into()),
                ("aws_access_key_id", "testing".into()),
                ("aws_secret_access_key", "testing".into()),
                ("aws_region", "us-east-1".into()),
            ]
        }

        /// Creates `bucket` (moto does not check signatures) and opens `s3://bucket/prefix`.
        fn storage(&self, bucket: &str, prefix: &str) -> ObjectStorage {
            let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
            write!(s, "PUT /{bucket} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", self.port).unwrap();
            let mut reply = String::new();
            s.read_to_string(&mut reply).unwrap();
            assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
            let opts = self.options();
            let opts: Vec<(&str, &str)> = opts.iter().map(|(k, v)| (*k, v.as_str())).collect();
            ObjectStorage::s3_with(&format!("s3://{bucket}/{prefix}"), &opts).unwrap()
        }

        /// Opens `s3://bucket/prefix` through `endpoint` with these extra options (the
        /// bucket must exist).
        fn storage_via(
            &self,
            bucket: &str,
            endpoint: &str,
            extra: &[(&str, &str)],
        ) -> Result<ObjectStorage, clima_artifact_sync::SyncError> {
            let mut opts = self.options();
            opts.retain(|(k, _)| *k != "aws_endpoint");
            let mut opts: Vec<(&str, &str)> = opts.iter().map(|(k, v)| (*k, v.as_str())).collect();
            opts.push(("aws_endpoint", endpoint));
            opts.extend_from_slice(extra);
            ObjectStorage::s3_with(&format!("s3://{bucket}/run"), &opts)
        }

        /// Request lines of the server log containing all of `parts`.
        fn requests(&self, parts: &[&str]) -> Vec<String> {
            fs::read_to_string(&self.log)
                .unwrap()
                .lines()
                .filter(|l| l.contains("HTTP/1.1\"") && parts.iter().all(|p| l.contains(p)))
                .map(str::to_owned)
                .collect()
        }
    }

    fn skip(why: &str) -> Option<Moto> {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "S3 test server unavailable in CI: {why}"
        );
        clima_artifact_tests::skip(&format!("no S3 test server (moto_server): {why}"));
        None
    }

    fn write(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    fn file_puts(moto: &Moto, bucket: &str) -> usize {
        moto.requests(&["\"PUT /", &format!("/{bucket}/")])
            .iter()
            .filter(|l| !l.contains(".clima-sync"))
            .count()
    }

    #[test]
    fn push_unchanged_restore_append_over_s3() {
        let Some(moto) = Moto::start() else { return };
        let t = tempfile::tempdir().unwrap();
        let run = t.path().join("run");
        write(&run.join("diag/energy.csv"), "t,e\n0,1\n");
        write(&run.join("logs/run.log"), "started\n");
        write(&run.join("ckpt/step-1/state.bin"), "state-1");
        let store = moto.storage("runs", "exp/run7");
        let mut sync = RunSync::new(&run, store, SyncConfig::default(), &Singleton).unwrap();
        let r = sync.on_checkpoint("ckpt/step-1").unwrap();
        assert_eq!(r.uploaded.len(), 3);
        assert_eq!(file_puts(&moto, "runs"), 3);
        assert_eq!(moto.requests(&["PUT /runs/exp/run7/logs/run.log"]).len(), 1);

        // Nothing changed: no file PUT at all.
        let r = sync.finish().unwrap();
        assert_eq!((r.uploaded.len(), r.unchanged), (0, 2)); // checkpoint files are not re-listed
        assert_eq!(file_puts(&moto, "runs"), 3);

        // Delete the run folder, restore, append, sync: only the log is sent, appended.
        drop(sync);
        fs::remove_dir_all(&run).unwrap();
        let mut sync = RunSync::new(
            &run,
            moto.storage("runs", "exp/run7"),
            SyncConfig::default(),
            &Singleton,
        )
        .unwrap();
        let restored = sync.restore().unwrap();
        assert_eq!(restored.downloaded.len(), 3);
        assert_eq!(restored.checkpoint, Some(run.join("ckpt/step-1")));
        assert_eq!(
            fs::read_to_string(run.join("ckpt/step-1/state.bin")).unwrap(),
            "state-1"
        );
        fs::OpenOptions::new()
            .append(true)
            .open(run.join("logs/run.log"))
            .unwrap()
            .write_all(b"resumed\n")
            .unwrap();
        assert_eq!(sync.finish().unwrap().uploaded, ["logs/run.log"]);
        assert_eq!(file_puts(&moto, "runs"), 4);
        let check = moto.storage("runs", "exp/run7");
        assert_eq!(
            check.get_bytes("logs/run.log").unwrap().unwrap(),
            b"started\nresumed\n"
        );
    }

    #[test]
    fn sync_artifacts_off_and_excludes_over_s3() {
        let Some(moto) = Moto::start() else { return };
        let t = tempfile::tempdir().unwrap();
        let run = t.path().join("run");
        write(&run.join("diag/a.nc"), "nc");
        write(&run.join("logs/run.log"), "x");
        write(&run.join("ckpt/1/s.bin"), "s");
        let off = SyncConfig {
            sync_artifacts: false,
            ..Default::default()
        };
        let mut sync = RunSync::new(&run, moto.storage("bkt", "p"), off, &Singleton).unwrap();
        assert_eq!(
            sync.on_checkpoint("ckpt/1").unwrap().uploaded,
            ["ckpt/1/s.bin"]
        );
        let ex = SyncConfig {
            exclude: vec!["*.nc".into()],
            ..Default::default()
        };
        let mut sync = RunSync::new(&run, moto.storage("bkt", "p"), ex, &Singleton).unwrap();
        assert_eq!(sync.finish().unwrap().uploaded, ["logs/run.log"]);
        let keys: Vec<String> = moto
            .storage("bkt", "p")
            .list("")
            .unwrap()
            .into_iter()
            .map(|o| o.key)
            .collect();
        assert_eq!(
            keys,
            [".clima-sync/index.json", "ckpt/1/s.bin", "logs/run.log"]
        );
    }

    #[test]
    fn large_files_go_multipart_and_come_back_whole() {
        let Some(moto) = Moto::start() else { return };
        let t = tempfile::tempdir().unwrap();
        let big = t.path().join("big.bin");
        let data: Vec<u8> = (0..11 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
        fs::write(&big, &data).unwrap();
        let store = moto.storage("multi", "").with_part_size(5 * 1024 * 1024);
        assert_eq!(
            store.put_file("ckpt/big.bin", &big).unwrap(),
            data.len() as u64
        );
        assert_eq!(
            moto.requests(&["PUT /multi/ckpt/big.bin?", "partNumber="])
                .len(),
            3
        );
        let back = t.path().join("back.bin");
        store.get_file("ckpt/big.bin", &back, u64::MAX).unwrap();
        assert!(fs::read(&back).unwrap() == data);
    }

    /// Child side of the kill test: uploads from the FIFO named by the environment.
    #[test]
    #[ignore = "helper: run as a child process by a_killed_multipart_upload_leaves_no_object"]
    fn child_s3_upload() {
        let Ok(src) = std::env::var("CLIMA_SYNC_CHILD_SRC") else {
            return;
        };
        let endpoint = std::env::var("CLIMA_SYNC_CHILD_ENDPOINT").unwrap();
        let opts = [
            ("aws_endpoint", endpoint.as_str()),
            ("aws_allow_http", "true"),
            ("aws_access_key_id", "testing"),
            ("aws_secret_access_key", "testing"),
            ("aws_region", "us-east-1"),
        ];
        let store = ObjectStorage::s3_with("s3://kill/run", &opts)
            .unwrap()
            .with_part_size(5 * 1024 * 1024);
        store.put_file("ckpt/big.bin", Path::new(&src)).unwrap();
    }

    #[test]
    fn a_killed_multipart_upload_leaves_no_object() {
        let Some(moto) = Moto::start() else { return };
        let store = moto.storage("kill", "run");
        let t = tempfile::tempdir().unwrap();
        let fifo = t.path().join("src.fifo");
        assert!(
            Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "s3::child_s3_upload", "--ignored", "--nocapture"])
            .env("CLIMA_SYNC_CHILD_SRC", &fifo)
            .env("CLIMA_SYNC_CHILD_ENDPOINT", moto.endpoint())
            .spawn()
            .unwrap();
        // Two parts' worth, pipe kept open: the upload cannot complete.
        let mut w = fs::OpenOptions::new().write(true).open(&fifo).unwrap();
        w.write_all(&vec![3u8; 11 * 1024 * 1024]).unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while moto
            .requests(&["PUT /kill/run/ckpt/big.bin?", "partNumber="])
            .is_empty()
        {
            assert!(Instant::now() < deadline, "no part was uploaded");
            std::thread::sleep(Duration::from_millis(20));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        drop(w);
        assert_eq!(store.get_bytes("ckpt/big.bin").unwrap(), None);
        assert!(store.list("").unwrap().is_empty());
    }

    /// Run sync over TLS with a CA of our own: moto behind a TLS front whose
    /// certificate comes from a CA made in the test. With the CA given (`ca_roots`, what
    /// CLIMA_ARTIFACTS_CA_ROOTS / AWS_CA_BUNDLE / SSL_CERT_FILE set from the environment) a push
    /// and a read back work; without it the certificate is refused.
    #[test]
    fn sync_to_s3_over_tls_with_a_custom_ca() {
        let Some(moto) = Moto::start() else { return };
        let _plain = moto.storage("tls-bucket", "run");
        let front = clima_artifact_tests::TlsServer::start_forwarding(
            format!("127.0.0.1:{}", moto.port).parse().unwrap(),
        );
        let endpoint = front.url("").trim_end_matches('/').to_owned();
        let ca = front.ca_pem().display().to_string();
        let store = moto
            .storage_via("tls-bucket", &endpoint, &[("ca_roots", ca.as_str())])
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("state.bin");
        fs::write(&file, b"checkpoint over tls").unwrap();
        store.put_file("ckpt/state.bin", &file).unwrap();
        assert_eq!(
            store.get_bytes("ckpt/state.bin").unwrap().unwrap(),
            b"checkpoint over tls"
        );
        assert!(
            front.requests() > 0,
            "the requests did not go through the TLS front"
        );

        let untrusted = moto.storage_via("tls-bucket", &endpoint, &[]).unwrap();
        let e = untrusted
            .get_bytes("ckpt/state.bin")
            .unwrap_err()
            .to_string();
        assert!(
            e.to_lowercase().contains("certificate")
                || e.to_lowercase().contains("tls")
                || e.contains("error sending request"),
            "{e}"
        );
    }
}
