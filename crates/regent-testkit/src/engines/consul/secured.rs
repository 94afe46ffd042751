//! Secured dev agents: HTTPS with the kit's test PKI, ACLs with tokens the
//! kit makes ([`ConsulBuilder`]). See [the module](super#secured-dev-agents).
//!
//! [`ConsulBuilder`]: super::ConsulBuilder

use std::fmt;
use std::fs::File;
use std::io::{self, Read as _};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use super::super::error::EngineError;
use super::super::http;
use super::timeouts::API_TIMEOUT;

/// The certificates and keys of an agent with TLS, from
/// [`Consul::tls_files`]: the kit's generic test PKI, with Consul's
/// `ca_file` the test CA and `cert_file`/`key_file` the server's
/// certificate and key (valid for `127.0.0.1` and `localhost`).
///
/// [`Consul::tls_files`]: super::Consul::tls_files
pub type ConsulTlsFiles = crate::pki::TlsFiles;

/// The name of the policy of [`ConsulAcl::token`].
pub const ELECTION_POLICY: &str = "regent-election";

/// The name of the policy of [`ConsulAcl::read_only_token`].
pub const READ_ONLY_POLICY: &str = "regent-read-only";

/// HTTPS on a dev agent started by [`ConsulBuilder`].
///
/// [`ConsulBuilder`]: super::ConsulBuilder
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConsulTls {
    /// The agent serves HTTPS with a server certificate signed by the test
    /// CA (`cert_file`, `key_file`); clients need not present one.
    Server,
    /// As [`ConsulTls::Server`], and every HTTPS client must present a
    /// certificate signed by the test CA (`verify_incoming_https`).
    ClientCert,
}

/// The ACL tokens of a dev agent started with [`ConsulBuilder::acl`]: the
/// master token, a token for elections under [`ConsulAcl::key_prefix`] and
/// a read-only one. Each is a `SecretID` (a UUID) the kit chose at random,
/// the same across [`Consul::restart`]. `Debug` shows none of them.
///
/// [`ConsulBuilder::acl`]: super::ConsulBuilder::acl
/// [`Consul::restart`]: super::Consul::restart
#[derive(Clone)]
pub struct ConsulAcl {
    key_prefix: String,
    master: String,
    election: Token,
    read_only: Token,
}

/// A token the kit creates: its `AccessorID` and `SecretID`.
#[derive(Clone)]
struct Token {
    accessor: String,
    secret: String,
}

impl Token {
    fn random() -> Result<Self, EngineError> {
        Ok(Self {
            accessor: random_uuid()?,
            secret: random_uuid()?,
        })
    }
}

impl fmt::Debug for ConsulAcl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConsulAcl")
            .field("key_prefix", &self.key_prefix)
            .field("tokens", &"***")
            .finish()
    }
}

impl ConsulAcl {
    /// The key prefix [`ConsulAcl::token`] may write and
    /// [`ConsulAcl::read_only_token`] may read.
    pub fn key_prefix(&self) -> &str {
        &self.key_prefix
    }

    /// The master token (`acl.tokens.master`, also the agent's own token):
    /// may do anything. The kit's own requests carry it.
    pub fn master_token(&self) -> &str {
        &self.master
    }

    /// A token for regent's elections under the key prefix, with the policy
    /// [`ELECTION_POLICY`]: `key_prefix "PREFIX"` write, `session_prefix ""`
    /// write, `agent_prefix ""` read (the agent's node name, regent's
    /// default holder id). Nothing else: other keys, nodes and services
    /// stay denied.
    pub fn token(&self) -> &str {
        &self.election.secret
    }

    /// A token that may read what [`ConsulAcl::token`] may write, and
    /// write nothing, with the policy [`READ_ONLY_POLICY`]: `key_prefix
    /// "PREFIX"`, `session_prefix ""` and `agent_prefix ""` read. It sees
    /// an election's leader but cannot create a session.
    pub fn read_only_token(&self) -> &str {
        &self.read_only.secret
    }
}

