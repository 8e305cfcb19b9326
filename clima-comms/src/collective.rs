//! The collective steps shared by every user of a [`Context`], with one wire framing:
//! `'O'` + JSON of the value, or `'E'` + the error's own wire bytes ([`WireError`]).
//!
//! ```text
//!  root_decides    rank 0: run op (panics caught)   --bcast-->  every rank: same Ok / same Err
//!  all_succeed     every rank: own outcome  --reduce-->  rank 0: first failure
//!                                                     --bcast-->  every rank: Ok only if all Ok
//!  reduce_outcomes every rank: value  --reduce, each side to the merge as value or error-->
//!                                                     rank 0: merged
//!  requests_agree  every rank: request  --reduce_outcomes-->  rank 0: who asked for something else
//! ```
//!
//! The reduces ([`Context::reduce_to_root`]) merge in a tree and carry what does not grow with
//! the number of ranks when they agree: the lowest failing rank and its error; each distinct
//! request once, with its ranks as ranges. Rank 0 receives `ceil(log2 P)` messages of a size
//! that depends on how many ranks differ, not on how many there are.

use std::panic::{AssertUnwindSafe, catch_unwind};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::Context;

/// An error type that can travel between ranks as bytes, so that every rank returns the same
/// error (variant and text) as the rank that produced it.
pub trait WireError: Sized {
    /// The error as bytes.
    fn to_wire(&self) -> Vec<u8>;
    /// The error from [`WireError::to_wire`]'s bytes. Bytes that do not decode must give an
    /// error that says so, never a panic.
    fn from_wire(bytes: &[u8]) -> Self;
}

/// The JSON wire form of an error type that derives serde and wraps [`CollectiveError`]: the
/// one [`WireError::to_wire`] of the project's error types. An error that cannot be encoded
/// travels as [`CollectiveError::Unencodable`] with its text.
pub fn json_to_wire<E>(error: &E) -> Vec<u8>
where
    E: serde::Serialize + std::fmt::Display + From<CollectiveError>,
{
    serde_json::to_vec(error).unwrap_or_else(|e| {
        serde_json::to_vec(&E::from(CollectiveError::Unencodable {
            why: format!("{error} (could not serialise the error: {e})"),
        }))
        .unwrap_or_default()
    })
}

/// [`json_to_wire`] read back: bytes that do not decode become
/// [`CollectiveError::Undecodable`] with their raw text, never a panic.
pub fn json_from_wire<E>(bytes: &[u8]) -> E
where
    E: serde::de::DeserializeOwned + From<CollectiveError>,
{
    serde_json::from_slice(bytes).unwrap_or_else(|e| {
        E::from(CollectiveError::Undecodable {
            rank: 0,
            why: format!(
                "an error that cannot be decoded ({e}); its raw text: {}",
                String::from_utf8_lossy(bytes)
            ),
        })
    })
}

/// What a collective step can fail with by itself, apart from the operation's own errors.
/// Callers' error types wrap it (`From<CollectiveError>`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub enum CollectiveError {
    /// The root panicked while running the operation; every rank gets this instead of a hang.
    #[error(
        "the root rank panicked while {what}: {message}; this is a bug, please report it with the output above"
    )]
    RootPanicked {
        /// What the root was doing, e.g. `installing artifact `era5``.
        what: String,
        /// The panic message.
        message: String,
    },
    /// The bytes that arrived are not an answer of this protocol.
    #[error(
        "the answer of rank {rank} could not be decoded ({why}); are all ranks running the same binary?"
    )]
    Undecodable {
        /// The rank whose answer it was.
        rank: usize,
        /// What was wrong with it.
        why: String,
    },
    /// The root could not encode its value for the other ranks.
    #[error("the root rank cannot send its answer to the other ranks: {why}")]
    Unencodable {
        /// The encoder's error.
        why: String,
    },
}

/// [`CollectiveError`] travels in the JSON form of [`json_to_wire`], so the typed value steps
/// ([`crate::broadcast_value`], ...) can hand one rank's failure to the others.
impl WireError for CollectiveError {
    fn to_wire(&self) -> Vec<u8> {
        json_to_wire(self)
    }
    fn from_wire(bytes: &[u8]) -> Self {
        json_from_wire(bytes)
    }
}

