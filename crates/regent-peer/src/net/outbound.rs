//! One task per peer: a bounded queue of encoded frames and the TCP
//! connection they are written to.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::time::{Instant, sleep, sleep_until, timeout};
use tokio_util::sync::CancellationToken;

use super::replay::MAX_CLOCK_SKEW;
use super::view::Stats;
use crate::epoch::NodeId;
use crate::machine::after;

/// A frame that waited longer than this is dropped unsent: the receiver
/// would come close to refusing it as too old, and no algorithm wants a
/// message that late.
const MAX_FRAME_AGE: Duration = Duration::from_secs(MAX_CLOCK_SKEW.as_secs() / 2);

/// The frames waiting for one peer, oldest first; never more than the
/// capacity (the driver drops the oldest rather than wait).
#[derive(Debug)]
pub(super) struct PeerQueue {
    state: Mutex<QueueState>,
    capacity: usize,
    /// Wakes the link when a frame is queued (a permit is stored if it is
    /// not waiting, so no wake-up is lost).
    notify: Notify,
}

#[derive(Debug, Default)]
struct QueueState {
    frames: VecDeque<(Instant, Vec<u8>)>,
    /// The queue overflowed since it was last empty (logged once).
    overflowing: bool,
}

/// What [`PeerQueue::push`] did.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Pushed {
    /// Queued.
    Queued,
    /// Queued, and the oldest frame dropped to make room; `first` if this
    /// starts an overflow (the queue was not overflowing already).
    DroppedOldest { first: bool },
}

