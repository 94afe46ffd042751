//! regent's ZooKeeper store: an election is a node whose children are its
//! candidates' ephemeral sequential nodes, laid out as Apache Curator's
//! `LeaderLatch` lays out its participants, so that regent candidates and
//! Curator participants on the same path queue in one line and agree on
//! one leader.
//!
//! ```no_run
//! use std::time::Duration;
//! use regent_core::{Candidate, ElectionName, HolderId};
//! use regent_zookeeper::ZkStore;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let store = ZkStore::builder("10.0.0.1:2181,10.0.0.2:2181,10.0.0.3:2181")
//!     .chroot("/services")
//!     .connect()
//!     .await?;
//! // The latch path /services/jobs, shared with Curator's LeaderLatch.
//! let candidate = Candidate::builder(store, ElectionName::new("jobs")?, HolderId::new("host-1")?)
//!     .ttl(Duration::from_secs(10))
//!     .build()?;
//! let leadership = candidate.campaign().await?;
//! println!("leading with token {}", leadership.token());
//! # Ok(())
//! # }
//! ```
//!
//! # The recipe
//!
//! * **A place in line.** A candidate creates the ephemeral sequential node
//!   `CHROOT/ELECTION/_c_{GUID}-latch-{sequence}` holding its holder id
//!   (with metadata, a newline and the metadata as JSON: see below), and
//!   never changes it. Metadata a leader proclaims later goes to the
//!   ephemeral node `CHROOT/_regent_metadata/ELECTION/{its node's name}`:
//!   `LeaderLatch` watches the node ahead of its own for its deletion
//!   alone, and a change of its data would spend that one-shot watch
//!   (found by the Curator test: the participant behind a leader that
//!   proclaimed never heard the leader leave). The
//!   children sorted by what follows `latch-` are the line; the first
//!   leads. A candidate that is not first stays in line with its node (a
//!   queue store, [`StoreStyle::Queue`](regent_core::StoreStyle)) and is
//!   told the leader; it learns of a change by its watch.
//! * **Fencing token** = the czxid of the leader's node: the id of the
//!   transaction that created it. Transaction ids only grow across the
//!   whole ensemble, and a node later in line was created later, so every
//!   leader's token is larger than every earlier leader's, across holders,
//!   server restarts and the election's node being deleted.
//! * **Protected names.** A create whose answer is lost (the connection
//!   broke) may still have made the node. As Curator's protected mode, the
//!   name carries a GUID chosen before the create; the next acquire of the
//!   same session looks for a node with that GUID before it creates one,
//!   and creates again with the same GUID, so that a create that lands
//!   late is found as a duplicate and deleted. A retried acquire queues
//!   once. regent's GUIDs are version-8 UUIDs (random bits, RFC 9562's
//!   version for custom layouts); Curator's are version 4. That is how
//!   regent tells its own nodes from a `LeaderLatch` participant's, whose
//!   data, a bare participant id, looks like a regent node's without
//!   metadata (see the [hand-over](#hand-over-to-a-chosen-candidate)).
//!
//! # The session is the unit of liveness
//!
//! One [`ZkStore`] (and its clones) keeps **one session** for all its
//! elections, and the client keeps the session alive by itself (it pings
//! when its connection has been idle for about a sixth of the timeout), so
//! a process pays for one session however many elections it holds.
//!
//! A renewal is a read of the candidate's own node: is it still there, of
//! this session, created at the term's token? Renewals go in **rounds**: a
//! renewal waits for its session's next round, and a round reads the nodes
//! of every renewal waiting in one `multiRead` request (more only past
//! 512 KiB of request or answer). Rounds are at least a tenth of the session timeout
//! apart, and the first after a quiet spell goes at once, so the server
//! gets at most about ten reads per ttl from a process, however many
//! elections it renews: 200 elections renewing at once cost 3 packets
//! instead of 200 (`tests/shared.rs`), and the load benchmark
//! (`docs/load.md`) shows the count per ttl at 10,000 elections. Each
//! renewal still gets its own answer, and its lease runs from the round's
//! send, after the renewal was called. `multiRead` needs ZooKeeper 3.6 or
//! later; a 3.5 server fails every renewal with a
//! [`Config`](regent_core::ErrorKind::Config) error that says so.
//!
//! The watchers of one election through one store (a crowd of candidates
//! in one process, an observer beside them) share one ZooKeeper watch
//! ([`regent_core::store::shared_watch`]): each watcher's own would list
//! every candidate again at each change, a million names per change for
//! 1,000 candidates.
//!
//! The server negotiates the
//! session timeout (between 2 and 20 × its `tickTime`): the ttl the store
//! grants is that timeout ([`TtlGrant::Negotiated`](regent_core::TtlGrant)),
//! and the candidate times its lease and `explain()` by it. The session is
//! opened with the first ttl an election asks; elections asking another ttl
//! later share it, with its timeout.
//!
//! * **Connection lost** (Curator's SUSPENDED). Renewals fail; the leader
//!   keeps leading until its local deadline (measured from its last
//!   confirmed renewal's send), then stops acting, whatever the network
//!   does. If the client reconnects within the session timeout and a
//!   renewal succeeds before the deadline, it goes on leading: the node,
//!   and so the place in line, is the same.
//! * **Session expired** (Curator's LOST). ZooKeeper deleted the session's
//!   nodes: every election of the session ends at its next renewal (the
//!   node is gone: lost), and the next campaign opens a new session and
//!   queues again at the end of the line. A node is never re-created for a
//!   term that already runs, so a reconnect cannot give a second leader
//!   (the race of CURATOR-620, where a latch re-created its node on
//!   reconnect while its old one still stood).
//! * **Safety against the servers' clocks.** A renewal answered means the
//!   session was alive on the server when it was applied, after it was
//!   sent; the leader's deadline is measured from the send, and it steps
//!   down at its renew deadline, before the session timeout. In an
//!   ensemble a follower tells the leader of a session's activity once a
//!   tick, so the leader may expire a session up to a tick after the
//!   client last heard from its server: keep `ttl − renew_deadline` above
//!   a tick (regent's defaults leave a fifth of the ttl at least, and a
//!   tick is at most half the session timeout: use a session timeout of 4
//!   ticks or more).
//!
//! # What a crash costs
//!
//! A leader that exits cleanly deletes its node: the next in line leads
//! after one watch notification (milliseconds). A leader that dies (kill
//! -9, a lost host) leaves its node until its session expires: the
//! session timeout, plus up to a tick for the server's expiry buckets
//! ([`EXPIRY_SLACK`]). With a 10 s ttl on a server with the default 2 s
//! tick, about 10–12 s.
//!
//! # With Curator
//!
//! A Curator `LeaderLatch` on the latch path `CHROOT/ELECTION`, with
//! participant ids that are valid holder ids, joins the same line:
//! `LeaderLatch.getLeader()` shows a regent leader's holder id, and
//! `regent status` shows a Curator leader's participant id (a participant
//! id that is not a valid holder id is shown with its bytes outside `!`
//! to `~` as `_`, its data in the metadata `zk.data`). One difference: a
//! regent candidate that starts with metadata writes it after its holder
//! id, so that Curator shows its participant id as the holder id, a
//! newline, and the JSON metadata; metadata proclaimed later is regent's
//! alone, and Curator goes on showing the bare id.
//!
//! # Hand-over to a chosen candidate
//!
//! [`release_to`](regent_core::LeaseStore::release_to) (a leader handing
//! its term to a named successor) lists the election's children, reads
//! the nodes from the leader's to the successor's first node behind it
//! (64 reads per round trip), then sends one `multi`: delete the leader's
//! node and every node between, each at the version read, and check the
//! version of the successor's node. ZooKeeper applies all of it or none
//! (the leader's proclaimed metadata, if any, is deleted just before, as
//! `release` deletes it).
//! The successor's node is next in line at once, and its next acquire wins
//! with a greater token. The candidates whose nodes were taken out lose
//! their place: a renewal of it is [`Lost`](regent_core::Renewal::Lost),
//! and their next acquire, with the old place or without, creates a new
//! node at the back of the line, on the same session.
//!
//! Only nodes regent made are taken out: a name protected by a regent
//! GUID (version 8) and data regent wrote. A Curator `LeaderLatch`
//! participant's node is never deleted. When one stands between the
//! leader and the successor (or any node regent did not make, or a node
//! of a regent release whose GUIDs were version 4), the successor has no
//! node behind the leader's, the leader's node is no longer this term's,
//! the line changed between the reads and the `multi`, or more than 1,000
//! nodes stand between, the call is a plain `release` and answers
//! [`HandOff::Released`](regent_core::store::HandOff::Released). A
//! successor is named by its holder as `candidates` shows it, so a Curator
//! participant can be one: it is then made next, and kept.
//!
//! # Errors
//!
//! Every [`StoreError`](regent_core::StoreError) names the operation, the
//! election's path and the servers, and carries zookeeper-client's error
//! as its source; every call is bounded by the
//! [call timeout](ZkStoreBuilder::call_timeout).
//!
//! | kind | when |
//! | --- | --- |
//! | [`Unavailable`](regent_core::ErrorKind::Unavailable) (transient) | connection lost, no server answered in time, the session expired or moved, the server throttled the request |
//! | [`Auth`](regent_core::ErrorKind::Auth) | ZooKeeper refused the operation under the node's ACL, or the credentials |
//! | [`Config`](regent_core::ErrorKind::Config) | no servers, a bad chroot, a quota exceeded, an operation the server does not implement, an election node that is ephemeral |
//! | [`Corrupt`](regent_core::ErrorKind::Corrupt) | our own node was deleted by someone else while our session lives |
//! | [`Protocol`](regent_core::ErrorKind::Protocol) | an answer that cannot be |
//!
//! # URLs and options (the store kind)
//!
//! [`KIND`] describes this store to front ends: `zk://HOST[:PORT],…[/CHROOT]`
//! and the digest credentials (`REGENT_ZOOKEEPER_DIGEST`, or `--zookeeper-digest-file`).
//! Its docs list the grammar and the options.
//!
//! # Why zookeeper-client
//!
//! It is async, maintained, speaks ZooKeeper 3.5+ (create2 answers carry
//! the czxid we need), and runs on tokio with its `tokio` feature; its
//! own lock recipe waits inside one call, where the store contract needs
//! single attempts, so the recipe here is regent's own on its primitives.

mod builder;
mod client;
mod error;
mod handoff;
mod node;
mod record;
mod session;
mod store;
mod target;
mod watch;

pub use builder::{DEFAULT_CALL_TIMEOUT, DEFAULT_SESSION_TIMEOUT, ZkStoreBuilder};
pub use client::ZkStore;
pub use store::{EXPIRY_SLACK, MIN_TTL};
pub use target::{DEFAULT_PORT, KIND, ZkTarget, parse_target};

#[cfg(test)]
mod send_sync {
    fn is_send_sync<T: Send + Sync + 'static>() {}

    #[test]
    fn public_types_are_send_and_sync() {
        is_send_sync::<super::ZkStore>();
        is_send_sync::<super::ZkStoreBuilder>();
    }
}
