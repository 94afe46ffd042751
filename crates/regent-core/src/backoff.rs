//! Exponential backoff with jitter, for retrying transient store errors.

use std::time::Duration;

/// Delays that double from `initial` up to `max`, each drawn uniformly from
/// the upper half of the current step ("equal jitter"), so that many
/// candidates failing together do not retry together.
#[derive(Clone, Debug)]
pub(crate) struct Backoff {
    initial: Duration,
    max: Duration,
    step: Duration,
}

impl Backoff {
    pub(crate) fn new(initial: Duration, max: Duration) -> Self {
        let initial = initial.min(max);
        Self {
            initial,
            max,
            step: initial,
        }
    }

    /// The next delay.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let d = self.step;
        self.step = (self.step * 2).min(self.max);
        jitter(d)
    }

    /// Back to the first step, after a success.
    pub(crate) fn reset(&mut self) {
        self.step = self.initial;
    }
}

/// A duration drawn uniformly from `[d/2, d]`.
pub(crate) fn jitter(d: Duration) -> Duration {
    d.mul_f64(0.5 + fastrand::f64() * 0.5)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_to_the_cap_with_jitter() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        let steps: Vec<Duration> = (0..6).map(|_| b.next_delay()).collect();
        for (i, want) in [100u64, 200, 400, 800, 1000, 1000].iter().enumerate() {
            let want = Duration::from_millis(*want);
            assert!(
                steps[i] <= want && steps[i] >= want / 2,
                "{i}: {:?}",
                steps[i]
            );
        }
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(100));
    }
}
