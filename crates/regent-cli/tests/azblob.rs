//! `regent` on Azure Blob leases beyond the end-to-end tests every store
//! runs (`for_every_engine!`): `run` without `--ttl` takes the store's
//! 15 s minimum, `demo` refuses a shorter ttl by name, `--help` has the
//! store's section, and an Azurite that does not answer is exit 3 with the
//! store's hint.
//!
//! The tests share the test process's one Azurite, each in a container of
//! its own (`SharedAzurite`); regent finds Azurite through
//! `AZURE_STORAGE_CONNECTION_STRING`, which the sandbox passes on.

mod common;

use std::time::Duration;

use common::*;
use regent_testkit::engines::SharedAzurite;
use rustix::process::Signal;

fn sandbox() -> Sandbox {
    let azurite =
        SharedAzurite::get().unwrap_or_else(|e| panic!("cannot start Azurite for this test: {e}"));
    Sandbox::with_engine(Box::new(azurite))
}

/// Regression: `regent run` defaulted to `--ttl 10s` whatever the store,
/// and Azure Blob grants leases of 15 s at least, so `regent run --store
/// azblob://…` without `--ttl` was a usage error. Without the flag the ttl
/// is now 10 s, or the store's minimum if longer.
#[test]
fn run_without_ttl_takes_the_stores_minimum_ttl() {
    let mut sb = sandbox();
    let task = sb.task_cmd();
    let task: Vec<&str> = task.iter().map(String::as_str).collect();
    let args = run_args_on(&sb.store(), &["--id", "c1"], &task);
    let c1 = sb.spawn("c1", &args);
    let first = sb.first_start(Duration::from_secs(15));
    let stderr = sb.regent(c1).stderr();
    assert!(
        stderr.contains("(ttl 15s + "),
        "regent did not take the store's 15 s:\n{stderr}"
    );
    assert_eq!(sb.status()["leader"]["id"], "c1");
    sb.regent(c1).signal(Signal::TERM);
    let status = sb.regent(c1).wait_exit(Duration::from_secs(10));
    assert_eq!(status.code(), Some(0), "{}", sb.report());
    sb.wait_term_gone(&first, Duration::from_secs(2));
    assert!(sb.status()["leader"].is_null(), "{}", sb.status());
}

/// A ttl given below the store's minimum is still refused by name, and a
/// renew deadline that fits only the store's ttl (not 10 s) is taken.
#[test]
fn run_refuses_a_ttl_below_the_minimum_and_fits_flags_to_the_default() {
    let sb = sandbox();
    let args = run_args_on(&sb.store(), &["--ttl", "10s"], &["true"]);
    let out = sb.run_owned(&args, &[], Duration::from_secs(15));
    no_panic(&out);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("--ttl 10s") && out.stderr.contains("15s"),
        "{}",
        out.stderr
    );
    // 12 s is past 10 s but below the default ttl on this store, 15 s.
    let args = run_args_on(
        &sb.store(),
        &["--renew-deadline", "12s", "--restart", "never"],
        &["true"],
    );
    let out = sb.run_owned(&args, &[], Duration::from_secs(15));
    no_panic(&out);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    // Still a usage error before any store where no ttl can mend it.
    let args = run_args_on(&sb.store(), &["--renew-every", "0s"], &["true"]);
    let out = sb.run_owned(&args, &[], Duration::from_secs(15));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("--renew-every 0s"), "{}", out.stderr);
    assert!(out.took < Duration::from_secs(1), "{:?}", out.took);
}

/// The demo takes the store's minimum ttl by default and refuses a shorter
/// one by name.
#[test]
fn the_demo_refuses_a_ttl_below_the_stores_minimum() {
    let sb = sandbox();
    let out = sb.run_bounded(
        &[
            "demo",
            "--store",
            &sb.store(),
            "--election",
            "d",
            "--ttl",
            "10s",
        ],
        Duration::from_secs(20),
    );
    no_panic(&out);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("--ttl 10s is below the azblob store's minimum ttl, 15s"),
        "{}",
        out.stderr
    );
}

/// `regent run --help` has an "azblob store" section generated from the
/// store's options: flags for what is no secret, none for keys and tokens.
#[test]
fn run_help_has_the_azblob_store_section() {
    let out = run_bounded(&["run", "--help"], Duration::from_secs(10));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let help = out.stdout;
    for needle in [
        "azblob store:",
        "--azblob-account <NAME>",
        "--azblob-endpoint <URL>",
        "REGENT_AZBLOB_ACCOUNT",
        "azblob://CONTAINER",
        "Azure Blob's 15s",
    ] {
        assert!(help.contains(needle), "no {needle:?} in\n{help}");
    }
    for secret in ["--azblob-key", "--azblob-sas-token", "--azblob-connection"] {
        assert!(!help.contains(secret), "{secret} is a flag:\n{help}");
    }
}

/// Azurite not running where the connection string points: `status` and
/// `run` retry, then exit 3 with the store's hint.
#[test]
fn azurite_not_answering_at_start_is_exit_3_with_the_hint() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let connection = format!(
        "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;\
         AccountKey={};BlobEndpoint=http://127.0.0.1:{port}/devstoreaccount1;",
        regent_testkit::engines::azurite::ACCOUNT_KEY
    );
    assert_unavailable_at_start_env(
        "azblob://leases",
        &[("AZURE_STORAGE_CONNECTION_STRING", &connection)],
        &["is Azurite running there", &format!("--blobPort {port}")],
    );
}
