//! What a test reads from a simulation: the nodes that are up, crashed or
//! paused, their views and claims of leadership, the conflicts,
//! regressions, message counts and tenures recorded, and
//! [`settle`](Sim::settle), which waits for the nodes to agree.

use std::collections::BTreeMap;
use std::time::Duration;

use super::engine::Sim;
use super::records::{Conflict, Counts, Regression, Settled, Tenure};
use crate::epoch::{Epoch, Leader, NodeId};
use crate::machine::Machine;

impl<M: Machine> Sim<M> {
    /// The ids of the nodes that are up.
    pub fn live(&self) -> Vec<NodeId> {
        self.ids
            .iter()
            .zip(&self.nodes)
            .filter(|(_, n)| n.is_some())
            .map(|(&id, _)| id)
            .collect()
    }

    /// The ids of the crashed nodes.
    pub fn crashed(&self) -> Vec<NodeId> {
        self.ids
            .iter()
            .zip(&self.nodes)
            .filter(|(_, n)| n.is_none())
            .map(|(&id, _)| id)
            .collect()
    }

    /// Every live node's view of the leader.
    pub fn views(&self) -> Vec<(NodeId, Option<Leader>)> {
        self.ids
            .iter()
            .zip(&self.nodes)
            .filter_map(|(&id, n)| n.as_ref().map(|n| (id, n.leader())))
            .collect()
    }

    /// The live nodes that claim leadership, with their epochs.
    pub fn leaders(&self) -> Vec<(NodeId, Epoch)> {
        self.ids
            .iter()
            .zip(&self.nodes)
            .filter_map(|(&id, n)| {
                let token = n.as_ref()?.leadership()?;
                Some((id, Epoch::from_raw(token.get())))
            })
            .collect()
    }

    /// The leader every live node agrees on, if they all name the same one
    /// and it is live and alone in claiming leadership, in that term.
    pub fn agreed_leader(&self) -> Option<Leader> {
        let views = self.views();
        let first = views.first()?.1?;
        if views.iter().any(|&(_, v)| v != Some(first)) {
            return None;
        }
        (self.leaders() == [(first.id, first.epoch)]).then_some(first)
    }

    /// Every claim of leadership seen so far: the epoch and its claimant.
    pub fn claims(&self) -> &BTreeMap<Epoch, NodeId> {
        &self.claims
    }

    /// Epochs claimed by two different nodes (the safety invariant says
    /// none).
    pub fn conflicts(&self) -> &[Conflict] {
        &self.conflicts
    }

    /// Claims smaller than the same node's earlier claim since it started
    /// (the fencing invariant says none).
    pub fn regressions(&self) -> &[Regression] {
        &self.regressions
    }

    /// Messages sent since the start or the last [`reset_counts`](Self::reset_counts).
    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    /// Starts counting messages from zero.
    pub fn reset_counts(&mut self) {
        self.counts.clear();
    }

    /// Every stretch of leadership so far, ordered by node and start; one
    /// still running ends at its node's lease end (for a machine with a
    /// lease: it holds until then whatever happens next) or now.
    pub fn tenures(&self) -> Vec<Tenure> {
        let mut all = self.tenures.clone();
        for (i, open) in self.open.iter().enumerate() {
            if let Some(open) = open {
                all.push(self.tenure(i, open, open.lease_until.unwrap_or(self.now)));
            }
        }
        all.sort_by_key(|t| (t.node, t.from));
        all
    }

    /// Pairs of tenures of two different nodes that share an instant (the
    /// quorum-mode invariant says none).
    pub fn overlaps(&self) -> Vec<(Tenure, Tenure)> {
        let mut all = self.tenures();
        all.sort_by_key(|t| t.from);
        let mut found = Vec::new();
        for (k, later) in all.iter().enumerate() {
            for earlier in &all[..k] {
                if earlier.node != later.node && earlier.overlaps(later) {
                    found.push((*earlier, *later));
                }
            }
        }
        found
    }

    /// The ids of the paused nodes.
    pub fn paused(&self) -> Vec<NodeId> {
        self.ids
            .iter()
            .zip(&self.paused)
            .filter(|(_, p)| p.is_some())
            .map(|(&id, _)| id)
            .collect()
    }
}

impl<M: Machine> Sim<M> {
    /// Runs for `window`, sampling every 5 ms whether every live node names
    /// the same leader ([`agreed_leader`](Self::agreed_leader)); returns
    /// that leader and when the agreement that lasted to the end began, or
    /// `None` if the nodes did not agree at the end.
    pub fn settle(&mut self, window: Duration) -> Option<Settled> {
        const SAMPLE: Duration = Duration::from_millis(5);
        let begin = self.now;
        let end = begin + window;
        let mut since: Option<Settled> = None;
        while self.now < end {
            self.run_until((self.now + SAMPLE).min(end));
            since = match (self.agreed_leader(), since) {
                (None, _) => None,
                (Some(l), Some(s)) if l == s.leader => Some(s),
                (Some(leader), _) => Some(Settled {
                    leader,
                    took: self.now - begin,
                }),
            };
        }
        since
    }
}
