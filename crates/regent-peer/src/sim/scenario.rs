//! Random groups and timings for simulations ([`Scenario`]): the members,
//! the timeouts, and a fresh incarnation and wall clock at every start of a
//! node, in plain or quorum mode.

use std::time::Duration;

use fastrand::Rng;
use tokio::time::Instant;

use super::conditions::Network;
use super::engine::Sim;
use crate::config::{Config, ConfigBuilder};
use crate::epoch::NodeId;
use crate::machine::Machine;
use crate::quorum::Quorum;

/// A random group and timing for simulations: 3 to 7 members with random
/// distinct ids, and timings scaled for a network with delays of 1 to
/// 20 ms.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// The members.
    pub ids: Vec<NodeId>,
    /// Heartbeat interval.
    pub heartbeat_interval: Duration,
    /// Failure timeout.
    pub failure_timeout: Duration,
    /// Bully's answer timeout.
    pub answer_timeout: Duration,
    /// Bully's coordinator timeout.
    pub coordinator_timeout: Duration,
    /// Ring's ack timeout.
    pub ack_timeout: Duration,
    /// Quorum mode's lease.
    pub lease: Duration,
    /// Quorum mode's bound on clock drift (and the simulated clocks' in
    /// [`Scenario::quorum_sim`]).
    pub clock_drift: f64,
    /// Quorum mode's lease margin.
    pub lease_margin: Duration,
    /// The network's delays.
    pub delays: (Duration, Duration),
}

impl Scenario {
    /// The scenario of `seed` (drawn from its own generator, so the
    /// simulation's random numbers stay independent).
    pub fn random(seed: u64) -> Self {
        let mut rng = Rng::with_seed(seed ^ 0x5eed_5ce7_a710);
        let n = rng.usize(3..=7);
        let mut ids: Vec<NodeId> = Vec::new();
        while ids.len() < n {
            let id = NodeId(rng.u64(1..=1000));
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        ids.sort_unstable();
        let ms = Duration::from_millis;
        Self {
            ids,
            heartbeat_interval: ms(100),
            failure_timeout: ms(400),
            answer_timeout: ms(60),
            coordinator_timeout: ms(300),
            ack_timeout: ms(50),
            lease: ms(400),
            clock_drift: 0.2,
            lease_margin: ms(1),
            delays: (ms(1), ms(20)),
        }
    }

    /// The configuration of member `id`, before `build`.
    pub fn config(&self, id: NodeId) -> ConfigBuilder {
        Config::builder(id, self.ids.iter().copied())
            .heartbeat_interval(self.heartbeat_interval)
            .failure_timeout(self.failure_timeout)
            .answer_timeout(self.answer_timeout)
            .coordinator_timeout(self.coordinator_timeout)
            .ack_timeout(self.ack_timeout)
            .lease(self.lease)
            .clock_drift(self.clock_drift)
            .lease_margin(self.lease_margin)
    }

    /// The configuration of one start of member `id` at `now` on its clock:
    /// a random incarnation, and a wall clock read at the start
    /// ([`ConfigBuilder::wall_clock`]) that is [`WALL_CLOCK_ORIGIN`] at
    /// the simulation's start, and off by up to two seconds either way,
    /// drawn anew at every start, as hosts' clocks are.
    fn start_config(&self, id: NodeId, now: Instant, starts: &mut Starts) -> Config {
        let origin = *starts.origin.get_or_insert(now);
        let since =
            u64::try_from(now.saturating_duration_since(origin).as_millis()).unwrap_or(u64::MAX);
        let wall = (WALL_CLOCK_ORIGIN + since).saturating_add_signed(starts.rng.i64(-2000..=2000));
        self.config(id)
            .incarnation(starts.rng.u64(..))
            .wall_clock(wall, now)
            .build()
            .expect("valid scenario")
    }

    /// A simulation of this scenario with the algorithm `new` makes, on a
    /// reliable network. Every start of a node gets a random incarnation
    /// and a wall clock: [`WALL_CLOCK_ORIGIN`] at the simulation's start,
    /// off by up to two seconds either way, drawn anew at every start.
    ///
    /// # Panics
    ///
    /// If the scenario's configuration is invalid (it never is).
    pub fn sim<M: Machine + 'static>(&self, seed: u64, new: fn(Config, Instant) -> M) -> Sim<M> {
        let this = self.clone();
        let mut starts = Starts::new(seed);
        Sim::new(
            seed,
            &self.ids,
            Network::reliable(self.delays.0, self.delays.1),
            move |id, now| new(this.start_config(id, now, &mut starts), now),
        )
    }

    /// A simulation of this scenario with the algorithm `new` makes in
    /// quorum mode ([`Quorum`]), on a reliable network, with each node's
    /// clock drifting within the scenario's `clock_drift`
    /// ([`Sim::drift_clocks`]). Every start of a node gets a random
    /// incarnation and a wall clock, as in [`Scenario::sim`].
    ///
    /// # Panics
    ///
    /// If the scenario's configuration is invalid (it never is).
    pub fn quorum_sim<M: Machine + 'static>(
        &self,
        seed: u64,
        new: fn(Config, Instant) -> M,
    ) -> Sim<Quorum<M>> {
        let this = self.clone();
        let mut starts = Starts::new(seed);
        let mut sim = Sim::new(
            seed,
            &self.ids,
            Network::reliable(self.delays.0, self.delays.1),
            move |id, now| {
                let config = this.start_config(id, now, &mut starts);
                Quorum::new(config.clone(), now, new(config, now))
            },
        );
        sim.drift_clocks(self.clock_drift);
        sim
    }
}

/// The wall clock, in milliseconds since the Unix epoch, when a
/// [`Scenario`]'s simulation starts (2026-11-26).
pub const WALL_CLOCK_ORIGIN: u64 = 1_795_000_000_000;

/// What a scenario draws at each start of a node.
struct Starts {
    rng: Rng,
    /// The first start's instant: the simulation's start.
    origin: Option<Instant>,
}

impl Starts {
    fn new(seed: u64) -> Self {
        Self {
            rng: Rng::with_seed(seed ^ 0x1ca7_2a71_0115),
            origin: None,
        }
    }
}
