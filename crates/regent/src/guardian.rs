//! The crash guardian: a service's leases given back in milliseconds when
//! the service process dies (kill -9, the OOM killer, an abort), as
//! `regent run` gives back its command's.
//!
//! Without it, a leader that crashes holds its leases until they expire:
//! **a crash costs the ttl** (15 s by default) before another instance
//! leads. A graceful stop ([`shutdown_signal`](crate::shutdown_signal)
//! with [`Supervisor::run_until`](crate::Supervisor::run_until)) gives the
//! lease back itself and costs milliseconds either way.
//!
//! ```no_run
//! use regent::guardian::Guardian;
//! use regent::{BoxError, Candidate, ElectionName, HolderId, Supervisor};
//!
//! fn main() -> Result<(), BoxError> {
//!     // First thing in `main`: in the guardian process this never returns.
//!     let guardian = Guardian::start()?;
//!     tokio::runtime::Runtime::new()?.block_on(async {
//!         // The store by URL, so that the guardian can open it again.
//!         let store = guardian.connect("sqlite:/var/lib/app/regent.db", &[]).await?;
//!         let candidate =
//!             Candidate::builder(store, ElectionName::new("jobs")?, HolderId::host_pid())
//!                 .build()?;
//!         Supervisor::new(candidate)
//!             .run_until(regent::shutdown_signal(), |leader| async move {
//!                 // The leader's work, fenced by `leader.token()`.
//!                 leader.cancelled().await;
//!                 Ok::<_, BoxError>(())
//!             })
//!             .await?;
//!         Ok(())
//!     })
//! }
//! ```
//!
//! # How it works
//!
//! [`Guardian::start`] starts the program's own binary again (through
//! `/proc/self/exe`, so a binary replaced by an upgrade still starts) as a
//! small process of its own, the guardian, joined to the service by a
//! socket pair. The guardian's `Guardian::start` never returns: it guards.
//!
//! * The store [`Guardian::connect`] opens tells the guardian of every
//!   lease it wins (and every place it takes in a queue store's line), in
//!   a **ticket**, before the win is returned to the candidate: the URL,
//!   the options, the variables the store read, and the lease. A lease
//!   given back is struck off.
//! * The guardian watches the service through a pidfd. It acts only once
//!   the kernel says the service's process has exited — every thread of
//!   it, so **nothing of it can act any more** — and then gives back, with
//!   the store's own `release`, every lease whose ticket it still holds. A
//!   release frees only that lease, never a later holder's (the
//!   conformance suite checks it), so a ticket of a term that had already
//!   ended is harmless.
//! * A service that is frozen (SIGSTOP) or hung is not gone: the guardian
//!   does nothing, and the leader's own deadline and the lease's ttl apply
//!   as before.
//! * The guardian lives as long as the service and ends with it. It runs
//!   in a session of its own (Ctrl-C in a terminal reaches the service
//!   alone) and outlives SIGTERM, SIGINT, SIGHUP and SIGQUIT (a `pkill` of
//!   the service's name reaches both; the guardian must outlast the
//!   service); SIGKILL ends it. Tickets may hold a store's secrets, so it
//!   makes itself non-dumpable.
//!
//! # What it does not cover
//!
//! * Processes the service started: the guardian gives the lease back once
//!   the service's own process is gone, not its children. Work done in
//!   child processes belongs under `regent run`, which stops the command's
//!   whole tree before it gives a lease back.
//! * A crash of the whole machine or container (the guardian dies too), a
//!   cgroup killed at once (`systemctl kill -s KILL`, a pod's SIGKILL), a
//!   guardian killed before the service: the lease then expires by its ttl,
//!   as without a guardian (the service warns once when its guardian is
//!   gone).
//! * A crash between the store's answer to an acquire and the ticket's
//!   write (microseconds): the ttl.
//! * Requests the service sent before it died may still reach a resource
//!   after the next leader starts: the fencing token is what protects
//!   the resource then, as always.
//! * Stores opened another way (a builder, a store of your own): the
//!   guardian must be able to open the store again from a URL.
//!
//! Linux only: it needs `pidfd_open` (Linux 5.3).
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{self, Read as _};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt as _;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::process::{Pid, PidfdFlags};
use serde::{Deserialize, Serialize};

