//! How CMD runs, checked: what `regent run` and `regent peer` share.

use crate::cli::ChildArgs;
use crate::error::CliError;

/// The child flags' own rules (clap checks their syntax).
pub(crate) fn check(child: &ChildArgs) -> Result<(), CliError> {
    if child.health_timeout.is_some_and(|d| d.is_zero()) {
        return Err(CliError::usage(
            "--health-timeout must be greater than zero",
        ));
    }
    Ok(())
}
