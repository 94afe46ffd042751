//! Choosing the leader with `regent run --priority` and `regent handover`,
//! on every engine of the test kit (`regent_testkit::for_every_engine!`):
//! three candidates of priorities 1, 2 and 3 — 3 leads; kill -9 of it: 2
//! leads; 3 comes back: it leads again within the settle time and a
//! hand-over; `regent handover --to p1` moves the lead to 1, and no
//! priority takes it back.

mod common;

/// Every test here sits in this module, so that `scripts/test` can select
/// them (`choosing_runs::`).
mod choosing_runs {
    use std::time::Duration;

    use crate::common::*;
    use rustix::process::Signal;

    /// The settle time the tests pass: half the ttl (1 s at the base ttl).
    fn settle(sb: &Sandbox) -> Duration {
        sb.timing().ttl / 2
    }

    fn start(sb: &mut Sandbox, fixture: &str, id: &str, priority: i32) {
        let ttl = sb.ttl();
        let settle = format!("{}ms", settle(sb).as_millis());
        let p = priority.to_string();
        let flags = [
            "--id",
            id,
            "--ttl",
            ttl.as_str(),
            "--priority",
            p.as_str(),
            "--settle",
            settle.as_str(),
        ];
        let task = sb.task_cmd();
        let task: Vec<&str> = task.iter().map(String::as_str).collect();
        let args = run_args_on(&sb.store(), &flags, &task);
        sb.spawn_env(fixture, std::path::Path::new(REGENT), &args, &[]);
    }

    /// Waits for a task of `id` with a token above `after`.
    fn leads(sb: &Sandbox, id: &str, after: u64, within: Duration) -> Event {
        wait_for(
            within,
            &format!("{id}'s task"),
            || {
                sb.starts()
                    .into_iter()
                    .find(|e| e.id == id && e.token > after)
            },
            || sb.report(),
        )
    }

    /// `regent handover --to TO [extra]` on the sandbox's store, bounded.
    fn handover(sb: &Sandbox, to: &str, extra: &[&str], within: Duration) -> Output {
        let store = sb.store();
        let mut args = vec![
            "handover",
            "--store",
            &store,
            "--election",
            ELECTION,
            "--to",
            to,
        ];
        args.extend_from_slice(extra);
        sb.run_bounded(&args, within)
    }

    fn three_priorities_a_crash_a_return_and_a_handover(mut sb: Sandbox) {
        let t = sb.timing();
        let passing = t.release_failover() + t.renew_every * 2;
        start(&mut sb, "p1", "p1", 1);
        start(&mut sb, "p2", "p2", 2);
        start(&mut sb, "p3", "p3", 3);
        // Whoever wins first hands over to p3 once it has seen it for the
        // settle time.
        let first = leads(&sb, "p3", 0, t.crash_failover() + settle(&sb) + passing);

        // status lists the candidates with their priorities: on a queue
        // store, those the hand-over took out of line are back in it as
        // soon as they saw their place go.
        let all_listed = |status: &serde_json::Value| {
            let listed = status["candidates"].as_array()?;
            [("p1", 1), ("p2", 2), ("p3", 3)]
                .iter()
                .all(|(id, p)| listed.iter().any(|c| c["id"] == *id && c["priority"] == *p))
                .then_some(())
        };
        wait_for(
            passing,
            "status to list p1, p2 and p3 with their priorities",
            || all_listed(&sb.status()),
            || format!("{}\n{}", sb.status(), sb.report()),
        );

        // kill -9 of p3: p2, the higher of the rest, leads.
        sb.by_id("p3").signal(Signal::KILL);
        let second = leads(&sb, "p2", first.token, t.crash_failover() + passing);

        // p3 comes back: it leads again after the settle time.
        start(&mut sb, "p3-again", "p3", 3);
        let back = leads(
            &sb,
            "p3",
            second.token,
            t.crash_failover() + settle(&sb) + passing,
        );
        let stop = sb
            .stop_of("p2", second.token)
            .unwrap_or_else(|| panic!("p2's task did not stop\n{}", sb.report()));
        assert!(
            stop.mono_ns <= back.mono_ns,
            "p3's task started before p2's stopped\n{}",
            sb.report()
        );

        // An operator moves the lead to p1, once it stands again (on a
        // queue store the hand-over to p3 took it out of line, and it
        // queues afresh when it notices, at its next renewal at worst).
        wait_for(
            passing,
            "status to list p1",
            || all_listed(&sb.status()),
            || format!("{}\n{}", sb.status(), sb.report()),
        );
        let out = handover(
            &sb,
            "p1",
            &["--json"],
            t.crash_failover() + Duration::from_secs(35),
        );
        assert_eq!(
            out.code,
            Some(0),
            "handover failed: {}\n{}",
            out.stderr,
            sb.report()
        );
        let done: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
        assert_eq!(done["from"]["id"], "p3", "{done}");
        assert_eq!(done["to"]["id"], "p1", "{done}");
        assert_eq!(done["answered"], true, "{done}");
        let token = done["to"]["token"].as_u64().unwrap();
        let p1 = leads(&sb, "p1", back.token, passing);
        assert_eq!(p1.token, token);
        // No priority takes it back: several settle times later p1 leads.
        std::thread::sleep(settle(&sb) * 3 + t.renew_every * 2);
        let status = sb.status();
        assert_eq!(status["leader"]["id"], "p1", "{status}\n{}", sb.report());
        assert_eq!(status["leader"]["token"], token, "{status}");
        assert_eq!(
            sb.start_after(token),
            None,
            "a later term began\n{}",
            sb.report()
        );
    }

    fn handover_to_a_candidate_that_does_not_stand_is_exit_4_and_changes_nothing(mut sb: Sandbox) {
        let t = sb.timing();
        start(&mut sb, "a", "a", 1);
        let first = leads(&sb, "a", 0, t.crash_failover());
        let out = handover(&sb, "nobody", &[], Duration::from_secs(30));
        assert_eq!(out.code, Some(4), "{}", out.stderr);
        assert!(
            out.stderr.contains("'nobody' is not a candidate"),
            "{}",
            out.stderr
        );
        assert_eq!(sb.start_after(first.token), None, "{}", sb.report());
        assert_eq!(sb.status()["leader"]["id"], "a");
    }

    regent_testkit::for_every_engine!(
        Sandbox::with_engine,
        [
            three_priorities_a_crash_a_return_and_a_handover,
            handover_to_a_candidate_that_does_not_stand_is_exit_4_and_changes_nothing,
        ]
    );
}
