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
    if let Some(failure) = TlsFailure::of(e) {
        return failure.kind_and_words();
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
/// pass the check (`Config`), or the server refused ours, or its absence
/// (`Auth`). One cut short by the network is none of these and stays
/// `Unavailable`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TlsFailure {
    /// The server's certificate did not pass the check: not signed by a
    /// CA the client trusts, or not for the URL's host.
    ServerCertificate,
    /// The server wants a client certificate and got none (TLS 1.3's
    /// `certificate_required` alert).
    NoClientCertificate,
    /// The server refused the client certificate presented (one of a CA
    /// it does not trust, expired, or not for clients).
    ClientCertificateRefused,
    /// The server refused the handshake with another alert: under TLS 1.2
    /// a missing client certificate is `handshake_failure`.
    Refused,
}

impl TlsFailure {
    /// What `e` says about the handshake, if it failed for good.
    ///
    /// The client keeps an I/O error behind an `Arc`, whose chain skips
    /// the `rustls::Error` inside: the error's words are what is left to
    /// read then (rustls's own: "invalid peer certificate", "received
    /// fatal alert: CertificateRequired").
    pub(crate) fn of(e: &RedisError) -> Option<Self> {
        if let Some(tls) = regent_core::find_cause::<rustls::Error>(e) {
            return Some(match tls {
                rustls::Error::AlertReceived(alert) => Self::of_alert(&format!("{alert:?}")),
                _ => Self::ServerCertificate,
            });
        }
        if !e.is_io_error() {
            return None;
        }
        let text = e.to_string();
        if let Some((_, alert)) = text.split_once("received fatal alert: ") {
            Some(Self::of_alert(alert))
        } else if text.contains("invalid peer certificate") || text.contains("InvalidCertificate") {
            Some(Self::ServerCertificate)
        } else {
            None
        }
    }

    /// What a store error (with its cause) says about the handshake.
    pub(crate) fn of_store_error(e: &StoreError) -> Option<Self> {
        regent_core::find_cause::<RedisError>(e).and_then(Self::of)
    }

    /// The server's alert, by the name rustls gives it
    /// (`CertificateRequired`), at the start of `alert`.
    fn of_alert(alert: &str) -> Self {
        let name: String = alert
            .chars()
            .take_while(char::is_ascii_alphanumeric)
            .collect();
        match name.as_str() {
            "CertificateRequired" => Self::NoClientCertificate,
            "BadCertificate"
            | "UnsupportedCertificate"
            | "CertificateRevoked"
            | "CertificateExpired"
            | "CertificateUnknown"
            | "UnknownCA"
            | "AccessDenied" => Self::ClientCertificateRefused,
            _ => Self::Refused,
        }
    }

    fn kind_and_words(self) -> (ErrorKind, &'static str) {
        match self {
            Self::ServerCertificate => (
                ErrorKind::Config,
                ": the server's TLS certificate did not pass the check (the CA certificate, \
                 --redis-cacert, or the host name in the URL)",
            ),
            Self::NoClientCertificate => (
                ErrorKind::Auth,
                ": the server wants a client certificate (tls-auth-clients): give one with \
                 --redis-cert and --redis-key",
            ),
            Self::ClientCertificateRefused => (
                ErrorKind::Auth,
                ": the server refused the client certificate (--redis-cert): it must \
                 trust the CA that signed it (its tls-ca-cert-file)",
            ),
            Self::Refused => (
                ErrorKind::Auth,
                ": the server refused the TLS handshake (does it want a client certificate? \
                 --redis-cert and --redis-key)",
            ),
        }
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
        let alert = |description| -> RedisError {
            std::io::Error::other(rustls::Error::AlertReceived(description)).into()
        };
        for (description, failure) in [
            (
                rustls::AlertDescription::CertificateRequired,
                TlsFailure::NoClientCertificate,
            ),
            (
                rustls::AlertDescription::UnknownCA,
                TlsFailure::ClientCertificateRefused,
            ),
            (
                rustls::AlertDescription::HandshakeFailure,
                TlsFailure::Refused,
            ),
        ] {
            let e = alert(description);
            assert_eq!(TlsFailure::of(&e), Some(failure), "{description:?}");
            assert_eq!(kind_of(&e).0, ErrorKind::Auth, "{description:?}");
            assert!(
                kind_of(&e).1.contains("client certificate"),
                "{description:?}"
            );
        }
    }

    /// The words alone, as the client leaves them when it keeps the I/O
    /// error behind an `Arc`.
    #[test]
    fn tls_failures_are_told_apart_by_their_words() {
        let said = |text: &str| -> RedisError { std::io::Error::other(text.to_owned()).into() };
        for (text, failure) in [
            (
                "received fatal alert: CertificateRequired",
                Some(TlsFailure::NoClientCertificate),
            ),
            (
                "received fatal alert: UnknownCA",
                Some(TlsFailure::ClientCertificateRefused),
            ),
            (
                "received fatal alert: DecodeError",
                Some(TlsFailure::Refused),
            ),
            (
                "invalid peer certificate: UnknownIssuer",
                Some(TlsFailure::ServerCertificate),
            ),
            ("connection reset by peer", None),
        ] {
            assert_eq!(TlsFailure::of(&said(text)), failure, "{text}");
        }
    }
}
