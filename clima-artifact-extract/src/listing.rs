//! What an extraction wrote, by folder: each folder it created has a number and a map from the
//! names in it to what they became. A path is looked up one component at a time, so each
//! entry costs its own name (at most 255 bytes on the filesystems we write to), never its
//! whole path: an archive of many entries with long paths cannot make the listing grow with
//! the square of their depth or with the length of their paths.

use std::collections::HashMap;

use crate::tree_hash::{EntryMode, ObjectId};

/// The number of a folder the extraction created; [`ROOT`] is the destination itself.
pub(crate) type DirId = u32;

/// The destination folder.
pub(crate) const ROOT: DirId = 0;

/// What a name of the archive became on disk.
pub(crate) enum Written {
    Dir(DirId),
    File { mode: EntryMode, blob: Blob },
    Symlink,
}

/// The blob id of a written file: known, or still being computed by the writer thread
/// (the file's number).
#[derive(Clone, Copy)]
pub(crate) enum Blob {
    Known(ObjectId),
    Pending(usize),
}

/// Every name written, by folder.
pub(crate) struct Listing {
    /// By folder number: the names in it.
    names: Vec<HashMap<Box<[u8]>, Written>>,
    /// By folder number: its parent and its own name (the root's is empty).
    parents: Vec<(DirId, Box<[u8]>)>,
}

impl Listing {
    pub(crate) fn new() -> Listing {
        Listing {
            names: vec![HashMap::new()],
            parents: vec![(ROOT, Box::default())],
        }
    }

    /// The folder at `components` (every one of them a folder this extraction created).
    pub(crate) fn dir(&self, components: &[Vec<u8>]) -> Option<DirId> {
        components.iter().try_fold(ROOT, |dir, name| {
            match self.names[dir as usize].get(&name[..]) {
                Some(Written::Dir(id)) => Some(*id),
                _ => None,
            }
        })
    }

    /// What `name` in folder `dir` became.
    pub(crate) fn get(&self, dir: DirId, name: &[u8]) -> Option<&Written> {
        self.names[dir as usize].get(name)
    }

    /// What the path `components` became (`None` if nothing, or if a folder above it is not
    /// one this extraction created).
    pub(crate) fn lookup(&self, components: &[Vec<u8>]) -> Option<&Written> {
        let (name, parents) = components.split_last()?;
        self.get(self.dir(parents)?, name)
    }

    /// Records a new folder `name` in `dir`; returns its number.
    pub(crate) fn add_dir(&mut self, dir: DirId, name: &[u8]) -> DirId {
        let id = self.names.len() as DirId;
        self.names.push(HashMap::new());
        self.parents.push((dir, name.into()));
        self.names[dir as usize].insert(name.into(), Written::Dir(id));
        id
    }

    /// Records a file or symlink `name` in `dir` (replacing what was recorded there).
    pub(crate) fn set(&mut self, dir: DirId, name: &[u8], written: Written) {
        debug_assert!(
            !matches!(written, Written::Dir(_)),
            "folders go through add_dir"
        );
        self.names[dir as usize].insert(name.into(), written);
    }

    /// Forgets `name` in `dir`.
    pub(crate) fn remove(&mut self, dir: DirId, name: &[u8]) {
        self.names[dir as usize].remove(name);
    }

    /// The path of folder `dir`, as components from the destination.
    pub(crate) fn components(&self, mut dir: DirId) -> Vec<&[u8]> {
        let mut out = Vec::new();
        while dir != ROOT {
            let (parent, name) = &self.parents[dir as usize];
            out.push(&name[..]);
            dir = *parent;
        }
        out.reverse();
        out
    }
}
