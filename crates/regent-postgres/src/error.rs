//! PostgreSQL's errors, classified for the candidate: what a retry may
//! cure is transient; a refused role, a missing database or privilege,
//! or a table that is not ours is not.

use regent_core::{ErrorKind, StoreError};
use tokio_postgres::error::SqlState;

/// `e`, met while doing `what`, as a classified store error.
pub(crate) fn classify(what: String, e: tokio_postgres::Error) -> StoreError {
    if let Some((kind, hint)) = tls_failure(&e) {
        return StoreError::new(kind, format!("{what}: {hint}")).with_source(e);
    }
    let kind = match e.code() {
        // tokio-postgres's own refusal of the settings (its words; no
        // SQLSTATE): nothing a retry mends.
        None if e.to_string().starts_with("invalid configuration") => ErrorKind::Config,
        // No answer from a server: connection refused, reset, closed, a
        // timeout.
        None => ErrorKind::Unavailable,
        Some(code) => kind_of(code),
    };
    let hint = match e.code() {
        Some(c) if *c == SqlState::INSUFFICIENT_PRIVILEGE => {
            "; the role needs SELECT, INSERT, UPDATE and DELETE on regent_leases, \
             regent_tokens, regent_roster and regent_reserved (and CREATE on the schema to \
             create them on first use)"
        }
        Some(c) if *c == SqlState::UNDEFINED_TABLE => {
            "; the tables are missing: let a role that may create them connect once, or \
             run the statement in the crate docs"
        }
        _ => "",
    };
    StoreError::new(kind, format!("{what}{hint}")).with_source(e)
}

/// `e`, met while adding a column that a table of an earlier build lacks
/// (`what` names the table), as a classified store error.
pub(crate) fn migration(what: String, e: tokio_postgres::Error) -> StoreError {
    let hint = match e.code() {
        Some(c) if *c == SqlState::INSUFFICIENT_PRIVILEGE => {
            "; only the table's owner may add it: the owner runs `ALTER TABLE regent_leases \
             ADD COLUMN IF NOT EXISTS incarnation text` (in the store's schema) once, as the \
             crate docs say"
        }
        Some(c) if *c == SqlState::LOCK_NOT_AVAILABLE => {
            "; other transactions held the table's lock (a long transaction, a dump); the \
             next connection tries again"
        }
        _ => return classify(what, e),
    };
    let kind = e.code().map_or(ErrorKind::Unavailable, kind_of);
    StoreError::new(kind, format!("{what}{hint}")).with_source(e)
}

/// A TLS handshake that no retry mends: the server's certificate did not
/// pass the check (`Config`: the root certificate, the host name or the
/// sslmode is wrong), the server refused ours (`Auth`), or the server
/// speaks no TLS while the URL requires it (`Config`). A handshake cut
/// short by the network is none of these: it stays `Unavailable`.
fn tls_failure(e: &tokio_postgres::Error) -> Option<(ErrorKind, &'static str)> {
    if let Some(tls) = regent_core::find_cause::<rustls::Error>(e) {
        return Some(match tls {
            rustls::Error::AlertReceived(_) => (
                ErrorKind::Auth,
                "the server refused the TLS handshake (its pg_hba.conf may want a client \
                 certificate: sslcert, sslkey)",
            ),
            _ => (
                ErrorKind::Config,
                "the server's TLS certificate did not pass the check (the root certificate, \
                 sslrootcert, or the host name, with sslmode=verify-full)",
            ),
        });
    }
    // tokio-postgres's own words when the server answers "no TLS here" to
    // a connection that requires it.
    let says_no_tls = std::iter::successors(Some(e as &(dyn std::error::Error + 'static)), |e| {
        e.source()
    })
    .any(|e| e.to_string() == "server does not support TLS");
    says_no_tls.then_some((
        ErrorKind::Config,
        "the server does not speak TLS, and sslmode requires it (turn ssl on in its \
         postgresql.conf, or use sslmode=prefer)",
    ))
}

fn kind_of(code: &SqlState) -> ErrorKind {
    let class = &code.code()[..2];
    match class {
        // Connection exceptions, insufficient resources, operator
        // intervention (admin shutdown, crash shutdown, cannot connect now:
        // a server starting, or a standby being promoted), transaction
        // rollbacks (serialization failure, deadlock), system errors.
        "08" | "53" | "57" | "40" | "58" => ErrorKind::Unavailable,
        // A standby that cannot take writes: a pooler or DNS pointing at it
        // during a failover; the primary comes back, or another is promoted.
        "25" if *code == SqlState::READ_ONLY_SQL_TRANSACTION => ErrorKind::Unavailable,
        // `lock_timeout`: another transaction held a lock that long.
        "55" if *code == SqlState::LOCK_NOT_AVAILABLE => ErrorKind::Unavailable,
        // Invalid authorization (a wrong password, no such role), and a
        // missing privilege.
        "28" => ErrorKind::Auth,
        "42" if *code == SqlState::INSUFFICIENT_PRIVILEGE => ErrorKind::Auth,
        // No such database, a table that is not the one we expect, bad
        // syntax from a schema name: the configuration.
        "3D" | "3F" | "42" => ErrorKind::Config,
        // A value the table refuses: someone else's table, or changed.
        "22" | "23" => ErrorKind::Corrupt,
        _ => ErrorKind::Protocol,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_of_error() {
        assert_eq!(kind_of(&SqlState::ADMIN_SHUTDOWN), ErrorKind::Unavailable);
        assert_eq!(
            kind_of(&SqlState::CANNOT_CONNECT_NOW),
            ErrorKind::Unavailable
        );
        assert_eq!(
            kind_of(&SqlState::T_R_SERIALIZATION_FAILURE),
            ErrorKind::Unavailable
        );
        assert_eq!(
            kind_of(&SqlState::READ_ONLY_SQL_TRANSACTION),
            ErrorKind::Unavailable
        );
        assert_eq!(
            kind_of(&SqlState::LOCK_NOT_AVAILABLE),
            ErrorKind::Unavailable
        );
        assert_eq!(kind_of(&SqlState::INVALID_PASSWORD), ErrorKind::Auth);
        assert_eq!(kind_of(&SqlState::INSUFFICIENT_PRIVILEGE), ErrorKind::Auth);
        assert_eq!(kind_of(&SqlState::INVALID_CATALOG_NAME), ErrorKind::Config);
        assert_eq!(kind_of(&SqlState::UNDEFINED_COLUMN), ErrorKind::Config);
        assert_eq!(kind_of(&SqlState::NOT_NULL_VIOLATION), ErrorKind::Corrupt);
    }
}
