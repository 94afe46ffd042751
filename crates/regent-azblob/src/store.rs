//! [`AzblobStore`]: the store contract over blob leases.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use jiff::Timestamp;
use reqwest::Method;

use regent_core::store::{ExpirySlack, poll_watch};
use regent_core::{
    Acquire, AcquireRequest, ElectionName, ErrorKind, FencingToken, HolderId, LeaderInfo,
    LeaderStream, Lease, LeaseHandle, LeaseStore, Metadata, Renewal, SafetyClass, StoreError,
    StoreInfo, StoreStyle, WatchMode,
};

use crate::account::StorageAccount;
use crate::record::{self, BlobState, LeaseState};
use crate::rest::{Answer, Client, Request};

/// The shortest lease the Blob service grants: 15 s.
pub const MIN_TTL: Duration = Duration::from_secs(15);

/// The longest finite lease the Blob service grants: 60 s.
pub const MAX_TTL: Duration = Duration::from_secs(60);

/// How long one request may take by default, retries of "busy" answers
/// included.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// How often [`LeaseStore::watch`] reads the blob by default (the Blob
/// service pushes nothing).
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// How much later than its duration the service may free a dead holder's
/// lease: the service ends a lease on its own clock, its duration after
/// the acquire or renew arrived; 1 s covers the whole-second durations and
/// the clocks of the service's front ends. Azurite was measured at under
/// 5 ms.
pub const EXPIRY_SLACK: ExpirySlack = ExpirySlack::fixed(Duration::from_secs(1));

/// A fencing token is `second × TOKENS_PER_SECOND + n`: see [the crate
/// docs](crate#fencing-tokens).
pub const TOKENS_PER_SECOND: u64 = 1_000_000;

/// The longest break period the service takes.
const MAX_BREAK_PERIOD: Duration = Duration::from_secs(60);

/// How many times (half a second each) a first term on a blob waits,
/// before it acquires the lease, for the service's clock to pass the
/// blob's creation by two seconds (see [the crate
/// docs](crate#fencing-tokens)).
const CLOCK_WAITS: u32 = 6;

/// How an election's name becomes a blob's.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Naming {
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
    inner: Arc<Inner>,
}

struct Inner {
    client: Client,
    container: String,
    naming: Naming,
    poll_interval: Duration,
    /// The terms this store renews, updates or releases.
    terms: Mutex<HashMap<TermKey, Arc<tokio::sync::Mutex<Term>>>>,
}

/// A term as its lease names it: lease id, holder and token. A lease
/// forged from another's id (another holder or token) is another term, so
/// that what it meets never touches the real one's.
type TermKey = (String, HolderId, FencingToken);

/// What a store knows of one of its terms beyond the lease's handle. Its
/// lock makes the term's renewals, metadata updates and release run one at
/// a time: each reads the record's ETag and writes `If-Match` it, and an
/// update changes it.
#[derive(Debug, Default)]
struct Term {
    /// The ETag of the record as this term's last confirmed metadata update
    /// left it; `None`: as the acquire wrote it (the handle's).
    etag: Option<String>,
    /// The metadata of an update sent whose answer never came (dropped,
    /// timed out): the record may show it, under an ETag never learned.
    pending: Option<Metadata>,
}

impl Term {
    /// The ETag under which `state` is the record `lease`'s term last
    /// wrote, or `None` when it is not. `written` is the ETag of the
    /// record the acquire wrote (the handle's).
    ///
    /// Invariant: only this term writes records with its holder and token
    /// (a later term's token is larger), so a record that shows them with
    /// the metadata of an update still `pending` is that update's; its
    /// ETag becomes the one known.
    fn recognise(&mut self, state: &BlobState, lease: &Lease, written: &str) -> Option<String> {
        let known = self.etag.as_deref().unwrap_or(written);
        if is_record_of(state, lease, known) {
            return Some(known.to_owned());
        }
        let last = state.last.as_ref()?;
        let applied = self.pending.as_ref().is_some_and(|pending| {
            last.holder == lease.holder && last.token == lease.token && &last.metadata == pending
        });
        if !applied {
            return None;
        }
        self.etag = Some(state.etag.clone());
        self.pending = None;
        Some(state.etag.clone())
    }
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
            Naming::Fixed(b) => b.clone(),
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

