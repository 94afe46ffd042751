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
//!
//! Errors name options by name (`` etcd option `cacert` ``), the way
//! [`connect`] takes them: a [`TargetError`] never speaks of a front end's
//! flags or variables. A front end with those renders the error's fields
//! in its own terms (see [`regent_core::target`]).

use std::ffi::OsString;

use crate::{BoxStore, StoreError};
use regent_core::target::{Options, SchemeProblem, StoreKind, StoreOption, Target, TargetError};

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
    #[cfg(feature = "postgres")]
    &regent_postgres::KIND,
    #[cfg(feature = "redis")]
    &regent_redis::KIND,
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
    known("redis", "redis", Some("redis")),
    known("rediss", "redis", Some("redis")),
    known("redis+sentinel", "redis", Some("redis")),
    known("redis-sentinel", "redis", Some("redis")),
    known("postgres", "postgres", Some("postgres")),
    known("postgresql", "postgres", Some("postgres")),
];

/// The store kinds this build includes, in a fixed order.
pub fn store_kinds() -> &'static [&'static StoreKind] {
    KINDS
}

/// The URL forms of every included store, for messages.
pub fn supported_forms() -> String {
    KINDS.iter().map(|k| k.forms).collect::<Vec<_>>().join(", ")
}

/// The kind and option whose flag (without dashes, `etcd-cacert`) this is.
fn option_of_flag(flag: &str) -> Option<(&'static StoreKind, &'static StoreOption)> {
    KINDS.iter().copied().find_map(|k| {
        k.options
            .iter()
            .find(|o| o.has_flag() && o.flag_name(k) == flag)
            .map(|o| (k, o))
    })
}

/// The store kind `url`'s scheme names.
///
/// # Errors
///
/// [`TargetError::Scheme`] for a URL without a scheme, an unknown scheme,
/// or one whose store this build leaves out (naming the feature that
/// brings it).
pub fn kind_of(url: &str) -> Result<&'static StoreKind, TargetError> {
    let Some((scheme, _)) = url.split_once(':') else {
        return Err(TargetError::scheme(
            url,
            "",
            SchemeProblem::Missing,
            supported_forms(),
        ));
    };
    if let Some(kind) = KINDS.iter().find(|k| k.answers(scheme)) {
        return Ok(kind);
    }
    let lower = scheme.to_ascii_lowercase();
    let (scheme, problem) = match CATALOG.iter().find(|k| k.scheme == lower) {
        Some(Known {
            scheme,
            store,
            feature: Some(feature),
        }) => (
            *scheme,
            SchemeProblem::LeftOut {
                feature,
                cli_feature: store,
            },
        ),
        Some(Known { scheme, .. }) => (*scheme, SchemeProblem::Planned),
        None => (scheme, SchemeProblem::Unknown),
    };
    Err(TargetError::scheme(url, scheme, problem, supported_forms()))
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
/// A [`TargetError`] naming the store, the URL part or the options and the
/// rule: [`ForeignOption`](TargetError::ForeignOption) for a flag of
/// another store, [`UnknownOption`](TargetError::UnknownOption) without a
/// store for a flag of none.
pub fn parse(
    url: &str,
    flags: &[(String, OsString)],
    env: impl Fn(&str) -> Option<OsString>,
) -> Result<Box<dyn Target>, TargetError> {
    target_with(url, flags, &[], env).map(|(target, _)| target)
}

/// Why [`connect`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The URL or an option cannot be used; the error names the options
    /// by name.
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
    let (target, timeout) = target_of(url, options, |v| std::env::var_os(v))?;
    open(&*target, timeout).await
}

/// The target `url` and `options` name, with the options not given read
/// through `env`, and the store's default call timeout.
pub(crate) fn target_of(
    url: &str,
    options: &[(&str, &str)],
    env: impl Fn(&str) -> Option<OsString>,
) -> Result<(Box<dyn Target>, std::time::Duration), TargetError> {
    target_with(url, &[], options, env)
}

