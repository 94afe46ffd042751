//! [`ConsulStore`]: the store contract over Consul sessions and KV.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use regent_core::store::ExpirySlack;
use regent_core::store::shared::SharedSessions;
use regent_core::store::shared_watch::SharedWatches;
use regent_core::{
    Acquire, AcquireRequest, ElectionName, ErrorKind, FencingToken, LeaderInfo, LeaderStream,
    Lease, LeaseHandle, LeaseStore, Metadata, Renewal, SafetyClass, StoreError, StoreInfo,
    StoreStyle, WatchMode,
};
use reqwest::header::{HeaderMap, HeaderValue};
use reqwest::{Method, Url};
use serde::Deserialize;
use serde_json::json;
use tokio::time::Instant;

use crate::error::{ConsulAnswer, answer_error, http_error, is_missing_node};
use crate::proof::{Proofs, is_session_id};
use crate::record::{KvEntry, RECORD_FLAGS, base64, encode, encode_update};

/// The shortest session TTL Consul accepts.
pub const MIN_TTL: Duration = Duration::from_secs(10);

/// The longest session TTL Consul accepts (one day, also regent's
/// [`MAX_TTL`](regent_core::MAX_TTL)).
pub const MAX_TTL: Duration = Duration::from_secs(24 * 3600);

/// How long one call may take, retries of Consul's transient 500s
/// included, unless set with [`ConsulStoreBuilder::call_timeout`].
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// The shortest session TTL regent gives Consul when the lock delay is the
/// ttl (the default): two of them are the least slack of such a store.
const SESSION_TTL_FLOOR: Duration = MIN_TTL;

/// The key prefix unless set with [`ConsulStoreBuilder::prefix`]: election
/// `jobs` lives at the key `regent/jobs`.
pub const DEFAULT_PREFIX: &str = "regent/";

/// The agent's address unless given: Consul's default, as
/// `CONSUL_HTTP_ADDR`'s default.
pub const DEFAULT_ADDRESS: &str = "127.0.0.1:8500";

/// How long one blocking query of [`ConsulStore::watch`] waits for a change
/// (`?wait=`). Consul adds up to 1/16 of it as jitter.
pub const WATCH_WAIT: Duration = Duration::from_secs(30);

/// The shortest time between the starts of two blocking queries of one
/// watch: Consul's documentation asks clients to rate-limit the loop.
pub const WATCH_MIN_INTERVAL: Duration = Duration::from_millis(100);

/// The most requests one store (and its clones) has in flight to the
/// agent at once, blocking queries aside; more wait for one to finish
/// (within the call timeout). An agent serves at most
/// `limits.http_max_conns_per_client` (200 by default) connections from
/// one address and resets the rest: 10,000 elections renewing from one
/// process lost a tenth of their terms to those resets. Each watch's
/// blocking query holds a connection of its own besides these.
pub const MAX_IN_FLIGHT: usize = 64;

/// Where the CLI keeps the restart shortcut's proofs
/// ([`ConsulStoreBuilder::restart_proofs`]): `$XDG_RUNTIME_DIR/regent/consul`,
/// else `TMPDIR/regent-UID/consul`.
pub fn default_restart_proofs_dir() -> PathBuf {
    crate::proof::default_dir()
}

/// The longest lock delay accepted.
const MAX_LOCK_DELAY: Duration = MAX_TTL;

/// An election store on a Consul agent's HTTP API. See the
/// [crate docs](crate).
///
/// Cloning is cheap; clones share one HTTP client (and its connections).
#[derive(Clone)]
pub struct ConsulStore {
    inner: Arc<Inner>,
}

struct Inner {
    client: reqwest::Client,
    /// Bounds the requests in flight other than blocking queries to
    /// [`MAX_IN_FLIGHT`].
    in_flight: tokio::sync::Semaphore,
    /// The restart shortcut's proofs, if enabled.
    proofs: Option<Proofs>,
    /// `http(s)://HOST:PORT/`.
    base: Url,
    prefix: String,
    datacenter: Option<String>,
    call_timeout: Duration,
    /// `None`: each session's lock delay is its lease's ttl.
    lock_delay: Option<Duration>,
    has_token: bool,
    /// The sessions this store's elections share.
    sessions: SharedSessions<ConsulStore>,
    /// The watches of the elections watched through this store.
    watches: SharedWatches,
}

impl fmt::Debug for ConsulStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &self.inner;
        f.debug_struct("ConsulStore")
            .field("address", &i.base.as_str())
            .field("prefix", &i.prefix)
            .field("datacenter", &i.datacenter)
            .field("call_timeout", &i.call_timeout)
            .field(
                "lock_delay",
                &i.lock_delay
                    .map_or("the ttl".to_owned(), |d| format!("{d:?}")),
            )
            .field("restart_proofs", &i.proofs.as_ref().map(Proofs::dir))
            .field("token", &if i.has_token { "***" } else { "none" })
            .finish()
    }
}

