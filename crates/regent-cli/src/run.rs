//! `regent run`: campaign, run CMD (through the shim) while leading, stop it
//! when leadership ends, campaign again.

use std::os::fd::{AsRawFd, OwnedFd};
use std::process::Stdio;
use std::time::Duration;

use regent_core::{
    BoxStore, CampaignError, Candidate, CandidateBuilder, EndReason, HolderId, Leadership,
    LeaseStore,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, Command};
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::time::{Instant, sleep_until};

use crate::cli::{RestartArg, RunArgs, default_id};
use crate::clock::to_mono_ns;
use crate::error::{CliError, chain};
use crate::shim::STOPPED_BY_SHIM;
use crate::store;

/// What a signal, or the demo's lifeline, asks for.
struct Stops {
    term: Signal,
    int: Signal,
    lifeline: Option<tokio::io::Stdin>,
}

impl Stops {
    fn new(lifeline: bool) -> Result<Self, CliError> {
        let sig = |kind| {
            signal(kind).map_err(|e| CliError::failure(format!("cannot catch signals: {e}")))
        };
        Ok(Self {
            term: sig(SignalKind::terminate())?,
            int: sig(SignalKind::interrupt())?,
            lifeline: lifeline.then(tokio::io::stdin),
        })
    }

    /// Completes on SIGTERM, SIGINT, or the lifeline closing.
    async fn next(&mut self) {
        let lifeline = async {
            match &mut self.lifeline {
                Some(stdin) => {
                    let mut buf = [0u8; 64];
                    while let Ok(n) = stdin.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                    }
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
            () = lifeline => {}
        }
    }
}

enum TermEnd {
    /// Leadership ended (lost, deadline, unhealthy); campaign again.
    Lost,
    /// CMD ended by itself with this status.
    Exited(u8),
    /// A signal asked regent to stop.
    Shutdown,
}

pub(crate) async fn run(args: RunArgs) -> Result<u8, CliError> {
    let election = store::election(&args.store)?;
    let id = args.id.clone().unwrap_or_else(default_id);
    let holder = HolderId::new(&id).map_err(|e| CliError::usage(format!("--id: {e}")))?;
    if args.health_timeout.is_some_and(|d| d.is_zero()) {
        return Err(CliError::usage(
            "--health-timeout must be greater than zero",
        ));
    }
    // Check the timing before touching the store: a usage error must not
    // wait for a dead store.
    configure(
        Candidate::builder(
            regent_core::memory::MemoryStore::race(),
            election.clone(),
            holder.clone(),
        ),
        &args,
    )
    .build()
    .map_err(|e| {
        CliError::usage(format!(
            "invalid timing (--ttl, --renew-every, --renew-deadline, --grace): {e}"
        ))
    })?;

    let mut stops = Stops::new(args.lifeline_stdin)?;
    let store = tokio::select! {
        r = store::open(&args.store, &election) => r?,
        () = stops.next() => return Ok(0),
    };
    let candidate = configure(Candidate::builder(store, election, holder), &args)
        .build()
        .map_err(|e| CliError::usage(format!("invalid timing: {e}")))?;
    tracing::info!("{}", candidate.explain());

    loop {
        let leadership = tokio::select! {
            r = candidate.campaign() => match r {
                Ok(l) => l,
                Err(CampaignError::Shutdown) => return Ok(0),
                Err(e) => return Err(CliError::failure(format!("campaign failed: {}", chain(&e)))),
            },
            () = stops.next() => {
                candidate.shutdown().await;
                return Ok(0);
            }
        };
        match lead(&candidate, leadership, &args, &mut stops).await? {
            TermEnd::Lost => {}
            TermEnd::Shutdown => {
                candidate.shutdown().await;
                return Ok(0);
            }
            TermEnd::Exited(code) => match args.restart {
                RestartArg::Never => return Ok(code),
                RestartArg::OnFailure if code == 0 => return Ok(0),
                _ => {}
            },
        }
    }
}

/// The timing flags applied to a candidate builder.
fn configure<S: LeaseStore>(builder: CandidateBuilder<S>, args: &RunArgs) -> CandidateBuilder<S> {
    let mut builder = builder.ttl(args.ttl);
    if let Some(g) = args.grace {
        builder = builder.grace(g);
    }
    if let Some(d) = args.renew_every {
        builder = builder.renew_every(d);
    }
    if let Some(d) = args.renew_deadline {
        builder = builder.renew_deadline(d);
    }
    builder
}

/// One term: CMD runs under the shim until it exits, leadership ends, the
/// task goes silent, or a signal arrives.
async fn lead(
    candidate: &Candidate<BoxStore>,
    leadership: Leadership,
    args: &RunArgs,
    stops: &mut Stops,
) -> Result<TermEnd, CliError> {
    let grace = candidate.timing().grace;
    let mut states = leadership.lease_state();
    let first = *states.borrow_and_update();
    let heartbeat = match args.health_timeout {
        Some(_) => Some(heartbeat_pipe()?),
        None => None,
    };
    let mut shim = spawn_shim(
        candidate,
        &leadership,
        args,
        to_mono_ns(first.step_down_at),
        heartbeat.as_ref().map(|(_, w)| w),
    )?;
    // Only the shim and CMD hold the write end now.
    let mut beats = match heartbeat {
        Some((read, _write)) => Some(
            tokio::net::unix::pipe::Receiver::from_owned_fd(read)
                .map_err(|e| CliError::failure(format!("heartbeat pipe: {e}")))?,
        ),
        None => None,
    };
    let mut control = shim.stdin.take();
    let mut last_beat = Instant::now();
    let health = args.health_timeout;
    let end = loop {
        let silent_at = health.map(|h| last_beat + h);
        tokio::select! {
            status = shim.wait() => {
                let code = match status {
                    Ok(s) => exit_code(s),
                    Err(e) => return Err(CliError::failure(format!("waiting for the command: {e}"))),
                };
                if code == STOPPED_BY_SHIM && leadership.check().is_err() {
                    // The dead-man's switch fired while regent was stalled.
                    break TermEnd::Lost;
                }
                break TermEnd::Exited(code);
            }
            changed = states.changed() => {
                let state = *states.borrow_and_update();
                if changed.is_err() || state.ended.is_some() {
                    let reason = state.ended.map_or(EndReason::Dropped, |e| e.reason);
                    eprintln!("regent: leadership ended ({reason}); stopping the command");
                    break TermEnd::Lost;
                }
                send(&mut control, &format!("D {}\n", to_mono_ns(state.step_down_at))).await;
            }
            () = sleep_until_opt(silent_at) => {
                eprintln!("regent: no heartbeat on REGENT_HEARTBEAT_FD for {:?}; stepping down", health.unwrap_or_default());
                break TermEnd::Lost;
            }
            n = read_beat(&mut beats) => {
                if n > 0 {
                    last_beat = Instant::now();
                } else {
                    // Every writer closed the pipe: stop expecting beats there
                    // rather than spin; silence will trip the watchdog.
                    beats = None;
                }
            }
            () = stops.next() => break TermEnd::Shutdown,
        }
    };
    if !matches!(end, TermEnd::Exited(_)) {
        send(&mut control, "S\n").await;
        // The shim needs at most grace plus its SIGKILL sweep; a second
        // signal exits at once (the shim then cleans up on its own).
        let bound = grace + Duration::from_secs(3);
        tokio::select! {
            _ = tokio::time::timeout(bound, shim.wait()) => {}
            () = stops.next() => std::process::exit(130),
        }
    }
    drop(control);
    // The command has stopped: now the lease may go.
    if let Err(e) = leadership.resign().await {
        tracing::warn!(error = %e, "release failed; the lease expires by its ttl");
    }
    Ok(end)
}

async fn send(control: &mut Option<ChildStdin>, line: &str) {
    if let Some(c) = control {
        if c.write_all(line.as_bytes()).await.is_err() {
            *control = None;
        }
    }
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => sleep_until(at).await,
        None => std::future::pending().await,
    }
}

