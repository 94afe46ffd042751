//! The opt-in check for race stores, `retried_acquire_after_a_lost_answer_wins`
//! (regent-core's `testing/race.rs`), against the memory store: one that
//! answers at once passes, one whose answers come late fails it at every
//! point (and the suite leaves it alone unless it opts in), and one that
//! takes its own unanswered wins back passes it and the whole suite.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use regent_core::StoreError;
use regent_core::store::memory::MemoryStore;
use regent_core::store::{Acquire, AcquireRequest, LeaseStore};
use regent_core::testing::{
    CallKind, Harness, Latency, Layered, MemoryHarness, StoreLayer, run, run_checks,
    run_opt_in_checks,
};
use regent_core::{ElectionName, HolderId, Lease, LeaseHandle};

/// A memory store whose acquires answer 20 ms after they took
/// effect, as a store on the network does: an acquire given up sooner
/// may have won. (On paused time the clock stands still while the
/// check spins, so it gives up on every such acquire.)
fn late() -> Layered<MemoryStore, Latency> {
    Layered::new(
        MemoryStore::race(),
        Latency::new().reply(CallKind::TryAcquire, Duration::from_millis(20)),
    )
}

/// Takes a term that an acquire of this store won but never answered
/// back from its retry, with a new token: a stand-in, in a layer, for
/// what a store would do itself (it would know its own records by a
/// nonce of the process written in them; the memory store has no room
/// for one, and nothing else writes its records in these tests).
#[derive(Default)]
struct TakesBackLostWins {
    /// The elections and holders of acquires whose answer was lost.
    lost: Mutex<HashSet<(ElectionName, HolderId)>>,
    /// The terms this store answered `Won` for: leases that live in
    /// their callers, never taken back.
    answered: Mutex<HashSet<(ElectionName, u64)>>,
}

/// Marks an acquire lost unless its answer came before it is dropped.
struct Unanswered<'a> {
    lost: &'a Mutex<HashSet<(ElectionName, HolderId)>>,
    call: Option<(ElectionName, HolderId)>,
}

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        if let Some(call) = self.call.take() {
            self.lost.lock().unwrap().insert(call);
        }
    }
}

impl StoreLayer for TakesBackLostWins {
    async fn try_acquire<S: LeaseStore>(
        &self,
        store: &S,
        req: &AcquireRequest,
        queued: Option<&Lease>,
    ) -> Result<Acquire, StoreError> {
        let call = (req.election.clone(), req.holder.clone());
        let mut pending = Unanswered {
            lost: &self.lost,
            call: Some(call.clone()),
        };
        let mut answer = store.try_acquire(req, queued).await;
        if let Ok(Acquire::Held {
            leader: Some(l), ..
        }) = &answer
            && l.holder == req.holder
            && self.lost.lock().unwrap().contains(&call)
            && !self
                .answered
                .lock()
                .unwrap()
                .contains(&(req.election.clone(), l.token.get()))
        {
            let orphan = Lease {
                election: req.election.clone(),
                holder: req.holder.clone(),
                token: l.token,
                ttl: req.ttl,
                handle: LeaseHandle::default(),
            };
            store.release(&orphan).await?;
            answer = store.try_acquire(req, queued).await;
        }
        // An error leaves the call marked lost: it may have won.
        if let Ok(a) = &answer {
            pending.call = None;
            if let Acquire::Won(l) = a {
                let term = (l.election.clone(), l.token.get());
                self.answered.lock().unwrap().insert(term);
            }
        }
        answer
    }
}

type Fixed = Layered<Layered<MemoryStore, Latency>, TakesBackLostWins>;

/// A late memory store with the fix, opted in.
struct FixedHarness(Fixed);

impl Harness for FixedHarness {
    type Store = Fixed;

    async fn store(&self) -> Fixed {
        self.0.clone()
    }

    async fn unreachable_store(&self) -> Fixed {
        let dead = MemoryStore::race();
        dead.fail_next(u32::MAX);
        Layered::sharing(
            Layered::sharing(dead, self.0.inner().layer().clone()),
            Arc::new(TakesBackLostWins::default()),
        )
    }

    fn ttl(&self) -> Duration {
        Duration::from_secs(2)
    }

    async fn delete_records(&self, election: &ElectionName) {
        self.0.inner().inner().delete_records(election);
    }

    async fn put_garbage(&self, election: &ElectionName) {
        self.0.inner().inner().put_garbage(election);
    }

    fn checks_retried_acquire_after_a_lost_answer(&self) -> bool {
        true
    }
}

/// The late memory store as it is, not opted in.
struct LateHarness(Layered<MemoryStore, Latency>);

impl Harness for LateHarness {
    type Store = Layered<MemoryStore, Latency>;

    async fn store(&self) -> Self::Store {
        self.0.clone()
    }

    async fn unreachable_store(&self) -> Self::Store {
        let dead = MemoryStore::race();
        dead.fail_next(u32::MAX);
        Layered::sharing(dead, self.0.layer().clone())
    }

    fn ttl(&self) -> Duration {
        Duration::from_secs(2)
    }

    async fn delete_records(&self, election: &ElectionName) {
        self.0.inner().delete_records(election);
    }

    async fn put_garbage(&self, election: &ElectionName) {
        self.0.inner().put_garbage(election);
    }
}

fn names(failures: &[regent_core::testing::Failure]) -> Vec<String> {
    failures.iter().map(ToString::to_string).collect()
}

/// A store answering in the call's first poll loses no answer: there
/// is nothing to retry, and it passes.
#[tokio::test(start_paused = true)]
async fn a_store_that_answers_at_once_passes() {
    let failures = run_opt_in_checks(&MemoryHarness::race()).await;
    assert!(failures.is_empty(), "{:#?}", names(&failures));
    // A queue store has nothing opted in (its analogue always runs).
    assert!(run_opt_in_checks(&MemoryHarness::queue()).await.is_empty());
}

/// The finding: a race store that treats the lost call's record as
/// held, by the caller itself, is caught at the points given up after
/// the acquire took effect; and only when asked for, as the contract
/// allows it.
#[tokio::test(start_paused = true)]
async fn a_retry_held_by_its_own_lost_win_is_caught_when_asked_for() {
    let h = LateHarness(late());
    let failures = names(&run_opt_in_checks(&h).await);
    assert_eq!(failures.len(), 1, "{failures:#?}");
    let f = &failures[0];
    assert!(
        f.starts_with("retried_acquire_after_a_lost_answer_wins: ")
            && f.contains("50µs, 200µs, 500µs, 1ms, 2ms, 5ms, 10ms, 30ms]")
            && f.contains("\n    0ns: FAILED: given up; current_leader then showed a (token")
            && f.contains("the retry was held by a itself")
            && !f.contains("answered in"),
        "{f}"
    );
    // Not opted in: the suite leaves it alone.
    let failures = names(&run_checks(&h).await);
    assert!(failures.is_empty(), "{failures:#?}");
}

/// A store that takes its own lost win back, with a new token, passes
/// the check and, opted in, the whole suite: a second acquire while
/// its answered lease lives is still held (item 1).
#[tokio::test(start_paused = true)]
async fn a_store_that_takes_back_its_own_lost_win_passes_the_whole_suite() {
    let h = FixedHarness(Layered::new(late(), TakesBackLostWins::default()));
    let failures = run_opt_in_checks(&h).await;
    assert!(failures.is_empty(), "{:#?}", names(&failures));
    let lost = h.0.layer().lost.lock().unwrap().len();
    assert!(lost >= 9, "only {lost} acquires were given up");
    run(&h).await;
}
