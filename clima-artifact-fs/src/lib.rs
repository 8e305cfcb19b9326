//! # clima-artifact-fs
//!
//! The one home of the small file-system and formatting helpers that the clima-artifacts crates
//! (depot, extraction, network, progress, provenance, runtime, run sync, operations, CLI)
//! share, so each exists once:
//!
//! - [`remove_tree`]: delete a folder even when it holds read-only folders (installed artifacts
//!   are read-only), never following symlinks out of it;
//! - [`write_atomically`]: readers see the old file or the whole new one, never a partial write;
//! - [`utc_timestamp`]: RFC 3339 UTC with milliseconds (fixed width, sorts chronologically);
//! - [`human_bytes`]: sizes in binary units for messages and reports;
//! - [`read_full`]: fill a buffer from a reader, saying how much there was before its end;
//! - [`pid_alive`]: whether a process id on this host is still running (stale temp files and
//!   locks of dead processes are reclaimed with it);
//! - [`IoCause`]: an `io::Error` that errors can clone and send between MPI ranks;
//! - [`open_shared_file`], [`read_shared_text`]: open or read a file others could have planted
//!   (no symlink, no fifo, regular files only; text bounded);
//! - [`Dir`]: a folder held by a descriptor, below which entries are reached, created, renamed
//!   and removed without following a symlink in any component (module `dir`): the one
//!   descriptor walker of the workspace (`openat`, `mkdirat`, `unlinkat`, `symlinkat`,
//!   `linkat`, `fstatvfs` appear nowhere else), used by the extraction of tarballs, the
//!   install's temp folders, the shared store of run sync and gc; [`free_space`] and
//!   [`default_free_reserve`] measure a folder's filesystem through it;
//! - [`foreign_link`]: the first symlink on a path that neither this user nor root owns (gc
//!   decides by it whether to act through a link; module `owner`);
//! - [`reach`], [`read_text_through_own_links`]: a file in a folder others may write to (a
//!   shared depot's `Overrides.toml`), reached on descriptors following only this user's and
//!   root's symlinks, then read bounded or replaced atomically (module `reach`);
//! - [`printable`]: text from a file, a server or an archive with control characters escaped,
//!   and [`shell_word`], one word of a command printed as advice (module `text`);
//! - [`temp_name`], [`temp_owner`], [`stale_temps`], [`reclaim_stale_temps`]: the one form of
//!   temp names of the project (`.<name><mark><host>.<pid>.<random>`), who made one, and the
//!   reclaiming of those whose process is gone (module `temp`).
//!
//! These are building blocks of the clima-artifacts tools, published so those crates can share
//! them; they are kept small and stable.

mod dir;
mod owner;
mod reach;
mod text;
pub use owner::{ForeignLink, euid, foreign_link};
pub use reach::{Reached, reach};
pub use text::{printable, shell_word};
mod temp;
pub use dir::{Dir, DirEntry, EntryKind, Space, Unexpected, default_free_reserve, free_space};
use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};
pub use temp::{
    OTHER_HOST_MAX_AGE, host_tag, hostname, is_temp_name, reclaim_stale_temps, split_temp_name,
    stale_temps, temp_name, temp_name_of, temp_owner, unique,
};

/// An I/O error shared between clones of an error (so error types stay `Clone`), which
/// serialises as its OS error code and text and comes back with the same kind and message.
#[derive(Debug, Clone)]
pub struct IoCause(Arc<io::Error>);

impl IoCause {
    /// Wraps an I/O error.
    pub fn new(e: io::Error) -> IoCause {
        IoCause(Arc::new(e))
    }
    /// The kind of the underlying error.
    pub fn kind(&self) -> io::ErrorKind {
        self.0.kind()
    }
    /// The underlying error.
    pub fn get(&self) -> &io::Error {
        &self.0
    }
}

