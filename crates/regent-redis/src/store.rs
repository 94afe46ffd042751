//! [`RedisStore`]: the connection, and the store contract over it.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::sentinel::{Sentinel, SentinelNodeConnectionInfo};
use redis::{AsyncConnectionConfig, Client, ConnectionInfo, Script, Value};
use regent_core::store::{Claims, SharedAttempt};
use regent_core::{
    Acquire, AcquireRequest, Candidacy, ElectionName, ErrorKind, ExpirySlack, HandOff, HolderId,
    LeaderInfo, LeaderStream, Lease, LeaseHandle, LeaseStore, Metadata, Renewal, SafetyClass,
    StoreError, StoreInfo, StoreStyle, WatchMode,
};

use crate::error::{classify, reconnect};
use crate::record::{Reply, leader, parse_token};
use crate::scripts::{Keys, Scripts};

/// The shortest ttl the store grants. Redis times a key to the
/// millisecond (`PEXPIRE`), but a lease shorter than a round trip is no
/// lease.
pub const MIN_TTL: Duration = Duration::from_millis(10);

/// How often a watch reads the leader, by default (a release wakes it at
/// once; an expiry is seen at the next read).
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(500);

/// The prefix of every key and channel of regent's, by default.
pub const DEFAULT_PREFIX: &str = "regent:";

/// How long one call waits for the server, by default.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(2);

/// Leases in Redis: one hash per election, timed by the server, fenced by
/// a counter floored by the server's clock. Cheap to clone: clones share
/// one multiplexed connection, made again (through the Sentinels, who
/// name the master of the moment) when it breaks.
///
/// See the [crate docs](crate) for the safety model.
#[derive(Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("server", &self.inner.server)
            .field("prefix", &self.inner.prefix)
            .finish_non_exhaustive()
    }
}

struct Inner {
    route: Route,
    /// Where, for messages: `HOST:PORT/DB` or `sentinel MASTER`, no
    /// password.
    server: String,
    prefix: String,
    poll_interval: Duration,
    call_timeout: Duration,
    /// Replicas that must acknowledge a won acquire (`WAIT`), and how
    /// long to wait for them.
    wait_replicas: Option<(u32, Duration)>,
    scripts: Scripts,
    /// Random, one per store: written into every term it wins (`by`), so
    /// that its acquire may take over a term of its own whose answer never
    /// came, and no other process's (see `scripts::ACQUIRE`).
    incarnation: String,
    /// Per election and holder, the term last handed to the caller (never
    /// taken over: its holder may lead with it) and the acquires in flight
    /// (while another is, none takes anything over).
    claims: Arc<Claims>,
    conn: Mutex<Option<Arc<Conn>>>,
    generations: AtomicU64,
    connecting: SharedAttempt<Arc<Conn>>,
}

/// One connection to the master, and the client that made it (watches
/// subscribe through it, so that they follow the same master).
struct Conn {
    generation: u64,
    conn: MultiplexedConnection,
    client: Client,
}

/// How the store finds its server.
enum Route {
    Direct(Client),
    Sentinel {
        /// The Sentinels' addresses and logins.
        sentinels: Vec<ConnectionInfo>,
        /// Which Sentinel to ask first: the next one after a lookup that
        /// failed or hung (a stopped Sentinel never answers, and the
        /// client asks them in order).
        first: AtomicUsize,
        master: String,
        node: SentinelNodeConnectionInfo,
    },
}

/// Settings of a [`RedisStore`].
pub struct RedisStoreBuilder {
    route: Route,
    server: String,
    prefix: String,
    poll_interval: Duration,
    call_timeout: Duration,
    wait_replicas: Option<(u32, Duration)>,
    lazy: bool,
}

