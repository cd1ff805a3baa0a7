//! What a [`crate::Client`] is built from: the cluster, the client id, the
//! timeouts and the security of its connections.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::security::Security;

/// The settings of a [`crate::Client`].
#[derive(Debug, Clone)]
pub struct Settings {
    /// The bootstrap brokers, `host:port[,host:port...]` (a
    /// `<protocol>://` prefix naming the security protocol is allowed).
    pub bootstrap: String,
    /// The `client.id` of every request header (brokers log it and apply
    /// quotas by it); at most 32,767 bytes.
    pub client_id: String,
    /// The budget of one request with its retries.
    pub operation_timeout: Duration,
    /// The longest a connect and its handshakes may take, and the whole
    /// budget of a request while no broker has answered yet.
    pub connect_timeout: Duration,
    /// The longest one attempt of a request waits for its answer (less
    /// when the caller's deadline is nearer). An attempt that gets no
    /// answer by then closes its connection, marks the broker stalled, and
    /// is tried again, looking up the coordinator or leader afresh, while
    /// the caller's deadline allows.
    pub request_timeout: Duration,
    /// TLS and SASL of every connection.
    pub security: Security,
}

impl Settings {
    /// The default [`Settings::operation_timeout`]: 30 s.
    pub const DEFAULT_OPERATION_TIMEOUT: Duration = Duration::from_secs(30);
    /// The default [`Settings::connect_timeout`]: 10 s.
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
    /// The default [`Settings::request_timeout`]: 5 s, the longest a
    /// healthy broker takes to answer anything this client sends (a
    /// Produce waits for its replicas only that long: it tells the broker
    /// so).
    pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

    /// Settings for the cluster at `bootstrap`: client id `krabka-kafka`,
    /// the default timeouts, plaintext connections.
    pub fn new(bootstrap: impl Into<String>) -> Settings {
        Settings {
            bootstrap: bootstrap.into(),
            client_id: "krabka-kafka".to_owned(),
            operation_timeout: Self::DEFAULT_OPERATION_TIMEOUT,
            connect_timeout: Self::DEFAULT_CONNECT_TIMEOUT,
            request_timeout: Self::DEFAULT_REQUEST_TIMEOUT,
            security: Security::plaintext(),
        }
    }

    /// Refuses a zero timeout and a client id a request header cannot hold
    /// ([`Error::InvalidArgument`] naming the value).
    pub fn validate(&self) -> Result<()> {
        for (what, d) in [
            ("operation timeout", self.operation_timeout),
            ("connect timeout", self.connect_timeout),
            ("request timeout", self.request_timeout),
        ] {
            if d.is_zero() {
                return Err(Error::InvalidArgument(format!(
                    "the {what} must be positive, got {d:?}"
                )));
            }
        }
        if self.client_id.len() > i16::MAX as usize {
            return Err(Error::InvalidArgument(format!(
                "the client id is {} bytes, over the {} a request header holds",
                self.client_id.len(),
                i16::MAX
            )));
        }
        Ok(())
    }
}
