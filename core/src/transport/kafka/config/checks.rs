//! The checks of a [`KafkaConfig`]: the values the transport relies on
//! ([`KafkaConfig::validate`]) and the security settings the protocol
//! client honours ([`KafkaConfig::check_security`]).

use super::*;

impl KafkaConfig {
    /// Checks the values the transport relies on: a non-empty bootstrap
    /// address and state topic, a fetch wait within librdkafka's bounds,
    /// positive operation and connect timeouts of at most
    /// [`KafkaConfig::MAX_TIMEOUT`], no `transactional.id` (the transport
    /// sets it to each role) and a `client.id` a request header holds.
    /// Every error is [`Error::InvalidArgument`] naming the value.
    pub fn validate(&self) -> Result<()> {
        if let Some(v) = &self.removed_lease_path {
            return Err(Error::InvalidArgument(format!(
                "the setting {} (given as {}) was removed: every held role now writes \
                 through the protocol client, and the librdkafka lease path is gone; remove the \
                 setting (see the CHANGELOG)",
                Self::REMOVED_LEASE_PATH_SETTING,
                crate::error::quote(v)
            )));
        }
        if let Some(v) = &self.hanging_transactions {
            let v = v.trim();
            if !v.eq_ignore_ascii_case("true") && !v.eq_ignore_ascii_case("false") {
                return Err(Error::InvalidArgument(format!(
                    "the setting {}={} must be true or false",
                    Self::ALLOW_HANGING_TRANSACTIONS_SETTING,
                    crate::error::quote(v)
                )));
            }
        }
        if self.bootstrap.trim().is_empty() {
            return Err(Error::InvalidArgument(
                "the bootstrap address is empty".into(),
            ));
        }
        if self.state_topic.is_empty() {
            return Err(Error::InvalidArgument(
                "the state topic name is empty".into(),
            ));
        }
        let wait = self.fetch_wait.as_millis();
        if wait > 300_000 {
            return Err(Error::InvalidArgument(format!(
                "fetch wait {} is over librdkafka's limit of 300 s (fetch.wait.max.ms)",
                crate::human::duration(self.fetch_wait)
            )));
        }
        for (what, d) in [
            ("operation timeout", self.operation_timeout),
            ("connect timeout", self.connect_timeout),
        ] {
            if d.is_zero() || d > Self::MAX_TIMEOUT {
                return Err(Error::InvalidArgument(format!(
                    "the {what} must be above zero and at most {} ms ({}, librdkafka's limit), got {}",
                    Self::MAX_TIMEOUT.as_millis(),
                    crate::human::duration(Self::MAX_TIMEOUT),
                    crate::human::duration(d)
                )));
            }
        }
        if let Some(role) = self.get("transactional.id") {
            return Err(Error::InvalidArgument(format!(
                "the setting transactional.id={} is refused: the transport sets it to each role (the role is \
                 the transactional id); remove it",
                crate::error::quote(role)
            )));
        }
        if let Some(id) = self.get("client.id") {
            if id.len() > Self::MAX_CLIENT_ID_LEN {
                return Err(Error::InvalidArgument(format!(
                    "the setting client.id={} is over the {} bytes a Kafka request header holds",
                    crate::error::quote(id),
                    Self::MAX_CLIENT_ID_LEN
                )));
            }
        }
        Ok(())
    }

    /// Checks the security settings as the project's own protocol client
    /// (the [`super::super::KafkaClient`]) reads them: `security.protocol`
    /// PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL; `sasl.mechanism(s)`
    /// PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 with `sasl.username` and
    /// `sasl.password`, or OAUTHBEARER with a token provider
    /// ([`KafkaConfig::with_oauth_token_provider`]; `sasl.oauthbearer.method`
    /// may only be `default`); `ssl.ca.location`, `ssl.ca.pem`,
    /// `ssl.certificate.location` / `.pem`, `ssl.key.location` / `.pem`,
    /// `ssl.key.password` and `ssl.endpoint.identification.algorithm`
    /// (`https`, the default, or `none`). Any other `ssl.*` or `sasl.*`
    /// setting, and a value it cannot honour, is refused with an
    /// [`Error::InvalidArgument`] naming each of them. The files the
    /// settings name are read and must hold what they should.
    pub fn check_security(&self) -> Result<()> {
        super::super::client_settings::security(self).map(drop)
    }
}