const OK_TAG: u8 = b'O';
const ERR_TAG: u8 = b'E';

pub(crate) fn encode<T: Serialize, E: WireError + From<CollectiveError>>(
    outcome: &Result<T, E>,
) -> Vec<u8> {
    match outcome {
        Ok(value) => match serde_json::to_vec(value) {
            Ok(json) => [&[OK_TAG][..], &json].concat(),
            Err(e) => {
                let err = E::from(CollectiveError::Unencodable { why: e.to_string() });
                [&[ERR_TAG][..], &err.to_wire()].concat()
            }
        },
        Err(e) => [&[ERR_TAG][..], &e.to_wire()].concat(),
    }
}

pub(crate) fn decode<T: DeserializeOwned, E: WireError + From<CollectiveError>>(
    bytes: &[u8],
    rank: usize,
) -> Result<T, E> {
    let undecodable = |why: String| E::from(CollectiveError::Undecodable { rank, why });
    match bytes.split_first() {
        Some((&OK_TAG, json)) => {
            serde_json::from_slice(json).map_err(|e| undecodable(e.to_string()))
        }
        Some((&ERR_TAG, wire)) => Err(E::from_wire(wire)),
        Some((tag, _)) => Err(undecodable(format!("unknown tag {tag:#04x}"))),
        None => Err(undecodable("no bytes".to_owned())),
    }
}

/// Runs `op`, turning a panic into [`CollectiveError::RootPanicked`], so that a rank still
/// reaches its next collective call.
fn guarded<T, E: From<CollectiveError>>(
    what: &str,
    op: impl FnOnce() -> Result<T, E>,
) -> Result<T, E> {
    catch_unwind(AssertUnwindSafe(op)).unwrap_or_else(|payload| {
        Err(E::from(CollectiveError::RootPanicked {
            what: what.to_owned(),
            message: panic_message(&*payload),
        }))
    })
}

/// The message of a panic caught with `catch_unwind` (`panic!` payloads are `&str` or
/// `String`), for errors that replace a panic on a rank that must still reach its next
/// collective call.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-string panic payload".to_owned())
}

/// **Collective.** Rank 0 runs `op` (a panic becomes [`CollectiveError::RootPanicked`]) and
/// broadcasts the outcome; every rank returns the same `Ok` value or the same `Err`. The other
/// ranks never run `op`. `what` describes the operation for the panic message (e.g.
/// `installing artifact `era5``).
///
/// On a one-rank context `op` runs directly (still panic-safe) and nothing is encoded.
pub fn root_decides<T, E>(
    ctx: &dyn Context,
    what: &str,
    op: impl FnOnce() -> Result<T, E>,
) -> Result<T, E>
where
    T: Serialize + DeserializeOwned,
    E: WireError + From<CollectiveError>,
{
    if ctx.size() <= 1 {
        return guarded(what, op);
    }
    let mine = (ctx.rank() == 0).then(|| encode(&guarded(what, op)));
    decode(&ctx.broadcast_from_root(mine), 0)
}

