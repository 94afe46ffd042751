//! Test kit for regent.
//!
//! Three parts:
//!
//! * The leadership [`History`]: the candidates of one test record when each
//!   believed it led, and the test then checks the whole history at once for
//!   the election's safety properties.
//! * [`engines`]: real store engines (SQLite's file; etcd: one member, a
//!   cluster, or a member secured by TLS and authentication; Consul: a dev
//!   agent, shared or not, one secured by TLS and ACLs, or three servers
//!   with client agents; Azurite, the Azure Storage emulator, shared or
//!   not; ZooKeeper: a standalone server, shared or not, or an ensemble
//!   of three) started on free ports of `127.0.0.1` for the end-to-end tests and
//!   the store crates' integration tests, stopped by PID when dropped.
//!   Every engine has one shape, [`engines::Engine`], and
//!   [`for_every_engine!`] runs a test on every engine with a store. A
//!   missing engine is an error naming
//!   `scripts/install-engines`, never a skipped test.
//! * [`pki`]: test certificates for engines with TLS, made at test time.
//!
//! # Why a history, not assertions inside each candidate
//!
//! Election safety is a property of all candidates together: "no two holders
//! believe they lead at the same instant" and "every new term carries a larger
//! fencing token" cannot be checked by one candidate looking at itself. So
//! each candidate only records its beliefs ([`History::begin_leadership`],
//! [`History::end_leadership`]) into a shared, cheaply cloned [`History`], and
//! the test calls [`History::assert_ok`] (or [`History::check`]) once all
//! candidates have stopped. A failure names the holders, tokens and instants
//! involved, measured from the first recorded event, and lists every
//! interval.
//!
//! Times are [`tokio::time::Instant`], so histories recorded on paused time
//! (`#[tokio::test(start_paused = true)]`) are exact and reproducible.

pub mod engines;
pub mod fixtures;
pub mod history;
pub mod pki;

pub use history::{History, Interval, Summary, Violation};
