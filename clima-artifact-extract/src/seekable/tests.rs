//! Round trips of the format's pieces; the hostile files are in clima-artifact-ops' tests.

use super::*;
use crate::tree_hash::{EntryMode, ObjectId};

fn entry(path: &str) -> IndexEntry {
    IndexEntry {
        path: path.as_bytes().to_vec(),
        mode: EntryMode::File,
        size: 3,
        blob: ObjectId {
            sha1: [1; 20],
            sha256: Some([2; 32]),
        },
        tar_offset: 0,
        header_len: 512,
        offset: 0,
        length: 30,
        blocks: vec![],
    }
}

#[test]
fn an_index_decodes_to_what_was_encoded() {
    let mut big = entry("b/big");
    big.size = 5 << 20;
    big.blocks = vec![
        Block {
            offset: 30,
            length: 10,
            sha256: [3; 32],
        };
        2
    ];
    let index = Index {
        block_size: DEFAULT_BLOCK_SIZE,
        tar_size: 1024,
        data_size: 70,
        entries: vec![entry("a"), big],
    };
    let doc = index.encode();
    assert_eq!(Index::decode(&doc, &IndexLimits::default()), Ok(index));
    // Cut anywhere, it is refused, never a panic.
    for n in 0..doc.len() {
        assert!(Index::decode(&doc[..n], &IndexLimits::default()).is_err());
    }
}

#[test]
fn members_round_trip_and_refuse_more_than_declared() {
    for flavour in [Flavour::Gzip, Flavour::Zstd] {
        let mut enc = MemberEncoder::new(flavour).unwrap();
        let data = b"hello hello hello".repeat(100);
        let member = enc.encode(&data).unwrap();
        assert_eq!(
            enc.encode(&data).unwrap(),
            member,
            "{flavour:?}: deterministic"
        );
        let n = data.len() as u64;
        assert_eq!(decode_member(flavour, &member, n).unwrap(), data);
        assert_eq!(
            decode_member(flavour, &member, n - 1),
            Err(format::MemberError::Bomb { expected: n - 1 })
        );
        let mut two = member.clone();
        two.extend_from_slice(&member);
        assert_eq!(
            decode_member(flavour, &two, n),
            Err(format::MemberError::Trailing(member.len() as u64))
        );
    }
}

/// A buffer reused from a larger member (its old bytes left after the new member's) decodes
/// each member as a fresh one does, and refuses the same lies.
#[test]
fn members_decoded_into_a_reused_buffer_are_those_decoded_fresh() {
    for flavour in [Flavour::Gzip, Flavour::Zstd] {
        let mut enc = MemberEncoder::new(flavour).unwrap();
        let big = b"0123456789abcdef".repeat(5000);
        let small = b"hello hello hello".repeat(100);
        let mut buf = Vec::new();
        for data in [&big, &small, &big, &small] {
            let member = enc.encode(data).unwrap();
            let n = data.len() as u64;
            format::decode_member_reusing(flavour, &member, n, &mut buf).unwrap();
            assert_eq!(&buf[..data.len()], &data[..], "{flavour:?}");
            assert_eq!(
                format::decode_member_reusing(flavour, &member, n - 1, &mut buf),
                Err(format::MemberError::Bomb { expected: n - 1 })
            );
            assert_eq!(
                format::decode_member_reusing(flavour, &member, n + 1, &mut buf),
                Err(format::MemberError::Short {
                    got: n,
                    expected: n + 1
                })
            );
            let mut two = member.clone();
            two.extend_from_slice(&member);
            assert_eq!(
                format::decode_member_reusing(flavour, &two, n, &mut buf),
                Err(format::MemberError::Trailing(member.len() as u64))
            );
        }
    }
}

#[test]
fn the_tail_is_found_from_the_last_bytes() {
    for flavour in [Flavour::Gzip, Flavour::Zstd] {
        let mut enc = MemberEncoder::new(flavour).unwrap();
        let mut file = b"0123456789".to_vec();
        let doc = Index {
            block_size: DEFAULT_BLOCK_SIZE,
            tar_size: 0,
            data_size: 10,
            entries: vec![],
        }
        .encode();
        let locator = write_tail(&mut file, &mut enc, 10, &doc).unwrap();
        let len = file.len() as u64;
        let (found, read) = read_index(&mut std::io::Cursor::new(&file), len, &Default::default())
            .unwrap()
            .unwrap();
        assert_eq!((found, read), (locator, doc));
        // A classic tarball has no footer.
        assert_eq!(
            Locator::find(&file[..40], 40, &Default::default()),
            Ok(None)
        );
    }
}

/// The parallel unpacking (`seekable::parallel`).
mod parallel;
