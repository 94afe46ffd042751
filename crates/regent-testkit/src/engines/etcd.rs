//! etcd 3.4 on `127.0.0.1`: one member ([`Etcd`]) or a cluster of several
//! ([`EtcdCluster`]), plus `etcdctl` pointed at them.
//!
//! Every member gets two free ports (client and peer) and its own temporary
//! directory holding its data dir and its log (`etcd.log`, zap JSON lines;
//! the last lines are quoted in startup errors). A member is an [`Engine`]:
//! its store URL is `etcd://127.0.0.1:PORT` (`etcds://` with TLS). Members run with
//! `--heartbeat-interval=10 --election-timeout=100` (see
//! [`HEARTBEAT_INTERVAL`] and [`ELECTION_TIMEOUT`]), so a cluster elects a
//! Raft leader within a few hundred milliseconds of losing one, and the
//! minimum lease TTL drops well below etcd's default of about 2 s.
//!
//! A member is ready when `GET /health` on its client port answers
//! `"health":"true"`, which etcd only does once the cluster has a leader and
//! serves a quorum read. The members of a cluster are launched one after the
//! other, each once the previous one answers on its peer port (launched
//! together they often stall 1–2 s asking each other whether they were
//! bootstrapped already). If a port was taken between the kit finding it
//! free and etcd binding it, the kit starts again on new ports.
//!
//! Programs: `etcd` and `etcdctl` from `PATH` (installed by
//! `scripts/install-engines`), or the paths in `REGENT_ETCD_BIN` and
//! `REGENT_ETCDCTL_BIN`. Variables `ETCD_*` of the test's environment are not
//! passed to etcd (etcd reads them as flags), nor `ETCDCTL_*` to etcdctl,
//! which always gets `ETCDCTL_API=3`.
//!
//! ```no_run
//! use regent_testkit::engines::Etcd;
//!
//! let etcd = Etcd::start()?;
//! let put = etcd.etcdctl(["put", "greeting", "hello"]);
//! assert!(put.status.success());
//! // Dropping `etcd` stops the process (SIGTERM, then SIGKILL) and removes
//! // its data dir.
//! # Ok::<(), regent_testkit::engines::EngineError>(())
//! ```
//!
//! # Secured members
//!
//! [`Etcd::builder`] starts a single member with TLS on its client port
//! ([`EtcdTls`]), etcd's authentication ([`EtcdBuilder::auth`]), or both.
//! Peers still talk plain HTTP.
//!
//! * **TLS**: the kit makes a test CA, a server certificate for
//!   `127.0.0.1` and `localhost`, a client certificate and an unrelated
//!   second CA and client certificate for negative tests, all in the
//!   member's temporary directory ([`Etcd::tls_files`], made by
//!   [`crate::pki`]). The client port
//!   then speaks only TLS: [`Etcd::client_url`] is `https://…`, while
//!   [`Etcd::endpoint`] stays `127.0.0.1:PORT` (a client given TLS options
//!   adds the scheme).
//! * **Authentication**: once the member is healthy, the kit creates the
//!   user, a role granting read and write on the whole keyspace when the
//!   user is not `root` (etcd needs a `root` user before `auth enable`; the
//!   kit gives it a random password then), and runs `etcdctl auth enable`.
//!   [`Etcd::credentials`] returns the user and password.
//!
//! A secured member also listens on a third port, plain HTTP, for etcd's
//! `/health` and `/metrics` (`--listen-metrics-urls`): [`Etcd::is_healthy`]
//! and [`Etcd::is_leader`] ask there, needing neither certificates nor a
//! password. [`Etcd::etcdctl`] and the other etcdctl helpers pass the
//! member's CA, client certificate and credentials by themselves, so tests
//! that drive etcdctl work unchanged on a secured member.
//!
//! ```no_run
//! use regent_testkit::engines::{Etcd, EtcdTls};
//!
//! let etcd = Etcd::builder()
//!     .tls(EtcdTls::ClientCert)
//!     .auth("regent", "s3cret")
//!     .start()?;
//! let files = etcd.tls_files().expect("a TLS member");
//! let ca_pem = std::fs::read(files.ca_cert()).expect("the CA is there");
//! assert_eq!(etcd.credentials(), Some(("regent", "s3cret")));
//! assert!(etcd.etcdctl(["put", "greeting", "hello"]).status.success());
//! # let _ = ca_pem;
//! # Ok::<(), regent_testkit::engines::EngineError>(())
//! ```
//!
//! [`Engine`]: super::Engine

mod cluster;
mod etcdctl;
mod member;
mod status;

pub use super::{START_TIMEOUT, STOP_TIMEOUT};
pub use cluster::EtcdCluster;
pub use member::{ELECTION_TIMEOUT, Etcd, EtcdBuilder, EtcdTls, EtcdTlsFiles, HEARTBEAT_INTERVAL};
