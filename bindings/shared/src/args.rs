//! Argument checks with one wording for every language.
//!
//! Each binding extracts a host value (a Python `float`, a JavaScript
//! `number`, a C `double`) and hands it here; the check and the message are
//! the same everywhere, so documentation, tests and support answers can quote
//! one sentence:
//!
//! ```text
//! lease_duration must be a positive number of seconds, got -1
//! partitions must be an integer from 1 to 2147483647, got 0
//! lease_duration must be a number of seconds, got str
//! producer_epoch does not fit the layout's i16 (from -32768 to 32767): got 40000
//! ```
//!
//! Field names are snake_case, the same in every binding ([`Field`]); a
//! binding whose language spells arguments otherwise still reports these
//! names, so an error reads the same in every port. The [`ArgErrorKind`] says which
//! host exception fits (`TypeError`, `ValueError`, `OverflowError` in
//! Python).

use std::fmt;
use std::time::Duration;

/// The longest duration an option or a timeout may have: one year. Longer
/// values are almost surely a unit mistake, and bounding them keeps every
/// deadline computation far from overflow.
pub const MAX_SECONDS: f64 = 365.0 * 24.0 * 3600.0;

/// The named arguments of the binding surface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Field {
    /// The role name.
    Role,
    /// The member id.
    Member,
    /// The partition count of the state topic.
    Partitions,
    /// How long a lease lasts.
    LeaseDuration,
    /// How often the holder renews.
    RenewInterval,
    /// The delay between ranks of challengers.
    ChallengeStagger,
    /// How long a wait may last.
    Timeout,
    /// The replication factor of the state topic.
    ReplicationFactor,
    /// `min.insync.replicas` of the state topic.
    MinInsyncReplicas,
    /// The topic of a guarded record.
    Topic,
    /// The partition of a guarded record.
    Partition,
    /// The key of a guarded record.
    Key,
    /// The value of a guarded record.
    Value,
    /// The headers of a guarded record.
    Headers,
    /// The Kafka client settings.
    Kafka,
    /// How long the first contact with the cluster may take.
    ConnectTimeout,
    /// The budget of one blocking client operation.
    OperationTimeout,
    /// The OAUTHBEARER token provider (a host callable).
    OAuthToken,
}

impl Field {
    /// Every field, in declaration order.
    pub const ALL: [Field; 18] = [
        Field::Role,
        Field::Member,
        Field::Partitions,
        Field::LeaseDuration,
        Field::RenewInterval,
        Field::ChallengeStagger,
        Field::Timeout,
        Field::ReplicationFactor,
        Field::MinInsyncReplicas,
        Field::Topic,
        Field::Partition,
        Field::Key,
        Field::Value,
        Field::Headers,
        Field::Kafka,
        Field::ConnectTimeout,
        Field::OperationTimeout,
        Field::OAuthToken,
    ];

    /// The field's name in messages: its snake_case spelling.
    pub fn name(self) -> &'static str {
        match self {
            Field::Role => "role",
            Field::Member => "member",
            Field::Partitions => "partitions",
            Field::LeaseDuration => "lease_duration",
            Field::RenewInterval => "renew_interval",
            Field::ChallengeStagger => "challenge_stagger",
            Field::Timeout => "timeout",
            Field::ReplicationFactor => "replication_factor",
            Field::MinInsyncReplicas => "min_insync_replicas",
            Field::Topic => "topic",
            Field::Partition => "partition",
            Field::Key => "key",
            Field::Value => "value",
            Field::Headers => "headers",
            Field::Kafka => "kafka",
            Field::ConnectTimeout => "connect_timeout",
            Field::OperationTimeout => "operation_timeout",
            Field::OAuthToken => "oauth_token",
        }
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which kind of host error an [`ArgError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgErrorKind {
    /// A value of the wrong type (Python `TypeError`).
    Type,
    /// A value of the right type outside what the argument allows (the
    /// core's `INVALID_ARGUMENT`; Python `InvalidArgumentError`, a
    /// `ValueError`).
    Value,
    /// An integer that does not fit a record layout's field (Python
    /// `OverflowError`, as for any fixed-width integer).
    Overflow,
}

/// A refused argument: the field, the kind, and the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgError {
    /// What kind of error it is.
    pub kind: ArgErrorKind,
    /// The argument's name.
    pub field: String,
    /// The whole message (it starts with the field's name).
    pub message: String,
}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ArgError {}

impl From<ArgError> for krabka_coordination::Error {
    fn from(e: ArgError) -> Self {
        krabka_coordination::Error::InvalidArgument(e.message)
    }
}

impl ArgError {
    fn new(kind: ArgErrorKind, field: &str, message: String) -> Self {
        ArgError {
            kind,
            field: field.to_owned(),
            message,
        }
    }

    /// `{field} must be {expected}, got {got}`: a value of the wrong type;
    /// `got` is the host's name of the type it got.
    pub fn wrong_type(field: &str, expected: &str, got: &str) -> Self {
        Self::new(
            ArgErrorKind::Type,
            field,
            format!("{field} must be {expected}, got {got}"),
        )
    }

    /// `{field} must be {requirement}, got {got}`: a value the argument does
    /// not allow.
    pub fn invalid(field: &str, requirement: &str, got: impl fmt::Display) -> Self {
        Self::new(
            ArgErrorKind::Value,
            field,
            format!("{field} must be {requirement}, got {got}"),
        )
    }

    /// `{field} does not fit the layout's {width} (from {min} to {max}): got {got}`:
    /// an integer too wide for a record field.
    pub fn does_not_fit(
        field: &str,
        width: &str,
        min: i64,
        max: i64,
        got: impl fmt::Display,
    ) -> Self {
        Self::new(
            ArgErrorKind::Overflow,
            field,
            format!("{field} does not fit the layout's {width} (from {min} to {max}): got {got}"),
        )
    }
}

/// What a duration may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecondsBound {
    /// Above zero (a lease, a renew interval).
    Positive,
    /// Zero or above (a stagger, a timeout).
    NonNegative,
}

