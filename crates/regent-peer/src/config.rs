//! A node's configuration: its id, the static membership and the timings,
//! validated once by [`ConfigBuilder::build`].

use std::time::Duration;

use tokio::time::Instant;

use crate::epoch::NodeId;

/// The longest duration any timing setting accepts (one day, as the lease
/// ttl in `regent-core`). Far beyond any sensible failure timeout, and small
/// enough that adding it to an instant can never overflow.
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);

/// The largest membership accepted: an epoch has 16 bits for the rank.
pub const MAX_MEMBERS: usize = 1 << 16;

/// A node's settings, validated. Build it with [`Config::builder`].
///
/// All three algorithms read the same struct; the settings one algorithm
/// does not use are still validated, so switching algorithms never meets a
/// broken setting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    id: NodeId,
    /// Sorted, unique; contains `id`.
    members: Vec<NodeId>,
    heartbeat_interval: Duration,
    failure_timeout: Duration,
    answer_timeout: Duration,
    coordinator_timeout: Duration,
    ack_timeout: Duration,
    election_timeout: Option<Duration>,
    incarnation: u64,
    wall_clock: Option<WallClock>,
    lease: Option<Duration>,
    clock_drift: ClockDrift,
    lease_margin: Duration,
}

/// A reading of the wall clock, in milliseconds since the Unix epoch, and
/// the instant of the node's monotonic clock it was taken at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct WallClock {
    unix_ms: u64,
    at: Instant,
}

/// A clock drift bound, always finite and in `0..0.5` once in a
/// [`Config`] (validated by [`ConfigBuilder::build`]), so equality on it is
/// an equivalence.
#[derive(Clone, Copy, Debug, PartialEq)]
struct ClockDrift(f64);

impl Eq for ClockDrift {}

impl Config {
    /// The default heartbeat interval: 200 ms.
    pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_millis(200);
    /// The default failure timeout: 1 s (five heartbeats).
    pub const DEFAULT_FAILURE_TIMEOUT: Duration = Duration::from_secs(1);
    /// The default Bully answer timeout: 200 ms.
    pub const DEFAULT_ANSWER_TIMEOUT: Duration = Duration::from_millis(200);
    /// The default Bully coordinator timeout: 1 s.
    pub const DEFAULT_COORDINATOR_TIMEOUT: Duration = Duration::from_secs(1);
    /// The default Ring ack timeout: 200 ms.
    pub const DEFAULT_ACK_TIMEOUT: Duration = Duration::from_millis(200);
    /// The default bound on clock drift in quorum mode: 1 %.
    pub const DEFAULT_CLOCK_DRIFT: f64 = 0.01;
    /// The default lease margin in quorum mode: 5 ms.
    pub const DEFAULT_LEASE_MARGIN: Duration = Duration::from_millis(5);

    /// Starts a configuration for node `id` in a group of `members` (which
    /// must include `id`). Every member must be configured with the same
    /// membership: ranks, and so epochs, derive from it.
    pub fn builder(id: NodeId, members: impl IntoIterator<Item = NodeId>) -> ConfigBuilder {
        ConfigBuilder {
            id,
            members: members.into_iter().collect(),
            heartbeat_interval: Self::DEFAULT_HEARTBEAT_INTERVAL,
            failure_timeout: Self::DEFAULT_FAILURE_TIMEOUT,
            answer_timeout: Self::DEFAULT_ANSWER_TIMEOUT,
            coordinator_timeout: Self::DEFAULT_COORDINATOR_TIMEOUT,
            ack_timeout: Self::DEFAULT_ACK_TIMEOUT,
            election_timeout: None,
            incarnation: 0,
            wall_clock: None,
            lease: None,
            clock_drift: Self::DEFAULT_CLOCK_DRIFT,
            lease_margin: Self::DEFAULT_LEASE_MARGIN,
        }
    }

    /// This node's id.
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// The membership, sorted ascending; it includes this node.
    pub fn members(&self) -> &[NodeId] {
        &self.members
    }

    /// How often a node sends heartbeats (the leader, or every node in
    /// lowest-ID).
    pub fn heartbeat_interval(&self) -> Duration {
        self.heartbeat_interval
    }

    /// How long without a heartbeat before a node is taken for dead.
    pub fn failure_timeout(&self) -> Duration {
        self.failure_timeout
    }

