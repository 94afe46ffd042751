//! ZooKeeper 3.8 on `127.0.0.1`: one standalone server ([`ZooKeeper`]),
//! an ensemble of three ([`ZooKeeperEnsemble`]), or a chroot of its own on
//! the test process's one server ([`SharedZooKeeper`]); and the classpath
//! of Apache Curator's clients ([`curator_classpath`]) and a compiled
//! Curator `LeaderLatch` participant ([`LatchParticipant`]) for the tests
//! and benchmarks that run a Curator participant beside regent's.
//!
//! Every server runs `java -cp CLASSPATH
//! org.apache.zookeeper.server.ZooKeeperServerMain zoo.cfg` (an ensemble's
//! `…quorum.QuorumPeerMain`) in its own temporary directory, which holds
//! its `zoo.cfg`, its data dir `data/` (with `myid` for an ensemble's
//! member) and its log `zookeeper.log` (slf4j's simple logger, INFO and
//! above; the last lines are quoted in startup errors). Its store URL is
//! `zk://127.0.0.1:PORT`; a share's names its chroot,
//! `zk://127.0.0.1:PORT/tN-NAME`. The `zoo.cfg`:
//!
//! | setting | value | why |
//! |---|---|---|
//! | `tickTime` | [`DEFAULT_TICK_TIME`] (100 ms), or [`ZooKeeperBuilder::tick_time`] | session timeouts from 2 ticks (0.2 s): the tests' ttls of 1–2 s, and fast expiry |
//! | `maxSessionTimeout` | [`DEFAULT_MAX_SESSION_TIMEOUT`] (60 s), or [`ZooKeeperBuilder::max_session_timeout`] | the end-to-end tests that need a ttl of 10 s or more (a grace of seconds) get the session they ask for; ZooKeeper's own bound, 20 ticks, would grant them 2 s, and the candidate refuses a lease too short for its timing |
//! | `clientPort`, `clientPortAddress` | a free port, `127.0.0.1` | |
//! | `admin.enableServer` | `false` | else Jetty binds `0.0.0.0:8080` |
//! | `4lw.commands.whitelist` | `srvr,ruok,stat,mntr,cons,dump` | readiness (`srvr`) and the tests' questions ([`ZooKeeper::four_letter_word`]) |
//! | `forceSync` | `no` | no fsync per write: an acknowledged write is in the OS's page cache and survives a kill of the server (not a power loss) |
//! | `initLimit`, `syncLimit` (ensemble) | 5 s, 1 s in ticks | a follower that hears nothing from its leader for 1 s looks for another |
//! | `server.N` (ensemble) | `127.0.0.1:QUORUM:ELECTION`, free ports | |
//!
//! The JVM runs with `-Xmx256m -XX:+UseSerialGC`: three servers of an
//! ensemble share two cores and a few hundred megabytes.
//!
//! A server is ready when the four-letter word `srvr` on its client port
//! answers with a `Mode:` line: `standalone` for a server of its own,
//! `leader` or `follower` for an ensemble's member (`ruok` answers `imok`
//! before the server serves). Measured on two cores: a standalone server
//! is ready about 0.3 s after launch; an ensemble about 1.3 s. If a port
//! was taken between the kit finding it free and ZooKeeper binding it, the
//! kit starts again on new ports.
//!
//! # Timing of the store
//!
//! * **ttl floor** ([`Engine::min_ttl`]): the smallest session timeout the
//!   server grants, `2 × tickTime` (200 ms). A session asking less gets
//!   that; one asking more than `maxSessionTimeout` gets that.
//! * **Expiry slack** ([`Engine::expiry_slack`]): `2 × tickTime + 300 ms`
//!   (500 ms). The server files each session's expiry in buckets of one
//!   tick and expires a bucket when it ends, so up to a tick late; in an
//!   ensemble a follower reports its sessions' activity to the leader once
//!   a tick, another tick; then the close goes through the log. Measured
//!   (a Java client creating an ephemeral node, then halting): the node
//!   was gone 20–90 ms after the session timeout on a standalone server,
//!   50–120 ms on an ensemble (the client on a follower), for timeouts of
//!   0.2 to 2 s. The rest is room for a loaded machine.
//!   A new leader of an ensemble restarts every session's timeout, so a
//!   leader change delays expiries by up to the election's time.
//! * **Watch delay**: none, ZooKeeper pushes watch events.
//!
//! # Data across restarts
//!
//! [`ZooKeeper::restart`] (and [`Engine::restart`]) starts the server
//! again on the same port, `zoo.cfg` and data dir: every node persists, and
//! so do sessions, whose timeouts start again when the server has loaded
//! them (a client that reconnects in time keeps its session and its
//! ephemeral nodes). A kill (SIGKILL) loses nothing acknowledged.
//!
//! # Programs
//!
//! `java` from `PATH`, or the path in `REGENT_JAVA_BIN`, with the
//! classpath of [`zookeeper_classpath`]: Debian's jars in
//! `/usr/share/java` (`zookeeper.jar`, `zookeeper-jute.jar`,
//! `slf4j-api.jar`, `slf4j-simple.jar`; `zookeeper.jar`'s manifest brings
//! the rest), or the value of `REGENT_ZOOKEEPER_CLASSPATH`. All are
//! installed by `scripts/install-engines`; a missing jar is
//! [`EngineError::JarNotFound`] naming that script. The JVM's option
//! variables of the test's environment (`JAVA_TOOL_OPTIONS`,
//! `_JAVA_OPTIONS`, `JDK_JAVA_OPTIONS`) are not passed on.
//!
//! ```no_run
//! use regent_testkit::engines::{Engine, ZooKeeper};
//!
//! let zk = ZooKeeper::start()?;
//! assert!(zk.store_url().starts_with("zk://127.0.0.1:"));
//! assert!(zk.create_node("/greeting", b"hello")?);
//! let mntr = zk.four_letter_word("mntr")?;
//! assert!(mntr.contains("zk_server_state\tstandalone"));
//! // Dropping `zk` stops the JVM (SIGTERM, then SIGKILL) and removes its
//! // directory.
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`Engine::min_ttl`]: super::Engine::min_ttl
//! [`Engine::expiry_slack`]: super::Engine::expiry_slack
//! [`Engine::restart`]: super::Engine::restart
//! [`EngineError::JarNotFound`]: super::EngineError::JarNotFound

mod classpath;
mod ensemble;
mod participant;
mod server;
mod shared;
mod wire;

pub use super::{START_TIMEOUT, STOP_TIMEOUT};
pub use classpath::{
    CURATOR_CLASSPATH_VAR, ZOOKEEPER_CLASSPATH_VAR, curator_classpath, zookeeper_classpath,
};
pub use ensemble::ZooKeeperEnsemble;
pub use participant::LatchParticipant;
pub use server::{
    DEFAULT_MAX_SESSION_TIMEOUT, DEFAULT_TICK_TIME, FOUR_LETTER_WORDS, ZooKeeper, ZooKeeperBuilder,
    ZooKeeperMode,
};
pub use shared::SharedZooKeeper;
