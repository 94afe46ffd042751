//! Turning etcd-client's errors into regent's [`ErrorKind`]s.

use std::error::Error as StdError;
use std::io;

use regent_core::{ErrorKind, StoreError};

/// gRPC status codes, as numbers (the client re-exports no `Code` type).
mod code {
    pub(super) const CANCELLED: i32 = 1;
    pub(super) const UNKNOWN: i32 = 2;
    pub(super) const INVALID_ARGUMENT: i32 = 3;
    pub(super) const DEADLINE_EXCEEDED: i32 = 4;
    pub(super) const PERMISSION_DENIED: i32 = 7;
    pub(super) const RESOURCE_EXHAUSTED: i32 = 8;
    pub(super) const FAILED_PRECONDITION: i32 = 9;
    pub(super) const ABORTED: i32 = 10;
    pub(super) const OUT_OF_RANGE: i32 = 11;
    pub(super) const UNIMPLEMENTED: i32 = 12;
    pub(super) const INTERNAL: i32 = 13;
    pub(super) const UNAVAILABLE: i32 = 14;
    pub(super) const UNAUTHENTICATED: i32 = 16;
}

/// The kind of an etcd-client error: whether retrying may help.
pub(crate) fn classify(e: &etcd_client::Error) -> ErrorKind {
    use etcd_client::Error as E;
    if let Some(failure) = TlsFailure::of(e) {
        return failure.kind();
    }
    match e {
        E::IoError(_) | E::WatchError(_) => ErrorKind::Unavailable,
        E::GRpcStatus(status) => classify_code(i32::from(status.code()), status.message()),
        E::InvalidArgs(_) | E::InvalidUri(_) | E::InvalidMetadataValue(_) => ErrorKind::Config,
        E::EndpointError(_) => ErrorKind::Config,
        _ => ErrorKind::Protocol,
    }
}

fn classify_code(code: i32, message: &str) -> ErrorKind {
    match code {
        code::UNAUTHENTICATED | code::PERMISSION_DENIED => ErrorKind::Auth,
        // etcd answers a wrong password ("authentication failed") and a
        // request without a user while authentication is on ("user name is
        // empty") with InvalidArgument.
        code::INVALID_ARGUMENT if message.contains("auth") || message.contains("user name") => {
            ErrorKind::Auth
        }
        code::INVALID_ARGUMENT
        | code::FAILED_PRECONDITION
        | code::OUT_OF_RANGE
        | code::UNIMPLEMENTED => ErrorKind::Config,
        // Unavailable: no leader, leader changed, the member is stopping.
        // DeadlineExceeded: "request timed out". ResourceExhausted: "too
        // many requests". Unknown and Internal: the connection broke mid-call
        // (tonic reports h2 and hyper failures so).
        code::UNAVAILABLE
        | code::DEADLINE_EXCEEDED
        | code::RESOURCE_EXHAUSTED
        | code::ABORTED
        | code::CANCELLED
        | code::UNKNOWN
        | code::INTERNAL => ErrorKind::Unavailable,
        _ => ErrorKind::Protocol,
    }
}

/// What a store call knew when etcd-client failed it, for what the message
/// adds to etcd-client's error.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scope<'a> {
    /// The store speaks TLS.
    pub(crate) tls: bool,
    /// The key prefix of the election the call was for (`None` for
    /// `connect`).
    pub(crate) prefix: Option<&'a str>,
}

/// A [`StoreError`] of the right kind for an etcd-client error, with
/// `context` naming the operation, the election and the endpoints. What
/// regent can tell beyond etcd-client's message is added in words: a TLS
/// failure (with the cause etcd-client's own message leaves out), a
/// connection closed under TLS, a permission etcd denied on the election's
/// keys (with the prefix to grant).
pub(crate) fn etcd_error(
    context: impl Into<String>,
    e: etcd_client::Error,
    scope: Scope<'_>,
) -> StoreError {
    let mut context = context.into();
    if let Some(failure) = TlsFailure::of(&e) {
        context.push_str(": ");
        context.push_str(failure.explanation());
        if let Some(cause) = tls_cause(&e) {
            context.push_str(&format!(" ({cause})"));
        }
    } else if scope.tls && closed_after_connecting(&e) {
        context.push_str(
            ": the server closed the connection after it was made; with TLS this is how etcd \
             refuses a missing or untrusted client certificate",
        );
    } else if let Some(prefix) = scope.prefix.filter(|_| is_permission_denied(&e)) {
        context.push_str(&format!(
            ": the user needs read and write permission on the keys under '{prefix}' \
             (etcdctl role grant-permission ROLE --prefix=true readwrite '{prefix}')"
        ));
    }
    StoreError::new(classify(&e), context).with_source(e)
}