/// **Collective.** Every rank passes the outcome of its own part; all ranks return `Ok(own)`
/// only if every rank succeeded, otherwise every rank returns the failure of the lowest failing
/// rank, as `on_rank(rank, error)` made it on the root (e.g. to add "on rank 3 of ...").
pub fn all_succeed<T, E>(
    ctx: &dyn Context,
    own: Result<T, E>,
    on_rank: impl FnOnce(usize, E) -> E,
) -> Result<T, E>
where
    E: WireError + From<CollectiveError>,
{
    if ctx.size() <= 1 {
        return own;
    }
    // Empty: every rank of the range succeeded; else the lowest failing rank (u64, little
    // endian) and its error's wire bytes.
    let mine = match &own {
        Ok(_) => Vec::new(),
        Err(e) => [&(ctx.rank() as u64).to_le_bytes()[..], &e.to_wire()].concat(),
    };
    let lowest_failure = |lower: Vec<u8>, higher: Vec<u8>| {
        if lower.is_empty() { higher } else { lower }
    };
    let verdict = ctx.reduce_to_root(mine, &lowest_failure).map(|first| {
        if first.is_empty() {
            return encode::<(), E>(&Ok(()));
        }
        let failed = match first.split_first_chunk::<8>() {
            Some((rank, wire)) => {
                let rank = usize::try_from(u64::from_le_bytes(*rank)).unwrap_or(usize::MAX);
                on_rank(rank, E::from_wire(wire))
            }
            None => E::from(CollectiveError::Undecodable {
                rank: 0,
                why: format!("a failure of {} bytes, too short", first.len()),
            }),
        };
        encode::<(), E>(&Err(failed))
    });
    match decode::<(), E>(&ctx.broadcast_from_root(verdict), 0) {
        Ok(()) => own,
        Err(e) => Err(e),
    }
}

/// **Collective.** [`reduce_values`](crate::reduce_values) for values that can take a
/// failure in: `merge` gets each side as it arrived, the value or the [`CollectiveError`] that
/// stands for it (a part that did not decode where it is merged, naming the rank that merged
/// it, or an `Err` that an earlier merge returned), and says what the two become. A merge that
/// keeps the other side and remembers the failure leaves one rank's broken bytes out of the
/// result, told, instead of failing everyone's. Rank 0 gets `Some` (the last merge's outcome,
/// or its own value's on one rank), the others `None`.
pub fn reduce_outcomes<T, F>(
    ctx: &dyn Context,
    value: T,
    merge: F,
) -> Option<Result<T, CollectiveError>>
where
    T: Serialize + DeserializeOwned,
    F: Fn(Result<T, CollectiveError>, Result<T, CollectiveError>) -> Result<T, CollectiveError>,
{
    let me = ctx.rank();
    let merge_bytes =
        |lower: Vec<u8>, higher: Vec<u8>| encode(&merge(decode(&lower, me), decode(&higher, me)));
    let merged = ctx.reduce_to_root(encode::<T, CollectiveError>(&Ok(value)), &merge_bytes)?;
    Some(decode(&merged, me))
}

/// **Collective.** Brings every rank's `request` to the root, which compares them with its
/// own. On the root: `Some(mismatches)`, each the rank and what it asked for (`None` if its
/// request could not be read), in rank order, empty when all agree. On the other ranks: `None`.
///
/// The requests travel in a tree reduce, each distinct request once with its ranks as ranges,
/// so when every rank agrees the root receives a few messages of one request's size.
///
/// Callers turn a non-empty list into an error and hand it to every rank (for example with
/// [`root_decides`]), so that ranks out of step all fail instead of hanging.
pub fn requests_agree<R>(ctx: &dyn Context, request: &R) -> Option<Vec<(usize, Option<R>)>>
where
    R: Serialize + DeserializeOwned + PartialEq,
{
    // A request that does not encode travels as `None`: its ranks are unreadable on the root.
    let mine: Groups = vec![(
        serde_json::to_string(request).ok(),
        vec![[ctx.rank(), ctx.rank()]],
    )];
    // Nothing readable reached the root (only a context that garbles bytes does that): no
    // group, so every rank counts as unreadable below.
    let groups = reduce_outcomes(ctx, mine, merge_groups)?.unwrap_or_else(|_| Vec::new());
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for (json, ranges) in &groups {
        seen = crate::union_ranges(&seen, ranges);
        let json = json.as_deref();
        match json.map(serde_json::from_str::<R>) {
            Some(Ok(theirs)) if &theirs == request => {}
            Some(Ok(_)) => out.extend(
                crate::ranks_of(ranges)
                    .into_iter()
                    .map(|rank| (rank, json.and_then(|j| serde_json::from_str(j).ok()))),
            ),
            _ => out.extend(crate::ranks_of(ranges).into_iter().map(|rank| (rank, None))),
        }
    }
    // Ranks whose part was lost on the way (bytes that did not decode): unreadable.
    let mut next = 0;
    for &[a, b] in seen.iter().chain([[ctx.size(), ctx.size()]].iter()) {
        out.extend((next..a.min(ctx.size())).map(|rank| (rank, None)));
        next = next.max(b.saturating_add(1));
    }
    out.sort_by_key(|(rank, _)| *rank);
    Some(out)
}