    /// Bully: how long a candidate waits for an ANSWER from a higher node
    /// before it declares itself leader.
    pub fn answer_timeout(&self) -> Duration {
        self.answer_timeout
    }

    /// Bully: how long a candidate that got an ANSWER waits for the
    /// COORDINATOR before it starts over.
    pub fn coordinator_timeout(&self) -> Duration {
        self.coordinator_timeout
    }

    /// Ring: how long a node waits for its successor to acknowledge a ring
    /// message before it skips that successor and tries the next.
    pub fn ack_timeout(&self) -> Duration {
        self.ack_timeout
    }

    /// Ring: how long an election may take, from sending or forwarding an
    /// ELECTION to receiving the COORDINATOR, before the node starts one of
    /// its own. Defaults to `2 x members x ack_timeout` (at most
    /// [`MAX_DURATION`]): a whole ring pass each way in which every hop
    /// needed one skip.
    pub fn election_timeout(&self) -> Duration {
        self.election_timeout.unwrap_or_else(|| {
            // At most MAX_DURATION x 2^17: no overflow (both capped in build).
            let ring = u32::try_from(self.members.len()).unwrap_or(u32::MAX);
            (self.ack_timeout * 2 * ring).min(MAX_DURATION)
        })
    }

    /// This start of the node (see [`ConfigBuilder::incarnation`]).
    pub fn incarnation(&self) -> u64 {
        self.incarnation
    }

    /// This configuration for another start of the node (see
    /// [`ConfigBuilder::incarnation`]); nothing else changes.
    #[must_use]
    pub fn with_incarnation(mut self, incarnation: u64) -> Self {
        self.incarnation = incarnation;
        self
    }

    /// This configuration with the wall clock read again (see
    /// [`ConfigBuilder::wall_clock`]), for another start of the node;
    /// nothing else changes.
    #[must_use]
    pub fn with_wall_clock(mut self, unix_ms: u64, at: Instant) -> Self {
        self.wall_clock = Some(WallClock { unix_ms, at });
        self
    }

    /// The smallest round this node claims a term in at `now`: the wall
    /// clock in tenths of a second since the Unix epoch, as read at the
    /// start and advanced by the monotonic clock since
    /// ([`ConfigBuilder::wall_clock`]); 0 without a wall clock. See
    /// [`Epoch`](crate::Epoch).
    ///
    /// Tenths, not milliseconds: a token is `round × 2^16 + rank`, and in
    /// tenths it stays below 2^53 (exact wherever JSON numbers are
    /// doubles, as in JavaScript or jq) until the year 2405.
    pub fn round_floor(&self, now: Instant) -> u64 {
        self.wall_clock.map_or(0, |w| {
            let since = now.saturating_duration_since(w.at).as_millis();
            w.unix_ms
                .saturating_add(u64::try_from(since).unwrap_or(u64::MAX))
                / 100
        })
    }

    /// Quorum mode: how long a member that grants a node the lease
    /// promises, on its own clock from when it got the request, not to
    /// grant it to any other node. Defaults to `failure_timeout`.
    pub fn lease(&self) -> Duration {
        self.lease.unwrap_or(self.failure_timeout)
    }

    /// Quorum mode: the bound on clock drift between any two members: over
    /// any stretch of time one member measures as `d`, every other measures
    /// at least `d × (1 − clock_drift)`.
    pub fn clock_drift(&self) -> f64 {
        self.clock_drift.0
    }

    /// Quorum mode: how much earlier than the drift alone requires the
    /// leader gives up its lease, for the time between its last check and
    /// the effect of what it does as leader.
    pub fn lease_margin(&self) -> Duration {
        self.lease_margin
    }

    /// Quorum mode: how long after *sending* a lease request that a
    /// majority granted the leader counts its leadership exclusive:
    /// `lease × (1 − clock_drift) − lease_margin`. It ends before the
    /// promise of any member that granted that request can end, whatever
    /// the drift within the bound (see [`Quorum`](crate::Quorum)).
    pub fn leader_lease(&self) -> Duration {
        leader_lease(self.lease(), self.clock_drift.0, self.lease_margin)
    }

    /// This node's rank: its position in the sorted membership.
    pub(crate) fn rank(&self) -> u16 {
        self.rank_of(self.id).unwrap_or(0)
    }