/// How a dev agent is secured; the default is not at all.
#[derive(Default)]
pub(super) struct Security {
    pub(super) tls: Option<(ConsulTls, ConsulTlsFiles)>,
    pub(super) acl: Option<ConsulAcl>,
    /// `secured.hcl` in the agent's directory, holding [`Security::hcl`]
    /// (a file rather than `-hcl` arguments: `ps` shows no master token).
    config_file: Option<PathBuf>,
}

impl fmt::Debug for Security {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Security")
            .field("tls", &self.tls)
            .field("acl", &self.acl)
            .field("config_file", &self.config_file)
            .finish()
    }
}

impl Security {
    /// Certificates in `dir/tls` and random tokens, as asked.
    pub(super) fn new(
        dir: &Path,
        tls: Option<ConsulTls>,
        key_prefix: Option<String>,
    ) -> Result<Self, EngineError> {
        let tls = match tls {
            Some(mode) => Some((mode, ConsulTlsFiles::generate(&dir.join("tls"))?)),
            None => None,
        };
        let acl = match key_prefix {
            Some(key_prefix) => Some(ConsulAcl {
                key_prefix,
                master: random_uuid()?,
                election: Token::random()?,
                read_only: Token::random()?,
            }),
            None => None,
        };
        let mut security = Self {
            tls,
            acl,
            config_file: None,
        };
        let hcl = security.hcl();
        if !hcl.is_empty() {
            let path = dir.join("secured.hcl");
            let mut text = hcl.join("\n");
            text.push('\n');
            std::fs::write(&path, text).map_err(|source| EngineError::Io {
                action: "write the configuration of a secured Consul agent",
                source,
            })?;
            security.config_file = Some(path);
        }
        Ok(security)
    }

    /// The agent's arguments for TLS and ACLs: `-config-file` of its
    /// settings, if any (the HTTPS port is in [`Ports`]).
    ///
    /// [`Ports`]: super::agent::Ports
    pub(super) fn args(&self) -> Vec<String> {
        self.config_file
            .iter()
            .map(|path| format!("-config-file={}", path.display()))
            .collect()
    }

    /// The master token, which the kit's own requests carry.
    pub(super) fn master_token(&self) -> Option<&str> {
        self.acl.as_ref().map(|acl| acl.master.as_str())
    }

    /// The agent's settings for TLS and ACLs, one HCL line each.
    fn hcl(&self) -> Vec<String> {
        let mut hcl = Vec::new();
        if let Some((mode, files)) = &self.tls {
            hcl.push(format!(
                "ca_file = {}",
                hcl_string(&files.ca_cert().to_string_lossy())
            ));
            hcl.push(format!(
                "cert_file = {}",
                hcl_string(&files.server_cert().to_string_lossy())
            ));
            hcl.push(format!(
                "key_file = {}",
                hcl_string(&files.server_key().to_string_lossy())
            ));
            if *mode == ConsulTls::ClientCert {
                hcl.push("verify_incoming_https = true".to_owned());
            }
        }
        if let Some(acl) = &self.acl {
            // The agent's own token is the master token: it registers its
            // node and checks without "blocked by ACLs" warnings.
            hcl.push(format!(
                "acl {{ enabled = true, default_policy = \"deny\", down_policy = \"extend-cache\", \
                 tokens {{ master = \"{m}\", agent = \"{m}\" }} }}",
                m = acl.master
            ));
        }
        hcl
    }

    /// Creates the policies and tokens of [`ConsulAcl`] on the agent at
    /// `addr` (plain HTTP), if it has ACLs. A dev agent keeps them in
    /// memory only: called again after every restart.
    pub(super) fn set_up_acl(&self, addr: SocketAddr) -> Result<(), EngineError> {
        let Some(acl) = &self.acl else {
            return Ok(());
        };
        let prefix = hcl_string(&acl.key_prefix);
        let rules = |key: &str, session: &str| {
            format!(
                "key_prefix {prefix} {{ policy = \"{key}\" }}\n\
                 session_prefix \"\" {{ policy = \"{session}\" }}\n\
                 agent_prefix \"\" {{ policy = \"read\" }}\n"
            )
        };
        for (policy, rules, token, what) in [
            (
                ELECTION_POLICY,
                rules("write", "write"),
                &acl.election,
                "elections under the key prefix",
            ),
            (
                READ_ONLY_POLICY,
                rules("read", "read"),
                &acl.read_only,
                "reading elections under the key prefix",
            ),
        ] {
            let body = serde_json::json!({
                "Name": policy,
                "Description": format!("regent test kit: {what}"),
                "Rules": rules,
            });
            put_acl(addr, &acl.master, "/v1/acl/policy", &body)?;
            let body = serde_json::json!({
                "AccessorID": token.accessor,
                "SecretID": token.secret,
                "Description": format!("regent test kit: {what}"),
                "Policies": [{ "Name": policy }],
            });
            put_acl(addr, &acl.master, "/v1/acl/token", &body)?;
        }
        Ok(())
    }
}

