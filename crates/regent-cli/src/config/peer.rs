//! `regent peer`'s settings, and those of `status --peer` / `watch
//! --peer`: flags, the shared secret and the member's address resolved
//! and checked once, before the group starts or the member is asked.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use regent::peer::codec::{MIN_SECRET_LEN, Secret};
use regent::peer::election::{Algorithm, PeerSpec};
use regent::peer::{Config, ConfigError, NodeId};
use regent_core::ElectionName;

use crate::cli::{AlgorithmArg, ChildArgs, PeerArgs, ShowArgs};
use crate::error::CliError;
use crate::store::start_retry;

/// The variable that holds the group's secret when `--secret-file` is not
/// given.
pub(crate) const SECRET_VAR: &str = "REGENT_PEER_SECRET";

/// Everything `regent peer` needs, checked.
pub(crate) struct PeerConfig {
    /// The group to start.
    pub(crate) spec: PeerSpec,
    /// `--id`.
    pub(crate) id: u64,
    /// The address this member listens on.
    pub(crate) listen: SocketAddr,
    pub(crate) child: ChildArgs,
    /// `--http`, bound.
    pub(crate) endpoint: Option<crate::http::Endpoint>,
    /// The members configured.
    pub(crate) members: u64,
}

impl PeerConfig {
    /// Checks every flag, reads the secret.
    pub(crate) fn resolve(args: PeerArgs) -> Result<Self, CliError> {
        let election = ElectionName::new(&args.election)
            .map_err(|e| CliError::usage(format!("--election: {e}")))?;
        let me = NodeId(args.id);
        let members = args.peers.0;
        let Some(&own) = members.get(&args.id) else {
            return Err(CliError::usage(format!(
                "--id {}: not a member of --peers (members: {})",
                args.id,
                members
                    .keys()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        };
        super::child::check(&args.child)?;
        let secret = secret(args.secret_file.as_deref())?;
        let config = Config::builder(me, members.keys().copied().map(NodeId))
            .heartbeat_interval(args.heartbeat_interval)
            .failure_timeout(args.failure_timeout)
            .build()
            .map_err(|e| config_error(&e))?;
        let listen = args.listen.unwrap_or(own);
        let member_count = members.len() as u64;
        let algorithm = match args.algorithm {
            AlgorithmArg::LowestId => Algorithm::LowestId,
            AlgorithmArg::Bully => Algorithm::Bully,
            AlgorithmArg::Ring => Algorithm::Ring,
        };
        Ok(Self {
            spec: PeerSpec {
                election,
                algorithm,
                config,
                addresses: members
                    .iter()
                    .map(|(&id, &addr)| (NodeId(id), addr))
                    .collect(),
                listen: listen.into(),
                secret,
                quorum: args.quorum,
                grace: args.child.grace,
            },
            id: args.id,
            listen,
            child: args.child,
            // Last: a usage error above leaves no port bound.
            endpoint: super::endpoint(&args.http)?,
            members: member_count,
        })
    }
}

/// The shared secret: the file's bytes (one trailing newline dropped, so
/// that `echo … > FILE` and a file without one agree), else the variable.
fn secret(file: Option<&Path>) -> Result<Secret, CliError> {
    let (bytes, from) = match file {
        Some(path) => {
            let bytes = std::fs::read(path)
                .map_err(|e| CliError::usage(format!("--secret-file {}: {e}", path.display())))?;
            (bytes, format!("--secret-file {}", path.display()))
        }
        None => match std::env::var_os(SECRET_VAR) {
            Some(v) => (
                std::os::unix::ffi::OsStrExt::as_bytes(v.as_os_str()).to_vec(),
                SECRET_VAR.to_owned(),
            ),
            None => {
                return Err(CliError::usage(format!(
                    "no shared secret: give --secret-file FILE or set {SECRET_VAR} (at least \
                     {MIN_SECRET_LEN} bytes, the same on every member)"
                )));
            }
        },
    };
    let trimmed = bytes
        .strip_suffix(b"\r\n")
        .or_else(|| bytes.strip_suffix(b"\n"))
        .unwrap_or(&bytes);
    Secret::new(trimmed.to_vec()).map_err(|e| CliError::usage(format!("{from}: {e}")))
}

/// A configuration error, naming the flags to change.
fn config_error(e: &ConfigError) -> CliError {
    CliError::usage(format!(
        "--heartbeat-interval / --failure-timeout / --peers: {e}"
    ))
}

/// How long `status --peer` and `watch --peer` wait for the member to
/// accept the connection, and then for its answer, without
/// `--peer-timeout`.
const PEER_TIMEOUT: Duration = Duration::from_secs(2);

/// `--peer` and its companions, checked: usage errors come before any
/// connection.
#[derive(Debug)]
pub(crate) struct Member {
    pub(crate) addr: SocketAddr,
    pub(crate) secret: Secret,
    pub(crate) timeout: Duration,
    /// `--election`, if given: the member's must be the same.
    pub(crate) election: Option<ElectionName>,
    /// How long to retry a member that cannot be reached yet
    /// (`REGENT_START_RETRY`).
    pub(crate) window: Duration,
}

pub(crate) async fn member(args: &ShowArgs) -> Result<Member, CliError> {
    let Some(text) = args.member.peer.as_deref() else {
        return Err(CliError::usage("--peer HOST:PORT is required here"));
    };
    if let Some((flag, _)) = args.options.given.first() {
        return Err(CliError::usage(format!(
            "--{flag} is a store's flag, and --peer {text} reads no store"
        )));
    }
    let election = args
        .election
        .as_deref()
        .map(ElectionName::new)
        .transpose()
        .map_err(|e| CliError::usage(format!("--election: {e}")))?;
    let timeout = args.member.peer_timeout.unwrap_or(PEER_TIMEOUT);
    if timeout.is_zero() {
        return Err(CliError::usage("--peer-timeout must be greater than zero"));
    }
    let secret = secret(args.member.secret_file.as_deref())?;
    let window = start_retry()?;
    let addr = peer_addr(text).await?;
    Ok(Member {
        addr,
        secret,
        timeout,
        election,
        window,
    })
}

/// `HOST:PORT`, resolved (the first address of a host name).
async fn peer_addr(text: &str) -> Result<SocketAddr, CliError> {
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let not_host_port = || {
        CliError::usage(format!(
            "--peer '{text}' is not HOST:PORT (the address a `regent peer` member listens on)"
        ))
    };
    let (host, port) = text.rsplit_once(':').ok_or_else(not_host_port)?;
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(not_host_port());
    }
    let mut addrs = tokio::net::lookup_host(text)
        .await
        .map_err(|e| CliError::unreachable(format!("--peer {text}: cannot resolve {host}: {e}")))?;
    addrs.next().ok_or_else(|| {
        CliError::unreachable(format!("--peer {text}: {host} resolves to no address"))
    })
}
