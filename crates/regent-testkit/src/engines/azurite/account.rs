//! Azurite's development storage account and its well-known key: the
//! account every request to Azurite signs with.

/// Azurite's development storage account.
pub const ACCOUNT: &str = "devstoreaccount1";

/// The well-known key of [`ACCOUNT`], base64, as Azurite's documentation
/// publishes it: it protects nothing.
pub const ACCOUNT_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
