//! `regent run --store redis+sentinel://…` (issue 31): a primary, a
//! replica and three Sentinels per test (`RedisSentinels`, ttl 2 s).
//! kill -9, SIGTERM and SIGSTOP of the leader hand the command over as on
//! the other stores; across a Sentinel failover under a leader, tokens
//! only grow, even when the promoted replica missed the term, and the old
//! leader's command ends by its own deadline.

mod common;

use std::time::Duration;

use common::*;
use regent_testkit::engines::RedisSentinels;
use rustix::process::Signal;

/// A sandbox on a group of its own.
fn group() -> Sandbox {
    let group = RedisSentinels::start()
        .unwrap_or_else(|e| panic!("cannot start Redis with Sentinels for this test: {e}"));
    let sb = Sandbox::with_engine(Box::new(group));
    assert!(
        sb.store().starts_with("redis+sentinel://"),
        "{}",
        sb.store()
    );
    sb
}

fn sentinels(sb: &mut Sandbox) -> &mut RedisSentinels {
    sb.engine_mut().downcast_mut().expect("a RedisSentinels")
}

/// Starts candidate `id` and waits until `regent status` lists it: it
/// campaigns, and follows if another leads.
fn follower(sb: &mut Sandbox, id: &str) {
    let ttl = sb.ttl();
    sb.candidate(id, &ttl, &[]);
    wait_for(
        Duration::from_secs(10),
        &format!("status to list candidate {id}"),
        || {
            let status = sb.status();
            let listed = status["candidates"].as_array()?;
            listed.iter().any(|c| c["id"] == id).then_some(())
        },
        || sb.report(),
    );
}

/// The first start of a term after `old`'s, within `within`; the old
/// term's command stopped before it and left nothing behind.
fn next_after(sb: &Sandbox, old: &Event, within: Duration) -> Event {
    let next = wait_for(
        within,
        &format!("a term after {}'s token {}", old.id, old.token),
        || sb.start_after(old.token),
        || sb.report(),
    );
    let stop = sb
        .stop_of(&old.id, old.token)
        .unwrap_or_else(|| panic!("{}'s command never saw SIGTERM\n{}", old.id, sb.report()));
    assert!(
        stop.mono_ns < next.mono_ns,
        "{}'s command (token {}) started before {}'s stopped\n{}",
        next.id,
        next.token,
        old.id,
        sb.report()
    );
    sb.wait_term_gone(old, Duration::from_secs(3));
    next
}

fn since(at: u64, e: &Event) -> Duration {
    Duration::from_nanos(e.mono_ns.saturating_sub(at))
}

/// Two candidates at a time (a new one joins after each fault): kill -9 of
/// the leading regent, SIGTERM of the next leader, then SIGSTOP of the
/// third's regent past its ttl. Each time the other candidate leads with a
/// greater token, and the old command stopped before the new one started.
#[test]
fn kill_9_sigterm_and_sigstop_of_the_leader_hand_over_through_sentinels() {
    let mut sb = group();
    let t = sb.timing();
    follower(&mut sb, "c1");
    follower(&mut sb, "c2");
    let first = sb.first_start(Duration::from_secs(10));

    // kill -9: the shim stops the group, then gives the lease back.
    let killed_at = mono_ns();
    sb.by_id(&first.id).signal(Signal::KILL);
    let second = next_after(&sb, &first, t.crash_failover() + Duration::from_secs(5));
    eprintln!("kill -9: next term {:.3?} after", since(killed_at, &second));
    assert_ne!(second.id, first.id);
    assert!(
        since(killed_at, &second) <= t.release_failover(),
        "the lease was not given back, it expired\n{}",
        sb.report()
    );
    let report = sb.report();
    let killed = sb.by_id(&first.id);
    let said = wait_for(
        Duration::from_secs(5),
        "the killed regent's supervisor to say it gave the lease back",
        || Some(killed.stderr()).filter(|e| e.contains("gave the lease back")),
        || report,
    );
    assert!(!said.contains("panicked"), "{said}");

    // SIGTERM: released at once, regent exits 0.
    follower(&mut sb, "c3");
    let termed_at = mono_ns();
    sb.by_id(&second.id).signal(Signal::TERM);
    let third = next_after(&sb, &second, Duration::from_secs(8));
    eprintln!("SIGTERM: next term {:.3?} after", since(termed_at, &third));
    assert_eq!(third.id, "c3");
    assert!(
        since(termed_at, &third) <= t.release_failover(),
        "the lease was not released, it expired\n{}",
        sb.report()
    );
    let code = sb
        .by_id(&second.id)
        .wait_exit(Duration::from_secs(5))
        .code();
    assert_eq!(code, Some(0), "{}", sb.report());

    // SIGSTOP of regent until its lease ran out: the shim stops the
    // command at the step-down deadline; c4 leads once the lease expired.
    follower(&mut sb, "c4");
    let stopped_at = mono_ns();
    sb.by_id("c3").signal(Signal::STOP);
    let fourth = next_after(&sb, &third, t.crash_failover() + Duration::from_secs(5));
    let stop = sb
        .stop_of("c3", third.token)
        .expect("checked by next_after");
    eprintln!(
        "SIGSTOP: command stopped {:.3?} after, next term {:.3?} after",
        since(stopped_at, &stop),
        since(stopped_at, &fourth)
    );
    assert_eq!(fourth.id, "c4");
    assert!(
        since(stopped_at, &stop) <= t.renew_deadline + Duration::from_millis(300),
        "the command outlived the step-down deadline\n{}",
        sb.report()
    );
    // Not released: the lease ran out, at least a ttl after the last
    // renewal, which was sent at most a renew interval before SIGSTOP.
    assert!(
        since(stopped_at, &fourth) >= t.ttl - t.renew_every,
        "{}",
        sb.report()
    );
    // Resumed, c3 learns its term ended and follows: no term of its own.
    assert!(stopped(sb.by_id("c3").pid));
    sb.by_id("c3").signal(Signal::CONT);
    let report = sb.report();
    let c3 = sb.by_id("c3");
    wait_for(
        Duration::from_secs(5),
        "the resumed c3 to say its term ended",
        || {
            let err = c3.stderr();
            err.contains("leadership ended election=e holder=c3")
                .then_some(())
        },
        || format!("{report}\n--- c3 now\n{}", c3.stderr()),
    );
    assert!(sb.by_id("c3").running(), "{}", sb.report());
    assert_eq!(sb.status()["leader"]["id"], "c4", "{}", sb.report());
    assert_eq!(
        sb.starts().last().map(|e| e.token),
        Some(fourth.token),
        "{}",
        sb.report()
    );
    assert_tokens_increase(&sb.starts(), &sb.report());
}

