//! Choosing the leader: priorities, and handing leadership to another
//! candidate on demand.
//!
//! Every store picks whoever comes first. Two things let a deployment say
//! more, on every store and with no server of its own:
//!
//! * **Priorities.** A candidate publishes a priority
//!   ([`CandidateBuilder::priority`](crate::CandidateBuilder::priority),
//!   the metadata key [`PRIORITY_KEY`]) where the others can read it: in
//!   its place in a queue store's line, or in its roster entry on a race
//!   store ([`LeaseStore::enroll`]). A leader reads the candidates at each
//!   renewal; one of strictly higher priority that it has seen there for
//!   the settle time
//!   ([`CandidateBuilder::settle`](crate::CandidateBuilder::settle)) is
//!   handed the lease: the leader's term ends with
//!   [`EndReason::HandedOver`](crate::EndReason::HandedOver), its work
//!   stops as on a graceful stop, and then [`LeaseStore::release_to`]
//!   passes the lease to that candidate alone, not to whoever races first.
//!   Equal priorities never preempt each other. A candidate that does not
//!   publish a priority (one that is not regent's: `etcdctl elect`, a
//!   Curator latch) is never preferred; a regent candidate without one
//!   counts as priority 0.
//! * **On demand.** [`request`] (the CLI's `regent handover`) asks the
//!   leader of the moment to hand over, to a named candidate or to the
//!   next; [`Leadership::hand_over`](crate::Leadership::hand_over) is the
//!   same from the leader's own code. The request is a lease of its own, on
//!   the election's request record ([`request_election`]), carrying the
//!   token of the term it asks to end: the leader reads it at each
//!   renewal, so it answers within its renew interval, and acts on it only
//!   while that term is its own. The term that begins from a request is
//!   not preempted by priorities: an operator's choice stands until that
//!   leader's term ends.
//!
//! A candidate takes part in both once it has a priority, or when built
//! with [`hand_overs(true)`](crate::CandidateBuilder::hand_overs) (the
//! CLI's `regent run` always does); otherwise it neither enrolls nor
//! looks, and costs the store nothing for them: a process leading many
//! elections adds no read per election.
//!
//! # Safety
//!
//! A hand-over is a graceful stop followed by a release that names a
//! successor: the successor's acquire is an ordinary acquire, so the store
//! still grants one lease at a time and a greater token (contract items 1
//! and 2). A lost or stale request changes nothing (it names a term that
//! is over); a successor that does not take the lease in time leaves it to
//! anyone once the reservation's window has passed.

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::time::{Instant, sleep_until, timeout_at};

use crate::error::StoreError;
use crate::store::{Acquire, AcquireRequest, LeaseStore};
use crate::types::{Candidacy, ElectionName, FencingToken, HolderId, LeaderInfo, Metadata};

pub use crate::types::PRIORITY_KEY;

/// The request record's key naming the candidate asked for
/// (absent: the next).
pub const REQUEST_TO_KEY: &str = "regent.handover.to";

/// The request record's key holding the token of the term asked to end.
pub const REQUEST_FROM_KEY: &str = "regent.handover.from";

/// The key a leader whose term began from a request publishes, with the
/// token of the term that request asked to end: the requester's answer.
pub const ANSWERED_KEY: &str = "regent.handover.answered";

/// The key a leader publishes as it hands its term over: why
/// (`preferred` or `requested`), a space, and the successor — for
/// watchers (`regent watch`) to say why the lead moves.
pub const LEAVING_KEY: &str = "regent.handover.leaving";

/// The key a leader publishes when it cannot act on a request: the token
/// of its term, the requester's id and why, separated by spaces.
pub const REFUSED_KEY: &str = "regent.handover.refused";

/// The priority `metadata` publishes under [`PRIORITY_KEY`], if it is a
/// number.
pub fn priority_of(metadata: &Metadata) -> Option<i32> {
    metadata.get(PRIORITY_KEY)?.trim().parse().ok()
}

/// The record on which hand-over requests for `election` are made: a
/// lease of its own on the same store (`NAME~handover`), so that a request
/// needs nothing of a store beyond the contract and at most one request
/// stands at a time. The `~` keeps it apart from every name
/// [`ElectionName::new`] accepts.
pub fn request_election(election: &ElectionName) -> ElectionName {
    ElectionName::derived(election, "~handover")
}

