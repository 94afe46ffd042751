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
//! # Errors name options, front ends spell them
//!
//! A URL or options a store cannot take is a [`TargetError`]: what sort of
//! mistake (a malformed URL, a bad value, a conflict, a missing option, a
//! file that cannot be read, …), the store kind, the options involved by
//! name and where each value came from ([`GivenOption`], [`Source`]), and
//! what is wrong as a [`Detail`] whose references to other options are
//! kept apart from its words. Its `Display` is the library's wording:
//! `` etcd option `cacert`: cannot read /x: No such file or directory ``.
//! A front end with flags and variables renders the same error in its own
//! terms (the `regent` CLI: `--etcd-cacert /x: No such file or directory`)
//! from the variant's fields and [`Detail::pieces`]; the convention of the
//! table above gives it every name. No message quotes a secret: URLs are
//! [`redacted`], values of [secret](OptionKind::Secret) options never
//! appear.
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

mod detail;
mod error;
mod text;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::error::StoreError;
use crate::store::BoxStore;
use crate::types::HolderId;

pub use detail::{Detail, GivenOption, Mention, Piece, Source};
pub use text::{port_number, printable, redacted};

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
/// it), the options given for it, and the environment (`env`: a
/// variable's value), to a checked target. A store that honours another
/// tool's variables (Consul's `CONSUL_HTTP_TOKEN`, Azure's
/// `AZURE_STORAGE_KEY`) reads them through `env` only, so that a front end
/// decides what the environment is (and can note what was read).
pub type ParseFn = fn(
    url: &str,
    options: &Options,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Result<Box<dyn Target>, TargetError>;

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
        // Short: errors carry their kind, and their `Debug` should not
        // print every option's help.
        f.debug_struct("StoreKind")
            .field("name", &self.name)
            .field("schemes", &self.schemes)
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
        &'static self,
        flag: impl Fn(&str) -> Option<OsString>,
        env: impl Fn(&str) -> Option<OsString>,
    ) -> Options {
        let mut options = Options::default();
        for o in self.options {
            let from_flag = o.has_flag().then(|| o.flag_name(self)).and_then(|name| {
                flag(&name).map(|value| OptionValue {
                    value,
                    source: Source::Flag(format!("--{name}")),
                    store: self,
                    option: o.name,
                })
            });
            let value = from_flag.or_else(|| {
                let var = o.env_name(self);
                env(&var)
                    .filter(|v| !v.is_empty())
                    .map(|value| OptionValue {
                        value,
                        source: Source::Env(var),
                        store: self,
                        option: o.name,
                    })
            });
            if let Some(v) = value {
                options.values.insert(o.name, v);
            }
        }
        options
    }
}

/// An option's value, where it came from, and which option of which store
/// it is. `Debug` shows where it came from, never the value, which may be
/// a secret.
#[derive(Clone)]
pub struct OptionValue {
    /// The value as given.
    pub value: OsString,
    /// Where it came from.
    pub source: Source,
    /// The store kind whose option it is.
    pub store: &'static StoreKind,
    /// The option's name.
    pub option: &'static str,
}

impl fmt::Debug for OptionValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Values may be secrets: show where they came from, not what.
        f.debug_struct("OptionValue")
            .field("store", &self.store.name)
            .field("option", &self.option)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl PartialEq for OptionValue {
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value
            && self.source == other.source
            && std::ptr::eq(self.store, other.store)
            && self.option == other.option
    }
}

impl Eq for OptionValue {}

impl OptionValue {
    /// The value as UTF-8 text.
    ///
    /// # Errors
    ///
    /// [`TargetError::BadValue`] when it is not UTF-8.
    pub fn text(&self) -> Result<&str, TargetError> {
        self.value
            .to_str()
            .ok_or_else(|| TargetError::bad_value(self, "is not valid UTF-8"))
    }

