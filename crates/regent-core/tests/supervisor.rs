//! The supervisor: the leader task runs only while leading; task and lease
//! end each other; the restart policy; the health watchdog; a panicking
//! task ends its term like a failed one (issue 25).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use common::{candidate, id, secs, spawn_follower};
use regent_core::memory::MemoryStore;
use regent_core::{
    BoxError, EndReason, HolderId, LeaderContext, Restart, Status, Supervisor, SupervisorExit,
    TaskPanic, Term, TermOutcome,
};
use regent_testkit::History;
use tokio::time::{Instant, sleep};

/// The term a supervisor ran before it finished; panics on any other exit.
fn finished(exit: SupervisorExit) -> Term {
    let SupervisorExit::Finished(term) = exit else {
        panic!("{exit:?}")
    };
    term
}

/// Asserts that the supervisor finished after a term whose leadership ended
/// for `reason` and whose task stopped within its grace.
fn assert_ended_in_grace(exit: SupervisorExit, reason: EndReason) {
    let term = finished(exit);
    assert!(
        matches!(term.outcome, TermOutcome::LeadershipEnded(r) if r == reason),
        "{term:?}"
    );
    assert!(term.stopped_in_grace, "{term:?}");
}

/// Asserts that the supervisor finished after a term whose task succeeded.
fn assert_task_succeeded(exit: &SupervisorExit) {
    assert!(
        matches!(
            exit,
            SupervisorExit::Finished(t) if matches!(t.outcome, TermOutcome::TaskSucceeded)
        ),
        "{exit:?}"
    );
}

/// A well-behaved leader task: beats every second until cancelled.
async fn worker(ctx: LeaderContext) -> Result<(), BoxError> {
    loop {
        tokio::select! {
            () = ctx.cancelled() => return Ok(()),
            () = sleep(secs(1)) => ctx.heartbeat().beat(),
        }
    }
}

#[tokio::test(start_paused = true)]
async fn lost_lease_cancels_the_task() {
    let store = MemoryStore::race();
    let sup = Supervisor::new(candidate(&store, "a")).restart(Restart::Never);
    let s = store.clone();
    let exit = sup
        .run(|ctx| {
            let s = s.clone();
            async move {
                sleep(secs(3)).await;
                s.partition(&id("a"));
                worker(ctx).await
            }
        })
        .await
        .unwrap();
    assert_ended_in_grace(exit, EndReason::DeadlinePassed);
}

#[tokio::test(start_paused = true)]
async fn finished_task_resigns_so_a_follower_takes_over_at_once() {
    let store = MemoryStore::race();
    let sup = Supervisor::new(candidate(&store, "a")).restart(Restart::Never);
    let b = candidate(&store, "b");
    let done_at = Arc::new(std::sync::Mutex::new(None));
    let d = done_at.clone();
    let exit = sup
        .run(|_ctx| {
            let d = d.clone();
            async move {
                sleep(secs(4)).await;
                *d.lock().unwrap() = Some(Instant::now());
                Ok::<_, BoxError>(())
            }
        })
        .await
        .unwrap();
    assert_task_succeeded(&exit);
    let lb = b.campaign().await.unwrap();
    let done = done_at.lock().unwrap().unwrap();
    assert!(Instant::now() - done < Duration::from_millis(100));
    assert_eq!(lb.token().get(), 2);
}

#[tokio::test(start_paused = true)]
async fn on_failure_restarts_until_the_task_succeeds() {
    let store = MemoryStore::race();
    let sup = Supervisor::new(candidate(&store, "a")).restart(Restart::OnFailure);
    let runs = AtomicU32::new(0);
    let tokens = std::sync::Mutex::new(Vec::new());
    let exit = sup
        .run(|ctx| {
            let n = runs.fetch_add(1, Ordering::SeqCst);
            tokens.lock().unwrap().push(ctx.token());
            async move {
                if n < 2 {
                    Err::<(), BoxError>("boom".into())
                } else {
                    Ok(())
                }
            }
        })
        .await
        .unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 3);
    assert_task_succeeded(&exit);
    let tokens = tokens.into_inner().unwrap();
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
}

