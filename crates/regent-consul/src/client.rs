//! The HTTP side of [`ConsulStore`]: the store itself (one HTTP client,
//! the agent's address and the store's settings), the URLs of Consul's
//! API, one call with its retries and its bound on requests in flight,
//! reading a key, and the transaction endpoint. What a call's failure
//! means is [`crate::error`]'s.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use regent_core::store::shared::SharedSessions;
use regent_core::store::shared_watch::SharedWatches;
use regent_core::{ElectionName, ErrorKind, LeaderInfo, StoreError};
use reqwest::{Method, Url};
use serde::Deserialize;
use tokio::time::Instant;

use crate::error::{ConsulAnswer, answer_error, http_error};
use crate::proof::Proofs;
use crate::record::KvEntry;

/// The most requests one store (and its clones) has in flight to the
/// agent at once, blocking queries aside; more wait for one to finish
/// (within the call timeout). An agent serves at most
/// `limits.http_max_conns_per_client` (200 by default) connections from
/// one address and resets the rest: 10,000 elections renewing from one
/// process lost a tenth of their terms to those resets. Each watch's
/// blocking query holds a connection of its own besides these.
pub const MAX_IN_FLIGHT: usize = 64;

/// An election store on a Consul agent's HTTP API. See the
/// [crate docs](crate).
///
/// Cloning is cheap; clones share one HTTP client (and its connections).
#[derive(Clone)]
pub struct ConsulStore {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) client: reqwest::Client,
    /// Bounds the requests in flight other than blocking queries to
    /// [`MAX_IN_FLIGHT`].
    pub(crate) in_flight: tokio::sync::Semaphore,
    /// The restart shortcut's proofs, if enabled.
    pub(crate) proofs: Option<Proofs>,
    /// `http(s)://HOST:PORT/`.
    pub(crate) base: Url,
    pub(crate) prefix: String,
    pub(crate) datacenter: Option<String>,
    pub(crate) call_timeout: Duration,
    /// `None`: each session's lock delay is its lease's ttl.
    pub(crate) lock_delay: Option<Duration>,
    pub(crate) has_token: bool,
    /// The sessions this store's elections share.
    pub(crate) sessions: SharedSessions<ConsulStore>,
    /// The watches of the elections watched through this store.
    pub(crate) watches: SharedWatches,
    /// The roster entries this store enrolled, and their sessions.
    pub(crate) roster: crate::enrolled::Enrollments,
}

impl fmt::Debug for ConsulStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &self.inner;
        f.debug_struct("ConsulStore")
            .field("address", &i.base.as_str())
            .field("prefix", &i.prefix)
            .field("datacenter", &i.datacenter)
            .field("call_timeout", &i.call_timeout)
            .field(
                "lock_delay",
                &i.lock_delay
                    .map_or("the ttl".to_owned(), |d| format!("{d:?}")),
            )
            .field("restart_proofs", &i.proofs.as_ref().map(Proofs::dir))
            .field("token", &if i.has_token { "***" } else { "none" })
            .finish()
    }
}

/// Consul's answer to one request: its status, the `X-Consul-Index`
/// header and the body.
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) index: Option<u64>,
    pub(crate) body: Vec<u8>,
}

impl Answer {
    pub(crate) fn json<T: for<'de> Deserialize<'de>>(&self, what: &str) -> Result<T, StoreError> {
        serde_json::from_slice(&self.body).map_err(|e| {
            StoreError::new(
                ErrorKind::Protocol,
                format!("{what}: Consul's answer is not the JSON expected"),
            )
            .with_source(e)
        })
    }
}

