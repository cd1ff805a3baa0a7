//! The options of the binding surface, checked and converted once: the
//! leadership timings, the state topic's shape (with its production
//! defaults), the client's partition count and timeouts, and the Kafka
//! settings.

use std::time::Duration;

use krabka_coordination::leadership::LeadershipOptions;
use krabka_coordination::transport::kafka::{KafkaConfig, TopicSpec};
use krabka_coordination::Error;

use crate::args::{i32_in_range, number, seconds, ArgError, Field, SecondsBound};

/// The timing options of an acquire, as the host passed them (seconds);
/// `None` keeps the core's default (30 s lease, 10 s renew interval, 5 s
/// stagger).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LeadershipArgs {
    /// How long a lease lasts.
    pub lease_duration: Option<f64>,
    /// How often the holder renews.
    pub renew_interval: Option<f64>,
    /// The delay between ranks of challengers.
    pub challenge_stagger: Option<f64>,
}

impl LeadershipArgs {
    /// `base` (the client's defaults) with these timings, checked: each one
    /// by [`seconds`] with its field name, then how they relate by the core
    /// (`lease duration (3s) must exceed the renew interval (10s)`).
    pub fn apply(&self, base: LeadershipOptions) -> Result<LeadershipOptions, Error> {
        let mut options = base;
        if let Some(s) = self.lease_duration {
            options = options.with_lease_duration(seconds(
                Field::LeaseDuration.name(),
                s,
                SecondsBound::Positive,
            )?);
        }
        if let Some(s) = self.renew_interval {
            options = options.with_renew_interval(seconds(
                Field::RenewInterval.name(),
                s,
                SecondsBound::Positive,
            )?);
        }
        if let Some(s) = self.challenge_stagger {
            options = options.with_challenge_stagger(seconds(
                Field::ChallengeStagger.name(),
                s,
                SecondsBound::NonNegative,
            )?);
        }
        options.validate()?;
        Ok(options)
    }
}

/// The shape of the state topic to create, as the host passed it.
///
/// The defaults are what a production cluster needs: replication factor 3
/// and `min.insync.replicas` 2 ([`TopicSpec::default`]). `development`
/// changes the defaults to 1 and 1 for a single-broker development cluster
/// ([`TopicSpec::development`]); explicit values win over either default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TopicArgs {
    /// A single-broker development cluster (defaults 1 and 1).
    pub development: bool,
    /// The replication factor, if given.
    pub replication_factor: Option<i64>,
    /// `min.insync.replicas`, if given.
    pub min_insync_replicas: Option<i64>,
}

/// The most replicas Kafka allows (the field is an `i16`).
pub const MAX_REPLICATION_FACTOR: i32 = i16::MAX as i32;

impl TopicArgs {
    /// The spec for a topic of `partitions` partitions. The replication
    /// factor must be from 1 to 32767, and `min.insync.replicas` from 1 to
    /// the replication factor (a higher one would refuse every write).
    pub fn spec(&self, partitions: i32) -> Result<TopicSpec, ArgError> {
        let base = if self.development {
            TopicSpec::development()
        } else {
            TopicSpec::default()
        };
        let rf = match self.replication_factor {
            Some(v) => i32_in_range(
                Field::ReplicationFactor.name(),
                v,
                1,
                MAX_REPLICATION_FACTOR,
            )?,
            None => base.replication_factor,
        };
        let isr = match self.min_insync_replicas {
            Some(v) => i32_in_range(Field::MinInsyncReplicas.name(), v, 1, rf)?,
            None if base.min_insync_replicas <= rf => base.min_insync_replicas,
            // An explicit replication factor below the default min ISR
            // (replication_factor=1 alone): the largest ISR it allows.
            None => rf,
        };
        Ok(base.with_partitions(partitions).with_replication(rf, isr))
    }
}

/// The partition count of a client's state topic: from 1 to `i32::MAX`.
pub fn partitions(value: i64) -> Result<i32, ArgError> {
    i32_in_range(Field::Partitions.name(), value, 1, i32::MAX)
}

/// The client-wide timeouts, as the host passed them (seconds); `None`
/// keeps the core's default.
///
/// * `connect_timeout` bounds the first contact with the cluster (default
///   10 s, [`KafkaConfig::DEFAULT_CONNECT_TIMEOUT`]): when no broker of the
///   bootstrap address answers within it, an acquire or a describe fails
///   with a transient error naming the address, and nothing is registered.
/// * `operation_timeout` bounds each blocking client operation once the
///   cluster answered (default 30 s,
///   [`KafkaConfig::DEFAULT_OPERATION_TIMEOUT`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TimeoutArgs {
    /// How long the first contact with the cluster may take.
    pub connect_timeout: Option<f64>,
    /// The budget of one blocking client operation.
    pub operation_timeout: Option<f64>,
}

