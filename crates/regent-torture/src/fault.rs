//! The kinds of fault, what each needs to be injected, and the record of
//! one fault injected (the report's fault log). How each is injected is
//! the nemesis's (`nemesis.rs`).

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

/// A kind of fault, named as `regent torture --faults` takes it
/// ([`FaultKind::name`]). `regent torture --help` describes each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum FaultKind {
    /// SIGKILL the leading regent.
    KillLeader,
    /// SIGTERM the leading regent.
    TermLeader,
    /// SIGSTOP the leading regent alone for 1–3 ttl, then SIGCONT.
    StopLeader,
    /// SIGSTOP the leader's whole tree (regent, shims, command, jobs) for
    /// 1.5–3 ttl, then SIGCONT.
    StopTree,
    /// SIGKILL the leader's shim.
    KillShim,
    /// SIGSTOP the leading regent, SIGKILL its shim 0.5 s (at most ttl/4)
    /// later, then after 2 ttl SIGCONT or SIGKILL the regent (seeded).
    StopLeaderKillShim,
    /// SIGKILL the leader's command (not its background job).
    KillCmd,
    /// SIGKILL a candidate that does not lead.
    KillFollower,
    /// SIGSTOP a store process for 1–3 ttl.
    StoreStop,
    /// SIGKILL a store process the campaign started, restart it after 1 s.
    StoreKill,
    /// Hold the leader's store traffic for 1–3 ttl (a proxy per
    /// candidate).
    StoreCut,
    /// Delay the leader's store traffic by 1/4–1 ttl per chunk for 1–3 ttl.
    StoreDelay,
    /// Replace a follower by one whose clock runs fast (libfaketime).
    ClockFast,
    /// Replace a follower by one whose clock runs 0.1–0.9 % slow.
    ClockSlow,
    /// Cut the leader, with up to (n-1)/2 - 1 other members, off from the
    /// rest of a peer group for 1–3 ttl.
    Partition,
    /// Replace a follower by one of a priority above every other's
    /// (`--priority`, a settle time of one ttl): the leader hands its term
    /// over to it.
    Preempt,
    /// Ask the leader to hand over (`regent handover`), to a follower
    /// drawn at random or to the next.
    Handover,
}

impl FaultKind {
    /// Every kind, in the order of the docs.
    pub const ALL: [Self; 17] = [
        Self::KillLeader,
        Self::TermLeader,
        Self::StopLeader,
        Self::StopTree,
        Self::KillShim,
        Self::StopLeaderKillShim,
        Self::KillCmd,
        Self::KillFollower,
        Self::StoreStop,
        Self::StoreKill,
        Self::StoreCut,
        Self::StoreDelay,
        Self::ClockFast,
        Self::ClockSlow,
        Self::Partition,
        Self::Preempt,
        Self::Handover,
    ];

    /// The kind's name: `kill-leader`, `store-cut`, …
    pub fn name(self) -> &'static str {
        match self {
            Self::KillLeader => "kill-leader",
            Self::TermLeader => "term-leader",
            Self::StopLeader => "stop-leader",
            Self::StopTree => "stop-tree",
            Self::KillShim => "kill-shim",
            Self::StopLeaderKillShim => "stop-leader-kill-shim",
            Self::KillCmd => "kill-cmd",
            Self::KillFollower => "kill-follower",
            Self::StoreStop => "store-stop",
            Self::StoreKill => "store-kill",
            Self::StoreCut => "store-cut",
            Self::StoreDelay => "store-delay",
            Self::ClockFast => "clock-fast",
            Self::ClockSlow => "clock-slow",
            Self::Partition => "partition",
            Self::Preempt => "preempt",
            Self::Handover => "handover",
        }
    }

    /// Kinds by name, comma-separated (`kill-leader,stop-tree`), at least
    /// one; a kind named twice counts once.
    ///
    /// # Errors
    ///
    /// [`FaultListError`]: a name that is no kind's, or no name at all.
    pub fn parse_list(s: &str) -> Result<Vec<Self>, FaultListError> {
        let mut kinds = Vec::new();
        for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let kind = name.parse()?;
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
        if kinds.is_empty() {
            return Err(FaultListError::Empty);
        }
        Ok(kinds)
    }

    /// Why the fault cannot be injected in this `setting`; `None` if it
    /// can. `store-kill` needs a store the campaign started (it restarts
    /// it), `store-stop` any store process, `store-cut` and `store-delay`
    /// store URLs whose endpoints can be proxied; the clock faults
    /// libfaketime, and a store on the network (a clock of its own) or a
    /// peer group (each member's clock counts); `partition` a peer group,
    /// which has no store.
    pub(crate) fn refused(self, setting: &Setting) -> Option<FaultRefusal> {
        match self {
            Self::StoreStop
            | Self::StoreKill
            | Self::StoreCut
            | Self::StoreDelay
            | Self::Preempt
            | Self::Handover
                if setting.peer =>
            {
                Some(FaultRefusal::PeerGroupHasNoStore)
            }
            Self::StoreStop if !setting.store_process => Some(FaultRefusal::NeedsStoreProcess),
            Self::StoreKill if !setting.store_command => Some(FaultRefusal::NeedsStoreCommand),
            Self::StoreCut | Self::StoreDelay if !setting.proxiable => {
                Some(FaultRefusal::NeedsProxiableStore)
            }
            Self::ClockFast | Self::ClockSlow if !setting.proxiable && !setting.peer => {
                Some(FaultRefusal::NeedsOwnClock)
            }
            Self::ClockFast | Self::ClockSlow if !setting.faketime => {
                Some(FaultRefusal::NeedsFaketime)
            }
            Self::Partition if !setting.peer => Some(FaultRefusal::NeedsPeerGroup),
            _ => None,
        }
    }

    /// Whether the fault needs the candidates' store proxies.
    pub(crate) fn needs_proxies(self) -> bool {
        matches!(self, Self::StoreCut | Self::StoreDelay)
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for FaultKind {
    type Err = FaultListError;

    fn from_str(name: &str) -> Result<Self, FaultListError> {
        Self::ALL
            .into_iter()
            .find(|k| k.name() == name)
            .ok_or_else(|| FaultListError::Unknown {
                name: name.to_owned(),
            })
    }
}

impl Serialize for FaultKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// A list of fault kinds that does not parse ([`FaultKind::parse_list`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FaultListError {
    /// A name that is no kind's.
    #[error("unknown fault '{name}'; known: {}", known())]
    Unknown {
        /// The name given.
        name: String,
    },
    /// No name at all.
    #[error("name at least one fault")]
    Empty,
}