use crate::url::ConnectError;
use crate::{Acquire, AcquireRequest, HandOff};
use crate::{
    BoxStore, ElectionName, FencingToken, HolderId, Lease, LeaseHandle, LeaseStore, StoreError,
};
use crate::{Layered, StoreLayer};

/// Set in the guardian's environment: the service's pid.
const GUARDIAN_ENV: &str = "REGENT_GUARDIAN_OF";

/// How long [`Guardian::start`] waits for the guardian to say it guards.
const READY_WITHIN: Duration = Duration::from_secs(10);

/// The bound of each store call of a release by the guardian.
const RELEASE_CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// How long the guardian's releases may take in all.
const RELEASE_BOUND: Duration = Duration::from_secs(15);

/// A line longer than this from the service is garbage.
const MAX_LINE: usize = 1 << 20;

/// The guardian's exit status when it could not guard (a bad start).
const CANNOT_GUARD: i32 = 70;

/// Why [`Guardian::start`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GuardianError {
    /// The guardian process could not be started.
    #[error("cannot start the crash guardian: {0}")]
    Start(#[source] io::Error),
    /// It started but did not say it guards within the bound.
    #[error("the crash guardian (pid {pid}) did not start guarding within {within:?}: {why}")]
    NotReady {
        /// The guardian's pid.
        pid: u32,
        /// How long it was given.
        within: Duration,
        /// What was seen instead.
        why: String,
    },
}

/// The service's link to its crash guardian; see the [module](self).
/// Clones share it.
#[derive(Clone, Debug)]
pub struct Guardian {
    link: Arc<Link>,
}

#[derive(Debug)]
struct Link {
    /// The service's end of the socket pair (non-blocking).
    socket: Mutex<UnixStream>,
    pid: u32,
    /// Set once a ticket could not be handed over.
    lost: AtomicBool,
    /// Kept so that the guardian is not reaped by anyone else.
    _child: Mutex<std::process::Child>,
}

