//! `regent peer`: CMD runs only while this member leads a group of peers
//! that elect among themselves, with no store; CMD is supervised exactly as
//! by `regent run` ([`crate::run::supervise`]). And `regent status --peer`
//! / `regent watch --peer`: a member's view, by the transport's view query.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use regent::peer::codec::{MIN_SECRET_LEN, PeerView, Secret};
use regent::peer::election::{Algorithm, PeerElection, PeerSpec, StartError};
use regent::peer::net::{self, QueryError};
use regent::peer::{Config, ConfigError, NodeId};
use regent_core::{Election, ElectionName, HolderId, LeaderInfo, Metadata};
use tokio::signal::unix::{SignalKind, signal};
use tokio::time::{Instant, sleep_until};

use crate::cli::{AlgorithmArg, PeerArgs, ShowArgs};
use crate::error::{CliError, chain};
use crate::run::{Stops, prepare_child, supervise};
use crate::show::print;
use crate::store::start_retry;

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
    // No ticket: a peer's term is not a store's lease.
    supervise(&peer, &args.child, &mut stops, backoff_cap, None, |e| {
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

/// How long `status --peer` and `watch --peer` wait for the member to
/// accept the connection, and then for its answer, without
/// `--peer-timeout`.
const PEER_TIMEOUT: Duration = Duration::from_secs(2);

/// The first wait between two attempts to reach the member; it doubles up
/// to [`RETRY_CAP`].
const RETRY_FIRST: Duration = Duration::from_millis(100);
const RETRY_CAP: Duration = Duration::from_secs(2);

/// `--peer` and its companions, checked: usage errors come before any
/// connection.
#[derive(Debug)]
struct Member {
    addr: SocketAddr,
    secret: Secret,
    timeout: Duration,
    /// `--election`, if given: the member's must be the same.
    election: Option<ElectionName>,
}

async fn member(args: &ShowArgs) -> Result<Member, CliError> {
    let Some(text) = args.peer.as_deref() else {
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
    let timeout = args.peer_timeout.unwrap_or(PEER_TIMEOUT);
    if timeout.is_zero() {
        return Err(CliError::usage("--peer-timeout must be greater than zero"));
    }
    let secret = secret(args.secret_file.as_deref())?;
    let addr = peer_addr(text).await?;
    Ok(Member {
        addr,
        secret,
        timeout,
        election,
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

/// A query's error as the CLI reports it: the member unreachable or
/// silent is exit 3, anything else a failure.
fn query_error(e: &QueryError) -> CliError {
    match e {
        QueryError::Connect { .. } | QueryError::Io { .. } => CliError::unreachable(chain(e))
            .with_hint("--peer takes the address a `regent peer` member listens on"),
        QueryError::NoAnswer { .. } => CliError::unreachable(chain(e)),
        _ => CliError::failure(chain(e)),
    }
}

/// Whether an attempt that failed so is worth another within the start
/// window: the member could not be reached (not running yet, restarting).
/// A member that does not answer is not asked again: it does not hold the
/// secret, and would not on a second try.
fn is_retryable(e: &QueryError) -> bool {
    matches!(e, QueryError::Connect { .. } | QueryError::Io { .. })
}

/// The leader a member's view names, as `status` prints it: the member id
/// as the holder, the term's token, no metadata (as `regent peer` shows
/// it to CMD).
fn leader_of(view: &PeerView) -> Option<LeaderInfo> {
    let leader = view.leader.filter(|_| !view.stopped)?;
    Some(LeaderInfo {
        holder: HolderId::new(leader.id.get().to_string()).ok()?,
        token: leader.token(),
        metadata: Metadata::default(),
    })
}

/// Refuses a view of another election than `--election` named.
fn check_election(member: &Member, view: &PeerView) -> Result<(), CliError> {
    match &member.election {
        Some(expected) if *expected != view.election => Err(CliError::usage(format!(
            "--election {expected}: the member at {} runs election {}",
            member.addr, view.election
        ))),
        _ => Ok(()),
    }
}

/// `regent status --peer`: one query, retried while the member cannot be
/// reached, for the start window.
pub(crate) async fn status(args: &ShowArgs) -> Result<u8, CliError> {
    let member = member(args).await?;
    let window = start_retry()?;
    let start = Instant::now();
    let mut delay = RETRY_FIRST;
    let view = loop {
        match net::query(member.addr, None, &member.secret, member.timeout).await {
            Ok(view) => break view,
            Err(e) if is_retryable(&e) && start.elapsed() < window => {
                tracing::warn!(error = %chain(&e), "peer group member unreachable; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(RETRY_CAP);
            }
            Err(e) => return Err(query_error(&e)),
        }
    };
    check_election(&member, &view)?;
    print(args.json, &view.election, leader_of(&view).as_ref());
    Ok(0)
}

/// `regent watch --peer`: the member's view, then one line per change of
/// the leader it names, until SIGTERM or SIGINT. Before the first answer
/// as `status`; after it, every error is reported and retried.
pub(crate) async fn watch(args: &ShowArgs) -> Result<u8, CliError> {
    let member = member(args).await?;
    let window = start_retry()?;
    let sig =
        |kind| signal(kind).map_err(|e| CliError::failure(format!("cannot catch signals: {e}")));
    let (mut term, mut int) = (sig(SignalKind::terminate())?, sig(SignalKind::interrupt())?);
    let mut watch = net::watch_view(member.addr, None, member.secret.clone(), member.timeout);
    let start = Instant::now();
    let mut delay = RETRY_FIRST;
    let mut retry_at: Option<Instant> = None;
    // What was printed last: a change of anything else is not a line.
    let mut shown: Option<(ElectionName, Option<LeaderInfo>)> = None;
    loop {
        if let Some(at) = retry_at.take() {
            tokio::select! {
                () = sleep_until(at) => {}
                _ = term.recv() => return Ok(0),
                _ = int.recv() => return Ok(0),
            }
        }
        let next = tokio::select! {
            r = watch.next() => r,
            _ = term.recv() => return Ok(0),
            _ = int.recv() => return Ok(0),
        };
        match next {
            Ok(view) => {
                delay = RETRY_FIRST;
                check_election(&member, &view)?;
                let now = (view.election.clone(), leader_of(&view));
                if shown.as_ref() != Some(&now) {
                    print(args.json, &now.0, now.1.as_ref());
                    shown = Some(now);
                }
            }
            Err(e) if shown.is_none() => {
                if !is_retryable(&e) || start.elapsed() >= window {
                    return Err(query_error(&e));
                }
                tracing::warn!(error = %chain(&e), "peer group member unreachable; retrying");
                retry_at = Some(Instant::now() + delay);
                delay = (delay * 2).min(RETRY_CAP);
            }
            Err(
                e @ (QueryError::Connect { .. }
                | QueryError::Io { .. }
                | QueryError::NoAnswer { .. }),
            ) => {
                warn_user!("regent: {}; retrying", chain(&e));
                retry_at = Some(Instant::now() + delay);
                delay = (delay * 2).min(RETRY_CAP);
            }
            Err(e) => return Err(CliError::failure(format!("watch failed: {}", chain(&e)))),
        }
    }
}
