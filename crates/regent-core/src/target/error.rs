//! [`TargetError`]'s constructors, which redact and escape what they
//! quote, and its `Display`: the library's wording, options by name.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use super::{
    Detail, GivenOption, OptionValue, SchemeProblem, StoreKind, TargetError, printable, redacted,
};

impl TargetError {
    /// [`Scheme`](Self::Scheme): `url` (redacted here) names no store of
    /// this build.
    pub fn scheme(
        url: &str,
        scheme: &str,
        problem: SchemeProblem,
        supported: impl Into<String>,
    ) -> Self {
        Self::Scheme {
            url: redacted(url),
            scheme: printable(scheme),
            problem,
            supported: supported.into(),
        }
    }

    /// [`Url`](Self::Url): `url` (redacted here) is not one `store` takes.
    pub fn url(store: &'static StoreKind, url: &str, detail: impl Into<Detail>) -> Self {
        Self::Url {
            store,
            url: redacted(url),
            detail: detail.into(),
        }
    }

    /// [`UnknownOption`](Self::UnknownOption): no option `option` (escaped
    /// here) in `store`, or in any store of this build.
    pub fn unknown_option(store: Option<&'static StoreKind>, option: &str) -> Self {
        Self::UnknownOption {
            store,
            option: printable(option),
        }
    }

    /// [`ForeignOption`](Self::ForeignOption): `owner`'s option given with
    /// a URL (redacted here) of `store`.
    pub fn foreign_option(
        store: &'static StoreKind,
        url: &str,
        owner: &'static StoreKind,
        option: &'static str,
    ) -> Self {
        Self::ForeignOption {
            store,
            url: redacted(url),
            owner,
            option,
        }
    }

    /// [`BadValue`](Self::BadValue) of `value`.
    pub fn bad_value(value: &OptionValue, detail: impl Into<Detail>) -> Self {
        Self::BadValue {
            store: value.store,
            option: value.given(),
            path: None,
            detail: detail.into(),
        }
    }

    /// [`BadValue`](Self::BadValue): the file at `path`, which `value`
    /// names, does not hold what the option takes.
    pub fn bad_file(value: &OptionValue, path: &Path, detail: impl Into<Detail>) -> Self {
        Self::BadValue {
            store: value.store,
            option: value.given(),
            path: Some(path.to_owned()),
            detail: detail.into(),
        }
    }

    /// [`Conflict`](Self::Conflict) of `first` with what `detail` names
    /// ([`Detail::given`] for `others`).
    pub fn conflict(
        first: &OptionValue,
        others: &[&OptionValue],
        detail: impl Into<Detail>,
    ) -> Self {
        Self::Conflict {
            store: first.store,
            options: std::iter::once(first)
                .chain(others.iter().copied())
                .map(OptionValue::given)
                .collect(),
            detail: detail.into(),
        }
    }

    /// [`Missing`](Self::Missing): `value` needs one of the options
    /// `missing`.
    pub fn missing(
        value: &OptionValue,
        missing: &[&'static str],
        detail: impl Into<Detail>,
    ) -> Self {
        Self::Missing {
            store: value.store,
            missing: missing.to_vec(),
            needed_by: Some(value.given()),
            detail: detail.into(),
        }
    }

    /// [`Missing`](Self::Missing): `store` needs one of the options
    /// `missing`; `detail` is the whole sentence.
    pub fn missing_for(
        store: &'static StoreKind,
        missing: &[&'static str],
        detail: impl Into<Detail>,
    ) -> Self {
        Self::Missing {
            store,
            missing: missing.to_vec(),
            needed_by: None,
            detail: detail.into(),
        }
    }

    /// [`Unreadable`](Self::Unreadable): the file at `path`, which `value`
    /// names, cannot be read.
    pub fn unreadable(value: &OptionValue, path: &Path, source: std::io::Error) -> Self {
        Self::Unreadable {
            store: value.store,
            option: value.given(),
            path: path.to_owned(),
            source: Arc::new(source),
        }
    }

    /// [`BadVariable`](Self::BadVariable): `store` cannot use the value of
    /// `variable`.
    pub fn bad_variable(
        store: &'static StoreKind,
        variable: &str,
        detail: impl Into<Detail>,
    ) -> Self {
        Self::BadVariable {
            store,
            variable: variable.to_owned(),
            detail: detail.into(),
        }
    }

    /// The store kind the error is about; `None` for a URL that names none
    /// and an option no store has.
    pub fn store(&self) -> Option<&'static StoreKind> {
        match self {
            Self::Scheme { .. } => None,
            Self::UnknownOption { store, .. } => *store,
            Self::Url { store, .. }
            | Self::ForeignOption { store, .. }
            | Self::BadValue { store, .. }
            | Self::Conflict { store, .. }
            | Self::Missing { store, .. }
            | Self::Unreadable { store, .. }
            | Self::BadVariable { store, .. } => Some(store),
        }
    }

    /// The options the error is about, by name: the one given and, for a
    /// conflict or a missing option, the others involved.
    pub fn options(&self) -> Vec<&str> {
        match self {
            Self::Scheme { .. } | Self::Url { .. } | Self::BadVariable { .. } => Vec::new(),
            Self::UnknownOption { option, .. } => vec![option],
            Self::ForeignOption { option, .. } => vec![option],
            Self::BadValue { option, .. } | Self::Unreadable { option, .. } => vec![option.option],
            Self::Conflict { options, .. } => options.iter().map(|o| o.option).collect(),
            Self::Missing {
                missing, needed_by, ..
            } => needed_by
                .iter()
                .map(|o| o.option)
                .chain(missing.iter().copied())
                .collect(),
        }
    }
}

/// `etcd option `cacert``, and the foreign variable it came from, if so.
struct Subject<'a>(&'static StoreKind, &'a GivenOption);

impl fmt::Display for Subject<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.0.name, self.1)
    }
}

