//! Terms won unanswered: what lets a race store's acquire take over a
//! term that this very store won for its caller by a request whose answer
//! never came (a call given up on, a dropped future), and nothing else.
//!
//! Each store (its clones share it) draws an
//! [`incarnation`](super::incarnation) when it opens and writes it into
//! every term it wins (with the token: [`won_by`]). Its [`Claims`]
//! remember, per election and holder, the token of the term last handed to
//! the caller, set in the poll that returns `Won`: a caller that gave up
//! before that poll left no mark. An acquire may take over a live record
//! only if it is the caller's (same holder), this store's (its mark), not
//! the term last handed out, and no other acquire of that holder through
//! this store is in flight, whose answer may be on its way ([`Reclaim`]).
//! The conformance suite's `retried_acquire_after_a_lost_answer_wins`
//! checks a store that does this.
//!
//! ```
//! use std::sync::Arc;
//! use regent_core::store::{Claims, Reclaim};
//! use regent_core::{ElectionName, FencingToken, HolderId};
//!
//! let claims = Arc::new(Claims::default());
//! let (election, holder) = (ElectionName::new("jobs")?, HolderId::new("a")?);
//! // An acquire begins; what it may take over, read when it runs:
//! let attempt = claims.begin(&election, &holder);
//! assert_eq!(attempt.probe().reclaim(), Reclaim { handed_out: None, alone: true });
//! // It won token 7, handed to the caller:
//! attempt.handed_out(FencingToken::new(7));
//! // The next acquire may not take term 7 over: its holder leads with it.
//! let next = claims.begin(&election, &holder);
//! assert_eq!(next.probe().reclaim().handed_out, Some(FencingToken::new(7)));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::types::{ElectionName, FencingToken, HolderId};

/// The mark a store writes into a term it wins with `token`: its
/// [`incarnation`](super::incarnation) and the token. The token is in it
/// for a store whose older builds rewrite a record's other fields and
/// leave this one as it was: a record such a build wrote over one of ours
/// then names a token it no longer holds, and matches no term of ours.
///
/// ```
/// assert_eq!(regent_core::store::won_by("0a1b", 7), "0a1b/7");
/// ```
pub fn won_by(incarnation: &str, token: impl std::fmt::Display) -> String {
    format!("{incarnation}/{token}")
}

type Key = (ElectionName, HolderId);

/// Per election and holder, what this store knows of its caller's terms.
#[derive(Debug, Default)]
struct Claim {
    /// The token of the term last handed to the caller: never taken over,
    /// its holder may be leading with it.
    handed_out: Option<FencingToken>,
    /// Acquires of this election and holder through this store whose
    /// caller still waits for them.
    in_flight: usize,
}

/// The store's claims, shared by its clones and by the requests on its
/// connection thread.
#[derive(Debug, Default)]
pub struct Claims {
    map: Mutex<HashMap<Key, Claim>>,
}

impl Claims {
    fn lock(&self) -> MutexGuard<'_, HashMap<Key, Claim>> {
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// An acquire of `holder` in `election` begins: it is in flight until
    /// the [`Attempt`] is dropped or hands a term out.
    pub fn begin(self: &Arc<Self>, election: &ElectionName, holder: &HolderId) -> Attempt {
        let key = (election.clone(), holder.clone());
        self.lock().entry(key.clone()).or_default().in_flight += 1;
        Attempt {
            probe: Probe {
                claims: Arc::clone(self),
                key,
            },
            counted: true,
        }
    }
}

/// One acquire in flight. Dropped unanswered (the caller gave up), it
/// leaves the claims as they were, but for its count.
#[derive(Debug)]
pub struct Attempt {
    probe: Probe,
    /// Whether it still counts among the acquires in flight.
    counted: bool,
}

impl Attempt {
    /// What the connection thread consults, when the request runs.
    pub fn probe(&self) -> Probe {
        self.probe.clone()
    }

    /// The caller is handed the term of `token`: in the poll that returns
    /// it, so that one who gave up before holds no record of it here
    /// either. Under one lock with the end of the attempt: no other
    /// acquire finds this one ended and its term not yet handed out.
    pub fn handed_out(mut self, token: FencingToken) {
        let mut map = self.probe.claims.lock();
        let claim = map.entry(self.probe.key.clone()).or_default();
        claim.handed_out = Some(token);
        claim.in_flight = claim.in_flight.saturating_sub(1);
        self.counted = false;
    }
}

impl Drop for Attempt {
    fn drop(&mut self) {
        if !self.counted {
            return;
        }
        let mut map = self.probe.claims.lock();
        if let Some(claim) = map.get_mut(&self.probe.key) {
            claim.in_flight = claim.in_flight.saturating_sub(1);
            if claim.in_flight == 0 && claim.handed_out.is_none() {
                map.remove(&self.probe.key);
            }
        }
    }
}

/// An acquire's view of the claims, read on the connection thread.
#[derive(Clone, Debug)]
pub struct Probe {
    claims: Arc<Claims>,
    key: Key,
}

impl Probe {
    /// What the acquire may take over, now.
    pub fn reclaim(&self) -> Reclaim {
        let map = self.claims.lock();
        let claim = map.get(&self.key);
        Reclaim {
            handed_out: claim.and_then(|c| c.handed_out),
            alone: claim.is_none_or(|c| c.in_flight <= 1),
        }
    }
}

/// Which live row of the caller's an acquire may take over: one this
/// store won (its `won_by`), with a token other than `handed_out`, and
/// only when the acquire is `alone`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reclaim {
    /// The token of the term last handed to the caller.
    pub handed_out: Option<FencingToken>,
    /// No other acquire of the same holder through this store is in
    /// flight: a term one of them won may yet be handed out.
    pub alone: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> (ElectionName, HolderId) {
        (
            ElectionName::new("e").expect("a name"),
            HolderId::new("a").expect("a holder id"),
        )
    }

    #[test]
    fn an_attempt_given_up_leaves_no_term_handed_out() {
        let claims = Arc::new(Claims::default());
        let (e, h) = key();
        let first = claims.begin(&e, &h);
        let second = claims.begin(&e, &h);
        // Two in flight: neither may take over what the other may win.
        assert!(!second.probe().reclaim().alone);
        drop(first);
        let probe = second.probe();
        assert_eq!(
            probe.reclaim(),
            Reclaim {
                handed_out: None,
                alone: true
            }
        );
        second.handed_out(FencingToken::new(7));
        assert_eq!(
            probe.reclaim(),
            Reclaim {
                handed_out: Some(FencingToken::new(7)),
                alone: true
            }
        );
        // The term handed out is remembered after the attempt ended.
        let third = claims.begin(&e, &h);
        assert_eq!(
            third.probe().reclaim().handed_out,
            Some(FencingToken::new(7))
        );
        drop(third);
        assert_eq!(claims.lock().len(), 1);
    }

    #[test]
    fn claims_of_attempts_that_won_nothing_are_forgotten() {
        let claims = Arc::new(Claims::default());
        let (e, h) = key();
        drop(claims.begin(&e, &h));
        assert!(claims.lock().is_empty());
    }
}