/// A session as `GET /v1/session/info/ID` shows it: what the store reads.
#[derive(Deserialize)]
struct SessionInfo {
    #[serde(rename = "Name", default)]
    name: String,
    #[serde(rename = "TTL")]
    ttl: String,
    #[serde(rename = "LockDelay")]
    lock_delay: u64,
}

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

/// Consul's answer to one request: its status, the `X-Consul-Index`
/// header and the body.
struct Answer {
    status: u16,
    index: Option<u64>,
    body: Vec<u8>,
}

impl Answer {
    fn json<T: for<'de> Deserialize<'de>>(&self, what: &str) -> Result<T, StoreError> {
        serde_json::from_slice(&self.body).map_err(|e| {
            StoreError::new(
                ErrorKind::Protocol,
                format!("{what}: Consul's answer is not the JSON expected"),
            )
            .with_source(e)
        })
    }
}

/// What the transaction endpoint answered.
enum TxnOutcome {
    /// Every operation applied; the entries written.
    Applied(Vec<KvEntry>),
    /// A check or the lock failed; nothing applied.
    RolledBack,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct TxnResults {
    #[serde(default)]
    results: Option<Vec<TxnResult>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct TxnResult {
    #[serde(rename = "KV")]
    kv: Option<KvEntry>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Created {
    #[serde(rename = "ID")]
    id: String,
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

    /// The name of the agent's node (`GET /v1/agent/self`,
    /// `Config.NodeName`): the recipe's ClientID, which the CLI takes as
    /// the holder id when `--id` is not given.
    ///
    /// # Errors
    ///
    /// As every call: [`Unavailable`](ErrorKind::Unavailable) when the agent
    /// does not answer, [`Auth`](ErrorKind::Auth) when the token may not
    /// read the agent (`agent:read`), [`Protocol`](ErrorKind::Protocol)
    /// for an answer without a node name.
    pub async fn agent_node_name(&self) -> Result<String, StoreError> {
        #[derive(Deserialize)]
        struct AgentSelf {
            #[serde(rename = "Config")]
            config: AgentConfig,
        }
        #[derive(Deserialize)]
        struct AgentConfig {
            #[serde(rename = "NodeName")]
            node_name: String,
        }
        let what = || "read the agent's node name".to_owned();
        let url = self.agent_url(&["agent", "self"]);
        let answer = self
            .call(Method::GET, url, None, &[], Duration::ZERO, &what)
            .await?;
        let agent: AgentSelf = answer.json(&what())?;
        if agent.config.node_name.is_empty() {
            return Err(StoreError::new(
                ErrorKind::Protocol,
                format!(
                    "{} at {}: the agent has no node name",
                    what(),
                    self.inner.base
                ),
            ));
        }
        Ok(agent.config.node_name)
    }

    /// The key of `election`: the prefix, then the name.
    pub fn election_key(&self, election: &ElectionName) -> String {
        format!("{}{election}", self.inner.prefix)
    }

    /// The lock delay of the sessions this store creates for leases of
    /// `ttl`: the ttl itself unless [`ConsulStoreBuilder::lock_delay`] set
    /// one.
    pub fn lock_delay(&self, ttl: Duration) -> Duration {
        self.inner.lock_delay.unwrap_or(ttl)
    }

    /// The TTL of the Consul sessions this store creates for leases of
    /// `ttl`. Consul may end a session one to two of its TTLs after its last
    /// renewal, and nobody may take its key for the lock delay after that:
    /// so a session TTL of `ttl - lock delay`, at least Consul's 10 s,
    /// already keeps the key until the holder's term is over. With the
    /// default lock delay (the ttl) that is 10 s, or half the ttl for ttls
    /// over 20 s, which keeps two and a half renewals of the default
    /// interval (ttl/5) within one session TTL.
    pub fn session_ttl(&self, ttl: Duration) -> Duration {
        match self.inner.lock_delay {
            None => SESSION_TTL_FLOOR.max(ttl / 2),
            Some(delay) => SESSION_TTL_FLOOR
                .max(ttl.saturating_sub(delay))
                .max(ttl / 2),
        }
    }

    /// A URL of the agent's own endpoints (`/v1/agent/…`), which take no
    /// `?dc=`.
    fn agent_url(&self, segments: &[&str]) -> Url {
        let mut url = self.inner.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.clear();
            path.push("v1");
            path.extend(segments);
        }
        url
    }

    fn url(&self, segments: &[&str], query: &[(&str, &str)]) -> Url {
        let mut url = self.inner.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.clear();
            path.push("v1");
            for s in segments {
                path.extend(s.split('/'));
            }
        }
        {
            let mut pairs = url.query_pairs_mut();
            for (k, v) in query {
                if v.is_empty() {
                    pairs.append_key_only(k);
                } else {
                    pairs.append_pair(k, v);
                }
            }
            if let Some(dc) = &self.inner.datacenter {
                pairs.append_pair("dc", dc);
            }
        }
        if url.query() == Some("") {
            url.set_query(None);
        }
        url
    }

    /// Sends one request, retrying Consul's transient errors (a 500 from
    /// an agent whose server just died, "no cluster leader") until the
    /// call timeout (`extra` more for a blocking query) has passed.
    /// Answers with a 2xx status or one of `expected` are returned; others
    /// are errors naming `what`.
    async fn call(
        &self,
        method: Method,
        url: Url,
        body: Option<Vec<u8>>,
        expected: &[u16],
        extra: Duration,
        what: &(dyn Fn() -> String + Sync),
    ) -> Result<Answer, StoreError> {
        let limit = self.inner.call_timeout + extra;
        let deadline = Instant::now() + limit;
        let mut backoff = Duration::from_millis(50);
        loop {
            let mut request = self.inner.client.request(method.clone(), url.clone());
            if let Some(body) = &body {
                request = request.body(body.clone());
            }
            let attempt = async {
                // A blocking query waits on a connection of its own; every
                // other request waits for a permit (never closed: `None`
                // would only mean no bound).
                let _permit = if extra.is_zero() {
                    self.inner.in_flight.acquire().await.ok()
                } else {
                    None
                };
                let response = request.send().await?;
                let status = response.status().as_u16();
                let index = response
                    .headers()
                    .get("X-Consul-Index")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse().ok());
                let body = response.bytes().await?.to_vec();
                Ok::<_, reqwest::Error>(Answer {
                    status,
                    index,
                    body,
                })
            };
            let answer = match tokio::time::timeout_at(deadline, attempt).await {
                Err(_) => {
                    return Err(StoreError::unavailable(format!(
                        "{} at {}: no answer within {limit:?}",
                        what(),
                        self.inner.base
                    )));
                }
                Ok(Err(e)) => {
                    return Err(http_error(format!("{} at {}", what(), self.inner.base), e));
                }
                Ok(Ok(a)) => a,
            };
            if (200..300).contains(&answer.status) || expected.contains(&answer.status) {
                return Ok(answer);
            }
            let consul = ConsulAnswer {
                status: answer.status,
                body: String::from_utf8_lossy(&answer.body).into_owned(),
            };
            let now = Instant::now();
            if consul.is_retryable() && now + backoff < deadline {
                tracing::debug!(status = consul.status, body = %consul.body.trim(), "consul: retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_millis(500));
                continue;
            }
            return Err(answer_error(
                format!("{} at {}", what(), self.inner.base),
                consul,
            ));
        }
    }

    /// Reads `key` (`?consistent`: from the Raft leader, after confirming
    /// it still leads, so that an acknowledged acquire is always seen).
    async fn read_key(
        &self,
        key: &str,
        what: &(dyn Fn() -> String + Sync),
    ) -> Result<(Option<KvEntry>, Option<u64>), StoreError> {
        let url = self.url(&["kv", key], &[("consistent", "")]);
        let answer = self
            .call(Method::GET, url, None, &[404], Duration::ZERO, what)
            .await?;
        self.entry_of(key, &answer, what).map(|e| (e, answer.index))
    }

    fn entry_of(
        &self,
        key: &str,
        answer: &Answer,
        what: &(dyn Fn() -> String + Sync),
    ) -> Result<Option<KvEntry>, StoreError> {
        if answer.status == 404 {
            return Ok(None);
        }
        let entries: Vec<KvEntry> = answer.json(&what())?;
        match entries.into_iter().next() {
            Some(e) if e.key == key => Ok(Some(e)),
            Some(e) => Err(StoreError::new(
                ErrorKind::Protocol,
                format!(
                    "{}: Consul answered key '{}' for '{key}'",
                    what(),
                    regent_core::target::printable(&e.key)
                ),
            )),
            None => Ok(None),
        }
    }

    async fn create_session(
        &self,
        key: &str,
        ttl: Duration,
        what: &(dyn Fn() -> String + Sync),
    ) -> Result<String, StoreError> {
        let body = json!({
            "Name": key,
            "TTL": go_duration(self.session_ttl(ttl)),
            "LockDelay": go_duration(self.lock_delay(ttl)),
            "Behavior": "release",
            // No health checks: the TTL alone ends the session, so that
            // every automatic invalidation comes after the holder's own
            // step-down deadline (see the crate docs).
            "Checks": [],
        });
        let url = self.url(&["session", "create"], &[]);
        let answer = match self
            .call(
                Method::PUT,
                url,
                Some(body.to_string().into_bytes()),
                &[],
                Duration::ZERO,
                what,
            )
            .await
        {
            // Consul makes a session on the agent's own node, which another
            // datacenter's catalog does not hold: no retry helps.
            Err(e) if is_missing_node(&e) && self.inner.datacenter.is_some() => {
                return Err(StoreError::new(
                    ErrorKind::Config,
                    format!(
                        "{}: datacenter '{}' does not know this agent's node, and Consul makes \
                         a session on the agent's own node: elections need the agent's own \
                         datacenter (drop ?dc= or --consul-dc)",
                        what(),
                        self.inner.datacenter.as_deref().unwrap_or_default()
                    ),
                )
                .with_source(e));
            }
            r => r?,
        };
        let created: Created = answer.json(&what())?;
        if !is_session_id(&created.id) {
            return Err(StoreError::new(
                ErrorKind::Protocol,
                format!("{}: Consul answered an invalid session id", what()),
            ));
        }
        Ok(created.id)
    }

    /// Ends `session`, best effort: a session left behind expires by its
    /// TTL.
    async fn destroy_session(
        &self,
        session: &str,
        what: &(dyn Fn() -> String + Sync),
    ) -> Result<(), StoreError> {
        let url = self.url(&["session", "destroy", session], &[]);
        self.call(Method::PUT, url, None, &[], Duration::ZERO, what)
            .await
            .map(|_| ())
    }

    async fn txn(
        &self,
        ops: serde_json::Value,
        what: &(dyn Fn() -> String + Sync),
    ) -> Result<TxnOutcome, StoreError> {
        let url = self.url(&["txn"], &[]);
        let answer = self
            .call(
                Method::PUT,
                url,
                Some(ops.to_string().into_bytes()),
                &[409],
                Duration::ZERO,
                what,
            )
            .await?;
        if answer.status == 409 {
            return Ok(TxnOutcome::RolledBack);
        }
        let results: TxnResults = answer.json(&what())?;
        Ok(TxnOutcome::Applied(
            results
                .results
                .unwrap_or_default()
                .into_iter()
                .filter_map(|r| r.kv)
                .collect(),
        ))
    }

    fn corrupt(&self, what: &str, key: &str, why: String) -> StoreError {
        StoreError::corrupt(format!("{what}: key '{key}' at {}: {why}", self.inner.base))
    }

    fn check_ttl(
        &self,
        ttl: Duration,
        what: &(dyn Fn() -> String + Sync),
    ) -> Result<(), StoreError> {
        if ttl < MIN_TTL || ttl > MAX_TTL {
            return Err(StoreError::new(
                ErrorKind::Config,
                format!(
                    "{}: ttl {ttl:?} is outside the {MIN_TTL:?} to {MAX_TTL:?} Consul accepts \
                     for a session",
                    what()
                ),
            ));
        }
        Ok(())
    }

    /// The restart shortcut's test: the key is locked under `req`'s holder
    /// id by a session whose proof shows its process gone (see
    /// [`ConsulStoreBuilder::restart_proofs`]). The proof stays locked by
    /// the answer until the caller has taken the session over.
    fn previous_self_gone(
        &self,
        entry: Option<&KvEntry>,
        req: &AcquireRequest,
        key: &str,
        what: &(dyn Fn() -> String + Sync),
    ) -> Result<Option<crate::proof::Gone>, StoreError> {
        let (Some(proofs), Some(entry)) = (&self.inner.proofs, entry) else {
            return Ok(None);
        };
        let Some(session) = entry.holder_session().filter(|s| is_session_id(s)) else {
            return Ok(None);
        };
        let ours = self
            .leader_of(Some(entry), key, &what())?
            .is_some_and(|l| l.holder == req.holder);
        Ok(if ours {
            proofs.prove_gone(session)
        } else {
            None
        })
    }

    /// What Consul says of `session` (`query`: `?consistent`, say);
    /// `None` when it no longer knows it.
    async fn session_info(
        &self,
        session: &str,
        query: &[(&str, &str)],
        what: &(dyn Fn() -> String + Sync),
    ) -> Result<Option<SessionInfo>, StoreError> {
        let url = self.url(&["session", "info", session], query);
        let answer = self
            .call(Method::GET, url, None, &[404], Duration::ZERO, what)
            .await?;
        if answer.status == 404 {
            return Ok(None);
        }
        let infos: Option<Vec<SessionInfo>> = answer.json(&what())?;
        Ok(infos.unwrap_or_default().into_iter().next())
    }

    /// Takes over `session`, which holds `key` as `entry` under `req`'s
    /// holder id and whose process is proven gone: if Consul still knows it
    /// with the TTL and lock delay this store would give `req`'s lease,
    /// renews it and locks the key again under it (a transaction checking
    /// the key is still `entry`). The lock's new `ModifyIndex` is the new
    /// term's token, above the old term's. `None` when any step finds
    /// things otherwise.
    async fn adopt(
        &self,
        key: &str,
        entry: &KvEntry,
        session: &str,
        req: &AcquireRequest,
        what: &(dyn Fn() -> String + Sync),
    ) -> Result<Option<u64>, StoreError> {
        let info = self
            .session_info(session, &[("consistent", "")], what)
            .await?;
        let Some(info) = info else {
            return Ok(None);
        };
        let delay_ns = u64::try_from(self.lock_delay(req.ttl).as_nanos()).unwrap_or(u64::MAX);
        if info.ttl != go_duration(self.session_ttl(req.ttl)) || info.lock_delay != delay_ns {
            return Ok(None);
        }
        let url = self.url(&["session", "renew", session], &[]);
        let renewed = self
            .call(Method::PUT, url, None, &[404], Duration::ZERO, what)
            .await?;
        if renewed.status == 404 {
            return Ok(None);
        }
        let value = base64(&encode(&req.holder, &req.metadata));
        // Unlock and lock again in one transaction: a lock by the holding
        // session with the same value changes nothing (the index stays),
        // while an unlock and a new lock are a new acquisition at a new
        // Raft index; nobody else can take the key in between, and an
        // explicit unlock has no lock delay.
        let ops = json!([
            {"KV": {"Verb": "check-index", "Key": key, "Index": entry.modify_index}},
            {"KV": {"Verb": "unlock", "Key": key, "Value": value, "Flags": RECORD_FLAGS, "Session": session}},
            {"KV": {"Verb": "lock", "Key": key, "Value": value, "Flags": RECORD_FLAGS, "Session": session}},
        ]);
        Ok(match self.txn(ops, what).await? {
            TxnOutcome::Applied(entries) => entries
                .into_iter()
                .rev()
                .find(|e| e.key == key && e.holder_session() == Some(session))
                .map(|e| e.modify_index)
                .filter(|&t| t > entry.modify_index),
            TxnOutcome::RolledBack => None,
        })
    }

    /// Ends this process's restart proof of `session`, if it has one.
    fn forget_proof(&self, session: &str) {
        if let Some(proofs) = &self.inner.proofs {
            proofs.forget(session);
        }
    }

    /// The leader `entry` shows, or a `Corrupt` error.
    fn leader_of(
        &self,
        entry: Option<&KvEntry>,
        key: &str,
        what: &str,
    ) -> Result<Option<LeaderInfo>, StoreError> {
        match entry {
            None => Ok(None),
            Some(e) => e.leader().map_err(|why| self.corrupt(what, key, why)),
        }
    }

    /// The store's own watch of `election`: a `?consistent` read of its
    /// key, then blocking queries on it, at most one per
    /// [`WATCH_MIN_INTERVAL`].
    async fn watch_stream(&self, election: &ElectionName) -> Result<LeaderStream, StoreError> {
        let key = self.election_key(election);
        let what = || format!("watch election '{election}'");
        let (entry, index) = self.read_key(&key, &what).await?;
        let first = self.leader_of(entry.as_ref(), &key, &what())?;
        struct State {
            store: ConsulStore,
            election: ElectionName,
            key: String,
            index: u64,
            last: Option<LeaderInfo>,
            first: bool,
            last_start: Option<Instant>,
            done: bool,
        }
        let state = State {
            store: self.clone(),
            election: election.clone(),
            key,
            index: next_index(0, index.unwrap_or(0)),
            last: first,
            first: true,
            last_start: None,
            done: false,
        };
        let stream = futures_util::stream::unfold(state, |mut s| async move {
            if s.done {
                return None;
            }
            if s.first {
                s.first = false;
                let item = Ok(s.last.clone());
                return Some((item, s));
            }
            loop {
                if let Some(t) = s.last_start {
                    tokio::time::sleep_until(t + WATCH_MIN_INTERVAL).await;
                }
                s.last_start = Some(Instant::now());
                let what = || format!("watch election '{}'", s.election);
                let wait = format!("{}s", WATCH_WAIT.as_secs());
                let index = s.index.to_string();
                let url = s
                    .store
                    .url(&["kv", &s.key], &[("index", &index), ("wait", &wait)]);
                let answer = s
                    .store
                    .call(
                        Method::GET,
                        url,
                        None,
                        &[404],
                        WATCH_WAIT + WATCH_WAIT / 16,
                        &what,
                    )
                    .await;
                let answer = match answer {
                    Ok(a) => a,
                    Err(e) => {
                        s.done = true;
                        return Some((Err(e), s));
                    }
                };
                s.index = next_index(s.index, answer.index.unwrap_or(0));
                let leader = s
                    .store
                    .entry_of(&s.key, &answer, &what)
                    .and_then(|e| s.store.leader_of(e.as_ref(), &s.key, &what()));
                match leader {
                    Err(e) => {
                        s.done = true;
                        return Some((Err(e), s));
                    }
                    Ok(l) if l != s.last => {
                        s.last = l.clone();
                        return Some((Ok(l), s));
                    }
                    Ok(_) => continue,
                }
            }
        });
        Ok(Box::pin(stream))
    }
}

/// The index of the next blocking query after one that answered `new`
/// when asked with `prev`, by Consul's rules: reset when it goes
/// backwards (a snapshot restore, another server's view), and never 0
/// (which would not block).
pub(crate) fn next_index(prev: u64, new: u64) -> u64 {
    let next = if new < prev { 0 } else { new };
    next.max(1)
}

/// `d` as a Go duration in whole milliseconds, rounded up (never less
/// than asked).
fn go_duration(d: Duration) -> String {
    let ms = d.as_nanos().div_ceil(1_000_000);
    format!("{ms}ms")
}

/// The ttl a session of `ttl` is granted: whole milliseconds, rounded up.
fn granted_ttl(ttl: Duration) -> Duration {
    let ms = u64::try_from(ttl.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX);
    Duration::from_millis(ms)
}

mod shared;

impl LeaseStore for ConsulStore {
    fn info(&self) -> StoreInfo {
        StoreInfo::new(
            "consul",
            StoreStyle::Race,
            WatchMode::Notify,
            SafetyClass::Consensus,
        )
        .with_ttl_range(MIN_TTL, MAX_TTL)
        // Consul invalidates a session up to twice its TTL after the
        // last renewal, then the lock delay keeps the key from being
        // acquired.
        .with_expiry_slack(match self.inner.lock_delay {
            // Up to two session TTLs (`max(10 s, ttl/2)`) plus the ttl,
            // less the ttl itself.
            None => ExpirySlack::proportional(100).at_least(SESSION_TTL_FLOOR * 2),
            // Up to two session TTLs plus the delay, less the ttl: never
            // more than `ttl + delay`, whichever of 10 s, `ttl - delay` and
            // ttl/2 the session TTL is (see `session_ttl`).
            Some(delay) => ExpirySlack::new(delay, 100),
        })
    }

