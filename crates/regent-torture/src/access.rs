//! How a campaign reaches the store under torture: through its front end,
//! which knows the store's URL forms, settings and variables (the
//! campaign knows none of them).

use std::ffi::OsString;
use std::fmt;

use regent_core::{BoxError, BoxStore, ElectionName};

/// The front end's access to the store under torture.
///
/// The campaign resolves every store URL (those of
/// [`Config::stores`](crate::Config::stores), or the default SQLite file
/// in its temporary directory) before it starts any process, opens each
/// endpoint once the store commands run, to check that it answers, that
/// every URL reaches the same kind of store and that the store takes the
/// campaign's ttl, and gives each candidate `regent run --store URL
/// --election NAME --id ID`, then [`child_args`](StoreAccess::child_args).
///
/// `regent torture` implements it with the CLI's own store resolution:
/// the store flags and their variables, and the retries of `regent run`
/// while a store starts.
pub trait StoreAccess: Send + Sync {
    /// A URL resolved and checked, with everything it needs read (files,
    /// variables), before any connection.
    type Endpoint: fmt::Display + Send + Sync;

    /// Resolves `url` with the front end's store settings, with no IO on
    /// the network.
    ///
    /// # Errors
    ///
    /// The front end's, for a URL or a setting it refuses; the campaign
    /// reports it as [`Error::StoreUrl`](crate::Error::StoreUrl).
    fn resolve(&self, url: &str) -> Result<Self::Endpoint, BoxError>;

    /// Opens the store at `endpoint`, and reads `election` once to check
    /// that it answers. May wait while the store starts.
    ///
    /// # Errors
    ///
    /// The front end's; the campaign reports it as
    /// [`Error::StoreOpen`](crate::Error::StoreOpen).
    ///
    /// # Cancel safety
    ///
    /// The campaign drops the future when a store command it started
    /// exits meanwhile: it must leave nothing behind when dropped.
    fn open(
        &self,
        endpoint: &Self::Endpoint,
        election: &ElectionName,
    ) -> impl Future<Output = Result<BoxStore, BoxError>> + Send;

    /// The arguments every `regent run` candidate gets after its
    /// `--store`, `--election` and `--id`: the store's settings as
    /// `regent run` takes them.
    fn child_args(&self) -> Vec<OsString>;
}
