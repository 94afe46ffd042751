//! The lease core simulated: thousands of seeded runs of a few candidates
//! under faults, each judged against the store's own record of its
//! leases; and one hundred candidates per store style.
//!
//! # A seed
//!
//! A seed is a whole run. From it [`Plan::small`](sim::Plan::small) draws
//! the store style (even seeds race, odd seeds queue), 3 to 12 candidates,
//! a ttl of 1 to 30 s, each candidate's timing (the default, one that
//! steps down a millisecond before its local lease deadline, or any within
//! the rules), the store's clock drift, expiry slack and granted ttl, how
//! long each phase lasts (calm, faults, calm again: about 6 to 15 ttls in
//! all), and the seeds of the generators that choose, as the run goes,
//! each leader's hold time and whether it proclaims, resigns or drops its
//! guard, and each fault episode. The core's own jitter draws from
//! fastrand's generator of the thread, seeded from the seed too. The run
//! goes on a fresh current-thread runtime on paused time
//! ([`sim::run`]), so it takes no wall-clock time beyond the computing.
//!
//! # Faults
//!
//! In episodes, one at a time, each undone at its end (see
//! [`sim::Fault`]): the leader cut off from the store, or another
//! candidate; a burst of failed calls; slow requests and slow replies;
//! lost answers (the store applied the call, and the caller hears an error
//! or nothing until its own timeout: `MemoryStore::lose_next_replies`); a
//! candidate's process paused, most often the leader's, for up to two
//! ttls. For the whole run, the store's clock may run up to 1 % faster or
//! slower than the candidates' (`MemoryStore::set_clock_drift`): the
//! drift the core's timing allows for, and no more.
//!
//! A paused process ([`process`]) sends nothing and takes in nothing: its
//! calls and watch items wait for the resume, and its application stops.
//! The core's timers are not paused (tokio cannot pause some tasks of a
//! runtime and not others, and the renewal task is the core's own), so a
//! paused leader still steps down on time; what the pause tests is the
//! rest: requests applied late, answers that arrive long after the
//! deadlines they were sent for, releases and acquires that land after
//! another holder took over, and an application that must ask its guard
//! ([`Leadership::check`](regent_core::Leadership::check)) before it acts
//! again. Its belief is recorded as lasting until it noticed the end at
//! the resume, and, for acting, as ending when it was paused if the guard
//! refused at the resume.
//!
//! # The checks
//!
//! After every seed, against the store's log of every record it created
//! and how each ended (`MemoryStore::record_log`): no candidate failed; no
//! two leaders at once and fencing tokens strictly growing
//! ([`regent_testkit::History`]); every leader acted only while its record
//! led by the store's clock; at most one believing leader at any instant
//! whose lease was still valid by the store's clock; every release by the
//! record's own holder; and someone leads again after the faults. See
//! [`check`]. Two broken configurations show the checks can fail: a
//! leader that ignores its step-down, and a store clock 2 % fast.
//!
//! # Running
//!
//! `lease_simulation` runs 10,000 seeds from a random start, on two
//! threads, and prints `lease simulation: N seeds, M faults, 0
//! violations` (`--nocapture`). A violation prints its seed; then
//!
//! ```text
//! REGENT_SEED=N cargo test -p regent-core --test safety --all-features lease_simulation -- --nocapture
//! ```
//!
//! replays that seed alone and prints its whole story. `REGENT_SEEDS=N`
//! runs N seeds instead of 10,000 (a campaign: `REGENT_SEEDS=1000000`).
//! `REGENT_SEED` also seeds the hundred-candidate runs, which otherwise
//! draw a seed of their own.
//!
//! # What a seed reproduces
//!
//! Everything, event for event, on the same code and the same tokio: the
//! plan, every draw of the core's jitter, and the order in which tasks run
//! and wake (a current-thread runtime polls ready tasks in a fixed order,
//! and paused time advances only when all are idle).
//! `a_seed_replays_exactly` runs seeds twice and compares every belief,
//! record and call count (`REGENT_REPLAYS=N` for more than 12).
//!
//! tokio also draws from a generator of its own, which only
//! `tokio_unstable` can seed; here nothing depends on it. It picks the
//! branch an unbiased `select!` polls first: every `select!` a simulated
//! candidate goes through is `biased` (the core's, the memory store's
//! watch, this test's). And it spreads the receivers of a
//! `tokio::sync::watch` channel over eight `Notify`s, so that they wake
//! in a random order: the memory store's watches and the pause switch
//! wake through one `Notify` each, in the order their waiters came, and
//! the core's own watch channels (status, lease state) have no waiters
//! here. The replay test found that one: with the memory store's watches
//! on a watch channel, one seed's followers won a released lease in a
//! different order on each run.
//!
//! A seed does not reproduce a run on other code: a change to the core
//! that draws jitter once more, or to how a plan is drawn, gives the seed
//! another run.

