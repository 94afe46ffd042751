//! One etcd lease for many elections, as Go's `concurrency.Session` is.
//!
//! A process that holds many elections on one [`EtcdStore`] puts their keys
//! on as few leases as it can: up to [`MAX_KEYS`] elections of one ttl share
//! one lease (one *session*). A renewal of any of them joins the session's
//! next *round*: one keep-alive of the lease, then one `LeaseTimeToLive`
//! with its keys, which says which of the waiting elections still have
//! their key. Rounds of one session are at least a tenth of the ttl apart,
//! and a round answers every renewal that was waiting when it started, so
//! renewals cost a session at most ten rounds (twenty requests) per ttl,
//! whatever the number of its elections and however often each renews.
//!
//! # Why the contract still holds
//!
//! * A renewal is answered only by a round whose keep-alive was sent after
//!   the renewal was called, so a `Renewed` lease lives a full ttl from the
//!   call, as the store contract asks.
//! * The key check comes after the keep-alive: a key the round saw was
//!   attached to a lease good for a ttl from the keep-alive.
//! * A shared lease would keep an election's key alive after its holder
//!   stopped renewing (a candidate dropped, a release that failed), as long
//!   as other elections renew. So the session keeps, per election, the
//!   time its key would have expired on a lease of its own (the last round,
//!   or acquire, that renewed it, plus the ttl), and deletes the key itself
//!   at that time, guarded by its lease and token. Until such a deletion
//!   succeeds, the session's rounds fail: a key is never kept alive beyond
//!   its time by somebody else's renewal. The key therefore goes at most
//!   one round trip after it would have on a lease of its own.
//! * Two candidates of one election need two keys, and etcd's recipe names
//!   a key after its lease (`NAME/<lease>`): they are never put on one
//!   session.
//! * When a session's last key goes (released, deleted), its lease is
//!   revoked in the background. A lease etcd no longer knows (revoked from
//!   outside, expired) ends the session: every renewal of its elections is
//!   [`Renewal::Lost`].
//!
//! A renewal from a [`Lease`](regent_core::Lease) this store did not place
//! (another process, a store connected afresh) is not in any session: it is
//! renewed on its own, as before (read of the key, then a keep-alive).

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use etcd_client::{Compare, CompareOp, LeaseTimeToLiveOptions, Txn, TxnOp};
use regent_core::{ElectionName, HolderId, Renewal, StoreError};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::record::{candidate_key, lease_hex};
use crate::store::EtcdStore;

/// The most elections one lease carries. `LeaseTimeToLive` lists all of a
/// lease's keys in one answer; a thousand keys of about 60 bytes each is
/// 60 KB, well below gRPC's 4 MiB limit.
pub(crate) const MAX_KEYS: usize = 1000;

/// Rounds of one session are at least `ttl / ROUNDS_PER_TTL` apart.
const ROUNDS_PER_TTL: u32 = 10;

/// The sessions of one [`EtcdStore`] and its clones.
#[derive(Default)]
pub(crate) struct Sessions {
    pool: Mutex<HashMap<i64, Session>>,
    /// Held while a lease is granted for a new session, so that elections
    /// starting together share the session rather than each granting one.
    pub(crate) granting: tokio::sync::Mutex<()>,
}

struct Session {
    ttl_secs: i64,
    ttl: Duration,
    entries: HashMap<ElectionName, Entry>,
    rounds: mpsc::UnboundedSender<Waiter>,
}

/// One election's key on a session.
#[derive(Clone, Debug)]
struct Entry {
    holder: HolderId,
    /// The key's create revision, once an acquire returned it.
    token: Option<i64>,
    /// When the key would expire on a lease of its own: the last keep-alive
    /// that renewed it for this election, plus the ttl.
    until: Instant,
}

/// A renewal waiting for the next round.
struct Waiter {
    election: ElectionName,
    token: i64,
    reply: oneshot::Sender<Result<Renewal, StoreError>>,
}

