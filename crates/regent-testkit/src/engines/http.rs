//! Just enough HTTP/1.0 over a [`TcpStream`] for health checks and JSON
//! status calls; an HTTP client crate would be the larger part of the kit.
//! [`Response`] is public (as `engines::HttpResponse`) for engines whose
//! tests talk to the engine's HTTP API through the kit, such as Consul's.

use std::io::{self, Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A response of an engine's HTTP API: the status code and the body.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Response {
    /// The status code, such as 200.
    pub status: u16,
    /// The body, as text.
    pub body: String,
}

/// `GET path` on `addr`, every step bounded by `timeout`.
pub(crate) fn get(addr: SocketAddr, path: &str, timeout: Duration) -> io::Result<Response> {
    request(addr, "GET", path, None, timeout)
}

/// `POST path` with a JSON body on `addr`, every step bounded by `timeout`.
pub(crate) fn post_json(
    addr: SocketAddr,
    path: &str,
    body: &str,
    timeout: Duration,
) -> io::Result<Response> {
    request(addr, "POST", path, Some(body), timeout)
}

/// `PUT path` on `addr`, with a JSON body if `body` is given, every step
/// bounded by `timeout`.
pub(crate) fn put(
    addr: SocketAddr,
    path: &str,
    body: Option<&str>,
    timeout: Duration,
) -> io::Result<Response> {
    request(addr, "PUT", path, body, timeout)
}

fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&str>,
    timeout: Duration,
) -> io::Result<Response> {
    let mut stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let mut request = format!("{method} {path} HTTP/1.0\r\nHost: {addr}\r\n");
    if let Some(body) = body {
        request.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        ));
    } else if method == "GET" {
        request.push_str("\r\n");
    } else {
        // A method that may carry a body says it has none.
        request.push_str("Content-Length: 0\r\n\r\n");
    }
    stream.write_all(request.as_bytes())?;
    // HTTP/1.0 without keep-alive: the server should close after the
    // response, but not every etcd handler does, so stop reading once the
    // body announced by Content-Length is complete.
    let mut raw = Vec::new();
    let mut chunk = [0; 4096];
    loop {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        raw.extend_from_slice(&chunk[..n]);
        if is_complete(&raw) {
            break;
        }
    }
    parse(&raw)
}

/// Whether `raw` holds the headers and as many body bytes as they announce.
fn is_complete(raw: &[u8]) -> bool {
    let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&raw[..end]);
    let length = head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        if name.trim().eq_ignore_ascii_case("content-length") {
            value.trim().parse::<usize>().ok()
        } else {
            None
        }
    });
    length.is_some_and(|length| raw.len() >= end + 4 + length)
}

fn parse(raw: &[u8]) -> io::Result<Response> {
    let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_owned());
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| invalid("HTTP response without end of headers"))?;
    let status = head
        .lines()
        .next()
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| invalid("HTTP response without a status line"))?;
    Ok(Response {
        status,
        body: body.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_status_and_body() {
        let raw = b"HTTP/1.0 200 OK\r\nContent-Length: 17\r\n\r\n{\"health\":\"true\"}";
        let response = parse(raw).unwrap();
        assert_eq!(response.status, 200);
        assert_eq!(response.body, r#"{"health":"true"}"#);
    }

    #[test]
    fn a_response_is_complete_once_its_content_length_arrived() {
        let head = b"HTTP/1.0 200 OK\r\ncontent-length: 4\r\n\r\n".to_vec();
        assert!(!is_complete(&head[..10]));
        assert!(!is_complete(&head));
        assert!(!is_complete(&[head.as_slice(), b"abc"].concat()));
        assert!(is_complete(&[head.as_slice(), b"abcd"].concat()));
        // Without Content-Length, only the end of the stream ends the body.
        assert!(!is_complete(b"HTTP/1.0 200 OK\r\n\r\nabcd"));
    }

    #[test]
    fn rejects_a_truncated_response() {
        assert!(parse(b"HTTP/1.0 200 OK\r\nContent-Le").is_err());
    }
}
