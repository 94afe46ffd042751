//! A peer group under torture: `regent peer` members on `127.0.0.1`, each
//! pair linked through a proxy of the campaign's, so that the nemesis can
//! cut the group in two (`partition`).

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::{DEFAULT_PEER_TTL, Peers};
use crate::error::{ConfigError, Error};
use crate::proxy;

/// A peer group's heartbeat interval: a fifth of the failure timeout, as
/// `regent peer`'s defaults.
pub(crate) fn peer_heartbeat(ttl: Duration) -> Duration {
    ttl / 5
}

/// The failure timeout of a peer campaign's members (`given`, else
/// [`DEFAULT_PEER_TTL`]), checked as `regent peer` will check it.
pub(crate) fn peer_ttl(given: Option<Duration>, members: u8) -> Result<Duration, ConfigError> {
    let ttl = given.unwrap_or(DEFAULT_PEER_TTL);
    let ids = (1..=u64::from(members)).map(regent_peer::NodeId);
    regent_peer::Config::builder(regent_peer::NodeId(1), ids)
        .heartbeat_interval(peer_heartbeat(ttl))
        .failure_timeout(ttl)
        .build()
        .map_err(|source| ConfigError::PeerTtl { ttl, source })?;
    Ok(ttl)
}

/// A peer group under torture: its members' addresses and the links
/// between them.
pub(crate) struct PeerGroup {
    pub(crate) peers: Peers,
    secret_file: PathBuf,
    /// Where each member listens (ids 1..N); a restarted member listens
    /// there again.
    listen: BTreeMap<u64, SocketAddr>,
    /// `(from, to)`: the proxy `from` reaches `to` through. The campaign
    /// holds them to its end, so they outlive members' restarts.
    links: BTreeMap<(u64, u64), proxy::Proxy>,
}

impl PeerGroup {
    /// Picks a listen address for each of `n` members and starts a proxy
    /// for each ordered pair; writes the group's secret into `dir`.
    pub(crate) fn new(peers: Peers, n: u8, dir: &Path) -> Result<Self, Error> {
        let ports = regent_proc::ports::free_ports(usize::from(n))
            .map_err(Error::io("peer group: no free port"))?;
        let listen: BTreeMap<u64, SocketAddr> = (1..=u64::from(n))
            .zip(ports)
            .map(|(id, port)| (id, SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, port))))
            .collect();
        let mut links = BTreeMap::new();
        for &from in listen.keys() {
            for (&to, &addr) in &listen {
                if from != to {
                    let p = proxy::Proxy::start(addr.to_string())
                        .map_err(Error::io("peer group: proxy"))?;
                    links.insert((from, to), p);
                }
            }
        }
        let secret_file = dir.join("peer-secret");
        let secret: String = (0..32).map(|_| fastrand::alphanumeric()).collect();
        std::fs::write(&secret_file, secret).map_err(Error::io("peer group: secret file"))?;
        Ok(Self {
            peers,
            secret_file,
            listen,
            links,
        })
    }

    pub(crate) fn members(&self) -> impl Iterator<Item = u64> + '_ {
        self.listen.keys().copied()
    }

    /// Whether the members run in quorum mode.
    pub(crate) fn quorum(&self) -> bool {
        self.peers.quorum
    }

    /// `regent peer`'s arguments for member `id`: it listens on its own
    /// address and reaches every other member through their link.
    pub(crate) fn args(&self, id: u64, ttl: Duration) -> Vec<OsString> {
        let peers: Vec<String> = self
            .listen
            .iter()
            .map(|(&to, &addr)| match self.links.get(&(id, to)) {
                Some(link) => format!("{to}={}", link.addr),
                None => format!("{to}={addr}"),
            })
            .collect();
        let mut args: Vec<OsString> = vec![
            "--algorithm".into(),
            self.peers.algorithm.name().into(),
            "--id".into(),
            id.to_string().into(),
            "--listen".into(),
            self.listen[&id].to_string().into(),
            "--peers".into(),
            peers.join(",").into(),
            "--secret-file".into(),
            self.secret_file.clone().into(),
            "--failure-timeout".into(),
            format!("{}ms", ttl.as_millis()).into(),
            "--heartbeat-interval".into(),
            format!("{}ms", peer_heartbeat(ttl).as_millis()).into(),
        ];
        if self.peers.quorum {
            args.push("--quorum".into());
        }
        args
    }

    /// Sets every link between `side` and the rest of the group to `mode`,
    /// both ways.
    pub(crate) fn cut(&self, side: &BTreeSet<u64>, mode: proxy::Mode) {
        for ((from, to), link) in &self.links {
            if side.contains(from) != side.contains(to) {
                link.set(mode);
            }
        }
    }

    /// What the group is, in words.
    pub(crate) fn describe(&self) -> String {
        format!(
            "a {} peer group{}",
            self.peers.algorithm.name(),
            if self.peers.quorum {
                " in quorum mode"
            } else {
                " (timing-only)"
            }
        )
    }
}
