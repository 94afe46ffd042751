//! One Azurite per test process, shared by every test that needs only a
//! store: [`SharedAzurite`].

use std::time::Duration;

use regent_core::store::ExpirySlack;

use super::super::engine::{Engine, Signaled};
use super::super::error::EngineError;
use super::super::shared::{self, Shared, SharedCell};
use super::Azurite;

/// A share of the test process's one Azurite: a container of its own
/// (`azblob://t7-test-name`) on an Azurite started once, by the first test
/// that asks, and stopped by its PID when the test process exits.
///
/// Blob leases last 15 s at least, so the tests of a store on Azure are
/// slow and many run at once; one Azurite for all of them costs one start
/// (about a second) and 110 MB of memory instead of one of each per test.
/// The container isolates the tests as an Azurite of their own would: the
/// blobs a test's candidates lease live in it. What the container cannot
/// isolate is Azurite itself, so a share refuses to kill, pause, stop or
/// restart it ([`Engine::kill`] and the rest panic, naming
/// [`Azurite::start`], which gives a test an Azurite of its own to break).
///
/// # Lifetime
///
/// As [`SharedConsul`](super::super::SharedConsul)'s agent: a watchman
/// process, whose standard input is a pipe only the test process holds,
/// stops Azurite by its PID (SIGTERM, then SIGKILL after
/// [`STOP_TIMEOUT`](super::STOP_TIMEOUT), only while that PID's working
/// directory is still Azurite's) and removes its directory once the test
/// process exits, however it exits.
///
/// ```no_run
/// use regent_testkit::engines::{Engine, SharedAzurite};
///
/// let a = SharedAzurite::get()?;
/// let b = SharedAzurite::get()?;
/// assert_ne!(a.container(), b.container()); // one Azurite, two containers
/// assert_eq!(a.pid(), b.pid());
/// assert_eq!(a.connection_string(), b.connection_string());
/// # Ok::<(), regent_testkit::engines::EngineError>(())
/// ```
pub struct SharedAzurite {
    azurite: &'static Shared<Azurite>,
    connection_string: String,
    blob_endpoint: String,
    pid: Option<u32>,
    addr: std::net::SocketAddr,
    container: String,
}

/// The Azurite (with its watchman), or why it could not start.
static AZURITE: SharedCell<Azurite> = SharedCell::new();

/// The longest container name Azure accepts.
const MAX_CONTAINER_NAME: usize = 63;

impl SharedAzurite {
    /// A share of the process's Azurite, started (and waited for) if no
    /// test started it yet. Its container is `tN-NAME`, `NAME` the current
    /// thread's name (the test's, under the standard test harness) made a
    /// valid container name: lower case, every run of characters other
    /// than ASCII letters and digits one `-`, at most 63 characters in all.
    /// The container does not exist until a client creates it.
    ///
    /// # Errors
    ///
    /// As [`Azurite::start`] the first time, when Azurite is missing or
    /// does not start; later calls fail the same way without trying again
    /// ([`EngineError::SharedFailed`] quoting the first error).
    pub fn get() -> Result<Self, EngineError> {
        let azurite = Shared::get_or_start(&AZURITE, "azurite", Azurite::start, |a| &a.process)?;
        let instance = azurite.lock();
        let (n, name) = shared::next_share();
        Ok(Self {
            azurite,
            connection_string: instance.connection_string(),
            blob_endpoint: instance.blob_endpoint(),
            pid: instance.pid(),
            addr: instance.addr(),
            container: container_name(n, &name),
        })
    }

    /// This share's container.
    pub fn container(&self) -> &str {
        &self.container
    }

    /// As [`Azurite::addr`]: the same for every share.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// As [`Azurite::connection_string`]: the same for every share.
    pub fn connection_string(&self) -> &str {
        &self.connection_string
    }

    /// As [`Azurite::blob_endpoint`]: the same for every share.
    pub fn blob_endpoint(&self) -> &str {
        &self.blob_endpoint
    }