impl std::fmt::Debug for RedisStoreBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStoreBuilder")
            .field("server", &self.server)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl RedisStoreBuilder {
    /// The prefix of every key and channel (default `regent:`): elections
    /// of two applications on one Redis apart, or an ACL's key pattern.
    #[must_use]
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// How often a watch reads the leader (default 500 ms).
    #[must_use]
    pub fn poll_interval(mut self, every: Duration) -> Self {
        self.poll_interval = every;
        self
    }

    /// How long one call waits for the server (default 2 s); connecting
    /// too.
    #[must_use]
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// After winning, waits up to `timeout` until `replicas` replicas
    /// acknowledge the new term (`WAIT`); when fewer do, the lease is
    /// given back and the acquire fails as `Unavailable`. `0` waits for
    /// none (the default). See the crate docs for what this buys and what
    /// it does not.
    #[must_use]
    pub fn wait_replicas(mut self, replicas: u32, timeout: Duration) -> Self {
        self.wait_replicas = (replicas > 0).then_some((replicas, timeout));
        self
    }

    /// Connects at the first request instead of in [`build`](Self::build)
    /// (default: in `build`).
    #[must_use]
    pub fn lazy(mut self, lazy: bool) -> Self {
        self.lazy = lazy;
        self
    }

    /// Makes the store, and connects unless [`lazy`](Self::lazy).
    ///
    /// # Errors
    ///
    /// `Auth` for a refused user or password, `Config` for a database
    /// that does not exist or a master the Sentinels do not know,
    /// `Unavailable` when the server cannot be reached.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a dropped build leaves at most a connection attempt
    /// that ends by itself.
    pub async fn build(self) -> Result<RedisStore, StoreError> {
        if self.prefix.contains(['{', '}']) || self.prefix.chars().any(char::is_whitespace) {
            return Err(StoreError::new(
                ErrorKind::Config,
                format!(
                    "redis store: the key prefix {:?} may hold neither braces nor spaces",
                    self.prefix
                ),
            ));
        }
        let store = RedisStore {
            inner: Arc::new(Inner {
                route: self.route,
                server: self.server,
                prefix: self.prefix,
                poll_interval: self.poll_interval,
                call_timeout: self.call_timeout,
                wait_replicas: self.wait_replicas,
                scripts: Scripts::new(),
                incarnation: regent_core::store::incarnation(),
                claims: Arc::default(),
                conn: Mutex::new(None),
                generations: AtomicU64::new(0),
                connecting: SharedAttempt::new(),
            }),
        };
        if !self.lazy {
            store.conn().await?;
        }
        Ok(store)
    }
}

/// `HOST:PORT/DB` of a connection, for messages: no password.
fn describe(info: &redis::ConnectionInfo) -> String {
    let db = info.redis_settings().db();
    match info.addr() {
        redis::ConnectionAddr::Tcp(h, p) => format!("{h}:{p}/{db}"),
        redis::ConnectionAddr::TcpTls { host, port, .. } => format!("{host}:{port}/{db} (TLS)"),
        redis::ConnectionAddr::Unix(path) => format!("{}/{db}", path.display()),
        _ => format!("redis/{db}"),
    }
}

impl RedisStore {
    /// Settings for a store on the server `client` names (its URL's
    /// database, user and password included).
    pub fn builder(client: Client) -> RedisStoreBuilder {
        let server = describe(client.get_connection_info());
        Self::with_route(Route::Direct(client), server)
    }

    /// Settings for a store on the master that the Sentinels at
    /// `sentinels` name `master`, logging in to it as `node` says (its
    /// database, user and password). The store follows the master through
    /// failovers: every new connection asks the Sentinels again (a
    /// Sentinel that does not answer within the call timeout is asked
    /// last next time), and checks with `ROLE` that the server it reaches
    /// is a master.
    pub fn sentinel_builder(
        sentinels: Vec<ConnectionInfo>,
        master: impl Into<String>,
        node: SentinelNodeConnectionInfo,
    ) -> RedisStoreBuilder {
        let master = master.into();
        let server = format!("sentinel master {master}");
        Self::with_route(
            Route::Sentinel {
                sentinels,
                first: AtomicUsize::new(0),
                master,
                node,
            },
            server,
        )
    }

