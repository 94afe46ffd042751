//! A campaign from its configuration to its outcome: the checks, the
//! store or peer group, the fence, the candidates; then the nemesis (or
//! the sweep), the teardown, the checker, the table and the report.

use std::path::{Path, PathBuf};
use std::time::Duration;

use regent_proc::mono_ns;
use rustix::process::Signal;
use tokio::time::Instant;

use crate::access::StoreAccess;
use crate::campaign::{Campaign, libfaketime, lifeline_pipe};
use crate::checker;
use crate::config::Config;
use crate::console::Console;
use crate::error::{ConfigError, Error};
use crate::fault::{Fault, FaultKind, Setting};
use crate::fence;
use crate::peers::{PeerGroup, peer_ttl};
use crate::procfs;
use crate::proxy;
use crate::report::{CampaignReport, LoggedFault, Outcome, Parameters, Report, SweepReport};
use crate::store::{prepare_stores, stop_stores};
use crate::sweep;
use crate::table::print_table;

/// How often exited candidates are looked for between faults.
const REAP_EVERY: Duration = Duration::from_millis(100);

/// Runs the campaign `config` describes on the store `store` reaches (or
/// on a peer group, [`Config::peers`]), until its duration has passed or
/// `stop` completes (`regent torture` passes SIGINT and SIGTERM), and
/// judges it.
///
/// Progress goes to the [`Config::console`] as the campaign runs, the
/// table at the end; the report to [`Config::report`] if set, and in the
/// [`Outcome`] in any case. Once `stop` completes the faults end; the
/// teardown, the checker and the report still run (a sweep ends with
/// [`Error::Interrupted`]).
///
/// # Errors
///
/// [`Error::Config`] for a configuration it refuses, before any process
/// starts; the front end's errors as [`Error::StoreUrl`] and
/// [`Error::StoreOpen`]; the others for a campaign that could not run to
/// its verdict (no candidate ever led, a store process that exited by
/// itself, a fence that cannot listen, a report that cannot be written).
/// [`Error::is_usage`] tells the two kinds apart.
///
/// # Cancel safety
///
/// Dropping the future kills every candidate and store process the
/// campaign started (they are killed on drop), but skips the graceful
/// teardown and the report: complete `stop` instead. Should the whole
/// process die, the candidates read EOF on their lifeline and shut down.
pub async fn run<S: StoreAccess>(
    config: Config,
    store: &S,
    stop: impl Future<Output = ()> + Send,
) -> Result<Outcome, Error> {
    let mut stop = std::pin::pin!(stop);
    let Checked {
        kinds,
        faketime,
        proxiable,
    } = check(&config)?;
    let seed = config.seed.unwrap_or_else(|| fastrand::u64(..));
    let tmp = tempfile::Builder::new()
        .prefix("regent-torture-")
        .tempdir()
        .map_err(Error::io("temporary directory"))?;
    let (urls, ttl, failover, store_args, store_processes, peer) = match config.peers {
        Some(peers) => {
            let ttl = peer_ttl(config.ttl, config.candidates)?;
            let group = PeerGroup::new(peers, config.candidates, tmp.path())?;
            // A failure timeout, then an election: a round of messages,
            // with the algorithm's own timeouts (at most another ttl).
            (
                Vec::new(),
                ttl,
                ttl * 3,
                Vec::new(),
                Vec::new(),
                Some(group),
            )
        }
        None => {
            let s = tokio::select! {
                s = prepare_stores(&config, store, tmp.path()) => s?,
                () = &mut stop => return Err(Error::Interrupted),
            };
            (
                s.urls,
                s.ttl,
                s.ttl * 2 + s.expiry_slack,
                s.child_args,
                s.processes,
                None,
            )
        }
    };
    let server = match fence::Server::start().await {
        Ok(server) => server,
        Err(source) => {
            stop_stores(store_processes).await;
            return Err(Error::Io {
                what: "the fence cannot listen",
                source,
            });
        }
    };
    let lifeline = match lifeline_pipe() {
        Ok(fd) => fd,
        Err(e) => {
            stop_stores(store_processes).await;
            return Err(e);
        }
    };
    let campaign = Campaign {
        exe: config.regent.clone(),
        dir: tmp.path().to_owned(),
        urls,
        election: config.election.to_string(),
        store_args,
        ttl,
        failover,
        fence: server.fence.clone(),
        fence_addr: server.addr,
        campaign_id: format!("{}-{}", std::process::id(), server.addr.port()),
        env: Vec::new(),
        candidates: Vec::new(),
        last_number: 0,
        store_processes,
        store_turns: Vec::new(),
        proxied: proxiable.filter(|_| kinds.iter().any(|k| k.needs_proxies())),
        rng: fastrand::Rng::with_seed(seed),
        lifeline,
        faketime,
        peer,
        extra: Vec::new(),
        top_priority: 0,
        started: Instant::now(),
        started_ns: mono_ns(),
        console: config.console.clone(),
    };
    if let Some(runs) = config.sweep {
        say!(
            config.console,
            "fence on {}; candidate logs in {}",
            server.addr,
            tmp.path().display()
        );
        return run_sweep(campaign, server, &config, runs, tmp, stop).await;
    }
    nemesis(campaign, server, &config, kinds, seed, tmp, stop).await
}

