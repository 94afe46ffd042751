//! [`EtcdStore`]: the store contract over etcd v3.

use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, GetOptions, KeyValue, PutOptions, SortOrder,
    SortTarget, Txn, TxnOp, TxnOpResponse, WatchOptions,
};
use regent_core::store::shared::{Forgot, SessionBackend, SessionKey, SharedSessions};
use regent_core::{
    Acquire, AcquireRequest, ElectionName, ErrorKind, FencingToken, LeaderInfo, LeaderStream,
    Lease, LeaseHandle, LeaseStore, MAX_TTL, Metadata, Renewal, SafetyClass, StoreError, StoreInfo,
    StoreStyle, WatchMode,
};

use crate::error::{Scope, etcd_error, is_lease_not_found};
use crate::record::{
    candidate_key, decode, election_prefix, encode, holder_bounds, leader_of, lease_hex,
    parse_lease_hex,
};

/// The shortest ttl the store honours: etcd grants leases in whole seconds.
///
/// etcd itself raises a shorter lease to its own minimum,
/// `ceil(1.5 × election timeout)` (2 s with the default 1 s election
/// timeout, 1 s with `--election-timeout` ≤ 666 ms); the granted, longer ttl
/// is what [`Lease::ttl`] then reports.
pub const MIN_TTL: Duration = Duration::from_secs(1);

/// How long one request may take before it fails as
/// [`Unavailable`](regent_core::ErrorKind::Unavailable), unless set with
/// [`EtcdStoreBuilder::request_timeout`].
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// How much later than its ttl etcd may delete a dead holder's key: its
/// lessor looks for expired leases every 500 ms and revokes them through
/// Raft. (A change of etcd's Raft leader restarts every lease's full ttl,
/// plus an election timeout; that is not bounded here: see the crate docs.)
pub const EXPIRY_SLACK: Duration = Duration::from_secs(1);

/// An election store on an etcd v3 cluster. See the [crate docs](crate).
///
/// Cloning is cheap; clones share one connection.
#[derive(Clone)]
pub struct EtcdStore {
    client: Client,
    namespace: Arc<str>,
    endpoints: Arc<str>,
    request_timeout: Duration,
    /// The connection speaks TLS.
    tls: bool,
    /// Leases granted by acquires that never returned them (given up on
    /// after the grant): the holder's next acquire takes its key, if one
    /// was made, rather than queueing a second place.
    undelivered: Arc<Mutex<Vec<Undelivered>>>,
    /// The leases this store's elections share.
    sessions: Arc<SharedSessions<EtcdStore>>,
}

/// A lease an acquire granted and did not return.
#[derive(Clone, Debug)]
struct Undelivered {
    election: ElectionName,
    holder: regent_core::HolderId,
    lease: i64,
    ttl: Duration,
}

/// What `place` expects to find at our key.
#[derive(Clone, Copy, Debug)]
enum Expected {
    /// Nothing: a lease just granted.
    Fresh,
    /// The key we queued, with this create revision.
    Queued(i64),
    /// Whatever our lease made (an acquire that never returned).
    Adopt,
}

impl fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdStore")
            .field("endpoints", &self.endpoints)
            .field("namespace", &self.namespace)
            .field("request_timeout", &self.request_timeout)
            .field("tls", &self.tls)
            .finish_non_exhaustive()
    }
}

/// Builds an [`EtcdStore`]: [`EtcdStore::builder`], setters, then
/// [`connect`](Self::connect).
#[derive(Clone)]
#[must_use]
pub struct EtcdStoreBuilder {
    endpoints: Vec<String>,
    user: Option<(String, String)>,
    request_timeout: Duration,
    namespace: String,
    #[cfg(feature = "tls")]
    tls: Option<etcd_client::TlsOptions>,
    /// The first TLS setter given a PEM text that cannot be what it should,
    /// as the rule `connect` reports broken.
    #[cfg(feature = "tls")]
    tls_problem: Option<&'static str>,
}

impl fmt::Debug for EtcdStoreBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut f = f.debug_struct("EtcdStoreBuilder");
        f.field("endpoints", &self.endpoints)
            .field("user", &self.user.as_ref().map(|(u, _)| u))
            .field("request_timeout", &self.request_timeout)
            .field("namespace", &self.namespace);
        #[cfg(feature = "tls")]
        f.field("tls", &self.tls.is_some());
        f.finish()
    }
}

impl EtcdStoreBuilder {
    /// Authenticates as `user` with `password` (etcd's `--user`).
    pub fn user(mut self, user: impl Into<String>, password: impl Into<String>) -> Self {
        self.user = Some((user.into(), password.into()));
        self
    }

