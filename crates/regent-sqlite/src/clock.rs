//! The host's clock for lease expiry: `CLOCK_MONOTONIC` plus the boot id.
//! Why this clock and not another is in the crate docs.

use std::path::Path;
use std::time::{Duration, Instant};

use regent_core::{ErrorKind, StoreError};

/// Where Linux publishes the id of the current boot: a random UUID drawn at
/// boot, the same for every process (and container) on the host.
pub(crate) const BOOT_ID_PATH: &str = "/proc/sys/kernel/random/boot_id";

/// Nanoseconds on `CLOCK_MONOTONIC`: the clock `std::time::Instant`, and so
/// `tokio::time::Instant`, read on Linux. One clock for every process on the
/// host, never stepped by NTP or an operator, stopped during suspend,
/// restarted at boot.
pub(crate) fn monotonic_now_ns() -> i64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    // Seconds since boot fit an i64 of nanoseconds for 292 years.
    ts.tv_sec
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec)
}

/// `at + d`, or the latest instant the clock can tell when that is beyond
/// it: never a panic. The store's options are bounded (at most a day), so
/// this only guards against a bound forgotten.
pub(crate) fn later(at: Instant, d: Duration) -> Instant {
    if let Some(t) = at.checked_add(d) {
        return t;
    }
    // Halving the step until it fits ends within 128 steps.
    let (mut t, mut step) = (at, d / 2);
    while !step.is_zero() {
        match t.checked_add(step) {
            Some(next) => t = next,
            None => step /= 2,
        }
    }
    t
}

/// Reads the boot id. Without it, a lease written before a reboot would be
/// compared against a clock that restarted from zero, so the store refuses
/// to open rather than guess.
pub(crate) fn read_boot_id(path: &Path) -> Result<String, StoreError> {
    let raw = std::fs::read_to_string(path).map_err(|e| {
        StoreError::new(
            ErrorKind::Config,
            format!(
                "sqlite store: cannot read the boot id from '{}' (the sqlite store needs Linux)",
                path.display()
            ),
        )
        .with_source(e)
    })?;
    let id = raw.trim();
    if id.is_empty() {
        return Err(StoreError::new(
            ErrorKind::Config,
            format!("sqlite store: the boot id in '{}' is empty", path.display()),
        ));
    }
    Ok(id.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses `Instant`'s debug form (`Instant { tv_sec: 1, tv_nsec: 2 }` on
    /// Linux) into nanoseconds.
    fn instant_ns(i: std::time::Instant) -> Option<i64> {
        let s = format!("{i:?}");
        let num = |key: &str| -> Option<i64> {
            let rest = &s[s.find(key)? + key.len()..];
            let end = rest.find(|c: char| !c.is_ascii_digit())?;
            rest[..end].parse().ok()
        };
        Some(num("tv_sec: ")? * 1_000_000_000 + num("tv_nsec: ")?)
    }

    #[test]
    fn store_clock_is_the_clock_of_std_and_tokio_instant() {
        // The crate's safety argument rests on this: the holder's deadline
        // (tokio::time::Instant, which wraps std::time::Instant) and the
        // store's expiry are read from one clock. If std ever moves Instant
        // to another clock, or this debug form changes, recheck the
        // argument in the crate docs before touching this test.
        let before = monotonic_now_ns();
        let std_now = std::time::Instant::now();
        let after = monotonic_now_ns();
        let std_ns = instant_ns(std_now).expect("Instant's debug form shows tv_sec and tv_nsec");
        assert!(
            before <= std_ns && std_ns <= after,
            "std::time::Instant ({std_ns} ns) is not CLOCK_MONOTONIC ({before}..={after} ns)"
        );
    }

    #[test]
    fn later_never_overflows() {
        let now = Instant::now();
        let d = Duration::from_secs(86_400);
        assert_eq!(later(now, d), now + d);
        let far = later(now, Duration::MAX);
        assert!(
            far > now + Duration::from_secs(100 * 365 * 86_400),
            "{far:?}"
        );
        assert_eq!(later(far, Duration::MAX), far, "already as late as it goes");
    }

    #[test]
    fn boot_id_is_read_and_trimmed() {
        let id = read_boot_id(Path::new(BOOT_ID_PATH)).expect("linux has a boot id");
        assert_eq!(id.len(), 36, "{id:?}");
        assert_eq!(id, id.trim());
    }

    #[test]
    fn missing_boot_id_is_config() {
        let e = read_boot_id(Path::new("/nonexistent/boot_id")).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Config);
        assert!(e.to_string().contains("/nonexistent/boot_id"), "{e}");
    }
}