/// What [`check`] found.
struct Checked {
    /// The fault kinds to inject.
    kinds: Vec<FaultKind>,
    /// libfaketime's path, if it is there.
    faketime: Option<PathBuf>,
    /// The store URLs split around their endpoints, if every one can be
    /// proxied.
    proxiable: Option<Vec<(String, Vec<String>, String)>>,
}

/// Checks what can be checked before anything starts.
fn check(config: &Config) -> Result<Checked, ConfigError> {
    if !(2..=20).contains(&config.candidates) {
        return Err(ConfigError::Candidates {
            n: config.candidates,
        });
    }
    if let Some(runs) = config.sweep
        && !(1..=1000).contains(&runs)
    {
        return Err(ConfigError::SweepRuns { runs });
    }
    if config.peers.is_some() {
        if config.sweep.is_some() {
            return Err(ConfigError::SweepWithPeers);
        }
        if !(config.stores.is_empty()
            && config.store_commands.is_empty()
            && config.store_pids.is_empty())
        {
            return Err(ConfigError::PeersWithStore);
        }
    }
    let has_command = !config.store_commands.is_empty();
    let faketime = libfaketime();
    // Every URL's endpoints, or none if one cannot be proxied.
    let proxiable: Option<Vec<_>> = if config.stores.is_empty() {
        None
    } else {
        config.stores.iter().map(|u| proxy::split_url(u)).collect()
    };
    let setting = Setting {
        store_process: has_command || !config.store_pids.is_empty(),
        store_command: has_command,
        proxiable: proxiable.is_some(),
        faketime: faketime.is_some(),
        peer: config.peers.is_some(),
    };
    let kinds: Vec<FaultKind> = match &config.faults {
        Some(kinds) => {
            if let Some((fault, why)) = kinds
                .iter()
                .find_map(|&k| k.refused(&setting).map(|why| (k, why)))
            {
                return Err(ConfigError::FaultRefused { fault, why });
            }
            kinds.clone()
        }
        None => FaultKind::ALL
            .into_iter()
            .filter(|k| k.refused(&setting).is_none())
            .collect(),
    };
    if has_command && config.stores.is_empty() {
        return Err(ConfigError::StoreCommandsWithoutStores);
    }
    if let Some(&pid) = config.store_pids.iter().find(|&&pid| !procfs::alive(pid)) {
        return Err(ConfigError::NoSuchStorePid { pid });
    }
    if config.ttl.is_some_and(|t| t.is_zero()) {
        return Err(ConfigError::ZeroTtl);
    }
    Ok(Checked {
        kinds,
        faketime,
        proxiable,
    })
}