    /// The rank of `id`, if it is a member.
    pub(crate) fn rank_of(&self, id: NodeId) -> Option<u16> {
        // Fits: build() caps the membership at 2^16.
        self.members
            .binary_search(&id)
            .ok()
            .map(|r| u16::try_from(r).unwrap_or(u16::MAX))
    }

    pub(crate) fn is_member(&self, id: NodeId) -> bool {
        self.members.binary_search(&id).is_ok()
    }

    /// Every member but this node, ascending.
    pub(crate) fn others(&self) -> impl Iterator<Item = NodeId> + '_ {
        let me = self.id;
        self.members.iter().copied().filter(move |&m| m != me)
    }
}

/// Chained setters for a [`Config`]; [`build`](Self::build) validates.
#[derive(Clone, Debug)]
#[must_use]
pub struct ConfigBuilder {
    id: NodeId,
    members: Vec<NodeId>,
    heartbeat_interval: Duration,
    failure_timeout: Duration,
    answer_timeout: Duration,
    coordinator_timeout: Duration,
    ack_timeout: Duration,
    election_timeout: Option<Duration>,
    incarnation: u64,
    wall_clock: Option<WallClock>,
    lease: Option<Duration>,
    clock_drift: f64,
    lease_margin: Duration,
}

/// `lease × (1 − drift) − margin`, saturating at zero: how long after
/// sending an ask a leader may count on a promise of `lease`. `drift` is
/// finite and in `0..0.5`, `lease` at most a day: the product cannot
/// overflow.
pub(crate) fn leader_lease(lease: Duration, drift: f64, margin: Duration) -> Duration {
    lease.mul_f64(1.0 - drift).saturating_sub(margin)
}

impl ConfigBuilder {
    /// How often heartbeats are sent (default 200 ms).
    pub fn heartbeat_interval(mut self, d: Duration) -> Self {
        self.heartbeat_interval = d;
        self
    }

    /// How long without a heartbeat before a node is taken for dead
    /// (default 1 s); must exceed the heartbeat interval.
    pub fn failure_timeout(mut self, d: Duration) -> Self {
        self.failure_timeout = d;
        self
    }

    /// Bully's wait for an ANSWER (default 200 ms).
    pub fn answer_timeout(mut self, d: Duration) -> Self {
        self.answer_timeout = d;
        self
    }

    /// Bully's wait for the COORDINATOR after an ANSWER (default 1 s).
    pub fn coordinator_timeout(mut self, d: Duration) -> Self {
        self.coordinator_timeout = d;
        self
    }

    /// Ring's wait for a successor's ACK (default 200 ms).
    pub fn ack_timeout(mut self, d: Duration) -> Self {
        self.ack_timeout = d;
        self
    }

    /// Ring's wait for an election to finish (default
    /// `2 x members x ack_timeout`); must exceed the ack timeout.
    pub fn election_timeout(mut self, d: Duration) -> Self {
        self.election_timeout = Some(d);
        self
    }

    /// A number that differs from one start of this node to the next
    /// (default 0): a random number, or a counter the driver keeps on disk.
    /// Ring names its elections with it; with the same incarnation, a node
    /// restarted within `election_timeout` may see its first elections
    /// dropped as copies of its previous life's, which costs an
    /// `election_timeout` each, never safety.
    pub fn incarnation(mut self, incarnation: u64) -> Self {
        self.incarnation = incarnation;
        self
    }

    /// The wall clock at `at` on the node's monotonic clock, in milliseconds
    /// since the Unix epoch (default: none). With it, the rounds the node
    /// claims terms in are at least the wall clock's tenths of a second at
    /// the claim ([`Config::round_floor`]), so that fencing tokens go on
    /// growing when the whole group restarts and every node has forgotten
    /// its epochs: as long as no node's wall clock is behind, by more than
    /// the group was down, the wall clock of the node that claimed the last
    /// term before the restart (and the group claimed fewer than ten terms
    /// a second). Without it, a group restarted whole starts its
    /// epochs again from zero. Safety while the group runs never rests on
    /// it: epochs still only grow, and no two nodes share one, whatever
    /// the wall clocks say.
    pub fn wall_clock(mut self, unix_ms: u64, at: Instant) -> Self {
        self.wall_clock = Some(WallClock { unix_ms, at });
        self
    }