    /// How long one request may take (default
    /// [`DEFAULT_REQUEST_TIMEOUT`]). Keep it below the renew deadline.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// A string put before every election name (default: none). Election
    /// `jobs` in namespace `/svc/` lives under `/svc/jobs/`; to share it with
    /// `etcdctl elect`, run `etcdctl elect /svc/jobs …`.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = namespace.into();
        self
    }

    /// Speaks TLS to etcd, trusting the CA certificate `ca_pem` (PEM, etcd's
    /// `--cacert`). It is the only CA trusted unless
    /// [`tls_system_roots`](Self::tls_system_roots) adds the system's.
    /// Endpoints without a scheme then use `https://`.
    #[cfg(feature = "tls")]
    pub fn tls_ca_pem(mut self, ca_pem: impl AsRef<[u8]>) -> Self {
        if !pem_labels(ca_pem.as_ref())
            .iter()
            .any(PemLabel::is_certificate)
        {
            self.tls_problem
                .get_or_insert("the TLS CA PEM must hold a certificate");
        }
        let tls = self.tls.take().unwrap_or_default();
        self.tls = Some(tls.ca_certificate(etcd_client::Certificate::from_pem(ca_pem)));
        self
    }

    /// Speaks TLS to etcd, trusting the certificates of the system's trust
    /// store, as etcdctl does without `--cacert`: for a managed etcd or one
    /// whose certificate a CA installed on the host signed. Endpoints
    /// without a scheme then use `https://`.
    ///
    /// With [`tls_ca_pem`](Self::tls_ca_pem) as well, both are trusted. The
    /// store is read at [`connect`](Self::connect), by rustls-native-certs:
    /// on Linux and the BSDs the files OpenSSL uses (`/etc/ssl/certs`), on
    /// macOS the keychains, on Windows the system store. When
    /// `SSL_CERT_FILE` or `SSL_CERT_DIR` is set, the certificates there
    /// (PEM) replace the platform's. A trust store without any certificate
    /// fails `connect` with [`ErrorKind::Config`] ("no native certs found"),
    /// even with `tls_ca_pem`.
    #[cfg(feature = "tls")]
    pub fn tls_system_roots(mut self) -> Self {
        let tls = self.tls.take().unwrap_or_default();
        self.tls = Some(tls.with_native_roots());
        self
    }

    /// Presents a client certificate (etcd's `--client-cert-auth`): `cert_pem`
    /// and its private key `key_pem`, both PEM.
    #[cfg(feature = "tls")]
    pub fn tls_client_identity_pem(
        mut self,
        cert_pem: impl AsRef<[u8]>,
        key_pem: impl AsRef<[u8]>,
    ) -> Self {
        if !pem_labels(cert_pem.as_ref())
            .iter()
            .any(PemLabel::is_certificate)
        {
            self.tls_problem
                .get_or_insert("the TLS client certificate PEM must hold a certificate");
        }
        if !pem_labels(key_pem.as_ref())
            .iter()
            .any(PemLabel::is_private_key)
        {
            self.tls_problem
                .get_or_insert("the TLS client key PEM must hold a private key");
        }
        let tls = self.tls.take().unwrap_or_default();
        self.tls = Some(tls.identity(etcd_client::Identity::from_pem(cert_pem, key_pem)));
        self
    }

    /// The name the server certificate must carry, when it differs from the
    /// endpoint's host.
    #[cfg(feature = "tls")]
    pub fn tls_domain_name(mut self, name: impl Into<String>) -> Self {
        let tls = self.tls.take().unwrap_or_default();
        self.tls = Some(tls.domain_name(name));
        self
    }

    /// Connects. Without a user this does not wait for the cluster: an
    /// unreachable cluster shows as [`Unavailable`](ErrorKind::Unavailable)
    /// errors of the store's calls. With a user it authenticates at once.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Config`] for no endpoints, a malformed endpoint, a zero
    /// request timeout, TLS settings that cannot be used (a PEM text without
    /// its certificate or key, a key that does not match its certificate,
    /// an invalid server name, `tls_system_roots` with no certificate in
    /// the system's trust store) and, with a user, a server certificate
    /// that fails verification; [`ErrorKind::Auth`] for refused credentials;
    /// [`ErrorKind::Unavailable`] when authenticating could not reach the
    /// cluster. See the [crate docs](crate#tls-and-authentication).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: nothing is written.
    pub async fn connect(self) -> Result<EtcdStore, StoreError> {
        let endpoints = self.endpoints.join(",");
        if self.endpoints.is_empty() {
            return Err(StoreError::new(
                ErrorKind::Config,
                "etcd store: at least one endpoint is required",
            ));
        }
        if self.request_timeout.is_zero() {
            return Err(StoreError::new(
                ErrorKind::Config,
                "etcd store: the request timeout must be greater than zero",
            ));
        }
        #[cfg(feature = "tls")]
        if let Some(rule) = self.tls_problem {
            return Err(StoreError::new(
                ErrorKind::Config,
                format!("etcd store: {rule}"),
            ));
        }
        let mut options = ConnectOptions::new()
            .with_connect_timeout(self.request_timeout)
            // A member cut off from its cluster's leader fails requests at
            // once instead of serving stale reads and hanging watches.
            .with_require_leader(true)
            // Detects a dead connection under an open watch. etcd's default
            // --grpc-keepalive-min-time is 5 s: pinging more often is refused.
            .with_keep_alive(Duration::from_secs(10), self.request_timeout);
        // etcd-client speaks TLS with TLS settings, and to `https://`
        // endpoints (which fail without the `tls` feature).
        let tls = self.endpoints.iter().any(|e| e.starts_with("https://"));
        #[cfg(feature = "tls")]
        let tls = tls || self.tls.is_some();
        #[cfg(feature = "tls")]
        if let Some(settings) = self.tls {
            options = options.with_tls(settings);
        }
        // Errors name the user, never the password.
        let what = match &self.user {
            Some((user, _)) => format!("connect to etcd at {endpoints} as user '{user}'"),
            None => format!("connect to etcd at {endpoints}"),
        };
        if let Some((user, password)) = self.user {
            options = options
                .with_user(user, password)
                .with_auto_token_refresh(true);
        }
        let connect = Client::connect(&self.endpoints, Some(options));
        let client = match tokio::time::timeout(self.request_timeout, connect).await {
            Ok(Ok(client)) => client,
            Ok(Err(e)) => return Err(etcd_error(what, e, Scope { tls, prefix: None })),
            Err(_) => {
                return Err(StoreError::unavailable(format!(
                    "{what}: no answer within {:?}",
                    self.request_timeout
                )));
            }
        };
        Ok(EtcdStore {
            client,
            namespace: self.namespace.into(),
            endpoints: endpoints.into(),
            request_timeout: self.request_timeout,
            tls,
            undelivered: Arc::new(Mutex::new(Vec::new())),
            sessions: Arc::default(),
        })
    }
}

/// The label of a PEM block: `CERTIFICATE` for a block that begins with
/// `-----BEGIN CERTIFICATE-----`. [`pem_labels`] finds them.
#[cfg(feature = "tls")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PemLabel(String);

#[cfg(feature = "tls")]
impl PemLabel {
    /// The label as the file writes it (control characters included).
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether the block is what a certificate setter takes: `CERTIFICATE`.
    pub(crate) fn is_certificate(&self) -> bool {
        self.0 == "CERTIFICATE"
    }

    /// Whether the block is what a private key setter takes: `PRIVATE KEY`,
    /// `RSA PRIVATE KEY`, `EC PRIVATE KEY`.
    pub(crate) fn is_private_key(&self) -> bool {
        self.0.ends_with("PRIVATE KEY")
    }
}

/// The labels of the `-----BEGIN LABEL-----` lines of the PEM text `pem`,
/// each once, in order: what the TLS setters check their PEM texts by, so
/// that a caller can say which file holds the wrong blocks before handing
/// them over.
#[cfg(feature = "tls")]
pub(crate) fn pem_labels(pem: &[u8]) -> Vec<PemLabel> {
    let mut labels = Vec::<PemLabel>::new();
    for line in String::from_utf8_lossy(pem).lines() {
        if let Some(label) = line
            .trim()
            .strip_prefix("-----BEGIN ")
            .and_then(|l| l.strip_suffix("-----"))
            && !labels.iter().any(|l| l.0 == label)
        {
            labels.push(PemLabel(label.to_owned()));
        }
    }
    labels
}

/// Our own key, as a transaction found it.
struct Placed {
    token: i64,
    head: Option<KeyValue>,
}

impl EtcdStore {
    /// Starts building a store for the cluster at `endpoints`
    /// (`"127.0.0.1:2379"` or `"http://127.0.0.1:2379"`).
    pub fn builder<E: Into<String>>(endpoints: impl IntoIterator<Item = E>) -> EtcdStoreBuilder {
        EtcdStoreBuilder {
            endpoints: endpoints.into_iter().map(Into::into).collect(),
            user: None,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            namespace: String::new(),
            #[cfg(feature = "tls")]
            tls: None,
            #[cfg(feature = "tls")]
            tls_problem: None,
        }
    }

    /// Connects to the cluster at `endpoints` with default settings.
    ///
    /// # Errors
    ///
    /// As [`EtcdStoreBuilder::connect`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: nothing is written.
    pub async fn connect<E: Into<String>>(
        endpoints: impl IntoIterator<Item = E>,
    ) -> Result<Self, StoreError> {
        Self::builder(endpoints).connect().await
    }

    /// The key prefix of `election`: every candidate's key starts with it.
    pub fn election_prefix(&self, election: &ElectionName) -> String {
        election_prefix(&self.namespace, election)
    }

