//! The accept loop and one task per inbound connection: read frames,
//! authenticate them, check them against the replay guard, hand them to
//! the driver; drop the connection at the first thing wrong. A connection
//! whose first frame is a view query is a querier's: it is answered from
//! the published view, never through the driver.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use regent_core::ElectionName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tokio::time::{Instant, sleep, sleep_until, timeout};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::replay::{Refusal, ReplayGuard, SeqClock};
use super::view::{Counters, Stats, View};
use super::warn::WarnLimit;
use crate::algorithm::Algorithm;
use crate::codec::{
    self, CONTROL_ALGORITHM, Control, DecodeError, EncodeError, Envelope, Payload, PeerView,
    Secret, Wire,
};
use crate::epoch::NodeId;

/// The longest a node holds a view query that asks to wait for a change
/// ([`Control::Query`](crate::codec::Control::Query)`::wait`): a longer
/// wait is cut to this.
pub const MAX_QUERY_WAIT: Duration = Duration::from_secs(30);

/// How long the accept loop pauses after an accept error (out of file
/// descriptors, typically) before it tries again.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

/// A querier's connection gets at most one answer per this: a querier that
/// sends queries as fast as it can costs the node a bounded share of its
/// time, whatever the runtime.
const ANSWER_PACE: Duration = Duration::from_millis(1);

/// The send buffer of a querier's connection. The kernel would otherwise
/// grow it to megabytes, and a querier that never reads would be answered
/// for seconds before a write blocks; with this, answers stop fitting
/// after a few hundred unread ones (with the querier's receive buffer),
/// and the io timeout drops it.
const QUERIER_SEND_BUFFER: usize = 8 * 1024;

/// What every inbound connection task shares.
#[derive(Debug)]
pub(super) struct Inbound<M> {
    pub(super) me: NodeId,
    pub(super) secret: Secret,
    pub(super) guard: Mutex<ReplayGuard>,
    pub(super) to_driver: mpsc::Sender<(NodeId, Payload<M>)>,
    pub(super) io_timeout: Duration,
    pub(super) idle_timeout: Duration,
    pub(super) slots: Arc<Semaphore>,
    pub(super) max_inbound: usize,
    pub(super) stats: Arc<Stats>,
    pub(super) warn: WarnLimit,
    /// What a view query is answered with.
    pub(super) answers: Answers,
}

/// What a node answers view queries with, besides its view.
#[derive(Debug)]
pub(super) struct Answers {
    /// The view the driver publishes.
    pub(super) view: watch::Receiver<View>,
    pub(super) election: ElectionName,
    /// The node's algorithm and quorum mode; `None` for a machine whose
    /// algorithm byte names none of this crate's (its queries go
    /// unanswered).
    pub(super) algorithm: Option<(Algorithm, bool)>,
    pub(super) members: u32,
    pub(super) slots: Arc<Semaphore>,
}

/// Accepts connections until `stop`; each gets a task on `tracker` while
/// a slot is free, and is closed at once otherwise.
pub(super) async fn accept_loop<M: Wire + Send + 'static>(
    listener: TcpListener,
    ctx: Arc<Inbound<M>>,
    tracker: TaskTracker,
    stop: CancellationToken,
) {
    loop {
        let accepted = tokio::select! {
            biased;
            () = stop.cancelled() => return,
            r = listener.accept() => r,
        };
        match accepted {
            Ok((stream, addr)) => {
                let Ok(slot) = Arc::clone(&ctx.slots).try_acquire_owned() else {
                    ctx.stats.bump(|c| c.connections_refused += 1);
                    if let Some(suppressed) = ctx.warn.admit() {
                        tracing::warn!(node = %ctx.me, %addr, max_inbound = ctx.max_inbound, suppressed, "closed an inbound connection: too many are open");
                    }
                    drop(stream);
                    continue;
                };
                ctx.stats.bump(|c| c.connections_accepted += 1);
                let ctx = Arc::clone(&ctx);
                let stop = stop.clone();
                tracker.spawn(async move {
                    serve(stream, addr, slot, &ctx, &stop).await;
                });
            }
            Err(error) => {
                if let Some(suppressed) = ctx.warn.admit() {
                    tracing::warn!(node = %ctx.me, %error, suppressed, "accepting a connection failed");
                }
                tokio::select! {
                    biased;
                    () = stop.cancelled() => return,
                    () = sleep(ACCEPT_ERROR_PAUSE) => {}
                }
            }
        }
    }
}

