//! Azurite's Blob service of a test's own: [`Azurite`], its figures
//! (lease bounds, expiry slack, watch delay, autosave) and its helpers.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use regent_core::store::ExpirySlack;

use super::super::engine::{Engine, Signaled};
use super::super::error::EngineError;
use super::super::http::{self, Response as HttpResponse};
use super::super::process::{self, EngineProcess, Program};
use super::super::timeouts::START_TIMEOUT;
use super::account::{ACCOUNT, ACCOUNT_KEY};
use super::operator::{self, OperatorResponse};

/// The container the store URL of an [`Azurite`] of a test's own names.
pub const CONTAINER: &str = "regent";

/// The shortest finite blob lease: 15 s (a shorter one is refused, 400).
pub const MIN_TTL: Duration = Duration::from_secs(15);

/// The longest finite blob lease: 60 s (longer ones are infinite or
/// refused).
pub const MAX_TTL: Duration = Duration::from_secs(60);

/// How much later than its duration Azurite frees an expired lease.
///
/// Azurite decides on every request whether a lease has expired, comparing
/// the request's arrival with the expiry instant it stored (the arrival of
/// the acquire or renew plus the duration), to the millisecond. Measured
/// here (Azurite 3.35.0, 9 leases of 15 s, probed every 1–5 ms): a second
/// acquire succeeded between 14.999 s and 15.004 s after the first was
/// sent, and was refused up to 15.000 s; the 4 ms are the probes' own
/// interval and round trip. Rounded up: 10 ms.
pub const EXPIRY_SLACK: ExpirySlack = ExpirySlack::fixed(Duration::from_millis(10));

/// How late regent's Azure Blob store sees a change: the Blob service
/// pushes nothing, so its watch reads the blob every second
/// (`regent_azblob::DEFAULT_POLL_INTERVAL`).
pub const WATCH_DELAY: Duration = Duration::from_secs(1);

/// How often Azurite writes its metadata to disk (LokiJS's autosave): a
/// [`Azurite::kill`] loses what was acknowledged since (see [Data across
/// restarts](super#data-across-restarts)).
pub const AUTOSAVE_INTERVAL: Duration = Duration::from_secs(5);

/// Bound on each step of [`Azurite::http_get`].
pub const API_TIMEOUT: Duration = Duration::from_secs(5);

/// Bound on each readiness or status request.
const STATUS_TIMEOUT: Duration = Duration::from_millis(500);

/// The readiness probe: listing the account's containers, which Azurite
/// answers (403 without a signature) once it serves.
const READY_PATH: &str = "/devstoreaccount1?comp=list";

/// Azurite's Blob service on `127.0.0.1`, its data on disk in a temporary
/// directory; stopped (SIGTERM) and removed when dropped.
#[derive(Debug)]
pub struct Azurite {
    port: u16,
    /// node running `azurite-blob`, its working directory the temporary
    /// directory holding `data/` and `azurite-blob.log`.
    pub(super) process: EngineProcess,
}

impl Azurite {
    /// Starts Azurite's Blob service on a free port and waits until it
    /// answers (under a second).
    ///
    /// # Errors
    ///
    /// [`EngineError::NotInstalled`] (or [`EngineError::NotInstalledAt`]
    /// with `REGENT_AZURITE_BIN`) when there is no `azurite-blob` to run:
    /// the message names `scripts/install-engines`. [`EngineError::Exited`]
    /// or [`EngineError::NotReady`] when it did not answer within
    /// [`START_TIMEOUT`], quoting its log; [`EngineError::Io`] or
    /// [`EngineError::Spawn`] when setting up failed.
    pub fn start() -> Result<Self, EngineError> {
        process::retry_on_port_collision(|| {
            let port = process::free_ports(1)?[0];
            let process =
                EngineProcess::new(Program::from_env("azurite-blob", "REGENT_AZURITE_BIN"))?;
            let mut azurite = Self { port, process };
            azurite.spawn()?;
            azurite.wait_healthy(Instant::now() + START_TIMEOUT)?;
            Ok(azurite)
        })
    }

    /// The address of the Blob service.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// The Blob service endpoint of the development account,
    /// `http://127.0.0.1:PORT/devstoreaccount1` (path-style, as for every
    /// emulator).
    pub fn blob_endpoint(&self) -> String {
        blob_endpoint(self.addr())
    }

    /// The connection string of the development account on this instance:
    /// `DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=…;BlobEndpoint=http://127.0.0.1:PORT/devstoreaccount1;`.
    pub fn connection_string(&self) -> String {
        connection_string(self.addr())
    }