/// The campaign of random faults: the nemesis until the duration has
/// passed (or `stop`), the teardown, the checker, the table, the report.
async fn nemesis(
    mut campaign: Campaign,
    server: fence::Server,
    config: &Config,
    kinds: Vec<FaultKind>,
    seed: u64,
    tmp: tempfile::TempDir,
    stop: impl Future<Output = ()>,
) -> Result<Outcome, Error> {
    let console = &config.console;
    let started_ns = campaign.started_ns;
    let names: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
    say!(
        console,
        "regent torture: seed {seed}; {} {} {}, election '{}', ttl {:?}, faults for {:?}: {}",
        config.candidates,
        if campaign.peer.is_some() {
            "members of"
        } else {
            "candidates on"
        },
        campaign
            .peer
            .as_ref()
            .map_or_else(|| campaign.urls.join(" "), PeerGroup::describe),
        campaign.election,
        campaign.ttl,
        config.duration,
        names.join(",")
    );
    say!(
        console,
        "fence on {}; candidate logs in {}",
        server.addr,
        tmp.path().display()
    );
    let n = usize::from(config.candidates);
    let mut faults = Vec::new();
    let run = async {
        campaign.replenish(n)?;
        campaign.first_leader().await?;
        campaign.say("first leader writes; the nemesis starts");
        nemesis_loop(&mut campaign, &kinds, n, config.duration, &mut faults).await
    };
    // `stop` ends the faults early; the teardown, the checker and the
    // report still run.
    let outcome = tokio::select! {
        r = run => r,
        () = stop => {
            say!(console, "regent torture: interrupted; stopping the campaign");
            Ok(())
        }
    };

    // Teardown: candidates, then a quiet time with the fence listening.
    let stop_within = campaign.ttl * 3 + Duration::from_secs(5);
    campaign.stop_all(stop_within).await;
    let all_exited_ns = mono_ns();
    tokio::time::sleep((campaign.ttl * 2).max(Duration::from_secs(1))).await;
    let survivors = campaign.writers_alive();
    for s in &survivors {
        procfs::signal(s.pid, Signal::KILL);
    }
    stop_stores(std::mem::take(&mut campaign.store_processes)).await;
    server.stop().await;
    outcome?;

    let (writes, garbage) = {
        let f = fence::lock(&campaign.fence);
        (f.writes().to_vec(), f.garbage())
    };
    let findings = checker::check(&checker::Input {
        writes: &writes,
        faults: &faults,
        slack: campaign.ttl * 2 + Duration::from_secs(1),
        all_exited_ns: Some(all_exited_ns),
        survivors: &survivors,
    });
    print_table(
        console,
        &findings,
        garbage,
        started_ns,
        faults.iter().any(|f| f.splits),
    );
    let ok = findings.violations.is_empty();
    let fault_log = faults
        .iter()
        .enumerate()
        .map(|(i, f)| LoggedFault::new(f, findings.after.get(i)))
        .collect();
    let report = Report::Campaign(Box::new(CampaignReport {
        seed,
        campaign: campaign.campaign_id.clone(),
        parameters: Parameters {
            stores: campaign.urls.clone(),
            election: campaign.election.clone(),
            candidates: config.candidates,
            ttl_ms: campaign.ttl.as_millis(),
            duration_ms: config.duration.as_millis(),
            faults: kinds,
            store_commands: config.store_commands.clone(),
            store_pids: config.store_pids.clone(),
            peer: config.peers.map(|p| p.algorithm.name().to_owned()),
            quorum: config.peers.is_some_and(|p| p.quorum),
        },
        started_ns,
        ended_ns: mono_ns(),
        candidates_started: campaign.last_number,
        garbage_lines: garbage,
        ok,
        findings,
        fault_log,
    }));
    let written = match &config.report {
        Some(path) => {
            let written = write_report(&report, path);
            match &written {
                Ok(()) => say!(console, "report: {} (seed {seed})", path.display()),
                Err(e) => warn_user!(
                    console,
                    "regent torture: cannot write {}: {}",
                    path.display(),
                    regent_core::report(e)
                ),
            }
            Some((path, written))
        }
        None => None,
    };
    let mut outcome = Outcome {
        report,
        written: None,
        logs: None,
    };
    if !ok {
        // The candidates' logs are evidence: keep them.
        outcome.logs = Some(keep(tmp, console));
        outcome.written = written.and_then(|(p, w)| w.is_ok().then(|| p.clone()));
        return Ok(outcome);
    }
    match written {
        Some((path, Ok(()))) => outcome.written = Some(path.clone()),
        Some((path, Err(e))) => {
            return Err(Error::Report {
                path: path.clone(),
                source: e,
            });
        }
        None => {}
    }
    Ok(outcome)
}