    /// The option as given, for errors: its name and source, not its value.
    pub fn given(&self) -> GivenOption {
        GivenOption {
            option: self.option,
            source: self.source.clone(),
        }
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
    /// [`TargetError::UnknownOption`] when `kind` has no option `name`.
    pub fn set(
        &mut self,
        kind: &'static StoreKind,
        name: &str,
        value: impl AsRef<OsStr>,
    ) -> Result<&mut Self, TargetError> {
        let option = kind
            .option(name)
            .ok_or_else(|| TargetError::unknown_option(Some(kind), name))?;
        self.values.insert(
            option.name,
            OptionValue {
                value: value.as_ref().to_owned(),
                source: Source::Api(option.name.to_owned()),
                store: kind,
                option: option.name,
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

/// Why a URL names no store of this build: [`TargetError::Scheme`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SchemeProblem {
    /// The URL has no scheme at all.
    Missing,
    /// A store regent has, which this build leaves out.
    LeftOut {
        /// The cargo feature of the `regent` crate that brings it.
        feature: &'static str,
        /// The feature of the `regent-cli` crate that brings it.
        cli_feature: &'static str,
    },
    /// A store regent plans and has not built yet.
    Planned,
    /// No store regent knows.
    Unknown,
}

/// A URL or options a store cannot take, found before any connection.
///
/// Every variant names the store kind and the options involved by name;
/// values of options never appear (they may be secrets), URLs only
/// [`redacted`]. `Display` is the library's wording (`` etcd option
/// `user` 'root' needs a password: set option `password`, or pass option
/// `password-file` ``); a front end with flags and variables spells the
/// same fields its own way (see the [module docs](self)). A [`Detail`]
/// continues a sentence whose subject is the variant's option, variable or
/// URL.
///
/// Store crates build one with the constructors ([`TargetError::url`],
/// [`TargetError::bad_value`], …), which redact and escape what they quote.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum TargetError {
    /// The URL's scheme names no store of this build.
    #[non_exhaustive]
    Scheme {
        /// The URL, [`redacted`].
        url: String,
        /// Its scheme, [`printable`]; empty when it has none.
        scheme: String,
        /// Why no store takes it.
        problem: SchemeProblem,
        /// The URL forms this build supports.
        supported: String,
    },
    /// The URL is not one the store takes.
    #[non_exhaustive]
    Url {
        /// The store kind.
        store: &'static StoreKind,
        /// The URL, [`redacted`].
        url: String,
        /// What is wrong with it.
        detail: Detail,
    },
    /// An option the store does not have.
    #[non_exhaustive]
    UnknownOption {
        /// The store kind; `None` when no store of this build has it (a
        /// front end's flag, by its name without dashes).
        store: Option<&'static StoreKind>,
        /// The name as given, [`printable`].
        option: String,
    },
    /// An option of another store than the URL's.
    #[non_exhaustive]
    ForeignOption {
        /// The URL's store kind.
        store: &'static StoreKind,
        /// The URL, [`redacted`].
        url: String,
        /// The store kind whose option it is.
        owner: &'static StoreKind,
        /// The option's name.
        option: &'static str,
    },
    /// An option's value, or the file it names, is not one the store takes.
    #[non_exhaustive]
    BadValue {
        /// The store kind.
        store: &'static StoreKind,
        /// The option.
        option: GivenOption,
        /// The file the option names, when what is wrong is in it.
        path: Option<PathBuf>,
        /// What is wrong, after the option (and the file).
        detail: Detail,
    },
    /// Options that contradict each other or the URL.
    #[non_exhaustive]
    Conflict {
        /// The store kind.
        store: &'static StoreKind,
        /// The options involved, at least one; the detail follows the
        /// first and names the others.
        options: Vec<GivenOption>,
        /// What contradicts what, and which to keep.
        detail: Detail,
    },
    /// An option (a secret, a certificate's key, a credential) the others
    /// given need, or the store needs, is missing.
    #[non_exhaustive]
    Missing {
        /// The store kind.
        store: &'static StoreKind,
        /// The options any one of which would do, by name.
        missing: Vec<&'static str>,
        /// The option that needs it; `None` when the store does.
        needed_by: Option<GivenOption>,
        /// What is missing and how to give it, after the option that needs
        /// it (or alone).
        detail: Detail,
    },
    /// The file an option names cannot be read.
    #[non_exhaustive]
    Unreadable {
        /// The store kind.
        store: &'static StoreKind,
        /// The option.
        option: GivenOption,
        /// The file.
        path: PathBuf,
        /// Why it cannot be read.
        source: Arc<std::io::Error>,
    },
    /// A variable of another tool the store reads by itself, not an option
    /// (`CONSUL_HTTP_ADDR`), has a value the store cannot use.
    #[non_exhaustive]
    BadVariable {
        /// The store kind.
        store: &'static StoreKind,
        /// The variable.
        variable: String,
        /// What is wrong with its value.
        detail: Detail,
    },
}
