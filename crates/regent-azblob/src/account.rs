//! A storage account as Azure's tools name one: a connection string, an
//! account name with its key, or a SAS token; and where its Blob service
//! is.

use std::fmt;

use base64::Engine as _;
use reqwest::Url;

/// Azurite's (and the old storage emulator's) development account.
pub const DEVELOPMENT_ACCOUNT: &str = "devstoreaccount1";

/// The well-known key of [`DEVELOPMENT_ACCOUNT`], as Microsoft publishes
/// it: it protects nothing, and only the emulators take it.
pub const DEVELOPMENT_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// The Blob service of the development account:
/// `http://127.0.0.1:10000/devstoreaccount1`, Azurite's default.
pub const DEVELOPMENT_BLOB_ENDPOINT: &str = "http://127.0.0.1:10000/devstoreaccount1";

/// The public cloud's endpoint suffix.
const DEFAULT_ENDPOINT_SUFFIX: &str = "core.windows.net";

/// How requests prove they may act on the account.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum Credential {
    /// Shared key: every request signed with HMAC-SHA256 of the account
    /// key (decoded).
    SharedKey(Vec<u8>),
    /// A shared access signature: its query string, without the `?`,
    /// appended to every request.
    Sas(String),
}

/// A storage account and its Blob service: the name, the endpoint and the
/// credential (shared key or SAS). Neither `Debug` nor any error shows the
/// key or the SAS token.
///
/// ```
/// use regent_azblob::StorageAccount;
///
/// // What AZURE_STORAGE_CONNECTION_STRING holds, or the emulator's shortcut.
/// let azurite = StorageAccount::from_connection_string("UseDevelopmentStorage=true")?;
/// assert_eq!(azurite.name(), "devstoreaccount1");
/// assert_eq!(azurite.blob_endpoint().as_str(), "http://127.0.0.1:10000/devstoreaccount1");
///
/// let prod = StorageAccount::with_key("contoso", "c2VjcmV0")?;
/// assert_eq!(prod.blob_endpoint().as_str(), "https://contoso.blob.core.windows.net/");
/// assert!(!format!("{prod:?}").contains("c2VjcmV0"));
/// # Ok::<(), regent_azblob::AccountError>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct StorageAccount {
    name: String,
    endpoint: Url,
    credential: Credential,
}

impl fmt::Debug for StorageAccount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StorageAccount")
            .field("name", &self.name)
            .field("endpoint", &self.endpoint.as_str())
            .field(
                "credential",
                &match self.credential {
                    Credential::SharedKey(_) => "shared key",
                    Credential::Sas(_) => "SAS token",
                },
            )
            .finish()
    }
}

/// A connection string, account, key, SAS token or endpoint the store
/// cannot use; the message names the part and the rule, never a secret.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AccountError(pub(crate) String);

impl StorageAccount {
    /// The development account of an emulator on this host
    /// (`UseDevelopmentStorage=true`): [`DEVELOPMENT_ACCOUNT`], its
    /// well-known key, [`DEVELOPMENT_BLOB_ENDPOINT`].
    pub fn development() -> Self {
        Self {
            name: DEVELOPMENT_ACCOUNT.to_owned(),
            endpoint: Url::parse(DEVELOPMENT_BLOB_ENDPOINT).expect("a valid constant URL"),
            credential: Credential::SharedKey(
                base64::engine::general_purpose::STANDARD
                    .decode(DEVELOPMENT_KEY)
                    .expect("the well-known key is base64"),
            ),
        }
    }

    /// Account `name` with its access key (base64, as the portal and `az
    /// storage account keys list` show it), on the public cloud's endpoint
    /// `https://NAME.blob.core.windows.net/` unless
    /// [`with_endpoint`](Self::with_endpoint) names another.
    ///
    /// # Errors
    ///
    /// An [`AccountError`] when the name is not an account name or the key
    /// not base64.
    pub fn with_key(name: &str, key: &str) -> Result<Self, AccountError> {
        check_account_name(name)?;
        Ok(Self {
            name: name.to_owned(),
            endpoint: default_endpoint("https", name, DEFAULT_ENDPOINT_SUFFIX)?,
            credential: Credential::SharedKey(decode_key(key)?),
        })
    }

