//! regent's Redis store: elections on the Redis a team already runs for
//! its locks, with the fencing token those locks never had. A race store:
//! one hash per election, won by the first candidate to find it free, and
//! kept by renewing it.
//!
//! # Safety model
//!
//! * **The server's clock decides.** Every acquire, renewal, release,
//!   hand-over and metadata update is one Lua script, run atomically by the
//!   server (`EVALSHA`, `EVAL` when the server has not cached it yet); the
//!   lease is a key the server expires (`PEXPIRE`), and the scripts act
//!   only on the caller's own term: same holder *and* same token. The
//!   holder times its lease from the instant it sent the request, as on
//!   every store. Redis expires keys by its wall clock, not a monotonic
//!   one: a server clock stepped forward ends leases early. Run the server
//!   with a clock that slews (NTP, chrony), never one that jumps.
//! * **Fencing tokens only grow**: a won lease's token is the larger of the
//!   election's counter (`regent:{E}:token`) plus one and the server's
//!   clock in microseconds since the epoch (`TIME`), both read in the
//!   acquiring script. The counter keeps them growing across releases,
//!   expiries, a deleted lease and a clock set back; the clock keeps them
//!   growing where the counter cannot:
//!   - a `FLUSHALL`, a deleted counter, or a restart without persistence
//!     (the counter is gone; the clock has moved past every token issued
//!     before, each of which was its server's clock at the time, or a
//!     count above one — and a count outgrows the clock only when more than
//!     one term starts within a microsecond);
//!   - a **Sentinel failover to a replica that missed the last writes**:
//!     its counter is older, but its clock has moved past every token those
//!     lost writes issued, since a failover takes seconds (Sentinel's
//!     `down-after-milliseconds`, then an election) and the clocks of two
//!     hosts kept by NTP disagree by milliseconds. A plain `INCR` would
//!     issue a lost token again there. This is the PostgreSQL store's
//!     answer to a promoted standby, and the Azure Blob store's to its
//!     service's clock; it needs the servers' clocks within a failover's
//!     time of each other, which the docs of every Sentinel setup already
//!     ask.
//!
//!   Tokens are about 1.7 × 10¹⁵ today: they fit in a `u64`, in a
//!   PostgreSQL `bigint`, and in a Lua number exactly (below 2⁵³, which
//!   the clock reaches in the year 2255).
//! * **Garbage is never taken over.** A key of another type where the
//!   lease should be (another program's lock string, a list), a hash that
//!   is not regent's, or a counter that is not a number is a `Corrupt`
//!   error naming the key; renewing or releasing through it reports the
//!   lease lost and leaves the key as it is. Nothing the network sends
//!   can make the store panic.
//! * **A term won unanswered is taken back at once.** An acquire whose
//!   answer never came (a call timeout while the server was paused or
//!   slow; the server runs the queued script when it resumes) can win a
//!   term its caller never hears of. Each store draws a random
//!   incarnation and writes it into every term it wins (`by`); its next
//!   acquire for the same holder takes such a term over, with a new
//!   token, unless it is the term this store last handed to its caller.
//!   Without that the caller followed itself until the term ran out: a
//!   ttl with nobody leading after every server pause. A term of the same
//!   holder id written by another process (perhaps an older incarnation
//!   of the service, still leading) is never taken.
//!
//! # Safety class, in plain words
//!
//! * **One Redis** ([`SafetyClass::SingleNode`](regent_core::SafetyClass)):
//!   a lease is as durable as the server's persistence. With
//!   `appendonly yes` and `appendfsync always` a restart keeps every term;
//!   with `everysec` a crash loses up to a second of them, and with no
//!   persistence a restart loses them all. A lost term means a new
//!   candidate can win while the old holder still believes it leads,
//!   until its own deadline passes: tokens stay correct (they come from
//!   the clock then), so a resource that checks them turns the old holder
//!   away.
//! * **With replicas and Sentinels**: replication is asynchronous. A
//!   failover can promote a replica that missed the last writes: a term
//!   the old master granted may be lost, and a second holder can win
//!   while the first still believes it leads. Then only the fencing token
//!   protects the resource — and it does, since the second holder's token
//!   is greater. [`RedisStoreBuilder::wait_replicas`] (`--redis-wait-replicas N`)
//!   narrows that window: a won acquire waits for `N` replicas to
//!   acknowledge the new term (`WAIT N timeout`) and is given back when
//!   fewer do, so a term is only used once it lives on `N + 1` servers.
//!   What it does *not* buy: `WAIT` is not consensus — Sentinel may still
//!   promote a replica that did not acknowledge, renewals are not waited
//!   for, and a term can still be lost. It makes losing one rarer, never
//!   impossible; the token stays the guarantee.
//! * A master that a partition cuts off from its Sentinels keeps accepting
//!   writes until it learns of the failover (`min-replicas-to-write`
//!   narrows this too): two holders then each hold a lease on a different
//!   master, and again the token tells their writes apart.
//!
//! # Why not Redlock
//!
//! Redis's documentation describes Redlock: one lock taken on a majority
//! of independent masters, each key with an expiry, and nothing else.
//! regent does not implement it. Martin Kleppmann's analysis, "How to do
//! distributed locking" (2016,
//! <https://martin.kleppmann.com/2016/02/08/how-to-do-distributed-locking.html>),
//! shows why: a lock with an expiry cannot, by itself, keep a paused
//! client (GC, SIGSTOP, a slow network) from acting after its lock
//! expired and someone else took it, and Redlock issues no fencing token
//! to stop it; and its safety rests on timing assumptions (bounded
//! pauses, bounded clock drift, bounded network delay) that real systems
//! break. Five masters cost five times the operations and still give no
//! token. regent takes the other road the analysis recommends: one
//! authority (one Redis, or the master Sentinels name) grants leases
//! timed by its own clock, and every term carries a token that only
//! grows, which the leader passes to the resources it writes and they
//! check. The lease keeps two leaders from overlapping in the common
//! case; the token keeps them from corrupting data in every case. Where
//! a lease must never be lost, use a consensus store (etcd, ZooKeeper,
//! Consul).
//!
//! # Redis Sentinel
//!
//! `redis+sentinel://S1,S2,S3/MASTER[/DB]` (the `redis` crate documents
//! no URL for Sentinel; this is the form other clients and tools use, and
//! Lettuce's `redis-sentinel://S1,S2/DB#MASTER` is taken too) asks the
//! Sentinels for the master's address, checks with `ROLE` that the server
//! there is a master, and keeps one connection to it. When that
//! connection breaks, times out, or meets a server that became a replica
//! (`READONLY`), the next call asks the Sentinels again: the store follows
//! the master through failovers, each call failing at most as
//! `Unavailable` (retried by the candidate) meanwhile. A Sentinel that
//! does not answer is asked last the next time; a master name no Sentinel
//! monitors is `Config`. Watches subscribe on the master the store talks
//! to and subscribe again after a failover.
//!
//! # TLS
//!
//! `rediss://HOST[:PORT][/DB]` speaks TLS to one Redis (its `tls-port`)
//! through the `redis` crate's rustls (ring as its crypto provider), as
//! redis-cli's `--tls` does. The store checks the server's certificate
//! against the CA certificate of the option `cacert` (`--redis-cacert`),
//! else against the system's trusted roots, and checks that it names the
//! URL's host (an IP address in the URL must be among the certificate's
//! IP addresses). A server with `tls-auth-clients yes`, Redis's default
//! for a TLS port, wants a client certificate as well: `cert` and `key`
//! (`--redis-cert`, `--redis-key`), given together, present one. The
//! three are PEM files (redis-cli's `--cacert`, `--cert` and `--key`),
//! read and checked for a `CERTIFICATE` block or a private key when the
//! URL is parsed, and refused with `redis://` and `redis+sentinel://`
//! (no TLS to Sentinels). In code, [`redis::Client::build_with_tls`]
//! takes the same PEMs and [`RedisStore::builder`] the client.
//!
//! A TLS 1.3 server checks the client's certificate after the client has
//! finished its handshake: its refusal comes at the client's first read,
//! while the store connects ([`RedisStoreBuilder::build`], or the first
//! call of a [lazy](RedisStoreBuilder::lazy) store). None of these is
//! transient:
//!
//! | what | kind | the message names |
//! |---|---|---|
//! | the server's certificate signed by no CA the store trusts, or for another host | [`Config`](regent_core::ErrorKind::Config) | `--redis-cacert` and the URL's host |
//! | no client certificate, and the server wants one | [`Auth`](regent_core::ErrorKind::Auth) | `--redis-cert` and `--redis-key` |
//! | a client certificate the server does not trust | [`Auth`](regent_core::ErrorKind::Auth) | `--redis-cert` and the server's `tls-ca-cert-file` |
//!
//! # Wake-ups
//!
//! The scripts `PUBLISH` on the election's channel (`regent:{E}:changed`)
//! whenever a term starts or ends; a watch `SUBSCRIBE`s to it and reads at
//! once, so a graceful hand-over takes a round trip or two. No server
//! setting is needed (no keyspace notifications). An expiry publishes
//! nothing: watches also poll (every 500 ms by default), and the store
//! says so ([`WatchMode::Poll`](regent_core::WatchMode)).
//!
//! # Roster and hand-over
//!
//! Candidates enroll in a hash and a sorted set per election (holder →
//! metadata, holder → until when, by the server's clock); `candidates` is
//! one script that lists the entries that stand. A lease handed to a
//! chosen successor is one script: the lease deleted and
//! `regent:{E}:reserved` set to the successor with the window as its
//! expiry; anyone else's acquire finds it and is held off, the
//! successor's clears it as it wins.
//!
//! # Keys
//!
//! See [`KIND`] for URLs and options. Every key lives under a prefix
//! (`regent:` by default), so one ACL rule grants what the store needs:
//!
//! ```text
//! ACL SETUSER app on >PASSWORD ~regent:* &regent:* +@scripting +@read +@write +@pubsub +time +ping +wait
//! ```
//!
//! | key | type | what |
//! |---|---|---|
//! | `regent:{E}:lease` | hash, expires | `holder`, `token`, `metadata` (JSON), `ttl_ms`, `by` |
//! | `regent:{E}:token` | string | the last token issued |
//! | `regent:{E}:reserved` | string, expires | the successor of a hand-over |
//! | `regent:{E}:roster`, `regent:{E}:roster-until` | hash, sorted set | the enrolled |
//!
//! # Example
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use regent_core::{Candidate, ElectionName, HolderId};
//! use regent_redis::RedisStore;
//!
//! // The password, if any, from REGENT_REDIS_PASSWORD.
//! let store = RedisStore::connect("redis://app@10.0.0.5:6379/0").await?;
//! let candidate = Candidate::builder(store, ElectionName::new("billing")?, HolderId::new("web-1")?)
//!     .build()?;
//! let leadership = candidate.campaign().await?;
//! // ... write with leadership.token() ...
//! leadership.resign().await?;
//! # Ok(()) }
//! ```
//!
//! In code, without the environment:
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use regent_redis::{RedisStore, redis};
//!
//! let client = redis::Client::open("redis://127.0.0.1:6379/0")?;
//! let store = RedisStore::builder(client)
//!     .poll_interval(Duration::from_millis(250))
//!     .build()
//!     .await?;
//! # let _ = store; Ok(()) }
//! ```

mod error;
mod record;
mod scripts;
mod store;
mod target;
mod watch;

/// The client this crate is built with: [`RedisStore::builder`] takes its
/// [`Client`](redis::Client), [`RedisStore::sentinel_builder`] its
/// [`ConnectionInfo`](redis::ConnectionInfo)s of the Sentinels.
pub use redis;
pub use store::{
    DEFAULT_CALL_TIMEOUT, DEFAULT_POLL_INTERVAL, DEFAULT_PREFIX, MIN_TTL, RedisStore,
    RedisStoreBuilder,
};
pub use target::{DEFAULT_PORT, DEFAULT_SENTINEL_PORT, KIND, RedisTarget};
