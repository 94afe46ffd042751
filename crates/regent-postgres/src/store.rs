//! [`PostgresStore`]: the connection, and the store contract over it.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use regent_core::store::Claims;
use regent_core::{
    Acquire, AcquireRequest, Candidacy, ElectionName, ExpirySlack, FencingToken, HandOff, HolderId,
    LeaderInfo, LeaderStream, Lease, LeaseHandle, LeaseStore, Metadata, Renewal, SafetyClass,
    StoreError, StoreInfo, StoreStyle, WatchMode,
};
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, Row};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::{classify, migration};
use crate::record::leader;
use crate::sql::Tables;
use crate::tls::Tls;
use crate::watch::{ListenAt, Listener, Source, watch};

/// The shortest ttl the store grants: the server's clock decides expiry to
/// the microsecond, but a lease shorter than a round trip to a database is
/// no lease.
pub const MIN_TTL: Duration = Duration::from_millis(100);

/// How often a watch reads the leader, by default.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(500);

/// The schema the tables live in, by default.
pub const DEFAULT_SCHEMA: &str = "public";

/// Leases in a PostgreSQL database: one row per election in
/// `regent_leases`, the fencing counters in `regent_tokens`. Cheap to
/// clone: clones share one connection, made again when it breaks.
///
/// See the [crate docs](crate) for the safety model and what each pooling
/// mode costs.
#[derive(Clone)]
pub struct PostgresStore {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("server", &self.inner.server)
            .field("schema", &self.inner.schema)
            .finish_non_exhaustive()
    }
}

struct Inner {
    config: tokio_postgres::Config,
    tls: MakeRustlsConnect,
    /// Where, for messages: `HOST:PORT/DB`, no password.
    server: String,
    schema: String,
    poll_interval: Duration,
    sql: Statements,
    tables: Tables,
    /// The tables were found or made, on the first connection.
    tables_ready: std::sync::atomic::AtomicBool,
    /// Random, one per store: written into every term it wins (column
    /// `incarnation`, with the term's token), so that its acquire may take
    /// over a term of its own whose answer never came, and no other
    /// process's (see `Tables::acquire`).
    incarnation: String,
    /// Per election and holder, the term last handed to the caller (never
    /// taken over: its holder may lead with it) and the acquires in flight
    /// (while another is, none takes anything over).
    claims: Arc<Claims>,
    client: Mutex<Option<Arc<Client>>>,
    /// The connection to `LISTEN` on (`None`: watches poll only).
    listen: Option<ListenAt>,
    listener: Arc<Listener>,
    /// The connection attempt in flight, or the last one: its outcome
    /// once it has one.
    connecting: regent_core::store::SharedAttempt<Arc<Client>>,
}

/// The statements, made once.
struct Statements {
    acquire: String,
    renew: String,
    update_metadata: String,
    release: String,
    leader: String,
    enroll: String,
    withdraw: String,
    candidates: String,
    release_to: String,
}

/// How to reach the database, and where the tables are.
#[derive(Debug, Clone)]
pub struct PostgresStoreBuilder {
    config: tokio_postgres::Config,
    schema: String,
    poll_interval: Duration,
    lazy: bool,
    listen: Listen,
    tls: Tls,
    listen_tls: Option<Tls>,
}

/// Where watches `LISTEN` for the store's notifications.
#[derive(Debug, Clone)]
enum Listen {
    /// On a connection of their own to the store's server.
    Same,
    /// On a connection to this server (the database itself, when the
    /// store connects through a pooler).
    At(Box<tokio_postgres::Config>),
    /// Nowhere: watches poll only.
    Off,
}

impl PostgresStoreBuilder {
    /// The schema of the tables (default `public`): a plain identifier
    /// (letters, digits, `_`; not starting with a digit; at most 63 bytes).
    #[must_use]
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// How often a watch reads the leader (default 500 ms).
    #[must_use]
    pub fn poll_interval(mut self, every: Duration) -> Self {
        self.poll_interval = every;
        self
    }

    /// Where watches listen for the notifications that wake them at once
    /// on a release or a new leader: `Some(config)` names a connection
    /// straight to the database (not through a pooler in transaction or
    /// statement mode, which cannot keep a `LISTEN`), `None` turns it
    /// off (watches poll only). By default they listen on a connection of
    /// their own to the store's server.
    #[must_use]
    pub fn listen_on(mut self, direct: Option<tokio_postgres::Config>) -> Self {
        self.listen = match direct {
            Some(c) => Listen::At(Box::new(c)),
            None => Listen::Off,
        };
        self
    }

