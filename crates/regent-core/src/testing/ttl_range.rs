//! The checks of a store's declared ttl range ([`StoreInfo`]): a ttl
//! outside it is refused, never rounded; both ends are honoured.

use std::time::Duration;

use super::harness::{Check, Ctx, Harness, ensure, ok};
use crate::error::ErrorKind;
use crate::store::{Acquire, AcquireRequest, LeaseStore, StoreInfo, TtlGrant};

/// The ttls `try_acquire` must refuse: zero, just below the store's
/// minimum, half of it, and just above its maximum (capped at a day).
fn out_of_range_ttls(info: &StoreInfo) -> Vec<Duration> {
    let mut ttls = vec![Duration::ZERO];
    let min = info.min_ttl;
    for below in [min.saturating_sub(Duration::from_millis(1)), min / 2] {
        if !below.is_zero() && !ttls.contains(&below) {
            ttls.push(below);
        }
    }
    ttls.push(info.effective_max_ttl() + Duration::from_millis(1));
    ttls
}

/// The timing contract: a ttl the store does not honour is refused with
/// [`ErrorKind::Config`], never rounded into its range, and leaves no
/// lease behind.
pub(super) async fn ttl_outside_the_store_range_is_refused<H: Harness>(c: &Ctx<'_, H>) -> Check {
    let info = c.store.info();
    for ttl in out_of_range_ttls(&info) {
        let req = AcquireRequest { ttl, ..c.req("a") };
        match c.store.try_acquire(&req, None).await {
            Ok(got) => {
                let lease = match &got {
                    Acquire::Won(l) => Some(l),
                    Acquire::Held { queued, .. } => queued.as_ref(),
                };
                if let Some(l) = lease {
                    let _ = c.store.release(l).await;
                }
                return Err(format!(
                    "ttl {ttl:?}, outside the {:?}..={:?} the store declares, was accepted: {got:?}",
                    info.min_ttl,
                    info.effective_max_ttl()
                ));
            }
            Err(e) => ensure!(
                e.kind() == ErrorKind::Config,
                "ttl {ttl:?} outside the store's range must fail as Config, not: {e}"
            ),
        }
    }
    ensure!(
        c.leader().await?.is_none(),
        "a refused acquire left a leader behind"
    );
    Ok(())
}

/// The timing contract: the ttls at both ends of the declared range are
/// honoured, and granted in full unless the store negotiates.
pub(super) async fn ttl_at_the_ends_of_the_store_range_is_honoured<H: Harness>(
    c: &Ctx<'_, H>,
) -> Check {
    let info = c.store.info();
    for ttl in [info.min_ttl, info.effective_max_ttl()] {
        let req = AcquireRequest { ttl, ..c.req("a") };
        let a = match ok(
            &format!("acquire with ttl {ttl:?}"),
            c.store.try_acquire(&req, None).await,
        )? {
            Acquire::Won(a) => a,
            other => {
                return Err(format!(
                    "acquire with ttl {ttl:?} of a free election: {other:?}"
                ));
            }
        };
        ok("release", c.store.release(&a).await)?;
        ensure!(
            info.ttl_grant == TtlGrant::Negotiated || a.ttl >= ttl,
            "ttl {ttl:?} asked, {:?} granted, and the store does not declare that it negotiates",
            a.ttl
        );
    }
    Ok(())
}
