//! The bound on the kit's requests to a Consul agent's HTTP API,
//! [`API_TIMEOUT`]: its own helpers' and those setting up a secured
//! agent's ACLs.

use std::time::Duration;

/// Bound on each step of [`Consul::http_get`] and [`Consul::http_put`].
///
/// [`Consul::http_get`]: super::Consul::http_get
/// [`Consul::http_put`]: super::Consul::http_put
pub const API_TIMEOUT: Duration = Duration::from_secs(5);