impl Guardian {
    /// Starts the crash guardian; call it first thing in `main`.
    ///
    /// In the service it starts the guardian — this program's own binary
    /// again, with no arguments — and returns once the guardian guards. In
    /// the guardian it never returns: it guards the service and exits with
    /// it. It may be called inside a runtime (`#[tokio::main]`) or before
    /// one.
    ///
    /// # Errors
    ///
    /// [`GuardianError`] when the guardian cannot be started or does not
    /// say it guards within 10 s. The service can go on without it; a
    /// crash then costs the lease's ttl.
    pub fn start() -> Result<Guardian, GuardianError> {
        if let Some(service) = std::env::var_os(GUARDIAN_ENV) {
            std::process::exit(guard(&service));
        }
        let (ours, theirs) = rustix::net::socketpair(
            rustix::net::AddressFamily::UNIX,
            rustix::net::SocketType::STREAM,
            rustix::net::SocketFlags::CLOEXEC,
            None,
        )
        .map_err(|e| GuardianError::Start(e.into()))?;
        let exe = std::path::Path::new("/proc/self/exe");
        let exe = if exe.exists() {
            exe.to_owned()
        } else {
            std::env::current_exe().map_err(GuardianError::Start)?
        };
        // Named in `ps` for what it is.
        let name = std::env::args_os().next().unwrap_or_default();
        let child = Command::new(exe)
            .arg0(format!(
                "{} [regent guardian of {}]",
                name.to_string_lossy(),
                std::process::id()
            ))
            .env(GUARDIAN_ENV, std::process::id().to_string())
            .stdin(Stdio::from(theirs))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(GuardianError::Start)?;
        let pid = child.id();
        let mut socket = UnixStream::from(ours);
        let not_ready = |why: String| GuardianError::NotReady {
            pid,
            within: READY_WITHIN,
            why,
        };
        socket
            .set_read_timeout(Some(READY_WITHIN))
            .map_err(|e| not_ready(e.to_string()))?;
        let mut answer = [0u8; READY.len()];
        match socket.read_exact(&mut answer) {
            Ok(()) if answer == *READY => {}
            Ok(()) => return Err(not_ready(format!("it said {:?}", answer.escape_ascii()))),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                return Err(not_ready("it ended".into()));
            }
            Err(e) => return Err(not_ready(e.to_string())),
        }
        socket
            .set_nonblocking(true)
            .map_err(|e| not_ready(e.to_string()))?;
        Ok(Guardian {
            link: Arc::new(Link {
                socket: Mutex::new(socket),
                pid,
                lost: AtomicBool::new(false),
                _child: Mutex::new(child),
            }),
        })
    }

    /// The guardian's pid.
    pub fn pid(&self) -> u32 {
        self.link.pid
    }

    /// Opens the store `url` names, as [`connect`](crate::connect) does,
    /// and hands the guardian a ticket for every lease won through it
    /// (and through its clones).
    ///
    /// # Errors
    ///
    /// As [`connect`](crate::connect).
    pub async fn connect(
        &self,
        url: &str,
        options: &[(&str, &str)],
    ) -> Result<BoxStore, ConnectError> {
        // Every variable the parse reads goes into the tickets: the
        // guardian opens the store with what the service used.
        let read = Mutex::new(Vec::new());
        let (target, timeout) = crate::url::target_of(url, options, |k| {
            let v = std::env::var_os(k);
            if let Some(v) = &v {
                read.lock()
                    .expect("not poisoned")
                    .push((k.to_owned(), v.clone()));
            }
            v
        })?;
        let store = crate::url::open(&*target, timeout).await?;
        let recipe = Recipe {
            url: url.to_owned(),
            options: options
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            env: read.into_inner().expect("not poisoned"),
        };
        let layer = Ticketing {
            link: self.link.clone(),
            recipe: Arc::new(recipe),
        };
        Ok(BoxStore::new(Layered::new(store, layer)))
    }
}

impl Link {
    /// Hands `line` to the guardian. Never blocks: a guardian that is gone
    /// or does not read is warned of once, and a crash then costs the ttl.
    fn send(&self, line: &Line) {
        let Ok(mut text) = serde_json::to_string(line) else {
            return;
        };
        text.push('\n');
        let socket = self.socket.lock().expect("not poisoned");
        let mut rest = text.as_bytes();
        while !rest.is_empty() {
            match rustix::net::send(&*socket, rest, rustix::net::SendFlags::NOSIGNAL) {
                Ok(n) => rest = &rest[n..],
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => {
                    if !self.lost.swap(true, Ordering::Relaxed) {
                        tracing::warn!(
                            guardian = self.pid,
                            error = %e,
                            "cannot hand a ticket to the crash guardian; a crash of this process \
                             now leaves its leases to expire by their ttl"
                        );
                    }
                    return;
                }
            }
        }
    }
}

/// What the guardian needs to open the store again.
#[derive(Debug)]
struct Recipe {
    url: String,
    options: Vec<(String, String)>,
    env: Vec<(String, OsString)>,
}

/// The layer that writes the tickets.
struct Ticketing {
    link: Arc<Link>,
    recipe: Arc<Recipe>,
}

impl Ticketing {
    fn hold(&self, lease: &Lease) {
        let options: Vec<(&str, &str)> = self
            .recipe
            .options
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        if let Some(ticket) = Ticket::new(&self.recipe.url, &[], &options, &self.recipe.env, lease)
        {
            self.link.send(&Line::Held(ticket));
        }
    }
}

