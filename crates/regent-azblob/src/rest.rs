//! The few Blob service operations the store needs, over HTTP/1.1: each
//! request signed with the account key (Shared Key) or carrying the SAS
//! token, bounded by the call timeout, with a bounded retry of the
//! service's "busy" answers and none of anything else.

use std::time::Duration;

use base64::Engine as _;
use jiff::Timestamp;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, Url};
use tokio::time::Instant;

use regent_core::{ErrorKind, StoreError};

use crate::account::{Credential, StorageAccount};

/// The REST API version regent speaks: known to Azure and to Azurite 3.35
/// without `--skipApiVersionCheck`.
pub(crate) const API_VERSION: &str = "2021-12-02";

/// The most of an error's body read.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// The most of a successful answer's body read, when it is: a page of
/// List Blobs (5,000 blobs with their metadata) fits.
pub(crate) const MAX_BODY: usize = 64 * 1024 * 1024;

/// The longest pause between two tries of a busy answer.
const MAX_BACKOFF: Duration = Duration::from_millis(500);

/// One request: an operation on the account, a container or a blob.
#[derive(Debug)]
pub(crate) struct Request<'a> {
    pub(crate) method: Method,
    pub(crate) container: Option<&'a str>,
    pub(crate) blob: Option<&'a str>,
    /// Query parameters (`comp`, `restype`), names lower case.
    pub(crate) query: Vec<(&'static str, String)>,
    /// `x-ms-*` headers, names lower case; `x-ms-date` and `x-ms-version`
    /// are added.
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) if_match: Option<String>,
    pub(crate) if_none_match: Option<&'static str>,
    /// Whether a successful answer's body is read (List Blobs); an error's
    /// always is.
    pub(crate) read_body: bool,
}

impl<'a> Request<'a> {
    pub(crate) fn new(method: Method, container: &'a str, blob: Option<&'a str>) -> Self {
        Self {
            method,
            container: Some(container),
            blob,
            query: Vec::new(),
            headers: Vec::new(),
            if_match: None,
            if_none_match: None,
            read_body: false,
        }
    }

    /// Reads the body of a successful answer too, up to [`MAX_BODY`].
    pub(crate) fn read_body(mut self) -> Self {
        self.read_body = true;
        self
    }

    pub(crate) fn query(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.query.push((name, value.into()));
        self
    }

    pub(crate) fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    pub(crate) fn if_match(mut self, etag: impl Into<String>) -> Self {
        self.if_match = Some(etag.into());
        self
    }

    pub(crate) fn if_none_match_any(mut self) -> Self {
        self.if_none_match = Some("*");
        self
    }
}

/// The service's answer: its status, headers, and for an error its code
/// (`x-ms-error-code`, else the body's `<Code>`) and message.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) headers: HeaderMap,
    pub(crate) code: Option<String>,
    pub(crate) message: Option<String>,
    /// The body: an error's (its first 64 KiB), or a successful answer's
    /// when the request asked for it.
    pub(crate) body: Vec<u8>,
}

impl Answer {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub(crate) fn code_is(&self, code: &str) -> bool {
        self.code.as_deref() == Some(code)
    }

    /// The service's clock when it answered (`Date`).
    pub(crate) fn date(&self) -> Option<Timestamp> {
        self.header("date").and_then(parse_http_date)
    }

    /// What went wrong, for messages: `HTTP 409 LeaseAlreadyPresent:
    /// There is already a lease present.`
    pub(crate) fn describe(&self) -> String {
        let mut s = format!("HTTP {}", self.status);
        if let Some(code) = &self.code {
            s.push(' ');
            s.push_str(&regent_core::target::printable(code));
        }
        if let Some(message) = &self.message {
            s.push_str(": ");
            s.push_str(message);
        }
        s
    }

    /// The kind of failure an unexpected answer is.
    pub(crate) fn kind(&self) -> ErrorKind {
        match self.status {
            401 | 403 => ErrorKind::Auth,
            400 | 405 | 411 | 413 | 414 | 416 => ErrorKind::Config,
            408 | 429 | 500 | 502 | 503 | 504 => ErrorKind::Unavailable,
            // The container is being deleted: it can be created again soon.
            409 if self.code_is("ContainerBeingDeleted") => ErrorKind::Unavailable,
            _ => ErrorKind::Protocol,
        }
    }

