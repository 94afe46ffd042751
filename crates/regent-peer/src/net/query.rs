//! The querier's side of the view query: ask a running node for its view
//! once ([`query`]), or follow it ([`watch_view`]).

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout, timeout_at};

use super::replay::SeqClock;
use crate::codec::{self, Control, DecodeError, EncodeError, Envelope, PeerView, Secret};
use crate::epoch::NodeId;

/// How long a [`ViewWatch`] asks the node to hold each query while its view
/// does not change: the watch hears from the node at least this often, so
/// it notices a node that went silent within this and its timeout.
const WATCH_WAIT: Duration = Duration::from_secs(5);

/// Why a view query got no view.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QueryError {
    /// The node could not be reached: the connection was refused, or not
    /// made within the timeout.
    #[error("cannot connect to {addr}")]
    Connect {
        /// The address asked.
        addr: SocketAddr,
        /// The connection's error (`TimedOut` past the timeout).
        #[source]
        source: io::Error,
    },
    /// The node did not answer within the timeout, or closed the connection
    /// without answering. A node drops a query it cannot authenticate
    /// without a word, so the likeliest cause is a secret that is not the
    /// group's; the others are a query naming another node than the one at
    /// the address, a node serving its maximum of queriers
    /// ([`NodeOptions::max_queriers`](super::NodeOptions::max_queriers)),
    /// a node stopping, and wall clocks further apart than
    /// [`MAX_CLOCK_SKEW`](super::MAX_CLOCK_SKEW).
    #[error("no answer from {addr} within {timeout:?} (is the secret the group's?)")]
    NoAnswer {
        /// The address asked.
        addr: SocketAddr,
        /// How long the querier waited.
        timeout: Duration,
    },
    /// The connection failed after it was made, or the answer was cut
    /// short.
    #[error("the connection to {addr} failed")]
    Io {
        /// The address asked.
        addr: SocketAddr,
        /// The socket's error.
        #[source]
        source: io::Error,
    },
    /// The query could not be framed (it always can: a bug).
    #[error("the query could not be framed")]
    Encode(#[source] EncodeError),
    /// The answer is not a VIEW authenticated by the secret and answering
    /// this query: a node of another version, or something else listening
    /// at the address.
    #[error("the answer from {addr} is not a view")]
    BadAnswer {
        /// The address asked.
        addr: SocketAddr,
        /// What is wrong with it.
        #[source]
        source: DecodeError,
    },
    /// The node at the address is not the one the query named.
    #[error("{addr} answered as node {found}, not node {expected}")]
    OtherNode {
        /// The address asked.
        addr: SocketAddr,
        /// The node the query named.
        expected: NodeId,
        /// The node that answered.
        found: NodeId,
    },
}

/// Asks the node at `addr` for its view, once, on a connection of its own.
///
/// `node` names the node expected there (`None`: whichever it is); the
/// query, like every frame, is authenticated with `secret`, which must be
/// the group's. The querier needs no id and no place in the membership:
/// any holder of the secret can ask. A node answers at once, from the view
/// it publishes, without involving its election.
///
/// `timeout` bounds the connection and the wait for the answer, each.
///
/// # Errors
///
/// A [`QueryError`]: [`Connect`](QueryError::Connect) for a node that
/// cannot be reached, [`NoAnswer`](QueryError::NoAnswer) for one that does
/// not answer (typically: another secret), and the others for a broken
/// connection or an answer that is not a view.
///
/// # Cancel safety
///
/// Cancel-safe: a cancelled query closes its connection, and the node
/// forgets it.
pub async fn query(
    addr: SocketAddr,
    node: Option<NodeId>,
    secret: &Secret,
    timeout: Duration,
) -> Result<PeerView, QueryError> {
    let mut conn = Conn::open(addr, timeout).await?;
    conn.ask(node, secret, Duration::ZERO, timeout).await
}

/// Follows the view of the node at `addr`: [`ViewWatch::next`] returns its
/// view, then each view that differs from the last one returned.
///
/// Nothing happens until the first [`next`](ViewWatch::next). The watch
/// keeps one connection and asks the node to hold each query until its
/// view changes (a long poll: one answer per query, the node pushes
/// nothing unasked), so a change is seen as soon as the node publishes it;
/// the node answers at least every few seconds with an unchanged view,
/// which is how the watch notices a node that went silent. `node`,
/// `secret` and `timeout` are as for [`query`]; `timeout` is added to the
/// time the node may hold a query.
pub fn watch_view(
    addr: SocketAddr,
    node: Option<NodeId>,
    secret: Secret,
    timeout: Duration,
) -> ViewWatch {
    ViewWatch {
        addr,
        node,
        secret,
        timeout,
        conn: None,
        last: None,
    }
}

/// A view followed by [`watch_view`].
#[derive(Debug)]
pub struct ViewWatch {
    addr: SocketAddr,
    node: Option<NodeId>,
    secret: Secret,
    timeout: Duration,
    /// The connection, while it is sound: taken out during a call, put
    /// back after a good answer, so a failed or cancelled call leaves none.
    conn: Option<Conn>,
    /// The last view returned.
    last: Option<PeerView>,
}

