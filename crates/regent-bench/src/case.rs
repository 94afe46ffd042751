//! What a bench measures: the hand-over cases and the tools of each
//! (store, case), the load cases, and the ttls they run at.

use std::fmt;
use std::time::Duration;

use rustix::process::Signal;

use crate::store::StoreKind;

/// regent's ttl, and the native tool's where it has one, on the stores
/// whose tools take any ttl: the crash case's 2 s.
pub(crate) const TTL: Duration = Duration::from_secs(2);

/// `consul lock`'s session TTL (`api.DefaultLockSessionTTL`, no flag): the
/// ttl regent gets on Consul too (its minimum is 10 s).
pub(crate) const CONSUL_LOCK_TTL: Duration = Duration::from_secs(15);

/// Consul's default session lock delay, which `consul lock` keeps.
pub(crate) const CONSUL_LOCK_DELAY: Duration = Duration::from_secs(15);

/// How often `consul lock` (Go's `api.Lock`) retries an acquire that the
/// lock delay refused: `api.DefaultLockRetryTime`.
pub(crate) const CONSUL_LOCK_RETRY: Duration = Duration::from_secs(5);

/// The session TTL of `etcdctl elect` (`concurrency.NewSession`'s default;
/// the command has no flag for it).
pub(crate) const ETCDCTL_ELECT_TTL: Duration = Duration::from_secs(60);

/// The Curator participant's session timeout (fixed in its source).
pub(crate) const CURATOR_SESSION: Duration = Duration::from_secs(2);

/// The settle time of the `preferred` case's candidates (`regent run
/// --settle`): short, so that a run is quick; the hand-over itself does
/// not depend on it.
pub(crate) const PREFERRED_SETTLE: Duration = Duration::from_secs(1);

/// How long `regent handover` waits for the new term in the `requested`
/// case (`--timeout`): well past the leader's renew interval and a
/// graceful stop.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

/// regent's ttl on `store`: the native tool's where it has one.
pub(crate) fn regent_ttl(store: StoreKind) -> Duration {
    match store {
        StoreKind::Consul | StoreKind::ConsulCluster => CONSUL_LOCK_TTL,
        StoreKind::Sqlite
        | StoreKind::Etcd
        | StoreKind::ZooKeeper
        | StoreKind::Postgres
        | StoreKind::PgBouncer
        | StoreKind::Redis
        | StoreKind::RedisSentinel
        | StoreKind::Memory => TTL,
        // A blob lease lasts 15 s at least (load cases only).
        StoreKind::Azblob => regent::azblob::MIN_TTL,
    }
}

/// What happens to the leading tool process. A new hand-over case is a
/// variant: a name, the tools that run it, and how a run stops the leader
/// (`series.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Case {
    /// Its own graceful signal (SIGTERM; SIGINT for `etcdctl elect`): the
    /// tool releases, the next leader's command starts.
    Graceful,
    /// SIGKILL of the tool process alone: the lease must expire.
    Crash,
    /// No signal: a candidate of higher priority starts (`regent run
    /// --priority N+1 --settle 1s` beside the leader's `--priority N`), and
    /// the leader hands its term to it once it has seen it for the settle
    /// time (issue 30). regent alone: the engines' tools have no
    /// priorities.
    Preferred,
    /// No signal: `regent handover --to FOLLOWER` asks the leader to hand
    /// its term to the follower (issue 30). regent alone: the engines'
    /// tools cannot be asked.
    Requested,
}