    /// A [`StoreError`] for `e`, failing `what` (which names `election`)
    /// at the store's endpoints.
    fn error(&self, election: &ElectionName, what: &str, e: etcd_client::Error) -> StoreError {
        let prefix = self.election_prefix(election);
        let scope = Scope {
            tls: self.tls,
            prefix: Some(&prefix),
        };
        etcd_error(format!("{what} at {}", self.endpoints), e, scope)
    }

    /// Runs one request for `election` with the request timeout; errors
    /// name `what`.
    async fn call<T>(
        &self,
        election: &ElectionName,
        what: impl FnOnce() -> String,
        fut: impl Future<Output = Result<T, etcd_client::Error>>,
    ) -> Result<T, StoreError> {
        match tokio::time::timeout(self.request_timeout, fut).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(self.error(election, &what(), e)),
            Err(_) => Err(StoreError::unavailable(format!(
                "{} at {}: no answer within {:?}",
                what(),
                self.endpoints,
                self.request_timeout
            ))),
        }
    }

    fn ttl_secs(&self, ttl: Duration) -> Result<i64, StoreError> {
        if ttl < MIN_TTL || ttl > MAX_TTL {
            return Err(StoreError::new(
                ErrorKind::Config,
                format!("etcd store: ttl {ttl:?} is outside {MIN_TTL:?}..={MAX_TTL:?}"),
            ));
        }
        // Whole seconds, rounded up: never less than asked.
        let secs = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
        Ok(i64::try_from(secs).expect("at most a day"))
    }

    /// Runs one request about a lease with the request timeout; errors
    /// name `election`'s prefix when given.
    async fn lease_call<T>(
        &self,
        election: Option<&ElectionName>,
        what: impl FnOnce() -> String,
        fut: impl Future<Output = Result<T, etcd_client::Error>>,
    ) -> Result<T, LeaseCallError> {
        match tokio::time::timeout(self.request_timeout, fut).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => {
                let lease_not_found = is_lease_not_found(&e);
                let prefix = election.map(|e| self.election_prefix(e));
                let scope = Scope {
                    tls: self.tls,
                    prefix: prefix.as_deref(),
                };
                let error = etcd_error(format!("{} at {}", what(), self.endpoints), e, scope);
                Err(LeaseCallError {
                    error,
                    lease_not_found,
                })
            }
            Err(_) => Err(LeaseCallError {
                error: StoreError::unavailable(format!(
                    "{} at {}: no answer within {:?}",
                    what(),
                    self.endpoints,
                    self.request_timeout
                )),
                lease_not_found: false,
            }),
        }
    }

    /// One keep-alive round trip: `true` if the lease lives (its ttl now
    /// restarts), `false` if etcd no longer knows it. Errors name
    /// `election`'s prefix when given (a lease shared by many elections
    /// has none).
    async fn keep_alive_once(
        &self,
        election: Option<&ElectionName>,
        lease: i64,
        what: &str,
    ) -> Result<bool, StoreError> {
        let mut client = self.client.clone();
        let what = || format!("{what}: keep lease {} alive", lease_hex(lease));
        // etcd-client sends the first keep-alive and awaits its answer
        // inside `lease_keep_alive`; dropping the pair ends the stream.
        match self
            .lease_call(election, what, client.lease_keep_alive(lease))
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if e.lease_not_found => Ok(false),
            Err(e) => Err(e.error),
        }
    }

    fn head_options() -> GetOptions {
        GetOptions::new()
            .with_prefix()
            .with_sort(SortTarget::Create, SortOrder::Ascend)
            .with_limit(1)
    }

    /// Makes sure our key exists under `lease`, then reads the head of the
    /// line, in one transaction. `expected` says what may be there already.
    async fn place(
        &self,
        req: &AcquireRequest,
        prefix: &str,
        lease: i64,
        expected: Expected,
    ) -> Result<Placed, StoreError> {
        let key = candidate_key(prefix, lease);
        let value = encode(&req.holder, &req.metadata);
        let txn = Txn::new()
            .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
            .and_then([
                TxnOp::put(
                    key.clone(),
                    value.clone(),
                    Some(PutOptions::new().with_lease(lease)),
                ),
                TxnOp::get(prefix, Some(Self::head_options())),
            ])
            .or_else([
                TxnOp::get(key.clone(), None),
                TxnOp::get(prefix, Some(Self::head_options())),
            ]);
        let what = || format!("acquire election '{}' by '{}'", req.election, req.holder);
        let mut client = self.client.clone();
        let resp = self.call(&req.election, what, client.txn(txn)).await?;
        let mut ops = resp.op_responses().into_iter();
        let (first, second) = (ops.next(), ops.next());
        let Some(TxnOpResponse::Get(mut head)) = second else {
            return Err(protocol(
                what(),
                "the transaction answered without its range",
            ));
        };
        let head = head.take_kvs().into_iter().next();
        if resp.succeeded() {
            let token = resp.header().map(|h| h.revision()).unwrap_or(0);
            if token <= 0 {
                return Err(protocol(
                    what(),
                    "the transaction answered without a revision",
                ));
            }
            return Ok(Placed { token, head });
        }
        let Some(TxnOpResponse::Get(mut mine)) = first else {
            return Err(protocol(what(), "the transaction answered without our key"));
        };
        let Some(mine) = mine.take_kvs().into_iter().next() else {
            return Err(protocol(what(), "our key neither exists nor was created"));
        };
        let ours = mine.lease() == lease
            && match expected {
                Expected::Fresh => false,
                Expected::Queued(revision) => revision == mine.create_revision(),
                Expected::Adopt => true,
            };
        if !ours {
            return Err(StoreError::corrupt(format!(
                "{}: key '{key}' under our lease {} was not written by this candidate \
                 (create revision {}, lease {})",
                what(),
                lease_hex(lease),
                mine.create_revision(),
                lease_hex(mine.lease())
            )));
        }
        if mine.value() != value.as_slice() {
            // New metadata: proclaim it, as Go's Campaign does, only if the
            // key is still the one we queued.
            let token = mine.create_revision();
            let txn = Txn::new()
                .when([Compare::create_revision(
                    key.clone(),
                    CompareOp::Equal,
                    token,
                )])
                .and_then([TxnOp::put(
                    key.clone(),
                    value,
                    Some(PutOptions::new().with_lease(lease)),
                )]);
            let mut client = self.client.clone();
            self.call(&req.election, what, client.txn(txn)).await?;
        }
        Ok(Placed {
            token: mine.create_revision(),
            head,
        })
    }

    /// A queued place that is still as we left it, read without a write:
    /// our key with its create revision `token`, our lease and our value,
    /// and the head of the line, in one read-only transaction (a
    /// linearizable read, no raft entry and no fsync). `None` when the key
    /// is not exactly ours any more: `place` then decides, with a write.
    ///
    /// This is what a follower does when its watch says that the line
    /// moved, so it is on every graceful hand-over's path: the write
    /// `place` makes costs etcd a raft round and an fsync.
    async fn still_placed(
        &self,
        req: &AcquireRequest,
        prefix: &str,
        lease: i64,
        token: i64,
    ) -> Result<Option<Placed>, StoreError> {
        let key = candidate_key(prefix, lease);
        let txn = Txn::new().and_then([
            TxnOp::get(key, None),
            TxnOp::get(prefix, Some(Self::head_options())),
        ]);
        let what = || format!("acquire election '{}' by '{}'", req.election, req.holder);
        let mut client = self.client.clone();
        let resp = self.call(&req.election, what, client.txn(txn)).await?;
        let mut ops = resp.op_responses().into_iter();
        let (Some(TxnOpResponse::Get(mut mine)), Some(TxnOpResponse::Get(mut head))) =
            (ops.next(), ops.next())
        else {
            return Err(protocol(
                what(),
                "the transaction answered without its ranges",
            ));
        };
        let value = encode(&req.holder, &req.metadata);
        let unchanged = mine.take_kvs().into_iter().next().is_some_and(|mine| {
            mine.lease() == lease && mine.create_revision() == token && mine.value() == value
        });
        Ok(unchanged.then(|| Placed {
            token,
            head: head.take_kvs().into_iter().next(),
        }))
    }

    /// Queues (or finds) our key under `lease` and answers won or held.
    async fn campaign(
        &self,
        req: &AcquireRequest,
        lease: i64,
        ttl: Duration,
        expected: Expected,
    ) -> Result<Acquire, StoreError> {
        let prefix = self.election_prefix(&req.election);
        let placed = self.place(req, &prefix, lease, expected).await?;
        self.answer(req, &prefix, lease, ttl, placed)
    }

    /// Won if our key heads the line, else held by the head.
    fn answer(
        &self,
        req: &AcquireRequest,
        prefix: &str,
        lease: i64,
        ttl: Duration,
        placed: Placed,
    ) -> Result<Acquire, StoreError> {
        let mine = Lease {
            election: req.election.clone(),
            holder: req.holder.clone(),
            token: FencingToken::new(u64::try_from(placed.token).unwrap_or(0)),
            ttl,
            handle: LeaseHandle::new(lease_hex(lease)),
        };
        let key = candidate_key(prefix, lease);
        match placed.head {
            Some(head) if head.key() == key.as_bytes() => {
                tracing::debug!(
                    election = %req.election, holder = %req.holder, token = placed.token,
                    "etcd: first in line"
                );
                Ok(Acquire::Won(mine))
            }
            Some(head) => Ok(Acquire::Held {
                leader: Some(leader_of(
                    head.key(),
                    head.value(),
                    head.lease(),
                    head.create_revision(),
                )),
                queued: Some(mine),
            }),
            None => Err(protocol(
                format!("acquire election '{}'", req.election),
                "the election is empty right after our key was written",
            )),
        }
    }

    fn undelivered(&self) -> std::sync::MutexGuard<'_, Vec<Undelivered>> {
        self.undelivered
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Campaigns with the lease of `u`, kept alive from `sent`, which stays
    /// listed as undelivered until the answer is returned: an acquire given
    /// up on meanwhile leaves it for the holder's next acquire to take.
    async fn campaign_delivered(
        &self,
        req: &AcquireRequest,
        u: Undelivered,
        expected: Expected,
        sent: Instant,
    ) -> Result<Acquire, StoreError> {
        let id = u.lease;
        let ttl = u.ttl;
        self.undelivered().push(u);
        let result = self.campaign(req, id, ttl, expected).await;
        // Nothing awaits after this on success: the caller gets the lease.
        self.undelivered()
            .retain(|u| u.lease != id || u.election != req.election);
        match &result {
            Ok(a) => self.note_placed(id, req, a, sent),
            Err(_) => {
                // Don't leave a key queued that nobody will renew: delete
                // whatever this lease put under our key (other elections
                // may share the lease).
                let ours = SessionKey {
                    election: req.election.clone(),
                    holder: req.holder.clone(),
                    token: None,
                };
                if self.drop_key(&id, &ours).await.is_ok()
                    && self
                        .sessions
                        .forget(&id, &req.election, None, Some(&req.holder))
                        == Forgot::Emptied
                {
                    self.revoke_in_background(id, &req.election);
                }
            }
        }
        result
    }

    /// Records in its session the key an acquire answered with.
    fn note_placed(&self, id: i64, req: &AcquireRequest, acquired: &Acquire, sent: Instant) {
        let lease = match acquired {
            Acquire::Won(lease)
            | Acquire::Held {
                queued: Some(lease),
                ..
            } => lease,
            Acquire::Held { queued: None, .. } => return,
        };
        self.sessions
            .placed(&id, &req.election, &req.holder, lease.token, sent);
    }

    /// A session of `ttl_secs` with room for `req.election`, whose lease
    /// was kept alive (or granted) at the instant returned: a shared one
    /// when there is one, else a lease granted now.
    async fn session_for(
        &self,
        req: &AcquireRequest,
        ttl_secs: i64,
    ) -> Result<(i64, Duration, Instant), StoreError> {
        let group = Duration::from_secs(u64::try_from(ttl_secs).unwrap_or(0));
        let grant = || async {
            let mut client = self.client.clone();
            let granted = self
                .call(
                    &req.election,
                    || format!("acquire election '{}': grant a lease", req.election),
                    client.lease_grant(ttl_secs, None),
                )
                .await?;
            let ttl = Duration::from_secs(u64::try_from(granted.ttl().max(ttl_secs)).unwrap_or(0));
            Ok((granted.id(), ttl))
        };
        let keep_alive = |id| self.keep_alive_once(Some(&req.election), id, "acquire");
        self.sessions
            .session_for(
                self,
                &req.election,
                &req.holder,
                group,
                self.request_timeout,
                grant,
                keep_alive,
            )
            .await
    }

    /// Revokes lease `id`, whose keys are all gone, without making the
    /// caller wait. Should the process exit first, or the revoke fail, the
    /// lease, with no key left, expires by its ttl.
    fn revoke_in_background(&self, id: i64, election: &ElectionName) {
        self.revoke_later(id, Some(election), false);
    }

    /// Revokes lease `id` in the background if no key is attached to it
    /// any more: a lease this store did not grant may carry the keys of
    /// other elections of the process that did.
    fn revoke_if_keyless_in_background(&self, id: i64, election: &ElectionName) {
        self.revoke_later(id, Some(election), true);
    }

    fn revoke_later(&self, id: i64, election: Option<&ElectionName>, if_keyless: bool) {
        let mut client = self.client.clone();
        let bound = self.request_timeout;
        let election = election.cloned();
        tokio::spawn(async move {
            let r = tokio::time::timeout(bound, async {
                if if_keyless {
                    let options = etcd_client::LeaseTimeToLiveOptions::new().with_keys();
                    let r = client.lease_time_to_live(id, Some(options)).await?;
                    if r.ttl() < 0 || !r.keys().is_empty() {
                        return Ok(());
                    }
                }
                client.lease_revoke(id).await.map(drop)
            })
            .await;
            match r {
                Ok(Ok(())) => {}
                Ok(Err(e)) if is_lease_not_found(&e) => {}
                Ok(Err(e)) => {
                    tracing::debug!(?election, error = %e, "etcd: revoking a released lease failed");
                }
                Err(_) => {
                    tracing::debug!(?election, "etcd: revoking a released lease: no answer");
                }
            }
        });
    }

    async fn read_head(
        &self,
        election: &ElectionName,
        what: &str,
    ) -> Result<(Option<LeaderInfo>, i64), StoreError> {
        let (mut line, revision) = self.read_line(election, what, 1).await?;
        Ok((line.pop().map(|h| h.leader), revision))
    }

    /// The first `n` keys of the line, in order, and the revision they were
    /// read at.
    async fn read_line(
        &self,
        election: &ElectionName,
        what: &str,
        n: i64,
    ) -> Result<(Vec<Head>, i64), StoreError> {
        let prefix = self.election_prefix(election);
        let mut client = self.client.clone();
        let options = GetOptions::new()
            .with_prefix()
            .with_sort(SortTarget::Create, SortOrder::Ascend)
            .with_limit(n);
        let mut resp = self
            .call(
                election,
                || format!("{what} of election '{election}'"),
                client.get(prefix, Some(options)),
            )
            .await?;
        let revision = resp.header().map(|h| h.revision()).unwrap_or(0);
        let line = resp.take_kvs().iter().map(Head::of).collect();
        Ok((line, revision))
    }

    /// Whether our key exists with our token (create revision), our lease,
    /// and a value that names our holder.
    async fn own_key(&self, lease: &Lease, id: i64, what: &str) -> Result<bool, StoreError> {
        Ok(self.own_record(lease, id, what).await?.is_some())
    }

    /// Our key, if it exists with our token (create revision), our lease,
    /// and a value that names our holder.
    async fn own_record(
        &self,
        lease: &Lease,
        id: i64,
        what: &str,
    ) -> Result<Option<KeyValue>, StoreError> {
        let key = candidate_key(&self.election_prefix(&lease.election), id);
        let mut client = self.client.clone();
        let mut resp = self
            .call(
                &lease.election,
                || format!("{what} election '{}' by '{}'", lease.election, lease.holder),
                client.get(key, None),
            )
            .await?;
        Ok(resp.take_kvs().into_iter().next().filter(|kv| {
            i64::try_from(lease.token.get()).ok() == Some(kv.create_revision())
                && kv.lease() == id
                && decode(kv.value()).is_some_and(|(h, _)| h == lease.holder)
        }))
    }
}