mod check;
mod process;
mod sim;

use std::panic::AssertUnwindSafe;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use regent_core::StoreStyle;
use regent_testkit::History;

use check::{Kind, Violation};
use sim::{FaultCounts, Outcome, Plan};

/// Seeds per run of `lease_simulation` unless `REGENT_SEEDS` says.
const SEEDS: u64 = 10_000;

fn env_u64(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    Some(
        value
            .parse()
            .unwrap_or_else(|e| panic!("{name}={value}: not a number: {e}")),
    )
}

/// Runs `plan`, catching a panic of the run itself as a failure.
fn run(plan: Plan) -> Result<Outcome, Violation> {
    let seed = plan.seed;
    std::panic::catch_unwind(AssertUnwindSafe(|| sim::run(plan))).map_err(|panic| {
        let message = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("a panic");
        Violation {
            kind: Kind::Failed,
            message: format!("seed {seed}: the run panicked: {message}"),
        }
    })
}

/// What came of a plan: its outcome, unless the run itself panicked, and
/// the checks' verdict.
struct Judged {
    outcome: Option<Outcome>,
    verdict: Result<(), Violation>,
}

/// Runs and checks `plan`.
fn judge(plan: Plan) -> Judged {
    match run(plan) {
        Ok(outcome) => Judged {
            verdict: check::check(&outcome),
            outcome: Some(outcome),
        },
        Err(v) => Judged {
            outcome: None,
            verdict: Err(v),
        },
    }
}

#[derive(Default)]
struct Tally {
    seeds: u64,
    race: u64,
    faults: FaultCounts,
    violations: Vec<(u64, StoreStyle, Violation)>,
}

/// Runs `count` seeds from `first` on `threads` threads, each seed on a
/// runtime of its own.
fn simulate(first: u64, count: u64, threads: usize, plan: fn(u64) -> Plan) -> Tally {
    let next = AtomicU64::new(0);
    let tally = Mutex::new(Tally::default());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                let mut mine = Tally::default();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= count {
                        break;
                    }
                    let plan = plan(first.wrapping_add(i));
                    let (seed, style) = (plan.seed, plan.style);
                    mine.seeds += 1;
                    mine.race += u64::from(style == StoreStyle::Race);
                    let judged = judge(plan);
                    if let Some(outcome) = &judged.outcome {
                        mine.faults.merge(&outcome.faults);
                    }
                    if let Err(v) = judged.verdict {
                        mine.violations.push((seed, style, v));
                    }
                }
                let mut all = tally.lock().unwrap();
                all.seeds += mine.seeds;
                all.race += mine.race;
                all.faults.merge(&mine.faults);
                all.violations.append(&mut mine.violations);
            });
        }
    });
    let mut tally = tally.into_inner().unwrap();
    tally.violations.sort_by_key(|(seed, ..)| *seed);
    tally
}

