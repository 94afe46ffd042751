//! [`SharedWatches`] over a fake store watch fed by the test.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures_util::StreamExt;
use tokio::sync::mpsc;

use super::*;
use crate::types::{FencingToken, HolderId, Metadata};

type Item = Result<Option<LeaderInfo>, StoreError>;

/// A store watch the test feeds, and how many times one was opened.
#[derive(Clone, Default)]
struct Fake {
    opened: Arc<AtomicUsize>,
    feeds: Arc<Mutex<Vec<mpsc::UnboundedSender<Item>>>>,
}

impl Fake {
    /// A store watch whose first item is `first`.
    fn open(
        &self,
        first: Option<LeaderInfo>,
    ) -> impl Future<Output = Result<LeaderStream, StoreError>> + Send + 'static {
        let this = self.clone();
        async move {
            this.opened.fetch_add(1, Ordering::SeqCst);
            let (tx, rx) = mpsc::unbounded_channel();
            tx.send(Ok(first)).expect("open");
            this.feeds.lock().unwrap().push(tx);
            let stream: LeaderStream =
                Box::pin(futures_util::stream::unfold(rx, |mut rx| async move {
                    rx.recv().await.map(|item| (item, rx))
                }));
            Ok(stream)
        }
    }

    /// Sends `item` to the last store watch opened.
    fn feed(&self, item: Item) {
        let feeds = self.feeds.lock().unwrap();
        feeds
            .last()
            .expect("a watch open")
            .send(item)
            .expect("still watched");
    }

    fn opened(&self) -> usize {
        self.opened.load(Ordering::SeqCst)
    }

    /// Whether the last store watch opened is still read.
    fn last_is_watched(&self) -> bool {
        !self
            .feeds
            .lock()
            .unwrap()
            .last()
            .expect("a watch open")
            .is_closed()
    }
}

fn leader(who: &str, token: u64) -> LeaderInfo {
    LeaderInfo {
        holder: HolderId::new(who).unwrap(),
        token: FencingToken::new(token),
        metadata: Metadata::default(),
    }
}

fn jobs() -> ElectionName {
    ElectionName::new("jobs").unwrap()
}

#[tokio::test]
async fn watchers_of_one_election_share_one_store_watch_and_each_sees_every_change() {
    let fake = Fake::default();
    let watches = SharedWatches::default();
    let mut a = watches.watch(&jobs(), fake.open(None)).await.unwrap();
    let mut b = watches.watch(&jobs(), fake.open(None)).await.unwrap();
    assert_eq!(fake.opened(), 1, "the second watcher shares the first's");
    assert_eq!(watches.watched(), 1);
    assert_eq!(a.next().await.unwrap().unwrap(), None);
    assert_eq!(b.next().await.unwrap().unwrap(), None);
    fake.feed(Ok(Some(leader("a", 1))));
    assert_eq!(a.next().await.unwrap().unwrap(), Some(leader("a", 1)));
    assert_eq!(b.next().await.unwrap().unwrap(), Some(leader("a", 1)));
    // A late watcher starts from the latest leader seen.
    let mut c = watches.watch(&jobs(), fake.open(None)).await.unwrap();
    assert_eq!(c.next().await.unwrap().unwrap(), Some(leader("a", 1)));
    // A repeat of the same leader is no change.
    fake.feed(Ok(Some(leader("a", 1))));
    fake.feed(Ok(Some(leader("b", 2))));
    for w in [&mut a, &mut b, &mut c] {
        assert_eq!(w.next().await.unwrap().unwrap(), Some(leader("b", 2)));
    }
    assert_eq!(fake.opened(), 1);
}

#[tokio::test]
async fn the_store_watch_ends_with_its_last_watcher() {
    let fake = Fake::default();
    let watches = SharedWatches::default();
    let a = watches.watch(&jobs(), fake.open(None)).await.unwrap();
    let b = watches.watch(&jobs(), fake.open(None)).await.unwrap();
    drop(a);
    tokio::task::yield_now().await;
    assert!(fake.last_is_watched(), "b still watches");
    drop(b);
    while fake.last_is_watched() {
        tokio::task::yield_now().await;
    }
    assert_eq!(watches.watched(), 0);
    // The next watcher opens a new one.
    let _c = watches.watch(&jobs(), fake.open(None)).await.unwrap();
    assert_eq!(fake.opened(), 2);
}