/// What [`Sessions::forget`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Forgot {
    /// The lease is not one of this store's sessions.
    Unknown,
    /// The session goes on with other keys.
    Kept,
    /// That was the session's last key: it is gone from the pool, and its
    /// lease is to be revoked.
    Emptied,
}

impl Sessions {
    fn pool(&self) -> MutexGuard<'_, HashMap<i64, Session>> {
        self.pool.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reserves a place for `election` on a session of `ttl_secs` with
    /// room for it, its key to be renewed from `sent`: the session's lease
    /// and granted ttl. `None` when no session has room.
    pub(crate) fn reserve(
        &self,
        election: &ElectionName,
        holder: &HolderId,
        ttl_secs: i64,
        sent: Instant,
    ) -> Option<(i64, Duration)> {
        let mut pool = self.pool();
        let (id, s) = pool.iter_mut().find(|(_, s)| {
            s.ttl_secs == ttl_secs
                && s.entries.len() < MAX_KEYS
                && !s.entries.contains_key(election)
                && !s.rounds.is_closed()
        })?;
        s.entries.insert(
            election.clone(),
            Entry {
                holder: holder.clone(),
                token: None,
                until: sent + s.ttl,
            },
        );
        Some((*id, s.ttl))
    }

    /// Starts a session on the lease `id` just granted, with a place for
    /// `election`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn open(
        &self,
        store: &EtcdStore,
        id: i64,
        ttl_secs: i64,
        ttl: Duration,
        election: &ElectionName,
        holder: &HolderId,
        sent: Instant,
    ) {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut entries = HashMap::new();
        entries.insert(
            election.clone(),
            Entry {
                holder: holder.clone(),
                token: None,
                until: sent + ttl,
            },
        );
        self.pool().insert(
            id,
            Session {
                ttl_secs,
                ttl,
                entries,
                rounds: tx,
            },
        );
        tokio::spawn(run(store.clone(), id, ttl, rx));
    }

    /// Notes that an acquire placed (or found) `election`'s key with
    /// `token` on session `id`, its lease kept alive from `sent`.
    pub(crate) fn placed(
        &self,
        id: i64,
        election: &ElectionName,
        holder: &HolderId,
        token: i64,
        sent: Instant,
    ) {
        let mut pool = self.pool();
        let Some(s) = pool.get_mut(&id) else {
            return;
        };
        let until = sent + s.ttl;
        let e = s.entries.entry(election.clone()).or_insert_with(|| Entry {
            holder: holder.clone(),
            token: None,
            until,
        });
        e.holder = holder.clone();
        e.token = Some(token);
        e.until = e.until.max(until);
    }

    /// Joins the next round of the session that carries this term's key.
    /// `None` when no session of this store carries it.
    pub(crate) fn join(
        &self,
        id: i64,
        election: &ElectionName,
        holder: &HolderId,
        token: i64,
    ) -> Option<oneshot::Receiver<Result<Renewal, StoreError>>> {
        let pool = self.pool();
        let s = pool.get(&id)?;
        let e = s.entries.get(election)?;
        if e.token != Some(token) || e.holder != *holder {
            return None;
        }
        let (reply, rx) = oneshot::channel();
        s.rounds
            .send(Waiter {
                election: election.clone(),
                token,
                reply,
            })
            .ok()?;
        Some(rx)
    }

    /// Forgets `election`'s key on session `id`: only the one with `token`
    /// and of `holder`, when given.
    pub(crate) fn forget(
        &self,
        id: i64,
        election: &ElectionName,
        token: Option<i64>,
        holder: Option<&HolderId>,
    ) -> Forgot {
        let mut pool = self.pool();
        let Some(s) = pool.get_mut(&id) else {
            return Forgot::Unknown;
        };
        if s.entries.get(election).is_some_and(|e| {
            (token.is_none() || e.token == token) && holder.is_none_or(|h| e.holder == *h)
        }) {
            s.entries.remove(election);
        }
        if s.entries.is_empty() {
            pool.remove(&id);
            Forgot::Emptied
        } else {
            Forgot::Kept
        }
    }

    /// Ends session `id`: its lease is gone.
    pub(crate) fn end(&self, id: i64) {
        self.pool().remove(&id);
    }

    /// The number of sessions and the keys they carry.
    #[cfg(test)]
    fn counts(&self) -> (usize, usize) {
        let pool = self.pool();
        (pool.len(), pool.values().map(|s| s.entries.len()).sum())
    }

    /// Keys past their time on session `id`, but for `waiting` elections.
    fn stale(
        &self,
        id: i64,
        now: Instant,
        waiting: &HashSet<ElectionName>,
    ) -> Vec<(ElectionName, Entry)> {
        let pool = self.pool();
        let Some(s) = pool.get(&id) else {
            return Vec::new();
        };
        s.entries
            .iter()
            .filter(|(e, x)| x.until <= now && !waiting.contains(*e))
            .map(|(e, x)| (e.clone(), x.clone()))
            .collect()
    }

    /// The earliest time a key of session `id` goes stale.
    fn next_stale(&self, id: i64) -> Option<Instant> {
        let pool = self.pool();
        pool.get(&id)?.entries.values().map(|e| e.until).min()
    }

    /// Forgets a stale key just deleted, if it is still as it was seen.
    fn forget_stale(&self, id: i64, election: &ElectionName, seen: &Entry) -> Forgot {
        {
            let pool = self.pool();
            let Some(s) = pool.get(&id) else {
                return Forgot::Unknown;
            };
            let same = s
                .entries
                .get(election)
                .is_some_and(|e| e.token == seen.token && e.until == seen.until);
            if !same {
                return Forgot::Kept;
            }
        }
        self.forget(id, election, seen.token, Some(&seen.holder))
    }

    /// A round renewed `election`'s key from `sent`.
    fn renewed(&self, id: i64, election: &ElectionName, token: i64, sent: Instant) {
        let mut pool = self.pool();
        let Some(s) = pool.get_mut(&id) else {
            return;
        };
        let until = sent + s.ttl;
        if let Some(e) = s.entries.get_mut(election)
            && e.token == Some(token)
        {
            e.until = e.until.max(until);
        }
    }
}

