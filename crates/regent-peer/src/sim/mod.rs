//! A deterministic network simulator for the state machines (feature
//! `testing`).
//!
//! [`Sim`] drives a group of [`Machine`]s in one thread with simulated
//! time and a seeded [`fastrand::Rng`]: the same seed gives the same run,
//! event for event. The network loses, duplicates, delays and so reorders
//! messages at the rates of its [`Network`]; nodes can be crashed (their
//! state is lost), restarted (a fresh machine), partitioned, and paused
//! (as SIGSTOP or a long GC pause: the node handles nothing, its messages
//! wait for it, and it resumes with its state). Instants are one base
//! instant plus simulated offsets: the machines never see the real clock
//! move. Each node's clock may run slower than simulated time by up to a
//! drift bound ([`Sim::drift_clocks`]), so the machines see their own
//! instants, never the simulator's.
//!
//! The simulator records every stretch of simulated time in which a node
//! held leadership ([`Sim::tenures`]): from the instant its
//! [`Machine::leadership`] became `Some` until it became `None`, or the
//! node crashed, or its [`Machine::lease_until`] passed, whichever came
//! first. The last is what makes a paused leader's stale belief harmless,
//! and what quorum mode promises.
//!
//! [`for_each_seed`] runs a check over a fixed seed set plus random ones
//! and names the seed of a failure; `REGENT_PEER_SEED=N` replays one seed,
//! `REGENT_PEER_SEEDS=N` sets how many random seeds to draw (default
//! 1,000).
//!
//! [`Machine`]: crate::Machine
//! [`Machine::leadership`]: crate::Machine::leadership
//! [`Machine::lease_until`]: crate::Machine::lease_until

mod conditions;
mod engine;
mod faults;
mod observe;
mod records;
mod scenario;
mod seeds;

pub use conditions::{ExtraFaults, Network};
pub use engine::Sim;
pub use records::{Conflict, Counts, Regression, Settled, Tenure};
pub use scenario::{Scenario, WALL_CLOCK_ORIGIN};
pub use seeds::{FIXED_SEEDS, for_each_seed};
