//! One store lease for many elections: [`SharedSessions`], for stores whose
//! liveness unit can carry many records (an etcd lease, a Consul session),
//! as Go's `concurrency.Session` carries every election of a process.
//!
//! A store that uses it puts the records of up to [`MAX_KEYS`] elections
//! of one ttl on one *session*. A renewal of any of them joins the
//! session's next *round*: one renewal of the session
//! ([`SessionBackend::keep_alive`]), then one look at which of the waiting
//! elections the session still holds ([`SessionBackend::held`]). Rounds of
//! one session are at least a tenth of the ttl apart, and a round answers
//! every renewal that was waiting when it started, so renewals cost a
//! session at most ten rounds per ttl, whatever the number of its
//! elections and however often each renews.
//!
//! # Why the store contract still holds
//!
//! * A renewal is answered only by a round whose keep-alive was sent after
//!   the renewal was called, so a [`Renewal::Renewed`] lease lives a full
//!   ttl from the call.
//! * The look at the records comes after the keep-alive: a record the
//!   round saw was held by a session good for a ttl from the keep-alive.
//! * A shared session would keep an election's record alive after its
//!   holder stopped renewing (a candidate dropped, a release that failed),
//!   as long as other elections renew. So each record has the time it
//!   would have expired on a session of its own (its last renewal, or its
//!   acquire, plus the ttl), and the session takes the record out then
//!   ([`SessionBackend::drop_key`], guarded by session and token). Until
//!   that succeeds, no round renews the session: a record is never kept
//!   alive beyond its time by somebody else's renewal.
//! * When a session's last record goes (released, dropped, lost), the
//!   session is ended ([`SessionBackend::end`]). A session the store no
//!   longer knows ends too, and every renewal of its elections is
//!   [`Renewal::Lost`].
//!
//! A store reserves a place with [`SharedSessions::reserve`] (or, when no
//! session has room, grants one and [`opens`](SharedSessions::open) it),
//! notes the record its acquire placed with [`SharedSessions::placed`],
//! renews through [`SharedSessions::join`] and forgets a released record
//! with [`SharedSessions::forget`].
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use regent_core::store::shared::{Forgot, SessionBackend, SessionKey, SharedSessions};
//! use regent_core::{ElectionName, FencingToken, HolderId, StoreError};
//!
//! /// A store whose sessions never end and hold everything: enough to
//! /// show the calls.
//! #[derive(Clone, Default)]
//! struct Forever(Arc<SharedSessions<Forever>>);
//!
//! impl SessionBackend for Forever {
//!     type Id = u64;
//!     async fn keep_alive(&self, _: &u64) -> Result<bool, StoreError> {
//!         Ok(true)
//!     }
//!     async fn held(&self, _: &u64, keys: &[SessionKey]) -> Result<Vec<bool>, StoreError> {
//!         Ok(vec![true; keys.len()])
//!     }
//!     async fn drop_key(&self, _: &u64, _: &SessionKey) -> Result<(), StoreError> {
//!         Ok(())
//!     }
//!     fn end(&self, _: &u64) {}
//!     fn sessions(&self) -> &SharedSessions<Self> {
//!         &self.0
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let store = Forever::default();
//! let sessions = store.sessions();
//! let (jobs, host) = (ElectionName::new("jobs")?, HolderId::new("host-1")?);
//! let ttl = Duration::from_secs(10);
//! let sent = tokio::time::Instant::now();
//! // No session yet: the store grants one (id 7) and opens it.
//! assert!(sessions.reserve(&jobs, &host, ttl, sent).is_none());
//! sessions.open(&store, 7, ttl, ttl, &jobs, &host, sent);
//! // Its acquire placed the record with token 42.
//! sessions.placed(&7, &jobs, &host, FencingToken::new(42), sent);
//! // A renewal joins the session's next round.
//! let round = sessions.join(&7, &jobs, &host, FencingToken::new(42)).expect("on session 7");
//! assert_eq!(round.await??, regent_core::Renewal::Renewed);
//! // Its release: that was the session's last record.
//! assert_eq!(sessions.forget(&7, &jobs, Some(FencingToken::new(42)), Some(&host)), Forgot::Emptied);
//! # Ok(()) }
//! ```

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::Renewal;
use crate::error::StoreError;
use crate::types::{ElectionName, FencingToken, HolderId};

/// The most elections one session carries.
pub const MAX_KEYS: usize = 1000;