/// A session's rounds, until the session leaves the pool.
async fn run(store: EtcdStore, id: i64, ttl: Duration, mut rx: mpsc::UnboundedReceiver<Waiter>) {
    let spacing = ttl / ROUNDS_PER_TTL;
    let mut pending: Vec<Waiter> = Vec::new();
    let mut last_round: Option<Instant> = None;
    // After a stale key could not be deleted: not before this again.
    let mut retry_stale: Option<Instant> = None;
    loop {
        let round_at = (!pending.is_empty())
            .then(|| last_round.map_or_else(Instant::now, |l| l + spacing))
            .map(|at| retry_stale.map_or(at, |r| at.max(r)));
        // Look again at least every spacing: keys placed meanwhile are
        // never due sooner than that.
        let check_at = store
            .sessions
            .next_stale(id)
            .map(|at| at.min(Instant::now() + spacing))
            .map(|at| retry_stale.map_or(at, |r| at.max(r)));
        tokio::select! {
            w = rx.recv() => match w {
                Some(w) => {
                    pending.push(w);
                    while let Ok(w) = rx.try_recv() {
                        pending.push(w);
                    }
                }
                None => {
                    answer_all(pending, &Ok(Renewal::Lost));
                    return;
                }
            },
            () = sleep_until_some(round_at) => {
                while let Ok(w) = rx.try_recv() {
                    pending.push(w);
                }
                let waiters = std::mem::take(&mut pending);
                match round(&store, id, waiters).await {
                    Round::Done(sent) => {
                        last_round = Some(sent);
                        retry_stale = None;
                    }
                    Round::StaleKept => retry_stale = Some(Instant::now() + spacing.min(Duration::from_millis(200))),
                    Round::Failed(sent) => last_round = Some(sent),
                }
            }
            () = sleep_until_some(check_at) => {
                let waiting: HashSet<_> = pending.iter().map(|w| w.election.clone()).collect();
                if delete_stale(&store, id, &waiting).await.is_err() {
                    retry_stale = Some(Instant::now() + spacing.min(Duration::from_millis(200)));
                } else {
                    retry_stale = None;
                }
            }
        }
    }
}

