//! Invariant of the simulator itself: one seed gives one run, so a seed
//! printed by a failing test replays the failure. The same seed run twice
//! sends the same messages, records the same claims and ends with the same
//! views; a different seed does not. In quorum mode, with pauses, cut-off
//! leaders and drifting clocks, it also records the same tenures.

use std::time::Duration;

use regent_peer::sim::{ExtraFaults, FIXED_SEEDS, Scenario, Sim};
use regent_peer::{Bully, Config, LowestId, Machine, Ring};
use tokio::time::Instant;

fn run<M: Machine + 'static>(seed: u64, new: fn(Config, Instant) -> M) -> String {
    let sc = Scenario::random(seed);
    let mut sim: Sim<M> = sc.sim(seed, new);
    sim.chaos(
        Duration::from_secs(3),
        Duration::from_millis(200),
        sc.delays,
    );
    format!(
        "{:?} {:?} {:?} {:?} {:?}",
        sc.ids,
        sim.counts(),
        sim.claims(),
        sim.views(),
        sim.elapsed()
    )
}

fn check<M: Machine + 'static>(new: fn(Config, Instant) -> M) {
    for seed in FIXED_SEEDS {
        assert_eq!(run(seed, new), run(seed, new), "seed {seed}");
    }
    assert_ne!(run(1, new), run(2, new));
}

#[test]
fn lowest_id() {
    check(LowestId::new);
}

#[test]
fn bully() {
    check(Bully::new);
}

#[test]
fn ring() {
    check(Ring::new);
}

fn run_quorum<M: Machine + 'static>(seed: u64, new: fn(Config, Instant) -> M) -> String {
    let sc = Scenario::random(seed);
    let mut sim = sc.quorum_sim(seed, new);
    sim.set_extra_faults(ExtraFaults {
        max_pause: Some(2 * sc.lease),
        isolate_leaders: true,
    });
    sim.chaos(
        Duration::from_secs(3),
        Duration::from_millis(200),
        sc.delays,
    );
    format!(
        "{:?} {:?} {:?} {:?}",
        sim.counts(),
        sim.tenures(),
        sim.views(),
        sim.elapsed()
    )
}

#[test]
fn quorum() {
    for seed in FIXED_SEEDS {
        assert_eq!(
            run_quorum(seed, Bully::new),
            run_quorum(seed, Bully::new),
            "seed {seed}"
        );
        assert_eq!(run_quorum(seed, Ring::new), run_quorum(seed, Ring::new));
    }
    assert_ne!(run_quorum(1, LowestId::new), run_quorum(2, LowestId::new));
}
