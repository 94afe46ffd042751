//! The load cases, only when named in `--cases`: what a crowd costs a
//! store, regent alone.
//!
//! * **herd** (`herd.rs`): a thousand candidates of one election in the
//!   bench's process, and the store operations each failover costs them.
//! * **scale** (`scale.rs`, `scale_child.rs`): one process leading 1 to
//!   10,000 elections, and what that costs per ttl.
//!
//! Operations are counted at the store's interface (`counting.rs`). Both
//! cases use regent's default ttl (10 s; Consul's minimum is the same) and
//! timing.

pub(crate) mod counting;
pub(crate) mod herd;
pub(crate) mod open;
pub(crate) mod report;
pub(crate) mod result;
pub(crate) mod scale;
pub(crate) mod scale_child;

use std::path::Path;
use std::time::Duration;

use crate::case::LoadCase;
use crate::engines::RunningStore;
use crate::error::BenchError;
use crate::wait::check_interrupted;

use self::counting::counted;
use self::herd::{HERD, HERD_SHORT, herd};
use self::open::StoreSpec;
use self::result::LoadResult;
use self::scale::{ScaleOptions, scale};

/// Runs `case` on `store`. The scale case's children are the harness at
/// `harness`, with their files in `dir`.
pub(crate) fn run(
    store: &RunningStore,
    case: LoadCase,
    short: bool,
    options: &ScaleOptions,
    (harness, dir): (&Path, &Path),
    note: &dyn Fn(String),
) -> Result<LoadResult, BenchError> {
    match case {
        LoadCase::Herd => run_herd(store, short, options, note),
        LoadCase::Scale => scale(store, options, harness, dir, note),
    }
}

/// The herd, on a runtime of 2 workers, until done or interrupted.
fn run_herd(
    store: &RunningStore,
    short: bool,
    options: &ScaleOptions,
    note: &dyn Fn(String),
) -> Result<LoadResult, BenchError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| BenchError::Failed(format!("a runtime: {e}")))?;
    runtime.block_on(async {
        let opened = StoreSpec::of(store, options.commit_interval)
            .open_boxed()
            .await?;
        // SIGINT or SIGTERM to the bench (see `wait::catch_interrupts`).
        let stop = async {
            while check_interrupted().is_ok() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        let n = if short { HERD_SHORT } else { HERD };
        tokio::select! {
            r = herd(store, counted(opened), n, note) => r,
            () = stop => Err(BenchError::Interrupted),
        }
    })
}
