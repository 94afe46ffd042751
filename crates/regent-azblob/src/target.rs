//! The Azure Blob store as a [`StoreKind`]: its URL grammar, its options,
//! Azure's own variables as fallbacks, their contradictions, connecting.
//!
//! See [`KIND`] for the grammar and the options.

use std::ffi::OsString;
use std::fmt;
use std::time::Duration;

use regent_core::target::{
    ConnectFuture, Detail, Mention, OptionKind, OptionValue, Options, Source, StoreKind,
    StoreOption, Target, TargetError, printable,
};
use regent_core::{BoxStore, ErrorKind, StoreError};

use crate::account::StorageAccount;
use crate::store::{AzblobStore, AzblobStoreBuilder, DEFAULT_CALL_TIMEOUT};

/// Azure's variables (the SDKs' and `az`'s), read when none of regent's
/// own credential options is given.
const AZURE_STORAGE_CONNECTION_STRING: &str = "AZURE_STORAGE_CONNECTION_STRING";
const AZURE_STORAGE_ACCOUNT: &str = "AZURE_STORAGE_ACCOUNT";
const AZURE_STORAGE_KEY: &str = "AZURE_STORAGE_KEY";
const AZURE_STORAGE_SAS_TOKEN: &str = "AZURE_STORAGE_SAS_TOKEN";

/// The Azure Blob store kind: `azblob://` URLs and their options.
///
/// ```text
/// azblob://CONTAINER            the blob of election E is E
/// azblob://CONTAINER/BLOB       every election is the blob BLOB (one election per store)
/// azblob://CONTAINER/PREFIX/    the blob of election E is PREFIX/E
/// ```
///
/// The account and its credential come from the options below or, when
/// none of them is given, from Azure's own variables, as `az` and the SDKs
/// read them:
///
/// | option | kind | flag / variable | Azure's variable, used when none of regent's is set |
/// |---|---|---|---|
/// | `connection-string` | secret | `REGENT_AZBLOB_CONNECTION_STRING` only | `AZURE_STORAGE_CONNECTION_STRING` (`UseDevelopmentStorage=true` for Azurite on this host) |
/// | `account` | text | `--azblob-account` / `REGENT_AZBLOB_ACCOUNT` | `AZURE_STORAGE_ACCOUNT` |
/// | `key` | secret | `REGENT_AZBLOB_KEY` only | `AZURE_STORAGE_KEY` |
/// | `sas-token` | secret | `REGENT_AZBLOB_SAS_TOKEN` only | `AZURE_STORAGE_SAS_TOKEN` |
/// | `endpoint` | text | `--azblob-endpoint` / `REGENT_AZBLOB_ENDPOINT` | — (`https://ACCOUNT.blob.core.windows.net`) |
///
/// A connection string, or an account with its key or a SAS token: never
/// both, never a key and a token together. Azure's variables are the
/// user's environment for Azure's tools, so a front end does not scrub
/// them from the command it runs (it scrubs regent's secrets); keys and
/// tokens never appear in messages or logs.
pub static KIND: StoreKind = StoreKind {
    name: "azblob",
    schemes: &["azblob"],
    advises: &["https", "wasbs", "abfss"],
    forms: "azblob://CONTAINER[/BLOB | /PREFIX/] (account from AZURE_STORAGE_CONNECTION_STRING, \
            or AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_KEY or AZURE_STORAGE_SAS_TOKEN)",
    short_forms: "azblob://…",
    default_call_timeout: DEFAULT_CALL_TIMEOUT,
    options: &[
        StoreOption {
            name: "connection-string",
            kind: OptionKind::Secret,
            value_name: "STRING",
            help: "Storage connection string (never a flag: `ps` would show its key); default: \
                   AZURE_STORAGE_CONNECTION_STRING, UseDevelopmentStorage=true for Azurite",
        },
        StoreOption {
            name: "account",
            kind: OptionKind::Text,
            value_name: "NAME",
            help: "Storage account name, with REGENT_AZBLOB_KEY or REGENT_AZBLOB_SAS_TOKEN \
                   (default: AZURE_STORAGE_ACCOUNT)",
        },
        StoreOption {
            name: "key",
            kind: OptionKind::Secret,
            value_name: "KEY",
            help: "The account's access key, base64 (default: AZURE_STORAGE_KEY)",
        },
        StoreOption {
            name: "sas-token",
            kind: OptionKind::Secret,
            value_name: "TOKEN",
            help: "A SAS token for the container (default: AZURE_STORAGE_SAS_TOKEN)",
        },
        StoreOption {
            name: "endpoint",
            kind: OptionKind::Text,
            value_name: "URL",
            help: "The Blob service's URL, with --azblob-account (default: \
                   https://ACCOUNT.blob.core.windows.net)",
        },
    ],
    examples: &[
        "AZURE_STORAGE_CONNECTION_STRING=UseDevelopmentStorage=true \\\n      \
         regent run --store azblob://leases --election MyLeaderCoordinatorTask -- ./worker",
        "AZURE_STORAGE_ACCOUNT=contoso AZURE_STORAGE_KEY=... \\\n      \
         regent run --store azblob://leases/jobs/ --ttl 30s --election nightly -- ./worker",
    ],
    parse,
};