    /// The storage account: [`ACCOUNT`](super::ACCOUNT).
    pub fn account(&self) -> &'static str {
        super::ACCOUNT
    }

    /// The account's key, base64: [`ACCOUNT_KEY`](super::ACCOUNT_KEY).
    pub fn key(&self) -> &'static str {
        super::ACCOUNT_KEY
    }

    /// As [`Azurite::operator`], on the shared Azurite (any container:
    /// keep to this share's).
    ///
    /// # Errors
    ///
    /// As [`Azurite::operator`].
    pub fn operator(
        &self,
        method: &str,
        path: &str,
        query: &[(&str, &str)],
        headers: &[(&str, &str)],
    ) -> std::io::Result<super::OperatorResponse> {
        super::operator_request(self.addr, method, path, query, headers)
    }

    /// Runs `f` on the shared Azurite, the other tests' shares waiting
    /// meanwhile.
    pub fn with_azurite<T>(&self, f: impl FnOnce(&Azurite) -> T) -> T {
        f(&self.azurite.lock())
    }

    fn refuse(&self, what: &str) -> ! {
        panic!(
            "cannot {what} the shared Azurite (other tests use it): start one of the test's \
             own with Azurite::start()"
        )
    }
}

/// `tN-NAME` as a valid container name: 3 to 63 characters, lower-case
/// letters, digits and single `-` between them (`tN-test` for a name
/// without a letter or digit).
fn container_name(n: u64, name: &str) -> String {
    let mut container = format!("t{n}");
    // Whether a `-` goes before the next letter or digit.
    let mut dash = true;
    for c in name.chars().map(|c| c.to_ascii_lowercase()) {
        if !(c.is_ascii_lowercase() || c.is_ascii_digit()) {
            dash = true;
            continue;
        }
        if container.len() + usize::from(dash) + 1 > MAX_CONTAINER_NAME {
            break;
        }
        if dash {
            container.push('-');
            dash = false;
        }
        container.push(c);
    }
    if !container.contains('-') {
        container.push_str("-test");
    }
    container
}

impl std::fmt::Debug for SharedAzurite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedAzurite")
            .field("blob_endpoint", &self.blob_endpoint)
            .field("container", &self.container)
            .finish()
    }
}

/// A share as one of the [engines](super::super): its URL names its
/// container; faults on Azurite are refused (panic).
impl Engine for SharedAzurite {
    /// As [`SharedAzurite::get`].
    fn start() -> Result<Self, EngineError> {
        Self::get()
    }

    fn kind(&self) -> &'static str {
        "azblob"
    }

    /// `azblob://tN-NAME`.
    fn store_url(&self) -> String {
        super::service::store_url(&self.container)
    }

    fn pid(&self) -> Option<u32> {
        self.pid
    }

    fn is_healthy(&self) -> bool {
        self.with_azurite(Azurite::is_healthy)
    }

    fn kill(&mut self) -> Signaled {
        self.refuse("kill")
    }

    fn pause(&mut self) -> Signaled {
        self.refuse("pause")
    }

    fn resume(&mut self) -> Signaled {
        self.refuse("resume")
    }

    fn stop(&mut self) -> Signaled {
        self.refuse("stop")
    }

    fn restart(&mut self) -> Result<(), EngineError> {
        self.refuse("restart")
    }

    fn log_tail(&self, lines: usize) -> String {
        self.with_azurite(|a| a.process.log_tail(lines))
    }

    fn min_ttl(&self) -> Duration {
        super::MIN_TTL
    }

    fn expiry_slack(&self) -> ExpirySlack {
        super::EXPIRY_SLACK
    }

    fn watch_delay(&self) -> Duration {
        super::WATCH_DELAY
    }

    /// As [`Azurite`]'s: `AZURE_STORAGE_CONNECTION_STRING`, the same for
    /// every share.
    fn client_env(&self) -> Vec<(String, String)> {
        super::service::client_env(&self.connection_string)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_container_name_is_valid_for_azure() {
        assert_eq!(
            container_name(7, "azblob::Starts_healthy"),
            "t7-azblob-starts-healthy"
        );
        assert_eq!(container_name(12, "--a__b--"), "t12-a-b");
        assert_eq!(container_name(3, "::"), "t3-test");
        assert_eq!(container_name(3, "é"), "t3-test");
        let long = container_name(123, &"ab_".repeat(40));
        assert_eq!(long.len(), MAX_CONTAINER_NAME);
        assert!(long.starts_with("t123-ab-ab-"));
        let long = container_name(1, &format!("{}_b", "a".repeat(59)));
        assert_eq!(long.len(), 62, "no dash without a letter after it: {long}");
        assert!(!long.ends_with('-'));
    }
}
