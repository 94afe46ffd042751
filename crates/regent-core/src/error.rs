//! Errors. Expected outcomes ("someone else leads", "the lease is lost") are
//! values ([`Acquire`](crate::Acquire), [`Renewal`](crate::Renewal),
//! [`EndReason`](crate::EndReason)), never errors.

use std::error::Error as StdError;
use std::fmt;
use std::time::Duration;

/// A boxed error from a store's client library, kept as the source of a
/// [`StoreError`].
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// A name, id or metadata that breaks its rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidName {
    /// The value is empty.
    #[error("{what} must not be empty")]
    Empty {
        /// Which value.
        what: &'static str,
    },
    /// The value is longer than allowed.
    #[error("{what} is {len} bytes long; at most {max} are allowed")]
    TooLong {
        /// Which value.
        what: &'static str,
        /// Its length in bytes.
        len: usize,
        /// The bound.
        max: usize,
    },
    /// The value holds a character outside its charset.
    #[error("{what} contains {c:?}; allowed are {allowed}")]
    BadChar {
        /// Which value.
        what: &'static str,
        /// The first offending character.
        c: char,
        /// The charset, in words.
        allowed: &'static str,
    },
    /// The value does not start with a letter or digit.
    #[error("{what} must start with an ASCII letter or digit")]
    BadStart {
        /// Which value.
        what: &'static str,
    },
}

/// What kind of failure a [`StoreError`] is: the caller decides from this
/// whether to retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The store could not be reached or did not answer in time, or answered
    /// "busy". Retrying with backoff may succeed.
    Unavailable,
    /// The store refused our credentials or permissions. Retrying will not help.
    Auth,
    /// The store, or the request, is misconfigured (a bad address, a TTL the
    /// store cannot honour, a missing container). Retrying will not help.
    Config,
    /// The record under our key is not one regent wrote, or is malformed.
    /// regent never takes over such a record silently.
    Corrupt,
    /// The store broke its contract (an answer that cannot be). A bug here or
    /// in the store.
    Protocol,
}

impl ErrorKind {
    /// Whether an operation that failed with this kind may succeed if
    /// retried after a backoff.
    pub fn is_transient(self) -> bool {
        matches!(self, ErrorKind::Unavailable)
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ErrorKind::Unavailable => "store unavailable",
            ErrorKind::Auth => "store refused the credentials or the permission",
            ErrorKind::Config => "store misconfigured",
            ErrorKind::Corrupt => "unexpected data in the store",
            ErrorKind::Protocol => "store broke its contract",
        })
    }
}

/// A failure of a store operation, classified by [`ErrorKind`].
#[derive(Debug)]
pub struct StoreError {
    kind: ErrorKind,
    context: String,
    source: Option<BoxError>,
}

impl StoreError {
    /// A new error of `kind`; `context` says what was being done and on what
    /// ("renew election 'jobs' at 127.0.0.1:2379").
    pub fn new(kind: ErrorKind, context: impl Into<String>) -> Self {
        Self {
            kind,
            context: context.into(),
            source: None,
        }
    }

    /// Attaches the client library's error as the cause.
    #[must_use]
    pub fn with_source(mut self, source: impl Into<BoxError>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// A transient failure ([`ErrorKind::Unavailable`]).
    pub fn unavailable(context: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unavailable, context)
    }

    /// Garbage in the store ([`ErrorKind::Corrupt`]).
    pub fn corrupt(context: impl Into<String>) -> Self {
        Self::new(ErrorKind::Corrupt, context)
    }

    /// The kind of failure.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// Whether retrying after a backoff may succeed.
    pub fn is_transient(&self) -> bool {
        self.kind.is_transient()
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.context)
    }
}

impl StdError for StoreError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn StdError + 'static))
    }
}

