//! File operations relative to directory handles (`openat`, `mkdirat`, ...), never following
//! a symlink in any component: once the destination folder is open, a folder inside it that is
//! swapped for a symlink (or renamed away) cannot redirect a write anywhere else.

use std::collections::HashMap;
use std::ffi::{CStr, CString, OsStr};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

/// A path component as a C string (components never contain NUL or `/`: checked before).
pub(crate) fn c_name(name: &[u8]) -> io::Result<CString> {
    CString::new(name).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Opens `path` as a directory, refusing a symlink at its last component.
pub(crate) fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: `c` is NUL-terminated; the returned descriptor is owned by the OwnedFd.
    let fd = check(unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: `fd` was just opened and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens the directory `name` inside `dir`, refusing a symlink or anything but a directory.
pub(crate) fn open_dir_at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<OwnedFd> {
    // SAFETY: `name` is NUL-terminated and `dir` is a live descriptor.
    let fd = check(unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: as in `open_dir`.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Creates the directory `name` inside `dir` with `mode` (before the umask).
pub(crate) fn mkdir_at(dir: BorrowedFd<'_>, name: &CStr, mode: u32) -> io::Result<()> {
    // SAFETY: `name` is NUL-terminated and `dir` is a live descriptor.
    check(unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), mode as libc::mode_t) })?;
    Ok(())
}

/// Creates a new regular file `name` inside `dir` for writing: never through a symlink, never
/// an existing file.
pub(crate) fn create_file_at(dir: BorrowedFd<'_>, name: &CStr, mode: u32) -> io::Result<File> {
    // SAFETY: `name` is NUL-terminated and `dir` is a live descriptor.
    let fd = check(unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            mode as libc::c_uint,
        )
    })?;
    // SAFETY: as in `open_dir`.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Opens the regular file `name` inside `dir` for reading: never through a symlink, never
/// blocking on a fifo, and only if it is a regular file.
pub(crate) fn open_file_at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<File> {
    // SAFETY: `name` is NUL-terminated and `dir` is a live descriptor.
    let fd = check(unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: as in `open_dir`.
    let file = unsafe { File::from_raw_fd(fd) };
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "not a regular file",
        ));
    }
    Ok(file)
}

/// Removes the file or symlink `name` inside `dir` (never a directory).
pub(crate) fn unlink_at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
    // SAFETY: `name` is NUL-terminated and `dir` is a live descriptor.
    check(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) })?;
    Ok(())
}

/// Creates the symlink `name` inside `dir`, pointing at `target`.
pub(crate) fn symlink_at(target: &[u8], dir: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
    let target = c_name(target)?;
    // SAFETY: both strings are NUL-terminated and `dir` is a live descriptor.
    check(unsafe { libc::symlinkat(target.as_ptr(), dir.as_raw_fd(), name.as_ptr()) })?;
    Ok(())
}

/// Hard-links `from` (in `from_dir`) as `to` (in `to_dir`); a symlink at `from` is linked
/// itself, never followed.
pub(crate) fn link_at(
    from_dir: BorrowedFd<'_>,
    from: &CStr,
    to_dir: BorrowedFd<'_>,
    to: &CStr,
) -> io::Result<()> {
    // SAFETY: both names are NUL-terminated and both descriptors are live.
    check(unsafe {
        libc::linkat(
            from_dir.as_raw_fd(),
            from.as_ptr(),
            to_dir.as_raw_fd(),
            to.as_ptr(),
            0,
        )
    })?;
    Ok(())
}

/// Sets the permission bits of the file or directory behind `fd`.
pub(crate) fn fchmod(fd: BorrowedFd<'_>, mode: u32) -> io::Result<()> {
    // SAFETY: `fd` is a live descriptor.
    check(unsafe { libc::fchmod(fd.as_raw_fd(), mode as libc::mode_t) })?;
    Ok(())
}

/// Space on a filesystem: bytes available to unprivileged users, total bytes, and inodes
/// available and in all (`None` where the filesystem does not count them).
pub(crate) type Space = (u64, u64, Option<(u64, u64)>);