/// Writes `report` to `path`.
fn write_report(report: &Report, path: &Path) -> Result<(), std::io::Error> {
    let json = report.to_json().map_err(std::io::Error::other)?;
    std::fs::write(path, json)
}

/// Keeps the campaign's directory (the candidates' logs), and says where.
fn keep(tmp: tempfile::TempDir, console: &Console) -> PathBuf {
    let kept = tmp.keep();
    say!(console, "candidate logs kept in {}", kept.display());
    kept
}

async fn nemesis_loop(
    campaign: &mut Campaign,
    kinds: &[FaultKind],
    n: usize,
    duration: Duration,
    faults: &mut Vec<Fault>,
) -> Result<(), Error> {
    let end = Instant::now() + duration;
    loop {
        let wait = Duration::from_millis(campaign.rng.u64(500..=3000));
        let next = (Instant::now() + wait).min(end);
        // Replace exited candidates while waiting, not only at faults.
        while Instant::now() < next {
            tokio::time::sleep_until(next.min(Instant::now() + REAP_EVERY)).await;
            campaign.replenish(n)?;
        }
        if Instant::now() >= end {
            return Ok(());
        }
        let kind = kinds[campaign.rng.usize(..kinds.len())];
        match campaign.inject(kind).await {
            Some(f) => {
                campaign.say_at(
                    f.at_ns,
                    &format!(
                        "{kind}: {} {}",
                        match (&f.target, f.leader_token) {
                            (Some(id), Some(t)) => format!("{id} (token {t})"),
                            (Some(id), None) => id.clone(),
                            (None, Some(t)) => format!("store (leader token {t})"),
                            (None, None) => "store".into(),
                        },
                        f.detail
                    ),
                );
                faults.push(f);
            }
            None => campaign.say(&format!("{kind}: nothing to hit now; skipped")),
        }
        campaign.replenish(n)?;
    }
}

/// The crash-point sweep instead of the nemesis; its table and its
/// cells in the report.
async fn run_sweep(
    mut campaign: Campaign,
    server: fence::Server,
    config: &Config,
    runs: u32,
    tmp: tempfile::TempDir,
    stop: impl Future<Output = ()>,
) -> Result<Outcome, Error> {
    let console = &config.console;
    say!(
        console,
        "regent torture --sweep: two candidates a run on {}, election '{}', ttl {:?}, {} runs per crash point and process",
        campaign.urls.join(" "),
        campaign.election,
        campaign.ttl,
        runs,
    );
    let outcome = tokio::select! {
        r = sweep::sweep(&mut campaign, runs) => r,
        () = stop => Err(Error::Interrupted),
    };
    campaign
        .stop_all(campaign.ttl * 3 + Duration::from_secs(5))
        .await;
    stop_stores(std::mem::take(&mut campaign.store_processes)).await;
    server.stop().await;
    let cells = match outcome {
        Ok(cells) => cells,
        Err(e) => {
            keep(tmp, console);
            return Err(e);
        }
    };
    sweep::print_table(console, &cells);
    let ok = cells.iter().all(sweep::Cell::ok);
    let report = Report::Sweep(SweepReport {
        stores: campaign.urls.clone(),
        election: campaign.election.clone(),
        ttl_ms: campaign.ttl.as_millis(),
        runs,
        ok,
        cells,
    });
    let mut outcome = Outcome {
        report,
        written: None,
        logs: None,
    };
    if let Some(path) = &config.report {
        let json = outcome.report.to_json().map_err(Error::ReportJson)?;
        std::fs::write(path, json).map_err(|source| Error::Report {
            path: path.clone(),
            source,
        })?;
        say!(console, "report: {}", path.display());
        outcome.written = Some(path.clone());
    }
    if !ok {
        outcome.logs = Some(keep(tmp, console));
    }
    Ok(outcome)
}