#[tokio::test(start_paused = true)]
async fn always_restarts_until_shutdown() {
    let store = MemoryStore::race();
    let a = candidate(&store, "a");
    let sup = Supervisor::new(a.clone());
    let runs = AtomicU32::new(0);
    let stopper = tokio::spawn(async move {
        sleep(secs(30)).await;
        a.shutdown().await;
    });
    let exit = sup
        .run(|_ctx| {
            runs.fetch_add(1, Ordering::SeqCst);
            async {
                sleep(secs(10)).await;
                Ok::<_, BoxError>(())
            }
        })
        .await
        .unwrap();
    stopper.await.unwrap();
    assert!(matches!(exit, SupervisorExit::Shutdown));
    assert_eq!(runs.load(Ordering::SeqCst), 3, "terms at 0, 10 and 20 s");
}

#[tokio::test(start_paused = true)]
async fn silent_task_makes_the_leader_step_down_and_release() {
    let store = MemoryStore::race();
    let sup = Supervisor::new(candidate(&store, "a"))
        .restart(Restart::Never)
        .health_timeout(secs(3))
        .unwrap();
    let b = candidate(&store, "b");
    let follower = spawn_follower(b);
    let last_beat = Arc::new(std::sync::Mutex::new(None));
    let lb2 = last_beat.clone();
    let exit = sup
        .run(|ctx| {
            let lb2 = lb2.clone();
            async move {
                for _ in 0..5 {
                    sleep(secs(1)).await;
                    ctx.heartbeat().beat();
                    *lb2.lock().unwrap() = Some(Instant::now());
                }
                // Hangs: no more heartbeats, but it does honour cancellation.
                ctx.cancelled().await;
                Ok::<_, BoxError>(())
            }
        })
        .await
        .unwrap();
    assert_ended_in_grace(exit, EndReason::Unhealthy);
    let (won_at, _) = follower.await.unwrap();
    let last = last_beat.lock().unwrap().unwrap();
    assert_eq!(
        won_at - last,
        secs(3),
        "released as soon as the watchdog fired, not a ttl later"
    );
}

#[tokio::test(start_paused = true)]
async fn task_that_ignores_cancellation_is_dropped_after_grace_before_release() {
    let store = MemoryStore::race();
    let a = candidate(&store, "a");
    let grace = a.timing().grace;
    let sup = Supervisor::new(a)
        .restart(Restart::Never)
        .health_timeout(secs(3))
        .unwrap();
    let b = candidate(&store, "b");
    let start = Instant::now();
    let follower = spawn_follower(b);
    let history = History::new();
    let h = history.clone();
    let exit = sup
        .run(|ctx| {
            let h = h.clone();
            async move {
                h.begin(&ctx.info().holder, ctx.token(), Instant::now());
                // Records the instant it is dropped: its work ends there.
                struct Dropped(History, HolderId, regent_core::FencingToken);
                impl Drop for Dropped {
                    fn drop(&mut self) {
                        self.0.end(&self.1, self.2, Instant::now());
                    }
                }
                let _guard = Dropped(h, ctx.info().holder.clone(), ctx.token());
                std::future::pending::<()>().await;
                Ok::<_, BoxError>(())
            }
        })
        .await
        .unwrap();
    let term = finished(exit);
    assert!(!term.stopped_in_grace, "{term:?}");
    let (won_at, lb) = follower.await.unwrap();
    assert_eq!(won_at - start, secs(3) + grace);
    history.begin(lb.holder(), lb.token(), won_at);
    history.assert_ok();
}

/// Regression: a task that returns as soon as its lost lease cancels it was
/// sometimes counted as "task succeeded", so `OnFailure` stopped for good
/// after a lost lease.
#[tokio::test(start_paused = true)]
async fn on_failure_campaigns_again_after_a_lost_lease() {
    for _ in 0..20 {
        let store = MemoryStore::race();
        let a = candidate(&store, "a");
        let sup = Supervisor::new(a.clone()).restart(Restart::OnFailure);
        let terms = AtomicU32::new(0);
        let s = store.clone();
        let stopper = tokio::spawn(async move {
            sleep(secs(60)).await;
            a.shutdown().await;
        });
        let exit = sup
            .run(|ctx| {
                let first = terms.fetch_add(1, Ordering::SeqCst) == 0;
                let s = s.clone();
                async move {
                    if first {
                        sleep(secs(3)).await;
                        s.partition(&id("a"));
                        let r = worker(ctx).await;
                        s.heal(&id("a"));
                        r
                    } else {
                        ctx.cancelled().await;
                        Ok(())
                    }
                }
            })
            .await
            .unwrap();
        stopper.await.unwrap();
        assert!(matches!(exit, SupervisorExit::Shutdown), "{exit:?}");
        assert!(terms.load(Ordering::SeqCst) >= 2, "never campaigned again");
    }
}

