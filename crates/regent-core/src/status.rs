//! What a candidate is doing, published on a `tokio::sync::watch` channel
//! ([`Candidate::status`](crate::Candidate::status)) for health endpoints,
//! metrics and the CLI.

use tokio::sync::watch;

use crate::types::LeaderInfo;

/// Publishes `status` if it differs from the current one: receivers are
/// woken by changes only. For an [`Election`](crate::Election) that keeps
/// its own status channel.
///
/// ```
/// use regent_core::{Status, publish_status};
///
/// let (tx, mut rx) = tokio::sync::watch::channel(Status::Starting);
/// rx.mark_unchanged();
/// publish_status(&tx, Status::Starting);
/// assert!(!rx.has_changed()?);
/// publish_status(&tx, Status::Stopped);
/// assert!(rx.has_changed()?);
/// # Ok::<(), tokio::sync::watch::error::RecvError>(())
/// ```
pub fn publish(tx: &watch::Sender<Status>, status: Status) {
    tx.send_if_modified(|current| {
        if *current == status {
            false
        } else {
            *current = status;
            true
        }
    });
}

/// A candidate's view of its election, published on a
/// `tokio::sync::watch` channel ([`Candidate::status`](crate::Candidate::status))
/// for health endpoints, metrics and logs; changes only.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Status {
    /// Not campaigning yet, or no answer from the store yet.
    Starting,
    /// Someone else leads (`Some`), or nobody does as far as this candidate
    /// knows (`None`).
    Follower {
        /// The leader, if any.
        leader: Option<LeaderInfo>,
    },
    /// This candidate leads.
    Leader {
        /// This candidate as followers see it, with its fencing token.
        leader: LeaderInfo,
    },
    /// The candidate was shut down.
    Stopped,
}

impl Status {
    /// The leader as this candidate knows it, itself included.
    pub fn leader(&self) -> Option<&LeaderInfo> {
        match self {
            Status::Follower { leader } => leader.as_ref(),
            Status::Leader { leader } => Some(leader),
            Status::Starting | Status::Stopped => None,
        }
    }

    /// Whether this candidate leads, as it last published: for display and
    /// health checks. It proves nothing: it may be stale the moment it is
    /// read, and work on the leader's behalf must carry the token that
    /// [`Leadership::check`](crate::Leadership::check) returns.
    pub fn is_leader(&self) -> bool {
        matches!(self, Status::Leader { .. })
    }
}
