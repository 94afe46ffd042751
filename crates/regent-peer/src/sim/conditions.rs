//! What a simulation runs under: how the simulated network treats each
//! message ([`Network`]), and the faults beyond the default ones that
//! chaos draws ([`ExtraFaults`]).

use std::time::Duration;

/// How the simulated network treats each message.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Network {
    /// The probability that a message is lost.
    pub loss: f64,
    /// The probability that a message is delivered twice (each copy with its
    /// own delay).
    pub duplicate: f64,
    /// The shortest delay.
    pub min_delay: Duration,
    /// The longest delay; delays are uniform between the two, so messages
    /// overtake each other.
    pub max_delay: Duration,
}

impl Network {
    /// No loss, no duplication, delays uniform in `min_delay..=max_delay`.
    pub const fn reliable(min_delay: Duration, max_delay: Duration) -> Self {
        Self {
            loss: 0.0,
            duplicate: 0.0,
            min_delay,
            max_delay,
        }
    }
}

/// Faults [`Sim::chaos`](crate::sim::Sim::chaos) draws beyond its default
/// ones: see [`Sim::set_extra_faults`](crate::sim::Sim::set_extra_faults).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExtraFaults {
    /// Pause a random live node, or one that leads, for up to this long
    /// (uniform from zero); `None`: no pauses.
    pub max_pause: Option<Duration>,
    /// Cut off a node that leads, alone or with as many others as still
    /// leaves the rest a majority.
    pub isolate_leaders: bool,
}