    /// Quorum mode: how long a member's grant of the lease binds it
    /// (default `failure_timeout`); at most `failure_timeout`, and
    /// `lease × (1 − clock_drift) − lease_margin` must exceed
    /// `heartbeat_interval` so that a leader renews before its lease ends.
    pub fn lease(mut self, d: Duration) -> Self {
        self.lease = Some(d);
        self
    }

    /// Quorum mode: the bound on clock drift between two members, as a
    /// fraction (default 0.01, i.e. 1 %); finite, at least 0 and below 0.5.
    /// A clock that may run fast or slow by up to `x` against true time
    /// gives a drift of `2x` between two members, at most.
    pub fn clock_drift(mut self, drift: f64) -> Self {
        self.clock_drift = drift;
        self
    }

    /// Quorum mode: how much earlier than the drift alone requires the
    /// leader gives up its lease (default 5 ms; may be zero).
    pub fn lease_margin(mut self, d: Duration) -> Self {
        self.lease_margin = d;
        self
    }

    /// Validates the settings.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] naming the setting and the rule broken: a zero or
    /// over-long duration, a failure timeout not above the heartbeat
    /// interval, an election timeout not above the ack timeout, a lease
    /// above the failure timeout or whose leader's part is not above the
    /// heartbeat interval, a clock drift out of range, an empty,
    /// duplicated or too large membership, or an id that is not a member.
    pub fn build(self) -> Result<Config, ConfigError> {
        let mut members = self.members;
        if members.is_empty() {
            return Err(ConfigError::NoMembers);
        }
        if members.len() > MAX_MEMBERS {
            return Err(ConfigError::TooManyMembers {
                count: members.len(),
                max: MAX_MEMBERS,
            });
        }
        members.sort_unstable();
        if let Some(w) = members.windows(2).find(|w| w[0] == w[1]) {
            return Err(ConfigError::DuplicateMember { id: w[0] });
        }
        if members.binary_search(&self.id).is_err() {
            return Err(ConfigError::NotAMember { id: self.id });
        }
        let durations = [
            ("heartbeat_interval", self.heartbeat_interval),
            ("failure_timeout", self.failure_timeout),
            ("answer_timeout", self.answer_timeout),
            ("coordinator_timeout", self.coordinator_timeout),
            ("ack_timeout", self.ack_timeout),
        ]
        .into_iter()
        .chain(self.election_timeout.map(|d| ("election_timeout", d)))
        .chain(self.lease.map(|d| ("lease", d)));
        for (setting, value) in durations {
            if value.is_zero() {
                return Err(ConfigError::Zero { setting });
            }
            if value > MAX_DURATION {
                return Err(ConfigError::TooLong {
                    setting,
                    value,
                    max: MAX_DURATION,
                });
            }
        }
        if self.lease_margin > MAX_DURATION {
            return Err(ConfigError::TooLong {
                setting: "lease_margin",
                value: self.lease_margin,
                max: MAX_DURATION,
            });
        }
        if self.failure_timeout <= self.heartbeat_interval {
            return Err(ConfigError::FailureTimeoutNotAboveInterval {
                failure_timeout: self.failure_timeout,
                heartbeat_interval: self.heartbeat_interval,
            });
        }
        if !(self.clock_drift.is_finite() && (0.0..0.5).contains(&self.clock_drift)) {
            return Err(ConfigError::ClockDriftOutOfRange);
        }
        let lease = self.lease.unwrap_or(self.failure_timeout);
        if lease > self.failure_timeout {
            return Err(ConfigError::LeaseAboveFailureTimeout {
                lease,
                failure_timeout: self.failure_timeout,
            });
        }
        let leader_lease = leader_lease(lease, self.clock_drift, self.lease_margin);
        if leader_lease <= self.heartbeat_interval {
            return Err(ConfigError::LeaderLeaseNotAboveInterval {
                leader_lease,
                heartbeat_interval: self.heartbeat_interval,
            });
        }
        let config = Config {
            id: self.id,
            members,
            heartbeat_interval: self.heartbeat_interval,
            failure_timeout: self.failure_timeout,
            answer_timeout: self.answer_timeout,
            coordinator_timeout: self.coordinator_timeout,
            ack_timeout: self.ack_timeout,
            election_timeout: self.election_timeout,
            incarnation: self.incarnation,
            wall_clock: self.wall_clock,
            lease: self.lease,
            clock_drift: ClockDrift(self.clock_drift),
            lease_margin: self.lease_margin,
        };
        let election_timeout = config.election_timeout();
        if election_timeout <= config.ack_timeout {
            return Err(ConfigError::ElectionTimeoutNotAboveAck {
                election_timeout,
                ack_timeout: config.ack_timeout,
            });
        }
        Ok(config)
    }
}

