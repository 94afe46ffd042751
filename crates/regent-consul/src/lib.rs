//! regent's Consul store: Consul's leader-election recipe (sessions and
//! KV), with the timing, fencing and failure handling regent's safety
//! model asks for.
//!
//! ```no_run
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use regent_core::{Candidate, ElectionName, HolderId};
//! use regent_consul::ConsulStore;
//!
//! // The local agent; the token as Consul's tools take it.
//! let mut builder = ConsulStore::builder("127.0.0.1:8500");
//! if let Ok(token) = std::env::var("CONSUL_HTTP_TOKEN") {
//!     builder = builder.token(token);
//! }
//! let store = builder.build()?;
//! let candidate = Candidate::builder(
//!     store,
//!     ElectionName::new("report-scheduler")?,
//!     HolderId::new("node-1")?,
//! )
//! .ttl(Duration::from_secs(10)) // Consul's minimum
//! .build()?;
//! let leadership = candidate.campaign().await?;
//! let token = leadership.token(); // pass it with every write
//! # let _ = token;
//! leadership.resign().await?;
//! # Ok(()) }
//! ```
//!
//! [`ConsulStore`] implements [`regent_core::LeaseStore`] as a *race*
//! store ([`StoreStyle::Race`](regent_core::StoreStyle::Race)): one key per
//! election, won by Consul's lock. It passes regent's store conformance
//! suite against a real Consul agent (`tests/store.rs`).
//!
//! # Safety class
//!
//! [`SafetyClass::Consensus`](regent_core::SafetyClass::Consensus): the
//! key, its lock and the sessions live in the Consul servers' Raft log and
//! survive the loss of a minority of servers. Session expiry is decided by
//! the Raft leader's clock, never by comparing wall clocks.
//!
//! # The recipe, mapped
//!
//! Consul's guide: every instance agrees on one key, creates a session,
//! and tries `PUT /v1/kv/KEY?acquire=SESSION` with its ClientID as the
//! value; whoever's acquire answers `true` leads while its session lives;
//! the others watch the key with blocking queries. In regent's terms:
//!
//! | recipe | regent |
//! | --- | --- |
//! | the key | `PREFIX` + the election name ([`ConsulStoreBuilder::prefix`], default `regent/`): election `jobs` is the key `regent/jobs` ([`ConsulStore::election_key`]) |
//! | the ClientID in the value | the [`HolderId`](regent_core::HolderId) alone; a JSON object `{"holder": …, "metadata": {…}}` when the holder publishes metadata. The CLI's default is the agent's node name ([`ConsulStore::agent_node_name`], `GET /v1/agent/self`), as the recipe's; `--id` overrides it |
//! | "the key holds our ClientID: we were restarted, we lead" | taken only when proven safe: [the restart shortcut](#the-restart-shortcut) |
//! | a session | one for many elections of a store ([below](#one-session-for-many-elections)), or one per term with [restart proofs](#the-restart-shortcut) (the CLI): `TTL` = `max(10 s, ttl/2)`, `LockDelay` = the ttl ([below](#lock-delay)), `Behavior` = `release`, `Checks` = none ([below](#no-health-checks)); the session id is the [`Lease`](regent_core::Lease)'s handle |
//! | acquire | **try_acquire**: a `?consistent` read of the key; locked → [`Held`](regent_core::Acquire::Held) by the holder it names; free → a new session, then one transaction `[check-index (or check-not-exists), lock]` so that the lock is taken only on the key exactly as read (never on a record that changed meanwhile); the lock's `ModifyIndex` is the fencing token |
//! | renew the session at TTL/2 | **renew**, every `renew_every` of the candidate (regent's default: ttl/5, [below](#renew-interval)): on a shared session, its next round (`PUT /v1/session/renew/ID`, then the waiting elections' keys in `?consistent` read-only transactions of up to 64 `get-tree` operations); on a session of one term, a `?consistent` read of the key, then the renew. The key must still be locked by our session, with our value and our token: a key deleted, overwritten or taken over, or a session Consul no longer knows (404) is [`Renewal::Lost`](regent_core::Renewal::Lost) |
//! | (not in the recipe; etcd's `Proclaim`) | **update_metadata**, two requests: a `?consistent` read as renew's, then one transaction `[check-index, lock]` with the new value; a `lock` by the session that holds the key keeps the lock and sets the value. The new value carries the term's token ([below](#the-fencing-token)). A key not held as renew requires, or changed in between, is [`Renewal::Lost`](regent_core::Renewal::Lost); the session is neither renewed nor ended |
//! | release | **release**: if the key is still ours, one transaction `[check-index, unlock]` (an explicit unlock has no lock delay, so a follower takes over at once), then `PUT /v1/session/destroy/ID` for a session of one term, or for a shared session with its last key (another process's shared session, told by its name, is left to that process or its TTL). Someone else's lock is never touched; twice is harmless |
//! | watch the key | **watch**: blocking queries on the key ([`WatchMode::Notify`](regent_core::WatchMode::Notify)), one per election and store, shared by every watch of it (see "Connections") |
//!
//! It is a race: when a leader's session ends, every waiting candidate's
//! blocking query returns and each tries to acquire; Consul's lock lets
//! one win.
//!
//! ## One session for many elections
//!
//! A process that holds many elections on one [`ConsulStore`] (and its
//! clones) locks their keys with few sessions, as one Consul session may
//! lock any number of keys: up to 1,000 elections of one ttl share a
//! session ([`regent_core::store::shared`]). Renewals of all of them are
//! answered together by *rounds*: one `PUT /v1/session/renew/ID`, then the
//! waiting elections' keys, read in `?consistent` read-only transactions
//! of up to 64 `get-tree` operations (Consul's most per transaction),
//! which say whose lock still stands. A round answers only renewals
//! called before its session renewal was sent, and rounds of one session
//! are at least a tenth of the ttl apart: a session is renewed at most
//! ten times per ttl however many elections it carries, and their keys
//! cost a request per 64 renewals (a session per term: two requests per
//! renewal, ten per ttl per election at the default timing). Two
//! candidates of one election never share a session. A lock whose holder stopped renewing (a candidate dropped, a
//! release that failed) is unlocked by the store when a session of its
//! own would have let it go, so other elections' renewals never keep it;
//! an explicit unlock has no lock delay. When a process dies, its sessions
//! and all their locks go as before, after the session TTL and the lock
//! delay. The session ends with its last key.
//!
//! With [restart proofs](ConsulStoreBuilder::restart_proofs) every term
//! has a session of its own: the proof is the lock of a file named after
//! the term's session, held by the term's processes. The CLI and
//! [`ConsulTarget`] (so `regent::connect` with a `consul://` URL) turn
//! them on, for one election per process; a process that holds many
//! elections builds its store with [`ConsulStore::builder`], without
//! them, and its elections share sessions.
//!
//! ## Connections
//!
//! An agent serves at most `limits.http_max_conns_per_client` (200 by
//! default) connections from one address, and resets the others. So one
//! store (and its clones) keeps at most [`MAX_IN_FLIGHT`] (64) requests in
//! flight at once, besides blocking queries; the others wait their turn
//! within the call timeout. A blocking query holds a connection for up to
//! [`WATCH_WAIT`], so the watches of one election through one store share
//! one query: 1,000 candidates of one election in one process wait on one
//! connection, not 1,000. Without these, 10,000 elections led by one
//! process lost a tenth of their terms to resets, and a herd of 1,000
//! candidates never settled. Many processes on one host, each with its own
//! connections to one agent, add up against that limit: give each host
//! its agent, as Consul intends, or raise the limit.
//!
//! ## Renew interval
//!
//! The recipe renews the session every TTL/2 (up to TTL/1.2) because
//! Consul keeps a session up to twice its TTL. regent's leader also steps
//! down on its own clock, before the *first* TTL can have run out since its
//! last renewal was sent (its renew deadline, 3·ttl/5 by default), so it
//! needs renewals that leave room for a retry before that deadline: the
//! core's default interval, ttl/5 (2 s at the default ttl of 10 s), gives
//! two. The recipe's range is open to those who want it, within one rule
//! of the core, checked at `build()`: the renew deadline must exceed 1.2 ×
//! the interval, so that a failed renewal can be retried before the
//! step-down, and stay below the ttl less the clock drift. At ttl 10 s,
//! TTL/2 is `--renew-every 5s --renew-deadline 7s`; the longest interval
//! is about TTL/1.21 (`--renew-every 8s --renew-deadline 9.8s`), where
//! one slow renewal ends the term. A renewal
//! is two small requests (a `?consistent` read of the key, then the renew);
//! at ttl/5 that is one request per second per leader, nothing for Consul.
//!
//! ## The restart shortcut
//!
//! The recipe says that an instance which finds its own ClientID in the
//! key was restarted and leads again at once. Taken blindly, that is two
//! leaders whenever the "previous" process is not gone: frozen, cut off,
//! still stopping its command, or a second instance configured with the
//! same id. regent takes it only when the kernel proves the previous
//! process gone ([`ConsulStoreBuilder::restart_proofs`]; the CLI enables
//! it, a library user opts in):
//!
//! * on every win, the holder locks a file named after its session
//!   (`flock`) with a descriptor that every process it starts while it
//!   leads inherits: in the CLI, its shim, the namespace's init, the
//!   command and the command's children;
//! * a restarted instance that finds the key locked by session `S` under
//!   its own id tries to lock `S`'s file. The file holds the kernel's boot
//!   id and must name this boot; it must lie on a local filesystem (on
//!   NFS or FUSE another host's locks are not seen) in a directory only
//!   this user may write; and its lock is free only once every process
//!   holding the descriptor has exited, however it exited. Then, and only
//!   then, the instance takes `S` over: it renews `S` and, in one
//!   transaction, unlocks and locks the key again under it — a new
//!   acquisition at a new Raft index, so a new, larger fencing token, with
//!   no lock delay to wait and no follower able to slip in;
//! * otherwise (no file: another host, user or private `/tmp`; another
//!   boot; the lock held: something of the old term still runs) it waits
//!   like any follower, until Consul invalidates `S` and its lock delay
//!   runs out.
//!
//! So a `regent run` killed by SIGKILL and restarted at once by its service
//! manager leads again at its first retry after its shim has stopped the
//! old command (within the grace, then up to a renew interval: 1.1–1.9 s
//! in the tests), not 30 s later; a frozen one does not. The files live in
//! [`default_restart_proofs_dir`]; each goes when its term's lease is
//! released, and a crashed holder's file when the restart that proves it
//! gone takes it over. Limits: a process of the term that closes the
//! descriptors it inherited and keeps running (a daemon that escaped the
//! PID namespace; Python's `subprocess` closes them by default), or that
//! unlocks the descriptor, frees the proof early: without a PID namespace,
//! `--pid-namespace never` or a library task that starts such children,
//! the proof covers the processes that keep it.
//!
//! ## Operators
//!
//! * **Destroying the leader's session** (the UI, `PUT
//!   /v1/session/destroy/ID`): the leader learns at its next renewal
//!   (within `renew_every`), stops leading, and campaigns again with a new
//!   session. Consul applies the session's lock delay (the ttl by default)
//!   before anyone, the old leader included, may take the key: the new
//!   term begins only after the old one is over.
//! * **Deleting the key** (`consul kv delete`): the leader learns at its
//!   next renewal and stops; the next acquire creates the key again. The
//!   fencing token still grows (see below), though Consul's `LockIndex`
//!   starts over.
//! * **Overwriting the key** (`consul kv put KEY VALUE`, which keeps the
//!   lock): the leader learns at its next renewal and stops. The key then
//!   holds a record regent did not write, which regent never takes over
//!   (see [Records that are not regent's](#records-that-are-not-regents)):
//!   candidates fail with [`Corrupt`](regent_core::ErrorKind::Corrupt)
//!   naming the key, and `regent run` exits 1, until the operator deletes
//!   the key.
//!
//! After a deleted key, a follower may begin before the old leader's next
//! renewal: fencing tokens protect the resources in that window (the lock
//! delay covers a destroyed session, not a deleted key).
//!
//! ## The fencing token
//!
//! The key's `ModifyIndex` as the lock was taken, read from the lock's own
//! transaction result. Consul's `LockIndex` would be the obvious counter,
//! but it starts again at 1 when the key is deleted and recreated; the
//! `ModifyIndex` is a Raft index, which only grows across deletion,
//! recreation and server restarts. Until the holder updates its metadata
//! the index stays its token, and a renewal checks it: an operator
//! overwriting the key (`consul kv put KEY …`, which keeps the lock)
//! changes it, and the holder loses the lease at its next renewal.
//!
//! A metadata update ([`update_metadata`](regent_core::LeaseStore::update_metadata))
//! writes the key and so moves its `ModifyIndex`; the value it writes
//! therefore carries the term's token, `{"holder": …, "metadata": {…},
//! "token": N}`, and readers take the token from there. Such a token is
//! always below the key's `ModifyIndex` (it was copied from the lock's
//! index by a later write of the same term); one that is not is
//! [`Corrupt`](regent_core::ErrorKind::Corrupt). Every acquisition writes
//! a value without it, so a new term's token is the new lock's index, above
//! every write of the terms before, as before. An operator's overwrite
//! still costs the lease: `consul kv put` writes flags 0 and its own value.
//! (A regent from before metadata updates reads a record with a token as
//! not its own: run one version per election when updating metadata.)
//!
//! ## Records that are not regent's
//!
//! regent writes its records with the KV flags [`RECORD_FLAGS`] (Consul's
//! own Go lock marks its keys the same way). A key with other flags, or
//! whose value is neither a holder id nor regent's JSON record, is never
//! acquired, whether locked or not: [`try_acquire`](regent_core::LeaseStore::try_acquire)
//! and [`current_leader`](regent_core::LeaseStore::current_leader) fail
//! with [`Corrupt`](regent_core::ErrorKind::Corrupt), naming the key and
//! what is wrong with it. Delete the key to hand it to regent.
//!
//! # Roster and hand-over
//!
//! A candidate that takes part in choosing the leader (priorities,
//! `regent handover`) enrolls on its election's *roster* at every renew
//! interval ([`enroll`](regent_core::LeaseStore::enroll)); the leader
//! reads the roster ([`candidates`](regent_core::LeaseStore::candidates))
//! and gives its lease to the one it chose
//! ([`release_to`](regent_core::LeaseStore::release_to)).
//!
//! **Where the entries live.** One key per candidate,
//! `PREFIX~roster/ELECTION/HOLDER` ([`ConsulStore::roster_key`]): the
//! holder id as it is, but for bytes other than ASCII letters, digits,
//! `-`, `_` and `.` (and a final `.`), written `~` and two hex digits. No
//! election name holds a `~`, so no election's key is among them; and
//! they lie outside the tree of the election's own key, which the rounds
//! of [shared sessions](#one-session-for-many-elections) read with
//! `get-tree` (a roster of a thousand would have been read at every
//! round). The ACL policy of the elections' `key_prefix` covers them. The
//! value is `{"holder": …, "metadata": {…}}`, with the flags
//! [`ROSTER_FLAGS`].
//!
//! **Expiry on Consul's terms.** Each entry is locked by a session of its
//! own: `TTL` = the candidate's ttl (10 s to 24 h, as for a lease; others
//! are [`Config`](regent_core::ErrorKind::Config)), `Behavior` = `delete`,
//! no lock delay, no checks. Consul deletes the key when the session ends,
//! one to two TTLs after its last renewal, within the store's expiry
//! slack; nobody compares clocks. `candidates` is one `?recurse` read
//! (`?consistent`) of the roster's keys, listing only keys a live session
//! locks, in holder order. A key there that is not an entry regent wrote
//! (other flags, a value that is not an entry, an entry naming another
//! holder than its key) is skipped, not an error: the roster is for
//! display and for choosing a successor, and proves nothing.
//!
//! **What enrolling costs**, per candidate: the first enroll makes the
//! session and locks the key (two requests). Every later one renews the
//! session (`PUT /v1/session/renew`, one request per renew interval,
//! which Consul's leader answers from memory: no Raft write) and writes
//! the key again (one transaction, a Raft write) only when the metadata
//! changed or a ttl has passed since this store wrote it, so that a key an
//! operator deleted is back within a ttl. The store keeps each entry's
//! session; a store without it (another process, a restart) makes a new
//! session and moves the key to it in one transaction (`check-index`,
//! `unlock` by the old session, `lock` by the new), and the old session
//! lapses by its TTL. [`withdraw`](regent_core::LeaseStore::withdraw) ends
//! the entry's session, whichever store made it, and Consul deletes the
//! key with it: two requests.
//!
//! **The lease kept for a successor.** `release_to` does what `release`
//! does, only while the key is still the lease's, but instead of unlocking
//! the key it moves it, in one transaction (`check-index`, `unlock` by the
//! lease's session, `lock` by a *reservation session*), to a session made
//! for the purpose (`TTL` = the window, at least Consul's 10 s; no lock
//! delay; `Behavior` = `release`), with the last record's value and
//! `"reserved_for": SUCCESSOR`. The key is never free in between. While
//! the reservation session locks it, an acquire by anyone else finds it
//! locked and is [`Held`](regent_core::Acquire::Held) with no leader, and
//! `current_leader` and watches show no leader. The successor's acquire
//! moves it once more, in one transaction (`check-index`, `unlock` by the
//! reservation session, `lock` by its own), to a new lock at a new Raft
//! index: a greater token, as always. The window is timed by the store
//! that gave the lease: it ends the reservation session the window after
//! its transaction answered (an explicit end, with no lock delay, leaves
//! the key unlocked and free); should that process be gone by then, Consul
//! ends the session by its TTL, `max(10 s, window)` to twice that after it
//! was made. A hand-over is four requests (a read, the session, the
//! transaction, the end of the old session as `release` ends it), and one
//! more when the window ends. A window of zero, or above a day (Consul's
//! longest session), is a plain release,
//! [`HandOff::Released`](regent_core::store::HandOff::Released). A regent
//! from before hand-overs reads a key kept for a successor as
//! [`Corrupt`](regent_core::ErrorKind::Corrupt) while it is kept.
//!
//! # Ttl and failover
//!
//! Consul accepts session TTLs of 10 s to 24 h ([`MIN_TTL`], [`MAX_TTL`]);
//! the store declares that range in its
//! [`StoreInfo`](regent_core::StoreInfo), so a
//! [`Candidate`](regent_core::Candidate) with a shorter ttl fails at
//! `build()` with [`ConfigError::TtlBelowStoreMinimum`](regent_core::ConfigError::TtlBelowStoreMinimum).
//! The ttl is sent in whole milliseconds, rounded up.
//!
//! Consul invalidates a session that is not renewed between one and two
//! of its TTLs after its last renewal (its timers run at twice the TTL,
//! and in practice fire then), and nobody may take the key for the
//! session's lock delay after that. regent sets both from the ttl
//! ([below](#lock-delay)): a lock delay of the ttl, and sessions of
//! `max(10 s, ttl/2)`, which renewals every ttl/5 keep alive with room to
//! spare. The store's [expiry slack](regent_core::store::ExpirySlack) says
//! so: `max(20 s, ttl)` beyond the ttl. So what a **crash of the leader
//! costs**, at most: `2 × max(10 s, ttl/2) + ttl` after its last renewal,
//! plus one retry of a follower (Consul tells no one when a lock delay
//! ends; followers retry every renew interval) and one acquire. With the
//! default ttl of 10 s that is **about 30 s** (28–32 s measured, see the
//! book's page on this store, `docs/stores/consul.md`); at ttl 15 s, about 33–36 s. A graceful shutdown
//! releases at once (an explicit unlock has no lock delay) and a follower
//! leads within a few round trips. `explain()` of a candidate on this
//! store shows the same numbers. One exception costs time, never safety: a
//! new Raft leader restarts every session's timer, so each Consul server
//! failover in that window adds its election and up to two session TTLs
//! more; under repeated server faults the torture campaigns saw a crash
//! failover take 39–51 s. The old holder has stepped down by its own
//! deadline all the same.
//!
//! ## Servers that hang
//!
//! A Consul server that hangs (SIGSTOP in the fault campaigns, a stalled
//! disk) is worse for a leader than one that dies: requests its agent
//! routes to it hang instead of failing over, so the leader cannot renew
//! and steps down at its renew deadline, and the election waits for the
//! session to end (the torture campaigns saw it each time a hung server
//! was on the leader's path; a killed server or agent never cost a term).
//! Safe, and bounded like a crash; the call timeout keeps every request
//! shorter than the deadline.
//!
//! ## Lock delay
//!
//! After Consul invalidates a session, the keys it held cannot be acquired
//! for the session's lock delay (Consul's default: 15 s). The delay exists
//! for holders that do not know yet that their session ended. regent's
//! holder steps down on its own clock, strictly before a ttl has passed
//! since its last successful renewal was *sent*; but a session can end
//! long before its TTL runs out, without its holder knowing:
//!
//! * its **agent leaves the cluster** — what a client agent does by default
//!   when it stops (`leave_on_terminate`), so a plain `systemctl restart
//!   consul` on the leader's host, or `consul leave` for maintenance:
//!   the servers deregister the node, and every session of the node ends
//!   at once;
//! * an **operator destroys it** (the UI, `PUT /v1/session/destroy`).
//!
//! The holder learns at its next renewal, or at its deadline if it cannot
//! reach Consul. So regent's default lock delay is **the ttl**: after any
//! invalidation nobody takes the key until a ttl has passed, and by then
//! the old holder's term, its task's grace included, is over. (A lock
//! delay shorter than the ttl, [`ConsulStoreBuilder::lock_delay`] or
//! `--consul-lock-delay`, leaves those cases to fencing tokens.) The price,
//! a ttl more on every crash failover, is mostly won back by the session
//! TTL: with a lock delay of `d`, regent gives Consul sessions of
//! `max(10 s, ttl/2, ttl - d)`, since the lock delay, not the session TTL,
//! now keeps the key for the rest of the ttl. Deleting or overwriting the
//! key is never covered by a lock delay: the holder learns at its next
//! renewal.
//!
//! ## No health checks
//!
//! Consul ties a session to its node's `serfHealth` check unless told
//! otherwise. regent's sessions have none (`"Checks": []`): their TTL,
//! renewed by the holder, is the holder's liveness. A node check would end
//! the session of a holder that still renews at every gossip hiccup; the
//! lock delay would keep that safe, but each would cost a term.
//!
//! ## Session behavior
//!
//! `release`: when a session ends, the key stays, unlocked, with the last
//! leader's record (the `delete` behavior would remove the key). A key
//! that stays keeps its flags, so nobody but regent takes it over by
//! mistake, and an operator sees who led last; a dead holder's session and
//! a holder's own release end in the same state (an unlocked key), and the
//! token does not depend on it either way.
//!
//! # Consistency and retries
//!
//! * Every read that decides something — acquire, renew, release,
//!   `current_leader` and the start of a watch — is `?consistent`: the
//!   servers' leader answers after confirming it still leads. Consul's
//!   default reads were seen (issue 10) to miss an acknowledged acquire
//!   right after a server failover.
//! * A `500` that Consul answers while its servers elect a leader or after
//!   the agent's server died ("No cluster leader", "rpc error …") is
//!   retried, with a short backoff, until the call timeout
//!   ([`ConsulStoreBuilder::call_timeout`], default
//!   [`DEFAULT_CALL_TIMEOUT`]) runs out; then it is
//!   [`Unavailable`](regent_core::ErrorKind::Unavailable). A retried
//!   transaction may have applied the first time: an acquire whose
//!   transaction reports a conflict reads the key again and wins if its
//!   own session holds it; an acquire that fails destroys its session, so
//!   no lock is left held by nobody.
//! * Blocking queries follow Consul's rules: the index is reset when it
//!   goes backwards, never 0, and the loop is rate-limited
//!   ([`WATCH_MIN_INTERVAL`]); each waits at most [`WATCH_WAIT`]. A watch
//!   that fails yields the error and ends; the caller opens a new one.
//!
//! # Token, TLS, datacenter
//!
//! * The ACL token ([`ConsulStoreBuilder::token`]) is sent as
//!   `X-Consul-Token`, marked sensitive in the HTTP client; it appears in
//!   no `Debug` output, log or error message. It needs `agent:read` (for
//!   [`ConsulStore::agent_node_name`], the CLI's default id) and `session:write` on
//!   the agent's node and `key:write` on the election keys; Consul's
//!   refusal is [`Auth`](regent_core::ErrorKind::Auth) and says so.
//! * TLS (rustls with ring): [`tls_ca_pem`](ConsulStoreBuilder::tls_ca_pem)
//!   trusts one CA (`CONSUL_CACERT`), [`tls`](ConsulStoreBuilder::tls)
//!   the system's trust store,
//!   [`tls_client_identity_pem`](ConsulStoreBuilder::tls_client_identity_pem)
//!   presents a client certificate (`CONSUL_CLIENT_CERT`,
//!   `CONSUL_CLIENT_KEY`).
//! * [`datacenter`](ConsulStoreBuilder::datacenter) adds `?dc=` to every
//!   request. Consul makes a session on the agent's own node, which only
//!   the agent's own datacenter knows: `?dc=` must name that one (as a
//!   guard where several are federated); another is a
//!   [`Config`](regent_core::ErrorKind::Config) error at the first
//!   acquire, after the call timeout.
//!
//! # URLs and options (the store kind)
//!
//! [`KIND`] describes this store to front ends that know no store by
//! name: `consul://` / `consuls://` URLs, the options `token` (secret:
//! `REGENT_CONSUL_TOKEN`), `token-file`, `cacert`, `cert`, `key`, `dc`, `lock-delay`
//! (flags `--consul-*`, variables `REGENT_CONSUL_*`), and Consul's own
//! variables (`CONSUL_HTTP_ADDR`, `CONSUL_HTTP_TOKEN`,
//! `CONSUL_HTTP_TOKEN_FILE`, `CONSUL_CACERT`, `CONSUL_CLIENT_CERT`,
//! `CONSUL_CLIENT_KEY`) as fallbacks. See [`KIND`] for the grammar.
//!
//! # One session per term
//!
//! regent's architecture prefers one engine session per process for all
//! its elections. This store creates one session per term instead, named
//! after the election's key, as the recipe does and as the store contract's
//! per-lease ttl and renewal want; a process that leads several
//! elections renews one session each. (The etcd store, likewise, grants
//! one lease per candidate.)
//!
//! # Errors
//!
//! Every [`StoreError`](regent_core::StoreError) names the operation, the
//! election and the agent, and keeps the cause (the HTTP client's error,
//! or Consul's answer with its status and message) as its source.
//!
//! | kind | when |
//! | --- | --- |
//! | [`Unavailable`](regent_core::ErrorKind::Unavailable) (transient) | no connection, the call timeout passed, a connection closed mid-call, HTTP 429/502/503/504, a 500 Consul answers while it has no leader or lost its server (after retries) |
//! | [`Auth`](regent_core::ErrorKind::Auth) | HTTP 401/403, a 500 saying "ACL not found" or "Permission denied", the agent refusing the client certificate |
//! | [`Config`](regent_core::ErrorKind::Config) | a ttl outside 10 s ..= 24 h, a bad address, prefix, datacenter or token at `build()`, TLS settings that cannot be used or a server certificate that fails verification, HTTP 400, a 500 naming an invalid request or an unknown datacenter |
//! | [`Corrupt`](regent_core::ErrorKind::Corrupt) | the key holds a record regent did not write (other flags, a value that is not a holder id or regent's record, or not base64) |
//! | [`Protocol`](regent_core::ErrorKind::Protocol) | an answer that cannot be (JSON of another shape, a transaction without the key) |
//!
//! Under TLS 1.3 an agent refuses a client certificate (or its absence)
//! with an alert sent after the handshake; now and then the connection
//! closes before the client reads it (2–8 calls in 100 here), and the call
//! fails as [`Unavailable`](regent_core::ErrorKind::Unavailable). A retry
//! sees the refusal: `regent run` and `regent status` retry at start and
//! report [`Auth`](regent_core::ErrorKind::Auth). Front ends get advice in
//! terms of their settings from [`ConsulTarget`]'s
//! [`hint`](regent_core::Target::hint): which CA option to check, which
//! client certificate options to pass, and the ACL policy a refused token
//! needs, with the target's key prefix.

mod builder;
mod client;
mod enrolled;
mod error;
mod proof;
mod record;
mod restart;
mod roster;
mod session;
mod shared;
mod store;
mod target;
mod tls;
mod watch;

pub use builder::{
    ConsulStoreBuilder, DEFAULT_ADDRESS, DEFAULT_CALL_TIMEOUT, DEFAULT_PREFIX,
    default_restart_proofs_dir,
};
pub use client::{ConsulStore, MAX_IN_FLIGHT};
pub use record::RECORD_FLAGS;
pub use roster::ROSTER_FLAGS;
pub use session::{MAX_TTL, MIN_TTL};
pub use target::{ConsulTarget, DEFAULT_PORT, DEFAULT_TLS_PORT, KIND};
pub use watch::{WATCH_MIN_INTERVAL, WATCH_WAIT};

#[cfg(test)]
mod send_sync {
    fn is_send_sync<T: Send + Sync + 'static>() {}

    #[test]
    fn public_types_are_send_and_sync() {
        is_send_sync::<super::ConsulStore>();
        is_send_sync::<super::ConsulStoreBuilder>();
        is_send_sync::<super::ConsulTarget>();
    }
}