    fn with_route(route: Route, server: String) -> RedisStoreBuilder {
        RedisStoreBuilder {
            route,
            server,
            prefix: DEFAULT_PREFIX.to_owned(),
            poll_interval: DEFAULT_POLL_INTERVAL,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            wait_replicas: None,
            lazy: false,
        }
    }

    /// The prefix of the keys and channels.
    pub fn prefix(&self) -> &str {
        &self.inner.prefix
    }

    pub(crate) fn describe(&self) -> String {
        format!("redis store {}", self.inner.server)
    }

    fn what(&self, op: &str, election: &ElectionName) -> String {
        format!(
            "redis store {}: {op} election '{election}'",
            self.inner.server
        )
    }

    fn keys(&self, election: &ElectionName) -> Keys {
        Keys::new(&self.inner.prefix, election.as_str())
    }

    pub(crate) fn channel(&self, election: &ElectionName) -> String {
        crate::scripts::channel(&self.inner.prefix, election.as_str())
    }

    /// The connection, made again if it broke. The attempt runs in a task
    /// of its own that every caller waits for (no caller's future holds
    /// it: see [`SharedAttempt`]).
    async fn conn(&self) -> Result<Arc<Conn>, StoreError> {
        if let Some(c) = self.cached() {
            return Ok(c);
        }
        let store = self.clone();
        self.inner
            .connecting
            .join(
                || self.cached(),
                self.inner.call_timeout * 3,
                &format!("{}: connect", self.describe()),
                || async move { store.make_connection().await },
            )
            .await
    }

    /// The client of the master the store talks to now.
    pub(crate) async fn master_client(&self) -> Result<Client, StoreError> {
        Ok(self.conn().await?.client.clone())
    }

    fn cached(&self) -> Option<Arc<Conn>> {
        self.inner
            .conn
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Forgets connection `generation` (broken, or on a server that is no
    /// longer the master), unless a newer one replaced it already.
    fn forget(&self, generation: u64) {
        let mut conn = self
            .inner
            .conn
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if conn.as_ref().is_some_and(|c| c.generation == generation) {
            *conn = None;
        }
    }

    async fn make_connection(&self) -> Result<Arc<Conn>, StoreError> {
        let what = || format!("{}: connect", self.describe());
        let client = match &self.inner.route {
            Route::Direct(client) => client.clone(),
            Route::Sentinel {
                sentinels,
                first,
                master,
                node,
            } => {
                let mut order = sentinels.clone();
                if !order.is_empty() {
                    let n = first.load(Ordering::Relaxed) % order.len();
                    order.rotate_left(n);
                }
                let asked = async {
                    let mut sentinel = Sentinel::build(order)?;
                    sentinel.async_master_for(master, Some(node)).await
                };
                let what = || format!("{}: ask the Sentinels", what());
                match tokio::time::timeout(self.inner.call_timeout, asked).await {
                    Ok(Ok(client)) => client,
                    Ok(Err(e)) if e.kind() == redis::ErrorKind::MasterNameNotFoundBySentinel => {
                        // The client says so both when no Sentinel knows
                        // the name and when the master they name does not
                        // answer as one (a failover in progress): ask.
                        first.fetch_add(1, Ordering::Relaxed);
                        return Err(self.unknown_master(sentinels, master, what()).await);
                    }
                    Ok(Err(e)) => {
                        first.fetch_add(1, Ordering::Relaxed);
                        return Err(classify(what(), e));
                    }
                    Err(_) => {
                        first.fetch_add(1, Ordering::Relaxed);
                        return Err(StoreError::unavailable(format!(
                            "{}: no answer within {:?}",
                            what(),
                            self.inner.call_timeout
                        )));
                    }
                }
            }
        };
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.inner.call_timeout))
            .set_response_timeout(Some(self.inner.call_timeout));
        let conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(|e| classify(what(), e))?;
        // Logging in is lazy for a user without a password: a PING finds
        // a refused one now, as `Auth`, rather than at the first script.
        let mut ping = conn.clone();
        redis::cmd("PING")
            .query_async::<()>(&mut ping)
            .await
            .map_err(|e| classify(what(), e))?;
        tracing::debug!(
            store = %self.inner.server,
            server = %describe(client.get_connection_info()),
            "redis store connected"
        );
        let conn = Arc::new(Conn {
            generation: self.inner.generations.fetch_add(1, Ordering::Relaxed),
            conn,
            client,
        });
        *self
            .inner
            .conn
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(conn.clone());
        Ok(conn)
    }

