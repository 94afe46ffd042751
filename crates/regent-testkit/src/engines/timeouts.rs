//! The bounds on starting and stopping every engine:
//! [`START_TIMEOUT`] and [`STOP_TIMEOUT`].

use std::time::Duration;

/// How long starting (or restarting) an engine waits for it to be healthy.
pub const START_TIMEOUT: Duration = Duration::from_secs(15);

/// How long stopping an engine waits after SIGTERM (SIGINT for Consul)
/// before it sends SIGKILL.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(5);