impl StoreLayer for Ticketing {
    async fn try_acquire<S: LeaseStore>(
        &self,
        store: &S,
        req: &AcquireRequest,
        queued: Option<&Lease>,
    ) -> Result<Acquire, StoreError> {
        let answer = store.try_acquire(req, queued).await?;
        // Before the candidate hears of it: a crash after this is covered.
        match &answer {
            Acquire::Won(lease)
            | Acquire::Held {
                queued: Some(lease),
                ..
            } => self.hold(lease),
            Acquire::Held { queued: None, .. } => {}
        }
        Ok(answer)
    }

    async fn release<S: LeaseStore>(&self, store: &S, lease: &Lease) -> Result<(), StoreError> {
        store.release(lease).await?;
        self.released(lease);
        Ok(())
    }

    /// A hand-over gives the lease up as a release does: its ticket goes.
    async fn release_to<S: LeaseStore>(
        &self,
        store: &S,
        lease: &Lease,
        successor: &HolderId,
        window: Duration,
    ) -> Result<HandOff, StoreError> {
        let passed = store.release_to(lease, successor, window).await?;
        self.released(lease);
        Ok(passed)
    }
}

impl Ticketing {
    /// Strikes `lease`'s ticket off: it was given back.
    fn released(&self, lease: &Lease) {
        self.link.send(&Line::Released {
            election: lease.election.as_str().to_owned(),
            holder: lease.holder.as_str().to_owned(),
        });
    }
}

/// What the guardian says once it guards.
const READY: &[u8; 6] = b"ready\n";

/// One line from the service to the guardian.
#[derive(Debug, Serialize, Deserialize)]
enum Line {
    /// A lease to give back if the service dies (replaces the election's
    /// earlier ticket for the same holder).
    Held(Ticket),
    /// The lease of this election and holder was given back.
    Released { election: String, holder: String },
}

/// A lease and how to open its store again: what a process that gives
/// the lease back once its holder is gone needs. The crash guardian holds
/// one per lease; `regent run` hands one to its command's supervisor.
///
/// It names the store as it was opened (the URL, a front end's flags or
/// options by name, and the variables read) and may therefore hold a
/// secret: keep it off command lines and environments. `Debug` leaves the
/// flags, options and variables out. A release by ticket is the store's
/// own `release`, which frees only that lease, never a later holder's.
///
/// ```
/// use std::time::Duration;
/// use regent::guardian::Ticket;
/// use regent::{ElectionName, FencingToken, HolderId, Lease, LeaseHandle};
///
/// let lease = Lease {
///     election: ElectionName::new("jobs")?,
///     holder: HolderId::new("host-a")?,
///     token: FencingToken::new(7),
///     ttl: Duration::from_secs(15),
///     handle: LeaseHandle::new("h"),
/// };
/// let ticket = Ticket::new("sqlite:/var/lib/app/regent.db", &[], &[], &[], &lease)
///     .expect("UTF-8 throughout");
/// let line = ticket.to_line();
/// assert_eq!(Ticket::from_line(&line)?.token(), 7);
/// # Ok::<_, Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Serialize, Deserialize)]
pub struct Ticket {
    url: String,
    #[serde(default)]
    flags: Vec<(String, String)>,
    #[serde(default)]
    options: Vec<(String, String)>,
    env: Vec<(String, String)>,
    election: String,
    holder: String,
    token: u64,
    ttl_ms: u64,
    handle: String,
}

/// Why a ticket's release failed, or why a line is no ticket.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TicketError(String);

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket")
            .field("url", &regent_core::target::redacted(&self.url))
            .field("election", &self.election)
            .field("holder", &self.holder)
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

