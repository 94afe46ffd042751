//! Building a [`ConsulStore`]: [`ConsulStoreBuilder`], its settings and
//! their defaults, and the checks of the agent's address, the key prefix,
//! the datacenter and the token that `build()` makes before any request.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use regent_core::store::shared::SharedSessions;
use regent_core::store::shared_watch::SharedWatches;
use regent_core::{ErrorKind, StoreError};
use reqwest::Url;
use reqwest::header::{HeaderMap, HeaderValue};

use crate::client::{ConsulStore, Inner, MAX_IN_FLIGHT};
use crate::proof::Proofs;
use crate::session::MAX_TTL;

/// How long one call may take, retries of Consul's transient 500s
/// included, unless set with [`ConsulStoreBuilder::call_timeout`].
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// The key prefix unless set with [`ConsulStoreBuilder::prefix`]: election
/// `jobs` lives at the key `regent/jobs`.
pub const DEFAULT_PREFIX: &str = "regent/";

/// The agent's address unless given: Consul's default, as
/// `CONSUL_HTTP_ADDR`'s default.
pub const DEFAULT_ADDRESS: &str = "127.0.0.1:8500";

/// Where the CLI keeps the restart shortcut's proofs
/// ([`ConsulStoreBuilder::restart_proofs`]): `$XDG_RUNTIME_DIR/regent/consul`,
/// else `TMPDIR/regent-UID/consul`.
pub fn default_restart_proofs_dir() -> PathBuf {
    crate::proof::default_dir()
}

/// The longest lock delay accepted.
const MAX_LOCK_DELAY: Duration = MAX_TTL;

/// Bytes that must not be printed (an ACL token, a private key).
#[derive(Clone, PartialEq, Eq)]
struct Secret(Vec<u8>);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"***\"")
    }
}

/// Builds a [`ConsulStore`]: [`ConsulStore::builder`], setters, then
/// [`build`](Self::build).
#[derive(Clone)]
#[must_use]
pub struct ConsulStoreBuilder {
    address: String,
    token: Option<Secret>,
    datacenter: Option<String>,
    prefix: String,
    call_timeout: Duration,
    lock_delay: Option<Duration>,
    tls: bool,
    ca_pem: Option<Vec<u8>>,
    identity: Option<(Vec<u8>, Secret)>,
    restart_proofs: Option<PathBuf>,
}

impl fmt::Debug for ConsulStoreBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConsulStoreBuilder")
            .field("address", &self.address)
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("datacenter", &self.datacenter)
            .field("prefix", &self.prefix)
            .field("call_timeout", &self.call_timeout)
            .field("lock_delay", &self.lock_delay)
            .field("tls", &self.tls)
            .field("ca_pem", &self.ca_pem.is_some())
            .field("client_identity", &self.identity.is_some())
            .field("restart_proofs", &self.restart_proofs)
            .finish()
    }
}

