//! Test certificates for any engine with TLS: a CA, a server certificate
//! for `127.0.0.1` and `localhost`, a client certificate, and a second,
//! untrusted CA with a client certificate of its own, made with rcgen (ring,
//! as rustls in the store clients uses) and written as PEM files into a
//! directory.
//!
//! ```
//! use regent_testkit::pki::TlsFiles;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let files = TlsFiles::generate(&dir.path().join("tls"))?;
//! let ca = std::fs::read_to_string(files.ca_cert()).unwrap();
//! assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"));
//! # Ok::<(), regent_testkit::pki::PkiError>(())
//! ```

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

/// Why the test certificates could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PkiError {
    /// rcgen refused to make a key or a certificate.
    #[error("could not generate test certificates")]
    Generate(#[source] rcgen::Error),
    /// A directory or a PEM file could not be written.
    #[error("could not write test certificates to {}", path.display())]
    Write {
        /// The file or directory.
        path: PathBuf,
        /// Why writing failed.
        #[source]
        source: io::Error,
    },
}

/// The certificates and keys of a test PKI: PEM files in one directory,
/// which the caller owns (an engine's temporary directory).
///
/// Two unrelated certificate authorities: the test CA, which signed the
/// server's and the client's certificates (the one the engine trusts for
/// client certificates), and an *other* CA that signed nothing the engine
/// trusts, for "untrusted" cases: a client that trusts only the other CA
/// must refuse the server, and the other client certificate must be refused
/// by an engine that requires client certificates.
///
/// Keys are ECDSA P-256 in PKCS#8. The server certificate names
/// `IP:127.0.0.1` and `DNS:localhost` and may serve as a client certificate
/// too (etcd's gRPC gateway dials its own client port with it); the client
/// certificates' common name is [`TlsFiles::CLIENT_COMMON_NAME`].
#[derive(Debug, Clone)]
pub struct TlsFiles {
    ca_cert: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
    other_ca_cert: PathBuf,
    other_client_cert: PathBuf,
    other_client_key: PathBuf,
}

impl TlsFiles {
    /// The common name of both client certificates. It names no user of
    /// any engine the kit configures (etcd, for one, takes the common name
    /// of a verified client certificate as the user when a request carries
    /// no token).
    pub const CLIENT_COMMON_NAME: &str = "regent-test-client";

    /// The common name of the server certificate.
    pub const SERVER_COMMON_NAME: &str = "regent test server";

    /// Makes a fresh PKI and writes it into `dir` (created if missing):
    /// `ca.pem`, `server.pem`, `server-key.pem`, `client.pem`,
    /// `client-key.pem`, `other-ca.pem`, `other-client.pem`,
    /// `other-client-key.pem`.
    ///
    /// # Errors
    ///
    /// [`PkiError::Generate`] if rcgen fails, [`PkiError::Write`] if a
    /// file cannot be written.
    pub fn generate(dir: &Path) -> Result<Self, PkiError> {
        let files = Self {
            ca_cert: dir.join("ca.pem"),
            server_cert: dir.join("server.pem"),
            server_key: dir.join("server-key.pem"),
            client_cert: dir.join("client.pem"),
            client_key: dir.join("client-key.pem"),
            other_ca_cert: dir.join("other-ca.pem"),
            other_client_cert: dir.join("other-client.pem"),
            other_client_key: dir.join("other-client-key.pem"),
        };
        let generated = Generated::new().map_err(PkiError::Generate)?;
        fs::create_dir_all(dir).map_err(|source| PkiError::Write {
            path: dir.to_owned(),
            source,
        })?;
        let write = |path: &Path, pem: &str| {
            fs::write(path, pem).map_err(|source| PkiError::Write {
                path: path.to_owned(),
                source,
            })
        };
        write(&files.ca_cert, &generated.ca_cert)?;
        write(&files.server_cert, &generated.server.0)?;
        write(&files.server_key, &generated.server.1)?;
        write(&files.client_cert, &generated.client.0)?;
        write(&files.client_key, &generated.client.1)?;
        write(&files.other_ca_cert, &generated.other_ca_cert)?;
        write(&files.other_client_cert, &generated.other_client.0)?;
        write(&files.other_client_key, &generated.other_client.1)?;
        Ok(files)
    }