    async fn try_acquire(
        &self,
        req: &AcquireRequest,
        _queued: Option<&Lease>,
    ) -> Result<Acquire, StoreError> {
        let what = || format!("acquire election '{}' by '{}'", req.election, req.holder);
        self.check_ttl(req.ttl, &what)?;
        let key = self.election_key(&req.election);
        let (mut current, _) = self.read_key(&key, &what).await?;
        if let Some((gone, entry)) = self
            .previous_self_gone(current.as_ref(), req, &key, &what)?
            .zip(current.clone())
        {
            let session = entry.holder_session().unwrap_or_default().to_owned();
            if let Some(token) = self.adopt(&key, &entry, &session, req, &what).await? {
                tracing::info!(
                    election = %req.election, holder = %req.holder, session, token,
                    "consul: the key holds our id under a session whose process is gone \
                     (its restart proof is free); took that session over"
                );
                if let Some(proofs) = &self.inner.proofs {
                    proofs.adopt(gone, &session);
                }
                return Ok(Acquire::Won(Lease {
                    election: req.election.clone(),
                    holder: req.holder.clone(),
                    token: FencingToken::new(token),
                    ttl: granted_ttl(req.ttl),
                    handle: LeaseHandle::new(session),
                }));
            }
            // The session changed, ended or was made otherwise meanwhile:
            // on as usual.
            drop(gone);
            current = self.read_key(&key, &what).await?.0;
        }
        let check = match &current {
            Some(entry) if entry.holder_session().is_some() => {
                let leader = self.leader_of(Some(entry), &key, &what())?;
                return Ok(Acquire::Held {
                    leader,
                    queued: None,
                });
            }
            Some(entry) => {
                entry
                    .check_ours()
                    .map_err(|why| self.corrupt(&what(), &key, why))?;
                json!({"KV": {"Verb": "check-index", "Key": key, "Index": entry.modify_index}})
            }
            None => json!({"KV": {"Verb": "check-not-exists", "Key": key}}),
        };
        let (session, sent, shared) = self.session_for(req, &key, &what).await?;
        let value = base64(&encode(&req.holder, &req.metadata));
        let ops = json!([
            check,
            {"KV": {"Verb": "lock", "Key": key, "Value": value, "Flags": RECORD_FLAGS, "Session": session}},
        ]);
        let outcome = match self.txn(ops, &what).await {
            Ok(o) => o,
            Err(e) => {
                // The lock may have been taken all the same: ending the
                // session frees it (after the lock delay); on a shared
                // session, the lock goes when it is not renewed within
                // the ttl.
                if !shared {
                    let _ = self.destroy_session(&session, &what).await;
                }
                return Err(e);
            }
        };
        let won = match outcome {
            // A check-index answers the key as checked, before the lock:
            // the lock's own result is the last one.
            TxnOutcome::Applied(entries) => entries
                .into_iter()
                .rev()
                .find(|e| e.key == key && e.holder_session() == Some(session.as_str()))
                .map(|e| e.modify_index),
            TxnOutcome::RolledBack => {
                // Someone else was faster, the key changed since we read
                // it, or its lock delay runs. A retried transaction may
                // also have applied the first time: look.
                let (entry, _) = self.read_key(&key, &what).await?;
                match entry {
                    Some(e) if e.holder_session() == Some(session.as_str()) => Some(e.modify_index),
                    other => {
                        self.give_back(&session, req, shared);
                        let leader = self.leader_of(other.as_ref(), &key, &what())?;
                        return Ok(Acquire::Held {
                            leader,
                            queued: None,
                        });
                    }
                }
            }
        };
        let Some(token) = won.filter(|&t| t > 0) else {
            if !shared {
                let _ = self.destroy_session(&session, &what).await;
            }
            return Err(StoreError::new(
                ErrorKind::Protocol,
                format!(
                    "{}: the transaction answered without the key's index",
                    what()
                ),
            ));
        };
        tracing::debug!(
            election = %req.election, holder = %req.holder, token, shared,
            "consul: acquired"
        );
        if shared {
            self.inner.sessions.placed(
                &session,
                &req.election,
                &req.holder,
                FencingToken::new(token),
                sent,
            );
        }
        if let Some(proofs) = &self.inner.proofs
            && let Err(e) = proofs.hold(&session)
        {
            tracing::warn!(
                election = %req.election, dir = %proofs.dir().display(), error = %e,
                "consul: cannot make the restart proof; a restart of this instance will wait \
                 for the session to expire"
            );
        }
        Ok(Acquire::Won(Lease {
            election: req.election.clone(),
            holder: req.holder.clone(),
            token: FencingToken::new(token),
            ttl: granted_ttl(req.ttl),
            handle: LeaseHandle::new(session),
        }))
    }