/// Thousands of small seeded runs, race and queue stores alike.
#[test]
fn lease_simulation() {
    if let Some(seed) = env_u64("REGENT_SEED") {
        let judged = judge(Plan::small(seed));
        if let Some(outcome) = &judged.outcome {
            println!("{}", outcome.story());
        }
        if let Err(v) = judged.verdict {
            panic!("seed {seed}: {v}");
        }
        let faults = judged.outcome.map_or(0, |o| o.faults.total());
        println!("lease simulation: 1 seeds, {faults} faults, 0 violations");
        return;
    }
    let count = env_u64("REGENT_SEEDS").unwrap_or(SEEDS);
    let first = fastrand::u64(..);
    let tally = simulate(first, count, 2, Plan::small);
    for (seed, style, v) in tally.violations.iter().take(10) {
        println!(
            "seed {seed} ({style:?} store): {v}\n  replay: REGENT_SEED={seed} cargo test \
             -p regent-core --test safety --all-features lease_simulation -- --nocapture"
        );
    }
    println!(
        "lease simulation: {} seeds, {} faults, {} violations",
        tally.seeds,
        tally.faults.total(),
        tally.violations.len()
    );
    println!(
        "  seeds {first}.. ({} race, {} queue); faults: {}",
        tally.race,
        tally.seeds - tally.race,
        tally.faults
    );
    assert!(
        tally.violations.is_empty(),
        "{} of {} seeds broke a check; the first: seed {}: {}",
        tally.violations.len(),
        tally.seeds,
        tally.violations[0].0,
        tally.violations[0].2
    );
    assert_eq!(tally.seeds, count);
}

/// The seeds run twice give the same run, event for event.
#[test]
fn a_seed_replays_exactly() {
    let fingerprint = |o: &Outcome| {
        let beliefs: Vec<_> = o
            .beliefs
            .iter()
            .map(|b| {
                (
                    b.holder.clone(),
                    b.token,
                    o.since(b.start),
                    b.end.map(|t| o.since(t)),
                    b.noticed.map(|t| o.since(t)),
                )
            })
            .collect();
        let log: Vec<_> = o
            .log
            .iter()
            .map(|l| {
                (
                    l.holder.clone(),
                    l.token,
                    o.since(l.created),
                    l.end.as_ref().map(|e| (o.since(e.at), e.cause.clone())),
                )
            })
            .collect();
        (beliefs, log, o.faults, o.calls, o.since(o.stop))
    };
    let first = fastrand::u64(..);
    let seeds = env_u64("REGENT_REPLAYS").unwrap_or(12);
    for seed in first..first + seeds {
        let once = run(Plan::small(seed)).unwrap();
        let again = run(Plan::small(seed)).unwrap();
        assert!(once.faults.total() > 0, "seed {seed}: no faults");
        assert_eq!(
            fingerprint(&once),
            fingerprint(&again),
            "seed {seed} ran differently twice"
        );
    }
}

/// Broken on purpose: leaders that believe they lead until they have held
/// the term as long as they meant to, whatever their guard says. Caught.
#[test]
fn the_checks_catch_a_leader_that_ignores_its_step_down() {
    let mut caught = 0;
    for seed in 0..40 {
        let mut plan = Plan::small(seed);
        plan.ignores_step_down = true;
        // The fault that ends a running leader's lease under it.
        plan.odds = [1, 0, 0, 0, 0, 0];
        if let Err(v) = judge(plan).verdict {
            assert!(
                matches!(v.kind, Kind::BeyondLease | Kind::Unsafe),
                "seed {seed}: {v}"
            );
            caught += 1;
        }
    }
    println!("a leader that ignores its step-down: caught in {caught} of 40 seeds");
    assert!(caught >= 10, "only {caught} of 40 seeds caught");
}