    /// The test CA's certificate: trust it to verify the server.
    pub fn ca_cert(&self) -> &Path {
        &self.ca_cert
    }

    /// The server's certificate, signed by the test CA.
    pub fn server_cert(&self) -> &Path {
        &self.server_cert
    }

    /// The server's private key.
    pub fn server_key(&self) -> &Path {
        &self.server_key
    }

    /// A client certificate signed by the test CA.
    pub fn client_cert(&self) -> &Path {
        &self.client_cert
    }

    /// The private key of [`TlsFiles::client_cert`].
    pub fn client_key(&self) -> &Path {
        &self.client_key
    }

    /// The certificate of a CA unrelated to the server: a client trusting
    /// only this one cannot verify the server.
    pub fn other_ca_cert(&self) -> &Path {
        &self.other_ca_cert
    }

    /// A client certificate signed by the other CA, which the server does
    /// not trust.
    pub fn other_client_cert(&self) -> &Path {
        &self.other_client_cert
    }

    /// The private key of [`TlsFiles::other_client_cert`].
    pub fn other_client_key(&self) -> &Path {
        &self.other_client_key
    }
}

/// The PEM texts: certificates, and (certificate, key) pairs.
struct Generated {
    ca_cert: String,
    server: (String, String),
    client: (String, String),
    other_ca_cert: String,
    other_client: (String, String),
}

impl Generated {
    fn new() -> Result<Self, rcgen::Error> {
        let ca = new_ca("regent test CA")?;
        let other_ca = new_ca("regent other test CA")?;
        let server = leaf(
            &ca,
            TlsFiles::SERVER_COMMON_NAME,
            vec!["127.0.0.1".into(), "localhost".into()],
            // etcd 3.4's gRPC gateway dials its own client port with the
            // server certificate, as a client when client certificates are
            // required.
            vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        )?;
        let client = |issuer| {
            leaf(
                issuer,
                TlsFiles::CLIENT_COMMON_NAME,
                Vec::new(),
                vec![ExtendedKeyUsagePurpose::ClientAuth],
            )
        };
        Ok(Self {
            ca_cert: ca.pem(),
            server,
            client: client(&ca)?,
            other_ca_cert: other_ca.pem(),
            other_client: client(&other_ca)?,
        })
    }
}

fn new_ca(name: &str) -> Result<CertifiedIssuer<'static, KeyPair>, rcgen::Error> {
    let mut params = CertificateParams::new(Vec::new())?;
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    CertifiedIssuer::self_signed(params, KeyPair::generate()?)
}

/// A certificate signed by `issuer` and its key, both PEM.
fn leaf(
    issuer: &CertifiedIssuer<'static, KeyPair>,
    common_name: &str,
    subject_alt_names: Vec<String>,
    extended_key_usages: Vec<ExtendedKeyUsagePurpose>,
) -> Result<(String, String), rcgen::Error> {
    let mut params = CertificateParams::new(subject_alt_names)?;
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = extended_key_usages;
    params.use_authority_key_identifier_extension = true;
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_every_file_as_pem_and_two_unrelated_cas() {
        let dir = tempfile::tempdir().unwrap();
        let files = TlsFiles::generate(&dir.path().join("nested/tls")).unwrap();
        let read = |path: &Path| fs::read_to_string(path).unwrap();
        for cert in [
            files.ca_cert(),
            files.server_cert(),
            files.client_cert(),
            files.other_ca_cert(),
            files.other_client_cert(),
        ] {
            assert!(read(cert).starts_with("-----BEGIN CERTIFICATE-----"));
            assert!(cert.starts_with(dir.path()));
        }
        for key in [
            files.server_key(),
            files.client_key(),
            files.other_client_key(),
        ] {
            assert!(read(key).starts_with("-----BEGIN PRIVATE KEY-----"));
        }
        assert_ne!(read(files.ca_cert()), read(files.other_ca_cert()));
        assert_ne!(read(files.client_cert()), read(files.other_client_cert()));
    }

    #[test]
    fn an_unwritable_directory_is_a_write_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a-file");
        fs::write(&file, "").unwrap();
        let err = TlsFiles::generate(&file.join("tls")).unwrap_err();
        assert!(matches!(&err, PkiError::Write { path, .. } if path == &file.join("tls")));
    }
}
