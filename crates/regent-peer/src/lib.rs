//! Leader election among peers, with no store: **lowest-ID**, **Bully** and
//! **Ring**, each a sans-IO state machine.
//!
//! A group of 3 to 7 instances with a static membership of unique `u64`
//! ids ([`NodeId`]) elects one of them by talking among themselves. Each
//! algorithm is a [`Machine`]: the driver feeds it the time and what
//! arrived ([`Machine::handle`]`(now, input)`), and it answers with
//! messages to send and leader changes ([`Output`]). It reads no clock,
//! opens no socket and spawns nothing, so the same code runs under the
//! tokio driver and TCP transport (`net`, feature `net`, on by default), a
//! test that steps it by hand, and the deterministic simulator (`sim`,
//! feature `testing`).
//!
//! # Safety class: timing-only, unless in quorum mode
//!
//! **Without quorum mode, a partition gives two leaders**, and the fencing
//! token is the only protection. Each side of a split network sees the
//! other side's members as dead and elects its own leader; both lead until
//! the network heals. A leader that is paused (GC,
//! SIGSTOP) or cut off keeps believing it leads, and nothing here can stop
//! it. These algorithms promise only:
//!
//! * **at most one leader per epoch**, whatever the network does (by
//!   construction, below);
//! * **eventual agreement**: once the network is whole and reliable and the
//!   nodes are up, every node names the same leader within a bounded time
//!   (measured by the simulation tests);
//! * **fencing tokens that grow** with the epoch, so the resource the
//!   leader writes can refuse an old leader's writes.
//!
//! **The fencing token is the only protection against two leaders.** A
//! resource that the leader writes must remember the largest token it has
//! accepted and refuse smaller ones; then of two leaders on two sides of a
//! partition, the one with the older epoch is refused once the newer one
//! has written. A resource that does not check tokens gets two writers.
//!
//! # Epochs and fencing tokens
//!
//! Every term has an [`Epoch`], `round << 16 | rank`, where `rank` is the
//! leader's position in the sorted membership (which is why every member
//! must be configured with the same membership).
//!
//! * A node keeps the largest epoch seen in any message (its *max epoch*)
//!   and never lowers it while it runs. Every message carries an epoch.
//! * A node opens a term at `(max.round + 1) << 16 | rank`, strictly above
//!   its max epoch ([`Epoch::next_for`]), and only with its own rank (Ring:
//!   the initiator opens it with the *winner's* rank, and only the winner
//!   leads in it). A term whose rank bits are not its claimant's is dropped
//!   as malformed.
//! * A COORDINATOR or HEARTBEAT from an epoch older than the receiver's max
//!   epoch is ignored (Bully answers either, Ring a HEARTBEAT, with STALE
//!   and the newer epoch); a leader that learns of a newer epoch than its term re-elects
//!   (lowest-ID: opens a new term).
//! * The fencing token is the epoch itself ([`Epoch::token`]).
//!
//! Why this holds: two different nodes can never lead in the same epoch,
//! because the low 16 bits name the only node that may lead in it; a plain
//! counter would let both sides of a partition pick `max + 1`. While a node
//! runs, each term it claims is above everything it has seen, so its own
//! tokens only grow; and a term that is not the newest is ended as soon as
//! its holder hears of a newer one. Across nodes, tokens grow as far as
//! epochs spread: a leader's term is above every epoch its group had told
//! it of. Two sides of a partition claim independently, and the side with
//! the larger epoch wins the resource: that is fencing doing its work.
//!
//! # Quorum mode
//!
//! [`Quorum`] wraps any of the algorithms so that a node leads only while a
//! majority of the configured members has granted it a lease, and steps
//! down on its own clock when the grants stop (a Raft-style leader lease,
//! [`Config::lease`]). Then **no two nodes lead at the same instant**,
//! whatever the network does, given a bound on clock drift
//! ([`Config::clock_drift`]); the price is that a group leads only with a
//! majority up and connected, a few more messages, and a longer failover.
//! [`Machine::lease_until`] tells a driver when to stop acting even if it
//! is not called again (a paused process). Fencing still matters: a lease
//! cannot recall a write already in flight. The [`quorum`] module gives
//! the argument and the costs.
//!
//! What no peer group can promise without a disk: a node restarted without
//! memory starts at epoch zero. It learns the group's epoch from the first
//! message it gets (every message carries one), and meanwhile it does not
//! claim: lowest-ID and Bully wait `failure_timeout` before a first claim
//! (a live group's heartbeats arrive well before), and Ring's ELECTION
//! collects the epochs of every node it passes before the term is opened.
//! If every node of the group restarts at once, no node remembers the
//! group's epoch. So the rounds a node claims terms in are at least its
//! wall clock's tenths of a second since the Unix epoch
//! ([`ConfigBuilder::wall_clock`], set by [`election::PeerElection`] at
//! every start): rounds follow the tenths of a second of the claims, and the
//! first term after a full restart carries a larger token than the last
//! before it, as long as no node's wall clock is behind, by more than the
//! group was down, that of the node that claimed the last term
//! (`tests/tokens_grow_across_a_whole_restart.rs`). Nothing while the
//! group runs rests on the wall clock: a wrong one only makes rounds jump.
//! We chose this over a file of the max epoch: no disk, no state to
//! carry when a member moves, and the same rule in the simulator.