impl TimeoutArgs {
    /// `config` with these timeouts, checked: each one by [`seconds`] as a
    /// positive number of seconds of at most a year, then against
    /// librdkafka's limit ([`KafkaConfig::MAX_TIMEOUT`], about 24.8 days),
    /// so that every refusal names the argument (`connect_timeout must be a
    /// positive number of seconds, got 0`).
    pub fn apply(&self, config: KafkaConfig) -> Result<KafkaConfig, ArgError> {
        let mut config = config;
        if let Some(s) = self.connect_timeout {
            config = config.with_connect_timeout(timeout(Field::ConnectTimeout, s)?);
        }
        if let Some(s) = self.operation_timeout {
            config = config.with_operation_timeout(timeout(Field::OperationTimeout, s)?);
        }
        Ok(config)
    }
}

/// A client timeout: positive, at most a year, at most librdkafka's limit.
fn timeout(field: Field, secs: f64) -> Result<Duration, ArgError> {
    let d = seconds(field.name(), secs, SecondsBound::Positive)?;
    if d.is_zero() {
        // Positive, but below a nanosecond: the core would refuse the zero
        // without the argument's name.
        return Err(ArgError::invalid(
            field.name(),
            "at least a nanosecond (0.000000001 seconds)",
            number(secs),
        ));
    }
    if d > KafkaConfig::MAX_TIMEOUT {
        return Err(ArgError::invalid(
            field.name(),
            &format!(
                "at most {} seconds (librdkafka's limit)",
                number(KafkaConfig::MAX_TIMEOUT.as_secs_f64())
            ),
            number(secs),
        ));
    }
    Ok(d)
}

