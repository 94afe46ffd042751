//! Test certificates for a secured etcd member, made at start time with
//! rcgen (ring, as etcd-client's rustls uses) and written as PEM files into
//! the member's temporary directory.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

use super::super::EngineError;

/// The certificates and keys of a secured member (PEM files in its
/// temporary directory, removed on drop), from [`Etcd::tls_files`].
///
/// Two unrelated certificate authorities: the test CA, which signed the
/// server's and the client's certificates (etcd's `--trusted-ca-file`), and
/// an *other* CA that signed nothing etcd trusts, for "untrusted" cases: a
/// client that trusts only the other CA must refuse the server, and the
/// other client certificate must be refused by a member that requires
/// client certificates.
///
/// Keys are ECDSA P-256 in PKCS#8. The server certificate names
/// `IP:127.0.0.1` and `DNS:localhost`; the client certificate's common name
/// is [`EtcdTlsFiles::CLIENT_COMMON_NAME`], which names no etcd user (etcd
/// takes the common name of a verified client certificate as the user when
/// a request carries no token).
///
/// [`Etcd::tls_files`]: super::Etcd::tls_files
#[derive(Debug, Clone)]
pub struct EtcdTlsFiles {
    ca_cert: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
    other_ca_cert: PathBuf,
    other_client_cert: PathBuf,
    other_client_key: PathBuf,
}

impl EtcdTlsFiles {
    /// The common name of both client certificates.
    pub const CLIENT_COMMON_NAME: &str = "regent-test-client";

    /// The test CA's certificate: trust it to verify the server.
    pub fn ca_cert(&self) -> &Path {
        &self.ca_cert
    }

    /// The server's certificate (etcd's `--cert-file`), signed by the test
    /// CA.
    pub fn server_cert(&self) -> &Path {
        &self.server_cert
    }

    /// The server's private key (etcd's `--key-file`).
    pub fn server_key(&self) -> &Path {
        &self.server_key
    }

    /// A client certificate signed by the test CA.
    pub fn client_cert(&self) -> &Path {
        &self.client_cert
    }

    /// The private key of [`EtcdTlsFiles::client_cert`].
    pub fn client_key(&self) -> &Path {
        &self.client_key
    }

    /// The certificate of a CA unrelated to the member: a client trusting
    /// only this one cannot verify the server.
    pub fn other_ca_cert(&self) -> &Path {
        &self.other_ca_cert
    }

    /// A client certificate signed by the other CA, which the member does
    /// not trust.
    pub fn other_client_cert(&self) -> &Path {
        &self.other_client_cert
    }

    /// The private key of [`EtcdTlsFiles::other_client_cert`].
    pub fn other_client_key(&self) -> &Path {
        &self.other_client_key
    }

    /// Makes the certificates and writes them into `dir` (created if
    /// missing).
    pub(super) fn generate(dir: &Path) -> Result<Self, EngineError> {
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
        let generated = Generated::new().map_err(|e| EngineError::Io {
            action: "generate test certificates for etcd",
            source: io::Error::other(e),
        })?;
        let write = |path: &Path, pem: &str| {
            fs::write(path, pem).map_err(|source| EngineError::Io {
                action: "write test certificates for etcd",
                source,
            })
        };
        fs::create_dir_all(dir).map_err(|source| EngineError::Io {
            action: "write test certificates for etcd",
            source,
        })?;
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
            "regent test etcd",
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
                EtcdTlsFiles::CLIENT_COMMON_NAME,
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