//! # The algorithms
//!
//! Failure detection is the same for all: heartbeats every
//! `heartbeat_interval`, a node is taken for dead after `failure_timeout`
//! without one ([`Config`], validated by [`ConfigBuilder::build`]), or at
//! once when it says it is leaving ([`Input::Left`]: the transport's
//! GOODBYE, sent by a node that shuts down gracefully), so a leader's
//! graceful shutdown is followed by an election at once rather than a
//! failure timeout later.
//!
//! * [`LowestId`]: every node sends heartbeats to every other; the lowest
//!   id heard from within the failure timeout (itself included, after it
//!   has run that long) leads. No election messages; n(n−1) heartbeats per
//!   interval.
//! * [`Bully`]: ELECTION to the higher members, ANSWER from them,
//!   COORDINATOR from the winner; the highest live id wins, and a recovering
//!   higher node bullies its way back. Only the leader sends heartbeats.
//! * [`Ring`]: an ELECTION goes round the ring collecting the ids of the
//!   live members; the highest collected id leads, and a COORDINATOR goes
//!   round. Every hop is acknowledged, and a successor that does not
//!   acknowledge within `ack_timeout` is skipped (ring repair). Only the
//!   leader sends heartbeats.
//!
//! Each module documents its algorithm and its message counts.
//!
//! # Timer model
//!
//! Timers are a query, not an output: [`Machine::next_deadline`] says when
//! the machine next wants [`Input::Tick`], and every `handle` call acts on
//! whatever deadlines `now` has passed. A driver is a loop around
//! `sleep_until(next_deadline())` and a receive; it never keeps, cancels or
//! matches timer handles, and a spurious or late tick is harmless (see
//! [`Machine`]).
//!
//! # Wire format
//!
//! [`codec`] encodes each algorithm's messages, the transport's GOODBYE,
//! and its view query (QUERY and VIEW, which any holder of the secret may
//! send a node to learn its view), into versioned, length-prefixed frames authenticated with
//! HMAC-SHA256 under a shared secret (checked in constant time before the
//! body is parsed), and decodes any bytes without panicking. Every frame
//! carries a `seq`, the sender's wall clock in microseconds, strictly
//! increasing; the receiving transport refuses a frame whose `seq` is not
//! above the sender's last or is further than a clock-skew window (30 s)
//! from its own clock, so a recorded frame cannot be replayed, not even to
//! a receiver that has restarted since.
//!
//! # Transport
//!
//! The `net` module (feature `net`, on by default) runs any of these
//! machines as a node of a real group: a tokio driver that owns the
//! machine, one TCP link per peer with a bounded queue and reconnection,
//! and an accept loop that authenticates, replay-checks and bounds what
//! comes in, and answers view queries (`net::query`, `net::watch_view`)
//! from the view the driver publishes. Its module docs describe the
//! frames, the replay window, the connection handling and what is logged.
//! Without the feature the crate is the sans-IO machines and the codec,
//! for a driver of your own.
//!
//! Where this departs from the first plan (a tokio driver over a
//! `Transport` trait with TCP and turmoil implementations; see
//! `docs/architecture.md` §3, "The election seam"): there is no
//! `Transport` trait. The deterministic simulator drives the sans-IO
//! machines directly — every algorithm decision is there — with faults a
//! simulated socket layer could not give as cheaply (pauses, drifting
//! clocks, exact reordering), so turmoil would add a dependency and a
//! second copy of the driver to test nothing more; the TCP driver is the
//! one transport, tested over real sockets and by `regent peer` processes.
//!
//! [`election::PeerElection`] (feature `net`) is a node as a
//! `regent_core::Election`: the core's `Supervisor`, `Leadership` guard and
//! status serve it as they serve a lease candidate.
//!
//! # Testing
//!
//! The simulator (module `sim`, feature `testing`) drives a group through
//! crashes, restarts, partitions, loss, duplication, delay and reordering
//! from a seed; the tests in `tests/` check one invariant per file over a
//! fixed seed set and 1,000 random seeds per run (`REGENT_PEER_SEED=N`
//! replays one, `REGENT_PEER_SEEDS=N` draws more). They also measure the
//! messages per election against the textbook bounds. In quorum mode the
//! simulator also pauses nodes (as SIGSTOP or a GC pause would) and lets
//! their clocks drift, and records every stretch of time each node held
//! an exclusive lease; `tests/quorum_*.rs` check that no two overlap. The
//! `tcp_*` tests run real groups over TCP on 127.0.0.1: elections,
//! graceful leave and abort, a rogue with the wrong secret, replays,
//! garbage, and view queries, each waiting on view and counter changes
//! rather than sleeping; `election_seam.rs` runs the core's `Supervisor`
//! over peers.
//!
//! # Not built yet
//!
//! Membership changes while the group runs (every member is configured
//! with the same list, and a change restarts the group). The transport
//! keeps out whoever lacks the shared secret, and recordings; it
//! trusts every holder of the secret, so a member gone bad can still
//! announce a high id or a huge epoch.