/// Whether `e`, an error of an [`EtcdStore`](crate::EtcdStore) call or
/// `connect`, is etcd refusing the client's TLS certificate (or its
/// absence), or may be: etcd's TLS alert saying so
/// ([`Auth`](ErrorKind::Auth)), or a connection the server closed or reset
/// after it was made ([`Unavailable`](ErrorKind::Unavailable)).
///
/// Under TLS 1.3 etcd checks the client certificate after the client has
/// finished its handshake, so its alert races the closing connection and
/// the call often sees only the latter. A closed connection means this
/// only over TLS (without TLS it is rather a plaintext client on a TLS
/// port), and the caller knows whether it configured TLS; the store's own
/// message says it only then. A refused connection, an unknown host or a
/// request that timed out is never this.
pub fn is_refused_client_certificate(e: &StoreError) -> bool {
    let Some(e) = StdError::source(e).and_then(|s| s.downcast_ref::<etcd_client::Error>()) else {
        return false;
    };
    TlsFailure::of(e) == Some(TlsFailure::ClientCertificate) || closed_after_connecting(e)
}

/// Whether etcd denied the permission (gRPC `PermissionDenied`): the user
/// may not read or write the keys.
fn is_permission_denied(e: &etcd_client::Error) -> bool {
    matches!(e, etcd_client::Error::GRpcStatus(s) if i32::from(s.code()) == code::PERMISSION_DENIED)
}

/// Whether the connection broke after it was made: closed or reset by the
/// server, not refused, not unresolved, not timed out.
///
/// A status with a source was made by the client from a transport error
/// (etcd's own answers carry none). tonic reports failures to connect as
/// `Unavailable`; on a made connection, hyper's I/O errors come as
/// `Unknown` and a request the closing connection cancelled as `Cancelled`
/// (with no I/O error below it).
fn closed_after_connecting(e: &etcd_client::Error) -> bool {
    let etcd_client::Error::GRpcStatus(status) = e else {
        return false;
    };
    if StdError::source(status).is_none() {
        return false;
    }
    match i32::from(status.code()) {
        code::CANCELLED => true,
        code::UNKNOWN => causes(status).any(|cause| {
            cause.downcast_ref::<io::Error>().is_some_and(|io| {
                matches!(
                    io.kind(),
                    io::ErrorKind::BrokenPipe
                        | io::ErrorKind::ConnectionReset
                        | io::ErrorKind::ConnectionAborted
                        | io::ErrorKind::UnexpectedEof
                )
            })
        }),
        _ => false,
    }
}

/// A TLS failure told apart in an etcd-client error. Every other TLS
/// failure (a plaintext client on a TLS port, a TLS client on a plaintext
/// port, most refusals of a client certificate) reaches the client as a
/// closed or reset connection, which it cannot tell from a failing member:
/// [`ErrorKind::Unavailable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TlsFailure {
    /// The endpoint could not be built: in etcd-client 0.21 only the TLS
    /// settings fail so (an unreadable client certificate or key, a key
    /// that does not match the certificate, an invalid server name).
    Settings,
    /// The server's certificate failed verification: signed by a CA the
    /// store does not trust, issued for another name, expired.
    ServerCertificate,
    /// The server refused the client certificate, or its absence, with a
    /// TLS alert. Under TLS 1.3 the server checks the client certificate
    /// after the client has finished its handshake, so the alert races the
    /// closing connection: often the call sees only the connection close
    /// (`Unavailable`).
    ClientCertificate,
}

/// TLS alerts (as rustls names them) that refuse the certificate the
/// client presented, or the lack of one.
const CLIENT_CERTIFICATE_ALERTS: &[&str] = &[
    "BadCertificate",
    "UnsupportedCertificate",
    "CertificateRevoked",
    "CertificateExpired",
    "CertificateUnknown",
    "UnknownCA",
    "AccessDenied",
    "CertificateRequired",
];

impl TlsFailure {
    fn of(e: &etcd_client::Error) -> Option<Self> {
        match e {
            // Nothing else builds a tonic transport error: the channel
            // connects lazily, so connection failures come as gRPC statuses.
            etcd_client::Error::TransportError(_) => Some(Self::Settings),
            etcd_client::Error::GRpcStatus(status) => {
                causes(status).find_map(|cause| Self::of_handshake(cause.downcast_ref()?))
            }
            _ => None,
        }
    }

    /// rustls' errors reach us as the text of an `InvalidData` I/O error
    /// (this crate depends on no TLS library of its own to downcast to).
    fn of_handshake(e: &io::Error) -> Option<Self> {
        if e.kind() != io::ErrorKind::InvalidData {
            return None;
        }
        let text = e.to_string();
        if text.starts_with("invalid peer certificate") {
            return Some(Self::ServerCertificate);
        }
        let alert = text.strip_prefix("received fatal alert: ")?;
        CLIENT_CERTIFICATE_ALERTS
            .contains(&alert)
            .then_some(Self::ClientCertificate)
    }

    fn kind(self) -> ErrorKind {
        match self {
            Self::Settings | Self::ServerCertificate => ErrorKind::Config,
            Self::ClientCertificate => ErrorKind::Auth,
        }
    }

