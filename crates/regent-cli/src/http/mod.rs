//! The HTTP endpoint of `regent run --http`, `regent peer --http` and
//! `regent dashboard`: metrics, health, the leader, and the live page.
//!
//! Read-only by construction: every route is a `GET` that reads the
//! elections' [`Monitor`]s, which only read the elections. It runs on a
//! task of its own, holds no secret (store URLs are shown as the targets
//! print them, secrets hidden), and its failure is logged and never ends a
//! term. The address is bound before the first campaign, so that a port in
//! use is a usage error (exit 2) rather than a leader without its endpoint,
//! and served at once: while the store is being reached the probes say so.
//! At most 32 connections are open at once (`capped.rs`), so that a client
//! cannot take the descriptors the store connections and the command's
//! supervision need.

mod capped;
mod state;

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use prometheus_client::registry::Registry;
use regent_core::{Candidacy, ElectionName, LeaseStore, StoreError};
use regent_monitor::{Metrics, Monitor};

use crate::error::CliError;

/// The page, self-contained: inline CSS and JS, nothing fetched but
/// `/api/state`.
const PAGE: &str = include_str!("page.html");

/// One election the endpoint shows.
#[derive(Clone)]
pub(crate) struct Shown {
    pub(crate) monitor: Monitor,
    /// The store as the page names it (secrets hidden).
    pub(crate) store: String,
    /// Reads the line of a queue store (`LeaseStore::candidates`).
    pub(crate) candidates: Option<Line>,
}

type LineFuture = Pin<Box<dyn Future<Output = Result<Option<Vec<Candidacy>>, StoreError>> + Send>>;

/// Reads an election's line from its store, for the page: at most once a
/// second however many pages poll, each read bounded.
#[derive(Clone)]
pub(crate) struct Line {
    read: Arc<dyn Fn() -> LineFuture + Send + Sync>,
    last: Arc<tokio::sync::Mutex<Option<tokio::time::Instant>>>,
}

impl Line {
    /// The line of `election` on `store`.
    pub(crate) fn of<S: LeaseStore + Clone>(store: S, election: ElectionName) -> Self {
        Self {
            read: Arc::new(move || {
                let (store, election) = (store.clone(), election.clone());
                Box::pin(async move { store.candidates(&election).await })
            }),
            last: Arc::default(),
        }
    }

    /// Reads the line into `monitor`, unless it was read less than a second
    /// ago. A failed or slow read leaves the last one shown.
    async fn refresh(&self, monitor: &Monitor) {
        let mut last = self.last.lock().await;
        if last.is_some_and(|at| at.elapsed() < Duration::from_secs(1)) {
            return;
        }
        *last = Some(tokio::time::Instant::now());
        if let Ok(Ok(line)) = tokio::time::timeout(Duration::from_secs(1), (self.read)()).await {
            monitor.set_candidates(line);
        }
    }
}

struct Served {
    /// `run` (one campaigning instance) or `dashboard` (observers).
    source: &'static str,
    /// The elections shown: none while the store is being reached.
    shown: RwLock<Vec<Shown>>,
    /// How many elections it will show once every store is reached.
    expected: usize,
    metrics: Metrics,
    registry: Registry,
}

