//! Each command's flags, environment and store options resolved once into
//! one checked value, before any connection: the first step of the one
//! pass from flags to a running term (flags → settings → store → election
//! → supervisor; `docs/architecture.md` §4).

mod child;
mod http;
#[cfg(feature = "peer")]
mod peer;
mod run;
mod show;

pub(crate) use http::endpoint;
#[cfg(feature = "peer")]
pub(crate) use peer::{Member, PeerConfig};
pub(crate) use run::RunConfig;
pub(crate) use show::{ShowConfig, Source};