    /// The storage account: [`ACCOUNT`].
    pub fn account(&self) -> &'static str {
        ACCOUNT
    }

    /// The account's key, base64: [`ACCOUNT_KEY`].
    pub fn key(&self) -> &'static str {
        ACCOUNT_KEY
    }

    /// The container the store URL names: [`CONTAINER`].
    pub fn container(&self) -> &'static str {
        CONTAINER
    }

    /// The PID of node running Azurite, or `None` once the kit has stopped
    /// or killed it.
    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    /// Whether the kit started the process and has not stopped or killed it
    /// since.
    pub fn is_running(&self) -> bool {
        self.process.is_running()
    }

    /// Whether Azurite answers now (any status to `GET
    /// /devstoreaccount1?comp=list` within half a second). A paused or
    /// stopped instance does not.
    pub fn is_healthy(&self) -> bool {
        answers(self.addr())
    }

    /// Azurite's data (`--location`): its metadata
    /// (`__azurite_db_blob__.json`, `__azurite_db_blob_extent__.json`) and
    /// blob contents (`__blobstorage__/`). It survives [`Azurite::stop`]
    /// and [`Azurite::kill`] and is removed on drop.
    pub fn data_dir(&self) -> PathBuf {
        self.process.data_dir()
    }

    /// Azurite's log: standard output and error of every run (start and
    /// stop messages and errors; the access log is off).
    pub fn log_path(&self) -> PathBuf {
        self.process.log_path()
    }

    /// `GET PATH` on the Blob service, unsigned, every step bounded by
    /// [`API_TIMEOUT`]. Azurite refuses every unsigned request to the
    /// account (403) except to public containers, so this is for status
    /// checks and those.
    ///
    /// # Errors
    ///
    /// When the request could not be sent or the response not read; an
    /// HTTP error status is a response.
    pub fn http_get(&self, path: &str) -> io::Result<HttpResponse> {
        http::get(self.addr(), path, API_TIMEOUT)
    }

    /// `METHOD /devstoreaccount1{path}?{query}` as an operator's tool
    /// (`az storage …`) sends it, outside any store: no body, `headers`
    /// (`x-ms-*`, `If-Match`), signed with the development account's key,
    /// every step bounded by [`API_TIMEOUT`]. To break a lease
    /// (`PUT /CONTAINER/BLOB?comp=lease` with `x-ms-lease-action: break`),
    /// delete a blob or write garbage behind a store's back.
    ///
    /// # Errors
    ///
    /// When the request could not be sent or the answer not read; an HTTP
    /// error status is an answer.
    pub fn operator(
        &self,
        method: &str,
        path: &str,
        query: &[(&str, &str)],
        headers: &[(&str, &str)],
    ) -> io::Result<OperatorResponse> {
        operator_request(self.addr(), method, path, query, headers)
    }

    /// Stops Azurite: SIGTERM to its PID (Azurite saves its metadata and
    /// exits, in a few tens of milliseconds), then SIGKILL if it has not
    /// exited after [`STOP_TIMEOUT`](super::STOP_TIMEOUT). Returns once it
    /// is reaped; the data stays until drop, but for finite leases, which a
    /// restart ends (see [Data across restarts](super#data-across-restarts)).
    pub fn stop(&mut self) -> Signaled {
        self.process.stop()
    }

    /// Kills Azurite at once (SIGKILL to its PID) and reaps it. Writes of
    /// the last [`AUTOSAVE_INTERVAL`] may be lost (see [Data across
    /// restarts](super#data-across-restarts)).
    pub fn kill(&mut self) -> Signaled {
        self.process.kill()
    }

    /// Pauses Azurite (SIGSTOP): it keeps its socket and its clients'
    /// connections but answers nothing, and its leases expire meanwhile
    /// (their expiry is an instant on the host's clock).
    pub fn pause(&mut self) -> Signaled {
        self.process.pause()
    }

    /// Lets a paused Azurite go on (SIGCONT).
    pub fn resume(&mut self) -> Signaled {
        self.process.resume()
    }

    /// Stops Azurite if it runs, starts it again on the same port and data,
    /// and waits until it answers. Every finite lease has ended then (see
    /// [Data across restarts](super#data-across-restarts)).
    ///
    /// # Errors
    ///
    /// As [`Azurite::start`]; a port taken meanwhile is an error here.
    pub fn restart(&mut self) -> Result<(), EngineError> {
        self.stop();
        self.spawn()?;
        self.wait_healthy(Instant::now() + START_TIMEOUT)
    }

    /// Azurite's command line; everything else of starting it is
    /// [`EngineProcess`]'s.
    fn spawn(&mut self) -> Result<(), EngineError> {
        let mut command = self.process.program().command("AZURITE_");
        command
            .current_dir(self.process.dir())
            .args(["--blobHost", "127.0.0.1", "--blobPort"])
            .arg(self.port.to_string())
            .arg("--location")
            .arg(self.process.data_dir())
            .args([
                "--skipApiVersionCheck",
                "--loose",
                "--disableTelemetry",
                "--silent",
            ]);
        self.process.spawn(command)
    }

    fn wait_healthy(&mut self, deadline: Instant) -> Result<(), EngineError> {
        let (instance, addr) = (self.instance(), self.addr());
        self.process
            .wait_ready(deadline, &instance, || answers(addr))
    }

    fn instance(&self) -> String {
        format!("azurite blob service ({})", self.addr())
    }
}

