//! The Azure Blob store when things fail, against Azurite: the Blob
//! service stopped and restarted, paused (SIGSTOP), a leader task that
//! hangs, garbage written into the record behind a leader's back.
//!
//! The tests that fault the service have an Azurite of their own
//! ([`Azurite::start`]), driven through the kit's blocking API from a
//! blocking thread so that the candidates' tasks keep running; the others
//! share the process's Azurite ([`SharedAzurite`]), each in a container of
//! its own. The candidates of the service tests run on the core's default
//! timing at ttl 15 s (renew every 3 s, step down 9 s after the last
//! renewal, followers try every 3 s), the store's default call timeout
//! (5 s): what a user of the store gets.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use regent_azblob::{AzblobStore, DEFAULT_CALL_TIMEOUT, EXPIRY_SLACK, MIN_TTL, StorageAccount};
use regent_core::{
    CampaignError, Candidate, ElectionName, EndReason, ErrorKind, FencingToken, Leadership,
    LeaseStore, Restart, Status, Supervisor, SupervisorExit, TermOutcome, Timing,
};
use regent_testkit::engines::{Azurite, Engine};
use regent_testkit::fixtures::holder;

mod common;
use common::{break_lease, election, operator, share, store};
use tokio::task::JoinHandle;
use tokio::time::{Instant, timeout};

/// How late a timer may fire on a loaded two-core machine: the slack on
/// "at its deadline".
const LATE: Duration = Duration::from_millis(500);

/// An Azurite of the test's own, to fault.
struct OwnAzurite {
    azurite: Arc<Mutex<Azurite>>,
    connection_string: String,
}

impl OwnAzurite {
    async fn start() -> Self {
        let azurite = tokio::task::spawn_blocking(Azurite::start)
            .await
            .expect("the start task ran")
            .unwrap_or_else(|e| panic!("cannot start Azurite for this test: {e}"));
        Self {
            connection_string: azurite.connection_string(),
            azurite: Arc::new(Mutex::new(azurite)),
        }
    }

    /// Runs `fault` on Azurite from a blocking thread: the kit's calls
    /// block (a stop until node has exited, a restart until it answers).
    async fn fault<T: Send + 'static>(
        &self,
        fault: impl FnOnce(&mut Azurite) -> T + Send + 'static,
    ) -> T {
        let azurite = self.azurite.clone();
        tokio::task::spawn_blocking(move || fault(&mut azurite.lock().expect("not poisoned")))
            .await
            .expect("the fault ran")
    }

    /// A store with the default call timeout.
    fn store(&self) -> AzblobStore {
        let account = StorageAccount::from_connection_string(&self.connection_string)
            .expect("the kit's connection string");
        AzblobStore::builder(account, "regent")
            .build()
            .expect("build the store")
    }

    /// Azurite's log, for failure messages.
    async fn log(&self) -> String {
        self.fault(|a| a.log_tail(30)).await
    }
}

/// A candidate on the core's defaults at ttl 15 s.
fn default_candidate(store: AzblobStore, e: &ElectionName, who: &str) -> Candidate<AzblobStore> {
    Candidate::builder(store, e.clone(), holder(who))
        .ttl(MIN_TTL)
        .build()
        .expect("the default timing is valid")
}

type Campaign = JoinHandle<Result<Leadership, CampaignError>>;

fn spawn_campaign(c: &Candidate<AzblobStore>) -> Campaign {
    let c = c.clone();
    tokio::spawn(async move { c.campaign().await })
}

/// Waits until `c` follows the term of `holder` with `token`: its status
/// names it.
async fn until_following(
    c: &Candidate<AzblobStore>,
    holder: &str,
    token: FencingToken,
    within: Duration,
) {
    let mut status = c.status();
    timeout(
        within,
        status.wait_for(|s| {
            matches!(s, Status::Follower { leader: Some(l) }
                if l.holder.as_str() == holder && l.token == token)
        }),
    )
    .await
    .unwrap_or_else(|_| {
        panic!(
            "{} does not follow {holder}'s term {token} within {within:?}: {:?}",
            c.holder(),
            *c.status().borrow()
        )
    })
    .expect("the candidate lives");
}