    fn is_busy(&self) -> bool {
        matches!(self.status, 408 | 429 | 500 | 502 | 503 | 504)
    }
}

/// The HTTP client of one account.
#[derive(Debug)]
pub(crate) struct Client {
    http: reqwest::Client,
    account: StorageAccount,
    call_timeout: Duration,
}

impl Client {
    pub(crate) fn new(account: StorageAccount, call_timeout: Duration) -> Result<Self, String> {
        let builder = reqwest::Client::builder()
            .connect_timeout(call_timeout)
            // Below node's keep-alive timeout (5 s; Azurite runs on node),
            // so that a pooled connection is not reused just as the server
            // closes it.
            .pool_idle_timeout(Duration::from_secs(4))
            .redirect(reqwest::redirect::Policy::none())
            // reqwest wants a TLS configuration even for plain HTTP.
            .tls_backend_preconfigured(tls_config(account.blob_endpoint().scheme() == "https")?);
        let http = builder
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(Self {
            http,
            account,
            call_timeout,
        })
    }

    pub(crate) fn account(&self) -> &StorageAccount {
        &self.account
    }

    /// The request's URL without the SAS token: what messages show.
    pub(crate) fn url(&self, request: &Request<'_>) -> Url {
        let mut url = self.account.blob_endpoint().clone();
        {
            let mut segments = url
                .path_segments_mut()
                .expect("an http(s) endpoint has a path");
            segments.pop_if_empty();
            if let Some(container) = request.container {
                segments.push(container);
            }
            if let Some(blob) = request.blob {
                // Blob names are checked to need no escaping; '/' separates
                // virtual directories and is sent as is.
                segments.extend(blob.split('/'));
            }
        }
        if !request.query.is_empty() {
            let mut pairs = url.query_pairs_mut();
            for (name, value) in &request.query {
                pairs.append_pair(name, value);
            }
        }
        url
    }