/// Why an inbound connection ended.
#[derive(Debug)]
enum Closed {
    /// The peer closed it between frames.
    Eof,
    /// The driver has stopped.
    Shutdown,
    /// Nothing came for the first-frame timeout (`first`) or the idle
    /// timeout.
    Silent { first: bool },
    /// A frame was begun and not finished within the io timeout.
    Stalled,
    /// A bad prefix, or a frame that does not decode.
    Frame(DecodeError),
    /// An authenticated frame the guard refused.
    Refused(Refusal),
    /// A connection that spoke for one member sent a frame of another.
    SenderChanged { was: NodeId, now: NodeId },
    /// The socket failed (reset, typically: a peer that died).
    Io(io::Error),
    /// A member's connection sent a view query, or a querier's a member's
    /// frame or a VIEW.
    NotAQuery,
    /// A querier came while [`NodeOptions::max_queriers`] were served, or
    /// to a node that cannot name its algorithm.
    ///
    /// [`NodeOptions::max_queriers`]: super::NodeOptions::max_queriers
    TooManyQueriers,
    /// A querier did not read its answer within the io timeout.
    NotReading,
    /// An answer could not be framed.
    Encode(EncodeError),
}

impl std::fmt::Display for Closed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Closed::Eof => f.write_str("closed by the peer"),
            Closed::Shutdown => f.write_str("this node is stopping"),
            Closed::Silent { first: true } => f.write_str("no frame within the io timeout"),
            Closed::Silent { first: false } => f.write_str("idle for the idle timeout"),
            Closed::Stalled => f.write_str("a frame cut short or not finished in time"),
            Closed::Frame(e) => write!(f, "{e}"),
            Closed::Refused(r) => write!(f, "{r}"),
            Closed::SenderChanged { was, now } => {
                write!(f, "a connection of member {was} sent a frame of {now}")
            }
            Closed::Io(e) => write!(f, "{e}"),
            Closed::NotAQuery => f.write_str("a connection mixed view queries with other frames"),
            Closed::TooManyQueriers => f.write_str(
                "a querier came while max_queriers were served (or to a machine whose algorithm has no name)",
            ),
            Closed::NotReading => f.write_str("a querier did not read its answer in time"),
            Closed::Encode(e) => write!(f, "an answer could not be framed: {e}"),
        }
    }
}

impl Closed {
    fn count(&self, c: &mut Counters) {
        match self {
            Closed::Eof | Closed::Shutdown | Closed::Io(_) | Closed::Encode(_) => {}
            Closed::Silent { .. } => c.silent_closed += 1,
            Closed::Stalled => c.malformed += 1,
            Closed::Frame(DecodeError::Unauthenticated) => c.unauthenticated += 1,
            Closed::Frame(_) => c.malformed += 1,
            Closed::Refused(Refusal::Replayed { .. }) => c.replayed += 1,
            Closed::Refused(Refusal::TooOld { .. } | Refusal::TooNew { .. }) => {
                c.outside_clock_window += 1;
            }
            Closed::Refused(_) | Closed::SenderChanged { .. } | Closed::NotAQuery => {
                c.misaddressed += 1;
            }
            Closed::TooManyQueriers => c.connections_refused += 1,
            Closed::NotReading => c.queriers_dropped += 1,
        }
    }

    /// Whether this is worth a warning: anything but the normal ends of a
    /// peer's connection.
    fn is_suspect(&self) -> bool {
        !matches!(
            self,
            Closed::Eof | Closed::Shutdown | Closed::Io(_) | Closed::Silent { first: false }
        )
    }
}

