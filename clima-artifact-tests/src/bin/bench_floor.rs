//! The floor of a verified install: each stage alone, on one thread, with the crates the
//! install uses, on the same tarball (`scripts/bench.sh --only floor`).
//!
//! ```text
//! bench_floor <tarball (.tar.gz or .tar.zst)> <scratch folder>
//! ```
//!
//! The tarball is read into memory and decompressed once before anything is timed, so no stage
//! waits for a disk or for another stage. Then, one after the other:
//!
//! - `decompress`: the tarball through the same decoder as an install (flate2 with zlib-rs, or
//!   zstd) into a reused buffer;
//! - `sha1`: the git blob id of every file (`blob <len>\0` + content), as the tree hash needs;
//! - `sha256`: the tarball's bytes;
//! - `write`: every folder, file and symlink written into a new folder under the scratch folder,
//!   files created with their final read-only mode, as an install writes them.
//!
//! And, not a stage of this floor (a single-stream install computes no such digest), `blocks`:
//! the SHA-256 of every block of the files a seekable tarball cuts into blocks (content larger
//! than `extract::seekable::DEFAULT_BLOCK_SIZE`, in blocks of that size), which the install of a
//! seekable tarball checks against its index (`scripts/bench-seekable.sh` adds it to the bound
//! of that install).
//!
//! Prints one line of `key=value` pairs: the seconds of each stage, `blocks`, `parse` (reading
//! the tar headers, for information: not a stage of the floor), `files`, `bytes` (of file content) and
//! `floor`, the time of a perfect pipeline of the four stages on `cores` cores:
//! `max(slowest stage, sum of stages / cores)`. The written folder is removed afterwards.

use std::collections::HashSet;
use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use sha1::Digest;

type Failure = Box<dyn std::error::Error>;

/// Read size of the decoders, as in the install.
const BUFFER: usize = 256 * 1024;

/// One entry of the tar stream: where its content sits in the decompressed bytes.
enum Item {
    Dir(PathBuf),
    File {
        path: PathBuf,
        start: usize,
        len: usize,
        executable: bool,
    },
    Symlink {
        path: PathBuf,
        target: PathBuf,
    },
}

/// A decoder of the tarball's compression, as `extract_archive` builds it.
fn decoder<'a>(compressed: &'a [u8]) -> Result<Box<dyn Read + 'a>, Failure> {
    if compressed.starts_with(&[0x1f, 0x8b]) {
        let buffered = io::BufReader::with_capacity(BUFFER, compressed);
        Ok(Box::new(flate2::bufread::MultiGzDecoder::new(buffered)))
    } else if compressed.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        let buffered = io::BufReader::with_capacity(BUFFER, compressed);
        Ok(Box::new(zstd::stream::read::Decoder::with_buffer(
            buffered,
        )?))
    } else {
        Err("expected a .tar.gz or .tar.zst tarball".into())
    }
}

/// Decompresses everything: returns the bytes when `keep`, else only reads them through one
/// reused buffer (the timed stage).
fn decompress(compressed: &[u8], keep: bool) -> Result<Vec<u8>, Failure> {
    let mut decoder = decoder(compressed)?;
    let mut all = Vec::new();
    let mut buf = vec![0u8; BUFFER];
    loop {
        let n = decoder.read(&mut buf)?;
        if n == 0 {
            break;
        }
        if keep {
            all.extend_from_slice(&buf[..n]);
        }
    }
    Ok(all)
}

/// Reads the tar headers: what to write and where its bytes are.
fn parse(tar_bytes: &[u8]) -> Result<Vec<Item>, Failure> {
    let mut items = Vec::new();
    let mut archive = tar::Archive::new(tar_bytes);
    for entry in archive.entries()? {
        let entry = entry?;
        let path = entry.path()?.into_owned();
        let kind = entry.header().entry_type();
        if kind.is_dir() {
            items.push(Item::Dir(path));
        } else if kind.is_file() {
            let start = usize::try_from(entry.raw_file_position())?;
            let len = usize::try_from(entry.size())?;
            let executable = entry.header().mode()? & 0o100 != 0;
            items.push(Item::File {
                path,
                start,
                len,
                executable,
            });
        } else if kind.is_symlink() {
            let target = entry
                .link_name()?
                .ok_or("a symlink without a target")?
                .into_owned();
            items.push(Item::Symlink { path, target });
        }
    }
    Ok(items)
}

fn blob_ids(tar_bytes: &[u8], items: &[Item]) -> Vec<[u8; 20]> {
    let mut ids = Vec::with_capacity(items.len());
    for item in items {
        if let Item::File { start, len, .. } = item {
            let mut h = sha1::Sha1::new();
            h.update(format!("blob {len}\0").as_bytes());
            h.update(&tar_bytes[*start..*start + *len]);
            ids.push(h.finalize().into());
        }
    }
    ids
}