    /// Account `name` with a shared access signature (the query string
    /// `az storage container generate-sas` prints, with or without the
    /// leading `?`). The store needs read, add, create, write and delete
    /// permissions on blobs, and create on the container unless it exists;
    /// list too for the roster of candidates (choosing the leader by
    /// priority, `regent handover`).
    ///
    /// # Errors
    ///
    /// An [`AccountError`] when the name is not an account name or the
    /// token does not look like a SAS (no `sig=`).
    pub fn with_sas(name: &str, sas: &str) -> Result<Self, AccountError> {
        check_account_name(name)?;
        Ok(Self {
            name: name.to_owned(),
            endpoint: default_endpoint("https", name, DEFAULT_ENDPOINT_SUFFIX)?,
            credential: Credential::Sas(check_sas(sas)?),
        })
    }

    /// This account with its Blob service at `endpoint` (a sovereign
    /// cloud, a private endpoint, an emulator:
    /// `http://127.0.0.1:10000/devstoreaccount1`).
    ///
    /// # Errors
    ///
    /// An [`AccountError`] when `endpoint` is not an `http` or `https` URL
    /// without query or fragment.
    pub fn with_endpoint(mut self, endpoint: &str) -> Result<Self, AccountError> {
        self.endpoint = parse_endpoint(endpoint, "the blob endpoint")?;
        Ok(self)
    }

