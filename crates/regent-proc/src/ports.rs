//! Free ports of `127.0.0.1` that outgoing connections never take.
//!
//! Binding port 0 hands out a port of the kernel's ephemeral range
//! (`/proc/sys/net/ipv4/ip_local_port_range`, 32768–60999 by default), the
//! same range every outgoing connection takes its local port from. A port
//! found that way and given to a server that starts a moment later, or to
//! one that is stopped and started again on it (a fault test's restart, a
//! torture campaign's killed member), can be taken in between by any
//! connection of any process on the machine: the server then exits with
//! "address already in use". On a loaded CI host running many tests side by
//! side this happened (a `regent peer` member restarted by torture).
//!
//! So the ports here come from below the ephemeral range, where only an
//! explicit bind can land. They are picked at random and each is bound to
//! check it is free; another process picking at the same moment can still
//! take one, which the engines' start handles by retrying on new ports.

use std::io;
use std::net::{Ipv4Addr, TcpListener};
use std::ops::Range;

/// The lowest port handed out: above the well-known and most registered
/// ports servers of this machine may be configured with.
const LOWEST: u16 = 10_000;

/// Where ports come from when the kernel's ephemeral range cannot be read
/// or leaves too little room below it.
const FALLBACK: Range<u16> = 10_000..32_768;

/// The ports [`free_ports`] picks from: from 10,000 up to the start of
/// the kernel's ephemeral range.
pub fn unclaimed_range() -> Range<u16> {
    let ephemeral_start = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok());
    match ephemeral_start {
        // Room for thousands of ports, or the range is not what we think.
        Some(start) if start >= LOWEST + 4_000 => LOWEST..start,
        _ => FALLBACK,
    }
}

/// `n` distinct ports of `127.0.0.1`, free a moment ago and outside the
/// kernel's ephemeral range (see the [module docs](self)).
///
/// Each candidate port is bound, and all are held until `n` are found, so
/// they differ from each other.
///
/// ```
/// let ports = regent_proc::ports::free_ports(3)?;
/// assert_eq!(ports.len(), 3);
/// assert!(ports.iter().all(|p| regent_proc::ports::unclaimed_range().contains(p)));
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// # Errors
///
/// When `n` free ports are not found in a few thousand tries.
pub fn free_ports(n: usize) -> io::Result<Vec<u16>> {
    let range = unclaimed_range();
    let span = u32::from(range.end - range.start);
    let mut held: Vec<(u16, TcpListener)> = Vec::with_capacity(n);
    let tries = 4_000 + 10 * n;
    for _ in 0..tries {
        if held.len() == n {
            break;
        }
        let port = range.start + u16::try_from(fastrand::u32(..span)).unwrap_or(0);
        if held.iter().any(|(p, _)| *p == port) {
            continue;
        }
        if let Ok(listener) = TcpListener::bind((Ipv4Addr::LOCALHOST, port)) {
            held.push((port, listener));
        }
    }
    if held.len() < n {
        return Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!(
                "found {} of {n} free ports of 127.0.0.1 in {}..{} after {tries} tries",
                held.len(),
                range.start,
                range.end
            ),
        ));
    }
    Ok(held.into_iter().map(|(port, _)| port).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// "Free a moment ago" holds only while nobody else picks: the two
    /// tests, run side by side in one process, took each other's ports
    /// (one in about ten runs).
    fn serial() -> std::sync::MutexGuard<'static, ()> {
        static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
        SERIAL
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    #[test]
    fn ports_are_distinct_bindable_and_below_the_ephemeral_range() {
        let _one_at_a_time = serial();
        let ports = free_ports(50).unwrap();
        let mut sorted = ports.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 50, "{ports:?}");
        let range = unclaimed_range();
        assert!(
            ports.iter().all(|p| range.contains(p)),
            "{ports:?} {range:?}"
        );
        // Free a moment ago is all that can be promised: the other test
        // binaries of the suite start servers on ports of their own at the
        // same time, and may take some of these in between (CI saw 1 of 50
        // once the PostgreSQL tests joined, and later 8 of 50). Ports handed
        // out while in use would leave next to none free: half suffices to
        // tell the two apart.
        let still_free = ports
            .iter()
            .filter(|&&port| TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok())
            .count();
        assert!(
            still_free >= 25,
            "only {still_free} of 50 free again: {ports:?}"
        );
    }

    #[test]
    fn a_port_in_use_is_never_handed_out() {
        let _one_at_a_time = serial();
        // Fill a small part of the range; whatever is returned was free.
        let taken = free_ports(200).unwrap();
        let _held: Vec<TcpListener> = taken
            .iter()
            .map(|&p| TcpListener::bind((Ipv4Addr::LOCALHOST, p)).unwrap())
            .collect();
        let more = free_ports(200).unwrap();
        assert!(more.iter().all(|p| !taken.contains(p)), "{more:?}");
    }
}
