//! [`Dir`]: reach, create, rename and remove entries below a folder without following a
//! symlink in any component (the details are on [`Dir`], this module is private).

use std::ffi::{CStr, CString, OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What an entry of a folder is, as `lstat` sees it (a symlink is a symlink, whatever it points
/// to).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A folder.
    Dir,
    /// A symbolic link (never followed here).
    Symlink,
    /// A fifo, socket or device.
    Special,
}

impl EntryKind {
    /// The kind as said in messages: "a symlink", "a folder", ...
    pub fn described(self) -> &'static str {
        match self {
            EntryKind::File => "a regular file",
            EntryKind::Dir => "a folder",
            EntryKind::Symlink => "a symlink",
            EntryKind::Special => "a special file (fifo, socket or device)",
        }
    }

    fn of_mode(mode: libc::mode_t) -> EntryKind {
        match mode & libc::S_IFMT {
            libc::S_IFREG => EntryKind::File,
            libc::S_IFDIR => EntryKind::Dir,
            libc::S_IFLNK => EntryKind::Symlink,
            _ => EntryKind::Special,
        }
    }
}

/// One entry of a [`Dir`], not followed if it is a symlink.
#[derive(Debug, Clone)]
pub struct DirEntry {
    /// Its name in the folder.
    pub name: OsString,
    /// What it is.
    pub kind: EntryKind,
    /// Its size in bytes (of the link itself for a symlink).
    pub len: u64,
    /// Its modification time, if representable.
    pub modified: Option<SystemTime>,
}

/// The error of a [`Dir`] operation that met something other than what it expected at `path`
/// (a symlink where a folder or a regular file must be, a fifo where a file must be...), the
/// inner error of an [`io::Error`] of kind [`io::ErrorKind::InvalidData`]; callers that need
/// the details downcast to it with [`Unexpected::of`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unexpected {
    /// The path of what was found (the folder's path joined with the name).
    pub path: PathBuf,
    /// What was found.
    pub found: EntryKind,
    /// What was expected there: [`EntryKind::Dir`] or [`EntryKind::File`].
    pub expected: EntryKind,
}

impl Unexpected {
    /// The [`Unexpected`] inside `e`, if `e` is one.
    pub fn of(e: &io::Error) -> Option<&Unexpected> {
        e.get_ref()?.downcast_ref::<Unexpected>()
    }

    fn into_io(self) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, self)
    }
}

impl std::fmt::Display for Unexpected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never what a planted link points to: that could be someone's secret path.
        write!(
            f,
            "`{}` is {}, not {} (planted by someone with write access to the folder?); it is \
             left alone and not followed: remove it",
            self.path.display(),
            self.found.described(),
            self.expected.described()
        )?;
        if self.expected == EntryKind::Dir {
            write!(f, ", or replace it with a real folder")?;
        }
        Ok(())
    }
}

impl std::error::Error for Unexpected {}

/// A folder held open by a descriptor, through which everything below it is reached
/// one component at a time without following symlinks (`openat`/`mkdirat` with `O_NOFOLLOW`,
/// `renameat`/`unlinkat` inside the same descriptor).
///
/// This is for folders other users may write to (a shared store, a shared depot): with paths, a
/// folder swapped for a symlink between two calls redirects the second one anywhere the victim
/// can write. A descriptor keeps naming the folder that was checked, so a planted symlink (or
/// a file, fifo or device where a folder or a regular file is expected) is refused by name
/// instead of followed, and cannot be swapped in later.
///
/// ```no_run
/// use clima_artifact_fs::Dir;
/// use std::io::Write;
/// use std::path::Path;
///
/// let root = Dir::open(Path::new("/shared/store"))?;            // the root itself is the caller's
/// let dir = root.create_dirs(Path::new("artifact/ab"), 0o777)?;  // never through a symlink
/// let tmp = ".x.tmp";
/// dir.create_new(tmp, 0o644)?.write_all(b"data")?;              // O_EXCL: nothing replaced
/// dir.rename(tmp, "x")?;                                        // within the same folder
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    path: PathBuf,
}