    /// Why no master was found under `master`: `Config` when a Sentinel
    /// that answers knows no such name, else `Unavailable` (the master it
    /// names does not answer as a master: a failover in progress).
    async fn unknown_master(
        &self,
        sentinels: &[ConnectionInfo],
        master: &str,
        what: String,
    ) -> StoreError {
        for info in sentinels {
            let ask = async {
                let client = Client::open(info.clone())?;
                let mut c = client.get_multiplexed_async_connection().await?;
                redis::cmd("SENTINEL")
                    .arg("GET-MASTER-ADDR-BY-NAME")
                    .arg(master)
                    .query_async::<Value>(&mut c)
                    .await
            };
            match tokio::time::timeout(self.inner.call_timeout, ask).await {
                Ok(Ok(Value::Nil)) => {
                    return StoreError::new(
                        ErrorKind::Config,
                        format!(
                            "{what}: the Sentinels monitor no master named '{master}' (the \
                             name after the Sentinels' addresses in redis+sentinel://…/MASTER)"
                        ),
                    );
                }
                Ok(Ok(Value::Array(addr))) => {
                    let addr: Vec<String> = addr
                        .iter()
                        .map(|v| match v {
                            Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                            other => format!("{other:?}"),
                        })
                        .collect();
                    return StoreError::unavailable(format!(
                        "{what}: the master the Sentinels name '{master}' ({}) does not answer \
                         as a master (a failover in progress?)",
                        addr.join(":")
                    ));
                }
                _ => {}
            }
        }
        StoreError::unavailable(format!(
            "{what}: no Sentinel answered for master '{master}'"
        ))
    }