impl std::fmt::Display for IoCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for IoCause {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl From<io::Error> for IoCause {
    fn from(e: io::Error) -> IoCause {
        IoCause::new(e)
    }
}

impl serde::Serialize for IoCause {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (self.0.raw_os_error(), self.0.to_string()).serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for IoCause {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<IoCause, D::Error> {
        let (raw, message): (Option<i32>, String) = serde::Deserialize::deserialize(d)?;
        let e = match raw {
            Some(code) if io::Error::from_raw_os_error(code).to_string() == message => {
                io::Error::from_raw_os_error(code)
            }
            _ => io::Error::other(message),
        };
        Ok(IoCause::new(e))
    }
}

/// Removes the folder `path` and everything in it.
///
/// When a plain removal fails (a read-only folder inside, as in installed artifacts), every
/// folder of the tree is made writable by its owner and the removal is tried again. Symlinks
/// are removed, never followed. A missing `path` is not an error.
pub fn remove_tree(path: &Path) -> io::Result<()> {
    match fs::remove_dir_all(path) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(_) => {}
    }
    let mut stack = vec![path.to_path_buf()];
    while let Some(dir) = stack.pop() {
        // symlink_metadata: a symlink to a folder is not entered.
        if let Ok(meta) = fs::symlink_metadata(&dir)
            && meta.is_dir()
        {
            let mode = meta.permissions().mode() | 0o700;
            let _ = fs::set_permissions(&dir, fs::Permissions::from_mode(mode));
            if let Ok(entries) = fs::read_dir(&dir) {
                stack.extend(entries.flatten().map(|e| e.path()));
            }
        }
    }
    match fs::remove_dir_all(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// Opens the file at `path` for reading in a folder that other users may write to (a shared
/// depot's logs and locks): never through a symlink at `path` (`O_NOFOLLOW`), never blocking on
/// a fifo (`O_NONBLOCK`), and only if it is a regular file. `Ok(None)` when nothing is there. An
/// error says what was found instead (and that someone may have planted it), never what a
/// planted link points to.
pub fn open_shared_file(path: &Path) -> io::Result<Option<fs::File>> {
    let planted = |what: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "`{}` is {what}, not a regular file (planted by someone with write access to \
                 the folder?); it is left alone and not followed: remove it",
                path.display()
            ),
        )
    };
    let file = match fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(planted("a symlink")),
        Err(e) => {
            return Err(io::Error::new(
                e.kind(),
                format!("cannot open `{}`: {e}", path.display()),
            ));
        }
    };
    let meta = file.metadata()?;
    if meta.is_dir() {
        return Err(planted("a folder"));
    }
    if !meta.is_file() {
        return Err(planted("a special file (fifo, socket or device)"));
    }
    Ok(Some(file))
}

/// Reads the text file at `path` as [`open_shared_file`] opens it: at most `max` bytes, UTF-8.
/// `Ok(None)` when nothing is there.
pub fn read_shared_text(path: &Path, max: u64) -> io::Result<Option<String>> {
    match open_shared_file(path)? {
        Some(file) => read_bounded_text(&file, path, max).map(Some),
        None => Ok(None),
    }
}

/// Reads the open `file` (found at `path`, for messages): at most `max` bytes, UTF-8.
pub(crate) fn read_bounded_text(file: &fs::File, path: &Path, max: u64) -> io::Result<String> {
    let meta = file.metadata()?;
    let mut bytes = Vec::with_capacity(meta.len().min(max) as usize);
    file.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "`{}` is larger than {}; this is not the file expected there: remove it",
                path.display(),
                human_bytes(max)
            ),
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "`{}` is not UTF-8 (invalid byte at offset {}): remove it",
                path.display(),
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

/// Reads the text file at `path` reached by [`reach`]: no symlink that another user owns is
/// followed on the way or at the file (the user's own and root's are), the file is opened
/// without following a link swapped in since and without blocking, must be a regular file,
/// and at most `max` bytes of UTF-8 are read. `Ok(None)` when nothing is there.
pub fn read_text_through_own_links(path: &Path, max: u64) -> io::Result<Option<String>> {
    match reach(path)? {
        Some(reached) => reached.read_text(max),
        None => Ok(None),
    }
}