/// What the transaction endpoint answered.
pub(crate) enum TxnOutcome {
    /// Every operation applied; the entries written.
    Applied(Vec<KvEntry>),
    /// A check or the lock failed; nothing applied.
    RolledBack,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct TxnResults {
    #[serde(default)]
    pub(crate) results: Option<Vec<TxnResult>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct TxnResult {
    #[serde(rename = "KV")]
    pub(crate) kv: Option<KvEntry>,
}

impl ConsulStore {
    /// The name of the agent's node (`GET /v1/agent/self`,
    /// `Config.NodeName`): the recipe's ClientID, which the CLI takes as
    /// the holder id when `--id` is not given.
    ///
    /// # Errors
    ///
    /// As every call: [`Unavailable`](ErrorKind::Unavailable) when the agent
    /// does not answer, [`Auth`](ErrorKind::Auth) when the token may not
    /// read the agent (`agent:read`), [`Protocol`](ErrorKind::Protocol)
    /// for an answer without a node name.
    pub async fn agent_node_name(&self) -> Result<String, StoreError> {
        #[derive(Deserialize)]
        struct AgentSelf {
            #[serde(rename = "Config")]
            config: AgentConfig,
        }
        #[derive(Deserialize)]
        struct AgentConfig {
            #[serde(rename = "NodeName")]
            node_name: String,
        }
        let what = || "read the agent's node name".to_owned();
        let url = self.agent_url(&["agent", "self"]);
        let answer = self
            .call(Method::GET, url, None, &[], Duration::ZERO, &what)
            .await?;
        let agent: AgentSelf = answer.json(&what())?;
        if agent.config.node_name.is_empty() {
            return Err(StoreError::new(
                ErrorKind::Protocol,
                format!(
                    "{} at {}: the agent has no node name",
                    what(),
                    self.inner.base
                ),
            ));
        }
        Ok(agent.config.node_name)
    }

    /// The key of `election`: the prefix, then the name.
    pub fn election_key(&self, election: &ElectionName) -> String {
        format!("{}{election}", self.inner.prefix)
    }

    /// A URL of the agent's own endpoints (`/v1/agent/…`), which take no
    /// `?dc=`.
    fn agent_url(&self, segments: &[&str]) -> Url {
        let mut url = self.inner.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.clear();
            path.push("v1");
            path.extend(segments);
        }
        url
    }

    pub(crate) fn url(&self, segments: &[&str], query: &[(&str, &str)]) -> Url {
        let mut url = self.inner.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.clear();
            path.push("v1");
            for s in segments {
                path.extend(s.split('/'));
            }
        }
        {
            let mut pairs = url.query_pairs_mut();
            for (k, v) in query {
                if v.is_empty() {
                    pairs.append_key_only(k);
                } else {
                    pairs.append_pair(k, v);
                }
            }
            if let Some(dc) = &self.inner.datacenter {
                pairs.append_pair("dc", dc);
            }
        }
        if url.query() == Some("") {
            url.set_query(None);
        }
        url
    }

    /// Sends one request, retrying Consul's transient errors (a 500 from
    /// an agent whose server just died, "no cluster leader") until the
    /// call timeout (`extra` more for a blocking query) has passed.
    /// Answers with a 2xx status or one of `expected` are returned; others
    /// are errors naming `what`.
    pub(crate) async fn call(
        &self,
        method: Method,
        url: Url,
        body: Option<Vec<u8>>,
        expected: &[u16],
        extra: Duration,
        what: &(dyn Fn() -> String + Sync),
    ) -> Result<Answer, StoreError> {
        let limit = self.inner.call_timeout + extra;
        let deadline = Instant::now() + limit;
        let mut backoff = Duration::from_millis(50);
        loop {
            let mut request = self.inner.client.request(method.clone(), url.clone());
            if let Some(body) = &body {
                request = request.body(body.clone());
            }
            let attempt = async {
                // A blocking query waits on a connection of its own; every
                // other request waits for a permit (never closed: `None`
                // would only mean no bound).
                let _permit = if extra.is_zero() {
                    self.inner.in_flight.acquire().await.ok()
                } else {
                    None
                };
                let response = request.send().await?;
                let status = response.status().as_u16();
                let index = response
                    .headers()
                    .get("X-Consul-Index")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse().ok());
                let body = response.bytes().await?.to_vec();
                Ok::<_, reqwest::Error>(Answer {
                    status,
                    index,
                    body,
                })
            };
            let answer = match tokio::time::timeout_at(deadline, attempt).await {
                Err(_) => {
                    return Err(StoreError::unavailable(format!(
                        "{} at {}: no answer within {limit:?}",
                        what(),
                        self.inner.base
                    )));
                }
                Ok(Err(e)) => {
                    return Err(http_error(format!("{} at {}", what(), self.inner.base), e));
                }
                Ok(Ok(a)) => a,
            };
            if (200..300).contains(&answer.status) || expected.contains(&answer.status) {
                return Ok(answer);
            }
            let consul = ConsulAnswer {
                status: answer.status,
                body: String::from_utf8_lossy(&answer.body).into_owned(),
            };
            let now = Instant::now();
            if consul.is_retryable() && now + backoff < deadline {
                tracing::debug!(status = consul.status, body = %consul.body.trim(), "consul: retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_millis(500));
                continue;
            }
            return Err(answer_error(
                format!("{} at {}", what(), self.inner.base),
                consul,
            ));
        }
    }

