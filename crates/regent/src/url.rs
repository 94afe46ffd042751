//! Stores by URL: the one place that knows which store crates this build
//! includes, one `#[cfg(feature)]` arm each.
//!
//! ```no_run
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use regent::{Candidate, ElectionName, HolderId};
//!
//! // Options by name; those not given come from REGENT_<STORE>_<OPTION>.
//! let store = regent::connect("sqlite:/var/lib/app/regent.db", &[]).await?;
//! let candidate = Candidate::builder(store, ElectionName::new("jobs")?, HolderId::new("host-a")?)
//!     .build()?;
//! # let _ = candidate;
//! # Ok(()) }
//! ```
//!
//! A URL whose store this build leaves out says so and names the cargo
//! feature that brings it.

use std::ffi::OsString;

use crate::{BoxStore, StoreError};
use regent_core::target::{Options, StoreKind, Target, TargetError, printable, redacted};

/// The store kinds this build includes: one entry per enabled feature.
static KINDS: &[&StoreKind] = &[
    #[cfg(feature = "sqlite")]
    &regent_sqlite::KIND,
    #[cfg(feature = "etcd")]
    &regent_etcd::KIND,
    #[cfg(feature = "consul")]
    &regent_consul::KIND,
    #[cfg(feature = "azblob")]
    &regent_azblob::KIND,
    #[cfg(feature = "zookeeper")]
    &regent_zookeeper::KIND,
];

/// A store regent has or plans, by URL scheme.
struct Known {
    scheme: &'static str,
    /// The store; also the name of regent-cli's feature for it.
    store: &'static str,
    /// The feature of this crate that brings it; `None`: not built yet.
    feature: Option<&'static str>,
}

const fn known(scheme: &'static str, store: &'static str, feature: Option<&'static str>) -> Known {
    Known {
        scheme,
        store,
        feature,
    }
}

const CATALOG: &[Known] = &[
    known("sqlite", "sqlite", Some("sqlite")),
    known("etcd", "etcd", Some("etcd")),
    known("etcds", "etcd", Some("etcd-tls")),
    known("consul", "consul", Some("consul")),
    known("consuls", "consul", Some("consul")),
    known("azblob", "azblob", Some("azblob")),
    known("zk", "zookeeper", Some("zookeeper")),
    known("redis", "redis", None),
    known("postgres", "postgres", None),
];

/// The store kinds this build includes, in a fixed order.
pub fn store_kinds() -> &'static [&'static StoreKind] {
    KINDS
}

/// The URL forms of every included store, for messages.
pub fn supported_forms() -> String {
    KINDS.iter().map(|k| k.forms).collect::<Vec<_>>().join(", ")
}

/// The kind whose flag (without dashes, `etcd-cacert`) this is.
fn kind_of_flag(flag: &str) -> Option<&'static StoreKind> {
    KINDS.iter().copied().find(|k| {
        k.options
            .iter()
            .any(|o| o.has_flag() && o.flag_name(k) == flag)
    })
}

/// The store kind `url`'s scheme names.
///
/// # Errors
///
/// A [`TargetError`] for a URL without a scheme, an unknown scheme, or one
/// whose store this build leaves out (naming the feature that brings it).
pub fn kind_of(url: &str) -> Result<&'static StoreKind, TargetError> {
    let shown = redacted(url);
    let Some((scheme, _)) = url.split_once(':') else {
        return Err(TargetError::new(format!(
            "--store '{shown}' has no scheme; expected one of {}",
            supported_forms()
        )));
    };
    if let Some(kind) = KINDS.iter().find(|k| k.answers(scheme)) {
        return Ok(kind);
    }
    let lower = scheme.to_ascii_lowercase();
    Err(TargetError::new(
        match CATALOG.iter().find(|k| k.scheme == lower) {
            Some(Known {
                scheme,
                store,
                feature: Some(feature),
            }) => format!(
                "--store scheme '{scheme}' is not in this build of regent: build it with the \
                 cargo feature '{feature}' (of the regent crate; regent-cli: '{store}'); \
                 supported: {}",
                supported_forms()
            ),
            Some(Known { scheme, .. }) => format!(
                "--store scheme '{scheme}' is not supported by this build yet; supported: {}",
                supported_forms()
            ),
            None => format!(
                "--store has unknown scheme '{}'; supported: {}",
                printable(scheme),
                supported_forms()
            ),
        },
    ))
}