/// A key of an election's line: its key, its create revision (the term's
/// token, when it heads the line) and the leader it names.
#[derive(Debug, Clone)]
struct Head {
    key: Vec<u8>,
    create_revision: i64,
    leader: LeaderInfo,
}

impl Head {
    fn of(kv: &KeyValue) -> Self {
        Self {
            key: kv.key().to_vec(),
            create_revision: kv.create_revision(),
            leader: leader_of(kv.key(), kv.value(), kv.lease(), kv.create_revision()),
        }
    }
}

/// What a watch knows of its election's line: the head and, when known, the
/// key next in line, as of a revision.
///
/// Only a change of the head is news. A candidate queueing behind, or
/// leaving from behind the head, costs the line's watchers nothing (they
/// read the head on every event before, so with N candidates each one
/// joining cost N reads). When the head's key goes and the next key is
/// known, the next leads at once: the follower that is next learns it from
/// the event alone and goes straight to its acquire, as a Go `Election`'s
/// follower waits on the key just ahead of it. The next key is read again
/// afterwards, when the stream is next polled. Only when it is not known
/// (it left, or the line was not read since) does the head's deletion need
/// a read first.
#[derive(Debug, Default)]
struct Line {
    head: Option<Head>,
    /// The key behind the head: `None` when not known, `Some(None)` when
    /// the line holds the head alone.
    next: Option<Option<Head>>,
    /// The revision the line was read at: older events are in it already.
    as_of: i64,
    /// Read the line before anything else: the head's key was deleted and
    /// which key is next is not known (`Read::First`), or the head came
    /// from the next key and the one behind it is to be learnt
    /// (`Read::Refill`).
    read: Option<Read>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Read {
    /// The head is not known: the read's head is news.
    First,
    /// The head is known: the read's head is news only if it differs.
    Refill,
}

/// One event of a watch: a key put or deleted.
struct Change<'a> {
    deleted: bool,
    key: &'a [u8],
    value: &'a [u8],
    lease: i64,
    create_revision: i64,
    mod_revision: i64,
}

