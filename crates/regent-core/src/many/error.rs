//! The errors of the sets, each naming its election: a set that cannot be
//! built, one election's supervision that failed, a run with failures, one
//! election's observation that failed.

use std::collections::BTreeMap;
use std::fmt;

use crate::error::{CampaignError, ConfigError, StoreError};
use crate::supervisor::SupervisorExit;
use crate::types::ElectionName;

/// A [`SupervisorSet`](crate::SupervisorSet) that cannot be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SetConfigError {
    /// One election's candidate breaks a rule (a timing rule, the store's
    /// ttl range); the first such election is named.
    #[error("election '{election}': {source}")]
    Candidate {
        /// The election.
        election: ElectionName,
        /// The rule broken.
        source: ConfigError,
    },
    /// The supervisors' settings break a rule (a zero health timeout).
    #[error("supervisor settings: {0}")]
    Supervisor(#[source] ConfigError),
    /// An election given twice: two candidates of one holder in one
    /// election would each take the other's record for its own.
    #[error("election '{election}' is given twice")]
    Duplicate {
        /// The election.
        election: ElectionName,
    },
}

/// Why one election's supervision in a set ended with an error; the set's
/// other elections went on. `Display` names the election and says why,
/// the cause included; [`source`](std::error::Error::source) is the cause.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ElectionFailure {
    /// Its campaign failed in a way retrying cannot fix (a permanent store
    /// error, or the store unavailable for the whole `give_up_after`
    /// window): the error [`Supervisor::run`](crate::Supervisor::run)
    /// returns.
    #[error("election '{election}': {source}")]
    Campaign {
        /// The election.
        election: ElectionName,
        /// The campaign's error.
        source: CampaignError,
    },
    /// Its supervisor's task panicked or was cancelled. The leader task's
    /// own panics never end here (the supervisor catches them and ends the
    /// term: [`TermOutcome::TaskPanicked`](crate::TermOutcome::TaskPanicked));
    /// this is a panic in regent or in the store, or a runtime shutting
    /// down. A lease still held is released in the background, as when a
    /// supervisor's future is dropped.
    #[error("election '{election}': its supervisor's task panicked or was cancelled: {source}")]
    Aborted {
        /// The election.
        election: ElectionName,
        /// The task's end.
        source: tokio::task::JoinError,
    },
}

impl ElectionFailure {
    /// The election that failed.
    pub fn election(&self) -> &ElectionName {
        match self {
            ElectionFailure::Campaign { election, .. }
            | ElectionFailure::Aborted { election, .. } => election,
        }
    }
}

/// Some elections of a [`SupervisorSet`](crate::SupervisorSet) failed
/// ([`SupervisorSet::run_until`](crate::SupervisorSet::run_until)); the
/// others ran until they stopped, and their exits are kept.
///
/// `Display` names every failed election with its cause chain, in election
/// order; each [`ElectionFailure`] keeps its own
/// [`source`](std::error::Error::source), so this error has none of its own.
#[derive(Debug)]
pub struct SetFailed {
    failures: Vec<ElectionFailure>,
    exits: BTreeMap<ElectionName, SupervisorExit>,
}

impl SetFailed {
    pub(super) fn new(
        mut failures: Vec<ElectionFailure>,
        exits: BTreeMap<ElectionName, SupervisorExit>,
    ) -> Self {
        failures.sort_by(|a, b| a.election().cmp(b.election()));
        Self { failures, exits }
    }

    /// The elections that failed, in election order.
    pub fn failures(&self) -> &[ElectionFailure] {
        &self.failures
    }

    /// How the other elections' supervision ended.
    pub fn exits(&self) -> &BTreeMap<ElectionName, SupervisorExit> {
        &self.exits
    }

    /// The failures and the other elections' exits.
    pub fn into_parts(self) -> (Vec<ElectionFailure>, BTreeMap<ElectionName, SupervisorExit>) {
        (self.failures, self.exits)
    }
}

impl fmt::Display for SetFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total = self.failures.len() + self.exits.len();
        write!(f, "{} of {total} elections failed", self.failures.len())?;
        for (i, failure) in self.failures.iter().enumerate() {
            let sep = if i == 0 { ": " } else { "; " };
            write!(f, "{sep}{}", crate::error::report(failure))?;
        }
        Ok(())
    }
}

impl std::error::Error for SetFailed {}

/// Observing one election of an [`ObserverSet`](crate::ObserverSet)
/// failed. `Display` names the election and includes the store's error;
/// [`source`](std::error::Error::source) is that error.
#[derive(Debug, thiserror::Error)]
#[error("election '{election}': {source}")]
pub struct ObserveError {
    election: ElectionName,
    source: StoreError,
}

impl ObserveError {
    pub(super) fn new(election: ElectionName, source: StoreError) -> Self {
        Self { election, source }
    }

    /// The election whose watch failed.
    pub fn election(&self) -> &ElectionName {
        &self.election
    }

    /// The store's error.
    pub fn store_error(&self) -> &StoreError {
        &self.source
    }
}
