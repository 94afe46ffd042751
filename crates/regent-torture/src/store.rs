//! The store a campaign runs on: its processes (those the campaign
//! started, those it was told of), and the check before any candidate
//! starts that every URL answers, reaches the same store, and that the
//! store takes the campaign's ttl.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use regent_core::{ElectionName, HolderId, LeaseStore};
use rustix::process::{Pid, Signal};
use tokio::process::{Child, Command};
use tokio::time::Instant;

use crate::access::StoreAccess;
use crate::config::{Config, DEFAULT_TTL};
use crate::error::{ConfigError, Error};
use crate::procfs;

/// The ttl of a campaign: the one given, else [`DEFAULT_TTL`] raised to
/// the store's shortest ttl.
pub(crate) fn campaign_ttl(given: Option<Duration>, store_min: Duration) -> Duration {
    given.unwrap_or(DEFAULT_TTL.max(store_min))
}

/// A store process, when the campaign may signal it.
pub(crate) enum StoreProcess {
    /// Started by the campaign: `sh -c CMD`, leading its own process group.
    Ours {
        command: String,
        /// Its standard output and error, every run's.
        log: PathBuf,
        child: Box<Child>,
        pid: i32,
    },
    /// Started by someone else.
    Theirs { pid: i32 },
}

impl StoreProcess {
    fn spawn(command: &str, log_path: PathBuf) -> Result<Self, Error> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(Error::io("store log"))?;
        let err = log.try_clone().map_err(Error::io("store log"))?;
        let child = Command::new("sh")
            .arg("-c")
            .arg(command)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(Error::StoreCommand)?;
        let pid = child
            .id()
            .and_then(|p| i32::try_from(p).ok())
            .ok_or(Error::StoreCommandGone)?;
        Ok(Self::Ours {
            command: command.to_owned(),
            log: log_path,
            child: Box::new(child),
            pid,
        })
    }

    pub(crate) fn pid(&self) -> i32 {
        match self {
            Self::Ours { pid, .. } | Self::Theirs { pid } => *pid,
        }
    }

    /// Signals our store's whole group (the shell and what it started), or
    /// their store's process.
    pub(crate) fn signal(&self, sig: Signal) {
        match self {
            Self::Ours { pid, .. } => {
                if let Some(p) = Pid::from_raw(*pid) {
                    let _ = rustix::process::kill_process_group(p, sig);
                }
            }
            Self::Theirs { pid } => {
                procfs::signal(*pid, sig);
            }
        }
    }

    /// If our store exited (not by the nemesis: it waits for the restart),
    /// the error that says so, with the store's last output.
    pub(crate) fn exited(&mut self) -> Option<Error> {
        let Self::Ours {
            child,
            log,
            command,
            ..
        } = self
        else {
            return None;
        };
        let status = child.try_wait().ok()??;
        let log = std::fs::read_to_string(log).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(5).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        Some(Error::StoreExited {
            command: command.clone(),
            status,
            output: tail.join("\n"),
        })
    }

    /// Whether the campaign started it (and can restart it).
    pub(crate) fn is_ours(&self) -> bool {
        matches!(self, Self::Ours { .. })
    }

    /// SIGKILLs our store, waits a second, starts it again; the new pid.
    pub(crate) async fn kill_and_restart(&mut self) -> Result<i32, Error> {
        self.signal(Signal::KILL);
        if let Self::Ours {
            child,
            command,
            log,
            ..
        } = self
        {
            let _ = child.wait().await;
            tokio::time::sleep(Duration::from_secs(1)).await;
            let (command, log) = (command.clone(), log.clone());
            *self = Self::spawn(&command, log)?;
        }
        Ok(self.pid())
    }
}