    /// Parses a connection string as the Azure SDKs and `az` take it
    /// (`AZURE_STORAGE_CONNECTION_STRING`): `KEY=VALUE` pairs separated by
    /// `;`, keys in any case.
    ///
    /// * `UseDevelopmentStorage=true` (with `DevelopmentStorageProxyUri=URI`
    ///   optionally): the [development account](Self::development).
    /// * `AccountName` with `AccountKey` or `SharedAccessSignature`.
    /// * The endpoint: `BlobEndpoint` if given, else
    ///   `DefaultEndpointsProtocol://ACCOUNT.blob.EndpointSuffix`
    ///   (`https`, `core.windows.net` by default).
    /// * `BlobEndpoint` with `SharedAccessSignature` and no `AccountName`:
    ///   the account is the endpoint's first host label.
    ///
    /// Other keys (`QueueEndpoint`, `TableEndpoint`, …) are ignored.
    ///
    /// # Errors
    ///
    /// An [`AccountError`] naming the key that is missing, repeated,
    /// malformed or contradicted, never quoting a key or a signature.
    pub fn from_connection_string(s: &str) -> Result<Self, AccountError> {
        let err = |m: String| AccountError(format!("the connection string {m}"));
        let mut pairs: Vec<(String, &str)> = Vec::new();
        for part in s.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((key, value)) = part.split_once('=') else {
                // Never quote the part: it may be a key that lost its name.
                return Err(err(format!(
                    "has a part without '=' (part {} of it); it takes KEY=VALUE pairs separated by ';'",
                    pairs.len() + 1
                )));
            };
            let key = key.trim().to_ascii_lowercase();
            if pairs.iter().any(|(k, _)| *k == key) {
                return Err(err(format!("names {} twice", shown_key(&key))));
            }
            pairs.push((key, value.trim()));
        }
        let get = |k: &str| pairs.iter().find(|(key, _)| key == k).map(|(_, v)| *v);
        if pairs.is_empty() {
            return Err(err("is empty".into()));
        }
        if let Some(dev) = get("usedevelopmentstorage") {
            if !dev.eq_ignore_ascii_case("true") {
                return Err(err(format!(
                    "has UseDevelopmentStorage={}; only 'true' means anything",
                    regent_core::target::printable(dev)
                )));
            }
            if let Some(other) = [
                "accountname",
                "accountkey",
                "sharedaccesssignature",
                "blobendpoint",
            ]
            .iter()
            .find(|k| get(k).is_some())
            {
                return Err(err(format!(
                    "has UseDevelopmentStorage=true and {}; the development account has its own",
                    shown_key(other)
                )));
            }
            let mut account = Self::development();
            if let Some(proxy) = get("developmentstorageproxyuri") {
                let mut url = parse_endpoint(proxy, "DevelopmentStorageProxyUri")?;
                url.set_port(Some(10000))
                    .map_err(|()| err("has a DevelopmentStorageProxyUri without a host".into()))?;
                url.set_path(DEVELOPMENT_ACCOUNT);
                account.endpoint = url;
            }
            return Ok(account);
        }
        let endpoint = get("blobendpoint")
            .map(|e| parse_endpoint(e, "BlobEndpoint"))
            .transpose()?;
        let name = match (get("accountname"), &endpoint) {
            (Some(name), _) => {
                check_account_name(name)?;
                name.to_owned()
            }
            // A SAS signs nothing with the name: it only names the account
            // in messages, from the endpoint as well as it can
            // (`ACCOUNT.blob.…`, or path-style `http://HOST:PORT/ACCOUNT`).
            (None, Some(e)) if get("sharedaccesssignature").is_some() => account_of_endpoint(e),
            (None, _) => {
                return Err(err(
                    "has no AccountName (nor UseDevelopmentStorage=true)".into()
                ));
            }
        };
        let credential = match (get("accountkey"), get("sharedaccesssignature")) {
            (Some(key), None) => Credential::SharedKey(decode_key(key)?),
            (None, Some(sas)) => Credential::Sas(check_sas(sas)?),
            (Some(_), Some(_)) => {
                return Err(err(
                    "has both AccountKey and SharedAccessSignature; keep one".into(),
                ));
            }
            (None, None) => {
                return Err(err(
                    "has neither AccountKey nor SharedAccessSignature: regent signs with one of them"
                        .into(),
                ));
            }
        };
        let endpoint = match endpoint {
            Some(e) => e,
            None => {
                let protocol = get("defaultendpointsprotocol").unwrap_or("https");
                let protocol = match protocol.to_ascii_lowercase().as_str() {
                    p @ ("http" | "https") => p.to_owned(),
                    _ => {
                        return Err(err(format!(
                            "has DefaultEndpointsProtocol={}; it takes http or https",
                            regent_core::target::printable(protocol)
                        )));
                    }
                };
                let suffix = get("endpointsuffix").unwrap_or(DEFAULT_ENDPOINT_SUFFIX);
                default_endpoint(&protocol, &name, suffix)?
            }
        };
        Ok(Self {
            name,
            endpoint,
            credential,
        })
    }

    /// The account's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The Blob service's URL (`https://NAME.blob.core.windows.net/`, or
    /// path-style for an emulator: `http://127.0.0.1:10000/devstoreaccount1`).
    pub fn blob_endpoint(&self) -> &Url {
        &self.endpoint
    }

    /// Whether requests are signed with the account key (else a SAS
    /// token authorizes them).
    pub fn uses_shared_key(&self) -> bool {
        matches!(self.credential, Credential::SharedKey(_))
    }

    pub(crate) fn credential(&self) -> &Credential {
        &self.credential
    }
}

/// The account an endpoint names: the first label of `ACCOUNT.blob.…`,
/// else the first path segment (an emulator's path-style URL), else the
/// host.
fn account_of_endpoint(endpoint: &Url) -> String {
    let host = endpoint.host_str().unwrap_or_default();
    match host.split_once(".blob.") {
        Some((account, _)) => account.to_owned(),
        None => endpoint
            .path_segments()
            .and_then(|mut s| s.next())
            .filter(|s| !s.is_empty())
            .unwrap_or(host)
            .to_owned(),
    }
}