    async fn renew(&self, lease: &Lease) -> Result<Renewal, StoreError> {
        let what = || format!("renew election '{}' by '{}'", lease.election, lease.holder);
        let key = self.election_key(&lease.election);
        let session = lease.handle.as_str();
        // A key on one of our shared sessions: the session's next round
        // renews it with all the others.
        let joined = self.inner.sessions.join(
            &session.to_owned(),
            &lease.election,
            &lease.holder,
            lease.token,
        );
        if let Some(round) = joined
            && let Ok(answer) = round.await
        {
            tracing::debug!(
                election = %lease.election, holder = %lease.holder, token = lease.token.get(),
                ?answer, "consul: renewed with its session"
            );
            return answer;
        }
        // Check first, so that a renewal never extends a session whose
        // key was deleted, overwritten or taken over.
        let (entry, _) = self.read_key(&key, &what).await?;
        if !entry
            .as_ref()
            .is_some_and(|e| e.is_held_by(session, &lease.holder, lease.token))
        {
            if entry.as_ref().and_then(KvEntry::holder_session) != Some(session)
                && !self.is_shared(session, &what).await.unwrap_or(true)
            {
                // The session holds nothing any more: end it.
                let _ = self.destroy_session(session, &what).await;
            }
            self.forget_proof(session);
            return Ok(Renewal::Lost);
        }
        let url = self.url(&["session", "renew", session], &[]);
        let answer = self
            .call(Method::PUT, url, None, &[404], Duration::ZERO, &what)
            .await?;
        if answer.status == 404 {
            self.forget_proof(session);
            return Ok(Renewal::Lost);
        }
        tracing::debug!(
            election = %lease.election, holder = %lease.holder, token = lease.token.get(),
            "consul: renewed"
        );
        Ok(Renewal::Renewed)
    }