/// Sleeps until `at`, or for ever.
pub(crate) async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn answer_all(waiters: Vec<Waiter>, answer: &Result<Renewal, StoreError>) {
    for w in waiters {
        let _ = w.reply.send(match answer {
            Ok(r) => Ok(*r),
            Err(e) => Err(copy(e)),
        });
    }
}

/// The same error for another waiter: its kind, its context, and the
/// messages of its causes.
fn copy(e: &StoreError) -> StoreError {
    let shown = e.to_string();
    let kind = format!("{}: ", e.kind());
    let context = shown.strip_prefix(&kind).unwrap_or(&shown);
    let copied = StoreError::new(e.kind(), context);
    let Some(source) = std::error::Error::source(e) else {
        return copied;
    };
    let mut causes = source.to_string();
    let mut cause = source.source();
    while let Some(c) = cause {
        causes.push_str(": ");
        causes.push_str(&c.to_string());
        cause = c.source();
    }
    copied.with_source(causes)
}

/// How a round went.
enum Round {
    /// The round's keep-alive was sent at this instant and every waiter
    /// has its answer.
    Done(Instant),
    /// A stale key could not be deleted: nothing was kept alive, and every
    /// waiter got the error.
    StaleKept,
    /// The keep-alive or the key check failed: every waiter got the error.
    Failed(Instant),
}

/// One round: stale keys deleted, one keep-alive, one look at the lease's
/// keys, and every waiter answered.
async fn round(store: &EtcdStore, id: i64, waiters: Vec<Waiter>) -> Round {
    let waiting: HashSet<_> = waiters.iter().map(|w| w.election.clone()).collect();
    if let Err(e) = delete_stale(store, id, &waiting).await {
        answer_all(waiters, &Err(e));
        return Round::StaleKept;
    }
    let Some(first) = waiters.first().map(|w| w.election.clone()) else {
        return Round::Done(Instant::now());
    };
    let sent = Instant::now();
    let alive = match store.keep_alive_once(&first, id, "renew").await {
        Ok(alive) => alive,
        Err(e) => {
            answer_all(waiters, &Err(e));
            return Round::Failed(sent);
        }
    };
    let keys = if alive {
        let mut client = store.client.clone();
        let options = LeaseTimeToLiveOptions::new().with_keys();
        let what = || format!("renew: list the keys of lease {}", lease_hex(id));
        match store
            .call(&first, what, client.lease_time_to_live(id, Some(options)))
            .await
        {
            // etcd says the remaining ttl in whole seconds, rounded down: 0
            // is a lease alive for less than a second; -1 is one gone.
            Ok(r) if r.ttl() >= 0 => Some(r.keys().iter().cloned().collect::<HashSet<_>>()),
            Ok(_) => None,
            Err(e) => {
                answer_all(waiters, &Err(e));
                return Round::Failed(sent);
            }
        }
    } else {
        None
    };
    let Some(keys) = keys else {
        tracing::debug!(lease = %lease_hex(id), "etcd: a session's lease is gone");
        store.sessions.end(id);
        answer_all(waiters, &Ok(Renewal::Lost));
        return Round::Done(sent);
    };
    for w in waiters {
        let key = candidate_key(&store.election_prefix(&w.election), id);
        let answer = if keys.contains(key.as_bytes()) {
            store.sessions.renewed(id, &w.election, w.token, sent);
            Renewal::Renewed
        } else {
            if store.sessions.forget(id, &w.election, Some(w.token), None) == Forgot::Emptied {
                store.revoke_in_background(id, &w.election);
            }
            Renewal::Lost
        };
        let _ = w.reply.send(Ok(answer));
    }
    Round::Done(sent)
}