async fn serve<M: Wire>(
    mut stream: TcpStream,
    addr: SocketAddr,
    slot: OwnedSemaphorePermit,
    ctx: &Inbound<M>,
    stop: &CancellationToken,
) {
    let closed = tokio::select! {
        biased;
        () = stop.cancelled() => return,
        closed = read_frames(&mut stream, slot, ctx) => closed,
    };
    ctx.stats.bump(|c| closed.count(c));
    if closed.is_suspect() {
        if let Some(suppressed) = ctx.warn.admit() {
            tracing::warn!(node = %ctx.me, %addr, reason = %closed, suppressed, "dropped an inbound connection");
        }
    } else {
        tracing::debug!(node = %ctx.me, %addr, reason = %closed, "inbound connection closed");
    }
}

/// Reads `buf.len()` bytes within the io timeout.
async fn read_within<M>(
    stream: &mut TcpStream,
    buf: &mut [u8],
    ctx: &Inbound<M>,
) -> Result<(), Closed> {
    match timeout(ctx.io_timeout, stream.read_exact(buf)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) if e.kind() == io::ErrorKind::UnexpectedEof => Err(Closed::Stalled),
        Ok(Err(e)) => Err(Closed::Io(e)),
        Err(_) => Err(Closed::Stalled),
    }
}

/// Reads one whole frame, length prefix included: its first byte within
/// `wait`, the rest within the io timeout.
async fn read_frame<M>(
    stream: &mut TcpStream,
    wait: Duration,
    first: bool,
    ctx: &Inbound<M>,
) -> Result<Vec<u8>, Closed> {
    let mut prefix = [0u8; 4];
    match timeout(wait, stream.read(&mut prefix[..1])).await {
        Ok(Ok(0)) => return Err(Closed::Eof),
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return Err(Closed::Io(e)),
        Err(_) => return Err(Closed::Silent { first }),
    }
    read_within(stream, &mut prefix[1..], ctx).await?;
    let len = codec::frame_len(prefix).map_err(Closed::Frame)?;
    let mut frame = vec![0u8; 4 + len];
    frame[..4].copy_from_slice(&prefix);
    read_within(stream, &mut frame[4..], ctx).await?;
    Ok(frame)
}

/// Reads, checks and delivers frames until something is wrong; hands a
/// querier's connection to [`answer_queries`].
async fn read_frames<M: Wire>(
    stream: &mut TcpStream,
    slot: OwnedSemaphorePermit,
    ctx: &Inbound<M>,
) -> Closed {
    // The member this connection speaks for, set by its first good frame.
    let mut sender: Option<NodeId> = None;
    loop {
        // A peer connects when it has a frame to send, so a new connection
        // gets the io timeout for its first frame; a silent socket holds a
        // slot no longer than that.
        let wait = match sender {
            Some(_) => ctx.idle_timeout,
            None => ctx.io_timeout,
        };
        let frame = match read_frame(stream, wait, sender.is_none(), ctx).await {
            Ok(frame) => frame,
            Err(closed) => return closed,
        };
        if codec::algorithm_of(&frame) == Some(CONTROL_ALGORITHM) {
            if sender.is_some() {
                return Closed::NotAQuery;
            }
            return answer_queries(stream, frame, slot, ctx).await;
        }
        let envelope = match codec::decode::<Payload<M>>(&ctx.secret, &frame) {
            Ok(envelope) => envelope,
            Err(e) => return Closed::Frame(e),
        };
        if let Some(was) = sender
            && was != envelope.from
        {
            return Closed::SenderChanged {
                was,
                now: envelope.from,
            };
        }
        let checked = ctx
            .guard
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .check(&envelope, SystemTime::now());
        if let Err(refusal) = checked {
            return Closed::Refused(refusal);
        }
        sender = Some(envelope.from);
        if ctx
            .to_driver
            .send((envelope.from, envelope.message))
            .await
            .is_err()
        {
            return Closed::Shutdown;
        }
        ctx.stats.bump(|c| c.frames_accepted += 1);
    }
}

