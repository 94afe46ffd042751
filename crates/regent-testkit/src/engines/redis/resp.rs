//! The little of Redis's protocol (RESP2) the kit speaks itself: one
//! connection, a command as an array of bulk strings, a reply of any type,
//! every read and write bounded in time. Readiness and health checks and
//! the Sentinels' answers go through it: asking `redis-cli` every few
//! milliseconds would start a process each time.

use std::io::{self, BufRead as _, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A reply, as RESP2 types it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Reply {
    /// `+OK`, `+PONG`.
    Simple(String),
    /// `-ERR …`, `-NOAUTH …`, `-LOADING …`.
    Error(String),
    /// `:42`.
    Integer(i64),
    /// `$…`: `None` for the null bulk string.
    Bulk(Option<Vec<u8>>),
    /// `*…`: `None` for the null array.
    Array(Option<Vec<Reply>>),
}

impl Reply {
    /// The text of a simple or bulk string.
    pub(super) fn text(&self) -> Option<String> {
        match self {
            Self::Simple(s) => Some(s.clone()),
            Self::Bulk(Some(b)) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        }
    }

    /// The items of a non-null array.
    pub(super) fn items(&self) -> Option<&[Reply]> {
        match self {
            Self::Array(Some(items)) => Some(items),
            _ => None,
        }
    }
}

/// Nesting deeper than this is not a reply the kit asked for.
const MAX_DEPTH: usize = 8;

/// One connection to a Redis server or Sentinel.
pub(super) struct Connection {
    stream: BufReader<TcpStream>,
}

impl Connection {
    /// Connects to `addr`; `timeout` bounds the connect and every later
    /// read and write.
    pub(super) fn open(addr: SocketAddr, timeout: Duration) -> io::Result<Self> {
        let stream = TcpStream::connect_timeout(&addr, timeout)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        stream.set_nodelay(true)?;
        Ok(Self {
            stream: BufReader::new(stream),
        })
    }

    /// Connects and, given `(user, password)`, authenticates
    /// (`AUTH user password`).
    ///
    /// An error reply to `AUTH` is an error of kind
    /// [`io::ErrorKind::PermissionDenied`].
    pub(super) fn open_as(
        addr: SocketAddr,
        auth: Option<(&str, &str)>,
        timeout: Duration,
    ) -> io::Result<Self> {
        let mut connection = Self::open(addr, timeout)?;
        if let Some((user, password)) = auth
            && let Reply::Error(e) = connection.call(&["AUTH", user, password])?
        {
            return Err(io::Error::new(io::ErrorKind::PermissionDenied, e));
        }
        Ok(connection)
    }

    /// Sends `args` as one command and reads its reply (an error reply is
    /// a [`Reply::Error`], not an `Err`).
    pub(super) fn call(&mut self, args: &[&str]) -> io::Result<Reply> {
        let mut request = format!("*{}\r\n", args.len()).into_bytes();
        for arg in args {
            request.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            request.extend_from_slice(arg.as_bytes());
            request.extend_from_slice(b"\r\n");
        }
        self.stream.get_mut().write_all(&request)?;
        self.read_reply(0)
    }

    fn read_reply(&mut self, depth: usize) -> io::Result<Reply> {
        let line = self.read_line()?;
        let mut chars = line.chars();
        let kind = chars.next();
        let rest = chars.as_str();
        Ok(match kind {
            Some('+') => Reply::Simple(rest.to_owned()),
            Some('-') => Reply::Error(rest.to_owned()),
            Some(':') => Reply::Integer(number(rest)?),
            Some('$') => match number(rest)? {
                n if n < 0 => Reply::Bulk(None),
                n => {
                    let len = usize::try_from(n).map_err(|_| invalid(&line))?;
                    let mut bytes = vec![0; len + 2];
                    self.stream.read_exact(&mut bytes)?;
                    if !bytes.ends_with(b"\r\n") {
                        return Err(invalid("a bulk string not ended by CRLF"));
                    }
                    bytes.truncate(len);
                    Reply::Bulk(Some(bytes))
                }
            },
            Some('*') if depth < MAX_DEPTH => match number(rest)? {
                n if n < 0 => Reply::Array(None),
                n => {
                    let len = usize::try_from(n).map_err(|_| invalid(&line))?;
                    let mut items = Vec::with_capacity(len.min(64));
                    for _ in 0..len {
                        items.push(self.read_reply(depth + 1)?);
                    }
                    Reply::Array(Some(items))
                }
            },
            _ => return Err(invalid(&line)),
        })
    }

    /// One line without its CRLF; never empty.
    fn read_line(&mut self) -> io::Result<String> {
        let mut line = String::new();
        if self.stream.read_line(&mut line)? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        match line.strip_suffix("\r\n") {
            Some(l) if !l.is_empty() => Ok(l.to_owned()),
            _ => Err(invalid(&line)),
        }
    }
}

fn number(text: &str) -> io::Result<i64> {
    text.parse().map_err(|_| invalid(text))
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("not a RESP2 reply: {what:?}"),
    )
}

/// Whether the server at `addr` answers `PING` with `PONG` (after `AUTH`
/// when given credentials) within `timeout` per step: not while it loads
/// its data (`-LOADING`), nor while it is paused.
pub(super) fn pings(addr: SocketAddr, auth: Option<(&str, &str)>, timeout: Duration) -> bool {
    Connection::open_as(addr, auth, timeout)
        .and_then(|mut c| c.call(&["PING"]))
        .is_ok_and(|reply| reply == Reply::Simple("PONG".into()))
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;
    use std::thread;

    use super::*;

    /// A server that reads one request and answers `answer`.
    fn answering(answer: &'static [u8]) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut request = [0; 256];
            let _ = stream.read(&mut request);
            stream.write_all(answer).unwrap();
        });
        addr
    }

    fn call(answer: &'static [u8]) -> io::Result<Reply> {
        Connection::open(answering(answer), Duration::from_secs(5))?.call(&["X"])
    }

    #[test]
    fn every_reply_type_is_read() {
        assert_eq!(call(b"+PONG\r\n").unwrap(), Reply::Simple("PONG".into()));
        assert_eq!(
            call(b"-LOADING busy\r\n").unwrap(),
            Reply::Error("LOADING busy".into())
        );
        assert_eq!(call(b":-3\r\n").unwrap(), Reply::Integer(-3));
        assert_eq!(call(b"$-1\r\n").unwrap(), Reply::Bulk(None));
        assert_eq!(call(b"*-1\r\n").unwrap(), Reply::Array(None));
        let reply = call(b"*3\r\n$9\r\n127.0.0.1\r\n$0\r\n\r\n*1\r\n:1\r\n").unwrap();
        let items = reply.items().unwrap();
        assert_eq!(items[0].text().as_deref(), Some("127.0.0.1"));
        assert_eq!(items[1].text().as_deref(), Some(""));
        assert_eq!(items[2], Reply::Array(Some(vec![Reply::Integer(1)])));
    }

    #[test]
    fn garbage_and_a_closed_connection_are_errors() {
        assert_eq!(
            call(b"HTTP/1.1 400\r\n").unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
        assert_eq!(
            call(b"$5\r\nab").unwrap_err().kind(),
            io::ErrorKind::UnexpectedEof
        );
    }
}