/// Regression: a task that fails at once made a hot loop of acquire, fail,
/// release with no time passing.
#[tokio::test(start_paused = true)]
async fn failing_terms_back_off() {
    let store = MemoryStore::race();
    let a = candidate(&store, "a");
    let sup = Supervisor::new(a.clone()).restart(Restart::OnFailure);
    let stopper = tokio::spawn(async move {
        sleep(secs(60)).await;
        a.shutdown().await;
    });
    let terms = AtomicU32::new(0);
    sup.run(|_ctx| {
        let n = terms.fetch_add(1, Ordering::SeqCst);
        assert!(n < 1000, "hot loop: {n} terms without time passing");
        async { Err::<(), BoxError>("fails at once".into()) }
    })
    .await
    .unwrap();
    stopper.await.unwrap();
    let n = terms.load(Ordering::SeqCst);
    assert!((3..=40).contains(&n), "{n} terms in 60 s");
}

/// Regression: the lease was released `grace` after the end even while the
/// guard (and so, possibly, the work) was still held, letting a successor
/// start next to the running work.
#[tokio::test(start_paused = true)]
async fn a_held_guard_is_not_released_behind_the_works_back() {
    let store = MemoryStore::race();
    let a = candidate(&store, "a");
    let b = candidate(&store, "b");
    let start = Instant::now();
    let la = a.campaign().await.unwrap();
    store.partition(&id("a")); // its renewals fail from now on
    let follower = spawn_follower(b);
    let (won_at, _lb) = follower.await.unwrap();
    // a steps down at 6 s but still holds its guard: its record is kept and
    // b must wait for the store's expiry at 10 s.
    assert_eq!(la.ended().unwrap().at - start, secs(6));
    assert_eq!(won_at - start, secs(10));
    assert_eq!(store.stats().releases, 0);
    drop(la);
}

/// Issue 12: the README's example could not shut down gracefully.
/// `run_until` stops the task on the signal, gives the lease back, and a
/// follower leads at once instead of a ttl later.
#[tokio::test(start_paused = true)]
async fn run_until_a_signal_hands_over_at_once() {
    let store = MemoryStore::race();
    let a = candidate(&store, "a");
    let b = candidate(&store, "b");
    let (stop, signal) = tokio::sync::oneshot::channel::<()>();
    let (led, leading) = tokio::sync::oneshot::channel();
    let mut led = Some(led);
    let run = tokio::spawn({
        let a = a.clone();
        async move {
            Supervisor::new(a)
                .run_until(
                    async {
                        let _ = signal.await;
                    },
                    move |leader: LeaderContext| {
                        if let Some(led) = led.take() {
                            let _ = led.send(leader.token());
                        }
                        async move {
                            leader.cancelled().await;
                            Ok::<_, BoxError>(())
                        }
                    },
                )
                .await
        }
    });
    let token_a = leading.await.unwrap();
    let follower = spawn_follower(b);
    sleep(secs(30)).await;
    let asked = Instant::now();
    stop.send(()).unwrap();
    let exit = run.await.unwrap().unwrap();
    assert!(matches!(exit, SupervisorExit::Shutdown), "{exit:?}");
    assert_eq!(*a.status().borrow(), Status::Stopped);
    let (won_at, lb) = follower.await.unwrap();
    assert!(lb.token() > token_a);
    assert!(
        won_at - asked < Duration::from_millis(100),
        "b led {:?} after the signal; a graceful stop must not cost a ttl",
        won_at - asked
    );
}