    /// Reads `key` (`?consistent`: from the Raft leader, after confirming
    /// it still leads, so that an acknowledged acquire is always seen).
    pub(crate) async fn read_key(
        &self,
        key: &str,
        what: &(dyn Fn() -> String + Sync),
    ) -> Result<(Option<KvEntry>, Option<u64>), StoreError> {
        let url = self.url(&["kv", key], &[("consistent", "")]);
        let answer = self
            .call(Method::GET, url, None, &[404], Duration::ZERO, what)
            .await?;
        self.entry_of(key, &answer, what).map(|e| (e, answer.index))
    }

    pub(crate) fn entry_of(
        &self,
        key: &str,
        answer: &Answer,
        what: &(dyn Fn() -> String + Sync),
    ) -> Result<Option<KvEntry>, StoreError> {
        if answer.status == 404 {
            return Ok(None);
        }
        let entries: Vec<KvEntry> = answer.json(&what())?;
        match entries.into_iter().next() {
            Some(e) if e.key == key => Ok(Some(e)),
            Some(e) => Err(StoreError::new(
                ErrorKind::Protocol,
                format!(
                    "{}: Consul answered key '{}' for '{key}'",
                    what(),
                    regent_core::target::printable(&e.key)
                ),
            )),
            None => Ok(None),
        }
    }

    pub(crate) async fn txn(
        &self,
        ops: serde_json::Value,
        what: &(dyn Fn() -> String + Sync),
    ) -> Result<TxnOutcome, StoreError> {
        let url = self.url(&["txn"], &[]);
        let answer = self
            .call(
                Method::PUT,
                url,
                Some(ops.to_string().into_bytes()),
                &[409],
                Duration::ZERO,
                what,
            )
            .await?;
        if answer.status == 409 {
            return Ok(TxnOutcome::RolledBack);
        }
        let results: TxnResults = answer.json(&what())?;
        Ok(TxnOutcome::Applied(
            results
                .results
                .unwrap_or_default()
                .into_iter()
                .filter_map(|r| r.kv)
                .collect(),
        ))
    }

    pub(crate) fn corrupt(&self, what: &str, key: &str, why: String) -> StoreError {
        StoreError::corrupt(format!("{what}: key '{key}' at {}: {why}", self.inner.base))
    }

    /// The leader `entry` shows, or a `Corrupt` error.
    pub(crate) fn leader_of(
        &self,
        entry: Option<&KvEntry>,
        key: &str,
        what: &str,
    ) -> Result<Option<LeaderInfo>, StoreError> {
        match entry {
            None => Ok(None),
            Some(e) => e.leader().map_err(|why| self.corrupt(what, key, why)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_urls() {
        let store = ConsulStore::builder("127.0.0.1:8500")
            .prefix("svc/x")
            .datacenter("dc2")
            .build()
            .unwrap();
        let e = ElectionName::new("jobs").unwrap();
        assert_eq!(store.election_key(&e), "svc/x/jobs");
        let url = store.url(&["kv", &store.election_key(&e)], &[("consistent", "")]);
        assert_eq!(
            url.as_str(),
            "http://127.0.0.1:8500/v1/kv/svc/x/jobs?consistent&dc=dc2"
        );
    }
}