/// Broken on purpose: a store whose clock runs 2 % faster than the
/// candidates', twice the drift their timing allows for, with timing that
/// steps down just before the local lease deadline. Caught; the same runs
/// at 1 % pass.
#[test]
fn the_checks_catch_a_store_clock_beyond_the_drift_bound() {
    let plan = |seed: u64, drift: f64| {
        let mut plan = Plan::small(seed);
        plan.clock_drift = drift;
        plan.granted_ttl = None;
        // Only the fault that keeps a running leader from renewing.
        plan.odds = [1, 0, 0, 0, 0, 0];
        for s in &mut plan.settings {
            let usable = regent_core::Timing::new(plan.ttl).usable();
            let deadline = usable - Duration::from_millis(1);
            *s = sim::Settings {
                renew_every: Some(deadline / 3),
                renew_deadline: Some(deadline),
                grace: Some(usable - deadline),
            };
        }
        plan
    };
    let mut caught = 0;
    for seed in 0..40 {
        if let Err(v) = judge(plan(seed, 0.02)).verdict {
            assert!(
                matches!(v.kind, Kind::BeyondLease | Kind::Unsafe),
                "seed {seed}: {v}"
            );
            caught += 1;
        }
        if let Err(v) = judge(plan(seed, 0.01)).verdict {
            panic!("seed {seed} at 1 %: {v}");
        }
    }
    println!("a store clock 2 % fast: caught in {caught} of 40 seeds");
    assert!(caught >= 10, "only {caught} of 40 seeds caught");
}

fn hundred_candidates(style: StoreStyle) {
    let seed = env_u64("REGENT_SEED").unwrap_or_else(|| fastrand::u64(..));
    let plan = Plan::hundred(seed, style);
    let calm = plan.calm_first;
    let judged = judge(plan);
    if let Err(v) = judged.verdict {
        if let Some(outcome) = &judged.outcome {
            println!("{}", outcome.story());
        }
        panic!("seed {seed}: {v}");
    }
    let outcome = judged.outcome.expect("checked");
    let start = outcome.start;
    let history = History::new();
    for b in &outcome.beliefs {
        history.begin(&b.holder, b.token, b.start);
        if let Some(end) = b.end {
            history.end(&b.holder, b.token, end);
        }
    }
    let summary = history.assert_ok();
    let intervals = history.intervals();
    let first = intervals.first().expect("someone led").start;
    assert_eq!(
        first, start,
        "seed {seed}: the first leader is elected at once"
    );
    // Without faults, leadership passes without a gap: exactly one believed
    // leader at every instant.
    let mut t = first;
    while t < start + calm {
        let n = history.leaders_at(t).len();
        assert_eq!(n, 1, "seed {seed}: {n} leaders at +{:?}", t - start);
        t += Duration::from_millis(50);
    }
    let recovered_at = outcome.stop;
    assert!(
        !history
            .leaders_at(recovered_at - Duration::from_millis(1))
            .is_empty(),
        "seed {seed}: no leader after the faults stopped"
    );
    assert!(
        summary.terms > 20,
        "seed {seed}: only {} terms",
        summary.terms
    );
    assert!(
        summary.holders > 10,
        "seed {seed}: only {} holders led",
        summary.holders
    );
    assert!(
        outcome.faults.total() > 10,
        "seed {seed}: only {} faults",
        outcome.faults.total()
    );
}

/// One hundred candidates on one election, on paused time: without faults
/// exactly one leader at every instant and the first elected at once;
/// under faults never two; leadership back after them.
#[test]
fn hundred_candidates_race_store_never_two_leaders() {
    hundred_candidates(StoreStyle::Race);
}

/// As the race store's, on a queue store.
#[test]
fn hundred_candidates_queue_store_never_two_leaders() {
    hundred_candidates(StoreStyle::Queue);
}

/// The checks that the memory store cannot break, broken by hand.
mod judged_by_hand {
    use std::time::Duration;

    use regent_core::{FencingToken, HolderId, StoreStyle};
    use tokio::time::Instant;

    use crate::check::{Case, Kind, Lead, Life, judge, leads};
    use crate::sim::Belief;

