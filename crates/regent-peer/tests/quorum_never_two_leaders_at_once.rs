//! Invariant (quorum mode): no two nodes lead at the same instant, whatever
//! the faults: crashes, restarts, partitions, loss, duplication, delay,
//! reordering, pauses (a node stopped for up to twice the lease, as by
//! SIGSTOP or a GC pause, that resumes believing it leads) and clock
//! drift (each node's clock runs at its own rate, within the configured
//! bound).
//!
//! A node's tenure runs from the instant its leadership began until it
//! ended, it crashed, or its `lease_until` passed, whichever came first, in
//! simulated time: a paused leader's belief past its lease does not count,
//! because the lease tells its driver to stop acting then. No two tenures
//! of different nodes may share an instant.

use std::time::Duration;

use regent_peer::sim::{ExtraFaults, Scenario, for_each_seed};
use regent_peer::{Bully, Config, LowestId, Machine, Ring};
use tokio::time::Instant;

const CHAOS: Duration = Duration::from_secs(5);
const MEAN_GAP: Duration = Duration::from_millis(200);

fn run<M: Machine + 'static>(test: &str, new: fn(Config, Instant) -> M) {
    let (mut seeds, mut led, mut tenures) = (0u64, 0u64, 0usize);
    for_each_seed(test, |seed| {
        let sc = Scenario::random(seed);
        let mut sim = sc.quorum_sim(seed, new);
        sim.set_extra_faults(ExtraFaults {
            max_pause: Some(2 * sc.lease),
            isolate_leaders: true,
        });
        sim.chaos(CHAOS, MEAN_GAP, sc.delays);
        let overlaps = sim.overlaps();
        assert!(
            overlaps.is_empty(),
            "two leaders at once: {overlaps:#?}\nclock rates {:?}",
            sc.ids
                .iter()
                .map(|&id| sim.clock_rate(id))
                .collect::<Vec<_>>()
        );
        seeds += 1;
        let t = sim.tenures();
        led += u64::from(!t.is_empty());
        tenures += t.len();
    });
    eprintln!("{test}: {seeds} runs, {led} with a leader, {tenures} tenures, 0 overlaps");
    assert!(
        led * 10 >= seeds * 9,
        "only {led} of {seeds} runs ever had a leader: the check is vacuous"
    );
}

#[test]
fn lowest_id() {
    run(
        "quorum_never_two_leaders_at_once -- lowest_id",
        LowestId::new,
    );
}

#[test]
fn bully() {
    run("quorum_never_two_leaders_at_once -- bully", Bully::new);
}

#[test]
fn ring() {
    run("quorum_never_two_leaders_at_once -- ring", Ring::new);
}
