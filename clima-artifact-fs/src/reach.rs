//! [`reach`]: the folder holding the last name of a path, reached one component at a time on
//! descriptors from `/`, following only the symlinks this user or root owns; and [`Reached`],
//! through which that name is read or replaced without following a link at it.
//!
//! This is the opening rule of a file in a folder other users may write to (a shared depot's
//! `Overrides.toml`): another user's symlink, on the way or at the file itself, is refused by
//! name and its target never opened, while the user's own links (a depot moved to a bigger disk,
//! an `Overrides.toml` kept elsewhere) keep working. Each link's owner and target are read from
//! the link itself (`O_PATH` on Linux), so a link swapped in between two steps is seen as it is.

use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};

use crate::{Dir, ForeignLink};

/// How a path component is held while it is looked at: `O_PATH` where the kernel has it (no
/// read permission needed, and a symlink is held itself), else a non-blocking read-only open
/// (a symlink then fails with `ELOOP` and is looked at by name).
#[cfg(any(target_os = "linux", target_os = "android"))]
const HOLD: libc::c_int = libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
const HOLD: libc::c_int = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_CLOEXEC;

/// Whether [`HOLD`] holds a path without opening it (`O_PATH`).
const HOLDS_PATHS: bool = cfg!(any(target_os = "linux", target_os = "android"));

/// Most symlinks followed on one path (the kernel's limit).
const MAX_LINKS: usize = 40;

/// What [`reach`] arrived at: the folder holding the last name of the path, and that name.
#[derive(Debug)]
pub struct Reached {
    /// The folder holding `name`, reached through no symlink of another user's.
    pub dir: Dir,
    /// The last name: not a symlink when it was looked at (a link of the user's own there was
    /// followed, and this is the name it led to). It may be missing, a folder or a fifo: the
    /// opening methods say so.
    pub name: OsString,
    /// The user's own symlink the last name was reached through, if it was one (so that a
    /// dangling one is named as such).
    pub link: Option<PathBuf>,
}

impl Reached {
    /// The path of the file reached (its folder's path, links resolved, and its name).
    pub fn path(&self) -> PathBuf {
        self.dir.path().join(&self.name)
    }

    /// Opens the file for reading as [`Dir::open_file`] does (no link followed, non-blocking,
    /// regular files only); `None` when nothing is there. A dangling link of the user's own is
    /// an error naming it.
    pub fn open_file(&self) -> io::Result<Option<File>> {
        match (self.dir.open_file(&self.name)?, &self.link) {
            (Some(file), _) => Ok(Some(file)),
            (None, None) => Ok(None),
            (None, Some(link)) => Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "`{}` is a symlink to `{}`, which does not exist; fix or remove the link",
                    link.display(),
                    self.path().display()
                ),
            )),
        }
    }

    /// Reads the file as [`Reached::open_file`] opens it: at most `max` bytes, UTF-8.
    pub fn read_text(&self, max: u64) -> io::Result<Option<String>> {
        match self.open_file()? {
            Some(file) => crate::read_bounded_text(&file, &self.path(), max).map(Some),
            None => Ok(None),
        }
    }

    /// Replaces the file with `bytes` ([`Dir::write_atomically`] in the folder reached).
    pub fn write_atomically(&self, bytes: &[u8]) -> io::Result<()> {
        self.dir.write_atomically(&self.name, bytes)
    }
}