/// Rounds of one session are at least `ttl / ROUNDS_PER_TTL` apart.
pub const ROUNDS_PER_TTL: u32 = 10;

/// What a store does to its sessions, for [`SharedSessions`].
pub trait SessionBackend: Clone + Send + Sync + 'static {
    /// A session's id: an etcd lease id, a Consul session id.
    type Id: Clone + Eq + Hash + Send + Sync + fmt::Debug + 'static;

    /// Renews session `id` once: `Ok(false)` when the store no longer
    /// knows it (expired, ended from outside).
    fn keep_alive(&self, id: &Self::Id) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Whether session `id` still holds each of `keys` (same order),
    /// asked right after a keep-alive that found it alive.
    fn held(
        &self,
        id: &Self::Id,
        keys: &[SessionKey],
    ) -> impl Future<Output = Result<Vec<bool>, StoreError>> + Send;

    /// Takes `key`'s record off session `id` (deletes or unlocks it), only
    /// if the session still holds it with `key.token` (when known): its
    /// holder stopped renewing it.
    fn drop_key(
        &self,
        id: &Self::Id,
        key: &SessionKey,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Ends session `id`, whose records are all gone, without waiting.
    fn end(&self, id: &Self::Id);

    /// The store's sessions.
    fn sessions(&self) -> &SharedSessions<Self>;
}

/// One election's record on a session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionKey {
    /// The election.
    pub election: ElectionName,
    /// Who holds the record.
    pub holder: HolderId,
    /// The record's token, once an acquire returned it.
    pub token: Option<FencingToken>,
}

/// What [`SharedSessions::forget`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Forgot {
    /// The session is not one of these.
    Unknown,
    /// The session goes on with other records.
    Kept,
    /// That was the session's last record: it is gone from the pool, and
    /// the store is to end it.
    Emptied,
}

/// The sessions of one store (and its clones). See the
/// [module docs](self).
pub struct SharedSessions<B: SessionBackend> {
    pool: Mutex<HashMap<B::Id, Session<B>>>,
    granting: tokio::sync::Mutex<()>,
}

impl<B: SessionBackend> Default for SharedSessions<B> {
    fn default() -> Self {
        Self {
            pool: Mutex::default(),
            granting: tokio::sync::Mutex::new(()),
        }
    }
}

impl<B: SessionBackend> fmt::Debug for SharedSessions<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pool = self.pool();
        f.debug_struct("SharedSessions")
            .field("sessions", &pool.len())
            .field(
                "records",
                &pool.values().map(|s| s.entries.len()).sum::<usize>(),
            )
            .finish()
    }
}

struct Session<B: SessionBackend> {
    /// What acquires ask of it: sessions are shared by the ttl asked.
    group: Duration,
    /// What the store granted.
    ttl: Duration,
    entries: HashMap<ElectionName, Entry>,
    rounds: mpsc::UnboundedSender<Waiter>,
    _backend: std::marker::PhantomData<fn() -> B>,
}

#[derive(Clone, Debug)]
struct Entry {
    holder: HolderId,
    token: Option<FencingToken>,
    /// When the record would expire on a session of its own.
    until: Instant,
}

/// A renewal waiting for the next round.
struct Waiter {
    election: ElectionName,
    holder: HolderId,
    token: FencingToken,
    reply: oneshot::Sender<Result<Renewal, StoreError>>,
}

/// The answer a [`SharedSessions::join`] waits for.
pub type RoundAnswer = oneshot::Receiver<Result<Renewal, StoreError>>;

