//! A campaign under way: its candidates (started, reaped, replaced,
//! stopped), the fence they write to, the store's processes, and the
//! lifeline that ends every candidate however the campaign itself ends.
//! The nemesis (`nemesis.rs`) and the sweep (`sweep/`) act on it.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use regent_proc::mono_ns;
use rustix::process::Signal;
use tokio::process::{Child, Command};
use tokio::time::Instant;

use crate::checker::Survivor;
use crate::console::Console;
use crate::error::Error;
use crate::fence;
use crate::peers::PeerGroup;
use crate::procfs;
use crate::proxy;
use crate::store::StoreProcess;
use crate::writer::{self, WriterArgs};

/// A candidate: one `regent run` (or `regent peer`) in its own process
/// group.
pub(crate) struct Candidate {
    pub(crate) id: String,
    pub(crate) pid: i32,
    pub(crate) child: Child,
    /// The index of its store URL.
    pub(crate) url: usize,
    /// Its proxies to the store's endpoints (`store-cut`, `store-delay`).
    pub(crate) proxies: Vec<proxy::Proxy>,
}

/// libfaketime's thread-safe preload library, for the clock faults:
/// `$REGENT_LIBFAKETIME`, else where Debian's `faketime` package puts it
/// (`scripts/install-engines` installs it), else the usual prefixes.
pub(crate) fn libfaketime() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("REGENT_LIBFAKETIME") {
        return Some(PathBuf::from(p)).filter(|p| p.exists());
    }
    let arch = std::env::consts::ARCH;
    [
        format!("/usr/lib/{arch}-linux-gnu/faketime/libfaketimeMT.so.1"),
        "/usr/lib/faketime/libfaketimeMT.so.1".to_owned(),
        "/usr/local/lib/faketime/libfaketimeMT.so.1".to_owned(),
    ]
    .into_iter()
    .map(PathBuf::from)
    .find(|p| p.exists())
}

/// The candidates' lifeline: a pipe whose write end only the campaign
/// holds (close-on-exec, so no child inherits it).
pub(crate) fn lifeline_pipe() -> Result<OwnedFd, Error> {
    let (read, write) =
        rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).map_err(|e| Error::Io {
            what: "lifeline pipe",
            source: e.into(),
        })?;
    // Readers are reopened from the write end (see `lifeline_reader`).
    drop(read);
    Ok(write)
}

/// Seconds from `origin` to `ns` (CLOCK_MONOTONIC).
pub(crate) fn secs_since(ns: u64, origin: u64) -> f64 {
    ns.saturating_sub(origin) as f64 / 1e9
}

/// A campaign under way.
pub(crate) struct Campaign {
    /// The `regent` executable.
    pub(crate) exe: PathBuf,
    /// The temporary directory: candidates' logs, the default store.
    pub(crate) dir: PathBuf,
    /// The store URLs (at least one; none for a peer group).
    pub(crate) urls: Vec<String>,
    pub(crate) election: String,
    pub(crate) store_args: Vec<OsString>,
    pub(crate) ttl: Duration,
    /// How long a failover may take after a leader dies: its lease's ttl,
    /// the store's expiry slack (one more ttl on Consul), and the time a
    /// follower's acquire may take (one more ttl).
    pub(crate) failover: Duration,
    pub(crate) fence: fence::Shared,
    pub(crate) fence_addr: std::net::SocketAddr,
    /// Unique to this campaign: its writers carry it in their arguments.
    pub(crate) campaign_id: String,
    /// Variables the next candidates started get (the sweep's failpoint).
    pub(crate) env: Vec<(String, OsString)>,
    pub(crate) candidates: Vec<Candidate>,
    /// The number in the last candidate id given.
    pub(crate) last_number: usize,
    /// The store commands' processes, then the store pids'.
    pub(crate) store_processes: Vec<StoreProcess>,
    /// The store processes not yet hit in this round of store faults, in
    /// the order they will be.
    pub(crate) store_turns: Vec<usize>,
    /// Each store URL split around its endpoints, when candidates talk to
    /// the store through proxies.
    pub(crate) proxied: Option<Vec<(String, Vec<String>, String)>>,
    pub(crate) rng: fastrand::Rng,
    /// libfaketime, when the clock faults are on.
    pub(crate) faketime: Option<PathBuf>,
    /// The peer group, when the campaign runs one instead of a store's
    /// candidates.
    pub(crate) peer: Option<PeerGroup>,
    /// The write end of the candidates' lifeline (their stdin, with
    /// `--lifeline-stdin`): however the campaign ends, even by SIGKILL,
    /// the kernel closes it and every candidate shuts down gracefully.
    pub(crate) lifeline: OwnedFd,
    /// Flags the next candidate started gets besides the usual
    /// (`--priority`: [`spawn_with_priority`](Self::spawn_with_priority)).
    pub(crate) extra: Vec<OsString>,
    /// The highest priority a candidate was given so far.
    pub(crate) top_priority: i32,
    pub(crate) started: Instant,
    /// CLOCK_MONOTONIC ns at the start: the origin of printed times.
    pub(crate) started_ns: u64,
    pub(crate) console: Console,
}