/// Why a leader handed its term over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HandOverReason {
    /// A candidate of higher priority was present for the settle time.
    Preferred,
    /// Someone asked ([`request`], [`Leadership::hand_over`](crate::Leadership::hand_over)).
    Requested,
}

impl HandOverReason {
    /// `preferred` or `requested`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Preferred => "preferred",
            Self::Requested => "requested",
        }
    }
}

impl fmt::Display for HandOverReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Preferred => "a candidate of higher priority",
            Self::Requested => "requested",
        })
    }
}

/// A request as read from the request record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Request {
    /// The token of the term asked to end.
    pub(crate) from: FencingToken,
    /// The candidate asked for; `None`: the next.
    pub(crate) to: Option<HolderId>,
}

impl Request {
    pub(crate) fn parse(info: &LeaderInfo) -> Option<Self> {
        let from = info.metadata.get(REQUEST_FROM_KEY)?.parse().ok()?;
        let to = match info.metadata.get(REQUEST_TO_KEY) {
            Some(to) => Some(HolderId::new(to).ok()?),
            None => None,
        };
        Some(Self {
            from: FencingToken::new(from),
            to,
        })
    }
}

/// The candidate to hand over to on request: `to` if it stands and is not
/// the leader, else the next — the one of highest priority, the first
/// listed among equals (a queue store's line order).
pub(crate) fn successor_for(
    candidates: &[Candidacy],
    leader: &HolderId,
    to: Option<&HolderId>,
) -> Result<HolderId, String> {
    let others = || candidates.iter().filter(|c| c.holder != *leader);
    match to {
        Some(to) if to == leader => Err(format!("'{to}' leads already")),
        Some(to) => others()
            .find(|c| c.holder == *to)
            .map(|c| c.holder.clone())
            .ok_or_else(|| format!("'{to}' is not a candidate")),
        None => {
            let mut best: Option<&Candidacy> = None;
            for c in others() {
                let p = c.priority().unwrap_or(0);
                if best.is_none_or(|b| p > b.priority().unwrap_or(0)) {
                    best = Some(c);
                }
            }
            best.map(|c| c.holder.clone())
                .ok_or_else(|| "no other candidate stands".to_owned())
        }
    }
}

/// What a leader remembers between its looks at the candidates: since
/// when it has seen each candidate of higher priority.
#[derive(Debug, Default)]
pub(crate) struct Preference {
    seen_since: HashMap<HolderId, Instant>,
}

impl Preference {
    /// Records the candidates listed `now` and names the one to hand over
    /// to, if any: of the highest priority present, if that is strictly
    /// above `mine`, seen at every look for at least `settle`; the longest
    /// seen among equals. Only candidates that publish a priority count.
    /// While the highest present has not settled, nobody lower is chosen:
    /// one hand-over, not one per step up.
    pub(crate) fn look(
        &mut self,
        candidates: &[Candidacy],
        me: &HolderId,
        mine: i32,
        settle: Duration,
        now: Instant,
    ) -> Option<HolderId> {
        let above: HashMap<&HolderId, i32> = candidates
            .iter()
            .filter(|c| c.holder != *me)
            .filter_map(|c| Some((&c.holder, c.priority()?)))
            .filter(|(_, p)| *p > mine)
            .collect();
        self.seen_since.retain(|h, _| above.contains_key(h));
        for h in above.keys() {
            self.seen_since.entry((*h).clone()).or_insert(now);
        }
        let top = above.values().copied().max()?;
        let mut best: Option<(&HolderId, i32, Instant)> = None;
        for (h, p) in above.iter().filter(|(_, p)| **p == top) {
            let since = self.seen_since[*h];
            if now.saturating_duration_since(since) < settle {
                continue;
            }
            let better = match best {
                None => true,
                Some((bh, bp, bs)) => {
                    (*p, std::cmp::Reverse(since), std::cmp::Reverse(*h))
                        > (bp, std::cmp::Reverse(bs), std::cmp::Reverse(bh))
                }
            };
            if better {
                best = Some((h, *p, since));
            }
        }
        best.map(|(h, _, _)| h.clone())
    }
}

