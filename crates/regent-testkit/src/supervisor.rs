//! The supervisor on a real engine: scenarios above the store contract that
//! each store crate's tests run on its engine, so that each does not write
//! its own.

use std::sync::Arc;
use std::time::Duration;

use regent_core::{
    Candidate, FencingToken, LeaseStore, Restart, Status, Supervisor, SupervisorExit,
};
use tokio::sync::{Notify, mpsc};

/// The shortest ttl [`panicking_leader_hands_over`] takes: long enough that
/// a hand-over within [`HANDOVER_BOUND`] can only be a release, never the
/// lease's expiry.
pub const PANIC_TTL: Duration = Duration::from_secs(30);

/// How soon a follower must lead after the leader's task panicked.
pub const HANDOVER_BOUND: Duration = Duration::from_secs(10);

/// Issue 25: a leader task that panics ends its term like any other
/// failure; its lease is given back and the process runs on.
///
/// `a` and `b` are two candidates of one election on one engine (two
/// stores, as two processes would have), each with a ttl of at least
/// [`PANIC_TTL`]. Both run in this process under supervisors: `a` leads
/// first (`Restart::Always`) and its task panics once `b` follows it. Then:
///
/// * `b` leads within [`HANDOVER_BOUND`], a third of the ttl: `a`'s lease was
///   released, not left to expire;
/// * `a`'s supervisor runs on and campaigns again: it follows `b`, and
///   leads a second term once `b`'s task finishes (`Restart::Never`);
/// * `a`'s supervisor returns [`SupervisorExit::Shutdown`] when `a` shuts
///   down: the panic never reached the caller.
///
/// Fencing tokens grow term by term throughout.
///
/// # Panics
///
/// When a step fails or takes longer than its bound, naming the step.
pub async fn panicking_leader_hands_over<S: LeaseStore>(a: Candidate<S>, b: Candidate<S>) {
    assert_eq!(a.election(), b.election(), "one election");
    assert!(
        a.timing().ttl >= PANIC_TTL && b.timing().ttl >= PANIC_TTL,
        "a ttl of at least {PANIC_TTL:?}, or a hand-over within {HANDOVER_BOUND:?} proves nothing"
    );
    let (a_terms, mut a_led) = mpsc::unbounded_channel::<FencingToken>();
    let panic_now = Arc::new(Notify::new());
    let a_run = tokio::spawn({
        let (a, panic_now) = (a.clone(), panic_now.clone());
        let mut terms = 0_u32;
        async move {
            Supervisor::new(a)
                .restart(Restart::Always)
                .run(move |leader| {
                    terms += 1;
                    let first = terms == 1;
                    let _ = a_terms.send(leader.token());
                    let panic_now = panic_now.clone();
                    async move {
                        if first {
                            tokio::select! {
                                () = panic_now.notified() => {
                                    panic!("issue 25: the leader task panics at its third write");
                                }
                                () = leader.cancelled() => {}
                            }
                        } else {
                            leader.cancelled().await;
                        }
                        Ok::<_, std::convert::Infallible>(())
                    }
                })
                .await
        }
    });
    let a_first = within(HANDOVER_BOUND, "a leads the free election", a_led.recv())
        .await
        .expect("a's supervisor runs");

    let (b_terms, mut b_led) = mpsc::unbounded_channel::<FencingToken>();
    let b_done = Arc::new(Notify::new());
    let b_run = tokio::spawn({
        let (b, b_done) = (b.clone(), b_done.clone());
        async move {
            Supervisor::new(b)
                .restart(Restart::Never)
                .run(move |leader| {
                    let _ = b_terms.send(leader.token());
                    let b_done = b_done.clone();
                    async move {
                        tokio::select! {
                            () = b_done.notified() => {}
                            () = leader.cancelled() => {}
                        }
                        Ok::<_, std::convert::Infallible>(())
                    }
                })
                .await
        }
    });
    let a_holder = a.holder().clone();
    let mut b_status = b.status();
    within(
        HANDOVER_BOUND,
        "b follows a",
        b_status.wait_for(
            |s| matches!(s, Status::Follower { leader: Some(l) } if l.holder == a_holder),
        ),
    )
    .await
    .expect("b's status channel is open");

    panic_now.notify_one();
    let b_token = within(
        HANDOVER_BOUND,
        "b leads after a's task panicked",
        b_led.recv(),
    )
    .await
    .expect("b's supervisor runs");
    assert!(b_token > a_first, "{b_token} after {a_first}");
    assert!(
        !a_run.is_finished(),
        "a's supervisor ended with its panicking task: {:?}",
        a_run.await
    );

    let b_holder = b.holder().clone();
    let mut a_status = a.status();
    within(
        HANDOVER_BOUND,
        "a campaigns again and follows b",
        a_status.wait_for(
            |s| matches!(s, Status::Follower { leader: Some(l) } if l.holder == b_holder),
        ),
    )
    .await
    .expect("a's status channel is open");
    b_done.notify_one();
    let a_second = within(
        HANDOVER_BOUND,
        "a leads again after b's task finished",
        a_led.recv(),
    )
    .await
    .expect("a's supervisor runs");
    assert!(a_second > b_token, "{a_second} after {b_token}");
    let b_exit = within(HANDOVER_BOUND, "b's supervisor finishes", b_run)
        .await
        .expect("b's supervisor did not panic")
        .expect("b's supervisor ends without an error");
    assert!(matches!(b_exit, SupervisorExit::Finished(_)), "{b_exit:?}");

    a.shutdown().await;
    let a_exit = within(HANDOVER_BOUND, "a's supervisor stops on shutdown", a_run)
        .await
        .expect("a's supervisor did not panic")
        .expect("a's supervisor ends without an error");
    assert!(matches!(a_exit, SupervisorExit::Shutdown), "{a_exit:?}");
}

/// `future`'s output, or a panic naming `step` when `bound` passes first.
async fn within<F: Future>(bound: Duration, step: &str, future: F) -> F::Output {
    tokio::time::timeout(bound, future)
        .await
        .unwrap_or_else(|_| panic!("not within {bound:?}: {step}"))
}
