//! Blob requests as an operator's tool (`az storage …`) sends them: signed
//! with the development account's shared key, outside any store, to break
//! leases, delete blobs or write garbage behind a store's back.

use std::io::{self, Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use base64::Engine as _;

use super::{ACCOUNT, ACCOUNT_KEY};

/// The REST API version of the requests.
const API_VERSION: &str = "2021-12-02";

/// An answer of the Blob service to an [operator
/// request](super::Azurite::operator): status, headers, body.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OperatorResponse {
    /// The status code, such as 201.
    pub status: u16,
    /// The headers, names in lower case, in the order received.
    pub headers: Vec<(String, String)>,
    /// The body, as text (an error's XML).
    pub body: String,
}

impl OperatorResponse {
    /// The value of header `name` (any case), if present.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// `METHOD /ACCOUNT{path}?{query}` to the Blob service on `addr`, without
/// a body, with `headers` (`x-ms-*` and `If-Match`), signed with the
/// development account's key; every step bounded by `timeout`.
pub(crate) fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    query: &[(&str, &str)],
    headers: &[(&str, &str)],
    timeout: Duration,
) -> io::Result<OperatorResponse> {
    let if_match = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("if-match"))
        .map(|(_, v)| *v);
    let mut ms: Vec<(String, String)> = headers
        .iter()
        .filter(|(k, _)| !k.eq_ignore_ascii_case("if-match"))
        .map(|(k, v)| (k.to_ascii_lowercase(), (*v).to_owned()))
        .chain([("x-ms-version".to_owned(), API_VERSION.to_owned())])
        .collect();
    ms.sort();
    let mut query: Vec<(&str, &str)> = query.to_vec();
    query.sort();
    let resource = format!("/{ACCOUNT}{path}");
    // VERB, then eleven standard headers (Content-Length 0 is signed as
    // empty; If-Match is the ninth), then the x-ms- headers and the
    // resource. Azurite does not ask for x-ms-date.
    let mut to_sign = format!(
        "{method}\n{}{}\n{}",
        "\n".repeat(7),
        if_match.unwrap_or(""),
        "\n".repeat(3)
    );
    for (name, value) in &ms {
        to_sign.push_str(&format!("{name}:{value}\n"));
    }
    to_sign.push_str(&format!("/{ACCOUNT}{resource}"));
    for (name, value) in &query {
        to_sign.push_str(&format!("\n{name}:{value}"));
    }
    let base64 = base64::engine::general_purpose::STANDARD;
    let key = ring::hmac::Key::new(
        ring::hmac::HMAC_SHA256,
        &base64
            .decode(ACCOUNT_KEY)
            .expect("the well-known key is base64"),
    );
    let signature = base64.encode(ring::hmac::sign(&key, to_sign.as_bytes()));

    let query: Vec<String> = query.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let target = if query.is_empty() {
        resource
    } else {
        format!("{resource}?{}", query.join("&"))
    };
    let mut request = format!(
        "{method} {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Length: 0\r\nAuthorization: SharedKey {ACCOUNT}:{signature}\r\n"
    );
    if let Some(etag) = if_match {
        request.push_str(&format!("If-Match: {etag}\r\n"));
    }
    for (name, value) in &ms {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    let mut stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    stream.write_all(request.as_bytes())?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    parse(&raw)
}

fn parse(raw: &[u8]) -> io::Result<OperatorResponse> {
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_owned());
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| bad("no end of headers"))?;
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| bad("no status line"))?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Ok(OperatorResponse {
        status,
        headers,
        body: body.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_status_headers_and_body() {
        let r = parse(b"HTTP/1.1 409 Conflict\r\nx-ms-error-code: LeaseAlreadyPresent\r\nETag: \"0x1\"\r\n\r\n<Error/>")
            .unwrap();
        assert_eq!(r.status, 409);
        assert_eq!(r.header("X-MS-Error-Code"), Some("LeaseAlreadyPresent"));
        assert_eq!(r.header("etag"), Some("\"0x1\""));
        assert_eq!(r.body, "<Error/>");
        assert!(parse(b"garbage").is_err());
    }
}
