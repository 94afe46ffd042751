//! `regent run` on a Consul cluster as Consul's recipe deploys it: three
//! servers, and one client agent per candidate, each candidate talking
//! only to its own agent. Kill -9 of the leading `regent` hands over once
//! Consul has invalidated its session and leaves nothing of its term
//! running; SIGTERM of the next leader hands over at once.

mod common;

use std::time::Duration;

use common::*;
use regent_core::store::ExpirySlack;
use regent_testkit::engines::{ConsulCluster, Engine, EngineError, Signaled};
use rustix::process::Signal;

const CANDIDATES: usize = 3;

/// The cluster as the sandbox's engine: its store URL is the first agent's
/// (each candidate gets its own with [`Cluster::agent_url`]); the faults of
/// the [`Engine`] trait are not used here and refuse.
#[derive(Debug)]
struct Cluster(ConsulCluster);

impl Cluster {
    fn agent_url(&self, i: usize) -> String {
        self.0.agent(i).store_url()
    }
}

impl Engine for Cluster {
    fn start() -> Result<Self, EngineError> {
        ConsulCluster::start(CANDIDATES).map(Cluster)
    }

    fn kind(&self) -> &'static str {
        "consul"
    }

    fn store_url(&self) -> String {
        self.agent_url(0)
    }

    fn pid(&self) -> Option<u32> {
        self.0.agent(0).pid()
    }

    fn is_healthy(&self) -> bool {
        self.0.agents().iter().all(|a| a.is_healthy())
    }

    fn kill(&mut self) -> Signaled {
        unimplemented!("fault a member: ConsulCluster::server_mut / agent_mut")
    }

    fn pause(&mut self) -> Signaled {
        unimplemented!("fault a member: ConsulCluster::server_mut / agent_mut")
    }

    fn resume(&mut self) -> Signaled {
        unimplemented!("fault a member: ConsulCluster::server_mut / agent_mut")
    }

    fn stop(&mut self) -> Signaled {
        unimplemented!("fault a member: ConsulCluster::server_mut / agent_mut")
    }

    fn restart(&mut self) -> Result<(), EngineError> {
        unimplemented!("fault a member: ConsulCluster::server_mut / agent_mut")
    }

    /// The servers' logs: where sessions end.
    fn log_tail(&self, lines: usize) -> String {
        self.0
            .servers()
            .iter()
            .map(|s| format!("--- server {}\n{}", s.node(), s.log_tail(lines)))
            .collect()
    }

    fn min_ttl(&self) -> Duration {
        self.0.agent(0).min_ttl()
    }

    fn expiry_slack(&self) -> ExpirySlack {
        self.0.agent(0).expiry_slack()
    }
}

#[test]
fn kill_9_fails_over_after_the_session_and_sigterm_hands_over_at_once() {
    let cluster = Cluster::start().unwrap_or_else(|e| panic!("cannot start a Consul cluster: {e}"));
    let urls: Vec<String> = (0..CANDIDATES).map(|i| cluster.agent_url(i)).collect();
    let mut sb = Sandbox::with_engine(Box::new(cluster));
    let timing = sb.timing();
    let ttl = timing.ttl_arg();
    for (i, url) in urls.iter().enumerate() {
        sb.candidate_on(url, &format!("c{i}"), &ttl, &[]);
    }
    let first = sb.first_start(Duration::from_secs(15));
    // Every candidate follows before the fault.
    std::thread::sleep(timing.renew_every);

    // kill -9 of the leading regent: its shim stops the term at once;
    // Consul ends the session one to two ttls after its last renewal.
    let killed_at = mono_ns();
    sb.by_id(&first.id).signal(Signal::KILL);
    sb.wait_term_gone(&first, Duration::from_secs(3));
    let bound = timing.crash_failover();
    let second = wait_for(
        bound + Duration::from_secs(5),
        "a new leader after kill -9",
        || sb.start_after(first.token),
        || sb.report(),
    );
    let took = Duration::from_nanos(second.mono_ns - killed_at);
    eprintln!("cluster kill -9 failover: {took:.3?} (bound {bound:.3?})");
    assert_ne!(second.id, first.id);
    assert!(
        took <= bound,
        "the new leader began {took:.3?} after kill -9, later than ttl + expiry slack + renew \
         interval + 3 s ({bound:.3?})\n{}",
        sb.report()
    );

    // SIGTERM of the new leader: released at once, the third leads.
    std::thread::sleep(timing.renew_every);
    let termed_at = mono_ns();
    sb.by_id(&second.id).signal(Signal::TERM);
    let third = wait_for(
        Duration::from_secs(5),
        "a new leader after SIGTERM",
        || sb.start_after(second.token),
        || sb.report(),
    );
    let took = Duration::from_nanos(third.mono_ns - termed_at);
    eprintln!("cluster SIGTERM hand-over: {took:.3?}");
    assert!(
        took <= Duration::from_secs(1),
        "the third leader began {took:.3?} after SIGTERM\n{}",
        sb.report()
    );
    let stop = sb.stop_of(&second.id, second.token).unwrap_or_else(|| {
        panic!(
            "the second leader's command got no SIGTERM\n{}",
            sb.report()
        )
    });
    assert!(stop.mono_ns < third.mono_ns, "{}", sb.report());
    assert_eq!(
        sb.by_id(&second.id)
            .wait_exit(Duration::from_secs(5))
            .code(),
        Some(0)
    );
    assert_ne!(third.id, first.id, "{}", sb.report());
    assert_tokens_increase(&sb.starts(), &sb.report());
}