impl<B: SessionBackend> SharedSessions<B> {
    fn pool(&self) -> MutexGuard<'_, HashMap<B::Id, Session<B>>> {
        self.pool.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits (at most `bound`) until no other caller is granting a new
    /// session, so that elections that start together fill one session
    /// rather than granting one each; reserve again once it returns. The
    /// guard is `None` when `bound` ran out (a grant that hangs).
    async fn granting(&self, bound: Duration) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        tokio::time::timeout(bound, self.granting.lock()).await.ok()
    }

    /// The session for an acquire of `holder` in `election` asking a ttl
    /// of `group`, its granted ttl, and the instant from which the record
    /// the acquire places lives:
    ///
    /// * a place on a shared session with room, which `keep_alive` (the
    ///   store's keep-alive, with the acquire's context in its errors)
    ///   renewed after this call began, so that a win holds a full ttl
    ///   from the call; a session found gone is ended, and the next tried;
    /// * else a session `grant` makes (id and granted ttl), opened with the
    ///   place. One grant at a time, waited for at most `bound` (a grant
    ///   that hangs), so that elections that start together fill one
    ///   session rather than granting one each.
    ///
    /// # Errors
    ///
    /// `grant`'s or `keep_alive`'s; the place is given back then (and a
    /// session it emptied [ended](SessionBackend::end)).
    #[allow(clippy::too_many_arguments)]
    pub async fn session_for<G, K>(
        &self,
        backend: &B,
        election: &ElectionName,
        holder: &HolderId,
        group: Duration,
        bound: Duration,
        mut grant: impl FnMut() -> G,
        mut keep_alive: impl FnMut(B::Id) -> K,
    ) -> Result<(B::Id, Duration, Instant), StoreError>
    where
        G: Future<Output = Result<(B::Id, Duration), StoreError>>,
        K: Future<Output = Result<bool, StoreError>>,
    {
        loop {
            let (id, ttl) = match self.reserve(election, holder, group, Instant::now()) {
                Some(reserved) => reserved,
                None => {
                    let _granting = self.granting(bound).await;
                    let sent = Instant::now();
                    match self.reserve(election, holder, group, sent) {
                        Some(reserved) => reserved,
                        None => {
                            let (id, ttl) = grant().await?;
                            self.open(backend, id.clone(), group, ttl, election, holder, sent);
                            return Ok((id, ttl, sent));
                        }
                    }
                }
            };
            let sent = Instant::now();
            match keep_alive(id.clone()).await {
                Ok(true) => return Ok((id, ttl, sent)),
                // Gone (expired, ended from outside): the next one.
                Ok(false) => self.end(&id),
                Err(e) => {
                    if self.forget(&id, election, None, Some(holder)) == Forgot::Emptied {
                        backend.end(&id);
                    }
                    return Err(e);
                }
            }
        }
    }

    /// Reserves a place for `election` on a session shared by acquires of
    /// `group` (the ttl they ask), with room for it, its record to be
    /// renewed from `sent`: the session and its granted ttl. `None` when
    /// no session has room. Two candidates of one election never share a
    /// session.
    pub fn reserve(
        &self,
        election: &ElectionName,
        holder: &HolderId,
        group: Duration,
        sent: Instant,
    ) -> Option<(B::Id, Duration)> {
        let mut pool = self.pool();
        let (id, s) = pool.iter_mut().find(|(_, s)| {
            s.group == group
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
        Some((id.clone(), s.ttl))
    }

    /// Starts a session on `id`, just granted with `ttl` for acquires of
    /// `group`, with a place for `election` renewed from `sent`; its
    /// rounds run on a task of their own, through `backend`.
    #[allow(clippy::too_many_arguments)]
    pub fn open(
        &self,
        backend: &B,
        id: B::Id,
        group: Duration,
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
            id.clone(),
            Session {
                group,
                ttl,
                entries,
                rounds: tx,
                _backend: std::marker::PhantomData,
            },
        );
        tokio::spawn(run(backend.clone(), id, ttl, rx));
    }

    /// Notes that an acquire placed (or found) `election`'s record with
    /// `token` on session `id`, the session renewed from `sent`.
    pub fn placed(
        &self,
        id: &B::Id,
        election: &ElectionName,
        holder: &HolderId,
        token: FencingToken,
        sent: Instant,
    ) {
        let mut pool = self.pool();
        let Some(s) = pool.get_mut(id) else {
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

    /// Joins the next round of session `id`, which carries this term's
    /// record. `None` when it does not: the store renews on its own.
    pub fn join(
        &self,
        id: &B::Id,
        election: &ElectionName,
        holder: &HolderId,
        token: FencingToken,
    ) -> Option<RoundAnswer> {
        let pool = self.pool();
        let s = pool.get(id)?;
        let e = s.entries.get(election)?;
        if e.token != Some(token) || e.holder != *holder {
            return None;
        }
        let (reply, rx) = oneshot::channel();
        s.rounds
            .send(Waiter {
                election: election.clone(),
                holder: holder.clone(),
                token,
                reply,
            })
            .ok()?;
        Some(rx)
    }

    /// Forgets `election`'s record on session `id`: only the one with
    /// `token` and of `holder`, when given.
    pub fn forget(
        &self,
        id: &B::Id,
        election: &ElectionName,
        token: Option<FencingToken>,
        holder: Option<&HolderId>,
    ) -> Forgot {
        let mut pool = self.pool();
        let Some(s) = pool.get_mut(id) else {
            return Forgot::Unknown;
        };
        if s.entries.get(election).is_some_and(|e| {
            (token.is_none() || e.token == token) && holder.is_none_or(|h| e.holder == *h)
        }) {
            s.entries.remove(election);
        }
        if s.entries.is_empty() {
            pool.remove(id);
            Forgot::Emptied
        } else {
            Forgot::Kept
        }
    }

    /// Whether `id` is one of these sessions.
    pub fn knows(&self, id: &B::Id) -> bool {
        self.pool().contains_key(id)
    }

    /// Ends session `id`: the store no longer knows it.
    pub fn end(&self, id: &B::Id) {
        self.pool().remove(id);
    }

    /// Records past their time on session `id`, but for `waiting` ones.
    fn stale(&self, id: &B::Id, now: Instant, waiting: &HashSet<ElectionName>) -> Vec<SessionKey> {
        let pool = self.pool();
        let Some(s) = pool.get(id) else {
            return Vec::new();
        };
        s.entries
            .iter()
            .filter(|(e, x)| x.until <= now && !waiting.contains(*e))
            .map(|(e, x)| SessionKey {
                election: e.clone(),
                holder: x.holder.clone(),
                token: x.token,
            })
            .collect()
    }

    /// The earliest time a record of session `id` goes stale.
    fn next_stale(&self, id: &B::Id) -> Option<Instant> {
        self.pool().get(id)?.entries.values().map(|e| e.until).min()
    }

    /// Forgets a stale record just dropped, unless an acquire renewed it
    /// meanwhile.
    fn forget_stale(&self, id: &B::Id, key: &SessionKey, now: Instant) -> Forgot {
        {
            let pool = self.pool();
            let Some(s) = pool.get(id) else {
                return Forgot::Unknown;
            };
            let same = s
                .entries
                .get(&key.election)
                .is_some_and(|e| e.token == key.token && e.until <= now);
            if !same {
                return Forgot::Kept;
            }
        }
        self.forget(id, &key.election, key.token, Some(&key.holder))
    }

    /// A round renewed `election`'s record from `sent`.
    fn renewed(&self, id: &B::Id, election: &ElectionName, token: FencingToken, sent: Instant) {
        let mut pool = self.pool();
        let Some(s) = pool.get_mut(id) else {
            return;
        };
        let until = sent + s.ttl;
        if let Some(e) = s.entries.get_mut(election)
            && e.token == Some(token)
        {
            e.until = e.until.max(until);
        }
    }

    /// The number of sessions and the records they carry.
    pub fn counts(&self) -> (usize, usize) {
        let pool = self.pool();
        (pool.len(), pool.values().map(|s| s.entries.len()).sum())
    }
}

/// A session's rounds, until the session leaves the pool, or until the
/// store must have let it go by itself (no keep-alive answered for a ttl
/// while a stale record could not be dropped: nothing is left to drop).
async fn run<B>(backend: B, id: B::Id, ttl: Duration, mut rx: mpsc::UnboundedReceiver<Waiter>)
where
    B: SessionBackend,
{
    let sessions = backend.sessions();
    let spacing = ttl / ROUNDS_PER_TTL;
    let pause = spacing.min(Duration::from_millis(200));
    let mut pending: Vec<Waiter> = Vec::new();
    let mut last_round: Option<Instant> = None;
    // The last keep-alive the store answered (the session was granted
    // just before the task started).
    let mut kept = Instant::now();
    // After a stale record could not be dropped: not before this again.
    let mut retry_stale: Option<Instant> = None;
    // When to look for stale records. Looked up only after a round or a
    // look, not at every renewal: a record's time only moves later, and a
    // record placed meanwhile is due a ttl after it was placed, never
    // before the time looked up (or a ttl from now, with none).
    let mut check_at = sessions
        .next_stale(&id)
        .unwrap_or_else(|| Instant::now() + ttl);
    loop {
        let round_at = (!pending.is_empty())
            .then(|| last_round.map_or_else(Instant::now, |l| l + spacing))
            .map(|at| retry_stale.map_or(at, |r| at.max(r)));
        let look_at = retry_stale.map_or(check_at, |r| check_at.max(r));
        let looked = tokio::select! {
            w = rx.recv() => {
                let Some(w) = w else {
                    answer_all(pending, &Ok(Renewal::Lost));
                    return;
                };
                pending.push(w);
                while let Ok(w) = rx.try_recv() {
                    pending.push(w);
                }
                None
            }
            () = crate::candidate::sleep_until_some(round_at) => {
                while let Ok(w) = rx.try_recv() {
                    pending.push(w);
                }
                let waiters = std::mem::take(&mut pending);
                let outcome = round(&backend, &id, waiters).await;
                match outcome {
                    Round::Done(sent) => {
                        last_round = Some(sent);
                        kept = sent;
                    }
                    Round::Failed(sent) => last_round = Some(sent),
                    Round::StaleKept => {}
                }
                Some(!matches!(outcome, Round::StaleKept))
            }
            () = tokio::time::sleep_until(look_at) => {
                let waiting: HashSet<_> = pending.iter().map(|w| w.election.clone()).collect();
                Some(drop_stale(&backend, &id, &waiting).await.is_ok())
            }
        };
        let Some(dropped) = looked else {
            continue;
        };
        retry_stale = (!dropped).then(|| Instant::now() + pause);
        if !dropped && Instant::now() >= kept + ttl {
            // Not renewed for a ttl: the store has ended the session, or
            // will before anyone can count on it.
            tracing::debug!(session = ?id, "a shared session not renewed for a ttl is given up");
            sessions.end(&id);
            backend.end(&id);
        }
        check_at = sessions
            .next_stale(&id)
            .unwrap_or_else(|| Instant::now() + ttl);
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
    /// A stale record could not be dropped: nothing was renewed, and every
    /// waiter got the error.
    StaleKept,
    /// The keep-alive or the look at the records failed: every waiter got
    /// the error.
    Failed(Instant),
}

/// One round: stale records dropped, one keep-alive, one look at the
/// waiters' records, and every waiter answered.
async fn round<B>(backend: &B, id: &B::Id, waiters: Vec<Waiter>) -> Round
where
    B: SessionBackend,
{
    let sessions = backend.sessions();
    let waiting: HashSet<_> = waiters.iter().map(|w| w.election.clone()).collect();
    if let Err(e) = drop_stale(backend, id, &waiting).await {
        answer_all(waiters, &Err(e));
        return Round::StaleKept;
    }
    let sent = Instant::now();
    match backend.keep_alive(id).await {
        Ok(true) => {}
        Ok(false) => {
            tracing::debug!(session = ?id, "a shared session is gone");
            sessions.end(id);
            answer_all(waiters, &Ok(Renewal::Lost));
            return Round::Done(sent);
        }
        Err(e) => {
            answer_all(waiters, &Err(e));
            return Round::Failed(sent);
        }
    }
    let keys: Vec<SessionKey> = waiters
        .iter()
        .map(|w| SessionKey {
            election: w.election.clone(),
            holder: w.holder.clone(),
            token: Some(w.token),
        })
        .collect();
    let held = match backend.held(id, &keys).await {
        Ok(held) if held.len() == keys.len() => held,
        Ok(_) => {
            let e = StoreError::new(
                crate::ErrorKind::Protocol,
                format!(
                    "session {id:?}: the store said whether it holds a different number of records than asked"
                ),
            );
            answer_all(waiters, &Err(e));
            return Round::Failed(sent);
        }
        Err(e) => {
            answer_all(waiters, &Err(e));
            return Round::Failed(sent);
        }
    };
    for (w, held) in waiters.into_iter().zip(held) {
        let answer = if held {
            sessions.renewed(id, &w.election, w.token, sent);
            Renewal::Renewed
        } else {
            if sessions.forget(id, &w.election, Some(w.token), Some(&w.holder)) == Forgot::Emptied {
                backend.end(id);
            }
            Renewal::Lost
        };
        let _ = w.reply.send(Ok(answer));
    }
    Round::Done(sent)
}

/// Drops the records of session `id` that are past their time, but for
/// `waiting` elections.
async fn drop_stale<B>(
    backend: &B,
    id: &B::Id,
    waiting: &HashSet<ElectionName>,
) -> Result<(), StoreError>
where
    B: SessionBackend,
{
    let sessions = backend.sessions();
    let now = Instant::now();
    for key in sessions.stale(id, now, waiting) {
        backend.drop_key(id, &key).await?;
        tracing::debug!(election = %key.election, holder = %key.holder, "a record not renewed within its ttl dropped");
        if sessions.forget_stale(id, &key, now) == Forgot::Emptied {
            backend.end(id);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
