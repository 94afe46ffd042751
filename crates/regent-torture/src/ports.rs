//! Listen ports for a peer group's members, from below the kernel's
//! ephemeral range.
//!
//! A member killed by the nemesis listens on its port again when it is
//! restarted. A port of the ephemeral range (what binding port 0 hands
//! out) can meanwhile be taken by any outgoing connection on the machine,
//! and the member then exits with "address already in use" (it happened on
//! a loaded host). Below that range only an explicit bind lands, so the
//! ports come from there: picked at random, each bound to check it is free
//! and held until all are found. (The test kit's `ports::free_ports` does
//! the same for the tests; the campaign, shipped, does not depend on the
//! test kit.)

use std::io;
use std::net::{Ipv4Addr, TcpListener};
use std::ops::Range;

/// The lowest port handed out: above the well-known and most registered
/// ports.
const LOWEST: u16 = 10_000;

/// Where ports come from when the ephemeral range cannot be read or leaves
/// too little room below it.
const FALLBACK: Range<u16> = 10_000..32_768;

fn unclaimed_range() -> Range<u16> {
    let ephemeral_start = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok());
    match ephemeral_start {
        Some(start) if start >= LOWEST + 4_000 => LOWEST..start,
        _ => FALLBACK,
    }
}

/// `n` distinct ports of `127.0.0.1`, free a moment ago and below the
/// ephemeral range.
pub(crate) fn free_ports(n: usize) -> io::Result<Vec<u16>> {
    let range = unclaimed_range();
    let span = u32::from(range.end - range.start);
    let mut held: Vec<(u16, TcpListener)> = Vec::with_capacity(n);
    for _ in 0..4_000 + 10 * n {
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
                "found {} of {n} free ports of 127.0.0.1 in {}..{}",
                held.len(),
                range.start,
                range.end
            ),
        ));
    }
    Ok(held.into_iter().map(|(p, _)| p).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_distinct_and_below_the_ephemeral_range() {
        let ports = free_ports(5).unwrap();
        let range = unclaimed_range();
        assert!(ports.iter().all(|p| range.contains(p)), "{ports:?}");
        let mut sorted = ports.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 5);
    }
}
