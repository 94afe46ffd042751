//! TLS to the server: rustls (ring as the crypto provider, as the other
//! stores) behind tokio-postgres, with libpq's three levels of checking
//! the server — none (`sslmode=require`), its certificate's chain
//! (`verify-ca`), and its chain and name (`verify-full`) — and a client
//! certificate if one is given.
//!
//! Whether a connection speaks TLS at all is its
//! [`Config`](tokio_postgres::Config)'s `ssl_mode` (`Disable`, `Prefer`,
//! `Require`); [`Tls`] says how it checks the server when it does.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;

use futures_util::Stream;
use regent_core::{ErrorKind, StoreError};
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres::{AsyncMessage, Client};
use tokio_postgres_rustls::MakeRustlsConnect;

/// How the store checks the server's certificate when a connection speaks
/// TLS (its [`Config`](tokio_postgres::Config)'s `ssl_mode` is `Prefer` or
/// `Require`), and the client certificate it shows, if any. libpq's
/// `sslmode` in these terms:
///
/// | `sslmode` | `ssl_mode` | `Tls` |
/// |---|---|---|
/// | `disable` | `Disable` | (unused) |
/// | `allow`, `prefer` | `Prefer` | [`Tls::unverified`] |
/// | `require` | `Require` | [`Tls::unverified`] (with a root certificate: [`Tls::verify_ca`]) |
/// | `verify-ca` | `Require` | [`Tls::verify_ca`] |
/// | `verify-full` | `Require` | [`Tls::verify_full`], [`Tls::verify_full_system`] |
///
/// Only `verify-full` stops a machine in the middle that holds a
/// certificate of the same CA, and only `verify-ca` or `verify-full` one
/// that holds any certificate at all. The default is
/// [`Tls::unverified`], as libpq's.
///
/// ```no_run
/// # fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use regent_postgres::{Config, PostgresStore, SslMode, Tls};
///
/// let mut config: Config = "postgres://app@db.internal/app".parse()?;
/// config.ssl_mode(SslMode::Require);
/// let ca_pem = std::fs::read("/etc/regent/db-ca.pem")?;
/// let builder = PostgresStore::builder(config).tls(Tls::verify_full(&ca_pem)?);
/// # drop(builder); Ok(()) }
/// ```
#[derive(Clone)]
pub struct Tls {
    check: Check,
    identity: Option<Identity>,
}

/// A client certificate chain and its key.
struct Identity {
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

impl Clone for Identity {
    fn clone(&self) -> Self {
        Self {
            chain: self.chain.clone(),
            key: self.key.clone_key(),
        }
    }
}

#[derive(Clone)]
enum Check {
    Nothing,
    Chain(Arc<RootCertStore>),
    ChainAndName(Arc<RootCertStore>),
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The key stays out of logs.
        let check = match &self.check {
            Check::Nothing => "unverified",
            Check::Chain(_) => "verify-ca",
            Check::ChainAndName(_) => "verify-full",
        };
        f.debug_struct("Tls")
            .field("check", &check)
            .field("client_certificate", &self.identity.is_some())
            .finish()
    }
}

impl Default for Tls {
    /// [`Tls::unverified`].
    fn default() -> Self {
        Self::unverified()
    }
}

fn config_error(what: impl Into<String>) -> StoreError {
    StoreError::new(
        ErrorKind::Config,
        format!("postgres store: {}", what.into()),
    )
}

/// The certificates of a PEM text, at least one.
fn certificates(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, StoreError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| config_error(format!("{what} cannot be read as PEM ({e})")))?;
    if certs.is_empty() {
        return Err(config_error(format!("{what} holds no CERTIFICATE block")));
    }
    Ok(certs)
}

fn roots(ca_pem: &[u8]) -> Result<Arc<RootCertStore>, StoreError> {
    let mut roots = RootCertStore::empty();
    for cert in certificates(ca_pem, "the root certificate")? {
        roots
            .add(cert)
            .map_err(|e| config_error(format!("the root certificate is not usable ({e})")))?;
    }
    Ok(Arc::new(roots))
}

impl Tls {
    /// TLS with no check of the server: the link is encrypted, but any
    /// server that answers is believed (libpq's `require`, `prefer`).
    pub fn unverified() -> Self {
        Self {
            check: Check::Nothing,
            identity: None,
        }
    }

    /// The server's certificate must chain to a certificate of `ca_pem`
    /// (PEM, one or more); its name is not checked (libpq's `verify-ca`).
    ///
    /// # Errors
    ///
    /// `Config` if `ca_pem` holds no usable certificate.
    pub fn verify_ca(ca_pem: &[u8]) -> Result<Self, StoreError> {
        Ok(Self {
            check: Check::Chain(roots(ca_pem)?),
            identity: None,
        })
    }

