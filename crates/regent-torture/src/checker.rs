//! The campaign's verdict, from the fence's records and the nemesis's
//! fault log alone (no IO): which writes an unfenced resource would have
//! taken from an older term, whether terms began in token order, what
//! outlived the campaign, and how long each kind of fault left the
//! election without a working leader.
//!
//! # Rules
//!
//! * **stale-write**: a write the fence refused. A refused write is
//!   expected only from a candidate whose whole tree (regent, shims, the
//!   command, its jobs) the nemesis froze during that term (`stop-tree`),
//!   from the freeze until `slack` after the thaw: a frozen process cannot
//!   tell that its lease ran out, and the fence is what saves the resource.
//!   So are refused writes from any member during a fault of a peer group
//!   without quorum, and `slack` after it: such a group is timing-only, a
//!   partition gives it a leader on each side by design, and so may a
//!   member joining again after any other fault (it claims the lead if its
//!   id wins before it hears of the successor elected meanwhile); the
//!   fence is its only protection. In quorum mode they are violations.
//!   Any other refused write is a violation: without the fence the resource
//!   would have taken a write from an older term after a newer one began.
//! * **token-regression**: terms (the first write of each token, taken or
//!   not) ordered by time must carry strictly increasing tokens; a term
//!   whose first write is an expected stale write is left out.
//! * **shared-token**: one token used by two leader ids.
//! * **write-after-exit**: a write received after every candidate exited.
//! * **survivor**: a writer process alive after every candidate exited.
//!
//! # Gaps
//!
//! A fault that found a leader (its term's token) is followed by a gap:
//! the time from the fault to the first accepted write of a newer term. A
//! fault the term outlived causes none: when a later fault found the same
//! term still leading (a store process the leader did not need, such as a
//! follower server of a cluster, or a delay the leader rode out), the
//! fault is counted as **survived**, and the newer term that came later
//! (caused by another fault) is not its gap.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::Serialize;

use crate::fault::{Fault, FaultKind};
use crate::fence::{Role, Write};

/// A writer process found alive at the end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Survivor {
    /// Its pid.
    pub pid: i32,
    /// Its command line.
    pub argv: Vec<String>,
}

/// What the checker reads.
pub(crate) struct Input<'a> {
    pub(crate) writes: &'a [Write],
    pub(crate) faults: &'a [Fault],
    /// How long after a `stop-tree` thaw stale writes are still expected.
    pub(crate) slack: Duration,
    /// When the last candidate exited, CLOCK_MONOTONIC ns.
    pub(crate) all_exited_ns: Option<u64>,
    pub(crate) survivors: &'a [Survivor],
}

/// A broken rule, with its evidence. Times are CLOCK_MONOTONIC ns.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "rule", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Violation {
    /// Writes refused by the fence from one process of one term.
    StaleWrite {
        /// The writes.
        #[serde(flatten)]
        writes: WriteRun,
        /// The newer term the fence had already taken at the first one:
        /// its leader id.
        newer_id: String,
        /// That newer term's token.
        newer_token: u64,
        /// When the newer term's best write was taken.
        newer_since_ns: u64,
    },
    /// A term began after a term with a larger token.
    TokenRegression {
        /// The leader id of the earlier term.
        earlier_id: String,
        /// Its token (the larger).
        earlier_token: u64,
        /// When it began.
        earlier_ns: u64,
        /// The leader id of the later term.
        later_id: String,
        /// Its token (not larger).
        later_token: u64,
        /// When it began.
        later_ns: u64,
    },
    /// One token written by several leader ids.
    SharedToken {
        /// The token.
        token: u64,
        /// The leader ids that wrote it.
        ids: Vec<String>,
    },
    /// Writes from one process after every candidate had exited.
    WriteAfterExit {
        /// The writes.
        #[serde(flatten)]
        writes: WriteRun,
        /// When the last candidate exited.
        all_exited_ns: u64,
    },
    /// A writer process alive after every candidate had exited (killed
    /// then).
    Survivor {
        /// Its pid.
        pid: i32,
        /// Its command line.
        argv: Vec<String>,
        /// The id of its last write, if it wrote.
        id: Option<String>,
        /// The token of its last write, if it wrote.
        token: Option<u64>,
    },
}

/// Writes from one process of one term: whose, how many, when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WriteRun {
    /// The leader id the writes carried.
    pub id: String,
    /// The token they carried.
    pub token: u64,
    /// The writer's pid.
    pub pid: i32,
    /// The command, or its background job.
    pub role: Role,
    /// How many writes.
    pub count: u64,
    /// When the first was received.
    pub first_ns: u64,
    /// When the last was received.
    pub last_ns: u64,
}

