//! regent's fault campaign: candidates on a real store write to a fenced
//! resource while a seeded nemesis kills, stops and skews them; a checker
//! judges every write. `regent torture` is its command line; this crate is
//! the campaign, usable from Rust.
//!
//! # A campaign
//!
//! N `regent run` candidates (the [`Config::regent`] executable) on one
//! store each run a [writer] while they lead: it writes every
//! 50 ms, with its term's fencing token, to a fenced resource the campaign
//! serves on `127.0.0.1` (the fence takes a write only if its token is at
//! least the largest it has taken, and records every write). Meanwhile the
//! nemesis injects one fault every 0.5–3 s ([`FaultKind`]): kills,
//! terminations and stops of the leader, of its whole process tree, of
//! its shim or its command, of followers; stops and kills of the store's
//! own processes where the campaign started them
//! ([`Config::store_commands`]) or was told their pids
//! ([`Config::store_pids`]); the leader's store traffic held or slowed
//! through a proxy; followers replaced by ones whose clock runs fast or
//! slow (libfaketime). Killed candidates are replaced, so N stay alive. A
//! peer group ([`Config::peers`]: `regent peer` members, no store) takes
//! partitions instead of the store faults.
//!
//! Every pause scales with the ttl (default 2 s, or the store's shortest
//! ttl when that is longer: Consul 10 s, Azure Blob 15 s), and a fault
//! aimed at the leader waits up to a failover for a leader to hit.
//!
//! A store may be several processes reached through several endpoints,
//! as a Consul cluster with an agent per candidate: each new candidate
//! takes the URL the fewest live candidates use, and each store fault hits
//! one process, in a seeded order that hits every one once before any
//! twice. `store-kill` restarts a process on what it left on disk, so the
//! store must keep its data across a restart (a Consul dev agent does not,
//! nor do Azurite's leases).
//!
//! At the end every candidate is stopped (SIGTERM, then SIGKILL), the fence
//! listens two ttls more, and the checker judges the records.
//!
//! # What it checks
//!
//! [`Violation`]s, each with its evidence:
//!
//! * **stale-write**: a write the fence refused, but for those expected
//!   (from a tree the nemesis froze, `stop-tree`, until a little after the
//!   thaw; from either side of a timing-only peer group's split): without
//!   the fence, the resource would have taken a write from an older term
//!   after a newer one began;
//! * **token-regression**: terms, in the order they began, must carry
//!   growing tokens;
//! * **shared-token**: one token written by two leader ids;
//! * **write-after-exit** and **survivor**: writes, or writer processes,
//!   that outlived every candidate.
//!
//! It also measures the leaderless gap each kind of fault caused (from the
//! fault to the first accepted write of a newer term; a fault the term
//! outlived causes none), in the table and the [`Report`].
//!
//! [`Config::sweep`] replaces the nemesis by the crash-point sweep: a
//! kill -9 of every process of a term (regent, its shim, the namespace's
//! init, the command, the release process of a hand-back) at every point
//! of its life, reached through the [`failpoint`] protocol; each crash's
//! failover is judged against the best that point allows, and writes of
//! the crashed term after the next term's first, or processes of it left
//! running, are violations.
//!
//! The seed is printed at the start and kept in the report: the same seed
//! replays the same choices (kinds, pauses, targets), not the same timing.
//!
//! # Outcomes and exit codes
//!
//! [`run`] returns an [`Outcome`] whenever the campaign reached its
//! verdict, violations or not, and an [`Error`] when it could not.
//! `regent torture` exits with
//!
//! * 0: no violation ([`Outcome::ok`]);
//! * 4: at least one violation (the table, the report and the kept
//!   candidate logs give the evidence);
//! * 2: a configuration refused ([`Error::is_usage`]: a fault that cannot
//!   apply, a ttl the store refuses, URLs of different stores);
//! * 1: a failure while running (no candidate ever led, a fence that
//!   cannot listen, a report that cannot be written).
//!
//! # The front end
//!
//! The campaign knows no store's URLs, options or variables: the front end
//! resolves and opens the store ([`StoreAccess`]) and says which arguments
//! each `regent run` candidate gets. It also serves the [writer]
//! as a hidden mode of the `regent` executable, and its sidecar implements
//! the [`failpoint`] hook.
//!
//! # Example
//!
//! A campaign of one minute, kills only, on a SQLite file, with the store
//! reached through regent's facade:
//!
//! ```no_run
//! use std::ffi::OsString;
//! use std::time::Duration;
//!
//! use regent_core::{BoxError, BoxStore, ElectionName, LeaseStore as _, Target};
//! use regent_torture::{Config, FaultKind, StoreAccess};
//!
//! /// Store URLs as `regent::url` parses them, with no settings.
//! struct Urls;
//!
//! impl StoreAccess for Urls {
//!     type Endpoint = Box<dyn Target>;
//!
//!     fn resolve(&self, url: &str) -> Result<Self::Endpoint, BoxError> {
//!         Ok(regent::url::parse(url, &[], |var| std::env::var_os(var))?)
//!     }
//!
//!     async fn open(
//!         &self,
//!         target: &Self::Endpoint,
//!         election: &ElectionName,
//!     ) -> Result<BoxStore, BoxError> {
//!         let store = target.connect(Duration::from_secs(5)).await?;
//!         store.current_leader(election).await?;
//!         Ok(store)
//!     }
//!
//!     fn child_args(&self) -> Vec<OsString> {
//!         Vec::new()
//!     }
//! }
//!
//! # async fn example() -> Result<(), regent_torture::Error> {
//! let config = Config::new("/usr/local/bin/regent")
//!     .store("sqlite:/tmp/torture.db")
//!     .candidates(3)
//!     .ttl(Duration::from_secs(1))
//!     .duration(Duration::from_secs(60))
//!     .faults([FaultKind::KillLeader, FaultKind::KillFollower])
//!     .seed(42)
//!     .report("torture-report.json");
//! // Ctrl-C ends the faults early; the teardown and the verdict still run.
//! let stop = async {
//!     let _ = tokio::signal::ctrl_c().await;
//! };
//! let outcome = regent_torture::run(config, &Urls, stop).await?;
//! println!("violations: {}", if outcome.ok() { "none" } else { "some" });
//! # Ok(())
//! # }
//! ```
//!
//! Exit codes aside, that is `regent torture --store sqlite:/tmp/torture.db
//! --candidates 3 --ttl 1s --duration 1m --faults kill-leader,kill-follower
//! --seed 42`.

#[macro_use]
mod console;

mod access;
mod campaign;
mod checker;
mod config;
mod error;
pub mod failpoint;
mod fault;
mod fence;
mod nemesis;
mod peers;
mod procfs;
mod proxy;
mod report;
mod run;
mod store;
mod sweep;
mod table;
pub mod writer;

pub use access::StoreAccess;
pub use checker::{Findings, Gaps, Survivor, Violation, WriteRun};
pub use config::{Config, DEFAULT_PEER_TTL, DEFAULT_TTL, Peers};
pub use console::Console;
pub use error::{ConfigError, Error};
pub use fault::{Fault, FaultKind, FaultListError, FaultRefusal};
pub use fence::{Role, Write};
pub use regent_core::BoxError;
/// The algorithms a peer group elects with ([`Peers::algorithm`]).
pub use regent_peer::Algorithm as PeerAlgorithm;
pub use report::{CampaignReport, LoggedFault, Outcome, Parameters, Report, SweepReport};
pub use run::run;
pub use sweep::{Best, Cell, SweepRun, Victim};
