//! The rustls configuration the HTTP client speaks TLS with: ring as the
//! crypto provider, the CAs the store is told to trust (or the system's),
//! and the client certificate, if any.

use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// A client configuration trusting `ca_pem` (PEM, one or more
/// certificates) or, without it, the system's trust store, and presenting
/// `identity` (certificate and key PEM) if given. Without `tls` nothing is
/// trusted: the client then only speaks plain HTTP.
///
/// # Errors
///
/// The rule broken, in words, for a `Config` error.
pub(crate) fn client_config(
    tls: bool,
    ca_pem: Option<&[u8]>,
    identity: Option<(&[u8], &[u8])>,
) -> Result<rustls::ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    match ca_pem {
        Some(pem) => {
            let certs = CertificateDer::pem_slice_iter(pem)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("the CA certificate PEM cannot be read ({e})"))?;
            if certs.is_empty() {
                return Err("the CA certificate PEM holds no CERTIFICATE block".into());
            }
            for cert in certs {
                roots
                    .add(cert)
                    .map_err(|e| format!("the CA certificate is not usable ({e})"))?;
            }
        }
        None if tls => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(
                    "TLS without a CA certificate trusts the system's trust store, which holds \
                     no usable certificate here; give the CA certificate (CONSUL_CACERT)"
                        .into(),
                );
            }
        }
        None => {}
    }
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS cannot be set up ({e})"))?
        .with_root_certificates(roots);
    let config = match identity {
        None => builder.with_no_client_auth(),
        Some((cert_pem, key_pem)) => {
            let certs = CertificateDer::pem_slice_iter(cert_pem)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("the client certificate PEM cannot be read ({e})"))?;
            if certs.is_empty() {
                return Err("the client certificate PEM holds no CERTIFICATE block".into());
            }
            // The key's own error could quote nothing secret, but say
            // nothing of it all the same.
            let key = PrivateKeyDer::from_pem_slice(key_pem)
                .map_err(|_| "the client key PEM holds no usable PRIVATE KEY block".to_owned())?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(|e| format!("the client certificate and key do not fit ({e})"))?
        }
    };
    Ok(config)
}