/// Parses `url` with the options a front end was given: `flags` as
/// `(flag name without dashes, value)` (`("etcd-cacert", "ca.pem")`), and
/// for the options without a flag, their environment variables, read
/// through `env`. Every file the options name is read.
///
/// A flag of another store than the URL's is an error; other stores'
/// variables are ignored, since one environment may serve several stores.
///
/// # Errors
///
/// A [`TargetError`] naming the URL part, flag or variable and the rule.
pub fn parse(
    url: &str,
    flags: &[(String, OsString)],
    env: impl Fn(&str) -> Option<OsString>,
) -> Result<Box<dyn Target>, TargetError> {
    let kind = kind_of(url)?;
    for (flag, _) in flags {
        match kind_of_flag(flag) {
            Some(k) if std::ptr::eq(k, kind) => {}
            Some(k) => {
                return Err(TargetError::new(format!(
                    "--{flag} applies only to {} stores (--store {}), not to {}",
                    k.name,
                    k.short_forms,
                    redacted(url)
                )));
            }
            None => return Err(TargetError::new(format!("--{flag} is not a store option"))),
        }
    }
    let options = kind.resolve(
        |name| {
            flags
                .iter()
                .find(|(f, _)| f == name)
                .map(|(_, v)| v.clone())
        },
        env,
    );
    (kind.parse)(url, &options)
}

/// Why [`connect`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The URL or an option cannot be used.
    #[error(transparent)]
    Target(#[from] TargetError),
    /// The store could not be opened.
    #[error("{target}: {source}")]
    Store {
        /// The store, as its URL (without secrets).
        target: String,
        /// What the store said.
        #[source]
        source: StoreError,
        /// The store's advice on its error, in terms of the options given.
        hint: Option<String>,
    },
}

