//! A service that leads, serves its own metrics and health next to
//! regent's, and hands over on SIGTERM.
//!
//! ```text
//! cargo run -p regent-election --features monitor --example service -- [STORE_DB [ADDR [HOLDER_ID]]]
//! ```
//!
//! Start two, on different addresses (ADDR default `127.0.0.1:0`, a free
//! port; the address is printed), then:
//!
//! ```text
//! curl -s localhost:PORT/metrics | grep leader_election_master_status
//! curl -si localhost:PORT/healthz
//! curl -s localhost:PORT/leader
//! ```
//!
//! The leader runs the coordinator work (here a loop that beats its
//! heartbeat); `kill` it and the other takes over at once. Its router is
//! the application's: regent adds metrics to the application's registry
//! and a health check to call from its handler, nothing else.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::registry::Registry;
use regent::monitor::{Monitor, StoreCalls};
use regent::sqlite::SqliteStore;
use regent::{BoxError, Candidate, ElectionName, HolderId, Supervisor};

#[derive(Clone)]
struct App {
    registry: Arc<Registry>,
    monitor: Monitor,
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let mut args = std::env::args().skip(1);
    let db = args.next().map_or_else(
        || std::env::temp_dir().join("regent-examples.db"),
        PathBuf::from,
    );
    let addr: SocketAddr = args.next().as_deref().unwrap_or("127.0.0.1:0").parse()?;
    let holder = args
        .next()
        .unwrap_or_else(|| format!("service-{}", std::process::id()));

    // The store, with every request counted for the metrics and the
    // health check.
    let calls = StoreCalls::new();
    let candidate = Candidate::builder(
        calls.instrument(SqliteStore::open(&db).await?),
        ElectionName::new("service")?,
        HolderId::new(&holder)?,
    )
    .ttl(Duration::from_secs(3))
    .build()?;
    // Before the first campaign, so that it sees the first term.
    let monitor = Monitor::follow(&candidate).with_store_calls(calls);
    let mut registry = Registry::default();
    // The application's own metrics go on the same registry.
    monitor.register(&mut registry);
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/leader", get(leader))
        .with_state(App {
            registry: Arc::new(registry),
            monitor,
        });
    let listener = tokio::net::TcpListener::bind(addr).await?;
    println!("serving on {}", listener.local_addr()?);
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    // A task that stops beating for 2 s ends its term (it is hung), and
    // the health check says so until this instance leads again.
    let supervisor = Supervisor::new(candidate).health_timeout(Duration::from_secs(2))?;
    let exit = supervisor
        .run_until(regent::shutdown_signal(), |leader| async move {
            let token = leader.token();
            println!("leading: token {token}");
            let mut tick = tokio::time::interval(Duration::from_millis(200));
            loop {
                tokio::select! {
                    () = leader.cancelled() => break,
                    _ = tick.tick() => leader.heartbeat().beat(),
                }
            }
            println!("stopped leading: token {token}");
            Ok::<_, BoxError>(())
        })
        .await;
    server.abort();
    println!("exit: {:?}", exit?);
    Ok(())
}

async fn metrics(State(app): State<App>) -> impl IntoResponse {
    let mut text = String::new();
    match prometheus_client::encoding::text::encode(&mut text, &app.registry) {
        Ok(()) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        ),
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "text/plain")],
            "encoding failed".to_owned(),
        ),
    }
}

/// 200 while this instance does what it should, 503 with the reason.
async fn healthz(State(app): State<App>) -> (StatusCode, String) {
    match app.monitor.health().live {
        Ok(what) => (StatusCode::OK, format!("ok: {what}\n")),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")),
    }
}

/// Who leads, as this instance sees it.
async fn leader(State(app): State<App>) -> String {
    match app.monitor.snapshot().leader {
        Some(l) => format!("{} (token {})\n", l.holder, l.token),
        None => "no leader\n".to_owned(),
    }
}
