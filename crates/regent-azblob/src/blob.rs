//! The store and its requests on its container and blobs: [`AzblobStore`]
//! (one REST client, the container, how an election names its blob, the
//! terms it keeps), reading a blob, creating it and the container, the
//! lease actions it sends (release, break), and what a failed request
//! tells its caller. The signed REST calls themselves are
//! [`crate::rest`]'s.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use jiff::Timestamp;
use reqwest::Method;

use regent_core::{ElectionName, ErrorKind, LeaderInfo, Lease, StoreError};

use crate::account::StorageAccount;
use crate::lease::{Term, TermKey, term_key};
use crate::record::{self, BlobState, LeaseState};
use crate::rest::{Answer, Client, Request};

/// The longest break period the service takes.
const MAX_BREAK_PERIOD: Duration = Duration::from_secs(60);

/// How an election's name becomes a blob's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Naming {
    /// The blob is the election's name.
    Election,
    /// The blob is this prefix and the election's name.
    Prefix(String),
    /// Every election of the store is this one blob.
    Fixed(String),
}

/// The Azure Blob lease store. Cheap to clone: clones share one HTTP
/// client. See the [crate docs](crate) for the lease record, the fencing
/// tokens and the timing.
#[derive(Clone)]
pub struct AzblobStore {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) client: Client,
    pub(crate) container: String,
    pub(crate) naming: Naming,
    pub(crate) poll_interval: Duration,
    /// The terms this store renews, updates or releases.
    pub(crate) terms: Mutex<HashMap<TermKey, Arc<tokio::sync::Mutex<Term>>>>,
}

impl fmt::Debug for AzblobStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AzblobStore")
            .field("account", self.inner.client.account())
            .field("container", &self.inner.container)
            .field("naming", &self.inner.naming)
            .field("poll_interval", &self.inner.poll_interval)
            .finish_non_exhaustive()
    }
}

impl AzblobStore {
    /// The container.
    pub fn container(&self) -> &str {
        &self.inner.container
    }

    /// The storage account.
    pub fn account(&self) -> &StorageAccount {
        self.inner.client.account()
    }

    /// The blob that holds `election`'s lease.
    pub fn blob_name(&self, election: &ElectionName) -> String {
        match &self.inner.naming {
            Naming::Election => election.as_str().to_owned(),
            Naming::Prefix(p) => format!("{p}{election}"),
            // A name of regent's own beside the election (the hand-over
            // requests' `NAME~handover`) keeps its suffix: it is another
            // election, which must not share the blob.
            Naming::Fixed(b) => match election.as_str().find('~') {
                Some(at) => format!("{b}{}", &election.as_str()[at..]),
                None => b.clone(),
            },
        }
    }

    /// Breaks `election`'s lease as `az storage blob lease break` does:
    /// after `period` (whole seconds, 0 to 60) nobody holds it, and its
    /// holder cannot renew it meanwhile. An operator's tool: a regent
    /// leader whose lease is broken stops at its next renewal. Returns
    /// whether there was a lease to break.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Config`] for a period above 60 s or not whole seconds;
    /// otherwise a classified [`StoreError`].
    pub async fn break_lease(
        &self,
        election: &ElectionName,
        period: Duration,
    ) -> Result<bool, StoreError> {
        let blob = self.blob_name(election);
        if period > MAX_BREAK_PERIOD || period.subsec_nanos() != 0 {
            return Err(StoreError::new(
                ErrorKind::Config,
                format!("azblob store: a break period is 0 to 60 whole seconds, not {period:?}"),
            ));
        }
        let request = self
            .lease_request(&blob, "break")
            .header("x-ms-lease-break-period", period.as_secs().to_string());
        let what = || format!("break the lease on blob {}", self.place(&blob));
        let answer = self.inner.client.send(&request, &what).await?;
        match answer.status {
            202 | 200 => Ok(true),
            404 | 409 => Ok(false),
            _ => Err(failed(what(), &answer)),
        }
    }

    pub(crate) fn place(&self, blob: &str) -> String {
        format!("{}/{blob}", self.inner.container)
    }

    pub(crate) fn lease_request<'a>(&'a self, blob: &'a str, action: &str) -> Request<'a> {
        Request::new(Method::PUT, &self.inner.container, Some(blob))
            .query("comp", "lease")
            .header("x-ms-lease-action", action)
    }

    /// The blob's state; `None` when it does not exist.
    pub(crate) async fn read(&self, blob: &str) -> Result<Option<(BlobState, Answer)>, StoreError> {
        let request = Request::new(Method::HEAD, &self.inner.container, Some(blob));
        let what = || format!("read blob {}", self.place(blob));
        let answer = self.inner.client.send(&request, &what).await?;
        match answer.status {
            200 => {
                let state = record::parse(&answer.headers, &self.place(blob))?;
                Ok(Some((state, answer)))
            }
            404 => Ok(None),
            _ => Err(failed(what(), &answer)),
        }
    }

