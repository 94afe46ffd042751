//! Consul sessions, one at a time: the session TTL and lock delay a
//! lease's ttl asks for, the ttl range Consul accepts, and creating,
//! reading and destroying a session. Sessions that many elections share
//! are [`crate::shared`]'s; taking over a crashed holder's session is
//! [`crate::restart`]'s.

use std::time::Duration;

use regent_core::{ErrorKind, StoreError};
use reqwest::Method;
use serde::Deserialize;
use serde_json::json;

use crate::client::ConsulStore;
use crate::error::is_missing_node;
use crate::proof::is_session_id;

/// The shortest session TTL Consul accepts.
pub const MIN_TTL: Duration = Duration::from_secs(10);

/// The longest session TTL Consul accepts (one day, also regent's
/// [`MAX_TTL`](regent_core::MAX_TTL)).
pub const MAX_TTL: Duration = Duration::from_secs(24 * 3600);

/// The shortest session TTL regent gives Consul when the lock delay is the
/// ttl (the default): two of them are the least slack of such a store.
pub(crate) const SESSION_TTL_FLOOR: Duration = MIN_TTL;

/// A session as `GET /v1/session/info/ID` shows it: what the store reads.
#[derive(Deserialize)]
pub(crate) struct SessionInfo {
    #[serde(rename = "Name", default)]
    pub(crate) name: String,
    #[serde(rename = "TTL")]
    pub(crate) ttl: String,
    #[serde(rename = "LockDelay")]
    pub(crate) lock_delay: u64,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Created {
    #[serde(rename = "ID")]
    id: String,
}

impl ConsulStore {
    /// The lock delay of the sessions this store creates for leases of
    /// `ttl`: the ttl itself unless
    /// [`ConsulStoreBuilder::lock_delay`](crate::ConsulStoreBuilder::lock_delay)
    /// set one.
    pub fn lock_delay(&self, ttl: Duration) -> Duration {
        self.inner.lock_delay.unwrap_or(ttl)
    }

    /// The TTL of the Consul sessions this store creates for leases of
    /// `ttl`. Consul may end a session one to two of its TTLs after its last
    /// renewal, and nobody may take its key for the lock delay after that:
    /// so a session TTL of `ttl - lock delay`, at least Consul's 10 s,
    /// already keeps the key until the holder's term is over. With the
    /// default lock delay (the ttl) that is 10 s, or half the ttl for ttls
    /// over 20 s, which keeps two and a half renewals of the default
    /// interval (ttl/5) within one session TTL.
    pub fn session_ttl(&self, ttl: Duration) -> Duration {
        match self.inner.lock_delay {
            None => SESSION_TTL_FLOOR.max(ttl / 2),
            Some(delay) => SESSION_TTL_FLOOR
                .max(ttl.saturating_sub(delay))
                .max(ttl / 2),
        }
    }

    pub(crate) async fn create_session(
        &self,
        key: &str,
        ttl: Duration,
        what: &(dyn Fn() -> String + Sync),
    ) -> Result<String, StoreError> {
        let body = json!({
            "Name": key,
            "TTL": go_duration(self.session_ttl(ttl)),
            "LockDelay": go_duration(self.lock_delay(ttl)),
            "Behavior": "release",
            // No health checks: the TTL alone ends the session, so that
            // every automatic invalidation comes after the holder's own
            // step-down deadline (see the crate docs).
            "Checks": [],
        });
        self.create_session_with(body, what).await
    }

    /// Creates a session as `body` describes it (`PUT /v1/session/create`);
    /// its id.
    pub(crate) async fn create_session_with(
        &self,
        body: serde_json::Value,
        what: &(dyn Fn() -> String + Sync),
    ) -> Result<String, StoreError> {
        let url = self.url(&["session", "create"], &[]);
        let answer = match self
            .call(
                Method::PUT,
                url,
                Some(body.to_string().into_bytes()),
                &[],
                Duration::ZERO,
                what,
            )
            .await
        {
            // Consul makes a session on the agent's own node, which another
            // datacenter's catalog does not hold: no retry helps.
            Err(e) if is_missing_node(&e) && self.inner.datacenter.is_some() => {
                return Err(StoreError::new(
                    ErrorKind::Config,
                    format!(
                        "{}: datacenter '{}' does not know this agent's node, and Consul makes \
                         a session on the agent's own node: elections need the agent's own \
                         datacenter (drop ?dc= or --consul-dc)",
                        what(),
                        self.inner.datacenter.as_deref().unwrap_or_default()
                    ),
                )
                .with_source(e));
            }
            r => r?,
        };
        let created: Created = answer.json(&what())?;
        if !is_session_id(&created.id) {
            return Err(StoreError::new(
                ErrorKind::Protocol,
                format!("{}: Consul answered an invalid session id", what()),
            ));
        }
        Ok(created.id)
    }

    /// Ends `session`, best effort: a session left behind expires by its
    /// TTL.
    pub(crate) async fn destroy_session(
        &self,
        session: &str,
        what: &(dyn Fn() -> String + Sync),
    ) -> Result<(), StoreError> {
        let url = self.url(&["session", "destroy", session], &[]);
        self.call(Method::PUT, url, None, &[], Duration::ZERO, what)
            .await
            .map(|_| ())
    }

    pub(crate) fn check_ttl(
        &self,
        ttl: Duration,
        what: &(dyn Fn() -> String + Sync),
    ) -> Result<(), StoreError> {
        if ttl < MIN_TTL || ttl > MAX_TTL {
            return Err(StoreError::new(
                ErrorKind::Config,
                format!(
                    "{}: ttl {ttl:?} is outside the {MIN_TTL:?} to {MAX_TTL:?} Consul accepts \
                     for a session",
                    what()
                ),
            ));
        }
        Ok(())
    }

    /// What Consul says of `session` (`query`: `?consistent`, say);
    /// `None` when it no longer knows it.
    pub(crate) async fn session_info(
        &self,
        session: &str,
        query: &[(&str, &str)],
        what: &(dyn Fn() -> String + Sync),
    ) -> Result<Option<SessionInfo>, StoreError> {
        let url = self.url(&["session", "info", session], query);
        let answer = self
            .call(Method::GET, url, None, &[404], Duration::ZERO, what)
            .await?;
        if answer.status == 404 {
            return Ok(None);
        }
        let infos: Option<Vec<SessionInfo>> = answer.json(&what())?;
        Ok(infos.unwrap_or_default().into_iter().next())
    }
}

/// `d` as a Go duration in whole milliseconds, rounded up (never less
/// than asked).
pub(crate) fn go_duration(d: Duration) -> String {
    let ms = d.as_nanos().div_ceil(1_000_000);
    format!("{ms}ms")
}

/// The ttl a session of `ttl` is granted: whole milliseconds, rounded up.
pub(crate) fn granted_ttl(ttl: Duration) -> Duration {
    let ms = u64::try_from(ttl.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX);
    Duration::from_millis(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_round_up_to_milliseconds() {
        assert_eq!(go_duration(Duration::from_secs(10)), "10000ms");
        assert_eq!(go_duration(Duration::from_nanos(10_000_000_001)), "10001ms");
        assert_eq!(go_duration(Duration::ZERO), "0ms");
        assert_eq!(
            granted_ttl(Duration::from_nanos(10_000_000_001)),
            Duration::from_millis(10_001)
        );
    }
}