/// Waits until `c`'s status no longer claims leadership (the core sets it
/// a moment after the end).
async fn until_stepped_down(c: &Candidate<AzblobStore>) {
    let mut status = c.status();
    timeout(
        LATE,
        status.wait_for(|s| *s == Status::Follower { leader: None }),
    )
    .await
    .unwrap_or_else(|_| {
        panic!(
            "{} still claims to lead: {:?}",
            c.holder(),
            *c.status().borrow()
        )
    })
    .expect("the candidate lives");
}

/// Two candidates on the core's defaults: `a` leads and has renewed once
/// (so that a step-down is measured from a renewal, not from the acquire),
/// `b` campaigns and follows it.
struct Election {
    a: Candidate<AzblobStore>,
    b: Candidate<AzblobStore>,
    a_leads: Leadership,
    b_campaign: Campaign,
    timing: Timing,
}

impl Election {
    async fn start(azurite: &OwnAzurite) -> Self {
        let e = election("coordinator");
        let a = default_candidate(azurite.store(), &e, "a");
        let b = default_candidate(azurite.store(), &e, "b");
        let timing = *a.timing();
        let a_leads = timeout(Duration::from_secs(10), a.campaign())
            .await
            .expect("a leads at once")
            .expect("a leads");
        let b_campaign = spawn_campaign(&b);
        until_following(&b, "a", a_leads.token(), timing.retry_every * 2).await;
        let mut state = a_leads.lease_state();
        timeout(timing.renew_every * 3, state.changed())
            .await
            .unwrap_or_else(|_| panic!("no renewal within {:?}", timing.renew_every * 3))
            .expect("the leadership lives");
        Self {
            a,
            b,
            a_leads,
            b_campaign,
            timing,
        }
    }
}

/// The leader's end after an outage that began at `outage` (the fault
/// sent) and was complete at `down` (the fault done): by its renew
/// deadline, counted from its last renewal, which was sent before the
/// service went down; never beyond. Returns how long after the outage
/// began the leader stepped down, and when its last renewal was sent.
async fn assert_steps_down_by_its_deadline(
    a: &Candidate<AzblobStore>,
    leadership: &Leadership,
    outage: Instant,
    down: Instant,
    what: &str,
) -> (Duration, Instant) {
    let t = *leadership.timing();
    let bound = t.renew_deadline + DEFAULT_CALL_TIMEOUT;
    let ended = timeout(bound, leadership.until_ended())
        .await
        .unwrap_or_else(|_| {
            panic!("the leader still leads {bound:?} after the service was {what}")
        });
    let state = *leadership.lease_state().borrow();
    let last_renewal = state.step_down_at - t.renew_deadline;
    let after_outage = ended.at - outage;
    eprintln!(
        "service {what}: the leader stepped down {after_outage:.3?} after it, {:.3?} after its \
         last renewal was sent ({:?})",
        ended.at - last_renewal,
        ended.reason
    );
    assert_eq!(ended.reason, EndReason::DeadlinePassed, "{ended:?}");
    assert!(
        last_renewal <= down,
        "a renewal succeeded {:?} after the service was {what}",
        last_renewal - down
    );
    assert!(
        ended.at >= state.step_down_at,
        "stepped down {:?} before its deadline",
        state.step_down_at - ended.at
    );
    assert!(
        ended.at <= state.step_down_at + LATE,
        "stepped down {:?} after its deadline",
        ended.at - state.step_down_at
    );
    assert!(after_outage <= bound, "{after_outage:?} > {bound:?}");
    // Over for every user of the guard: the cancellation fires (the core
    // publishes the end a moment before it cancels), the guard vouches for
    // nothing, the candidate no longer claims to lead.
    timeout(LATE, leadership.cancellation().cancelled())
        .await
        .expect("the term's cancellation fires with its end");
    assert_eq!(
        leadership.check().unwrap_err().reason,
        EndReason::DeadlinePassed
    );
    until_stepped_down(a).await;
    (after_outage, last_renewal)
}

