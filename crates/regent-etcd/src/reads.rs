//! Range reads of many elections made at one moment, sent as one request:
//! [`Reads`].
//!
//! A process that leads many elections renews them all in one round of
//! their shared lease ([`regent_core::store::shared`]), and each leader
//! then looks at its election's hand-over requests and at its candidates:
//! two range reads per election, all woken by the same round. Sent one by
//! one they cost the cluster two requests per election and renewal, where
//! the renewals themselves cost a few per round. So a read that finds no
//! other in flight waits [`GATHER`] for those made beside it and sends
//! them all as transactions of range reads (no compares: etcd applies the
//! reads of one transaction at one revision), at most [`MAX_BATCH`] reads
//! each, below etcd's default `--max-txn-ops` of 128. A lone read is sent
//! as a plain range read, as before.
//!
//! A batch that fails, or is refused (a cluster set to fewer operations
//! per transaction), changes nothing: each of its reads is then sent on
//! its own, with its own errors and timeout.

use std::sync::Mutex;
use std::time::Duration;

use etcd_client::{Client, GetOptions, KeyValue, TxnOp, TxnOpResponse};
use tokio::sync::oneshot;

/// How long the first of a batch waits for the reads made beside it.
pub(crate) const GATHER: Duration = Duration::from_millis(1);

/// The most range reads one transaction carries.
pub(crate) const MAX_BATCH: usize = 64;

/// The keys a read answered with, and the revision they were read at.
pub(crate) type Answer = (Vec<KeyValue>, i64);

/// The reads waiting to be sent together.
#[derive(Default)]
pub(crate) struct Reads {
    waiting: Mutex<Vec<Waiting>>,
}

struct Waiting {
    key: String,
    options: GetOptions,
    /// `None`: the batch failed; read alone.
    reply: oneshot::Sender<Option<Answer>>,
}

impl Reads {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Waiting>> {
        self.waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The first read of a batch while it gathers the others.
struct Gathering<'a>(Option<&'a Reads>);

impl Drop for Gathering<'_> {
    fn drop(&mut self) {
        if let Some(reads) = self.0 {
            reads.lock().clear();
        }
    }
}

impl Reads {
    /// The range read of `key` with `options`, sent on `client` with the
    /// reads made beside it, each transaction within `timeout`: its
    /// answer, or `None` when it is to be sent alone (it was alone, or its
    /// batch failed or was dropped).
    pub(crate) async fn read_together(
        &self,
        client: &Client,
        timeout: Duration,
        key: &str,
        options: GetOptions,
    ) -> Option<Answer> {
        let (tx, mut rx) = oneshot::channel();
        let first = {
            let mut waiting = self.lock();
            waiting.push(Waiting {
                key: key.to_owned(),
                options,
                reply: tx,
            });
            waiting.len() == 1
        };
        if first {
            // Should this read be given up while it gathers, the guard
            // hands the others back to be read alone, so that none waits
            // on a batch nobody sends.
            let mut gathering = Gathering(Some(self));
            tokio::time::sleep(GATHER).await;
            gathering.0 = None;
            let batch = std::mem::take(&mut *self.lock());
            if batch.len() > 1 {
                send_batch(client, timeout, batch).await;
            }
            // Alone, its sender dropped with the batch: read alone.
        }
        // A batch dropped before it answered (its first read was given
        // up) drops the senders: read alone too.
        (&mut rx).await.ok().flatten()
    }
}

/// Sends `batch` as transactions of at most [`MAX_BATCH`] reads and
/// answers each read; a transaction that fails answers its reads `None`.
async fn send_batch(client: &Client, timeout: Duration, batch: Vec<Waiting>) {
    let mut batch = batch.into_iter().peekable();
    while batch.peek().is_some() {
        let chunk: Vec<Waiting> = batch.by_ref().take(MAX_BATCH).collect();
        let ops: Vec<TxnOp> = chunk
            .iter()
            .map(|w| TxnOp::get(w.key.as_str(), Some(w.options.clone())))
            .collect();
        let mut client = client.clone();
        let sent =
            tokio::time::timeout(timeout, client.txn(etcd_client::Txn::new().and_then(ops))).await;
        let answered = match sent {
            Ok(Ok(resp)) => {
                let revision = resp.header().map(|h| h.revision()).unwrap_or(0);
                let gets: Vec<Option<Answer>> = resp
                    .op_responses()
                    .into_iter()
                    .map(|op| match op {
                        TxnOpResponse::Get(mut get) => Some((get.take_kvs(), revision)),
                        _ => None,
                    })
                    .collect();
                (gets.len() == chunk.len()).then_some(gets)
            }
            Ok(Err(e)) => {
                tracing::debug!(error = %e, reads = chunk.len(), "etcd: a batch of reads failed; each is sent alone");
                None
            }
            Err(_) => None,
        };
        match answered {
            Some(gets) => {
                for (w, got) in chunk.into_iter().zip(gets) {
                    let _ = w.reply.send(got);
                }
            }
            None => {
                for w in chunk {
                    let _ = w.reply.send(None);
                }
            }
        }
    }
}