/// The target `url` names with a front end's `flags` (see [`parse`]),
/// `options` by name (see [`connect`]; they win over flags), the rest read
/// through `env`; and the store's default call timeout.
pub(crate) fn target_with(
    url: &str,
    flags: &[(String, OsString)],
    options: &[(&str, &str)],
    env: impl Fn(&str) -> Option<OsString>,
) -> Result<(Box<dyn Target>, std::time::Duration), TargetError> {
    let kind = kind_of(url)?;
    for (flag, _) in flags {
        match option_of_flag(flag) {
            Some((k, _)) if std::ptr::eq(k, kind) => {}
            Some((k, o)) => return Err(TargetError::foreign_option(kind, url, k, o.name)),
            None => return Err(TargetError::unknown_option(None, flag)),
        }
    }
    let mut given = Options::new();
    for (name, value) in options {
        given.set(kind, name, value)?;
    }
    let resolved = kind.resolve(
        |name| {
            flags
                .iter()
                .find(|(f, _)| f == name)
                .map(|(_, v)| v.clone())
        },
        &env,
    );
    let options = given.or(&resolved);
    Ok((
        (kind.parse)(url, &options, &env)?,
        kind.default_call_timeout,
    ))
}

/// Connects to `target`, every later call bounded by `timeout`.
pub(crate) async fn open(
    target: &dyn Target,
    timeout: std::time::Duration,
) -> Result<BoxStore, ConnectError> {
    target
        .connect(timeout)
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

    /// Regression: Consul's and Azure's parsers read their tools'
    /// variables (`CONSUL_HTTP_TOKEN_FILE`, `AZURE_STORAGE_KEY`) from the
    /// process, not through `env`: a front end could neither choose the
    /// environment nor note what was read (the CLI's release ticket).
    #[cfg(all(feature = "consul", feature = "azblob"))]
    #[test]
    fn other_tools_variables_are_read_through_env() {
        let consul = parse("consul://h:1", &[], |k| {
            (k == "CONSUL_HTTP_TOKEN_FILE").then(|| "/nonexistent/token".into())
        })
        .expect_err("a token file that cannot be read");
        assert!(
            consul.to_string().contains("/nonexistent/token"),
            "{consul}"
        );
        let azure = parse("azblob://leases", &[], |k| {
            (k == "AZURE_STORAGE_ACCOUNT").then(|| "acct".into())
        })
        .expect_err("an account without a credential");
        assert!(azure.to_string().contains("'acct'"), "{azure}");
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
        #[cfg(not(feature = "redis"))]
        {
            let e = parse_store_url("redis://h:6379").unwrap_err();
            assert!(
                e.contains("feature"),
                "a store left out names its feature: {e}"
            );
        }
        assert!(
            parse_store_url("nothing")
                .unwrap_err()
                .contains("no scheme")
        );
        #[cfg(feature = "redis")]
        assert!(
            parse_store_url("REDIS://h:6379").is_ok(),
            "schemes are matched without regard to case"
        );
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
        let e = parse("sqlite:/x.db", &flags, |_| None).unwrap_err();
        assert!(
            matches!(&e, TargetError::ForeignOption { store, owner, option, .. }
                if store.name == "sqlite" && owner.name == "etcd" && *option == "user"),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "etcd option `user` applies only to etcd stores (etcd://… or etcds://…), not to \
             sqlite:/x.db"
        );
        let flags = [("etcd-nope".to_owned(), OsString::from("u"))];
        let e = parse("sqlite:/x.db", &flags, |_| None).unwrap_err();
        assert!(
            matches!(&e, TargetError::UnknownOption { store: None, option, .. } if option == "etcd-nope"),
            "{e:?}"
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
        assert!(
            matches!(&e, ConnectError::Target(TargetError::UnknownOption { store: Some(k), .. }) if k.name == "sqlite"),
            "{e}"
        );
        assert_eq!(
            e.to_string(),
            "sqlite stores have no option 'user'; they take none"
        );
    }

    /// A flag of regent's CLI (`--etcd-cacert`) or one of its variables
    /// (`REGENT_ETCD_PASSWORD`) in a message.
    fn speaks_cli(message: &str) -> bool {
        message.contains("REGENT_")
            || message
                .match_indices("--")
                .any(|(i, _)| message[i + 2..].starts_with(|c: char| c.is_ascii_lowercase()))
    }

    /// Library users get errors that name the store and the option, never
    /// a flag or variable of the CLI (issue 26): one case per store kind
    /// and kind of mistake, through each kind's parser with options set by
    /// name, as `connect` passes them.
    #[test]
    fn errors_name_the_store_and_the_option_not_the_cli() {
        let dir = tempfile::tempdir().unwrap();
        let junk = dir.path().join("junk");
        std::fs::write(&junk, "not pem").unwrap();
        let gone = dir.path().join("gone");
        let junk = junk.to_str().unwrap();
        let gone = gone.to_str().unwrap();
        /// A URL, options by name, and the words the message must hold.
        type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, Vec<&'a str>);
        let cases: Vec<Case> = vec![
            #[cfg(feature = "sqlite")]
            ("sqlite:", vec![], vec!["sqlite URL 'sqlite:'"]),
            #[cfg(feature = "etcd")]
            (
                "etcd://root:hunter2@h:1",
                vec![],
                vec![
                    "etcd URL 'etcd://***@h:1'",
                    "option `user`",
                    "option `password`",
                ],
            ),
            #[cfg(feature = "etcd")]
            (
                "etcd://h:1",
                vec![("user", "root")],
                vec!["etcd option `user`", "option `password-file`"],
            ),
            #[cfg(feature = "etcd")]
            (
                "etcd://h:1",
                vec![("cacert", junk)],
                vec!["etcd option `cacert` is set", "etcds://"],
            ),
            #[cfg(feature = "etcd")]
            (
                "etcd://h:1",
                vec![("user", "u"), ("password-file", gone)],
                vec!["etcd option `password-file`: cannot read"],
            ),
            #[cfg(feature = "etcd-tls")]
            (
                "etcds://h:1",
                vec![("cacert", junk)],
                vec!["etcd option `cacert`", "not a PEM file"],
            ),
            #[cfg(feature = "consul")]
            (
                "consul://h?dc=a",
                vec![("dc", "b")],
                vec!["consul option `dc`", "keep one"],
            ),
            #[cfg(feature = "consul")]
            (
                "consul://h",
                vec![("lock-delay", "soon")],
                vec!["consul option `lock-delay` 'soon' is not a lock delay"],
            ),
            #[cfg(feature = "consul")]
            (
                "consuls://h",
                vec![("cert", junk)],
                vec!["consul option `cert` needs its private key: option `key`"],
            ),
            #[cfg(feature = "consul")]
            (
                "consul://tok@h",
                vec![],
                vec!["consul URL 'consul://***@h'", "option `token`"],
            ),
            #[cfg(feature = "azblob")]
            (
                "azblob://leases",
                vec![("account", "contoso")],
                vec![
                    "azblob option `account`",
                    "option `key` or option `sas-token`",
                ],
            ),
            #[cfg(any(feature = "etcd", feature = "azblob"))]
            (
                "https://acct.blob.core.windows.net/leases",
                vec![],
                vec!["URL 'https://acct.blob.core.windows.net/leases'"],
            ),
            #[cfg(feature = "zookeeper")]
            (
                "zk://u:p@h",
                vec![],
                vec!["zookeeper URL 'zk://***@h'", "option `digest-file`"],
            ),
            #[cfg(feature = "zookeeper")]
            (
                "zk://h",
                vec![("digest", "nocolon")],
                vec!["zookeeper option `digest`", "USER:PASSWORD"],
            ),
        ];
        for (url, options, words) in cases {
            let kind = kind_of(url).unwrap();
            let mut given = Options::new();
            for (name, value) in &options {
                given.set(kind, name, value).unwrap();
            }
            let e = (kind.parse)(url, &given, &|_| None).expect_err(url);
            let message = e.to_string();
            assert_eq!(e.store().map(|k| k.name), Some(kind.name), "{message}");
            // The option it is about is one of those given, by name.
            assert!(
                options.is_empty() || options.iter().any(|(name, _)| e.options().contains(name)),
                "{message}: {:?}",
                e.options()
            );
            for w in words {
                assert!(message.contains(w), "{url}: no {w:?} in {message}");
            }
            assert!(!speaks_cli(&message), "{url}: {message}");
            assert!(
                !message.contains("hunter2") && !message.contains(":p@"),
                "{message}"
            );
        }
        // Without etcd and Consul, no case reads a file.
        let _ = (junk, gone);
        // The facade's own errors too.
        for url in ["nothing", "mongo://x"] {
            let message = kind_of(url).unwrap_err().to_string();
            assert!(!speaks_cli(&message), "{url}: {message}");
        }
    }
}