    /// Sends `request`: one try, and more only while the service answers
    /// "busy" (408, 429, 5xx) and the call timeout leaves room. Any answer
    /// is returned; only a failure to get one is an error.
    pub(crate) async fn send(
        &self,
        request: &Request<'_>,
        what: &(dyn Fn() -> String + Sync),
    ) -> Result<Answer, StoreError> {
        let deadline = Instant::now() + self.call_timeout;
        let mut backoff = Duration::from_millis(50);
        loop {
            let attempt = async {
                let response = self.build(request)?.send().await?;
                let status = response.status().as_u16();
                let headers = response.headers().clone();
                let mut body = Vec::new();
                let success = (200..300).contains(&status);
                if !success || request.read_body {
                    // An error's XML is short; a proxy's page need not be
                    // read whole.
                    let max = if success { MAX_BODY } else { MAX_ERROR_BODY };
                    let mut response = response;
                    while let Some(chunk) = response.chunk().await? {
                        body.extend_from_slice(&chunk);
                        if body.len() >= max {
                            body.truncate(max);
                            break;
                        }
                    }
                }
                Ok::<_, reqwest::Error>(answer(status, headers, body))
            };
            let answer = match tokio::time::timeout_at(deadline, attempt).await {
                Err(_) => {
                    return Err(StoreError::unavailable(format!(
                        "{}: no answer from {} within {:?}",
                        what(),
                        self.account.blob_endpoint(),
                        self.call_timeout
                    )));
                }
                // Never with the URL: it may carry the SAS token.
                Ok(Err(e)) => return Err(http_error(what(), self.account.blob_endpoint(), e)),
                Ok(Ok(a)) => a,
            };
            if answer.is_busy() && Instant::now() + backoff < deadline {
                tracing::debug!(status = answer.status, code = ?answer.code, "azblob: busy, retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
            return Ok(answer);
        }
    }

    fn build(&self, request: &Request<'_>) -> Result<reqwest::RequestBuilder, reqwest::Error> {
        let mut url = self.url(request);
        let mut headers: Vec<(String, String)> = request
            .headers
            .iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
            .collect();
        headers.push(("x-ms-date".into(), http_date(Timestamp::now())));
        headers.push(("x-ms-version".into(), API_VERSION.into()));
        headers.sort();
        let mut map = HeaderMap::new();
        for (name, value) in &headers {
            insert(&mut map, name, value);
        }
        if let Some(etag) = &request.if_match {
            insert(&mut map, "if-match", etag);
        }
        if let Some(v) = request.if_none_match {
            insert(&mut map, "if-none-match", v);
        }
        match self.account.credential() {
            Credential::SharedKey(key) => {
                let signature = sign(
                    key,
                    &string_to_sign(self.account.name(), request, url.path(), &headers),
                );
                let mut value = HeaderValue::from_str(&format!(
                    "SharedKey {}:{signature}",
                    self.account.name()
                ))
                .expect("an account name and base64 make a header value");
                value.set_sensitive(true);
                map.insert(reqwest::header::AUTHORIZATION, value);
            }
            Credential::Sas(sas) => {
                let query = match url.query() {
                    Some(q) => format!("{q}&{sas}"),
                    None => sas.clone(),
                };
                url.set_query(Some(&query));
            }
        }
        let mut builder = self.http.request(request.method.clone(), url).headers(map);
        if request.method == Method::PUT {
            // The service wants a length (411 otherwise), and reqwest sends
            // none for an empty body; 0 is signed as empty.
            builder = builder
                .header(reqwest::header::CONTENT_LENGTH, "0")
                .body(Vec::new());
        }
        Ok(builder)
    }
}

/// Inserts a header whose name and value the store made: `x-ms-meta-*`
/// values are checked before (holder ids are printable ASCII, tokens
/// digits, metadata base64).
fn insert(map: &mut HeaderMap, name: &str, value: &str) {
    let name = HeaderName::from_bytes(name.as_bytes()).expect("the store's header names are valid");
    let value = HeaderValue::from_str(value).expect("the store's header values are checked");
    map.insert(name, value);
}

/// The string Shared Key signs (REST API versions from 2015-02-21 on): the
/// verb, eleven standard headers (only `If-Match` and `If-None-Match` are
/// ever set here; `Content-Length` 0 is signed as empty, and `Date` is
/// empty because `x-ms-date` is sent), the `x-ms-` headers sorted, and the
/// resource: `/ACCOUNT` + the URL's path + each query parameter.
fn string_to_sign(
    account: &str,
    request: &Request<'_>,
    path: &str,
    sorted_headers: &[(String, String)],
) -> String {
    let mut s = String::with_capacity(256);
    s.push_str(request.method.as_str());
    s.push('\n');
    // Content-Encoding, -Language, -Length, -MD5, -Type, Date,
    // If-Modified-Since.
    s.push_str(&"\n".repeat(7));
    s.push_str(request.if_match.as_deref().unwrap_or(""));
    s.push('\n');
    s.push_str(request.if_none_match.unwrap_or(""));
    s.push('\n');
    // If-Unmodified-Since, Range.
    s.push_str("\n\n");
    for (name, value) in sorted_headers {
        s.push_str(name);
        s.push(':');
        s.push_str(value.trim());
        s.push('\n');
    }
    s.push('/');
    s.push_str(account);
    s.push_str(path);
    let mut query: Vec<&(&str, String)> = request.query.iter().collect();
    query.sort();
    for (name, value) in query {
        s.push('\n');
        s.push_str(name);
        s.push(':');
        s.push_str(value);
    }
    s
}

fn sign(key: &[u8], string_to_sign: &str) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key);
    let tag = ring::hmac::sign(&key, string_to_sign.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(tag.as_ref())
}

fn answer(status: u16, headers: HeaderMap, body: Vec<u8>) -> Answer {
    // A successful answer's body (List Blobs) is no error's.
    let error = !(200..300).contains(&status);
    let text = if error {
        String::from_utf8_lossy(&body)
    } else {
        std::borrow::Cow::Borrowed("")
    };
    let code = headers
        .get("x-ms-error-code")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or_else(|| element(&text, "Code").map(str::to_owned));
    let message = element(&text, "Message")
        .and_then(|m| m.lines().next())
        .map(|m| {
            regent_core::target::printable(m.trim())
                .chars()
                .take(300)
                .collect()
        });
    Answer {
        status,
        headers,
        code,
        message,
        body,
    }
}

/// The text of the first `<NAME>…</NAME>` in an error body.
fn element<'b>(body: &'b str, name: &str) -> Option<&'b str> {
    let start = body.find(&format!("<{name}>"))? + name.len() + 2;
    let len = body[start..].find(&format!("</{name}>"))?;
    Some(&body[start..start + len])
}