    fn explanation(self) -> &'static str {
        match self {
            Self::Settings => {
                "invalid TLS settings (CA certificate, client certificate and key, server name)"
            }
            Self::ServerCertificate => {
                "the server's TLS certificate failed verification (check the CA certificate and \
                 the server name)"
            }
            Self::ClientCertificate => "the server refused the client's TLS certificate",
        }
    }
}

/// The deepest cause of a TLS failure, which etcd-client's message does not
/// show for a transport error and shows only as debug output for a status.
fn tls_cause(e: &etcd_client::Error) -> Option<String> {
    let first: &(dyn StdError + 'static) = match e {
        etcd_client::Error::TransportError(e) => e,
        etcd_client::Error::GRpcStatus(status) => status,
        _ => return None,
    };
    causes(first).skip(1).last().map(ToString::to_string)
}

/// `e` and its sources, outermost first.
fn causes<'a>(
    e: &'a (dyn StdError + 'static),
) -> impl Iterator<Item = &'a (dyn StdError + 'static)> {
    std::iter::successors(Some(e), |&e| e.source())
}

/// Whether the error says "this lease does not exist (any more)".
pub(crate) fn is_lease_not_found(e: &etcd_client::Error) -> bool {
    match e {
        // etcd-client's keep-alive reports a TTL of 0 (etcd's answer for a
        // missing lease) this way.
        etcd_client::Error::LeaseKeepAliveError(msg) => msg.contains("not found"),
        etcd_client::Error::GRpcStatus(s) => s.message().contains("lease not found"),
        _ => false,
    }
}

/// Whether `e`, a [`StoreError`] made by [`etcd_error`], is etcd refusing
/// a transaction of more compares or operations than its
/// `--max-txn-ops` (128 by default).
pub(crate) fn is_too_many_ops(e: &StoreError) -> bool {
    StdError::source(e)
        .and_then(|s| s.downcast_ref::<etcd_client::Error>())
        .is_some_and(|e| match e {
            etcd_client::Error::GRpcStatus(s) => {
                s.message().contains("too many operations in txn request")
            }
            _ => false,
        })
}

/// A [`ErrorKind::Protocol`] error: `what` got an answer that cannot be,
/// for the reason `why`.
pub(crate) fn protocol(what: String, why: &str) -> StoreError {
    StoreError::new(ErrorKind::Protocol, format!("{what}: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_classified() {
        assert_eq!(
            classify_code(14, "etcdserver: no leader"),
            ErrorKind::Unavailable
        );
        assert_eq!(
            classify_code(4, "etcdserver: request timed out"),
            ErrorKind::Unavailable
        );
        assert_eq!(classify_code(16, "x"), ErrorKind::Auth);
        assert_eq!(
            classify_code(7, "etcdserver: permission denied"),
            ErrorKind::Auth
        );
        assert_eq!(
            classify_code(3, "etcdserver: invalid auth token"),
            ErrorKind::Auth
        );
        assert_eq!(
            classify_code(3, "etcdserver: key is not provided"),
            ErrorKind::Config
        );
        assert_eq!(classify_code(5, "x"), ErrorKind::Protocol);
    }

    #[test]
    fn a_request_without_user_under_auth_is_an_auth_error() {
        assert_eq!(
            classify_code(3, "etcdserver: user name is empty"),
            ErrorKind::Auth
        );
        assert_eq!(
            classify_code(
                3,
                "etcdserver: authentication failed, invalid user ID or password"
            ),
            ErrorKind::Auth
        );
    }

    #[test]
    fn rustls_handshake_errors_are_told_apart() {
        let invalid = |text: &str| io::Error::new(io::ErrorKind::InvalidData, text.to_owned());
        assert_eq!(
            TlsFailure::of_handshake(&invalid("invalid peer certificate: UnknownIssuer")),
            Some(TlsFailure::ServerCertificate)
        );
        assert_eq!(
            TlsFailure::of_handshake(&invalid("received fatal alert: BadCertificate")),
            Some(TlsFailure::ClientCertificate)
        );
        assert_eq!(
            TlsFailure::of_handshake(&invalid("received fatal alert: DecodeError")),
            None
        );
        assert_eq!(
            TlsFailure::of_handshake(&io::Error::new(
                io::ErrorKind::BrokenPipe,
                "invalid peer certificate: UnknownIssuer"
            )),
            None
        );
    }

    #[test]
    fn client_errors_are_classified() {
        let e = etcd_client::Error::InvalidArgs("empty endpoints".into());
        assert_eq!(classify(&e), ErrorKind::Config);
        let e = etcd_client::Error::IoError(std::io::Error::other("reset"));
        assert_eq!(classify(&e), ErrorKind::Unavailable);
        assert!(is_lease_not_found(
            &etcd_client::Error::LeaseKeepAliveError("lease not found".into())
        ));
    }
}
