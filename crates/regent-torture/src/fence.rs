//! The fenced resource: a TCP server on `127.0.0.1` that takes a write only
//! if its fencing token is at least the largest it has taken so far, and
//! records every write, taken or refused, on CLOCK_MONOTONIC.
//!
//! # Protocol
//!
//! One request per line (`\n`-terminated, at most [`MAX_LINE`] bytes, ASCII),
//! one reply line per request, on one connection as long as the client likes:
//!
//! ```text
//! W <token> <id> <pid> <role> <seq>   a write: fencing token (u64), the
//!                                     leader id that holds it, the writer's
//!                                     pid as seen from outside any PID
//!                                     namespace, role `cmd` (the command
//!                                     regent started) or `bg` (its background
//!                                     job), and the writer's sequence number
//! OK <token>                          accepted: token >= every token accepted
//! REFUSED <max>                       refused: a larger token was accepted
//! ERR <reason>                        not a request; counted, never fatal
//! ```
//!
//! A line longer than [`MAX_LINE`] is answered `ERR` and the connection is
//! closed; nothing a client sends can make the fence panic.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

use regent_proc::mono_ns;

/// The longest request line the fence reads.
pub(crate) const MAX_LINE: usize = 512;

/// Who wrote: the command regent started, or its background job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Role {
    /// The command itself (`__torture-writer`).
    Cmd,
    /// The command's background job (`__torture-writer --background`).
    Bg,
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Cmd => "command",
            Self::Bg => "background job",
        })
    }
}

/// One write the fence received.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Write {
    /// When the fence received it, CLOCK_MONOTONIC nanoseconds.
    pub at_ns: u64,
    /// The fencing token it carried (`$REGENT_FENCING_TOKEN`).
    pub token: u64,
    /// The leader id it carried (`$REGENT_LEADER_ID`).
    pub id: String,
    /// The writer's pid, as seen from outside any PID namespace.
    pub pid: i32,
    /// The command, or its background job.
    pub role: Role,
    /// The writer's sequence number.
    pub seq: u64,
    /// Whether the fence took it.
    pub accepted: bool,
}

/// The fence's state: the largest token taken, and every write.
#[derive(Debug, Default)]
pub(crate) struct Fence {
    max: Option<u64>,
    writes: Vec<Write>,
    garbage: u64,
}

impl Fence {
    /// Handles one request line received at `at_ns`; returns the reply
    /// (without its newline).
    pub(crate) fn handle(&mut self, line: &[u8], at_ns: u64) -> String {
        match parse(line) {
            Ok((token, id, pid, role, seq)) => {
                // The invariant of a fenced resource: never take a token
                // below one already taken.
                let accepted = self.max.is_none_or(|max| token >= max);
                if accepted {
                    self.max = Some(token);
                }
                self.writes.push(Write {
                    at_ns,
                    token,
                    id: id.to_owned(),
                    pid,
                    role,
                    seq,
                    accepted,
                });
                if accepted {
                    format!("OK {token}")
                } else {
                    format!("REFUSED {}", self.max.unwrap_or_default())
                }
            }
            Err(reason) => {
                self.garbage += 1;
                format!("ERR {reason}")
            }
        }
    }

    /// Counts a line refused before parsing (too long).
    pub(crate) fn count_garbage(&mut self) {
        self.garbage += 1;
    }

    /// Every write so far, in the order received.
    pub(crate) fn writes(&self) -> &[Write] {
        &self.writes
    }

    /// How many request lines were not requests.
    pub(crate) fn garbage(&self) -> u64 {
        self.garbage
    }
}

type Request<'a> = (u64, &'a str, i32, Role, u64);

fn parse(line: &[u8]) -> Result<Request<'_>, &'static str> {
    let line = std::str::from_utf8(line).map_err(|_| "not UTF-8")?;
    let line = line.strip_suffix('\r').unwrap_or(line);
    let f: Vec<&str> = line.split(' ').collect();
    let [verb, token, id, pid, role, seq] = f[..] else {
        return Err("want: W <token> <id> <pid> <role> <seq>");
    };
    if verb != "W" {
        return Err("unknown request; want: W <token> <id> <pid> <role> <seq>");
    }
    let token = token.parse().map_err(|_| "token is not a number")?;
    if id.is_empty() || id.len() > 128 || !id.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("id must be 1-128 printable ASCII characters");
    }
    let pid = pid.parse().map_err(|_| "pid is not a number")?;
    let role = match role {
        "cmd" => Role::Cmd,
        "bg" => Role::Bg,
        _ => return Err("role must be cmd or bg"),
    };
    let seq = seq.parse().map_err(|_| "seq is not a number")?;
    Ok((token, id, pid, role, seq))
}

/// The fence's state, shared by its connections and the campaign.
pub(crate) type Shared = Arc<Mutex<Fence>>;

/// Locks the fence; a panic elsewhere does not hide the records.
pub(crate) fn lock(fence: &Shared) -> std::sync::MutexGuard<'_, Fence> {
    fence.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The running server: its address and state; [`Server::stop`] ends it.
