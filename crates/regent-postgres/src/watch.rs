//! Watches: a poll of the leader at the store's interval, woken at once
//! by the notifications the store's own statements send (`pg_notify` on
//! every acquire, release and metadata update), so that a graceful
//! hand-over takes a round trip or two, not an interval.
//!
//! `LISTEN` is session state: it needs a connection of its own to the
//! server, which a pooler in transaction mode cannot give. One such
//! connection per store serves every watch; when it cannot be made or
//! breaks, watches poll until it is made again. Notifications only ever
//! hasten a read; every decision is still the statement's.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::StreamExt as _;
use regent_core::{ElectionName, LeaderStream, LeaseStore, StoreError};
use tokio::sync::broadcast;
use tokio_postgres::AsyncMessage;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::sql::CHANNEL;

/// How long a broken listening connection waits before it is made again.
const RELISTEN: Duration = Duration::from_secs(1);

/// The store's listening connection, started by the first watch and kept
/// while a watch lives.
pub(crate) struct Listener {
    /// Payloads (`SCHEMA/ELECTION`) of the notifications received.
    tx: broadcast::Sender<String>,
    /// Whether the connection is listening now.
    listening: tokio::sync::watch::Sender<bool>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// How long a new watch waits for the listening connection before it
/// reads its first state (a notification sent before the `LISTEN` is
/// lost; the poll still sees the change, later).
const LISTEN_WAIT: Duration = Duration::from_secs(1);

impl Listener {
    pub(crate) fn new() -> Self {
        Self {
            tx: broadcast::channel(256).0,
            listening: tokio::sync::watch::Sender::new(false),
            task: Mutex::new(None),
        }
    }

    /// A receiver of the notifications, starting the connection if none
    /// runs.
    fn subscribe(&self, config: Option<ListenAt>, server: String) -> broadcast::Receiver<String> {
        let rx = self.tx.subscribe();
        let mut task = self.task.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(config) = config
            && task
                .as_ref()
                .is_none_or(tokio::task::JoinHandle::is_finished)
        {
            let (tx, listening) = (self.tx.clone(), self.listening.clone());
            *task = Some(tokio::spawn(listen(config, server, tx, listening)));
        }
        rx
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Some(task) = self
            .task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            task.abort();
        }
    }
}

/// Keeps a `LISTEN` connection, made again after it breaks, until no
/// watch is left.
async fn listen(
    (config, tls): ListenAt,
    server: String,
    tx: broadcast::Sender<String>,
    listening: tokio::sync::watch::Sender<bool>,
) {
    while tx.receiver_count() > 0 {
        match crate::tls::connect(&config, &tls).await {
            Ok((client, mut messages)) => {
                let (done_tx, mut done) = tokio::sync::oneshot::channel::<()>();
                let forward = tx.clone();
                // The connection delivers the notifications; it must be
                // driven while the LISTEN is sent.
                let driver = tokio::spawn(async move {
                    while let Some(m) = messages.next().await {
                        match m {
                            Ok(AsyncMessage::Notification(n)) => {
                                let _ = forward.send(n.payload().to_owned());
                            }
                            Ok(_) => {}
                            Err(_) => break,
                        }
                    }
                    drop(done_tx);
                });
                if let Err(e) = client.batch_execute(&format!("LISTEN {CHANNEL}")).await {
                    tracing::debug!(%server, error = %e, "LISTEN failed; watches poll");
                    driver.abort();
                } else {
                    listening.send_replace(true);
                    // Until the connection breaks, or no watch is left.
                    loop {
                        tokio::select! {
                            _ = &mut done => break,
                            () = tokio::time::sleep(RELISTEN) => {
                                if tx.receiver_count() == 0 {
                                    listening.send_replace(false);
                                    driver.abort();
                                    return;
                                }
                            }
                        }
                    }
                    listening.send_replace(false);
                }
            }
            Err(e) => {
                tracing::debug!(%server, error = %e, "cannot connect to LISTEN; watches poll");
            }
        }
        tokio::time::sleep(RELISTEN).await;
    }
}

/// The server to `LISTEN` on, and how to speak TLS to it.
pub(crate) type ListenAt = (tokio_postgres::Config, MakeRustlsConnect);

/// Where a watch reads, and where it is woken from.
pub(crate) struct Source<'a, S> {
    pub(crate) store: &'a S,
    pub(crate) listener: &'a Arc<Listener>,
    /// The connection to `LISTEN` on; `None`: poll only.
    pub(crate) listen: Option<ListenAt>,
    /// `HOST:PORT/DB`, for logs.
    pub(crate) server: &'a str,
    pub(crate) schema: &'a str,
    pub(crate) interval: Duration,
}

/// A watch of `election`.
pub(crate) async fn watch<S: LeaseStore + Clone>(
    source: Source<'_, S>,
    election: &ElectionName,
) -> Result<LeaderStream, StoreError> {
    // Subscribed before the first read: a change right after it wakes us.
    let listens = source.listen.is_some();
    let wake = source
        .listener
        .subscribe(source.listen, source.server.to_owned());
    if listens {
        let mut listening = source.listener.listening.subscribe();
        let _ = tokio::time::timeout(LISTEN_WAIT, listening.wait_for(|l| *l)).await;
    }
    // A notification that names this election reads at once; one missed
    // may have been ours.
    let payload = format!("{}/{election}", source.schema);
    let rung = futures_util::stream::unfold(wake, move |mut wake| {
        let payload = payload.clone();
        async move {
            loop {
                match wake.recv().await {
                    Ok(p) if p == payload => return Some(((), wake)),
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Lagged(_)) => return Some(((), wake)),
                    // No listener any more: the watch polls.
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        }
    });
    regent_core::store::poll_watch_woken(
        source.store.clone(),
        election.clone(),
        source.interval,
        rung,
    )
    .await
}
