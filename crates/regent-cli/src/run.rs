//! `regent run`: campaign, run CMD (through the shim) while leading, stop it
//! when leadership ends, campaign again.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::time::Duration;

use regent_core::{CampaignError, Election, EndReason, Leadership, LeaseStore as _};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::process::{Child, Command};
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::time::{Instant, sleep_until};

use crate::cli::{ChildArgs, PidNamespace, RestartArg, RunArgs};
use crate::clock::to_mono_ns;
use crate::config::RunConfig;
use crate::error::{CliError, chain};
use crate::exe::own_exe;

use crate::http::{Endpoint, Line, Serving, Shown};
use crate::store;
use regent_monitor::{Monitor, StoreCalls};

/// What a signal, or the demo's lifeline, asks for.
pub(crate) struct Stops {
    term: Signal,
    int: Signal,
    lifeline: Option<tokio::io::Stdin>,
}

impl Stops {
    pub(crate) fn new(lifeline: bool) -> Result<Self, CliError> {
        let sig = |kind| {
            signal(kind).map_err(|e| CliError::failure(format!("cannot catch signals: {e}")))
        };
        Ok(Self {
            term: sig(SignalKind::terminate())?,
            int: sig(SignalKind::interrupt())?,
            lifeline: lifeline.then(tokio::io::stdin),
        })
    }

    /// Completes on SIGTERM, SIGINT, or the lifeline closing. The lifeline
    /// closes once: after that only a signal counts as a second stop.
    pub(crate) async fn next(&mut self) {
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
        let closed = tokio::select! {
            _ = self.term.recv() => false,
            _ = self.int.recv() => false,
            () = lifeline => true,
        };
        if closed {
            // Regression: a closed stdin reads EOF again at once, which made
            // the graceful stop it began end as a "second signal" (exit
            // 130) before the lease was released.
            self.lifeline = None;
        }
    }
}

enum TermEnd {
    /// Leadership ended (lost, deadline, unhealthy); campaign again.
    Lost,
    /// CMD ended by itself with this status.
    Exited(u8),
    /// CMD could not be started (not found, not executable).
    CannotStart,
    /// A signal asked regent to stop.
    Shutdown,
}

pub(crate) async fn run(args: RunArgs) -> Result<u8, CliError> {
    // One pass: flags → checked settings → store → candidate → supervisor.
    let config = RunConfig::resolve(args)?;
    prepare_child(&config.child)?;
    let mut stops = Stops::new(config.child.lifeline_stdin)?;
    // Serving from now: while the store is being reached, the probes say so.
    let serving = serve(config.endpoint, "run")?;
    let opened = tokio::select! {
        r = store::connect(
            &config.target,
            &config.election,
            config.call_timeout,
            config.start_window,
            config.holder.is_default(),
        ) => r?,
        () = stops.next() => return Ok(0),
    };
    let holder = config.holder.or_named(opened.holder);
    let ttl = config.timing.ttl_for(opened.store.info().min_ttl);
    // Every store request counted, for the metrics and the health check.
    let calls = StoreCalls::new();
    let candidate =
        config
            .timing
            .candidate(calls.instrument(opened.store), config.election, holder, ttl)?;
    tracing::info!("{}", candidate.explain());
    let target = config.target;
    // Before the first campaign, so that it sees the first term.
    let monitor = watch_over(&candidate, &config.child).with_store_calls(calls);
    // The page's reads of the line are not the election's requests:
    // uncounted, so that one cut short is no sign of a failing store.
    let line = Line::of(
        candidate.store().inner().clone(),
        candidate.election().clone(),
    );
    show(serving.as_ref(), &monitor, target.to_string(), Some(line));
    supervise(
        &candidate,
        &config.child,
        &mut stops,
        ttl,
        Some(&target),
        &monitor,
        |e| match e {
            CampaignError::Store(e) => store::store_error(&target, "campaign on", &e),
            e => CliError::failure(chain(&e)),
        },
    )
    .await
}

