//! [`EtcdStoreBuilder`]: the store's settings (endpoints, user, request
//! timeout, namespace and, with the `tls` feature, TLS) and `connect`, which
//! checks them and makes an [`EtcdStore`].

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client::{Client, ConnectOptions};
use regent_core::{ErrorKind, StoreError};

use crate::client::EtcdStore;
use crate::error::{Scope, etcd_error};
#[cfg(feature = "tls")]
use crate::pem::{PemLabel, pem_labels};

/// How long one request may take before it fails as
/// [`Unavailable`](regent_core::ErrorKind::Unavailable), unless set with
/// [`EtcdStoreBuilder::request_timeout`].
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Builds an [`EtcdStore`]: [`EtcdStore::builder`], setters, then
/// [`connect`](Self::connect).
#[derive(Clone)]
#[must_use]
pub struct EtcdStoreBuilder {
    endpoints: Vec<String>,
    user: Option<(String, String)>,
    request_timeout: Duration,
    namespace: String,
    #[cfg(feature = "tls")]
    tls: Option<etcd_client::TlsOptions>,
    /// The first TLS setter given a PEM text that cannot be what it should,
    /// as the rule `connect` reports broken.
    #[cfg(feature = "tls")]
    tls_problem: Option<&'static str>,
}

impl fmt::Debug for EtcdStoreBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut f = f.debug_struct("EtcdStoreBuilder");
        f.field("endpoints", &self.endpoints)
            .field("user", &self.user.as_ref().map(|(u, _)| u))
            .field("request_timeout", &self.request_timeout)
            .field("namespace", &self.namespace);
        #[cfg(feature = "tls")]
        f.field("tls", &self.tls.is_some());
        f.finish()
    }
}

impl EtcdStoreBuilder {
    /// Authenticates as `user` with `password` (etcd's `--user`).
    pub fn user(mut self, user: impl Into<String>, password: impl Into<String>) -> Self {
        self.user = Some((user.into(), password.into()));
        self
    }