impl Ticket {
    /// The ticket of `lease` on the store `url` names, with a front end's
    /// `flags` (as [`url::parse`](crate::url::parse) takes them), `options`
    /// by name (as [`connect`](crate::connect) takes them) and `env`, the
    /// variables the store's parse read. `None` when a value is not UTF-8
    /// (then the lease is left to its ttl).
    pub fn new(
        url: &str,
        flags: &[(String, OsString)],
        options: &[(&str, &str)],
        env: &[(String, OsString)],
        lease: &Lease,
    ) -> Option<Ticket> {
        let text = |pairs: &[(String, OsString)]| -> Option<Vec<(String, String)>> {
            pairs
                .iter()
                .map(|(k, v)| Some((k.clone(), v.to_str()?.to_owned())))
                .collect()
        };
        Some(Ticket {
            url: url.to_owned(),
            flags: text(flags)?,
            options: options
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            env: text(env)?,
            election: lease.election.as_str().to_owned(),
            holder: lease.holder.as_str().to_owned(),
            token: lease.token.get(),
            ttl_ms: u64::try_from(lease.ttl.as_millis()).unwrap_or(u64::MAX),
            handle: lease.handle.as_str().to_owned(),
        })
    }

    /// The ticket as one line of JSON (no newline).
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).expect("a ticket is plain data")
    }

    /// Reads a ticket [`to_line`](Self::to_line) wrote.
    ///
    /// # Errors
    ///
    /// [`TicketError`] for a line that is no ticket.
    pub fn from_line(line: &str) -> Result<Ticket, TicketError> {
        serde_json::from_str(line.trim())
            .map_err(|e| TicketError(format!("a malformed release ticket: {e}")))
    }

    /// The election.
    pub fn election(&self) -> &str {
        &self.election
    }

    /// The holder.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// The lease's fencing token.
    pub fn token(&self) -> u64 {
        self.token
    }

    /// Whether the ticket holds flags, options or variables, any of which
    /// may be a secret: a process holding it should make itself
    /// non-dumpable.
    pub fn may_hold_secrets(&self) -> bool {
        !(self.flags.is_empty() && self.options.is_empty() && self.env.is_empty())
    }

    /// Gives the ticket's lease back: opens the store from the ticket
    /// alone (not this process's environment) and releases. Each of the
    /// two steps is bounded by `timeout`.
    ///
    /// # Errors
    ///
    /// [`TicketError`] naming the store and the step that failed; the lease
    /// then expires by its ttl.
    pub async fn release(self, timeout: Duration) -> Result<(), TicketError> {
        let flags: Vec<(String, OsString)> = self
            .flags
            .iter()
            .map(|(k, v)| (k.clone(), OsString::from(v)))
            .collect();
        let options: Vec<(&str, &str)> = self
            .options
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let env = &self.env;
        let (target, _) = crate::url::target_with(&self.url, &flags, &options, |k| {
            env.iter()
                .find(|(name, _)| name == k)
                .map(|(_, v)| OsString::from(v))
        })
        .map_err(|e| TicketError(e.to_string()))?;
        let lease = Lease {
            election: ElectionName::new(&self.election).map_err(|e| TicketError(e.to_string()))?,
            holder: HolderId::new(&self.holder).map_err(|e| TicketError(e.to_string()))?,
            token: FencingToken::new(self.token),
            ttl: Duration::from_millis(self.ttl_ms),
            handle: LeaseHandle::new(self.handle.clone()),
        };
        let store = tokio::time::timeout(timeout, crate::url::open(&*target, timeout))
            .await
            .map_err(|_| {
                TicketError(format!(
                    "connecting to {target}: no answer within {timeout:?}"
                ))
            })?
            .map_err(|e| TicketError(format!("connecting to {target}: {}", crate::report(&e))))?;
        tokio::time::timeout(timeout, store.release(&lease))
            .await
            .map_err(|_| TicketError(format!("release on {target}: no answer within {timeout:?}")))?
            .map_err(|e| TicketError(format!("release on {target}: {}", crate::report(&e))))
    }
}

macro_rules! say {
    ($($arg:tt)*) => {
        eprintln!("regent guardian (pid {}): {}", std::process::id(), format_args!($($arg)*))
    };
}

