//! Instants as RFC 3339 text, for log lines and a tool's text output.
//!
//! Leases, deadlines and challenge times are epoch milliseconds (UTC). A
//! person reads `2026-12-07T06:54:13.123Z` where `1796609653123` says
//! nothing; programs keep the milliseconds (events, JSON output), and a
//! log field or a line of text shows [`Rfc3339`].

use std::fmt;

/// Epoch milliseconds shown as an RFC 3339 UTC timestamp with millisecond
/// precision (`2026-12-07T06:54:13.123Z`); instants before 1970 show as
/// such (`1969-12-31T23:59:59.999Z`). Years outside 0..=9999, which no
/// lease reaches, show the milliseconds instead (`@-62167219200001ms`), so
/// formatting never fails nor panics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rfc3339(pub i64);

impl fmt::Display for Rfc3339 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0;
        let days = ms.div_euclid(86_400_000);
        let of_day = ms.rem_euclid(86_400_000);
        let (year, month, day) = civil_from_days(days);
        if !(0..=9999).contains(&year) {
            return write!(f, "@{ms}ms");
        }
        let (h, m, s, milli) = (
            of_day / 3_600_000,
            of_day / 60_000 % 60,
            of_day / 1_000 % 60,
            of_day % 1_000,
        );
        write!(
            f,
            "{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{milli:03}Z"
        )
    }
}

/// [`Rfc3339`] as a `String`.
pub fn rfc3339(epoch_ms: i64) -> String {
    Rfc3339(epoch_ms).to_string()
}

/// The proleptic Gregorian date of `days` since the Unix epoch (Howard
/// Hinnant's `civil_from_days`), exact for every `i64` input whose year
/// fits `i64`.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days.saturating_add(719_468);
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe.saturating_add(era.saturating_mul(400)) + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(rfc3339(1_700_000_000_000), "2023-11-14T22:13:20.000Z");
        assert_eq!(rfc3339(1_796_609_562_402), "2026-12-07T02:12:42.402Z");
        // A leap day and the end of a leap year.
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(rfc3339(1_735_689_599_999), "2024-12-31T23:59:59.999Z");
        assert_eq!(rfc3339(253_402_300_799_999), "9999-12-31T23:59:59.999Z");
    }

    #[test]
    fn out_of_range_years_show_the_milliseconds() {
        assert_eq!(rfc3339(253_402_300_800_000), "@253402300800000ms");
        assert_eq!(rfc3339(i64::MAX), format!("@{}ms", i64::MAX));
        assert_eq!(rfc3339(i64::MIN), format!("@{}ms", i64::MIN));
    }

    #[test]
    fn every_day_of_four_centuries_round_trips() {
        // Days since the epoch back from the date, the inverse of
        // civil_from_days (Hinnant's days_from_civil).
        fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
            let y = if m <= 2 { y - 1 } else { y };
            let era = y.div_euclid(400);
            let yoe = y.rem_euclid(400);
            let mp = i64::from((m + 9) % 12);
            let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
            let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
            era * 146_097 + doe - 719_468
        }
        let mut previous = civil_from_days(-146_097 - 1);
        for days in -146_097..146_097 {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
            assert!((y, m, d) > previous);
            previous = (y, m, d);
        }
    }
}
