//! A node's transport settings, validated once by
//! [`NodeOptionsBuilder::build`].

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use regent_core::ElectionName;

use crate::codec::Secret;
use crate::config::MAX_DURATION;
use crate::epoch::NodeId;

/// Where a node listens for its peers.
#[derive(Debug)]
#[non_exhaustive]
pub enum Listen {
    /// Bind this address when the node starts.
    Addr(SocketAddr),
    /// Use this listener, already bound (for example to port 0, so that a
    /// test learns every member's address before any node starts).
    Bound(std::net::TcpListener),
}

impl From<SocketAddr> for Listen {
    fn from(addr: SocketAddr) -> Self {
        Listen::Addr(addr)
    }
}

impl From<std::net::TcpListener> for Listen {
    fn from(listener: std::net::TcpListener) -> Self {
        Listen::Bound(listener)
    }
}

/// A node's transport settings. Build them with [`NodeOptions::builder`].
#[derive(Debug)]
pub struct NodeOptions {
    pub(super) listen: Listen,
    pub(super) members: BTreeMap<NodeId, SocketAddr>,
    pub(super) secret: Secret,
    pub(super) election: ElectionName,
    io_timeout: Duration,
    idle_timeout: Duration,
    queue_capacity: usize,
    max_inbound: usize,
    max_queriers: usize,
    leave_timeout: Duration,
    reconnect_min: Duration,
    reconnect_max: Duration,
}

impl NodeOptions {
    /// The default [`io_timeout`](Self::io_timeout): 1 s.
    pub const DEFAULT_IO_TIMEOUT: Duration = Duration::from_secs(1);
    /// The default [`idle_timeout`](Self::idle_timeout): 10 s.
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(10);
    /// The default [`queue_capacity`](Self::queue_capacity): 64 frames.
    pub const DEFAULT_QUEUE_CAPACITY: usize = 64;
    /// The default [`leave_timeout`](Self::leave_timeout): 1 s.
    pub const DEFAULT_LEAVE_TIMEOUT: Duration = Duration::from_secs(1);
    /// The default first reconnection delay: 50 ms.
    pub const DEFAULT_RECONNECT_MIN: Duration = Duration::from_millis(50);
    /// The default longest reconnection delay: 1 s.
    pub const DEFAULT_RECONNECT_MAX: Duration = Duration::from_secs(1);
    /// The default [`max_inbound`](Self::max_inbound) is this many
    /// connections per member.
    pub const DEFAULT_INBOUND_PER_MEMBER: usize = 4;
    /// The default [`max_queriers`](Self::max_queriers): 4 connections.
    pub const DEFAULT_MAX_QUERIERS: usize = 4;
    /// The default [`election`](Self::election): `peer`, as
    /// `regent peer --election` has it.
    pub const DEFAULT_ELECTION: &str = "peer";

    /// Starts the settings of a node that listens on `listen`, reaches
    /// each member at its address in `members`, and authenticates frames
    /// with `secret`.
    ///
    /// `members` must name every member of the machine's configuration
    /// (the same membership on every node); this node's own entry, if
    /// there, is ignored, so every node can be given the same list.
    pub fn builder(
        listen: impl Into<Listen>,
        members: impl IntoIterator<Item = (NodeId, SocketAddr)>,
        secret: Secret,
    ) -> NodeOptionsBuilder {
        NodeOptionsBuilder {
            listen: listen.into(),
            members: members.into_iter().collect(),
            secret,
            election: None,
            io_timeout: Self::DEFAULT_IO_TIMEOUT,
            idle_timeout: Self::DEFAULT_IDLE_TIMEOUT,
            queue_capacity: Self::DEFAULT_QUEUE_CAPACITY,
            max_inbound: None,
            max_queriers: Self::DEFAULT_MAX_QUERIERS,
            leave_timeout: Self::DEFAULT_LEAVE_TIMEOUT,
            reconnect_min: Self::DEFAULT_RECONNECT_MIN,
            reconnect_max: Self::DEFAULT_RECONNECT_MAX,
        }
    }

    /// Every member's address (this node's own entry included, if given).
    pub fn members(&self) -> &BTreeMap<NodeId, SocketAddr> {
        &self.members
    }

    /// The longest a single network step may take: connecting to a peer,
    /// writing a frame, reading the rest of a frame once its first byte has
    /// come, and the wait for the first frame on a new inbound connection.
    pub fn io_timeout(&self) -> Duration {
        self.io_timeout
    }

    /// How long an inbound connection may stay silent between frames
    /// before it is closed. An outbound connection is closed by its sender
    /// after half of it without a frame to send, and opened again when
    /// there is one.
    pub fn idle_timeout(&self) -> Duration {
        self.idle_timeout
    }

    /// How many frames may wait for each peer; when full, the oldest is
    /// dropped (messages are best effort).
    pub fn queue_capacity(&self) -> usize {
        self.queue_capacity
    }

    /// How many inbound connections may be open at once; more are closed as
    /// soon as they are accepted.
    pub fn max_inbound(&self) -> usize {
        self.max_inbound
    }

