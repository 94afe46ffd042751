//! The nemesis: how each kind of fault is injected into a campaign under
//! way, and which store process a store fault hits.

use std::collections::BTreeSet;
use std::time::Duration;

use regent_proc::mono_ns;
use rustix::process::Signal;

use crate::campaign::Campaign;
use crate::fault::{Fault, FaultKind};
use crate::fence;
use crate::procfs::{self, argv, children_in_mode, descendants, is_mode};
use crate::proxy::Mode;
use crate::store::StoreProcess;
use crate::writer::MODE as WRITER;

/// The leading candidate, as the fence saw it.
pub(crate) struct Leader {
    pub(crate) id: String,
    pub(crate) token: u64,
    pub(crate) pid: i32,
    /// The index of the `--store` URL it talks to.
    pub(crate) url: usize,
}

/// The next of `n` processes to hit, among those that `qualify`: the next
/// in this round's seeded order (`turns`, the processes not yet hit),
/// each once per round. The processes a choice passes over stay in the
/// round for a later choice they qualify for; a new round, shuffled by
/// `rng`, begins when none left qualifies, after them. `None` if no
/// process qualifies.
fn next_turn(
    turns: &mut Vec<usize>,
    n: usize,
    qualify: impl Fn(usize) -> bool,
    rng: &mut fastrand::Rng,
) -> Option<usize> {
    if !turns.iter().any(|&i| qualify(i)) {
        let mut round: Vec<usize> = (0..n).filter(|i| !turns.contains(i)).collect();
        rng.shuffle(&mut round);
        turns.extend(round);
    }
    let at = turns.iter().position(|&i| qualify(i))?;
    Some(turns.remove(at))
}

fn stop_all(pids: &[i32]) {
    for &p in pids {
        procfs::signal(p, Signal::STOP);
    }
}

fn cont_all(pids: &[i32]) {
    for &p in pids {
        procfs::signal(p, Signal::CONT);
    }
}

impl Campaign {
    /// The candidate whose id wrote the largest accepted token most
    /// recently, if that write is fresh (within a ttl, at least 0.5 s and
    /// at most 2 s: a writer writes every 50 ms) and its regent is alive.
    /// A longer window would name a leader frozen or cut off for seconds.
    pub(crate) fn leader(&self) -> Option<Leader> {
        let (id, token, at) = {
            let fence = fence::lock(&self.fence);
            let w = fence.writes().iter().rev().find(|w| w.accepted)?;
            (w.id.clone(), w.token, w.at_ns)
        };
        let fresh = self
            .ttl
            .clamp(Duration::from_millis(500), Duration::from_secs(2));
        let fresh = u64::try_from(fresh.as_nanos()).unwrap_or(u64::MAX);
        if mono_ns().saturating_sub(at) > fresh {
            return None;
        }
        let c = self.candidates.iter().find(|c| c.id == id)?;
        procfs::alive(c.pid).then_some(Leader {
            id,
            token,
            pid: c.pid,
            url: c.url,
        })
    }

