//! An in-process store with fault injection, for testing the core and code
//! built on it. **Not** for production: it lives in one process's memory
//! ([`SafetyClass::Ephemeral`]).
//!
//! It runs on tokio's clock, so tests on paused time
//! (`#[tokio::test(start_paused = true)]`) see leases expire the instant time
//! reaches them. It behaves as either style of store
//! ([`StoreStyle::Race`] or [`StoreStyle::Queue`]), so the core is proven
//! against both before any real store exists.
//!
//! Faults it can inject:
//! * a delay before each request is applied and before each reply returns
//!   ([`MemoryStore::set_request_delay`], [`MemoryStore::set_reply_delay`]);
//! * failing the next N calls as unavailable ([`MemoryStore::fail_next`]);
//! * partitioning one holder: its acquire, renew, metadata update and
//!   release fail ([`MemoryStore::partition`]);
//! * holding expiry: no lease expires while held
//!   ([`MemoryStore::hold_expiry`]);
//! * deleting an election's records from outside
//!   ([`MemoryStore::delete_records`]) and writing garbage on its key
//!   ([`MemoryStore::put_garbage`]).
//!
//! And it can pose as stores with other limits:
//! * a narrower ttl range, as Azure Blob's 15–60 s
//!   ([`MemoryStore::set_ttl_range`]);
//! * a negotiated ttl, as ZooKeeper's session timeout: every acquire is
//!   granted a set ttl whatever it asked ([`MemoryStore::set_granted_ttl`]);
//! * a late expiry, as Consul's sessions
//!   ([`MemoryStore::set_expiry_slack`]).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::{
    Acquire, AcquireRequest, ExpirySlack, LeaderStream, LeaseStore, Renewal, SafetyClass,
    StoreInfo, StoreStyle, TtlGrant, WatchMode,
};
use crate::error::{ErrorKind, StoreError};
use crate::timing::MAX_TTL;
use crate::types::{
    ElectionName, FencingToken, HolderId, LeaderInfo, Lease, LeaseHandle, Metadata,
};

/// An in-memory lease store; clones share one state. See the
/// [module docs](self).
#[derive(Clone, Debug)]
pub struct MemoryStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    style: StoreStyle,
    state: Mutex<State>,
    faults: Mutex<Faults>,
    /// Bumped on every change of any election; watches wait on it.
    version: watch::Sender<u64>,
}

#[derive(Debug, Default)]
struct State {
    elections: HashMap<ElectionName, Election>,
    expiry_held: bool,
    stats: CallStats,
}

#[derive(Debug, Default)]
struct Election {
    /// The last token issued. Never reset, so tokens grow across release,
    /// expiry and deletion of records.
    counter: u64,
    /// Live records by token. Race style: at most one. Queue style: the
    /// first leads.
    records: BTreeMap<u64, Record>,
    garbage: bool,
}

#[derive(Debug, Clone)]
struct Record {
    holder: HolderId,
    /// The ttl granted.
    ttl: Duration,
    /// The ttl plus the expiry slack: how long after an acquire or renewal
    /// the record really lives.
    life: Duration,
    expires_at: Instant,
    metadata: Metadata,
}

#[derive(Debug)]
struct Faults {
    request_delay: Duration,
    reply_delay: Duration,
    fail_next: u32,
    partitioned: HashSet<HolderId>,
    min_ttl: Duration,
    max_ttl: Duration,
    granted_ttl: Option<Duration>,
    expiry_slack: ExpirySlack,
}

impl Default for Faults {
    fn default() -> Self {
        Self {
            request_delay: Duration::ZERO,
            reply_delay: Duration::ZERO,
            fail_next: 0,
            partitioned: HashSet::new(),
            min_ttl: Duration::from_millis(1),
            max_ttl: MAX_TTL,
            granted_ttl: None,
            expiry_slack: ExpirySlack::NONE,
        }
    }
}

/// How many calls of each kind the store was asked (failed ones included).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CallStats {
    /// `try_acquire` calls.
    pub acquires: u64,
    /// `renew` calls.
    pub renews: u64,
    /// `release` calls.
    pub releases: u64,
    /// `update_metadata` calls.
    pub metadata_updates: u64,
}

impl Election {
    fn purge(&mut self, now: Instant, expiry_held: bool) -> bool {
        if expiry_held {
            return false;
        }
        let before = self.records.len();
        self.records.retain(|_, r| r.expires_at > now);
        before != self.records.len()
    }

