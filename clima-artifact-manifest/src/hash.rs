//! Content hashes used by artifacts: the git tree SHA-1 that names an artifact, its git tree
//! SHA-256 (git's SHA-256 object format, an optional second check) and the SHA-256 of a download.

use std::fmt;
use std::str::FromStr;

/// A git tree SHA-1: the name of an artifact and of its directory `artifacts/<hex>/` in a depot.
#[derive(
    Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(into = "String", try_from = "String")]
pub struct GitTreeSha1(pub [u8; 20]);

/// A git tree SHA-256: the tree id of the artifact's content in a repository made with
/// `git init --object-format=sha256` (what `Tar.tree_hash(...; algorithm = "git-sha256")`
/// computes), written `git-tree-sha256` in a manifest. It does not name the depot folder:
/// that stays `artifacts/<git-tree-sha1>/`.
#[derive(
    Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(into = "String", try_from = "String")]
pub struct GitTreeSha256(pub [u8; 32]);

/// The SHA-256 digest of a downloaded tarball.
#[derive(
    Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(into = "String", try_from = "String")]
pub struct Sha256(pub [u8; 32]);

/// Why a string is not a valid hex digest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HexError {
    /// The string does not have the expected number of hex digits.
    #[error("expected {expected} hex digits, found {found} characters")]
    Length {
        /// Number of hex digits required.
        expected: usize,
        /// Number of characters found.
        found: usize,
    },
    /// The string contains something other than `0-9a-fA-F`.
    #[error("`{character}` is not a hex digit")]
    Digit {
        /// The first offending character.
        character: char,
    },
}

fn parse_hex<const N: usize>(s: &str) -> Result<[u8; N], HexError> {
    if let Some(character) = s.chars().find(|c| !c.is_ascii_hexdigit()) {
        return Err(HexError::Digit { character });
    }
    if s.len() != 2 * N {
        return Err(HexError::Length {
            expected: 2 * N,
            found: s.chars().count(),
        });
    }
    let mut out = [0u8; N];
    hex::decode_to_slice(s, &mut out).map_err(|_| HexError::Length {
        expected: 2 * N,
        found: s.len(),
    })?;
    Ok(out)
}

macro_rules! digest_impls {
    ($ty:ident, $n:literal) => {
        impl $ty {
            /// Parses a lower- or upper-case hex string.
            pub fn from_hex(s: &str) -> Result<Self, HexError> {
                parse_hex::<$n>(s).map($ty)
            }
            /// The lower-case hex form, as written in manifests and used for directory names.
            pub fn to_hex(&self) -> String {
                hex::encode(self.0)
            }
        }
        impl FromStr for $ty {
            type Err = HexError;
            fn from_str(s: &str) -> Result<Self, HexError> {
                Self::from_hex(s)
            }
        }
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.to_hex())
            }
        }
        impl fmt::Debug for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($ty), self.to_hex())
            }
        }
        impl From<$ty> for String {
            fn from(h: $ty) -> String {
                h.to_hex()
            }
        }
        impl TryFrom<String> for $ty {
            type Error = HexError;
            fn try_from(s: String) -> Result<Self, HexError> {
                Self::from_hex(&s)
            }
        }
    };
}

digest_impls!(GitTreeSha1, 20);
digest_impls!(GitTreeSha256, 32);
digest_impls!(Sha256, 32);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects() {
        let h = GitTreeSha1::from_hex("B373f1887cff55850cbf76ec005f7d93726ae42e").unwrap();
        assert_eq!(h.to_string(), "b373f1887cff55850cbf76ec005f7d93726ae42e");
        assert_eq!(
            GitTreeSha1::from_hex("abc"),
            Err(HexError::Length {
                expected: 40,
                found: 3
            })
        );
        assert_eq!(
            Sha256::from_hex(&"g".repeat(64)),
            Err(HexError::Digit { character: 'g' })
        );
    }
}
