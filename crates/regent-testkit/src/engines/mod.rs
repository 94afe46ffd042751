//! Real store engines on `127.0.0.1`, started for the end-to-end tests and
//! the store crates' integration tests.
//!
//! Every engine has one shape, [`Engine`]: its store URL, its PID, kill,
//! pause and resume, stop and restart on the same data, the tail of its log.
//! The one list of engines every end-to-end test runs over is
//! [`for_every_engine!`](crate::for_every_engine).
//!
//! Each engine runs on free ports in its own temporary directory and is
//! stopped by the PID the kit recorded when it is dropped (SIGTERM, or
//! SIGINT for Consul, then SIGKILL after [`STOP_TIMEOUT`]), never by name,
//! so tests can run in parallel and leave nothing behind. Starting waits,
//! with a bound ([`START_TIMEOUT`]), until the engine answers its own health
//! check, and starts again on new ports if one was taken meanwhile.
//!
//! The engines come from Debian packages installed by `scripts/install-engines`
//! (Consul from Debian 11's package: Debian 12 has none; Azurite from the
//! npm registry; ZooKeeper and Curator as jars run by Debian's Java;
//! PostgreSQL and PgBouncer, which refuse root, as the user `postgres`).
//! An engine that is not installed is an error naming that script
//! ([`EngineError::NotInstalled`]): a test that needs an engine fails without
//! it, it never passes by skipping.
//!
//! The API is blocking: starting, stopping and health checks take
//! milliseconds to a few seconds of real time. Call it from a plain `#[test]`
//! or before entering the async part of a `#[tokio::test]`; use
//! `tokio::task::spawn_blocking` where other tasks must keep running.
//!
//! | engine | type | binary (override) |
//! |---|---|---|
//! | SQLite | [`Sqlite`]: a file in a temporary directory, no process | none (compiled into regent) |
//! | etcd 3.4 | [`etcd::Etcd`], [`etcd::EtcdCluster`]; secured (TLS, authentication) by [`etcd::Etcd::builder`] | `etcd` (`REGENT_ETCD_BIN`), `etcdctl` (`REGENT_ETCDCTL_BIN`) |
//! | Consul 1.8 | [`consul::Consul`] (a dev agent; secured (TLS, ACLs) by [`consul::Consul::builder`]), [`consul::ConsulCluster`] (three servers and client agents), [`consul::SharedConsul`] (a key prefix on one dev agent per test process) | `consul` (`REGENT_CONSUL_BIN`) |
//! | Azurite 3.35 (Azure Blob Storage) | [`azurite::Azurite`] (the Blob service, data on disk), [`azurite::SharedAzurite`] (a container on one Azurite per test process); its clients find it by [`Engine::client_env`] | `azurite-blob` (`REGENT_AZURITE_BIN`) |
//! | PostgreSQL 15, PgBouncer 1.18 | [`postgres::Postgres`] (a server; its faults hit the postmaster and every child), [`postgres::PgBouncer`] (in front of one, transaction pooling), [`postgres::PostgresBehindPgBouncer`] (the two as one engine), [`postgres::PostgresPair`] (a primary with a streaming standby to promote); run as the user `postgres` when the tests run as root | `initdb`, `postgres`, `pg_ctl`, `pg_basebackup`, `psql` from `/usr/lib/postgresql/15/bin` (`REGENT_POSTGRES_BINDIR`), `pgbouncer` (`REGENT_PGBOUNCER_BIN`) |
//! | Redis 7.0, Redis Sentinel 7.0 | [`redis::Redis`] (a server; persistence, an ACL user and a TLS port by [`redis::Redis::builder`]), [`redis::RedisSentinels`] (a primary, a replica and three Sentinels; its faults hit the current primary, [`redis::RedisSentinels::fail_over`] promotes the replica); `Redis` is in [`for_every_engine!`](crate::for_every_engine), one server per test | `redis-server` (`REGENT_REDIS_SERVER_BIN`), `redis-cli` (`REGENT_REDIS_CLI_BIN`), `redis-sentinel` (`REGENT_REDIS_SENTINEL_BIN`) |
//! | ZooKeeper 3.8 | [`zookeeper::ZooKeeper`] (a standalone server, `tickTime` 100 ms; other settings by [`zookeeper::ZooKeeper::builder`]), [`zookeeper::ZooKeeperEnsemble`] (three servers), [`zookeeper::SharedZooKeeper`] (a chroot on one server per test process); Curator's client jars by [`zookeeper::curator_classpath`], a compiled `LeaderLatch` participant by [`zookeeper::LatchParticipant`] | `java` (`REGENT_JAVA_BIN`) with Debian's jars (`REGENT_ZOOKEEPER_CLASSPATH`; Curator's `REGENT_CURATOR_CLASSPATH`) |
//!
//! # Adding an engine
//!
//! 1. A module `engines/NAME.rs` with a type holding one `EngineProcess`
//!    (kit-internal: temporary directory with `data/` and `NAME.log`,
//!    spawn, bounded readiness wait, pause, stop and kill by PID, stop on
//!    drop). The engine writes only its command line (ports from
//!    `free_ports`, data dir, log level) and its health check, and starts
//!    through `retry_on_port_collision`. TLS, if the engine has it, takes
//!    its certificates from [`crate::pki::TlsFiles`].
//! 2. `impl Engine for NAME`, delegating to the `EngineProcess`; with
//!    the store's ttl floor, expiry slack and watch delay, and the
//!    variables a client needs where the store URL does not say where the
//!    engine is or how to sign for it ([`Engine::client_env`]).
//! 3. One line in [`for_every_engine!`](crate::for_every_engine): every
//!    end-to-end test then also runs as `NAME::TEST`.