    /// How many view queries ([`query`](super::query),
    /// [`watch_view`](super::watch_view)) may be served at once, on
    /// connections of their own. A querier's connection counts against
    /// [`max_inbound`](Self::max_inbound) only until its first frame shows
    /// it is one, then against this: queriers never take the members'
    /// places. More are closed unanswered.
    pub fn max_queriers(&self) -> usize {
        self.max_queriers
    }

    /// The name of the election this node's group runs, as a view query is
    /// answered with it.
    pub fn election(&self) -> &ElectionName {
        &self.election
    }

    /// How long [`Node::leave`](super::Node::leave) tries to deliver its
    /// GOODBYEs before it stops anyway.
    pub fn leave_timeout(&self) -> Duration {
        self.leave_timeout
    }

    /// The delays between attempts to reach a peer that cannot be reached:
    /// the first, and the longest (they double in between).
    pub fn reconnect_backoff(&self) -> (Duration, Duration) {
        (self.reconnect_min, self.reconnect_max)
    }
}

/// Chained setters for [`NodeOptions`]; [`build`](Self::build) validates.
#[derive(Debug)]
#[must_use]
pub struct NodeOptionsBuilder {
    listen: Listen,
    members: Vec<(NodeId, SocketAddr)>,
    secret: Secret,
    election: Option<ElectionName>,
    io_timeout: Duration,
    idle_timeout: Duration,
    queue_capacity: usize,
    max_inbound: Option<usize>,
    max_queriers: usize,
    leave_timeout: Duration,
    reconnect_min: Duration,
    reconnect_max: Duration,
}

impl NodeOptionsBuilder {
    /// See [`NodeOptions::io_timeout`] (default 1 s).
    pub fn io_timeout(mut self, d: Duration) -> Self {
        self.io_timeout = d;
        self
    }

    /// See [`NodeOptions::idle_timeout`] (default 10 s); must exceed the
    /// io timeout. A few failure timeouts is a good value.
    pub fn idle_timeout(mut self, d: Duration) -> Self {
        self.idle_timeout = d;
        self
    }

    /// See [`NodeOptions::queue_capacity`] (default 64).
    pub fn queue_capacity(mut self, frames: usize) -> Self {
        self.queue_capacity = frames;
        self
    }

    /// See [`NodeOptions::max_inbound`] (default 4 per member, at least
    /// 4).
    pub fn max_inbound(mut self, connections: usize) -> Self {
        self.max_inbound = Some(connections);
        self
    }

    /// See [`NodeOptions::max_queriers`] (default 4; zero: no view
    /// queries are answered).
    pub fn max_queriers(mut self, connections: usize) -> Self {
        self.max_queriers = connections;
        self
    }

    /// See [`NodeOptions::election`] (default `peer`).
    pub fn election(mut self, name: ElectionName) -> Self {
        self.election = Some(name);
        self
    }

    /// See [`NodeOptions::leave_timeout`] (default 1 s).
    pub fn leave_timeout(mut self, d: Duration) -> Self {
        self.leave_timeout = d;
        self
    }

    /// See [`NodeOptions::reconnect_backoff`] (default 50 ms to 1 s).
    pub fn reconnect_backoff(mut self, first: Duration, longest: Duration) -> Self {
        self.reconnect_min = first;
        self.reconnect_max = longest;
        self
    }

    /// Validates the settings.
    ///
    /// # Errors
    ///
    /// [`OptionsError`] naming the setting and the rule broken: a zero or
    /// over-long duration, a zero capacity, an idle timeout not above the
    /// io timeout, a reconnection backoff whose first delay exceeds its
    /// longest, or a member listed twice.
    pub fn build(self) -> Result<NodeOptions, OptionsError> {
        let durations = [
            ("io_timeout", self.io_timeout),
            ("idle_timeout", self.idle_timeout),
            ("leave_timeout", self.leave_timeout),
            ("reconnect_backoff", self.reconnect_min),
            ("reconnect_backoff", self.reconnect_max),
        ];
        for (setting, value) in durations {
            if value.is_zero() {
                return Err(OptionsError::Zero { setting });
            }
            if value > MAX_DURATION {
                return Err(OptionsError::TooLong {
                    setting,
                    value,
                    max: MAX_DURATION,
                });
            }
        }
        if self.idle_timeout <= self.io_timeout {
            return Err(OptionsError::IdleTimeoutNotAboveIo {
                idle_timeout: self.idle_timeout,
                io_timeout: self.io_timeout,
            });
        }
        if self.reconnect_min > self.reconnect_max {
            return Err(OptionsError::BackoffInverted {
                first: self.reconnect_min,
                longest: self.reconnect_max,
            });
        }
        if self.queue_capacity == 0 {
            return Err(OptionsError::Zero {
                setting: "queue_capacity",
            });
        }
        let mut members = BTreeMap::new();
        for (id, addr) in self.members {
            if members.insert(id, addr).is_some() {
                return Err(OptionsError::DuplicateMember { id });
            }
        }
        let max_inbound = self.max_inbound.unwrap_or_else(|| {
            NodeOptions::DEFAULT_INBOUND_PER_MEMBER.saturating_mul(members.len().max(1))
        });
        if max_inbound == 0 {
            return Err(OptionsError::Zero {
                setting: "max_inbound",
            });
        }
        Ok(NodeOptions {
            listen: self.listen,
            members,
            secret: self.secret,
            election: self.election.unwrap_or_else(|| {
                ElectionName::new(NodeOptions::DEFAULT_ELECTION)
                    .unwrap_or_else(|_| unreachable!("the default name is a valid one"))
            }),
            io_timeout: self.io_timeout,
            idle_timeout: self.idle_timeout,
            queue_capacity: self.queue_capacity,
            max_inbound,
            max_queriers: self.max_queriers,
            leave_timeout: self.leave_timeout,
            reconnect_min: self.reconnect_min,
            reconnect_max: self.reconnect_max,
        })
    }
}