fn shown_key(lowercase: &str) -> &'static str {
    [
        "UseDevelopmentStorage",
        "DevelopmentStorageProxyUri",
        "AccountName",
        "AccountKey",
        "SharedAccessSignature",
        "BlobEndpoint",
        "DefaultEndpointsProtocol",
        "EndpointSuffix",
    ]
    .into_iter()
    .find(|k| k.eq_ignore_ascii_case(lowercase))
    .unwrap_or("a key")
}

/// Azure's rule: 3 to 24 lower-case letters and digits. Emulators' own
/// account names (`devstoreaccount1`) keep it.
fn check_account_name(name: &str) -> Result<(), AccountError> {
    if (3..=24).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    {
        Ok(())
    } else {
        // A long value or one with base64's or a query's characters may be
        // a key or a token given in the name's place: never quote it.
        let shown = if name.len() <= 24 && !name.contains(['+', '/', '=', '&']) {
            format!("'{}'", regent_core::target::printable(name))
        } else {
            format!("of {} characters", name.len())
        };
        Err(AccountError(format!(
            "the storage account name {shown} must be 3 to 24 lower-case letters and digits"
        )))
    }
}

fn decode_key(key: &str) -> Result<Vec<u8>, AccountError> {
    match base64::engine::general_purpose::STANDARD.decode(key.trim()) {
        Ok(k) if !k.is_empty() => Ok(k),
        // Never quote the key, nor base64's error, which names a byte of it.
        _ => Err(AccountError(
            "the account key is not base64 (copy it as `az storage account keys list` prints it)"
                .into(),
        )),
    }
}

fn check_sas(sas: &str) -> Result<String, AccountError> {
    let sas = sas.trim().trim_start_matches('?');
    let has_signature = sas.split('&').any(|p| p.starts_with("sig="));
    if !has_signature {
        return Err(AccountError(
            "the SAS token has no signature (sig=…): give the query string `az storage \
             container generate-sas` prints"
                .into(),
        ));
    }
    if sas.contains(['#', ' ', '\n']) {
        return Err(AccountError(
            "the SAS token holds '#' or whitespace; give the query string alone".into(),
        ));
    }
    Ok(sas.to_owned())
}

fn default_endpoint(protocol: &str, name: &str, suffix: &str) -> Result<Url, AccountError> {
    parse_endpoint(
        &format!("{protocol}://{name}.blob.{suffix}"),
        "EndpointSuffix",
    )
}