/// The monitor of `election`'s terms, with `--health-timeout`'s heartbeats
/// expected while it leads.
pub(crate) fn watch_over(election: &impl Election, child: &ChildArgs) -> Monitor {
    let monitor = Monitor::follow(election);
    match child.health_timeout {
        Some(t) => monitor.with_health_timeout(t),
        None => monitor,
    }
}

/// Serves `--http`, if given, until the guard is dropped.
pub(crate) fn serve(
    endpoint: Option<Endpoint>,
    source: &'static str,
) -> Result<Option<Serving>, CliError> {
    endpoint.map(|e| e.serve(source, 1)).transpose()
}

/// Shows `monitor`'s election (on `store`, whose line `candidates`
/// reads) on the endpoint, if serving.
pub(crate) fn show(
    serving: Option<&Serving>,
    monitor: &Monitor,
    store: String,
    candidates: Option<Line>,
) {
    if let Some(s) = serving {
        s.show(Shown {
            monitor: monitor.clone(),
            store,
            candidates,
        });
    }
}

/// Campaigns, runs CMD (through the shim) while leading, stops it when
/// leadership ends, and campaigns again by `--restart`, until a signal or
/// the restart policy ends it: what `regent run` and `regent peer` share.
/// Short terms back off up to `backoff_cap`; `campaign_error` names a
/// campaign's failure. With `handoff`, the store of a lease election, the
/// command's supervisor gets each term's release ticket (see
/// [`store::ticket_line`]).
pub(crate) async fn supervise<E: Election>(
    election: &E,
    child: &ChildArgs,
    stops: &mut Stops,
    backoff_cap: Duration,
    handoff: Option<&store::Target>,
    monitor: &Monitor,
    campaign_error: impl Fn(CampaignError) -> CliError,
) -> Result<u8, CliError> {
    // Terms that end quickly (a command that fails at once, a store that
    // keeps losing the lease) must not make a hot loop of campaigns.
    let first_delay = Duration::from_millis(100);
    let mut delay = first_delay;
    loop {
        // The next term's supervisor starts now, while regent follows:
        // a hand-over then waits for CMD alone (see `Supervisor`).
        let next = Supervisor::spawn(election, child)?;
        let leadership = tokio::select! {
            r = election.campaign() => match r {
                Ok(l) => l,
                Err(e) => {
                    next.dismiss().await;
                    return match e {
                        CampaignError::Shutdown => Ok(0),
                        e => Err(campaign_error(e)),
                    };
                }
            },
            () = stops.next() => {
                next.dismiss().await;
                return Ok(shut_down(election, stops).await);
            }
        };
        crate::failpoint::hold(
            crate::failpoint::Stage::RegentAcquired,
            Some(leadership.token().get()),
        );
        let started = Instant::now();
        // Every line of the term carries its election, holder and token.
        let term = tracing::info_span!(
            "term",
            election = %election.election(),
            holder = %election.holder(),
            token = leadership.token().get(),
        );
        let lead = lead(election, leadership, next, child, stops, handoff, monitor);
        match tracing::Instrument::instrument(lead, term).await? {
            TermEnd::Lost => {}
            TermEnd::Shutdown => return Ok(shut_down(election, stops).await),
            // A command that cannot start will not start next time either.
            TermEnd::CannotStart => {
                election.shutdown().await;
                return Ok(127);
            }
            TermEnd::Exited(code) => match child.restart {
                RestartArg::Never => return Ok(code),
                RestartArg::OnFailure if code == 0 => return Ok(0),
                _ => {}
            },
        }
        if started.elapsed() >= backoff_cap {
            delay = first_delay;
            continue;
        }
        let wait = delay.mul_f64(0.5 + fastrand::f64() * 0.5);
        delay = (delay * 2).min(backoff_cap);
        tracing::info!(?wait, "short term; campaigning again after a backoff");
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = stops.next() => return Ok(shut_down(election, stops).await),
        }
    }
}