fn parse(
    url: &str,
    options: &Options,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Result<Box<dyn Target>, TargetError> {
    parse_with_env(url, options, env).map(|t| Box::new(t) as Box<dyn Target>)
}

/// A parsed `azblob://` URL.
#[derive(Clone, Debug, PartialEq, Eq)]
struct BlobUrl {
    container: String,
    blob: Blob,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Blob {
    Election,
    Fixed(String),
    Prefix(String),
}

/// An `azblob://` store, checked: ready to connect.
#[derive(Clone)]
pub struct AzblobTarget {
    url: BlobUrl,
    account: StorageAccount,
    /// Which settings named the account, for messages.
    from: String,
}

impl fmt::Debug for AzblobTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AzblobTarget")
            .field("url", &self.url)
            .field("account", &self.account)
            .field("from", &self.from)
            .finish()
    }
}

impl fmt::Display for AzblobTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "azblob://{}", self.url.container)?;
        match &self.url.blob {
            Blob::Election => {}
            Blob::Fixed(b) | Blob::Prefix(b) => write!(f, "/{b}")?,
        }
        write!(
            f,
            " (account {} at {})",
            self.account.name(),
            self.account.blob_endpoint()
        )
    }
}

impl AzblobTarget {
    /// The store's builder, before [`AzblobStoreBuilder::build`].
    pub fn builder(&self, call_timeout: Duration) -> AzblobStoreBuilder {
        let builder = AzblobStore::builder(self.account.clone(), self.url.container.clone())
            .call_timeout(call_timeout);
        match &self.url.blob {
            Blob::Election => builder,
            Blob::Fixed(b) => builder.blob(b.clone()),
            Blob::Prefix(p) => builder.blob_prefix(p.clone()),
        }
    }
}

impl Target for AzblobTarget {
    fn kind(&self) -> &'static StoreKind {
        &KIND
    }

    fn connect(&self, call_timeout: Duration) -> ConnectFuture<'_> {
        Box::pin(async move { Ok(BoxStore::new(self.builder(call_timeout).build()?)) })
    }

    /// Which settings to look at when the service refuses the credential,
    /// or cannot be reached.
    fn hint(&self, e: &StoreError) -> Option<String> {
        match e.kind() {
            ErrorKind::Auth => Some(format!(
                "the account and its credential came from {}; check the key or SAS token there",
                self.from
            )),
            ErrorKind::Unavailable
                if self.account.blob_endpoint().host_str() == Some("127.0.0.1") =>
            {
                Some(format!(
                    "{} is this host: is Azurite running there (azurite-blob --blobPort {})?",
                    self.account.blob_endpoint(),
                    self.account.blob_endpoint().port().unwrap_or(10000)
                ))
            }
            _ => None,
        }
    }
}