/// Writes (in time order, each with a note) grouped per process and
/// term; each group keeps the note of its first write.
fn group<'a, T>(
    writes: impl IntoIterator<Item = (&'a Write, T)>,
) -> BTreeMap<(String, u64, i32), (WriteRun, T)> {
    let mut runs: BTreeMap<(String, u64, i32), (WriteRun, T)> = BTreeMap::new();
    for (w, note) in writes {
        runs.entry((w.id.clone(), w.token, w.pid))
            .and_modify(|(run, _)| {
                run.count += 1;
                run.last_ns = w.at_ns;
            })
            .or_insert_with(|| {
                let run = WriteRun {
                    id: w.id.clone(),
                    token: w.token,
                    pid: w.pid,
                    role: w.role,
                    count: 1,
                    first_ns: w.at_ns,
                    last_ns: w.at_ns,
                };
                (run, note)
            });
    }
    runs
}

/// Time from faults of one kind that hit the leader to the first accepted
/// write of a newer term.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Gaps {
    /// Faults of this kind that found a leader.
    pub faults: u64,
    /// Of those, how many were followed by a newer term (the gaps
    /// measured).
    pub new_terms: u64,
    /// Of those, how many the term outlived: a later fault found it still
    /// leading.
    pub survived: u64,
    /// The median gap, ms.
    pub median_ms: Option<f64>,
    /// The 90th percentile, ms (nearest rank).
    pub p90_ms: Option<f64>,
    /// The longest gap, ms.
    pub max_ms: Option<f64>,
}

/// The verdict.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Findings {
    /// Writes the fence took.
    pub accepted_writes: u64,
    /// Writes the fence refused.
    pub refused_writes: u64,
    /// Refused writes from frozen trees (`stop-tree`), or from either side
    /// of a timing-only peer group's split: the fence at work.
    pub expected_refused_writes: u64,
    /// Distinct tokens written.
    pub terms: u64,
    /// Faults injected, per kind.
    pub faults: BTreeMap<String, u64>,
    /// Per fault kind that hits the leader.
    pub gaps: BTreeMap<String, Gaps>,
    /// What followed each fault, in the order of the input's faults.
    #[serde(skip)]
    pub(crate) after: Vec<After>,
    /// The rules broken, with their evidence; none is the campaign passed.
    pub violations: Vec<Violation>,
}

/// Whether a refused write `w` came from a tree frozen in its term, or
/// from either side of a split a timing-only peer group makes by design.
fn expected(w: &Write, faults: &[Fault], slack_ns: u64) -> bool {
    faults.iter().any(|f| {
        let during = f.at_ns <= w.at_ns && w.at_ns <= f.end_ns.saturating_add(slack_ns);
        let frozen = f.kind == FaultKind::StopTree
            && f.leader_id.as_deref() == Some(w.id.as_str())
            && f.leader_token == Some(w.token);
        during && (frozen || f.splits)
    })
}