/// Distinct requests (their JSON text, `None` for one that did not encode) and the ranks that
/// made each.
type Groups = Vec<(Option<String>, Vec<[usize; 2]>)>;

/// The merge of [`requests_agree`]: the groups of both sides, equal requests united. A side
/// that does not decode adds no group (its ranks count as unreadable on the root).
fn merge_groups(
    lower: Result<Groups, CollectiveError>,
    higher: Result<Groups, CollectiveError>,
) -> Result<Groups, CollectiveError> {
    let mut groups = lower.unwrap_or_else(|_| Vec::new());
    for (json, ranges) in higher.unwrap_or_else(|_| Vec::new()) {
        match groups.iter_mut().find(|(j, _)| *j == json) {
            Some((_, mine)) => *mine = crate::union_ranges(mine, &ranges),
            None => groups.push((json, ranges)),
        }
    }
    Ok(groups)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_error::TestError;
    use crate::{Singleton, on_thread_ranks};
    use std::sync::Mutex;

    #[test]
    fn the_root_decides_for_everyone() {
        let runs = Mutex::new(0);
        let out = on_thread_ranks(4, |ctx| {
            root_decides::<String, TestError>(ctx, "testing", || {
                *runs.lock().unwrap() += 1;
                Ok(format!("from rank {}", ctx.rank()))
            })
        });
        assert_eq!(*runs.lock().unwrap(), 1, "only the root runs the operation");
        assert!(
            out.iter().all(|o| o.as_ref().unwrap() == "from rank 0"),
            "{out:?}"
        );

        let out = on_thread_ranks(3, |ctx| {
            root_decides::<u32, TestError>(ctx, "testing", || Err(TestError::Own("no".into())))
        });
        assert!(
            out.iter().all(|o| *o == Err(TestError::Own("no".into()))),
            "{out:?}"
        );
    }

    #[test]
    fn a_panicking_root_is_the_same_error_everywhere() {
        let out = on_thread_ranks(3, |ctx| {
            root_decides::<u32, TestError>(ctx, "installing artifact `era5`", || {
                panic!("disk on fire {}", 42)
            })
        });
        for o in &out {
            let TestError::Collective(e) = o.clone().unwrap_err() else {
                panic!("{o:?}")
            };
            let s = e.to_string();
            assert!(
                s.contains("panicked while installing artifact `era5`: disk on fire 42"),
                "{s}"
            );
        }
        let single =
            root_decides::<u32, TestError>(&Singleton, "x", || std::panic::panic_any(7_u8));
        assert!(format!("{single:?}").contains("non-string panic payload"));
    }

    #[test]
    fn all_succeed_only_when_every_rank_did() {
        let out = on_thread_ranks(4, |ctx| {
            let own: Result<usize, TestError> = Ok(ctx.rank());
            all_succeed(ctx, own, |_, e| e)
        });
        assert_eq!(out, vec![Ok(0), Ok(1), Ok(2), Ok(3)]);

        let out = on_thread_ranks(4, |ctx| {
            let own: Result<usize, TestError> = if ctx.rank() >= 2 {
                Err(TestError::Own(format!("rank {} broke", ctx.rank())))
            } else {
                Ok(ctx.rank())
            };
            all_succeed(ctx, own, |r, e| {
                TestError::Own(format!("on rank {r}: {e:?}"))
            })
        });
        for o in out {
            let TestError::Own(s) = o.unwrap_err() else {
                panic!()
            };
            assert!(
                s.starts_with("on rank 2:") && s.contains("rank 2 broke"),
                "{s}"
            );
        }
    }

    #[test]
    fn requests_are_compared_on_the_root() {
        let out = on_thread_ranks(3, |ctx| {
            let asked = if ctx.rank() == 2 { "b" } else { "a" };
            requests_agree(ctx, &asked.to_owned())
        });
        assert_eq!(out[0], Some(vec![(2, Some("b".to_owned()))]));
        assert_eq!(out[1], None);
        assert_eq!(requests_agree(&Singleton, &1_u8), Some(vec![]));

        // Many ranks, two of them out of step: the root hears ceil(log2 P) messages whose
        // size does not depend on P.
        for size in [8, 32] {
            let out = on_thread_ranks(size, |ctx| {
                let before = crate::traffic::this_thread();
                let asked = match ctx.rank() {
                    3 => "b",
                    5 => "c",
                    _ => "a",
                };
                let verdict = requests_agree(ctx, &asked.to_owned());
                (verdict, crate::traffic::this_thread().since(&before))
            });
            let (verdict, root) = &out[0];
            assert_eq!(
                verdict.as_deref(),
                Some(&[(3, Some("b".to_owned())), (5, Some("c".to_owned()))][..])
            );
            assert_eq!(root.received_messages, size.trailing_zeros() as u64);
            assert!(root.received_bytes < 100 * root.received_messages, "{root}");
        }
    }

    /// A context whose rank 3 sends garbage in reduces (as a buggy user `Context` might).
    struct Garbling<'a>(&'a dyn Context);

    impl Context for Garbling<'_> {
        fn rank(&self) -> usize {
            self.0.rank()
        }
        fn size(&self) -> usize {
            self.0.size()
        }
        fn barrier(&self) {
            self.0.barrier()
        }
        fn broadcast_from_root(&self, data: Option<Vec<u8>>) -> Vec<u8> {
            self.0.broadcast_from_root(data)
        }
        fn gather_to_root(&self, data: Vec<u8>) -> Option<Vec<Vec<u8>>> {
            self.0.gather_to_root(data)
        }
        fn reduce_to_root(
            &self,
            data: Vec<u8>,
            merge: &dyn Fn(Vec<u8>, Vec<u8>) -> Vec<u8>,
        ) -> Option<Vec<u8>> {
            let data = if self.rank() == 3 {
                b"\x00".to_vec()
            } else {
                data
            };
            self.0.reduce_to_root(data, merge)
        }
        fn split_by_node(&self) -> Box<dyn Context> {
            self.0.split_by_node()
        }
        fn split(&self, color: Option<u32>, key: u32) -> Option<Box<dyn Context>> {
            self.0.split(color, key)
        }
    }

    /// A request the root cannot read, or a part lost on the way, is a mismatch of its
    /// ranks (`None`), never a silent agreement.
    #[test]
    fn unreadable_requests_are_mismatches() {
        let out = on_thread_ranks(4, |ctx| {
            if ctx.rank() == 1 {
                requests_agree(ctx, &5_u32).map(|_| Vec::new())
            } else {
                requests_agree(&Garbling(ctx), &"a".to_owned())
            }
        });
        assert_eq!(out[0], Some(vec![(1, None), (3, None)]));
    }

    #[test]
    fn all_succeed_carries_only_the_first_failure() {
        let out = on_thread_ranks(32, |ctx| {
            let own: Result<(), TestError> = if ctx.rank() % 7 == 6 {
                Err(TestError::Own(format!("rank {} broke", ctx.rank())))
            } else {
                Ok(())
            };
            let before = crate::traffic::this_thread();
            let verdict = all_succeed(ctx, own, |r, e| TestError::Own(format!("{r}: {e:?}")));
            (verdict, crate::traffic::this_thread().since(&before))
        });
        for (verdict, _) in &out {
            assert_eq!(
                verdict,
                &Err(TestError::Own("6: Own(\"rank 6 broke\")".into()))
            );
        }
        assert_eq!(out[0].1.received_messages, 5);
        assert!(out[0].1.received_bytes < 5 * 64, "{}", out[0].1);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for bytes in [&b""[..], b"X", b"O{not json"] {
            let e = decode::<u32, TestError>(bytes, 3).unwrap_err();
            let TestError::Collective(CollectiveError::Undecodable { rank: 3, .. }) = e else {
                panic!("{e:?}")
            };
        }
    }
}