    /// Runs `script` once, bounded by the call timeout.
    async fn eval(
        &self,
        what: &(dyn Fn() -> String + Sync),
        script: &Script,
        keys: &[&str],
        args: &[&str],
    ) -> Result<Value, StoreError> {
        let conn = self.conn().await?;
        let mut invocation = script.prepare_invoke();
        for k in keys {
            invocation.key(*k);
        }
        for a in args {
            invocation.arg(*a);
        }
        let mut c = conn.conn.clone();
        let timeout = self.inner.call_timeout;
        match tokio::time::timeout(timeout, invocation.invoke_async::<Value>(&mut c)).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => {
                if reconnect(&e) {
                    self.forget(conn.generation);
                }
                Err(classify(what(), e))
            }
            Err(_) => {
                self.forget(conn.generation);
                Err(StoreError::unavailable(format!(
                    "{}: no answer within {timeout:?}",
                    what()
                )))
            }
        }
    }

    /// A script on the caller's own term: `Renewed` if it was ours.
    async fn own(
        &self,
        script: &Script,
        op: &str,
        lease: &Lease,
        keys: &[&str],
        extra: &[&str],
    ) -> Result<Renewal, StoreError> {
        let what = || self.what(op, &lease.election);
        let token = lease.token.get().to_string();
        let mut args = vec![lease.holder.as_str(), token.as_str()];
        args.extend_from_slice(extra);
        match self.eval(&what, script, keys, &args).await? {
            Value::Int(1) => Ok(Renewal::Renewed),
            Value::Int(0) => Ok(Renewal::Lost),
            other => Err(StoreError::new(
                ErrorKind::Protocol,
                format!("{}: the script answered {other:?}", what()),
            )),
        }
    }

    /// After a win: the replicas' acknowledgement, if asked for.
    async fn wait_for_replicas(&self, lease: &Lease) -> Result<(), StoreError> {
        let Some((replicas, timeout)) = self.inner.wait_replicas else {
            return Ok(());
        };
        let what = || self.what("wait for replicas after winning", &lease.election);
        let conn = self.conn().await?;
        let mut c = conn.conn.clone();
        let ms = u64::try_from(timeout.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        let mut wait = redis::cmd("WAIT");
        wait.arg(replicas).arg(ms);
        let acked = match tokio::time::timeout(
            timeout + self.inner.call_timeout,
            wait.query_async::<i64>(&mut c),
        )
        .await
        {
            Ok(Ok(n)) => Ok(n),
            Ok(Err(e)) => {
                if reconnect(&e) {
                    self.forget(conn.generation);
                }
                Err(classify(what(), e))
            }
            Err(_) => {
                self.forget(conn.generation);
                Err(StoreError::unavailable(format!("{}: no answer", what())))
            }
        };
        let short = match acked {
            Ok(n) if n >= i64::from(replicas) => return Ok(()),
            Ok(n) => StoreError::unavailable(format!(
                "{}: {n} of {replicas} replicas acknowledged the new term within {timeout:?}; \
                 the lease was given back",
                what()
            )),
            Err(e) => e,
        };
        // Not a term the operator asked for: give it back (or it expires).
        if let Err(e) = self.release(lease).await {
            tracing::debug!(election = %lease.election, error = %e, "give back an unacknowledged term");
        }
        Err(short)
    }
}

/// A ttl in whole milliseconds, rounded up: never less than asked.
fn ttl_ms(ttl: Duration) -> String {
    ttl.as_micros().div_ceil(1000).max(1).to_string()
}

impl LeaseStore for RedisStore {
    fn info(&self) -> StoreInfo {
        StoreInfo::new(
            "redis",
            StoreStyle::Race,
            WatchMode::Poll(self.inner.poll_interval),
            SafetyClass::SingleNode,
        )
        .with_ttl_range(MIN_TTL, regent_core::MAX_TTL)
        // The server frees a key at its expiry by its own clock: a read
        // of an expired key finds nothing, whether or not it was evicted.
        .with_expiry_slack(ExpirySlack::NONE)
    }

