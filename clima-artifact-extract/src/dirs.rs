//! Handles on the folders an extraction created. Every file operation goes through
//! [`clima_artifact_fs::Dir`] (`openat` and friends, never following a symlink in any
//! component): once the destination folder is open, a folder inside it that is swapped for a
//! symlink (or renamed away) cannot redirect a write anywhere else.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;

use clima_artifact_fs::Dir;

/// Most folder handles kept open at once (tar archives list a folder's entries together, so
/// a few cover nearly every lookup; the rest are opened again from the root).
const CACHED_DIRS: usize = 256;

/// Handles on the folders an extraction created, by their path inside the destination
/// (`b""` is the destination itself). A folder not in the cache is reached again from the
/// destination's handle, one [`Dir::open_dir`] per component.
pub(crate) struct Dirs {
    root: Arc<Dir>,
    cache: HashMap<Vec<u8>, Arc<Dir>>,
}

impl Dirs {
    pub(crate) fn new(root: Dir) -> Dirs {
        Dirs {
            root: Arc::new(root),
            cache: HashMap::new(),
        }
    }

    /// The destination's own handle.
    pub(crate) fn root(&self) -> &Dir {
        &self.root
    }

    /// The handle of the folder made of `components` (all created by this extraction).
    pub(crate) fn get(&mut self, components: &[Vec<u8>]) -> io::Result<Arc<Dir>> {
        if components.is_empty() {
            return Ok(Arc::clone(&self.root));
        }
        let key = components.join(&b'/');
        if let Some(dir) = self.cache.get(&key) {
            return Ok(Arc::clone(dir));
        }
        let mut dir = Arc::clone(&self.root);
        for component in components {
            let next = dir.open_dir(OsStr::from_bytes(component))?.ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!(
                        "`{}` was removed while the extraction ran",
                        dir.path().join(OsStr::from_bytes(component)).display()
                    ),
                )
            })?;
            dir = Arc::new(next);
        }
        self.insert(key, Arc::clone(&dir));
        Ok(dir)
    }

    /// [`Dirs::get`] of the folder `path` (components joined by `/`; `b""` is the destination).
    pub(crate) fn get_path(&mut self, path: &[u8]) -> io::Result<Arc<Dir>> {
        if path.is_empty() {
            return Ok(Arc::clone(&self.root));
        }
        if let Some(dir) = self.cache.get(path) {
            return Ok(Arc::clone(dir));
        }
        let components: Vec<Vec<u8>> = path.split(|b| *b == b'/').map(<[u8]>::to_vec).collect();
        self.get(&components)
    }

    /// Remembers the handle of a folder just created.
    pub(crate) fn insert(&mut self, key: Vec<u8>, dir: Arc<Dir>) {
        if self.cache.len() >= CACHED_DIRS {
            self.cache.clear();
        }
        self.cache.insert(key, dir);
    }
}