    /// The server's certificate must chain to a certificate of `ca_pem`
    /// and name the host connected to (libpq's `verify-full`).
    ///
    /// # Errors
    ///
    /// `Config` if `ca_pem` holds no usable certificate.
    pub fn verify_full(ca_pem: &[u8]) -> Result<Self, StoreError> {
        Ok(Self {
            check: Check::ChainAndName(roots(ca_pem)?),
            identity: None,
        })
    }

    /// As [`verify_full`](Self::verify_full), trusting the system's
    /// certificate authorities (libpq's `sslrootcert=system`).
    ///
    /// # Errors
    ///
    /// `Config` if the system's trust store holds no usable certificate.
    pub fn verify_full_system() -> Result<Self, StoreError> {
        let found = rustls_native_certs::load_native_certs();
        let mut roots = RootCertStore::empty();
        let (added, _) = roots.add_parsable_certificates(found.certs);
        if added == 0 {
            return Err(config_error(
                "sslrootcert=system: the system's trust store holds no usable certificate",
            ));
        }
        Ok(Self {
            check: Check::ChainAndName(Arc::new(roots)),
            identity: None,
        })
    }

    /// Shows the client certificate `cert_pem` (PEM, the chain from the
    /// client's certificate up) with its key `key_pem`, for servers that
    /// ask for one (`clientcert=verify-ca` or `cert` in `pg_hba.conf`).
    ///
    /// # Errors
    ///
    /// `Config` if either does not hold what it should.
    pub fn client_certificate(
        mut self,
        cert_pem: &[u8],
        key_pem: &[u8],
    ) -> Result<Self, StoreError> {
        let chain = certificates(cert_pem, "the client certificate")?;
        // The key's own error could quote nothing secret, but say nothing
        // of it all the same.
        let key = PrivateKeyDer::from_pem_slice(key_pem)
            .map_err(|_| config_error("the client key holds no usable PRIVATE KEY block"))?;
        self.identity = Some(Identity { chain, key });
        Ok(self)
    }

    /// The connector tokio-postgres takes.
    pub(crate) fn connector(&self) -> Result<MakeRustlsConnect, StoreError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier: Arc<dyn ServerCertVerifier> = match &self.check {
            Check::Nothing => Arc::new(Lenient {
                provider: provider.clone(),
                chain: None,
            }),
            Check::Chain(roots) => Arc::new(Lenient {
                provider: provider.clone(),
                chain: Some(webpki(roots, &provider)?),
            }),
            Check::ChainAndName(roots) => webpki(roots, &provider)?,
        };
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| config_error(format!("TLS cannot be set up ({e})")))?
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let config = match &self.identity {
            None => builder.with_no_client_auth(),
            Some(id) => builder
                .with_client_auth_cert(id.chain.clone(), id.key.clone_key())
                .map_err(|e| {
                    config_error(format!("the client certificate and key do not fit ({e})"))
                })?,
        };
        Ok(MakeRustlsConnect::new(config))
    }
}

fn webpki(
    roots: &Arc<RootCertStore>,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<WebPkiServerVerifier>, StoreError> {
    WebPkiServerVerifier::builder_with_provider(roots.clone(), provider.clone())
        .build()
        .map_err(|e| config_error(format!("TLS cannot check the server ({e})")))
}

/// libpq's `require` (`chain` is `None`: any certificate) and
/// `verify-ca` (the chain, its dates and usage checked as for
/// `verify-full`, but a certificate for another name passes). The
/// handshake's signatures are checked either way: they prove the server
/// holds the key of the certificate it showed, which channel binding
/// relies on.
#[derive(Debug)]
struct Lenient {
    provider: Arc<CryptoProvider>,
    chain: Option<Arc<WebPkiServerVerifier>>,
}

impl ServerCertVerifier for Lenient {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        // rustls checks the name last, once the chain has passed.
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.provider.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.provider.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// What a connection sends on its own: notifications, notices, and the
/// end of the connection. Polling it drives the connection.
pub(crate) type Messages =
    Pin<Box<dyn Stream<Item = Result<AsyncMessage, tokio_postgres::Error>> + Send>>;

/// A connection to the server `config` names, TLS as its `ssl_mode` and
/// `tls` say.
pub(crate) async fn connect(
    config: &tokio_postgres::Config,
    tls: &MakeRustlsConnect,
) -> Result<(Client, Messages), tokio_postgres::Error> {
    let (client, mut connection) = config.connect(tls.clone()).await?;
    let messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
    Ok((client, Box::pin(messages)))
}