/// Kills the primary under a leader and waits for the promotion; returns
/// when (by the task log's clock) the primary died.
fn fail_over(sb: &mut Sandbox) -> u64 {
    let killed_at = mono_ns();
    let report = sb.report();
    sentinels(sb)
        .fail_over(Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("the Sentinels did not fail over: {e}\n{report}"));
    eprintln!(
        "failover: promoted {:.3}s after the kill",
        secs(mono_ns() - killed_at)
    );
    killed_at
}

/// What every failover test checks of the old term and the next one: the
/// old command ends by regent's own deadline (its lease is lost: with a
/// ttl of 2 s the deadline is 1.2 s after the last renewal was sent, and
/// Sentinel needs 1 s to find the primary down before it even votes), and
/// a term starts after it whose token is above every token before the
/// failover.
fn after_failover(sb: &Sandbox, old: &Event, killed_at: u64) -> Event {
    let t = sb.timing();
    let stop = wait_for(
        t.renew_deadline + Duration::from_secs(3),
        "the old leader to stop its command",
        || sb.stop_of(&old.id, old.token),
        || sb.report(),
    );
    assert!(
        since(killed_at, &stop) <= t.renew_deadline + Duration::from_millis(300),
        "the old command ran {:.3?} after the primary died, past its deadline\n{}",
        since(killed_at, &stop),
        sb.report()
    );
    let next = wait_for(
        t.crash_failover() + Duration::from_secs(10),
        "a term on the promoted replica",
        || sb.start_after(old.token),
        || sb.report(),
    );
    eprintln!(
        "failover: old command stopped {:.3?}, next term ({}) {:.3?} after the kill",
        since(killed_at, &stop),
        next.id,
        since(killed_at, &next)
    );
    let before = sb.starts().into_iter().filter(|e| e.mono_ns < killed_at);
    let highest = before.map(|e| e.token).max().expect("a term before");
    assert!(
        sb.starts()
            .iter()
            .filter(|e| e.mono_ns > killed_at)
            .all(|e| e.token > highest),
        "a token after the failover is not above {highest}\n{}",
        sb.report()
    );
    assert_tokens_increase(&sb.starts(), &sb.report());
    next
}

/// The replica is in sync: the lease lives on the promoted one, and expires
/// there by the server's clock, a ttl after the last renewal (at worst
/// the one before, if the last one did not reach the replica): after the
/// old leader's deadline. So the old command stopped before the next term
/// began, whoever's it is.
#[test]
fn a_sentinel_failover_under_a_leader_ends_its_term_before_the_next() {
    let mut sb = group();
    follower(&mut sb, "c1");
    follower(&mut sb, "c2");
    let old = sb.first_start(Duration::from_secs(10));
    let killed_at = fail_over(&mut sb);
    let next = after_failover(&sb, &old, killed_at);
    let stop = sb.stop_of(&old.id, old.token).expect("checked");
    assert!(
        stop.mono_ns < next.mono_ns,
        "two commands ran at once\n{}",
        sb.report()
    );
    sb.wait_term_gone(&old, Duration::from_secs(3));
}

/// The replica missed the whole term (`pause_replica` before the first
/// candidate starts): the promoted server has no lease and no token
/// counter, so the next term may begin while the old command still runs
/// (replication is asynchronous: what the store's docs promise is the
/// token, not the lease). The token still grows, from the server's clock.
#[test]
fn a_sentinel_failover_to_a_replica_that_missed_the_term_still_grows_tokens() {
    let mut sb = group();
    sentinels(&mut sb).pause_replica();
    follower(&mut sb, "c1");
    follower(&mut sb, "c2");
    let old = sb.first_start(Duration::from_secs(10));
    let killed_at = fail_over(&mut sb);
    // The promoted server never saw the old term: its counter is empty, or
    // already a later term's (a candidate may have won there meanwhile),
    // never the old token.
    let counter = sentinels(&mut sb)
        .primary()
        .cli(&["GET", &format!("regent:{{{ELECTION}}}:token")])
        .unwrap_or_else(|e| panic!("GET on the promoted replica: {e}"));
    assert_ne!(
        counter.trim().parse::<u64>().ok(),
        Some(old.token),
        "the promoted replica holds the old term's token: it did not miss it\n{}",
        sb.report()
    );
    after_failover(&sb, &old, killed_at);
    sb.wait_term_gone(&old, Duration::from_secs(3));
}