    async fn update_metadata(
        &self,
        lease: &Lease,
        metadata: &Metadata,
    ) -> Result<Renewal, StoreError> {
        let what = || {
            format!(
                "update the metadata of election '{}' by '{}'",
                lease.election, lease.holder
            )
        };
        let key = self.election_key(&lease.election);
        let session = lease.handle.as_str();
        // The new value carries the term's token: the write moves the
        // key's ModifyIndex, which was the token until now.
        let value = encode_update(&lease.holder, metadata, lease.token);
        let (entry, _) = self.read_key(&key, &what).await?;
        let Some(entry) = entry.filter(|e| e.is_held_by(session, &lease.holder, lease.token))
        else {
            return Ok(Renewal::Lost);
        };
        // A lock by the session that holds the key keeps the lock and sets
        // the value, only on the key exactly as read.
        let ops = json!([
            {"KV": {"Verb": "check-index", "Key": key, "Index": entry.modify_index}},
            {"KV": {"Verb": "lock", "Key": key, "Value": base64(&value), "Flags": RECORD_FLAGS,
                    "Session": session}},
        ]);
        let outcome = match self.txn(ops, &what).await? {
            TxnOutcome::Applied(_) => Renewal::Renewed,
            TxnOutcome::RolledBack => {
                // The key changed since it was read, or a retried
                // transaction applied the first time: look.
                let (entry, _) = self.read_key(&key, &what).await?;
                let updated = entry.is_some_and(|e| {
                    e.is_held_by(session, &lease.holder, lease.token)
                        && e.value_bytes().is_ok_and(|v| v == value)
                });
                if updated {
                    Renewal::Renewed
                } else {
                    Renewal::Lost
                }
            }
        };
        tracing::debug!(
            election = %lease.election, holder = %lease.holder, token = lease.token.get(),
            ?outcome, "consul: update metadata"
        );
        Ok(outcome)
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        let what = || {
            format!(
                "release election '{}' by '{}'",
                lease.election, lease.holder
            )
        };
        let key = self.election_key(&lease.election);
        let session = lease.handle.as_str();
        // The term is over when its lease is released, whether or not the
        // release gets through: the proof goes now (the term's processes
        // that inherited it, if any are left, keep its lock).
        self.forget_proof(session);
        let (entry, _) = self.read_key(&key, &what).await?;
        match entry {
            Some(e) if e.is_held_by(session, &lease.holder, lease.token) => {
                // Unlock first: a released lock has no lock delay, so a
                // follower takes over at once. The value stays.
                let ops = json!([
                    {"KV": {"Verb": "check-index", "Key": key, "Index": e.modify_index}},
                    {"KV": {"Verb": "unlock", "Key": key, "Value": e.value.clone().unwrap_or_default(),
                            "Flags": RECORD_FLAGS, "Session": session}},
                ]);
                self.txn(ops, &what).await?;
            }
            // Locked by this session but not the record of this lease:
            // not ours to touch.
            Some(e) if e.holder_session() == Some(session) => return Ok(()),
            _ => {}
        }
        self.after_release(session, lease, &what).await
    }

