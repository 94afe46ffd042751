//! Turning zookeeper-client's errors into regent's [`ErrorKind`]s.

use regent_core::{ErrorKind, StoreError};
use zookeeper_client as zk;

/// The kind of a zookeeper-client error: whether retrying may help.
pub(crate) fn classify(e: &zk::Error) -> ErrorKind {
    use zk::Error as E;
    match e {
        // The connection broke, no server answered, the server is busy, or
        // the session ended (a new one is made at the next campaign).
        E::ConnectionLoss
        | E::Timeout
        | E::NoHosts
        | E::Throttled
        | E::SessionExpired
        | E::SessionMoved
        | E::ClientClosed
        | E::NotReadOnly => ErrorKind::Unavailable,
        // zookeeper-client reports what broke under a request in flight as
        // `Custom`: the socket's own error ("Connection reset by peer") or
        // "no response from connection in N ms". Both are a lost connection;
        // the client reconnects and the session may still be alive, so a
        // retry may help. (It also makes `Custom` for TLS settings, which
        // regent does not use.) tests/faults.rs (a brief pause, a quick
        // restart, a pause past the session timeout) fail if this is
        // Protocol: the candidate would stop campaigning.
        E::Custom(_) => ErrorKind::Unavailable,
        E::NoAuth | E::AuthFailed | E::InvalidAcl => ErrorKind::Auth,
        E::BadArguments(_)
        | E::QuotaExceeded
        | E::Unimplemented
        | E::ReconfigDisabled
        | E::NoChildrenForEphemerals => ErrorKind::Config,
        _ => ErrorKind::Protocol,
    }
}

/// A [`StoreError`] for `what` (the operation, election and servers),
/// with zookeeper-client's error as its source.
pub(crate) fn zk_error(what: String, e: zk::Error) -> StoreError {
    let kind = classify(&e);
    let what = match e {
        zk::Error::NoAuth => format!(
            "{what}: ZooKeeper denied the permission (the node's ACL does not let this \
             session's digest user do it)"
        ),
        zk::Error::AuthFailed => format!("{what}: ZooKeeper refused the digest credentials"),
        zk::Error::SessionExpired => format!("{what}: the ZooKeeper session expired"),
        _ => what,
    };
    StoreError::new(kind, what).with_source(e)
}

/// Whether the source of `e` is ZooKeeper's `NodeExists`.
pub(crate) fn is_node_exists(e: &StoreError) -> bool {
    std::error::Error::source(e)
        .and_then(|s| s.downcast_ref::<zk::Error>())
        .is_some_and(|z| matches!(z, zk::Error::NodeExists))
}

/// Whether the source of `e` is ZooKeeper's `NoNode`.
pub(crate) fn is_no_node(e: &StoreError) -> bool {
    std::error::Error::source(e)
        .and_then(|s| s.downcast_ref::<zk::Error>())
        .is_some_and(|z| matches!(z, zk::Error::NoNode))
}

/// Whether the source of `e` is ZooKeeper's `BadVersion`.
pub(crate) fn is_bad_version(e: &StoreError) -> bool {
    std::error::Error::source(e)
        .and_then(|s| s.downcast_ref::<zk::Error>())
        .is_some_and(|z| matches!(z, zk::Error::BadVersion))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        assert_eq!(classify(&zk::Error::ConnectionLoss), ErrorKind::Unavailable);
        assert_eq!(classify(&zk::Error::SessionExpired), ErrorKind::Unavailable);
        assert_eq!(classify(&zk::Error::NoAuth), ErrorKind::Auth);
        assert_eq!(classify(&zk::Error::AuthFailed), ErrorKind::Auth);
        assert_eq!(classify(&zk::Error::NoNode), ErrorKind::Protocol);
        assert_eq!(
            classify(&zk::Error::NoChildrenForEphemerals),
            ErrorKind::Config
        );
    }
}
