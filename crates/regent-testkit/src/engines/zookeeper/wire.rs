//! Just enough of ZooKeeper's client protocol for the kit: its four-letter
//! words, and a session that creates and reads persistent nodes (jute
//! records over TCP, each frame a big-endian length and the record). A
//! ZooKeeper client crate would be the larger part of the kit, and would
//! pull an async runtime into every test that only needs a chroot node.

use std::io::{self, Read as _, Write as _};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::Duration;

/// `OpCode.create`.
const OP_CREATE: i32 = 1;
/// `OpCode.getData`.
const OP_GET_DATA: i32 = 4;
/// `OpCode.closeSession`.
const OP_CLOSE_SESSION: i32 = -11;

/// `KeeperException.Code.NONODE`.
const ERR_NO_NODE: i32 = -101;
/// `KeeperException.Code.NODEEXISTS`.
const ERR_NODE_EXISTS: i32 = -110;

/// `ZooDefs.Perms.ALL`.
const PERMS_ALL: i32 = 31;

/// The session timeout the kit's sessions ask for; the server clamps it to
/// its bounds. The kit closes its sessions; this only bounds how long a
/// session of a kit that died lingers.
const SESSION_TIMEOUT: Duration = Duration::from_secs(2);

/// The largest frame the kit reads: far above what it asks for, far below
/// what a corrupt length would make it allocate.
const MAX_FRAME: usize = 1 << 20;

/// Sends the four-letter word `word` (such as `srvr`) to the client port
/// at `addr` and returns the answer, read until the server closes the
/// connection; every step bounded by `timeout`.
pub(super) fn four_letter_word(
    addr: SocketAddr,
    word: &str,
    timeout: Duration,
) -> io::Result<String> {
    let mut stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    stream.write_all(word.as_bytes())?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    Ok(String::from_utf8_lossy(&answer).into_owned())
}

/// A ZooKeeper session over one connection, closed on drop.
pub(super) struct Session {
    stream: TcpStream,
    xid: i32,
    closed: bool,
}

impl Session {
    /// Connects to the server at `addr` and opens a session; every step
    /// bounded by `timeout`.
    pub(super) fn open(addr: SocketAddr, timeout: Duration) -> io::Result<Self> {
        let stream = TcpStream::connect_timeout(&addr, timeout)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        stream.set_nodelay(true)?;
        // Nothing to close until the server opened the session.
        let mut session = Self {
            stream,
            xid: 0,
            closed: true,
        };
        // ConnectRequest: protocolVersion, lastZxidSeen, timeOut, sessionId,
        // passwd, readOnly.
        let mut request = Vec::new();
        put_i32(&mut request, 0);
        put_i64(&mut request, 0);
        put_i32(
            &mut request,
            i32::try_from(SESSION_TIMEOUT.as_millis()).unwrap_or(i32::MAX),
        );
        put_i64(&mut request, 0);
        put_buffer(&mut request, &[0; 16]);
        request.push(0);
        session.send(&request)?;
        // ConnectResponse: protocolVersion, timeOut, sessionId, passwd, …
        let response = session.receive()?;
        let mut reader = Reader::new(&response);
        let _protocol_version = reader.i32()?;
        let timeout = reader.i32()?;
        if timeout <= 0 {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionRefused,
                "the ZooKeeper server refused the session (not serving?)",
            ));
        }
        session.closed = false;
        Ok(session)
    }

    /// Creates the persistent node `path` holding `data`, open to all
    /// (`world:anyone`). `Ok(false)` if it exists already.
    ///
    /// # Errors
    ///
    /// When the server could not be reached or answered another error
    /// (such as a missing parent).
    pub(super) fn create(&mut self, path: &str, data: &[u8]) -> io::Result<bool> {
        // CreateRequest: path, data, acl, flags (0: persistent).
        let mut body = Vec::new();
        put_string(&mut body, path);
        put_buffer(&mut body, data);
        put_i32(&mut body, 1);
        put_i32(&mut body, PERMS_ALL);
        put_string(&mut body, "world");
        put_string(&mut body, "anyone");
        put_i32(&mut body, 0);
        match self.call(OP_CREATE, &body)? {
            (0, _) => Ok(true),
            (ERR_NODE_EXISTS, _) => Ok(false),
            (err, _) => Err(server_error("create", path, err)),
        }
    }

    /// The data of the node `path`, or `None` if there is no such node.
    ///
    /// # Errors
    ///
    /// When the server could not be reached or answered another error.
    pub(super) fn get_data(&mut self, path: &str) -> io::Result<Option<Vec<u8>>> {
        // GetDataRequest: path, watch.
        let mut body = Vec::new();
        put_string(&mut body, path);
        body.push(0);
        match self.call(OP_GET_DATA, &body)? {
            // GetDataResponse: data, stat.
            (0, response) => Ok(Some(Reader::new(&response).buffer()?.to_vec())),
            (ERR_NO_NODE, _) => Ok(None),
            (err, _) => Err(server_error("get data of", path, err)),
        }
    }

    /// Closes the session: the server ends it at once instead of after its
    /// timeout.
    ///
    /// # Errors
    ///
    /// When the server could not be reached.
    pub(super) fn close(mut self) -> io::Result<()> {
        self.closed = true;
        self.call(OP_CLOSE_SESSION, &[])?;
        let _ = self.stream.shutdown(Shutdown::Both);
        Ok(())
    }

    /// Sends a request with a new xid and returns the error code and the
    /// rest of its reply (skipping anything else the server sends, such as
    /// notifications).
    fn call(&mut self, op: i32, body: &[u8]) -> io::Result<(i32, Vec<u8>)> {
        self.xid += 1;
        let mut request = Vec::with_capacity(8 + body.len());
        put_i32(&mut request, self.xid);
        put_i32(&mut request, op);
        request.extend_from_slice(body);
        self.send(&request)?;
        loop {
            let reply = self.receive()?;
            let mut reader = Reader::new(&reply);
            // ReplyHeader: xid, zxid, err.
            let xid = reader.i32()?;
            let _zxid = reader.i64()?;
            let err = reader.i32()?;
            if xid == self.xid {
                return Ok((err, reader.rest().to_vec()));
            }
        }
    }

    fn send(&mut self, record: &[u8]) -> io::Result<()> {
        let len = i32::try_from(record.len()).map_err(io::Error::other)?;
        let mut frame = Vec::with_capacity(4 + record.len());
        put_i32(&mut frame, len);
        frame.extend_from_slice(record);
        self.stream.write_all(&frame)
    }

    fn receive(&mut self) -> io::Result<Vec<u8>> {
        let mut len = [0; 4];
        self.stream.read_exact(&mut len)?;
        let len = usize::try_from(i32::from_be_bytes(len))
            .ok()
            .filter(|len| *len <= MAX_FRAME)
            .ok_or_else(|| invalid("a frame length out of range"))?;
        let mut frame = vec![0; len];
        self.stream.read_exact(&mut frame)?;
        Ok(frame)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if !self.closed {
            self.closed = true;
            let _ = self.call(OP_CLOSE_SESSION, &[]);
        }
    }
}