    fn place(&self, blob: &str) -> String {
        format!("{}/{blob}", self.inner.container)
    }

    fn lease_request<'a>(&'a self, blob: &'a str, action: &str) -> Request<'a> {
        Request::new(Method::PUT, &self.inner.container, Some(blob))
            .query("comp", "lease")
            .header("x-ms-lease-action", action)
    }

    /// The blob's state; `None` when it does not exist.
    async fn read(&self, blob: &str) -> Result<Option<(BlobState, Answer)>, StoreError> {
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
    async fn read_or_create(&self, blob: &str) -> Result<(BlobState, Answer), StoreError> {
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

    async fn create_container(&self) -> Result<(), StoreError> {
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

    async fn leader_now(&self, blob: &str) -> Result<Option<LeaderInfo>, StoreError> {
        match self.read(blob).await? {
            None => Ok(None),
            Some((state, _)) => {
                self.refuse_forever(&state, blob)?;
                Ok(state.leader())
            }
        }
    }

    /// A lease without end is no regent term: someone else holds the blob.
    fn refuse_forever(&self, state: &BlobState, blob: &str) -> Result<(), StoreError> {
        if state.lease == LeaseState::HeldForever {
            return Err(StoreError::corrupt(format!(
                "blob {} holds an infinite lease, which regent never takes: another program \
                 holds it; end it with `az storage blob lease break` if it should not",
                self.place(blob)
            )));
        }
        Ok(())
    }

    /// The token of a term that began on the service's clock at `now` on a
    /// blob in `state`: see [the crate docs](crate#fencing-tokens). `None`
    /// for a blob's first term while `now` is not two seconds past the
    /// blob's creation.
    fn next_token(
        &self,
        blob: &str,
        state: &BlobState,
        now: Timestamp,
    ) -> Result<Option<FencingToken>, StoreError> {
        let floor = u64::try_from(now.as_second())
            .ok()
            .and_then(|s| s.checked_mul(TOKENS_PER_SECOND));
        let token = match &state.last {
            Some(last) => last
                .token
                .get()
                .checked_add(1)
                .and_then(|next| floor.map(|f| next.max(f))),
            None if !clock_past_creation(state, now) => return Ok(None),
            None => floor,
        };
        token.map(|t| Some(FencingToken::new(t))).ok_or_else(|| {
            StoreError::corrupt(format!(
                "the fencing token of blob {} cannot grow any more",
                self.place(blob)
            ))
        })
    }

    /// Sends the acquire `request` of `lease_id` on `blob` (read as
    /// `state`) and writes the term's record under it: the record's ETag
    /// and the token, or `None` when a race was lost (the blob leased or
    /// changed meanwhile, or the acquire answered by a clock behind the
    /// one that made the blob).
    async fn win(
        &self,
        req: &AcquireRequest,
        blob: &str,
        state: &BlobState,
        request: &Request<'_>,
        lease_id: &str,
    ) -> Result<Option<(String, FencingToken)>, StoreError> {
        let what = || format!("acquire the lease on blob {}", self.place(blob));
        let answer = self.inner.client.send(request, &what).await?;
        match answer.status {
            201 | 200 => {}
            // Leased by someone else, changed since read, or deleted.
            409 | 412 | 404 => {
                tracing::debug!(answer = %answer.describe(), "azblob: acquire lost a race");
                return Ok(None);
            }
            _ => return Err(failed(what(), &answer)),
        }
        let now = answer.date().ok_or_else(|| no_date(&what()))?;
        let Some(token) = self.next_token(blob, state, now)? else {
            return Ok(None);
        };
        // The record, written under the new lease and only on the blob as
        // read: the token is final once this succeeds.
        let mut request = Request::new(Method::PUT, &self.inner.container, Some(blob))
            .query("comp", "metadata")
            .header("x-ms-lease-id", lease_id)
            .if_match(state.etag.clone());
        for (name, value) in record::record_headers(&req.holder, token, &req.metadata) {
            request = request.header(name, value);
        }
        let what = || format!("write the lease record of blob {}", self.place(blob));
        let answer = self.inner.client.send(&request, &what).await?;
        match answer.status {
            200 => {}
            // The lease was broken, or the blob changed, since we won it.
            409 | 412 | 404 => {
                tracing::debug!(answer = %answer.describe(), "azblob: the lease went before its record was written");
                return Ok(None);
            }
            _ => return Err(failed(what(), &answer)),
        }
        let etag = answer.header("etag").ok_or_else(|| {
            StoreError::new(
                ErrorKind::Protocol,
                format!("{}: the service's answer has no ETag", what()),
            )
        })?;
        Ok(Some((etag.to_owned(), token)))
    }

    /// Gives back a lease won but not used, by its id; errors only logged
    /// (it expires by its duration).
    async fn abandon(&self, blob: &str, lease_id: &str) {
        if let Err(e) = self.release_id(blob, lease_id).await {
            tracing::warn!(error = %e, "azblob: could not give back a lease won but not used; it expires by its duration");
        }
    }

    /// The term of `lease` (whose lease id is `lease_id`), made when this
    /// store first meets it.
    fn term(&self, lease: &Lease, lease_id: &str) -> Arc<tokio::sync::Mutex<Term>> {
        let mut terms = self
            .inner
            .terms
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        terms.entry(term_key(lease, lease_id)).or_default().clone()
    }

    /// Forgets the term of `lease`: it is over.
    fn forget_term(&self, lease: &Lease, lease_id: &str) {
        self.inner
            .terms
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&term_key(lease, lease_id));
    }

    async fn release_id(&self, blob: &str, lease_id: &str) -> Result<(), StoreError> {
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

fn failed(what: String, answer: &Answer) -> StoreError {
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
            " (check the account key or SAS token; a SAS needs read, add, create, write and \
             delete on blobs, and create on the container unless it exists)",
        );
    }
    StoreError::new(answer.kind(), message)
}

fn term_key(lease: &Lease, lease_id: &str) -> TermKey {
    (lease_id.to_owned(), lease.holder.clone(), lease.token)
}

/// Refuses a record the service would not keep, before anything is sent.
fn check_record_size(headers: &[(String, String)]) -> Result<(), StoreError> {
    let size = record::metadata_size(headers);
    if size > record::MAX_METADATA_BYTES {
        return Err(StoreError::new(
            ErrorKind::Config,
            format!(
                "azblob store: the holder's metadata takes {size} bytes in the lease record \
                 (base64 of its JSON), more than the {} bytes of metadata a blob can have",
                record::MAX_METADATA_BYTES
            ),
        ));
    }
    Ok(())
}

fn no_date(what: &str) -> StoreError {
    StoreError::new(
        ErrorKind::Protocol,
        format!("{what}: the service's answer has no readable Date"),
    )
}

/// A lease's handle: the lease id and the ETag of the record the term
/// wrote, which every renewal requires unchanged.
fn handle(lease_id: &str, etag: &str) -> LeaseHandle {
    LeaseHandle::new(format!("{lease_id} {etag}"))
}

fn parse_handle(lease: &Lease) -> Result<(&str, &str), StoreError> {
    lease
        .handle
        .as_str()
        .split_once(' ')
        .filter(|(id, etag)| {
            id.len() == 36
                && id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
                && !etag.is_empty()
                && etag.bytes().all(|b| b.is_ascii_graphic())
        })
        .ok_or_else(|| {
            StoreError::new(
                ErrorKind::Protocol,
                "azblob store: this lease was not made by an azblob store (its handle is not a \
                 lease id and an ETag)",
            )
        })
}

/// Whether the service's clock at `now` is two seconds past the second
/// the blob in `state` was last written (made, for a blob without a
/// record): then a first token taken from `now` exceeds every token of an
/// earlier blob of that name.
fn clock_past_creation(state: &BlobState, now: Timestamp) -> bool {
    now.as_second() > state.last_modified.as_second() + 1
}

/// Whether `state` is the record `lease`'s term wrote, unchanged since.
fn is_record_of(state: &BlobState, lease: &Lease, etag: &str) -> bool {
    state.etag == etag
        && state
            .last
            .as_ref()
            .is_some_and(|l| l.holder == lease.holder && l.token == lease.token)
}

/// A random lease id in the GUID form the service takes.
fn new_lease_id() -> String {
    let n = fastrand::u128(..);
    let h = format!("{n:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// The lease duration for `ttl`: whole seconds, rounded up (granting more
/// is allowed).
fn lease_seconds(ttl: Duration) -> u64 {
    ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0)
}

impl LeaseStore for AzblobStore {
    fn info(&self) -> StoreInfo {
        StoreInfo::new(
            "azblob",
            StoreStyle::Race,
            WatchMode::Poll(self.inner.poll_interval),
            SafetyClass::Consensus,
        )
        .with_ttl_range(MIN_TTL, MAX_TTL)
        .with_expiry_slack(EXPIRY_SLACK)
    }

    async fn try_acquire(
        &self,
        req: &AcquireRequest,
        _queued: Option<&Lease>,
    ) -> Result<Acquire, StoreError> {
        if !self.info().ttl_in_range(req.ttl) {
            return Err(StoreError::new(
                ErrorKind::Config,
                format!(
                    "azblob store: a blob lease lasts 15 to 60 s; the ttl {:?} is outside",
                    req.ttl
                ),
            ));
        }
        let seconds = lease_seconds(req.ttl);
        let blob = self.blob_name(&req.election);
        // The largest record this holder can write (the longest token),
        // within the service's limit, before anything is sent.
        check_record_size(&record::record_headers(
            &req.holder,
            FencingToken::new(u64::MAX),
            &req.metadata,
        ))?;
        let (mut state, mut answer) = self.read_or_create(&blob).await?;
        // A blob's first term waits for the service's clock here, before
        // its lease runs (see the crate docs, Fencing tokens).
        let mut waits = 0;
        while state.last.is_none()
            && state.lease == LeaseState::Free
            && !answer
                .date()
                .is_some_and(|now| clock_past_creation(&state, now))
        {
            if waits == CLOCK_WAITS {
                return Err(StoreError::unavailable(format!(
                    "the service's clock ({}) does not pass the creation of blob {} ({}) by two \
                     seconds: the first token of a blob is taken from it",
                    answer.header("date").unwrap_or("no Date"),
                    self.place(&blob),
                    state.last_modified
                )));
            }
            waits += 1;
            tokio::time::sleep(Duration::from_millis(500)).await;
            (state, answer) = self.read_or_create(&blob).await?;
        }
        self.refuse_forever(&state, &blob)?;
        if state.lease == LeaseState::Held {
            return Ok(Acquire::Held {
                leader: state.leader(),
                queued: None,
            });
        }
        // Acquire only the blob as read: a record written meanwhile (by a
        // winner's first steps) makes the service refuse.
        let lease_id = new_lease_id();
        let request = self
            .lease_request(&blob, "acquire")
            .header("x-ms-lease-duration", seconds.to_string())
            .header("x-ms-proposed-lease-id", lease_id.clone())
            .if_match(state.etag.clone());
        // From here on, whatever does not end in a term gives back the
        // lease ours may hold: an answer lost or busy may hide an acquire
        // that was applied all the same.
        match self.win(req, &blob, &state, &request, &lease_id).await {
            Ok(Some((etag, token))) => Ok(Acquire::Won(Lease {
                election: req.election.clone(),
                holder: req.holder.clone(),
                token,
                ttl: Duration::from_secs(seconds),
                handle: handle(&lease_id, &etag),
            })),
            Ok(None) => {
                self.abandon(&blob, &lease_id).await;
                Ok(Acquire::Held {
                    leader: self.leader_now(&blob).await.unwrap_or(None),
                    queued: None,
                })
            }
            Err(e) => {
                self.abandon(&blob, &lease_id).await;
                Err(e)
            }
        }
    }

    async fn renew(&self, lease: &Lease) -> Result<Renewal, StoreError> {
        let (lease_id, written) = parse_handle(lease)?;
        let blob = self.blob_name(&lease.election);
        let term = self.term(lease, lease_id);
        let mut term = term.lock().await;
        // The service renews an expired lease that nobody took since: read
        // first, so that an expired lease is never revived. (A renewal that
        // arrives within the milliseconds between this read and the lease
        // running out revives it still; nobody led meanwhile, and a
        // candidate steps down long before.)
        let found = self.read(&blob).await?;
        let etag = match &found {
            Some((state, _)) if state.lease == LeaseState::Held => {
                term.recognise(state, lease, written)
            }
            _ => None,
        };
        let Some(etag) = etag else {
            tracing::info!(
                blob = %self.place(&blob),
                state = ?found.map(|(s, _)| s.lease),
                "azblob: the lease is lost (expired, broken, or the record changed)"
            );
            drop(term);
            self.forget_term(lease, lease_id);
            return Ok(Renewal::Lost);
        };
        // Renewed only while the record is the one this term wrote: Azurite
        // (3.35) renews even a lease whose blob was written meanwhile.
        let request = self
            .lease_request(&blob, "renew")
            .header("x-ms-lease-id", lease_id)
            .if_match(etag.clone());
        let what = || format!("renew the lease on blob {}", self.place(&blob));
        let answer = self.inner.client.send(&request, &what).await?;
        match answer.status {
            200 if answer.header("etag").is_none_or(|e| e == etag) => Ok(Renewal::Renewed),
            200 | 404 | 409 | 412 => {
                tracing::info!(answer = %answer.describe(), blob = %self.place(&blob), "azblob: the lease is lost");
                drop(term);
                self.forget_term(lease, lease_id);
                Ok(Renewal::Lost)
            }
            _ => Err(failed(what(), &answer)),
        }
    }

    async fn update_metadata(
        &self,
        lease: &Lease,
        metadata: &Metadata,
    ) -> Result<Renewal, StoreError> {
        let (lease_id, written) = parse_handle(lease)?;
        let blob = self.blob_name(&lease.election);
        let headers = record::record_headers(&lease.holder, lease.token, metadata);
        check_record_size(&headers)?;
        let term = self.term(lease, lease_id);
        let mut term = term.lock().await;
        // Read first, as renew does: Set Blob Metadata under an expired
        // lease must not write a record nobody holds.
        let etag = match self.read(&blob).await? {
            Some((state, _)) if state.lease == LeaseState::Held => {
                term.recognise(&state, lease, written)
            }
            _ => None,
        };
        let Some(etag) = etag else {
            drop(term);
            self.forget_term(lease, lease_id);
            return Ok(Renewal::Lost);
        };
        // The whole record again (Set Blob Metadata replaces all of it),
        // under our lease and only on the record as read. Until its answer
        // comes, the record may show it under an ETag this store does not
        // know: `pending` lets the next call recognise it.
        term.pending = Some(metadata.clone());
        let mut request = Request::new(Method::PUT, &self.inner.container, Some(&blob))
            .query("comp", "metadata")
            .header("x-ms-lease-id", lease_id)
            .if_match(etag);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let what = || format!("update the lease record of blob {}", self.place(&blob));
        let answer = self.inner.client.send(&request, &what).await?;
        match answer.status {
            200 => {
                let etag = answer.header("etag").ok_or_else(|| {
                    StoreError::new(
                        ErrorKind::Protocol,
                        format!("{}: the service's answer has no ETag", what()),
                    )
                })?;
                term.etag = Some(etag.to_owned());
                term.pending = None;
                tracing::debug!(
                    election = %lease.election, holder = %lease.holder, token = lease.token.get(),
                    "azblob: updated the metadata"
                );
                Ok(Renewal::Renewed)
            }
            // The lease expired or was broken, or the record changed, since
            // the read.
            404 | 409 | 412 => {
                tracing::info!(answer = %answer.describe(), blob = %self.place(&blob), "azblob: the lease is lost");
                drop(term);
                self.forget_term(lease, lease_id);
                Ok(Renewal::Lost)
            }
            _ => Err(failed(what(), &answer)),
        }
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        let (lease_id, written) = parse_handle(lease)?;
        let blob = self.blob_name(&lease.election);
        let term = self.term(lease, lease_id);
        let mut term = term.lock().await;
        // Only the record this lease wrote: its holder, its token, its
        // ETag. Anything else is not ours to free.
        let released = match self.read(&blob).await {
            Ok(Some((state, _))) if term.recognise(&state, lease, written).is_some() => {
                self.release_id(&blob, lease_id).await
            }
            Ok(_) => Ok(()),
            Err(e) => Err(e),
        };
        // The term is over, released or not: it expires by its duration.
        drop(term);
        self.forget_term(lease, lease_id);
        released
    }

    async fn current_leader(
        &self,
        election: &ElectionName,
    ) -> Result<Option<LeaderInfo>, StoreError> {
        self.leader_now(&self.blob_name(election)).await
    }

    async fn watch(&self, election: &ElectionName) -> Result<LeaderStream, StoreError> {
        poll_watch(self.clone(), election.clone(), self.inner.poll_interval).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn leases_round_up_to_whole_seconds_and_ids_look_like_guids() {
        assert_eq!(lease_seconds(Duration::from_secs(15)), 15);
        assert_eq!(lease_seconds(Duration::from_millis(15_001)), 16);
        let id = new_lease_id();
        assert_eq!(id.len(), 36);
        assert_eq!(id.matches('-').count(), 4);
        assert_ne!(id, new_lease_id());
    }

    #[test]
    fn a_term_recognises_its_record_and_an_update_whose_answer_never_came() {
        let old = Metadata::new();
        let new = Metadata::from_pairs([("addr", "10.0.0.1:80")]).unwrap();
        let lease = Lease {
            election: ElectionName::new("jobs").unwrap(),
            holder: HolderId::new("a").unwrap(),
            token: FencingToken::new(7),
            ttl: MIN_TTL,
            handle: handle(&new_lease_id(), "\"0x1\""),
        };
        let blob = |etag: &str, holder: &str, token: u64, metadata: &Metadata| BlobState {
            etag: etag.to_owned(),
            last_modified: Timestamp::UNIX_EPOCH,
            lease: LeaseState::Held,
            last: Some(LeaderInfo {
                holder: HolderId::new(holder).unwrap(),
                token: FencingToken::new(token),
                metadata: metadata.clone(),
            }),
        };
        let written = "\"0x1\"";
        let mut term = Term::default();
        let seen = |term: &mut Term, state: BlobState| term.recognise(&state, &lease, written);
        assert_eq!(
            seen(&mut term, blob(written, "a", 7, &old)).as_deref(),
            Some(written)
        );
        assert_eq!(
            seen(&mut term, blob("\"0x2\"", "a", 7, &old)),
            None,
            "written meanwhile"
        );

        // An update sent whose answer never came.
        term.pending = Some(new.clone());
        assert_eq!(
            seen(&mut term, blob(written, "a", 7, &old)).as_deref(),
            Some(written),
            "not applied (yet)"
        );
        assert_eq!(seen(&mut term, blob("\"0x3\"", "b", 8, &new)), None);
        assert_eq!(seen(&mut term, blob("\"0x3\"", "a", 6, &new)), None);
        assert_eq!(
            seen(&mut term, blob("\"0x3\"", "a", 7, &new)).as_deref(),
            Some("\"0x3\""),
            "applied: its ETag is the term's now"
        );
        assert!(term.pending.is_none());
        assert_eq!(
            seen(&mut term, blob("\"0x3\"", "a", 7, &new)).as_deref(),
            Some("\"0x3\"")
        );
        assert_eq!(
            seen(&mut term, blob(written, "a", 7, &old)),
            None,
            "the acquire's record is no longer the term's"
        );
    }

    #[test]
    fn info_declares_the_service_range() {
        let info = store().build().unwrap().info();
        assert_eq!((info.min_ttl, info.max_ttl), (MIN_TTL, MAX_TTL));
        assert!(!info.ttl_in_range(Duration::from_secs(14)));
        assert!(info.ttl_in_range(Duration::from_secs(60)));
        assert_eq!(info.watch, WatchMode::Poll(DEFAULT_POLL_INTERVAL));
    }
}
