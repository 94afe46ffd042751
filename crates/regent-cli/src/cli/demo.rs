//! `regent demo`'s flags, and its hidden leader task's (`__demo-task`).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::store::StoreFlags;
use super::values::parse_duration;

#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    /// How many candidate processes to start (2-20).
    #[arg(long, default_value_t = 5)]
    pub(crate) candidates: usize,
    /// Store URL (default: a fresh SQLite file in a temporary directory).
    #[arg(long, value_name = "URL")]
    pub(crate) store: Option<String>,
    /// Election name, for a demo on a shared store.
    #[arg(long, value_name = "NAME", default_value = "demo")]
    pub(crate) election: String,
    #[command(flatten)]
    pub(crate) options: StoreFlags,
    /// Upper bound on the whole demo (default: 60s, or what the store's
    /// ttl takes if longer: two crash failovers, three ttls and 15s).
    #[arg(long, value_parser = parse_duration)]
    pub(crate) duration: Option<Duration>,
    /// Lease ttl of the candidates (default: 2s, or the store's minimum if
    /// it is longer: Consul's 10s, Azure Blob's 15s).
    #[arg(long, value_parser = parse_duration)]
    pub(crate) ttl: Option<Duration>,
}

#[derive(Debug, Args)]
pub(crate) struct TaskArgs {
    /// Where to append "start ID TOKEN MONO_NS PID" when the task starts.
    #[arg(long)]
    pub(crate) log: PathBuf,
    /// Also append "stop ID TOKEN MONO_NS PID" when SIGTERM arrives, then
    /// die by it. The end-to-end tests use it to time the stop of a term.
    #[arg(long)]
    pub(crate) log_stop: bool,
}
