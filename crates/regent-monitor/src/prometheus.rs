//! The metrics of one or more [`Monitor`]s on a `prometheus_client`
//! registry (feature `prometheus`): a collector that reads the monitors at
//! every scrape.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::exemplar::Exemplar;
use prometheus_client::registry::{Registry, Unit};

use crate::calls::{Operation, StoreCalls};
use crate::monitor::{Monitor, Snapshot, StepDown};

/// The metrics of any number of elections and stores, registered once on
/// a `prometheus_client` [`Registry`]: every family is listed once, with a
/// label set per election. [`Monitor::register`] does this for one.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use prometheus_client::registry::Registry;
/// use regent_core::{Candidate, ElectionName, HolderId, memory::MemoryStore};
/// use regent_monitor::Monitor;
///
/// let candidate = Candidate::builder(MemoryStore::race(), ElectionName::new("jobs")?, HolderId::new("a")?)
///     .build()?;
/// let monitor = Monitor::follow(&candidate);
/// let mut registry = Registry::default();
/// monitor.register(&mut registry);
/// let _leadership = candidate.campaign().await?;
/// monitor.settled().await;
/// let mut text = String::new();
/// prometheus_client::encoding::text::encode(&mut text, &registry)?;
/// assert!(text.contains(r#"leader_election_master_status{name="jobs"} 1"#));
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default)]
pub struct Metrics {
    parts: Arc<Mutex<Parts>>,
}

#[derive(Debug, Default)]
struct Parts {
    monitors: Vec<Monitor>,
    calls: Vec<StoreCalls>,
}

impl Metrics {
    /// No election yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `monitor`'s election (and the store calls it counts, if any).
    pub fn add(&self, monitor: &Monitor) {
        let calls = monitor.shared.lock().calls.clone();
        let mut parts = self.parts.lock().unwrap_or_else(PoisonError::into_inner);
        parts.monitors.push(monitor.clone());
        if let Some(calls) = calls
            && !parts.calls.iter().any(|c| c.same(&calls))
        {
            parts.calls.push(calls);
        }
    }

    /// Adds a store's calls that no monitor counts.
    pub fn add_store_calls(&self, calls: &StoreCalls) {
        let mut parts = self.parts.lock().unwrap_or_else(PoisonError::into_inner);
        if !parts.calls.iter().any(|c| c.same(calls)) {
            parts.calls.push(calls.clone());
        }
    }

    /// Registers the collector on `registry` (its prefix, if any, goes
    /// before every name).
    pub fn register(&self, registry: &mut Registry) {
        registry.register_collector(Box::new(self.clone()));
    }
}

impl Monitor {
    /// Registers this monitor's metrics on `registry`: see the crate docs
    /// for the list. To put several elections on one registry, add them to
    /// one [`Metrics`] instead (a family may be registered only once).
    pub fn register(&self, registry: &mut Registry) {
        let metrics = Metrics::new();
        metrics.add(self);
        metrics.register(registry);
    }
}

type Labels = Vec<(&'static str, String)>;

fn election(s: &Snapshot) -> Labels {
    vec![("election", s.election.as_str().to_owned())]
}

fn family<'a>(
    encoder: &'a mut DescriptorEncoder<'_>,
    name: &'a str,
    help: &str,
    unit: Option<&'a Unit>,
    kind: MetricType,
) -> Result<MetricEncoder<'a>, std::fmt::Error> {
    encoder.encode_descriptor(name, help, unit, kind)
}

fn gauge(m: &mut MetricEncoder<'_>, labels: &Labels, v: f64) -> Result<(), std::fmt::Error> {
    m.encode_family(labels)?.encode_gauge(&v)
}

fn counter(m: &mut MetricEncoder<'_>, labels: &Labels, v: u64) -> Result<(), std::fmt::Error> {
    m.encode_family(labels)?
        .encode_counter::<NoLabelSet, _, f64>(&v, None)
}

