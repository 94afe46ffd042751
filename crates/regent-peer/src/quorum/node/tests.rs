//! Tests of quorum mode over a stub inner algorithm: when a node leads
//! and steps down, how grants extend its lease, and what a member
//! promises, defers and grants.

use super::*;
use crate::lowest_id;

/// An inner algorithm that leads in `lead`, if set, and records what
/// it was given.
#[derive(Debug)]
struct Stub {
    id: NodeId,
    lead: Option<Epoch>,
    inputs: Vec<Input<lowest_id::Message>>,
    start: Instant,
}

impl Machine for Stub {
    type Message = lowest_id::Message;

    fn handle(&mut self, _now: Instant, input: Input<Self::Message>) -> Vec<Output<Self::Message>> {
        self.inputs.push(input);
        Vec::new()
    }

    fn next_deadline(&self) -> Instant {
        self.start + Duration::from_secs(3600)
    }

    fn id(&self) -> NodeId {
        self.id
    }

    fn leader(&self) -> Option<Leader> {
        self.lead.map(|epoch| Leader { id: self.id, epoch })
    }

    fn leadership(&self) -> Option<FencingToken> {
        self.lead.map(Epoch::token)
    }
}

const MS: Duration = Duration::from_millis(1);
const INCARNATION: u64 = 77;

fn config(id: u64) -> Config {
    Config::builder(NodeId(id), [1, 2, 3].map(NodeId))
        .heartbeat_interval(100 * MS)
        .failure_timeout(400 * MS)
        .lease(400 * MS)
        .clock_drift(0.05)
        .lease_margin(MS)
        .incarnation(INCARNATION)
        .build()
        .unwrap()
}

fn node(id: u64, lead: Option<Epoch>, t0: Instant) -> Quorum<Stub> {
    let stub = Stub {
        id: NodeId(id),
        lead,
        inputs: Vec::new(),
        start: t0,
    };
    Quorum::new(config(id), t0, stub)
}

fn term() -> Epoch {
    Epoch::new(4, 0).unwrap()
}

fn rx(from: u64, message: Message<lowest_id::Message>) -> Input<Message<lowest_id::Message>> {
    Input::Receive {
        from: NodeId(from),
        message,
    }
}

/// The asks in `out`, by receiver.
fn asks(out: &[Output<Message<lowest_id::Message>>]) -> Vec<(u64, AskId)> {
    out.iter()
        .filter_map(|o| match o {
            Output::Send {
                to,
                message: Message::Ask { id, .. },
            } => Some((to.get(), *id)),
            _ => None,
        })
        .collect()
}

/// No grant, typed: `[]` alone leaves the element type to inference,
/// which another crate's `PartialEq<_> for u64` (serde_json's, in the
/// dependency graph) makes ambiguous.
const NONE: [u64; 0] = [];

fn grants(out: &[Output<Message<lowest_id::Message>>]) -> Vec<u64> {
    out.iter()
        .filter_map(|o| match o {
            Output::Send {
                to,
                message: Message::Grant { .. },
            } => Some(to.get()),
            _ => None,
        })
        .collect()
}

fn ask(from: u64, number: u64) -> Input<Message<lowest_id::Message>> {
    rx(
        from,
        Message::Ask {
            epoch: term(),
            id: AskId {
                incarnation: 1,
                number,
            },
        },
    )
}

fn grant(from: u64, id: AskId) -> Input<Message<lowest_id::Message>> {
    rx(
        from,
        Message::Grant {
            epoch: term(),
            id,
            lease: 400 * MS,
        },
    )
}

/// A leader past its start wait, with a lease from one grant of the ask
/// it sent at the returned instant.
fn leading(t0: Instant) -> (Quorum<Stub>, Instant) {
    let mut n = node(1, Some(term()), t0);
    let _ = n.handle(t0, Input::Tick);
    let sent = t0 + 400 * MS;
    let out = n.handle(sent, Input::Tick);
    let (_, id) = asks(&out)[0];
    let _ = n.handle(sent + 10 * MS, grant(2, id));
    (n, sent)
}