/// What supervising CMD needs before the first campaign: the PID namespace
/// probe of `--pid-namespace always`, and regent as a child subreaper.
pub(crate) fn prepare_child(child: &ChildArgs) -> Result<(), CliError> {
    if child.pid_namespace == PidNamespace::Always {
        probe_pid_namespace()?;
    }
    // Whatever of a term is orphaned (a killed shim) becomes regent's
    // child, to be stopped before the lease may go.
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))
        .map_err(|e| CliError::failure(format!("cannot become a child subreaper: {e}")))
}

/// `--pid-namespace always`: a usage error, before any campaign, where the
/// shim could not give CMD a PID namespace.
fn probe_pid_namespace() -> Result<(), CliError> {
    let out = std::process::Command::new(own_exe()?)
        .args(["__shim", "--probe"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| CliError::failure(format!("cannot start the supervisor shim: {e}")))?;
    if out.status.success() {
        return Ok(());
    }
    let why = String::from_utf8_lossy(&out.stderr).trim().to_owned();
    Err(CliError::usage(format!(
        "--pid-namespace always: cannot create a PID namespace here ({why}); it takes root or \
         CAP_SYS_ADMIN; --pid-namespace auto runs the command without one"
    )))
}

/// Graceful shutdown: release whatever is held and exit 0; a second signal
/// meanwhile exits at once with 130.
async fn shut_down(election: &impl Election, stops: &mut Stops) -> u8 {
    tokio::select! {
        () = election.shutdown() => 0,
        () = stops.next() => 130,
    }
}

/// One term: CMD runs under the shim until it exits, leadership ends, the
/// task goes silent, or a signal arrives.
async fn lead(
    election: &impl Election,
    leadership: Leadership,
    mut supervisor: Supervisor,
    child: &ChildArgs,
    stops: &mut Stops,
    handoff: Option<&store::Target>,
    monitor: &Monitor,
) -> Result<TermEnd, CliError> {
    let grace = election.timing().grace;
    let mut states = leadership.lease_state();
    let first = *states.borrow_and_update();
    // One started ahead and still there, or a new one (it died meanwhile:
    // killed, or it could not start). Everything that can fail is set up
    // before CMD starts: after the go, every way out must stop CMD before
    // the lease goes.
    let supervisor = if supervisor.ready() {
        supervisor
    } else {
        supervisor.dismiss().await;
        Supervisor::spawn(election, child)?
    };
    let Supervisor {
        mut shim,
        mut reports,
        mut control,
        mut beats,
    } = supervisor;
    // The go: CMD starts with the term's token and deadline. With it the
    // term's release ticket, for the supervisor to give the lease back
    // should regent die (see `regent::guardian::Ticket`). Awaited, not `send`: the
    // socket may be new, and a write without waiting fails until the
    // runtime has seen it writable.
    let mut words = format!(
        "G {} {}\n",
        leadership.token(),
        to_mono_ns(first.step_down_at)
    );
    if let Some(ticket) = handoff.and_then(|t| store::ticket_line(t, leadership.lease())) {
        words.push_str(&format!("T {ticket}\n"));
    }
    let went = match control.as_mut() {
        Some(c) => tokio::time::timeout(Duration::from_secs(1), c.write_all(words.as_bytes()))
            .await
            .is_ok_and(|r| r.is_ok()),
        None => false,
    };
    let mut last_beat = Instant::now();
    let health = child.health_timeout;
    // Why regent itself ends the term, if it does: what the release
    // records (the status, the metrics and the timeline say so).
    let mut why: Option<EndReason> = None;
    if went {
        monitor.command_started();
        // Heartbeats are due from the go, as the watchdog below counts.
        monitor.beat();
    }
    let end = if !went {
        warn_user!("regent: the command's supervisor is not responding; stopping the command");
        TermEnd::Lost
    } else {
        loop {
            let silent_at = health.map(|h| last_beat + h);
            tokio::select! {
                status = shim.wait() => {
                    let status = status
                        .map_err(|e| CliError::failure(format!("waiting for the command: {e}")))?;
                    if status.signal().is_some() {
                        // The shim died without stopping CMD (it stops it before
                        // any exit of its own). In a namespace the init stops
                        // CMD now and the kernel ends the rest; without one,
                        // CMD runs on as regent's orphan. Either way the sweep
                        // below ends what is left before the lease may go.
                        warn_user!("regent: the command's supervisor died ({status}); stopping the command");
                        break TermEnd::Lost;
                    }
                    let said = reports.read();
                    if said.cannot_start {
                        monitor.command_exited(None, Some("cannot start"));
                        break TermEnd::CannotStart;
                    }
                    if said.stopped {
                        // The dead-man's switch fired (regent stalled, or a
                        // deadline update came late): this term is over.
                        break TermEnd::Lost;
                    }
                    let code = exit_code(status);
                    // The shim exits as CMD did: with its code, or 128+N
                    // for CMD killed by signal N.
                    match code.checked_sub(128).filter(|_| code > 128) {
                        Some(n) => monitor.command_exited(None, Some(&signal_name(n))),
                        None => monitor.command_exited(Some(i32::from(code)), None),
                    }
                    break TermEnd::Exited(code);
                }
                changed = states.changed() => {
                    let state = *states.borrow_and_update();
                    if changed.is_err() || state.ended.is_some() {
                        let reason = state.ended.map_or(EndReason::Dropped, |e| e.reason);
                        warn_user!("regent: leadership ended ({reason}); stopping the command");
                        break TermEnd::Lost;
                    }
                    crate::failpoint::hold(crate::failpoint::Stage::RegentRenewed, Some(leadership.token().get()));
                    if !send(&mut control, &format!("D {}\n", to_mono_ns(state.step_down_at))) {
                        // The shim does not read its control socket (stopped,
                        // hung): it cannot be trusted with the deadline.
                        warn_user!("regent: the command's supervisor is not responding; stopping the command");
                        break TermEnd::Lost;
                    }
                }
                () = sleep_until_opt(silent_at) => {
                    warn_user!("regent: no heartbeat on REGENT_HEARTBEAT_FD for {:?}; stepping down", health.unwrap_or_default());
                    // Renewals go on while the command stops, so that the
                    // release is prompt; the term's end records why.
                    why = Some(EndReason::Unhealthy);
                    break TermEnd::Lost;
                }
                n = read_beat(&mut beats) => {
                    if n > 0 {
                        last_beat = Instant::now();
                        monitor.beat();
                    } else {
                        // Every writer closed the pipe: stop expecting beats there
                        // rather than spin; silence will trip the watchdog.
                        beats = None;
                    }
                }
                () = reports.next_note(), if !reports.noted => {}
                () = stops.next() => break TermEnd::Shutdown,
            }
        }
    };
    let mut signalled = matches!(end, TermEnd::Shutdown);
    if signalled {
        why.get_or_insert(EndReason::Shutdown);
    }
    let mut leadership = Some(leadership);
    if matches!(end, TermEnd::Lost | TermEnd::Shutdown) {
        let _ = send(&mut control, "S\n");
        // The shim needs at most grace plus its SIGKILL sweep. A signal
        // meanwhile asks for shutdown once this stop is done; a second one
        // exits at once (the shim then cleans up on its own).
        let bound = grace + Duration::from_secs(3);
        let deadline = tokio::time::sleep(bound);
        tokio::pin!(deadline);
        let stopped = {
            let exited = shim.wait();
            tokio::pin!(exited);
            loop {
                tokio::select! {
                    _ = &mut exited => break true,
                    () = &mut deadline => break false,
                    () = reports.cleared(), if leadership.is_some() => {
                        // The supervisor stopped CMD and found the term's
                        // whole tree gone (`C`): the lease may go now, while
                        // the supervisor still holds the ticket in case regent
                        // dies before its release is done. Then it may exit.
                        if let Some(l) = leadership.take() {
                            give_back(l, why).await;
                        }
                        let _ = send(&mut control, "R\n");
                        deadline.as_mut().reset(Instant::now() + Duration::from_secs(3));
                    }
                    () = stops.next() => {
                        if signalled {
                            std::process::exit(130);
                        }
                        signalled = true;
                        why.get_or_insert(EndReason::Shutdown);
                    }
                }
            }
        };
        if !stopped {
            // The shim is stuck (stopped, hung): CMD may still run, and
            // the lease must not go before it stops. End both here.
            warn_user!(
                "regent: the command's supervisor did not stop the command within {bound:?}; killing both"
            );
            let _ = shim.start_kill();
            let _ = shim.wait().await;
            sweep(Duration::ZERO).await;
        }
    }
    drop(control);
    // regent is a child subreaper: whatever of this term lost its parent
    // (a shim or init killed by a signal, a command without a namespace)
    // is regent's child now, and must be gone before the lease may go.
    sweep(grace).await;
    // The command has stopped: now the lease may go.
    if let Some(l) = leadership.take() {
        give_back(l, why).await;
    }
    Ok(if signalled { TermEnd::Shutdown } else { end })
}

/// Releases the term's lease, once the command's whole tree is gone; `why`
/// regent ended it, if it did (else it was lost, or the command exited).
async fn give_back(mut leadership: Leadership, why: Option<EndReason>) {
    crate::failpoint::hold(
        crate::failpoint::Stage::RegentRelease,
        Some(leadership.token().get()),
    );
    if let Some(reason) = why {
        // The first end stands: a term already lost stays lost.
        leadership.end(reason);
    }
    if let Err(e) = leadership.resign().await {
        tracing::warn!(error = %e, "release failed; the lease expires by its ttl");
    }
}

/// What the shim says on the control socket (see `shim/control.rs`), read without
/// waiting, after the shim has exited — but for the note on the namespace,
/// which is read as it comes.
struct Reports {
    socket: OwnedReadHalf,
    text: Vec<u8>,
    /// Whether the note on the namespace (`N …`) arrived, or never will.
    noted: bool,
}

/// What the shim said on the control socket (see `shim/control.rs`).
#[derive(Debug, Default)]
struct Said {
    stopped: bool,
    cannot_start: bool,
}

/// Whether regent said that CMD runs without a PID namespace: once per
/// process is enough.
static SAID_NO_NAMESPACE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

impl Reports {
    fn new(socket: OwnedReadHalf) -> Self {
        Self {
            socket,
            text: Vec::new(),
            noted: false,
        }
    }

    /// Reads what is there without waiting; false at EOF.
    fn fill(&mut self) -> bool {
        let mut buf = [0u8; 256];
        loop {
            match self.socket.try_read(&mut buf) {
                Ok(0) => return false,
                Ok(n) => self.text.extend_from_slice(&buf[..n]),
                Err(_) => return true,
            }
        }
    }

    /// Waits for the shim's note on the namespace and tells the user, once,
    /// when CMD runs without one.
    async fn next_note(&mut self) {
        if self.socket.readable().await.is_err() || !self.fill() {
            self.noted = true;
        }
        let text = String::from_utf8_lossy(&self.text).into_owned();
        for line in text.lines() {
            if let Some(note) = line.strip_prefix("N ") {
                self.noted = true;
                if let Some(why) = note.strip_prefix("none ") {
                    tracing::info!(%why, "the command runs without a PID namespace");
                    if !why.starts_with("--pid-namespace")
                        && !SAID_NO_NAMESPACE.swap(true, std::sync::atomic::Ordering::Relaxed)
                    {
                        warn_user!(
                            "regent: the command runs without a PID namespace of its own ({why}; it \
                             takes root or CAP_SYS_ADMIN): were regent frozen and its supervisor killed, \
                             the command would run on until regent resumes. --pid-namespace never \
                             silences this"
                        );
                    }
                } else {
                    tracing::debug!("the command runs in a PID namespace of its own");
                }
            }
        }
    }

    /// Completes when the supervisor has said `C` (after a stop regent
    /// asked for: the term's whole tree is gone); never at EOF.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: what it read stays in `text`.
    async fn cleared(&mut self) {
        loop {
            if String::from_utf8_lossy(&self.text)
                .lines()
                .any(|l| l.trim() == "C")
            {
                return;
            }
            if self.socket.readable().await.is_err() || !self.fill() {
                return std::future::pending().await;
            }
        }
    }

    /// Everything the shim said so far; reads without waiting.
    fn read(&mut self) -> Said {
        self.fill();
        let mut said = Said::default();
        for line in String::from_utf8_lossy(&self.text).lines() {
            match line.trim() {
                "X" => said.stopped = true,
                "E" => said.cannot_start = true,
                _ => {}
            }
        }
        said
    }
}

/// Stops every child regent still has once a term's shim is gone — the
/// term's orphans, see [`Reports`] — giving them `grace` after SIGTERM.
async fn sweep(grace: Duration) {
    // An orphan that already exited (a killed shim's init) is a zombie
    // child of regent's now: reap it. The shim itself has been waited for.
    let _ = crate::tree::reap(None);
    // Almost always there is none: the kernel says so at once, where
    // looking through /proc costs a read per process of the host (it is
    // on the path of every hand-over).
    if !crate::tree::has_children() || crate::tree::children().is_empty() {
        return;
    }
    let all_gone =
        tokio::task::spawn_blocking(move || crate::tree::stop_children(None, grace, None))
            .await
            .unwrap_or(false);
    if !all_gone {
        warn_user!("regent: some of the command's processes could not be stopped");
    }
}

/// Sends a control line without waiting: false when the shim is gone or
/// does not read (its socket buffer is full).
fn send(control: &mut Option<OwnedWriteHalf>, line: &str) -> bool {
    let Some(c) = control else {
        return false;
    };
    match c.try_write(line.as_bytes()) {
        Ok(n) if n == line.len() => true,
        _ => {
            *control = None;
            false
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

/// A term's supervisor — the shim, and its init — started ahead of the
/// term, while regent still follows: the supervisor waits for regent's go
/// line (`G TOKEN DEADLINE`) and only then starts CMD. A hand-over then
/// waits for CMD's own start alone, not for the two processes of this
/// binary before it (about 2.5 ms each on the machines this was measured
/// on, most of the time from the old command's end to the new one's
/// start; see docs/benchmarks.md). A follower holds them idle, at a few
/// MB of memory; one that dies meanwhile is replaced at the term's start.
struct Supervisor {
    shim: Child,
    reports: Reports,
    control: Option<OwnedWriteHalf>,
    beats: Option<tokio::net::unix::pipe::Receiver>,
}

impl Supervisor {
    fn spawn(election: &impl Election, child: &ChildArgs) -> Result<Self, CliError> {
        let (beats, beat_writer) = match child.health_timeout {
            Some(_) => {
                let (read, write) = heartbeat_pipe()?;
                (
                    Some(
                        tokio::net::unix::pipe::Receiver::from_owned_fd(read)
                            .map_err(|e| CliError::failure(format!("heartbeat pipe: {e}")))?,
                    ),
                    Some(write),
                )
            }
            None => (None, None),
        };
        let (shim, control) = spawn_shim(election, child, beat_writer.as_ref())?;
        // Only the shim and CMD hold the write end now.
        drop(beat_writer);
        let (reports, control) = control.into_split();
        Ok(Self {
            shim,
            reports: Reports::new(reports),
            control: Some(control),
            beats,
        })
    }

    /// Whether it can still take its term: it has not exited.
    fn ready(&mut self) -> bool {
        matches!(self.shim.try_wait(), Ok(None))
    }

    /// Ends a supervisor that gets no term: its control socket closes, and
    /// it exits without having started anything.
    async fn dismiss(mut self) {
        drop(self.control.take());
        if tokio::time::timeout(Duration::from_secs(1), self.shim.wait())
            .await
            .is_err()
        {
            // Held at a test hook, or frozen: nothing of a term is there.
            let _ = self.shim.start_kill();
            let _ = self.shim.wait().await;
        }
    }
}

/// Starts a shim, to wait for its term's go; returns it and regent's end
/// of the control socket (the shim's stdin).
fn spawn_shim(
    election: &impl Election,
    child: &ChildArgs,
    heartbeat: Option<&OwnedFd>,
) -> Result<(Child, UnixStream), CliError> {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair()
        .map_err(|e| CliError::failure(format!("control socket: {e}")))?;
    ours.set_nonblocking(true)
        .map_err(|e| CliError::failure(format!("control socket: {e}")))?;
    let ours = UnixStream::from_std(ours)
        .map_err(|e| CliError::failure(format!("control socket: {e}")))?;
    let grace_ms = u64::try_from(election.timing().grace.as_millis()).unwrap_or(u64::MAX);
    let mut cmd = Command::new(own_exe()?);
    // What `ps` shows, instead of /proc/self/exe.
    cmd.arg0(
        std::env::args_os()
            .next()
            .unwrap_or_else(|| "regent".into()),
    );
    // The shim's few lines (after regent died) in regent's format; a flag,
    // not the variable, which CMD would inherit.
    if crate::logs::is_json() {
        cmd.args(["--log-format", "json"]);
    }
    cmd.arg("__shim")
        .arg("--grace-ms")
        .arg(grace_ms.to_string())
        .arg("--parent")
        .arg(std::process::id().to_string())
        .arg("--pid-namespace")
        .arg(child.pid_namespace.as_arg())
        .arg("--")
        .args(&child.cmd)
        // The term's REGENT_FENCING_TOKEN comes with the go.
        .env("REGENT_ELECTION", election.election().as_str())
        .env("REGENT_LEADER_ID", election.holder().as_str())
        .stdin(Stdio::from(OwnedFd::from(theirs)))
        // The shim leads a process group of its own. Sharing regent's would
        // let one job-control stop (Ctrl-Z, `kill -STOP -PGID`) freeze both
        // regent and its dead-man's switch while CMD, in its own group, runs
        // on past the lease; and a terminal's Ctrl-C would reach the shim
        // as well as regent, which alone decides how CMD stops.
        .process_group(0)
        .kill_on_drop(false);
    // The stores' secrets are regent's, not CMD's.
    for var in store::secret_variables() {
        cmd.env_remove(var);
    }
    if let Some(fd) = heartbeat {
        cmd.env("REGENT_HEARTBEAT_FD", fd.as_raw_fd().to_string());
    }
    let shim = cmd
        .spawn()
        .map_err(|e| CliError::failure(format!("cannot start the supervisor shim: {e}")))?;
    // `cmd` drops here with the shim's end: once regent's end closes, the
    // shim reads EOF.
    Ok((shim, ours))
}

fn exit_code(status: std::process::ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(c), _) => u8::try_from(c & 0xff).unwrap_or(1),
        (None, Some(sig)) => u8::try_from(128 + (sig & 0x7f)).unwrap_or(255),
        _ => 1,
    }
}

/// A signal's name as the metrics show it (`SIGKILL`), or `signal N`.
fn signal_name(n: u8) -> String {
    use rustix::process::Signal;
    [
        (Signal::HUP, "SIGHUP"),
        (Signal::INT, "SIGINT"),
        (Signal::QUIT, "SIGQUIT"),
        (Signal::ABORT, "SIGABRT"),
        (Signal::KILL, "SIGKILL"),
        (Signal::SEGV, "SIGSEGV"),
        (Signal::PIPE, "SIGPIPE"),
        (Signal::TERM, "SIGTERM"),
    ]
    .into_iter()
    .find(|(s, _)| s.as_raw() == i32::from(n))
    .map_or_else(|| format!("signal {n}"), |(_, name)| name.to_owned())
}