impl Collector for Metrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let (monitors, calls) = {
            let parts = self.parts.lock().unwrap_or_else(PoisonError::into_inner);
            (parts.monitors.clone(), parts.calls.clone())
        };
        let seen: Vec<(Snapshot, bool)> = monitors
            .iter()
            .map(|m| (m.snapshot(), m.health().live.is_ok()))
            .collect();
        let secs = Unit::Seconds;

        // client-go's name and meaning, so that existing dashboards and
        // alerts (`sum(leader_election_master_status) != 1`) work.
        let mut m = family(
            &mut encoder,
            "leader_election_master_status",
            "1 while this instance leads the election `name`, 0 otherwise (client-go's metric)",
            None,
            MetricType::Gauge,
        )?;
        for (s, _) in seen.iter().filter(|(s, _)| s.holder.is_some()) {
            gauge(
                &mut m,
                &vec![("name", s.election.as_str().to_owned())],
                f64::from(u8::from(s.leading)),
            )?;
        }
        let mut m = family(
            &mut encoder,
            "regent_leader",
            "1 while this instance leads the election, 0 otherwise",
            None,
            MetricType::Gauge,
        )?;
        for (s, _) in seen.iter().filter(|(s, _)| s.holder.is_some()) {
            gauge(&mut m, &election(s), f64::from(u8::from(s.leading)))?;
        }
        let mut m = family(
            &mut encoder,
            "regent_fencing_token",
            "The fencing token of the term in progress as this process sees it (its own while it leads); 0 while it knows of no leader",
            None,
            MetricType::Gauge,
        )?;
        for (s, _) in &seen {
            let token = s.leader.as_ref().map_or(0, |l| l.token.get());
            #[allow(
                clippy::cast_precision_loss,
                reason = "tokens past 2^53 are not expected"
            )]
            gauge(&mut m, &election(s), token as f64)?;
        }
        let mut m = family(
            &mut encoder,
            "regent_terms_won",
            "Terms this instance won",
            None,
            MetricType::Counter,
        )?;
        for (s, _) in seen.iter().filter(|(s, _)| s.holder.is_some()) {
            counter(&mut m, &election(s), s.terms_won)?;
        }
        let mut m = family(
            &mut encoder,
            "regent_step_downs",
            "Terms of this instance that ended, by reason: lost (the store said another holds it), deadline (no renewal in time), health (the work stopped beating), shutdown, store_error (a permanent store error), released (given back: the work ended)",
            None,
            MetricType::Counter,
        )?;
        for (s, _) in seen.iter().filter(|(s, _)| s.holder.is_some()) {
            for reason in StepDown::ALL {
                let mut labels = election(s);
                labels.push(("reason", reason.as_str().to_owned()));
                counter(
                    &mut m,
                    &labels,
                    s.step_downs.get(&reason).copied().unwrap_or(0),
                )?;
            }
        }
        let mut m = family(
            &mut encoder,
            "regent_leader_changes",
            "Terms seen begin, this instance's and others'",
            None,
            MetricType::Counter,
        )?;
        for (s, _) in &seen {
            counter(&mut m, &election(s), s.leader_changes)?;
        }
        let mut m = family(
            &mut encoder,
            "regent_lease_remaining",
            "Local lease time left of this instance's term (0 while it does not lead)",
            Some(&secs),
            MetricType::Gauge,
        )?;
        for (s, _) in seen.iter().filter(|(s, _)| s.holder.is_some()) {
            let left = s.lease_left.unwrap_or_default().as_secs_f64();
            gauge(&mut m, &election(s), left)?;
        }
        let mut m = family(
            &mut encoder,
            "regent_leaderless_gap",
            "How long nobody led before the last term began, as this process saw it (absent until a hand-over was seen)",
            Some(&secs),
            MetricType::Gauge,
        )?;
        for (s, _) in &seen {
            if let Some(gap) = s.last_gap {
                gauge(&mut m, &election(s), gap.as_secs_f64())?;
            }
        }
        let mut m = family(
            &mut encoder,
            "regent_healthy",
            "1 while the health check (/healthz) passes, 0 otherwise",
            None,
            MetricType::Gauge,
        )?;
        for (s, live) in &seen {
            gauge(&mut m, &election(s), f64::from(u8::from(*live)))?;
        }
        encode_command(&mut encoder, &seen)?;
        encode_group(&mut encoder, &seen)?;
        encode_calls(&mut encoder, &calls)
    }
}

fn encode_command(
    encoder: &mut DescriptorEncoder<'_>,
    seen: &[(Snapshot, bool)],
) -> Result<(), std::fmt::Error> {
    let runs: Vec<&Snapshot> = seen
        .iter()
        .map(|(s, _)| s)
        .filter(|s| s.command.starts > 0)
        .collect();
    if runs.is_empty() {
        return Ok(());
    }
    let mut m = family(
        encoder,
        "regent_command_starts",
        "Times the leader's command was started",
        None,
        MetricType::Counter,
    )?;
    for s in &runs {
        counter(&mut m, &election(s), s.command.starts)?;
    }
    let mut m = family(
        encoder,
        "regent_command_restarts",
        "Times the leader's command was started again after its first start",
        None,
        MetricType::Counter,
    )?;
    for s in &runs {
        counter(&mut m, &election(s), s.command.starts.saturating_sub(1))?;
    }
    let mut m = family(
        encoder,
        "regent_command_exits",
        "Exits of the leader's command, by status: an exit code (\"0\", \"1\"…) or the signal that ended it (\"SIGKILL\")",
        None,
        MetricType::Counter,
    )?;
    for s in &runs {
        for (how, n) in &s.command.exits {
            let mut labels = election(s);
            labels.push(("status", how.clone()));
            counter(&mut m, &labels, *n)?;
        }
    }
    Ok(())
}

