//! **regent**: leader election for Rust services.
//!
//! Several identical instances of a service run; regent makes them agree on
//! exactly one leader, runs the coordinator work only there, notices when the
//! leader dies or hangs, and elects another — without two leaders acting on
//! the same resource, because every term carries a fencing token.
//!
//! This crate is the facade: it re-exports [`regent_core`] and, behind one
//! feature per backend, the store crates: `sqlite` (default) as
//! `regent::sqlite`; `etcd` (and `etcd-tls` for TLS) as
//! `regent::etcd`, which needs `protoc` to build; `consul` as
//! `regent::consul`; `azblob` (Azure Blob leases) as `regent::azblob`;
//! `zookeeper` as `regent::zookeeper`; `postgres` as `regent::postgres`;
//! `redis` as `regent::redis`; `peer` (no store) as `regent::peer`. [`regent::memory`](memory) keeps leases in
//! process memory, with fault injection: for tests and examples.
//!
//! ```
//! use std::time::Duration;
//! use regent::{BoxError, Candidate, ElectionName, HolderId, Restart, Supervisor};
//! use regent::memory::MemoryStore;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let candidate = Candidate::builder(
//!     MemoryStore::race(), // in production: regent::sqlite::SqliteStore, etcd, ...
//!     ElectionName::new("report-scheduler")?,
//!     HolderId::new("host-a")?,
//! )
//! .ttl(Duration::from_secs(10))
//! .build()?; // the timing rules are checked here
//! println!("{}", candidate.explain());
//!
//! // Until SIGINT or SIGTERM, which stop the task and give the lease back
//! // so that a follower leads at once.
//! let exit = Supervisor::new(candidate)
//!     .restart(Restart::Never) // one term, for this example
//!     .run_until(regent::shutdown_signal(), |leader| async move {
//!         // Only the leader runs this. Pass the token with every write, and
//!         // stop when `leader.cancelled()` fires.
//!         let token = leader.token();
//!         println!("leading with fencing token {token}");
//!         tokio::select! {
//!             () = leader.cancelled() => {}
//!             () = tokio::time::sleep(Duration::from_secs(1)) => {} // the work
//!         }
//!         Ok::<_, BoxError>(())
//!     })
//!     .await?;
//! # let _ = exit;
//! # Ok(()) }
//! ```
//!
//! # Where things are
//!
//! * [`Candidate`]: one instance's bid for one election; its builder takes
//!   the timing settings, [`Candidate::campaign`] waits until it leads and
//!   returns a [`Leadership`] guard carrying the term's [`FencingToken`].
//! * [`Supervisor`]: runs a task only while leading, cancels it when
//!   leadership ends, hands over when it finishes; its docs describe a
//!   term from start to end. [`Restart`] says when it campaigns again (per
//!   instance, not per fleet).
//! * [`SupervisorSet`] and [`ObserverSet`] ([`many`]): a set of elections
//!   (shards) campaigned for, supervised and observed as one, every item
//!   naming its election.
//! * [`Observer`]: follows the leader without campaigning
//!   ([`Observer::leader_watch`], [`Observer::changes`],
//!   [`Observer::on_new_leader`]); a candidate's own view is
//!   [`Candidate::status`].
//! * Choosing the leader ([`handover`]): [`CandidateBuilder::priority`]
//!   and [`CandidateBuilder::settle`] (a leader hands its term to a
//!   candidate of higher priority it has seen for the settle time),
//!   [`Leadership::hand_over`] and [`handover::request`] (on demand, to a
//!   named candidate or the next), on every store.
//! * [`Timing`]: the timeline of a lease and the rules its settings must
//!   keep; [`Candidate::explain`] gives the numbers for a store
//!   ([`Explanation`]).
//! * [`regent_core`]'s crate docs: the safety model and the fencing
//!   contract; [`store`]: the contract every store implements.
//! * What a crash costs: a leader killed with `kill -9` (or by the OOM
//!   killer) cannot give its lease back, so the next leader starts when it
//!   expires — about the ttl ([`Candidate::explain`] prints it). The crash
//!   guardian (`regent::guardian`, feature `guardian`, Linux) gives the
//!   leases of a dead service back in milliseconds; `regent run` does the
//!   same for a command.
//! * Errors: [`ConfigError`] from `build()`, [`CampaignError`] from a
//!   campaign, [`StoreError`] underneath; [`report`] renders one with its
//!   causes in one line. Expected outcomes ("someone else leads", "the
//!   lease is lost") are values ([`Acquire`], [`EndReason`]), not errors.
//!
//! # Examples
//!
//! In `crates/regent/examples/`, each runnable on the embedded SQLite store
//! (`cargo run -p regent-election --example NAME -- [ARGS]`; start several in
//! different terminals):
//!
//! * `leader_task`: a leader task that appends fenced lines to a file
//!   which refuses smaller tokens, and stops on SIGINT or SIGTERM,
//!   releasing the lease;
//! * `observer`: follows the leader of `leader_task`'s election with
//!   [`Observer::leader_watch`] and [`Observer::on_new_leader`];
//! * `one_shot_job`: a job that runs once across the fleet, its completion
//!   recorded in the resource under the fencing token;
//! * `many_elections`: one process holding many elections (one per shard)
//!   on one shared store, with one [`SupervisorSet`];
//! * `observe_many`: the leaders of those shards followed with one
//!   [`ObserverSet`];
//! * `guarded_service` (feature `guardian`): a service whose `kill -9`
//!   hands its lease over in milliseconds, through the crash guardian.
//!
//! # Coming from client-go's `leaderelection`
//!
//! | client-go | regent |
//! |---|---|
//! | `LeaderElectionConfig{Lock, …}` | [`Candidate::builder`]`(store, election, holder)` |
//! | `LeaseDuration`, `RenewDeadline` | [`ttl`](CandidateBuilder::ttl), [`renew_deadline`](CandidateBuilder::renew_deadline) |
//! | `RetryPeriod` (the leader's renewals and the followers' tries) | [`renew_every`](CandidateBuilder::renew_every) (the leader) and [`retry_every`](CandidateBuilder::retry_every) (a follower) |
//! | `OnStartedLeading(ctx)` | the [`Supervisor`]'s task, called with a [`LeaderContext`] |
//! | `OnStoppedLeading` | the task's cancellation: [`LeaderContext::cancelled`] completes, and the task has `grace` to return |
//! | `OnNewLeader(identity)` | [`Observer::on_new_leader`], or [`Candidate::status`] |
//! | `ReleaseOnCancel: true` | [`Supervisor::run_until`] (a stop always releases) |
//! | `IsLeader()` | none: leadership is a guard with a fencing token ([`Leadership::check`]) |
//!
//! # Coming from etcd's `concurrency.Election`
//!
//! | etcd | regent |
//! |---|---|
//! | `NewSession(client, WithTTL(…))` | a store (`regent::etcd`, feature `etcd`) and [`ttl`](CandidateBuilder::ttl); the [`Leadership`] guard keeps the lease alive |
//! | `Campaign(ctx, value)` | [`Candidate::campaign`] (the value: the [holder id](HolderId) and [`metadata`](CandidateBuilder::metadata), as JSON) |
//! | `Resign(ctx)` | [`Leadership::resign`] |
//! | `Proclaim(ctx, value)` | [`Leadership::proclaim`], or [`LeaderContext::proclaim`] from the supervisor's task: new metadata, same term |
//! | `Observe(ctx)` | [`Observer::changes`] |
//! | `Leader(ctx)` | [`Observer::current`] |
//! | `Rev()` | [`Leadership::token`]: on etcd the leader key's create revision, the fencing token |
//!
//! # Stores by URL
//!
//! [`connect`] opens the store a URL names (`sqlite:PATH`, `etcd://…`,
//! `consul://…`, `azblob://CONTAINER`), with options by name and the rest
//! from `REGENT_<STORE>_<OPTION>` variables (and the variables the store's
//! own tools read, such as `CONSUL_HTTP_TOKEN` or
//! `AZURE_STORAGE_CONNECTION_STRING`, where the store crate says so);
//! [`url`] lists the stores this build includes and parses URLs for front
//! ends such as the `regent` CLI. Everything about a store lives
//! in its crate, described by a [`StoreKind`]; this crate only picks it by
//! scheme, one feature each. Adding a store is a crate, a feature here and
//! an entry in [`url`] (the book's `docs/development.md`, "Adding a store", lists the steps).