    /// Waits up to a failover (and a second) for a leader.
    async fn wait_leader(&self) -> Option<Leader> {
        let until = tokio::time::Instant::now() + self.failover + Duration::from_secs(1);
        loop {
            if let Some(l) = self.leader() {
                return Some(l);
            }
            if tokio::time::Instant::now() >= until {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Runs `regent handover` on the store at `url` (to `to`, or the
    /// next), bounded; what it said, for the fault log. Its outcome is
    /// not judged here: the checker judges the terms.
    async fn request_handover(&self, url: usize, to: Option<&str>) -> String {
        let bound = self.failover * 2 + self.ttl * 3;
        let mut cmd = tokio::process::Command::new(&self.exe);
        cmd.arg("handover")
            .arg("--store")
            .arg(&self.urls[url])
            .arg("--election")
            .arg(&self.election)
            .args(self.store_args.iter())
            .arg("--timeout")
            .arg(format!("{}ms", bound.as_millis()));
        if let Some(to) = to {
            cmd.arg("--to").arg(to);
        }
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        match tokio::time::timeout(bound + Duration::from_secs(5), cmd.output()).await {
            Ok(Ok(out)) => {
                let said = if out.status.success() {
                    String::from_utf8_lossy(&out.stdout).trim().to_owned()
                } else {
                    String::from_utf8_lossy(&out.stderr).trim().to_owned()
                };
                format!(
                    "regent handover{}: exit {}: {said}",
                    to.map_or_else(String::new, |t| format!(" --to {t}")),
                    out.status
                        .code()
                        .map_or_else(|| "by a signal".to_owned(), |c| c.to_string())
                )
            }
            Ok(Err(e)) => format!("regent handover could not run: {e}"),
            Err(_) => "regent handover did not end in time".to_owned(),
        }
    }

    /// `ttl` times a factor drawn from `lo..hi`.
    fn ttls(&mut self, lo: f64, hi: f64) -> Duration {
        self.ttl.mul_f64(lo + (hi - lo) * self.rng.f64())
    }

    /// Injects one fault of `kind`; `None` if it found nothing to hit (no
    /// leader, no shim at that moment).
    pub(crate) async fn inject(&mut self, kind: FaultKind) -> Option<Fault> {
        let mut fault = Fault {
            kind,
            at_ns: mono_ns(),
            end_ns: 0,
            leader_id: None,
            leader_token: None,
            leader_url: None,
            target: None,
            store_process: None,
            pids: Vec::new(),
            detail: String::new(),
            splits: false,
        };
        match kind {
            FaultKind::KillFollower | FaultKind::ClockFast | FaultKind::ClockSlow => {
                let leader = self.leader().map(|l| l.id);
                let followers: Vec<(String, i32)> = self
                    .candidates
                    .iter()
                    .filter(|c| Some(&c.id) != leader.as_ref() && procfs::alive(c.pid))
                    .map(|c| (c.id.clone(), c.pid))
                    .collect();
                if followers.is_empty() {
                    return None;
                }
                let (id, pid) = followers[self.rng.usize(..followers.len())].clone();
                fault.at_ns = mono_ns();
                procfs::signal(pid, Signal::KILL);
                fault.target = Some(id);
                fault.pids = vec![pid];
                fault.detail = "SIGKILL".into();
                if kind != FaultKind::KillFollower {
                    // Fast, on a store: any rate (a fast clock steps down
                    // early). Slow, and fast in a peer group: within the
                    // drift regent's timing allows for (1%); a member's
                    // clock also times the promises it makes to others, and
                    // a fast one ends them early.
                    let rate = match kind {
                        FaultKind::ClockFast if self.peer.is_none() => 1.02 + 0.08 * self.rng.f64(),
                        FaultKind::ClockFast => 1.001 + 0.008 * self.rng.f64(),
                        _ => 0.991 + 0.008 * self.rng.f64(),
                    };
                    // A member comes back with its id and address: the old
                    // process must be gone first.
                    self.wait_exited(pid).await;
                    match self.spawn_on(Some(rate)) {
                        Ok(new) => {
                            fault.detail = format!(
                                "SIGKILL; replaced by {new}, whose clock runs at x{rate:.4}"
                            );
                        }
                        Err(e) => {
                            warn_user!(self.console, "regent torture: {}", regent_core::report(&e));
                            fault.detail = format!(
                                "SIGKILL; no skewed replacement: {}",
                                regent_core::report(&e)
                            );
                        }
                    }
                }
            }
            FaultKind::Preempt => {
                // A follower gives way to one above every priority so far:
                // the leader hands over once it has seen it for a ttl.
                let leader = self.leader()?;
                fault.leader_id = Some(leader.id.clone());
                fault.leader_token = Some(leader.token);
                fault.leader_url = Some(leader.url);
                let follower = self
                    .candidates
                    .iter()
                    .find(|c| c.id != leader.id && procfs::alive(c.pid))
                    .map(|c| (c.id.clone(), c.pid));
                fault.target = Some(leader.id.clone());
                if let Some((_, pid)) = &follower {
                    procfs::signal(*pid, Signal::KILL);
                    self.wait_exited(*pid).await;
                    fault.pids = vec![*pid];
                }
                self.top_priority += 1;
                let priority = self.top_priority;
                fault.at_ns = mono_ns();
                match self.spawn_with_priority(priority) {
                    Ok(new) => {
                        fault.detail = format!(
                            "{}{new} started with priority {priority}",
                            follower
                                .map_or_else(String::new, |(id, _)| format!("{id} SIGKILLed; "))
                        );
                    }
                    Err(e) => {
                        warn_user!(self.console, "regent torture: {}", regent_core::report(&e));
                        fault.detail = format!(
                            "no candidate of priority {priority}: {}",
                            regent_core::report(&e)
                        );
                    }
                }
            }
            FaultKind::Handover => {
                let leader = self.leader()?;
                fault.leader_id = Some(leader.id.clone());
                fault.leader_token = Some(leader.token);
                fault.leader_url = Some(leader.url);
                let followers: Vec<String> = self
                    .candidates
                    .iter()
                    .filter(|c| c.id != leader.id && procfs::alive(c.pid))
                    .map(|c| c.id.clone())
                    .collect();
                // Half the requests name a follower, half ask for the next.
                let to = (!followers.is_empty() && self.rng.bool())
                    .then(|| followers[self.rng.usize(..followers.len())].clone());
                fault.target = Some(leader.id.clone());
                fault.at_ns = mono_ns();
                fault.detail = self.request_handover(leader.url, to.as_deref()).await;
            }
            FaultKind::StoreStop | FaultKind::StoreKill => {
                if let Some(l) = self.leader() {
                    fault.leader_id = Some(l.id);
                    fault.leader_token = Some(l.token);
                    fault.leader_url = Some(l.url);
                }
                let pause = self.ttls(1.0, 3.0);
                let i = self.next_store_process(kind == FaultKind::StoreKill)?;
                let several = self.store_processes.len() > 1;
                let store = &mut self.store_processes[i];
                fault.at_ns = mono_ns();
                fault.store_process = Some(i);
                fault.pids = vec![store.pid()];
                let what = if several {
                    format!("process {i} (pid {}): ", store.pid())
                } else {
                    String::new()
                };
                if kind == FaultKind::StoreStop {
                    store.signal(Signal::STOP);
                    tokio::time::sleep(pause).await;
                    store.signal(Signal::CONT);
                    fault.detail = format!(
                        "{what}SIGSTOP for {:.2}s, then SIGCONT",
                        pause.as_secs_f64()
                    );
                } else {
                    match store.kill_and_restart().await {
                        Ok(pid) => fault.detail = format!("{what}SIGKILL, restarted as pid {pid}"),
                        Err(e) => {
                            warn_user!(
                                self.console,
                                "regent torture: cannot restart the store: {}",
                                regent_core::report(&e)
                            );
                            fault.detail = format!(
                                "{what}SIGKILL; restart failed: {}",
                                regent_core::report(&e)
                            );
                        }
                    }
                }
            }
            _ => {
                let leader = self.wait_leader().await?;
                fault.leader_id = Some(leader.id.clone());
                fault.leader_token = Some(leader.token);
                fault.leader_url = Some(leader.url);
                fault.target = Some(leader.id.clone());
                self.hit_leader(kind, &leader, &mut fault).await?;
            }
        }
        if fault.end_ns == 0 {
            fault.end_ns = mono_ns();
        }
        // A timing-only group may have two leaders for a moment after any
        // fault of a peer campaign, not only a partition: each one makes a
        // member join the group again (a killed member's replacement, a
        // term given back, a thawed term past its deadline), and a member
        // that joins claims the lead if its id wins before it hears the
        // successor elected meanwhile (torture found it: kill-shim of 5,
        // 4 elected on 5's GOODBYE, 5's new node leading 10 ms later).
        if self.peer.as_ref().is_some_and(|g| !g.quorum()) {
            fault.splits = true;
        }
        Some(fault)
    }

    /// The store process the next store fault hits ([`next_turn`]);
    /// `ours` passes over the processes torture did not start (it could
    /// not restart them).
    fn next_store_process(&mut self, ours: bool) -> Option<usize> {
        let is_ours: Vec<bool> = self
            .store_processes
            .iter()
            .map(StoreProcess::is_ours)
            .collect();
        next_turn(
            &mut self.store_turns,
            is_ours.len(),
            |i| !ours || is_ours[i],
            &mut self.rng,
        )
    }

    async fn hit_leader(&mut self, kind: FaultKind, leader: &Leader, f: &mut Fault) -> Option<()> {
        let pid = leader.pid;
        let shim = || children_in_mode(pid, "__shim").first().copied();
        match kind {
            FaultKind::KillLeader | FaultKind::TermLeader => {
                let sig = if kind == FaultKind::KillLeader {
                    Signal::KILL
                } else {
                    Signal::TERM
                };
                f.at_ns = mono_ns();
                procfs::signal(pid, sig);
                f.pids = vec![pid];
                f.detail = format!(
                    "{} to regent",
                    if sig == Signal::KILL {
                        "SIGKILL"
                    } else {
                        "SIGTERM"
                    }
                );
            }
            FaultKind::StopLeader => {
                let pause = self.ttls(1.0, 3.0);
                f.at_ns = mono_ns();
                procfs::signal(pid, Signal::STOP);
                tokio::time::sleep(pause).await;
                procfs::signal(pid, Signal::CONT);
                f.pids = vec![pid];
                f.detail = format!("regent alone stopped for {:.2}s", pause.as_secs_f64());
            }
            FaultKind::StopTree => {
                let pause = self.ttls(1.5, 3.0);
                let mut tree = vec![pid];
                tree.extend(descendants(pid));
                f.at_ns = mono_ns();
                stop_all(&tree);
                // Whatever forked between the scan and the stop.
                let late: Vec<i32> = descendants(pid)
                    .into_iter()
                    .filter(|p| !tree.contains(p))
                    .collect();
                stop_all(&late);
                tree.extend(late);
                tokio::time::sleep(pause).await;
                // The harsher order: the command and its jobs wake before
                // the shim and regent that would stop them.
                tree.reverse();
                cont_all(&tree);
                f.detail = format!(
                    "{} processes (regent, shims, command, jobs) stopped for {:.2}s",
                    tree.len(),
                    pause.as_secs_f64()
                );
                f.pids = tree;
            }
            FaultKind::KillShim => {
                let s = shim()?;
                f.at_ns = mono_ns();
                procfs::signal(s, Signal::KILL);
                f.pids = vec![s];
                f.detail = "SIGKILL to the shim".into();
            }
            FaultKind::StopLeaderKillShim => {
                // The shim must die before its dead-man's switch fires
                // (3/5 ttl after regent's last renewal, which came at most
                // 1/5 ttl before the stop): 0.5 s, or a quarter ttl when
                // that is shorter.
                let delay = Duration::from_millis(500).min(self.ttl / 4);
                let target = shim()?;
                f.at_ns = mono_ns();
                procfs::signal(pid, Signal::STOP);
                f.pids = vec![pid];
                tokio::time::sleep(delay).await;
                let killed = procfs::alive(target).then_some(target);
                if let Some(s) = killed {
                    procfs::signal(s, Signal::KILL);
                    f.pids.push(s);
                }
                tokio::time::sleep(self.ttl * 2).await;
                let resume = self.rng.bool();
                procfs::signal(pid, if resume { Signal::CONT } else { Signal::KILL });
                f.detail = format!(
                    "regent stopped; {:.2}s later {}; {:.2}s later regent {}",
                    delay.as_secs_f64(),
                    if killed.is_some() {
                        "SIGKILL to its shim"
                    } else {
                        "its shim had already exited"
                    },
                    (self.ttl * 2).as_secs_f64(),
                    if resume { "continued" } else { "SIGKILLed" }
                );
            }
            FaultKind::KillCmd => {
                let cmd = descendants(pid).into_iter().find(|&p| {
                    is_mode(p, WRITER) && !argv(p).iter().any(|a| a == "--background")
                })?;
                f.at_ns = mono_ns();
                procfs::signal(cmd, Signal::KILL);
                f.pids = vec![cmd];
                f.detail = "SIGKILL to the command".into();
            }
            FaultKind::StoreCut | FaultKind::StoreDelay => {
                let pause = self.ttls(1.0, 3.0);
                let mode = if kind == FaultKind::StoreCut {
                    Mode::Cut
                } else {
                    Mode::Delay(self.ttls(0.25, 1.0))
                };
                let c = self.candidates.iter().find(|c| c.pid == pid)?;
                if c.proxies.is_empty() {
                    return None;
                }
                f.at_ns = mono_ns();
                for p in &c.proxies {
                    p.set(mode);
                }
                tokio::time::sleep(pause).await;
                // The candidate may have been replaced meanwhile: its
                // proxies went with it.
                if let Some(c) = self.candidates.iter().find(|c| c.pid == pid) {
                    for p in &c.proxies {
                        p.set(Mode::Pass);
                    }
                }
                f.pids = vec![pid];
                f.detail = match mode {
                    Mode::Delay(d) => format!(
                        "its store traffic delayed {:.0}ms per chunk for {:.2}s",
                        d.as_secs_f64() * 1e3,
                        pause.as_secs_f64()
                    ),
                    _ => format!("its store traffic held for {:.2}s", pause.as_secs_f64()),
                };
            }
            FaultKind::Partition => {
                let pause = self.ttls(1.0, 3.0);
                let group = self.peer.as_ref()?;
                let me: u64 = leader.id.parse().ok()?;
                let mut others: Vec<u64> = group.members().filter(|&m| m != me).collect();
                self.rng.shuffle(&mut others);
                // The leader's side is a minority: the leader and up to
                // (n-1)/2 - 1 others, so that the rest may elect.
                let n = others.len() + 1;
                let with = self.rng.usize(..=((n - 1) / 2).saturating_sub(1));
                let side: BTreeSet<u64> = std::iter::once(me)
                    .chain(others[..with].iter().copied())
                    .collect();
                f.at_ns = mono_ns();
                group.cut(&side, Mode::Cut);
                tokio::time::sleep(pause).await;
                let group = self.peer.as_ref()?;
                group.cut(&side, Mode::Pass);
                f.splits = !group.quorum();
                f.pids = self
                    .candidates
                    .iter()
                    .filter(|c| c.id.parse().is_ok_and(|id: u64| side.contains(&id)))
                    .map(|c| c.pid)
                    .collect();
                let names: Vec<String> = side.iter().map(u64::to_string).collect();
                f.detail = format!(
                    "member{} {} cut off from the rest for {:.2}s",
                    if side.len() > 1 { "s" } else { "" },
                    names.join(", "),
                    pause.as_secs_f64()
                );
            }
            FaultKind::KillFollower
            | FaultKind::ClockFast
            | FaultKind::ClockSlow
            | FaultKind::StoreStop
            | FaultKind::StoreKill
            | FaultKind::Preempt
            | FaultKind::Handover => return None,
        }
        f.end_ns = mono_ns();
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every store process is hit once before any is hit twice, in an
    /// order the seed decides.
    #[test]
    fn store_processes_take_turns_each_once_per_round() {
        let mut rng = fastrand::Rng::with_seed(7);
        let mut turns = Vec::new();
        let picks: Vec<usize> = (0..12)
            .map(|_| next_turn(&mut turns, 4, |_| true, &mut rng).unwrap())
            .collect();
        for round in picks.chunks(4) {
            let mut sorted = round.to_vec();
            sorted.sort_unstable();
            assert_eq!(sorted, [0, 1, 2, 3], "{picks:?}");
        }
        let mut again = fastrand::Rng::with_seed(7);
        let mut turns = Vec::new();
        let replay: Vec<usize> = (0..12)
            .map(|_| next_turn(&mut turns, 4, |_| true, &mut again).unwrap())
            .collect();
        assert_eq!(picks, replay);
    }

    /// A kill passes over the processes torture did not start (here 2 and
    /// 3); they stay for the next stop. With none that qualifies, none.
    #[test]
    fn kills_pass_over_processes_torture_did_not_start() {
        let mut rng = fastrand::Rng::with_seed(1);
        let mut turns = Vec::new();
        let ours = |i: usize| i < 2;
        let mut kills: Vec<usize> = (0..2)
            .map(|_| next_turn(&mut turns, 4, ours, &mut rng).unwrap())
            .collect();
        kills.sort_unstable();
        assert_eq!(kills, [0, 1]);
        let mut stops: Vec<usize> = (0..2)
            .map(|_| next_turn(&mut turns, 4, |_| true, &mut rng).unwrap())
            .collect();
        stops.sort_unstable();
        assert_eq!(stops, [2, 3], "the ones passed over come first");
        assert_eq!(next_turn(&mut Vec::new(), 2, |_| false, &mut rng), None);
        assert_eq!(next_turn(&mut Vec::new(), 0, |_| true, &mut rng), None);
    }
}