impl ConsulStoreBuilder {
    /// The ACL token sent with every request as `X-Consul-Token` (what
    /// `CONSUL_HTTP_TOKEN` holds for Consul's own tools). It never appears
    /// in `Debug` output, logs or error messages. It needs
    /// `session:write` on the agent's node and `key:write` on the
    /// election keys.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(Secret(token.into().into_bytes()));
        self
    }

    /// The datacenter (`?dc=`) whose servers hold the sessions and keys
    /// (default: the agent's own).
    pub fn datacenter(mut self, datacenter: impl Into<String>) -> Self {
        self.datacenter = Some(datacenter.into());
        self
    }

    /// What goes before every election name in the key (default
    /// [`DEFAULT_PREFIX`]); a non-empty prefix without a trailing `/` gets
    /// one. An empty prefix puts elections at the KV root.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// How long one call may take, retries included (default
    /// [`DEFAULT_CALL_TIMEOUT`]). Keep it below the renew deadline.
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// The lock delay of every session: after Consul invalidates a
    /// session, the keys it held cannot be acquired for this long. By
    /// default it is each lease's ttl, which covers every way a session can
    /// end while its holder still leads (an agent that leaves the cluster
    /// as it stops, an operator); a fixed delay shorter than the ttl leaves
    /// those to fencing tokens alone. See the [crate docs](crate#lock-delay).
    pub fn lock_delay(mut self, delay: Duration) -> Self {
        self.lock_delay = Some(delay);
        self
    }

    /// Enables the recipe's **restart shortcut**, proven by lock files in
    /// `dir` (the CLI: [`default_restart_proofs_dir`]). Off by default.
    ///
    /// An instance that finds the key locked under its own holder id (the
    /// recipe's ClientID: it was restarted) leads again at once instead of
    /// waiting up to two TTLs for its old session to expire, but only when
    /// the kernel proves the previous process gone: on every win the
    /// holder locks `dir/SESSION.lock` (`flock`) with a descriptor that
    /// the processes it starts inherit; a restarted instance that can lock
    /// the file of the session in the key knows that the process which won
    /// with it, and everything it started while it led, has exited. It then
    /// ends that session and acquires as usual, with a larger fencing
    /// token. Without the file (another host or user, a private `/tmp`)
    /// or with its lock held (the old process or one of its children
    /// still runs, frozen or not) it waits like any follower. See the
    /// [crate docs](crate#the-restart-shortcut).
    ///
    /// Side effect: while this process leads, the children it starts
    /// inherit one more open descriptor (the lock file), and a child
    /// that outlives the term keeps the shortcut from being taken for
    /// that session (never the election from moving on).
    pub fn restart_proofs(mut self, dir: impl Into<PathBuf>) -> Self {
        self.restart_proofs = Some(dir.into());
        self
    }

    /// Speaks TLS to the agent (Consul's `CONSUL_HTTP_SSL`), trusting the
    /// system's certificate store unless [`tls_ca_pem`](Self::tls_ca_pem)
    /// names a CA. An address without a scheme then uses `https://`.
    pub fn tls(mut self) -> Self {
        self.tls = true;
        self
    }

    /// Speaks TLS, trusting only the CA certificate(s) in `ca_pem` (PEM,
    /// what `CONSUL_CACERT` names).
    pub fn tls_ca_pem(mut self, ca_pem: impl Into<Vec<u8>>) -> Self {
        self.tls = true;
        self.ca_pem = Some(ca_pem.into());
        self
    }

    /// Speaks TLS, presenting the client certificate `cert_pem` with its
    /// private key `key_pem` (PEM; what `CONSUL_CLIENT_CERT` and
    /// `CONSUL_CLIENT_KEY` name) to an agent with `verify_incoming`.
    pub fn tls_client_identity_pem(
        mut self,
        cert_pem: impl Into<Vec<u8>>,
        key_pem: impl Into<Vec<u8>>,
    ) -> Self {
        self.tls = true;
        self.identity = Some((cert_pem.into(), Secret(key_pem.into())));
        self
    }

    /// Checks the settings and builds the store. Nothing is sent: an
    /// unreachable agent shows as
    /// [`Unavailable`](ErrorKind::Unavailable) errors of the store's calls.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Config`] naming the rule broken: an address that is not
    /// `HOST:PORT` or `http(s)://HOST:PORT`, `http://` with TLS settings, a
    /// zero call timeout, a lock delay over a day, a prefix or datacenter
    /// with characters a key or query cannot hold verbatim, a token that
    /// cannot be an HTTP header, PEM texts without their certificate or
    /// key.
    pub fn build(self) -> Result<ConsulStore, StoreError> {
        let config =
            |why: String| StoreError::new(ErrorKind::Config, format!("Consul store: {why}"));
        if self.call_timeout.is_zero() {
            return Err(config("the call timeout must be greater than zero".into()));
        }
        if let Some(delay) = self.lock_delay
            && delay > MAX_LOCK_DELAY
        {
            return Err(config(format!(
                "the lock delay {delay:?} is longer than a day"
            )));
        }
        let base = parse_address(&self.address, self.tls).map_err(config)?;
        let prefix = normalize_prefix(&self.prefix).map_err(config)?;
        if let Some(dc) = &self.datacenter
            && (dc.is_empty()
                || !dc
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')))
        {
            return Err(config(format!(
                "the datacenter '{}' must be ASCII letters, digits, '-', '_' or '.'",
                regent_core::target::printable(dc)
            )));
        }
        let mut headers = HeaderMap::new();
        if let Some(token) = &self.token {
            let mut value = HeaderValue::from_bytes(&token.0).map_err(|_| {
                config("the ACL token holds characters an HTTP header cannot carry".into())
            })?;
            // Kept out of reqwest's and hyper's debug output.
            value.set_sensitive(true);
            headers.insert("X-Consul-Token", value);
        }
        let tls = crate::tls::client_config(
            base.scheme() == "https",
            self.ca_pem.as_deref(),
            self.identity
                .as_ref()
                .map(|(c, k)| (c.as_slice(), k.0.as_slice())),
        )
        .map_err(config)?;
        let client = reqwest::Client::builder()
            .default_headers(headers)
            .connect_timeout(self.call_timeout)
            .tls_backend_preconfigured(tls)
            .build()
            .map_err(|e| config(format!("cannot build the HTTP client: {e}")))?;
        Ok(ConsulStore {
            inner: Arc::new(Inner {
                client,
                in_flight: tokio::sync::Semaphore::new(MAX_IN_FLIGHT),
                base,
                prefix,
                datacenter: self.datacenter,
                call_timeout: self.call_timeout,
                lock_delay: self.lock_delay,
                has_token: self.token.is_some(),
                proofs: self.restart_proofs.map(Proofs::new),
                sessions: SharedSessions::default(),
                watches: SharedWatches::default(),
                roster: Default::default(),
            }),
        })
    }
}