fn http_error(what: String, endpoint: &Url, e: reqwest::Error) -> StoreError {
    let mut kind = if e.is_builder() {
        ErrorKind::Config
    } else {
        ErrorKind::Unavailable
    };
    let mut source: &dyn std::error::Error = &e;
    let mut cause = String::new();
    while let Some(next) = source.source() {
        // A certificate refused, or TLS spoken to a plain port: no retry
        // mends it.
        if next.downcast_ref::<rustls::Error>().is_some() {
            kind = ErrorKind::Config;
        }
        cause = next.to_string();
        source = next;
    }
    let e = e.without_url();
    let detail = if cause.is_empty() {
        e.to_string()
    } else {
        format!("{e}: {cause}")
    };
    StoreError::new(kind, format!("{what}: cannot reach {endpoint} ({detail})"))
}

/// `Sun, 06 Nov 1994 08:49:37 GMT`, RFC 9110's IMF-fixdate.
pub(crate) fn http_date(t: Timestamp) -> String {
    jiff::fmt::rfc2822::DateTimePrinter::new()
        .timestamp_to_rfc9110_string(&t)
        .expect("a current timestamp prints")
}

/// An HTTP date as the service writes them (IMF-fixdate, GMT).
pub(crate) fn parse_http_date(s: &str) -> Option<Timestamp> {
    jiff::fmt::rfc2822::DateTimeParser::new()
        .parse_timestamp(s)
        .ok()
}

/// TLS to the public cloud: ring, the system's CAs (`SSL_CERT_FILE` /
/// `SSL_CERT_DIR` replace them, as for OpenSSL). Without `https`, a
/// configuration that trusts nothing (the client then speaks plain HTTP
/// only).
fn tls_config(https: bool) -> Result<rustls::ClientConfig, String> {
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    if https
        && roots
            .add_parsable_certificates(rustls_native_certs::load_native_certs().certs)
            .0
            == 0
    {
        return Err(
            "an https:// blob endpoint needs the system's CA certificates, and none were found \
             (install ca-certificates, or point SSL_CERT_FILE at a bundle)"
                .into(),
        );
    }
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS cannot be set up ({e})"))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_string_to_sign_follows_the_shared_key_layout() {
        let request = Request::new(Method::PUT, "leases", Some("jobs/a"))
            .query("comp", "lease")
            .header("x-ms-lease-action", "acquire")
            .if_match("\"0x1\"");
        let headers = vec![
            (
                "x-ms-date".to_owned(),
                "Sun, 22 Nov 2026 10:00:00 GMT".to_owned(),
            ),
            ("x-ms-lease-action".to_owned(), "acquire".to_owned()),
            ("x-ms-version".to_owned(), API_VERSION.to_owned()),
        ];
        let s = string_to_sign("acct", &request, "/leases/jobs/a", &headers);
        assert_eq!(
            s,
            "PUT\n\n\n\n\n\n\n\n\"0x1\"\n\n\n\n\
             x-ms-date:Sun, 22 Nov 2026 10:00:00 GMT\n\
             x-ms-lease-action:acquire\n\
             x-ms-version:2021-12-02\n\
             /acct/leases/jobs/a\ncomp:lease"
        );
        // A fixed vector, so that a change to the signing shows here before
        // Azurite refuses it.
        assert_eq!(
            sign(b"key", "abc"),
            "nBluMtwBdfhvSxy4konWYZ3mvuaZ5MN45oMJ7Zehpqs="
        );
    }

    #[test]
    fn error_bodies_and_dates() {
        let body = "<?xml version=\"1.0\"?><Error><Code>LeaseAlreadyPresent</Code>\
                    <Message>There is already a lease present.\nRequestId:1</Message></Error>";
        let a = answer(409, HeaderMap::new(), body.as_bytes().to_vec());
        assert_eq!(a.code.as_deref(), Some("LeaseAlreadyPresent"));
        assert_eq!(
            a.describe(),
            "HTTP 409 LeaseAlreadyPresent: There is already a lease present."
        );
        let t = parse_http_date("Sun, 22 Nov 2026 10:00:07 GMT").unwrap();
        assert_eq!(t.as_second(), 1_795_341_607);
        assert_eq!(http_date(t), "Sun, 22 Nov 2026 10:00:07 GMT");
        assert!(parse_http_date("yesterday").is_none());
    }
}
