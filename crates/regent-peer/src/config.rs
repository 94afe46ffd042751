//! A node's configuration: its id, the static membership and the timings,
//! validated once by [`ConfigBuilder::build`].

use std::time::Duration;

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
}

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

    /// Validates the settings.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] naming the setting and the rule broken: a zero or
    /// over-long duration, a failure timeout not above the heartbeat
    /// interval, an election timeout not above the ack timeout, an empty,
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
        .chain(self.election_timeout.map(|d| ("election_timeout", d)));
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
        if self.failure_timeout <= self.heartbeat_interval {
            return Err(ConfigError::FailureTimeoutNotAboveInterval {
                failure_timeout: self.failure_timeout,
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

    fn ids(v: &[u64]) -> Vec<NodeId> {
        v.iter().copied().map(NodeId).collect()
    }

    #[test]
    fn defaults_build_and_sort_the_members() {
        let c = Config::builder(NodeId(3), ids(&[9, 3, 1])).build().unwrap();
        assert_eq!(c.members(), &ids(&[1, 3, 9])[..]);
        assert_eq!(c.rank(), 1);
        assert_eq!(c.election_timeout(), Config::DEFAULT_ACK_TIMEOUT * 6);
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
        let msg = b()
            .failure_timeout(ms(100))
            .build()
            .unwrap_err()
            .to_string();
        assert!(msg.contains("failure_timeout") && msg.contains("heartbeat_interval"));
    }
}
