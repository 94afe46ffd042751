//! Store kinds and targets: how a front end (the `regent` CLI, the facade's
//! `regent::connect`) names a store by URL without knowing any store.
//!
//! Each store crate describes itself once, in a [`StoreKind`]: its URL
//! schemes, the forms of its URL for messages, and a table of its options
//! ([`StoreOption`]: a name, a kind — path, secret or text —, a help text).
//! From that table a front end derives everything else by one convention:
//!
//! | what | derived as | etcd's `cacert` |
//! |---|---|---|
//! | command-line flag | `--KIND-NAME` | `--etcd-cacert` |
//! | environment variable | `REGENT_KIND_NAME`, upper case, `-` as `_` | `REGENT_ETCD_CACERT` |
//! | help section | `KIND store` | `etcd store` |
//!
//! A store's [`StoreKind::parse`] turns a URL and the options given for it
//! ([`Options`]) into a [`Target`]: everything checked and every file read,
//! so that a contradiction is reported before any connection. The target
//! then [connects](Target::connect) and explains the errors of its store in
//! terms of the options the user gave ([`Target::hint`]).
//!
//! Nothing here does IO: the environment comes in as a function, files are
//! the store crates' business.
//!
//! # Why a table and a function pointer, not a trait object per kind
//!
//! A kind is static data that front ends list before any URL is known (to
//! build `--help`, to scrub secrets from a child's environment); a `static`
//! of a plain struct is the simplest thing that is listable, comparable and
//! free of allocation. The parsed target, which holds per-use state (paths,
//! PEM texts, credentials), is a trait object.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::error::StoreError;
use crate::store::BoxStore;
use crate::types::HolderId;

/// The future [`Target::connect`] returns.
pub type ConnectFuture<'a> =
    Pin<Box<dyn Future<Output = Result<BoxStore, StoreError>> + Send + 'a>>;

/// The future [`Target::default_holder_id`] returns.
pub type HolderIdFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Option<HolderId>, StoreError>> + Send + 'a>>;

/// What an option's value is, which decides how front ends treat it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum OptionKind {
    /// A file the store reads at parse time (certificates, password files).
    Path,
    /// A secret (a password, a token). Never a command-line flag, which
    /// `ps` would show: only its environment variable sets it. Front ends
    /// keep it out of child processes' environments and out of messages.
    Secret,
    /// Any other text (a user name, a region).
    Text,
}

/// One option of a store kind. See the [module docs](self) for the names
/// derived from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreOption {
    /// The option's name: lower case ASCII letters, digits and `-`
    /// (`cacert`, `password-file`).
    pub name: &'static str,
    /// Path, secret or text.
    pub kind: OptionKind,
    /// The placeholder of its value in help texts (`FILE`, `USER`).
    pub value_name: &'static str,
    /// One or two sentences of help, without the environment variable
    /// (front ends add it).
    pub help: &'static str,
}

impl StoreOption {
    /// Whether the option may be given as a command-line flag (every kind
    /// but [`OptionKind::Secret`]).
    pub fn has_flag(&self) -> bool {
        self.kind != OptionKind::Secret
    }

    /// The flag's long name without the dashes: `KIND-NAME`.
    pub fn flag_name(&self, kind: &StoreKind) -> String {
        format!("{}-{}", kind.name, self.name)
    }

    /// The environment variable: `REGENT_KIND_NAME` in upper case, `-` as
    /// `_`.
    pub fn env_name(&self, kind: &StoreKind) -> String {
        format!("REGENT_{}_{}", kind.name, self.name)
            .to_ascii_uppercase()
            .replace('-', "_")
    }
}

/// The parser of a store kind: a URL (scheme included, as the user wrote
/// it) and the options given for it, to a checked target.
pub type ParseFn = fn(url: &str, options: &Options) -> Result<Box<dyn Target>, TargetError>;