impl fmt::Display for TargetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Scheme {
                url,
                scheme,
                problem,
                supported,
            } => match problem {
                SchemeProblem::Missing => {
                    write!(f, "URL '{url}' has no scheme; expected one of {supported}")
                }
                SchemeProblem::LeftOut {
                    feature,
                    cli_feature,
                } => write!(
                    f,
                    "URL scheme '{scheme}' is not in this build of regent: build it with the \
                     cargo feature '{feature}' (of the regent crate; regent-cli: \
                     '{cli_feature}'); supported: {supported}"
                ),
                SchemeProblem::Planned => write!(
                    f,
                    "URL scheme '{scheme}' is not supported by this build yet; supported: \
                     {supported}"
                ),
                SchemeProblem::Unknown => {
                    write!(
                        f,
                        "URL has unknown scheme '{scheme}'; supported: {supported}"
                    )
                }
            },
            Self::Url { store, url, detail } => {
                write!(f, "{} URL '{url}'{}{detail}", store.name, detail.joiner())
            }
            Self::UnknownOption {
                store: Some(store),
                option,
            } => {
                let names = store.options.iter().map(|o| o.name).collect::<Vec<_>>();
                if names.is_empty() {
                    write!(
                        f,
                        "{} stores have no option '{option}'; they take none",
                        store.name
                    )
                } else {
                    write!(
                        f,
                        "{} stores have no option '{option}'; they take: {}",
                        store.name,
                        names.join(", ")
                    )
                }
            }
            Self::UnknownOption {
                store: None,
                option,
            } => write!(f, "no store of this build has an option '{option}'"),
            Self::ForeignOption {
                url, owner, option, ..
            } => write!(
                f,
                "{} option `{option}` applies only to {} stores ({}), not to {url}",
                owner.name, owner.name, owner.short_forms
            ),
            Self::BadValue {
                store,
                option,
                path,
                detail,
            } => {
                write!(f, "{}", Subject(store, option))?;
                if let Some(path) = path {
                    write!(f, " {}", path.display())?;
                }
                write!(f, "{}{detail}", detail.joiner())
            }
            Self::Conflict {
                store,
                options,
                detail,
            } => {
                if let Some(first) = options.first() {
                    write!(f, "{}{}", Subject(store, first), detail.joiner())?;
                }
                write!(f, "{detail}")
            }
            Self::Missing {
                store,
                needed_by,
                detail,
                ..
            } => {
                if let Some(by) = needed_by {
                    write!(f, "{}{}", Subject(store, by), detail.joiner())?;
                }
                write!(f, "{detail}")
            }
            Self::Unreadable {
                store,
                option,
                path,
                source,
            } => write!(
                f,
                "{}: cannot read {}: {source}",
                Subject(store, option),
                path.display()
            ),
            Self::BadVariable {
                store,
                variable,
                detail,
            } => write!(f, "{}: {variable}{}{detail}", store.name, detail.joiner()),
        }
    }
}

impl std::error::Error for TargetError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Unreadable { source, .. } => Some(&**source),
            _ => None,
        }
    }
}
