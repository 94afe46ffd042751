//! The driver: the one task that owns the machine. It feeds it ticks,
//! messages and departures, sends what it asks, and publishes its view.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::SystemTime;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

use super::outbound::{PeerQueue, Pushed};
use super::replay::SeqClock;
use super::view::{Stats, View};
use crate::codec::{self, Envelope, Payload, Secret, Wire};
use crate::epoch::NodeId;
use crate::machine::{Input, Machine, Output};

/// What the [`Node`](super::Node) handle asks of the driver.
#[derive(Debug)]
pub(super) enum Command {
    /// Stop the machine, publish a stopped view, queue a GOODBYE for every
    /// peer, then answer and end.
    Leave(oneshot::Sender<()>),
}

pub(super) struct Driver<M: Machine> {
    pub(super) machine: M,
    pub(super) secret: Secret,
    pub(super) seq: SeqClock,
    pub(super) peers: BTreeMap<NodeId, Arc<PeerQueue>>,
    pub(super) inbound: mpsc::Receiver<(NodeId, Payload<M::Message>)>,
    pub(super) commands: mpsc::Receiver<Command>,
    pub(super) view: watch::Sender<View>,
    pub(super) stats: Arc<Stats>,
    pub(super) stop: CancellationToken,
    /// Ids the machine sent to that have no address (logged once each).
    pub(super) unknown: BTreeSet<NodeId>,
}

impl<M> Driver<M>
where
    M: Machine,
    M::Message: Wire,
{
    /// Runs until `stop`, a leave, or the handle is gone.
    pub(super) async fn run(mut self) {
        loop {
            let deadline = self.machine.next_deadline();
            let input = tokio::select! {
                biased;
                () = self.stop.cancelled() => break,
                command = self.commands.recv() => match command {
                    Some(Command::Leave(done)) => {
                        self.leave();
                        let _ = done.send(());
                        return;
                    }
                    None => break,
                },
                Some((from, payload)) = self.inbound.recv() => match payload {
                    Payload::Message(message) => Input::Receive { from, message },
                    Payload::Goodbye => {
                        tracing::info!(node = %self.machine.id(), peer = %from, "a peer is leaving");
                        Input::Left { from }
                    }
                },
                () = sleep_until(deadline) => Input::Tick,
            };
            let outputs = self.machine.handle(Instant::now(), input);
            for output in outputs {
                match output {
                    Output::Send { to, message } => self.send(to, Payload::Message(message)),
                    Output::LeaderChanged(leader) => {
                        tracing::debug!(node = %self.machine.id(), ?leader, "view changed");
                    }
                }
            }
            let now = View::of(&self.machine);
            self.view.send_if_modified(|v| {
                let changed = *v != now;
                *v = now;
                changed
            });
        }
        tracing::info!(node = %self.machine.id(), "peer node stopped");
        self.view.send_replace(View::STOPPED);
    }

    /// Frames `payload` for `to` and queues it; never waits.
    fn send(&mut self, to: NodeId, payload: Payload<M::Message>) {
        let me = self.machine.id();
        let Some(queue) = self.peers.get(&to) else {
            if self.unknown.insert(to) {
                tracing::warn!(node = %me, peer = %to, "no address for this member; its messages are dropped (the membership differs from the machine's)");
            }
            self.stats.bump(|c| c.frames_dropped += 1);
            return;
        };
        let envelope = Envelope {
            from: me,
            to,
            seq: self.seq.next(SystemTime::now()),
            message: payload,
        };
        let frame = match codec::encode(&self.secret, &envelope) {
            Ok(frame) => frame,
            Err(error) => {
                tracing::warn!(node = %me, peer = %to, %error, "a message could not be framed; dropped");
                self.stats.bump(|c| c.frames_dropped += 1);
                return;
            }
        };
        if let Pushed::DroppedOldest { first } = queue.push(frame, Instant::now()) {
            self.stats.bump(|c| c.frames_dropped += 1);
            if first {
                tracing::warn!(node = %me, peer = %to, "the queue for this peer is full; dropping its oldest messages");
            }
        }
    }

    /// Steps down in public first, then says goodbye: the application stops
    /// acting as leader before any peer can elect a successor.
    fn leave(&mut self) {
        self.view.send_replace(View::STOPPED);
        tracing::info!(node = %self.machine.id(), "leaving: telling the peers");
        let peers: Vec<NodeId> = self.peers.keys().copied().collect();
        for to in peers {
            self.send(to, Payload::Goodbye);
        }
    }
}