    fn leader(&self) -> Option<LeaderInfo> {
        self.records.iter().next().map(|(token, r)| LeaderInfo {
            holder: r.holder.clone(),
            token: FencingToken::new(*token),
            metadata: r.metadata.clone(),
        })
    }

    fn next_expiry(&self) -> Option<Instant> {
        self.records.values().map(|r| r.expires_at).min()
    }
}

fn lease_of(election: &ElectionName, token: u64, r: &Record) -> Lease {
    Lease {
        election: election.clone(),
        holder: r.holder.clone(),
        token: FencingToken::new(token),
        ttl: r.ttl,
        handle: LeaseHandle::new(format!("mem-{token}")),
    }
}

impl MemoryStore {
    /// A new, empty store of the given style.
    pub fn new(style: StoreStyle) -> Self {
        Self {
            inner: Arc::new(Inner {
                style,
                state: Mutex::new(State::default()),
                faults: Mutex::new(Faults::default()),
                version: watch::Sender::new(0),
            }),
        }
    }

    /// A race-style store: one record per election, won by compare-and-set.
    pub fn race() -> Self {
        Self::new(StoreStyle::Race)
    }

    /// A queue-style store: one record per candidate, the first leads.
    pub fn queue() -> Self {
        Self::new(StoreStyle::Queue)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while the lock was held (a failed assertion in a test)
        // leaves the state consistent: every mutation is a single step.
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn faults(&self) -> MutexGuard<'_, Faults> {
        self.inner.faults.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn bump(&self) {
        self.inner.version.send_modify(|v| *v += 1);
    }

    /// Delays every request by `delay` before the store applies it.
    pub fn set_request_delay(&self, delay: Duration) {
        self.faults().request_delay = delay;
    }

    /// Delays every reply by `delay` after the store applied the request: a
    /// renewal then succeeds on the store but its answer arrives late.
    pub fn set_reply_delay(&self, delay: Duration) {
        self.faults().reply_delay = delay;
    }

    /// Fails the next `n` calls (of any kind) as unavailable.
    pub fn fail_next(&self, n: u32) {
        self.faults().fail_next = n;
    }

    /// Cuts `holder` off: its acquire, renew, metadata update and release
    /// fail as unavailable until [`heal`](Self::heal).
    pub fn partition(&self, holder: &HolderId) {
        self.faults().partitioned.insert(holder.clone());
    }

    /// Ends a [`partition`](Self::partition) of `holder`.
    pub fn heal(&self, holder: &HolderId) {
        self.faults().partitioned.remove(holder);
    }

    /// While `held`, no lease expires. When released, every lease whose
    /// time has passed expires at once.
    pub fn hold_expiry(&self, held: bool) {
        self.state().expiry_held = held;
        self.bump();
    }

    /// Deletes every record of `election`, as an operator would by hand.
    /// Tokens keep growing afterwards.
    pub fn delete_records(&self, election: &ElectionName) {
        let mut state = self.state();
        if let Some(e) = state.elections.get_mut(election) {
            e.records.clear();
            e.garbage = false;
        }
        drop(state);
        self.bump();
    }

    /// Replaces `election`'s records with a value regent did not write.
    pub fn put_garbage(&self, election: &ElectionName) {
        let mut state = self.state();
        let e = state.elections.entry(election.clone()).or_default();
        e.records.clear();
        e.garbage = true;
        drop(state);
        self.bump();
    }

    /// Honours only ttls in `min..=max` from now on: others are refused
    /// with [`ErrorKind::Config`], and [`info`](LeaseStore::info) reports
    /// the range (default 1 ms to [`MAX_TTL`]).
    pub fn set_ttl_range(&self, min: Duration, max: Duration) {
        let mut f = self.faults();
        f.min_ttl = min;
        f.max_ttl = max;
    }

    /// With `Some(ttl)`, grants every acquire `ttl`, whatever it asked (a
    /// ttl in range is still required), as a store that negotiates does:
    /// the lease lives that long and [`Lease::ttl`] says so.
    /// [`info`](LeaseStore::info) then reports [`TtlGrant::Negotiated`].
    /// `None` grants what is asked again (the default).
    pub fn set_granted_ttl(&self, ttl: Option<Duration>) {
        self.faults().granted_ttl = ttl;
    }

    /// Frees a dead holder's lease `slack` after its ttl instead of at once,
    /// for leases acquired from now on, and reports it in
    /// [`info`](LeaseStore::info) (default [`ExpirySlack::NONE`]).
    pub fn set_expiry_slack(&self, slack: ExpirySlack) {
        self.faults().expiry_slack = slack;
    }

    /// How many calls the store has served.
    pub fn stats(&self) -> CallStats {
        self.state().stats
    }

    /// The instant `election`'s current leader's record expires on the
    /// store's clock, if there is a leader.
    pub fn leader_expires_at(&self, election: &ElectionName) -> Option<Instant> {
        let state = self.state();
        let e = state.elections.get(election)?;
        e.records.values().next().map(|r| r.expires_at)
    }

    /// Runs one call: request delay, faults, the operation under the lock,
    /// reply delay.
    async fn call<T>(
        &self,
        holder: Option<&HolderId>,
        what: &str,
        op: impl FnOnce(&mut State, Instant) -> Result<(T, bool), StoreError>,
    ) -> Result<T, StoreError> {
        {
            let mut state = self.state();
            match what {
                "acquire" => state.stats.acquires += 1,
                "renew" => state.stats.renews += 1,
                "release" => state.stats.releases += 1,
                "update metadata" => state.stats.metadata_updates += 1,
                _ => {}
            }
        }
        let (request_delay, reply_delay, fail) = {
            let mut f = self.faults();
            let mut fail = holder.is_some_and(|h| f.partitioned.contains(h));
            if f.fail_next > 0 {
                f.fail_next -= 1;
                fail = true;
            }
            (f.request_delay, f.reply_delay, fail)
        };
        if !request_delay.is_zero() {
            tokio::time::sleep(request_delay).await;
        }
        if fail {
            return Err(StoreError::unavailable(format!(
                "memory store: injected failure of {what}"
            )));
        }
        let (value, changed) = {
            let mut state = self.state();
            op(&mut state, Instant::now())?
        };
        if changed {
            self.bump();
        }
        if !reply_delay.is_zero() {
            tokio::time::sleep(reply_delay).await;
        }
        Ok(value)
    }
}

fn corrupt(election: &ElectionName) -> StoreError {
    StoreError::corrupt(format!(
        "memory store: the record of election '{election}' was not written by regent"
    ))
}

impl LeaseStore for MemoryStore {
    fn info(&self) -> StoreInfo {
        let f = self.faults();
        StoreInfo::new(
            "memory",
            self.inner.style,
            WatchMode::Notify,
            SafetyClass::Ephemeral,
        )
        .with_ttl_range(f.min_ttl, f.max_ttl)
        .with_expiry_slack(f.expiry_slack)
        .with_ttl_grant(if f.granted_ttl.is_some() {
            TtlGrant::Negotiated
        } else {
            TtlGrant::AtLeastAsked
        })
    }