async fn read_beat(beats: &mut Option<tokio::net::unix::pipe::Receiver>) -> usize {
    match beats {
        Some(rx) => {
            let mut buf = [0u8; 256];
            rx.read(&mut buf).await.unwrap_or(0)
        }
        None => std::future::pending().await,
    }
}

/// A pipe whose write end is inherited by the shim and CMD
/// (REGENT_HEARTBEAT_FD) and whose read end stays here.
fn heartbeat_pipe() -> Result<(OwnedFd, OwnedFd), CliError> {
    let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| CliError::failure(format!("heartbeat pipe: {e}")))?;
    // The write end must survive exec into the shim and CMD.
    rustix::io::fcntl_setfd(&write, rustix::io::FdFlags::empty())
        .map_err(|e| CliError::failure(format!("heartbeat pipe: {e}")))?;
    rustix::fs::fcntl_setfl(&read, rustix::fs::OFlags::NONBLOCK)
        .map_err(|e| CliError::failure(format!("heartbeat pipe: {e}")))?;
    Ok((read, write))
}

fn spawn_shim(
    candidate: &Candidate<BoxStore>,
    leadership: &Leadership,
    args: &RunArgs,
    deadline_ns: u64,
    heartbeat: Option<&OwnedFd>,
) -> Result<Child, CliError> {
    let exe = std::env::current_exe()
        .map_err(|e| CliError::failure(format!("cannot find regent's own binary: {e}")))?;
    let grace_ms = u64::try_from(candidate.timing().grace.as_millis()).unwrap_or(u64::MAX);
    let mut cmd = Command::new(exe);
    cmd.arg("__shim")
        .arg("--grace-ms")
        .arg(grace_ms.to_string())
        .arg("--deadline-ns")
        .arg(deadline_ns.to_string())
        .arg("--parent")
        .arg(std::process::id().to_string())
        .arg("--")
        .args(&args.cmd)
        .env("REGENT_ELECTION", leadership.election().as_str())
        .env("REGENT_LEADER_ID", leadership.holder().as_str())
        .env("REGENT_FENCING_TOKEN", leadership.token().to_string())
        .stdin(Stdio::piped())
        .kill_on_drop(false);
    if let Some(fd) = heartbeat {
        cmd.env("REGENT_HEARTBEAT_FD", fd.as_raw_fd().to_string());
    }
    cmd.spawn()
        .map_err(|e| CliError::failure(format!("cannot start the supervisor shim: {e}")))
}

fn exit_code(status: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => u8::try_from(c & 0xff).unwrap_or(1),
        (None, Some(sig)) => u8::try_from(128 + (sig & 0x7f)).unwrap_or(255),
        _ => 1,
    }
}