fn known() -> String {
    let names: Vec<_> = FaultKind::ALL.iter().map(|k| k.name()).collect();
    names.join(", ")
}

/// Why a fault kind asked for cannot be injected in the campaign
/// configured ([`ConfigError::FaultRefused`](crate::ConfigError::FaultRefused)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FaultRefusal {
    /// A store fault in a peer group, which has no store.
    #[error("a peer group has no store")]
    PeerGroupHasNoStore,
    /// `store-stop` needs a store process to signal: a store command or a
    /// store pid.
    #[error(
        "needs a store command or a store pid; a store without a server process (such as the \
         default SQLite file) cannot be stopped"
    )]
    NeedsStoreProcess,
    /// `store-kill` needs a store process the campaign started: it
    /// restarts it.
    #[error(
        "needs a store command (the campaign restarts the store); a store without a server \
         process (such as the default SQLite file) cannot be killed"
    )]
    NeedsStoreCommand,
    /// `store-cut` and `store-delay` need store URLs whose endpoints have
    /// explicit ports, to put a proxy between each candidate and the store.
    #[error(
        "needs store URLs of the form scheme://HOST:PORT[,HOST:PORT]… (explicit ports) to put a \
         proxy between each candidate and the store"
    )]
    NeedsProxiableStore,
    /// The clock faults need a clock of the store's own (a store reached
    /// over the network) or a peer group: processes on one host share one
    /// clock.
    #[error(
        "needs a store with a clock of its own, reached over the network, or a peer group; \
         processes on one host share one clock"
    )]
    NeedsOwnClock,
    /// The clock faults need libfaketime.
    #[error(
        "needs libfaketime (Debian: apt install faketime, or scripts/install-engines; elsewhere \
         set REGENT_LIBFAKETIME to its libfaketimeMT.so.1)"
    )]
    NeedsFaketime,
    /// `partition` cuts a peer group in two.
    #[error(
        "cuts a peer group in two; a store's candidates are cut off from their store by store-cut"
    )]
    NeedsPeerGroup,
}

/// What a campaign has to inject faults into ([`FaultKind::refused`]).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Setting {
    /// A store process the campaign may signal (a store command or pid).
    pub(crate) store_process: bool,
    /// A store process the campaign started (a store command).
    pub(crate) store_command: bool,
    /// Store URLs whose endpoints can be proxied.
    pub(crate) proxiable: bool,
    /// libfaketime is there.
    pub(crate) faketime: bool,
    /// A peer group, not a store's candidates.
    pub(crate) peer: bool,
}

/// One fault injected. Times are CLOCK_MONOTONIC ns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Fault {
    /// Its kind.
    pub kind: FaultKind,
    /// When the (first) signal was sent.
    pub at_ns: u64,
    /// When the fault ended (the thaw of a stop; `at_ns` for a kill).
    pub end_ns: u64,
    /// The leader when the fault began, for faults aimed at it (and store
    /// faults, which hit it too).
    pub leader_id: Option<String>,
    /// That leader's fencing token.
    pub leader_token: Option<u64>,
    /// The index of the store URL that leader talked to (with several
    /// URLs, such as an agent per candidate: whether a store process hit
    /// was the leader's own agent).
    pub leader_url: Option<usize>,
    /// The candidate hit, if one.
    pub target: Option<String>,
    /// The store process hit (`store-stop`, `store-kill`), by its index:
    /// the store commands in the order given, then the store pids.
    pub store_process: Option<usize>,
    /// The processes signalled.
    pub pids: Vec<i32>,
    /// What was done, in words.
    pub detail: String,
    /// The fault may give the group two leaders by design: any fault of a
    /// peer group without quorum (timing-only), whose members join again
    /// after it, or are split by it. Writes the fence refuses from any
    /// member during it, and a little after, are the fence at work, not a
    /// violation.
    pub splits: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_by_name_once_each_and_name_what_is_wrong() {
        assert_eq!(
            FaultKind::parse_list("kill-leader, stop-tree,kill-leader,").unwrap(),
            [FaultKind::KillLeader, FaultKind::StopTree]
        );
        assert_eq!(FaultKind::parse_list(" , "), Err(FaultListError::Empty));
        let e = FaultKind::parse_list("kill-leader,bogus").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("unknown fault 'bogus'; known: kill-leader")
        );
        for k in FaultKind::ALL {
            assert_eq!(k.name().parse::<FaultKind>(), Ok(k));
        }
    }
}
