//! The one question the kit asks of a server or a pooler over PostgreSQL's
//! wire protocol: does it let a user in? A start-up message answered by
//! "authentication ok" and then "ready for query" means yes; an error
//! ("the database system is starting up", "… is in recovery mode"), a
//! request for a password, silence (a paused server: the kernel accepts the
//! connection, nobody answers) or a refused connection means no.

use std::io::{self, Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Protocol 3.0.
const PROTOCOL_VERSION: i32 = 3 << 16;

/// Whether the server or pooler at `addr` lets `user` into `database` now,
/// answering within `timeout`.
pub(super) fn accepts(addr: SocketAddr, user: &str, database: &str, timeout: Duration) -> bool {
    ask(addr, user, database, timeout).unwrap_or(false)
}

fn ask(addr: SocketAddr, user: &str, database: &str, timeout: Duration) -> io::Result<bool> {
    let deadline = Instant::now() + timeout;
    let mut stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_nodelay(true)?;
    stream.write_all(&startup_message(user, database))?;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(false);
        }
        stream.set_read_timeout(Some(left))?;
        let mut header = [0u8; 5];
        stream.read_exact(&mut header)?;
        let len = i32::from_be_bytes([header[1], header[2], header[3], header[4]]);
        let len = usize::try_from(len)
            .ok()
            .and_then(|l| l.checked_sub(4))
            .filter(|&l| l <= 1 << 16)
            .ok_or_else(|| io::Error::other("not a PostgreSQL message"))?;
        let mut body = vec![0u8; len];
        stream.read_exact(&mut body)?;
        match header[0] {
            // Authentication: 0 is "ok"; anything else asks for a password.
            b'R' if body.get(..4) == Some(&[0, 0, 0, 0]) => {}
            b'R' => return Ok(false),
            // Parameter status, backend key data, notice: read on.
            b'S' | b'K' | b'N' => {}
            b'Z' => {
                // Terminate, politely; the answer is in.
                let _ = stream.write_all(&[b'X', 0, 0, 0, 4]);
                return Ok(true);
            }
            _ => return Ok(false),
        }
    }
}

fn startup_message(user: &str, database: &str) -> Vec<u8> {
    let mut body = PROTOCOL_VERSION.to_be_bytes().to_vec();
    for (key, value) in [
        ("user", user),
        ("database", database),
        ("application_name", "regent-testkit"),
    ] {
        body.extend_from_slice(key.as_bytes());
        body.push(0);
        body.extend_from_slice(value.as_bytes());
        body.push(0);
    }
    body.push(0);
    let len = i32::try_from(body.len() + 4).expect("a short start-up message");
    let mut message = len.to_be_bytes().to_vec();
    message.extend_from_slice(&body);
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_startup_message_is_its_length_the_version_and_pairs() {
        let m = startup_message("u", "d");
        assert_eq!(&m[..4], &i32::try_from(m.len()).unwrap().to_be_bytes());
        assert_eq!(&m[4..8], &[0, 3, 0, 0]);
        assert!(m.ends_with(b"application_name\0regent-testkit\0\0"));
        assert_eq!(&m[8..23], b"user\0u\0database");
    }

    #[test]
    fn nobody_listening_is_no() {
        let port = crate::ports::free_ports(1).unwrap()[0];
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        assert!(!accepts(
            addr,
            "postgres",
            "postgres",
            Duration::from_millis(200)
        ));
    }
}
