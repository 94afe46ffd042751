//! Tests of a Ring node driven by hand: an election round the ring, a
//! leader that leaves, ring repair, and the regressions of stale
//! elections.

use std::time::Duration;

use super::*;
use crate::machine::PeerMessage;

fn node(id: u64, now: Instant) -> Ring {
    let c = Config::builder(NodeId(id), [1, 2, 3].map(NodeId))
        .build()
        .unwrap();
    Ring::new(c, now)
}

fn only_send(out: Vec<Output<Message>>) -> (NodeId, Message) {
    let mut sends: Vec<_> = out
        .into_iter()
        .filter_map(|o| match o {
            Output::Send { to, message } => Some((to, message)),
            Output::LeaderChanged(_) => None,
        })
        .collect();
    assert_eq!(sends.len(), 1, "{sends:?}");
    sends.remove(0)
}

#[test]
fn an_election_goes_round_and_the_highest_leads() {
    let t = Instant::now();
    let mut nodes: Vec<Ring> = (1..=3).map(|i| node(i, t)).collect();
    let (to, mut msg) = only_send(nodes[0].handle(t, Input::Tick));
    assert_eq!(to, NodeId(2));
    let mut from = NodeId(1);
    let mut to = to;
    // Drive the ELECTION and COORDINATOR round, dropping ACKs.
    for _ in 0..6 {
        let out = nodes[(to.get() - 1) as usize].handle(
            t,
            Input::Receive {
                from,
                message: msg.clone(),
            },
        );
        let next: Vec<_> = out
            .into_iter()
            .filter_map(|o| match o {
                Output::Send { to, message } if message.kind() != "ACK" => Some((to, message)),
                _ => None,
            })
            .collect();
        if next.is_empty() {
            break;
        }
        from = to;
        (to, msg) = next[0].clone();
    }
    for n in &nodes {
        assert_eq!(n.leader().map(|l| l.id), Some(NodeId(3)), "{n:?}");
    }
    assert!(nodes[2].leadership().is_some());
}

#[test]
fn a_leader_that_leaves_is_succeeded_without_waiting_for_timeouts() {
    let t = Instant::now();
    let mut n = node(2, t);
    let e3 = Epoch::new(1, 2).unwrap();
    let _ = n.handle(
        t,
        Input::Receive {
            from: NodeId(3),
            message: Message::Heartbeat { epoch: e3 },
        },
    );
    assert_eq!(n.leader().map(|l| l.id), Some(NodeId(3)));
    let soon = t + Duration::from_millis(1);
    assert_eq!(n.handle(soon, Input::Left { from: NodeId(9) }), []);
    // Its successor, 3, has left: the ELECTION goes straight to 1.
    let (to, election) = only_send(n.handle(soon, Input::Left { from: NodeId(3) }));
    assert_eq!(to, NodeId(1));
    let Message::Election {
        initiator,
        election,
        epoch,
        ..
    } = election
    else {
        panic!("{election:?}")
    };
    // Back from 1 with both ids: 2 leads, and tells 1 (not 3).
    let back = Message::Election {
        initiator,
        election,
        epoch,
        ids: vec![NodeId(2), NodeId(1)],
        hop: 0,
    };
    let out = n.handle(
        soon,
        Input::Receive {
            from: NodeId(1),
            message: back,
        },
    );
    let term = n.leader().unwrap();
    assert_eq!(term.id, NodeId(2));
    assert!(term.epoch > e3);
    assert!(n.leadership().is_some());
    assert!(out.iter().any(|o| matches!(
        o,
        Output::Send {
            to: NodeId(1),
            message: Message::Coordinator { .. }
        }
    )));
}