/// Serves a querier's connection, whose first frame is `frame`: one VIEW
/// per QUERY, from the published view, until the querier closes, is silent
/// for the idle timeout, does not read its answer within the io timeout,
/// or sends anything but a good QUERY. The driver is never involved.
async fn answer_queries<M>(
    stream: &mut TcpStream,
    mut frame: Vec<u8>,
    slot: OwnedSemaphorePermit,
    ctx: &Inbound<M>,
) -> Closed {
    let answers = &ctx.answers;
    let Some((algorithm, quorum)) = answers.algorithm else {
        return Closed::TooManyQueriers;
    };
    // Queriers hold places of their own, so that they never keep a
    // member's connection out.
    let Ok(_query_slot) = Arc::clone(&answers.slots).try_acquire_owned() else {
        return Closed::TooManyQueriers;
    };
    drop(slot);
    // Best effort: without it, a querier that never reads is dropped
    // later, not never.
    let _ = socket2::SockRef::from(&*stream).set_send_buffer_size(QUERIER_SEND_BUFFER);
    let mut view = answers.view.clone();
    let mut clock = SeqClock::new();
    let mut last_query: Option<u64> = None;
    let mut next_answer = Instant::now();
    loop {
        let envelope = match codec::decode::<Control>(&ctx.secret, &frame) {
            Ok(envelope) => envelope,
            Err(e) => return Closed::Frame(e),
        };
        let Control::Query { wait } = envelope.message else {
            return Closed::NotAQuery;
        };
        let checked = ctx
            .guard
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .check_query(&envelope, last_query, SystemTime::now());
        if let Err(refusal) = checked {
            return Closed::Refused(refusal);
        }
        if last_query.is_some()
            && !wait.is_zero()
            && let Err(closed) = wait_for_change(stream, &mut view, wait.min(MAX_QUERY_WAIT)).await
        {
            return closed;
        }
        last_query = Some(envelope.seq);
        sleep_until(next_answer).await;
        next_answer = Instant::now() + ANSWER_PACE;
        let now = *view.borrow_and_update();
        let answer = Envelope {
            from: ctx.me,
            to: NodeId::ANY,
            seq: clock.next(SystemTime::now()),
            message: Control::View {
                query_seq: envelope.seq,
                view: PeerView {
                    node: ctx.me,
                    election: answers.election.clone(),
                    algorithm,
                    quorum,
                    members: answers.members,
                    leader: now.leader,
                    leading: now.leading,
                    lease_remaining: now
                        .lease_until
                        .map(|until| until.saturating_duration_since(Instant::now())),
                    stopped: now.stopped,
                },
            },
        };
        let bytes = match codec::encode(&ctx.secret, &answer) {
            Ok(bytes) => bytes,
            Err(e) => return Closed::Encode(e),
        };
        match timeout(ctx.io_timeout, stream.write_all(&bytes)).await {
            Ok(Ok(())) => ctx.stats.bump(|c| c.queries_answered += 1),
            Ok(Err(e)) => return Closed::Io(e),
            Err(_) => return Closed::NotReading,
        }
        frame = match read_frame(stream, ctx.idle_timeout, false, ctx).await {
            Ok(frame) => frame,
            Err(closed) => return closed,
        };
        if codec::algorithm_of(&frame) != Some(CONTROL_ALGORITHM) {
            return Closed::NotAQuery;
        }
    }
}

/// Waits until the view changes, `wait` passes, or the querier sends
/// something (its next query: answer this one now) or closes.
async fn wait_for_change(
    stream: &TcpStream,
    view: &mut watch::Receiver<View>,
    wait: Duration,
) -> Result<(), Closed> {
    let mut byte = [0u8; 1];
    tokio::select! {
        // A closed channel (the driver has stopped) is a change too.
        _ = view.changed() => Ok(()),
        () = sleep(wait) => Ok(()),
        r = stream.peek(&mut byte) => match r {
            Ok(0) => Err(Closed::Eof),
            Ok(_) => Ok(()),
            Err(e) => Err(Closed::Io(e)),
        },
    }
}