/// Deletes the keys of session `id` that are past their time, but for
/// `waiting` elections, each guarded by our lease and its token.
async fn delete_stale(
    store: &EtcdStore,
    id: i64,
    waiting: &HashSet<ElectionName>,
) -> Result<(), StoreError> {
    for (election, entry) in store.sessions.stale(id, Instant::now(), waiting) {
        let key = candidate_key(&store.election_prefix(&election), id);
        let mut when = vec![Compare::lease(key.clone(), CompareOp::Equal, id)];
        if let Some(token) = entry.token {
            when.push(Compare::create_revision(
                key.clone(),
                CompareOp::Equal,
                token,
            ));
        }
        let txn = Txn::new().when(when).and_then([TxnOp::delete(key, None)]);
        let what = || {
            format!(
                "delete the key of election '{election}' by '{}', not renewed within its ttl",
                entry.holder
            )
        };
        let mut client = store.client.clone();
        store.call(&election, what, client.txn(txn)).await?;
        tracing::debug!(%election, holder = %entry.holder, "etcd: a key not renewed within its ttl deleted");
        if store.sessions.forget_stale(id, &election, &entry) == Forgot::Emptied {
            store.revoke_in_background(id, &election);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(name: &str) -> ElectionName {
        ElectionName::new(name).unwrap()
    }

    fn h(name: &str) -> HolderId {
        HolderId::new(name).unwrap()
    }

    fn session(s: &Sessions, id: i64, ttl: Duration) -> mpsc::UnboundedReceiver<Waiter> {
        let (tx, rx) = mpsc::unbounded_channel();
        s.pool().insert(
            id,
            Session {
                ttl_secs: i64::try_from(ttl.as_secs()).unwrap(),
                ttl,
                entries: HashMap::new(),
                rounds: tx,
            },
        );
        rx
    }

    #[tokio::test(start_paused = true)]
    async fn elections_share_a_session_but_one_election_never_twice() {
        let s = Sessions::default();
        let ttl = Duration::from_secs(2);
        let _rx = session(&s, 7, ttl);
        let now = Instant::now();
        assert_eq!(s.reserve(&e("a"), &h("x"), 2, now), Some((7, ttl)));
        assert_eq!(s.reserve(&e("b"), &h("x"), 2, now), Some((7, ttl)));
        // A second candidate of `a` needs a key of its own: another lease.
        assert_eq!(s.reserve(&e("a"), &h("y"), 2, now), None);
        // Another ttl, another session.
        assert_eq!(s.reserve(&e("c"), &h("x"), 3, now), None);
        assert_eq!(s.counts(), (1, 2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_session_takes_no_more_keys() {
        let s = Sessions::default();
        let _rx = session(&s, 7, Duration::from_secs(2));
        let now = Instant::now();
        for i in 0..MAX_KEYS {
            assert!(s.reserve(&e(&format!("e{i}")), &h("x"), 2, now).is_some());
        }
        assert_eq!(s.reserve(&e("one-more"), &h("x"), 2, now), None);
    }

    #[tokio::test(start_paused = true)]
    async fn only_the_term_placed_joins_a_round() {
        let s = Sessions::default();
        let mut rx = session(&s, 7, Duration::from_secs(2));
        let now = Instant::now();
        s.reserve(&e("a"), &h("x"), 2, now).unwrap();
        // Not placed yet: no token to match.
        assert!(s.join(7, &e("a"), &h("x"), 11).is_none());
        s.placed(7, &e("a"), &h("x"), 11, now);
        assert!(s.join(7, &e("a"), &h("x"), 12).is_none(), "another term");
        assert!(s.join(7, &e("a"), &h("y"), 11).is_none(), "another holder");
        assert!(s.join(8, &e("a"), &h("x"), 11).is_none(), "another lease");
        assert!(s.join(7, &e("a"), &h("x"), 11).is_some());
        assert_eq!(rx.try_recv().unwrap().token, 11);
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_is_stale_at_its_own_expiry_unless_its_renewal_waits() {
        let s = Sessions::default();
        let ttl = Duration::from_secs(2);
        let _rx = session(&s, 7, ttl);
        let t0 = Instant::now();
        s.reserve(&e("a"), &h("x"), 2, t0).unwrap();
        s.reserve(&e("b"), &h("x"), 2, t0).unwrap();
        s.placed(7, &e("a"), &h("x"), 1, t0);
        s.placed(7, &e("b"), &h("x"), 2, t0);
        let none = HashSet::new();
        assert!(s.stale(7, t0 + ttl / 2, &none).is_empty());
        // b is renewed by a round at 1 s; a is not.
        s.renewed(7, &e("b"), 2, t0 + Duration::from_secs(1));
        assert_eq!(s.next_stale(7), Some(t0 + ttl));
        let stale = s.stale(7, t0 + ttl, &none);
        assert_eq!(stale.len(), 1);
        assert_eq!(stale[0].0, e("a"));
        // A renewal of a waiting for the next round keeps it.
        let waiting: HashSet<_> = [e("a")].into();
        assert!(s.stale(7, t0 + ttl, &waiting).is_empty());
        // A renewal that refers to an older term changes nothing.
        s.renewed(7, &e("a"), 99, t0 + ttl);
        assert_eq!(s.next_stale(7), Some(t0 + ttl));
    }

    #[tokio::test(start_paused = true)]
    async fn the_last_key_forgotten_empties_the_session() {
        let s = Sessions::default();
        let _rx = session(&s, 7, Duration::from_secs(2));
        let now = Instant::now();
        s.reserve(&e("a"), &h("x"), 2, now).unwrap();
        s.reserve(&e("b"), &h("x"), 2, now).unwrap();
        s.placed(7, &e("a"), &h("x"), 1, now);
        // Another term's key stays.
        assert_eq!(s.forget(7, &e("a"), Some(5), None), Forgot::Kept);
        assert_eq!(s.counts(), (1, 2));
        // Another holder's release of the same term leaves it too.
        assert_eq!(s.forget(7, &e("a"), Some(1), Some(&h("y"))), Forgot::Kept);
        assert_eq!(s.counts(), (1, 2));
        assert_eq!(s.forget(7, &e("a"), Some(1), Some(&h("x"))), Forgot::Kept);
        assert_eq!(s.forget(7, &e("b"), None, None), Forgot::Emptied);
        assert_eq!(s.counts(), (0, 0));
        assert_eq!(s.forget(7, &e("b"), None, None), Forgot::Unknown);
    }

    #[tokio::test(start_paused = true)]
    async fn a_stale_key_placed_again_meanwhile_is_not_forgotten() {
        let s = Sessions::default();
        let ttl = Duration::from_secs(2);
        let _rx = session(&s, 7, ttl);
        let t0 = Instant::now();
        s.reserve(&e("a"), &h("x"), 2, t0).unwrap();
        s.reserve(&e("b"), &h("x"), 2, t0).unwrap();
        s.placed(7, &e("a"), &h("x"), 1, t0);
        let seen = s.stale(7, t0 + ttl, &HashSet::new());
        let (_, a) = seen.iter().find(|(x, _)| *x == e("a")).unwrap();
        // An acquire found the key meanwhile and renewed it.
        s.placed(7, &e("a"), &h("x"), 1, t0 + ttl);
        assert_eq!(s.forget_stale(7, &e("a"), a), Forgot::Kept);
        assert_eq!(s.counts(), (1, 2));
    }
}