impl Served {
    fn shown(&self) -> Vec<Shown> {
        self.shown
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// The endpoint, serving; it shows the elections given to [`show`](Self::show),
/// and stops when dropped.
pub(crate) struct Serving {
    served: Arc<Served>,
    _task: AbortOnDrop,
}

impl Serving {
    /// Shows `shown` from now on (its metrics, health and page).
    pub(crate) fn show(&self, shown: Shown) {
        self.served.metrics.add(&shown.monitor);
        self.served
            .shown
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .push(shown);
    }
}

/// What the endpoint says before any election is shown: the store (or
/// the group) is being reached.
const STARTING: &str = "starting: reaching the store";

/// The endpoint's socket, bound and listening, not yet served.
pub(crate) struct Endpoint {
    listener: std::net::TcpListener,
}

impl Endpoint {
    /// Binds `addr` (from `flag`, for the message): a usage error when the
    /// address is in use or not this host's.
    pub(crate) fn bind(flag: &str, addr: SocketAddr) -> Result<Self, CliError> {
        let listener = std::net::TcpListener::bind(addr)
            .map_err(|e| CliError::usage(format!("{flag} {addr}: cannot listen there: {e}")))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| CliError::failure(format!("{flag} {addr}: {e}")))?;
        Ok(Self { listener })
    }

    /// Serves at once, as `source` (`run`, `dashboard`): the `expected`
    /// elections come with [`Serving::show`] once their store is open, and
    /// until all have come the readiness probe says the process is
    /// starting (so a store that takes its time to answer is visible as
    /// such).
    pub(crate) fn serve(self, source: &'static str, expected: usize) -> Result<Serving, CliError> {
        let listener = tokio::net::TcpListener::from_std(self.listener)
            .map_err(|e| CliError::failure(format!("the HTTP endpoint: {e}")))?;
        let addr = listener.local_addr().ok();
        let metrics = Metrics::new();
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let served = Arc::new(Served {
            source,
            shown: RwLock::new(Vec::new()),
            expected: expected.max(1),
            metrics,
            registry,
        });
        let app = Router::new()
            .route("/", get(page))
            .route("/metrics", get(metrics_text))
            .route("/healthz", get(live))
            .route("/livez", get(live))
            .route("/readyz", get(ready))
            .route("/leader", get(leader))
            .route("/api/state", get(api_state))
            .with_state(served.clone());
        if let Some(addr) = addr {
            tracing::info!(%addr, "serving metrics, health and the live page");
        }
        let task = AbortOnDrop::spawn(async move {
            if let Err(e) = axum::serve(capped::Capped::new(listener), app).await {
                // Leadership goes on without its endpoint.
                tracing::error!(error = %e, "the HTTP endpoint failed");
            }
        });
        Ok(Serving {
            served,
            _task: task,
        })
    }
}

/// A background task (the endpoint's, a follower's), stopped when this
/// guard is dropped.
pub(crate) struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl AbortOnDrop {
    /// Spawns `task`.
    pub(crate) fn spawn(task: impl Future<Output = ()> + Send + 'static) -> Self {
        Self(tokio::spawn(task))
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn page() -> Html<&'static str> {
    Html(PAGE)
}

async fn metrics_text(State(served): State<Arc<Served>>) -> Response {
    let mut text = String::new();
    match prometheus_client::encoding::text::encode(&mut text, &served.registry) {
        Ok(()) => (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "encoding the metrics failed\n",
        )
            .into_response(),
    }
}

/// Every election's check, joined; 503 with the first failure's reason.
fn check(served: &Served, ready: bool) -> Response {
    let all = served.shown();
    let several = served.expected > 1;
    let mut lines = Vec::new();
    let mut failed = false;
    if all.len() < served.expected {
        // Alive and doing what it should; not ready to serve until every
        // election is watched.
        failed = ready;
        let starting = if several {
            format!(
                "{STARTING} ({} of {} elections watched)",
                all.len(),
                served.expected
            )
        } else {
            STARTING.to_owned()
        };
        lines.push(if ready {
            starting
        } else {
            format!("ok: {starting}")
        });
    }
    for shown in &all {
        let health = shown.monitor.health();
        let result = if ready { health.ready } else { health.live };
        let (ok, text) = match result {
            Ok(t) => (true, t),
            Err(t) => (false, t),
        };
        failed |= !ok;
        let text = if several {
            format!("{}: {text}", shown.monitor.election())
        } else {
            text
        };
        if ok {
            lines.push(format!("ok: {text}"));
        } else {
            lines.insert(0, text);
        }
    }
    let code = if failed {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    };
    let mut body = lines.join("\n");
    body.push('\n');
    (
        code,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body,
    )
        .into_response()
}

async fn live(State(served): State<Arc<Served>>) -> Response {
    check(&served, false)
}

async fn ready(State(served): State<Arc<Served>>) -> Response {
    check(&served, true)
}

#[derive(serde::Deserialize)]
struct Which {
    election: Option<String>,
}

/// `regent status --json`'s object; with several elections, the one named
/// by `?election=`, or all of them in an array.
async fn leader(State(served): State<Arc<Served>>, Query(which): Query<Which>) -> Response {
    for shown in &served.shown() {
        if let Some(line) = &shown.candidates {
            line.refresh(&shown.monitor).await;
        }
    }
    let object = |shown: &Shown| {
        let seen = shown.monitor.snapshot();
        crate::output::status_json(
            &seen.election,
            seen.leader.as_ref(),
            seen.candidates.as_deref(),
        )
    };
    let all = served.shown();
    let body = match which.election {
        Some(name) => match all.iter().find(|s| s.monitor.election().as_str() == name) {
            Some(shown) => object(shown),
            None => {
                return (
                    StatusCode::NOT_FOUND,
                    format!("no election '{name}' here\n"),
                )
                    .into_response();
            }
        },
        None if all.is_empty() => {
            return (StatusCode::SERVICE_UNAVAILABLE, format!("{STARTING}\n")).into_response();
        }
        None if all.len() == 1 => object(&all[0]),
        None => serde_json::Value::Array(all.iter().map(object).collect()),
    };
    axum::Json(body).into_response()
}

async fn api_state(State(served): State<Arc<Served>>) -> Response {
    let all = served.shown();
    for shown in &all {
        if let Some(line) = &shown.candidates {
            line.refresh(&shown.monitor).await;
        }
    }
    axum::Json(state::of(served.source, &all)).into_response()
}

#[cfg(test)]
mod tests {
    use regent_core::Observer;
    use regent_core::memory::MemoryStore;

    use super::*;

    fn served(expected: usize) -> Served {
        Served {
            source: "dashboard",
            shown: RwLock::new(Vec::new()),
            expected,
            metrics: Metrics::new(),
            registry: Registry::default(),
        }
    }

    fn shown(store: &MemoryStore, election: &str) -> Shown {
        let election = ElectionName::new(election).unwrap();
        Shown {
            monitor: Monitor::observe(Observer::new(store.clone(), election)),
            store: "memory:".to_owned(),
            candidates: None,
        }
    }

    async fn ready(served: &Served) -> (StatusCode, String) {
        let response = check(served, true);
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    /// Regression: a dashboard of two elections answered its readiness
    /// probe 200 ("ok: observing", naming no election) as soon as the first
    /// was watched, before the second's store was reached.
    #[tokio::test(start_paused = true)]
    async fn ready_only_once_every_election_is_watched() {
        let store = MemoryStore::race();
        let s = served(2);
        s.shown.write().unwrap().push(shown(&store, "jobs"));
        // However long the first has been watched.
        tokio::time::sleep(Duration::from_secs(5)).await;
        let (status, body) = ready(&s).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        assert!(body.contains("1 of 2 elections watched"), "{body}");
        assert!(body.contains("jobs: "), "{body}");
        s.shown.write().unwrap().push(shown(&store, "other"));
        let mut answer = ready(&s).await;
        for _ in 0..50 {
            if answer.0 == StatusCode::OK {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            answer = ready(&s).await;
        }
        let (status, body) = answer;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert!(
            body.contains("ok: jobs: ") && body.contains("ok: other: "),
            "{body}"
        );
    }
}