/// An `http` or `https` URL with a host and no query or fragment, with a
/// path that does not end in `/` unless it is the root (requests append
/// `/CONTAINER/BLOB`).
fn parse_endpoint(s: &str, what: &str) -> Result<Url, AccountError> {
    let shown = regent_core::target::redacted(s);
    let url = Url::parse(s.trim())
        .map_err(|e| AccountError(format!("{what} '{shown}' is not a URL ({e})")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none_or(str::is_empty) {
        return Err(AccountError(format!(
            "{what} '{shown}' must be an http:// or https:// URL with a host"
        )));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(AccountError(format!(
            "{what} '{shown}' holds a query or fragment; give a SAS token on its own"
        )));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(AccountError(format!(
            "{what} '{shown}' holds a user name or password"
        )));
    }
    let mut url = url;
    let path = url.path().trim_end_matches('/').to_owned();
    url.set_path(&path);
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn development_storage_and_its_proxy() {
        let a = StorageAccount::from_connection_string("UseDevelopmentStorage=true;").unwrap();
        assert_eq!(a, StorageAccount::development());
        let a = StorageAccount::from_connection_string(
            "usedevelopmentstorage=TRUE;DevelopmentStorageProxyUri=http://10.1.2.3",
        )
        .unwrap();
        assert_eq!(
            a.blob_endpoint().as_str(),
            "http://10.1.2.3:10000/devstoreaccount1"
        );
        let e = StorageAccount::from_connection_string("UseDevelopmentStorage=false").unwrap_err();
        assert!(e.0.contains("only 'true'"), "{e}");
        let e = StorageAccount::from_connection_string("UseDevelopmentStorage=true;AccountName=x")
            .unwrap_err();
        assert!(e.0.contains("AccountName"), "{e}");
    }

    #[test]
    fn account_key_and_endpoints() {
        let a = StorageAccount::from_connection_string(
            "DefaultEndpointsProtocol=https;AccountName=contoso;AccountKey=c2VjcmV0;EndpointSuffix=core.chinacloudapi.cn",
        )
        .unwrap();
        assert_eq!(a.name(), "contoso");
        assert_eq!(
            a.blob_endpoint().as_str(),
            "https://contoso.blob.core.chinacloudapi.cn/"
        );
        assert!(a.uses_shared_key());
        let a = StorageAccount::from_connection_string(&format!(
            "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={DEVELOPMENT_KEY};\
             BlobEndpoint=http://127.0.0.1:4242/devstoreaccount1/;QueueEndpoint=http://x"
        ))
        .unwrap();
        assert_eq!(
            a.blob_endpoint().as_str(),
            "http://127.0.0.1:4242/devstoreaccount1"
        );
        let a = StorageAccount::from_connection_string(
            "BlobEndpoint=https://acct.blob.core.windows.net;SharedAccessSignature=sv=2021&sig=abc",
        )
        .unwrap();
        assert_eq!(a.name(), "acct");
        assert!(!a.uses_shared_key());
        // Path-style (an emulator), and a host whose name is no account name.
        for (endpoint, name) in [
            (
                "http://127.0.0.1:10000/devstoreaccount1",
                "devstoreaccount1",
            ),
            ("http://azurite-blob:10000", "azurite-blob"),
        ] {
            let a = StorageAccount::from_connection_string(&format!(
                "BlobEndpoint={endpoint};SharedAccessSignature=sv=1&sig=x"
            ))
            .unwrap();
            assert_eq!(a.name(), name);
        }
        // A key given as the name is not quoted.
        let e =
            StorageAccount::with_key("c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0==", "c2VjcmV0").unwrap_err();
        assert!(
            e.0.contains("of 34 characters") && !e.0.contains("c2Vj"),
            "{e}"
        );
    }

    #[test]
    fn bad_connection_strings_name_the_part_and_never_the_secret() {
        for (s, want) in [
            ("", "is empty"),
            ("AccountName=contoso", "neither AccountKey"),
            ("AccountKey=c2VjcmV0", "no AccountName"),
            ("AccountName=contoso;AccountKey=not*base64!", "not base64"),
            (
                "AccountName=contoso;AccountKey=c2VjcmV0;accountkey=c2VjcmV0",
                "AccountKey twice",
            ),
            ("AccountName=Contoso;AccountKey=c2VjcmV0", "lower-case"),
            (
                "AccountName=contoso;SharedAccessSignature=sv=1",
                "no signature",
            ),
            (
                "AccountName=contoso;AccountKey=c2VjcmV0;SharedAccessSignature=sig=1",
                "both",
            ),
            (
                "AccountName=contoso;AccountKey=c2VjcmV0;DefaultEndpointsProtocol=ftp",
                "http or https",
            ),
            (
                "AccountName=contoso;AccountKey=c2VjcmV0;BlobEndpoint=ftp://x",
                "http:// or https://",
            ),
            ("AccountName=contoso;c2VjcmV0secret", "without '='"),
        ] {
            let e = StorageAccount::from_connection_string(s).unwrap_err();
            assert!(e.0.contains(want), "{s}: {e}");
            assert!(!e.0.contains("c2VjcmV0") && !e.0.contains("base64!"), "{e}");
        }
    }

    #[test]
    fn keys_and_tokens_stay_out_of_debug() {
        let a = StorageAccount::with_sas("contoso", "?sv=2021&sig=topsecret").unwrap();
        assert!(matches!(a.credential(), Credential::Sas(s) if s == "sv=2021&sig=topsecret"));
        let shown = format!("{a:?}");
        assert!(
            !shown.contains("topsecret") && shown.contains("SAS token"),
            "{shown}"
        );
        let a = StorageAccount::development();
        assert!(!format!("{a:?}").contains("Eby8"));
    }
}