/// The leader task proclaims through its context.
#[tokio::test(start_paused = true)]
async fn the_leader_task_proclaims_through_its_context() {
    let store = MemoryStore::race();
    let a = candidate(&store, "a");
    let exit = Supervisor::new(a.clone())
        .restart(Restart::Never)
        .run(|leader: LeaderContext| async move {
            let md = regent_core::Metadata::from_pairs([("shard", "7")]).unwrap();
            leader.proclaim(md.clone()).await?;
            assert_eq!(leader.metadata(), md);
            Ok::<_, BoxError>(())
        })
        .await
        .unwrap();
    assert!(matches!(finished(exit).outcome, TermOutcome::TaskSucceeded));
}

/// The panic a supervisor caught in the term it finished with; panics on
/// any other exit or outcome.
fn panicked(exit: SupervisorExit) -> (TaskPanic, bool) {
    let term = finished(exit);
    let TermOutcome::TaskPanicked(panic) = term.outcome else {
        panic!("{term:?}")
    };
    (panic, term.stopped_in_grace)
}

/// Issue 25: a leader task that panicked unwound through `run` into the
/// caller (a service lost its process) and left its lease to expire by its
/// ttl. Now the term ends like a failed one: its cancellation fires, the
/// lease is resigned at once and the panic is the term's outcome.
#[tokio::test(start_paused = true)]
async fn a_panicking_task_ends_its_term_and_resigns_at_once() {
    let store = MemoryStore::race();
    let sup = Supervisor::new(candidate(&store, "a")).restart(Restart::Never);
    let follower = spawn_follower(candidate(&store, "b"));
    let seen = Arc::new(std::sync::Mutex::new(None));
    let s = seen.clone();
    let exit = sup
        .run(|ctx| {
            let s = s.clone();
            async move {
                sleep(secs(4)).await;
                *s.lock().unwrap() = Some((Instant::now(), ctx.cancellation().clone()));
                panic!("the third write failed");
                #[allow(unreachable_code)]
                Ok::<_, BoxError>(())
            }
        })
        .await
        .unwrap();
    let (panic, stopped_in_grace) = panicked(exit);
    assert_eq!(panic.message(), "the third write failed");
    assert_eq!(panic.ended_first(), None, "it panicked while leading");
    assert!(stopped_in_grace);
    let (panicked_at, cancellation) = seen.lock().unwrap().take().unwrap();
    assert!(cancellation.is_cancelled(), "the term's token fired");
    assert_eq!(store.stats().releases, 1, "the lease was given back");
    let (won_at, lb) = follower.await.unwrap();
    assert_eq!(lb.token().get(), 2);
    assert!(
        won_at - panicked_at < Duration::from_millis(100),
        "b led {:?} after the panic; a released lease costs no ttl",
        won_at - panicked_at
    );
}

/// Issue 25: a panic is a failure for the restart policy: `Always` and
/// `OnFailure` campaign again after the failure backoff, and the
/// supervisor runs on until shutdown.
#[tokio::test(start_paused = true)]
async fn after_a_panic_the_supervisor_campaigns_again() {
    for restart in [Restart::Always, Restart::OnFailure] {
        let store = MemoryStore::race();
        let a = candidate(&store, "a");
        let sup = Supervisor::new(a.clone()).restart(restart);
        let tokens = std::sync::Mutex::new(Vec::new());
        let stopper = tokio::spawn(async move {
            sleep(secs(60)).await;
            a.shutdown().await;
        });
        let exit = sup
            .run(|ctx| {
                let first = {
                    let mut tokens = tokens.lock().unwrap();
                    tokens.push(ctx.token());
                    tokens.len() == 1
                };
                async move {
                    if first {
                        sleep(secs(1)).await;
                        panic!("first term");
                    }
                    ctx.cancelled().await;
                    Ok::<_, BoxError>(())
                }
            })
            .await
            .unwrap();
        stopper.await.unwrap();
        assert!(
            matches!(exit, SupervisorExit::Shutdown),
            "{restart:?}: {exit:?}"
        );
        let tokens = tokens.into_inner().unwrap();
        assert_eq!(tokens.len(), 2, "{restart:?}: one term after the panic");
        assert!(tokens[0] < tokens[1], "{restart:?}: {tokens:?}");
    }
}

