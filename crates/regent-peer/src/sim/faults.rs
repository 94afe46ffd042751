//! The faults a test injects into a simulation: crashes, restarts,
//! pauses, partitions and their healing, the random faults of
//! [`chaos`](Sim::chaos), and [`calm`](Sim::calm), which ends them all.

use std::time::Duration;

use super::conditions::{ExtraFaults, Network};
use super::engine::Sim;
use crate::epoch::NodeId;
use crate::machine::Machine;

impl<M: Machine> Sim<M> {
    /// Crashes `id`: its state is gone, messages to it are lost until it
    /// restarts. Crashing a crashed node does nothing.
    pub fn crash(&mut self, id: NodeId) {
        if let Some(i) = self.index(id) {
            self.close_tenure(i);
            self.nodes[i] = None;
            self.last_claim[i] = None;
            self.paused[i] = None;
            self.backlog[i].clear();
            self.note(format_args!("crash {id:?}"));
        }
    }

    /// Pauses a live `id` for `d`: it handles nothing until then, as if
    /// stopped by SIGSTOP; messages that reach it wait, and it handles
    /// them in order when it resumes, then its timers. Pausing a paused
    /// node makes the pause end at the later of the two ends.
    pub fn pause(&mut self, id: NodeId, d: Duration) {
        if let Some(i) = self.index(id)
            && self.nodes[i].is_some()
        {
            let until = self.now + d;
            self.paused[i] = Some(self.paused[i].map_or(until, |u| u.max(until)));
            self.note(format_args!("pause {id:?} for {d:?}"));
        }
    }

    /// Which faults [`chaos`](Self::chaos) draws beyond its default ones
    /// (by default none).
    pub fn set_extra_faults(&mut self, extra: ExtraFaults) {
        self.extra = extra;
    }

    /// Restarts a crashed `id` with fresh state. Restarting a live node does
    /// nothing.
    pub fn restart(&mut self, id: NodeId) {
        if let Some(i) = self.index(id)
            && self.nodes[i].is_none()
        {
            let now = self.local(i, self.now);
            self.nodes[i] = Some((self.factory)(id, now));
            self.note(format_args!("restart {id:?}"));
        }
    }

    /// Splits the network: messages pass only within one of `groups`; a node
    /// in none of them is cut off alone. Messages in flight across the cut
    /// are lost.
    pub fn partition(&mut self, groups: &[Vec<NodeId>]) {
        let mut next = u32::try_from(groups.len()).unwrap_or(u32::MAX);
        for (i, id) in self.ids.iter().enumerate() {
            self.group[i] = match groups.iter().position(|g| g.contains(id)) {
                Some(g) => u32::try_from(g).unwrap_or(0),
                None => {
                    next += 1;
                    next
                }
            };
        }
        self.note(format_args!("partition {groups:?}"));
    }

    /// Joins every partition.
    pub fn heal(&mut self) {
        self.group.fill(0);
        self.note(format_args!("heal"));
    }

    /// Random faults for `duration`: about every `mean_gap` one of crash
    /// (a random node, or one that leads), restart, partition (two or three
    /// groups), heal, or a new network (loss up to 30 %, duplication up to
    /// 20 %, delays from `delays.0` up to ten times `delays.1`); and the
    /// [`ExtraFaults`] set, if any.
    pub fn chaos(&mut self, duration: Duration, mean_gap: Duration, delays: (Duration, Duration)) {
        let end = self.now + duration;
        let max_gap = u64::try_from(mean_gap.as_nanos() * 2).unwrap_or(u64::MAX);
        loop {
            let gap = Duration::from_nanos(self.rng.u64(0..=max_gap));
            let at = (self.now + gap).min(end);
            self.run_until(at);
            if self.now >= end {
                break;
            }
            // Without extra faults, the draws of the runs before they existed.
            let faults = if self.extra == ExtraFaults::default() {
                10
            } else {
                14
            };
            let fault = self.rng.u8(0..faults);
            match fault {
                0 | 1 => {
                    let live = self.live();
                    if !live.is_empty() {
                        let id = live[self.rng.usize(..live.len())];
                        self.crash(id);
                    }
                }
                2 => {
                    let leaders = self.leaders();
                    if !leaders.is_empty() {
                        let (id, _) = leaders[self.rng.usize(..leaders.len())];
                        self.crash(id);
                    }
                }
                3..=5 => {
                    let crashed = self.crashed();
                    if !crashed.is_empty() {
                        let id = crashed[self.rng.usize(..crashed.len())];
                        self.restart(id);
                    }
                }
                6 => {
                    let k = self.rng.usize(2..=3);
                    let mut groups = vec![Vec::new(); k];
                    for &id in &self.ids.clone() {
                        groups[self.rng.usize(..k)].push(id);
                    }
                    self.partition(&groups);
                }
                7 => self.heal(),
                12 | 13 if self.extra.isolate_leaders => {
                    let leaders = self.leaders();
                    if !leaders.is_empty() {
                        let (leader, _) = leaders[self.rng.usize(..leaders.len())];
                        let mut minority = vec![leader];
                        if fault == 13 {
                            let mut others: Vec<NodeId> = self
                                .ids
                                .iter()
                                .copied()
                                .filter(|&id| id != leader)
                                .collect();
                            self.rng.shuffle(&mut others);
                            let k = (self.ids.len() - 1) / 2;
                            minority.extend(others.into_iter().take(k));
                        }
                        let rest = self
                            .ids
                            .iter()
                            .copied()
                            .filter(|id| !minority.contains(id))
                            .collect();
                        self.partition(&[minority, rest]);
                    }
                }
                10 | 11 if self.extra.max_pause.is_some() => {
                    let pick = if fault == 11 {
                        self.leaders().into_iter().map(|(id, _)| id).collect()
                    } else {
                        self.live()
                    };
                    if !pick.is_empty() {
                        let id = pick[self.rng.usize(..pick.len())];
                        let max = self.extra.max_pause.unwrap_or_default();
                        let d = Duration::from_nanos(
                            self.rng
                                .u64(..=u64::try_from(max.as_nanos()).unwrap_or(u64::MAX)),
                        );
                        self.pause(id, d);
                    }
                }
                10..=13 => {}
                _ => {
                    let loss = self.rng.f64() * 0.3;
                    let duplicate = self.rng.f64() * 0.2;
                    let max_delay = delays.1 * self.rng.u32(1..=10);
                    self.set_network(Network {
                        loss,
                        duplicate,
                        min_delay: delays.0,
                        max_delay,
                    });
                    self.note(format_args!(
                        "network loss {loss:.2} dup {duplicate:.2} delay up to {max_delay:?}"
                    ));
                }
            }
        }
    }

    /// Ends every fault: heals partitions, resumes every paused node,
    /// restarts every crashed node, and makes the network reliable with
    /// delays within `delays`.
    pub fn calm(&mut self, delays: (Duration, Duration)) {
        self.heal();
        for i in 0..self.ids.len() {
            if self.paused[i].is_some() {
                self.resume(i);
            }
        }
        for id in self.crashed() {
            self.restart(id);
        }
        self.set_network(Network::reliable(delays.0, delays.1));
    }
}