/// A candidate's configuration breaks a timing rule. The message names the
/// rule and the values.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The metadata with the candidate's priority added is too large.
    #[error("metadata with the priority added is {len} bytes; at most {max} are allowed")]
    MetadataTooLong {
        /// Its length in bytes.
        len: usize,
        /// The bound.
        max: usize,
    },
    /// A duration that must be positive is zero.
    #[error("{what} must be greater than zero")]
    Zero {
        /// The setting.
        what: &'static str,
    },
    /// `renew_deadline` must be shorter than the lease the store can still
    /// honour: `ttl * (1 - drift) - margin`.
    #[error(
        "renew deadline ({renew_deadline:?}) must be shorter than ttl ({ttl:?}) less clock drift and margin ({usable:?})"
    )]
    DeadlineNotBelowTtl {
        /// The renew deadline.
        renew_deadline: Duration,
        /// The ttl.
        ttl: Duration,
        /// `ttl * (1 - drift) - margin`.
        usable: Duration,
    },
    /// `renew_deadline` must leave room for more than one renewal:
    /// `renew_deadline > 1.2 * renew_every`.
    #[error(
        "renew deadline ({renew_deadline:?}) must exceed 1.2 x renew interval ({renew_every:?}), so a failed renewal can be retried before stepping down"
    )]
    IntervalNotBelowDeadline {
        /// The renew deadline.
        renew_deadline: Duration,
        /// The renew interval.
        renew_every: Duration,
    },
    /// The leader task must be able to stop between stepping down and the
    /// moment the store could hand the lease on:
    /// `renew_deadline + grace <= ttl * (1 - drift) - margin`.
    #[error(
        "grace ({grace:?}) does not fit between the renew deadline ({renew_deadline:?}) and the usable lease ({usable:?}): the task could still run when another leader starts"
    )]
    GraceTooLong {
        /// The grace for stopping the leader task.
        grace: Duration,
        /// The renew deadline.
        renew_deadline: Duration,
        /// `ttl * (1 - drift) - margin`.
        usable: Duration,
    },
    /// Clock drift must be a fraction in `[0, 0.1]`.
    #[error("clock drift {drift} is outside [0, 0.1]")]
    DriftOutOfRange {
        /// The drift given.
        drift: f64,
    },
    /// The store cannot honour a ttl this short.
    #[error(
        "ttl {ttl:?} is below the minimum of {min:?} that the {store} store honours (its range is {min:?} to {max:?})"
    )]
    TtlBelowStoreMinimum {
        /// The ttl given.
        ttl: Duration,
        /// The store's minimum.
        min: Duration,
        /// The store's maximum (capped at [`MAX_TTL`](crate::MAX_TTL)).
        max: Duration,
        /// The store's name.
        store: &'static str,
    },
    /// The store cannot honour a ttl this long (Azure Blob leases last at
    /// most 60 s). A ttl over [`MAX_TTL`](crate::MAX_TTL) is
    /// [`TtlTooLong`](Self::TtlTooLong) instead, whatever the store.
    #[error(
        "ttl {ttl:?} is above the maximum of {max:?} that the {store} store honours (its range is {min:?} to {max:?})"
    )]
    TtlAboveStoreMaximum {
        /// The ttl given.
        ttl: Duration,
        /// The store's minimum.
        min: Duration,
        /// The store's maximum.
        max: Duration,
        /// The store's name.
        store: &'static str,
    },
    /// The ttl is too long to be represented safely (over one day).
    #[error("ttl {ttl:?} is longer than the maximum of one day")]
    TtlTooLong {
        /// The ttl given.
        ttl: Duration,
    },
    /// The ttl is too short for any timing to be derived from it.
    #[error("ttl {ttl:?} is shorter than the minimum of {min:?}")]
    TtlTooShort {
        /// The ttl given.
        ttl: Duration,
        /// [`MIN_TTL`](crate::MIN_TTL).
        min: Duration,
    },
    /// A duration setting is longer than regent accepts.
    #[error("{what} {value:?} is longer than the maximum of {max:?}")]
    TooLong {
        /// The setting.
        what: &'static str,
        /// The value given.
        value: Duration,
        /// The bound.
        max: Duration,
    },
    /// A timing rule broken by values that the builder derived from the
    /// settings given: the message names the settings to change; the rule
    /// itself is [`rule`](ConfigError::rule).
    #[error("{message}")]
    Settings {
        /// The rule, then which of the caller's settings to change.
        message: String,
        /// The rule broken, with the values it saw.
        rule: Box<ConfigError>,
    },
}

impl ConfigError {
    /// The timing rule broken, whether or not it came wrapped in
    /// [`Settings`](Self::Settings).
    pub fn rule(&self) -> &ConfigError {
        match self {
            ConfigError::Settings { rule, .. } => rule.rule(),
            other => other,
        }
    }
}

/// Why a campaign ended without leadership.
///
/// `Display` includes the store's error, so `{e}` in a log line says why
/// (`campaign failed: store misconfigured: …`); [`source`](StdError::source)
/// continues with the store client's own error, which `Display` leaves out.
/// [`report`] renders the whole chain in one line.
#[derive(Debug)]
#[non_exhaustive]
pub enum CampaignError {
    /// The candidate was shut down.
    Shutdown,
    /// The store failed with an error that retrying cannot fix.
    Store(StoreError),
    /// The store stayed unavailable for the whole `give_up_after` window.
    Unavailable {
        /// How long the candidate retried.
        waited: Duration,
        /// The last error seen.
        last: StoreError,
    },
}

impl From<StoreError> for CampaignError {
    fn from(e: StoreError) -> Self {
        CampaignError::Store(e)
    }
}