    async fn current_leader(
        &self,
        election: &ElectionName,
    ) -> Result<Option<LeaderInfo>, StoreError> {
        let what = || format!("read the leader of election '{election}'");
        let key = self.election_key(election);
        let (entry, _) = self.read_key(&key, &what).await?;
        self.leader_of(entry.as_ref(), &key, &what())
    }

    /// One blocking query per election and store, shared by every watch
    /// of it (see the crate docs, "Connections").
    async fn watch(&self, election: &ElectionName) -> Result<LeaderStream, StoreError> {
        let (store, e) = (self.clone(), election.clone());
        let open = async move { store.watch_stream(&e).await };
        self.inner.watches.watch(election, open).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocking_query_index_rules() {
        assert_eq!(next_index(0, 0), 1, "never 0");
        assert_eq!(next_index(5, 9), 9);
        assert_eq!(next_index(9, 9), 9);
        assert_eq!(next_index(9, 5), 1, "backwards: reset");
    }

    #[test]
    fn durations_round_up_to_milliseconds() {
        assert_eq!(go_duration(Duration::from_secs(10)), "10000ms");
        assert_eq!(go_duration(Duration::from_nanos(10_000_000_001)), "10001ms");
        assert_eq!(go_duration(Duration::ZERO), "0ms");
        assert_eq!(
            granted_ttl(Duration::from_nanos(10_000_000_001)),
            Duration::from_millis(10_001)
        );
    }

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

    #[test]
    fn keys_and_urls() {
        let store = ConsulStore::builder("127.0.0.1:8500")
            .prefix("svc/x")
            .datacenter("dc2")
            .build()
            .unwrap();
        let e = ElectionName::new("jobs").unwrap();
        assert_eq!(store.election_key(&e), "svc/x/jobs");
        let url = store.url(&["kv", &store.election_key(&e)], &[("consistent", "")]);
        assert_eq!(
            url.as_str(),
            "http://127.0.0.1:8500/v1/kv/svc/x/jobs?consistent&dc=dc2"
        );
    }
}
