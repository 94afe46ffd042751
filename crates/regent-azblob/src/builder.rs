//! Building an [`AzblobStore`]: [`AzblobStoreBuilder`], its settings and
//! their defaults, and Azure's rules for container and blob names, which
//! `build()` checks before any request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use regent_core::{ErrorKind, StoreError};

use crate::account::StorageAccount;
use crate::blob::{AzblobStore, Inner, Naming};
use crate::rest::Client;

/// How long one request may take by default, retries of "busy" answers
/// included.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// How often [`LeaseStore::watch`](regent_core::LeaseStore::watch) reads
/// the blob by default (the Blob service pushes nothing).
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// Builds an [`AzblobStore`]; [`AzblobStore::builder`] starts one.
#[derive(Clone, Debug)]
#[must_use]
pub struct AzblobStoreBuilder {
    account: StorageAccount,
    container: String,
    naming: Naming,
    call_timeout: Duration,
    poll_interval: Duration,
}

impl AzblobStoreBuilder {
    /// Every election of this store is the blob `name` (the reference
    /// sample's `MyLeaderCoordinatorTask`): for a store that serves one
    /// election. Without it (and without [`blob_prefix`](Self::blob_prefix))
    /// the blob is the election's name.
    pub fn blob(mut self, name: impl Into<String>) -> Self {
        self.naming = Naming::Fixed(name.into());
        self
    }

    /// The blob of election `E` is `PREFIX` + `E` (`jobs/` puts it in the
    /// virtual directory `jobs`).
    pub fn blob_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.naming = Naming::Prefix(prefix.into());
        self
    }

    /// Bounds each request to the service, and its retries while the
    /// service answers "busy" ([`DEFAULT_CALL_TIMEOUT`]); a renewal is two
    /// requests, a metadata update two, an acquire three or more. Nothing
    /// retries beyond it, and the candidate's deadline rules over all of
    /// them.
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// How often a watch reads the blob ([`DEFAULT_POLL_INTERVAL`]).
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }

    /// Checks the names and builds the store. Nothing is sent until the
    /// first call: the container and the blob are created when missing.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Config`] naming the rule broken: a container or blob
    /// name Azure refuses (or one that needs escaping), a zero timeout or
    /// interval, an https endpoint on a host without CA certificates.
    pub fn build(self) -> Result<AzblobStore, StoreError> {
        let config =
            |why: String| StoreError::new(ErrorKind::Config, format!("azblob store: {why}"));
        check_container(&self.container).map_err(config)?;
        match &self.naming {
            Naming::Election => {}
            Naming::Fixed(blob) => check_blob(blob, "blob").map_err(config)?,
            // The shortest election name is one letter.
            Naming::Prefix(prefix) => {
                check_blob(&format!("{prefix}a"), "blob prefix").map_err(config)?;
            }
        }
        if self.call_timeout.is_zero() {
            return Err(config("the call timeout must be greater than zero".into()));
        }
        if self.poll_interval.is_zero() {
            return Err(config("the poll interval must be greater than zero".into()));
        }
        let client = Client::new(self.account, self.call_timeout).map_err(config)?;
        Ok(AzblobStore {
            inner: Arc::new(Inner {
                client,
                container: self.container,
                naming: self.naming,
                poll_interval: self.poll_interval,
                terms: Mutex::new(HashMap::new()),
            }),
        })
    }
}

/// Azure's rule: 3 to 63 characters, lower-case letters, digits and `-`,
/// starting with a letter or digit, no `--`, not ending in `-`.
fn check_container(name: &str) -> Result<(), String> {
    let shown = regent_core::target::printable(name);
    let ok = (3..=63).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--");
    if ok {
        Ok(())
    } else {
        Err(format!(
            "the container name '{shown}' must be 3 to 63 lower-case letters, digits and single \
             '-' between them (Azure's rule)"
        ))
    }
}

/// Blob names regent uses: 1 to 1024 ASCII letters, digits, `-`, `_` and
/// `.`, with `/` between non-empty parts that are not `.` or `..`; such
/// a name needs no escaping in a URL or a signature.
fn check_blob(name: &str, what: &str) -> Result<(), String> {
    let shown = regent_core::target::printable(name);
    let chars_ok = name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'/'));
    let parts_ok = name
        .split('/')
        .all(|p| !p.is_empty() && p != "." && p != "..");
    if !name.is_empty() && name.len() <= 1024 && chars_ok && parts_ok {
        Ok(())
    } else {
        Err(format!(
            "the {what} '{shown}' must be ASCII letters, digits, '-', '_' and '.', with '/' \
             between non-empty parts (at most 1024 characters)"
        ))
    }
}

impl AzblobStore {
    /// A store on `account`'s container `container` (created when
    /// missing); the blob of an election is its name unless
    /// [`AzblobStoreBuilder::blob`] or [`AzblobStoreBuilder::blob_prefix`]
    /// says otherwise.
    pub fn builder(account: StorageAccount, container: impl Into<String>) -> AzblobStoreBuilder {
        AzblobStoreBuilder {
            account,
            container: container.into(),
            naming: Naming::Election,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            poll_interval: DEFAULT_POLL_INTERVAL,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use regent_core::ElectionName;

    fn store() -> AzblobStoreBuilder {
        AzblobStore::builder(StorageAccount::development(), "leases")
    }

    #[test]
    fn names_follow_azure_rules() {
        let e = ElectionName::new("jobs").unwrap();
        assert_eq!(store().build().unwrap().blob_name(&e), "jobs");
        assert_eq!(
            store().blob_prefix("team/").build().unwrap().blob_name(&e),
            "team/jobs"
        );
        let fixed = store().blob("MyLeaderCoordinatorTask").build().unwrap();
        assert_eq!(fixed.blob_name(&e), "MyLeaderCoordinatorTask");
        // The hand-over requests of the election are an election of their
        // own: never the election's blob.
        let requests = regent_core::handover::request_election(&e);
        assert_eq!(
            fixed.blob_name(&requests),
            "MyLeaderCoordinatorTask~handover"
        );
        assert_eq!(
            store().build().unwrap().blob_name(&requests),
            "jobs~handover"
        );
        for bad in ["Leases", "le", "a--b", "-ab", "ab-", "a_b"] {
            let err = AzblobStore::builder(StorageAccount::development(), bad)
                .build()
                .unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Config);
            assert!(err.to_string().contains("container name"), "{err}");
        }
        for bad in ["", "a//b", "/a", "a/", "a b", "../a", "ä"] {
            let err = store().blob(bad).build().unwrap_err();
            assert!(err.to_string().contains("the blob"), "{bad:?}: {err}");
        }
        assert!(store().blob_prefix("a//").build().is_err());
        assert!(store().call_timeout(Duration::ZERO).build().is_err());
        assert!(store().poll_interval(Duration::ZERO).build().is_err());
    }
}