/// A store kind: everything a front end needs to offer it, without IO.
/// Each store crate exports one as a `static`.
#[derive(Clone, Copy)]
pub struct StoreKind {
    /// Its name, lower case (`sqlite`, `etcd`): the prefix of its flags
    /// and variables.
    pub name: &'static str,
    /// The URL schemes it takes, lower case (`etcd`, `etcds`).
    pub schemes: &'static [&'static str],
    /// Schemes of other tools it answers with advice (etcd: `http`,
    /// `https`, which etcdctl takes): its parser is called with them and
    /// returns the message.
    pub advises: &'static [&'static str],
    /// The forms of its URLs, for messages listing what is supported
    /// (`sqlite:PATH`).
    pub forms: &'static str,
    /// The forms in short, for "applies only to" messages (`etcd://… or
    /// etcds://…`).
    pub short_forms: &'static str,
    /// How long one call of the store waits by default (an etcd request, a
    /// wait on SQLite's lock). A front end may pass less to
    /// [`Target::connect`].
    pub default_call_timeout: Duration,
    /// Its options.
    pub options: &'static [StoreOption],
    /// Command lines of the `regent` CLI on this store, for its `--help`
    /// (`regent run --store etcd://10.0.0.1:2379 --election jobs -- ./worker`).
    pub examples: &'static [&'static str],
    /// Its parser.
    pub parse: ParseFn,
}

impl fmt::Debug for StoreKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreKind")
            .field("name", &self.name)
            .field("schemes", &self.schemes)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl StoreKind {
    /// Whether `scheme` (any case) is one of its own schemes.
    pub fn takes(&self, scheme: &str) -> bool {
        self.schemes.iter().any(|s| s.eq_ignore_ascii_case(scheme))
    }

    /// Whether `scheme` (any case) is one of its own or one it advises on.
    pub fn answers(&self, scheme: &str) -> bool {
        self.takes(scheme) || self.advises.iter().any(|s| s.eq_ignore_ascii_case(scheme))
    }

    /// The option named `name`.
    pub fn option(&self, name: &str) -> Option<&'static StoreOption> {
        self.options.iter().find(|o| o.name == name)
    }

    /// The environment variables of its secrets: front ends remove them
    /// from the environment of the processes they start.
    pub fn secret_env_names(&self) -> Vec<String> {
        self.options
            .iter()
            .filter(|o| o.kind == OptionKind::Secret)
            .map(|o| o.env_name(self))
            .collect()
    }

    /// Resolves the options of this kind: each from its flag (`flag`
    /// answers by the flag's name, `KIND-NAME`), else from its environment
    /// variable (`env` answers by the variable's name). Empty variables
    /// count as unset; secrets have no flag.
    pub fn resolve(
        &self,
        flag: impl Fn(&str) -> Option<OsString>,
        env: impl Fn(&str) -> Option<OsString>,
    ) -> Options {
        let mut options = Options::default();
        for o in self.options {
            let from_flag = o.has_flag().then(|| o.flag_name(self)).and_then(|name| {
                flag(&name).map(|value| OptionValue {
                    value,
                    source: Source::Flag(format!("--{name}")),
                })
            });
            let value = from_flag.or_else(|| {
                let var = o.env_name(self);
                env(&var)
                    .filter(|v| !v.is_empty())
                    .map(|value| OptionValue {
                        value,
                        source: Source::Env(var),
                    })
            });
            if let Some(v) = value {
                options.values.insert(o.name, v);
            }
        }
        options
    }
}

/// Where an option's value came from: messages name it the way the user
/// gave it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Source {
    /// A command-line flag, with its dashes (`--etcd-cacert`).
    Flag(String),
    /// An environment variable (`REGENT_ETCD_CACERT`).
    Env(String),
    /// Set by a program through [`Options::set`], by option name.
    Api(String),
}

impl Source {
    /// Whether it is a command-line flag.
    pub fn is_flag(&self) -> bool {
        matches!(self, Self::Flag(_))
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Flag(s) | Self::Env(s) => f.write_str(s),
            Self::Api(name) => write!(f, "option '{name}'"),
        }
    }
}

/// An option's value and where it came from. `Debug` hides the value of a
/// secret only if the holder wraps it; store crates keep secrets out of
/// their own `Debug` output.
#[derive(Clone, PartialEq, Eq)]
pub struct OptionValue {
    /// The value as given.
    pub value: OsString,
    /// Where it came from.
    pub source: Source,
}

