//! Turning etcd-client's errors into regent's [`ErrorKind`]s.

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
    match e {
        E::TransportError(_) | E::IoError(_) | E::WatchError(_) => ErrorKind::Unavailable,
        E::GRpcStatus(status) => classify_code(i32::from(status.code()), status.message()),
        E::InvalidArgs(_) | E::InvalidUri(_) | E::InvalidMetadataValue(_) => ErrorKind::Config,
        E::EndpointError(_) => ErrorKind::Config,
        _ => ErrorKind::Protocol,
    }
}

fn classify_code(code: i32, message: &str) -> ErrorKind {
    match code {
        code::UNAUTHENTICATED | code::PERMISSION_DENIED => ErrorKind::Auth,
        // etcd answers a bad or expired auth token with InvalidArgument.
        code::INVALID_ARGUMENT if message.contains("auth") => ErrorKind::Auth,
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

/// A [`StoreError`] of the right kind for an etcd-client error, with
/// `context` naming the operation, the election and the endpoints.
pub(crate) fn etcd_error(context: impl Into<String>, e: etcd_client::Error) -> StoreError {
    StoreError::new(classify(&e), context).with_source(e)
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
