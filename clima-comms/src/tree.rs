//! The binomial-tree reduce behind [`Context::reduce_to_root`](crate::Context::reduce_to_root),
//! over any point-to-point transport, and rank sets kept as ranges (so that "every rank" is a
//! few bytes, whatever the number of ranks).
//!
//! ```text
//!  round 1:  1 -> 0   3 -> 2   5 -> 4   7 -> 6      (rank r sends when bit 0 of r is set)
//!  round 2:  2 -> 0   6 -> 4                         (bit 1)
//!  round 3:  4 -> 0                                  (bit 2)
//! ```
//!
//! In round k a rank whose bit k is its lowest set bit sends what it merged so far (the values
//! of ranks `r .. r + 2^k`) to `r - 2^k` and is done; the receiver merges it after its own. The
//! root receives `ceil(log2 P)` messages, every other rank at most as many and sends one, and a
//! merge always gets two adjacent rank ranges, the lower first.

/// The tree reduce: `send(to, bytes)` and `recv(from)` move one message; `merge(lower,
/// higher)` combines the values of two adjacent rank ranges. The root gets `Some`.
pub(crate) fn binomial_reduce(
    rank: usize,
    size: usize,
    data: Vec<u8>,
    merge: &dyn Fn(Vec<u8>, Vec<u8>) -> Vec<u8>,
    send: &mut dyn FnMut(usize, Vec<u8>),
    recv: &mut dyn FnMut(usize) -> Vec<u8>,
) -> Option<Vec<u8>> {
    let mut acc = data;
    let mut mask = 1_usize;
    while mask < size {
        if rank & mask != 0 {
            send(rank - mask, acc);
            return None;
        }
        if rank + mask < size {
            let theirs = recv(rank + mask);
            acc = merge(acc, theirs);
        }
        mask <<= 1;
    }
    (rank == 0).then_some(acc)
}

/// Sorted, deduplicated ranks as inclusive ranges `[first, last]`: `0..=9999` is one pair.
pub fn rank_ranges(ranks: &[usize]) -> Vec<[usize; 2]> {
    let mut sorted = ranks.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out: Vec<[usize; 2]> = Vec::new();
    for r in sorted {
        match out.last_mut() {
            Some(last) if last[1] + 1 == r => last[1] = r,
            _ => out.push([r, r]),
        }
    }
    out
}

/// The ranks of [`rank_ranges`]' ranges, sorted and deduplicated (ranges in any order; a
/// reversed pair is empty).
pub fn ranks_of(ranges: &[[usize; 2]]) -> Vec<usize> {
    let mut out: Vec<usize> = ranges.iter().flat_map(|&[a, b]| a..=b).collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// Two range lists as one ([`rank_ranges`] of the union).
pub fn union_ranges(a: &[[usize; 2]], b: &[[usize; 2]]) -> Vec<[usize; 2]> {
    let mut all: Vec<[usize; 2]> = a
        .iter()
        .chain(b)
        .copied()
        .filter(|r| r[0] <= r[1])
        .collect();
    all.sort_unstable();
    let mut out: Vec<[usize; 2]> = Vec::new();
    for [lo, hi] in all {
        match out.last_mut() {
            Some(last) if lo <= last[1].saturating_add(1) => last[1] = last[1].max(hi),
            _ => out.push([lo, hi]),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_round_trip() {
        assert_eq!(rank_ranges(&[5, 0, 1, 2, 7, 6, 2]), vec![[0, 2], [5, 7]]);
        assert_eq!(ranks_of(&[[5, 7], [0, 2], [3, 1]]), vec![0, 1, 2, 5, 6, 7]);
        assert_eq!(
            union_ranges(&[[0, 3], [9, 9]], &[[4, 5], [7, 8]]),
            vec![[0, 5], [7, 9]]
        );
        assert!(rank_ranges(&[]).is_empty());
    }

    #[test]
    fn the_tree_merges_every_rank_in_order_with_log_messages_at_the_root() {
        for size in 1..=37 {
            // Messages in flight, by (from, to).
            let mail = std::cell::RefCell::new(std::collections::HashMap::new());
            let merge = |a: Vec<u8>, b: Vec<u8>| [a, b].concat();
            let mut root = None;
            let mut root_received = 0;
            // Highest rank first: each sender's message is there before its receiver runs.
            for rank in (0..size).rev() {
                let mut got = 0;
                let out = binomial_reduce(
                    rank,
                    size,
                    vec![rank as u8],
                    &merge,
                    &mut |to, bytes| {
                        mail.borrow_mut().insert((rank, to), bytes);
                    },
                    &mut |from| {
                        got += 1;
                        mail.borrow_mut()
                            .remove(&(from, rank))
                            .expect("sent before")
                    },
                );
                if rank == 0 {
                    root = out;
                    root_received = got;
                }
            }
            let expected: Vec<u8> = (0..size as u8).collect();
            assert_eq!(root, Some(expected), "size {size}");
            assert_eq!(
                root_received,
                size.next_power_of_two().trailing_zeros() as usize
            );
            assert!(mail.borrow().is_empty());
        }
    }
}