    async fn try_acquire(
        &self,
        req: &AcquireRequest,
        queued: Option<&Lease>,
    ) -> Result<Acquire, StoreError> {
        let style = self.inner.style;
        let (min_ttl, max_ttl, granted, slack) = {
            let f = self.faults();
            (f.min_ttl, f.max_ttl, f.granted_ttl, f.expiry_slack)
        };
        self.call(Some(&req.holder), "acquire", |state, now| {
            if req.ttl < min_ttl || req.ttl > max_ttl {
                return Err(StoreError::new(
                    ErrorKind::Config,
                    format!(
                        "memory store: ttl {:?} of election '{}' is outside the {min_ttl:?}..={max_ttl:?} it honours",
                        req.ttl, req.election
                    ),
                ));
            }
            let held = state.expiry_held;
            let e = state.elections.entry(req.election.clone()).or_default();
            let mut changed = e.purge(now, held);
            if e.garbage {
                return Err(corrupt(&req.election));
            }
            let ttl = granted.unwrap_or(req.ttl);
            let life = ttl.saturating_add(slack.for_ttl(ttl));
            let record = Record {
                holder: req.holder.clone(),
                ttl,
                life,
                expires_at: now + life,
                metadata: req.metadata.clone(),
            };
            match style {
                StoreStyle::Queue => {
                    let ours = queued
                        .filter(|q| q.election == req.election && q.holder == req.holder)
                        .and_then(|q| {
                            let r = e.records.get_mut(&q.token.get())?;
                            (r.holder == q.holder).then_some((q.token.get(), r))
                        });
                    let token = match ours {
                        Some((token, r)) => {
                            // Refresh: a Won answer must restart the TTL.
                            r.expires_at = now + r.life;
                            r.metadata = req.metadata.clone();
                            token
                        }
                        None => {
                            e.counter += 1;
                            e.records.insert(e.counter, record);
                            changed = true;
                            e.counter
                        }
                    };
                    let lease = lease_of(&req.election, token, &e.records[&token]);
                    let head = *e.records.keys().next().expect("just inserted");
                    if head == token {
                        Ok((Acquire::Won(lease), changed))
                    } else {
                        Ok((
                            Acquire::Held {
                                leader: e.leader(),
                                queued: Some(lease),
                            },
                            changed,
                        ))
                    }
                }
                _ => {
                    if let Some(leader) = e.leader() {
                        return Ok((
                            Acquire::Held {
                                leader: Some(leader),
                                queued: None,
                            },
                            changed,
                        ));
                    }
                    e.counter += 1;
                    let lease = lease_of(&req.election, e.counter, &record);
                    e.records.insert(e.counter, record);
                    Ok((Acquire::Won(lease), true))
                }
            }
        })
        .await
    }

