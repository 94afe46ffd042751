//! The TCP transport and the tokio driver that run a [`Machine`] as a
//! node of a real group (feature `net`, on by default).
//!
//! [`start`] binds the node's listener and spawns its tasks; the returned
//! [`Node`] publishes the node's [`View`] (leader and fencing token) on a
//! `watch` channel, and ends it with [`Node::leave`] (graceful: the peers
//! are told) or [`Node::abort`]. Any machine whose message has a wire form
//! ([`Wire`]) runs here: lowest-ID, Bully, Ring, or a wrapper of one.
//!
//! [`Input::Tick`]: crate::Input::Tick
//! [`Input::Receive`]: crate::Input::Receive
//! [`Input::Left`]: crate::Input::Left
//! [`codec`]: crate::codec
//! [`codec::frame_len`]: crate::codec::frame_len
//! [`codec::decode`]: crate::codec::decode
//! [`Payload`]: crate::codec::Payload
//!
//! # Tasks
//!
//! * **The driver** owns the machine. It waits for the machine's
//!   [`next_deadline`](Machine::next_deadline), a message from the
//!   inbound side, or a command, feeds the machine
//!   [`Input::Tick`], [`Input::Receive`] or [`Input::Left`], frames each
//!   [`Output::Send`](crate::Output::Send) and queues it for its peer, and
//!   publishes the view when it has changed. It never waits on the
//!   network.
//! * **One outbound link per peer** holds a bounded queue of frames and a
//!   TCP connection (`TCP_NODELAY`). It connects when it has a frame to
//!   send; a peer that cannot be reached costs a `connect_failures` count
//!   and a retry after a delay that doubles up to a cap
//!   ([`NodeOptions::reconnect_backoff`]), and what was queued for it is
//!   dropped. When the queue is full the oldest frame is dropped. Every
//!   write has a timeout; a failed write drops the frame and the
//!   connection. Messages are best effort: the algorithms tolerate loss.
//!   A link closes its connection after half the idle timeout with nothing
//!   to send, and when the peer closes it, so it never writes into a
//!   connection the peer is closing.
//! * **The accept loop** and **one task per inbound connection**, at most
//!   [`NodeOptions::max_inbound`] at once (more are closed as soon as they
//!   are accepted). A connection reads the 4-byte prefix, asks
//!   [`codec::frame_len`] whether to read on (64 KiB at most), reads the
//!   frame and decodes it with [`codec::decode`]; it must send its first
//!   frame within the io timeout, finish every frame it starts within the
//!   io timeout, and not stay silent longer than the idle timeout. The
//!   first good frame binds the connection to its sender. The connection
//!   is dropped at the first of: a malformed, oversized, truncated,
//!   stalled or unauthenticated frame, a frame the [`ReplayGuard`]
//!   refuses, a frame from another sender, or silence. Nothing a peer
//!   sends can panic the node or block a task beyond those timeouts.
//!
//! # Frames
//!
//! Every frame is a [`codec`] frame of [`Payload`]`<M>`: an algorithm
//! message, or the transport's GOODBYE (kind 255, empty body), both
//! authenticated with HMAC-SHA256 under the group's shared secret. A node
//! that leaves queues a GOODBYE for every peer after its last message; the
//! receiving driver turns it into [`Input::Left`], and the machines take
//! the member for dead at once, so a leader's graceful shutdown costs a
//! round trip instead of a failure timeout.
//!
//! # View queries
//!
//! Any holder of the secret, member or not, can ask a running node for its
//! view: [`query`] once, [`watch_view`] to follow it. The frames are the
//! [`codec`]'s QUERY and VIEW ([`Control`], algorithm byte 0), so a
//! querier need not know the group's algorithm; the answer names it, the
//! election, the leader and its token, and whether the node leads
//! ([`PeerView`]).
//!
//! * A querier connects to the node's listening address and sends QUERY
//!   frames from [`NodeId::ANY`], to the node's id or to [`NodeId::ANY`];
//!   the node answers each with one VIEW on the same connection. A
//!   connection whose first frame is a QUERY is a querier's from then on,
//!   and carries nothing else.
//! * A query is checked as a member's frame is, but for membership: to this
//!   node or to any, `seq` within [`MAX_CLOCK_SKEW`], and above the last
//!   query's on the connection ([`ReplayGuard::check_query`]). A query
//!   this node cannot authenticate or refuses is dropped with its
//!   connection and counted, unanswered: to the querier it is no answer.
//! * A QUERY may ask the node to hold it until the view changes, at most
//!   its `wait` ([`MAX_QUERY_WAIT`]); the first query of a connection is
//!   answered at once. That is how [`watch_view`] follows a node with one
//!   connection and no subscription state: one answer per query, always.
//! * Answers come from the view the driver publishes; the driver never
//!   sees a query. A querier holds one of [`NodeOptions::max_queriers`]
//!   places, not one of the members' ([`NodeOptions::max_inbound`]) once
//!   its first frame is read; it gets at most one answer per millisecond;
//!   its connection's send buffer is kept small, so a querier that does
//!   not read is dropped once a few hundred answers wait for it (a write
//!   not done within the io timeout); one that stays silent is dropped
//!   after the idle timeout.
//!
//! [`Control`]: crate::codec::Control
//! [`PeerView`]: crate::codec::PeerView
//!
//! # Replays
//!
//! `seq` is the sender's wall clock in microseconds since the Unix epoch,
//! strictly increasing ([`SeqClock`]). A receiver accepts a frame from S
//! only if it is addressed to the receiver, S is another member, its `seq`
//! is within [`MAX_CLOCK_SKEW`] of the receiver's wall clock, and above the
//! last `seq` accepted from S ([`ReplayGuard`]). **The members' wall
//! clocks must agree within [`MAX_CLOCK_SKEW`] (30 s).** The wall clock is
//! used only here, for replay windows; no timing decision of the
//! algorithms reads it.
//!
//! # What is logged and counted
//!
//! * `warn`, at most 5 every 10 s per node (then with the number
//!   suppressed): an inbound connection dropped for a bad frame, a
//!   refusal, a silent socket, the connection or querier cap, or a querier
//!   that does not read; an accept error.
//! * `warn` once per episode: a peer becomes unreachable (`info` when it
//!   is reachable again); a peer's queue overflows; a member without an
//!   address.
//! * `info`: a peer leaving, this node leaving or stopping. The machines
//!   log leadership changes at `info` themselves.
//! * `debug`: normal ends of connections, idle closes, failed writes.
//!
//!
//! [`Node::counters`] counts the same events ([`Counters`]), and the view
//! queries answered.
//!
//! # What this does not do
//!
//! Membership is static, and the shared secret trusts every holder: a
//! member gone bad can say anything. There is no encryption (the frames
//! are authenticated, not secret) and no quorum.