    /// Reads the blob, creating the container and the blob when missing.
    pub(crate) async fn read_or_create(
        &self,
        blob: &str,
    ) -> Result<(BlobState, Answer), StoreError> {
        for _ in 0..3 {
            if let Some(found) = self.read(blob).await? {
                return Ok(found);
            }
            self.create_blob(blob).await?;
        }
        Err(StoreError::unavailable(format!(
            "blob {} was deleted again each time it was created",
            self.place(blob)
        )))
    }

    /// Creates the empty record blob unless it exists (someone else may
    /// create it first), and the container if that is missing.
    async fn create_blob(&self, blob: &str) -> Result<(), StoreError> {
        let mut request = Request::new(Method::PUT, &self.inner.container, Some(blob))
            .header("x-ms-blob-type", "BlockBlob")
            .if_none_match_any();
        for (name, value) in record::fresh_headers() {
            request = request.header(name, value);
        }
        let what = || format!("create blob {}", self.place(blob));
        let mut answer = self.inner.client.send(&request, &what).await?;
        if answer.status == 404 {
            self.create_container().await?;
            answer = self.inner.client.send(&request, &what).await?;
        }
        match answer.status {
            201 => {
                tracing::debug!(blob = %self.place(blob), "azblob: created the record blob");
                Ok(())
            }
            409 if answer.code_is("ContainerBeingDeleted") => {
                Err(StoreError::unavailable(format!(
                    "{}: the container is being deleted; it can be made again once it is gone",
                    what()
                )))
            }
            // It exists: made by another candidate meanwhile.
            409 | 412 => Ok(()),
            _ => Err(failed(what(), &answer)),
        }
    }

    pub(crate) async fn create_container(&self) -> Result<(), StoreError> {
        let request =
            Request::new(Method::PUT, &self.inner.container, None).query("restype", "container");
        let what = || format!("create container {}", self.inner.container);
        let answer = self.inner.client.send(&request, &what).await?;
        match answer.status {
            201 => {
                tracing::info!(container = %self.inner.container, "azblob: created the container");
                Ok(())
            }
            409 if answer.code_is("ContainerAlreadyExists") => Ok(()),
            _ => Err(failed(what(), &answer)),
        }
    }

    pub(crate) async fn leader_now(&self, blob: &str) -> Result<Option<LeaderInfo>, StoreError> {
        match self.read(blob).await? {
            None => Ok(None),
            Some((state, _)) => {
                self.refuse_forever(&state, blob)?;
                Ok(state.leader())
            }
        }
    }

    /// A lease without end is no regent term: someone else holds the blob.
    pub(crate) fn refuse_forever(&self, state: &BlobState, blob: &str) -> Result<(), StoreError> {
        if state.lease == LeaseState::HeldForever {
            return Err(StoreError::corrupt(format!(
                "blob {} holds an infinite lease, which regent never takes: another program \
                 holds it; end it with `az storage blob lease break` if it should not",
                self.place(blob)
            )));
        }
        Ok(())
    }

    /// The term of `lease` (whose lease id is `lease_id`), made when this
    /// store first meets it.
    pub(crate) fn term(&self, lease: &Lease, lease_id: &str) -> Arc<tokio::sync::Mutex<Term>> {
        let mut terms = self
            .inner
            .terms
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        terms.entry(term_key(lease, lease_id)).or_default().clone()
    }

    /// Forgets the term of `lease`: it is over.
    pub(crate) fn forget_term(&self, lease: &Lease, lease_id: &str) {
        self.inner
            .terms
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&term_key(lease, lease_id));
    }

    pub(crate) async fn release_id(&self, blob: &str, lease_id: &str) -> Result<(), StoreError> {
        let request = self
            .lease_request(blob, "release")
            .header("x-ms-lease-id", lease_id);
        let what = || format!("release the lease on blob {}", self.place(blob));
        let answer = self.inner.client.send(&request, &what).await?;
        match answer.status {
            200 => Ok(()),
            // Gone, someone else's, or not leased: nothing of ours to free.
            404 | 409 | 412 => {
                tracing::debug!(answer = %answer.describe(), "azblob: release found nothing of ours");
                Ok(())
            }
            _ => Err(failed(what(), &answer)),
        }
    }
}

pub(crate) fn failed(what: String, answer: &Answer) -> StoreError {
    let mut message = format!("{what}: {}", answer.describe());
    let skew = answer
        .date()
        .map(|d| (Timestamp::now().as_second() - d.as_second()).abs());
    if answer.kind() == ErrorKind::Auth && skew.is_some_and(|s| s > 600) {
        message.push_str(&format!(
            " (this host's clock is {} s away from the service's; a signed request is \
             refused when they differ by more than 15 minutes: set the clock right)",
            skew.unwrap_or_default()
        ));
    } else if answer.kind() == ErrorKind::Auth {
        message.push_str(
            " (check the account key or SAS token; a SAS needs read, add, create, write, \
             delete and list on blobs, and create on the container unless it exists)",
        );
    }
    StoreError::new(answer.kind(), message)
}