    async fn renew(&self, lease: &Lease) -> Result<Renewal, StoreError> {
        self.call(Some(&lease.holder), "renew", |state, now| {
            let held = state.expiry_held;
            let Some(e) = state.elections.get_mut(&lease.election) else {
                return Ok((Renewal::Lost, false));
            };
            let changed = e.purge(now, held);
            if e.garbage {
                return Err(corrupt(&lease.election));
            }
            match e.records.get_mut(&lease.token.get()) {
                Some(r) if r.holder == lease.holder => {
                    r.expires_at = now + r.life;
                    Ok((Renewal::Renewed, changed))
                }
                _ => Ok((Renewal::Lost, changed)),
            }
        })
        .await
    }

    async fn update_metadata(
        &self,
        lease: &Lease,
        metadata: &Metadata,
    ) -> Result<Renewal, StoreError> {
        self.call(Some(&lease.holder), "update metadata", |state, now| {
            let held = state.expiry_held;
            let Some(e) = state.elections.get_mut(&lease.election) else {
                return Ok((Renewal::Lost, false));
            };
            let changed = e.purge(now, held);
            if e.garbage {
                return Err(corrupt(&lease.election));
            }
            match e.records.get_mut(&lease.token.get()) {
                // The expiry stays: an update is not a renewal.
                Some(r) if r.holder == lease.holder => {
                    let updated = r.metadata != *metadata;
                    r.metadata = metadata.clone();
                    Ok((Renewal::Renewed, changed || updated))
                }
                _ => Ok((Renewal::Lost, changed)),
            }
        })
        .await
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        self.call(Some(&lease.holder), "release", |state, now| {
            let held = state.expiry_held;
            let Some(e) = state.elections.get_mut(&lease.election) else {
                return Ok(((), false));
            };
            let mut changed = e.purge(now, held);
            if e.records
                .get(&lease.token.get())
                .is_some_and(|r| r.holder == lease.holder)
            {
                e.records.remove(&lease.token.get());
                changed = true;
            }
            Ok(((), changed))
        })
        .await
    }

    async fn current_leader(
        &self,
        election: &ElectionName,
    ) -> Result<Option<LeaderInfo>, StoreError> {
        self.call(None, "read", |state, now| {
            let held = state.expiry_held;
            let Some(e) = state.elections.get_mut(election) else {
                return Ok((None, false));
            };
            let changed = e.purge(now, held);
            if e.garbage {
                return Err(corrupt(election));
            }
            Ok((e.leader(), changed))
        })
        .await
    }

