//! The [`Election`] seam: what the supervisor, the CLI's child supervision
//! and status need of one instance's part in an election, whether it is a
//! lease [`Candidate`] on a store or a peer node with no store.

use std::future::Future;

use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

use crate::candidate::Candidate;
use crate::error::CampaignError;
use crate::events::TermEvent;
use crate::leadership::Leadership;
use crate::status::Status;
use crate::store::{LeaseStore, SafetyClass};
use crate::timing::{Explanation, Timing};
use crate::types::{ElectionName, HolderId};

/// One instance's part in an election: it campaigns, leads behind a
/// [`Leadership`] guard, publishes its [`Status`] and shuts down.
///
/// A lease [`Candidate`] implements it over any [`LeaseStore`]; a peer
/// group's node (`regent-peer`) implements it with no store, building its
/// guards with [`Leadership::kept_by`]. A peer group cannot promise what
/// the store contract promises (an authority's clock, tokens that grow
/// across every holder forever), which is why it is not disguised as a
/// `LeaseStore`: [`safety`](Self::safety) says what an election can
/// promise, and [`Supervisor`](crate::Supervisor) and `regent`'s child
/// supervision work on anything that implements this.
///
/// ```
/// use regent_core::{Candidate, Election, ElectionName, HolderId, SafetyClass, memory::MemoryStore};
///
/// fn describe(e: &impl Election) -> String {
///     format!("{} in {} ({:?})", e.holder(), e.election(), e.safety())
/// }
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let candidate = Candidate::builder(MemoryStore::race(), ElectionName::new("jobs")?, HolderId::new("a")?).build()?;
/// assert_eq!(describe(&candidate), "a in jobs (Ephemeral)");
/// # Ok(()) }
/// ```
pub trait Election: Send + Sync + 'static {
    /// Campaigns until this instance leads, then returns the guard
    /// ([`Candidate::campaign`]).
    fn campaign(&self) -> impl Future<Output = Result<Leadership, CampaignError>> + Send;

    /// Shuts down: a campaign returns [`CampaignError::Shutdown`], a
    /// leadership ends with [`EndReason::Shutdown`](crate::EndReason) and is
    /// given back; waits until that is done ([`Candidate::shutdown`]).
    fn shutdown(&self) -> impl Future<Output = ()> + Send;

    /// The token that begins shutdown when cancelled, and is cancelled when
    /// shutdown begins.
    fn shutdown_token(&self) -> CancellationToken;

    /// The instance's status, published on every change and only then.
    fn status(&self) -> watch::Receiver<Status>;

    /// The events of this instance's terms from now on: won, confirmed,
    /// ended and why ([`Candidate::events`]).
    fn events(&self) -> broadcast::Receiver<TermEvent>;

    /// Marks the instance's part as over without a shutdown (a supervisor
    /// whose restart policy ended its run): publishes
    /// [`Status::Stopped`] once.
    fn finished(&self);

    /// The timing its terms run on: the grace the leader's work gets, the
    /// retry interval, and the deadline a dead-man's switch enforces.
    fn timing(&self) -> &Timing;

    /// The election's name.
    fn election(&self) -> &ElectionName;

    /// This instance's id in it.
    fn holder(&self) -> &HolderId;

    /// What the election can promise ([`SafetyClass::TimingOnly`] for a
    /// peer group without quorum).
    fn safety(&self) -> SafetyClass;

    /// Worst-case failover and safety budget, in numbers.
    fn explain(&self) -> Explanation;
}

impl<S: LeaseStore> Election for Candidate<S> {
    fn campaign(&self) -> impl Future<Output = Result<Leadership, CampaignError>> + Send {
        Candidate::campaign(self)
    }

    fn shutdown(&self) -> impl Future<Output = ()> + Send {
        Candidate::shutdown(self)
    }

    fn shutdown_token(&self) -> CancellationToken {
        Candidate::shutdown_token(self)
    }

    fn status(&self) -> watch::Receiver<Status> {
        Candidate::status(self)
    }

    fn events(&self) -> broadcast::Receiver<TermEvent> {
        Candidate::events(self)
    }

    fn finished(&self) {
        self.stopped();
    }

    fn timing(&self) -> &Timing {
        Candidate::timing(self)
    }

    fn election(&self) -> &ElectionName {
        Candidate::election(self)
    }

    fn holder(&self) -> &HolderId {
        Candidate::holder(self)
    }

    fn safety(&self) -> SafetyClass {
        self.store().info().safety
    }

    fn explain(&self) -> Explanation {
        Candidate::explain(self)
    }
}