mod algorithm;
pub mod bully;
pub mod codec;
mod config;
#[cfg(feature = "net")]
pub mod election;
mod epoch;
pub mod lowest_id;
mod machine;
#[cfg(feature = "net")]
pub mod net;
pub mod quorum;
pub mod ring;
#[cfg(feature = "testing")]
pub mod sim;

pub use algorithm::Algorithm;
pub use bully::Bully;
pub use config::{Config, ConfigBuilder, ConfigError, MAX_DURATION, MAX_MEMBERS};
pub use epoch::{Epoch, Leader, MAX_ROUND, NodeId, RANK_BITS};
pub use lowest_id::LowestId;
pub use machine::{Input, Machine, Output, PeerMessage};
pub use quorum::Quorum;
pub use ring::Ring;

#[cfg(test)]
mod tests {
    use super::*;

    fn is_send_sync<T: Send + Sync>() {}

    #[test]
    fn public_types_are_send_and_sync() {
        is_send_sync::<Bully>();
        is_send_sync::<Ring>();
        is_send_sync::<LowestId>();
        is_send_sync::<Config>();
        is_send_sync::<ConfigError>();
        is_send_sync::<bully::Message>();
        is_send_sync::<ring::Message>();
        is_send_sync::<lowest_id::Message>();
        is_send_sync::<Output<ring::Message>>();
        is_send_sync::<codec::Secret>();
        is_send_sync::<codec::DecodeError>();
        is_send_sync::<codec::Envelope<bully::Message>>();
        is_send_sync::<codec::Payload<ring::Message>>();
        is_send_sync::<Input<lowest_id::Message>>();
        is_send_sync::<Quorum<Bully>>();
        is_send_sync::<Quorum<Ring>>();
        is_send_sync::<Quorum<LowestId>>();
        is_send_sync::<quorum::Message<ring::Message>>();
        is_send_sync::<codec::Control>();
        is_send_sync::<codec::PeerView>();
        is_send_sync::<Algorithm>();
    }
}