/// A Kafka configuration from librdkafka settings, each passed through as
/// it is (`bootstrap.servers` is the bootstrap address). The core checks them
/// when the client is built, naming what it refuses.
pub fn kafka_config<K, V>(settings: impl IntoIterator<Item = (K, V)>) -> KafkaConfig
where
    K: Into<String>,
    V: Into<String>,
{
    settings
        .into_iter()
        .fold(KafkaConfig::new(""), |config, (k, v)| config.set(k, v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn timings_keep_the_defaults_and_check_each_value() {
        let o = LeadershipArgs::default()
            .apply(LeadershipOptions::default())
            .unwrap();
        assert_eq!(o.election.lease_duration, Duration::from_secs(30));
        let o = LeadershipArgs {
            lease_duration: Some(3.0),
            renew_interval: Some(1.0),
            challenge_stagger: Some(0.0),
        }
        .apply(LeadershipOptions::default().with_partitions(4))
        .unwrap();
        assert_eq!(o.election.lease_duration, Duration::from_secs(3));
        assert_eq!(o.election.renew_interval, Duration::from_secs(1));
        assert_eq!(o.election.challenge_stagger, Duration::ZERO);
        assert_eq!(
            o.election.partitions, 4,
            "the base's partition count is kept"
        );

        let e = LeadershipArgs {
            lease_duration: Some(-1.0),
            ..Default::default()
        }
        .apply(LeadershipOptions::default())
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid argument: lease_duration must be a positive number of seconds, got -1"
        );
        // How the values relate is the core's check.
        let e = LeadershipArgs {
            lease_duration: Some(3.0),
            ..Default::default()
        }
        .apply(LeadershipOptions::default())
        .unwrap_err();
        let m = e.to_string();
        assert!(
            m.contains("lease duration (3 s)") && m.contains("renew interval (10 s)"),
            "{m}"
        );
    }

    #[test]
    fn topic_defaults_are_for_production_and_development_is_spelled_out() {
        let prod = TopicArgs::default().spec(16).unwrap();
        assert_eq!(
            (
                prod.partitions,
                prod.replication_factor,
                prod.min_insync_replicas
            ),
            (16, 3, 2)
        );
        let dev = TopicArgs {
            development: true,
            ..Default::default()
        }
        .spec(8)
        .unwrap();
        assert_eq!(
            (
                dev.partitions,
                dev.replication_factor,
                dev.min_insync_replicas
            ),
            (8, 1, 1)
        );
        let one = TopicArgs {
            replication_factor: Some(1),
            ..Default::default()
        }
        .spec(16)
        .unwrap();
        assert_eq!((one.replication_factor, one.min_insync_replicas), (1, 1));
        let five = TopicArgs {
            replication_factor: Some(5),
            min_insync_replicas: Some(3),
            ..Default::default()
        }
        .spec(16)
        .unwrap();
        assert_eq!((five.replication_factor, five.min_insync_replicas), (5, 3));
    }

    #[test]
    fn topic_ranges_name_the_argument() {
        let e = TopicArgs {
            replication_factor: Some(0),
            ..Default::default()
        }
        .spec(16)
        .unwrap_err();
        assert_eq!(
            e.message,
            "replication_factor must be an integer from 1 to 32767, got 0"
        );
        let e = TopicArgs {
            min_insync_replicas: Some(4),
            ..Default::default()
        }
        .spec(16)
        .unwrap_err();
        assert_eq!(
            e.message,
            "min_insync_replicas must be an integer from 1 to 3, got 4"
        );
        let e = partitions(0).unwrap_err();
        assert_eq!(
            e.message,
            "partitions must be an integer from 1 to 2147483647, got 0"
        );
        assert_eq!(partitions(16), Ok(16));
    }

    #[test]
    fn timeouts_keep_the_defaults_and_set_what_is_given() {
        let base = kafka_config([("bootstrap.servers", "h:1")]);
        let c = TimeoutArgs::default().apply(base.clone()).unwrap();
        assert_eq!(c.connect_timeout(), KafkaConfig::DEFAULT_CONNECT_TIMEOUT);
        assert_eq!(
            c.operation_timeout(),
            KafkaConfig::DEFAULT_OPERATION_TIMEOUT
        );
        let c = TimeoutArgs {
            connect_timeout: Some(1.5),
            operation_timeout: Some(0.25),
        }
        .apply(base.clone())
        .unwrap();
        assert_eq!(c.connect_timeout(), Duration::from_millis(1500));
        assert_eq!(c.operation_timeout(), Duration::from_millis(250));
        assert_eq!(c.bootstrap(), "h:1", "the rest of the config is kept");
        c.validate()
            .expect("the core takes what the check lets through");
        // librdkafka's limit itself is allowed.
        let c = TimeoutArgs {
            connect_timeout: Some(KafkaConfig::MAX_TIMEOUT.as_secs_f64()),
            ..Default::default()
        }
        .apply(base)
        .unwrap();
        assert_eq!(c.connect_timeout(), KafkaConfig::MAX_TIMEOUT);
        c.validate().unwrap();
    }

    #[test]
    fn timeouts_refused_name_the_argument_and_the_value() {
        let base = || kafka_config([("bootstrap.servers", "h:1")]);
        let connect = |s: f64| {
            TimeoutArgs {
                connect_timeout: Some(s),
                ..Default::default()
            }
            .apply(base())
            .unwrap_err()
        };
        let operation = |s: f64| {
            TimeoutArgs {
                operation_timeout: Some(s),
                ..Default::default()
            }
            .apply(base())
            .unwrap_err()
        };
        for (e, message) in [
            (
                connect(0.0),
                "connect_timeout must be a positive number of seconds, got 0",
            ),
            (
                connect(-1.0),
                "connect_timeout must be a positive number of seconds, got -1",
            ),
            (
                operation(f64::NAN),
                "operation_timeout must be a positive number of seconds, got NaN",
            ),
            (
                operation(f64::INFINITY),
                "operation_timeout must be at most 31536000 seconds (a year), got inf",
            ),
            (
                connect(f64::NEG_INFINITY),
                "connect_timeout must be a positive number of seconds, got -inf",
            ),
            (
                connect(1e-12),
                "connect_timeout must be at least a nanosecond (0.000000001 seconds), got 0.000000000001",
            ),
            // Within a year but beyond what librdkafka takes (i32::MAX ms).
            (
                operation(30.0 * 86_400.0),
                "operation_timeout must be at most 2147483.647 seconds (librdkafka's limit), got 2592000",
            ),
        ] {
            assert_eq!(e.message, message);
            assert_eq!(e.kind, crate::ArgErrorKind::Value);
            assert!(message.starts_with(&e.field), "{message}");
        }
        let core: Error = connect(0.0).into();
        assert_eq!(core.kind(), krabka_coordination::ErrorKind::InvalidArgument);
    }

    #[test]
    fn kafka_settings_pass_through() {
        let c = kafka_config([("bootstrap.servers", "h:1"), ("socket.timeout.ms", "5000")]);
        assert_eq!(c.bootstrap(), "h:1");
        assert_eq!(c.get("socket.timeout.ms"), Some("5000"));
        assert_eq!(kafka_config(Vec::<(String, String)>::new()).bootstrap(), "");
    }
}
