//! [`check`]: whether a store answers, within a bound.

use std::time::Duration;

use super::LeaseStore;
use crate::error::StoreError;
use crate::types::ElectionName;

/// The election [`check`] reads: one nobody campaigns for.
const PROBE: &str = "regent-check";

/// Whether `store` answers now: one read of the leader of an election
/// nobody uses (`regent-check`), within `within`. Some stores connect at
/// their first request (etcd's client, a lazy PostgreSQL store): opening
/// one against a closed port succeeds, and only the first campaign would
/// tell. Call this after opening to learn at once, within a bound.
///
/// ```
/// # async fn run() -> Result<(), regent_core::StoreError> {
/// use std::time::Duration;
/// use regent_core::memory::MemoryStore;
///
/// regent_core::store::check(&MemoryStore::race(), Duration::from_secs(5)).await?;
/// # Ok(()) }
/// ```
///
/// # Errors
///
/// The read's error (`Unavailable` for a store that cannot be reached,
/// `Auth` for refused credentials, …), or `Unavailable` naming the bound
/// when there was no answer within it.
pub async fn check<S: LeaseStore + ?Sized>(store: &S, within: Duration) -> Result<(), StoreError> {
    let probe = ElectionName::new(PROBE).expect("a valid name");
    match tokio::time::timeout(within, store.current_leader(&probe)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(StoreError::unavailable(format!(
            "{} store: no answer within {within:?}",
            store.info().name
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;
    use crate::memory::MemoryStore;
    use crate::testing::{Latency, Layered};

    #[tokio::test(start_paused = true)]
    async fn answers_fails_or_times_out_within_the_bound() {
        let store = MemoryStore::race();
        check(&store, Duration::from_secs(1)).await.unwrap();
        store.fail_next(1);
        let e = check(&store, Duration::from_secs(1)).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unavailable);
        let slow = Layered::new(
            MemoryStore::race(),
            Latency::every_call(Duration::from_secs(60), Duration::ZERO),
        );
        let start = tokio::time::Instant::now();
        let e = check(&slow, Duration::from_secs(2)).await.unwrap_err();
        assert!(e.to_string().contains("no answer within 2s"), "{e}");
        assert_eq!(start.elapsed(), Duration::from_secs(2));
    }
}
