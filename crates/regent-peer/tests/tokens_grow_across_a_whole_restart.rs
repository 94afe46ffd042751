//! Invariant: when the whole group stops and starts again, every node
//! having forgotten its epochs, every term claimed after the restart has a
//! larger fencing token than every term claimed before it, provided the
//! wall clocks (off by up to two seconds each) are not behind by more
//! than the group was down: the rounds of the terms a node claims are at
//! least its wall clock's tenths of a second (`ConfigBuilder::wall_clock`).
//! Before, a group restarted whole started its tokens again from 1, and a
//! resource that remembered the last token refused every write of the
//! new leaders.

use std::time::Duration;

use fastrand::Rng;
use regent_peer::sim::{Network, Scenario, Sim, WALL_CLOCK_ORIGIN, for_each_seed};
use regent_peer::{Bully, Config, LowestId, Machine, Ring};
use tokio::time::Instant;

const CHAOS: Duration = Duration::from_secs(3);
const MEAN_GAP: Duration = Duration::from_millis(200);
/// Longer than the two seconds either way the clocks are off by, twice.
const DOWN: Duration = Duration::from_secs(5);

fn run<M: Machine + 'static>(test: &str, new: fn(Config, Instant) -> M) {
    for_each_seed(test, |seed| {
        let sc = Scenario::random(seed);
        let mut before = sc.sim(seed, new);
        before.chaos(CHAOS, MEAN_GAP, sc.delays);
        // Chaos may end with every node crashed (seed 18311416374153442357
        // did, and no term followed): end the faults, so that the group
        // claims a term before it stops.
        before.calm(sc.delays);
        before.run_for(sc.failure_timeout * 4);
        let Some((&last, _)) = before.claims().last_key_value() else {
            panic!("no term before the restart");
        };
        // The same group, every node new, its wall clock the first run's
        // end plus the time down, each off by up to two seconds.
        let down_ms = u64::try_from((before.elapsed() + DOWN).as_millis()).unwrap();
        let this = sc.clone();
        let mut rng = Rng::with_seed(seed ^ 0x5eed);
        let mut after = Sim::new(
            seed.wrapping_add(1),
            &sc.ids,
            Network::reliable(sc.delays.0, sc.delays.1),
            move |id, now| {
                let wall =
                    (WALL_CLOCK_ORIGIN + down_ms).saturating_add_signed(rng.i64(-2000..=2000));
                let config = this
                    .config(id)
                    .incarnation(rng.u64(..))
                    .wall_clock(wall, now)
                    .build()
                    .expect("valid scenario");
                new(config, now)
            },
        );
        after.run_for(sc.failure_timeout * 4);
        let Some((&first, _)) = after.claims().first_key_value() else {
            panic!("no term after the restart");
        };
        assert!(
            first > last,
            "the first term after the restart, {first:?}, is not above the last before, {last:?}"
        );
    });
}

#[test]
fn lowest_id() {
    run(
        "tokens_grow_across_a_whole_restart -- lowest_id",
        LowestId::new,
    );
}

#[test]
fn bully() {
    run("tokens_grow_across_a_whole_restart -- bully", Bully::new);
}

#[test]
fn ring() {
    run("tokens_grow_across_a_whole_restart -- ring", Ring::new);
}
