//! `regent peer`'s flags.

use std::time::Duration;

use clap::{Args, ValueEnum};

use super::run::ChildArgs;
use super::values::parse_duration;

#[derive(Debug, Args)]
pub(crate) struct PeerArgs {
    /// The election algorithm; every member must use the same.
    #[arg(long, value_enum)]
    pub(crate) algorithm: AlgorithmArg,
    /// This member's id: a number, unique in the group and listed in
    /// --peers.
    #[arg(long)]
    pub(crate) id: u64,
    /// The address to accept the other members' connections on (default:
    /// this member's address in --peers).
    #[arg(long, value_name = "ADDR")]
    pub(crate) listen: Option<std::net::SocketAddr>,
    /// Every member of the group, this one included: ID=HOST:PORT,...
    #[arg(long, value_name = "ID=ADDR,...", value_parser = parse_peers)]
    pub(crate) peers: PeerList,
    /// Lead only while a majority of the members acknowledge it within the
    /// lease: a partition cannot give two leaders at once.
    #[arg(long)]
    pub(crate) quorum: bool,
    /// A file holding the group's shared secret (at least 16 bytes; default:
    /// the variable REGENT_PEER_SECRET). Never on the command line.
    #[arg(long, value_name = "FILE")]
    pub(crate) secret_file: Option<std::path::PathBuf>,
    /// How often the leader (every member for lowest-id) sends heartbeats.
    #[arg(long, value_parser = parse_duration, default_value = "200ms")]
    pub(crate) heartbeat_interval: Duration,
    /// A member unheard of for this long is taken for dead.
    #[arg(long, value_parser = parse_duration, default_value = "1s")]
    pub(crate) failure_timeout: Duration,
    /// The name CMD sees as REGENT_ELECTION.
    #[arg(long, value_name = "NAME", default_value = "peer")]
    pub(crate) election: String,
    #[command(flatten)]
    pub(crate) child: ChildArgs,
    #[command(flatten)]
    pub(crate) http: super::HttpArgs,
}

/// The peer algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum AlgorithmArg {
    /// The lowest id among the live members leads.
    LowestId,
    /// Bully: the highest live id wins.
    Bully,
    /// Ring: an election goes round the ring; the highest live id leads.
    Ring,
}

/// `--peers`, parsed: ids and addresses, each id once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PeerList(pub(crate) std::collections::BTreeMap<u64, std::net::SocketAddr>);

/// Parses `ID=HOST:PORT,...`. A host name is resolved now, once.
pub(crate) fn parse_peers(s: &str) -> Result<PeerList, String> {
    use std::net::ToSocketAddrs as _;
    let mut peers = std::collections::BTreeMap::new();
    for entry in s.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((id, addr)) = entry.split_once('=') else {
            return Err(format!("'{entry}' is not ID=HOST:PORT"));
        };
        let id: u64 = id
            .trim()
            .parse()
            .map_err(|_| format!("'{id}' in '{entry}' is not a member id (a number)"))?;
        let addr = addr
            .trim()
            .to_socket_addrs()
            .map_err(|e| format!("'{addr}' in '{entry}' is not HOST:PORT: {e}"))?
            .next()
            .ok_or_else(|| format!("'{addr}' in '{entry}' resolves to no address"))?;
        if peers.insert(id, addr).is_some() {
            return Err(format!("member {id} is listed twice"));
        }
    }
    if peers.is_empty() {
        return Err("no members: give ID=HOST:PORT,...".to_owned());
    }
    Ok(PeerList(peers))
}
