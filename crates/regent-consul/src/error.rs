//! Turning HTTP failures and Consul's answers into regent's [`ErrorKind`]s.

use std::error::Error as StdError;

use regent_core::{ErrorKind, StoreError};

/// Consul's answer with an error status: the status and the body, which is
/// Consul's message in plain text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConsulAnswer {
    pub(crate) status: u16,
    pub(crate) body: String,
}

impl std::fmt::Display for ConsulAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let body = regent_core::target::printable(self.body.trim());
        // Consul's messages are short; a proxy's HTML page need not be
        // shown whole.
        let body: String = body.chars().take(300).collect();
        write!(f, "Consul answered HTTP {}: {body}", self.status)
    }
}

impl StdError for ConsulAnswer {}

impl ConsulAnswer {
    /// The kind of failure this answer is.
    pub(crate) fn kind(&self) -> ErrorKind {
        let body = self.body.as_str();
        match self.status {
            401 | 403 => ErrorKind::Auth,
            400 | 405 | 413 => ErrorKind::Config,
            429 | 502 | 503 | 504 => ErrorKind::Unavailable,
            500 if is_acl_refusal(body) => ErrorKind::Auth,
            // A session asked for on a node not in the catalog yet: an
            // agent that just started (its registration follows within a
            // second or so) or that rejoins after its node was reaped.
            // Transient, though "Missing" reads like a bad request.
            500 if body.contains("Missing node registration") => ErrorKind::Unavailable,
            500 if is_permanent_500(body) => ErrorKind::Config,
            // "No cluster leader", "rpc error making call: EOF", "rpc
            // error: … connection refused", "Raft leader changed": a server
            // went away or an election runs.
            500 => ErrorKind::Unavailable,
            _ => ErrorKind::Protocol,
        }
    }

    /// Whether the same request may succeed if sent again within the call
    /// timeout: a 500 from an agent whose server just died or whose
    /// cluster is electing, or "too many requests".
    pub(crate) fn is_retryable(&self) -> bool {
        matches!(self.status, 500 | 429 | 502 | 503 | 504) && self.kind() == ErrorKind::Unavailable
    }
}

/// Consul ≤ 1.x answers some ACL refusals with 500 rather than 403.
fn is_acl_refusal(body: &str) -> bool {
    body.contains("ACL not found") || body.contains("Permission denied")
}

/// 500s that no retry fixes: a request Consul refuses as such.
fn is_permanent_500(body: &str) -> bool {
    [
        "No path to datacenter",
        "Invalid",
        "invalid",
        "must be",
        "Missing",
    ]
    .iter()
    .any(|s| body.contains(s))
}

/// The kind of a failure of the HTTP client (no answer from Consul).
pub(crate) fn classify_http(e: &reqwest::Error) -> ErrorKind {
    if let Some(tls) = causes(e).find_map(rustls_error) {
        return match tls {
            // The server refused our certificate, or its absence.
            rustls::Error::AlertReceived(_) => ErrorKind::Auth,
            _ => ErrorKind::Config,
        };
    }
    if e.is_builder() {
        ErrorKind::Config
    } else {
        // Connect failures, timeouts, connections closed mid-request, a
        // body cut short: the agent or the network is not there now.
        ErrorKind::Unavailable
    }
}

/// A [`StoreError`] for an HTTP client failure while doing `what`.
pub(crate) fn http_error(what: String, e: reqwest::Error) -> StoreError {
    let kind = classify_http(&e);
    let what = match kind {
        ErrorKind::Config => {
            format!("{what}: TLS failed (check the CA certificate and the server name)")
        }
        ErrorKind::Auth => format!("{what}: the agent refused the client's TLS certificate"),
        _ => what,
    };
    // reqwest's own message leaves out the cause ("error sending request");
    // the source chain keeps it.
    StoreError::new(kind, what).with_source(e.without_url())
}

/// A [`StoreError`] for an error answer of Consul while doing `what`.
pub(crate) fn answer_error(what: String, answer: ConsulAnswer) -> StoreError {
    let kind = answer.kind();
    let what = if kind == ErrorKind::Auth {
        format!(
            "{what}: the ACL token (X-Consul-Token, from CONSUL_HTTP_TOKEN or the store's token) \
             was refused or lacks session:write / key:write on the election's key"
        )
    } else {
        what
    };
    StoreError::new(kind, what).with_source(answer)
}

/// What the TLS layer said about a [`StoreError`] of this store, if it
/// failed there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TlsFailure {
    /// The agent's certificate did not verify (an unknown CA, another
    /// name).
    ServerCertificate,
    /// The agent refused the client's certificate, or its absence.
    ClientCertificate,
}

