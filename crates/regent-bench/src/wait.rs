//! Waiting, and being told to stop: SIGINT or SIGTERM set a flag that
//! every wait checks, so that the guards of whatever the bench started
//! (tool processes, engines, scale children) drop and kill it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use crate::error::BenchError;

/// Set by SIGINT or SIGTERM to the bench: every wait then ends with
/// [`BenchError::Interrupted`].
static INTERRUPTED: LazyLock<Arc<AtomicBool>> = LazyLock::new(Arc::default);

/// Catches SIGINT and SIGTERM into the interrupt flag.
pub(crate) fn catch_interrupts() -> Result<(), BenchError> {
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&INTERRUPTED))
            .map_err(|e| BenchError::Failed(format!("cannot catch signals: {e}")))?;
    }
    Ok(())
}

/// [`BenchError::Interrupted`] once the bench was asked to stop.
pub(crate) fn check_interrupted() -> Result<(), BenchError> {
    if INTERRUPTED.load(Ordering::Relaxed) {
        Err(BenchError::Interrupted)
    } else {
        Ok(())
    }
}

/// Sleeps `d`, in slices, so that an interrupt is noticed.
pub(crate) fn pause(d: Duration) -> Result<(), BenchError> {
    let until = Instant::now() + d;
    while let Some(left) = until.checked_duration_since(Instant::now()) {
        check_interrupted()?;
        std::thread::sleep(left.min(Duration::from_millis(20)));
    }
    check_interrupted()
}

/// Polls `probe` every `every` until it yields a value; an error naming
/// `what` after `within`.
pub(crate) fn wait_for<T>(
    within: Duration,
    every: Duration,
    what: &str,
    mut probe: impl FnMut() -> Result<Option<T>, BenchError>,
) -> Result<T, BenchError> {
    let until = Instant::now() + within;
    loop {
        check_interrupted()?;
        if let Some(v) = probe()? {
            return Ok(v);
        }
        if Instant::now() >= until {
            return Err(BenchError::Failed(format!(
                "timed out after {within:?} waiting for {what}"
            )));
        }
        std::thread::sleep(every);
    }
}
