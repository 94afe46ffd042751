//! A check above the store contract: a term given back goes to a follower
//! that is waiting (issue 12: on SQLite the instance whose task finished
//! won 14 terms in a row).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::harness::{Check, Ctx, Harness, holder};
use crate::candidate::Candidate;
use crate::supervisor::{Restart, Supervisor};
use crate::types::HolderId;

/// How many terms the check watches.
const TERMS: usize = 7;

/// Three candidates, each a supervisor whose task finishes soon after it
/// starts (`Restart::Always`): every term must go to another holder than
/// the one before, because two others were waiting.
pub(super) async fn finished_task_hands_over_to_a_waiting_follower<H: Harness>(
    c: &Ctx<'_, H>,
) -> Check {
    let terms: Arc<Mutex<Vec<(HolderId, u64)>>> = Arc::default();
    let enough = Arc::new(tokio::sync::Notify::new());
    let mut candidates = Vec::new();
    let mut runs = Vec::new();
    for who in ["a", "b", "c"] {
        let candidate = Candidate::builder(c.h.store().await, c.election.clone(), holder(who))
            .ttl(c.ttl)
            // Short, so that the rules hold on a store that grants less
            // than asked; the task stops at once anyway.
            .grace(c.ttl / 20)
            .build()
            .map_err(|e| format!("candidate {who}: {e}"))?;
        candidates.push(candidate.clone());
        let (terms, enough) = (terms.clone(), enough.clone());
        runs.push(tokio::spawn(async move {
            Supervisor::new(candidate)
                .restart(Restart::Always)
                .run(move |leader| {
                    let (terms, enough) = (terms.clone(), enough.clone());
                    async move {
                        {
                            let mut t = terms.lock().expect("not poisoned");
                            t.push((leader.info().holder.clone(), leader.token().get()));
                            if t.len() >= TERMS {
                                enough.notify_one();
                            }
                        }
                        // A short job, then done: the term is given back.
                        tokio::select! {
                            () = tokio::time::sleep(Duration::from_millis(200)) => {}
                            () = leader.cancelled() => {}
                        }
                        Ok::<_, std::convert::Infallible>(())
                    }
                })
                .await
        }));
    }
    // Each term costs a task, a release, the hand-over pause and an acquire;
    // a minute per term is far more than any store needs.
    let waited = tokio::time::timeout(Duration::from_secs(60) * TERMS as u32, enough.notified())
        .await
        .is_ok();
    for candidate in &candidates {
        candidate.shutdown().await;
    }
    for run in runs {
        match run.await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(format!("a supervisor failed: {}", crate::report(&e))),
            Err(e) => return Err(format!("a supervisor panicked: {e}")),
        }
    }
    let terms = terms.lock().expect("not poisoned").clone();
    if !waited {
        return Err(format!(
            "only {} terms in the time allowed: {terms:?}",
            terms.len()
        ));
    }
    let shown: Vec<String> = terms.iter().map(|(h, t)| format!("{h}#{t}")).collect();
    for pair in terms.windows(2) {
        if pair[0].0 == pair[1].0 {
            return Err(format!(
                "{} led two terms in a row while two followers waited: {}",
                pair[0].0,
                shown.join(" ")
            ));
        }
        if pair[1].1 <= pair[0].1 {
            return Err(format!("tokens went back: {}", shown.join(" ")));
        }
    }
    Ok(())
}
