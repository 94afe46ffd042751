//! Redis 7.0 on `127.0.0.1`: a server of its own ([`Redis`]), and a
//! primary with a replica and three Sentinels that fail over between them
//! ([`RedisSentinels`]).
//!
//! # A server
//!
//! [`Redis::start`] (or [`Redis::builder`] for other settings) writes a
//! `redis.conf` into a temporary directory of its own and runs
//! `redis-server DIR/redis.conf` in the foreground, as a child of the test,
//! on a free port. It is ready when it answers `PING` with `PONG` (not
//! while it loads its data: `-LOADING`). The store URL is
//! `redis://127.0.0.1:PORT` ([`Redis::store_url`]). The directory holds
//! `redis.conf`, the data directory `data/` and `redis.log`, the output of
//! every run (the last lines are quoted in startup errors). If the port was
//! taken between the kit finding it free and the server binding it, the kit
//! starts again on a new one. The configuration:
//!
//! | setting | value | why |
//! |---|---|---|
//! | `bind`, `port` | `127.0.0.1`, a free port | nothing on other interfaces |
//! | `dir` | `DIR/data` | |
//! | `logfile` | `""` | standard output, into `redis.log` |
//! | `save` | `""` | no snapshots, not even at a graceful stop |
//! | `appendonly`, `appendfsync` | `no`, or `yes` and `always` | [`RedisPersistence`]: with `None` a restart starts empty; with `AppendAlways` every acknowledged write survives even a kill |
//! | `notify-keyspace-events` | `KEA` | keyspace notifications, off by default |
//! | `repl-diskless-sync-delay` | `0` | a new replica syncs at once, not after 5 s |
//! | `requirepass`, `user` | a random password; `NAME on >PASSWORD ~* &* +@all` | only with [`RedisBuilder::user`]: every client must log in |
//! | `tls-port`, `tls-cert-file`, `tls-key-file`, `tls-ca-cert-file` | a second free port; `DIR/tls/server.pem`, `server-key.pem`, `ca.pem` | only with [`RedisBuilder::tls`]: see [TLS](#tls) |
//! | `tls-auth-clients` | `no` ([`RedisTls::Server`]) or `yes` ([`RedisTls::ClientCert`]) | whether TLS clients must present a certificate of the test CA |
//!
//! The file is the server's: [`Redis::restart`] starts it again on the same
//! file, port and data directory, so a Sentinel's `CONFIG REWRITE` is kept.
//!
//! Faults: [`Redis::kill`] (SIGKILL), [`Redis::pause`] (SIGSTOP: the
//! server keeps its port and its clients' connections and answers
//! nothing), [`Redis::resume`] (SIGCONT), [`Redis::stop`] (SIGTERM, then
//! SIGKILL after [`STOP_TIMEOUT`](super::STOP_TIMEOUT)). [`Redis::cli`]
//! runs a command through `redis-cli`, bounded in time ([`CLI_TIMEOUT`]).
//! Measured on two cores: a server answers about 0.01 s after launch.
//!
//! # TLS
//!
//! [`RedisBuilder::tls`] makes the kit's test PKI ([`crate::pki`]: a test
//! CA, a server certificate for `127.0.0.1` and `localhost`, a client
//! certificate, and an unrelated second CA with a client certificate of its
//! own for negative tests) in `DIR/tls` ([`Redis::tls_files`]), and has the
//! server listen with TLS on a second free port ([`Redis::tls_port`]) as
//! well as on the plain one. Clients under test take
//! [`Redis::tls_store_url`], `rediss://127.0.0.1:TLS_PORT`, and trust the
//! test CA; with [`RedisTls::ClientCert`] (`tls-auth-clients yes`, Redis's
//! default) they must also present the client certificate, with
//! [`RedisTls::Server`] (`tls-auth-clients no`) they need not. The plain
//! port is the kit's own: readiness and health checks ([`Redis::is_healthy`])
//! and [`Redis::cli`] use it, and [`Redis::store_url`] names it. Both ports
//! are picked again when either was taken meanwhile, and kept across
//! [`Redis::restart`].
//!
//! # A primary, a replica and three Sentinels
//!
//! [`RedisSentinels::start`] starts a primary and a replica of it
//! (`replicaof 127.0.0.1 PRIMARY_PORT`), both [`Redis`] servers with the
//! settings above, waits until the replica is in sync, then starts three
//! `redis-sentinel DIR/sentinel.conf`, each in a directory of its own
//! (Sentinel rewrites its configuration file), monitoring the primary as
//! [`MASTER_NAME`] with quorum [`QUORUM`], `down-after-milliseconds`
//! [`DOWN_AFTER`] and `failover-timeout` [`FAILOVER_TIMEOUT`]. It returns
//! once every Sentinel knows the replica and the two other Sentinels, about
//! 2 s after the last one started (they find each other through the
//! primary's pub/sub every 2 s). The store URL is
//! `redis+sentinel://127.0.0.1:S1,127.0.0.1:S2,127.0.0.1:S3/mymaster`.
//!
//! [`RedisSentinels::fail_over`] kills the primary and waits until every
//! Sentinel names the replica as master and the replica says it is one.
//! [`RedisSentinels::pause_replica`] makes the replica miss writes: it
//! stops the replica and cuts its replication link, so that what the
//! primary writes next is lost on a failover (a stopped replica alone would
//! not do: the primary's writes wait in its socket, and it reads them the
//! moment it goes on). As an [`Engine`](super::Engine) the group is its
//! current primary: the faults hit it, and the Sentinels fail over.
//!
//! # Programs
//!
//! `redis-server`, `redis-cli` and `redis-sentinel` from `PATH` (Debian's
//! `redis-server`, `redis-tools` and `redis-sentinel` put them in
//! `/usr/bin`; installed by `scripts/install-engines`), or the paths in
//! `REGENT_REDIS_SERVER_BIN` ([`SERVER_VAR`]), `REGENT_REDIS_CLI_BIN`
//! ([`CLI_VAR`]) and `REGENT_REDIS_SENTINEL_BIN` ([`SENTINEL_VAR`]). A
//! missing one is [`EngineError::NotInstalled`] (or
//! [`EngineError::NotInstalledAt`]) naming that script. Variables
//! `REDISCLI_*` of the test's environment (redis-cli reads its password
//! and settings from them) are passed to none of them.
//!
//! ```no_run
//! use std::time::Duration;
//!
//! use regent_testkit::engines::{Engine, Redis, RedisPersistence, RedisSentinels, RedisTls};
//!
//! let mut redis = Redis::builder()
//!     .persistence(RedisPersistence::AppendAlways)
//!     .user("app", "s3cret")
//!     .start()?;
//! assert!(redis.store_url().starts_with("redis://127.0.0.1:"));
//! redis.cli(&["SET", "greeting", "hello"])?;
//! redis.kill();
//! redis.restart()?;
//! assert_eq!(redis.cli(&["GET", "greeting"])?, "hello");
//!
//! let tls = Redis::builder().tls(RedisTls::ClientCert).start()?;
//! let url = tls.tls_store_url().expect("a TLS port");
//! assert!(url.starts_with("rediss://127.0.0.1:"));
//! let files = tls.tls_files().expect("a TLS server");
//! let (ca, cert, key) = (files.ca_cert(), files.client_cert(), files.client_key());
//! # let _ = (ca, cert, key);
//!
//! let mut group = RedisSentinels::start()?;
//! let replica = group.replica().addr();
//! assert_eq!(group.fail_over(Duration::from_secs(30))?, replica);
//! assert_eq!(group.master_addr()?, replica);
//! // Dropping each stops its processes by PID and removes its directories.
//! # Ok::<(), regent_testkit::engines::EngineError>(())
//! ```
//!
//! [`EngineError::NotInstalled`]: super::EngineError::NotInstalled
//! [`EngineError::NotInstalledAt`]: super::EngineError::NotInstalledAt