    /// How connections check the server when they speak TLS, and the
    /// client certificate they show (default [`Tls::unverified`], as
    /// libpq's). Whether they speak it is the `ssl_mode` of their
    /// [`Config`](tokio_postgres::Config)s: `Prefer` (the default: TLS if
    /// the server offers it), `Require`, or `Disable`.
    #[must_use]
    pub fn tls(mut self, tls: Tls) -> Self {
        self.tls = tls;
        self
    }

    /// How the connection of [`listen_on`](Self::listen_on) checks its
    /// server, if not as [`tls`](Self::tls) says.
    #[must_use]
    pub fn listen_tls(mut self, tls: Tls) -> Self {
        self.listen_tls = Some(tls);
        self
    }

    /// Connects at the first request instead of in
    /// [`build`](Self::build) (default: in `build`), for a process that
    /// may start before its database; the first request then fails as
    /// `build` would have.
    #[must_use]
    pub fn lazy(mut self, lazy: bool) -> Self {
        self.lazy = lazy;
        self
    }

    /// Connects, and creates the tables if they are missing and the role
    /// may create them.
    ///
    /// # Errors
    ///
    /// `Config` for a bad schema name or a missing database, `Auth` for a
    /// refused role or a missing privilege (the message names the
    /// privileges), `Unavailable` when the server cannot be reached.
    pub async fn build(self) -> Result<PostgresStore, StoreError> {
        let schema = self.schema;
        if !is_identifier(&schema) {
            return Err(StoreError::new(
                regent_core::ErrorKind::Config,
                format!(
                    "postgres store: schema {schema:?} is not a plain identifier (letters, digits and _, not starting with a digit, at most 63 bytes)"
                ),
            ));
        }
        let tables = Tables::in_schema(&schema);
        let server = describe(&self.config);
        let tls = self.tls.connector()?;
        let listen_tls = match &self.listen_tls {
            Some(t) => t.connector()?,
            None => tls.clone(),
        };
        let store = PostgresStore {
            inner: Arc::new(Inner {
                sql: Statements {
                    acquire: tables.acquire(),
                    renew: tables.renew(),
                    update_metadata: tables.update_metadata(),
                    release: tables.release(),
                    leader: tables.leader(),
                    enroll: tables.enroll(),
                    withdraw: tables.withdraw(),
                    candidates: tables.candidates(),
                    release_to: tables.release_to(),
                },
                tables: tables.clone(),
                listen: match self.listen {
                    Listen::Same => Some((self.config.clone(), tls.clone())),
                    Listen::At(c) => Some((*c, listen_tls)),
                    Listen::Off => None,
                },
                tls,
                listener: Arc::new(Listener::new()),
                tables_ready: std::sync::atomic::AtomicBool::new(false),
                incarnation: regent_core::store::incarnation(),
                claims: Arc::default(),
                config: self.config,
                server,
                schema,
                poll_interval: self.poll_interval,
                client: Mutex::new(None),
                connecting: regent_core::store::SharedAttempt::new(),
            }),
        };
        if !self.lazy {
            store.client().await?;
        }
        Ok(store)
    }
}