#[test]
fn leads_only_once_a_majority_counting_itself_granted() {
    let t0 = Instant::now();
    let mut n = node(1, Some(term()), t0);
    let out = n.handle(t0, Input::Tick);
    let first = asks(&out);
    assert_eq!(first.iter().map(|a| a.0).collect::<Vec<_>>(), [2, 3]);
    assert_eq!(first[0].1.incarnation, INCARNATION);
    // One grant, and its own promise blocked by the wait after a start:
    // one of three is no majority.
    let out = n.handle(t0 + 10 * MS, grant(2, first[0].1));
    assert_eq!(n.leadership(), None);
    assert_eq!(n.leader(), None, "never names itself without a lease");
    assert_eq!(out, []);
    // Past the wait it counts itself: the next grant makes a majority.
    let sent = t0 + 400 * MS;
    assert_eq!(n.next_deadline(), t0 + 100 * MS, "asks every interval");
    let out = n.handle(sent, Input::Tick);
    let (_, id) = asks(&out)[0];
    assert_eq!(n.leadership(), None);
    let out = n.handle(sent + 10 * MS, grant(3, id));
    assert_eq!(n.leadership(), Some(term().token()));
    let until = sent + config(1).leader_lease();
    assert_eq!(n.lease_until(), Some(until));
    let me = Leader {
        id: NodeId(1),
        epoch: term(),
    };
    assert_eq!(out, [Output::LeaderChanged(Some(me))]);
    // 400 ms x 0.95 - 1 ms, from the send, not the grant.
    assert_eq!(until - sent, 379 * MS);
}

#[test]
fn steps_down_on_its_own_clock_when_the_grants_stop() {
    let t0 = Instant::now();
    let (mut n, sent) = leading(t0);
    let until = n.lease_until().unwrap();
    // Renewal asks go out, nobody answers.
    let mut t = sent;
    let mut last = None;
    while n.next_deadline() < until {
        t = n.next_deadline();
        let out = n.handle(t, Input::Tick);
        assert_eq!(asks(&out).len(), 2, "renews every interval");
        last = Some(asks(&out)[0].1);
        assert!(n.leadership().is_some(), "{:?}", t - sent);
    }
    assert_eq!(t, sent + 300 * MS);
    assert_eq!(n.next_deadline(), until, "wakes the driver at the end");
    let out = n.handle(until, Input::Tick);
    assert_eq!(n.leadership(), None);
    assert_eq!(n.lease_until(), None);
    assert!(out.contains(&Output::LeaderChanged(None)));
    // The inner algorithm still leads: a late grant of the last ask
    // gives the lease back, measured from that ask's send.
    let _ = n.handle(until + MS, grant(3, last.unwrap()));
    assert_eq!(n.lease_until(), Some(t + 379 * MS));
    assert_eq!(n.leadership(), Some(term().token()));
}

#[test]
fn a_grant_extends_the_lease_from_the_send_of_the_ask_it_answers() {
    let t0 = Instant::now();
    let (mut n, sent) = leading(t0);
    let next = sent + 100 * MS;
    let out = n.handle(next, Input::Tick);
    let (_, id) = asks(&out)[0];
    // Granted late, by the other member: still measured from the send.
    let _ = n.handle(next + 250 * MS, grant(3, id));
    assert_eq!(n.lease_until(), Some(next + 379 * MS));
    // A copy of the older grant does not shorten it.
    let old = AskId {
        incarnation: INCARNATION,
        number: 1,
    };
    let _ = n.handle(next + 260 * MS, grant(2, old));
    assert_eq!(n.lease_until(), Some(next + 379 * MS));
}

#[test]
fn a_grant_counts_for_the_promise_its_granter_made() {
    let t0 = Instant::now();
    let mut n = node(1, Some(term()), t0);
    let sent = t0 + 400 * MS;
    let out = n.handle(sent, Input::Tick);
    let (_, id) = asks(&out)[0];
    let granted = |lease| Message::Grant {
        epoch: term(),
        id,
        lease,
    };
    // Itself for 400 ms, node 2 for 200: the second-longest of the
    // two (a majority of three) counts, 200 ms x 0.95 - 1 ms.
    let _ = n.handle(sent + 10 * MS, rx(2, granted(200 * MS)));
    assert_eq!(n.lease_until(), Some(sent + 189 * MS));
    // Node 3 for 600 ms: now its own 400 ms is the second-longest.
    let _ = n.handle(sent + 10 * MS, rx(3, granted(600 * MS)));
    assert_eq!(n.lease_until(), Some(sent + 379 * MS));
}