use std::time::Duration;

mod cli;
mod resp;
mod sentinels;
mod server;

pub use cli::CLI_TIMEOUT;
pub use sentinels::RedisSentinels;
pub use server::{Redis, RedisBuilder, RedisPersistence, RedisTls, RedisTlsFiles};

/// The variable naming the `redis-server` to run instead of the one on
/// `PATH`.
pub const SERVER_VAR: &str = "REGENT_REDIS_SERVER_BIN";

/// The variable naming the `redis-cli` to run instead of the one on
/// `PATH`.
pub const CLI_VAR: &str = "REGENT_REDIS_CLI_BIN";

/// The variable naming the `redis-sentinel` to run instead of the one on
/// `PATH`.
pub const SENTINEL_VAR: &str = "REGENT_REDIS_SENTINEL_BIN";

/// The name the Sentinels of a [`RedisSentinels`] monitor its primary
/// under.
pub const MASTER_NAME: &str = "mymaster";

/// How many Sentinels must find the primary down before one fails over.
pub const QUORUM: usize = 2;

/// How long a server may not answer before a Sentinel finds it down
/// (`down-after-milliseconds`).
pub const DOWN_AFTER: Duration = Duration::from_millis(1000);

/// Sentinel's `failover-timeout`: a failover that did not finish in this
/// time is given up, and the next one starts twice this after the first.
pub const FAILOVER_TIMEOUT: Duration = Duration::from_millis(5000);

/// The variables of the test's environment no Redis program gets.
const ENV_PREFIX: &str = "REDISCLI_";