fn server_error(what: &str, path: &str, err: i32) -> io::Error {
    io::Error::other(format!(
        "ZooKeeper could not {what} {path}: error code {err}"
    ))
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("ZooKeeper sent {what}"))
}

fn put_i32(out: &mut Vec<u8>, value: i32) {
    out.extend_from_slice(&value.to_be_bytes());
}

fn put_i64(out: &mut Vec<u8>, value: i64) {
    out.extend_from_slice(&value.to_be_bytes());
}

/// A jute `buffer`: its length, then its bytes.
fn put_buffer(out: &mut Vec<u8>, bytes: &[u8]) {
    put_i32(out, i32::try_from(bytes.len()).unwrap_or(i32::MAX));
    out.extend_from_slice(bytes);
}

/// A jute `ustring`: as a buffer of its UTF-8.
fn put_string(out: &mut Vec<u8>, s: &str) {
    put_buffer(out, s.as_bytes());
}

/// Reads jute fields off a received record.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(record: &'a [u8]) -> Self {
        Self { rest: record }
    }

    fn take(&mut self, n: usize) -> io::Result<&'a [u8]> {
        if self.rest.len() < n {
            return Err(invalid("a record shorter than its fields"));
        }
        let (taken, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(taken)
    }

    fn i32(&mut self) -> io::Result<i32> {
        let bytes = self.take(4)?;
        Ok(i32::from_be_bytes(bytes.try_into().expect("4 bytes")))
    }

    fn i64(&mut self) -> io::Result<i64> {
        let bytes = self.take(8)?;
        Ok(i64::from_be_bytes(bytes.try_into().expect("8 bytes")))
    }

    /// A jute `buffer`; a length of -1 (null) reads as empty.
    fn buffer(&mut self) -> io::Result<&'a [u8]> {
        let len = self.i32()?;
        match usize::try_from(len) {
            Ok(len) => self.take(len),
            Err(_) if len == -1 => Ok(&[]),
            Err(_) => Err(invalid("a negative buffer length")),
        }
    }

    fn rest(&self) -> &'a [u8] {
        self.rest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_fields_it_wrote() {
        let mut record = Vec::new();
        put_i32(&mut record, -110);
        put_i64(&mut record, 0x2_0000_0001);
        put_string(&mut record, "/tN");
        put_i32(&mut record, -1);
        let mut reader = Reader::new(&record);
        assert_eq!(reader.i32().unwrap(), -110);
        assert_eq!(reader.i64().unwrap(), 0x2_0000_0001);
        assert_eq!(reader.buffer().unwrap(), b"/tN");
        assert_eq!(reader.buffer().unwrap(), b"", "a null buffer");
        assert!(reader.rest().is_empty());
        assert!(reader.i32().is_err(), "past the end");
    }
}