pub mod azurite;
pub mod consul;
mod engine;
mod error;
pub mod etcd;
mod http;
pub mod postgres;
mod process;
pub mod redis;
mod shared;
pub mod sqlite;
mod timeouts;
pub mod zookeeper;

pub use azurite::{Azurite, SharedAzurite};
pub use consul::{
    Consul, ConsulAcl, ConsulBuilder, ConsulCluster, ConsulRole, ConsulTls, ConsulTlsFiles,
    SharedConsul,
};
pub use engine::{Engine, Signaled};
pub use error::EngineError;
pub use etcd::{Etcd, EtcdBuilder, EtcdCluster, EtcdTls, EtcdTlsFiles};
pub use http::Response as HttpResponse;
pub use postgres::{PgBouncer, Postgres, PostgresBehindPgBouncer, PostgresPair};
pub use redis::{Redis, RedisBuilder, RedisPersistence, RedisSentinels, RedisTls, RedisTlsFiles};
pub use sqlite::Sqlite;
pub use timeouts::{START_TIMEOUT, STOP_TIMEOUT};
pub use zookeeper::{
    LatchParticipant, SharedZooKeeper, ZooKeeper, ZooKeeperBuilder, ZooKeeperEnsemble,
    ZooKeeperMode, curator_classpath, zookeeper_classpath,
};