    fn id(s: &str) -> HolderId {
        HolderId::new(s).unwrap()
    }

    fn s(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    fn life(t0: Instant, who: &str, token: u64, created: u64, end: Option<u64>) -> Life {
        Life {
            holder: id(who),
            token: FencingToken::new(token),
            created: t0 + s(created),
            end: end.map(|e| t0 + s(e)),
            released_by: None,
        }
    }

    fn belief(t0: Instant, who: &str, token: u64, from: u64, to: u64, noticed: u64) -> Belief {
        Belief {
            holder: id(who),
            token: FencingToken::new(token),
            start: t0 + s(from),
            end: Some(t0 + s(to)),
            noticed: Some(t0 + s(noticed)),
        }
    }

    fn case(t0: Instant, style: StoreStyle, beliefs: &[Belief], lives: Vec<Life>) -> Case<'_> {
        Case {
            style,
            start: t0,
            beliefs,
            lives,
            failures: &[],
            recovery: None,
        }
    }

    #[test]
    fn a_queue_record_leads_once_those_before_it_ended() {
        let t0 = Instant::now();
        let lives = [
            life(t0, "a", 1, 0, Some(10)),
            life(t0, "b", 2, 1, Some(15)),
            life(t0, "c", 3, 2, Some(12)),
            life(t0, "d", 4, 3, None),
            life(t0, "e", 5, 20, None),
        ];
        let lead = |from, until: Option<u64>| {
            Some(Lead {
                from: t0 + s(from),
                until: until.map(|u| t0 + s(u)),
            })
        };
        assert_eq!(
            leads(StoreStyle::Queue, &lives),
            [
                lead(0, Some(10)),
                lead(10, Some(15)),
                None,
                lead(15, None),
                None
            ]
        );
        assert_eq!(
            leads(StoreStyle::Race, &lives)[2],
            lead(2, Some(12)),
            "on a race store every record leads while it lives"
        );
    }

    #[test]
    fn a_safe_hand_over_passes() {
        let t0 = Instant::now();
        let beliefs = [belief(t0, "a", 1, 0, 6, 6), belief(t0, "b", 2, 10, 12, 12)];
        let lives = vec![
            life(t0, "a", 1, 0, Some(10)),
            life(t0, "b", 2, 10, Some(13)),
        ];
        judge(&case(t0, StoreStyle::Race, &beliefs, lives)).unwrap();
    }

    #[test]
    fn two_records_leading_at_once_are_caught() {
        // A store that let b in while a's record lived: each believed only
        // while its record lived, but the leases overlapped.
        let t0 = Instant::now();
        let beliefs = [belief(t0, "a", 1, 0, 6, 6), belief(t0, "b", 2, 5, 9, 9)];
        let lives = vec![life(t0, "a", 1, 0, Some(10)), life(t0, "b", 2, 5, Some(20))];
        let v = judge(&case(t0, StoreStyle::Race, &beliefs, lives)).unwrap_err();
        assert_eq!(v.kind, Kind::Unsafe, "{v}");
    }

    #[test]
    fn a_paused_belief_is_judged_while_its_lease_was_valid() {
        // a acted until its pause at 3 s and noticed the end at 30 s; its
        // lease lived until 10 s. b led from 10 s: fine. A store that
        // handed b the lease at 8 s, while a's record still lived, is not.
        let t0 = Instant::now();
        let beliefs = [belief(t0, "a", 1, 0, 3, 30), belief(t0, "b", 2, 10, 20, 20)];
        let lives = vec![life(t0, "a", 1, 0, Some(10)), life(t0, "b", 2, 10, None)];
        judge(&case(t0, StoreStyle::Race, &beliefs, lives)).unwrap();

        let beliefs = [belief(t0, "a", 1, 0, 3, 30), belief(t0, "b", 2, 8, 20, 20)];
        let lives = vec![life(t0, "a", 1, 0, Some(10)), life(t0, "b", 2, 8, None)];
        let v = judge(&case(t0, StoreStyle::Race, &beliefs, lives)).unwrap_err();
        assert_eq!(v.kind, Kind::TwoLiveLeaders, "{v}");
        assert!(
            v.message
                .starts_with("two leaders with valid leases at +8s"),
            "{v}"
        );
    }