    async fn watch(&self, election: &ElectionName) -> Result<LeaderStream, StoreError> {
        // Opening a watch is a call like any other: it can fail.
        self.call(None, "watch", |_, _| Ok(((), false))).await?;
        let store = self.clone();
        let election = election.clone();
        let rx = self.inner.version.subscribe();
        let stream = futures_util::stream::unfold(
            (store, election, rx, None::<Option<LeaderInfo>>),
            |(store, election, mut rx, last)| async move {
                loop {
                    rx.borrow_and_update();
                    let (now_leader, next_expiry) = {
                        let mut state = store.state();
                        let held = state.expiry_held;
                        match state.elections.get_mut(&election) {
                            None => (Ok(None), None),
                            Some(e) => {
                                e.purge(Instant::now(), held);
                                if e.garbage {
                                    (Err(corrupt(&election)), None)
                                } else {
                                    (Ok(e.leader()), e.next_expiry().filter(|_| !held))
                                }
                            }
                        }
                    };
                    match now_leader {
                        Err(e) => return Some((Err(e), (store, election, rx, last))),
                        Ok(leader) if last.as_ref() != Some(&leader) => {
                            let item = Ok(leader.clone());
                            return Some((item, (store, election, rx, Some(leader))));
                        }
                        Ok(_) => {}
                    }
                    let expiry = async {
                        match next_expiry {
                            Some(at) => tokio::time::sleep_until(at).await,
                            None => std::future::pending().await,
                        }
                    };
                    tokio::select! {
                        r = rx.changed() => if r.is_err() { return None },
                        () = expiry => {}
                    }
                }
            },
        );
        Ok(Box::pin(stream))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;

    fn req(holder: &str) -> AcquireRequest {
        AcquireRequest {
            election: ElectionName::new("e").unwrap(),
            holder: HolderId::new(holder).unwrap(),
            ttl: Duration::from_secs(10),
            metadata: Metadata::new(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn race_expiry_follows_tokio_clock() {
        let s = MemoryStore::race();
        let Acquire::Won(a) = s.try_acquire(&req("a"), None).await.unwrap() else {
            panic!("a must win an empty election")
        };
        assert!(matches!(
            s.try_acquire(&req("b"), None).await.unwrap(),
            Acquire::Held { leader: Some(l), queued: None } if l.holder.as_str() == "a"
        ));
        tokio::time::sleep(Duration::from_secs(10)).await;
        let Acquire::Won(b) = s.try_acquire(&req("b"), None).await.unwrap() else {
            panic!("b must win after a expired")
        };
        assert!(b.token > a.token);
        assert_eq!(s.renew(&a).await.unwrap(), Renewal::Lost);
    }

    #[tokio::test(start_paused = true)]
    async fn queue_passes_to_next_in_line() {
        let s = MemoryStore::queue();
        let Acquire::Won(a) = s.try_acquire(&req("a"), None).await.unwrap() else {
            panic!()
        };
        let Acquire::Held {
            queued: Some(qb), ..
        } = s.try_acquire(&req("b"), None).await.unwrap()
        else {
            panic!()
        };
        s.release(&a).await.unwrap();
        let Acquire::Won(b) = s.try_acquire(&req("b"), Some(&qb)).await.unwrap() else {
            panic!("b is first in line")
        };
        assert_eq!(b.token, qb.token);
        assert!(b.token > a.token);
    }

    #[tokio::test(start_paused = true)]
    async fn watch_sees_expiry_without_any_call() {
        let s = MemoryStore::race();
        let e = ElectionName::new("e").unwrap();
        let mut w = s.watch(&e).await.unwrap();
        assert_eq!(w.next().await.unwrap().unwrap(), None);
        s.try_acquire(&req("a"), None).await.unwrap();
        assert!(w.next().await.unwrap().unwrap().is_some());
        let start = Instant::now();
        assert_eq!(w.next().await.unwrap().unwrap(), None);
        assert_eq!(start.elapsed(), Duration::from_secs(10));
    }

    #[tokio::test(start_paused = true)]
    async fn update_metadata_keeps_the_term_and_its_expiry() {
        let s = MemoryStore::race();
        let e = ElectionName::new("e").unwrap();
        let mut w = s.watch(&e).await.unwrap();
        assert_eq!(w.next().await.unwrap().unwrap(), None);
        let Acquire::Won(a) = s.try_acquire(&req("a"), None).await.unwrap() else {
            panic!("a must win an empty election")
        };
        let first = w.next().await.unwrap().unwrap().unwrap();
        let expires_at = s.leader_expires_at(&e);
        tokio::time::sleep(Duration::from_secs(3)).await;
        let m = Metadata::from_pairs([("addr", "10.0.0.1:80")]).unwrap();
        assert_eq!(s.update_metadata(&a, &m).await.unwrap(), Renewal::Renewed);
        let seen = w.next().await.unwrap().unwrap().unwrap();
        assert_eq!((seen.token, &seen.metadata), (first.token, &m));
        assert_eq!(s.leader_expires_at(&e), expires_at, "not a renewal");
        assert_eq!(s.stats().metadata_updates, 1);

        s.partition(&a.holder);
        assert!(s.update_metadata(&a, &m).await.unwrap_err().is_transient());
        s.heal(&a.holder);
        tokio::time::sleep(Duration::from_secs(7)).await;
        assert_eq!(s.update_metadata(&a, &m).await.unwrap(), Renewal::Lost);

        s.put_garbage(&e);
        let err = s.update_metadata(&a, &m).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Corrupt);
    }

    #[tokio::test(start_paused = true)]
    async fn faults_fail_and_partition() {
        let s = MemoryStore::race();
        s.fail_next(1);
        assert!(
            s.try_acquire(&req("a"), None)
                .await
                .unwrap_err()
                .is_transient()
        );
        s.partition(&HolderId::new("a").unwrap());
        assert!(s.try_acquire(&req("a"), None).await.is_err());
        assert!(matches!(
            s.try_acquire(&req("b"), None).await.unwrap(),
            Acquire::Won(_)
        ));
        s.heal(&HolderId::new("a").unwrap());
        assert!(matches!(
            s.try_acquire(&req("a"), None).await.unwrap(),
            Acquire::Held { .. }
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn held_expiry_keeps_leases_alive() {
        let s = MemoryStore::race();
        s.try_acquire(&req("a"), None).await.unwrap();
        s.hold_expiry(true);
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(matches!(
            s.try_acquire(&req("b"), None).await.unwrap(),
            Acquire::Held { .. }
        ));
        s.hold_expiry(false);
        assert!(matches!(
            s.try_acquire(&req("b"), None).await.unwrap(),
            Acquire::Won(_)
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn ttl_outside_the_range_is_refused_as_config() {
        let s = MemoryStore::race();
        s.set_ttl_range(Duration::from_secs(15), Duration::from_secs(60));
        assert_eq!(
            s.info().min_ttl..=s.info().max_ttl,
            Duration::from_secs(15)..=Duration::from_secs(60)
        );
        for secs in [0, 14, 61] {
            let r = AcquireRequest {
                ttl: Duration::from_secs(secs),
                ..req("a")
            };
            let err = s.try_acquire(&r, None).await.unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Config, "{secs} s: {err}");
        }
        let e = ElectionName::new("e").unwrap();
        assert_eq!(s.current_leader(&e).await.unwrap(), None);
        let r = AcquireRequest {
            ttl: Duration::from_secs(15),
            ..req("a")
        };
        assert!(matches!(
            s.try_acquire(&r, None).await.unwrap(),
            Acquire::Won(_)
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn a_granted_ttl_is_what_the_lease_lives_and_says() {
        let s = MemoryStore::race();
        s.set_granted_ttl(Some(Duration::from_secs(4)));
        assert_eq!(s.info().ttl_grant, TtlGrant::Negotiated);
        let start = Instant::now();
        let Acquire::Won(a) = s.try_acquire(&req("a"), None).await.unwrap() else {
            panic!("a must win an empty election")
        };
        assert_eq!(a.ttl, Duration::from_secs(4));
        let e = ElectionName::new("e").unwrap();
        assert_eq!(
            s.leader_expires_at(&e),
            Some(start + Duration::from_secs(4))
        );
        tokio::time::sleep(Duration::from_secs(4)).await;
        assert_eq!(s.renew(&a).await.unwrap(), Renewal::Lost);
        s.set_granted_ttl(None);
        assert_eq!(s.info().ttl_grant, TtlGrant::AtLeastAsked);
    }

    #[tokio::test(start_paused = true)]
    async fn expiry_slack_delays_expiry_by_the_ttl_dependent_amount() {
        let s = MemoryStore::race();
        s.set_expiry_slack(ExpirySlack::new(Duration::from_secs(1), 50));
        assert_eq!(
            s.info().expiry_slack_for(Duration::from_secs(10)),
            Duration::from_secs(6)
        );
        let e = ElectionName::new("e").unwrap();
        let mut w = s.watch(&e).await.unwrap();
        assert_eq!(w.next().await.unwrap().unwrap(), None);
        let Acquire::Won(a) = s.try_acquire(&req("a"), None).await.unwrap() else {
            panic!("a must win an empty election")
        };
        assert_eq!(a.ttl, Duration::from_secs(10), "the slack is not granted");
        let start = Instant::now();
        assert!(w.next().await.unwrap().unwrap().is_some());
        assert_eq!(w.next().await.unwrap().unwrap(), None);
        assert_eq!(start.elapsed(), Duration::from_secs(16));
    }
}