#[test]
fn grants_of_other_terms_lives_asks_or_nodes_are_not_credited() {
    let t0 = Instant::now();
    let mut n = node(1, Some(term()), t0);
    let _ = n.handle(t0, Input::Tick);
    let sent = t0 + 400 * MS;
    let out = n.handle(sent, Input::Tick);
    let (_, id) = asks(&out)[0];
    let later = sent + 10 * MS;
    let other_life = AskId {
        incarnation: INCARNATION + 1,
        ..id
    };
    let unknown = AskId {
        number: id.number + 100,
        ..id
    };
    let other_term = Message::Grant {
        epoch: Epoch::new(3, 0).unwrap(),
        id,
        lease: 400 * MS,
    };
    for input in [
        grant(2, other_life),
        grant(2, unknown),
        rx(2, other_term),
        grant(1, id),
        grant(9, id),
    ] {
        let _ = n.handle(later, input);
        assert_eq!(n.leadership(), None);
    }
    let _ = n.handle(later, grant(2, id));
    assert!(n.leadership().is_some());
}

#[test]
fn a_member_promises_one_node_for_a_lease_from_the_ask() {
    let t0 = Instant::now();
    let mut m = node(2, None, t0);
    // Just started: grants nobody for a lease.
    assert_eq!(grants(&m.handle(t0, ask(1, 0))), NONE);
    let t = t0 + 400 * MS;
    assert_eq!(grants(&m.handle(t, ask(1, 1))), [1]);
    // Promised to node 1: node 3 is refused, node 1 renews.
    assert_eq!(grants(&m.handle(t + 100 * MS, ask(3, 0))), NONE);
    let renewed = t + 300 * MS;
    assert_eq!(grants(&m.handle(renewed, ask(1, 2))), [1]);
    assert_eq!(grants(&m.handle(t + 401 * MS, ask(3, 1))), NONE);
    assert_eq!(
        grants(&m.handle(renewed + 400 * MS - Duration::from_nanos(1), ask(3, 2))),
        NONE
    );
    // The promise ran out: node 3 may have it (this ask, and the one
    // deferred a nanosecond ago), and then node 1 may not.
    assert_eq!(grants(&m.handle(renewed + 400 * MS, ask(3, 3))), [3, 3]);
    assert_eq!(grants(&m.handle(renewed + 401 * MS, ask(1, 3))), NONE);
    // Non-members and itself are never granted.
    assert_eq!(grants(&m.handle(renewed + 900 * MS, ask(9, 0))), NONE);
    assert_eq!(grants(&m.handle(renewed + 900 * MS, ask(2, 0))), NONE);
}

/// Regression (found by `regent torture --peer ring --quorum`): a
/// promise bound a node id, so the members granted a killed leader's
/// restarted life at once (failover in 0.12 s) while its previous
/// life's lease, and the command that life's shim still runs until
/// the lease's end, had most of a lease to go. A promise binds one
/// life of a node: another incarnation waits it out as another node
/// would.
#[test]
fn a_restarted_node_is_not_granted_until_the_promise_to_its_previous_life_runs_out() {
    let t0 = Instant::now();
    let mut m = node(2, None, t0);
    let t = t0 + 400 * MS;
    assert_eq!(grants(&m.handle(t, ask(1, 0))), [1]);
    let restarted = |number| {
        rx(
            1,
            Message::Ask {
                epoch: Epoch::new(2, 0).unwrap(),
                id: AskId {
                    incarnation: 2,
                    number,
                },
            },
        )
    };
    assert_eq!(grants(&m.handle(t + 100 * MS, restarted(0))), NONE);
    assert_eq!(grants(&m.handle(t + 399 * MS, restarted(1))), NONE);
    // The promise to the first life ran out: the ask deferred a
    // millisecond ago is granted, then the first life is refused.
    assert_eq!(grants(&m.handle(t + 400 * MS, Input::Tick)), [1]);
    assert_eq!(grants(&m.handle(t + 401 * MS, restarted(2))), [1]);
    assert_eq!(grants(&m.handle(t + 402 * MS, ask(1, 1))), NONE);
}

