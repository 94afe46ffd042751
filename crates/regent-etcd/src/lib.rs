//! regent's etcd v3 store: elections on an etcd cluster, interoperable with
//! etcd's own election recipe (Go's `concurrency.Election`, the v3election
//! service, `etcdctl elect`).
//!
//! ```no_run
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use regent_core::{Candidate, ElectionName, HolderId};
//! use regent_etcd::EtcdStore;
//!
//! let store = EtcdStore::connect(["10.0.0.1:2379", "10.0.0.2:2379", "10.0.0.3:2379"]).await?;
//! let candidate = Candidate::builder(
//!     store,
//!     ElectionName::new("report-scheduler")?,
//!     HolderId::new("host-1")?,
//! )
//! .ttl(Duration::from_secs(10))
//! .build()?;
//! let leadership = candidate.campaign().await?;
//! let token = leadership.token(); // pass it with every write
//! # let _ = token;
//! leadership.resign().await?;
//! # Ok(()) }
//! ```
//!
//! [`EtcdStore`] implements [`regent_core::LeaseStore`] as a *queue* store
//! ([`StoreStyle::Queue`](regent_core::StoreStyle::Queue)) and passes
//! regent's store conformance suite against a real etcd.
//!
//! # Safety class
//!
//! [`SafetyClass::Consensus`](regent_core::SafetyClass::Consensus): every
//! write and every lease decision goes through etcd's Raft log, so the
//! election survives the loss of a minority of members. Lease expiry is
//! decided by the etcd leader's clock, never by comparing wall clocks.
//!
//! # Key layout (etcd's own)
//!
//! Election `NAME` lives under the prefix `NAME/` (after an optional
//! [namespace](EtcdStoreBuilder::namespace)). Each candidate grants itself
//! a lease and writes **one key**, `NAME/<lease id in lowercase hex>`,
//! attached to that lease: exactly the key Go's
//! `concurrency.NewElection(session, "NAME").Campaign(…)` writes
//! (`NewElection` appends the `/`; the key is `prefix + fmt.Sprintf("%x",
//! leaseID)`), and `etcdctl elect NAME` is a thin wrapper around it.
//!
//! * **Leader**: the key with the smallest *create revision* under the
//!   prefix (`Get(prefix, WithFirstCreate())` in Go). The others wait in
//!   line, in create-revision order; when the head's key goes (resign,
//!   lease revoked or expired, deleted by hand), the next one leads, with no
//!   herd.
//! * **Fencing token**: the leader key's create revision. etcd's revision
//!   is cluster-wide and only grows, across deletions, compaction and
//!   restarts, and a key created later always has a larger one, so a new
//!   term's token is larger than every token before it.
//! * **Value**: a small JSON object, `{"holder": "host-1", "metadata":
//!   {"addr": "10.0.0.1:80"}}`.
//!
//! Any key under the prefix is a candidate, as in Go. A value regent did not
//! write (`etcdctl elect NAME host-7`) is a legitimate foreign candidate,
//! never an error: it leads under the holder id `host-7` when the value is
//! a valid [`HolderId`](regent_core::HolderId), otherwise under the value
//! with every byte outside `!`..`~` replaced by `_` (at most 128 bytes; an
//! empty value gives `etcd-lease-<hex>`), with metadata `etcd.key` and
//! `etcd.value`. `etcdctl elect -l NAME` shows regent's leader as its key
//! and its JSON value.
//!
//! # Operations
//!
//! * **try_acquire** without a place in line: a lease of the ttl (whole
//!   seconds, rounded up) from the store's [sessions](#one-lease-for-many-elections):
//!   a shared one with room, kept alive once so that a win holds a full
//!   ttl from the call, or one granted now; then one transaction: *if*
//!   `create_revision(key) == 0` *then* put the key with the lease and read
//!   the head, *else* read the key and the head. Our key at the head is
//!   [`Won`](regent_core::Acquire::Won); otherwise
//!   [`Held`](regent_core::Acquire::Held) with the head as leader and our
//!   key as the place in line. A failed attempt deletes what it may have
//!   put under its key (and revokes a lease left without keys).
//! * **try_acquire** with a place: one keep-alive of its lease (so a `Won`
//!   holds a full ttl from this call, as the contract requires) beside a
//!   read-only transaction that finds our key as we left it and the head;
//!   when the key is not as we left it, the transaction above; new metadata is written as Go's `Proclaim` does
//!   (only if the key's create revision is still ours). If the lease has
//!   expired meanwhile, the candidate campaigns again with a new lease:
//!   the bug reported as etcd#19597, a pending campaign waiting forever on
//!   an expired session, cannot happen here. A key deleted while its lease
//!   lives (by hand, or taken out of line by a [hand-over](#hand-over-to-a-chosen-candidate))
//!   is put again at the back of the line: on the same lease while the
//!   store's sessions carry it, else with another lease (a lease a renewal
//!   found without its key is being revoked: a key put on it would go with
//!   it).
//! * **renew**: the next round of the key's session: one keep-alive of
//!   the shared lease, then one `LeaseTimeToLive` that lists its keys
//!   ([below](#one-lease-for-many-elections)). A key that is gone, or a
//!   lease etcd no longer knows, is [`Renewal::Lost`](regent_core::Renewal::Lost):
//!   the lease revoked from outside (`etcdctl lease revoke`) or the key
//!   deleted (`etcdctl del`) end leadership at the next renewal. A lease
//!   this store did not place (another process's) is renewed on its own:
//!   a read of our key (create revision = our token, our lease, our
//!   holder), then one keep-alive. An unreachable cluster is an
//!   [`Unavailable`](regent_core::ErrorKind::Unavailable) error, and the
//!   [`Candidate`](regent_core::Candidate) steps down at its renew
//!   deadline on its own clock.
//! * **update_metadata** (Go's `Proclaim`, two requests): read our key as
//!   `renew` does (create revision = our token, our lease, our holder),
//!   then one transaction: *if* its create and mod revisions are still the
//!   ones read *then* put the new value with our lease. A put keeps the
//!   key's create revision, so the token stays; the key stays attached to
//!   our lease, so its expiry stays too (an update does not renew). A
//!   missing, foreign or meanwhile rewritten key is
//!   [`Renewal::Lost`](regent_core::Renewal::Lost). Watches see the put
//!   on the head's key and report the leader's new metadata.
//! * **release** (Go's `Resign`): one transaction deletes our key *if* its
//!   create revision is our token, its lease ours and its value our
//!   holder's (two value bounds: a compare cannot look into a value, but
//!   every value regent writes for a holder starts with the same bytes).
//!   The next in line is told by that deletion; a lease left without
//!   keys is revoked afterwards in the background (should that fail, it
//!   expires by its ttl with no key). A lease of another process is
//!   revoked only when etcd lists no key on it any more. Idempotent, and
//!   someone else's key is never touched.
//! * **current_leader**: the head (one range request, sorted by create
//!   revision, limit 1).
//! * **candidates**: the whole line, for display: one range request on
//!   the prefix, sorted by create revision, each key's holder shown as
//!   the head's would be (a foreign value's derived holder too). A dead
//!   candidate's key is listed until it goes: with its lease, or deleted
//!   by the store that put it on a [shared lease](#one-lease-for-many-elections).
//! * **watch**: reads the first two keys of the line, then an etcd watch
//!   on the prefix from the next revision
//!   ([`WatchMode::Notify`](regent_core::WatchMode::Notify)). Only a change
//!   at the head is news: keys joining or leaving behind it cost the
//!   watchers nothing. When the head's key goes and the next key is known,
//!   the next leads at once, from the event alone, as a Go `Election`'s
//!   follower waits on the key just ahead of it; the key behind it is read
//!   afterwards, at a random moment within half a second, so that a crowd
//!   of followers does not read all at once while the new leader acquires
//!   (1,000 candidates of one election: the hand-over took 0.71 s before). Only when the next key is not known does the head's
//!   deletion take a read first. When etcd cancels the watch (compaction)
//!   or the connection fails, the stream yields the error, if any, and
//!   ends; the caller opens a new one.
//!
//! A graceful hand-over is thus: the old leader's delete (one write), the
//! event, and the next leader's acquire (a keep-alive beside a read-only
//! transaction): the same round trips as `etcdctl elect`'s, but for the
//! keep-alive that makes the new term's lease good for a full ttl.
//!
//! # Hand-over to a chosen candidate
//!
//! [`release_to`](regent_core::LeaseStore::release_to) (a leader handing
//! its term to a named successor) reads the whole line once (one range
//! request, sorted by create revision) and then runs one transaction:
//! *if* our key is still this term's (as `release` checks), each key
//! between ours and the successor's first key behind it is as read (its
//! mod revision), and the successor's key still stands (its create
//! revision), *then* delete our key and the keys between. The successor's
//! key is next in line at once, and its next acquire wins with a greater
//! token. The candidates whose keys were taken out lose their place: a
//! renewal of it is [`Lost`](regent_core::Renewal::Lost), and their next
//! acquire, with the old place or without, puts a new key at the back of
//! the line. The lease is revoked afterwards as after `release`.
//!
//! Only keys whose value regent wrote are taken out; a foreign key
//! (`etcdctl elect`, a Go `concurrency.Election`) is never deleted. When
//! one stands between the leader and the successor, the successor has no
//! key behind the leader's, the leader's key is no longer this term's, the
//! line changed between the read and the transaction, or more than 120
//! keys stand between (a transaction holds at most etcd's
//! `--max-txn-ops` compares, 128 by default; a server with a lower limit
//! refuses it), the call is a plain `release` and answers
//! [`HandOff::Released`](regent_core::store::HandOff::Released). A
//! successor is named by its holder as `candidates` shows it, so a foreign
//! candidate can be one: it is then made next, and kept.
//!
//! # One lease for many elections
//!
//! Like Go's `concurrency.Session`, one lease carries the keys of many
//! elections: an [`EtcdStore`] (and its clones) puts every election it
//! holds with one ttl on a shared lease, up to 1,000 keys per lease, so
//! that a process holding many elections keeps few leases alive. (Two
//! candidates of one election in one process still have a lease each: the
//! recipe names a key after its lease.) Renewals of all the elections on a
//! lease are answered together by *rounds*: one keep-alive, then one
//! `LeaseTimeToLive` with its keys, which says whose key is still there.
//! A round answers every renewal waiting when it starts, only those that
//! were called before its keep-alive was sent (so a renewal still holds a
//! full ttl from its call, as the store contract asks), and rounds of one
//! lease are at least a tenth of the ttl apart: renewing a lease's
//! elections costs etcd at most twenty requests per ttl, however many they
//! are and however often each renews, and a renewal waits at most a tenth
//! of the ttl for its round. The benchmark harness's scale case measures
//! it (`scripts/bench --stores etcd --cases scale`; results in
//! `docs/load.md`).
//!
//! A shared lease must not keep an election alive that its holder stopped
//! renewing (a candidate dropped without resigning, a release that failed)
//! just because others renew. The store keeps, for each key, the time it
//! would have expired on a lease of its own (its last renewal plus the
//! ttl) and deletes it then, guarded by its lease and create revision;
//! until such a deletion succeeds, no round keeps the lease alive. A
//! crashed process's keys all go with its lease, a ttl after its last
//! round, as before. The lease is revoked once its last key is gone.
//!
//! # Ttl
//!
//! etcd grants leases in whole seconds: a ttl is rounded **up** to the next
//! second, and [`Lease::ttl`](regent_core::Lease::ttl) says what was
//! granted. Ttls below [`MIN_TTL`] (1 s) or above
//! [`MAX_TTL`](regent_core::MAX_TTL) are
//! [`Config`](regent_core::ErrorKind::Config) errors. etcd raises a lease
//! shorter than its own minimum, `ceil(1.5 × election timeout)` (2 s with
//! the default `--election-timeout=1000`), to that minimum; the granted
//! ttl, never less than asked, is what the lease reports. etcd's lessor
//! looks for expired leases every 500 ms, so a dead holder's key goes up to
//! [`EXPIRY_SLACK`] after its ttl. A change of etcd's Raft leader restarts
//! every lease's **full** ttl plus an election timeout (etcd's lessor
//! refreshes all leases when a member is promoted; only the experimental
//! `--experimental-enable-lease-checkpoint` keeps the remaining time), so a
//! holder that died just before a Raft leader change keeps its key for up
//! to about twice the ttl. That slows failover; it never shortens a lease.
//! In the cluster test (ttl 2 s, election timeout 100 ms) the next leader
//! started 2.3–2.8 s after the Raft leader, to which the old leader alone
//! was connected, was killed.
//!
//! # TLS and authentication
//!
//! * **Authentication**: [`user`](EtcdStoreBuilder::user) logs in at
//!   [`connect`](EtcdStoreBuilder::connect), so a wrong user or password
//!   fails there, and etcd-client logs in again when etcd says the token
//!   expired. The user needs read and write permission on the election's
//!   keys (`etcdctl role grant-permission ROLE --prefix=true readwrite
//!   'PREFIX'`, the prefix [`EtcdStore::election_prefix`] gives); an error
//!   of etcd denying it names the prefix and that command. Errors of
//!   `connect` name the user, never the password,
//!   and neither does the builder's `Debug`.
//! * **TLS** (cargo feature `tls`: rustls with ring; the setters exist only
//!   with it): the store trusts the CAs it is told to, and no other.
//!   `EtcdStoreBuilder::tls_ca_pem` trusts one CA (etcd's `--cacert`);
//!   `tls_system_roots` trusts the system's trust store (etcdctl's default
//!   without `--cacert`); with both, both are trusted. The system's store
//!   is read at `connect` (on Linux the files OpenSSL uses; `SSL_CERT_FILE`
//!   and `SSL_CERT_DIR` replace them when set), and one without any
//!   certificate fails `connect` with `Config`. `tls_client_identity_pem` answers etcd's
//!   `--client-cert-auth`, and `tls_domain_name` is the name the server
//!   certificate must carry when the endpoints' hosts are not. Once a TLS setter is
//!   called, endpoints without a scheme use `https://`; an `http://` endpoint
//!   with TLS settings is a `Config` error, and so is an `https://` endpoint
//!   without the feature. The client certificate does not replace a user:
//!   etcd runs a request that carries no token as the user named by the
//!   certificate's common name, if there is one.
//!
//! Tested against a real etcd with TLS and authentication (`tests/security.rs`),
//! each misconfiguration comes out as:
//!
//! | misconfiguration | kind | when |
//! | --- | --- | --- |
//! | a wrong user or password | [`Auth`](regent_core::ErrorKind::Auth) | `connect` |
//! | no user while etcd's authentication is on | [`Auth`](regent_core::ErrorKind::Auth) | the first call (`user name is empty`; `permission denied` with a client certificate that names no user) |
//! | a server certificate not signed by a trusted CA, or not for the endpoint's host (or `tls_domain_name`) | [`Config`](regent_core::ErrorKind::Config) | the first request: `connect` with a user, else the first call |
//! | a PEM text without its certificate or key, a key that does not match its certificate, an invalid server name, system roots from a trust store without any certificate | [`Config`](regent_core::ErrorKind::Config) | `connect` |
//! | no client certificate, or one of another CA, where etcd requires one | [`Auth`](regent_core::ErrorKind::Auth) or [`Unavailable`](regent_core::ErrorKind::Unavailable) | the first request, at once |
//! | a plaintext client on etcd's TLS port, or a TLS client on a plaintext port | [`Unavailable`](regent_core::ErrorKind::Unavailable) | the first request, at once |
//!
//! The last two rows are transient only because the client cannot tell
//! them from a member going away: the server closes the connection. Under
//! TLS 1.3 etcd checks the client certificate after the client has ended
//! its handshake, so its refusal (a TLS alert, then `Auth`) races the
//! closed connection (`Unavailable`). A caller that retries `Unavailable`
//! retries these until its budget runs out; an etcd that is "unreachable"
//! right from the first call is worth a look at the TLS settings. The
//! store's error says so: over TLS, a connection the server closed or reset
//! after it was made says that this is how etcd refuses a missing or
//! untrusted client certificate (a refused connection, an unknown host or a
//! timeout does not). [`EtcdTarget`]'s hint, which the CLI prints, tells
//! both forms of the refusal apart and names the options to change;
//! [`is_refused_client_certificate`] does the same for a program that
//! builds its store with [`EtcdStore::builder`] and words its own advice.
//!
//! # URLs and options (the store kind)
//!
//! [`KIND`] describes this store to front ends that know no store by name
//! (the `regent` CLI, `regent::connect`): the URL grammar `etcd://` /
//! `etcds://`, the options (`cacert`, `cert`, `key`, `user`,
//! `password-file`, `password`: flags `--etcd-*`, variables
//! `REGENT_ETCD_*`), the checks between them, reading the TLS and password
//! files before any connection, and the hints that explain this store's
//! errors in terms of those options. Its module docs list the grammar and
//! the options; every rule broken is a message naming the flag or variable.
//!
//! # Errors
//!
//! Every [`StoreError`](regent_core::StoreError) names the operation, the
//! election and the endpoints (`connect`: the endpoints and the user), and
//! carries etcd-client's error as its source; a TLS failure also says what
//! failed in words, with rustls' reason, and a permission etcd denied names
//! the election's key prefix to grant. Every request is bounded by the
//! [request timeout](EtcdStoreBuilder::request_timeout).
//!
//! | kind | when |
//! | --- | --- |
//! | [`Unavailable`](regent_core::ErrorKind::Unavailable) (transient) | connection refused, reset or closed (also by a TLS mismatch, see above), the request timeout passed, gRPC `Unavailable` (no leader, leader changed), `DeadlineExceeded`, `ResourceExhausted`, `Aborted`, `Unknown`, `Internal` |
//! | [`Auth`](regent_core::ErrorKind::Auth) | gRPC `Unauthenticated`, `PermissionDenied`, an invalid auth token, a wrong user or password, no user while authentication is on, etcd's TLS alert refusing the client certificate |
//! | [`Config`](regent_core::ErrorKind::Config) | no endpoints, a malformed endpoint, a ttl outside 1 s ..= 1 day, TLS settings that cannot be used, a server certificate that fails verification, gRPC `InvalidArgument`, `FailedPrecondition`, `OutOfRange`, `Unimplemented` |
//! | [`Corrupt`](regent_core::ErrorKind::Corrupt) | the key under *our own* lease holds a record this candidate did not write (another create revision or lease) |
//! | [`Protocol`](regent_core::ErrorKind::Protocol) | an answer that cannot be (a transaction without its responses) |

mod builder;
mod campaign;
mod client;
mod error;
mod handoff;
#[cfg(feature = "tls")]
mod pem;
mod reads;
mod record;
mod session;
mod store;
mod target;
mod watch;

pub use builder::{DEFAULT_REQUEST_TIMEOUT, EtcdStoreBuilder};
pub use client::EtcdStore;
pub use error::is_refused_client_certificate;
pub use store::{EXPIRY_SLACK, MIN_TTL};
pub use target::{DEFAULT_PORT, EtcdTarget, KIND};

#[cfg(test)]
mod send_sync {
    fn is_send_sync<T: Send + Sync + 'static>() {}

    #[test]
    fn public_types_are_send_and_sync() {
        is_send_sync::<super::EtcdStore>();
        is_send_sync::<super::EtcdStoreBuilder>();
    }
}