/// Reaches the folder holding the last name of `path` (relative paths from the current
/// folder), one component at a time on descriptors from `/`; `None` when a folder on the way
/// does not exist (so neither does the file). A symlink on the way, or at the
/// last name, is followed only if this user or root owns it: another user's is an error
/// (of kind `PermissionDenied`, holding the [`ForeignLink`]) and what it points to is never
/// opened. What the last name is (a file, a folder, nothing) is for the caller to find out
/// through the [`Reached`] folder, which never follows a link there: one swapped in since is
/// refused, not followed.
pub fn reach(path: &Path) -> io::Result<Option<Reached>> {
    let mut todo: Vec<OsString> = Vec::new();
    push_components(&mut todo, &std::path::absolute(path)?);
    let root = open_root()?;
    let mut cur = root.try_clone()?;
    let mut at = PathBuf::from("/");
    let mut links = 0;
    let mut link = None;
    while let Some(name) = todo.pop() {
        let last = todo.is_empty();
        if name == ".." {
            cur = hold(&cur, OsStr::new(".."), &at)?
                .0
                .ok_or_else(|| not_found(&at))?;
            at.pop();
            continue;
        }
        let here = at.join(&name);
        let (fd, st) = match hold(&cur, &name, &here) {
            Ok(found) => found,
            Err(e) if e.kind() == io::ErrorKind::NotFound && last => {
                return Ok(Some(Reached {
                    dir: dir_of(&cur, at)?,
                    name,
                    link,
                }));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        match (st.st_mode & libc::S_IFMT, fd) {
            (libc::S_IFLNK, fd) => {
                if st.st_uid != crate::euid() && st.st_uid != 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::PermissionDenied,
                        ForeignLink {
                            link: here,
                            owner: st.st_uid,
                        },
                    ));
                }
                links += 1;
                if links > MAX_LINKS {
                    return Err(io::Error::other(format!(
                        "too many levels of symbolic links at `{}`",
                        here.display()
                    )));
                }
                let target = read_link(fd.as_ref(), &cur, &name, &st, &here)?;
                if last {
                    link = Some(here);
                }
                if target.is_absolute() {
                    cur = root.try_clone()?;
                    at = PathBuf::from("/");
                }
                push_components(&mut todo, &target);
            }
            (libc::S_IFDIR, Some(fd)) if !last => {
                cur = fd;
                at = here;
            }
            _ if last => {
                return Ok(Some(Reached {
                    dir: dir_of(&cur, at)?,
                    name,
                    link,
                }));
            }
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::NotADirectory,
                    format!("`{}` is not a folder", here.display()),
                ));
            }
        }
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("`{}` names no file", path.display()),
    ))
}

/// Pushes the components of `path` on `todo` so that the first is popped first (`.` and the
/// root left out).
fn push_components(todo: &mut Vec<OsString>, path: &Path) {
    let names: Vec<OsString> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            _ => None,
        })
        .collect();
    todo.extend(names.into_iter().rev());
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("`{}` does not exist", path.display()),
    )
}

fn c_name(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("`{}` contains a NUL byte", name.to_string_lossy()),
        )
    })
}

fn open_root() -> io::Result<OwnedFd> {
    // SAFETY: a NUL-terminated path; the result is checked.
    let fd = unsafe { libc::open(c"/".as_ptr(), HOLD | libc::O_DIRECTORY) };
    if fd == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by open and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `fstatat` of `name` in `dir`, not following it.
fn lstat_at(dir: RawFd, name: &CString, here: &Path) -> io::Result<libc::stat> {
    // SAFETY: an all-zero `stat` is a valid value of this plain C struct, read only after
    // fstatat filled it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: the descriptor is open, `name` is NUL-terminated and `st` is writable.
    let rc = unsafe { libc::fstatat(dir, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
    if rc == -1 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("cannot inspect `{}`: {e}", here.display()),
        ));
    }
    Ok(st)
}