impl Campaign {
    pub(crate) fn say(&self, what: &str) {
        self.say_at(mono_ns(), what);
    }

    /// A line stamped with `at_ns`'s time since the start.
    pub(crate) fn say_at(&self, at_ns: u64, what: &str) {
        say!(
            self.console,
            "[{:>7.2}s] {what}",
            secs_since(at_ns, self.started_ns)
        );
    }

    /// Starts one more candidate, `torture-K` with the next K.
    pub(crate) fn spawn(&mut self) -> Result<(), Error> {
        self.spawn_on(None).map(drop)
    }

    /// [`spawn_on`](Self::spawn_on) with `--priority priority` and a
    /// settle time of one ttl (a store's candidate only).
    pub(crate) fn spawn_with_priority(&mut self, priority: i32) -> Result<String, Error> {
        self.extra = vec![
            "--priority".into(),
            priority.to_string().into(),
            "--settle".into(),
            format!("{}ms", self.ttl.as_millis()).into(),
        ];
        let spawned = self.spawn_on(None);
        self.extra.clear();
        spawned
    }

    /// Starts one more candidate; with `clock`, its clock (regent's, and its
    /// command's) runs at that rate, through libfaketime. Returns its id.
    pub(crate) fn spawn_on(&mut self, clock: Option<f64>) -> Result<String, Error> {
        if let Some(group) = &self.peer {
            // The lowest member id no live candidate has.
            let id = group
                .members()
                .find(|m| {
                    let m = m.to_string();
                    !self
                        .candidates
                        .iter()
                        .any(|c| c.id == m && procfs::alive(c.pid))
                })
                .ok_or(Error::PeerGroupFull)?;
            let mut args: Vec<OsString> = vec!["peer".into()];
            args.extend(group.args(id, self.ttl));
            return self.start(id.to_string(), args, Vec::new(), 0, clock);
        }
        self.last_number += 1;
        let id = format!("torture-{}", self.last_number);
        // The URL the fewest live candidates use, the first of those.
        let index = (0..self.urls.len())
            .min_by_key(|&i| {
                self.candidates
                    .iter()
                    .filter(|c| c.url == i && procfs::alive(c.pid))
                    .count()
            })
            .unwrap_or(0);
        let mut proxies = Vec::new();
        let url = match self.proxied.as_ref().map(|p| &p[index]) {
            Some((before, endpoints, after)) => {
                let mut local = Vec::new();
                for e in endpoints {
                    let p = proxy::Proxy::start(e.clone()).map_err(Error::io("store proxy"))?;
                    local.push(p.addr.to_string());
                    proxies.push(p);
                }
                format!("{before}{}{after}", local.join(","))
            }
            None => self.urls[index].clone(),
        };
        let mut args: Vec<OsString> = vec![
            "run".into(),
            "--store".into(),
            url.into(),
            "--election".into(),
            self.election.clone().into(),
            "--id".into(),
            id.clone().into(),
        ];
        args.extend(self.store_args.iter().cloned());
        args.extend(["--ttl".into(), format!("{}ms", self.ttl.as_millis()).into()]);
        args.extend(self.extra.iter().cloned());
        self.start(id, args, proxies, index, clock)
    }