    async fn try_acquire(
        &self,
        req: &AcquireRequest,
        _queued: Option<&Lease>,
    ) -> Result<Acquire, StoreError> {
        let election = &req.election;
        let what = || self.what("acquire", election);
        let max = regent_core::MAX_TTL;
        if req.ttl < MIN_TTL || req.ttl > max {
            return Err(StoreError::new(
                ErrorKind::Config,
                format!(
                    "{}: ttl {:?} is outside the {MIN_TTL:?}..={max:?} the redis store honours",
                    what(),
                    req.ttl
                ),
            ));
        }
        let keys = self.keys(election);
        let ttl = ttl_ms(req.ttl);
        let metadata = req.metadata.to_json();
        let attempt = self.inner.claims.begin(election, &req.holder);
        let reclaim = attempt.probe().reclaim();
        let handed_out = reclaim
            .handed_out
            .map_or_else(String::new, |t| t.get().to_string());
        let alone = if reclaim.alone { "1" } else { "0" };
        let value = self
            .eval(
                &what,
                &self.inner.scripts.acquire,
                &[&keys.lease, &keys.counter, &keys.reserved],
                &[
                    req.holder.as_str(),
                    &ttl,
                    &metadata,
                    &keys.channel,
                    &self.inner.incarnation,
                    &handed_out,
                    alone,
                ],
            )
            .await?;
        let reply = Reply::parse(&what, value)?;
        match reply.tag.as_str() {
            "won" => {
                if let Some(replaced) = reply.field(1) {
                    tracing::debug!(
                        election = %election, holder = %req.holder, replaced,
                        "took over a term of this store's own that an earlier acquire won unanswered"
                    );
                }
                let token = reply.field(0).and_then(parse_token).ok_or_else(|| {
                    StoreError::new(
                        ErrorKind::Protocol,
                        format!("{}: the script won with token {:?}", what(), reply.field(0)),
                    )
                })?;
                let lease = Lease {
                    election: election.clone(),
                    holder: req.holder.clone(),
                    token,
                    ttl: Duration::from_millis(ttl.parse().unwrap_or(u64::MAX)),
                    handle: LeaseHandle::new(format!("redis:{}", keys.lease)),
                };
                self.wait_for_replicas(&lease).await?;
                // In the poll that hands the lease over: a caller that
                // gave up before it holds no record of it here either.
                attempt.handed_out(lease.token);
                Ok(Acquire::Won(lease))
            }
            "held" => {
                let l = leader(
                    &what,
                    &keys.lease,
                    reply.field(0),
                    reply.field(1),
                    reply.field(2),
                )?;
                Ok(Acquire::Held {
                    leader: Some(l),
                    queued: None,
                })
            }
            // Free, but kept for a hand-over's successor: nobody leads.
            "reserved" => Ok(Acquire::Held {
                leader: None,
                queued: None,
            }),
            "foreign" => Err(foreign(&what, &keys.lease, reply.field(0))),
            "counter" => Err(StoreError::corrupt(format!(
                "{}: the token counter {} holds {:?}, not a count regent wrote; regent issues \
                 no token until an operator deletes it (tokens then go on from the server's \
                 clock)",
                what(),
                keys.counter,
                reply.field(0).unwrap_or_default()
            ))),
            _ => Err(StoreError::new(
                ErrorKind::Protocol,
                format!("{}: the script answered {reply:?}", what()),
            )),
        }
    }

    async fn renew(&self, lease: &Lease) -> Result<Renewal, StoreError> {
        let keys = self.keys(&lease.election);
        let ttl = ttl_ms(lease.ttl);
        self.own(
            &self.inner.scripts.renew,
            "renew",
            lease,
            &[&keys.lease],
            &[&ttl],
        )
        .await
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        let keys = self.keys(&lease.election);
        self.own(
            &self.inner.scripts.release,
            "release",
            lease,
            &[&keys.lease],
            &[&keys.channel],
        )
        .await
        .map(|_| ())
    }

    async fn update_metadata(
        &self,
        lease: &Lease,
        metadata: &Metadata,
    ) -> Result<Renewal, StoreError> {
        let keys = self.keys(&lease.election);
        let json = metadata.to_json();
        self.own(
            &self.inner.scripts.update_metadata,
            "update the metadata of",
            lease,
            &[&keys.lease],
            &[&json, &keys.channel],
        )
        .await
    }

    async fn current_leader(
        &self,
        election: &ElectionName,
    ) -> Result<Option<LeaderInfo>, StoreError> {
        let what = || self.what("read the leader of", election);
        let keys = self.keys(election);
        let value = self
            .eval(&what, &self.inner.scripts.leader, &[&keys.lease], &[])
            .await?;
        let reply = Reply::parse(&what, value)?;
        match reply.tag.as_str() {
            "none" => Ok(None),
            "held" => leader(
                &what,
                &keys.lease,
                reply.field(0),
                reply.field(1),
                reply.field(2),
            )
            .map(Some),
            "foreign" => Err(foreign(&what, &keys.lease, reply.field(0))),
            _ => Err(StoreError::new(
                ErrorKind::Protocol,
                format!("{}: the script answered {reply:?}", what()),
            )),
        }
    }