/// A request to hand over the leadership of one election ([`request`]).
#[derive(Clone, Debug)]
pub struct HandOverRequest {
    /// The election.
    pub election: ElectionName,
    /// The candidate asked for; `None`: the next (the highest priority).
    pub to: Option<HolderId>,
    /// Who asks (it holds the request record while it waits).
    pub requester: HolderId,
    /// The ttl of the request record: it lapses this long after a
    /// requester that died last renewed it. Must be one the store honours.
    pub ttl: Duration,
    /// How long to wait for the new term: the leader answers at its next
    /// renewal, so at least its renew interval and the hand-over itself
    /// (its work's graceful stop).
    pub timeout: Duration,
}

/// The outcome of a request that was carried out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HandedOver {
    /// The leader asked, with the token of the term that ended.
    pub from: LeaderInfo,
    /// The new leader, with its term's token.
    pub to: LeaderInfo,
    /// Whether the new leader said it saw the request (and so its term
    /// will not be preempted by priorities).
    pub answered: bool,
}

/// Why a request was not carried out. Nothing changed unless said.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HandOverError {
    /// Nobody leads the election.
    #[error("election '{0}' has no leader to hand over from")]
    NoLeader(ElectionName),
    /// The candidate asked for does not stand, or nobody else does.
    #[error("cannot hand over election '{election}': {why} (candidates: {listed})")]
    NoSuchCandidate {
        /// The election.
        election: ElectionName,
        /// What is wrong.
        why: String,
        /// The candidates the store lists.
        listed: String,
    },
    /// Another request is being carried out.
    #[error("another hand-over of election '{election}' is in progress (asked by '{by}')")]
    Busy {
        /// The election.
        election: ElectionName,
        /// Who asked.
        by: String,
    },
    /// The leader did not act on the request in time; the request was
    /// withdrawn (a leader that acts on it still does so safely).
    #[error(
        "leader '{leader}' of election '{election}' did not answer within {waited:?} (a leader answers at its next renewal if it takes part in hand-overs: regent run does; a library candidate does with a priority or hand_overs(true))"
    )]
    NotAnswered {
        /// The election.
        election: ElectionName,
        /// The leader asked.
        leader: HolderId,
        /// How long the request stood.
        waited: Duration,
    },
    /// The leader said it cannot.
    #[error("leader '{leader}' of election '{election}' refused: {why}")]
    Refused {
        /// The election.
        election: ElectionName,
        /// The leader asked.
        leader: HolderId,
        /// Its reason.
        why: String,
    },
    /// A new term began, but not the one asked for: the lease went to
    /// someone else (the candidate asked for did not take it in time, or
    /// the leader's term ended for another reason).
    #[error("election '{election}' went to '{to}' (token {token}), not to '{asked}'")]
    WentElsewhere {
        /// The election.
        election: ElectionName,
        /// The candidate asked for.
        asked: HolderId,
        /// Who leads now.
        to: HolderId,
        /// Its token.
        token: FencingToken,
    },
    /// This kind of term cannot be handed over (a peer group's).
    #[error("this kind of term cannot be handed over")]
    Unsupported,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Asks the leader of `req.election` to hand over, and waits until the new
