//! What this process uses, as the kernel counts it: CPU time (of the whole
//! process, and of its threads by name), resident memory, threads, and
//! bytes sent to the storage layer. (`regent-proc` reads the process
//! table; these are this process's own accounts.)

use std::time::Duration;

/// CPU time (user + system) of the whole process so far.
pub(crate) fn cpu_time() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

/// A number field of `/proc/self/status` (`Threads:`, or `VmRSS:` in
/// KiB); zero if it cannot be read.
pub(crate) fn status_field(key: &str) -> i64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Bytes this process caused to be sent to the storage layer
/// (`write_bytes` of `/proc/self/io`).
pub(crate) fn write_bytes() -> Option<u64> {
    std::fs::read_to_string("/proc/self/io")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("write_bytes:"))
        .and_then(|v| v.trim().parse().ok())
}

/// CPU time (user + system) of this process's threads named `name` (a
/// thread's name is at most 15 bytes: the SQLite store's are
/// `regent-sqlite`); zero where there are none.
pub(crate) fn threads_cpu(name: &str) -> Duration {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Duration::ZERO;
    };
    let ticks: u64 = tasks
        .flatten()
        .filter_map(|task| {
            let stat = std::fs::read_to_string(task.path().join("stat")).ok()?;
            let (head, _) = stat.rsplit_once(')')?;
            head.ends_with(&format!("({name}"))
                .then(|| stat_ticks(&stat))
                .flatten()
        })
        .sum();
    let per_second = rustix::param::clock_ticks_per_second().max(1);
    Duration::from_secs_f64(ticks as f64 / per_second as f64)
}

/// `utime + stime` of a `stat` file of `/proc` (fields 14 and 15), in
/// clock ticks.
fn stat_ticks(stat: &str) -> Option<u64> {
    // The command name (field 2) may hold spaces: count from its ')'.
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_threads_memory_and_cpu_time() {
        assert!(status_field("Threads:") >= 1);
        assert!(status_field("VmRSS:") > 0);
        assert!(stat_ticks("12 (a b) c) S 1 2 3 4 5 6 7 8 9 10 11 12 13").is_some());
        assert_eq!(stat_ticks("12 (x) S 1 2 3 4 5 6 7 8 9 10 20 22"), Some(42));
        assert_eq!(threads_cpu("no such thread"), Duration::ZERO);
    }
}