/// A setting breaks a rule; the message names the setting (as its builder
/// method is named) and the values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A duration is zero.
    #[error("{setting} must be greater than zero")]
    Zero {
        /// The setting.
        setting: &'static str,
    },
    /// A duration is longer than [`MAX_DURATION`].
    #[error("{setting} {value:?} is longer than the maximum of {max:?}")]
    TooLong {
        /// The setting.
        setting: &'static str,
        /// The value given.
        value: Duration,
        /// [`MAX_DURATION`].
        max: Duration,
    },
    /// `failure_timeout` must exceed `heartbeat_interval`, or a live node
    /// would be taken for dead between two of its heartbeats.
    #[error(
        "failure_timeout ({failure_timeout:?}) must be longer than heartbeat_interval ({heartbeat_interval:?})"
    )]
    FailureTimeoutNotAboveInterval {
        /// The failure timeout.
        failure_timeout: Duration,
        /// The heartbeat interval.
        heartbeat_interval: Duration,
    },
    /// `election_timeout` must exceed `ack_timeout`, or a ring election
    /// would be abandoned before its first hop could be repaired.
    #[error(
        "election_timeout ({election_timeout:?}) must be longer than ack_timeout ({ack_timeout:?})"
    )]
    ElectionTimeoutNotAboveAck {
        /// The election timeout (given, or derived).
        election_timeout: Duration,
        /// The ack timeout.
        ack_timeout: Duration,
    },
    /// `lease` must not exceed `failure_timeout`: by the time the failure
    /// detector has given up on a leader, its lease should have run out,
    /// so that a longer lease holds failover back for nothing.
    #[error("lease ({lease:?}) must not be longer than failure_timeout ({failure_timeout:?})")]
    LeaseAboveFailureTimeout {
        /// The lease.
        lease: Duration,
        /// The failure timeout.
        failure_timeout: Duration,
    },
    /// The leader's part of the lease, `lease × (1 − clock_drift) −
    /// lease_margin`, must exceed `heartbeat_interval`, or a leader's lease
    /// would run out between two of its renewals.
    #[error(
        "lease x (1 - clock_drift) - lease_margin ({leader_lease:?}) must be longer than heartbeat_interval ({heartbeat_interval:?})"
    )]
    LeaderLeaseNotAboveInterval {
        /// `lease × (1 − clock_drift) − lease_margin`.
        leader_lease: Duration,
        /// The heartbeat interval.
        heartbeat_interval: Duration,
    },
    /// `clock_drift` must be a finite number, at least 0 and below 0.5.
    #[error("clock_drift must be a finite number from 0 up to, not including, 0.5")]
    ClockDriftOutOfRange,
    /// The membership is empty.
    #[error("members must not be empty")]
    NoMembers,
    /// An id appears twice in the membership.
    #[error("member {id} appears more than once in members")]
    DuplicateMember {
        /// The repeated id.
        id: NodeId,
    },
    /// The node's own id is not in the membership.
    #[error("id {id} is not one of members")]
    NotAMember {
        /// The node's id.
        id: NodeId,
    },
    /// More members than an epoch's rank bits can tell apart.
    #[error("members has {count} ids, more than the maximum of {max}")]
    TooManyMembers {
        /// How many were given.
        count: usize,
        /// [`MAX_MEMBERS`].
        max: usize,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A token is `round × 2^16 + rank`: with rounds in tenths of a second
    /// it stays exact as a JSON double (below 2^53) for centuries, where
    /// milliseconds would pass 2^53 today.
    #[test]
    fn the_round_floor_is_the_wall_clock_in_tenths_and_tokens_fit_a_double() {
        let at = Instant::now();
        let config = Config::builder(NodeId(1), [NodeId(1), NodeId(2)])
            .wall_clock(1_795_000_000_123, at)
            .build()
            .unwrap();
        assert_eq!(config.round_floor(at), 17_950_000_001);
        assert_eq!(
            config.round_floor(at + Duration::from_millis(250)),
            17_950_000_003
        );
        let year_2400_ms = 13_569_465_600_000_u64;
        let token = crate::epoch::Epoch::ZERO
            .next_at_least(u16::MAX, year_2400_ms / 100)
            .unwrap()
            .get();
        assert!(token < 1 << 53, "{token}");
        let unset = Config::builder(NodeId(1), [NodeId(1)]).build().unwrap();
        assert_eq!(unset.round_floor(at + Duration::from_secs(9)), 0);
    }

    fn ids(v: &[u64]) -> Vec<NodeId> {
        v.iter().copied().map(NodeId).collect()
    }

    #[test]
    fn defaults_build_and_sort_the_members() {
        let c = Config::builder(NodeId(3), ids(&[9, 3, 1])).build().unwrap();
        assert_eq!(c.members(), &ids(&[1, 3, 9])[..]);
        assert_eq!(c.rank(), 1);
        assert_eq!(c.election_timeout(), Config::DEFAULT_ACK_TIMEOUT * 6);
        assert_eq!(c.lease(), Config::DEFAULT_FAILURE_TIMEOUT);
        assert_eq!(c.clock_drift(), Config::DEFAULT_CLOCK_DRIFT);
        // 1 s x 0.99 - 5 ms.
        assert_eq!(c.leader_lease(), Duration::from_millis(985));
    }

    #[test]
    fn each_rule_is_named() {
        let b = || Config::builder(NodeId(1), ids(&[1, 2]));
        let ms = Duration::from_millis;
        assert_eq!(
            b().heartbeat_interval(Duration::ZERO).build(),
            Err(ConfigError::Zero {
                setting: "heartbeat_interval"
            })
        );
        assert_eq!(
            b().ack_timeout(Duration::ZERO).build(),
            Err(ConfigError::Zero {
                setting: "ack_timeout"
            })
        );
        assert!(matches!(
            b().coordinator_timeout(Duration::MAX).build(),
            Err(ConfigError::TooLong {
                setting: "coordinator_timeout",
                ..
            })
        ));
        assert_eq!(
            b().heartbeat_interval(ms(500))
                .failure_timeout(ms(500))
                .build(),
            Err(ConfigError::FailureTimeoutNotAboveInterval {
                failure_timeout: ms(500),
                heartbeat_interval: ms(500)
            })
        );
        assert!(matches!(
            b().election_timeout(ms(200)).build(),
            Err(ConfigError::ElectionTimeoutNotAboveAck { .. })
        ));
        assert_eq!(
            Config::builder(NodeId(1), ids(&[])).build(),
            Err(ConfigError::NoMembers)
        );
        assert_eq!(
            Config::builder(NodeId(1), ids(&[1, 2, 2])).build(),
            Err(ConfigError::DuplicateMember { id: NodeId(2) })
        );
        assert_eq!(
            Config::builder(NodeId(7), ids(&[1, 2])).build(),
            Err(ConfigError::NotAMember { id: NodeId(7) })
        );
        let many = (0..=MAX_MEMBERS as u64).map(NodeId);
        assert!(matches!(
            Config::builder(NodeId(0), many).build(),
            Err(ConfigError::TooManyMembers { .. })
        ));
        assert_eq!(
            b().failure_timeout(ms(400)).lease(ms(401)).build(),
            Err(ConfigError::LeaseAboveFailureTimeout {
                lease: ms(401),
                failure_timeout: ms(400)
            })
        );
        assert_eq!(
            b().lease(ms(200))
                .clock_drift(0.0)
                .lease_margin(ms(0))
                .build(),
            Err(ConfigError::LeaderLeaseNotAboveInterval {
                leader_lease: ms(200),
                heartbeat_interval: ms(200)
            })
        );
        assert!(matches!(
            b().lease_margin(ms(1000)).build(),
            Err(ConfigError::LeaderLeaseNotAboveInterval { .. })
        ));
        assert_eq!(
            b().lease(Duration::ZERO).build(),
            Err(ConfigError::Zero { setting: "lease" })
        );
        for drift in [-0.01, 0.5, f64::NAN, f64::INFINITY] {
            assert_eq!(
                b().clock_drift(drift).build(),
                Err(ConfigError::ClockDriftOutOfRange),
                "{drift}"
            );
        }
        let msg = b()
            .failure_timeout(ms(100))
            .build()
            .unwrap_err()
            .to_string();
        assert!(msg.contains("failure_timeout") && msg.contains("heartbeat_interval"));
    }
}
