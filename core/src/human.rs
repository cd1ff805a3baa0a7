//! Durations as people read them in messages: `500 ms`, `1 s`, `1.5 s`,
//! `2.5 min`, `24.8 days`, never Rust's `Debug` form (`500ms`, `1.5s`).
//!
//! Every message of the core, of the Kafka client (kafka/, which keeps a copy
//! of the same rules, checked against this one in a test) and of the
//! bindings writes a duration through [`duration`].

use std::fmt;
use std::time::Duration;

/// A duration written for people; see [`duration`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HumanDuration(pub Duration);

/// `d` as people read it: under a second in milliseconds (`500 ms`,
/// `0.25 ms`), under two minutes in seconds to the millisecond (`1 s`,
/// `1.5 s`, `90 s`), then in minutes, hours or days to one decimal, cut
/// rather than rounded so that a limit is never overstated (`2.5 min`,
/// `36 h`, `24.8 days`). Trailing zeros are dropped.
pub fn duration(d: Duration) -> HumanDuration {
    HumanDuration(d)
}

impl fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nanos = self.0.as_nanos();
        const MS: u128 = 1_000_000;
        const S: u128 = 1_000 * MS;
        const MIN: u128 = 60 * S;
        const H: u128 = 60 * MIN;
        const DAY: u128 = 24 * H;
        if nanos < S {
            // Milliseconds to the microsecond.
            write_scaled(f, nanos / 1_000, 1_000, 3, "ms")
        } else if nanos < 2 * MIN {
            write_scaled(f, nanos / MS, 1_000, 3, "s")
        } else if nanos < 2 * H {
            write_scaled(f, nanos / (MIN / 10), 10, 1, "min")
        } else if nanos < 2 * DAY {
            write_scaled(f, nanos / (H / 10), 10, 1, "h")
        } else {
            write_scaled(f, nanos / (DAY / 10), 10, 1, "days")
        }
    }
}

/// Writes `units / per` with `digits` decimals at most, trailing zeros
/// dropped, then the unit.
fn write_scaled(
    f: &mut fmt::Formatter<'_>,
    units: u128,
    per: u128,
    digits: usize,
    unit: &str,
) -> fmt::Result {
    let whole = units / per;
    let frac = units % per;
    if frac == 0 {
        return write!(f, "{whole} {unit}");
    }
    let text = format!("{frac:0digits$}");
    write!(f, "{whole}.{} {unit}", text.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(d: Duration) -> String {
        duration(d).to_string()
    }

    #[test]
    fn durations_read_as_people_write_them() {
        let ms = Duration::from_millis;
        assert_eq!(text(Duration::ZERO), "0 ms");
        assert_eq!(text(Duration::from_micros(250)), "0.25 ms");
        assert_eq!(text(ms(500)), "500 ms");
        assert_eq!(text(ms(1_000)), "1 s");
        assert_eq!(text(ms(1_500)), "1.5 s");
        assert_eq!(text(ms(10_001)), "10.001 s");
        assert_eq!(text(ms(90_000)), "90 s");
        assert_eq!(text(ms(150_000)), "2.5 min");
        assert_eq!(text(ms(36 * 3_600_000)), "36 h");
        assert_eq!(text(ms(i32::MAX as u64)), "24.8 days");
    }

    #[cfg(feature = "kafka-client")]
    #[test]
    fn the_kafka_client_writes_durations_alike() {
        for ms in [
            0,
            1,
            250,
            999,
            1_000,
            1_500,
            119_999,
            150_000,
            7_200_000,
            u64::from(u32::MAX),
        ] {
            let d = Duration::from_millis(ms);
            assert_eq!(text(d), krabka_kafka::human::duration(d).to_string());
        }
        let d = Duration::from_micros(1_250);
        assert_eq!(text(d), krabka_kafka::human::duration(d).to_string());
    }
}
