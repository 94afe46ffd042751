//! The check of contract item 9: a queue store lists its line, leader
//! first, in the order its candidates queued; a race store lists no line
//! (its roster, items 10 and 11, is checked in `roster.rs`).

use super::harness::{Check, Ctx, Harness, ensure, ok};
use crate::store::{Acquire, LeaseStore, StoreStyle};

/// Item 9: on a queue store, `candidates` lists a leader and two queued
/// candidates, leader first, in the order they queued; after the leader
/// releases, the next in line heads the list; an election nobody stands in
/// lists nobody. On a race store it is `None`. A store that wraps another
/// and does not forward the call fails here: it hides the line.
pub(super) async fn candidates_list_the_line_in_order<H: Harness>(c: &Ctx<'_, H>) -> Check {
    let listed = || async {
        ok("candidates", c.store.candidates(&c.election).await).map(|line| {
            line.map(|holders| {
                holders
                    .iter()
                    .map(|c| c.holder.as_str().to_owned())
                    .collect::<Vec<_>>()
            })
        })
    };
    if c.store.info().style != StoreStyle::Queue {
        let a = c.win("a").await?;
        let line = listed().await?;
        ensure!(
            line.is_none() || line == Some(Vec::new()),
            "a race store keeps no line (and nobody enrolled on its roster), but listed {line:?}"
        );
        return ok("release a", c.store.release(&a).await);
    }
    let line = listed().await?;
    ensure!(
        line == Some(Vec::new()),
        "an election nobody stands in listed {line:?}"
    );
    let a = c.win("a").await?;
    let mut places = Vec::new();
    for who in ["b", "c"] {
        match c.acquire(who).await? {
            Acquire::Held {
                queued: Some(q), ..
            } => places.push(q),
            other => return Err(format!("{who} should be queued, got {other:?}")),
        }
    }
    let line = listed().await?;
    ensure!(
        line == Some(vec!["a".into(), "b".into(), "c".into()]),
        "a leads, b then c queued behind it, but the store listed {line:?}"
    );
    ok("release a", c.store.release(&a).await)?;
    let line = listed().await?;
    ensure!(
        line == Some(vec!["b".into(), "c".into()]),
        "after a released, b heads the line before c, but the store listed {line:?}"
    );
    for q in &places {
        ok(&format!("release {}", q.holder), c.store.release(q).await)?;
    }
    let line = listed().await?;
    ensure!(
        line == Some(Vec::new()),
        "after everyone released, the store listed {line:?}"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::candidates_list_the_line_in_order;
    use crate::StoreError;
    use crate::store::memory::MemoryStore;
    use crate::store::{BoxStore, LeaseStore};
    use crate::testing::harness::ctx;
    use crate::testing::{Counting, Harness, Layered, MemoryHarness, StoreLayer};
    use crate::types::{Candidacy, ElectionName};

    /// What a flawed wrapper does to the line.
    #[derive(Clone, Copy)]
    enum Flaw {
        /// Answers `None`, as a wrapper that does not forward the call.
        Hide,
        /// Lists the line back to front.
        Reverse,
    }

    impl StoreLayer for Flaw {
        async fn candidates<S: LeaseStore>(
            &self,
            store: &S,
            election: &ElectionName,
        ) -> Result<Option<Vec<Candidacy>>, StoreError> {
            match self {
                Flaw::Hide => Ok(None),
                Flaw::Reverse => Ok(store.candidates(election).await?.map(|mut line| {
                    line.reverse();
                    line
                })),
            }
        }
    }

    struct Flawed(MemoryStore, Flaw);

    /// A queue store boxed over a layered one: both wrappers must forward.
    struct Wrapped(MemoryStore);

    impl Harness for Wrapped {
        type Store = BoxStore;

        async fn store(&self) -> BoxStore {
            BoxStore::new(Layered::new(self.0.clone(), Counting::new()))
        }

        async fn unreachable_store(&self) -> BoxStore {
            let dead = MemoryStore::new(self.0.info().style);
            dead.fail_next(u32::MAX);
            BoxStore::new(dead)
        }

        fn ttl(&self) -> Duration {
            Duration::from_secs(2)
        }

        async fn delete_records(&self, election: &ElectionName) {
            self.0.delete_records(election);
        }

        async fn put_garbage(&self, election: &ElectionName) {
            self.0.put_garbage(election);
        }
    }

    impl Harness for Flawed {
        type Store = Layered<MemoryStore, Flaw>;

        async fn store(&self) -> Self::Store {
            Layered::new(self.0.clone(), self.1)
        }

        async fn unreachable_store(&self) -> Self::Store {
            let dead = MemoryStore::new(self.0.info().style);
            dead.fail_next(u32::MAX);
            Layered::new(dead, self.1)
        }

        fn ttl(&self) -> Duration {
            Duration::from_secs(2)
        }

        async fn delete_records(&self, election: &ElectionName) {
            self.0.delete_records(election);
        }

        async fn put_garbage(&self, election: &ElectionName) {
            self.0.put_garbage(election);
        }
    }

    async fn check<H: Harness>(h: &H) -> Result<(), String> {
        let c = ctx(h, "candidates").await;
        candidates_list_the_line_in_order(&c).await
    }

    #[tokio::test(start_paused = true)]
    async fn the_memory_store_lists_its_line_in_queue_style_only() {
        check(&MemoryHarness::queue()).await.unwrap();
        check(&MemoryHarness::race()).await.unwrap();
    }

    /// Regression (issue 27): the boxed store and the layered one forward
    /// the call.
    #[tokio::test(start_paused = true)]
    async fn the_boxed_and_layered_stores_show_the_line() {
        check(&Wrapped(MemoryStore::queue())).await.unwrap();
        check(&Wrapped(MemoryStore::race())).await.unwrap();
    }

    /// Regression (issue 27): a wrapper that does not forward `candidates`
    /// hides a queue store's line from the live page; the check catches it.
    #[tokio::test(start_paused = true)]
    async fn a_wrapper_that_hides_the_line_is_caught() {
        let err = check(&Flawed(MemoryStore::queue(), Flaw::Hide))
            .await
            .unwrap_err();
        assert!(err.contains("listed None"), "{err}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_line_out_of_order_is_caught() {
        let err = check(&Flawed(MemoryStore::queue(), Flaw::Reverse))
            .await
            .unwrap_err();
        assert!(err.contains(r#"["c", "b", "a"]"#), "{err}");
    }
}