#[tokio::test]
async fn an_error_ends_every_watchers_stream_and_the_next_watch_opens_anew() {
    let fake = Fake::default();
    let watches = SharedWatches::default();
    let mut a = watches.watch(&jobs(), fake.open(None)).await.unwrap();
    let mut b = watches.watch(&jobs(), fake.open(None)).await.unwrap();
    assert_eq!(a.next().await.unwrap().unwrap(), None);
    assert_eq!(b.next().await.unwrap().unwrap(), None);
    fake.feed(Err(StoreError::unavailable("the agent went away")
        .with_source(std::io::Error::other("connection reset"))));
    for w in [&mut a, &mut b] {
        let e = w.next().await.unwrap().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unavailable);
        assert!(
            e.to_string()
                .contains("the agent went away: connection reset"),
            "{e}"
        );
        assert!(w.next().await.is_none(), "ended");
    }
    let mut c = watches
        .watch(&jobs(), fake.open(Some(leader("c", 3))))
        .await
        .unwrap();
    assert_eq!(fake.opened(), 2);
    assert_eq!(c.next().await.unwrap().unwrap(), Some(leader("c", 3)));
}

#[tokio::test]
async fn a_store_watch_that_cannot_open_fails_the_watch() {
    let watches = SharedWatches::default();
    let open = async {
        Err(StoreError::new(
            ErrorKind::Auth,
            "watch election 'jobs': denied",
        ))
    };
    let e = match watches.watch(&jobs(), open).await {
        Ok(_) => panic!("a watch that could not open"),
        Err(e) => e,
    };
    assert_eq!(e.kind(), ErrorKind::Auth);
    assert!(e.to_string().contains("denied"), "{e}");
}

#[tokio::test]
async fn a_store_watch_that_ends_ends_its_watchers_streams() {
    let fake = Fake::default();
    let watches = SharedWatches::default();
    let mut a = watches.watch(&jobs(), fake.open(None)).await.unwrap();
    assert_eq!(a.next().await.unwrap().unwrap(), None);
    fake.feeds.lock().unwrap().clear();
    assert!(a.next().await.is_none());
    let _b = watches.watch(&jobs(), fake.open(None)).await.unwrap();
    assert_eq!(fake.opened(), 2, "an ended watch is not shared");
}

/// Regression: a new watch that found a failed shared watch, and held its
/// last handle when another thread dropped the last stream, dropped that
/// handle with the map locked, and `Shared`'s drop locked it again: the
/// thread hung for ever, and every watch of the store after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_watch_that_holds_the_last_handle_of_a_failed_one_does_not_hang() {
    let (done, finished) = std::sync::mpsc::channel::<()>();
    // A hung worker cannot fail the test by itself: a watchdog does.
    let watchdog = std::thread::spawn(move || {
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
            finished.recv_timeout(std::time::Duration::from_secs(60))
        {
            eprintln!("SharedWatches::watch hung: the map's lock was taken twice");
            std::process::exit(1);
        }
    });
    let watches = SharedWatches::default();
    for _ in 0..2000 {
        let (fail, failed) = tokio::sync::oneshot::channel::<()>();
        let failing = async {
            let first = futures_util::stream::iter([Ok(None)]);
            let then = futures_util::stream::once(async {
                let _ = failed.await;
                Err(StoreError::unavailable("gone"))
            });
            Ok(Box::pin(first.chain(then)) as LeaderStream)
        };
        let mut a = watches.watch(&jobs(), failing).await.unwrap();
        assert_eq!(a.next().await.unwrap().unwrap(), None);
        fail.send(()).unwrap();
        assert!(a.next().await.unwrap().is_err());
        let dropper = tokio::spawn(async move { drop(a) });
        let quiet = async {
            let first = futures_util::stream::iter([Ok(None)]);
            Ok(Box::pin(first.chain(futures_util::stream::pending())) as LeaderStream)
        };
        let election = jobs();
        let (dropped, next) = tokio::join!(dropper, watches.watch(&election, quiet));
        dropped.unwrap();
        drop(next);
    }
    done.send(()).unwrap();
    watchdog.join().unwrap();
}
