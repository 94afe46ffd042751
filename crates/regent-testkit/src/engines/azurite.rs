//! Azurite 3.35, Microsoft's Azure Storage emulator, on `127.0.0.1`: its
//! Blob service ([`Azurite`]), for the Azure Blob lease store, and one
//! shared by the tests of a process ([`SharedAzurite`]).
//!
//! [`Azurite::start`] runs `azurite-blob` on a free port, working in a
//! temporary directory of its own, with its metadata
//! (`__azurite_db_*.json`) and blobs on disk in `data/` (`--location`) and
//! its output in `azurite-blob.log`; anything else Azurite might write
//! lands in that directory too. The flags: `--skipApiVersionCheck` (SDKs send newer
//! API versions than Azurite knows), `--loose` (ignore headers and
//! parameters Azurite does not support), `--disableTelemetry` (Azurite
//! calls nobody) and `--silent` (no access log). Variables `AZURITE_*` of
//! the test's environment are not passed to it (Azurite reads
//! `AZURITE_ACCOUNTS` and `AZURITE_DB`). If the port was taken between the
//! kit finding it free and Azurite binding it, the kit starts again on a
//! new one.
//!
//! Azurite is **ready** ([`Azurite::is_healthy`]) when `GET
//! /devstoreaccount1?comp=list` gets any HTTP answer: without a signature
//! that is 403, which proves the service listens and dispatches. The kit
//! signs nothing: every request to Azurite needs shared-key authentication
//! (even with `--loose`), which is the store's (or the test's) business,
//! with the development account [`ACCOUNT`] and its well-known key
//! [`ACCOUNT_KEY`] ([`Azurite::connection_string`]).
//!
//! An instance is an [`Engine`] of kind `azblob`. Its store URL names the
//! container only, `azblob://CONTAINER` ([`CONTAINER`] for an Azurite of
//! a test's own, one per share of a [`SharedAzurite`]); where the service
//! is and how to sign for it is the connection string's, which
//! [`Engine::client_env`] gives as `AZURE_STORAGE_CONNECTION_STRING`. The
//! container does not exist until a client creates it.
//!
//! # Data across restarts
//!
//! The data is on disk, not in memory: `--inMemoryPersistence` would lose
//! every container and blob on every restart, which the [`Engine`]
//! contract forbids, and starting on disk is as fast (under a second).
//! [`Azurite::stop`] (SIGTERM) makes Azurite save its metadata before it
//! exits, so [`Azurite::restart`] comes back with every container and blob,
//! their ETags and metadata, and every infinite lease. Two departures from
//! the contract remain, both Azurite's (3.35.0):
//!
//! * **A finite lease does not survive a restart.** Azurite reads the
//!   lease's expiry instant back from disk as a string, which its
//!   comparison with the request's arrival (a `Date`) never finds later:
//!   after the restart every finite lease is `expired` and any client may
//!   acquire the blob at once, while its holder still counts on up to a
//!   minute of its lease. To a candidate, a restart of Azurite looks like a
//!   store that dropped every lease early. Infinite leases (`-1`) are
//!   kept.
//! * **A kill loses recent writes.** Azurite keeps its metadata in memory
//!   and writes it to disk every [`AUTOSAVE_INTERVAL`] (LokiJS's autosave),
//!   so after [`Azurite::kill`] (SIGKILL) what was acknowledged in the
//!   last five seconds or so is gone (measured: a blob leased just before
//!   SIGKILL was gone after the restart, one leased six seconds before was
//!   there); Azure never loses an acknowledged write. A test that needs a
//!   crash without that loss waits [`AUTOSAVE_INTERVAL`] (and a margin)
//!   after its last write.
//!
//! # Leases
//!
//! A blob lease lasts [`MIN_TTL`] to [`MAX_TTL`] or is infinite; Azurite
//! answers 400 for other durations, 409 `LeaseAlreadyPresent` to an acquire
//! of a leased blob, 412 to a write without the lease id. A lease expires
//! on the service's clock (the host's wall clock), exactly its duration
//! after the request that acquired or renewed it arrived
//! ([`EXPIRY_SLACK`]); a paused Azurite's leases expire meanwhile.
//!
//! Program: `azurite-blob` from `PATH` (`scripts/install-engines` installs
//! Azurite with npm into `/opt/regent-engines/azurite` and links
//! `/usr/local/bin/azurite-blob` to it), or the path in
//! `REGENT_AZURITE_BIN`. It runs on node, as node: the PID the kit records
//! and signals is node's. Azurite stops by that PID with SIGTERM, then
//! SIGKILL after [`STOP_TIMEOUT`].
//!
//! ```no_run
//! use regent_testkit::engines::{Azurite, Engine};
//!
//! let azurite = Azurite::start()?;
//! assert_eq!(azurite.store_url(), "azblob://regent");
//! let connection = azurite.connection_string(); // for the store's options
//! let unsigned = azurite.http_get("/devstoreaccount1?comp=list").expect("it answers");
//! assert_eq!(unsigned.status, 403); // Azurite wants a signature
//! // Dropping `azurite` stops node (SIGTERM, then SIGKILL) and removes its
//! // directory.
//! # let _ = connection;
//! # Ok::<(), regent_testkit::engines::EngineError>(())
//! ```
//!
//! [`Engine`]: super::Engine
//! [`Engine::client_env`]: super::Engine::client_env

mod account;
mod operator;
mod service;
mod shared;

pub use super::{START_TIMEOUT, STOP_TIMEOUT};
pub use account::{ACCOUNT, ACCOUNT_KEY};
pub use operator::OperatorResponse;
pub use service::{
    API_TIMEOUT, AUTOSAVE_INTERVAL, Azurite, CONTAINER, EXPIRY_SLACK, MAX_TTL, MIN_TTL,
    WATCH_DELAY, operator_request,
};
pub use shared::SharedAzurite;
