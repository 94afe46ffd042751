//! `regent` on Consul, until Consul joins the test kit's
//! `for_every_engine!` list: status, a graceful handover (released at
//! once) and a crash failover (the session's TTL, up to twice it).
//!
//! ttl 10 s (Consul's minimum) gives (core defaults) renew every 2 s, step
//! down 6 s after the last renewal was sent.

mod common;

use std::time::Duration;

use common::*;
use regent_testkit::engines::Consul;
use rustix::process::Signal;

const TTL: &str = "10s";
const TTL_NS: u64 = 10_000_000_000;

fn sandbox() -> Sandbox {
    let consul =
        Consul::start().unwrap_or_else(|e| panic!("cannot start Consul for this test: {e}"));
    Sandbox::with_engine(Box::new(consul))
}

#[test]
fn status_names_the_leader_and_sigterm_hands_over_at_once() {
    let mut sb = sandbox();
    assert_eq!(sb.status()["leader"], serde_json::Value::Null);
    sb.candidate("c1", TTL, &[]);
    let old = sb.first_start(Duration::from_secs(10));
    sb.candidate("c2", TTL, &[]);
    let status = sb.status();
    assert_eq!(status["leader"]["id"], old.id.as_str(), "{status}");
    assert_eq!(status["leader"]["token"], old.token, "{status}");

    let termed_at = mono_ns();
    sb.by_id(&old.id).signal(Signal::TERM);
    let next = wait_for(
        Duration::from_secs(8),
        "a new leader's task",
        || sb.start_after(old.token),
        || sb.report(),
    );
    let took = next.mono_ns - termed_at;
    eprintln!("consul SIGTERM failover: {:.3}s", secs(took));
    assert!(
        took <= 2_000_000_000,
        "the new task started {:.3}s after SIGTERM: the lock was not released\n{}",
        secs(took),
        sb.report()
    );
    assert_eq!(
        sb.by_id(&old.id).wait_exit(Duration::from_secs(5)).code(),
        Some(0)
    );
}

#[test]
fn kill_9_of_the_leader_fails_over_within_twice_the_ttl() {
    let mut sb = sandbox();
    sb.candidate("c1", TTL, &[]);
    let old = sb.first_start(Duration::from_secs(10));
    sb.candidate("c2", TTL, &[]);
    std::thread::sleep(Duration::from_millis(500));
    let killed_at = mono_ns();
    sb.by_id(&old.id).signal(Signal::KILL);
    // Consul ends the session between one and two TTLs after its last
    // renewal (lock delay 0); the follower's blocking query wakes at once.
    let bound = 2 * TTL_NS + 3_000_000_000;
    let next = wait_for(
        Duration::from_secs(30),
        "a new leader's task",
        || sb.start_after(old.token),
        || sb.report(),
    );
    let took = next.mono_ns - killed_at;
    eprintln!("consul kill -9 failover: {:.3}s", secs(took));
    assert!(
        took <= bound,
        "the new task started {:.3}s after kill -9, later than 2 x ttl + 3 s\n{}",
        secs(took),
        sb.report()
    );
    assert!(next.token > old.token, "{}", sb.report());
}
