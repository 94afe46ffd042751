//! The load cases, only when named in `--cases`: what a crowd costs a
//! store, and what an observer sees, regent alone.
//!
//! * **herd** (`herd.rs`): a thousand candidates of one election in the
//!   bench's process, and the store operations each failover costs them.
//! * **scale** (`scale.rs`, `scale_child.rs`): one process leading 1 to
//!   10,000 elections, and what that costs per ttl.
//! * **observe**, **observe-crash** (`observe.rs`): an observer beside two
//!   candidates, each on a store instance of its own, in the bench's
//!   process: when it names the next leader, against when that leader
//!   knows it leads; `--runs` hand-overs per store.
//!
//! Operations are counted at the store's interface (`counting.rs`). The
//! crowds use regent's default ttl (10 s; Consul's minimum is the same)
//! and timing; the observer cases 2 s where the store takes it.

pub(crate) mod counting;
pub(crate) mod herd;
pub(crate) mod observe;
pub(crate) mod open;
pub(crate) mod report;
pub(crate) mod result;
pub(crate) mod scale;
pub(crate) mod scale_child;

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use crate::case::LoadCase;
use crate::engines::RunningStore;
use crate::error::BenchError;
use crate::wait::check_interrupted;

use self::counting::counted;
use self::herd::{HERD, HERD_SHORT, herd};
use self::observe::observe;
use self::open::StoreSpec;
use self::result::{Departure, LoadResult};
use self::scale::{ScaleOptions, scale};

/// Runs `case` on `store`, `runs` times where it repeats (the observer
/// cases). The scale case's children are the harness at `harness`, with
/// their files in `dir`.
pub(crate) fn run(
    store: &RunningStore,
    case: LoadCase,
    (runs, short): (usize, bool),
    options: &ScaleOptions,
    (harness, dir): (&Path, &Path),
    note: &dyn Fn(String),
) -> Result<LoadResult, BenchError> {
    let spec = || StoreSpec::of(store, options.commit_interval);
    match case {
        LoadCase::Herd => on_runtime(async {
            let opened = spec().open_boxed().await?;
            let n = if short { HERD_SHORT } else { HERD };
            herd(store, counted(opened), n, note).await
        }),
        LoadCase::Scale => scale(store, options, harness, dir, note),
        LoadCase::Observe => on_runtime(observe(store, &spec(), runs, Departure::Resign, note)),
        LoadCase::ObserveCrash => on_runtime(observe(store, &spec(), runs, Departure::Crash, note)),
    }
}

/// Runs `work` on a runtime of 2 workers, until done or interrupted.
fn on_runtime<T>(work: impl Future<Output = Result<T, BenchError>>) -> Result<T, BenchError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| BenchError::Failed(format!("a runtime: {e}")))?;
    runtime.block_on(async {
        // SIGINT or SIGTERM to the bench (see `wait::catch_interrupts`).
        let stop = async {
            while check_interrupted().is_ok() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        tokio::select! {
            r = work => r,
            () = stop => Err(BenchError::Interrupted),
        }
    })
}
