//! `--http`: the endpoint of `regent run`, `regent peer` and `regent
//! dashboard`.

use clap::Args;

/// Where to serve metrics, health, the leader and the live page.
#[derive(Debug, Clone, Args)]
pub(crate) struct HttpArgs {
    /// Serve on HOST:PORT (default: the variable REGENT_HTTP; off without
    /// either): GET /metrics (Prometheus), /healthz, /livez and /readyz
    /// (200, or 503 with the reason), /leader (as `status --json`) and /
    /// (a live page of every term). Read-only, no secrets; keep it on
    /// loopback or behind your proxy. A port in use is exit 2.
    #[arg(long, value_name = "HOST:PORT", help_heading = "Observability")]
    pub(crate) http: Option<String>,
}