impl fmt::Debug for OptionValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Values may be secrets: show where they came from, not what.
        f.debug_struct("OptionValue")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl OptionValue {
    /// The value as UTF-8 text.
    ///
    /// # Errors
    ///
    /// A [`TargetError`] naming the source when it is not UTF-8.
    pub fn text(&self) -> Result<&str, TargetError> {
        self.value
            .to_str()
            .ok_or_else(|| TargetError::new(format!("{} is not valid UTF-8", self.source)))
    }
}

/// The options given for one store kind, by option name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    values: BTreeMap<&'static str, OptionValue>,
}

impl Options {
    /// No options.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets option `name` of `kind` to `value`, as a program does.
    ///
    /// # Errors
    ///
    /// A [`TargetError`] when `kind` has no option `name`.
    pub fn set(
        &mut self,
        kind: &StoreKind,
        name: &str,
        value: impl AsRef<OsStr>,
    ) -> Result<&mut Self, TargetError> {
        let option = kind.option(name).ok_or_else(|| {
            TargetError::new(format!(
                "{} stores have no option '{name}'; they take: {}",
                kind.name,
                kind.options
                    .iter()
                    .map(|o| o.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        self.values.insert(
            option.name,
            OptionValue {
                value: value.as_ref().to_owned(),
                source: Source::Api(option.name.to_owned()),
            },
        );
        Ok(self)
    }

    /// The value of option `name`, if given.
    pub fn get(&self, name: &str) -> Option<&OptionValue> {
        self.values.get(name)
    }

    /// These options, and for each option not among them its value in
    /// `fallback` (a program's settings over the environment's).
    #[must_use]
    pub fn or(mut self, fallback: &Options) -> Self {
        for (name, value) in &fallback.values {
            self.values.entry(name).or_insert_with(|| value.clone());
        }
        self
    }

    /// Whether no option is given.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

/// A store named by a URL and its options, checked, with every file read:
/// ready to connect.
pub trait Target: fmt::Display + fmt::Debug + Send + Sync {
    /// The kind of store.
    fn kind(&self) -> &'static StoreKind;

    /// Connects to the store. `call_timeout` bounds every later call of the
    /// store (one request, one wait on a lock).
    ///
    /// # Errors
    ///
    /// A classified [`StoreError`]: [`Unavailable`](crate::ErrorKind::Unavailable)
    /// may succeed when retried.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a dropped connection attempt leaves nothing behind.
    fn connect(&self, call_timeout: Duration) -> ConnectFuture<'_>;

    /// The holder id this instance has by the store's own conventions,
    /// for a front end whose user named none: Consul's recipe uses the
    /// local agent's node name as the ClientID. `None` (the default) where
    /// the store has no such convention; the front end then picks its own
    /// (`regent run`: `HOSTNAME-PID`). `call_timeout` bounds each call.
    ///
    /// # Errors
    ///
    /// As [`Target::connect`]; a name the store gives that is not a valid
    /// [`HolderId`] is [`Config`](crate::ErrorKind::Config).
    fn default_holder_id(&self, call_timeout: Duration) -> HolderIdFuture<'_> {
        let _ = call_timeout;
        Box::pin(async { Ok(None) })
    }

    /// Advice on `error` (from this target's store) in terms of the options
    /// the user gave, where the store can tell more than its error says
    /// (etcd: a closed connection under TLS is a refused client
    /// certificate). `None` when it has nothing to add.
    fn hint(&self, error: &StoreError) -> Option<String> {
        let _ = error;
        None
    }
}

/// A URL or options a store cannot take; the message names the URL part,
/// flag or variable and the rule.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct TargetError {
    message: String,
}

impl TargetError {
    /// A new error with `message`, which names what to change.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// `url` as a message may quote it: whatever lies between `://` (or the
/// start) and the last `@` becomes `***`, and control characters are
/// escaped.
///
/// The last `@` of the whole URL rather than of the authority: a password
/// may hold `/`, `?` or `#`, which would end the authority early and leave
/// the rest of the password in the message. Hiding part of a path that
/// holds `@` costs only detail.
pub fn redacted(url: &str) -> String {
    let Some(at) = url.rfind('@') else {
        return printable(url);
    };
    let keep = url.find("://").filter(|&i| i < at).map_or(0, |i| i + 3);
    printable(&format!("{}***{}", &url[..keep], &url[at..]))
}

/// `s` with control characters escaped, so that a message cannot move the
/// cursor or hide part of itself.
pub fn printable(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// A port: ASCII digits only (`u16::from_str` would take a leading `+`),
/// from 1 to 65535.
pub fn port_number(p: &str) -> Option<u16> {
    if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    p.parse().ok().filter(|&n| n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_nothing(_: &str, _: &Options) -> Result<Box<dyn Target>, TargetError> {
        Err(TargetError::new("nothing"))
    }

    static KIND: StoreKind = StoreKind {
        name: "ex",
        schemes: &["ex", "exs"],
        advises: &["http"],
        forms: "ex://HOST",
        short_forms: "ex://…",
        default_call_timeout: Duration::from_secs(1),
        options: &[
            StoreOption {
                name: "ca-cert",
                kind: OptionKind::Path,
                value_name: "FILE",
                help: "A CA.",
            },
            StoreOption {
                name: "password",
                kind: OptionKind::Secret,
                value_name: "PASSWORD",
                help: "A password.",
            },
        ],
        examples: &[],
        parse: parse_nothing,
    };

    #[test]
    fn names_follow_one_convention() {
        let ca = KIND.option("ca-cert").unwrap();
        assert_eq!(ca.flag_name(&KIND), "ex-ca-cert");
        assert_eq!(ca.env_name(&KIND), "REGENT_EX_CA_CERT");
        assert!(ca.has_flag());
        assert!(!KIND.option("password").unwrap().has_flag());
        assert_eq!(KIND.secret_env_names(), ["REGENT_EX_PASSWORD"]);
        assert!(KIND.takes("EXS") && !KIND.takes("http") && KIND.answers("HTTP"));
    }

    #[test]
    fn flags_win_over_variables_and_secrets_have_no_flag() {
        let flag = |n: &str| (n == "ex-ca-cert" || n == "ex-password").then(|| OsString::from("f"));
        let env = |v: &str| match v {
            "REGENT_EX_CA_CERT" => Some(OsString::from("e")),
            "REGENT_EX_PASSWORD" => Some(OsString::from("pw")),
            _ => None,
        };
        let o = KIND.resolve(flag, env);
        let ca = o.get("ca-cert").unwrap();
        assert_eq!(ca.value, "f");
        assert_eq!(ca.source.to_string(), "--ex-ca-cert");
        let pw = o.get("password").unwrap();
        assert_eq!(
            (pw.value.to_str(), pw.source.is_flag()),
            (Some("pw"), false)
        );
        assert_eq!(pw.source.to_string(), "REGENT_EX_PASSWORD");
        assert!(!format!("{o:?}").contains("pw\""), "{o:?}");
        // Empty variables are unset.
        let o = KIND.resolve(|_| None, |_| Some(OsString::new()));
        assert!(o.is_empty());
    }

    #[test]
    fn programs_set_options_by_name() {
        let mut o = Options::new();
        o.set(&KIND, "ca-cert", "/ca.pem").unwrap();
        assert_eq!(
            o.get("ca-cert").unwrap().source.to_string(),
            "option 'ca-cert'"
        );
        let e = o.set(&KIND, "nope", "x").unwrap_err();
        assert!(
            e.message().contains("no option 'nope'") && e.message().contains("ca-cert, password"),
            "{e}"
        );
    }

    #[test]
    fn redaction_and_ports() {
        assert_eq!(redacted("etcd://h:1/ns"), "etcd://h:1/ns");
        assert_eq!(redacted("etcd://u:p@h/a@b"), "etcd://***@b");
        assert_eq!(redacted("x:u:p@h"), "***@h");
        assert_eq!(printable("a\tb"), "a\\tb");
        assert_eq!(port_number("02379"), Some(2379));
        for bad in ["", "+80", "-1", "0", "65536", "٣"] {
            assert_eq!(port_number(bad), None, "{bad}");
        }
    }
}