impl Change<'_> {
    fn head(&self) -> Head {
        Head {
            key: self.key.to_vec(),
            create_revision: self.create_revision,
            leader: leader_of(self.key, self.value, self.lease, self.create_revision),
        }
    }
}

impl Line {
    /// The line as read at `revision`: its first two keys at most.
    fn read(&mut self, mut keys: Vec<Head>, revision: i64) {
        keys.truncate(2);
        let mut keys = keys.into_iter();
        self.head = keys.next();
        self.next = Some(keys.next());
        self.as_of = revision;
        self.read = None;
    }

    /// Applies one watch response's changes in order; the leader to report
    /// if the head changed.
    fn apply<'a>(
        &mut self,
        changes: impl IntoIterator<Item = Change<'a>>,
    ) -> Option<Option<LeaderInfo>> {
        let mut news = None;
        for kv in changes {
            if kv.mod_revision <= self.as_of {
                continue;
            }
            let is_head = self.head.as_ref().is_some_and(|h| h.key == kv.key);
            let is_next = matches!(&self.next, Some(Some(n)) if n.key == kv.key);
            if kv.deleted {
                if is_head {
                    match self.next.take() {
                        Some(next) => {
                            // The next key leads; what is behind it is
                            // learnt by a read once this news is out.
                            self.head = next;
                            self.read = self.head.is_some().then_some(Read::Refill);
                            self.next = if self.head.is_some() {
                                None
                            } else {
                                Some(None)
                            };
                            news = Some(self.head.as_ref().map(|h| h.leader.clone()));
                        }
                        None => {
                            self.head = None;
                            self.read = Some(Read::First);
                            // What came after is in the read.
                            return None;
                        }
                    }
                } else if is_next {
                    self.next = None;
                }
                continue;
            }
            if is_head {
                // New metadata on the leader's key (Proclaim).
                self.head = Some(kv.head());
                news = Some(Some(kv.head().leader));
                continue;
            }
            if is_next {
                self.next = Some(Some(kv.head()));
                continue;
            }
            match &self.head {
                None => {
                    // A key in an empty line: it leads, and it is alone.
                    self.head = Some(kv.head());
                    self.next = Some(None);
                    news = Some(Some(kv.head().leader));
                }
                Some(h) if kv.create_revision < h.create_revision => {
                    // Ahead of the head as we knew it (a read older than
                    // the line): it leads; what is behind is not known.
                    self.head = Some(kv.head());
                    self.next = None;
                    news = Some(Some(kv.head().leader));
                }
                Some(_) => {
                    if matches!(self.next, Some(None)) {
                        // The head was alone: a new key is the next (a key
                        // created later is behind every key already there).
                        self.next = Some(Some(kv.head()));
                    }
                }
            }
        }
        news
    }
}

/// How long a watch waits before it reads the key behind a new head: a
/// random time of up to [`REFILL_SPREAD`], so that a crowd's watches read
/// one after another rather than all at the hand-over.
fn refill_delay() -> Duration {
    use std::hash::{BuildHasher, Hasher};
    // A hasher of a new `RandomState` is seeded at random: no dependency
    // for a jitter.
    let r = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    let spread = u64::try_from(REFILL_SPREAD.as_micros()).unwrap_or(u64::MAX);
    Duration::from_micros(r % spread.max(1))
}