/// `HOST:PORT`, `http://HOST:PORT` or `https://HOST:PORT` (a trailing `/`
/// allowed) to the base URL of the API.
fn parse_address(address: &str, tls: bool) -> Result<Url, String> {
    let shown = regent_core::target::printable(address);
    let with_scheme = if address.contains("://") {
        address.to_owned()
    } else {
        format!("{}://{address}", if tls { "https" } else { "http" })
    };
    let url = Url::parse(&with_scheme).map_err(|e| {
        format!("the address '{shown}' is not HOST:PORT or http(s)://HOST:PORT ({e})")
    })?;
    match url.scheme() {
        "https" => {}
        "http" if !tls => {}
        "http" => {
            return Err(format!(
                "the address '{shown}' is http:// but TLS settings are given; write https://"
            ));
        }
        other => {
            return Err(format!(
                "the address '{shown}' has scheme '{other}'; the agent speaks http:// or https://"
            ));
        }
    }
    if url.host_str().is_none_or(str::is_empty)
        || !url.username().is_empty()
        || url.password().is_some()
        || !matches!(url.path(), "" | "/")
        || url.query().is_some()
        || url.fragment().is_some()
    {
        return Err(format!(
            "the address '{shown}' must be HOST:PORT or http(s)://HOST:PORT, nothing more"
        ));
    }
    Ok(url)
}

/// The prefix with a trailing `/` (empty stays empty). It is used verbatim
/// in keys: no whitespace, control characters, `%`, `?`, `#`, no empty
/// segment, no leading `/`.
pub(crate) fn normalize_prefix(prefix: &str) -> Result<String, String> {
    let shown = regent_core::target::printable(prefix);
    if let Some(c) = prefix
        .chars()
        .find(|c| c.is_whitespace() || c.is_control() || matches!(c, '%' | '?' | '#' | '\\'))
    {
        return Err(format!(
            "the key prefix '{shown}' contains {:?}; write it without whitespace, control \
             characters, '%', '?', '#' or '\\'",
            c
        ));
    }
    if prefix.starts_with('/') {
        return Err(format!(
            "the key prefix '{shown}' starts with '/'; Consul keys do not"
        ));
    }
    let prefix = match prefix {
        "" => String::new(),
        p if p.ends_with('/') => p.to_owned(),
        p => format!("{p}/"),
    };
    if prefix.contains("//") {
        return Err(format!("the key prefix '{shown}' has an empty segment"));
    }
    Ok(prefix)
}

impl ConsulStore {
    /// Starts building a store for the agent at `address` (`HOST:PORT` or
    /// `http(s)://HOST:PORT`).
    pub fn builder(address: impl Into<String>) -> ConsulStoreBuilder {
        ConsulStoreBuilder {
            address: address.into(),
            token: None,
            datacenter: None,
            prefix: DEFAULT_PREFIX.to_owned(),
            call_timeout: DEFAULT_CALL_TIMEOUT,
            lock_delay: None,
            tls: false,
            ca_pem: None,
            identity: None,
            restart_proofs: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_prefixes() {
        assert_eq!(
            parse_address("127.0.0.1:8500", false).unwrap().as_str(),
            "http://127.0.0.1:8500/"
        );
        assert_eq!(
            parse_address("h:8501", true).unwrap().as_str(),
            "https://h:8501/"
        );
        assert!(
            parse_address("http://h:1", true)
                .unwrap_err()
                .contains("https://")
        );
        assert!(parse_address("ftp://h:1", false).is_err());
        assert!(parse_address("http://h:1/v1", false).is_err());
        assert!(parse_address("http://u:p@h:1", false).is_err());
        assert_eq!(normalize_prefix("").unwrap(), "");
        assert_eq!(normalize_prefix("a/b").unwrap(), "a/b/");
        assert_eq!(normalize_prefix("a/").unwrap(), "a/");
        assert!(normalize_prefix("/a").is_err());
        assert!(normalize_prefix("a//b").is_err());
        assert!(normalize_prefix("a b").is_err());
        assert!(normalize_prefix("a%20").is_err());
    }

    #[test]
    fn builder_refuses_what_it_cannot_use_and_hides_the_token() {
        let b = ConsulStore::builder("127.0.0.1:8500").token("s3cret-token");
        let shown = format!("{b:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        let store = b.clone().build().unwrap();
        let shown = format!("{store:?}");
        assert!(
            !shown.contains("s3cret") && shown.contains("***"),
            "{shown}"
        );
        let e = b.clone().call_timeout(Duration::ZERO).build().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Config);
        let e = b.clone().datacenter("dc 1").build().unwrap_err();
        assert!(e.to_string().contains("datacenter"), "{e}");
        let e = ConsulStore::builder("h:1")
            .token("a\nb")
            .build()
            .unwrap_err();
        assert!(
            e.to_string().contains("token") && !e.to_string().contains("a\nb"),
            "{e}"
        );
    }
}
