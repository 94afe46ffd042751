//! Term events: what happened to this instance's terms, as it happened —
//! won, confirmed, ended and why — for metrics, health checks, timelines
//! and logs ([`Election::events`](crate::Election::events)).
//!
//! The [`Status`](crate::Status) channel says what is true now; these
//! events say what happened, which a snapshot cannot: why a term ended, and
//! when each renewal moved the deadline. Nothing that reads them can change
//! leadership: a receiver that falls behind misses events (and is told so
//! by `tokio`'s `RecvError::Lagged`), and a term goes on regardless.

use std::fmt;

use tokio::sync::broadcast;
use tokio::time::Instant;

use crate::error::ErrorKind;
use crate::handover::HandOverReason;
use crate::types::{FencingToken, LeaderInfo};

/// Why a leadership ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EndReason {
    /// The store said the lease is gone or someone else holds it.
    Lost,
    /// No renewal succeeded before the renew deadline: the leader stepped
    /// down on its own clock.
    DeadlinePassed,
    /// [`Leadership::resign`](crate::Leadership::resign) was called.
    Resigned,
    /// The guard was dropped.
    Dropped,
    /// The candidate was shut down.
    Shutdown,
    /// The leader task stopped sending heartbeats (health watchdog).
    Unhealthy,
    /// The store failed with a permanent error while renewing.
    StoreFailed(ErrorKind),
    /// The leader handed the term to another candidate
    /// ([`handover`](crate::handover)): its work stopped as on a graceful
    /// stop, then the lease went to the successor.
    HandedOver(HandOverReason),
}

impl fmt::Display for EndReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EndReason::Lost => f.write_str("lease lost"),
            EndReason::DeadlinePassed => f.write_str("renew deadline passed"),
            EndReason::Resigned => f.write_str("resigned"),
            EndReason::Dropped => f.write_str("guard dropped"),
            EndReason::Shutdown => f.write_str("shutdown"),
            EndReason::Unhealthy => f.write_str("leader task unhealthy"),
            EndReason::StoreFailed(kind) => write!(f, "renewal failed: {kind}"),
            EndReason::HandedOver(why) => write!(f, "handed over ({why})"),
        }
    }
}

/// When and why a leadership ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ended {
    /// Why.
    pub reason: EndReason,
    /// When (monotonic clock): the instant the cancellation token fired.
    pub at: Instant,
}

/// How many events a receiver may fall behind before it misses some.
const CAPACITY: usize = 256;

/// One thing that happened to one of this instance's terms.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TermEvent {
    /// This instance won a term.
    Won {
        /// This instance as followers see it, with the term's token.
        leader: LeaderInfo,
        /// When the term was won (monotonic clock).
        at: Instant,
        /// The local lease deadline the win gave.
        deadline: Instant,
        /// When the leader steps down unless a renewal succeeds first.
        step_down_at: Instant,
    },
    /// The term was confirmed (a renewal succeeded): its deadlines moved.
    Confirmed {
        /// The term's token.
        token: FencingToken,
        /// When the confirmation was recorded (monotonic clock).
        at: Instant,
        /// The new local lease deadline.
        deadline: Instant,
        /// The new step-down instant.
        step_down_at: Instant,
    },
    /// The term ended.
    Ended {
        /// This instance as it led, with the term's token.
        leader: LeaderInfo,
        /// When and why.
        ended: Ended,
    },
}

impl TermEvent {
    /// The token of the term the event is about.
    pub fn token(&self) -> FencingToken {
        match self {
            TermEvent::Won { leader, .. } | TermEvent::Ended { leader, .. } => leader.token,
            TermEvent::Confirmed { token, .. } => *token,
        }
    }
}

/// Where an election publishes its [`TermEvent`]s: a broadcast channel
/// that any number of readers subscribe to. Sending never waits and never
/// fails; with no receiver the event is dropped.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use regent_core::{Candidate, Election, ElectionName, HolderId, TermEvent, memory::MemoryStore};
///
/// let candidate = Candidate::builder(MemoryStore::race(), ElectionName::new("jobs")?, HolderId::new("a")?)
///     .build()?;
/// let mut events = candidate.events();
/// let leadership = candidate.campaign().await?;
/// assert!(matches!(events.recv().await?, TermEvent::Won { .. }));
/// leadership.resign().await?;
/// assert!(matches!(events.recv().await?, TermEvent::Ended { .. }));
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct TermEvents {
    tx: broadcast::Sender<TermEvent>,
}

impl Default for TermEvents {
    fn default() -> Self {
        Self::new()
    }
}

impl TermEvents {
    /// A channel with no receiver yet.
    pub fn new() -> Self {
        Self {
            tx: broadcast::channel(CAPACITY).0,
        }
    }

    /// A receiver of every event sent from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<TermEvent> {
        self.tx.subscribe()
    }

    /// Sends `event` to every receiver (none: dropped).
    pub fn send(&self, event: TermEvent) {
        let _ = self.tx.send(event);
    }
}