/// The guardian: guards the service `service` (its pid) until it is gone,
/// then gives back every lease it holds a ticket for. Its exit status.
fn guard(service: &std::ffi::OsStr) -> i32 {
    let Some(pid) = service
        .to_str()
        .and_then(|s| s.parse::<i32>().ok())
        .and_then(Pid::from_raw)
    else {
        say!("{GUARDIAN_ENV} is not a pid: {service:?}");
        return CANNOT_GUARD;
    };
    // Tickets may carry a store's secret.
    let _ = rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable);
    // Out of the service's session: its terminal's Ctrl-C and hang-up do
    // not reach the guardian. Stop signals are caught and ignored: the
    // guardian ends with the service.
    let _ = rustix::process::setsid();
    let ignored = Arc::new(AtomicBool::new(false));
    for signal in [
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGHUP,
        signal_hook::consts::SIGQUIT,
    ] {
        let _ = signal_hook::flag::register(signal, ignored.clone());
    }
    let alive = match rustix::process::pidfd_open(pid, PidfdFlags::empty()) {
        Ok(fd) => fd,
        Err(e) => {
            say!("cannot watch process {pid:?}: {e}");
            return CANNOT_GUARD;
        }
    };
    // The pid is the service's only while it is this process's parent
    // (else the service is already gone and the pid may be another's).
    if rustix::process::getppid() != Some(pid) {
        return 0;
    }
    let socket = rustix::stdio::stdin();
    if write_all(socket, READY).is_err() {
        return 0;
    }
    let mut tickets = BTreeMap::new();
    let mut reader = LineReader::default();
    let mut open = true;
    loop {
        let mut fds = vec![PollFd::new(&alive, PollFlags::IN)];
        if open {
            fds.push(PollFd::new(&socket, PollFlags::IN));
        }
        match poll(&mut fds, None::<&Timespec>) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => {
                say!("cannot wait for the service: {e}");
                return CANNOT_GUARD;
            }
        }
        let gone = !fds[0].revents().is_empty();
        let readable = open && !fds[1].revents().is_empty();
        drop(fds);
        if readable || gone {
            // Every line the service wrote is heeded before its end is
            // acted on.
            open = reader.read(socket, gone, &mut tickets);
        }
        if gone {
            break;
        }
        if !open && tickets.is_empty() {
            // The service closed the link with nothing to give back.
            return 0;
        }
    }
    if tickets.is_empty() {
        return 0;
    }
    give_back(pid, tickets);
    0
}

/// The lines read so far from the service, split.
#[derive(Default)]
struct LineReader {
    partial: Vec<u8>,
}

impl LineReader {
    /// Reads what the socket holds (all of it up to its end when `drain`,
    /// else one read) into `tickets`; whether the socket is still open.
    fn read(
        &mut self,
        socket: std::os::fd::BorrowedFd<'_>,
        drain: bool,
        tickets: &mut BTreeMap<(String, String), Ticket>,
    ) -> bool {
        if drain {
            let _ = rustix::io::ioctl_fionbio(socket, true);
        }
        let mut buf = [0u8; 16 * 1024];
        loop {
            match rustix::io::read(socket, &mut buf) {
                Ok(0) => return false,
                Ok(n) => self.take(&buf[..n], tickets),
                Err(rustix::io::Errno::INTR) => continue,
                Err(rustix::io::Errno::AGAIN) => return true,
                Err(e) => {
                    say!("cannot read from the service: {e}");
                    return false;
                }
            }
            if !drain {
                return true;
            }
        }
    }

    fn take(&mut self, bytes: &[u8], tickets: &mut BTreeMap<(String, String), Ticket>) {
        self.partial.extend_from_slice(bytes);
        while let Some(end) = self.partial.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=end).collect();
            match serde_json::from_slice::<Line>(&line) {
                Ok(Line::Held(t)) => {
                    tickets.insert((t.election.clone(), t.holder.clone()), t);
                }
                Ok(Line::Released { election, holder }) => {
                    tickets.remove(&(election, holder));
                }
                Err(e) => say!("a malformed line from the service: {e}"),
            }
        }
        if self.partial.len() > MAX_LINE {
            say!("a line of over {MAX_LINE} bytes from the service; dropped");
            self.partial.clear();
        }
    }
}

