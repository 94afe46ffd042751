//! Invariant (quorum mode): once the faults end (partitions healed, every
//! node up and running, the network reliable), all live nodes agree on one
//! leader *that holds a lease* within a bound, and keep agreeing.
//!
//! The bound is the algorithm's own (as in `agreement_after_heal.rs`: the
//! failure timeout, the longest election its timeouts allow, and the time
//! for the result to spread) plus what the lease adds: a node that led
//! before the healing, or that the algorithm still named leader just after
//! it, may hold promises for up to a lease (`lease / (1 − clock_drift)` of
//! true time on a clock at the slow end of the drift bound); the members
//! grant the new leader's waiting ask as those run out, and its grants
//! travel back (two delays); a heartbeat interval covers an ask that
//! missed that moment. (A node restarted by the healing grants nothing
//! for a lease either, which the same term covers.)
//!
//! In the scenario (heartbeat 100 ms, failure timeout and lease 400 ms,
//! clock drift 20 %, delays 1-20 ms after healing and up to 200 ms before
//! it, 3 to 7 members), the lease adds 640 ms to the bounds of
//! `agreement_after_heal.rs`: lowest-ID 1.24 s, Bully 1.6 s, Ring
//! 1.46-2.02 s. Agreement must then hold for another failure timeout (a
//! lease, renewed).

use std::time::Duration;

use regent_peer::sim::{ExtraFaults, Scenario, for_each_seed};
use regent_peer::{Bully, Config, LowestId, Machine, Ring};
use tokio::time::Instant;

const CHAOS: Duration = Duration::from_secs(3);
const MEAN_GAP: Duration = Duration::from_millis(200);

/// What quorum mode adds to the algorithm's own bound.
fn lease_wait(sc: &Scenario) -> Duration {
    sc.lease.div_f64(1.0 - sc.clock_drift) + sc.heartbeat_interval + 2 * sc.delays.1
}

fn run<M: Machine + 'static>(
    test: &str,
    new: fn(Config, Instant) -> M,
    election_and_spread: fn(&Scenario) -> Duration,
) {
    let mut slowest = Duration::ZERO;
    for_each_seed(test, |seed| {
        let sc = Scenario::random(seed);
        let bound = sc.failure_timeout + election_and_spread(&sc) + lease_wait(&sc);
        let mut sim = sc.quorum_sim(seed, new);
        sim.set_extra_faults(ExtraFaults {
            max_pause: Some(2 * sc.lease),
            isolate_leaders: true,
        });
        sim.chaos(CHAOS, MEAN_GAP, sc.delays);
        sim.calm(sc.delays);
        let Some(settled) = sim.settle(bound + sc.failure_timeout) else {
            panic!(
                "no agreement after healing: views {:?}, leaders {:?}",
                sim.views(),
                sim.leaders()
            );
        };
        let leader = sim.node(settled.leader.id).expect("the leader is up");
        assert!(leader.lease_until().is_some(), "agreed without a lease");
        slowest = slowest.max(settled.took);
        assert!(
            settled.took <= bound,
            "agreement on {:?} took {:?}, over the bound of {bound:?}",
            settled.leader,
            settled.took
        );
    });
    eprintln!("{test}: slowest agreement after healing: {slowest:?}");
}

#[test]
fn lowest_id() {
    run(
        "quorum_agreement_after_heal -- lowest_id",
        LowestId::new,
        |sc| 2 * sc.heartbeat_interval,
    );
}

#[test]
fn bully() {
    run("quorum_agreement_after_heal -- bully", Bully::new, |sc| {
        sc.answer_timeout + sc.coordinator_timeout + 2 * sc.heartbeat_interval
    });
}

#[test]
fn ring() {
    run("quorum_agreement_after_heal -- ring", Ring::new, |sc| {
        let n = u32::try_from(sc.ids.len()).expect("a few members");
        let election_timeout = sc.config(sc.ids[0]).build().unwrap().election_timeout();
        election_timeout + 2 * n * sc.delays.1
    });
}
