//! Order statistics of a series' hand-over times (and of signed
//! differences between two sides' times).

use std::time::Duration;

/// p50, p99 and max of some samples, by the nearest-rank method: the
/// p-th percentile is the smallest sample that at least p % of the
/// samples do not exceed (so with 50 samples p99 is the maximum).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Summary {
    pub(crate) n: usize,
    pub(crate) min: Duration,
    pub(crate) p50: Duration,
    pub(crate) p99: Duration,
    pub(crate) max: Duration,
}

impl Summary {
    /// `None` without samples.
    pub(crate) fn of(samples: &[Duration]) -> Option<Self> {
        let mut sorted = samples.to_vec();
        sorted.sort_unstable();
        Some(Self {
            n: sorted.len(),
            min: *sorted.first()?,
            p50: percentile(&sorted, 50),
            p99: percentile(&sorted, 99),
            max: *sorted.last()?,
        })
    }
}

/// The nearest-rank `p`-th percentile of non-empty, sorted samples.
pub(crate) fn percentile<T: Copy>(sorted: &[T], p: usize) -> T {
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted[rank.min(sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: &[u64]) -> Vec<Duration> {
        v.iter().map(|&m| Duration::from_millis(m)).collect()
    }

    #[test]
    fn nearest_rank() {
        assert_eq!(Summary::of(&[]), None);
        let one = Summary::of(&ms(&[7])).unwrap();
        assert_eq!(
            (one.p50, one.p99, one.max),
            (ms(&[7])[0], ms(&[7])[0], ms(&[7])[0])
        );

        // 1..=100 ms: p50 is the 50th, p99 the 99th.
        let hundred: Vec<u64> = (1..=100).rev().collect();
        let s = Summary::of(&ms(&hundred)).unwrap();
        assert_eq!(s.p50, Duration::from_millis(50));
        assert_eq!(s.p99, Duration::from_millis(99));
        assert_eq!(s.max, Duration::from_millis(100));
        assert_eq!(s.min, Duration::from_millis(1));
        assert_eq!(s.n, 100);

        // 50 samples: p99 is the maximum, p50 the 25th.
        let fifty: Vec<u64> = (1..=50).collect();
        let s = Summary::of(&ms(&fifty)).unwrap();
        assert_eq!(s.p50, Duration::from_millis(25));
        assert_eq!(s.p99, Duration::from_millis(50));

        // 5 samples: p50 is the 3rd.
        let s = Summary::of(&ms(&[40, 10, 30, 20, 50])).unwrap();
        assert_eq!(s.p50, Duration::from_millis(30));
        assert_eq!(s.p99, Duration::from_millis(50));
    }
}