impl Case {
    pub(crate) const ALL: [Self; 4] = [
        Self::Graceful,
        Self::Crash,
        Self::Preferred,
        Self::Requested,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Graceful => "graceful",
            Self::Crash => "crash",
            Self::Preferred => "preferred",
            Self::Requested => "requested",
        }
    }

    pub(crate) fn title(self) -> &'static str {
        match self {
            Self::Graceful => "graceful stop of the leader (SIGTERM, or SIGINT for etcdctl elect)",
            Self::Crash => "kill -9 of the leading process",
            Self::Preferred => {
                "hand-over to a candidate of higher priority (old command's SIGTERM to the new start)"
            }
            Self::Requested => {
                "hand-over on request, regent handover --to (old command's SIGTERM to the new start)"
            }
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Self> {
        match s {
            "graceful" => Some(Self::Graceful),
            "crash" => Some(Self::Crash),
            "preferred" => Some(Self::Preferred),
            "requested" => Some(Self::Requested),
            _ => None,
        }
    }

    /// Whether the leader hands its term over by itself (no signal to
    /// it): the hand-over cases of issue 30, regent's alone.
    pub(crate) fn is_hand_over(self) -> bool {
        matches!(self, Self::Preferred | Self::Requested)
    }

    /// The tools that run this case on `store`, regent first.
    pub(crate) fn tools(self, store: StoreKind) -> Vec<Tool> {
        let native: &[Tool] = match (store, self) {
            // No election tool of its own: regent alone.
            (
                StoreKind::Sqlite
                | StoreKind::Postgres
                | StoreKind::PgBouncer
                | StoreKind::Redis
                | StoreKind::RedisSentinel
                | StoreKind::Memory
                | StoreKind::Azblob,
                _,
            ) => &[],
            // The engines' tools have neither priorities nor requests.
            (_, Self::Preferred | Self::Requested) => &[],
            (StoreKind::Etcd, Self::Graceful) => &[Tool::EtcdctlElect],
            (StoreKind::Etcd, Self::Crash) => &[Tool::EtcdctlLock],
            (StoreKind::Consul | StoreKind::ConsulCluster, Self::Graceful) => &[
                Tool::ConsulLock { exec: false },
                Tool::ConsulLock { exec: true },
            ],
            (StoreKind::Consul | StoreKind::ConsulCluster, Self::Crash) => {
                &[Tool::ConsulLock { exec: false }]
            }
            (StoreKind::ZooKeeper, _) => &[Tool::CuratorLatch],
        };
        if store.load_only() {
            return Vec::new();
        }
        let mut tools = vec![Tool::Regent {
            ttl: regent_ttl(store),
        }];
        if store == StoreKind::ConsulCluster {
            // And at its own default, as a user who sets no --ttl runs it.
            tools.push(Tool::Regent {
                ttl: regent_core::DEFAULT_TTL,
            });
        }
        tools.extend_from_slice(native);
        tools
    }
}

impl fmt::Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A tool under test: regent, or an engine's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Tool {
    /// `regent run --ttl TTL -- regent __demo-task …`.
    Regent { ttl: Duration },
    /// `etcdctl elect NAME PROPOSAL`: leads until SIGINT, printing its
    /// proposal when elected.
    EtcdctlElect,
    /// `etcdctl lock --ttl 2 NAME CMD…`.
    EtcdctlLock,
    /// `consul lock PREFIX CMD` (through `$SHELL -c`); with `exec`, the
    /// shell execs CMD.
    ConsulLock { exec: bool },
    /// A Curator `LeaderLatch` participant in a JVM of its own.
    CuratorLatch,
}