/// The type a duration must have, as messages say it.
pub const SECONDS_TYPE: &str = "a number of seconds";

/// `secs` seconds as a `Duration`: refused when NaN, infinite, negative
/// (zero too for [`SecondsBound::Positive`]) or above [`MAX_SECONDS`].
pub fn seconds(field: &str, secs: f64, bound: SecondsBound) -> Result<Duration, ArgError> {
    let requirement = match bound {
        SecondsBound::Positive => "a positive number of seconds",
        SecondsBound::NonNegative => "a non-negative number of seconds",
    };
    let below = match bound {
        SecondsBound::Positive => secs <= 0.0,
        SecondsBound::NonNegative => secs < 0.0,
    };
    if secs.is_nan() || below {
        return Err(ArgError::invalid(field, requirement, number(secs)));
    }
    if secs > MAX_SECONDS {
        return Err(ArgError::invalid(
            field,
            &format!("at most {MAX_SECONDS} seconds (a year)"),
            number(secs),
        ));
    }
    // In range: the conversion cannot fail.
    Duration::try_from_secs_f64(secs)
        .map_err(|_| ArgError::invalid(field, requirement, number(secs)))
}

/// A point in time given as `secs` seconds since the Unix epoch (a token's
/// expiry, as `time.time() + 3600` or `Date.now() / 1000 + 3600` write
/// it): refused when NaN, infinite, or not after the epoch.
pub fn epoch_seconds(field: &str, secs: f64) -> Result<std::time::SystemTime, ArgError> {
    let requirement = "a time in seconds since the Unix epoch";
    if !secs.is_finite() || secs <= 0.0 {
        return Err(ArgError::invalid(field, requirement, number(secs)));
    }
    Duration::try_from_secs_f64(secs)
        .ok()
        .and_then(|d| std::time::UNIX_EPOCH.checked_add(d))
        .ok_or_else(|| ArgError::invalid(field, requirement, number(secs)))
}