/// `path` with `token` as Consul's `?token=` query parameter, if given
/// (the kit's HTTP client sends no headers of its own; Consul logs the
/// parameter as `<hidden>`).
pub(super) fn with_token(path: &str, token: Option<&str>) -> String {
    match token {
        None => path.to_owned(),
        Some(token) => {
            let sep = if path.contains('?') { '&' } else { '?' };
            format!("{path}{sep}token={token}")
        }
    }
}

/// `PUT path` of the ACL API with the master token; anything but 200 is an
/// error quoting Consul's answer (never a token's secret).
fn put_acl(
    addr: SocketAddr,
    master: &str,
    path: &str,
    body: &serde_json::Value,
) -> Result<(), EngineError> {
    let action = "create the ACL policies and tokens of a secured Consul agent";
    let response = http::put(
        addr,
        &with_token(path, Some(master)),
        Some(&body.to_string()),
        API_TIMEOUT,
    )
    .map_err(|source| EngineError::Io { action, source })?;
    if response.status == 200 {
        return Ok(());
    }
    Err(EngineError::Io {
        action,
        source: io::Error::other(format!(
            "PUT {path} on consul dev agent (http {addr}) answered {}: {}",
            response.status,
            response.body.trim()
        )),
    })
}

/// `s` as an HCL string: quoted, with `\` and `"` escaped.
fn hcl_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// A random (version 4) UUID, the form Consul gives token ids.
fn random_uuid() -> Result<String, EngineError> {
    let mut b = [0u8; 16];
    File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(|source| EngineError::Io {
            action: "read random token ids from /dev/urandom",
            source,
        })?;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|byte| format!("{byte:02x}")).collect();
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_version_4_uuids() {
        let (a, b) = (random_uuid().unwrap(), random_uuid().unwrap());
        assert_ne!(a, b);
        let groups: Vec<usize> = a.split('-').map(str::len).collect();
        assert_eq!(groups, [8, 4, 4, 4, 12], "{a}");
        assert_eq!(&a[14..15], "4", "{a}");
        assert!("89ab".contains(&a[19..20]), "{a}");
        assert!(a.bytes().all(|c| c == b'-' || c.is_ascii_hexdigit()));
    }

    #[test]
    fn the_token_goes_in_the_query() {
        assert_eq!(with_token("/v1/kv/k", None), "/v1/kv/k");
        assert_eq!(with_token("/v1/kv/k", Some("t")), "/v1/kv/k?token=t");
        assert_eq!(
            with_token("/v1/kv/k?consistent", Some("t")),
            "/v1/kv/k?consistent&token=t"
        );
    }

    #[test]
    fn hcl_strings_are_escaped() {
        assert_eq!(hcl_string(r#"a"b\c"#), r#""a\"b\\c""#);
    }

    #[test]
    fn debug_shows_no_token() {
        let dir = tempfile::tempdir().unwrap();
        let security = Security::new(dir.path(), None, Some("p/".into())).unwrap();
        let config = std::fs::read_to_string(dir.path().join("secured.hcl")).unwrap();
        assert!(config.contains("default_policy = \"deny\""), "{config}");
        assert_eq!(
            security.args(),
            [format!(
                "-config-file={}",
                dir.path().join("secured.hcl").display()
            )]
        );
        let acl = security.acl.as_ref().unwrap();
        let shown = format!("{security:?}");
        for secret in [acl.master_token(), acl.token(), acl.read_only_token()] {
            assert!(!shown.contains(secret), "{shown}");
        }
        assert!(shown.contains("p/"), "{shown}");
    }
}