/// Opens the store `url` names, with `options` by name (`("user",
/// "app")`); an option not given is taken from its environment variable
/// (`REGENT_<STORE>_<OPTION>`, see [`regent_core::target`]). Every call of
/// the store then waits at most the store's default call timeout.
///
/// # Errors
///
/// [`ConnectError::Target`] for a URL or options the store cannot take,
/// [`ConnectError::Store`] when the store cannot be opened.
///
/// # Cancel safety
///
/// Cancel safe: a dropped connection attempt leaves nothing behind.
pub async fn connect(url: &str, options: &[(&str, &str)]) -> Result<BoxStore, ConnectError> {
    let kind = kind_of(url)?;
    let mut given = Options::new();
    for (name, value) in options {
        given.set(kind, name, value)?;
    }
    let options = given.or(&kind.resolve(|_| None, |v| std::env::var_os(v)));
    let target = (kind.parse)(url, &options)?;
    target
        .connect(kind.default_call_timeout)
        .await
        .map_err(|source| ConnectError::Store {
            target: target.to_string(),
            hint: target.hint(&source),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LeaseStore;

    fn parse_store_url(url: &str) -> Result<String, String> {
        parse(url, &[], |_| None)
            .map(|t| t.to_string())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn every_included_kind_answers_its_schemes_and_flags_are_unique() {
        let mut flags = std::collections::BTreeSet::new();
        for kind in store_kinds() {
            for s in kind.schemes {
                assert!(std::ptr::eq(kind_of(&format!("{s}:x")).unwrap(), *kind));
                assert!(
                    CATALOG
                        .iter()
                        .any(|k| k.scheme == *s && k.store == kind.name && k.feature.is_some()),
                    "{s}"
                );
            }
            for o in kind.options {
                assert!(flags.insert(o.flag_name(kind)), "{}", o.name);
            }
        }
    }

    #[cfg(feature = "sqlite")]
    #[test]
    fn other_schemes() {
        let e = parse_store_url("mongo://x").unwrap_err();
        assert!(e.contains("unknown scheme 'mongo'"), "{e}");
        let e = parse_store_url("redis://h:6379").unwrap_err();
        assert!(e.contains("not supported by this build"), "{e}");
        assert!(
            parse_store_url("nothing")
                .unwrap_err()
                .contains("no scheme")
        );
        let e = parse_store_url("REDIS://h:6379").unwrap_err();
        assert!(e.contains("not supported by this build"), "{e}");
        let e = parse_store_url("Mongo://h").unwrap_err();
        assert!(e.contains("unknown scheme 'Mongo'"), "{e}");
        assert_eq!(parse_store_url("SQLite:/x.db"), Ok("sqlite:/x.db".into()));
    }

    #[cfg(feature = "zookeeper")]
    #[test]
    fn zookeeper_urls() {
        assert_eq!(
            parse_store_url("zk://h1,h2:2182/svc"),
            Ok("zk://h1:2181,h2:2182/svc".into())
        );
        let e = parse_store_url("zookeeper://h").unwrap_err();
        assert!(e.contains("zk://h"), "{e}");
    }

    #[cfg(not(feature = "zookeeper"))]
    #[test]
    fn zookeeper_left_out_names_its_feature() {
        let e = parse_store_url("zk://h:2181").unwrap_err();
        assert!(
            e.contains("build it with the cargo feature 'zookeeper'"),
            "{e}"
        );
    }

    #[cfg(all(feature = "sqlite", feature = "etcd"))]
    #[test]
    fn etcd_urls_and_supported_forms() {
        let e = parse_store_url("mongo://x").unwrap_err();
        assert!(
            e.contains("unknown scheme 'mongo'") && e.contains("etcd://"),
            "{e}"
        );
        assert!(e.contains("PORT defaults to 2379"), "{e}");
        assert!(e.contains("[/NAMESPACE]"), "{e}");
        assert_eq!(parse_store_url("ETCD://h:1"), Ok("etcd://h:1".into()));
    }

    #[cfg(all(feature = "sqlite", feature = "etcd"))]
    #[test]
    fn etcd_flags_on_another_store_are_refused_but_variables_ignored() {
        let flags = [("etcd-user".to_owned(), OsString::from("u"))];
        let e = parse("sqlite:/x.db", &flags, |_| None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--etcd-user applies only to etcd stores"), "{e}");
        assert!(
            e.contains("(--store etcd://… or etcds://…), not to sqlite:/x.db"),
            "{e}"
        );
        let env = |k: &str| match k {
            "REGENT_ETCD_USER" => Some(OsString::from("u")),
            "REGENT_ETCD_CACERT" => Some(OsString::from("/nope")),
            _ => None,
        };
        assert_eq!(
            parse("sqlite:/x.db", &[], env).unwrap().to_string(),
            "sqlite:/x.db"
        );
    }

    #[cfg(feature = "consul")]
    #[test]
    fn consul_urls_and_their_secret() {
        assert_eq!(
            parse_store_url("CONSUL://h:1/svc?dc=eu"),
            Ok("consul://h:1/svc/?dc=eu".into())
        );
        let consul = store_kinds()
            .iter()
            .find(|k| k.name == "consul")
            .expect("the consul kind");
        assert!(consul.takes("consuls"));
        assert_eq!(consul.secret_env_names(), ["REGENT_CONSUL_TOKEN"]);
    }

    #[cfg(not(feature = "consul"))]
    #[test]
    fn consul_left_out_names_its_feature() {
        let e = parse_store_url("consuls://h:1").unwrap_err();
        assert!(
            e.contains("build it with the cargo feature 'consul'"),
            "{e}"
        );
    }

    #[cfg(feature = "azblob")]
    #[test]
    fn azblob_urls_and_their_secrets() {
        // regent's own variable; Azure's are the store crate's to read.
        let dev = |k: &str| {
            (k == "REGENT_AZBLOB_CONNECTION_STRING").then(|| "UseDevelopmentStorage=true".into())
        };
        assert_eq!(
            parse("AZBLOB://leases/jobs/", &[], dev)
                .map(|t| t.to_string())
                .map_err(|e| e.to_string()),
            Ok("azblob://leases/jobs/ (account devstoreaccount1 at \
                http://127.0.0.1:10000/devstoreaccount1)"
                .into())
        );
        let e = parse("azblob://Leases", &[], dev).unwrap_err().to_string();
        assert!(e.contains("container name"), "{e}");
        let azblob = store_kinds()
            .iter()
            .find(|k| k.name == "azblob")
            .expect("the azblob kind");
        assert!(azblob.takes("azblob"));
        assert_eq!(
            azblob.secret_env_names(),
            [
                "REGENT_AZBLOB_CONNECTION_STRING",
                "REGENT_AZBLOB_KEY",
                "REGENT_AZBLOB_SAS_TOKEN"
            ]
        );
    }

    #[cfg(not(feature = "azblob"))]
    #[test]
    fn azblob_left_out_names_its_feature() {
        let e = parse_store_url("azblob://leases").unwrap_err();
        assert!(
            e.contains("build it with the cargo feature 'azblob'"),
            "{e}"
        );
    }

    #[cfg(not(feature = "etcd"))]
    #[test]
    fn a_store_left_out_names_its_feature() {
        let e = parse_store_url("etcd://h:1").unwrap_err();
        assert!(e.contains("build it with the cargo feature 'etcd'"), "{e}");
    }

    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn connect_by_url_and_options() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite:{}", dir.path().join("x.db").display());
        let store = connect(&url, &[]).await.unwrap();
        assert_eq!(store.info().name, "sqlite");
        let e = connect(&url, &[("user", "u")]).await.unwrap_err();
        assert!(matches!(e, ConnectError::Target(_)), "{e}");
        assert!(
            e.to_string()
                .contains("sqlite stores have no option 'user'"),
            "{e}"
        );
    }
}