/// Defines one `#[test]` per engine for each test function named: the one
/// list of engines every end-to-end test runs over.
///
/// `for_every_engine!(FIXTURE, [TEST, …])` expands, for every engine
/// `ENGINE => TYPE` of the list, to a module `ENGINE` with one `#[test] fn
/// TEST()` per test named. That test starts a `TYPE` by [`Engine::start`]
/// (panicking with the error, which names `scripts/install-engines` when
/// the engine is missing), boxes it as a `Box<dyn Engine>`, passes it to
/// `FIXTURE` (a path to a function or constructor taking the box, resolved
/// at the invocation's module) and calls `super::TEST` with what `FIXTURE`
/// returned. So the tests run as `sqlite::TEST`, `etcd::TEST`, …
///
/// The list:
///
/// | module | engine |
/// |---|---|
/// | `sqlite` | [`Sqlite`] |
/// | `etcd` | [`Etcd`], one member |
/// | `consul` | [`SharedConsul`]: a key prefix of its own on the test process's one dev agent |
/// | `azblob` | [`SharedAzurite`]: a container of its own on the test process's one Azurite |
/// | `zk` | [`SharedZooKeeper`]: a chroot of its own on the test process's one ZooKeeper (100 ms ticks: sessions of 0.2 to 60 s) |
///
/// Every engine has a ttl floor ([`Engine::min_ttl`]: Consul's 10 s, Azure
/// Blob's 15 s) and an expiry slack ([`Engine::expiry_slack`]) that tests
/// running on all of them take their timing from, and the environment a
/// client needs besides the store URL ([`Engine::client_env`]: Azurite's
/// connection string), which a test passes to every process it points at
/// the engine. A test that kills, pauses or restarts its engine cannot run
/// on a shared one (see [below](#engines-of-the-tests-own)).
///
/// Adding a store to every end-to-end test is one line in each of the
/// macro's two lists.
///
/// ```
/// use regent_testkit::engines::Engine;
///
/// fn has_a_store_url(engine: Box<dyn Engine>) {
///     assert!(engine.store_url().starts_with(engine.kind()));
/// }
///
/// regent_testkit::for_every_engine!(std::convert::identity, [has_a_store_url]);
/// # fn main() {}
/// ```
///
/// # Engines of the test's own
///
/// A test that kills, pauses, stops or restarts its engine, or checks what
/// dropping it does, cannot run on a shared one. `for_every_engine!(own:
/// FIXTURE, [TEST, …])` gives every test an engine of its own: the same
/// list, with a dev agent of its own ([`Consul`]) for `consul`, an
/// Azurite of its own ([`Azurite`]) for `azblob` and a server of its own
/// ([`ZooKeeper`]) for `zk`. Azurite departs from the
/// [`Engine`] contract on restarts: it forgets every finite lease when it
/// restarts, and a kill loses the last seconds of writes (see
/// [Data across restarts](azurite#data-across-restarts)); a test that
/// restarts its engine under a leader must leave `azblob` out or expect
/// that.
#[macro_export]
macro_rules! for_every_engine {
    (own: $fixture:path, [$($test:ident),+ $(,)?] $(,)?) => {
        $crate::for_every_engine!(@engines $fixture; [$($test),+];
            // The list of engines, each test with its own.
            sqlite => $crate::engines::Sqlite,
            etcd => $crate::engines::Etcd,
            consul => $crate::engines::Consul,
            azblob => $crate::engines::Azurite,
            zk => $crate::engines::ZooKeeper,
            postgres => $crate::engines::Postgres,
            pgbouncer => $crate::engines::PostgresBehindPgBouncer,
            redis => $crate::engines::Redis,
        );
    };
    ($fixture:path, [$($test:ident),+ $(,)?] $(,)?) => {
        $crate::for_every_engine!(@engines $fixture; [$($test),+];
            // The list of engines: `module => type`. Keep it in step with
            // the `own:` list above.
            sqlite => $crate::engines::Sqlite,
            etcd => $crate::engines::Etcd,
            consul => $crate::engines::SharedConsul,
            azblob => $crate::engines::SharedAzurite,
            zk => $crate::engines::SharedZooKeeper,
            postgres => $crate::engines::Postgres,
            pgbouncer => $crate::engines::PostgresBehindPgBouncer,
            redis => $crate::engines::Redis,
        );
    };
    (@engines $fixture:path; $tests:tt; $($engine:ident => $ty:path),+ $(,)?) => {
        $(
            mod $engine {
                #[allow(unused_imports)]
                use super::*;

                $crate::for_every_engine!(@tests $fixture; $engine; $ty; $tests);
            }
        )+
    };
    (@tests $fixture:path; $engine:ident; $ty:path; [$($test:ident),+]) => {
        $(
            #[test]
            fn $test() {
                let engine = <$ty as $crate::engines::Engine>::start().unwrap_or_else(|e| {
                    panic!("cannot start {} for this test: {e}", stringify!($engine))
                });
                let engine: ::std::boxed::Box<dyn $crate::engines::Engine> =
                    ::std::boxed::Box::new(engine);
                super::$test($fixture(engine));
            }
        )+
    };
}
