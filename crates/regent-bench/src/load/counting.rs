//! Store operations counted at the store's interface: a store seen
//! through the [`Metered`] layer (regent-core's one decorator,
//! [`Layered`], with its ready-made [`Counting`](CallCounting) layer inside)
//! counts each call of `try_acquire`, `renew`, `release`,
//! `update_metadata`, `current_leader`, each watch opened and each item a
//! watch delivered, and times renewals.
//!
//! One call can be more than one request to the engine (etcd: a queued
//! place's acquire is a keep-alive and a read; a renewal a read and a
//! keep-alive), so the counts compare stores' behaviour, not their wire
//! traffic.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use regent_core::testing::{
    Call, CallCounts, CallKind, Counting as CallCounting, Layered, StoreLayer,
};
use regent_core::{ElectionName, LeaderInfo, StoreError};
use serde_json::{Value, json};

/// A store seen through [`Metered`].
pub(crate) type Counted<S> = Layered<S, Metered>;

/// `store`, counted from zero.
pub(crate) fn counted<S>(store: S) -> Counted<S> {
    Layered::new(store, Metered::default())
}

/// The harness's layer: every call counted by kind, and renewals timed.
/// Shared by every clone of its store.
#[derive(Debug, Default)]
pub(crate) struct Metered {
    calls: CallCounting,
    /// Renewals answered, and the nanoseconds they took, in all (counted
    /// at the answer, so that a window's mean pairs each time with its
    /// renewal).
    renewed: AtomicU64,
    renew_ns: AtomicU64,
    /// The longest renewal since [`Metered::take_renew_max`].
    renew_max_ns: AtomicU64,
}

/// Operations by kind: a snapshot of [`Metered`]'s counts, or a difference,
/// or a rate (hence `f64`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Ops {
    pub(crate) acquire: f64,
    pub(crate) renew: f64,
    pub(crate) release: f64,
    pub(crate) update: f64,
    pub(crate) read: f64,
    pub(crate) watch: f64,
    /// Items the watches delivered (the engine's pushes, not requests).
    pub(crate) change: f64,
}

impl Metered {
    /// The operations so far.
    pub(crate) fn snapshot(&self) -> Ops {
        Ops::from(self.calls.counts())
    }

    /// Renewals answered so far, and the nanoseconds they took in all.
    pub(crate) fn renew_times(&self) -> (u64, u64) {
        (
            self.renewed.load(Ordering::Relaxed),
            self.renew_ns.load(Ordering::Relaxed),
        )
    }

    /// The longest renewal since the last call, in nanoseconds; starts
    /// over.
    pub(crate) fn take_renew_max(&self) -> u64 {
        self.renew_max_ns.swap(0, Ordering::Relaxed)
    }
}

impl StoreLayer for Metered {
    async fn around<T: Send>(
        &self,
        call: Call<'_>,
        inner: impl Future<Output = Result<T, StoreError>> + Send,
    ) -> Result<T, StoreError> {
        let timed = async {
            if call.kind != CallKind::Renew {
                return inner.await;
            }
            let sent = Instant::now();
            let answer = inner.await;
            let ns = u64::try_from(sent.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.renew_ns.fetch_add(ns, Ordering::Relaxed);
            self.renewed.fetch_add(1, Ordering::Relaxed);
            self.renew_max_ns.fetch_max(ns, Ordering::Relaxed);
            answer
        };
        self.calls.around(call, timed).await
    }

    async fn watch_item(
        &self,
        election: &ElectionName,
        item: Result<Option<LeaderInfo>, StoreError>,
    ) -> Result<Option<LeaderInfo>, StoreError> {
        self.calls.watch_item(election, item).await
    }
}

impl From<CallCounts> for Ops {
    fn from(c: CallCounts) -> Self {
        #[allow(clippy::cast_precision_loss)]
        let f = |n: u64| n as f64;
        Self {
            acquire: f(c.try_acquire),
            renew: f(c.renew),
            release: f(c.release),
            update: f(c.update_metadata),
            read: f(c.current_leader),
            watch: f(c.watch),
            change: f(c.watch_items),
        }
    }
}

impl Ops {
    /// `f` of each kind's pair.
    pub(crate) fn zip(self, other: Self, f: impl Fn(f64, f64) -> f64) -> Self {
        Self {
            acquire: f(self.acquire, other.acquire),
            renew: f(self.renew, other.renew),
            release: f(self.release, other.release),
            update: f(self.update, other.update),
            read: f(self.read, other.read),
            watch: f(self.watch, other.watch),
            change: f(self.change, other.change),
        }
    }

    /// Kind by kind, `self − other`.
    pub(crate) fn minus(self, other: Self) -> Self {
        self.zip(other, |a, b| a - b)
    }

    /// Each kind times `k`.
    pub(crate) fn scaled(self, k: f64) -> Self {
        self.zip(Self::default(), |a, _| a * k)
    }

    /// Every operation but the changes watches delivered (those are the
    /// engine's pushes, not requests).
    pub(crate) fn requests(self) -> f64 {
        self.acquire + self.renew + self.release + self.update + self.read + self.watch
    }

    /// As JSON, by the store method's name.
    pub(crate) fn to_json(self) -> Value {
        json!({
            "try_acquire": self.acquire, "renew": self.renew, "release": self.release,
            "update_metadata": self.update, "current_leader": self.read,
            "watch": self.watch, "watch_changes": self.change,
        })
    }

    /// Read back from [`Ops::to_json`]; zero for a kind that is missing.
    pub(crate) fn from_json(v: &Value) -> Self {
        let get = |k: &str| v.get(k).and_then(Value::as_f64).unwrap_or(0.0);
        Self {
            acquire: get("try_acquire"),
            renew: get("renew"),
            release: get("release"),
            update: get("update_metadata"),
            read: get("current_leader"),
            watch: get("watch"),
            change: get("watch_changes"),
        }
    }

    /// "12 acquire, 3 renew, …": the kinds that are not (about) zero.
    pub(crate) fn describe(self) -> String {
        let parts: Vec<String> = [
            (self.acquire, "acquire"),
            (self.renew, "renew"),
            (self.release, "release"),
            (self.update, "update"),
            (self.read, "read"),
            (self.watch, "watch opened"),
            (self.change, "watch changes"),
        ]
        .into_iter()
        .filter(|(n, _)| n.abs() >= 0.5)
        .map(|(n, what)| format!("{n:.0} {what}"))
        .collect();
        if parts.is_empty() {
            "none".into()
        } else {
            parts.join(", ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_arithmetic_and_description() {
        let a = Ops {
            acquire: 10.0,
            renew: 4.0,
            change: 7.0,
            ..Ops::default()
        };
        let b = Ops {
            acquire: 2.0,
            ..Ops::default()
        };
        let d = a.minus(b.scaled(2.0));
        assert!((d.acquire - 6.0).abs() < 1e-9);
        assert!(
            (d.requests() - 10.0).abs() < 1e-9,
            "changes are not requests"
        );
        assert_eq!(d.describe(), "6 acquire, 4 renew, 7 watch changes");
        assert_eq!(Ops::default().describe(), "none");
        assert_eq!(Ops::from_json(&d.to_json()), d);
    }
}