/// term has begun ([`HandOverRequest::timeout`]).
///
/// The request is a lease on the election's request record
/// ([`request_election`]) naming the term it asks to end; it is given
/// back when this returns, and lapses by its ttl if the requester dies.
///
/// ```
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use regent_core::{ElectionName, HolderId, memory::MemoryStore};
/// use regent_core::handover::{HandOverRequest, request};
///
/// let store = MemoryStore::race();
/// let req = HandOverRequest {
///     election: ElectionName::new("jobs")?,
///     to: Some(HolderId::new("host-b")?),
///     requester: HolderId::new("operator")?,
///     ttl: Duration::from_secs(15),
///     timeout: Duration::from_secs(30),
/// };
/// // Nobody leads "jobs" on this fresh store.
/// assert!(request(&store, &req).await.is_err());
/// # Ok(()) }
/// ```
///
/// # Errors
///
/// [`HandOverError`], naming what stands in the way.
pub async fn request<S: LeaseStore>(
    store: &S,
    req: &HandOverRequest,
) -> Result<HandedOver, HandOverError> {
    let election = &req.election;
    let started = Instant::now();
    let deadline = started + req.timeout;
    let Some(leader) = store.current_leader(election).await? else {
        return Err(HandOverError::NoLeader(election.clone()));
    };
    if let Some(list) = store.candidates(election).await? {
        let listed = list
            .iter()
            .map(|c| match c.priority() {
                Some(p) => format!("{} (priority {p})", c.holder),
                None => c.holder.to_string(),
            })
            .collect::<Vec<_>>()
            .join(", ");
        if let Err(why) = successor_for(&list, &leader.holder, req.to.as_ref()) {
            return Err(HandOverError::NoSuchCandidate {
                election: election.clone(),
                why,
                listed: if listed.is_empty() {
                    "none".into()
                } else {
                    listed
                },
            });
        }
    }
    let mut metadata = Metadata::new()
        .with(REQUEST_FROM_KEY, leader.token.get().to_string())
        .expect("a token is short");
    if let Some(to) = &req.to {
        metadata = metadata
            .with(REQUEST_TO_KEY, to.as_str())
            .expect("a holder id is short");
    }
    let asked = AcquireRequest {
        election: request_election(election),
        holder: req.requester.clone(),
        ttl: req.ttl,
        metadata,
    };
    // Watch before asking: the answer can come at once.
    let mut watch = store.watch(election).await?;
    let lease = match store.try_acquire(&asked, None).await? {
        Acquire::Won(lease) => lease,
        Acquire::Held { leader: by, queued } => {
            if let Some(place) = queued {
                let _ = store.release(&place).await;
            }
            return Err(HandOverError::Busy {
                election: election.clone(),
                by: by.map_or_else(|| "someone".to_owned(), |l| l.holder.to_string()),
            });
        }
    };
    let outcome = wait_for_answer(store, req, &leader, &mut watch, &lease, deadline).await;
    let _ = store.release(&lease).await;
    outcome
}

