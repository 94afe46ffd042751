//! `regent peer`: CMD runs only while this member leads a group of peers
//! that elect among themselves, with no store; CMD is supervised exactly as
//! by `regent run` ([`crate::run::supervise`]).

use std::path::Path;

use regent::peer::codec::{MIN_SECRET_LEN, Secret};
use regent::peer::election::{Algorithm, PeerElection, PeerSpec, StartError};
use regent::peer::{Config, ConfigError, NodeId};
use regent_core::{Election, ElectionName};

use crate::cli::{AlgorithmArg, PeerArgs};
use crate::error::{CliError, chain};
use crate::run::{Stops, prepare_child, supervise};

/// The variable that holds the group's secret when `--secret-file` is not
/// given.
pub(crate) const SECRET_VAR: &str = "REGENT_PEER_SECRET";

pub(crate) async fn run(args: PeerArgs) -> Result<u8, CliError> {
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
    if args.child.health_timeout.is_some_and(|d| d.is_zero()) {
        return Err(CliError::usage(
            "--health-timeout must be greater than zero",
        ));
    }
    let secret = secret(args.secret_file.as_deref())?;
    let config = Config::builder(me, members.keys().copied().map(NodeId))
        .heartbeat_interval(args.heartbeat_interval)
        .failure_timeout(args.failure_timeout)
        .build()
        .map_err(|e| config_error(&e))?;
    let listen = args.listen.unwrap_or(own);
    let algorithm = match args.algorithm {
        AlgorithmArg::LowestId => Algorithm::LowestId,
        AlgorithmArg::Bully => Algorithm::Bully,
        AlgorithmArg::Ring => Algorithm::Ring,
    };
    prepare_child(&args.child)?;
    let mut stops = Stops::new(args.child.lifeline_stdin)?;
    let started = PeerElection::start(PeerSpec {
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
    });
    let peer = tokio::select! {
        r = started => r.map_err(|e| start_error(&e, listen))?,
        () = stops.next() => return Ok(0),
    };
    tracing::info!(
        algorithm = %algorithm, id = args.id, listen = %peer.local_addr(),
        "{}", peer.explain()
    );
    let backoff_cap = peer.timing().ttl;
    supervise(&peer, &args.child, &mut stops, backoff_cap, |e| {
        CliError::failure(chain(&e))
    })
    .await
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

fn start_error(e: &StartError, listen: std::net::SocketAddr) -> CliError {
    match e {
        StartError::Listen(io) => CliError::failure(format!("cannot listen on {listen}: {io}")),
        StartError::Timing(_) => CliError::usage(format!(
            "--failure-timeout / --heartbeat-interval / --grace: {e}"
        )),
        other => CliError::usage(other.to_string()),
    }
}