pub(crate) fn is_identifier(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `HOST:PORT/DB` of a configuration, for messages: no password.
fn describe(config: &tokio_postgres::Config) -> String {
    let host = config
        .get_hosts()
        .iter()
        .map(|h| match h {
            tokio_postgres::config::Host::Tcp(h) => h.clone(),
            tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
        })
        .next()
        .unwrap_or_else(|| "localhost".to_owned());
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let db = config
        .get_dbname()
        .or(config.get_user())
        .unwrap_or("postgres");
    format!("{host}:{port}/{db}")
}

impl PostgresStore {
    /// Settings for a store on the database `config` names.
    pub fn builder(config: tokio_postgres::Config) -> PostgresStoreBuilder {
        PostgresStoreBuilder {
            config,
            schema: DEFAULT_SCHEMA.to_owned(),
            poll_interval: DEFAULT_POLL_INTERVAL,
            lazy: false,
            listen: Listen::Same,
            tls: Tls::unverified(),
            listen_tls: None,
        }
    }

    /// A store on the database `url` names (`postgres://USER@HOST:PORT/DB`,
    /// or libpq's `key=value` form), with the defaults.
    ///
    /// # Errors
    ///
    /// `Config` for a URL that does not parse; then as
    /// [`PostgresStoreBuilder::build`].
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let config: tokio_postgres::Config = url.parse().map_err(|e| {
            StoreError::new(
                regent_core::ErrorKind::Config,
                "postgres store: the connection URL does not parse",
            )
            .with_source(e)
        })?;
        Self::builder(config).build().await
    }

    /// The schema the tables live in.
    pub fn schema(&self) -> &str {
        &self.inner.schema
    }

    fn what(&self, op: &str, election: &ElectionName) -> String {
        format!(
            "postgres store {}: {op} election '{election}'",
            self.inner.server
        )
    }

    /// The connection, made again if it broke.
    ///
    /// The attempt runs in a task of its own, which every caller that
    /// needs it waits for: no caller's future holds it. (It did: a watch
    /// stream whose consumer left it unpolled mid-connect — a candidate
    /// parks its watch while it acquires — kept the store's lock for good,
    /// and every later call of the store waited behind it.)
    async fn client(&self) -> Result<Arc<Client>, StoreError> {
        if let Some(c) = self.cached() {
            return Ok(c);
        }
        let store = self.clone();
        self.inner
            .connecting
            .join(
                || self.cached(),
                self.attempt_bound(),
                &format!("postgres store {}: connect", self.inner.server),
                || async move { store.make_connection().await },
            )
            .await
    }

    /// How long one connection attempt may take, the tables included.
    fn attempt_bound(&self) -> Duration {
        self.inner
            .config
            .get_connect_timeout()
            .copied()
            .unwrap_or(Duration::from_secs(10))
            + Duration::from_secs(10)
    }

    /// Makes the connection, and the tables on the first.
    async fn make_connection(&self) -> Result<Arc<Client>, StoreError> {
        let (client, mut messages) = crate::tls::connect(&self.inner.config, &self.inner.tls)
            .await
            .map_err(|e| classify(format!("postgres store {}: connect", self.inner.server), e))?;
        let server = self.inner.server.clone();
        tokio::spawn(async move {
            use futures_util::StreamExt as _;
            while let Some(message) = messages.next().await {
                if let Err(e) = message {
                    tracing::debug!(%server, error = %e, "postgres connection ended");
                    break;
                }
            }
        });
        let client = Arc::new(client);
        if !self
            .inner
            .tables_ready
            .load(std::sync::atomic::Ordering::Acquire)
        {
            self.create_tables(&client).await?;
            self.inner
                .tables_ready
                .store(true, std::sync::atomic::Ordering::Release);
        }
        *self
            .inner
            .client
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(client.clone());
        Ok(client)
    }

    fn cached(&self) -> Option<Arc<Client>> {
        self.inner
            .client
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .filter(|c| !c.is_closed())
            .cloned()
    }

    /// Runs one statement with typed parameters: one round trip, the
    /// unnamed statement, nothing left on the server connection.
    async fn query(
        &self,
        what: impl Fn() -> String,
        sql: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
    ) -> Result<Vec<Row>, StoreError> {
        let client = self.client().await?;
        match client.query_typed(sql, params).await {
            Ok(rows) => Ok(rows),
            Err(e) => {
                if connection_ended(&e) {
                    self.forget(&client);
                }
                Err(classify(what(), e))
            }
        }
    }

    /// Drops `client` from the cache, if it is still the one there: the
    /// next call connects again rather than finding out, a call later,
    /// that the connection is gone (the client says it is closed only
    /// once its connection task has read the end).
    fn forget(&self, client: &Arc<Client>) {
        let mut cached = self
            .inner
            .client
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if cached.as_ref().is_some_and(|c| Arc::ptr_eq(c, client)) {
            *cached = None;
        }
    }

    async fn create_tables(&self, client: &Client) -> Result<(), StoreError> {
        use tokio_postgres::error::SqlState;
        let tables = &self.inner.tables;
        let what = || format!("postgres store {}: create the tables", self.inner.server);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let e = match client.batch_execute(&tables.create()).await {
                Ok(()) => break,
                Err(e) => e,
            };
            // The role may not create them, and an administrator may have;
            // or another process is creating them this very moment:
            // `CREATE TABLE IF NOT EXISTS` races on the catalog ("type
            // already exists", a unique violation on pg_type) until the
            // other commits.
            if self
                .tables_exist(client)
                .await
                .map_err(|e| classify(what(), e))?
            {
                break;
            }
            let racing = matches!(
                e.code(),
                Some(c) if *c == SqlState::UNIQUE_VIOLATION
                    || *c == SqlState::DUPLICATE_OBJECT
                    || *c == SqlState::DUPLICATE_TABLE
            );
            if !racing || attempt >= 5 {
                return Err(classify(what(), e));
            }
            tokio::time::sleep(Duration::from_millis(20 * attempt)).await;
        }
        self.add_incarnation(client).await
    }

    /// Adds column `incarnation` to a `regent_leases` an earlier build
    /// made. Read first: the `ALTER TABLE` needs the table's owner and its
    /// lock even when the column is there, and every start but one finds
    /// it there.
    async fn add_incarnation(&self, client: &Client) -> Result<(), StoreError> {
        use tokio_postgres::error::SqlState;
        let what = || {
            format!(
                "postgres store {}: add column incarnation to {} (made by an earlier build)",
                self.inner.server, self.inner.tables.leases
            )
        };
        let mut attempt = 0;
        loop {
            let there = self.has_incarnation(client).await;
            if there.map_err(|e| classify(what(), e))? {
                return Ok(());
            }
            attempt += 1;
            let e = match client
                .batch_execute(&self.inner.tables.add_incarnation())
                .await
            {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            // A lock another transaction held: try again, briefly. Any
            // other failure may be another process's having added it.
            if e.code() == Some(&SqlState::LOCK_NOT_AVAILABLE) && attempt < 5 {
                tokio::time::sleep(Duration::from_millis(50 * attempt)).await;
                continue;
            }
            if self.has_incarnation(client).await.unwrap_or(false) {
                return Ok(());
            }
            return Err(migration(what(), e));
        }
    }

    /// Whether `regent_leases` has column `incarnation`.
    async fn has_incarnation(&self, client: &Client) -> Result<bool, tokio_postgres::Error> {
        let rows = client
            .query_typed(
                "SELECT EXISTS (
                     SELECT 1 FROM pg_catalog.pg_attribute
                     WHERE attrelid = to_regclass($1)::oid AND attname = 'incarnation'
                       AND NOT attisdropped
                 )",
                &[(&self.inner.tables.leases, Type::TEXT)],
            )
            .await?;
        Ok(rows
            .first()
            .is_some_and(|r| r.try_get::<_, bool>(0).unwrap_or(false)))
    }

    /// Whether the four tables are there (made by someone else, maybe).
    async fn tables_exist(&self, client: &Client) -> Result<bool, tokio_postgres::Error> {
        let tables = &self.inner.tables;
        let rows = client
            .query_typed(
                "SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL
                    AND to_regclass($3) IS NOT NULL AND to_regclass($4) IS NOT NULL",
                &[
                    (&tables.leases, Type::TEXT),
                    (&tables.tokens, Type::TEXT),
                    (&tables.roster, Type::TEXT),
                    (&tables.reserved, Type::TEXT),
                ],
            )
            .await?;
        Ok(rows
            .first()
            .is_some_and(|r| r.try_get::<_, bool>(0).unwrap_or(false)))
    }
}