fn encode_group(
    encoder: &mut DescriptorEncoder<'_>,
    seen: &[(Snapshot, bool)],
) -> Result<(), std::fmt::Error> {
    let groups: Vec<_> = seen
        .iter()
        .filter_map(|(s, _)| s.group.as_ref().map(|g| (s, g)))
        .collect();
    if groups.is_empty() {
        return Ok(());
    }
    let mut m = family(
        encoder,
        "regent_peer_members",
        "Members configured in the peer group, this one included",
        None,
        MetricType::Gauge,
    )?;
    for (s, g) in &groups {
        #[allow(clippy::cast_precision_loss, reason = "at most a few hundred members")]
        gauge(&mut m, &election(s), g.members as f64)?;
    }
    let mut m = family(
        encoder,
        "regent_peer_leader_id",
        "The member id of the leader as this member sees it (absent while it knows of none)",
        None,
        MetricType::Gauge,
    )?;
    for (s, g) in &groups {
        if let Some(id) = g.leader {
            #[allow(clippy::cast_precision_loss, reason = "member ids are small")]
            gauge(&mut m, &election(s), id as f64)?;
        }
    }
    let mut m = family(
        encoder,
        "regent_peer_epoch",
        "The epoch of the leader's term as this member sees it (absent while it knows of none)",
        None,
        MetricType::Gauge,
    )?;
    for (s, g) in &groups {
        if let Some(epoch) = g.epoch {
            #[allow(
                clippy::cast_precision_loss,
                reason = "epochs past 2^53 are not expected"
            )]
            gauge(&mut m, &election(s), epoch as f64)?;
        }
    }
    let mut m = family(
        encoder,
        "regent_peer_transport_events",
        "What the member's transport did, by event (frames accepted, connections dropped for a bad frame or a failed authentication...)",
        None,
        MetricType::Counter,
    )?;
    for (s, g) in &groups {
        for (event, n) in &g.counters {
            let mut labels = election(s);
            labels.push(("event", (*event).to_owned()));
            counter(&mut m, &labels, *n)?;
        }
    }
    Ok(())
}

fn encode_calls(
    encoder: &mut DescriptorEncoder<'_>,
    calls: &[StoreCalls],
) -> Result<(), std::fmt::Error> {
    if calls.is_empty() {
        return Ok(());
    }
    // Several stores' counters (a dashboard's elections on several
    // connections) are summed.
    let mut counts = std::collections::BTreeMap::new();
    let mut latency: std::collections::BTreeMap<Operation, crate::calls::Latency> =
        std::collections::BTreeMap::new();
    for c in calls {
        let snap = c.snapshot();
        for (k, n) in snap.counts {
            *counts.entry(k).or_insert(0u64) += n;
        }
        for (op, l) in snap.latency {
            let into = latency.entry(op).or_default();
            for (a, b) in into.buckets.iter_mut().zip(l.buckets) {
                *a += b;
            }
            into.sum += l.sum;
            into.count += l.count;
        }
    }
    let mut m = family(
        encoder,
        "regent_store_requests",
        "Requests to the store, by operation and outcome (ok: the store answered; unavailable, auth, config, corrupt, protocol: its error; abandoned: no answer in time)",
        None,
        MetricType::Counter,
    )?;
    for ((op, outcome), n) in &counts {
        let labels: Labels = vec![
            ("operation", op.as_str().to_owned()),
            ("outcome", outcome.as_str().to_owned()),
        ];
        counter(&mut m, &labels, *n)?;
    }
    let secs = Unit::Seconds;
    let mut m = family(
        encoder,
        "regent_store_request_duration",
        "How long the store took to answer, by operation",
        Some(&secs),
        MetricType::Histogram,
    )?;
    for (op, l) in &latency {
        let labels: Labels = vec![("operation", op.as_str().to_owned())];
        m.encode_family(&labels)?.encode_histogram::<NoLabelSet>(
            l.sum,
            l.count,
            &l.per_bucket(),
            None::<&HashMap<usize, Exemplar<NoLabelSet, f64>>>,
        )?;
    }
    Ok(())
}