#[test]
fn a_goodbye_from_the_node_promised_ends_the_promise() {
    let t0 = Instant::now();
    let mut m = node(2, None, t0);
    let t = t0 + 400 * MS;
    assert_eq!(grants(&m.handle(t, ask(1, 0))), [1]);
    assert_eq!(grants(&m.handle(t + 10 * MS, ask(3, 0))), NONE);
    // A GOODBYE from another node changes nothing.
    let _ = m.handle(t + 20 * MS, Input::Left { from: NodeId(3) });
    assert_eq!(grants(&m.handle(t + 30 * MS, ask(3, 1))), NONE);
    // Node 1 left: no need to wait its lease out; the ask deferred
    // meanwhile is granted at once.
    let out = m.handle(t + 40 * MS, Input::Left { from: NodeId(1) });
    assert_eq!(grants(&out), [3]);
    assert_eq!(grants(&m.handle(t + 50 * MS, ask(3, 2))), [3]);
}

#[test]
fn a_refused_ask_is_granted_the_moment_the_promise_runs_out() {
    let t0 = Instant::now();
    let mut m = node(2, None, t0);
    let t = t0 + 400 * MS;
    assert_eq!(grants(&m.handle(t, ask(1, 0))), [1]);
    assert_eq!(grants(&m.handle(t + 350 * MS, ask(3, 0))), NONE);
    assert_eq!(m.next_deadline(), t + 400 * MS, "wakes when it may grant");
    let out = m.handle(t + 400 * MS, Input::Tick);
    assert_eq!(
        out,
        [Output::Send {
            to: NodeId(3),
            message: Message::Grant {
                epoch: term(),
                id: AskId {
                    incarnation: 1,
                    number: 0
                },
                lease: 400 * MS,
            }
        }]
    );
    // Now promised to node 3.
    assert_eq!(grants(&m.handle(t + 500 * MS, ask(1, 1))), NONE);
    // A deferred ask older than a heartbeat interval is dropped: its
    // asker has asked again since, or stopped.
    let mut m = node(2, None, t0);
    let _ = m.handle(t, ask(1, 0));
    let _ = m.handle(t + 200 * MS, ask(3, 0));
    assert_eq!(grants(&m.handle(t + 400 * MS, Input::Tick)), NONE);
}

#[test]
fn a_node_that_promised_another_counts_itself_once_the_promise_ends() {
    let t0 = Instant::now();
    let mut n = node(1, None, t0);
    let t = t0 + 400 * MS;
    assert_eq!(grants(&n.handle(t, ask(3, 0))), [3]);
    n.inner.lead = Some(term());
    let sent = t + 350 * MS;
    let out = n.handle(sent, Input::Tick);
    let (_, id) = asks(&out)[0];
    // Node 2's grant alone is one of three.
    let _ = n.handle(t + 360 * MS, grant(2, id));
    assert_eq!(n.leadership(), None);
    // Its promise to node 3 ends: it grants its own ask, deferred, and
    // leads on the lease of that ask.
    assert_eq!(n.next_deadline(), t + 400 * MS);
    let _ = n.handle(t + 400 * MS, Input::Tick);
    assert_eq!(n.leadership(), Some(term().token()));
    assert_eq!(n.lease_until(), Some(sent + 379 * MS));
}

#[test]
fn a_new_term_starts_without_a_lease_and_asks_at_once() {
    let t0 = Instant::now();
    let (mut n, sent) = leading(t0);
    assert!(n.leadership().is_some());
    let newer = Epoch::new(9, 0).unwrap();
    n.inner.lead = Some(newer);
    let t = sent + 20 * MS;
    let out = n.handle(t, Input::Tick);
    assert_eq!(n.leadership(), None);
    let new_asks = asks(&out);
    assert_eq!(new_asks.len(), 2);
    assert!(out.contains(&Output::LeaderChanged(None)));
    n.inner.lead = None;
    let _ = n.handle(t, Input::Tick);
    assert_eq!(n.next_deadline(), t0 + Duration::from_secs(3600));
}

#[test]
fn inputs_it_does_not_handle_reach_the_inner_machine_unchanged() {
    let t0 = Instant::now();
    let mut n = node(2, None, t0);
    let hb = lowest_id::Message::Heartbeat {
        epoch: term(),
        leading: true,
    };
    let _ = n.handle(t0, rx(1, Message::Inner(hb.clone())));
    let _ = n.handle(t0, Input::Tick);
    let _ = n.handle(t0, ask(1, 0));
    assert_eq!(
        n.inner().inputs,
        [
            Input::Receive {
                from: NodeId(1),
                message: hb
            },
            Input::Tick,
            // A lease message is the wrapper's: the inner machine
            // only gets its timers run.
            Input::Tick,
        ]
    );
}
