//! What a candidate is doing, published on a `tokio::sync::watch` channel
//! ([`Candidate::status`](crate::Candidate::status)) for health endpoints,
//! metrics and the CLI.

use std::fmt;

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
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(tag = "state", rename_all = "snake_case")
)]
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

    /// The state's name: `starting`, `follower`, `leader` or `stopped`,
    /// for a health endpoint's JSON or a metric's label.
    ///
    /// ```
    /// assert_eq!(regent_core::Status::Starting.as_str(), "starting");
    /// ```
    pub fn as_str(&self) -> &'static str {
        match self {
            Status::Starting => "starting",
            Status::Follower { .. } => "follower",
            Status::Leader { .. } => "leader",
            Status::Stopped => "stopped",
        }
    }
}

/// For people: `leader web-1 (token 7)`, `follower of web-2 (token 6)`,
/// `follower, no leader`, `starting`, `stopped`.
///
/// ```
/// use regent_core::{FencingToken, HolderId, LeaderInfo, Metadata, Status};
///
/// let leader = LeaderInfo {
///     holder: HolderId::new("web-1")?,
///     token: FencingToken::new(7),
///     metadata: Metadata::new(),
/// };
/// assert_eq!(Status::Leader { leader }.to_string(), "leader web-1 (token 7)");
/// assert_eq!(Status::Follower { leader: None }.to_string(), "follower, no leader");
/// # Ok::<(), regent_core::InvalidName>(())
/// ```
impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Status::Leader { leader } => {
                write!(f, "leader {} (token {})", leader.holder, leader.token)
            }
            Status::Follower {
                leader: Some(leader),
            } => write!(f, "follower of {} (token {})", leader.holder, leader.token),
            Status::Follower { leader: None } => f.write_str("follower, no leader"),
            Status::Starting | Status::Stopped => f.write_str(self.as_str()),
        }
    }
}