/// After the service came back at `back`: one of the two campaigns leads
/// within `within`, with a token above `old`, and the other follows that
/// term; then both candidates stop. Returns the leader and how long after
/// `back` it began.
async fn assert_one_leads_again(
    azurite: &OwnAzurite,
    (a, b): (&Candidate<AzblobStore>, &Candidate<AzblobStore>),
    (a_campaign, b_campaign): (Campaign, Campaign),
    old: FencingToken,
    back: Instant,
    within: Duration,
) -> (String, Duration) {
    let (mut a_campaign, mut b_campaign) = (a_campaign, b_campaign);
    let (won, other) = timeout(within, async {
        tokio::select! {
            r = &mut a_campaign => (r, b_campaign),
            r = &mut b_campaign => (r, a_campaign),
        }
    })
    .await
    .unwrap_or_else(|_| panic!("nobody leads within {within:?} of the service's return"));
    let took = back.elapsed();
    let leads = won
        .expect("the campaign task ran")
        .expect("an outage never ends a campaign");
    let winner = leads.holder().to_string();
    assert!(
        leads.token() > old,
        "{} !> {old}\n{}",
        leads.token(),
        azurite.log().await
    );
    // Exactly one leads: the other follows its term.
    let loser = if winner == "a" { b } else { a };
    let t = a.timing();
    until_following(
        loser,
        &winner,
        leads.token(),
        t.retry_every * 2 + DEFAULT_CALL_TIMEOUT,
    )
    .await;
    assert!(!other.is_finished());

    leads.resign().await.expect("the service is back");
    a.shutdown().await;
    b.shutdown().await;
    assert!(matches!(
        other.await.expect("the campaign task ran"),
        Err(CampaignError::Shutdown)
    ));
    (winner, took)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_stopped_then_restarted_the_leader_steps_down_and_leadership_resumes() {
    let azurite = OwnAzurite::start().await;
    let Election {
        a,
        b,
        a_leads,
        b_campaign,
        timing: t,
    } = Election::start(&azurite).await;
    let old = a_leads.token();

    let stopped_at = Instant::now();
    azurite.fault(Azurite::stop).await;
    let down = Instant::now();
    let (after_stop, _) =
        assert_steps_down_by_its_deadline(&a, &a_leads, stopped_at, down, "stopped").await;
    // a campaigns again, as a supervisor would; its release fails (no
    // service), and the restart ends its lease.
    drop(a_leads);
    let a_campaign = spawn_campaign(&a);

    // The outage goes on for a follower retry interval: neither campaign
    // fails, an unreachable service being a transient error.
    tokio::time::sleep(t.retry_every).await;
    assert!(
        !b_campaign.is_finished() && !a_campaign.is_finished(),
        "a campaign ended while the service was down: a {a_campaign:?}, b {b_campaign:?}"
    );

    let restarting = Instant::now();
    azurite
        .fault(Azurite::restart)
        .await
        .unwrap_or_else(|e| panic!("restart Azurite: {e}"));
    let restarted = Instant::now();
    // The followers back off no longer than a retry interval, and the
    // restart ended every finite lease: one of them leads at its next try.
    let (winner, took) = assert_one_leads_again(
        &azurite,
        (&a, &b),
        (a_campaign, b_campaign),
        old,
        restarted,
        t.retry_every + DEFAULT_CALL_TIMEOUT,
    )
    .await;
    eprintln!(
        "service stopped (in {:.3?}) and restarted (in {:.3?}): the leader stepped down \
         {after_stop:.3?} after the stop; {winner} led {took:.3?} after the restart",
        down - stopped_at,
        restarted - restarting,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_paused_renewals_hang_and_the_leader_still_steps_down_at_its_deadline() {
    let azurite = OwnAzurite::start().await;
    let Election {
        a,
        b,
        a_leads,
        b_campaign,
        timing: t,
    } = Election::start(&azurite).await;
    let old = a_leads.token();

    let paused_at = Instant::now();
    azurite.fault(Azurite::pause).await;
    let down = Instant::now();
    // Each renewal hangs until the call timeout ends it; the leader steps
    // down on its own clock all the same.
    let (after_pause, last_renewal) =
        assert_steps_down_by_its_deadline(&a, &a_leads, paused_at, down, "paused").await;
    drop(a_leads);
    let a_campaign = spawn_campaign(&a);

    // A request to the paused service: no answer, and the call timeout
    // ends it; no retry goes on behind it.
    let probe = Instant::now();
    let err = azurite
        .store()
        .current_leader(a.election())
        .await
        .expect_err("a paused service answers nothing");
    let probe_took = probe.elapsed();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(
        probe_took >= DEFAULT_CALL_TIMEOUT && probe_took <= DEFAULT_CALL_TIMEOUT + LATE,
        "a call to the paused service ended after {probe_took:?}: {err}"
    );
    assert!(
        !b_campaign.is_finished() && !a_campaign.is_finished(),
        "a campaign ended while the service was paused: a {a_campaign:?}, b {b_campaign:?}"
    );

    let resumed_at = Instant::now();
    azurite.fault(Azurite::resume).await;
    // a's lease lives on the service until its ttl has passed since the
    // last renewal, unless its release gets through after the resume; then
    // one follower's try and a call.
    let lease_free_by = (last_renewal + t.ttl + EXPIRY_SLACK.for_ttl(t.ttl)).max(resumed_at);
    let (winner, took) = assert_one_leads_again(
        &azurite,
        (&a, &b),
        (a_campaign, b_campaign),
        old,
        resumed_at,
        (lease_free_by - resumed_at) + t.retry_every + DEFAULT_CALL_TIMEOUT,
    )
    .await;
    eprintln!(
        "service paused for {:.3?}: the leader stepped down {after_pause:.3?} after the pause; a \
         call to it ended after {probe_took:.3?}; {winner} led {took:.3?} after the resume (the \
         old lease was free by {:.3?} after it)",
        resumed_at - paused_at,
        lease_free_by - resumed_at
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_leader_task_gives_up_the_lease_and_a_follower_leads() {
    let share = share();
    let e = election("hung");
    let health_timeout = Duration::from_secs(2);
    let grace = Duration::from_millis(500);
    let build = |who| {
        Candidate::builder(store(&share), e.clone(), holder(who))
            .ttl(MIN_TTL)
            .retry_every(Duration::from_millis(500))
            .grace(grace)
            .build()
            .expect("valid timing")
    };
    let a = build("a");
    let b = build("b");
    let supervisor = Supervisor::new(a.clone())
        .restart(Restart::Never)
        .health_timeout(health_timeout)
        .expect("a positive timeout");

    // a's task beats for longer than the health timeout, then hangs: no
    // more beats, and deaf to its cancellation.
    let (went_silent, mut silent_rx) = tokio::sync::mpsc::unbounded_channel();
    let a_run = tokio::spawn(async move {
        supervisor
            .run(move |ctx| {
                let went_silent = went_silent.clone();
                async move {
                    let until = Instant::now() + health_timeout * 2;
                    let last_beat = loop {
                        let now = Instant::now();
                        ctx.heartbeat().beat();
                        if now >= until {
                            break now;
                        }
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    };
                    let _ = went_silent.send((ctx.token(), ctx.cancellation().clone(), last_beat));
                    std::future::pending::<Result<(), std::io::Error>>().await
                }
            })
            .await
    });
    let (token, cancelled, last_beat) = timeout(Duration::from_secs(15), silent_rx.recv())
        .await
        .expect("a leads and its task goes silent")
        .expect("the task reports");
    assert!(
        !cancelled.is_cancelled(),
        "a beating task lost its leadership"
    );
    let b_campaign = spawn_campaign(&b);
    timeout(
        health_timeout + Duration::from_secs(1),
        cancelled.cancelled(),
    )
    .await
    .expect("the watchdog ends the term");
    let fired = Instant::now() - last_beat;
    assert!(
        fired >= health_timeout,
        "the watchdog fired {fired:?} after the last beat"
    );

    // The lease is released once the task has been given its grace: b
    // leads long before a's lease (renewed every 3 s, lasting 15 s) could
    // have expired.
    let b_leads = timeout(grace + Duration::from_secs(4), b_campaign)
        .await
        .expect("b leads after the hung task's grace")
        .expect("the campaign task ran")
        .expect("b leads");
    let took = Instant::now() - last_beat;
    eprintln!(
        "hung task: the watchdog fired {fired:.3?} after the last beat, b led {took:.3?} after it"
    );
    assert!(b_leads.token() > token);
    match a_run.await.expect("the supervisor task ran") {
        Ok(SupervisorExit::Finished(term)) => {
            assert_eq!(term.token, token);
            assert!(
                matches!(
                    term.outcome,
                    TermOutcome::LeadershipEnded(EndReason::Unhealthy)
                ),
                "{term:?}"
            );
            assert!(!term.stopped_in_grace, "the task was hung: {term:?}");
        }
        other => panic!("a's supervision: {other:?}"),
    }
    b_leads.resign().await.unwrap();
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_in_the_record_ends_the_leader_and_fails_the_follower_never_a_takeover() {
    let share = share();
    let e = election("garbage");
    let build = |who| {
        Candidate::builder(store(&share), e.clone(), holder(who))
            .ttl(MIN_TTL)
            .renew_every(Duration::from_secs(1))
            .retry_every(Duration::from_millis(500))
            .build()
            .expect("valid timing")
    };
    let a = build("a");
    let b = build("b");
    let a_leads = timeout(Duration::from_secs(10), a.campaign())
        .await
        .expect("a leads at once")
        .expect("a leads");
    let b_campaign = spawn_campaign(&b);
    until_following(&b, "a", a_leads.token(), Duration::from_secs(5)).await;

    // An operator writes metadata regent cannot read, then breaks the
    // lease. In that order: with the lease broken first, b's next retry
    // could take the free blob before the write (412 LeaseIdMissing on a
    // loaded host). Writing under a lease takes its id: a's, from its
    // handle ("LEASE-ID ETAG").
    let lease_id = a_leads
        .lease()
        .handle
        .as_str()
        .split(' ')
        .next()
        .expect("a lease id")
        .to_owned();
    let r = operator(
        &share,
        "PUT",
        e.as_str(),
        &[("comp", "metadata")],
        vec![
            ("x-ms-lease-id", lease_id),
            ("x-ms-meta-regentrecord", "1".into()),
            ("x-ms-meta-regentholder", "someone".into()),
            ("x-ms-meta-regenttoken", "not-a-number".into()),
        ],
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    let written = Instant::now();
    let r = break_lease(&share, e.as_str()).await;
    assert_eq!(r.status, 202, "{r:?}");

    // a ends at its next renewal: the lease is broken, or the record is
    // not one regent reads.
    let ended = timeout(Duration::from_secs(4), a_leads.until_ended())
        .await
        .expect("a's leadership ends at its next renewal");
    assert!(
        matches!(
            ended.reason,
            EndReason::Lost | EndReason::StoreFailed(ErrorKind::Corrupt)
        ),
        "{ended:?}"
    );
    // b's campaign fails with an error naming the blob; it takes nothing.
    let err = timeout(Duration::from_secs(5), b_campaign)
        .await
        .expect("b's campaign ends at its next try")
        .expect("the campaign task ran")
        .expect_err("b never leads on garbage");
    let CampaignError::Store(cause) = &err else {
        panic!("a store error, not {err:?}");
    };
    eprintln!(
        "garbage: a ended {:.3?} after the write ({}); b's campaign failed {:.3?} after it: \
         {cause}",
        ended.at - written,
        ended.reason,
        written.elapsed()
    );
    assert_eq!(cause.kind(), ErrorKind::Corrupt, "{cause}");
    let place = format!("{}/{}", share.container(), e.as_str());
    assert!(cause.to_string().contains(&place), "{cause}");
    drop(a_leads);
    a.shutdown().await;
    b.shutdown().await;
    let props = operator(&share, "HEAD", e.as_str(), &[], vec![]).await;
    assert_ne!(
        props.header("x-ms-lease-state"),
        Some("leased"),
        "{props:?}"
    );
    assert_eq!(
        props.header("x-ms-meta-regenttoken"),
        Some("not-a-number"),
        "the garbage is left for the operator: {props:?}"
    );
}