/// The [`Space`] of the filesystem behind `fd`.
pub(crate) fn fs_space(fd: BorrowedFd<'_>) -> io::Result<Space> {
    // SAFETY: a zeroed statvfs is a valid out-parameter.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is live and `st` is valid for writes during the call.
    check(unsafe { libc::fstatvfs(fd.as_raw_fd(), &mut st) })?;
    let unit = st.f_frsize as u64;
    let inodes = (st.f_files > 0).then_some((st.f_favail as u64, st.f_files as u64));
    Ok((
        (st.f_bavail as u64).saturating_mul(unit),
        (st.f_blocks as u64).saturating_mul(unit),
        inodes,
    ))
}

/// Most directory handles kept open at once (tar archives list a folder's entries together,
/// so a few cover nearly every lookup; the rest are opened again from the root).
const CACHED_DIRS: usize = 256;

/// Handles on the folders an extraction created, by their path inside the destination
/// (`b""` is the destination itself). A folder not in the cache is reached again from the
/// destination's handle, one `openat(O_NOFOLLOW | O_DIRECTORY)` per component.
pub(crate) struct Dirs {
    root: Arc<OwnedFd>,
    cache: HashMap<Vec<u8>, Arc<OwnedFd>>,
}

impl Dirs {
    pub(crate) fn new(root: OwnedFd) -> Dirs {
        Dirs {
            root: Arc::new(root),
            cache: HashMap::new(),
        }
    }

    /// The destination's own handle.
    pub(crate) fn root(&self) -> &Arc<OwnedFd> {
        &self.root
    }

    /// The handle of the folder made of `components` (all created by this extraction).
    pub(crate) fn get(&mut self, components: &[Vec<u8>]) -> io::Result<Arc<OwnedFd>> {
        if components.is_empty() {
            return Ok(Arc::clone(&self.root));
        }
        let key = components.join(&b'/');
        if let Some(fd) = self.cache.get(&key) {
            return Ok(Arc::clone(fd));
        }
        let mut fd = Arc::clone(&self.root);
        for component in components {
            let name = c_name(component)?;
            fd = Arc::new(open_dir_at(fd.as_fd_ref(), &name)?);
        }
        self.insert(key, Arc::clone(&fd));
        Ok(fd)
    }

    /// Remembers the handle of a folder just created.
    pub(crate) fn insert(&mut self, key: Vec<u8>, fd: Arc<OwnedFd>) {
        if self.cache.len() >= CACHED_DIRS {
            self.cache.clear();
        }
        self.cache.insert(key, fd);
    }
}

/// `as_fd` on an `Arc<OwnedFd>` without naming the trait at every call.
pub(crate) trait AsFdRef {
    fn as_fd_ref(&self) -> BorrowedFd<'_>;
}

impl AsFdRef for Arc<OwnedFd> {
    fn as_fd_ref(&self) -> BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.as_fd()
    }
}

/// For messages: a path inside the destination.
pub(crate) fn display_path(dest: &Path, key: &[u8]) -> std::path::PathBuf {
    dest.join(OsStr::from_bytes(key))
}

/// Whether the folder open as `dir` has no entries (besides `.` and `..`).
pub(crate) fn is_empty_dir(dir: BorrowedFd<'_>) -> io::Result<bool> {
    let fd = dir.try_clone_to_owned()?;
    // SAFETY: `fd` is a fresh duplicate; fdopendir takes it over (closedir closes it).
    let stream = unsafe { libc::fdopendir(std::os::fd::IntoRawFd::into_raw_fd(fd)) };
    if stream.is_null() {
        return Err(io::Error::last_os_error());
    }
    // The duplicate shares its offset with `dir`: start from the beginning.
    // SAFETY: `stream` is a valid directory stream until closedir below.
    unsafe { libc::rewinddir(stream) };
    let mut empty = true;
    loop {
        // SAFETY: as above; the entry is only read before the next readdir.
        let entry = unsafe { libc::readdir(stream) };
        if entry.is_null() {
            break;
        }
        // SAFETY: d_name is a NUL-terminated array inside the entry.
        let name = unsafe { CStr::from_ptr((*entry).d_name.as_ptr()) }.to_bytes();
        if name != b"." && name != b".." {
            empty = false;
            break;
        }
    }
    // SAFETY: `stream` came from fdopendir and is closed once.
    unsafe { libc::closedir(stream) };
    Ok(empty)
}
