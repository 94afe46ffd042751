//! The accept loop and one task per inbound connection: read frames,
//! authenticate them, check them against the replay guard, hand them to
//! the driver; drop the connection at the first thing wrong.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio::time::{sleep, timeout};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::replay::{Refusal, ReplayGuard};
use super::{Counters, Stats, WarnLimit};
use crate::codec::{self, DecodeError, Payload, Secret, Wire};
use crate::epoch::NodeId;

/// How long the accept loop pauses after an accept error (out of file
/// descriptors, typically) before it tries again.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

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
                    let _slot = slot;
                    serve(stream, addr, &ctx, &stop).await;
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
    /// Nothing came for the first-frame or idle timeout.
    Silent { sender: Option<NodeId> },
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
}

impl std::fmt::Display for Closed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Closed::Eof => f.write_str("closed by the peer"),
            Closed::Shutdown => f.write_str("this node is stopping"),
            Closed::Silent { sender: None } => f.write_str("no frame within the io timeout"),
            Closed::Silent { sender: Some(_) } => f.write_str("idle for the idle timeout"),
            Closed::Stalled => f.write_str("a frame cut short or not finished in time"),
            Closed::Frame(e) => write!(f, "{e}"),
            Closed::Refused(r) => write!(f, "{r}"),
            Closed::SenderChanged { was, now } => {
                write!(f, "a connection of member {was} sent a frame of {now}")
            }
            Closed::Io(e) => write!(f, "{e}"),
        }
    }
}

impl Closed {
    fn count(&self, c: &mut Counters) {
        match self {
            Closed::Eof | Closed::Shutdown | Closed::Io(_) => {}
            Closed::Silent { .. } => c.silent_closed += 1,
            Closed::Stalled => c.malformed += 1,
            Closed::Frame(DecodeError::Unauthenticated) => c.unauthenticated += 1,
            Closed::Frame(_) => c.malformed += 1,
            Closed::Refused(Refusal::Replayed { .. }) => c.replayed += 1,
            Closed::Refused(Refusal::TooOld { .. } | Refusal::TooNew { .. }) => {
                c.outside_clock_window += 1;
            }
            Closed::Refused(_) | Closed::SenderChanged { .. } => c.misaddressed += 1,
        }
    }

    /// Whether this is worth a warning: anything but the normal ends of a
    /// peer's connection.
    fn is_suspect(&self) -> bool {
        !matches!(
            self,
            Closed::Eof | Closed::Shutdown | Closed::Io(_) | Closed::Silent { sender: Some(_) }
        )
    }
}

async fn serve<M: Wire>(
    mut stream: TcpStream,
    addr: SocketAddr,
    ctx: &Inbound<M>,
    stop: &CancellationToken,
) {
    let closed = tokio::select! {
        biased;
        () = stop.cancelled() => return,
        closed = read_frames(&mut stream, ctx) => closed,
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

/// Reads, checks and delivers frames until something is wrong.
async fn read_frames<M: Wire>(stream: &mut TcpStream, ctx: &Inbound<M>) -> Closed {
    // The member this connection speaks for, set by its first good frame.
    let mut sender: Option<NodeId> = None;
    let mut prefix = [0u8; 4];
    loop {
        // A peer connects when it has a frame to send, so a new connection
        // gets the io timeout for its first frame; a silent socket holds a
        // slot no longer than that.
        let wait = match sender {
            Some(_) => ctx.idle_timeout,
            None => ctx.io_timeout,
        };
        match timeout(wait, stream.read(&mut prefix[..1])).await {
            Ok(Ok(0)) => return Closed::Eof,
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Closed::Io(e),
            Err(_) => return Closed::Silent { sender },
        }
        if let Err(closed) = read_within(stream, &mut prefix[1..], ctx).await {
            return closed;
        }
        let len = match codec::frame_len(prefix) {
            Ok(len) => len,
            Err(e) => return Closed::Frame(e),
        };
        let mut frame = vec![0u8; 4 + len];
        frame[..4].copy_from_slice(&prefix);
        if let Err(closed) = read_within(stream, &mut frame[4..], ctx).await {
            return closed;
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