/// Gives back every ticket's lease, all at once, within [`RELEASE_BOUND`].
/// In a thread of its own: the guardian may have been started inside the
/// service's runtime (`#[tokio::main]`), where a second runtime may not
/// block.
fn give_back(service: Pid, tickets: BTreeMap<(String, String), Ticket>) {
    let started = Instant::now();
    let work = std::thread::spawn(move || {
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(r) => r,
            Err(e) => {
                say!("cannot give the leases back ({e}); they expire by their ttl");
                return;
            }
        };
        runtime.block_on(async {
            let mut releases = tokio::task::JoinSet::new();
            for ticket in tickets.into_values() {
                releases.spawn(async move {
                    let what = format!(
                        "the lease of election '{}' (holder '{}', token {})",
                        ticket.election, ticket.holder, ticket.token
                    );
                    (what, ticket.release(RELEASE_CALL_TIMEOUT).await)
                });
            }
            let all = async {
                while let Some(done) = releases.join_next().await {
                    match done {
                        Ok((what, Ok(()))) => say!(
                            "process {} is gone; gave back {what} in {:?}",
                            service.as_raw_nonzero(),
                            started.elapsed()
                        ),
                        Ok((what, Err(e))) => {
                            say!("cannot give back {what} ({e}); it expires by its ttl");
                        }
                        Err(e) => say!("a release failed: {e}"),
                    }
                }
            };
            if tokio::time::timeout(RELEASE_BOUND, all).await.is_err() {
                say!("the releases took over {RELEASE_BOUND:?}; the rest expire by their ttl");
            }
        });
    });
    let _ = work.join();
}

fn write_all(fd: std::os::fd::BorrowedFd<'_>, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        match rustix::io::write(fd, bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ticket(election: &str, token: u64) -> Ticket {
        Ticket {
            url: "sqlite:/tmp/x.db".into(),
            flags: vec![],
            options: vec![],
            env: vec![],
            election: election.into(),
            holder: "a".into(),
            token,
            ttl_ms: 1000,
            handle: "h".into(),
        }
    }

    fn line(l: &Line) -> Vec<u8> {
        let mut text = serde_json::to_vec(l).unwrap();
        text.push(b'\n');
        text
    }

    /// Lines split anywhere, garbage and an over-long line: the tickets
    /// held are the last word on each election, and garbage costs nothing
    /// else.
    #[test]
    fn lines_are_heeded_across_reads_and_garbage_is_skipped() {
        let mut reader = LineReader::default();
        let mut tickets = BTreeMap::new();
        let mut bytes = line(&Line::Held(ticket("x", 1)));
        bytes.extend(b"not json\n");
        bytes.extend(line(&Line::Held(ticket("y", 2))));
        bytes.extend(line(&Line::Held(ticket("x", 3))));
        bytes.extend(line(&Line::Released {
            election: "y".into(),
            holder: "a".into(),
        }));
        for chunk in bytes.chunks(7) {
            reader.take(chunk, &mut tickets);
        }
        assert_eq!(tickets.len(), 1);
        assert_eq!(tickets[&("x".to_owned(), "a".to_owned())].token, 3);

        reader.take(&vec![b'z'; MAX_LINE + 1], &mut tickets);
        assert!(reader.partial.is_empty());
        reader.take(&line(&Line::Held(ticket("w", 4))), &mut tickets);
        assert_eq!(tickets.len(), 2);
    }

    /// A ticket's `Debug` never shows its variables or options (secrets).
    #[test]
    fn ticket_debug_hides_secrets() {
        let mut t = ticket("x", 1);
        t.env = vec![("REGENT_POSTGRES_PASSWORD".into(), "hunter2".into())];
        t.options = vec![("password".into(), "hunter3".into())];
        t.flags = vec![("etcd-password".into(), "hunter4".into())];
        let shown = format!("{t:?}");
        assert!(!shown.contains("hunter"), "{shown}");
    }
}