/// [`KIND`]'s parser with Azure's variables read through `env`.
fn parse_with_env(
    url: &str,
    options: &Options,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Result<AzblobTarget, TargetError> {
    let url = parse_url(url)?;
    let own = |name: &str| options.get(name).cloned();
    // Azure's variable `var`, as a value of regent's option `option`.
    let azure = |option: &'static str, var: &str| {
        env(var).filter(|v| !v.is_empty()).map(|value| OptionValue {
            value,
            source: Source::Env(var.to_owned()),
            store: &KIND,
            option,
        })
    };
    let [cs, account, key, sas, endpoint] = [
        "connection-string",
        "account",
        "key",
        "sas-token",
        "endpoint",
    ]
    .map(own);
    let account_error = |v: &OptionValue, e: crate::AccountError| {
        TargetError::bad_value(v, format!(": {}", e.0.trim_start_matches("the ")))
    };
    let (cs, account, key, sas) = if [&cs, &account, &key, &sas].iter().any(|o| o.is_some()) {
        (cs, account, key, sas)
    } else {
        let cs = azure("connection-string", AZURE_STORAGE_CONNECTION_STRING);
        if cs.is_some() {
            // As `az` does: the connection string alone.
            (cs, None, None, None)
        } else {
            let key = azure("key", AZURE_STORAGE_KEY);
            let sas = if key.is_some() {
                None
            } else {
                azure("sas-token", AZURE_STORAGE_SAS_TOKEN)
            };
            (None, azure("account", AZURE_STORAGE_ACCOUNT), key, sas)
        }
    };
    let (account, from) = match (cs, account, key, sas) {
        (Some(cs), None, None, None) => {
            if let Some(e) = &endpoint {
                return Err(TargetError::conflict(
                    e,
                    &[&cs],
                    Detail::new("is set, but the connection string of ")
                        .given(cs.given())
                        .text(" names the endpoint; keep one"),
                ));
            }
            let text = cs.text()?;
            let account = StorageAccount::from_connection_string(text)
                .map_err(|e| TargetError::bad_value(&cs, format!(": {e}")))?;
            (account, cs.source.to_string())
        }
        (Some(cs), Some(other), _, _)
        | (Some(cs), _, Some(other), _)
        | (Some(cs), _, _, Some(other)) => {
            return Err(TargetError::conflict(
                &cs,
                &[&other],
                Detail::new("and ").given(other.given()).text(
                    " both name the storage account; give a connection string, or an account \
                     with its key or SAS token",
                ),
            ));
        }
        (None, Some(name), key, sas) => {
            let name_text = name.text()?;
            let account = match (key, sas) {
                (Some(k), None) => StorageAccount::with_key(name_text, k.text()?)
                    .map_err(|e| account_error(&k, e))?,
                (None, Some(s)) => StorageAccount::with_sas(name_text, s.text()?)
                    .map_err(|e| account_error(&s, e))?,
                (Some(k), Some(s)) => {
                    return Err(TargetError::conflict(
                        &k,
                        &[&s],
                        Detail::new("and ")
                            .given(s.given())
                            .text(" are both set; give the account's key or a SAS token"),
                    ));
                }
                (None, None) => {
                    return Err(TargetError::missing(
                        &name,
                        &["key", "sas-token"],
                        Detail::new(format!(
                            "names storage account '{}' but no credential: set ",
                            printable(name_text)
                        ))
                        .option("key", Mention::Set)
                        .text(" or ")
                        .option("sas-token", Mention::Set)
                        .text(" (or AZURE_STORAGE_KEY or AZURE_STORAGE_SAS_TOKEN)"),
                    ));
                }
            };
            let account = match &endpoint {
                Some(e) => account
                    .with_endpoint(e.text()?)
                    .map_err(|err| account_error(e, err))?,
                None => account,
            };
            (account, name.source.to_string())
        }
        (None, None, Some(secret), _) | (None, None, None, Some(secret)) => {
            return Err(TargetError::missing(
                &secret,
                &["account"],
                Detail::new("is set but no storage account: set ")
                    .option("account", Mention::Set)
                    .text(" (or AZURE_STORAGE_ACCOUNT)"),
            ));
        }
        (None, None, None, None) => {
            return Err(TargetError::missing_for(
                &KIND,
                &["connection-string", "account"],
                "azblob:// needs a storage account: set AZURE_STORAGE_CONNECTION_STRING \
                 (UseDevelopmentStorage=true for Azurite on this host), or AZURE_STORAGE_ACCOUNT \
                 with AZURE_STORAGE_KEY or AZURE_STORAGE_SAS_TOKEN",
            ));
        }
    };
    Ok(AzblobTarget { url, account, from })
}