    #[test]
    fn acting_past_the_record_s_end_is_caught() {
        let t0 = Instant::now();
        let beliefs = [belief(t0, "a", 1, 0, 11, 11)];
        let lives = vec![life(t0, "a", 1, 0, Some(10))];
        let v = judge(&case(t0, StoreStyle::Race, &beliefs, lives)).unwrap_err();
        assert_eq!(v.kind, Kind::BeyondLease, "{v}");
        assert!(
            v.message.contains("its record led from +0ns until +10s"),
            "{v}"
        );
    }

    #[test]
    fn leading_from_a_place_in_line_before_its_turn_is_caught() {
        let t0 = Instant::now();
        let beliefs = [belief(t0, "a", 1, 0, 5, 5), belief(t0, "b", 2, 6, 8, 8)];
        let lives = vec![life(t0, "a", 1, 0, Some(7)), life(t0, "b", 2, 1, None)];
        let v = judge(&case(t0, StoreStyle::Queue, &beliefs, lives)).unwrap_err();
        assert_eq!(v.kind, Kind::BeyondLease, "{v}");
    }

    #[test]
    fn a_token_the_store_did_not_issue_is_caught() {
        let t0 = Instant::now();
        let beliefs = [belief(t0, "b", 1, 0, 5, 5)];
        let lives = vec![life(t0, "a", 1, 0, Some(10))];
        let v = judge(&case(t0, StoreStyle::Race, &beliefs, lives)).unwrap_err();
        assert_eq!(v.kind, Kind::BeyondLease, "{v}");
    }

    #[test]
    fn a_token_that_goes_back_is_caught() {
        let t0 = Instant::now();
        let beliefs = [belief(t0, "b", 2, 0, 5, 5), belief(t0, "a", 1, 6, 8, 8)];
        let lives = vec![life(t0, "a", 1, 6, Some(10)), life(t0, "b", 2, 0, Some(6))];
        let v = judge(&case(t0, StoreStyle::Race, &beliefs, lives)).unwrap_err();
        assert_eq!(v.kind, Kind::Unsafe, "{v}");
        assert!(v.message.contains("fencing token did not increase"), "{v}");
    }

    #[test]
    fn a_release_by_another_holder_is_caught() {
        let t0 = Instant::now();
        let mut freed = life(t0, "a", 1, 0, Some(4));
        freed.released_by = Some(id("b"));
        let v = judge(&case(t0, StoreStyle::Race, &[], vec![freed])).unwrap_err();
        assert_eq!(v.kind, Kind::ReleasedByAnother, "{v}");
    }

    #[test]
    fn no_leader_after_the_faults_is_caught() {
        let t0 = Instant::now();
        let beliefs = [belief(t0, "a", 1, 0, 5, 5)];
        let lives = vec![life(t0, "a", 1, 0, Some(5))];
        let mut c = case(t0, StoreStyle::Race, &beliefs, lives);
        c.recovery = Some((t0 + s(20), t0 + s(30)));
        assert_eq!(judge(&c).unwrap_err().kind, Kind::NoRecovery);
        c.recovery = Some((t0 + s(4), t0 + s(30)));
        judge(&c).unwrap();
    }

    #[test]
    fn a_failed_candidate_is_caught() {
        let t0 = Instant::now();
        let failures = ["c001: campaign failed".to_owned()];
        let mut c = case(t0, StoreStyle::Race, &[], Vec::new());
        c.failures = &failures;
        assert_eq!(judge(&c).unwrap_err().kind, Kind::Failed);
    }
}