impl ViewWatch {
    /// The node's view, the first time; then the next view that differs
    /// from the last one returned (in any field: in quorum mode the lease's
    /// remaining time changes with every renewal). Views that come and go
    /// between two answers are not seen: a watch reports states, not every
    /// event.
    ///
    /// After an error the next call connects again, so a caller that
    /// retries follows the node across its restarts.
    ///
    /// # Errors
    ///
    /// A [`QueryError`], as for [`query`]; the connection is then closed.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: a cancelled call closes the connection and loses no
    /// view; the next call connects again and returns the node's view then
    /// if it differs from the last one returned.
    pub async fn next(&mut self) -> Result<PeerView, QueryError> {
        loop {
            let mut conn = match self.conn.take() {
                Some(conn) => conn,
                None => Conn::open(self.addr, self.timeout).await?,
            };
            let view = conn
                .ask(self.node, &self.secret, WATCH_WAIT, self.timeout)
                .await?;
            self.conn = Some(conn);
            if self.last.as_ref() != Some(&view) {
                self.last = Some(view.clone());
                return Ok(view);
            }
        }
    }

    /// The address watched.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

/// A querier's connection.
#[derive(Debug)]
struct Conn {
    addr: SocketAddr,
    stream: TcpStream,
    clock: SeqClock,
}

impl Conn {
    async fn open(addr: SocketAddr, within: Duration) -> Result<Self, QueryError> {
        let stream = match timeout(within, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(source)) => return Err(QueryError::Connect { addr, source }),
            Err(_) => {
                return Err(QueryError::Connect {
                    addr,
                    source: io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("not connected within {within:?}"),
                    ),
                });
            }
        };
        // One small frame each way: no batching delay.
        let _ = stream.set_nodelay(true);
        Ok(Self {
            addr,
            stream,
            clock: SeqClock::new(),
        })
    }

    async fn read_rest(
        &mut self,
        buf: &mut [u8],
        deadline: Instant,
        within: Duration,
    ) -> Result<(), QueryError> {
        let addr = self.addr;
        match timeout_at(deadline, self.stream.read_exact(buf)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(source)) => Err(QueryError::Io { addr, source }),
            Err(_) => Err(QueryError::Io {
                addr,
                source: io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("the answer was not finished within {within:?}"),
                ),
            }),
        }
    }

    /// Sends one QUERY and reads its VIEW: the node may hold the query for
    /// `wait`, and the answer must come within `wait + within`.
    async fn ask(
        &mut self,
        node: Option<NodeId>,
        secret: &Secret,
        wait: Duration,
        within: Duration,
    ) -> Result<PeerView, QueryError> {
        let addr = self.addr;
        let seq = self.clock.next(SystemTime::now());
        let query = Envelope {
            from: NodeId::ANY,
            to: node.unwrap_or(NodeId::ANY),
            seq,
            message: Control::Query { wait },
        };
        let frame = codec::encode(secret, &query).map_err(QueryError::Encode)?;
        match timeout(within, self.stream.write_all(&frame)).await {
            Ok(Ok(())) => {}
            Ok(Err(source)) => return Err(QueryError::Io { addr, source }),
            Err(_) => {
                return Err(QueryError::NoAnswer {
                    addr,
                    timeout: within,
                });
            }
        }
        let patience = wait.saturating_add(within);
        let no_answer = QueryError::NoAnswer {
            addr,
            timeout: patience,
        };
        let mut prefix = [0u8; 4];
        match timeout(patience, self.stream.read(&mut prefix[..1])).await {
            Ok(Ok(1..)) => {}
            // Closed (or reset) unanswered: what a node does to a query it
            // does not accept.
            Ok(Ok(0)) => return Err(no_answer),
            Ok(Err(e)) if e.kind() == io::ErrorKind::ConnectionReset => return Err(no_answer),
            Ok(Err(source)) => return Err(QueryError::Io { addr, source }),
            Err(_) => return Err(no_answer),
        }
        // The rest of the frame comes at once after its first byte.
        let deadline = Instant::now() + within;
        self.read_rest(&mut prefix[1..], deadline, within).await?;
        let len =
            codec::frame_len(prefix).map_err(|source| QueryError::BadAnswer { addr, source })?;
        let mut answer = vec![0u8; 4 + len];
        answer[..4].copy_from_slice(&prefix);
        self.read_rest(&mut answer[4..], deadline, within).await?;
        let envelope = codec::decode::<Control>(secret, &answer)
            .map_err(|source| QueryError::BadAnswer { addr, source })?;
        let bad = |what| QueryError::BadAnswer {
            addr,
            source: DecodeError::Malformed { what },
        };
        let Control::View { query_seq, view } = envelope.message else {
            return Err(bad("a QUERY where a VIEW was expected"));
        };
        if query_seq != seq {
            return Err(bad("the answer to another query"));
        }
        if envelope.to != NodeId::ANY || envelope.from != view.node {
            return Err(bad("a VIEW addressed otherwise than a querier's"));
        }
        if let Some(expected) = node
            && expected != view.node
        {
            return Err(QueryError::OtherNode {
                addr,
                expected,
                found: view.node,
            });
        }
        Ok(view)
    }
}