impl PeerQueue {
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            state: Mutex::new(QueueState::default()),
            capacity: capacity.max(1),
            notify: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, QueueState> {
        // Nothing panics while holding the lock; a poisoned one is still
        // consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `frame`, dropping the oldest if full. Never waits.
    pub(super) fn push(&self, frame: Vec<u8>, now: Instant) -> Pushed {
        let pushed = {
            let mut s = self.lock();
            let pushed = if s.frames.len() >= self.capacity {
                s.frames.pop_front();
                let first = !s.overflowing;
                s.overflowing = true;
                Pushed::DroppedOldest { first }
            } else {
                Pushed::Queued
            };
            s.frames.push_back((now, frame));
            pushed
        };
        self.notify.notify_one();
        pushed
    }

    /// The oldest frame young enough to send, and how many older ones were
    /// dropped on the way.
    fn pop(&self, now: Instant) -> (Option<Vec<u8>>, u64) {
        let mut s = self.lock();
        let mut expired = 0;
        let frame = loop {
            match s.frames.pop_front() {
                Some((at, _)) if now.saturating_duration_since(at) > MAX_FRAME_AGE => expired += 1,
                Some((_, frame)) => break Some(frame),
                None => break None,
            }
        };
        if s.frames.is_empty() {
            s.overflowing = false;
        }
        (frame, expired)
    }

    /// Drops every queued frame; returns how many.
    fn clear(&self) -> u64 {
        let mut s = self.lock();
        s.overflowing = false;
        let n = s.frames.len();
        s.frames.clear();
        u64::try_from(n).unwrap_or(u64::MAX)
    }

    fn is_empty(&self) -> bool {
        self.lock().frames.is_empty()
    }
}

/// The outbound side of one peer.
#[derive(Debug)]
pub(super) struct Link {
    pub(super) me: NodeId,
    pub(super) peer: NodeId,
    pub(super) addr: SocketAddr,
    pub(super) queue: Arc<PeerQueue>,
    pub(super) io_timeout: Duration,
    /// Close the connection after this long with nothing to send (half
    /// the receivers' idle timeout, so that the sender, not the receiver,
    /// closes a quiet connection and never writes into one being closed).
    pub(super) idle_after: Duration,
    pub(super) backoff: (Duration, Duration),
    pub(super) stats: Arc<Stats>,
    /// Stop at once.
    pub(super) stop: CancellationToken,
    /// Write what is queued (one connection attempt, no backoff), close
    /// the connection cleanly, and stop.
    pub(super) drain: CancellationToken,
}

impl Link {
    /// Runs until `stop`, or until `drain` and the queue is written.
    pub(super) async fn run(self) {
        let mut stream: Option<TcpStream> = None;
        let mut delay = self.backoff.0;
        let mut retry_at: Option<Instant> = None;
        let mut unreachable = false;
        loop {
            if self.queue.is_empty() {
                if self.drain.is_cancelled() {
                    if let Some(mut s) = stream.take() {
                        let _ = timeout(self.io_timeout, s.shutdown()).await;
                    }
                    return;
                }
                tokio::select! {
                    biased;
                    () = self.stop.cancelled() => return,
                    () = self.drain.cancelled() => {}
                    () = self.queue.notify.notified() => {}
                    () = closed_by_peer(stream.as_mut()) => {
                        tracing::debug!(node = %self.me, peer = %self.peer, "the peer closed our connection");
                        stream = None;
                    }
                    () = sleep(self.idle_after), if stream.is_some() => {
                        tracing::debug!(node = %self.me, peer = %self.peer, "closing an idle connection");
                        stream = None;
                    }
                }
                continue;
            }
            if stream.is_none() {
                if let Some(at) = retry_at
                    && !self.drain.is_cancelled()
                    && Instant::now() < at
                {
                    tokio::select! {
                        biased;
                        () = self.stop.cancelled() => return,
                        () = self.drain.cancelled() => {}
                        () = sleep_until(at) => {}
                    }
                    continue;
                }
                let connected = tokio::select! {
                    biased;
                    () = self.stop.cancelled() => return,
                    r = timeout(self.io_timeout, TcpStream::connect(self.addr)) => r,
                };
                let failure = match connected {
                    Ok(Ok(s)) => {
                        // Small frames, sent as they come.
                        let _ = s.set_nodelay(true);
                        stream = Some(s);
                        delay = self.backoff.0;
                        retry_at = None;
                        if unreachable {
                            tracing::info!(node = %self.me, peer = %self.peer, addr = %self.addr, "peer reachable again");
                            unreachable = false;
                        }
                        None
                    }
                    Ok(Err(e)) => Some(e.to_string()),
                    Err(_) => Some("connection timed out".to_owned()),
                };
                if let Some(error) = failure {
                    // Best effort: what waited for an unreachable peer is
                    // stale by the time it can be reached.
                    let dropped = self.queue.clear();
                    self.stats.bump(|c| {
                        c.connect_failures += 1;
                        c.frames_dropped += dropped;
                    });
                    if unreachable {
                        tracing::debug!(node = %self.me, peer = %self.peer, addr = %self.addr, %error, retry_in = ?delay, "peer still unreachable");
                    } else {
                        tracing::warn!(node = %self.me, peer = %self.peer, addr = %self.addr, %error, "peer unreachable; its messages are dropped until it can be reached");
                        unreachable = true;
                    }
                    if self.drain.is_cancelled() {
                        return;
                    }
                    retry_at = Some(after(Instant::now(), delay));
                    delay = (delay * 2).min(self.backoff.1);
                    continue;
                }
            }
            if stream.as_ref().is_some_and(closed_already) {
                // Writing into a connection the peer has closed would lose
                // the frame without an error: connect again first.
                tracing::debug!(node = %self.me, peer = %self.peer, "the peer closed our connection");
                stream = None;
                continue;
            }
            let (frame, expired) = self.queue.pop(Instant::now());
            if expired > 0 {
                self.stats.bump(|c| c.frames_dropped += expired);
            }
            let (Some(frame), Some(s)) = (frame, stream.as_mut()) else {
                continue;
            };
            let wrote = tokio::select! {
                biased;
                () = self.stop.cancelled() => return,
                r = timeout(self.io_timeout, s.write_all(&frame)) => r,
            };
            if let Ok(Ok(())) = wrote {
                self.stats.bump(|c| c.frames_sent += 1);
            } else {
                tracing::debug!(node = %self.me, peer = %self.peer, "a write failed or timed out; reconnecting for the next frame");
                self.stats.bump(|c| c.frames_dropped += 1);
                stream = None;
            }
        }
    }
}

/// Whether the peer has already closed `stream` (or sent something, which
/// a receiver never does), as far as the socket knows without waiting.
fn closed_already(stream: &TcpStream) -> bool {
    let mut buf = [0u8; 16];
    !matches!(stream.try_read(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

/// Completes when the peer closes `stream` (or sends anything, which a
/// receiver never does); never without a stream.
async fn closed_by_peer(stream: Option<&mut TcpStream>) {
    let Some(s) = stream else {
        return std::future::pending().await;
    };
    let mut buf = [0u8; 16];
    let _ = s.read(&mut buf).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_full_queue_drops_its_oldest_and_reports_the_overflow_once() {
        let q = PeerQueue::new(2);
        let now = Instant::now();
        assert_eq!(q.push(vec![1], now), Pushed::Queued);
        assert_eq!(q.push(vec![2], now), Pushed::Queued);
        assert_eq!(q.push(vec![3], now), Pushed::DroppedOldest { first: true });
        assert_eq!(q.push(vec![4], now), Pushed::DroppedOldest { first: false });
        assert_eq!(q.pop(now), (Some(vec![3]), 0));
        assert_eq!(q.pop(now), (Some(vec![4]), 0));
        assert_eq!(q.pop(now), (None, 0));
        assert_eq!(q.push(vec![5], now), Pushed::Queued);
        assert_eq!(q.push(vec![6], now), Pushed::Queued);
        assert_eq!(
            q.push(vec![7], now),
            Pushed::DroppedOldest { first: true },
            "a new overflow once the queue has drained"
        );
        assert_eq!(q.clear(), 2);
        assert!(q.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn frames_that_waited_too_long_are_dropped_unsent() {
        let q = PeerQueue::new(4);
        let t = Instant::now();
        let _ = q.push(vec![1], t);
        let _ = q.push(vec![2], t + MAX_FRAME_AGE);
        assert_eq!(
            q.pop(t + MAX_FRAME_AGE + Duration::from_millis(1)),
            (Some(vec![2]), 1)
        );
    }
}
