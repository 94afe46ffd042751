//! Term events: what happened to this instance's terms, as it happened —
//! won, confirmed, ended and why — for metrics, health checks, timelines
//! and logs ([`Election::events`](crate::Election::events)).
//!
//! The [`Status`](crate::Status) channel says what is true now; these
//! events say what happened, which a snapshot cannot: why a term ended, and
//! when each renewal moved the deadline. Nothing that reads them can change
//! leadership: a receiver that falls behind misses events (and is told so
//! by `tokio`'s `RecvError::Lagged`), and a term goes on regardless.

use tokio::sync::broadcast;
use tokio::time::Instant;

use crate::leadership::Ended;
use crate::types::{FencingToken, LeaderInfo};

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