impl fmt::Display for CampaignError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CampaignError::Shutdown => f.write_str("the candidate was shut down"),
            CampaignError::Store(e) => write!(f, "campaign failed: {e}"),
            CampaignError::Unavailable { waited, last } => {
                write!(f, "store unavailable for {waited:?}; giving up: {last}")
            }
        }
    }
}

impl StdError for CampaignError {
    /// The store client's error behind the [`StoreError`] that `Display`
    /// already shows.
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            CampaignError::Shutdown => None,
            CampaignError::Store(e) | CampaignError::Unavailable { last: e, .. } => e.source(),
        }
    }
}

impl CampaignError {
    /// The store's error, if the campaign failed on one.
    pub fn store_error(&self) -> Option<&StoreError> {
        match self {
            CampaignError::Shutdown => None,
            CampaignError::Store(e) | CampaignError::Unavailable { last: e, .. } => Some(e),
        }
    }
}

/// An error and every cause behind it, in one line: `a: b: c`. For log
/// lines and messages to people; `{e}` alone shows only the outermost.
///
/// ```
/// use regent_core::{report, ErrorKind, StoreError};
///
/// let io = std::io::Error::other("connection refused");
/// let e = StoreError::unavailable("acquire election 'jobs'").with_source(io);
/// assert_eq!(
///     report(&e).to_string(),
///     "store unavailable: acquire election 'jobs': connection refused"
/// );
/// ```
pub fn report<'a>(error: &'a (dyn StdError + 'static)) -> impl fmt::Display + 'a {
    Report(error)
}

/// The first error of type `E` in `error`'s chain: `error` itself, its
/// sources, and what each [`std::io::Error`] on the way wraps (an I/O
/// error's `source` skips the error it wraps, so a TLS library's error
/// inside a connection's I/O error is found only this way).
///
/// ```
/// use regent_core::find_cause;
///
/// #[derive(Debug, PartialEq)]
/// struct BadCertificate;
/// impl std::fmt::Display for BadCertificate {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
///         f.write_str("bad certificate")
///     }
/// }
/// impl std::error::Error for BadCertificate {}
///
/// let e = std::io::Error::other(std::io::Error::other(BadCertificate));
/// assert_eq!(find_cause::<BadCertificate>(&e), Some(&BadCertificate));
/// assert_eq!(find_cause::<BadCertificate>(&std::io::Error::other("reset")), None);
/// ```
pub fn find_cause<'a, E: StdError + 'static>(error: &'a (dyn StdError + 'static)) -> Option<&'a E> {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(found) = e.downcast_ref::<E>() {
            return Some(found);
        }
        if let Some(inner) = e
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref)
            && let Some(found) = find_cause::<E>(inner)
        {
            return Some(found);
        }
        next = e.source();
    }
    None
}

struct Report<'a>(&'a (dyn StdError + 'static));

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut seen = self.0.to_string();
        let mut next = self.0.source();
        while let Some(e) = next {
            let text = e.to_string();
            // A source that its parent already quoted in full adds nothing.
            if !seen.ends_with(&text) {
                write!(f, ": {text}")?;
            }
            seen = text;
            next = e.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_error_chains_source_and_classifies() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let e = StoreError::unavailable("renew election 'x'").with_source(io);
        assert!(e.is_transient());
        assert_eq!(e.to_string(), "store unavailable: renew election 'x'");
        assert_eq!(e.source().unwrap().to_string(), "refused");
        assert!(!StoreError::corrupt("x").is_transient());
        assert!(!StoreError::new(ErrorKind::Auth, "x").is_transient());
    }

    /// Regression (issue 12): `CampaignError::Store` displayed "campaign
    /// failed" and nothing else.
    #[test]
    fn campaign_error_says_why() {
        let io = std::io::Error::other("disk I/O error");
        let e = CampaignError::Store(
            StoreError::new(ErrorKind::Config, "open sqlite store '/x.db'").with_source(io),
        );
        assert_eq!(
            e.to_string(),
            "campaign failed: store misconfigured: open sqlite store '/x.db'"
        );
        // The chain goes on with the client's error, without repeating.
        assert_eq!(e.source().unwrap().to_string(), "disk I/O error");
        assert_eq!(
            report(&e).to_string(),
            "campaign failed: store misconfigured: open sqlite store '/x.db': disk I/O error"
        );
        let e = CampaignError::Unavailable {
            waited: Duration::from_secs(30),
            last: StoreError::unavailable("acquire election 'x'"),
        };
        assert_eq!(
            e.to_string(),
            "store unavailable for 30s; giving up: store unavailable: acquire election 'x'"
        );
    }
}
