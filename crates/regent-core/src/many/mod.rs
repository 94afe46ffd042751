//! Many elections as one: a process that holds a set of elections (one per
//! shard, say) campaigns for, supervises and observes them with one value
//! and one call, and everything it yields names its election.
//!
//! * [`SupervisorSet`] runs a [`Supervisor`](crate::Supervisor) per
//!   election: [`run_until`](SupervisorSet::run_until) calls the leader task
//!   with the election's name on every term of every election, stops them
//!   all on one signal, returns once every lease has been given back, and
//!   reports each election that failed by its name.
//!   [`leading`](SupervisorSet::leading) says which elections this process
//!   leads now.
//! * [`ObserverSet`] follows the leaders of a set of elections without
//!   campaigning: one stream of `(election, change)`
//!   ([`changes`](ObserverSet::changes)), a map of the leaders kept current
//!   ([`leader_watch`](ObserverSet::leader_watch)), a callback that names
//!   the election ([`on_new_leader`](ObserverSet::on_new_leader)), one read
//!   of them all ([`current`](ObserverSet::current)).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use regent_core::memory::MemoryStore;
//! use regent_core::{BoxError, ElectionName, HolderId, ObserverSet, SupervisorSet};
//!
//! let store = MemoryStore::race();
//! let shards = (0..3)
//!     .map(|n| ElectionName::new(format!("shard-{n}")))
//!     .collect::<Result<Vec<_>, _>>()?;
//!
//! // Watch the shards' leaders (a router, a dashboard, another process).
//! let observers = ObserverSet::new(store.clone(), shards.clone());
//! let mut changes = observers.changes();
//!
//! // Campaign for every shard, as one holder, with the candidates' settings
//! // given once.
//! let set = SupervisorSet::builder(store, HolderId::new("host-a")?, shards)
//!     .configure(|_shard, candidate| candidate.ttl(Duration::from_secs(5)))
//!     .build()?;
//! let mut leading = set.leading();
//! # let signal = tokio::time::sleep(Duration::from_secs(30)); // regent::shutdown_signal()
//! let run = set.run_until(signal, |shard, leader| async move {
//!     // This shard's work, fenced by leader.token(), until leadership ends.
//!     # let _ = shard;
//!     leader.cancelled().await;
//!     Ok::<_, BoxError>(())
//! });
//! tokio::pin!(run);
//! tokio::select! {
//!     all = leading.wait_for(|now| now.len() == 3) => assert!(all.is_ok()),
//!     _ = &mut run => unreachable!("nothing stopped it yet"),
//! }
//! // Every change names its election: no leader at first, then host-a.
//! while changes.leaders().values().filter(|l| l.is_some()).count() < 3 {
//!     let (shard, change) = changes.next().await.expect("watched");
//!     if let Some(leader) = change? {
//!         println!("{shard}: {} (token {})", leader.holder, leader.token);
//!     }
//! }
//! // On the signal every leader task stops and every lease is given back.
//! let exits = run.await?;
//! assert_eq!(exits.len(), 3);
//! assert!(set.leading().borrow().is_empty());
//! # Ok(()) }
//! ```
//!
//! # Why it is built this way
//!
//! * **A supervisor per election, not one candidate for many.** Each
//!   election keeps its own lease, fencing token, timing rules, restart
//!   policy and hand-over: the set multiplies what
//!   [`Supervisor`](crate::Supervisor) does and joins the results, it adds
//!   no second way of leading. What the elections share is the store (its
//!   clones share a connection; etcd and Consul put many elections on one
//!   session, SQLite answers them in one poll), which is where sharing
//!   saves requests.
//! * **Each election's supervisor is a task of its own,** in a `JoinSet`
//!   the call awaits. Shards then work in parallel on a multi-threaded
//!   runtime, and a shard whose work hogs its task delays no other shard's
//!   terms. The price: the leader task is `Fn + Send + Sync + 'static`,
//!   its future `Send + 'static` and its error `Send`, where
//!   [`Supervisor::run`](crate::Supervisor::run), which polls its one task
//!   inline, asks for neither. Panics in the leader task are caught by each
//!   supervisor and end only that term
//!   ([`TermOutcome::TaskPanicked`](crate::TermOutcome::TaskPanicked)).
//! * **An election that fails does not stop the others.** A permanent store
//!   error for one election (a record regent did not write, a key it may
//!   not touch) says nothing about the others, and stopping 49 healthy
//!   shards for one would turn a local fault into an outage. The failure is
//!   logged at `error` level with its election when it happens, the other
//!   elections go on, and [`run_until`](SupervisorSet::run_until) returns
//!   every failure by name once all have stopped ([`SetFailed`],
//!   [`ElectionFailure`]). A leader task's error ends its term, as under a
//!   lone supervisor, and is logged at `warn` level with its election
//!   (a lone supervisor's caller knows which election its task serves). The
//!   same holds for observing: an election whose watch fails for good ends
//!   its own part of the stream, not the stream.
//! * **One stop for all.** The set's [`shutdown_token`](SupervisorSet::shutdown_token)
//!   (cancelled by `run_until`'s signal) stops every supervisor, and each
//!   gives its lease back before `run_until` returns, so another process's
//!   set takes every election over at once rather than a ttl later.
//! * **"Leading" is the candidates' published status**, gathered in one
//!   `watch` channel: for logs, health and counts. Like
//!   [`Status::is_leader`](crate::Status::is_leader) it proves nothing; the
//!   leader task's [`LeaderContext::token`](crate::LeaderContext::token)
//!   does.
//! * **An election named twice is refused** by a supervisor set
//!   ([`SetConfigError::Duplicate`]): two candidates of one holder in one
//!   election would each take the other's record for its own. An observer
//!   set takes a set of names: a name given twice is observed once.
//! * **Items name their election.** The leader task gets the election's
//!   name with its [`LeaderContext`](crate::LeaderContext), every item of
//!   [`SetChanges`] is `(election, change)`, and the set's callback takes
//!   the election first. The single [`Observer::on_new_leader`](crate::Observer::on_new_leader)
//!   keeps its signature: its caller chose the election
//!   ([`Observer::election`](crate::Observer::election) gives it to the
//!   closure), and a callback that also took the name would break every
//!   caller's closure; an `ObserverSet` of one election is the named form.
//!
//! The set balances nothing: the first process to start leads every
//! election, and a second one takes them over when it stops (the facade's
//! `many_elections` example shows it). Spreading shards across processes
//! is a placement decision the application makes by choosing which
//! elections each process campaigns for.

mod error;
mod observe;
mod supervise;

pub use error::{ElectionFailure, ObserveError, SetConfigError, SetFailed};
pub use observe::{LeadersWatch, ObserverSet, SetChanges};
pub use supervise::{SupervisorSet, SupervisorSetBuilder};
