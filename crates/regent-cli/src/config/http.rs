//! `--http` resolved: the address from the flag or `REGENT_HTTP`, bound
//! before the first campaign.

use std::net::ToSocketAddrs as _;

use crate::cli::HttpArgs;
use crate::error::CliError;
use crate::http::Endpoint;

/// The variable `--http` falls back to.
pub(crate) const HTTP_VAR: &str = "REGENT_HTTP";

/// The endpoint `--http` (or `REGENT_HTTP`) names, bound; `None` when
/// neither is set. A bad address, or one in use, is a usage error naming
/// where it came from.
pub(crate) fn endpoint(args: &HttpArgs) -> Result<Option<Endpoint>, CliError> {
    let (what, addr) = match &args.http {
        Some(a) => ("--http ".to_owned(), a.clone()),
        None => match std::env::var(HTTP_VAR) {
            Ok(a) if !a.is_empty() => (format!("{HTTP_VAR}="), a),
            Ok(_) | Err(std::env::VarError::NotPresent) => return Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => {
                return Err(CliError::usage(format!("{HTTP_VAR}: not HOST:PORT")));
            }
        },
    };
    let resolved = addr
        .to_socket_addrs()
        .map_err(|e| CliError::usage(format!("{what}{addr}: not HOST:PORT ({e})")))?
        .next()
        .ok_or_else(|| CliError::usage(format!("{what}{addr}: resolves to no address")))?;
    let flag = what.trim_end_matches(['=', ' ']);
    Endpoint::bind(flag, resolved).map(Some)
}
