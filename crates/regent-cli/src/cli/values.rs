//! Values as people type them: durations.

use std::time::Duration;

/// Parses durations as people write them: `500ms`, `10s`, `1.5s`, `2m`,
/// `1m30s`, `1h 30m`, `1 minute`: jiff's "friendly" format (hours at most;
/// a fraction only on the last unit). A unit is required; negative
/// durations are refused. The checks before jiff's only give the common
/// mistakes a message of their own.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let Some(split) = s.find(|c: char| !(c.is_ascii_digit() || c == '.')) else {
        return Err(format!(
            "'{s}' has no unit; write e.g. 500ms, 10s, 1m30s or 1h"
        ));
    };
    let num = &s[..split];
    if num.is_empty() {
        return Err(format!("'{s}' does not start with a number"));
    }
    if num.parse::<f64>().is_err() {
        return Err(format!("'{num}' in '{s}' is not a number"));
    }
    // jiff wants digits on both sides of a decimal point; `.5s` and `5.s`
    // were always taken here.
    let mut text = String::with_capacity(s.len() + 1);
    let mut chars = s.chars().peekable();
    let mut last = None;
    while let Some(c) = chars.next() {
        if c == '.' {
            if !last.is_some_and(|l: char| l.is_ascii_digit()) {
                text.push('0');
            }
            if !chars.peek().is_some_and(char::is_ascii_digit) {
                last = Some(c);
                continue;
            }
        }
        text.push(c);
        last = Some(c);
    }
    let parsed: jiff::SignedDuration = text.parse().map_err(|e| match unknown_unit(s) {
        Some(unit) => format!(
            "unknown unit '{unit}' in '{s}'; use ms, s, m or h (e.g. 250ms, 1.5s, 1m30s, 1h)"
        ),
        None => format!("'{s}' is not a duration ({e}); write e.g. 250ms, 1.5s, 1m30s or 1h"),
    })?;
    let d = Duration::try_from(parsed).map_err(|_| format!("'{s}' is negative"))?;
    if d > Duration::from_secs(1_000_000_000) {
        return Err(format!("'{s}' is too long"));
    }
    Ok(d)
}

/// The first word of `s` that is no unit of time jiff takes (days and
/// longer are not: their length varies).
fn unknown_unit(s: &str) -> Option<&str> {
    const UNITS: &[&str] = &[
        "ns",
        "nsec",
        "nsecs",
        "nanosecond",
        "nanoseconds",
        "us",
        "µs",
        "μs",
        "usec",
        "usecs",
        "microsecond",
        "microseconds",
        "ms",
        "msec",
        "msecs",
        "millisecond",
        "milliseconds",
        "s",
        "sec",
        "secs",
        "second",
        "seconds",
        "m",
        "min",
        "mins",
        "minute",
        "minutes",
        "h",
        "hr",
        "hrs",
        "hour",
        "hours",
    ];
    s.split(|c: char| !c.is_alphabetic())
        .find(|w| !w.is_empty() && !UNITS.contains(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        assert!(parse_duration("10").unwrap_err().contains("no unit"));
        assert!(parse_duration("10y").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("s").unwrap_err().contains("number"));
        assert!(
            parse_duration("1.2.3s")
                .unwrap_err()
                .contains("not a number")
        );
        assert!(parse_duration("-1s").is_err());
    }

    /// Regression: `--ttl 1m30s` was refused ("unknown unit 'm30s'").
    #[test]
    fn durations_as_people_write_them() {
        let ms = Duration::from_millis;
        for (text, want) in [
            ("1m30s", ms(90_000)),
            ("1m 30s", ms(90_000)),
            ("1.5s", ms(1500)),
            ("250ms", ms(250)),
            ("1h30m", ms(5_400_000)),
            ("2 minutes", ms(120_000)),
            (" 10s ", ms(10_000)),
            (".5s", ms(500)),
            ("5.s", ms(5000)),
        ] {
            assert_eq!(parse_duration(text), Ok(want), "{text}");
        }
        for bad in ["1m30", "10 parsecs", "1s2", "9999999999h"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert!(
            parse_duration("10 parsecs")
                .unwrap_err()
                .starts_with("unknown unit 'parsecs'")
        );
        assert!(
            parse_duration("1m30")
                .unwrap_err()
                .starts_with("'1m30' is not a duration")
        );
    }
}
