//! `--http` end to end: real `regent run` and `regent peer` processes
//! serve `/metrics`, `/healthz`, `/livez`, `/readyz` and `/leader`, and
//! these tell the truth about the election as it changes: the leader's
//! metric moves on kill -9, a command that stops beating and a store that
//! stops answering turn the health check to 503 with the reason, and an
//! address that cannot be served is a usage error before any campaign.

mod common;

use std::time::Duration;

use common::*;
use regent_testkit::engines::Signaled;
use rustix::process::Signal;

/// The value of the series `series` (`name{labels}`, as the endpoint
/// prints it) in the OpenMetrics text `text`.
fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// client-go's leader metric of the election `name`.
fn master_status(name: &str) -> String {
    format!(r#"leader_election_master_status{{name="{name}"}}"#)
}

/// `GET addr/metrics`, if it answers 200.
fn metrics(addr: &str) -> Option<String> {
    match http_get(addr, "/metrics") {
        Ok((200, body)) => Some(body),
        _ => None,
    }
}

/// Every endpoint's `/metrics` (`None` where it does not answer), for
/// messages.
fn scrape_all(addrs: &[String], series: &str) -> String {
    addrs
        .iter()
        .map(|a| {
            let v = metrics(a).map(|m| metric(&m, series));
            format!("{a}: {series} = {v:?}\n")
        })
        .collect()
}

/// The index in `addrs` of the one endpoint whose leader metric of
/// `election` is 1, when every endpoint answers and all the others say 0.
fn one_leader(addrs: &[String], election: &str) -> Option<usize> {
    let series = master_status(election);
    let mut leaders = Vec::new();
    for (i, addr) in addrs.iter().enumerate() {
        let v = metric(&metrics(addr)?, &series)?;
        if v == 1.0 {
            leaders.push(i);
        } else if v != 0.0 {
            return None;
        }
    }
    (leaders.len() == 1).then(|| leaders[0])
}

fn addrs(n: usize) -> Vec<String> {
    free_ports(n)
        .into_iter()
        .map(|p| format!("127.0.0.1:{p}"))
        .collect()
}

// ------------------------------------------------------------------ a

/// Three `regent run --http`: the leader metric is 1.0 on exactly the
/// instance whose task runs and 0.0 on the others; kill -9 of that
/// regent moves the 1 to one of the two others within the crash
/// hand-over, and again exactly one says 1.
fn the_leader_metric_is_1_on_exactly_one_instance_and_moves_on_kill_9(mut sb: Sandbox) {
    let addrs = addrs(3);
    let ttl = sb.ttl();
    for (k, addr) in addrs.iter().enumerate() {
        sb.candidate(&format!("c{}", k + 1), &ttl, &["--http", addr]);
    }
    let first = sb.first_start(Duration::from_secs(15));
    let series = master_status(ELECTION);
    let leader = wait_for(
        Duration::from_secs(10),
        "exactly one instance with leader_election_master_status 1.0, the others 0.0",
        || one_leader(&addrs, ELECTION),
        || format!("{}{}", scrape_all(&addrs, &series), sb.report()),
    );
    assert_eq!(
        format!("c{}", leader + 1),
        first.id,
        "the metric names another leader than the one whose task runs\n{}",
        sb.report()
    );
    let text = metrics(&addrs[leader]).expect("the leader's metrics");
    assert!(
        text.contains(&format!("{series} 1.0\n")),
        "a gauge prints as 1.0:\n{text}"
    );
    assert_eq!(
        metric(
            &text,
            &format!(r#"regent_fencing_token{{election="{ELECTION}"}}"#)
        ),
        Some(first.token as f64),
        "{text}"
    );
    // The page's state: a queue store (etcd) lists its line, the leader
    // first and every instance in it; a race store (SQLite) its roster:
    // the followers at least (they enroll while they campaign).
    let queue = sb.engine().kind() == "etcd";
    let line = wait_for(
        Duration::from_secs(10),
        "the page's state to show the store's line or roster",
        || {
            let (code, body) = http_get(&addrs[leader], "/api/state").ok()?;
            let state: serde_json::Value = serde_json::from_str(&body).ok()?;
            let line = state["elections"][0]["candidates"].clone();
            let listed = line.as_array()?.len();
            (code == 200 && if queue { listed == 3 } else { listed >= 2 }).then_some(line)
        },
        || {
            format!(
                "{:?}\n{}",
                http_get(&addrs[leader], "/api/state"),
                sb.report()
            )
        },
    );
    if queue {
        assert_eq!(line[0], first.id.as_str(), "{line}");
    }

    sb.by_id(&first.id).signal(Signal::KILL);
    let others: Vec<String> = addrs
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != leader)
        .map(|(_, a)| a.clone())
        .collect();
    let bound = sb.timing().crash_failover() + sb.timing().ttl;
    let next = wait_for(
        bound,
        "another instance's leader metric to flip to 1.0 after kill -9 of the leader",
        || one_leader(&others, ELECTION),
        || format!("{}{}", scrape_all(&addrs, &series), sb.report()),
    );
    let next_id = addrs.iter().position(|a| *a == others[next]).unwrap() + 1;
    let second = wait_for(
        Duration::from_secs(10),
        "the new leader's task",
        || sb.start_after(first.token),
        || sb.report(),
    );
    assert_eq!(format!("c{next_id}"), second.id, "{}", sb.report());
    // Exactly one still, now that the new term's task runs; the killed
    // one serves nothing.
    assert_eq!(
        one_leader(&others, ELECTION),
        Some(next),
        "{}",
        scrape_all(&addrs, &series)
    );
    assert!(
        http_get(&addrs[leader], "/metrics").is_err(),
        "the killed regent's endpoint still answers"
    );
}

#[test]
fn sqlite_the_leader_metric_is_1_on_exactly_one_instance_and_moves_on_kill_9() {
    the_leader_metric_is_1_on_exactly_one_instance_and_moves_on_kill_9(Sandbox::new());
}

#[test]
fn etcd_the_leader_metric_is_1_on_exactly_one_instance_and_moves_on_kill_9() {
    the_leader_metric_is_1_on_exactly_one_instance_and_moves_on_kill_9(Sandbox::etcd());
}

// ------------------------------------------------------------------ b

/// The status and body of `path` on `addr`; panics if it does not answer.
fn get(addr: &str, path: &str) -> (u16, String) {
    http_get(addr, path).unwrap_or_else(|e| panic!("GET {addr}{path}: {e}"))
}

/// `/healthz`, `/livez` and `/readyz` agree on `addr` with `status` (the
/// `/healthz` body returned), or `None` if they do not (yet).
fn probes_agree(addr: &str, status: u16, needle: &str) -> Option<String> {
    let mut bodies = Vec::new();
    for path in ["/healthz", "/livez", "/readyz"] {
        let (code, body) = http_get(addr, path).ok()?;
        if code != status || !body.contains(needle) {
            return None;
        }
        bodies.push(body);
    }
    Some(bodies.swap_remove(0))
}

/// `--health-timeout 1s`: c1's command beats for 2 s, then goes silent;
/// c1 steps down and its probes answer 503 "… stopped beating; no term
/// since" while c2 (whose command keeps beating) leads; they answered 200
/// while it beat. Its metrics count one step-down for health.
#[test]
fn healthz_answers_503_once_the_leaders_command_stops_beating() {
    let mut sb = Sandbox::new();
    let addrs = addrs(2);
    // c1's command beats 10 times, 0.2 s apart, then sleeps; any other
    // leader's beats on.
    let script = "if [ \"$REGENT_LEADER_ID\" = c1 ]; then \
                    for i in 1 2 3 4 5 6 7 8 9 10; do echo beat >&$REGENT_HEARTBEAT_FD || exit 9; sleep 0.2; done; \
                    exec sleep 1000; \
                  else \
                    while echo beat >&$REGENT_HEARTBEAT_FD; do sleep 0.2; done; \
                  fi";
    let spawn = |sb: &mut Sandbox, id: &str, addr: &str| {
        let args = sb.run_args(
            &["--id", id, "--health-timeout", "1s", "--http", addr],
            &["sh", "-c", script],
        );
        sb.spawn(id, &args);
    };
    spawn(&mut sb, "c1", &addrs[0]);
    let series = master_status(ELECTION);
    wait_for(
        Duration::from_secs(10),
        "c1 to lead",
        || metric(&metrics(&addrs[0])?, &series).filter(|v| *v == 1.0),
        || sb.report(),
    );
    let body = wait_for(
        Duration::from_secs(2),
        "/healthz, /livez and /readyz to answer 200 while c1's command beats",
        || probes_agree(&addrs[0], 200, "ok: leading"),
        || format!("{:?}\n{}", http_get(&addrs[0], "/healthz"), sb.report()),
    );
    assert!(body.starts_with("ok: leading (token "), "{body}");
    spawn(&mut sb, "c2", &addrs[1]);

    // The command's last beat is 2 s after it starts; 1 s later it is
    // silent past the timeout.
    let body = wait_for(
        Duration::from_secs(10),
        "/healthz, /livez and /readyz to answer 503: the work stopped beating, no term since",
        || probes_agree(&addrs[0], 503, "stopped beating; no term since"),
        || format!("{:?}\n{}", http_get(&addrs[0], "/healthz"), sb.report()),
    );
    assert!(
        body.starts_with("the last term ended ")
            && body.ends_with('\n')
            && body.lines().count() == 1,
        "one line with the reason: {body:?}"
    );
    let text = metrics(&addrs[0]).expect("c1's metrics");
    assert_eq!(
        metric(
            &text,
            &format!(r#"regent_step_downs_total{{election="{ELECTION}",reason="health"}}"#)
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(metric(&text, &series), Some(0.0), "{text}");
    assert_eq!(
        metric(
            &text,
            &format!(r#"regent_healthy{{election="{ELECTION}"}}"#)
        ),
        Some(0.0),
        "{text}"
    );
    // c2 leads meanwhile, healthy; c1 stays unhealthy while it does not
    // lead.
    wait_for(
        Duration::from_secs(10),
        "c2 to lead, healthy",
        || probes_agree(&addrs[1], 200, "ok: leading"),
        || format!("{:?}\n{}", http_get(&addrs[1], "/healthz"), sb.report()),
    );
    let (code, body) = get(&addrs[0], "/healthz");
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("stopped beating; no term since"), "{body}");
}

// ------------------------------------------------------------------ c

/// etcd frozen (SIGSTOP) under two `regent run --http`: once nothing has
/// answered for longer than the renew deadline, both answer 503 "the
/// store has not answered for …"; thawed, both answer 200 again.
#[test]
fn healthz_answers_503_while_the_store_does_not_answer() {
    let mut sb = Sandbox::etcd();
    let addrs = addrs(2);
    let ttl = sb.ttl();
    for (k, addr) in addrs.iter().enumerate() {
        sb.candidate(&format!("c{}", k + 1), &ttl, &["--http", addr]);
    }
    sb.first_start(Duration::from_secs(15));
    let healthy = |sb: &Sandbox| {
        wait_for(
            Duration::from_secs(15),
            "both instances healthy, one leading and one following",
            || {
                let a = probes_agree(&addrs[0], 200, "ok: ")?;
                let b = probes_agree(&addrs[1], 200, "ok: ")?;
                let leading = [&a, &b].iter().filter(|x| x.contains("leading")).count();
                (leading == 1).then_some(())
            },
            || {
                format!(
                    "{:?}\n{:?}\n{}",
                    http_get(&addrs[0], "/healthz"),
                    http_get(&addrs[1], "/healthz"),
                    sb.report()
                )
            },
        )
    };
    healthy(&sb);

    assert!(matches!(sb.engine_mut().pause(), Signaled::Sent));
    let limit = sb.timing().renew_deadline;
    for (k, addr) in addrs.iter().enumerate() {
        let body = wait_for(
            // The limit, then the requests' own timeouts before they count
            // as abandoned.
            limit + Duration::from_secs(15),
            &format!(
                "c{}'s /healthz to answer 503: the store has not answered",
                k + 1
            ),
            || probes_agree(addr, 503, "the store has not answered for "),
            || format!("{:?}\n{}", http_get(addr, "/healthz"), sb.report()),
        );
        assert_eq!(
            body.lines().count(),
            1,
            "one line with the reason: {body:?}"
        );
    }
    assert!(matches!(sb.engine_mut().resume(), Signaled::Sent));
    healthy(&sb);
}

// ------------------------------------------------------------------ d

/// `--http` on a port another socket holds: exit 2 before any campaign,
/// naming the flag and the address, and no leader record.
/// `REGENT_HTTP=not-an-address`: exit 2 naming the variable.
#[test]
fn an_address_that_cannot_be_served_is_exit_2_before_campaigning() {
    let sb = Sandbox::new();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a port");
    let addr = taken.local_addr().unwrap().to_string();
    let args = sb.run_args(&["--id", "c1", "--http", &addr], &["sleep", "1000"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = sb.run_bounded(&args, Duration::from_secs(15));
    no_panic(&out);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr
            .contains(&format!("--http {addr}: cannot listen there: ")),
        "{}",
        out.stderr
    );
    let status = sb.status();
    assert_eq!(status["leader"], serde_json::Value::Null, "{status}");
    drop(taken);

    let args = sb.run_args(&["--id", "c1"], &["sleep", "1000"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = sb.run_bounded_env(
        &args,
        &[("REGENT_HTTP", "not-an-address")],
        Duration::from_secs(15),
    );
    no_panic(&out);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("REGENT_HTTP") && out.stderr.contains("not-an-address"),
        "{}",
        out.stderr
    );
    let status = sb.status();
    assert_eq!(status["leader"], serde_json::Value::Null, "{status}");

    // Regression: the flag's message ran flag and value together
    // ("--httpnot-an-address").
    let args = sb.run_args(
        &["--id", "c1", "--http", "not-an-address"],
        &["sleep", "1000"],
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = sb.run_bounded(&args, Duration::from_secs(15));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("--http not-an-address: not HOST:PORT"),
        "{}",
        out.stderr
    );
}

/// Regression: the endpoint was bound before the store was reached but
/// served only after, so a probe hung while regent retried a store that
/// did not answer. It answers at once: alive, not ready.
#[test]
fn the_endpoint_answers_while_the_store_is_being_reached() {
    let mut sb = Sandbox::new();
    let addr = addrs(1).remove(0);
    let dead = format!("etcd://127.0.0.1:{}", free_ports(1)[0]);
    let args: Vec<String> = [
        "run",
        "--store",
        &dead,
        "--election",
        "e",
        "--id",
        "c1",
        "--http",
        &addr,
        "--",
        "sleep",
        "1000",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let i = sb.spawn_env(
        "c1",
        std::path::Path::new(REGENT),
        &args,
        &[("REGENT_START_RETRY", "30s")],
    );
    let ready = wait_for(
        Duration::from_secs(10),
        "/readyz to answer while the store is being reached",
        || http_get(&addr, "/readyz").ok(),
        || sb.regent(i).stderr(),
    );
    assert_eq!(ready, (503, "starting: reaching the store\n".to_owned()));
    assert_eq!(
        http_get(&addr, "/healthz").expect("GET /healthz"),
        (200, "ok: starting: reaching the store\n".to_owned())
    );
    assert!(sb.regent(i).running(), "{}", sb.regent(i).stderr());
}

// ------------------------------------------------------------------ e

/// `/leader` is `regent status --json`'s object; only GET is served, and
/// a path that is not a route is 404.
#[test]
fn leader_is_status_json_and_other_requests_are_refused() {
    let mut sb = Sandbox::new();
    let addr = addrs(1).remove(0);
    let ttl = sb.ttl();
    sb.candidate("c1", &ttl, &["--http", &addr]);
    let first = sb.first_start(Duration::from_secs(15));
    let leader = wait_for(
        Duration::from_secs(10),
        "/leader to name the leader",
        || {
            let (code, body) = http_get(&addr, "/leader").ok()?;
            let json: serde_json::Value = serde_json::from_str(&body).ok()?;
            (code == 200 && json["leader"]["id"] == first.id.as_str()).then_some(json)
        },
        || format!("{:?}\n{}", http_get(&addr, "/leader"), sb.report()),
    );
    let status = sb.status();
    assert_eq!(leader["election"], status["election"], "{leader} {status}");
    assert_eq!(leader["leader"], status["leader"], "{leader} {status}");
    // Both list the candidates (SQLite's roster): c1 enrolled as it began.
    assert!(status["candidates"].is_array(), "{status}");
    assert_eq!(leader["leader"]["token"], first.token, "{leader}");

    let (code, body) = http_request("POST", &addr, "/metrics").expect("POST /metrics");
    assert_eq!(code, 405, "POST /metrics: {body}");
    let (code, body) = get(&addr, "/no-such-route");
    assert_eq!(code, 404, "{body}");
}

// ------------------------------------------------------------------ f

/// Three `regent peer --http` members: each serves the leader metric (1.0
/// on the leader only) and the group's size.
#[test]
fn peer_http_serves_the_leader_metric_and_the_group() {
    let mut sb = Sandbox::new();
    std::fs::write(sb.path("secret"), "the members' shared secret, 16+ bytes\n").unwrap();
    let secret = sb.path("secret");
    let ports = free_ports(3);
    let http = addrs(3);
    let peers = (1..=3)
        .zip(&ports)
        .map(|(id, port)| format!("{id}=127.0.0.1:{port}"))
        .collect::<Vec<_>>()
        .join(",");
    for id in 1..=3 {
        let mut args: Vec<String> = [
            "peer",
            "--algorithm",
            "bully",
            "--id",
            &id.to_string(),
            "--peers",
            &peers,
            "--secret-file",
            secret.to_str().unwrap(),
            "--heartbeat-interval",
            "100ms",
            "--failure-timeout",
            "1s",
            "--http",
            &http[id - 1],
            "--",
        ]
        .map(String::from)
        .to_vec();
        args.extend(sb.task_cmd());
        sb.spawn(&id.to_string(), &args);
    }
    let first = sb.first_start(Duration::from_secs(15));
    let series = master_status("peer");
    // Bully: member 3 leads once all are up (a lower one may lead first).
    wait_for(
        Duration::from_secs(15),
        "exactly one member with leader_election_master_status 1.0: member 3",
        || one_leader(&http, "peer").filter(|&i| i == 2),
        || {
            format!(
                "first term {first:?}\n{}{}",
                scrape_all(&http, &series),
                sb.report()
            )
        },
    );
    for addr in &http {
        let text = wait_for(
            Duration::from_secs(5),
            "the group's view in the metrics",
            || {
                let text = metrics(addr)?;
                let leader_id = metric(&text, r#"regent_peer_leader_id{election="peer"}"#)?;
                (leader_id == 3.0).then_some(text)
            },
            || format!("{:?}", metrics(addr)),
        );
        assert_eq!(
            metric(&text, r#"regent_peer_members{election="peer"}"#),
            Some(3.0),
            "{addr}:\n{text}"
        );
        assert!(text.contains(&series), "{addr}:\n{text}");
    }
}

/// Regression: a term that regent gave back on SIGTERM was recorded as
/// resigned ("released" in the step-down metric), not as a shutdown.
#[test]
fn a_term_given_back_on_sigterm_ends_as_a_shutdown() {
    let mut sb = Sandbox::new();
    let addr = addrs(1).remove(0);
    let ttl = sb.ttl();
    let i = sb.candidate("c1", &ttl, &["--http", &addr]);
    sb.first_start(Duration::from_secs(15));
    sb.regent(i).signal(Signal::TERM);
    let status = sb.regent(i).wait_exit(Duration::from_secs(15));
    assert_eq!(status.code(), Some(0), "{}", sb.regent(i).stderr());
    let stderr = sb.regent(i).stderr();
    let ended = stderr
        .lines()
        .find(|l| l.contains("leadership ended"))
        .unwrap_or_else(|| panic!("no end of the term logged:\n{stderr}"));
    assert!(ended.contains("reason=shutdown"), "{ended}");
}
