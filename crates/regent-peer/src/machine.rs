//! The shape every algorithm shares: a sans-IO state machine fed with
//! instants and inputs, answering with outputs.

use std::fmt;
use std::time::Duration;

use regent_core::FencingToken;
use tokio::time::Instant;

use crate::epoch::{Leader, NodeId};

/// What a node is told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input<M> {
    /// Time has passed: the driver calls this when
    /// [`next_deadline`](Machine::next_deadline) is reached. Calling it
    /// early or more often is harmless.
    Tick,
    /// A message arrived from another member. The driver vouches for
    /// `from` (the transport authenticates it).
    Receive {
        /// The sender.
        from: NodeId,
        /// The message.
        message: M,
    },
    /// Member `from` said it is leaving (a graceful shutdown: the
    /// transport's GOODBYE). The machine takes it for dead at once, as if
    /// its failure timeout had just passed: if it led, the election starts
    /// now instead of `failure_timeout` later. Any later message from it
    /// shows it alive again (a restarted node rejoins as usual). The driver
    /// vouches for `from`, as for [`Input::Receive`]; a `from` that is not
    /// another member is ignored.
    Left {
        /// The member that left.
        from: NodeId,
    },
}

/// What a node asks its driver to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output<M> {
    /// Send `message` to member `to`. Best effort: the algorithms tolerate
    /// loss, duplication, delay and reordering.
    Send {
        /// The receiver.
        to: NodeId,
        /// The message.
        message: M,
    },
    /// The node's view of the leader changed (to `None` while it knows of
    /// no leader, for example during an election).
    LeaderChanged(Option<Leader>),
}

impl<M> Input<M> {
    /// Splits a received message off the input: `Ok((from, message))` for
    /// [`Input::Receive`], or `Err` with the same input, retyped, for every
    /// input that carries no message. A wrapper machine that handles some
    /// messages itself uses it to pass every other input to the machine it
    /// wraps unchanged, including variants added later (a new variant
    /// without a message gets its arm here, beside its definition).
    pub(crate) fn into_message<N>(self) -> Result<(NodeId, M), Input<N>> {
        match self {
            Input::Receive { from, message } => Ok((from, message)),
            Input::Tick => Err(Input::Tick),
            Input::Left { from } => Err(Input::Left { from }),
        }
    }
}

/// A message that can say what kind it is, for counting and logs.
pub trait PeerMessage: Clone + fmt::Debug + PartialEq + Eq + Send + 'static {
    /// The kind in capitals, as the textbooks name it (`ELECTION`,
    /// `ANSWER`, `COORDINATOR`, `HEARTBEAT`, ...).
    fn kind(&self) -> &'static str;
}

/// One peer-election algorithm at one node, without IO and without a clock.
///
/// # Timer model
///
/// The machine owns its deadlines; the driver asks for the earliest with
/// [`next_deadline`](Self::next_deadline) and calls
/// [`handle`](Self::handle) with [`Input::Tick`] once it has passed
/// (`sleep_until(next_deadline)`, re-evaluated after every call). Nothing
/// emits or cancels timers: a deadline that no longer matters simply stops
/// being the earliest, so there are no stale timer events to filter, no
/// timer ids to keep, and a tick that comes early, late or twice does no
/// harm. Every call handles whatever deadlines `now` has reached, whatever
/// the input.
///
/// The machine never reads a clock: `now` comes from the caller and must
/// not go backwards (an earlier `now` is treated as no time passing).
pub trait Machine {
    /// The algorithm's message.
    type Message: PeerMessage;

    /// Feeds one input at `now`; returns what to send and whether the
    /// leader view changed.
    fn handle(&mut self, now: Instant, input: Input<Self::Message>) -> Vec<Output<Self::Message>>;

    /// The earliest instant at which the machine wants a
    /// [`Input::Tick`]. Always set: every algorithm has a heartbeat or a
    /// failure timer running.
    fn next_deadline(&self) -> Instant;

    /// This node's id.
    fn id(&self) -> NodeId;

    /// The leader as this node sees it, with the epoch of its term;
    /// `None` while it knows of none.
    fn leader(&self) -> Option<Leader>;

    /// The fencing token of the term this node leads, if it leads. There is
    /// no `is_leader() -> bool`: leadership is the token.
    fn leadership(&self) -> Option<FencingToken>;

    /// While this node leads, the instant until which its leadership is
    /// exclusive: no other node can lead before it, and this node must stop
    /// acting as leader at it unless a later call extends it, **even if the
    /// machine is not called again** (a process that was paused resumes
    /// past it; [`leadership`](Self::leadership) is only as fresh as the
    /// last `now` handled). `None` while this node does not lead.
    ///
    /// The default is `None` always: the algorithms alone are timing-only,
    /// and their leadership has no such bound (see the crate docs).
    /// [`Quorum`](crate::Quorum) gives one: the lease a majority of the
    /// members granted.
    fn lease_until(&self) -> Option<Instant> {
        None
    }
}

/// `now + d`, or `now` in the impossible case that it overflows (every
/// duration is validated to be at most a day).
pub(crate) fn after(now: Instant, d: Duration) -> Instant {
    now.checked_add(d).unwrap_or(now)
}

/// Collects outputs and reports a leader change once per call.
pub(crate) struct Outbox<M> {
    pub(crate) out: Vec<Output<M>>,
}

impl<M> Outbox<M> {
    pub(crate) fn new() -> Self {
        Self { out: Vec::new() }
    }

    pub(crate) fn send(&mut self, to: NodeId, message: M) {
        self.out.push(Output::Send { to, message });
    }

    /// Appends a [`Output::LeaderChanged`] if the view moved from
    /// `before` to `after`, and returns the outputs.
    pub(crate) fn finish(
        mut self,
        before: Option<Leader>,
        after: Option<Leader>,
    ) -> Vec<Output<M>> {
        if before != after {
            self.out.push(Output::LeaderChanged(after));
        }
        self.out
    }
}