mod driver;
mod inbound;
mod options;
mod outbound;
mod query;
mod replay;
mod view;
mod warn;

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{Semaphore, mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use inbound::MAX_QUERY_WAIT;
pub use options::{Listen, NodeOptions, NodeOptionsBuilder, OptionsError};
pub use query::{QueryError, ViewWatch, query, watch_view};
pub use replay::{MAX_CLOCK_SKEW, Refusal, ReplayGuard, SeqClock};
pub use view::{Counters, View};

use crate::algorithm::Algorithm;
use crate::codec::Wire;
use crate::epoch::NodeId;
use crate::machine::Machine;
use driver::{Command, Driver};
use inbound::{Answers, Inbound};
use outbound::{Link, PeerQueue};
use view::Stats;
use warn::WarnLimit;

/// How many received messages may wait for the driver before the
/// connections that read them wait too.
const INBOUND_BACKLOG: usize = 256;

/// Starts `machine` as a node of its group: binds (or takes) the listener,
/// spawns the driver, the accept loop and one link per peer, and returns
/// the handle. The machine's first deadline is honoured from here on.
///
/// # Errors
///
/// The listener's: the address cannot be bound, or the given listener
/// cannot be put in non-blocking mode or handed to tokio.
///
/// # Panics
///
/// Outside a tokio runtime with IO and time enabled.
///
/// # Cancel safety
///
/// Cancel-safe: nothing is spawned before the listener is ready, and a
/// listener bound by a cancelled call is closed.
pub async fn start<M>(machine: M, options: NodeOptions) -> io::Result<Node>
where
    M: Machine + Send + 'static,
    M::Message: Wire,
{
    let (io_timeout, idle_timeout) = (options.io_timeout(), options.idle_timeout());
    let (max_inbound, leave_timeout) = (options.max_inbound(), options.leave_timeout());
    let max_queriers = options.max_queriers();
    let (queue_capacity, backoff) = (options.queue_capacity(), options.reconnect_backoff());
    let NodeOptions {
        listen,
        members,
        secret,
        election,
        ..
    } = options;
    let listener = match listen {
        Listen::Addr(addr) => TcpListener::bind(addr).await?,
        Listen::Bound(listener) => {
            listener.set_nonblocking(true)?;
            TcpListener::from_std(listener)?
        }
    };
    let local_addr = listener.local_addr()?;
    let me = machine.id();
    let stop = CancellationToken::new();
    let accept_stop = stop.child_token();
    let drain = CancellationToken::new();
    let tasks = TaskTracker::new();
    let links = TaskTracker::new();
    let stats = Arc::new(Stats::new());

    let mut peers = BTreeMap::new();
    for (&peer, &addr) in members.iter().filter(|&(&id, _)| id != me) {
        let queue = Arc::new(PeerQueue::new(queue_capacity));
        peers.insert(peer, Arc::clone(&queue));
        links.spawn(
            Link {
                me,
                peer,
                addr,
                queue,
                io_timeout,
                idle_after: idle_timeout / 2,
                backoff,
                stats: Arc::clone(&stats),
                stop: stop.clone(),
                drain: drain.clone(),
            }
            .run(),
        );
    }

    let (view_tx, view) = watch::channel(View::of(&machine));
    let members_count = members.keys().filter(|&&id| id != me).count() + 1;
    let (to_driver, inbound) = mpsc::channel(INBOUND_BACKLOG);
    let ctx = Arc::new(Inbound {
        me,
        secret: secret.clone(),
        guard: Mutex::new(ReplayGuard::new(me, members.keys().copied())),
        to_driver,
        io_timeout,
        idle_timeout,
        slots: Arc::new(Semaphore::new(max_inbound)),
        max_inbound,
        stats: Arc::clone(&stats),
        warn: WarnLimit::default(),
        answers: Answers {
            view: view.clone(),
            election,
            algorithm: Algorithm::from_wire(M::Message::ALGORITHM),
            members: u32::try_from(members_count).unwrap_or(u32::MAX),
            slots: Arc::new(Semaphore::new(max_queriers)),
        },
    });
    tasks.spawn(inbound::accept_loop(
        listener,
        ctx,
        tasks.clone(),
        accept_stop.clone(),
    ));

    let (commands, commands_rx) = mpsc::channel(1);
    tasks.spawn(
        Driver {
            machine,
            secret,
            seq: SeqClock::new(),
            peers,
            inbound,
            commands: commands_rx,
            view: view_tx,
            stats: Arc::clone(&stats),
            stop: stop.clone(),
            unknown: BTreeSet::new(),
        }
        .run(),
    );
    tasks.close();
    links.close();
    tracing::info!(node = %me, addr = %local_addr, members = members.len(), "peer node started");
    Ok(Node {
        id: me,
        local_addr,
        view,
        stats,
        commands,
        stop,
        accept_stop,
        drain,
        tasks,
        links,
        leave_timeout,
    })
}

/// A running node: its view, its counters, and how to end it.
///
/// Dropping it stops the node as [`abort`](Self::abort) does, without
/// waiting for its tasks to end.
#[derive(Debug)]
pub struct Node {
    id: NodeId,
    local_addr: SocketAddr,
    view: watch::Receiver<View>,
    stats: Arc<Stats>,
    commands: mpsc::Sender<Command>,
    /// Ends every task.
    stop: CancellationToken,
    /// Ends the accept loop and the inbound connections (a child of
    /// `stop`).
    accept_stop: CancellationToken,
    /// Tells the links to write what is queued and end.
    drain: CancellationToken,
    /// The driver, the accept loop and the inbound connections.
    tasks: TaskTracker,
    /// The outbound links.
    links: TaskTracker,
    leave_timeout: Duration,
}

impl Node {
    /// This node's id.
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// The address the node listens on (the port chosen, if it bound
    /// port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The node's view: its current value is the latest published, and
    /// `changed` / `wait_for` wait for the next. It is published whenever
    /// the leader or this node's leadership changes, and a last time, with
    /// [`View::stopped`] set, when the node stops; then the channel
    /// closes.
    pub fn view(&self) -> watch::Receiver<View> {
        self.view.clone()
    }

    /// The transport's [`Counters`], published at every change.
    pub fn counters(&self) -> watch::Receiver<Counters> {
        self.stats.0.subscribe()
    }

    /// Leaves the group gracefully: publishes a stopped view (so this node
    /// is seen to lead nothing before any peer can elect a successor),
    /// sends GOODBYE to every peer after the messages already queued,
    /// waits up to [`NodeOptions::leave_timeout`] for them to be written,
    /// then stops every task and waits for them to end. The peers take
    /// this node for dead at once ([`Input::Left`](crate::Input::Left)).
    ///
    /// Delivery is best effort: a peer that cannot be reached within the
    /// leave timeout is not told, and takes this node for dead after its
    /// failure timeout instead.
    ///
    /// # Cancel safety
    ///
    /// Not cancel-safe: dropping the future drops the node, which stops at
    /// once, whatever GOODBYEs have not been written yet.
    pub async fn leave(self) {
        let (done, told) = oneshot::channel();
        if self.commands.send(Command::Leave(done)).await.is_ok() {
            // An error means the driver had already stopped.
            let _ = told.await;
        }
        self.accept_stop.cancel();
        self.drain.cancel();
        if tokio::time::timeout(self.leave_timeout, self.links.wait())
            .await
            .is_err()
        {
            tracing::warn!(node = %self.id, "leave: not every GOODBYE was written in time");
        }
        self.stop.cancel();
        self.tasks.wait().await;
        self.links.wait().await;
    }

    /// Stops the node at once, telling no one, and waits for its tasks to
    /// end: to the peers it is as if it had crashed, and they elect a
    /// successor after their failure timeout.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: the node stops whether or not the wait completes.
    pub async fn abort(self) {
        self.stop.cancel();
        self.drain.cancel();
        self.tasks.wait().await;
        self.links.wait().await;
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.stop.cancel();
        self.drain.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_send_sync<T: Send + Sync>() {}

    #[test]
    fn public_types_are_send_and_sync() {
        is_send_sync::<Node>();
        is_send_sync::<View>();
        is_send_sync::<Counters>();
        is_send_sync::<NodeOptions>();
        is_send_sync::<OptionsError>();
        is_send_sync::<ReplayGuard>();
        is_send_sync::<Refusal>();
        is_send_sync::<SeqClock>();
        is_send_sync::<ViewWatch>();
        is_send_sync::<QueryError>();
    }
}
