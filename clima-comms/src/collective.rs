//! The collective steps shared by every user of a [`Context`], with one wire framing:
//! `'O'` + JSON of the value, or `'E'` + the error's own wire bytes ([`WireError`]).
//!
//! ```text
//!  root_decides    rank 0: run op (panics caught)   --bcast-->  every rank: same Ok / same Err
//!  all_succeed     every rank: own outcome  --gather-->  rank 0: first failure
//!                                                     --bcast-->  every rank: Ok only if all Ok
//!  requests_agree  every rank: request  --gather-->  rank 0: who asked for something else
//! ```

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

const OK_TAG: u8 = b'O';
const ERR_TAG: u8 = b'E';

fn encode<T: Serialize, E: WireError + From<CollectiveError>>(outcome: &Result<T, E>) -> Vec<u8> {
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

fn decode<T: DeserializeOwned, E: WireError + From<CollectiveError>>(
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
    let mine = match &own {
        Ok(_) => encode::<(), E>(&Ok(())),
        Err(e) => [&[ERR_TAG][..], &e.to_wire()].concat(),
    };
    let verdict = ctx.gather_to_root(mine).map(|all| {
        let failed = all
            .iter()
            .enumerate()
            .find_map(|(rank, bytes)| decode::<(), E>(bytes, rank).err().map(|e| (rank, e)));
        match failed {
            None => encode::<(), E>(&Ok(())),
            Some((rank, e)) => encode::<(), E>(&Err(on_rank(rank, e))),
        }
    });
    match decode::<(), E>(&ctx.broadcast_from_root(verdict), 0) {
        Ok(()) => own,
        Err(e) => Err(e),
    }
}

/// **Collective.** Gathers every rank's `request` to the root, which compares them with its
/// own. On the root: `Some(mismatches)`, each the rank and what it asked for (`None` if its
/// request could not be read), empty when all agree. On the other ranks: `None`.
///
/// Callers turn a non-empty list into an error and hand it to every rank (for example with
/// [`root_decides`]), so that ranks out of step all fail instead of hanging.
pub fn requests_agree<R>(ctx: &dyn Context, request: &R) -> Option<Vec<(usize, Option<R>)>>
where
    R: Serialize + DeserializeOwned + PartialEq,
{
    let bytes = serde_json::to_vec(request).unwrap_or_default();
    let all = ctx.gather_to_root(bytes)?;
    Some(
        all.iter()
            .enumerate()
            .filter_map(|(rank, bytes)| match serde_json::from_slice::<R>(bytes) {
                Ok(theirs) if &theirs == request => None,
                Ok(theirs) => Some((rank, Some(theirs))),
                Err(_) => Some((rank, None)),
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Singleton, on_thread_ranks};
    use std::sync::Mutex;

    #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
    enum TestError {
        Own(String),
        Collective(CollectiveError),
    }
    impl From<CollectiveError> for TestError {
        fn from(e: CollectiveError) -> Self {
            TestError::Collective(e)
        }
    }
    impl WireError for TestError {
        fn to_wire(&self) -> Vec<u8> {
            serde_json::to_vec(self).unwrap()
        }
        fn from_wire(bytes: &[u8]) -> Self {
            serde_json::from_slice(bytes).unwrap_or_else(|e| {
                TestError::Collective(CollectiveError::Undecodable {
                    rank: 0,
                    why: e.to_string(),
                })
            })
        }
    }

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