pub(crate) fn check(input: &Input<'_>) -> Findings {
    let slack_ns = u64::try_from(input.slack.as_nanos()).unwrap_or(u64::MAX);
    let mut out = Findings::default();
    let mut writes: Vec<&Write> = input.writes.iter().collect();
    writes.sort_by_key(|w| w.at_ns);

    // Stale writes, each with the newest term taken before it.
    let mut stale: Vec<(&Write, (String, u64, u64))> = Vec::new();
    let mut expected_first: BTreeSet<u64> = BTreeSet::new();
    let mut best: Option<&Write> = None;
    // Term starts: token -> (first write, ids).
    let mut terms: BTreeMap<u64, (&Write, BTreeSet<&str>)> = BTreeMap::new();
    for w in &writes {
        let is_first = !terms.contains_key(&w.token);
        terms
            .entry(w.token)
            .or_insert_with(|| (w, BTreeSet::new()))
            .1
            .insert(w.id.as_str());
        if w.accepted {
            out.accepted_writes += 1;
            if best.is_none_or(|b| w.token > b.token) {
                best = Some(w);
            }
            continue;
        }
        out.refused_writes += 1;
        if expected(w, input.faults, slack_ns) {
            out.expected_refused_writes += 1;
            if is_first {
                expected_first.insert(w.token);
            }
            continue;
        }
        let newer = best.map_or((String::new(), 0, 0), |b| (b.id.clone(), b.token, b.at_ns));
        stale.push((w, newer));
    }
    out.terms = terms.len() as u64;
    out.violations.extend(group(stale).into_values().map(
        |(writes, (newer_id, newer_token, newer_since_ns))| Violation::StaleWrite {
            writes,
            newer_id,
            newer_token,
            newer_since_ns,
        },
    ));

    // Term starts in time order must carry growing tokens.
    let mut starts: Vec<&Write> = terms
        .iter()
        .filter(|(t, _)| !expected_first.contains(t))
        .map(|(_, (w, _))| *w)
        .collect();
    starts.sort_by_key(|w| (w.at_ns, w.token));
    for pair in starts.windows(2) {
        if pair[1].token <= pair[0].token {
            out.violations.push(Violation::TokenRegression {
                earlier_id: pair[0].id.clone(),
                earlier_token: pair[0].token,
                earlier_ns: pair[0].at_ns,
                later_id: pair[1].id.clone(),
                later_token: pair[1].token,
                later_ns: pair[1].at_ns,
            });
        }
    }
    for (token, (_, ids)) in &terms {
        if ids.len() > 1 {
            out.violations.push(Violation::SharedToken {
                token: *token,
                ids: ids.iter().map(|s| (*s).to_owned()).collect(),
            });
        }
    }

    // Writes after every candidate exited.
    if let Some(end) = input.all_exited_ns {
        let late = group(
            writes
                .iter()
                .copied()
                .filter(|w| w.at_ns > end)
                .map(|w| (w, ())),
        );
        out.violations.extend(
            late.into_values()
                .map(|(writes, ())| Violation::WriteAfterExit {
                    writes,
                    all_exited_ns: end,
                }),
        );
    }
    for s in input.survivors {
        let last = writes.iter().rev().find(|w| w.pid == s.pid);
        out.violations.push(Violation::Survivor {
            pid: s.pid,
            argv: s.argv.clone(),
            id: last.map(|w| w.id.clone()),
            token: last.map(|w| w.token),
        });
    }

    // Faults per kind, and the leaderless gaps of those that hit a leader.
    let mut gaps: BTreeMap<&str, Vec<After>> = BTreeMap::new();
    for f in input.faults {
        *out.faults.entry(f.kind.name().to_owned()).or_default() += 1;
        if let Some(token) = f.leader_token {
            let survived = input
                .faults
                .iter()
                .any(|g| g.at_ns > f.at_ns && g.leader_token == Some(token));
            let after = if survived {
                After::Survived
            } else {
                writes
                    .iter()
                    .find(|w| w.accepted && w.token > token && w.at_ns >= f.at_ns)
                    .map_or(After::Nothing, |w| After::NewTerm(w.at_ns - f.at_ns))
            };
            gaps.entry(f.kind.name()).or_default().push(after);
            out.after.push(after);
        } else {
            out.after.push(After::Nothing);
        }
    }
    for (kind, list) in gaps {
        let mut ms: Vec<f64> = list
            .iter()
            .filter_map(|a| match a {
                After::NewTerm(ns) => Some(*ns as f64 / 1e6),
                _ => None,
            })
            .collect();
        ms.sort_by(f64::total_cmp);
        out.gaps.insert(
            kind.to_owned(),
            Gaps {
                faults: list.len() as u64,
                new_terms: ms.len() as u64,
                survived: list.iter().filter(|a| **a == After::Survived).count() as u64,
                median_ms: percentile(&ms, 0.5),
                p90_ms: percentile(&ms, 0.9),
                max_ms: ms.last().copied(),
            },
        );
    }
    out
}

/// What followed a fault.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum After {
    /// A newer term, this long (ns) after the fault.
    NewTerm(u64),
    /// A later fault found the same term leading.
    Survived,
    /// Neither before the campaign ended, or the fault found no leader.
    Nothing,
}