/// The mark of [`write_atomically`]'s temp files ([`temp_name`]).
pub const WRITE_MARK: &str = ".clima-write-";

/// Writes `bytes` to `path` so that readers see either the old file or the complete new one.
///
/// The bytes go to a new temporary file beside `path` (created exclusively, never through a
/// symlink), are flushed to disk, and the file is renamed over `path`. The new file keeps
/// exactly the permission bits of the file it replaces (0o644 less the umask for a new file). On error the
/// temporary file is removed and `path` is unchanged; the error names the file involved.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let (dir, name) = match (path.parent(), path.file_name()) {
        (Some(p), Some(n)) if !p.as_os_str().is_empty() => (p, n),
        (_, Some(n)) => (Path::new("."), n),
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("`{}` names no file", path.display()),
            ));
        }
    };
    Dir::open(dir)?.write_atomically(name, bytes)
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`: RFC 3339 in UTC with milliseconds (also a TOML offset
/// date-time). Times before 1970 are clamped to the epoch.
///
/// The fixed width makes these strings sort chronologically, which record merging relies on.
pub fn utc_timestamp(time: SystemTime) -> String {
    let since_epoch = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since_epoch.as_secs();
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days(secs / 86_400);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60,
        since_epoch.subsec_millis()
    )
}

/// The bytes of the CA bundle at `path`: the file itself, or each regular file of the folder
/// `path` (as `SSL_CERT_DIR` names one), in name order. Errors name the file or folder. Shared
/// by the download roots and the S3 client's roots, so both read a bundle the same way.
pub fn read_ca_bundle(path: &Path) -> Result<Vec<Vec<u8>>, String> {
    let files: Vec<std::path::PathBuf> = if path.is_dir() {
        let mut v: Vec<std::path::PathBuf> = fs::read_dir(path)
            .map_err(|e| format!("cannot read the CA folder `{}`: {e}", path.display()))?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_file())
            .collect();
        v.sort();
        v
    } else {
        vec![path.to_path_buf()]
    };
    files
        .iter()
        .map(|f| {
            fs::read(f).map_err(|e| format!("cannot read the CA bundle `{}`: {e}", f.display()))
        })
        .collect()
}

/// Reads back an RFC 3339 / TOML date-time: `YYYY-MM-DDTHH:MM:SS`, optional fraction, then `Z`,
/// an offset `+hh:mm` / `-hh:mm`, or nothing (a local time without zone, as Julia's `DateTime`
/// writes, taken as UTC). A space may replace the `T`. `None` for anything else or before 1970.
pub fn parse_utc_timestamp(text: &str) -> Option<SystemTime> {
    let t = text.trim().as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<u64> {
        let s = std::str::from_utf8(t.get(r)?).ok()?;
        s.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    if t.get(4) != Some(&b'-')
        || t.get(7) != Some(&b'-')
        || !matches!(t.get(10), Some(b'T' | b't' | b' '))
    {
        return None;
    }
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if t.get(13) != Some(&b':') || t.get(16) != Some(&b':') {
        return None;
    }
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut i = 19;
    let mut nanos = 0u32;
    if t.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while t.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        let digits = std::str::from_utf8(&t[start..i]).ok()?;
        if digits.is_empty() {
            return None;
        }
        let padded: String = digits
            .chars()
            .chain(std::iter::repeat('0'))
            .take(9)
            .collect();
        nanos = padded.parse().ok()?;
    }
    let offset_secs: i64 = match t.get(i) {
        None => 0,
        Some(b'Z' | b'z') if i + 1 == t.len() => 0,
        Some(&sign @ (b'+' | b'-')) if t.len() == i + 6 && t[i + 3] == b':' => {
            let h = num(i + 1..i + 3)? as i64;
            let m = num(i + 4..i + 6)? as i64;
            let v = h * 3600 + m * 60;
            if sign == b'+' { v } else { -v }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month as u32, day as u32)?;
    let secs = days as i64 * 86_400 + (hour * 3600 + minute * 60 + second) as i64 - offset_secs;
    let secs = u64::try_from(secs).ok()?;
    Some(UNIX_EPOCH + std::time::Duration::new(secs, nanos))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (the inverse of [`civil_from_days`]).
fn days_from_civil(year: u64, month: u32, day: u32) -> Option<u64> {
    let y = if month <= 2 {
        year.checked_sub(1)?
    } else {
        year
    };
    let era = y / 400;
    let year_of_era = y % 400;
    let m = u64::from(month);
    let day_of_year = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + u64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    (era * 146_097 + day_of_era).checked_sub(719_468)
}

/// Proleptic Gregorian date of a day count since 1970-01-01 (days in 400-year eras of 146 097
/// days; years counted from March so the leap day is the last day of the year).
fn civil_from_days(days: u64) -> (u64, u32, u32) {
    // Shift the epoch to 0000-03-01.
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_from_march + 2) / 5 + 1) as u32;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    } as u32;
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// Reads until `buf` is full or `reader` ends, retrying interrupted reads, and returns how many
/// bytes were read: fewer than `buf.len()` only when the reader ended. (`Read::read_exact`
/// cannot say how much it read before the end.)
pub fn read_full(reader: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// Bytes in binary units with one decimal: `512 B`, `1.5 KiB`, `3.2 GiB`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// Whether a process with this pid exists on this host.
pub fn pid_alive(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    // SAFETY: kill with signal 0 sends nothing; it only checks that the pid exists.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A reader that hands out at most 3 bytes per call and is interrupted before each.
    struct Trickle<'a>(&'a [u8], bool);
    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.1 = !self.1;
            if self.1 {
                return Err(io::ErrorKind::Interrupted.into());
            }
            let n = buf.len().min(3).min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn read_full_fills_the_buffer_or_says_where_the_reader_ended() {
        let mut buf = [0u8; 8];
        assert_eq!(
            read_full(&mut Trickle(b"0123456789", false), &mut buf).unwrap(),
            8
        );
        assert_eq!(&buf, b"01234567");
        let mut buf = [0u8; 8];
        assert_eq!(
            read_full(&mut Trickle(b"abcde", false), &mut buf).unwrap(),
            5
        );
        assert_eq!(&buf[..5], b"abcde");
        assert_eq!(read_full(&mut Trickle(b"", false), &mut buf).unwrap(), 0);
    }

    #[test]
    fn timestamps_parse_back() {
        for t in [0u64, 1_700_000_000_123, 951_782_400_000, 4_102_444_800_999] {
            let time = UNIX_EPOCH + Duration::from_millis(t);
            assert_eq!(parse_utc_timestamp(&utc_timestamp(time)), Some(time), "{t}");
        }
        let base = parse_utc_timestamp("2024-05-01T12:00:00Z").unwrap();
        assert_eq!(parse_utc_timestamp("2024-05-01T12:00:00"), Some(base));
        assert_eq!(parse_utc_timestamp("2024-05-01 14:00:00+02:00"), Some(base));
        assert_eq!(
            parse_utc_timestamp("2024-05-01T12:00:00.5Z"),
            Some(base + Duration::from_millis(500))
        );
        for bad in [
            "",
            "2024-13-01T00:00:00Z",
            "2024-05-01",
            "2024-05-01T12:00:00Q",
            "x",
        ] {
            assert_eq!(parse_utc_timestamp(bad), None, "{bad}");
        }
    }

    fn at(secs: u64, millis: u64) -> String {
        utc_timestamp(UNIX_EPOCH + Duration::from_millis(secs * 1000 + millis))
    }

    #[test]
    fn timestamps_known_instants() {
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(86_399, 999), "1970-01-01T23:59:59.999Z");
        // Leap day of a year divisible by 400, and the day after.
        assert_eq!(at(951_782_400, 0), "2000-02-29T00:00:00.000Z");
        assert_eq!(at(951_868_800, 0), "2000-03-01T00:00:00.000Z");
        // 2100 is not a leap year: 2100-02-28 is followed by 2100-03-01.
        assert_eq!(at(4_107_456_000, 0), "2100-02-28T00:00:00.000Z");
        assert_eq!(at(4_107_542_400, 0), "2100-03-01T00:00:00.000Z");
        assert_eq!(at(1_709_251_199, 123), "2024-02-29T23:59:59.123Z");
        assert_eq!(at(1_714_564_800, 250), "2024-05-01T12:00:00.250Z");
        assert_eq!(at(1_735_689_599, 0), "2024-12-31T23:59:59.000Z");
        assert_eq!(
            utc_timestamp(UNIX_EPOCH - Duration::from_secs(5)),
            "1970-01-01T00:00:00.000Z"
        );
    }

    #[test]
    fn every_day_round_trips_through_a_day_counter() {
        // Walk 1970..2400 day by day and check the calendar arithmetic independently.
        let (mut year, mut month, mut day) = (1970u64, 1u32, 1u32);
        for days in 0..(430 * 366) {
            assert_eq!(civil_from_days(days), (year, month, day), "day {days}");
            let leap =
                (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400);
            let month_len = match month {
                2 if leap => 29,
                2 => 28,
                4 | 6 | 9 | 11 => 30,
                _ => 31,
            };
            day += 1;
            if day > month_len {
                day = 1;
                month += 1;
                if month > 12 {
                    month = 1;
                    year += 1;
                }
            }
        }
    }

    #[test]
    fn io_causes_round_trip() {
        for e in [
            io::Error::from_raw_os_error(13),
            io::Error::other("custom failure"),
        ] {
            let c = IoCause::new(e);
            let json = serde_json::to_string(&c).unwrap();
            let back: IoCause = serde_json::from_str(&json).unwrap();
            assert_eq!(back.to_string(), c.to_string());
            assert_eq!(back.kind(), c.kind());
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(3 * 1024 * 1024 * 1024), "3.0 GiB");
    }

    #[test]
    fn pids() {
        assert!(pid_alive(std::process::id() as i32));
        assert!(!pid_alive(0));
        assert!(!pid_alive(i32::MAX));
    }

    #[test]
    fn removes_read_only_trees_without_following_links() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        fs::create_dir(&outside).unwrap();
        fs::write(outside.join("keep"), b"k").unwrap();
        let tree = dir.path().join("tree");
        fs::create_dir_all(tree.join("a/b")).unwrap();
        fs::write(tree.join("a/b/f"), b"x").unwrap();
        std::os::unix::fs::symlink(&outside, tree.join("a/link")).unwrap();
        fs::set_permissions(tree.join("a/b"), fs::Permissions::from_mode(0o555)).unwrap();
        fs::set_permissions(tree.join("a"), fs::Permissions::from_mode(0o555)).unwrap();
        remove_tree(&tree).unwrap();
        assert!(!tree.exists());
        assert_eq!(fs::read(outside.join("keep")).unwrap(), b"k");
        remove_tree(&tree).unwrap(); // already gone: fine
    }

    #[test]
    fn atomic_writes_replace_whole_files_and_keep_modes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.toml");
        write_atomically(&p, b"one").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
        write_atomically(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        // Group-writable (a shared project's manifest) stays so whatever the umask.
        fs::set_permissions(&p, fs::Permissions::from_mode(0o664)).unwrap();
        write_atomically(&p, b"three").unwrap();
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o664
        );
        let leftovers: Vec<_> = fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert_eq!(leftovers.len(), 1, "no temporary file is left behind");
        let e = write_atomically(&dir.path().join("no/such/dir/f"), b"x").unwrap_err();
        assert!(e.to_string().contains("no/such/dir"), "{e}");
    }
}