/// The SHA-256 of every block of the files larger than a block, as a seekable tarball's index
/// holds them.
fn block_digests(tar_bytes: &[u8], items: &[Item]) -> Vec<[u8; 32]> {
    let block = clima_artifact_runtime::extract::seekable::DEFAULT_BLOCK_SIZE as usize;
    let mut digests = Vec::new();
    for item in items {
        if let Item::File { start, len, .. } = item
            && *len > block
        {
            for chunk in tar_bytes[*start..*start + *len].chunks(block) {
                digests.push(sha2::Sha256::digest(chunk).into());
            }
        }
    }
    digests
}

fn write_all(tar_bytes: &[u8], items: &[Item], dest: &Path) -> io::Result<()> {
    fs::create_dir(dest)?;
    let mut made: HashSet<PathBuf> = HashSet::new();
    let parent = |path: &Path, made: &mut HashSet<PathBuf>| -> io::Result<()> {
        if let Some(p) = path.parent()
            && !p.as_os_str().is_empty()
            && !made.contains(p)
        {
            fs::create_dir_all(dest.join(p))?;
            made.insert(p.to_path_buf());
        }
        Ok(())
    };
    for item in items {
        match item {
            Item::Dir(path) => {
                let clean: PathBuf = path.components().collect();
                if clean.as_os_str().is_empty() || made.contains(&clean) {
                    continue;
                }
                parent(&clean, &mut made)?;
                match fs::create_dir(dest.join(&clean)) {
                    Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
                    _ => {}
                }
                made.insert(clean);
            }
            Item::File {
                path,
                start,
                len,
                executable,
            } => {
                parent(path, &mut made)?;
                let mode = if *executable { 0o555 } else { 0o444 };
                let mut file = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(mode)
                    .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                    .open(dest.join(path))?;
                file.write_all(&tar_bytes[*start..*start + *len])?;
            }
            Item::Symlink { path, target } => {
                parent(path, &mut made)?;
                std::os::unix::fs::symlink(target, dest.join(path))?;
            }
        }
    }
    Ok(())
}

/// Runs `f` and returns its result and its seconds.
fn timed<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let start = Instant::now();
    let out = f();
    (out, start.elapsed().as_secs_f64())
}

fn run(tarball: &Path, scratch: &Path) -> Result<String, Failure> {
    let compressed = fs::read(tarball).map_err(|e| format!("{}: {e}", tarball.display()))?;
    let tar_bytes = decompress(&compressed, true)?;

    let (_, decompress_s) = timed(|| decompress(&compressed, false));
    let (items, parse_s) = timed(|| parse(&tar_bytes));
    let items = items?;
    let (ids, sha1_s) = timed(|| blob_ids(&tar_bytes, &items));
    let (digest, sha256_s) = timed(|| sha2::Sha256::digest(&compressed));
    let (blocks, blocks_s) = timed(|| block_digests(&tar_bytes, &items));
    let dest = scratch.join(format!("bench-floor-{}", std::process::id()));
    let (written, write_s) = timed(|| write_all(&tar_bytes, &items, &dest));
    let removed = clima_artifact_fs::remove_tree(&dest);
    written.map_err(|e| format!("writing into {}: {e}", dest.display()))?;
    removed.map_err(|e| format!("removing {}: {e}", dest.display()))?;
    // Keep the hashes alive so no stage can be optimised away.
    std::hint::black_box((&ids, &digest, &blocks));

    let bytes: usize = items
        .iter()
        .map(|i| match i {
            Item::File { len, .. } => *len,
            _ => 0,
        })
        .sum();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let stages = [decompress_s, sha1_s, sha256_s, write_s];
    let slowest = stages.iter().cloned().fold(0.0, f64::max);
    let floor = slowest.max(stages.iter().sum::<f64>() / cores);
    Ok(format!(
        "decompress={decompress_s:.6} sha1={sha1_s:.6} sha256={sha256_s:.6} write={write_s:.6} \
         blocks={blocks_s:.6} parse={parse_s:.6} floor={floor:.6} cores={cores} files={} \
         bytes={bytes}",
        ids.len()
    ))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [tarball, scratch] = args.as_slice() else {
        eprintln!("usage: bench_floor <tarball (.tar.gz or .tar.zst)> <scratch folder>");
        return ExitCode::from(2);
    };
    match run(Path::new(tarball), Path::new(scratch)) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bench_floor: {e}");
            ExitCode::FAILURE
        }
    }
}