/// A transport setting breaks a rule; the message names the setting (as
/// its builder method is named) and the values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OptionsError {
    /// A duration or a capacity is zero.
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
    /// `idle_timeout` must exceed `io_timeout`, or a connection could be
    /// closed as idle in the middle of a frame's allowance.
    #[error("idle_timeout ({idle_timeout:?}) must be longer than io_timeout ({io_timeout:?})")]
    IdleTimeoutNotAboveIo {
        /// The idle timeout.
        idle_timeout: Duration,
        /// The io timeout.
        io_timeout: Duration,
    },
    /// `reconnect_backoff`'s first delay is longer than its longest.
    #[error(
        "reconnect_backoff: the first delay ({first:?}) is longer than the longest ({longest:?})"
    )]
    BackoffInverted {
        /// The first delay.
        first: Duration,
        /// The longest delay.
        longest: Duration,
    },
    /// A member appears twice in `members`.
    #[error("member {id} appears more than once in members")]
    DuplicateMember {
        /// The repeated id.
        id: NodeId,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn builder() -> NodeOptionsBuilder {
        let addr: SocketAddr = "127.0.0.1:7000".parse().unwrap();
        NodeOptions::builder(
            addr,
            [(NodeId(1), addr), (NodeId(2), addr)],
            Secret::new(*b"0123456789abcdef").unwrap(),
        )
    }

    #[test]
    fn defaults_build_and_scale_the_inbound_cap_with_the_members() {
        let o = builder().build().unwrap();
        assert_eq!(o.max_inbound(), 8);
        assert_eq!(o.io_timeout(), NodeOptions::DEFAULT_IO_TIMEOUT);
        assert_eq!(o.members().len(), 2);
        assert_eq!(builder().max_inbound(3).build().unwrap().max_inbound(), 3);
        assert_eq!(o.max_queriers(), NodeOptions::DEFAULT_MAX_QUERIERS);
        assert_eq!(o.election().as_str(), "peer");
        let named = builder()
            .election(ElectionName::new("billing").unwrap())
            .max_queriers(0)
            .build()
            .unwrap();
        assert_eq!(named.election().as_str(), "billing");
        assert_eq!(named.max_queriers(), 0);
    }

    #[test]
    fn each_rule_is_named() {
        let ms = Duration::from_millis;
        assert_eq!(
            builder().io_timeout(Duration::ZERO).build().unwrap_err(),
            OptionsError::Zero {
                setting: "io_timeout"
            }
        );
        assert!(matches!(
            builder().leave_timeout(Duration::MAX).build(),
            Err(OptionsError::TooLong {
                setting: "leave_timeout",
                ..
            })
        ));
        assert_eq!(
            builder()
                .io_timeout(ms(500))
                .idle_timeout(ms(500))
                .build()
                .unwrap_err(),
            OptionsError::IdleTimeoutNotAboveIo {
                idle_timeout: ms(500),
                io_timeout: ms(500)
            }
        );
        assert_eq!(
            builder()
                .reconnect_backoff(ms(2), ms(1))
                .build()
                .unwrap_err(),
            OptionsError::BackoffInverted {
                first: ms(2),
                longest: ms(1)
            }
        );
        assert_eq!(
            builder().queue_capacity(0).build().unwrap_err(),
            OptionsError::Zero {
                setting: "queue_capacity"
            }
        );
        assert_eq!(
            builder().max_inbound(0).build().unwrap_err(),
            OptionsError::Zero {
                setting: "max_inbound"
            }
        );
        let addr: SocketAddr = "127.0.0.1:7000".parse().unwrap();
        let twice = NodeOptions::builder(
            addr,
            [(NodeId(1), addr), (NodeId(1), addr)],
            Secret::new(*b"0123456789abcdef").unwrap(),
        );
        assert_eq!(
            twice.build().unwrap_err(),
            OptionsError::DuplicateMember { id: NodeId(1) }
        );
        let msg = builder().queue_capacity(0).build().unwrap_err().to_string();
        assert!(msg.contains("queue_capacity"));
    }
}