/// The nearest-rank percentile of sorted values.
fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len()) - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn w(at_s: f64, token: u64, id: &str, pid: i32, accepted: bool) -> Write {
        Write {
            at_ns: (at_s * S as f64) as u64,
            token,
            id: id.into(),
            pid,
            role: Role::Cmd,
            seq: 0,
            accepted,
        }
    }

    fn fault(kind: FaultKind, at_s: u64, end_s: u64, leader: Option<(&str, u64)>) -> Fault {
        Fault {
            kind,
            at_ns: at_s * S,
            end_ns: end_s * S,
            leader_id: leader.map(|(id, _)| id.to_owned()),
            leader_token: leader.map(|(_, t)| t),
            leader_url: None,
            target: leader.map(|(id, _)| id.to_owned()),
            store_process: None,
            pids: vec![],
            detail: String::new(),
            splits: false,
        }
    }

    fn run(writes: &[Write], faults: &[Fault]) -> Findings {
        check(&Input {
            writes,
            faults,
            slack: Duration::from_secs(2),
            all_exited_ns: None,
            survivors: &[],
        })
    }

    #[test]
    fn nothing_recorded_is_fine() {
        let f = run(&[], &[]);
        assert!(f.violations.is_empty());
        assert_eq!(f.accepted_writes, 0);
        assert_eq!(f.terms, 0);
        assert!(f.gaps.is_empty());
    }

    /// A write from token 1 after token 2 began, the tree of token 1 never
    /// frozen: an unfenced resource would have taken it.
    #[test]
    fn stale_write_outside_a_tree_pause_is_a_violation() {
        let writes = [
            w(1.0, 1, "a", 10, true),
            w(3.0, 2, "b", 20, true),
            w(3.1, 1, "a", 10, false),
            w(3.2, 1, "a", 10, false),
        ];
        // A pause of `a` alone, and a tree pause of `a` in another term,
        // do not excuse it.
        let faults = [
            fault(FaultKind::StopLeader, 2, 4, Some(("a", 1))),
            fault(FaultKind::StopTree, 5, 6, Some(("a", 1))),
            fault(FaultKind::StopTree, 2, 4, Some(("a", 0))),
        ];
        let f = run(&writes, &faults);
        assert_eq!(
            f.violations,
            [Violation::StaleWrite {
                writes: WriteRun {
                    id: "a".into(),
                    token: 1,
                    pid: 10,
                    role: Role::Cmd,
                    count: 2,
                    first_ns: 3_100_000_000,
                    last_ns: 3_200_000_000,
                },
                newer_id: "b".into(),
                newer_token: 2,
                newer_since_ns: 3 * S,
            }]
        );
        assert_eq!(f.refused_writes, 2);
        assert_eq!(f.expected_refused_writes, 0);
    }

    /// A partition of a timing-only peer group gives it a leader on each
    /// side: the fence refusing the older side's writes, during it and
    /// `slack` after, is expected. The same partition in quorum mode (no
    /// split by design) leaves them violations.
    #[test]
    fn stale_writes_from_a_split_peer_group_are_expected_only_without_quorum() {
        let writes = [
            w(1.0, 5, "5", 10, true),
            // 5 is cut off with 4 at 2 s; 3 elects itself with a larger
            // round, and 5 goes on writing on its side.
            w(3.0, 7, "3", 20, true),
            w(3.5, 5, "5", 10, false),
            w(5.5, 5, "5", 10, false),
        ];
        let mut split = fault(FaultKind::Partition, 2, 4, Some(("5", 5)));
        split.splits = true;
        let f = run(&writes, &[split.clone()]);
        assert!(f.violations.is_empty(), "{:?}", f.violations);
        assert_eq!(f.expected_refused_writes, 2);
        split.splits = false;
        let f = run(&writes, &[split.clone()]);
        assert_eq!(f.violations.len(), 1, "{:?}", f.violations);
        // Past the slack after the heal, a split no longer excuses them.
        split.splits = true;
        let late = [
            w(1.0, 5, "5", 10, true),
            w(3.0, 7, "3", 20, true),
            w(9.0, 5, "5", 10, false),
        ];
        assert_eq!(run(&late, &[split]).violations.len(), 1);
    }

    #[test]
    fn stale_write_inside_a_tree_pause_is_expected() {
        let writes = [
            w(1.0, 1, "a", 10, true),
            w(3.0, 2, "b", 20, true),
            w(4.05, 1, "a", 10, false),
            w(4.1, 2, "b", 20, true),
        ];
        let faults = [fault(FaultKind::StopTree, 2, 4, Some(("a", 1)))];
        let f = run(&writes, &faults);
        assert!(f.violations.is_empty(), "{:?}", f.violations);
        assert_eq!(f.expected_refused_writes, 1);
        // ...but not long after the thaw.
        let late = [
            w(1.0, 1, "a", 10, true),
            w(3.0, 2, "b", 20, true),
            w(9.0, 1, "a", 10, false),
        ];
        assert_eq!(run(&late, &faults).violations.len(), 1);
    }

    #[test]
    fn token_regression_and_shared_token_are_violations() {
        let writes = [
            w(1.0, 5, "a", 10, true),
            w(2.0, 4, "b", 20, false),
            w(3.0, 6, "c", 30, true),
            w(4.0, 6, "d", 40, true),
        ];
        let f = run(&writes, &[]);
        assert!(f.violations.contains(&Violation::TokenRegression {
            earlier_id: "a".into(),
            earlier_token: 5,
            earlier_ns: S,
            later_id: "b".into(),
            later_token: 4,
            later_ns: 2 * S,
        }));
        assert!(f.violations.contains(&Violation::SharedToken {
            token: 6,
            ids: vec!["c".into(), "d".into()],
        }));
    }

    #[test]
    fn late_writes_and_survivors_are_violations() {
        let writes = [w(1.0, 1, "a", 10, true), w(9.0, 1, "a", 11, true)];
        let survivors = [Survivor {
            pid: 11,
            argv: vec!["regent".into(), "__torture-writer".into()],
        }];
        let f = check(&Input {
            writes: &writes,
            faults: &[],
            slack: Duration::from_secs(2),
            all_exited_ns: Some(5 * S),
            survivors: &survivors,
        });
        assert_eq!(f.violations.len(), 2, "{:?}", f.violations);
        assert!(matches!(
            &f.violations[1],
            Violation::Survivor {
                pid: 11,
                token: Some(1),
                ..
            }
        ));
    }

    #[test]
    fn gaps_per_kind_run_from_the_fault_to_the_next_term() {
        let writes = [
            w(1.0, 1, "a", 10, true),
            w(3.5, 2, "b", 20, true),
            w(7.0, 3, "c", 30, true),
        ];
        let faults = [
            fault(FaultKind::KillLeader, 2, 2, Some(("a", 1))),
            fault(FaultKind::KillLeader, 5, 5, Some(("b", 2))),
            fault(FaultKind::KillLeader, 8, 8, Some(("c", 3))),
            fault(FaultKind::KillFollower, 6, 6, None),
        ];
        let f = run(&writes, &faults);
        let g = &f.gaps["kill-leader"];
        assert_eq!((g.faults, g.new_terms), (3, 2));
        assert_eq!(g.median_ms, Some(1500.0));
        assert_eq!(g.max_ms, Some(2000.0));
        assert_eq!(f.faults["kill-follower"], 1);
        assert!(!f.gaps.contains_key("kill-follower"));
    }

    /// A fault the term outlived (a later fault found the same term
    /// leading) has no gap of its own: the newer term came from the later
    /// fault. Before, it took the later fault's gap as its own.
    #[test]
    fn a_fault_the_term_outlived_is_survived_not_a_gap() {
        let writes = [
            w(1.0, 1, "a", 10, true),
            w(9.0, 1, "a", 10, true),
            w(11.0, 2, "b", 20, true),
        ];
        let faults = [
            fault(FaultKind::StoreStop, 2, 5, Some(("a", 1))),
            fault(FaultKind::KillLeader, 10, 10, Some(("a", 1))),
            fault(FaultKind::StoreKill, 12, 13, Some(("b", 2))),
        ];
        let f = run(&writes, &faults);
        let stop = &f.gaps["store-stop"];
        assert_eq!((stop.faults, stop.new_terms, stop.survived), (1, 0, 1));
        assert_eq!(stop.max_ms, None);
        let kill = &f.gaps["kill-leader"];
        assert_eq!((kill.faults, kill.new_terms, kill.survived), (1, 1, 0));
        assert_eq!(kill.max_ms, Some(1000.0));
        // The last fault: neither a newer term nor a later fault.
        let last = &f.gaps["store-kill"];
        assert_eq!((last.faults, last.new_terms, last.survived), (1, 0, 0));
    }

    /// The report's violations are flat objects named by their rule.
    #[test]
    fn violations_serialize_flat_with_their_rule() {
        let v = Violation::WriteAfterExit {
            writes: WriteRun {
                id: "a".into(),
                token: 7,
                pid: 42,
                role: Role::Bg,
                count: 3,
                first_ns: 1,
                last_ns: 2,
            },
            all_exited_ns: 0,
        };
        let json = serde_json::to_value(&v).unwrap();
        assert_eq!(json["rule"], "write-after-exit");
        assert_eq!(json["id"], "a");
        assert_eq!(json["token"], 7);
        assert_eq!(json["count"], 3);
        assert_eq!(json["all_exited_ns"], 0);
        assert!(json.get("writes").is_none(), "{json}");
    }
}