/// Sleeps until `at`, or for ever.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Over how long a crowd's watches spread their reads of the key behind a
/// new head.
const REFILL_SPREAD: Duration = Duration::from_millis(500);

fn protocol(what: String, why: &str) -> StoreError {
    StoreError::new(ErrorKind::Protocol, format!("{what}: {why}"))
}

/// The store's shared leases ([`SharedSessions`]): a session is a lease,
/// its records the keys attached to it.
impl SessionBackend for EtcdStore {
    type Id = i64;

    async fn keep_alive(&self, id: &i64) -> Result<bool, StoreError> {
        self.keep_alive_once(None, *id, "renew").await
    }

    async fn held(&self, id: &i64, keys: &[SessionKey]) -> Result<Vec<bool>, StoreError> {
        let mut client = self.client.clone();
        let id = *id;
        let options = etcd_client::LeaseTimeToLiveOptions::new().with_keys();
        let what = || format!("renew: list the keys of lease {}", lease_hex(id));
        let r = self
            .lease_call(None, what, client.lease_time_to_live(id, Some(options)))
            .await
            .map_err(|e| e.error)?;
        // etcd says the remaining ttl in whole seconds, rounded down: 0 is
        // a lease alive for less than a second; -1 one gone.
        let attached: std::collections::HashSet<&[u8]> = if r.ttl() >= 0 {
            r.keys().iter().map(Vec::as_slice).collect()
        } else {
            std::collections::HashSet::new()
        };
        Ok(keys
            .iter()
            .map(|k| {
                let key = candidate_key(&self.election_prefix(&k.election), id);
                attached.contains(key.as_bytes())
            })
            .collect())
    }

    async fn drop_key(&self, id: &i64, key: &SessionKey) -> Result<(), StoreError> {
        let id = *id;
        let name = candidate_key(&self.election_prefix(&key.election), id);
        let mut when = vec![Compare::lease(name.clone(), CompareOp::Equal, id)];
        if let Some(token) = key.token.and_then(|t| i64::try_from(t.get()).ok()) {
            when.push(Compare::create_revision(
                name.clone(),
                CompareOp::Equal,
                token,
            ));
        }
        let txn = Txn::new().when(when).and_then([TxnOp::delete(name, None)]);
        let what = || {
            format!(
                "delete the key of election '{}' by '{}', not renewed within its ttl",
                key.election, key.holder
            )
        };
        let mut client = self.client.clone();
        self.call(&key.election, what, client.txn(txn))
            .await
            .map(drop)
    }

    fn end(&self, id: &i64) {
        self.revoke_later(*id, None, false);
    }

    fn sessions(&self) -> &SharedSessions<Self> {
        &self.sessions
    }
}

/// A failed lease request, and whether etcd said it no longer knows the
/// lease.
struct LeaseCallError {
    error: StoreError,
    lease_not_found: bool,
}

impl LeaseStore for EtcdStore {
    fn info(&self) -> StoreInfo {
        // etcd rounds a ttl up to whole seconds (and to its own minimum):
        // it never grants less than asked.
        StoreInfo::new(
            "etcd",
            StoreStyle::Queue,
            WatchMode::Notify,
            SafetyClass::Consensus,
        )
        .with_ttl_range(MIN_TTL, MAX_TTL)
        .with_expiry_slack(regent_core::store::ExpirySlack::fixed(EXPIRY_SLACK))
    }

    async fn try_acquire(
        &self,
        req: &AcquireRequest,
        queued: Option<&Lease>,
    ) -> Result<Acquire, StoreError> {
        let ttl_secs = self.ttl_secs(req.ttl)?;
        let place = queued
            .filter(|q| q.election == req.election && q.holder == req.holder)
            .and_then(|q| Some((q, parse_lease_hex(q.handle.as_str())?)));
        if let Some((q, id)) = place {
            // Restart the place's ttl (a Won below must hold for a full ttl
            // from this call) while reading the line: a place still as we
            // left it needs no write.
            let prefix = self.election_prefix(&req.election);
            let token = i64::try_from(q.token.get()).ok();
            let sent = Instant::now();
            let (alive, still) = tokio::join!(
                self.keep_alive_once(Some(&req.election), id, "acquire"),
                async {
                    match token {
                        Some(t) => self.still_placed(req, &prefix, id, t).await,
                        None => Ok(None),
                    }
                }
            );
            if alive? {
                let acquired = match still? {
                    Some(placed) => self.answer(req, &prefix, id, q.ttl, placed),
                    None => {
                        let expected = token.map_or(Expected::Fresh, Expected::Queued);
                        self.campaign(req, id, q.ttl, expected).await
                    }
                };
                if let Ok(a) = &acquired {
                    self.note_placed(id, req, a, sent);
                }
                return acquired;
            }
            self.sessions.end(&id);
            // The lease expired while we waited in line (etcd#19597 is a
            // campaign that waits forever on such a key): queue afresh.
            tracing::debug!(
                election = %req.election, holder = %req.holder,
                "etcd: queued lease expired; campaigning with a new lease"
            );
        }
        // A lease an acquire of this holder granted and never returned: its
        // key, if the acquire made one, is our place.
        let lost = {
            let mut undelivered = self.undelivered();
            let at = undelivered
                .iter()
                .position(|u| u.election == req.election && u.holder == req.holder);
            at.map(|i| undelivered.remove(i))
        };
        if let Some(u) = lost {
            let sent = Instant::now();
            match self
                .keep_alive_once(Some(&req.election), u.lease, "acquire")
                .await
            {
                Ok(true) => return self.campaign_delivered(req, u, Expected::Adopt, sent).await,
                Ok(false) => self.sessions.end(&u.lease),
                Err(e) => {
                    self.undelivered().push(u);
                    return Err(e);
                }
            }
        }
        let (id, ttl, sent) = self.session_for(req, ttl_secs).await?;
        let u = Undelivered {
            election: req.election.clone(),
            holder: req.holder.clone(),
            lease: id,
            ttl,
        };
        self.campaign_delivered(req, u, Expected::Fresh, sent).await
    }

    async fn renew(&self, lease: &Lease) -> Result<Renewal, StoreError> {
        let Some(id) = parse_lease_hex(lease.handle.as_str()) else {
            return Ok(Renewal::Lost);
        };
        // A key on one of our sessions: the session's next round renews it
        // with all the others.
        let joined = self
            .sessions
            .join(&id, &lease.election, &lease.holder, lease.token);
        if let Some(round) = joined
            && let Ok(answer) = round.await
        {
            tracing::debug!(
                election = %lease.election, holder = %lease.holder, token = lease.token.get(),
                ?answer, "etcd: renewed with its session"
            );
            return answer;
        }
        // Not ours (a lease placed by another process or store): on its
        // own. Check first, so that a renewal of someone else's record
        // never extends it.
        if !self.own_key(lease, id, "renew").await? {
            return Ok(Renewal::Lost);
        }
        if !self
            .keep_alive_once(Some(&lease.election), id, "renew")
            .await?
        {
            return Ok(Renewal::Lost);
        }
        tracing::debug!(
            election = %lease.election, holder = %lease.holder, token = lease.token.get(),
            "etcd: renewed"
        );
        Ok(Renewal::Renewed)
    }

