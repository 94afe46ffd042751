//! The words of a [`TargetError`](super::TargetError) that each front end
//! spells its own way: where a value came from ([`Source`]), an option as
//! given ([`GivenOption`]), and what is wrong with references to other
//! options ([`Detail`]).
//!
//! The library names an option by its name (`` option `cacert` ``); the
//! `regent` CLI names it by the flag or variable that sets it
//! (`--etcd-cacert`, `REGENT_ETCD_PASSWORD`). A [`Detail`] therefore keeps
//! option references apart from its text ([`Piece::Option`]), each with a
//! hint of how a front end with flags and variables should mention it
//! ([`Mention`]); its `Display` is the library's wording.

use std::fmt;

/// Where an option's value came from: front ends with flags and variables
/// name it the way the user gave it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Source {
    /// A command-line flag, with its dashes (`--etcd-cacert`).
    Flag(String),
    /// An environment variable: the option's own (`REGENT_ETCD_CACERT`),
    /// or one of the store's tools that the store honours when the option
    /// is not given (`CONSUL_CACERT`).
    Env(String),
    /// Set by a program through [`Options::set`](super::Options::set), by
    /// option name.
    Api(String),
}

impl Source {
    /// Whether it is a command-line flag.
    pub fn is_flag(&self) -> bool {
        matches!(self, Self::Flag(_))
    }

    /// The variable of another tool (not regent's own `REGENT_…`) the
    /// value came from, which the library's wording names: the user may
    /// not know that the store read it.
    pub fn foreign_variable(&self) -> Option<&str> {
        match self {
            Self::Env(var) if !var.starts_with("REGENT_") => Some(var),
            _ => None,
        }
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

/// An option of a store as it was given: its name and where its value came
/// from (never the value, which may be a secret).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GivenOption {
    /// The option's name (`cacert`).
    pub option: &'static str,
    /// Where its value came from.
    pub source: Source,
}

impl fmt::Display for GivenOption {
    /// The library's wording: `` option `cacert` ``, and the variable of
    /// another tool it came from, if so (`` option `cacert` (CONSUL_CACERT) ``).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "option `{}`", self.option)?;
        if let Some(var) = self.source.foreign_variable() {
            write!(f, " ({var})")?;
        }
        Ok(())
    }
}

/// How a front end with flags and variables should mention an option in a
/// [`Detail`]. The library's wording ignores it (`` option `key` ``).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mention {
    /// Where it is set: its flag, or its variable for a secret, which has
    /// no flag (`--etcd-user`, `REGENT_ETCD_PASSWORD`).
    Set,
    /// Both ways to set it (`--consul-key or REGENT_CONSUL_KEY`).
    EitherWay,
    /// Both ways, the flag with a placeholder for the value
    /// ([`StoreOption::value_name`](super::StoreOption::value_name):
    /// `--etcd-key FILE (or REGENT_ETCD_KEY)`).
    EitherWayWithValue,
    /// The way the error's own option was given: its flag if that came by
    /// flag, else its variable (a swapped certificate and key named alike).
    LikeTheSubject,
}

/// One part of a [`Detail`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Piece {
    /// Words, the same for every front end.
    Text(String),
    /// An option of the error's store, by name.
    Option {
        /// The option's name (`password-file`).
        name: &'static str,
        /// How a front end with flags and variables mentions it.
        mention: Mention,
    },
    /// An option as it was given (the other side of a conflict).
    Given(GivenOption),
}

/// What is wrong and what to do, continuing a sentence whose subject a
/// front end writes (the option, the variable or the URL): `is not valid
/// UTF-8`, `: the file is empty`. A detail that starts with punctuation
/// follows the subject directly, any other after a space
/// ([`joiner`](Self::joiner)).
///
/// Its `Display` is the library's wording: options by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Detail {
    pieces: Vec<Piece>,
}

impl Detail {
    /// A detail of `text` alone.
    pub fn new(text: impl Into<String>) -> Self {
        Self::default().text(text)
    }

    /// Appends words.
    #[must_use]
    pub fn text(mut self, text: impl Into<String>) -> Self {
        let text = text.into();
        if !text.is_empty() {
            self.pieces.push(Piece::Text(text));
        }
        self
    }

    /// Appends a reference to option `name` of the error's store.
    #[must_use]
    pub fn option(mut self, name: &'static str, mention: Mention) -> Self {
        self.pieces.push(Piece::Option { name, mention });
        self
    }

    /// Appends an option as it was given.
    #[must_use]
    pub fn given(mut self, option: GivenOption) -> Self {
        self.pieces.push(Piece::Given(option));
        self
    }

    /// Appends another detail.
    #[must_use]
    pub fn then(mut self, more: Detail) -> Self {
        self.pieces.extend(more.pieces);
        self
    }

    /// Its parts, for a front end to spell.
    pub fn pieces(&self) -> &[Piece] {
        &self.pieces
    }

    /// What goes between the subject and this detail: nothing before
    /// punctuation (`:`, `;`, `,`), else a space.
    pub fn joiner(&self) -> &'static str {
        match self.pieces.first() {
            Some(Piece::Text(t)) if t.starts_with([':', ';', ',']) => "",
            _ => " ",
        }
    }
}

impl From<String> for Detail {
    fn from(text: String) -> Self {
        Self::new(text)
    }
}

impl From<&str> for Detail {
    fn from(text: &str) -> Self {
        Self::new(text)
    }
}

impl fmt::Display for Piece {
    /// The library's wording: words as they are, options by name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Text(t) => f.write_str(t),
            Self::Option { name, .. } => write!(f, "option `{name}`"),
            Self::Given(given) => given.fmt(f),
        }
    }
}

impl fmt::Display for Detail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.pieces.iter().try_for_each(|piece| piece.fmt(f))
    }
}
