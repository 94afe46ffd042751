//! What a store remembers of the roster entries it enrolled (`roster.rs`),
//! apart so that the store's state (`client.rs`) can hold it without
//! depending on the roster's code.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// What a store knows of an entry it enrolled: the session that locks it,
/// the ttl it was made for, and the value last written with when.
#[derive(Debug)]
pub(crate) struct Enrolled {
    pub(crate) session: String,
    pub(crate) ttl: Duration,
    pub(crate) value: Vec<u8>,
    pub(crate) written: Option<Instant>,
}

/// The entries a store enrolled, by key.
pub(crate) type Enrollments = Mutex<HashMap<String, Enrolled>>;