impl Tool {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Regent { .. } => "regent run",
            Self::EtcdctlElect => "etcdctl elect",
            Self::EtcdctlLock => "etcdctl lock",
            Self::ConsulLock { exec: false } => "consul lock",
            Self::ConsulLock { exec: true } => "consul lock, exec CMD",
            Self::CuratorLatch => "Curator LeaderLatch",
        }
    }

    /// A short tag for file and election names.
    pub(crate) fn tag(self) -> String {
        match self {
            Self::Regent { ttl } => format!("regent-ttl{}", ttl.as_secs()),
            Self::EtcdctlElect => "etcdctl-elect".to_owned(),
            Self::EtcdctlLock => "etcdctl-lock".to_owned(),
            Self::ConsulLock { exec: false } => "consul-lock".to_owned(),
            Self::ConsulLock { exec: true } => "consul-lock-exec".to_owned(),
            Self::CuratorLatch => "curator".to_owned(),
        }
    }

    /// On a [`StoreKind::ConsulCluster`], the client agents of the tool's
    /// two candidates: every candidate talks only to its own agent, as on
    /// a host of its own, and a new follower takes the agent of the leader
    /// it replaces.
    pub(crate) fn agents(self) -> [usize; 2] {
        match self {
            Self::ConsulLock { .. } => [2, 3],
            _ => [0, 1],
        }
    }

    /// The lease, session or ttl the tool's leadership lives by.
    pub(crate) fn ttl(self) -> Duration {
        match self {
            Self::Regent { ttl } => ttl,
            Self::EtcdctlElect => ETCDCTL_ELECT_TTL,
            Self::EtcdctlLock => TTL,
            Self::ConsulLock { .. } => CONSUL_LOCK_TTL,
            Self::CuratorLatch => CURATOR_SESSION,
        }
    }

    /// How the ttl is set, for the report.
    pub(crate) fn ttl_note(self) -> String {
        let s = self.ttl().as_secs();
        match self {
            Self::Regent { .. } => format!("--ttl {s}s"),
            Self::EtcdctlElect => format!("session {s} s (fixed)"),
            Self::EtcdctlLock => format!("--ttl {s}"),
            Self::ConsulLock { .. } => format!(
                "session {s} s, lock delay {} s (defaults)",
                CONSUL_LOCK_DELAY.as_secs()
            ),
            Self::CuratorLatch => format!("session {s} s"),
        }
    }

    /// How often the holder renews: the random part of the wait before the
    /// signal spans one such interval, so that the signal falls anywhere in
    /// the renewal cycle. regent: its default, a fifth of the ttl; etcd's
    /// Go client: a third of the lease TTL; `consul lock`: half its session
    /// TTL; ZooKeeper's Java client pings at a third of its session timeout.
    pub(crate) fn renew_every(self) -> Duration {
        match self {
            Self::Regent { ttl } => ttl / 5,
            Self::EtcdctlElect | Self::EtcdctlLock => self.ttl() / 3,
            Self::ConsulLock { .. } => CONSUL_LOCK_TTL / 2,
            Self::CuratorLatch => CURATOR_SESSION / 3,
        }
    }

    /// The signal that stops the leading tool process in `case`: each
    /// tool's own graceful stop. `etcdctl elect` resigns on SIGINT only
    /// (SIGTERM kills it, leaving its session to expire). None in the
    /// hand-over cases: the leader stops its command by itself.
    pub(crate) fn signal(self, case: Case) -> Option<Signal> {
        match (case, self) {
            (Case::Crash, _) => Some(Signal::KILL),
            (Case::Graceful, Self::EtcdctlElect) => Some(Signal::INT),
            (Case::Graceful, _) => Some(Signal::TERM),
            (Case::Preferred | Case::Requested, _) => None,
        }
    }

    /// Whether the tool runs a command (whose start is logged by the demo
    /// task) rather than announcing its leadership on its standard output.
    pub(crate) fn runs_command(self) -> bool {
        match self {
            Self::Regent { .. } | Self::EtcdctlLock | Self::ConsulLock { .. } => true,
            Self::EtcdctlElect | Self::CuratorLatch => false,
        }
    }

    /// The longest a hand-over may take before the bench gives up: after a
    /// crash, the store ends the holder's lease within its ttl and slack
    /// (Consul: two session TTLs, then the lock delay and `consul lock`'s
    /// retry), plus a margin for a busy machine.
    pub(crate) fn handover_bound(self, case: Case) -> Duration {
        let margin = Duration::from_secs(20);
        match (case, self) {
            (Case::Graceful, _) => margin,
            // The new candidate's start, the settle time, the leader's
            // next look (a renew interval), the hand-over.
            (Case::Preferred, _) => PREFERRED_SETTLE + self.ttl() + margin,
            // The leader answers at its next look.
            (Case::Requested, _) => self.ttl() + margin,
            (Case::Crash, Self::ConsulLock { .. }) => {
                2 * CONSUL_LOCK_TTL + CONSUL_LOCK_DELAY + CONSUL_LOCK_RETRY + margin
            }
            (Case::Crash, Self::Regent { ttl }) => 3 * ttl + margin,
            (Case::Crash, _) => 2 * self.ttl() + margin,
        }
    }
}

/// A load case, in the bench's process or processes of its own, regent
/// alone (`load/`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum LoadCase {
    /// Many candidates, one election: the store operations per failover.
    Herd,
    /// Many elections, one process: what holding them costs per ttl.
    Scale,
    /// An observer beside the candidates: whether it learns of a graceful
    /// hand-over as soon as the next leader does.
    Observe,
    /// The same when the leader stops renewing without releasing.
    ObserveCrash,
}

impl LoadCase {
    /// Every load case, in the order a bench runs them.
    pub(crate) const ALL: [Self; 4] = [Self::Herd, Self::Scale, Self::Observe, Self::ObserveCrash];

    /// Its name in `--cases` and the report.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Herd => "herd",
            Self::Scale => "scale",
            Self::Observe => "observe",
            Self::ObserveCrash => "observe-crash",
        }
    }

    /// The load case named `s`.
    pub(crate) fn parse(s: &str) -> Option<Self> {
        match s {
            "herd" => Some(Self::Herd),
            "scale" => Some(Self::Scale),
            "observe" => Some(Self::Observe),
            "observe-crash" => Some(Self::ObserveCrash),
            _ => None,
        }
    }

    /// Whether it runs on `store`: the crowds not on Azure Blob, whose
    /// leases last 15 s at least (the crowds' ttl is 10 s) and whose
    /// watches read a blob each per second.
    pub(crate) fn runs_on(self, store: StoreKind) -> bool {
        match self {
            Self::Herd | Self::Scale => store != StoreKind::Azblob,
            Self::Observe | Self::ObserveCrash => true,
        }
    }
}

impl fmt::Display for LoadCase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        assert!(Case::ALL.iter().all(|c| Case::parse(c.name()) == Some(*c)));
        let names: Vec<&str> = Case::ALL.iter().map(|c| c.name()).collect();
        assert_eq!(names, ["graceful", "crash", "preferred", "requested"]);
        assert!(
            LoadCase::ALL
                .iter()
                .all(|c| LoadCase::parse(c.name()) == Some(*c))
        );
        assert!(
            StoreKind::ALL
                .iter()
                .all(|s| StoreKind::parse(s.name()) == Some(*s))
        );
    }
}