/// Column `name` of `row`: a column of another type (a table someone
/// altered) is `Corrupt`, never a panic.
fn column<'a, T: tokio_postgres::types::FromSql<'a>>(
    row: &'a Row,
    name: &str,
    what: &dyn Fn() -> String,
) -> Result<T, StoreError> {
    row.try_get(name).map_err(|e| {
        StoreError::corrupt(format!(
            "{}: column {name} is not what regent wrote",
            what()
        ))
        .with_source(e)
    })
}

/// Whether `e` ended the connection it came on: it is closed, or the
/// server said so (a FATAL or PANIC message: the backend was terminated,
/// the server is shutting down), or it is not the server's answer at all
/// (I/O). A statement's own error (severity ERROR) leaves the connection
/// as it was.
fn connection_ended(e: &tokio_postgres::Error) -> bool {
    use tokio_postgres::error::Severity;
    if e.is_closed() {
        return true;
    }
    match e.as_db_error() {
        Some(db) => matches!(
            db.parsed_severity(),
            Some(Severity::Fatal | Severity::Panic)
        ),
        None => true,
    }
}

/// A ttl in whole milliseconds, rounded up: never less than asked.
fn ttl_ms(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_micros().div_ceil(1000)).unwrap_or(i64::MAX)
}

impl LeaseStore for PostgresStore {
    fn info(&self) -> StoreInfo {
        StoreInfo::new(
            "postgres",
            StoreStyle::Race,
            WatchMode::Poll(self.inner.poll_interval),
            SafetyClass::SingleNode,
        )
        .with_ttl_range(MIN_TTL, regent_core::MAX_TTL)
        // The server frees a lease at its expiry by its own clock.
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
                regent_core::ErrorKind::Config,
                format!(
                    "{}: ttl {:?} is outside the {MIN_TTL:?}..={max:?} the postgres store honours",
                    what(),
                    req.ttl
                ),
            ));
        }
        let ttl = ttl_ms(req.ttl);
        let metadata = req.metadata.to_json();
        let attempt = self.inner.claims.begin(election, &req.holder);
        let reclaim = attempt.probe().reclaim();
        let handed_out = reclaim.handed_out.and_then(|t| i64::try_from(t.get()).ok());
        let rows = self
            .query(
                what,
                &self.inner.sql.acquire,
                &[
                    (&election.as_str(), Type::TEXT),
                    (&req.holder.as_str(), Type::TEXT),
                    (&ttl, Type::INT8),
                    (&metadata.as_str(), Type::TEXT),
                    (&self.inner.incarnation.as_str(), Type::TEXT),
                    (&handed_out, Type::INT8),
                    (&reclaim.alone, Type::BOOL),
                ],
            )
            .await?;
        let row = rows.first().ok_or_else(|| {
            StoreError::new(
                regent_core::ErrorKind::Protocol,
                format!("{}: no row came back", what()),
            )
        })?;
        if let Some(token) = column::<Option<i64>>(row, "won", &what)? {
            let token = u64::try_from(token).map_err(|_| {
                StoreError::corrupt(format!("{}: the counter gave token {token}", what()))
            })?;
            if let Some(replaced) = column::<Option<i64>>(row, "replaced", &what)? {
                tracing::debug!(
                    election = %election, holder = %req.holder, token, replaced,
                    "took over a term of this store's own that an earlier acquire won unanswered"
                );
            }
            let token = FencingToken::new(token);
            // In the poll that hands the lease over: a caller that gave up
            // before it holds no record of it here either.
            attempt.handed_out(token);
            return Ok(Acquire::Won(Lease {
                election: election.clone(),
                holder: req.holder.clone(),
                token,
                ttl: Duration::from_millis(u64::try_from(ttl).unwrap_or(u64::MAX)),
                handle: LeaseHandle::new(format!("postgres:{}", self.inner.server)),
            }));
        }
        let standing = match (
            column::<Option<String>>(row, "holder", &what)?,
            column::<Option<i64>>(row, "token", &what)?,
            column::<Option<String>>(row, "metadata", &what)?,
        ) {
            // Someone's live record stands; garbage stands too (never a
            // silent takeover), naming no leader.
            (Some(h), Some(t), Some(m)) => leader(&what, &h, t, &m).ok(),
            _ => None,
        };
        Ok(Acquire::Held {
            leader: standing,
            queued: None,
        })
    }

    async fn renew(&self, lease: &Lease) -> Result<Renewal, StoreError> {
        let ttl = ttl_ms(lease.ttl);
        self.own(&self.inner.sql.renew, "renew", lease, Extra::TtlMs(ttl))
            .await
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        self.own(&self.inner.sql.release, "release", lease, Extra::None)
            .await
            .map(|_| ())
    }

    async fn update_metadata(
        &self,
        lease: &Lease,
        metadata: &Metadata,
    ) -> Result<Renewal, StoreError> {
        let json = metadata.to_json();
        self.own(
            &self.inner.sql.update_metadata,
            "update the metadata of",
            lease,
            Extra::Metadata(&json),
        )
        .await
    }

    async fn current_leader(
        &self,
        election: &ElectionName,
    ) -> Result<Option<LeaderInfo>, StoreError> {
        let what = || self.what("read the leader of", election);
        let rows = self
            .query(
                what,
                &self.inner.sql.leader,
                &[(&election.as_str(), Type::TEXT)],
            )
            .await?;
        match rows.first() {
            None => Ok(None),
            Some(r) => leader(
                &what,
                &column::<String>(r, "holder", &what)?,
                column::<i64>(r, "token", &what)?,
                &column::<String>(r, "metadata", &what)?,
            )
            .map(Some),
        }
    }

    /// One statement: the roster row upserted, timed by the server's
    /// clock.
    async fn enroll(&self, req: &AcquireRequest) -> Result<(), StoreError> {
        let what = || self.what("enroll in", &req.election);
        let ttl = ttl_ms(req.ttl);
        let metadata = req.metadata.to_json();
        self.query(
            what,
            &self.inner.sql.enroll,
            &[
                (&req.election.as_str(), Type::TEXT),
                (&req.holder.as_str(), Type::TEXT),
                (&ttl, Type::INT8),
                (&metadata.as_str(), Type::TEXT),
            ],
        )
        .await
        .map(|_| ())
    }

    async fn withdraw(&self, election: &ElectionName, holder: &HolderId) -> Result<(), StoreError> {
        let what = || self.what("withdraw from", election);
        self.query(
            what,
            &self.inner.sql.withdraw,
            &[
                (&election.as_str(), Type::TEXT),
                (&holder.as_str(), Type::TEXT),
            ],
        )
        .await
        .map(|_| ())
    }

    async fn candidates(
        &self,
        election: &ElectionName,
    ) -> Result<Option<Vec<Candidacy>>, StoreError> {
        let what = || self.what("list the candidates of", election);
        let rows = self
            .query(
                what,
                &self.inner.sql.candidates,
                &[(&election.as_str(), Type::TEXT)],
            )
            .await?;
        let mut list = Vec::with_capacity(rows.len());
        for r in &rows {
            let holder = column::<String>(r, "holder", &what)?;
            let metadata = column::<String>(r, "metadata", &what)?;
            let holder = HolderId::new(&holder).map_err(|e| {
                StoreError::corrupt(format!(
                    "{}: a roster row's holder is not valid: {e}",
                    what()
                ))
            })?;
            let metadata = Metadata::from_json(&metadata).map_err(|why| {
                StoreError::corrupt(format!("{}: roster row of '{holder}': {why}", what()))
            })?;
            list.push(Candidacy::new(holder, metadata));
        }
        Ok(Some(list))
    }

    async fn release_to(
        &self,
        lease: &Lease,
        successor: &HolderId,
        window: Duration,
    ) -> Result<HandOff, StoreError> {
        let Ok(token) = i64::try_from(lease.token.get()) else {
            return Ok(HandOff::Released);
        };
        let what = || self.what("release", &lease.election);
        let window = ttl_ms(window);
        let rows = self
            .query(
                what,
                &self.inner.sql.release_to,
                &[
                    (&lease.election.as_str(), Type::TEXT),
                    (&lease.holder.as_str(), Type::TEXT),
                    (&token, Type::INT8),
                    (&successor.as_str(), Type::TEXT),
                    (&window, Type::INT8),
                ],
            )
            .await?;
        Ok(if rows.is_empty() {
            HandOff::Released
        } else {
            HandOff::ToSuccessor
        })
    }

    async fn watch(&self, election: &ElectionName) -> Result<LeaderStream, StoreError> {
        let source = Source {
            store: self,
            listener: &self.inner.listener,
            listen: self.inner.listen.clone(),
            server: &self.inner.server,
            schema: &self.inner.schema,
            interval: self.inner.poll_interval,
        };
        watch(source, election).await
    }
}