pub(crate) struct Server {
    pub(crate) addr: SocketAddr,
    pub(crate) fence: Shared,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Server {
    /// Listens on a free port of `127.0.0.1`.
    ///
    /// # Errors
    ///
    /// When no socket can be bound.
    pub(crate) async fn start() -> std::io::Result<Self> {
        let listener = TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let fence = Shared::default();
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(accept(listener, fence.clone(), stopped));
        Ok(Self {
            addr,
            fence,
            stop,
            task,
        })
    }

    /// Closes the listener and every connection, and waits for them.
    pub(crate) async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

async fn accept(listener: TcpListener, fence: Shared, mut stopped: watch::Receiver<bool>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = stopped.changed() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    connections.spawn(serve(stream, fence.clone()));
                }
                // Out of descriptors, say: do not spin.
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    connections.shutdown().await;
}

/// Serves one connection until it closes, fails, or sends an overlong line.
async fn serve(mut stream: TcpStream, fence: Shared) {
    let mut buf = Vec::with_capacity(MAX_LINE);
    let mut chunk = [0u8; 1024];
    loop {
        let n = match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        let mut replies = String::new();
        let mut too_long = false;
        while let Some(end) = buf.iter().position(|&b| b == b'\n') {
            let at_ns = mono_ns();
            if end > MAX_LINE {
                lock(&fence).count_garbage();
                replies.push_str("ERR line too long\n");
            } else {
                replies.push_str(&lock(&fence).handle(&buf[..end], at_ns));
                replies.push('\n');
            }
            buf.drain(..=end);
        }
        if buf.len() > MAX_LINE {
            lock(&fence).count_garbage();
            replies.push_str("ERR line too long\n");
            too_long = true;
        }
        if !replies.is_empty() && stream.write_all(replies.as_bytes()).await.is_err() {
            return;
        }
        if too_long {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_tokens_at_or_above_the_largest_and_refuses_smaller() {
        let mut f = Fence::default();
        assert_eq!(f.handle(b"W 5 a 10 cmd 1", 1), "OK 5");
        assert_eq!(f.handle(b"W 5 a 11 bg 1", 2), "OK 5");
        assert_eq!(f.handle(b"W 7 b 12 cmd 1", 3), "OK 7");
        assert_eq!(f.handle(b"W 5 a 10 cmd 2", 4), "REFUSED 7");
        assert_eq!(f.handle(b"W 7 b 12 cmd 2\r", 5), "OK 7");
        let taken: Vec<_> = f.writes().iter().map(|w| (w.token, w.accepted)).collect();
        assert_eq!(
            taken,
            [(5, true), (5, true), (7, true), (5, false), (7, true)]
        );
        assert_eq!(f.writes()[1].role, Role::Bg);
        assert_eq!(f.garbage(), 0);
    }

    #[test]
    fn garbage_is_answered_and_counted_never_recorded() {
        let mut f = Fence::default();
        for line in [
            &b""[..],
            b"W",
            b"hello world",
            b"W x a 1 cmd 1",
            b"W -1 a 1 cmd 1",
            b"W 99999999999999999999999 a 1 cmd 1",
            b"W 1 a x cmd 1",
            b"W 1 a 1 daemon 1",
            b"W 1 a 1 cmd",
            b"W 1 a 1 cmd 1 extra",
            b"W 1  1 cmd 1",
            b"\xff\xfe W 1 a 1 cmd 1",
            b"W 1 \xc3\xa9 1 cmd 1",
        ] {
            assert!(f.handle(line, 0).starts_with("ERR "), "{line:?}");
        }
        assert!(f.writes().is_empty());
        assert_eq!(f.garbage(), 13);
        assert_eq!(f.handle(b"W 1 a 1 cmd 1", 0), "OK 1");
    }

    #[tokio::test]
    async fn server_replies_per_line_and_survives_an_overlong_line() {
        use tokio::io::AsyncBufReadExt;
        let server = Server::start().await.unwrap();
        let mut c = TcpStream::connect(server.addr).await.unwrap();
        c.write_all(b"W 3 a 1 cmd 1\nnonsense\nW 2 b 2 bg 1\n")
            .await
            .unwrap();
        let mut lines = tokio::io::BufReader::new(c).lines();
        assert_eq!(lines.next_line().await.unwrap().unwrap(), "OK 3");
        assert!(lines.next_line().await.unwrap().unwrap().starts_with("ERR"));
        assert_eq!(lines.next_line().await.unwrap().unwrap(), "REFUSED 3");
        let mut c = TcpStream::connect(server.addr).await.unwrap();
        c.write_all(&[b'x'; 4 * MAX_LINE]).await.unwrap();
        let mut lines = tokio::io::BufReader::new(c).lines();
        assert_eq!(
            lines.next_line().await.unwrap().unwrap(),
            "ERR line too long"
        );
        // The server still serves others.
        let mut c = TcpStream::connect(server.addr).await.unwrap();
        c.write_all(b"W 4 a 1 cmd 2\n").await.unwrap();
        let mut lines = tokio::io::BufReader::new(c).lines();
        assert_eq!(lines.next_line().await.unwrap().unwrap(), "OK 4");
        assert_eq!(lock(&server.fence).garbage(), 2);
        server.stop().await;
    }
}
