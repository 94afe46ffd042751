//! `regent run` on Consul beyond the end-to-end tests every store runs
//! (`for_every_engine!`): the recipe's ClientID (the agent's node name by
//! default), its restart shortcut taken only when the old process is
//! proven gone, and an operator destroying the leader's session, deleting
//! or overwriting its key.
//!
//! The tests share the test process's one Consul dev agent, each under a
//! key prefix of its own (`SharedConsul`), and run with ttl 10 s
//! (Consul's minimum): renew every 2 s, step down 6 s after the last
//! renewal was sent.

mod common;

use std::time::Duration;

use common::*;
use regent_testkit::engines::{Consul, SharedConsul};
use rustix::process::Signal;

fn sandbox() -> Sandbox {
    let consul =
        SharedConsul::get().unwrap_or_else(|e| panic!("cannot start Consul for this test: {e}"));
    Sandbox::with_engine(Box::new(consul))
}

fn agent(sb: &Sandbox) -> &SharedConsul {
    sb.engine().downcast_ref().expect("a Consul sandbox")
}

/// The election's key: the sandbox's prefix, then the election.
fn key(sb: &Sandbox) -> String {
    format!("{}{ELECTION}", agent(sb).prefix())
}

/// The session that holds the election's key now, if any.
fn holding_session(sb: &Sandbox) -> Option<String> {
    let key = key(sb);
    let body = agent(sb).with_agent(|c| {
        c.http_get(&format!("/v1/kv/{key}?consistent"))
            .expect("the agent answers")
    });
    if body.status == 404 {
        return None;
    }
    let entries: serde_json::Value = serde_json::from_str(&body.body).expect("JSON");
    entries[0]["Session"].as_str().map(str::to_owned)
}

