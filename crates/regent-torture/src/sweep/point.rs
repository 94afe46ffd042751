//! The points of a term's life the sweep crashes it at, the processes
//! there, and the best failover each crash allows.

use serde::Serialize;

use crate::failpoint::Stage;

/// A point of a term's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Point {
    /// regent has the acquire's answer; the go is not sent.
    Acquired,
    /// The supervisor has the go (and the ticket); CMD has not started.
    BeforeCmd,
    /// This many ms after CMD's first write.
    AfterStart(u64),
    /// 10 ms before the first renewal is due.
    BeforeRenewal,
    /// A renewal answered, before its deadline reaches the supervisor.
    Renewed,
    /// A graceful stop (SIGTERM of regent): the supervisor is about to
    /// stop CMD.
    Stopping,
    /// A graceful stop: CMD is gone, regent is about to release.
    Release,
    /// regent was killed: its supervisor's release process is about to
    /// give the lease back by the ticket.
    HandBack,
}

impl Point {
    pub(crate) const ALL: [Point; 11] = [
        Point::Acquired,
        Point::BeforeCmd,
        Point::AfterStart(0),
        Point::AfterStart(5),
        Point::AfterStart(20),
        Point::AfterStart(50),
        Point::BeforeRenewal,
        Point::Renewed,
        Point::Stopping,
        Point::Release,
        Point::HandBack,
    ];

    pub(crate) fn name(self) -> String {
        match self {
            Point::Acquired => "acquire answered, before the go".into(),
            Point::BeforeCmd => "go taken, before CMD starts".into(),
            Point::AfterStart(ms) => format!("CMD started +{ms} ms"),
            Point::BeforeRenewal => "10 ms before a renewal".into(),
            Point::Renewed => "renewal answered, not yet passed on".into(),
            Point::Stopping => "graceful stop, before CMD stops".into(),
            Point::Release => "graceful stop, before the release".into(),
            Point::HandBack => "hand-back by ticket under way".into(),
        }
    }

    /// The failpoint stage that holds the term at this point.
    pub(crate) fn stage(self) -> Option<Stage> {
        match self {
            Point::Acquired => Some(Stage::RegentAcquired),
            Point::BeforeCmd => Some(Stage::InitBeforeCmd),
            Point::Renewed => Some(Stage::RegentRenewed),
            Point::Stopping => Some(Stage::SupervisorStopping),
            Point::Release => Some(Stage::RegentRelease),
            Point::HandBack => Some(Stage::ReleaseByTicket),
            Point::AfterStart(_) | Point::BeforeRenewal => None,
        }
    }

    /// The processes of the term that exist at this point.
    pub(crate) fn victims(self, namespaced: bool) -> Vec<Victim> {
        let mut v = match self {
            Point::Acquired | Point::BeforeCmd => vec![Victim::Regent, Victim::Shim, Victim::Init],
            Point::AfterStart(_) | Point::BeforeRenewal | Point::Renewed | Point::Stopping => {
                vec![Victim::Regent, Victim::Shim, Victim::Init, Victim::Cmd]
            }
            // The supervisor waits for regent's word that it released.
            Point::Release => vec![Victim::Regent, Victim::Shim, Victim::Init],
            Point::HandBack => vec![Victim::Release, Victim::Shim, Victim::Init],
        };
        if !namespaced {
            v.retain(|&x| x != Victim::Init);
        }
        v
    }

    /// Whether a term may go on past a crash at this point (its
    /// pre-started supervisor died: regent starts another).
    pub(crate) fn best_for_survival(self) -> bool {
        self == Point::Acquired
    }

    /// The best failover this crash allows.
    pub(crate) fn best(self, victim: Victim) -> Best {
        match (self, victim) {
            // Nobody alive holds the term's ticket: the supervisor has
            // not got it yet.
            (Point::Acquired, Victim::Regent) => Best::Ttl,
            // The namespace's end takes the release process with it.
            (Point::HandBack, Victim::Init) => Best::Ttl,
            _ => Best::Fast,
        }
    }
}

/// A process of a term, as the sweep kills it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Victim {
    /// `regent run`.
    Regent,
    /// Its shim, the term's supervisor outside a PID namespace.
    Shim,
    /// The init of the command's PID namespace, the supervisor inside one.
    Init,
    /// The command (the writer).
    Cmd,
    /// The release process of a hand-back by ticket.
    Release,
}

impl Victim {
    /// The process's name in the table.
    pub fn name(self) -> &'static str {
        match self {
            Victim::Regent => "regent",
            Victim::Shim => "shim",
            Victim::Init => "init",
            Victim::Cmd => "cmd",
            Victim::Release => "release",
        }
    }
}

/// What a crash at a point should cost at best.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Best {
    /// A hand-over in milliseconds (judged: under half a ttl), or none:
    /// the term goes on (its pre-started supervisor died, and regent
    /// started another in time).
    Fast,
    /// The lease runs out: at most a crash failover.
    Ttl,
}