// On docs.rs, every item a feature gates says which (`--cfg docsrs`).
#![cfg_attr(docsrs, feature(doc_cfg))]

pub use regent_core::*;

/// The memory store: leases in process memory, with fault injection, for
/// tests and examples (not shared between processes).
// Named here: rustdoc does not show it through the glob above.
#[doc(inline)]
pub use regent_core::memory;

pub mod url;
pub use url::{ConnectError, connect};

#[cfg(all(feature = "guardian", target_os = "linux"))]
#[cfg_attr(docsrs, doc(cfg(all(feature = "guardian", target_os = "linux"))))]
pub mod guardian;

/// Completes when the process is asked to stop: SIGINT (Ctrl-C) or SIGTERM
/// (what `kill`, systemd and Kubernetes send) on Unix, Ctrl-C elsewhere.
/// Hand it to [`Supervisor::run_until`] so that a stop releases the lease
/// and a follower takes over at once, instead of a ttl later.
///
/// ```no_run
/// # use regent::{BoxError, Candidate, ElectionName, HolderId, Supervisor};
/// # async fn demo(candidate: Candidate<regent::BoxStore>) -> Result<(), Box<dyn std::error::Error>> {
/// Supervisor::new(candidate)
///     .run_until(regent::shutdown_signal(), |leader| async move {
///         leader.cancelled().await;
///         Ok::<_, BoxError>(())
///     })
///     .await?;
/// # Ok(()) }
/// ```
///
/// If a handler cannot be installed (no runtime with signals enabled), the
/// failure is logged and this waits for the other signal, or for ever.
///
/// Once it listens, tokio keeps the signals' handlers for the life of the
/// process, so a second SIGINT or SIGTERM no longer kills it: the stop is
/// bounded instead by [`run_until`](Supervisor::run_until) itself (the
/// task's grace, then a release bounded by the renew deadline). A program
/// that wants a second signal to end it at once can wait for it after
/// this one and exit.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let term = async {
            match signal(SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(e) => {
                    cannot_listen("SIGTERM", &e);
                    std::future::pending::<()>().await;
                }
            }
        };
        let int = async {
            if let Err(e) = tokio::signal::ctrl_c().await {
                cannot_listen("SIGINT", &e);
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            () = term => {}
            () = int => {}
        }
    }
    #[cfg(not(unix))]
    {
        if let Err(e) = tokio::signal::ctrl_c().await {
            cannot_listen("Ctrl-C", &e);
            std::future::pending::<()>().await;
        }
    }
}