/// `consul ARGS` against the sandbox's agent, which must succeed.
fn consul(sb: &Sandbox, args: &[&str]) {
    let out = agent(sb)
        .with_agent(|c: &Consul| c.consul_command().args(args).output().expect("run consul"));
    assert!(
        out.status.success(),
        "consul {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The sessions' lock delay: the ttl unless `--consul-lock-delay` says
/// otherwise (Consul reports it in nanoseconds); the session TTL is
/// `max(10 s, ttl - lock delay, ttl/2)`.
#[test]
fn sessions_have_the_lock_delay_asked_and_the_ttl_by_default() {
    for (flag, want_ns) in [(None, 10_000_000_000_u64), (Some("3s"), 3_000_000_000)] {
        let mut sb = sandbox();
        let ttl = sb.ttl();
        let mut extra = vec!["--id", "c1", "--ttl", ttl.as_str()];
        extra.extend(
            flag.map(|f| ["--consul-lock-delay", f])
                .into_iter()
                .flatten(),
        );
        let args = run_args_on(&sb.store(), &extra, &["sleep", "1000"]);
        sb.spawn("c1", &args);
        let session = wait_for(
            Duration::from_secs(10),
            "c1's session to hold the key",
            || holding_session(&sb),
            || sb.report(),
        );
        let info = agent(&sb).with_agent(|c| {
            c.http_get(&format!("/v1/session/info/{session}"))
                .expect("the agent answers")
        });
        let info: serde_json::Value = serde_json::from_str(&info.body).expect("JSON");
        assert_eq!(info[0]["LockDelay"], want_ns, "{flag:?}: {info}");
        assert_eq!(info[0]["Behavior"], "release", "{info}");
        assert_eq!(info[0]["TTL"], "10000ms", "{info}");
    }
}

/// The demo takes Consul's minimum ttl by default and refuses a shorter
/// one by name (it used to start candidates that all failed, then say
/// only that nobody led).
#[test]
fn the_demo_refuses_a_ttl_below_consuls_minimum() {
    let sb = sandbox();
    let out = run_bounded(
        &[
            "demo",
            "--store",
            &sb.store(),
            "--election",
            "d",
            "--ttl",
            "2s",
        ],
        Duration::from_secs(20),
    );
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("--ttl 2s is below the consul store's minimum ttl, 10s"),
        "{}",
        out.stderr
    );
}

#[test]
fn without_id_the_holder_is_the_agents_node_name() {
    let mut sb = sandbox();
    let args = sb.run_args(&[], &["sleep", "1000"]);
    sb.spawn("noid", &args);
    let status = wait_for(
        Duration::from_secs(10),
        "a leader",
        || {
            let s = sb.status();
            (!s["leader"].is_null()).then_some(s)
        },
        || sb.report(),
    );
    // The kit's dev agent is the node `dev`.
    assert_eq!(status["leader"]["id"], "dev", "{status}");
}

/// Consul's recipe: an instance that finds its own ClientID in the key was
/// restarted and leads again. regent takes that shortcut once the kernel
/// shows that nothing of the old process's term runs any more (the lock
/// file of its session is free): here, after kill -9, once its shim has
/// stopped the old command. A follower waiting meanwhile does not lead.
/// (The old term's supervisor would give the lease back after kill -9,
/// and the follower would lead: its test hook keeps the lease, as when
/// that release fails, to reach the shortcut.)
#[test]
fn a_restarted_instance_leads_again_at_once_when_its_old_term_is_gone() {
    let mut sb = sandbox();
    let timing = sb.timing();
    let ttl = timing.ttl_arg();
    let c1 = sb.candidate_env("c1", &ttl, &[], &[KEEP_LEASE]);
    let old = sb.first_start(Duration::from_secs(10));
    sb.candidate("c2", &ttl, &[]);
    std::thread::sleep(Duration::from_millis(500));
    let old_session = holding_session(&sb).expect("c1's session holds the key");

    sb.regent(c1).signal(Signal::KILL);
    sb.wait_term_gone(&old, Duration::from_secs(5));
    let restarted_at = mono_ns();
    let again = sb.candidate("c1", &ttl, &[]);
    let next = wait_for(
        Duration::from_secs(8),
        "the restarted c1 to lead",
        || sb.start_after(old.token),
        || sb.report(),
    );
    let took = Duration::from_nanos(next.mono_ns - restarted_at);
    eprintln!("restart shortcut: leading {took:.3?} after the restart");
    assert_eq!(next.id, "c1", "{}", sb.report());
    assert!(
        took < timing.ttl / 2,
        "the restarted c1 led {took:.3?} after it started: it waited for the old session\n{}",
        sb.report()
    );
    // The restarted instance took the old session over (no lock delay to
    // wait out, no race with c2), with a larger token.
    assert_eq!(holding_session(&sb), Some(old_session));
    assert!(
        sb.regent(again).stderr().contains("restart proof is free"),
        "{}",
        sb.report()
    );
    assert_tokens_increase(&sb.starts(), &sb.report());
}

/// The shortcut is not taken while anything of the old term still runs:
/// the whole old instance is frozen (regent, its shim, the command), so
/// its lock stays held, and the restarted instance with the same id waits
/// for Consul to invalidate the old session like any follower.
#[test]
fn a_restarted_instance_waits_while_its_old_term_still_runs() {
    let mut sb = sandbox();
    let timing = sb.timing();
    let ttl = timing.ttl_arg();
    let c1 = sb.candidate("c1", &ttl, &[]);
    let old = sb.first_start(Duration::from_secs(10));
    let frozen = sb.freeze_instance(c1, &old);

    let again = sb.candidate("c1", &ttl, &[]);
    let next = wait_for(
        timing.crash_failover() + Duration::from_secs(5),
        "the restarted c1 to lead once the old session expired",
        || sb.start_after(old.token),
        || sb.report(),
    );
    let after = Duration::from_nanos(next.mono_ns - frozen.at);
    eprintln!("frozen old term: the restarted instance led {after:.3?} after the freeze");
    // The old session's last renewal was at most a renew interval before
    // the freeze, and Consul keeps a session at least its ttl.
    assert!(
        after >= timing.ttl - timing.renew_every,
        "the restarted c1 led {after:.3?} after the freeze, before the old session could expire\n{}",
        sb.report()
    );
    assert!(
        !sb.regent(again).stderr().contains("restart proof is free"),
        "{}",
        sb.report()
    );
    frozen.thaw();
    sb.wait_term_gone(&old, Duration::from_secs(5));
    assert_tokens_increase(&sb.starts(), &sb.report());
}

/// c1 leads alone; `act` (an operator's) must make it stop its command
/// within a renew interval, then campaign again and lead with a larger
/// token. Returns the old and the new term.
fn operator_act_stops_the_leader(
    sb: &mut Sandbox,
    what: &str,
    act: impl FnOnce(&Sandbox),
) -> (Event, Event, u64) {
    let timing = sb.timing();
    sb.candidate("c1", &timing.ttl_arg(), &[]);
    let old = sb.first_start(Duration::from_secs(10));
    let acted_at = mono_ns();
    act(sb);
    let stop = wait_for(
        timing.renew_every + Duration::from_secs(5),
        &format!("the leader to stop its command after {what}"),
        || sb.stop_of(&old.id, old.token),
        || sb.report(),
    );
    let took = Duration::from_nanos(stop.mono_ns - acted_at);
    eprintln!("{what}: command stopped after {took:.3?}");
    assert!(
        took <= timing.renew_every + Duration::from_secs(2),
        "stopped {took:.3?} after {what}, more than a renew interval (and 2 s for the act and a \
         loaded machine)\n{}",
        sb.report()
    );
    let next = wait_for(
        timing.ttl + Duration::from_secs(10),
        &format!("a new term after {what}"),
        || sb.start_after(old.token),
        || sb.report(),
    );
    assert!(stop.mono_ns < next.mono_ns, "{}", sb.report());
    assert_tokens_increase(&sb.starts(), &sb.report());
    (old, next, acted_at)
}

/// An operator destroys the leader's session (`PUT
/// /v1/session/destroy/ID`, what the UI's button does): the leader learns at
/// its next renewal, stops its command, and campaigns again with a new
/// session (and, alone, leads again with a larger token).
#[test]
fn an_operator_destroying_the_leaders_session_stops_it_within_a_renew_interval() {
    let mut sb = sandbox();
    let mut destroyed = None;
    let (_, next, acted_at) =
        operator_act_stops_the_leader(&mut sb, "the session's destruction", |sb| {
            let session = holding_session(sb).expect("c1's session holds the key");
            let answer = agent(sb).with_agent(|c| {
                c.http_put(&format!("/v1/session/destroy/{session}"), None)
                    .expect("the agent answers")
            });
            assert_eq!(answer.status, 200, "{}", answer.body);
            destroyed = Some(session);
        });
    let new_session = holding_session(&sb).expect("the new term's session holds the key");
    assert_ne!(Some(new_session), destroyed);
    // The session's lock delay (the ttl) kept the key from everyone, the
    // old leader's own next campaign included, until the old term was
    // surely over.
    let waited = Duration::from_nanos(next.mono_ns - acted_at);
    let ttl = sb.timing().ttl;
    assert!(
        waited >= ttl - Duration::from_millis(500),
        "a new term began {waited:.3?} after the session was destroyed, within its lock delay \
         ({ttl:?})\n{}",
        sb.report()
    );
}

/// `consul kv delete` of the key: the leader learns at its next renewal
/// and stops; the key is created again by the next acquire, with a larger
/// token (a Raft index), though Consul's own LockIndex starts over.
#[test]
fn an_operator_deleting_the_key_stops_the_leader_and_tokens_still_grow() {
    let mut sb = sandbox();
    operator_act_stops_the_leader(&mut sb, "the key's deletion", |sb| {
        consul(sb, &["kv", "delete", &key(sb)]);
    });
}

/// `consul kv put KEY VALUE` over the leader's key (Consul keeps the lock):
/// the leader stops at its next renewal, and since the key now holds a
/// record regent did not write, regent acquires it no more and says so,
/// naming the key, and exits 1 (a runtime failure).
#[test]
fn an_operator_overwriting_the_key_stops_the_leader_and_regent_names_the_key() {
    let mut sb = sandbox();
    let timing = sb.timing();
    let c1 = sb.candidate("c1", &timing.ttl_arg(), &[]);
    let old = sb.first_start(Duration::from_secs(10));

    let key = key(&sb);
    consul(&sb, &["kv", "put", &key, "someone-else"]);
    wait_for(
        timing.renew_every + Duration::from_secs(5),
        "the leader to stop its command",
        || sb.stop_of(&old.id, old.token),
        || sb.report(),
    );
    let status = sb.regent(c1).wait_exit(Duration::from_secs(10));
    let stderr = sb.regent(c1).stderr();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&key), "{stderr}");
    assert_eq!(sb.starts().len(), 1, "{}", sb.report());
}