/// `azblob://CONTAINER[/BLOB | /PREFIX/]`.
fn parse_url(url: &str) -> Result<BlobUrl, TargetError> {
    let bad = |detail: Detail| TargetError::url(&KIND, url, detail);
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(bad(Detail::new(
            "is not an azblob:// URL: write azblob://CONTAINER[/BLOB]",
        )));
    };
    if !scheme.eq_ignore_ascii_case("azblob") {
        // https://ACCOUNT.blob.core.windows.net/…, wasbs://, abfss://.
        return Err(bad(Detail::new(
            ": regent names a blob store as azblob://CONTAINER[/BLOB]; the account and its \
             endpoint come from AZURE_STORAGE_CONNECTION_STRING or AZURE_STORAGE_ACCOUNT (and ",
        )
        .option("endpoint", Mention::Set)
        .text(")")));
    }
    if rest.contains(['?', '#', '@']) {
        return Err(bad(Detail::new(
            "holds a query, fragment or user: credentials are never part of the URL (set \
             AZURE_STORAGE_CONNECTION_STRING or AZURE_STORAGE_KEY)",
        )));
    }
    let (container, path) = rest.split_once('/').unwrap_or((rest, ""));
    let container = container.to_owned();
    let blob = if path.is_empty() {
        Blob::Election
    } else if path.ends_with('/') {
        Blob::Prefix(path.to_owned())
    } else {
        Blob::Fixed(path.to_owned())
    };
    // The rules, checked once: by the builder.
    let probe = AzblobStore::builder(StorageAccount::development(), container.clone());
    let probe = match &blob {
        Blob::Election => probe,
        Blob::Fixed(b) => probe.blob(b.clone()),
        Blob::Prefix(p) => probe.blob_prefix(p.clone()),
    };
    probe.build().map_err(|e| {
        // The builder's rule, without the kind's and the store's prefixes.
        let text = e.to_string();
        let rule = text
            .trim_start_matches(&format!("{}: ", e.kind()))
            .trim_start_matches("azblob store: ");
        bad(Detail::new(format!(": {rule}")))
    })?;
    Ok(BlobUrl { container, blob })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<OsString> {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| OsString::from(v))
        }
    }

    fn target(
        url: &str,
        options: &Options,
        vars: &'static [(&'static str, &'static str)],
    ) -> Result<AzblobTarget, String> {
        parse_with_env(url, options, &env_of(vars)).map_err(|e| e.to_string())
    }

    const DEV: &[(&str, &str)] = &[(
        AZURE_STORAGE_CONNECTION_STRING,
        "UseDevelopmentStorage=true",
    )];

    #[test]
    fn urls_name_container_blob_or_prefix() {
        let t = target("azblob://leases", &Options::new(), DEV).unwrap();
        assert_eq!(t.url.blob, Blob::Election);
        assert_eq!(
            t.to_string(),
            "azblob://leases (account devstoreaccount1 at http://127.0.0.1:10000/devstoreaccount1)"
        );
        let t = target(
            "azblob://leases/MyLeaderCoordinatorTask",
            &Options::new(),
            DEV,
        )
        .unwrap();
        assert_eq!(t.url.blob, Blob::Fixed("MyLeaderCoordinatorTask".into()));
        let t = target("azblob://leases/team/a/", &Options::new(), DEV).unwrap();
        assert_eq!(t.url.blob, Blob::Prefix("team/a/".into()));
        for (url, want) in [
            ("azblob://Leases", "container name"),
            ("azblob://", "container name"),
            ("azblob://leases//x", "the blob"),
            ("azblob://leases?sig=x", "never part of the URL"),
            (
                "https://acct.blob.core.windows.net/leases",
                "azblob://CONTAINER",
            ),
            ("leases", "not an azblob:// URL"),
        ] {
            let e = target(url, &Options::new(), DEV).unwrap_err();
            assert!(e.contains(want), "{url}: {e}");
        }
        // The builder's rule, without the kind of error and the store's name.
        assert_eq!(
            target("azblob://Leases", &Options::new(), DEV).unwrap_err(),
            "azblob URL 'azblob://Leases': the container name 'Leases' must be 3 to 63 lower-case \
             letters, digits and single '-' between them (Azure's rule)"
        );
        // Credentials in the URL are never quoted.
        let e = target("azblob://user:s3cret@leases", &Options::new(), DEV).unwrap_err();
        assert!(!e.contains("s3cret"), "{e}");
    }

    #[test]
    fn credentials_by_option_or_azure_variables() {
        let mut own = Options::new();
        own.set(&KIND, "account", "contoso").unwrap();
        own.set(&KIND, "key", "c2VjcmV0").unwrap();
        own.set(
            &KIND,
            "endpoint",
            "https://contoso.blob.core.usgovcloudapi.net",
        )
        .unwrap();
        // regent's options win, and Azure's variables are then not read.
        let t = target("azblob://leases", &own, DEV).unwrap();
        assert_eq!(t.account.name(), "contoso");
        assert_eq!(
            t.account.blob_endpoint().as_str(),
            "https://contoso.blob.core.usgovcloudapi.net/"
        );
        let t = target(
            "azblob://leases",
            &Options::new(),
            &[
                (AZURE_STORAGE_ACCOUNT, "acct"),
                (AZURE_STORAGE_SAS_TOKEN, "?sv=1&sig=x"),
            ],
        )
        .unwrap();
        assert!(!t.account.uses_shared_key());
        // The connection string wins over Azure's other variables, as in az.
        let t = target(
            "azblob://leases",
            &Options::new(),
            &[
                (
                    AZURE_STORAGE_CONNECTION_STRING,
                    "UseDevelopmentStorage=true",
                ),
                (AZURE_STORAGE_ACCOUNT, "other"),
            ],
        )
        .unwrap();
        assert_eq!(t.account.name(), "devstoreaccount1");
    }

    #[test]
    fn contradictions_and_gaps_are_named() {
        let mut both = Options::new();
        both.set(&KIND, "connection-string", "UseDevelopmentStorage=true")
            .unwrap();
        both.set(&KIND, "account", "contoso").unwrap();
        let e = target("azblob://leases", &both, &[]).unwrap_err();
        assert!(e.contains("both name the storage account"), "{e}");
        let mut name_only = Options::new();
        name_only.set(&KIND, "account", "contoso").unwrap();
        let e = target("azblob://leases", &name_only, &[]).unwrap_err();
        assert!(e.contains("no credential"), "{e}");
        let e = target(
            "azblob://leases",
            &Options::new(),
            &[(AZURE_STORAGE_KEY, "c2VjcmV0")],
        )
        .unwrap_err();
        assert_eq!(
            e,
            "azblob option `key` (AZURE_STORAGE_KEY) is set but no storage account: set option \
             `account` (or AZURE_STORAGE_ACCOUNT)"
        );
        let e = target("azblob://leases", &Options::new(), &[]).unwrap_err();
        assert!(e.contains("UseDevelopmentStorage=true"), "{e}");
        let mut endpoint = Options::new();
        endpoint
            .set(&KIND, "endpoint", "http://127.0.0.1:1/x")
            .unwrap();
        let e = target("azblob://leases", &endpoint, DEV).unwrap_err();
        assert!(e.contains("names the endpoint"), "{e}");
        let e = target(
            "azblob://leases",
            &Options::new(),
            &[(
                AZURE_STORAGE_CONNECTION_STRING,
                "AccountName=a1b;AccountKey=%%secret%%",
            )],
        )
        .unwrap_err();
        assert!(
            e.contains("AZURE_STORAGE_CONNECTION_STRING") && !e.contains("secret"),
            "{e}"
        );
    }
}
