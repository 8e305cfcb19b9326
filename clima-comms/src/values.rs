//! Typed values between ranks, on top of the byte primitives of [`Context`]: the JSON of a
//! value in the framing of [`crate::root_decides`] (`'O'` + JSON, `'E'` + an error), so that
//! a value that does not encode or decode is a [`CollectiveError`], never a silent default.
//!
//! ```text
//!  broadcast_value  rank 0: value  --bcast-->  every rank: the value, or the same Err
//!  gather_values    every rank: value  --gather-->  rank 0: all values in rank order, or the
//!                                                   first rank whose value did not decode
//!  reduce_values    every rank: value  --reduce (tree), merged as values-->  rank 0: merged
//! ```

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::collective::{decode, encode, reduce_outcomes};
use crate::{CollectiveError, Context};

/// **Collective.** Rank 0 passes `Some(value)`, the others `None`; every rank returns rank
/// 0's value, or every rank the same error when it could not be encoded or decoded (or rank 0
/// passed `None`).
pub fn broadcast_value<T>(ctx: &dyn Context, value: Option<T>) -> Result<T, CollectiveError>
where
    T: Serialize + DeserializeOwned,
{
    let value = || {
        value.ok_or_else(|| CollectiveError::Unencodable {
            why: "the root rank has no value to send".to_owned(),
        })
    };
    if ctx.size() <= 1 {
        return value();
    }
    let mine = (ctx.rank() == 0).then(|| encode(&value()));
    decode(&ctx.broadcast_from_root(mine), 0)
}

/// **Collective.** Every rank passes its value; rank 0 gets them all in rank order (`Some`),
/// or the error of the first rank whose value could not be encoded or decoded; the others get
/// `None`. Rank 0 receives every rank's value: linear in the number of ranks (see
/// [`reduce_values`] for values that merge).
pub fn gather_values<T>(ctx: &dyn Context, value: &T) -> Option<Result<Vec<T>, CollectiveError>>
where
    T: Serialize + DeserializeOwned,
{
    let all = ctx.gather_to_root(encode::<&T, CollectiveError>(&Ok(value)))?;
    Some(
        all.iter()
            .enumerate()
            .map(|(rank, bytes)| decode(bytes, rank))
            .collect(),
    )
}

/// **Collective.** Every rank passes its value; rank 0 gets them merged with `merge(lower,
/// higher)` (associative, the values of two adjacent rank ranges, the lower first), in the
/// tree of [`Context::reduce_to_root`]; the others get `None`. A part that does not decode
/// where it is merged travels on as the error (naming the rank that merged it) and is rank
/// 0's outcome ([`reduce_outcomes`] lets the merge decide instead).
pub fn reduce_values<T>(
    ctx: &dyn Context,
    value: T,
    merge: impl Fn(T, T) -> T,
) -> Option<Result<T, CollectiveError>>
where
    T: Serialize + DeserializeOwned,
{
    reduce_outcomes(ctx, value, |lower, higher| match (lower, higher) {
        (Ok(a), Ok(b)) => Ok(merge(a, b)),
        (Err(e), _) | (_, Err(e)) => Err(e),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Singleton, on_thread_ranks};

    #[test]
    fn values_reach_every_rank_or_the_root() {
        let out = on_thread_ranks(5, |ctx| {
            let bcast = broadcast_value(ctx, (ctx.rank() == 0).then(|| "from 0".to_owned()));
            let gathered = gather_values(ctx, &(ctx.rank() * 10));
            let merged = reduce_values(ctx, vec![ctx.rank()], |mut a, b| {
                a.extend(b);
                a
            });
            (bcast, gathered, merged)
        });
        for (rank, (bcast, gathered, merged)) in out.into_iter().enumerate() {
            assert_eq!(bcast, Ok("from 0".to_owned()));
            if rank == 0 {
                assert_eq!(gathered, Some(Ok(vec![0, 10, 20, 30, 40])));
                assert_eq!(merged, Some(Ok(vec![0, 1, 2, 3, 4])));
            } else {
                assert_eq!((gathered, merged), (None, None));
            }
        }
        assert_eq!(broadcast_value(&Singleton, Some(3_u8)), Ok(3));
        assert!(broadcast_value::<u8>(&Singleton, None).is_err());
    }

    /// A rank whose value is not what the others decode: the same error on every rank (after
    /// a broadcast of the root's verdict), never a default.
    #[test]
    fn a_value_that_does_not_decode_is_an_error_naming_its_rank() {
        let out = on_thread_ranks(4, |ctx| {
            let gathered = if ctx.rank() == 2 {
                gather_values(ctx, &"not a number".to_owned()).map(|_| Ok(Vec::new()))
            } else {
                gather_values::<u32>(ctx, &7)
            };
            let merged = if ctx.rank() == 3 {
                reduce_values(ctx, "x".to_owned(), |a, _| a).map(|_| Ok(0))
            } else {
                reduce_values(ctx, 1_u32, |a, b| a + b)
            };
            (gathered, merged)
        });
        let (gathered, merged) = &out[0];
        let Some(Err(CollectiveError::Undecodable { rank: 2, .. })) = gathered else {
            panic!("{gathered:?}")
        };
        let Some(Err(CollectiveError::Undecodable { rank: 2, why })) = merged else {
            panic!("{merged:?}")
        };
        assert!(why.contains("invalid type"), "{why}");

        // A root without a value: every rank hears it.
        let out = on_thread_ranks(3, |ctx| broadcast_value::<u8>(ctx, None));
        for o in out {
            assert!(
                matches!(&o, Err(CollectiveError::Unencodable { why }) if why.contains("no value")),
                "{o:?}"
            );
        }
    }

    /// A part that does not decode reaches the merge as its error: the merge may keep the
    /// other side and remember it, and rank 0 sees both.
    #[test]
    fn a_tolerant_merge_keeps_the_readable_parts_and_the_error() {
        type Sum = (u32, Vec<String>);
        let out = on_thread_ranks(4, |ctx| {
            let keep = |side: Result<Sum, CollectiveError>| {
                side.unwrap_or_else(|e| (0, vec![e.to_string()]))
            };
            let merge = |a, b| {
                let ((x, mut xs), (y, ys)) = (keep(a), keep(b));
                xs.extend(ys);
                Ok((x + y, xs))
            };
            // Rank 3 is a leaf of the tree: its value is merged by rank 2, never merges.
            if ctx.rank() == 3 {
                reduce_outcomes(ctx, ("not a pair".to_owned(),), |a, _| a).map(|_| Ok((0, vec![])))
            } else {
                reduce_outcomes(ctx, (ctx.rank() as u32 + 1, Vec::new()), merge)
            }
        });
        let Some(Ok((sum, errors))) = &out[0] else {
            panic!("{:?}", out[0])
        };
        assert_eq!(*sum, 1 + 2 + 3);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].contains("could not be decoded"), "{errors:?}");
        assert!(out[1..].iter().all(Option::is_none));
    }
}
