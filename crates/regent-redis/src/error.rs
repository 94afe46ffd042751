//! Redis's errors, classified for the candidate: what a retry may cure
//! (the network, a server loading its data, a replica that is not the
//! master yet) is transient; a refused user, a missing permission or a
//! value of another type on regent's key is not.

use redis::{ErrorKind as Kind, RedisError, ServerErrorKind as Server};
use regent_core::{ErrorKind, StoreError};

/// `e`, met while doing `what`, as a classified store error.
pub(crate) fn classify(what: String, e: RedisError) -> StoreError {
    let (kind, hint) = kind_of(&e);
    StoreError::new(kind, format!("{what}{hint}")).with_source(e)
}

/// Whether `e` means the connection it came on should be made again:
/// broken, timed out, or on a server that is no longer the master (a
/// failover moved it; the Sentinels name another).
pub(crate) fn reconnect(e: &RedisError) -> bool {
    e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || matches!(
            e.kind(),
            Kind::Server(Server::ReadOnly | Server::MasterDown | Server::BusyLoading)
        )
        // A script's error carries the code of the command that failed in
        // it: a write refused by a replica that was the master.
        || matches!(e.code(), Some("READONLY" | "MASTERDOWN" | "LOADING"))
}

fn kind_of(e: &RedisError) -> (ErrorKind, &'static str) {
    if let Some(found) = tls_failure(e) {
        return found;
    }
    if e.kind() == Kind::Server(Server::ReadOnly) || e.code() == Some("READONLY") {
        // A failover in progress, or a URL that names a replica.
        return (
            ErrorKind::Unavailable,
            ": the server is a read-only replica (name the master, or its Sentinels with \
             redis+sentinel://)",
        );
    }
    if reconnect(e) {
        return (ErrorKind::Unavailable, "");
    }
    let code = e.code().unwrap_or_default();
    // A script's error carries the code of the command that failed in it.
    let detail = e.detail().unwrap_or_default();
    if code == "WRONGTYPE" || detail.contains("WRONGTYPE") {
        return (
            ErrorKind::Corrupt,
            ": a key of regent's holds a value of another type (another program's key?); \
             regent leaves it alone",
        );
    }
    // A command a script may not run: the ACL's refusal, in a script's
    // words.
    let lower = detail.to_ascii_lowercase();
    let refused_in_script =
        lower.contains("can't run this command") || lower.contains("no permissions to access");
    let code = if refused_in_script { "NOPERM" } else { code };
    match code {
        "WRONGPASS" | "NOAUTH" => {
            return (
                ErrorKind::Auth,
                ": Redis refused the user or the password (REGENT_REDIS_PASSWORD, \
                 --redis-password-file, the URL's user or --redis-user)",
            );
        }
        "NOPERM" => {
            return (
                ErrorKind::Auth,
                ": the Redis user lacks a permission: it needs scripts, reads, writes, \
                 TIME, PING and pub/sub (and WAIT with --redis-wait-replicas) on the keys \
                 and channels of regent's prefix (ACL `~regent:* &regent:* +@scripting \
                 +@read +@write +@pubsub +time +ping +wait`)",
            );
        }
        "LOADING" | "TRYAGAIN" | "BUSY" | "CLUSTERDOWN" | "MASTERDOWN" | "READONLY"
        | "NOREPLICAS" | "OOM" => return (ErrorKind::Unavailable, ""),
        "MOVED" | "ASK" | "CROSSSLOT" => {
            return (
                ErrorKind::Config,
                ": this is a Redis Cluster node; regent speaks to one Redis or to a master \
                 named by Sentinels (redis+sentinel://)",
            );
        }
        _ => {}
    }
    let kind = match e.kind() {
        Kind::AuthenticationFailed => ErrorKind::Auth,
        Kind::InvalidClientConfig
        | Kind::MasterNameNotFoundBySentinel
        | Kind::EmptySentinelList => ErrorKind::Config,
        Kind::NoValidReplicasFoundBySentinel => ErrorKind::Unavailable,
        Kind::Parse | Kind::UnexpectedReturnType => ErrorKind::Protocol,
        // "ERR unknown command", "ERR DB index is out of range", a
        // script refused: what the server is, not what a retry mends.
        Kind::Server(Server::ResponseError) | Kind::Extension => ErrorKind::Config,
        _ => ErrorKind::Protocol,
    };
    (kind, "")
}

/// A TLS handshake that no retry mends: the server's certificate did not
/// pass the check (`Config`), or the server refused ours (`Auth`). One cut
/// short by the network is neither and stays `Unavailable`.
///
/// The client keeps an I/O error behind an `Arc`, whose chain skips the
/// `rustls::Error` inside: the error's words are what is left to read
/// (rustls's own: "invalid peer certificate", "received fatal alert").
fn tls_failure(e: &RedisError) -> Option<(ErrorKind, &'static str)> {
    let refused = || {
        (
            ErrorKind::Auth,
            ": the server refused the TLS handshake (does it want a client certificate?)",
        )
    };
    let unchecked = || {
        (
            ErrorKind::Config,
            ": the server's TLS certificate did not pass the check (the CA certificate, \
             --redis-cacert, or the host name in the URL)",
        )
    };
    if let Some(tls) = regent_core::find_cause::<rustls::Error>(e) {
        return Some(match tls {
            rustls::Error::AlertReceived(_) => refused(),
            _ => unchecked(),
        });
    }
    if !e.is_io_error() {
        return None;
    }
    let text = e.to_string();
    if text.contains("received fatal alert") {
        Some(refused())
    } else if text.contains("invalid peer certificate") || text.contains("InvalidCertificate") {
        Some(unchecked())
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(code: &str, detail: &str) -> RedisError {
        redis::make_extension_error(code.to_owned(), Some(detail.to_owned()))
    }

    #[test]
    fn classes_of_error() {
        let io: RedisError = std::io::Error::from(std::io::ErrorKind::ConnectionRefused).into();
        assert_eq!(kind_of(&io).0, ErrorKind::Unavailable);
        assert!(reconnect(&io));
        assert_eq!(kind_of(&server("WRONGPASS", "x")).0, ErrorKind::Auth);
        assert_eq!(kind_of(&server("NOPERM", "x")).0, ErrorKind::Auth);
        assert_eq!(
            kind_of(&server(
                "ERR",
                "The user executing the script can't run this command or subcommand script: …"
            ))
            .0,
            ErrorKind::Auth
        );
        assert_eq!(kind_of(&server("WRONGTYPE", "x")).0, ErrorKind::Corrupt);
        assert_eq!(kind_of(&server("LOADING", "x")).0, ErrorKind::Unavailable);
        assert_eq!(kind_of(&server("MOVED", "1 h:1")).0, ErrorKind::Config);
        let tls: RedisError = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        )
        .into();
        assert_eq!(kind_of(&tls).0, ErrorKind::Config);
        let alert: RedisError = std::io::Error::other(rustls::Error::AlertReceived(
            rustls::AlertDescription::CertificateRequired,
        ))
        .into();
        assert_eq!(kind_of(&alert).0, ErrorKind::Auth);
    }
}