impl AsFd for Dir {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Space on the filesystem holding a folder ([`Dir::space`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Space {
    /// Bytes available to unprivileged users.
    pub available: u64,
    /// The filesystem's size in bytes.
    pub total: u64,
    /// Inodes available and in all, where the filesystem counts them.
    pub inodes: Option<(u64, u64)>,
}

/// The default free-space reserve of a filesystem of `total` bytes: 1% of it or 1 GiB,
/// whichever is smaller.
pub fn default_free_reserve(total: u64) -> u64 {
    (total / 100).min(1 << 30)
}

/// Bytes available to unprivileged users on the filesystem holding the folder `path`, and its
/// total size.
pub fn free_space(path: &Path) -> io::Result<(u64, u64)> {
    let space = Dir::open(path)?.space()?;
    Ok((space.available, space.total))
}

/// `name` as a C string, if it is one plain component (not empty, `.`, `..`, no `/` or NUL).
fn component(name: &OsStr) -> io::Result<CString> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes == b"." || bytes == b".." || bytes.contains(&b'/') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "`{}` is not a plain file name (one path component)",
                name.to_string_lossy()
            ),
        ));
    }
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("`{}` contains a NUL byte", name.to_string_lossy()),
        )
    })
}

/// The components of the relative path `rel`, each plain (no `..`, no root).
fn components(rel: &Path) -> io::Result<Vec<&OsStr>> {
    rel.components()
        .filter(|c| *c != Component::CurDir)
        .map(|c| match c {
            Component::Normal(n) => Ok(n),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "`{}` is not a relative path below the folder (no `..`, not absolute)",
                    rel.display()
                ),
            )),
        })
        .collect()
}

/// The result of a libc call returning `-1` on error, with the path it was about.
fn check(rc: libc::c_int, what: &str, path: &Path) -> io::Result<libc::c_int> {
    if rc == -1 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("cannot {what} `{}`: {e}", path.display()),
        ));
    }
    Ok(rc)
}

impl Dir {
    /// Opens the folder `path`. Symlinks in `path` itself are followed (the caller named it);
    /// only what is reached *through* the returned [`Dir`] is never followed.
    pub fn open(path: &Path) -> io::Result<Dir> {
        Dir::open_flags(path, 0)
    }

    /// Opens the folder `path` like [`Dir::open`], but refuses a symlink at its last
    /// component (a folder that should be the caller's own, such as a fresh temp folder).
    pub fn open_no_follow(path: &Path) -> io::Result<Dir> {
        Dir::open_flags(path, libc::O_NOFOLLOW)
    }