/// Issue 25: the panic of the call that makes the task's future, and the
/// message of every kind of payload.
#[tokio::test(start_paused = true)]
async fn a_panic_in_the_call_is_caught_and_its_payload_read() {
    let store = MemoryStore::race();
    let exit = Supervisor::new(candidate(&store, "a"))
        .restart(Restart::Never)
        .run(|ctx| -> std::future::Ready<Result<(), BoxError>> {
            panic!("no future for token {}", ctx.token());
        })
        .await
        .unwrap();
    assert_eq!(panicked(exit).0.message(), "no future for token 1");
    assert_eq!(store.stats().releases, 1);

    let store = MemoryStore::race();
    let exit = Supervisor::new(candidate(&store, "a"))
        .restart(Restart::Never)
        .run(|_ctx| async {
            std::panic::panic_any(7_u32);
            #[allow(unreachable_code)]
            Ok::<_, BoxError>(())
        })
        .await
        .unwrap();
    let (panic, _) = panicked(exit);
    assert_eq!(panic.message(), "non-string panic payload");
    assert_eq!(
        panic.to_string(),
        "leader task panicked: non-string panic payload"
    );
}

/// Issue 25: a task that panics in its grace, after leadership ended (here
/// by the health watchdog), is caught too; the lease is released as that
/// end allows, at once.
#[tokio::test(start_paused = true)]
async fn a_panic_in_the_grace_after_cancellation_is_caught() {
    let store = MemoryStore::race();
    let sup = Supervisor::new(candidate(&store, "a"))
        .restart(Restart::Never)
        .health_timeout(secs(3))
        .unwrap();
    let start = Instant::now();
    let follower = spawn_follower(candidate(&store, "b"));
    let exit = sup
        .run(|ctx| async move {
            ctx.cancelled().await;
            panic!("cancelled mid-write");
            #[allow(unreachable_code)]
            Ok::<_, BoxError>(())
        })
        .await
        .unwrap();
    let (panic, stopped_in_grace) = panicked(exit);
    assert_eq!(panic.message(), "cancelled mid-write");
    assert_eq!(panic.ended_first(), Some(EndReason::Unhealthy));
    assert!(stopped_in_grace, "a panic stops the task");
    let (won_at, _) = follower.await.unwrap();
    assert_eq!(won_at - start, secs(3), "released when the watchdog fired");
}

/// Issue 25: a task that panics in its grace after `run_until`'s signal
/// still gives the lease back, and the supervisor returns `Shutdown`.
#[tokio::test(start_paused = true)]
async fn a_panic_in_the_grace_of_a_shutdown_still_hands_over() {
    let store = MemoryStore::race();
    let follower = spawn_follower(candidate(&store, "b"));
    let exit = Supervisor::new(candidate(&store, "a"))
        .run_until(sleep(secs(30)), |ctx| async move {
            ctx.cancelled().await;
            panic!("cancelled mid-write");
            #[allow(unreachable_code)]
            Ok::<_, BoxError>(())
        })
        .await
        .unwrap();
    assert!(matches!(exit, SupervisorExit::Shutdown), "{exit:?}");
    let stopped_at = Instant::now();
    let (won_at, _) = follower.await.unwrap();
    assert!(won_at - stopped_at < Duration::from_millis(100));
    assert_eq!(store.stats().releases, 1);
}

/// Issue 25: a task dropped after its grace whose drop panics (not during
/// an unwind) is caught as well, and the lease is still released.
#[tokio::test(start_paused = true)]
async fn a_panic_when_the_task_is_dropped_is_caught() {
    struct PanicsOnDrop;
    impl Drop for PanicsOnDrop {
        fn drop(&mut self) {
            if !std::thread::panicking() {
                panic!("dropped mid-write");
            }
        }
    }
    let store = MemoryStore::race();
    let sup = Supervisor::new(candidate(&store, "a"))
        .restart(Restart::Never)
        .health_timeout(secs(3))
        .unwrap();
    let exit = sup
        .run(|_ctx| async move {
            let _guard = PanicsOnDrop;
            std::future::pending::<()>().await; // ignores cancellation
            Ok::<_, BoxError>(())
        })
        .await
        .unwrap();
    let (panic, stopped_in_grace) = panicked(exit);
    assert_eq!(panic.message(), "dropped mid-write");
    assert_eq!(panic.ended_first(), Some(EndReason::Unhealthy));
    assert!(!stopped_in_grace);
    assert_eq!(store.stats().releases, 1);
}
