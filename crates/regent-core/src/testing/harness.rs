//! What the suite runs on: the [`Harness`] a store crate provides, and
//! each check's context ([`Ctx`]) and helpers, shared by the checks in the
//! sibling files.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::error::StoreError;
use crate::store::memory::MemoryStore;
use crate::store::{Acquire, AcquireRequest, LeaseStore};
use crate::types::{ElectionName, HolderId, LeaderInfo, Lease, Metadata};

/// What the suite needs from a store crate: connections to one engine, and
/// ways to tamper with it from outside regent.
pub trait Harness: Send + Sync {
    /// The store under test.
    type Store: LeaseStore;

    /// A new connection to the engine under test. Every connection sees the
    /// same data.
    fn store(&self) -> impl Future<Output = Self::Store> + Send;

    /// A store whose engine cannot be reached or answers "busy" (a closed
    /// port, a file locked by another process): its acquire must fail with a
    /// transient error.
    fn unreachable_store(&self) -> impl Future<Output = Self::Store> + Send;

    /// The ttl the checks use: at least the store's minimum, as short as the
    /// engine allows (the suite waits it out several times), and one the
    /// engine grants as asked rather than rounded up (the suite waits
    /// `ttl` plus the store's expiry slack for a lease to expire).
    fn ttl(&self) -> Duration;

    /// Deletes every record of `election` behind regent's back, as an
    /// operator would.
    fn delete_records(&self, election: &ElectionName) -> impl Future<Output = ()> + Send;

    /// Writes a value regent did not write where `election`'s lease lives.
    fn put_garbage(&self, election: &ElectionName) -> impl Future<Output = ()> + Send;

    /// Opt-in (race stores): whether [`run`](super::run) also checks that
    /// an acquire retried after its first one's answer was lost (given up,
    /// dropped, failed after it went out) wins a new term, rather than
    /// finding the lost call's record and answering `Held` by the caller
    /// itself (check `retried_acquire_after_a_lost_answer_wins`).
    ///
    /// The contract allows that orphan for now (it expires after its ttl:
    /// [`LeaseStore::try_acquire`], "Cancel safety"), so the default is
    /// `false`; a store that takes its own lost wins over answers `true`
    /// and is held to it from then on. Queue stores are always checked
    /// for their analogue (`retried_acquire_queues_once`) and ignore this.
    /// [`run_opt_in_checks`](super::run_opt_in_checks) runs the check
    /// whatever this says, to try a store before it opts in.
    fn checks_retried_acquire_after_a_lost_answer(&self) -> bool {
        false
    }
}

/// What a check returns: why it failed, if it did.
pub(super) type Check = Result<(), String>;

macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}
pub(super) use ensure;

/// Unwraps a store result inside a check, failing it with the error.
pub(super) fn ok<T>(what: &str, r: Result<T, StoreError>) -> Result<T, String> {
    r.map_err(|e| {
        let mut msg = format!("{what} failed: {e}");
        let mut src = std::error::Error::source(&e);
        while let Some(s) = src {
            msg.push_str(&format!(": {s}"));
            src = s.source();
        }
        msg
    })
}

static ELECTIONS: AtomicU64 = AtomicU64::new(0);

/// A fresh election for one check, unique across runs on one engine.
pub(super) fn election(check: &str) -> ElectionName {
    let n = ELECTIONS.fetch_add(1, Ordering::Relaxed);
    let salt = fastrand::u32(..);
    ElectionName::new(format!("conf-{check}-{n}-{salt:08x}")).expect("valid name")
}

pub(super) fn holder(name: &str) -> HolderId {
    HolderId::new(name).expect("valid holder id")
}

/// One check's connection, election and timing.
pub(super) struct Ctx<'h, H: Harness> {
    pub(super) h: &'h H,
    pub(super) store: H::Store,
    pub(super) election: ElectionName,
    pub(super) ttl: Duration,
    /// How much later than the ttl the store may free a lease, plus a
    /// little.
    pub(super) slack: Duration,
}

impl<H: Harness> Ctx<'_, H> {
    pub(super) fn req(&self, who: &str) -> AcquireRequest {
        AcquireRequest {
            election: self.election.clone(),
            holder: holder(who),
            ttl: self.ttl,
            metadata: Metadata::from_pairs([("who", who)]).expect("small"),
        }
    }

    pub(super) async fn acquire(&self, who: &str) -> Result<Acquire, String> {
        ok(
            &format!("acquire by {who}"),
            self.store.try_acquire(&self.req(who), None).await,
        )
    }

    pub(super) async fn win(&self, who: &str) -> Result<Lease, String> {
        match self.acquire(who).await? {
            Acquire::Won(lease) => Ok(lease),
            Acquire::Held { leader, .. } => Err(format!(
                "{who} should have won a free election, but it is held by {:?}",
                leader.map(|l| l.holder)
            )),
        }
    }

    /// Waits until the store must have expired every lease written so far.
    pub(super) async fn wait_expiry(&self) {
        tokio::time::sleep(self.ttl + self.slack).await;
    }

    pub(super) async fn leader(&self) -> Result<Option<LeaderInfo>, String> {
        ok(
            "current_leader",
            self.store.current_leader(&self.election).await,
        )
    }
}

/// A check's context: a new connection, a fresh election.
pub(super) async fn ctx<'h, H: Harness>(h: &'h H, check: &str) -> Ctx<'h, H> {
    let store = h.store().await;
    let slack =
        store.info().expiry_slack_for(h.ttl()) + Duration::from_millis(500).min(h.ttl() / 2);
    Ctx {
        h,
        store,
        election: election(check),
        ttl: h.ttl(),
        slack,
    }
}

/// The [`Harness`] for [`MemoryStore`]: the reference the suite is proven
/// against.
#[derive(Debug, Clone)]
pub struct MemoryHarness {
    store: MemoryStore,
}

impl MemoryHarness {
    /// A harness over `store`, configured as the test needs (a narrow ttl
    /// range, a negotiated ttl, an expiry slack).
    pub fn with_store(store: MemoryStore) -> Self {
        Self { store }
    }

    /// A harness over a race-style memory store.
    pub fn race() -> Self {
        Self {
            store: MemoryStore::race(),
        }
    }

    /// A harness over a queue-style memory store.
    pub fn queue() -> Self {
        Self {
            store: MemoryStore::queue(),
        }
    }
}

impl Harness for MemoryHarness {
    type Store = MemoryStore;

    async fn store(&self) -> MemoryStore {
        self.store.clone()
    }

    async fn unreachable_store(&self) -> MemoryStore {
        let dead = MemoryStore::new(self.store.info().style);
        dead.fail_next(u32::MAX);
        dead
    }

    fn ttl(&self) -> Duration {
        Duration::from_secs(2)
    }

    async fn delete_records(&self, election: &ElectionName) {
        self.store.delete_records(election);
    }

    async fn put_garbage(&self, election: &ElectionName) {
        self.store.put_garbage(election);
    }
}