/// The first of our store processes that exited by itself, as the error
/// of [`StoreProcess::exited`], once one has: never if none is ours.
async fn until_a_store_exits(stores: &mut [StoreProcess]) -> Error {
    if !stores.iter().any(StoreProcess::is_ours) {
        return std::future::pending().await;
    }
    loop {
        if let Some(e) = stores.iter_mut().find_map(StoreProcess::exited) {
            return e;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Stops our store processes, all at once (SIGTERM to each group, SIGKILL
/// to those still running 5 s later); theirs are left alone but thawed.
pub(crate) async fn stop_stores(stores: Vec<StoreProcess>) {
    for s in &stores {
        s.signal(Signal::CONT);
        if s.is_ours() {
            s.signal(Signal::TERM);
        }
    }
    let until = Instant::now() + Duration::from_secs(5);
    for s in stores {
        if let StoreProcess::Ours { mut child, pid, .. } = s
            && tokio::time::timeout_at(until, child.wait()).await.is_err()
            && let Some(p) = Pid::from_raw(pid)
        {
            let _ = rustix::process::kill_process_group(p, Signal::KILL);
            let _ = child.wait().await;
        }
    }
}

/// The store a campaign runs on, opened and checked.
pub(crate) struct Stores {
    pub(crate) urls: Vec<String>,
    pub(crate) ttl: Duration,
    pub(crate) expiry_slack: Duration,
    /// The arguments each candidate gets for the store.
    pub(crate) child_args: Vec<OsString>,
    /// Those it may signal: the store commands (started), then the pids.
    pub(crate) processes: Vec<StoreProcess>,
}

/// Resolves every URL (the default SQLite file in `dir` if none), starts
/// the store commands, and opens the store at every URL: every one
/// answers, reaches the same store, and takes the campaign's ttl.
pub(crate) async fn prepare_stores<S: StoreAccess>(
    config: &Config,
    access: &S,
    dir: &Path,
) -> Result<Stores, Error> {
    let urls = if config.stores.is_empty() {
        vec![format!("sqlite:{}", dir.join("torture.db").display())]
    } else {
        config.stores.clone()
    };
    let endpoints = urls
        .iter()
        .map(|url| {
            access.resolve(url).map_err(|source| Error::StoreUrl {
                url: regent_core::target::redacted(url),
                source,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut processes = Vec::new();
    for (i, command) in config.store_commands.iter().enumerate() {
        match StoreProcess::spawn(command, dir.join(format!("store-{i}.log"))) {
            Ok(p) => processes.push(p),
            Err(e) => {
                stop_stores(processes).await;
                return Err(e);
            }
        }
    }
    processes.extend(
        config
            .store_pids
            .iter()
            .map(|&pid| StoreProcess::Theirs { pid }),
    );
    // Every URL answers (the open may wait while the store starts), the
    // settings are right and the store takes the ttl; a store command that
    // exits meanwhile (a taken port) is the error.
    let opened = tokio::select! {
        r = check_stores(access, &endpoints, &config.election, config.ttl) => r,
        e = until_a_store_exits(&mut processes) => Err(e),
    };
    let (ttl, expiry_slack) = match opened {
        Ok(timing) => timing,
        Err(e) => {
            stop_stores(processes).await;
            return Err(e);
        }
    };
    Ok(Stores {
        urls,
        ttl,
        expiry_slack,
        child_args: access.child_args(),
        processes,
    })
}

/// Opens the store at every endpoint and checks that it takes the
/// campaign's ttl (the one given, or the default for this store) as
/// `regent run` will; returns that ttl and the store's expiry slack for it.
async fn check_stores<S: StoreAccess>(
    access: &S,
    endpoints: &[S::Endpoint],
    election: &ElectionName,
    given: Option<Duration>,
) -> Result<(Duration, Duration), Error> {
    let mut timing = None;
    let mut name = None;
    let holder = HolderId::new("torture-check").expect("a valid holder id");
    for endpoint in endpoints {
        let store = access
            .open(endpoint, election)
            .await
            .map_err(|source| Error::StoreOpen {
                endpoint: endpoint.to_string(),
                source,
            })?;
        let info = store.info();
        if let Some(first) = name
            && first != info.name
        {
            return Err(ConfigError::MixedStores {
                endpoint: endpoint.to_string(),
                kind: info.name,
                first,
            }
            .into());
        }
        name = Some(info.name);
        let ttl = campaign_ttl(given, info.min_ttl);
        regent_core::Candidate::builder(store, election.clone(), holder.clone())
            .ttl(ttl)
            .build()
            .map_err(|source| ConfigError::Ttl {
                ttl,
                defaulted: given.is_none(),
                source,
            })?;
        timing = Some((ttl, info.expiry_slack_for(ttl)));
    }
    // At least one endpoint: the default file's if none was given.
    Ok(timing.unwrap_or((campaign_ttl(given, Duration::ZERO), Duration::ZERO)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Consul refuses session TTLs under 10 s, Azure Blob leases under
    /// 15 s: the default follows the store's floor; a ttl given is kept
    /// (and checked against the store).
    #[test]
    fn the_default_ttl_is_raised_to_the_stores_shortest() {
        let s = Duration::from_secs;
        assert_eq!(campaign_ttl(None, Duration::from_millis(1)), s(2));
        assert_eq!(campaign_ttl(None, s(10)), s(10));
        assert_eq!(campaign_ttl(None, s(15)), s(15));
        assert_eq!(campaign_ttl(Some(s(1)), s(10)), s(1));
        assert_eq!(campaign_ttl(Some(s(30)), s(10)), s(30));
    }
}