    /// Starts `regent ARGS --lifeline-stdin -- writer…` as the candidate
    /// `id`, in its own process group, its output to `id`'s log (appended:
    /// a peer member restarted keeps one log).
    fn start(
        &mut self,
        id: String,
        args: Vec<OsString>,
        proxies: Vec<proxy::Proxy>,
        url: usize,
        clock: Option<f64>,
    ) -> Result<String, Error> {
        if self.peer.is_some() {
            self.last_number += 1;
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("{id}.log")))
            .map_err(Error::io("candidate log"))?;
        let err = log.try_clone().map_err(Error::io("candidate log"))?;
        let mut command = Command::new(&self.exe);
        if let Some(rate) = clock {
            let lib = self.faketime.as_ref().ok_or(Error::NoFaketime)?;
            command
                .env("LD_PRELOAD", lib)
                .env("FAKETIME", format!("+0 x{rate}"));
        }
        command.envs(self.env.iter().map(|(k, v)| (k, v)));
        let writer = WriterArgs {
            fence: self.fence_addr,
            campaign: self.campaign_id.clone(),
            background: false,
        };
        let spawned = command
            .args(args)
            .arg("--lifeline-stdin")
            .arg("--")
            .arg(&self.exe)
            .args(writer.to_args())
            .env(
                "REGENT_LOG",
                std::env::var_os("REGENT_LOG").unwrap_or_else(|| "info".into()),
            )
            .stdin(Stdio::from(self.lifeline_reader()?))
            .stdout(log)
            .stderr(err)
            .process_group(0)
            .kill_on_drop(true)
            .spawn();
        let child = spawned.map_err(|source| Error::Candidate {
            id: id.clone(),
            source,
        })?;
        let pid = child.id().and_then(|p| i32::try_from(p).ok()).unwrap_or(0);
        self.candidates.push(Candidate {
            id: id.clone(),
            pid,
            child,
            url,
            proxies,
        });
        Ok(id)
    }

    /// Waits (up to 5 s) for the candidate `pid`, signalled to die, to
    /// exit, and forgets it.
    pub(crate) async fn wait_exited(&mut self, pid: i32) {
        if let Some(c) = self.candidates.iter_mut().find(|c| c.pid == pid) {
            let _ = tokio::time::timeout(Duration::from_secs(5), c.child.wait()).await;
        }
        self.candidates
            .retain_mut(|c| c.pid != pid || c.child.try_wait().ok().flatten().is_none());
    }

    /// Reaps candidates that exited; returns them with their status.
    fn reap(&mut self) -> Vec<(String, std::process::ExitStatus)> {
        let mut gone = Vec::new();
        self.candidates.retain_mut(|c| match c.child.try_wait() {
            Ok(Some(status)) => {
                gone.push((c.id.clone(), status));
                false
            }
            _ => true,
        });
        gone
    }

    /// A read end of the candidates' lifeline, for one more candidate.
    fn lifeline_reader(&self) -> Result<OwnedFd, Error> {
        let path = format!("/proc/self/fd/{}", self.lifeline.as_raw_fd());
        // The pipe's write end is ours; reopening it read-only through
        // /proc gives a read end of the same pipe (no unsafe code).
        std::fs::File::open(path)
            .map(OwnedFd::from)
            .map_err(Error::io("lifeline pipe"))
    }

    /// Replaces candidates that exited; fails when a store process the
    /// campaign started has exited without the nemesis (its log says why).
    pub(crate) fn replenish(&mut self, n: usize) -> Result<(), Error> {
        if let Some(e) = self
            .store_processes
            .iter_mut()
            .find_map(StoreProcess::exited)
        {
            return Err(e);
        }
        for (id, status) in self.reap() {
            self.say(&format!("   {id} exited ({status}); replaced"));
        }
        while self.candidates.len() < n {
            self.spawn()?;
        }
        Ok(())
    }

    fn log_tail(&self, id: &str) -> String {
        let text = std::fs::read_to_string(self.dir.join(format!("{id}.log"))).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(10)..].join("\n")
    }

    /// Waits for the first accepted write; a candidate that exits first is
    /// an error carrying its log.
    pub(crate) async fn first_leader(&mut self) -> Result<(), Error> {
        let until = Instant::now() + self.ttl * 4 + Duration::from_secs(20);
        loop {
            if fence::lock(&self.fence).writes().iter().any(|w| w.accepted) {
                return Ok(());
            }
            if let Some((id, status)) = self.reap().into_iter().next() {
                let log = self.log_tail(&id);
                return Err(Error::CandidateExited { id, status, log });
            }
            if Instant::now() >= until {
                let first = self.candidates.first().map(|c| c.id.clone());
                return Err(Error::NoLeader {
                    within: until.duration_since(self.started),
                    log: first
                        .as_ref()
                        .map(|id| self.log_tail(id))
                        .unwrap_or_default(),
                    first: first.unwrap_or_else(|| "-".to_owned()),
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGCONT and SIGTERM to every candidate; SIGKILL to those still
    /// running after `within`. Returns when all have exited.
    pub(crate) async fn stop_all(&mut self, within: Duration) {
        for c in &self.candidates {
            for p in std::iter::once(c.pid).chain(procfs::descendants(c.pid)) {
                procfs::signal(p, Signal::CONT);
            }
            procfs::signal(c.pid, Signal::TERM);
        }
        let until = Instant::now() + within;
        for c in &mut self.candidates {
            if tokio::time::timeout_at(until, c.child.wait())
                .await
                .is_err()
            {
                warn_user!(
                    self.console,
                    "regent torture: {} did not stop in time; SIGKILL",
                    c.id
                );
                let _ = c.child.start_kill();
                let _ = c.child.wait().await;
            }
        }
        self.candidates.clear();
    }

    /// This campaign's writer processes still alive.
    pub(crate) fn writers_alive(&self) -> Vec<Survivor> {
        procfs::pids()
            .into_iter()
            .filter(|&p| procfs::alive(p) && procfs::is_mode(p, writer::MODE))
            .filter_map(|pid| {
                let argv = procfs::argv(pid);
                argv.windows(2)
                    .any(|w| w[0] == writer::CAMPAIGN && w[1] == self.campaign_id)
                    .then_some(Survivor { pid, argv })
            })
            .collect()
    }
}