async fn wait_for_answer<S: LeaseStore>(
    store: &S,
    req: &HandOverRequest,
    leader: &LeaderInfo,
    watch: &mut crate::store::LeaderStream,
    lease: &crate::types::Lease,
    deadline: Instant,
) -> Result<HandedOver, HandOverError> {
    let election = &req.election;
    let started = Instant::now();
    let mut next_renew = started + req.ttl / 3;
    let mut new_term: Option<LeaderInfo> = None;
    let refusal_prefix = format!("{} {} ", leader.token.get(), req.requester);
    loop {
        let item = tokio::select! {
            () = sleep_until(next_renew) => {
                // The request stands while we wait.
                let _ = timeout_at(deadline, store.renew(lease)).await;
                next_renew = Instant::now() + req.ttl / 3;
                continue;
            }
            item = timeout_at(deadline, watch.next()) => item,
        };
        let seen = match item {
            Err(_) => {
                return match new_term {
                    Some(to) => Ok(HandedOver {
                        from: leader.clone(),
                        to,
                        answered: false,
                    }),
                    None => Err(HandOverError::NotAnswered {
                        election: election.clone(),
                        leader: leader.holder.clone(),
                        waited: started.elapsed(),
                    }),
                };
            }
            Ok(Some(Ok(seen))) => seen,
            Ok(Some(Err(_)) | None) => {
                // A broken watch: a new one, from now.
                *watch = store.watch(election).await?;
                continue;
            }
        };
        let Some(now) = seen else { continue };
        if now.token == leader.token {
            if let Some(why) = now
                .metadata
                .get(REFUSED_KEY)
                .and_then(|r| r.strip_prefix(&refusal_prefix))
            {
                return Err(HandOverError::Refused {
                    election: election.clone(),
                    leader: leader.holder.clone(),
                    why: why.to_owned(),
                });
            }
            continue;
        }
        if now.token < leader.token {
            continue;
        }
        if let Some(asked) = &req.to
            && now.holder != *asked
        {
            return Err(HandOverError::WentElsewhere {
                election: election.clone(),
                asked: asked.clone(),
                to: now.holder,
                token: now.token,
            });
        }
        let answered = now.metadata.get(ANSWERED_KEY) == Some(&leader.token.get().to_string());
        if answered {
            return Ok(HandedOver {
                from: leader.clone(),
                to: now,
                answered: true,
            });
        }
        // Begun; wait a little for the new leader to say it saw the
        // request, so that its term is not preempted.
        new_term = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(h: &str, p: Option<i32>) -> Candidacy {
        let m = match p {
            Some(p) => Metadata::new().with(PRIORITY_KEY, p.to_string()).unwrap(),
            None => Metadata::new(),
        };
        Candidacy::new(HolderId::new(h).unwrap(), m)
    }

    fn id(h: &str) -> HolderId {
        HolderId::new(h).unwrap()
    }

    #[test]
    fn the_next_is_the_highest_priority_first_listed_among_equals() {
        let list = [
            cand("a", Some(3)),
            cand("b", Some(1)),
            cand("c", Some(2)),
            cand("d", Some(2)),
        ];
        assert_eq!(successor_for(&list, &id("a"), None).unwrap(), id("c"));
        assert_eq!(successor_for(&list, &id("c"), None).unwrap(), id("a"));
        let foreign = [cand("a", Some(1)), cand("x", None)];
        assert_eq!(successor_for(&foreign, &id("a"), None).unwrap(), id("x"));
        assert!(successor_for(&[cand("a", Some(1))], &id("a"), None).is_err());
    }

    #[test]
    fn a_named_successor_must_stand_and_not_lead() {
        let list = [cand("a", Some(3)), cand("b", Some(1))];
        assert_eq!(
            successor_for(&list, &id("a"), Some(&id("b"))).unwrap(),
            id("b")
        );
        assert!(
            successor_for(&list, &id("a"), Some(&id("a")))
                .unwrap_err()
                .contains("leads already")
        );
        assert!(
            successor_for(&list, &id("a"), Some(&id("z")))
                .unwrap_err()
                .contains("not a candidate")
        );
    }

    #[tokio::test(start_paused = true)]
    async fn preference_waits_the_settle_time_and_never_prefers_equals() {
        let settle = Duration::from_secs(5);
        let mut p = Preference::default();
        let t0 = Instant::now();
        let list = [
            cand("me", Some(2)),
            cand("eq", Some(2)),
            cand("up", Some(3)),
            cand("x", None),
        ];
        assert_eq!(p.look(&list, &id("me"), 2, settle, t0), None);
        assert_eq!(
            p.look(&list, &id("me"), 2, settle, t0 + Duration::from_secs(4)),
            None
        );
        assert_eq!(
            p.look(&list, &id("me"), 2, settle, t0 + settle),
            Some(id("up"))
        );
        // Gone at one look: the settle time starts again.
        let without = [cand("me", Some(2))];
        assert_eq!(
            p.look(&without, &id("me"), 2, settle, t0 + Duration::from_secs(6)),
            None
        );
        assert_eq!(
            p.look(&list, &id("me"), 2, settle, t0 + Duration::from_secs(7)),
            None
        );
        assert_eq!(
            p.look(&list, &id("me"), 2, settle, t0 + Duration::from_secs(12)),
            Some(id("up"))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn preference_picks_the_highest_then_the_longest_seen() {
        let settle = Duration::from_secs(1);
        let mut p = Preference::default();
        let t0 = Instant::now();
        p.look(&[cand("b", Some(5))], &id("me"), 0, settle, t0);
        let later = t0 + Duration::from_secs(1);
        let list = [cand("a", Some(5)), cand("b", Some(5)), cand("c", Some(4))];
        p.look(&list, &id("me"), 0, settle, later);
        assert_eq!(
            p.look(&list, &id("me"), 0, settle, later + settle),
            Some(id("b"))
        );
        // A higher one appears: nobody is chosen until it has settled.
        let t2 = later + settle;
        let higher = [cand("z", Some(9)), cand("b", Some(5))];
        assert_eq!(p.look(&higher, &id("me"), 0, settle, t2), None);
        assert_eq!(
            p.look(&higher, &id("me"), 0, settle, t2 + settle),
            Some(id("z"))
        );
        // It goes before settling: the lower one, settled, is chosen.
        let mut q = Preference::default();
        q.look(&[cand("b", Some(5))], &id("me"), 0, settle, t0);
        q.look(&higher, &id("me"), 0, settle, t0 + settle / 2);
        assert_eq!(
            q.look(&[cand("b", Some(5))], &id("me"), 0, settle, t0 + settle),
            Some(id("b"))
        );
    }

    #[test]
    fn the_request_record_is_apart_from_every_valid_name() {
        let e = ElectionName::new("jobs").unwrap();
        let r = request_election(&e);
        assert_eq!(r.as_str(), "jobs~handover");
        assert!(ElectionName::new(r.as_str()).is_err());
    }
}