impl PostgresStore {
    /// A statement on our own record (`$1` election, `$2` holder, `$3`
    /// token, `$4` metadata if given): `Renewed` if it touched a row.
    async fn own(
        &self,
        sql: &str,
        op: &str,
        lease: &Lease,
        extra: Extra<'_>,
    ) -> Result<Renewal, StoreError> {
        let Ok(token) = i64::try_from(lease.token.get()) else {
            // No row can hold this token.
            return Ok(Renewal::Lost);
        };
        let what = || self.what(op, &lease.election);
        let (election, holder) = (lease.election.as_str(), lease.holder.as_str());
        let mut params: Vec<(&(dyn ToSql + Sync), Type)> = vec![
            (&election, Type::TEXT),
            (&holder, Type::TEXT),
            (&token, Type::INT8),
        ];
        match &extra {
            Extra::None => {}
            Extra::Metadata(m) => params.push((m, Type::TEXT)),
            Extra::TtlMs(ms) => params.push((ms, Type::INT8)),
        }
        let rows = self.query(what, sql, &params).await?;
        Ok(if rows.is_empty() {
            Renewal::Lost
        } else {
            Renewal::Renewed
        })
    }
}

/// The fourth parameter of a statement on our own record.
enum Extra<'a> {
    None,
    Metadata(&'a str),
    TtlMs(i64),
}