    fn open_flags(path: &Path, flags: libc::c_int) -> io::Result<Dir> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC | flags)
            .open(path)
            .map_err(|e| {
                io::Error::new(e.kind(), format!("cannot open `{}`: {e}", path.display()))
            })?;
        Ok(Dir {
            fd: OwnedFd::from(file),
            path: path.to_path_buf(),
        })
    }

    /// The folder held by `fd`, reached elsewhere in the crate by `path`.
    pub(crate) fn from_fd(fd: OwnedFd, path: PathBuf) -> Dir {
        Dir { fd, path }
    }

    /// The path this folder was reached by (for messages; operations never use it).
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn child(&self, name: &OsStr) -> PathBuf {
        self.path.join(name)
    }

    /// What `name` is, not following a symlink; `None` when nothing is there.
    pub fn entry(&self, name: impl AsRef<OsStr>) -> io::Result<Option<DirEntry>> {
        let name = name.as_ref();
        let Some(st) = self.lstat(name)? else {
            return Ok(None);
        };
        Ok(Some(DirEntry {
            name: name.to_os_string(),
            kind: EntryKind::of_mode(st.st_mode),
            len: u64::try_from(st.st_size).unwrap_or(0),
            // time_t and the nanoseconds field are i64 here but narrower on some targets.
            #[allow(clippy::unnecessary_cast)]
            modified: mtime(st.st_mtime as i64, st.st_mtime_nsec as i64),
        }))
    }

    /// `fstatat` of `name` without following a symlink; `None` when nothing is there.
    fn lstat(&self, name: &OsStr) -> io::Result<Option<libc::stat>> {
        let c = component(name)?;
        // SAFETY: an all-zero `stat` is a valid value of this plain C struct, and it is only
        // read after fstatat filled it.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: the descriptor is open, `c` is NUL-terminated and `st` is writable.
        let rc = unsafe {
            libc::fstatat(
                self.fd.as_raw_fd(),
                c.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        if rc == -1 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::NotFound {
                return Ok(None);
            }
            return Err(io::Error::new(
                e.kind(),
                format!("cannot inspect `{}`: {e}", self.child(name).display()),
            ));
        }
        Ok(Some(st))
    }

    /// The error for finding something other than `expected` at `name` (what it is, looked up
    /// without following it).
    fn unexpected(&self, name: &OsStr, expected: EntryKind, fallback: io::Error) -> io::Error {
        match self.entry(name) {
            Ok(Some(e)) if e.kind != expected => Unexpected {
                path: self.child(name),
                found: e.kind,
                expected,
            }
            .into_io(),
            _ => fallback,
        }
    }

    /// Opens the sub-folder `name` (one component) without following a symlink; `None` when
    /// nothing is there. A symlink, file or special file there is an [`Unexpected`] error.
    pub fn open_dir(&self, name: impl AsRef<OsStr>) -> io::Result<Option<Dir>> {
        let name = name.as_ref();
        let c = component(name)?;
        // SAFETY: the descriptor is open and `c` is NUL-terminated; the result is checked.
        let fd = unsafe {
            libc::openat(
                self.fd.as_raw_fd(),
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd == -1 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::ENOENT) => Ok(None),
                // O_NOFOLLOW on a symlink: ELOOP (Linux, macOS) or ENOTDIR (a symlink or a
                // file where O_DIRECTORY wants a folder).
                Some(libc::ELOOP | libc::ENOTDIR | libc::EMLINK) => {
                    Err(self.unexpected(name, EntryKind::Dir, e))
                }
                _ => Err(io::Error::new(
                    e.kind(),
                    format!("cannot open `{}`: {e}", self.child(name).display()),
                )),
            };
        }
        Ok(Some(Dir {
            // SAFETY: `fd` was just returned by openat and is owned by nobody else.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            path: self.child(name),
        }))
    }

    /// Opens the sub-folder `name`, creating it with `mode` (less the umask) if missing.
    pub fn create_dir(&self, name: impl AsRef<OsStr>, mode: u32) -> io::Result<Dir> {
        let name = name.as_ref();
        let c = component(name)?;
        // SAFETY: the descriptor is open and `c` is NUL-terminated; the result is checked.
        let rc = unsafe { libc::mkdirat(self.fd.as_raw_fd(), c.as_ptr(), mode as libc::mode_t) };
        if rc == -1 {
            let e = io::Error::last_os_error();
            // EEXIST: a folder (checked by opening it) or something planted (refused there).
            if e.raw_os_error() != Some(libc::EEXIST) {
                return Err(io::Error::new(
                    e.kind(),
                    format!(
                        "cannot create the folder `{}`: {e}",
                        self.child(name).display()
                    ),
                ));
            }
        }
        self.open_dir(name)?.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "the folder `{}` vanished right after it was created (removed by another \
                     process?); try again",
                    self.child(name).display()
                ),
            )
        })
    }

    /// Creates the sub-folder `name` with `mode` (less the umask) and opens it; fails if
    /// anything is already there (unlike [`Dir::create_dir`]).
    pub fn create_dir_new(&self, name: impl AsRef<OsStr>, mode: u32) -> io::Result<Dir> {
        let name = name.as_ref();
        let c = component(name)?;
        // SAFETY: the descriptor is open and `c` is NUL-terminated; the result is checked.
        let rc = unsafe { libc::mkdirat(self.fd.as_raw_fd(), c.as_ptr(), mode as libc::mode_t) };
        check(rc, "create the folder", &self.child(name))?;
        self.open_dir(name)?.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "the folder `{}` vanished right after it was created",
                    self.child(name).display()
                ),
            )
        })
    }

    /// Creates the symlink `name` in this folder, pointing at `target` (stored as given,
    /// never resolved here).
    pub fn symlink(&self, target: impl AsRef<OsStr>, name: impl AsRef<OsStr>) -> io::Result<()> {
        let name = name.as_ref();
        let c = component(name)?;
        let t = CString::new(target.as_ref().as_bytes()).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "the target of `{}` contains a NUL byte",
                    self.child(name).display()
                ),
            )
        })?;
        // SAFETY: the descriptor is open and both strings are NUL-terminated.
        let rc = unsafe { libc::symlinkat(t.as_ptr(), self.fd.as_raw_fd(), c.as_ptr()) };
        check(rc, "create the symlink", &self.child(name)).map(drop)
    }

    /// Hard-links the entry `name` of this folder as `to_name` in `to` (a symlink at `name`
    /// is linked itself, never followed).
    pub fn hard_link(
        &self,
        name: impl AsRef<OsStr>,
        to: &Dir,
        to_name: impl AsRef<OsStr>,
    ) -> io::Result<()> {
        let (name, to_name) = (name.as_ref(), to_name.as_ref());
        let (cf, ct) = (component(name)?, component(to_name)?);
        // SAFETY: both descriptors are open and both names are NUL-terminated.
        let rc = unsafe {
            libc::linkat(
                self.fd.as_raw_fd(),
                cf.as_ptr(),
                to.fd.as_raw_fd(),
                ct.as_ptr(),
                0,
            )
        };
        check(rc, "link", &to.child(to_name)).map(drop)
    }

    /// Sets the permission bits of this folder itself (through its descriptor).
    pub fn set_mode(&self, mode: u32) -> io::Result<()> {
        // SAFETY: the descriptor is open.
        let rc = unsafe { libc::fchmod(self.fd.as_raw_fd(), mode as libc::mode_t) };
        check(rc, "set the permissions of", &self.path).map(drop)
    }

    /// Space on the filesystem holding this folder (`fstatvfs` of its descriptor).
    pub fn space(&self) -> io::Result<Space> {
        // SAFETY: an all-zero statvfs is a valid value of this plain C struct, read only
        // after fstatvfs filled it.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: the descriptor is open and `st` is valid for writes during the call.
        let rc = unsafe { libc::fstatvfs(self.fd.as_raw_fd(), &mut st) };
        check(rc, "measure the free space of", &self.path)?;
        // The field types differ between targets (u64 here, narrower elsewhere).
        #[allow(clippy::unnecessary_cast)]
        let (unit, avail, blocks, favail, files) = (
            st.f_frsize as u64,
            st.f_bavail as u64,
            st.f_blocks as u64,
            st.f_favail as u64,
            st.f_files as u64,
        );
        Ok(Space {
            available: avail.saturating_mul(unit),
            total: blocks.saturating_mul(unit),
            inodes: (files > 0).then_some((favail, files)),
        })
    }

    /// Whether this folder has no entries besides `.` and `..`.
    pub fn is_empty(&self) -> io::Result<bool> {
        Ok(self.names()?.is_empty())
    }

    /// Opens the folder `rel` below this one, one component at a time, never following a
    /// symlink; `None` when a component is missing. `rel` is relative without `..`.
    pub fn open_dirs(&self, rel: &Path) -> io::Result<Option<Dir>> {
        let mut dir: Option<Dir> = None;
        for name in components(rel)? {
            let next = dir.as_ref().unwrap_or(self).open_dir(name)?;
            match next {
                Some(d) => dir = Some(d),
                None => return Ok(None),
            }
        }
        match dir {
            Some(d) => Ok(Some(d)),
            None => self.try_clone().map(Some),
        }
    }

    /// Opens the folder `rel` below this one, creating missing components with `mode` (less the
    /// umask), never following a symlink. `rel` is relative without `..`.
    pub fn create_dirs(&self, rel: &Path, mode: u32) -> io::Result<Dir> {
        let mut dir: Option<Dir> = None;
        for name in components(rel)? {
            dir = Some(dir.as_ref().unwrap_or(self).create_dir(name, mode)?);
        }
        match dir {
            Some(d) => Ok(d),
            None => self.try_clone(),
        }
    }

    /// The metadata of this folder itself (`fstat` of its descriptor: the folder that was
    /// opened, whatever its path names now).
    pub fn metadata(&self) -> io::Result<std::fs::Metadata> {
        File::from(self.fd.try_clone()?).metadata().map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot inspect `{}`: {e}", self.path.display()),
            )
        })
    }

    /// A second handle on the same folder.
    pub fn try_clone(&self) -> io::Result<Dir> {
        Ok(Dir {
            fd: self.fd.try_clone()?,
            path: self.path.clone(),
        })
    }

    /// Opens the file `name` for reading as a file someone else could have planted: never
    /// through a symlink, never blocking on a fifo (`O_NONBLOCK`), regular files only (checked
    /// on the open descriptor). `None` when nothing is there; anything else is [`Unexpected`].
    pub fn open_file(&self, name: impl AsRef<OsStr>) -> io::Result<Option<File>> {
        self.open_regular(name.as_ref(), libc::O_RDONLY)
    }

    /// [`Dir::open_file`], for reading and writing (a file of one's own kept between runs,
    /// such as a partial download; the caller checks that it is its own).
    pub fn open_file_rw(&self, name: impl AsRef<OsStr>) -> io::Result<Option<File>> {
        self.open_regular(name.as_ref(), libc::O_RDWR)
    }

    fn open_regular(&self, name: &OsStr, access: libc::c_int) -> io::Result<Option<File>> {
        let c = component(name)?;
        // SAFETY: the descriptor is open and `c` is NUL-terminated; the result is checked.
        let fd = unsafe {
            libc::openat(
                self.fd.as_raw_fd(),
                c.as_ptr(),
                access | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC,
            )
        };
        if fd == -1 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::ENOENT) => Ok(None),
                Some(libc::ELOOP | libc::EMLINK) => Err(Unexpected {
                    path: self.child(name),
                    found: EntryKind::Symlink,
                    expected: EntryKind::File,
                }
                .into_io()),
                _ => Err(io::Error::new(
                    e.kind(),
                    format!("cannot open `{}`: {e}", self.child(name).display()),
                )),
            };
        }
        // SAFETY: `fd` was just returned by openat and is owned by nobody else.
        let file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        let meta = file.metadata().map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot inspect `{}`: {e}", self.child(name).display()),
            )
        })?;
        let found = if meta.is_file() {
            return Ok(Some(file));
        } else if meta.is_dir() {
            EntryKind::Dir
        } else {
            EntryKind::Special
        };
        Err(Unexpected {
            path: self.child(name),
            found,
            expected: EntryKind::File,
        }
        .into_io())
    }

    /// Creates the file `name` for writing, exclusively (`O_EXCL`: never truncating, replacing
    /// or writing through anything already there, a symlink included), with `mode` less the
    /// umask.
    pub fn create_new(&self, name: impl AsRef<OsStr>, mode: u32) -> io::Result<File> {
        self.create_exclusive(name.as_ref(), mode, libc::O_WRONLY)
    }

    /// [`Dir::create_new`], opened for reading and writing.
    pub fn create_new_rw(&self, name: impl AsRef<OsStr>, mode: u32) -> io::Result<File> {
        self.create_exclusive(name.as_ref(), mode, libc::O_RDWR)
    }

    fn create_exclusive(&self, name: &OsStr, mode: u32, access: libc::c_int) -> io::Result<File> {
        let c = component(name)?;
        // SAFETY: the descriptor is open and `c` is NUL-terminated; the result is checked.
        let fd = unsafe {
            libc::openat(
                self.fd.as_raw_fd(),
                c.as_ptr(),
                access | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                mode as libc::c_uint,
            )
        };
        let fd = check(fd, "create", &self.child(name))?;
        // SAFETY: `fd` was just returned by openat and is owned by nobody else.
        Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Replaces the file `name` of this folder so that readers see either the old file or the
    /// complete new one: `bytes` go to a new temp file in this folder ([`crate::temp_name`]
    /// with [`crate::WRITE_MARK`], created exclusively, never through a symlink), flushed to
    /// disk, and renamed over `name` (what is there is replaced, a symlink itself, never
    /// followed). The new file keeps exactly the permission bits of the regular file it
    /// replaces (0o644 less the umask for a new file). On error the temp file is removed and
    /// `name` is unchanged; the error names the file involved.
    pub fn write_atomically(&self, name: impl AsRef<OsStr>, bytes: &[u8]) -> io::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::PermissionsExt;
        let name = name.as_ref();
        let temp = crate::temp_name(&name.to_string_lossy(), crate::WRITE_MARK);
        // mode_t is u32 here but u16 on some targets.
        #[allow(clippy::useless_conversion)]
        let replaced = self
            .lstat(name)?
            .filter(|st| st.st_mode & libc::S_IFMT == libc::S_IFREG)
            .map(|st| u32::from(st.st_mode) & 0o7777);
        let write = || -> io::Result<()> {
            let mut file = self.create_new(&temp, replaced.unwrap_or(0o644))?;
            let named = |e: io::Error, what: &str| {
                let shown = self.child(OsStr::new(&temp));
                io::Error::new(
                    e.kind(),
                    format!("cannot {what} `{}`: {e}", shown.display()),
                )
            };
            if let Some(mode) = replaced {
                // Exactly the replaced file's bits (the umask applied at creation may have cut
                // some, e.g. the group write bit of a shared project's manifest).
                file.set_permissions(std::fs::Permissions::from_mode(mode))
                    .map_err(|e| named(e, "set the permissions of"))?;
            }
            file.write_all(bytes)
                .and_then(|()| file.sync_all())
                .map_err(|e| named(e, "write"))?;
            self.rename(&temp, name)
        };
        let result = write();
        if result.is_err() {
            let _ = self.remove_file(&temp);
        }
        result
    }

    /// Renames `from` to `to`, both in this folder (`renameat` on the one descriptor, so
    /// neither can be redirected into another folder). Replaces what is at `to` itself (a
    /// symlink there is replaced, not followed).
    pub fn rename(&self, from: impl AsRef<OsStr>, to: impl AsRef<OsStr>) -> io::Result<()> {
        let (from, to) = (from.as_ref(), to.as_ref());
        let (cf, ct) = (component(from)?, component(to)?);
        let fd = self.fd.as_raw_fd();
        // SAFETY: the descriptor is open and both names are NUL-terminated.
        let rc = unsafe { libc::renameat(fd, cf.as_ptr(), fd, ct.as_ptr()) };
        check(rc, "move into place", &self.child(to)).map(drop)
    }

    /// Removes the file (or symlink, itself) `name` of this folder.
    pub fn remove_file(&self, name: impl AsRef<OsStr>) -> io::Result<()> {
        let name = name.as_ref();
        let c = component(name)?;
        // SAFETY: the descriptor is open and `c` is NUL-terminated.
        let rc = unsafe { libc::unlinkat(self.fd.as_raw_fd(), c.as_ptr(), 0) };
        check(rc, "remove", &self.child(name)).map(drop)
    }

    /// Removes the file `name` of this folder if it is still `file` (same device and inode,
    /// looked up without following a symlink): what someone else put at that name since is
    /// left alone. Returns whether it was removed.
    pub fn remove_file_if_same(&self, name: impl AsRef<OsStr>, file: &File) -> io::Result<bool> {
        use std::os::unix::fs::MetadataExt;
        let name = name.as_ref();
        let Ok(Some(st)) = self.lstat(name) else {
            return Ok(false);
        };
        let held = file.metadata()?;
        // dev_t and ino_t are u64 here but narrower on some targets.
        #[allow(clippy::unnecessary_cast)]
        if st.st_dev as u64 != held.dev() || st.st_ino as u64 != held.ino() {
            return Ok(false);
        }
        self.remove_file(name).map(|()| true)
    }

    /// Every entry of this folder but `.` and `..`, in no particular order, each looked up
    /// without following it. An entry removed while listing is left out.
    pub fn entries(&self) -> io::Result<Vec<DirEntry>> {
        let names = self.names()?;
        let mut out = Vec::with_capacity(names.len());
        for name in names {
            if let Some(e) = self.entry(&name)? {
                out.push(e);
            }
        }
        Ok(out)
    }

    /// The names in this folder (readdir on a fresh descriptor of it, so listings do not share
    /// a position).
    fn names(&self) -> io::Result<Vec<OsString>> {
        let dot = c".";
        // SAFETY: the descriptor is open and "." is NUL-terminated; the result is checked.
        let fd = unsafe {
            libc::openat(
                self.fd.as_raw_fd(),
                dot.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        let fd = check(fd, "list", &self.path)?;
        // SAFETY: `fd` is a fresh descriptor of a folder; on success fdopendir owns it (closed
        // by closedir below), on failure it is closed here.
        let stream = unsafe { libc::fdopendir(fd) };
        if stream.is_null() {
            let e = io::Error::last_os_error();
            // SAFETY: fdopendir failed, so `fd` is still ours to close.
            unsafe { libc::close(fd) };
            return Err(io::Error::new(
                e.kind(),
                format!("cannot list `{}`: {e}", self.path.display()),
            ));
        }
        let mut names = Vec::new();
        let result = loop {
            clear_errno();
            // SAFETY: `stream` is a live directory stream used by this thread only.
            let ent = unsafe { libc::readdir(stream) };
            if ent.is_null() {
                let e = io::Error::last_os_error();
                break match e.raw_os_error() {
                    None | Some(0) => Ok(()),
                    Some(_) => Err(io::Error::new(
                        e.kind(),
                        format!("cannot list `{}`: {e}", self.path.display()),
                    )),
                };
            }
            // SAFETY: readdir returned an entry whose d_name is NUL-terminated and valid
            // until the next readdir call on this stream; it is copied out here.
            let name = unsafe { CStr::from_ptr((*ent).d_name.as_ptr()) }.to_bytes();
            if name != b"." && name != b".." {
                names.push(OsStr::from_bytes(name).to_os_string());
            }
        };
        // SAFETY: `stream` came from fdopendir and is closed exactly once.
        unsafe { libc::closedir(stream) };
        result.map(|()| names)
    }

    /// Removes the stale temp files with `mark` of this folder (see [`crate::reclaim_stale_temps`]:
    /// ours of a process that is gone, or another host's unmodified for
    /// [`crate::OTHER_HOST_MAX_AGE`]), through this descriptor; returns how many. Only regular
    /// files and symlinks (themselves) are removed; failures are ignored (another process may
    /// be reclaiming the same file).
    pub fn reclaim_stale_temps(&self, mark: &str) -> usize {
        let Ok(entries) = self.entries() else {
            return 0;
        };
        let here = crate::host_tag();
        entries
            .into_iter()
            .filter(|e| matches!(e.kind, EntryKind::File | EntryKind::Symlink))
            .filter(|e| {
                let Some(name) = e.name.to_str() else {
                    return false;
                };
                if !crate::is_temp_name(name, mark) {
                    return false;
                }
                match crate::temp_owner(name, mark) {
                    Some((_, host, pid)) if host == here => !crate::pid_alive(pid),
                    _ => e
                        .modified
                        .and_then(|t| SystemTime::now().duration_since(t).ok())
                        .is_some_and(|age| age > crate::OTHER_HOST_MAX_AGE),
                }
            })
            .filter(|e| self.remove_file(&e.name).is_ok())
            .count()
    }
}

/// `errno = 0`, so that a null from `readdir` tells the end of the folder from an error.
fn clear_errno() {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    // SAFETY: __errno_location returns this thread's errno, valid for writes.
    unsafe {
        *libc::__errno_location() = 0;
    }
    #[cfg(any(target_os = "macos", target_os = "ios", target_os = "freebsd"))]
    // SAFETY: __error returns this thread's errno, valid for writes.
    unsafe {
        *libc::__error() = 0;
    }
}

fn mtime(secs: i64, nanos: i64) -> Option<SystemTime> {
    let secs = u64::try_from(secs).ok()?;
    let nanos = u32::try_from(nanos).ok()?;
    UNIX_EPOCH.checked_add(Duration::new(secs, nanos))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::fs::symlink;

    #[test]
    fn walks_creates_and_renames_without_following_links() {
        let t = tempfile::tempdir().unwrap();
        let outside = t.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("victim"), b"keep").unwrap();
        let root_path = t.path().join("root");
        std::fs::create_dir(&root_path).unwrap();
        symlink(&outside, root_path.join("link")).unwrap();
        std::fs::write(root_path.join("file"), b"f").unwrap();
        let root = Dir::open(&root_path).unwrap();

        // A planted folder link is refused by name, whether walked or created through.
        for e in [
            root.create_dirs(Path::new("link/sub"), 0o777).unwrap_err(),
            root.open_dirs(Path::new("link")).unwrap_err(),
        ] {
            let u = Unexpected::of(&e).expect("an Unexpected");
            assert_eq!((u.found, u.expected), (EntryKind::Symlink, EntryKind::Dir));
            assert!(
                e.to_string()
                    .contains("root/link` is a symlink, not a folder"),
                "{e}"
            );
        }
        let e = root.create_dirs(Path::new("file/x"), 0o777).unwrap_err();
        assert_eq!(Unexpected::of(&e).unwrap().found, EntryKind::File);
        assert!(root.open_dirs(Path::new("a/b")).unwrap().is_none());
        assert!(root.create_dirs(Path::new("../x"), 0o777).is_err());

        let dir = root.create_dirs(Path::new("a/b"), 0o777).unwrap();
        dir.create_new("t", 0o644)
            .unwrap()
            .write_all(b"new")
            .unwrap();
        assert!(dir.create_new("t", 0o644).is_err(), "exclusive");
        symlink(outside.join("victim"), root_path.join("a/b/obj")).unwrap();
        dir.rename("t", "obj").unwrap();
        assert_eq!(std::fs::read(outside.join("victim")).unwrap(), b"keep");
        let mut s = String::new();
        dir.open_file("obj")
            .unwrap()
            .unwrap()
            .read_to_string(&mut s)
            .unwrap();
        assert_eq!(s, "new");
        assert!(dir.open_file("none").unwrap().is_none());
        let names: Vec<_> = root
            .entries()
            .unwrap()
            .into_iter()
            .map(|e| (e.name, e.kind))
            .collect();
        assert_eq!(names.len(), 3, "{names:?}");
        assert!(names.contains(&("link".into(), EntryKind::Symlink)));
        assert!(names.contains(&("a".into(), EntryKind::Dir)));
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 1);
    }

    #[test]
    fn planted_files_are_refused_not_followed_or_blocked_on() {
        let t = tempfile::tempdir().unwrap();
        symlink("/dev/zero", t.path().join("zero")).unwrap();
        let fifo = CString::new(t.path().join("fifo").as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        std::fs::create_dir(t.path().join("dir")).unwrap();
        let root = Dir::open(t.path()).unwrap();
        for (name, found) in [
            ("zero", EntryKind::Symlink),
            ("fifo", EntryKind::Special),
            ("dir", EntryKind::Dir),
        ] {
            let e = root.open_file(name).unwrap_err();
            assert_eq!(Unexpected::of(&e).unwrap().found, found, "{name}: {e}");
            assert!(e.to_string().contains("remove it"), "{e}");
        }
    }

    #[test]
    fn links_modes_space_and_new_folders_never_follow_a_planted_link() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let outside = t.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        symlink(&outside, t.path().join("planted")).unwrap();
        // The last component of the path itself is refused when it is a symlink.
        assert!(Dir::open_no_follow(&t.path().join("planted")).is_err());
        let root = Dir::open_no_follow(t.path()).unwrap();
        assert!(!root.is_empty().unwrap());

        // A new folder must be new: a planted link (or anything) at its name is an error.
        let e = root.create_dir_new("planted", 0o755).unwrap_err();
        assert!(e.to_string().contains("planted`"), "{e}");
        let sub = root.create_dir_new("sub", 0o700).unwrap();
        assert!(sub.is_empty().unwrap());
        sub.set_mode(0o755).unwrap();
        assert_eq!(sub.metadata().unwrap().permissions().mode() & 0o777, 0o755);

        // Symlinks are stored as given; hard links link the entry itself.
        sub.symlink("../outside", "l").unwrap();
        assert_eq!(
            std::fs::read_link(t.path().join("sub/l")).unwrap(),
            Path::new("../outside")
        );
        sub.create_new("f", 0o644).unwrap().write_all(b"x").unwrap();
        sub.hard_link("f", &root, "g").unwrap();
        sub.hard_link("l", &root, "m").unwrap();
        assert!(
            std::fs::symlink_metadata(t.path().join("m"))
                .unwrap()
                .is_symlink()
        );
        assert_eq!(std::fs::read(t.path().join("g")).unwrap(), b"x");
        assert!(sub.hard_link("f", &root, "g").is_err(), "never replaces");
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);

        let space = root.space().unwrap();
        assert!(
            space.total >= space.available && space.total > 0,
            "{space:?}"
        );
        assert_eq!(free_space(t.path()).unwrap().1, space.total);
        assert_eq!(default_free_reserve(1 << 40), 1 << 30);
        assert_eq!(default_free_reserve(1 << 20), (1 << 20) / 100);
    }

    #[test]
    fn reclaims_only_dead_processes_temps() {
        let t = tempfile::tempdir().unwrap();
        let mark = ".clima-test-";
        let host = crate::host_tag();
        let dead = format!(".a{mark}{host}.0.00ff");
        let live = crate::temp_name("b", mark);
        for n in [&dead, &live, &"c".to_owned()] {
            std::fs::write(t.path().join(n), b"x").unwrap();
        }
        let root = Dir::open(t.path()).unwrap();
        assert_eq!(root.reclaim_stale_temps(mark), 1);
        assert!(!t.path().join(&dead).exists());
        assert!(t.path().join(&live).exists() && t.path().join("c").exists());
    }
}
