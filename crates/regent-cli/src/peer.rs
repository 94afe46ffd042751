//! `regent peer`: CMD runs only while this member leads a group of peers
//! that elect among themselves, with no store; CMD is supervised exactly as
//! by `regent run` ([`crate::run::supervise`]). And `regent status --peer`
//! / `regent watch --peer`: a member's view, by the transport's view query.

use std::time::Duration;

use regent::peer::codec::PeerView;
use regent::peer::election::{PeerElection, StartError};
use regent::peer::net::{self, QueryError};
use regent_core::{Election, ElectionName, HolderId, LeaderInfo, Metadata};
use tokio::signal::unix::{SignalKind, signal};
use tokio::time::{Instant, sleep_until};

use crate::cli::PeerArgs;
use crate::config::{Member, PeerConfig};
use crate::error::{CliError, chain};
use crate::http::AbortOnDrop;
use crate::output::print;
use crate::run::{Stops, prepare_child, serve, show, supervise, watch_over};
use regent_monitor::{GroupView, Monitor};

pub(crate) async fn run(args: PeerArgs) -> Result<u8, CliError> {
    // One pass: flags → checked settings → the group → supervisor.
    let PeerConfig {
        spec,
        id,
        listen,
        child,
        endpoint,
        members,
    } = PeerConfig::resolve(args)?;
    prepare_child(&child)?;
    let mut stops = Stops::new(child.lifeline_stdin)?;
    let serving = serve(endpoint, "run")?;
    let algorithm = spec.algorithm;
    let peer = tokio::select! {
        r = PeerElection::start(spec) => r.map_err(|e| start_error(&e, listen))?,
        () = stops.next() => return Ok(0),
    };
    tracing::info!(
        algorithm = %algorithm, id, listen = %peer.local_addr(),
        "{}", peer.explain()
    );
    let backoff_cap = peer.timing().ttl;
    let monitor = watch_over(&peer, &child);
    let _group = follow_group(&peer, &monitor, members);
    show(
        serving.as_ref(),
        &monitor,
        format!("peer group ({algorithm})"),
        None,
    );
    // No ticket: a peer's term is not a store's lease.
    supervise(
        &peer,
        &child,
        &mut stops,
        backoff_cap,
        None,
        &monitor,
        |e| CliError::failure(chain(&e)),
    )
    .await
}

/// Keeps the monitor's view of the group current (every 500 ms) until
/// the guard is dropped.
fn follow_group(peer: &PeerElection, monitor: &Monitor, members: u64) -> AbortOnDrop {
    let (peer, monitor) = (peer.clone(), monitor.clone());
    AbortOnDrop::spawn(async move {
        loop {
            let view = peer.view();
            let c = peer.counters();
            let mut group = GroupView::new(members);
            group.leader = view.leader.map(|l| l.id.0);
            group.epoch = view.leader.map(|l| l.epoch.get());
            group.counters = vec![
                ("frames_accepted", c.frames_accepted),
                ("unauthenticated", c.unauthenticated),
                ("malformed", c.malformed),
                ("replayed", c.replayed),
                ("outside_clock_window", c.outside_clock_window),
                ("misaddressed", c.misaddressed),
                ("connections_accepted", c.connections_accepted),
            ];
            monitor.set_group(group);
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
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

/// The first wait between two attempts to reach the member; it doubles up
/// to [`RETRY_CAP`].
const RETRY_FIRST: Duration = Duration::from_millis(100);
const RETRY_CAP: Duration = Duration::from_secs(2);

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
pub(crate) async fn status(member: &Member, json: bool) -> Result<u8, CliError> {
    let window = member.window;
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
    check_election(member, &view)?;
    print(json, &view.election, leader_of(&view).as_ref());
    Ok(0)
}

/// `regent watch --peer`: the member's view, then one line per change of
/// the leader it names, until SIGTERM or SIGINT. Before the first answer
/// as `status`; after it, every error is reported and retried.
pub(crate) async fn watch(member: &Member, json: bool) -> Result<u8, CliError> {
    let window = member.window;
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
                check_election(member, &view)?;
                let now = (view.election.clone(), leader_of(&view));
                if shown.as_ref() != Some(&now) {
                    print(json, &now.0, now.1.as_ref());
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

/// `regent dashboard --peer`: the member's election (asked once, retried
/// as `status` does), and the monitor that follows the leader it names
/// from then on, retrying a member that goes away.
pub(crate) async fn observe(member: &Member) -> Result<Monitor, CliError> {
    let view = {
        let start = Instant::now();
        let mut delay = RETRY_FIRST;
        loop {
            match net::query(member.addr, None, &member.secret, member.timeout).await {
                Ok(view) => break view,
                Err(e) if is_retryable(&e) && start.elapsed() < member.window => {
                    tracing::warn!(error = %chain(&e), "peer group member unreachable; retrying");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(RETRY_CAP);
                }
                Err(e) => return Err(query_error(&e)),
            }
        }
    };
    check_election(member, &view)?;
    let election = view.election.clone();
    let watch = net::watch_view(member.addr, None, member.secret.clone(), member.timeout);
    let changes =
        futures_util::stream::unfold((watch, RETRY_FIRST), |(mut watch, mut delay)| async move {
            let item = match watch.next().await {
                Ok(view) => {
                    delay = RETRY_FIRST;
                    Ok(leader_of(&view))
                }
                Err(e) => {
                    // Shown until the member answers again; asked again
                    // after a backoff.
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(RETRY_CAP);
                    Err(chain(&e))
                }
            };
            Some((item, (watch, delay)))
        });
    Ok(Monitor::observe_changes(election, changes))
}
