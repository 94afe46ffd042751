//! What this process uses, as the kernel counts it: CPU time (of the whole
//! process, and of its threads by name), resident memory, threads, and
//! bytes sent to the storage layer.

use std::time::Duration;

/// CPU time (user + system) of the whole process so far.
pub fn cpu_time() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

/// A number field of `/proc/self/status` (`Threads:`, or `VmRSS:` in
/// KiB); zero if it cannot be read.
pub fn status_field(key: &str) -> i64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Bytes this process caused to be sent to the storage layer
/// (`write_bytes` of `/proc/self/io`).
pub fn write_bytes() -> Option<u64> {
    std::fs::read_to_string("/proc/self/io")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("write_bytes:"))
        .and_then(|v| v.trim().parse().ok())
}

/// CPU time (user + system) of this process's threads named `name` (a
/// thread's name is at most 15 bytes: the SQLite store's are
/// `regent-sqlite`); zero where there are none.
pub fn threads_cpu(name: &str) -> Duration {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Duration::ZERO;
    };
    let ticks: u64 = tasks
        .flatten()
        .filter_map(|task| {
            let text = std::fs::read_to_string(task.path().join("stat")).ok()?;
            let (comm, stat) = crate::parse_stat_named(&text)?;
            (comm == name).then_some(stat.cpu_ticks)
        })
        .sum();
    let per_second = rustix::param::clock_ticks_per_second().max(1);
    Duration::from_secs_f64(ticks as f64 / per_second as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_threads_memory_and_cpu_time() {
        assert!(status_field("Threads:") >= 1);
        assert!(status_field("VmRSS:") > 0);
        assert_eq!(threads_cpu("no such thread"), Duration::ZERO);
        let name = "regent-proc-t";
        let spin = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(|| {
                let start = std::time::Instant::now();
                while start.elapsed() < Duration::from_millis(300) {
                    std::hint::black_box(0u64);
                }
                threads_cpu("regent-proc-t")
            })
            .unwrap();
        assert!(spin.join().unwrap() > Duration::ZERO);
        assert!(cpu_time() > Duration::ZERO);
    }

    #[test]
    fn a_thread_stat_is_read_by_its_name() {
        let (name, stat) =
            crate::parse_stat_named("12 (a b) c) S 1 2 3 4 5 6 7 8 9 10 20 22 0 0 0 0 0 0 99")
                .unwrap();
        assert_eq!(name, "a b) c");
        assert_eq!(stat.cpu_ticks, 42);
    }
}
