//! The seeds simulation tests run ([`FIXED_SEEDS`] and random ones), and
//! [`for_each_seed`], which names the seed of a failure and how to replay
//! it.

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

use fastrand::Rng;

/// The seeds every simulation test runs, whatever the random draw.
pub const FIXED_SEEDS: [u64; 8] = [0, 1, 2, 3, 42, 1234, 0xdead_beef, u64::MAX];

/// Runs `check` for each seed: [`FIXED_SEEDS`] and `REGENT_PEER_SEEDS`
/// (default 1,000) random ones, or only `REGENT_PEER_SEED` when set. A
/// failing seed is reported with the command that replays it.
///
/// # Panics
///
/// With the failing seed and the replay command, when `check` panics.
pub fn for_each_seed(test: &str, mut check: impl FnMut(u64)) {
    let env = |name: &str| {
        std::env::var(name).ok().map(|v| {
            v.trim()
                .parse::<u64>()
                .unwrap_or_else(|_| panic!("{name}={v:?} is not a number"))
        })
    };
    let seeds: Vec<u64> = match env("REGENT_PEER_SEED") {
        Some(seed) => vec![seed],
        None => {
            let count = env("REGENT_PEER_SEEDS").unwrap_or(1000);
            let mut entropy = Rng::new();
            FIXED_SEEDS
                .iter()
                .copied()
                .chain((0..count).map(|_| entropy.u64(..)))
                .collect()
        }
    };
    for seed in seeds {
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| check(seed))) {
            eprintln!(
                "\n{test}: seed {seed} failed; replay with\n  REGENT_PEER_SEED={seed} cargo test -p regent-peer --test {test}\n(REGENT_PEER_TRACE=1 prints the run)\n"
            );
            resume_unwind(panic);
        }
    }
}