fn cannot_listen(what: &str, e: &std::io::Error) {
    tracing::warn!(error = %e, "cannot listen for {what}; shutdown_signal() waits for the others");
}

/// The embedded default store (feature `sqlite`, on by default): leases in
/// one SQLite file shared by the processes of one host.
#[cfg(feature = "sqlite")]
#[doc(inline)]
pub use regent_sqlite as sqlite;

/// The etcd v3 store (feature `etcd`; `etcd-tls` adds TLS): elections on an
/// etcd cluster, interoperable with `etcdctl elect`.
#[cfg(feature = "etcd")]
#[doc(inline)]
pub use regent_etcd as etcd;

/// The Consul store (feature `consul`): Consul's leader-election recipe
/// over sessions and KV, with TLS and ACL tokens.
#[cfg(feature = "consul")]
#[doc(inline)]
pub use regent_consul as consul;

/// The Azure Blob store (feature `azblob`): blob leases, the Leader
/// Election pattern's reference example, over the REST API with a shared
/// key or a SAS token (ttl 15 to 60 s).
#[cfg(feature = "azblob")]
#[doc(inline)]
pub use regent_azblob as azblob;

/// The ZooKeeper store (feature `zookeeper`): ephemeral sequential nodes
/// in the layout of Apache Curator's `LeaderLatch`, one session per store
/// for every election.
#[cfg(feature = "zookeeper")]
#[doc(inline)]
pub use regent_zookeeper as zookeeper;

/// Peer elections with no store (feature `peer`): the members elect among
/// themselves by lowest-ID, Bully or Ring over authenticated TCP;
/// [`peer::election::PeerElection`] serves the same
/// [`Supervisor`] and guard as a lease candidate.
#[cfg(feature = "peer")]
#[doc(inline)]
pub use regent_peer as peer;

/// The PostgreSQL store (feature `postgres`): one row per election,
/// decided by the server's clock, fenced by tokens that outgrow a
/// standby's promotion, and safe behind PgBouncer's transaction pooling.
#[cfg(feature = "postgres")]
#[doc(inline)]
pub use regent_postgres as postgres;

/// The Redis store (feature `redis`): one key per election, timed by the
/// server, with fencing tokens that outgrow a restart without persistence
/// and a Sentinel failover; one server, or a primary followed through its
/// Sentinels.
#[cfg(feature = "redis")]
#[doc(inline)]
pub use regent_redis as redis;

/// Metrics, health and the timeline of terms (feature `monitor`): a
/// [`Monitor`](monitor::Monitor) follows an election, counts the store's
/// requests ([`StoreCalls`](monitor::StoreCalls)), answers health checks
/// and registers Prometheus metrics (client-go's
/// `leader_election_master_status` and regent's own) on the application's
/// `prometheus_client` registry. `examples/service.rs` serves them on an
/// axum router.
#[cfg(feature = "monitor")]
#[doc(inline)]
pub use regent_monitor as monitor;

/// The README's library example, compiled with the crate's doctests so that
/// the front door shows code that builds.
#[cfg(all(doctest, feature = "sqlite"))]
#[doc = include_str!("../../../README.md")]
struct ReadmeExample;
