//! The library's face: a configuration it refuses is a typed usage error
//! before anything starts (no store is resolved, no process started); the
//! campaign's future and its public values can cross threads.

use std::ffi::OsString;
use std::sync::atomic::{AtomicUsize, Ordering};

use regent_core::{BoxError, BoxStore, ElectionName};
use regent_torture::{
    Config, ConfigError, Error, FaultKind, FaultRefusal, Outcome, PeerAlgorithm, Peers, StoreAccess,
};

/// A front end that counts what the campaign asks of it and refuses all.
#[derive(Default)]
struct Counting {
    resolved: AtomicUsize,
}

impl StoreAccess for Counting {
    type Endpoint = String;

    fn resolve(&self, url: &str) -> Result<String, BoxError> {
        self.resolved.fetch_add(1, Ordering::SeqCst);
        Err(format!("no store at {url}").into())
    }

    async fn open(&self, _: &String, _: &ElectionName) -> Result<BoxStore, BoxError> {
        Err("unreachable".into())
    }

    fn child_args(&self) -> Vec<OsString> {
        Vec::new()
    }
}

async fn refused(config: Config) -> ConfigError {
    let front_end = Counting::default();
    let config = config.console(regent_torture::Console::silent());
    match regent_torture::run(config, &front_end, std::future::pending()).await {
        Err(Error::Config(e)) => {
            assert_eq!(
                front_end.resolved.load(Ordering::SeqCst),
                0,
                "a store was resolved before the configuration was checked"
            );
            e
        }
        other => panic!("not a configuration error: {other:?}"),
    }
}

#[tokio::test]
async fn refused_configurations_are_usage_errors_naming_the_rule() {
    let base = || Config::new("/nonexistent/regent");
    let e = refused(base().faults([FaultKind::StoreStop])).await;
    assert!(
        matches!(
            e,
            ConfigError::FaultRefused {
                fault: FaultKind::StoreStop,
                why: FaultRefusal::NeedsStoreProcess
            }
        ),
        "{e:?}"
    );
    assert!(Error::from(e).is_usage());
    let e = refused(base().faults([FaultKind::Partition])).await;
    assert!(
        matches!(
            e,
            ConfigError::FaultRefused {
                why: FaultRefusal::NeedsPeerGroup,
                ..
            }
        ),
        "{e:?}"
    );
    let peers = Peers {
        algorithm: PeerAlgorithm::Bully,
        quorum: false,
    };
    let e = refused(base().peers(peers).faults([FaultKind::StoreKill])).await;
    assert!(
        matches!(
            e,
            ConfigError::FaultRefused {
                why: FaultRefusal::PeerGroupHasNoStore,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(matches!(
        refused(base().peers(peers).store("sqlite:x.db")).await,
        ConfigError::PeersWithStore
    ));
    assert!(matches!(
        refused(base().store_command("true")).await,
        ConfigError::StoreCommandsWithoutStores
    ));
    assert!(matches!(
        refused(base().candidates(1)).await,
        ConfigError::Candidates { n: 1 }
    ));
    assert!(matches!(
        refused(base().ttl(std::time::Duration::ZERO)).await,
        ConfigError::ZeroTtl
    ));
    assert!(matches!(
        refused(base().sweep(0)).await,
        ConfigError::SweepRuns { runs: 0 }
    ));
}

/// The front end's refusal of a URL comes back whole, its error the
/// source, before any process starts.
#[tokio::test]
async fn a_url_the_front_end_refuses_is_its_error() {
    let front_end = Counting::default();
    let config = Config::new("/nonexistent/regent")
        .store("nowhere://x")
        .console(regent_torture::Console::silent());
    match regent_torture::run(config, &front_end, std::future::pending()).await {
        Err(Error::StoreUrl { url, source }) => {
            assert_eq!(url, "nowhere://x");
            assert_eq!(source.to_string(), "no store at nowhere://x");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_campaign_and_its_values_cross_threads() {
    fn send<T: Send>(_: &T) {}
    fn send_sync<T: Send + Sync>() {}
    let front_end = Counting::default();
    send(&regent_torture::run(
        Config::new("regent"),
        &front_end,
        std::future::pending(),
    ));
    send_sync::<Config>();
    send_sync::<Outcome>();
    send_sync::<Error>();
}
