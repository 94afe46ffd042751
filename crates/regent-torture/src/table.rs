//! A campaign's table: per kind of fault, how many, how many hit a leader,
//! the gaps they caused; the writes; the violations, one line each.

use crate::campaign::secs_since;
use crate::checker::{Findings, Violation, WriteRun};
use crate::console::Console;

/// Prints the table of `f` (times relative to `origin`, CLOCK_MONOTONIC
/// ns); `splits` when a fault split a timing-only peer group.
pub(crate) fn print_table(
    console: &Console,
    f: &Findings,
    garbage: u64,
    origin: u64,
    splits: bool,
) {
    let ms = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{:.2}s", v / 1000.0));
    say!(console);
    say!(
        console,
        "{:<22} {:>6} {:>10} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "fault",
        "count",
        "hit leader",
        "new term",
        "survived",
        "median",
        "p90",
        "max"
    );
    for (kind, count) in &f.faults {
        let g = f.gaps.get(kind).cloned().unwrap_or_default();
        say!(
            console,
            "{:<22} {:>6} {:>10} {:>8} {:>8} {:>8} {:>8} {:>8}",
            kind,
            count,
            g.faults,
            g.new_terms,
            g.survived,
            ms(g.median_ms),
            ms(g.p90_ms),
            ms(g.max_ms)
        );
    }
    say!(
        console,
        "(gap: from the fault to the first accepted write of a newer term; survived: a later \
         fault found the same term leading)"
    );
    say!(
        console,
        "writes: {} accepted, {} refused ({} expected, from frozen trees{}); {} terms; {} garbage lines",
        f.accepted_writes,
        f.refused_writes,
        f.expected_refused_writes,
        if splits {
            " or either side of a timing-only group split"
        } else {
            ""
        },
        f.terms,
        garbage
    );
    if f.violations.is_empty() {
        say!(console, "violations: none");
        return;
    }
    say!(console, "violations: {}", f.violations.len());
    let t = |ns: u64| secs_since(ns, origin);
    for v in &f.violations {
        let line = match v {
            Violation::StaleWrite {
                writes:
                    WriteRun {
                        id,
                        token,
                        pid,
                        role,
                        count,
                        first_ns,
                        last_ns,
                    },
                newer_id,
                newer_token,
                ..
            } => format!(
                "stale-write: {id} token {token} pid {pid} ({role}) wrote {count}x from {:.2}s to \
                 {:.2}s after {newer_id} began token {newer_token}: an unfenced resource would have \
                 taken them",
                t(*first_ns),
                t(*last_ns)
            ),
            Violation::TokenRegression {
                earlier_id,
                earlier_token,
                earlier_ns,
                later_id,
                later_token,
                later_ns,
            } => format!(
                "token-regression: {later_id} began token {later_token} at {:.2}s, after \
                 {earlier_id} began token {earlier_token} at {:.2}s",
                t(*later_ns),
                t(*earlier_ns)
            ),
            Violation::SharedToken { token, ids } => {
                format!("shared-token: token {token} written by {}", ids.join(", "))
            }
            Violation::WriteAfterExit {
                writes:
                    WriteRun {
                        id,
                        token,
                        pid,
                        count,
                        first_ns,
                        ..
                    },
                ..
            } => format!(
                "write-after-exit: {id} token {token} pid {pid} wrote {count}x from {:.2}s, after \
                 every candidate had exited",
                t(*first_ns)
            ),
            Violation::Survivor { pid, id, token, .. } => format!(
                "survivor: writer pid {pid} ({} token {}) alive after every candidate exited; killed",
                id.as_deref().unwrap_or("?"),
                token.map_or("?".into(), |t| t.to_string())
            ),
        };
        say!(console, "  {line}");
    }
}