/// Whether `e` failed in TLS, and on which side, decided from the error
/// types in its sources.
pub(crate) fn tls_failure(e: &StoreError) -> Option<TlsFailure> {
    let e: &(dyn StdError + 'static) = e;
    causes(e).find_map(rustls_error).map(|tls| match tls {
        rustls::Error::AlertReceived(_) => TlsFailure::ClientCertificate,
        _ => TlsFailure::ServerCertificate,
    })
}

/// Whether `e` is Consul refusing the ACL token (an answer of kind
/// `Auth`).
pub(crate) fn is_token_refusal(e: &StoreError) -> bool {
    let e: &(dyn StdError + 'static) = e;
    causes(e)
        .filter_map(|c| c.downcast_ref::<ConsulAnswer>())
        .any(|a| a.kind() == ErrorKind::Auth)
}

/// Whether `e` is Consul saying the session's node is not in the catalog
/// ("Missing node registration").
pub(crate) fn is_missing_node(e: &StoreError) -> bool {
    let e: &(dyn StdError + 'static) = e;
    causes(e)
        .filter_map(|c| c.downcast_ref::<ConsulAnswer>())
        .any(|a| a.body.contains("Missing node registration"))
}

/// The rustls error `e` is, or wraps: tokio-rustls reports handshake
/// failures as an I/O error around it, whose `source()` skips it, and
/// reqwest's connector wraps that I/O error in another one (a server
/// certificate that fails verification comes as `io::Error(Other,
/// io::Error(InvalidData, rustls::Error))`).
fn rustls_error<'a>(e: &'a (dyn StdError + 'static)) -> Option<&'a rustls::Error> {
    regent_core::find_cause(e)
}

/// `e` and its sources, outermost first.
fn causes<'a>(
    e: &'a (dyn StdError + 'static),
) -> impl Iterator<Item = &'a (dyn StdError + 'static)> {
    std::iter::successors(Some(e), |&e| e.source())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, body: &str) -> ConsulAnswer {
        ConsulAnswer {
            status,
            body: body.into(),
        }
    }

    #[test]
    fn answers_are_classified() {
        assert_eq!(
            answer(500, "No cluster leader").kind(),
            ErrorKind::Unavailable
        );
        assert!(answer(500, "rpc error making call: EOF").is_retryable());
        assert_eq!(
            answer(
                500,
                "Invalid Session TTL '9999000000', must be between [10s=24h0m0s]"
            )
            .kind(),
            ErrorKind::Config
        );
        assert!(!answer(500, "No path to datacenter").is_retryable());
        assert_eq!(
            answer(500, "No path to datacenter").kind(),
            ErrorKind::Config
        );
        // Regression: a candidate whose fresh agent had not registered its
        // node yet exited 2 ("Missing" looked like a bad request).
        let unregistered = answer(500, "Missing node registration");
        assert_eq!(unregistered.kind(), ErrorKind::Unavailable);
        assert!(unregistered.is_retryable());
        assert_eq!(answer(403, "Permission denied").kind(), ErrorKind::Auth);
        assert_eq!(answer(500, "ACL not found").kind(), ErrorKind::Auth);
        assert_eq!(
            answer(400, "Request decode failed").kind(),
            ErrorKind::Config
        );
        assert_eq!(answer(429, "").kind(), ErrorKind::Unavailable);
        assert_eq!(answer(418, "").kind(), ErrorKind::Protocol);
    }

    #[test]
    fn answers_print_their_body_escaped_and_short() {
        let a = answer(500, &format!("a\u{1b}[2J{}", "x".repeat(1000)));
        let shown = a.to_string();
        assert!(
            shown.starts_with("Consul answered HTTP 500: a\\u{1b}[2J"),
            "{shown}"
        );
        assert!(shown.len() < 400, "{shown}");
    }

    #[test]
    fn rustls_errors_are_found_inside_io_errors() {
        let io = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::AlertReceived(rustls::AlertDescription::BadCertificate),
        );
        assert!(matches!(
            rustls_error(&io),
            Some(rustls::Error::AlertReceived(_))
        ));
        assert!(rustls_error(&std::io::Error::other("reset")).is_none());
    }

    /// Regression: a server certificate that fails verification reaches
    /// the store as an I/O error around an I/O error around rustls' error
    /// (reqwest's connector wraps tokio-rustls' error); only one layer was
    /// looked through, so an untrusted CA was `Unavailable`, retried until
    /// the start window closed, instead of the `Config` error the crate
    /// docs promise.
    #[test]
    fn rustls_errors_are_found_inside_nested_io_errors_regression() {
        let unknown_issuer =
            || rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        let nested = std::io::Error::other(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            unknown_issuer(),
        ));
        assert_eq!(rustls_error(&nested), Some(&unknown_issuer()));
        let deeper = std::io::Error::other(nested);
        assert_eq!(rustls_error(&deeper), Some(&unknown_issuer()));
        let not_tls = std::io::Error::other(std::io::Error::other("reset"));
        assert!(rustls_error(&not_tls).is_none());
    }

    #[test]
    fn acl_refusals_name_the_token_never_its_value() {
        let e = answer_error("renew".into(), answer(403, "Permission denied"));
        assert_eq!(e.kind(), ErrorKind::Auth);
        assert!(e.to_string().contains("CONSUL_HTTP_TOKEN"), "{e}");
    }
}
