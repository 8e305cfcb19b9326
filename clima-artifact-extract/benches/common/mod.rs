//! Bench data: a generated artifact-like tree in a temporary directory.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

/// Deterministic pseudo-random bytes (xorshift): incompressible content.
pub fn random_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.extend_from_slice(&state.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Compressible content, a little like a NetCDF variable: a slowly varying float series.
pub fn compressible_bytes(len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 4);
    let mut i = 0u32;
    while out.len() < len {
        let value = (i as f32 * 0.001).sin() * 280.0;
        out.extend_from_slice(&value.to_le_bytes());
        i += 1;
    }
    out.truncate(len);
    out
}

/// Fills `root` with ~`total` bytes in many small files, some medium ones and two large ones,
/// half compressible, spread over nested directories, plus a few symlinks and executables.
/// Returns the number of content bytes written.
pub fn generate_tree(root: &Path, total: usize) -> u64 {
    let large = total / 4;
    let mut written = 0u64;
    let mut put = |rel: String, bytes: Vec<u8>, exec: bool| {
        let path = root.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, &bytes).unwrap();
        if exec {
            fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        }
        written += bytes.len() as u64;
    };
    put("large/random.bin".into(), random_bytes(1, large), false);
    put("large/field.nc".into(), compressible_bytes(large), false);
    let mut left = total - 2 * large;
    let mut i = 0u64;
    while left > 0 {
        let size = match i % 10 {
            0 => 256 * 1024,
            1..=3 => 16 * 1024,
            _ => 1024 + (i as usize * 37) % 3000,
        }
        .min(left);
        let bytes = if i.is_multiple_of(2) {
            random_bytes(i + 2, size)
        } else {
            compressible_bytes(size)
        };
        put(
            format!("d{}/s{}/file-{i}.dat", i % 7, i % 13),
            bytes,
            i.is_multiple_of(17),
        );
        left -= size;
        i += 1;
    }
    symlink("../large/field.nc", root.join("d0/field-link")).unwrap();
    symlink("missing-target", root.join("d1/dangling")).unwrap();
    written
}

/// A tar.gz of `root` (symlinks kept as symlinks).
pub fn tar_gz(root: &Path) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut builder = tar::Builder::new(gz);
    builder.follow_symlinks(false);
    builder.append_dir_all(".", root).unwrap();
    let mut gz = builder.into_inner().unwrap();
    gz.flush().unwrap();
    gz.finish().unwrap()
}

/// A plain tar of `root`.
pub fn tar_plain(root: &Path) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    builder.follow_symlinks(false);
    builder.append_dir_all(".", root).unwrap();
    builder.into_inner().unwrap()
}