/// Holds `name` of `dir` without following it: its descriptor (`None` for a symlink where the
/// kernel has no `O_PATH`) and what it is. A missing name is an error of kind `NotFound`.
fn hold(dir: &OwnedFd, name: &OsStr, here: &Path) -> io::Result<(Option<OwnedFd>, libc::stat)> {
    let c = c_name(name)?;
    // SAFETY: the descriptor is open and `c` is NUL-terminated; the result is checked.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), HOLD) };
    if fd == -1 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ENOENT) => Err(not_found(here)),
            // No O_PATH: a symlink cannot be held, it is looked at by name.
            Some(libc::ELOOP | libc::EMLINK) => Ok((None, lstat_at(dir.as_raw_fd(), &c, here)?)),
            _ => Err(io::Error::new(
                e.kind(),
                format!("cannot open `{}`: {e}", here.display()),
            )),
        };
    }
    // SAFETY: `fd` was just returned by openat and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: as in lstat_at; fstat of a descriptor we own.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: the descriptor is open and `st` is writable.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } == -1 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("cannot inspect `{}`: {e}", here.display()),
        ));
    }
    Ok((Some(fd), st))
}

/// The target of the symlink `name` of `dir` whose `stat` is `st`: read from its own descriptor
/// when there is one, else by name and checked to be the same link afterwards.
fn read_link(
    held: Option<&OwnedFd>,
    dir: &OwnedFd,
    name: &OsStr,
    st: &libc::stat,
    here: &Path,
) -> io::Result<PathBuf> {
    let c = c_name(name)?;
    let mut buf = vec![0u8; libc::PATH_MAX as usize + 1];
    let (fd, at) = match held {
        Some(fd) => (fd.as_raw_fd(), c""),
        None => (dir.as_raw_fd(), c.as_c_str()),
    };
    // SAFETY: the descriptor is open, `at` is NUL-terminated and `buf` is writable for its
    // length.
    let n = unsafe { libc::readlinkat(fd, at.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    let n = usize::try_from(n).map_err(|_| {
        let e = io::Error::last_os_error();
        io::Error::new(
            e.kind(),
            format!("cannot read the link `{}`: {e}", here.display()),
        )
    })?;
    if n >= buf.len() {
        return Err(io::Error::other(format!(
            "the link `{}` is longer than a path may be",
            here.display()
        )));
    }
    if held.is_none() {
        let again = lstat_at(dir.as_raw_fd(), &c, here)?;
        if (again.st_dev, again.st_ino, again.st_uid) != (st.st_dev, st.st_ino, st.st_uid) {
            return Err(io::Error::other(format!(
                "`{}` changed while it was read; try again",
                here.display()
            )));
        }
    }
    buf.truncate(n);
    Ok(PathBuf::from(OsString::from_vec(buf)))
}

/// The folder held by `fd` (found at `path`), opened for use. A folder this user may enter but
/// not list is kept as held (`O_PATH`): opening, creating, renaming and removing names in it
/// work the same; listing it does not.
fn dir_of(fd: &OwnedFd, path: PathBuf) -> io::Result<Dir> {
    // SAFETY: the descriptor is open and "." is NUL-terminated; the result is checked.
    let dot = unsafe {
        libc::openat(
            fd.as_raw_fd(),
            c".".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if dot == -1 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::PermissionDenied && HOLDS_PATHS {
            return Ok(Dir::from_fd(fd.try_clone()?, path));
        }
        return Err(io::Error::new(
            e.kind(),
            format!("cannot open `{}`: {e}", path.display()),
        ));
    }
    // SAFETY: `dot` was just returned by openat and is owned by nobody else.
    Ok(Dir::from_fd(unsafe { OwnedFd::from_raw_fd(dot) }, path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn own_links_are_followed_to_the_file_and_a_dangling_one_is_named() {
        let t = tempfile::tempdir().unwrap();
        let real = t.path().join("real");
        std::fs::create_dir_all(real.join("artifacts")).unwrap();
        std::fs::write(real.join("elsewhere.toml"), "x = 1\n").unwrap();
        symlink(&real, t.path().join("depot")).unwrap();
        symlink("../elsewhere.toml", real.join("artifacts/Overrides.toml")).unwrap();
        let r = reach(&t.path().join("depot/artifacts/Overrides.toml"))
            .unwrap()
            .unwrap();
        assert_eq!(r.name, "elsewhere.toml");
        assert_eq!(r.read_text(100).unwrap().as_deref(), Some("x = 1\n"));
        assert!(r.link.is_some());
        // Written where the link points, the link kept.
        r.write_atomically(b"y = 2\n").unwrap();
        assert_eq!(
            std::fs::read_to_string(real.join("elsewhere.toml")).unwrap(),
            "y = 2\n"
        );
        assert!(
            std::fs::symlink_metadata(real.join("artifacts/Overrides.toml"))
                .unwrap()
                .is_symlink()
        );
        // Missing: nothing there, or a dangling link named as such.
        let none = reach(&t.path().join("depot/artifacts/missing.toml"))
            .unwrap()
            .unwrap();
        assert!(none.read_text(100).unwrap().is_none());
        symlink("nowhere.toml", real.join("artifacts/dangling.toml")).unwrap();
        let e = reach(&real.join("artifacts/dangling.toml"))
            .unwrap()
            .unwrap()
            .read_text(100)
            .unwrap_err();
        assert!(e.to_string().contains("which does not exist"), "{e}");
        // `..` and a missing folder on the way.
        let up = reach(&real.join("artifacts/../elsewhere.toml"))
            .unwrap()
            .unwrap();
        assert_eq!(up.read_text(100).unwrap().as_deref(), Some("y = 2\n"));
        assert!(reach(&real.join("no/such/file")).unwrap().is_none());
        std::fs::write(real.join("plain"), "").unwrap();
        assert!(
            reach(&real.join("plain/file")).is_err(),
            "a file on the way"
        );
    }

    #[test]
    fn a_fifo_or_a_folder_is_refused_at_once_and_reads_are_bounded() {
        let t = tempfile::tempdir().unwrap();
        let fifo = t.path().join("fifo");
        let c = CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(reach(&fifo).unwrap().unwrap().read_text(10).is_err());
        assert!(reach(t.path()).unwrap().unwrap().read_text(10).is_err());
        std::fs::write(t.path().join("big"), "0123456789ab").unwrap();
        let e = reach(&t.path().join("big"))
            .unwrap()
            .unwrap()
            .read_text(10)
            .unwrap_err();
        assert!(e.to_string().contains("larger than"), "{e}");
    }

    #[test]
    fn another_users_link_is_refused_on_the_way_and_at_the_file() {
        if crate::euid() != 0 {
            eprintln!("skipped: a symlink owned by another user needs root to make");
            return;
        }
        let t = tempfile::tempdir().unwrap();
        let secret = t.path().join("secret");
        std::fs::write(&secret, "token = \"s3cr3t\"\n").unwrap();
        std::fs::create_dir_all(t.path().join("victim/artifacts")).unwrap();
        let at_file = t.path().join("victim/artifacts/Overrides.toml");
        let on_the_way = t.path().join("depot");
        symlink(&secret, &at_file).unwrap();
        symlink(t.path().join("victim"), &on_the_way).unwrap();
        for link in [&at_file, &on_the_way] {
            std::os::unix::fs::lchown(link, Some(65534), Some(65534)).unwrap();
        }
        for path in [at_file.clone(), on_the_way.join("artifacts/Overrides.toml")] {
            let e = reach(&path).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
            let found = e.get_ref().unwrap().downcast_ref::<ForeignLink>().unwrap();
            assert_eq!(found.owner, 65534);
            assert!(!e.to_string().contains("s3cr3t"), "{e}");
        }
    }

    #[test]
    fn a_loop_is_an_error_not_a_hang() {
        let t = tempfile::tempdir().unwrap();
        symlink(t.path().join("b"), t.path().join("a")).unwrap();
        symlink(t.path().join("a"), t.path().join("b")).unwrap();
        let e = reach(&t.path().join("a")).unwrap_err();
        assert!(e.to_string().contains("too many levels"), "{e}");
    }
}