    /// How long one request may take (default
    /// [`DEFAULT_REQUEST_TIMEOUT`]). Keep it below the renew deadline.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// A string put before every election name (default: none). Election
    /// `jobs` in namespace `/svc/` lives under `/svc/jobs/`; to share it with
    /// `etcdctl elect`, run `etcdctl elect /svc/jobs …`.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = namespace.into();
        self
    }

    /// Speaks TLS to etcd, trusting the CA certificate `ca_pem` (PEM, etcd's
    /// `--cacert`). It is the only CA trusted unless
    /// [`tls_system_roots`](Self::tls_system_roots) adds the system's.
    /// Endpoints without a scheme then use `https://`.
    #[cfg(feature = "tls")]
    pub fn tls_ca_pem(mut self, ca_pem: impl AsRef<[u8]>) -> Self {
        if !pem_labels(ca_pem.as_ref())
            .iter()
            .any(PemLabel::is_certificate)
        {
            self.tls_problem
                .get_or_insert("the TLS CA PEM must hold a certificate");
        }
        let tls = self.tls.take().unwrap_or_default();
        self.tls = Some(tls.ca_certificate(etcd_client::Certificate::from_pem(ca_pem)));
        self
    }

    /// Speaks TLS to etcd, trusting the certificates of the system's trust
    /// store, as etcdctl does without `--cacert`: for a managed etcd or one
    /// whose certificate a CA installed on the host signed. Endpoints
    /// without a scheme then use `https://`.
    ///
    /// With [`tls_ca_pem`](Self::tls_ca_pem) as well, both are trusted. The
    /// store is read at [`connect`](Self::connect), by rustls-native-certs:
    /// on Linux and the BSDs the files OpenSSL uses (`/etc/ssl/certs`), on
    /// macOS the keychains, on Windows the system store. When
    /// `SSL_CERT_FILE` or `SSL_CERT_DIR` is set, the certificates there
    /// (PEM) replace the platform's. A trust store without any certificate
    /// fails `connect` with [`ErrorKind::Config`] ("no native certs found"),
    /// even with `tls_ca_pem`.
    #[cfg(feature = "tls")]
    pub fn tls_system_roots(mut self) -> Self {
        let tls = self.tls.take().unwrap_or_default();
        self.tls = Some(tls.with_native_roots());
        self
    }

    /// Presents a client certificate (etcd's `--client-cert-auth`): `cert_pem`
    /// and its private key `key_pem`, both PEM.
    #[cfg(feature = "tls")]
    pub fn tls_client_identity_pem(
        mut self,
        cert_pem: impl AsRef<[u8]>,
        key_pem: impl AsRef<[u8]>,
    ) -> Self {
        if !pem_labels(cert_pem.as_ref())
            .iter()
            .any(PemLabel::is_certificate)
        {
            self.tls_problem
                .get_or_insert("the TLS client certificate PEM must hold a certificate");
        }
        if !pem_labels(key_pem.as_ref())
            .iter()
            .any(PemLabel::is_private_key)
        {
            self.tls_problem
                .get_or_insert("the TLS client key PEM must hold a private key");
        }
        let tls = self.tls.take().unwrap_or_default();
        self.tls = Some(tls.identity(etcd_client::Identity::from_pem(cert_pem, key_pem)));
        self
    }

    /// The name the server certificate must carry, when it differs from the
    /// endpoint's host.
    #[cfg(feature = "tls")]
    pub fn tls_domain_name(mut self, name: impl Into<String>) -> Self {
        let tls = self.tls.take().unwrap_or_default();
        self.tls = Some(tls.domain_name(name));
        self
    }

    /// Connects. Without a user this does not wait for the cluster: an
    /// unreachable cluster shows as [`Unavailable`](ErrorKind::Unavailable)
    /// errors of the store's calls. With a user it authenticates at once.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Config`] for no endpoints, a malformed endpoint, a zero
    /// request timeout, TLS settings that cannot be used (a PEM text without
    /// its certificate or key, a key that does not match its certificate,
    /// an invalid server name, `tls_system_roots` with no certificate in
    /// the system's trust store) and, with a user, a server certificate
    /// that fails verification; [`ErrorKind::Auth`] for refused credentials;
    /// [`ErrorKind::Unavailable`] when authenticating could not reach the
    /// cluster. See the [crate docs](crate#tls-and-authentication).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: nothing is written.
    pub async fn connect(self) -> Result<EtcdStore, StoreError> {
        let endpoints = self.endpoints.join(",");
        if self.endpoints.is_empty() {
            return Err(StoreError::new(
                ErrorKind::Config,
                "etcd store: at least one endpoint is required",
            ));
        }
        if self.request_timeout.is_zero() {
            return Err(StoreError::new(
                ErrorKind::Config,
                "etcd store: the request timeout must be greater than zero",
            ));
        }
        #[cfg(feature = "tls")]
        if let Some(rule) = self.tls_problem {
            return Err(StoreError::new(
                ErrorKind::Config,
                format!("etcd store: {rule}"),
            ));
        }
        let mut options = ConnectOptions::new()
            .with_connect_timeout(self.request_timeout)
            // A member cut off from its cluster's leader fails requests at
            // once instead of serving stale reads and hanging watches.
            .with_require_leader(true)
            // Detects a dead connection under an open watch. etcd's default
            // --grpc-keepalive-min-time is 5 s: pinging more often is refused.
            .with_keep_alive(Duration::from_secs(10), self.request_timeout);
        // etcd-client speaks TLS with TLS settings, and to `https://`
        // endpoints (which fail without the `tls` feature).
        let tls = self.endpoints.iter().any(|e| e.starts_with("https://"));
        #[cfg(feature = "tls")]
        let tls = tls || self.tls.is_some();
        #[cfg(feature = "tls")]
        if let Some(settings) = self.tls {
            options = options.with_tls(settings);
        }
        // Errors name the user, never the password.
        let what = match &self.user {
            Some((user, _)) => format!("connect to etcd at {endpoints} as user '{user}'"),
            None => format!("connect to etcd at {endpoints}"),
        };
        if let Some((user, password)) = self.user {
            options = options
                .with_user(user, password)
                .with_auto_token_refresh(true);
        }
        let connect = Client::connect(&self.endpoints, Some(options));
        let client = match tokio::time::timeout(self.request_timeout, connect).await {
            Ok(Ok(client)) => client,
            Ok(Err(e)) => return Err(etcd_error(what, e, Scope { tls, prefix: None })),
            Err(_) => {
                return Err(StoreError::unavailable(format!(
                    "{what}: no answer within {:?}",
                    self.request_timeout
                )));
            }
        };
        Ok(EtcdStore {
            client,
            namespace: self.namespace.into(),
            endpoints: endpoints.into(),
            request_timeout: self.request_timeout,
            tls,
            undelivered: Arc::new(Mutex::new(Vec::new())),
            sessions: Arc::default(),
            reads: Arc::default(),
        })
    }
}

impl EtcdStore {
    /// Starts building a store for the cluster at `endpoints`
    /// (`"127.0.0.1:2379"` or `"http://127.0.0.1:2379"`).
    pub fn builder<E: Into<String>>(endpoints: impl IntoIterator<Item = E>) -> EtcdStoreBuilder {
        EtcdStoreBuilder {
            endpoints: endpoints.into_iter().map(Into::into).collect(),
            user: None,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            namespace: String::new(),
            #[cfg(feature = "tls")]
            tls: None,
            #[cfg(feature = "tls")]
            tls_problem: None,
        }
    }

    /// Connects to the cluster at `endpoints` with default settings.
    ///
    /// This does not wait for the cluster: against a closed port it
    /// succeeds, and the store's calls then fail as
    /// [`Unavailable`](ErrorKind::Unavailable). To learn at once, within a
    /// bound, call [`regent_core::store::check`] on the store.
    ///
    /// # Errors
    ///
    /// As [`EtcdStoreBuilder::connect`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: nothing is written.
    pub async fn connect<E: Into<String>>(
        endpoints: impl IntoIterator<Item = E>,
    ) -> Result<Self, StoreError> {
        Self::builder(endpoints).connect().await
    }
}
