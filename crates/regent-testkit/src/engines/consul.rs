//! Consul 1.8 on `127.0.0.1`: one dev agent ([`Consul`]) or a cluster of
//! three servers and client agents ([`ConsulCluster`]).
//!
//! Every agent binds free ports of its own for HTTP, serf LAN, serf WAN and
//! server RPC, given in `-hcl 'ports { … }'`, so none takes Consul's
//! defaults (8300–8302, 8500) and tests run in parallel. DNS and gRPC are
//! off (`-1`): regent uses neither, and a port nobody binds cannot be
//! taken; so is HTTPS but on a [secured dev agent](#secured-dev-agents).
//! The update check is off (`disable_update_check`): the agents call
//! nobody. Each agent has its own temporary directory holding its data dir,
//! its log (`consul.log`, whose last lines startup errors quote) and, on a
//! secured agent, its certificates (`tls/`). If a port was taken between
//! the kit finding it free and Consul binding it, the kit starts again on
//! new ports.
//!
//! An agent is an [`Engine`]: its store URL is `consul://127.0.0.1:PORT`,
//! that agent's HTTP API (`consuls://` its HTTPS port on an agent with
//! TLS). It is **ready** ([`Consul::is_healthy`]) when
//! `GET /v1/status/leader` names a Raft leader **and** its own node is in
//! the catalog with its `serfHealth` check passing (`GET
//! /v1/health/node/NAME`). Consul answers HTTP before either is true, and
//! refuses to create a session for a node that is not registered or not
//! healthy.
//!
//! # The dev agent
//!
//! [`Consul::start`] starts `consul agent -dev`: a lone server that elects
//! itself at once (ready in a few hundred milliseconds). Its store lives in
//! memory only, so [`Consul::restart`] comes back on the same ports and
//! URL but **empty**: no keys, no sessions. This is the one way a dev agent
//! departs from the [`Engine`] contract (same data after a restart); to a
//! candidate, a restart looks like a store that lost every lock, which is
//! a fault worth testing too. A cluster's members keep their data dirs.
//!
//! # Secured dev agents
//!
//! [`Consul::builder`] starts a dev agent with HTTPS ([`ConsulTls`]), ACLs
//! ([`ConsulBuilder::acl`]), or both. Clusters are never secured. The
//! settings below go into `secured.hcl` in the agent's directory, given by
//! `-config-file` (so `ps` shows no token).
//!
//! * **HTTPS**: the kit makes the test PKI of [`crate::pki`] in the
//!   agent's temporary directory ([`Consul::tls_files`]: a CA, a server
//!   certificate for `127.0.0.1` and `localhost`, a client certificate, and
//!   an unrelated second CA and client certificate for negative tests) and
//!   gives Consul `ca_file`, `cert_file` and `key_file`, and
//!   `verify_incoming_https = true` for [`ConsulTls::ClientCert`]. HTTPS
//!   listens on a free port of its own ([`Consul::https_address`]);
//!   [`Engine::store_url`] is then `consuls://127.0.0.1:PORT` of that port.
//! * **ACLs**: `acl { enabled = true, default_policy = "deny", tokens {
//!   master = M, agent = M } }`, `M` a random UUID. Once the agent is
//!   ready the kit creates, through the HTTP API, two policies and a token
//!   with each ([`ConsulAcl`]): [`ConsulAcl::token`] may run elections
//!   under the builder's key prefix (`key_prefix` write, `session_prefix
//!   ""` write, `agent_prefix ""` read, as regent needs), and
//!   [`ConsulAcl::read_only_token`] may only read the same. Token ids are
//!   random UUIDs of the kit's, so that [`Consul::restart`], which empties
//!   a dev agent, creates the same tokens again.
//!
//! The plain HTTP port stays open beside HTTPS, for the kit alone: its
//! readiness checks, [`Consul::http_get`], [`Consul::http_put`] and
//! [`Consul::consul_command`] talk there, carrying the master token on an
//! agent with ACLs (the helpers as `?token=`, which Consul logs as
//! `<hidden>`; the command as `CONSUL_HTTP_TOKEN`), so tests that use them
//! work unchanged on a secured agent. Clients under test take
//! [`Consul::https_address`] and the tokens of [`Consul::acl`].
//!
//! ```no_run
//! use regent_testkit::engines::{Consul, ConsulTls};
//!
//! let consul = Consul::builder()
//!     .tls(ConsulTls::ClientCert)
//!     .acl("regent-tls/")
//!     .start()?;
//! let files = consul.tls_files().expect("an agent with TLS");
//! let token = consul.acl().expect("an agent with ACLs").token();
//! let https = consul.https_address().expect("an HTTPS port");
//! # let _ = (files, token, https);
//! # Ok::<(), regent_testkit::engines::EngineError>(())
//! ```
//!
//! # A cluster
//!
//! [`ConsulCluster`] runs [`ConsulCluster::SERVERS`] servers (`-server
//! -bootstrap-expect 3`, each `-retry-join`ing the others) and client
//! agents (each `-retry-join`ing every server), one datacenter named
//! after the test process, with `-retry-interval` [`RETRY_INTERVAL`] (the
//! default of 30 s would strand an agent launched before the servers
//! listen) and servers on `performance { raft_multiplier = 1 }` (the
//! default, 5, makes an election take several seconds). A client agent
//! holds no data of its own: it forwards to the servers, and a session
//! created through it belongs to its node.
//!
//! Program: `consul` from `PATH` (installed as `/usr/local/bin/consul` by
//! `scripts/install-engines`), or the path in `REGENT_CONSUL_BIN`. Variables
//! `CONSUL_*` of the test's environment are passed to neither the agents nor
//! [`Consul::consul_command`], which gets `CONSUL_HTTP_ADDR` of its agent.
//!
//! Agents stop by their PID with SIGINT, Consul's graceful shutdown, then
//! SIGKILL after [`STOP_TIMEOUT`]. No agent *leaves* the cluster on SIGINT
//! (every cluster agent runs with `skip_leave_on_interrupt`, the servers'
//! default, since leaving takes about 4 s, most of it Consul waiting for
//! the news to spread): to the others, a stopped agent has failed, and the
//! sessions of its node end once gossip notices. [`Consul::leave`] is the
//! graceful departure: the node is deregistered and its sessions end at
//! once.
//!
//! ```no_run
//! use regent_testkit::engines::Consul;
//!
//! let consul = Consul::start()?;
//! let session = consul
//!     .http_put("/v1/session/create", Some(r#"{"TTL":"10s","LockDelay":"0s"}"#))
//!     .expect("the agent answers");
//! assert_eq!(session.status, 200, "{}", session.body);
//! // Dropping `consul` stops the agent (SIGINT, then SIGKILL) and removes
//! // its directory.
//! # Ok::<(), regent_testkit::engines::EngineError>(())
//! ```
//!
//! [`Engine`]: super::Engine
//! [`Engine::store_url`]: super::Engine::store_url

mod agent;
mod cluster;
mod secured;
mod shared;
mod timeouts;

pub use super::{START_TIMEOUT, STOP_TIMEOUT};
pub use agent::{Consul, ConsulBuilder, ConsulRole, MIN_TTL, RETRY_INTERVAL};
pub use cluster::ConsulCluster;
pub use secured::{ConsulAcl, ConsulTls, ConsulTlsFiles, ELECTION_POLICY, READ_ONLY_POLICY};
pub use shared::SharedConsul;
pub use timeouts::API_TIMEOUT;