    /// One script: the roster entry written, timed by the server's clock.
    async fn enroll(&self, req: &AcquireRequest) -> Result<(), StoreError> {
        let what = || self.what("enroll in", &req.election);
        let keys = self.keys(&req.election);
        let ttl = ttl_ms(req.ttl);
        let metadata = req.metadata.to_json();
        self.eval(
            &what,
            &self.inner.scripts.enroll,
            &[&keys.roster, &keys.until],
            &[req.holder.as_str(), &ttl, &metadata],
        )
        .await
        .map(|_| ())
    }

    async fn withdraw(&self, election: &ElectionName, holder: &HolderId) -> Result<(), StoreError> {
        let what = || self.what("withdraw from", election);
        let keys = self.keys(election);
        self.eval(
            &what,
            &self.inner.scripts.withdraw,
            &[&keys.roster, &keys.until],
            &[holder.as_str()],
        )
        .await
        .map(|_| ())
    }

    async fn candidates(
        &self,
        election: &ElectionName,
    ) -> Result<Option<Vec<Candidacy>>, StoreError> {
        let what = || self.what("list the candidates of", election);
        let keys = self.keys(election);
        let value = self
            .eval(
                &what,
                &self.inner.scripts.candidates,
                &[&keys.roster, &keys.until],
                &[],
            )
            .await?;
        let reply = Reply::parse(&what, value)?;
        if reply.tag != "roster" || reply.fields.len() % 2 != 0 {
            return Err(StoreError::new(
                ErrorKind::Protocol,
                format!("{}: the script answered {reply:?}", what()),
            ));
        }
        let mut list = Vec::with_capacity(reply.fields.len() / 2);
        for pair in reply.fields.chunks_exact(2) {
            let holder = pair[0].as_deref().unwrap_or_default();
            let holder = HolderId::new(holder).map_err(|e| {
                StoreError::corrupt(format!(
                    "{}: a roster entry's holder {holder:?} is not valid: {e}",
                    what()
                ))
            })?;
            let metadata =
                Metadata::from_json(pair[1].as_deref().unwrap_or("{}")).map_err(|why| {
                    StoreError::corrupt(format!("{}: roster entry of '{holder}': {why}", what()))
                })?;
            list.push(Candidacy::new(holder, metadata));
        }
        list.sort_by(|a, b| a.holder.cmp(&b.holder));
        Ok(Some(list))
    }

    async fn release_to(
        &self,
        lease: &Lease,
        successor: &HolderId,
        window: Duration,
    ) -> Result<HandOff, StoreError> {
        let keys = self.keys(&lease.election);
        let window = ttl_ms(window);
        let passed = self
            .own(
                &self.inner.scripts.release_to,
                "hand over",
                lease,
                &[&keys.lease, &keys.reserved],
                &[successor.as_str(), &window, &keys.channel],
            )
            .await?;
        Ok(match passed {
            Renewal::Renewed => HandOff::ToSuccessor,
            // Not ours any more: nothing to give, nothing given.
            Renewal::Lost => HandOff::Released,
        })
    }

    async fn watch(&self, election: &ElectionName) -> Result<LeaderStream, StoreError> {
        self.leader_stream(election, self.inner.poll_interval).await
    }
}

/// A key of another type where the lease should be: another program's.
fn foreign(what: &dyn Fn() -> String, key: &str, kind: Option<&str>) -> StoreError {
    StoreError::corrupt(format!(
        "{}: the key {key} holds a {} that regent did not write (another program's lock?); \
         regent never takes it over: delete it, or choose another election name or key prefix",
        what(),
        kind.unwrap_or("value")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_types_are_send_and_sync() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<RedisStore>();
        send_sync::<RedisStoreBuilder>();
    }

    #[test]
    fn ttls_are_rounded_up_to_whole_milliseconds() {
        assert_eq!(ttl_ms(Duration::from_micros(1_500_300)), "1501");
        assert_eq!(ttl_ms(Duration::from_millis(10)), "10");
        assert_eq!(ttl_ms(Duration::from_nanos(1)), "1");
    }
}