/// As [`Azurite::operator`], to the Blob service on `addr`.
///
/// # Errors
///
/// As [`Azurite::operator`].
pub fn operator_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    query: &[(&str, &str)],
    headers: &[(&str, &str)],
) -> io::Result<OperatorResponse> {
    operator::request(addr, method, path, query, headers, API_TIMEOUT)
}

/// Azurite's Blob service as one of the [engines](super::super): kind
/// `azblob`, store URL `azblob://regent`, the connection from
/// [`Azurite::connection_string`]. [`Engine::restart`] keeps the
/// containers and blobs but ends every finite lease, and [`Engine::kill`]
/// may lose the last seconds of writes (see [Data across
/// restarts](super#data-across-restarts)).
impl Engine for Azurite {
    /// As [`Azurite::start`].
    fn start() -> Result<Self, EngineError> {
        Azurite::start()
    }

    fn kind(&self) -> &'static str {
        "azblob"
    }

    /// `azblob://regent`: the container; the service and its key are in
    /// [`Azurite::connection_string`].
    fn store_url(&self) -> String {
        store_url(CONTAINER)
    }

    fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    fn is_healthy(&self) -> bool {
        Azurite::is_healthy(self)
    }

    fn kill(&mut self) -> Signaled {
        Azurite::kill(self)
    }

    fn pause(&mut self) -> Signaled {
        Azurite::pause(self)
    }

    fn resume(&mut self) -> Signaled {
        Azurite::resume(self)
    }

    fn stop(&mut self) -> Signaled {
        Azurite::stop(self)
    }

    fn restart(&mut self) -> Result<(), EngineError> {
        Azurite::restart(self)
    }

    fn log_tail(&self, lines: usize) -> String {
        self.process.log_tail(lines)
    }

    /// The blob lease floor: 15 s.
    fn min_ttl(&self) -> Duration {
        MIN_TTL
    }

    /// [`EXPIRY_SLACK`]: 10 ms, what Azurite was measured at. The store
    /// declares 1 s (`regent_azblob::EXPIRY_SLACK`), for Azure's front
    /// ends, whose clocks the emulator does not have; bounds built on this
    /// figure have seconds of margin.
    fn expiry_slack(&self) -> ExpirySlack {
        EXPIRY_SLACK
    }

    /// [`WATCH_DELAY`]: 1 s.
    fn watch_delay(&self) -> Duration {
        WATCH_DELAY
    }

    /// `AZURE_STORAGE_CONNECTION_STRING`: [`Azurite::connection_string`],
    /// which names the service's endpoint and the account's key.
    fn client_env(&self) -> Vec<(String, String)> {
        client_env(&self.connection_string())
    }
}

/// The variable through which a client finds Azurite (`az`, the SDKs and
/// regent's azblob store read it).
pub(super) fn client_env(connection_string: &str) -> Vec<(String, String)> {
    vec![(
        CONNECTION_STRING_VAR.to_owned(),
        connection_string.to_owned(),
    )]
}

/// Azure's variable for a storage connection string.
const CONNECTION_STRING_VAR: &str = "AZURE_STORAGE_CONNECTION_STRING";

pub(super) fn store_url(container: &str) -> String {
    format!("azblob://{container}")
}

fn blob_endpoint(addr: SocketAddr) -> String {
    format!("http://{addr}/{ACCOUNT}")
}

fn connection_string(addr: SocketAddr) -> String {
    format!(
        "DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};\
         BlobEndpoint={};",
        blob_endpoint(addr)
    )
}

/// Whether the Blob service on `addr` answers the readiness probe with any
/// status.
fn answers(addr: SocketAddr) -> bool {
    http::get(addr, READY_PATH, STATUS_TIMEOUT).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_string_names_the_dev_account_and_the_endpoint() {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, 10123));
        assert_eq!(
            connection_string(addr),
            "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;\
             AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;\
             BlobEndpoint=http://127.0.0.1:10123/devstoreaccount1;"
        );
        assert_eq!(store_url("t7-x"), "azblob://t7-x");
    }
}
