//! What a regent election looks like from outside — who leads, whether
//! leadership moved and how long nobody led, and whether the leader is
//! actually working — as Prometheus metrics, a health check and the
//! timeline of its terms. `regent run --http` and `regent dashboard` serve
//! these; a service that embeds regent serves them on its own router.
//!
//! * [`Monitor`] follows one election: an instance that campaigns
//!   ([`Monitor::follow`], any [`Election`](regent_core::Election): a lease
//!   [`Candidate`](regent_core::Candidate) or a peer node) or a process that
//!   only watches ([`Monitor::observe`]). It reads the election's status
//!   and term events ([`regent_core::TermEvent`]) and never changes
//!   leadership: its failure cannot end a term.
//! * [`StoreCalls`] counts the store's requests by operation and outcome,
//!   with their latency, by wrapping the store ([`StoreCalls::instrument`]).
//! * [`Health`] is the health check, in rules an operator can read.
//! * [`Metrics`] (feature `prometheus`) registers everything on a
//!   [`prometheus_client`](https://docs.rs/prometheus-client) registry the
//!   application passes in.
//!
//! # Metrics
//!
//! | name | type | labels | meaning |
//! |---|---|---|---|
//! | `leader_election_master_status` | gauge | `name` | 1 while this instance leads, 0 otherwise: client-go's metric, so its dashboards and alerts work unchanged |
//! | `regent_leader` | gauge | `election` | the same, with regent's label |
//! | `regent_fencing_token` | gauge | `election` | the token of the term in progress as seen here; 0 with no leader known |
//! | `regent_terms_won_total` | counter | `election` | terms this instance won |
//! | `regent_step_downs_total` | counter | `election`, `reason` | this instance's terms that ended: `lost`, `deadline`, `health`, `shutdown`, `store_error`, `released` |
//! | `regent_leader_changes_total` | counter | `election` | terms seen begin, anyone's |
//! | `regent_lease_remaining_seconds` | gauge | `election` | local lease time left of this instance's term; 0 when not leading |
//! | `regent_leaderless_gap_seconds` | gauge | `election` | how long nobody led before the last term began, as seen here |
//! | `regent_healthy` | gauge | `election` | 1 while the health check passes |
//! | `regent_store_requests_total` | counter | `operation`, `outcome` | store requests: `try_acquire`, `renew`, `release`, `update_metadata`, `current_leader`, `candidates`, `watch`, `watch_update`; `ok`, an error kind, or `abandoned` |
//! | `regent_store_request_duration_seconds` | histogram | `operation` | how long the store took to answer |
//! | `regent_command_starts_total`, `regent_command_restarts_total` | counter | `election` | the leader's command (`regent run`) |
//! | `regent_command_exits_total` | counter | `election`, `status` | its exits on its own: the code, the signal's name, or `cannot start` |
//! | `regent_peer_members`, `regent_peer_leader_id`, `regent_peer_epoch` | gauge | `election` | a peer group as this member sees it (`regent peer`) |
//! | `regent_peer_transport_events_total` | counter | `election`, `event` | what the member's transport did |
//!
//! The alert client-go's users already run works unchanged — exactly one
//! leader across the instances of an election:
//!
//! ```text
//! sum by (name) (leader_election_master_status) != 1
//! ```
//!
//! and a leader that keeps losing its terms, or an election that keeps
//! going leaderless, shows in `rate(regent_step_downs_total{reason!="released"}[15m])`
//! and `regent_leaderless_gap_seconds`.
//!
//! # Why a collector, not stored metric values
//!
//! The metrics are computed from the monitor's state at each scrape (a
//! `prometheus_client` [`Collector`](prometheus_client::collector::Collector))
//! rather than kept in metric objects updated as things happen: the lease
//! time left and the health check depend on the time of the scrape, and
//! one source of truth (the monitor) serves the metrics, the health check
//! and the live page alike.

mod calls;
mod health;
mod monitor;
#[cfg(feature = "prometheus")]
mod prometheus;
mod timeline;

pub use calls::{
    CallsSnapshot, Instrumented, LATENCY_BUCKETS, Latency, Operation, Outcome, StoreCalls,
    UNANSWERED,
};
pub use health::Health;
pub use monitor::{CommandStats, GroupView, Monitor, Snapshot, StepDown};
#[cfg(feature = "prometheus")]
pub use prometheus::Metrics;
pub use timeline::{MAX_TERMS, TermRecord};