    async fn update_metadata(
        &self,
        lease: &Lease,
        metadata: &Metadata,
    ) -> Result<Renewal, StoreError> {
        let Some(id) = parse_lease_hex(lease.handle.as_str()) else {
            return Ok(Renewal::Lost);
        };
        // Read first: the holder is in the value, which a compare cannot
        // look into.
        let Some(mine) = self.own_record(lease, id, "update the metadata of").await? else {
            return Ok(Renewal::Lost);
        };
        let value = encode(&lease.holder, metadata);
        if mine.value() == value.as_slice() {
            return Ok(Renewal::Renewed);
        }
        // Go's Proclaim, guarded by the key exactly as read: put the new
        // value with our lease (which keeps the key's create revision, our
        // token, and its expiry) only if nothing wrote the key since.
        let key = mine.key().to_vec();
        let txn = Txn::new()
            .when([
                Compare::create_revision(key.clone(), CompareOp::Equal, mine.create_revision()),
                Compare::mod_revision(key.clone(), CompareOp::Equal, mine.mod_revision()),
            ])
            .and_then([TxnOp::put(
                key,
                value,
                Some(PutOptions::new().with_lease(id)),
            )]);
        let what = || {
            format!(
                "update the metadata of election '{}' by '{}'",
                lease.election, lease.holder
            )
        };
        let mut client = self.client.clone();
        let resp = self.call(&lease.election, what, client.txn(txn)).await?;
        let outcome = if resp.succeeded() {
            Renewal::Renewed
        } else {
            Renewal::Lost
        };
        tracing::debug!(
            election = %lease.election, holder = %lease.holder, token = lease.token.get(),
            ?outcome, "etcd: update metadata"
        );
        Ok(outcome)
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        let (Some(id), Ok(token)) = (
            parse_lease_hex(lease.handle.as_str()),
            i64::try_from(lease.token.get()),
        ) else {
            return Ok(());
        };
        // Go's Resign: delete our key if it is still this term's (its create
        // revision is our token, its lease ours, its value our holder's), in
        // one write. The next in line is told by that deletion; revoking the
        // lease, which nothing else uses, comes after, in the background. (A
        // read of the key before the revoke was one more round trip on every
        // hand-over's path.)
        let key = candidate_key(&self.election_prefix(&lease.election), id);
        let (low, high) = holder_bounds(&lease.holder);
        let txn = Txn::new()
            .when([
                Compare::create_revision(key.clone(), CompareOp::Equal, token),
                Compare::lease(key.clone(), CompareOp::Equal, id),
                // The value names our holder.
                Compare::value(key.clone(), CompareOp::Greater, low),
                Compare::value(key.clone(), CompareOp::Less, high),
            ])
            .and_then([TxnOp::delete(key, None)]);
        let what = || {
            format!(
                "release election '{}' by '{}'",
                lease.election, lease.holder
            )
        };
        let mut client = self.client.clone();
        let resp = self.call(&lease.election, what, client.txn(txn)).await?;
        let forgot =
            self.sessions
                .forget(&id, &lease.election, Some(lease.token), Some(&lease.holder));
        if !resp.succeeded() {
            // Not ours, or gone already. If our key was deleted from outside
            // the lease may live on without a key; it expires by its ttl.
            if forgot == Forgot::Emptied {
                self.revoke_in_background(id, &lease.election);
            }
            return Ok(());
        }
        // Revoke the lease once it carries no key, without making the
        // caller wait for a second write.
        match forgot {
            Forgot::Emptied => self.revoke_in_background(id, &lease.election),
            Forgot::Kept => {}
            Forgot::Unknown => self.revoke_if_keyless_in_background(id, &lease.election),
        }
        Ok(())
    }

    async fn current_leader(
        &self,
        election: &ElectionName,
    ) -> Result<Option<LeaderInfo>, StoreError> {
        Ok(self.read_head(election, "read the leader").await?.0)
    }

    async fn watch(&self, election: &ElectionName) -> Result<LeaderStream, StoreError> {
        let (keys, revision) = self.read_line(election, "watch", 2).await?;
        let mut line = Line::default();
        line.read(keys, revision);
        let prefix = self.election_prefix(election);
        let mut client = self.client.clone();
        let options = WatchOptions::new()
            .with_prefix()
            .with_start_revision(revision + 1);
        let stream = self
            .call(
                election,
                || format!("watch election '{election}'"),
                client.watch(prefix, Some(options)),
            )
            .await?;
        struct State {
            store: EtcdStore,
            election: ElectionName,
            stream: Option<etcd_client::WatchStream>,
            line: Line,
            /// What to yield before anything else: the leader as read.
            first: Option<Option<LeaderInfo>>,
            /// When the line behind the head is to be read (`Read::Refill`).
            refill_at: Option<tokio::time::Instant>,
        }
        let state = State {
            store: self.clone(),
            election: election.clone(),
            stream: Some(stream),
            first: Some(line.head.as_ref().map(|h| h.leader.clone())),
            line,
            refill_at: None,
        };
        let leaders = futures_util::stream::unfold(state, |mut s| async move {
            if let Some(head) = s.first.take() {
                return Some((Ok(head), s));
            }
            loop {
                // The key behind a new head is learnt a moment later, at a
                // time of this watch's own: every follower of a crowd
                // reading at the instant of a hand-over made the new
                // leader's acquire wait behind their reads (1,000
                // candidates: 0.71 s).
                let due = match s.line.read {
                    Some(Read::First) => true,
                    Some(Read::Refill) => {
                        let at = *s
                            .refill_at
                            .get_or_insert_with(|| tokio::time::Instant::now() + refill_delay());
                        tokio::time::Instant::now() >= at
                    }
                    None => false,
                };
                if let (Some(read), true) = (s.line.read, due) {
                    s.refill_at = None;
                    // The leader's key went and which key is next takes a
                    // read (First), or the next key leads now and the one
                    // behind it is to be learnt (Refill).
                    let before = s.line.head.as_ref().map(|h| h.key.clone());
                    match s.store.read_line(&s.election, "watch", 2).await {
                        Ok((keys, revision)) => {
                            s.line.read(keys, revision);
                            let after = s.line.head.as_ref();
                            if read == Read::First || after.map(|h| &h.key) != before.as_ref() {
                                let leader = after.map(|h| h.leader.clone());
                                return Some((Ok(leader), s));
                            }
                        }
                        Err(e) if read == Read::First => {
                            s.line.read = None;
                            return Some((Err(e), s));
                        }
                        Err(e) => {
                            // The head is known: the next key stays
                            // unknown, and the watch goes on.
                            tracing::debug!(election = %s.election, error = %e, "etcd: reading the line behind the head failed");
                            s.line.read = None;
                        }
                    }
                    continue;
                }
                let refill_at = s.line.read.and(s.refill_at);
                let stream = s.stream.as_mut()?;
                let message = tokio::select! {
                    m = stream.message() => m,
                    () = sleep_until_some(refill_at) => continue,
                };
                match message {
                    Ok(Some(resp)) if resp.canceled() => {
                        // Compacted past our revision, or cancelled by the
                        // server: the caller opens a new watch.
                        tracing::debug!(
                            election = %s.election, reason = resp.cancel_reason(),
                            "etcd: watch cancelled"
                        );
                        return None;
                    }
                    Ok(Some(resp)) => {
                        let changes = resp.events().iter().filter_map(|e| {
                            let kv = e.kv()?;
                            Some(Change {
                                deleted: e.event_type() == etcd_client::EventType::Delete,
                                key: kv.key(),
                                value: kv.value(),
                                lease: kv.lease(),
                                create_revision: kv.create_revision(),
                                mod_revision: kv.mod_revision(),
                            })
                        });
                        if let Some(leader) = s.line.apply(changes) {
                            return Some((Ok(leader), s));
                        }
                    }
                    Ok(None) => return None,
                    Err(e) => {
                        s.stream = None;
                        let what = format!("watch election '{}'", s.election);
                        let err = s.store.error(&s.election, &what, e);
                        return Some((Err(err), s));
                    }
                }
            }
        });
        Ok(Box::pin(leaders))
    }
}

