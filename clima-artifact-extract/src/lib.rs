//! # clima-artifact-extract
//!
//! Safe extraction of artifact tarballs that computes the git tree SHA-1 of what it writes, and
//! the git tree SHA-1 of a folder; on request both give the git tree SHA-256 too, from the same
//! pass ([`ExtractLimits::tree_hash_sha256`], [`tree_hash::tree_hashes`]). No network code: the install pipeline
//! (`clima-artifact-runtime`) feeds it the downloaded bytes, and the CLI's `hash`, `verify` and
//! `publish` use it on local files.
//!
//! | where | what |
//! |---|---|
//! | crate root (module `unpack`) | [`extract_archive`], [`extract_buffered`]: tar entries written under the rules of the extraction (paths, links, modes), the limits ([`ExtractLimits`]: unpacked bytes, entries, free-space reserve) and the errors ([`ExtractError`]); [`free_space`] and [`default_free_reserve`] are `clima_artifact_fs`'s, re-exported |
//! | `dirs` (private) | the cache of folder handles of one extraction; every file operation is a [`clima_artifact_fs::Dir`] method (the one descriptor walker of the workspace) |
//! | [`tree_hash`] | the git tree SHA-1 (and SHA-256, [`tree_hash::Formats`]) of a folder ([`tree_hash::tree_hash`], [`tree_hash::tree_hashes`]), blob ids ([`tree_hash::BlobHasher`]) and trees built entry by entry ([`tree_hash::TreeBuilder`]), shared with the extraction |
//!
//! The runtime re-exports both as `clima_artifact_runtime::extract` and
//! `clima_artifact_runtime::tree_hash`.
//!
//! # Extraction
//!
//!
//! ```text
//! reader ──magic bytes──> gzip (flate2, zlib-rs) | zstd | xz | bzip2 | plain tar  (zip, 7z: refused)
//!        ──> byte meter (caps the decompressed stream)
//!        ──> tar entries ──> our own writer: create_new + O_NOFOLLOW, BlobHasher on the same bytes
//!                                                                         └──> TreeBuilder
//! ```
//!
//! The `tar` crate only parses headers (GNU long names and pax paths included); every file,
//! directory and link is created here, never with `tar`'s `unpack`, so the rules below hold
//! whatever the archive says.
//!
//! # What gets written
//!
//! - Paths are taken relative to `dest`; empty and `.` components are dropped. Absolute paths,
//!   `..` components and NUL bytes are refused ([`ExtractError::Unsafe`]).
//! - Regular files are created with `O_CREAT | O_EXCL | O_NOFOLLOW` and mode `0o555` if the
//!   header's owner exec bit is set, else `0o444`: read-only, as Pkg makes installed artifacts
//!   (`set_readonly`), so a model cannot change a shared copy by accident. Setuid, setgid,
//!   sticky, group/other bits, owners and times from the archive are dropped. Directories are
//!   `0o755` (writable, so a gc can remove them). Symlinks are left as they are.
//! - A hard link whose own mode differs from its target's becomes a copy with the link's mode,
//!   as Tar.jl extracts it (and hashes it).
//! - Every directory on the way to an entry must be a directory created by this extraction;
//!   a path through a file or a symlink created earlier in the archive is refused, so nothing is
//!   ever written through a symlink.
//! - Symlinks are created as symlinks (never followed) and hash as their target bytes. A target
//!   must be relative, and may only climb with leading `..` components (no deeper than the link's
//!   own directory); `..` after a name is refused because it could climb out through another
//!   symlink. So no link resolves outside the artifact.
//! - Hardlinks must name a regular file extracted earlier in this archive; they are created as
//!   hard links (copied if the filesystem refuses).
//! - Character and block devices, fifos, sparse files and unknown entry types are refused. pax
//!   global headers are ignored.
//! - Duplicates: a later file, symlink or hardlink replaces an earlier file or symlink at the same
//!   path (the old one is unlinked first, never opened), like `tar x`. A file where a directory
//!   was extracted, or a directory where a file or symlink was, is refused as ambiguous.
//! - Entries with a `.git` component are written but left out of the tree hash, as git and Julia
//!   do, so the hash always equals [`tree_hash`](crate::tree_hash::tree_hash) of `dest`.
//!
//! # Limits
//!
//! [`ExtractLimits::max_unpacked_bytes`] caps the decompressed tar stream: file contents plus
//! tar's own 512-byte headers and padding, so neither big files nor millions of empty entries can
//! fill the disk. A header that announces more than what is left is refused before anything of it
//! is written ([`ExtractError::TooLarge`]). Extension headers (long names, pax) are limited to
//! 1 MiB per entry so they cannot exhaust memory. [`ExtractLimits::max_entries`] caps the number
//! of tar entries (files, directories, links), so a small archive of millions of empty entries
//! cannot exhaust inodes or the memory that tracks written paths ([`ExtractError::TooManyEntries`]).
//!
//! # Integrity
//!
//! An archive without tar's end-of-archive marker (truncated), a compression error, a bad header
//! checksum or a file shorter than its header says is [`ExtractError::Corrupt`]. After the marker
//! the decompressed stream is read to its end, so gzip's CRC is checked too.

mod dirs;
mod listing;
mod unpack;

pub mod seekable;

pub mod tree_hash;

pub use unpack::*;
