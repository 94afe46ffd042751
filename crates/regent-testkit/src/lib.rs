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
//!   of three; PostgreSQL: a server, PgBouncer in front of one, or a
//!   primary with a streaming standby) started on free ports of `127.0.0.1` for the end-to-end tests and
//!   the store crates' integration tests, stopped by PID when dropped.
//!   Every engine has one shape, [`engines::Engine`], and
//!   [`for_every_engine!`] runs a test on every engine with a store. A
//!   missing engine is an error naming
//!   `scripts/install-engines`, never a skipped test.
//! * [`pki`]: test certificates for engines with TLS, made at test time.
//! * [`ports`]: free ports outside the kernel's ephemeral range, for
//!   servers that start (or start again) a moment after the port is found.
//! * [`supervisor`]: scenarios of the core's supervisor that each store
//!   crate's tests run on its real engine.
//! * [`browser`]: headless Chromium, driven over its DevTools protocol,
//!   for tests of the live page regent serves over HTTP.
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

pub mod browser;
pub mod engines;
pub mod fixtures;
pub mod history;
pub mod pki;
pub use regent_proc::ports;
pub mod supervisor;

/// The stack of [`block_on_big_stack`]'s threads: 16 MiB.
pub const BIG_STACK: usize = 16 << 20;

/// Runs the future `make` returns to completion on a multi-threaded
/// runtime of `workers` threads, every thread of it (and the one that
/// blocks on it) with a [`BIG_STACK`]; a panic inside comes out here.
///
/// For the store conformance suite: its futures nest deep in an
/// unoptimised build, and with the workspace's features (TLS in the
/// stores' clients) they overflowed the 2 MiB of a test thread, however
/// each check is boxed.
///
/// ```
/// regent_testkit::block_on_big_stack(2, || async {
///     tokio::task::yield_now().await;
/// });
/// ```
///
/// # Panics
///
/// If the runtime or its thread cannot be made, or the future panics.
pub fn block_on_big_stack<F, Fut>(workers: usize, make: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    let suite = std::thread::Builder::new()
        .stack_size(BIG_STACK)
        .spawn(move || {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(workers)
                .thread_stack_size(BIG_STACK)
                .enable_all()
                .build()
                .expect("a runtime")
                .block_on(make());
        })
        .expect("a thread with a big stack");
    if let Err(panic) = suite.join() {
        std::panic::resume_unwind(panic);
    }
}

pub use history::{History, Interval, Summary, Violation};