/// Regression: a follower took an ELECTION older than its leader's
/// term (a startup election still being skipped along the ring, whose
/// initiator no longer ran it) for a new election, dropped its leader
/// and its failure timer and waited the election timeout for a
/// COORDINATOR that never came. When the leader then crashed, the
/// group failed over an election timeout (2 s by default) after the
/// stale ELECTION instead of a failure timeout after the crash.
#[test]
fn an_election_older_than_the_term_passes_a_follower_that_keeps_its_leader() {
    let t = Instant::now();
    let mut n = node(1, t);
    let e3 = Epoch::new(1, 2).unwrap();
    let _ = n.handle(
        t,
        Input::Receive {
            from: NodeId(3),
            message: Message::Heartbeat { epoch: e3 },
        },
    );
    let failure = t + Config::DEFAULT_FAILURE_TIMEOUT;
    assert_eq!(n.next_deadline(), failure);
    // 2's first ELECTION, from before 3's term, skipped on to 1 (its
    // hop to 3 was refused).
    let soon = t + Duration::from_millis(80);
    let out = n.handle(
        soon,
        Input::Receive {
            from: NodeId(2),
            message: Message::Election {
                initiator: NodeId(2),
                election: ElectionId {
                    incarnation: 0,
                    number: 0,
                },
                epoch: Epoch::ZERO,
                ids: vec![NodeId(2)],
                hop: 0,
            },
        },
    );
    // Passed on, with the epoch raised, and acknowledged.
    assert!(out.iter().any(|o| matches!(
        o,
        Output::Send {
            to: NodeId(2),
            message: Message::Election { epoch, ids, .. }
        } if *epoch == e3 && ids == &[NodeId(2), NodeId(1)]
    )));
    assert!(out.iter().any(|o| matches!(
        o,
        Output::Send {
            message: Message::Ack { hop: 0 },
            ..
        }
    )));
    // The leader and the failure timer are kept.
    assert!(!out.iter().any(|o| matches!(o, Output::LeaderChanged(_))));
    assert_eq!(
        n.leader(),
        Some(Leader {
            id: NodeId(3),
            epoch: e3
        })
    );
    assert!(
        matches!(n.role, Role::Follower { deadline, .. } if deadline == failure),
        "{:?}",
        n.role
    );
    // 2 acknowledges the hop (and drops the ELECTION: it no longer runs
    // it). 3 crashes: 1 initiates a failure timeout after its last
    // HEARTBEAT, not an election timeout after the stale ELECTION.
    let Some(Output::Send {
        message: Message::Election { hop, .. },
        ..
    }) = out.iter().find(|o| {
        matches!(
            o,
            Output::Send {
                message: Message::Election { .. },
                ..
            }
        )
    })
    else {
        unreachable!("checked above")
    };
    let acked = n.handle(
        soon,
        Input::Receive {
            from: NodeId(2),
            message: Message::Ack { hop: *hop },
        },
    );
    assert_eq!(acked, []);
    assert_eq!(n.next_deadline(), failure);
    let (to, election) = only_send(n.handle(failure, Input::Tick));
    assert_eq!(to, NodeId(2));
    assert!(
        matches!(election, Message::Election { initiator: NodeId(1), epoch, .. } if epoch == e3)
    );
    assert_eq!(n.leader(), None);

    // An ELECTION that knows the term (its initiator suspects the
    // leader too) makes a follower a participant, as before: it waits
    // for that election rather than starting one of its own.
    let mut m = node(1, t);
    let _ = m.handle(
        t,
        Input::Receive {
            from: NodeId(3),
            message: Message::Heartbeat { epoch: e3 },
        },
    );
    let later = t + Duration::from_millis(990);
    let _ = m.handle(
        later,
        Input::Receive {
            from: NodeId(2),
            message: Message::Election {
                initiator: NodeId(2),
                election: ElectionId {
                    incarnation: 0,
                    number: 1,
                },
                epoch: e3,
                ids: vec![NodeId(2)],
                hop: 1,
            },
        },
    );
    assert_eq!(m.leader(), None);
    let wait = later + m.config.election_timeout();
    assert!(
        matches!(m.role, Role::Participant { deadline } if deadline == wait),
        "no election of its own at the failure timeout: {:?}",
        m.role
    );
}

/// Regression: an ELECTION the node no longer runs, still waiting for
/// an ACK from a successor that refused it at startup, was sent on when
/// that successor (since elected) left, and made the initiator of the
/// real election give it up. It is forgotten once a term is adopted.
#[test]
fn a_leaders_goodbye_does_not_send_on_an_election_the_term_superseded() {
    let t = Instant::now();
    let mut n = node(2, t);
    // 2's first ELECTION, to 3, gets no ACK (3 has not started).
    let (to, _) = only_send(n.handle(t, Input::Tick));
    assert_eq!(to, NodeId(3));
    // 3 starts and leads; its HEARTBEAT comes before the ack timeout.
    let e3 = Epoch::new(1, 2).unwrap();
    let soon = t + Duration::from_millis(50);
    let _ = n.handle(
        soon,
        Input::Receive {
            from: NodeId(3),
            message: Message::Heartbeat { epoch: e3 },
        },
    );
    assert_eq!(n.leader().map(|l| l.id), Some(NodeId(3)));
    assert!(n.pending.is_empty(), "{:?}", n.pending);
    // 3 leaves: 2 sends one ELECTION, its new one, on to 1.
    let out = n.handle(soon, Input::Left { from: NodeId(3) });
    let (to, election) = only_send(out);
    assert_eq!(to, NodeId(1));
    assert!(
        matches!(
            election,
            Message::Election { election: ElectionId { number: 1, .. }, epoch, .. } if epoch == e3
        ),
        "{election:?}"
    );
}

#[test]
fn a_hop_to_a_member_that_leaves_moves_on_at_once() {
    let t = Instant::now();
    let mut n = node(3, t);
    let (to, _) = only_send(n.handle(t, Input::Tick));
    assert_eq!(to, NodeId(1), "3's successor wraps to 1");
    let soon = t + Duration::from_millis(1);
    assert!(soon < t + Config::DEFAULT_ACK_TIMEOUT);
    let (to, _) = only_send(n.handle(soon, Input::Left { from: NodeId(1) }));
    assert_eq!(to, NodeId(2), "not after the ack timeout");
    // 1 comes back with an ELECTION of its own: it is in the ring again.
    let _ = n.handle(
        soon,
        Input::Receive {
            from: NodeId(2),
            message: Message::Election {
                initiator: NodeId(1),
                election: ElectionId {
                    incarnation: 1,
                    number: 0,
                },
                epoch: Epoch::ZERO,
                ids: vec![NodeId(1), NodeId(2)],
                hop: 0,
            },
        },
    );
    assert!(!n.departed.contains(&NodeId(1)));
}

#[test]
fn a_dead_successor_is_skipped_and_a_lone_node_elects_itself() {
    let t = Instant::now();
    let mut n = node(1, t);
    let (to, _) = only_send(n.handle(t, Input::Tick));
    assert_eq!(to, NodeId(2));
    let t1 = n.next_deadline();
    assert_eq!(t1, t + Config::DEFAULT_ACK_TIMEOUT);
    let (to, _) = only_send(n.handle(t1, Input::Tick));
    assert_eq!(to, NodeId(3), "skipped 2");
    let t2 = n.next_deadline();
    let out = n.handle(t2, Input::Tick);
    // Back with node 1: it elects itself and sends the COORDINATOR.
    assert_eq!(n.leader().map(|l| l.id), Some(NodeId(1)));
    assert!(out.iter().any(|o| matches!(
        o,
        Output::Send {
            message: Message::Coordinator { .. },
            ..
        }
    )));
}