#[cfg(test)]
mod line_tests {
    use super::*;

    fn put<'a>(key: &'a str, value: &'a str, created: i64, modified: i64) -> Change<'a> {
        Change {
            deleted: false,
            key: key.as_bytes(),
            value: value.as_bytes(),
            lease: 1,
            create_revision: created,
            mod_revision: modified,
        }
    }

    fn del(key: &str, modified: i64) -> Change<'_> {
        Change {
            deleted: true,
            key: key.as_bytes(),
            value: b"",
            lease: 0,
            create_revision: 0,
            mod_revision: modified,
        }
    }

    fn holder(news: Option<Option<LeaderInfo>>) -> Option<Option<String>> {
        news.map(|l| l.map(|l| l.holder.as_str().to_owned()))
    }

    /// A line as a watch reads it, at `revision`.
    fn read(keys: &[Change<'_>], revision: i64) -> Line {
        let mut line = Line::default();
        line.read(keys.iter().map(Change::head).collect(), revision);
        line
    }

    #[test]
    fn only_a_change_of_the_head_is_news() {
        let mut line = read(&[], 4);
        // An empty line: the first key leads.
        assert_eq!(
            holder(line.apply([put("e/a", "a", 5, 5)])),
            Some(Some("a".into()))
        );
        // Queueing behind, and leaving from behind, is no news.
        assert_eq!(
            holder(line.apply([put("e/b", "b", 6, 6), put("e/c", "c", 7, 7)])),
            None
        );
        assert_eq!(holder(line.apply([del("e/c", 8)])), None);
        assert_eq!(line.read, None);
        // New metadata on the head's key is.
        let news = line.apply([put("e/a", r#"{"holder":"a","metadata":{"k":"v"}}"#, 5, 9)]);
        let leader = news.flatten().expect("the head, with its new value");
        assert_eq!(leader.metadata.get("k"), Some("v"));
        assert_eq!(leader.token.get(), 5);
    }

    #[test]
    fn the_next_key_leads_from_the_event_alone_and_is_read_behind_afterwards() {
        let mut line = read(&[put("e/a", "a", 5, 5), put("e/b", "b", 6, 6)], 6);
        // New metadata of the next key is kept for when it leads.
        assert_eq!(
            holder(line.apply([put("e/b", r#"{"holder":"b","metadata":{"k":"v"}}"#, 6, 7)])),
            None
        );
        let news = line.apply([del("e/a", 8), put("e/d", "d", 9, 9)]);
        let leader = news.flatten().expect("b leads, with no read");
        assert_eq!(leader.holder.as_str(), "b");
        assert_eq!(leader.token.get(), 6);
        assert_eq!(leader.metadata.get("k"), Some("v"));
        // Who is behind b takes a read, which is no news unless the head
        // changed meanwhile.
        assert_eq!(line.read, Some(Read::Refill));
        assert!(line.next.is_none());
    }

    #[test]
    fn the_heads_deletion_needs_a_read_when_the_next_key_is_not_known() {
        let mut line = read(&[put("e/a", "a", 5, 5), put("e/b", "b", 6, 6)], 6);
        // The next key leaves: who is behind it is not known.
        assert_eq!(holder(line.apply([del("e/b", 7)])), None);
        assert_eq!(line.read, None, "no read while the head stays");
        assert_eq!(
            holder(line.apply([del("e/a", 8), put("e/c", "c", 9, 9)])),
            None,
            "what came after is left to the read"
        );
        assert_eq!(line.read, Some(Read::First));
        assert!(line.head.is_none());
    }

    #[test]
    fn a_lone_heads_deletion_empties_the_line_and_a_key_behind_it_is_next() {
        let mut line = read(&[put("e/a", "a", 5, 5)], 5);
        assert_eq!(holder(line.apply([put("e/b", "b", 6, 6)])), None);
        assert_eq!(holder(line.apply([del("e/a", 7)])), Some(Some("b".into())));
        // b was alone behind a: it leads alone, and its deletion empties
        // the line with no read.
        line.read(vec![line.head.clone().unwrap()], 7);
        assert_eq!(holder(line.apply([del("e/b", 8)])), Some(None));
        assert_eq!(line.read, None);
    }

    #[test]
    fn events_the_read_already_saw_are_skipped() {
        let mut line = read(&[put("e/b", "b", 6, 6)], 20);
        // A late copy of an old value of the head, and the deletion of a
        // key the read no longer saw.
        assert_eq!(
            holder(line.apply([put("e/b", "old", 6, 7), del("e/a", 10)])),
            None
        );
        assert_eq!(line.read, None);
        assert_eq!(
            line.head.as_ref().map(|h| h.key.clone()),
            Some(b"e/b".to_vec())
        );
    }
}

#[cfg(all(test, feature = "tls"))]
mod tests {
    use super::*;

    #[test]
    fn pem_labels_are_the_begin_lines_each_once_in_order() {
        let pem = b"junk\r\n-----BEGIN CERTIFICATE-----\r\nAA==\r\n-----END CERTIFICATE-----\r\n\
                    -----BEGIN RSA PRIVATE KEY-----\nAA==\n-----END RSA PRIVATE KEY-----\n\
                      -----BEGIN CERTIFICATE-----  \nAA==\n-----END CERTIFICATE-----\n";
        let labels = pem_labels(pem);
        let names: Vec<&str> = labels.iter().map(PemLabel::as_str).collect();
        assert_eq!(names, ["CERTIFICATE", "RSA PRIVATE KEY"]);
        assert!(labels[0].is_certificate() && !labels[0].is_private_key());
        assert!(labels[1].is_private_key() && !labels[1].is_certificate());
        let request = pem_labels(b"-----BEGIN CERTIFICATE REQUEST-----\n");
        assert!(!request[0].is_certificate() && !request[0].is_private_key());
        assert!(pem_labels(b"not PEM").is_empty());
        assert!(pem_labels(b"-----BEGIN CERTIFICATE-----AA==").is_empty());
    }
}