/// A number as messages write it: integers without a fraction (`-1`, not
/// `-1.0`), others in their shortest exact form, `NaN`, `inf`.
pub fn number(x: f64) -> String {
    if x.is_finite() && x.fract() == 0.0 && x.abs() < 1e16 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

/// `value` if it is in `min..=max`, else `{field} must be an integer from
/// {min} to {max}, got {value}`.
pub fn int_in_range(field: &str, value: i64, min: i64, max: i64) -> Result<i64, ArgError> {
    if (min..=max).contains(&value) {
        Ok(value)
    } else {
        Err(out_of_range(field, min, max, value))
    }
}

/// [`int_in_range`] for an `i32` argument.
pub fn i32_in_range(field: &str, value: i64, min: i32, max: i32) -> Result<i32, ArgError> {
    int_in_range(field, value, min.into(), max.into()).map(|v| v as i32)
}

/// The error of [`int_in_range`] for a host integer too large to pass as an
/// `i64`; `got` is the host's spelling of it.
pub fn out_of_range(field: &str, min: i64, max: i64, got: impl fmt::Display) -> ArgError {
    ArgError::invalid(field, &format!("an integer from {min} to {max}"), got)
}

/// `text` read as a fencing token's wire form, `PRODUCER_ID/EPOCH` or
/// `NoEpoch` (the core's `FromStr` of [`FencingToken`](krabka_coordination::FencingToken),
/// the text every binding's token prints). Malformed text is a
/// [`ArgErrorKind::Value`] error of the field `token` whose message is the
/// core's: it quotes the text and names the expected form.
pub fn token(text: &str) -> Result<krabka_coordination::FencingToken, ArgError> {
    text.parse()
        .map_err(|e: krabka_coordination::TokenParseError| {
            ArgError::new(ArgErrorKind::Value, "token", e.to_string())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_parse_with_the_cores_wording() {
        let t = token("4001/7").unwrap();
        assert_eq!((t.producer_id, t.producer_epoch), (4001, 7));
        assert!(token("NoEpoch").unwrap().is_no_epoch());
        for bad in ["", "4001", "4001/7 ", "4001/40000", "noepoch"] {
            let e = token(bad).unwrap_err();
            assert_eq!((e.kind, e.field.as_str()), (ArgErrorKind::Value, "token"));
            assert!(
                e.message
                    .starts_with(&format!("{bad:?} is not a fencing token")),
                "{e}"
            );
        }
    }

    #[test]
    fn epoch_seconds_are_points_in_time_after_1970() {
        let t = epoch_seconds("expiry", 1_700_000_000.5).unwrap();
        assert_eq!(
            t.duration_since(std::time::UNIX_EPOCH).unwrap(),
            Duration::from_millis(1_700_000_000_500)
        );
        for bad in [f64::NAN, f64::INFINITY, 0.0, -5.0, 1e300] {
            let e = epoch_seconds("expiry", bad).unwrap_err();
            assert_eq!(e.kind, ArgErrorKind::Value);
            assert!(
                e.message
                    .starts_with("expiry must be a time in seconds since the Unix epoch, got"),
                "{e}"
            );
        }
    }

    #[test]
    fn durations() {
        let f = Field::LeaseDuration.name();
        assert_eq!(
            seconds(f, 1.5, SecondsBound::Positive),
            Ok(Duration::from_millis(1500))
        );
        assert_eq!(
            seconds(f, 0.0, SecondsBound::NonNegative),
            Ok(Duration::ZERO)
        );
        let e = seconds(f, -1.0, SecondsBound::Positive).unwrap_err();
        assert_eq!(
            e.message,
            "lease_duration must be a positive number of seconds, got -1"
        );
        assert_eq!(
            (e.kind, e.field.as_str()),
            (ArgErrorKind::Value, "lease_duration")
        );
        assert_eq!(
            seconds(f, 0.0, SecondsBound::Positive).unwrap_err().message,
            "lease_duration must be a positive number of seconds, got 0"
        );
        assert_eq!(
            seconds("challenge_stagger", -0.1, SecondsBound::NonNegative)
                .unwrap_err()
                .message,
            "challenge_stagger must be a non-negative number of seconds, got -0.1"
        );
        assert_eq!(
            seconds("renew_interval", f64::NAN, SecondsBound::Positive)
                .unwrap_err()
                .message,
            "renew_interval must be a positive number of seconds, got NaN"
        );
        assert_eq!(
            seconds("timeout", f64::INFINITY, SecondsBound::NonNegative)
                .unwrap_err()
                .message,
            "timeout must be at most 31536000 seconds (a year), got inf"
        );
        assert_eq!(
            seconds("timeout", 1e20, SecondsBound::NonNegative)
                .unwrap_err()
                .message,
            "timeout must be at most 31536000 seconds (a year), got 100000000000000000000"
        );
        assert!(seconds("timeout", MAX_SECONDS, SecondsBound::NonNegative).is_ok());
    }

    #[test]
    fn integers() {
        assert_eq!(int_in_range("partitions", 16, 1, i32::MAX.into()), Ok(16));
        let e = i32_in_range("partitions", 0, 1, i32::MAX).unwrap_err();
        assert_eq!(
            e.message,
            "partitions must be an integer from 1 to 2147483647, got 0"
        );
        assert_eq!(e.kind, ArgErrorKind::Value);
        assert_eq!(
            i32_in_range("partitions", 1 << 40, 1, i32::MAX)
                .unwrap_err()
                .message,
            "partitions must be an integer from 1 to 2147483647, got 1099511627776"
        );
        assert_eq!(
            out_of_range("partitions", 1, 5, "1".repeat(30)).message,
            format!(
                "partitions must be an integer from 1 to 5, got {}",
                "1".repeat(30)
            )
        );
    }

    #[test]
    fn types_and_layout_widths() {
        let e = ArgError::wrong_type("lease_duration", SECONDS_TYPE, "str");
        assert_eq!(
            e.message,
            "lease_duration must be a number of seconds, got str"
        );
        assert_eq!(e.kind, ArgErrorKind::Type);
        let e = ArgError::does_not_fit("producer_epoch", "i16", -32768, 32767, 40000);
        assert_eq!(
            e.message,
            "producer_epoch does not fit the layout's i16 (from -32768 to 32767): got 40000"
        );
        assert_eq!(e.kind, ArgErrorKind::Overflow);
        let core: krabka_coordination::Error = e.into();
        assert_eq!(core.kind(), krabka_coordination::ErrorKind::InvalidArgument);
    }

    #[test]
    fn numbers_are_written_alike_everywhere() {
        assert_eq!(number(-1.0), "-1");
        assert_eq!(number(2.5), "2.5");
        assert_eq!(number(0.1), "0.1");
        assert_eq!(number(f64::NEG_INFINITY), "-inf");
        assert_eq!(number(-0.0), "0");
    }

    #[test]
    fn field_names_are_snake_case() {
        for f in [
            Field::Role,
            Field::LeaseDuration,
            Field::MinInsyncReplicas,
            Field::Kafka,
            Field::ConnectTimeout,
            Field::OperationTimeout,
        ] {
            let n = f.name();
            assert!(n.chars().all(|c| c.is_ascii_lowercase() || c == '_'), "{n}");
            assert_eq!(f.to_string(), n);
        }
    }
}
