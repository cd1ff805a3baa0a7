//! What every librdkafka client of the transport shares: the client context
//! (librdkafka's error callbacks to `tracing`), blocking calls and drops on
//! tokio's blocking pool, and the mapping of librdkafka's errors to the
//! crate's.

use rdkafka::config::RDKafkaLogLevel;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::FutureProducer;
use tracing::Level;

use super::config::KafkaConfig;
use super::oauth::ClientToken;
use crate::error::{Error, Result};

/// The rdkafka context of every client the transport builds (one per
/// client: [`TransportContext::new`]). It routes librdkafka's error
/// callbacks and log lines to `tracing` (target `librdkafka`, so each
/// binding's logger gets them) at fitting levels (an end-of-partition
/// event, one per caught-up read, is not an error; see [`log_level`] for
/// the log lines), and gives the client OAUTHBEARER
/// tokens from the configuration's token provider when librdkafka asks for
/// one (see the `oauth` module).
#[derive(Debug, Default)]
pub(crate) struct TransportContext {
    oauth: Option<ClientToken>,
}

impl TransportContext {
    /// The context of one new client of `config`.
    pub(crate) fn new(config: &KafkaConfig) -> TransportContext {
        TransportContext {
            oauth: config.token_source().map(ClientToken::new),
        }
    }

    /// The client's token state, with OAUTHBEARER.
    pub(crate) fn oauth(&self) -> Option<&ClientToken> {
        self.oauth.as_ref()
    }
}

impl rdkafka::ClientContext for TransportContext {
    // Without OAUTHBEARER librdkafka never asks.
    const ENABLE_REFRESH_OAUTH_TOKEN: bool = true;

    /// librdkafka's own log line: its facility as a field, its text as the
    /// message (without rdkafka's `librdkafka: FACILITY` prefix, which
    /// repeated the target and the field), at [`log_level`].
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        match log_level(level, fac) {
            Level::ERROR => tracing::error!(target: "librdkafka", facility = fac, "{log_message}"),
            Level::WARN => tracing::warn!(target: "librdkafka", facility = fac, "{log_message}"),
            Level::INFO => tracing::info!(target: "librdkafka", facility = fac, "{log_message}"),
            _ => tracing::debug!(target: "librdkafka", facility = fac, "{log_message}"),
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        let eof = matches!(error, KafkaError::PartitionEOF(_))
            || error.rdkafka_error_code() == Some(RDKafkaErrorCode::PartitionEOF);
        if eof {
            tracing::trace!(target: "librdkafka", "{reason}");
        } else {
            // The error's code as a field, librdkafka's reason as the
            // message (which the error's own text repeated in part).
            match error.rdkafka_error_code() {
                Some(code) => tracing::warn!(target: "librdkafka", error = ?code, "{reason}"),
                None => tracing::warn!(target: "librdkafka", error = %error, "{reason}"),
            }
        }
    }

    /// Called on the thread that polls the client when librdkafka wants a
    /// token (at the start and 80 % into each token's life). librdkafka
    /// keeps the error and reports it with the connections it fails.
    fn generate_oauth_token(
        &self,
        _oauthbearer_config: Option<&str>,
    ) -> std::result::Result<rdkafka::client::OAuthToken, Box<dyn std::error::Error>> {
        let Some(state) = &self.oauth else {
            return Err("sasl.mechanism=OAUTHBEARER needs a token provider \
                        (KafkaConfig::with_oauth_token_provider)"
                .into());
        };
        match state.token() {
            Ok(token) => Ok(rdkafka::client::OAuthToken {
                lifetime_ms: token.expires_at_ms(),
                principal_name: token.principal().to_owned(),
                token: token.value().to_owned(),
            }),
            Err(e) => {
                tracing::warn!(target: "librdkafka", "no OAUTHBEARER token for a librdkafka client: {e}");
                // librdkafka takes the message as a C string.
                Err(e.to_string().replace('\0', " ").into())
            }
        }
    }
}

impl rdkafka::consumer::ConsumerContext for TransportContext {}

/// The `tracing` level of a librdkafka log line of `level` from
/// `facility`. Emergencies to critical lines are errors; librdkafka's
/// errors and warnings are warnings (what fails a call reaches the caller
/// as the call's error; these are diagnostics beside it); notices and
/// informational lines are info, debug lines debug. A failed broker
/// connection (facility `FAIL`) is debug: librdkafka reports the same
/// failure to the error callback, logged once as a warning, and the call
/// it fails names the address in its error.
fn log_level(level: RDKafkaLogLevel, facility: &str) -> Level {
    match level {
        _ if facility == "FAIL" => Level::DEBUG,
        RDKafkaLogLevel::Emerg | RDKafkaLogLevel::Alert | RDKafkaLogLevel::Critical => Level::ERROR,
        RDKafkaLogLevel::Error | RDKafkaLogLevel::Warning => Level::WARN,
        RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => Level::INFO,
        RDKafkaLogLevel::Debug => Level::DEBUG,
    }
}

/// A producer of the transport.
pub(crate) type Producer = FutureProducer<TransportContext>;

/// Runs a blocking librdkafka call on tokio's blocking pool.
pub(crate) async fn run_blocking<T, F>(f: F) -> Result<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::fatal("a blocking librdkafka call", e.to_string()))
}

/// The librdkafka clients handed to the blocking pool by
/// [`drop_off_thread`] and not destroyed yet.
static DROPS_IN_FLIGHT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How many librdkafka clients (producers, consumers, admin clients) of
/// dropped transports are still being destroyed in the background. A
/// binding that promises "nothing of the library runs any more" (the C
/// header's `krabka_wait_idle`) waits for zero: tokio counts the blocking
/// pool's work apart from its tasks.
pub fn background_drops() -> usize {
    DROPS_IN_FLIGHT.load(std::sync::atomic::Ordering::SeqCst)
}

/// Counts one drop in flight until it is dropped itself: after the value's
/// destruction, or with the value when the pool never runs it.
struct InFlight;

impl InFlight {
    fn new() -> InFlight {
        DROPS_IN_FLIGHT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        InFlight
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        DROPS_IN_FLIGHT.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Drops `value` (a producer, consumer or admin client, whose destruction
/// blocks) on tokio's blocking pool, or right here outside a runtime;
/// [`background_drops`] counts it until it is destroyed.
pub(crate) fn drop_off_thread<T: Send + 'static>(value: T) {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => {
            let in_flight = InFlight::new();
            drop(handle.spawn_blocking(move || {
                drop(value);
                drop(in_flight);
            }));
        }
        Err(_) => drop(value),
    }
}

/// True for the codes no retry mends: authorization, authentication,
/// unsupported features, invalid requests.
fn is_permanent_code(code: RDKafkaErrorCode) -> bool {
    use RDKafkaErrorCode as C;
    matches!(
        code,
        C::TopicAuthorizationFailed
            | C::GroupAuthorizationFailed
            | C::ClusterAuthorizationFailed
            | C::TransactionalIdAuthorizationFailed
            | C::DelegationTokenAuthorizationFailed
            | C::SaslAuthenticationFailed
            | C::Authentication
            | C::IllegalSASLState
            | C::UnsupportedVersion
            | C::InvalidTransactionTimeout
            | C::MessageSizeTooLarge
            | C::InvalidMessageSize
            | C::InvalidRequiredAcks
            | C::InvalidRecord
            | C::InvalidArgument
            | C::NotConfigured
            | C::Fatal
    )
}

/// What an authorization failure was refused on, for its message; `None`
/// for other codes.
pub(super) fn denied(code: RDKafkaErrorCode) -> Option<&'static str> {
    use RDKafkaErrorCode as C;
    Some(match code {
        C::TopicAuthorizationFailed => "the topic: the principal needs an ACL on it (READ, WRITE, DESCRIBE)",
        C::TransactionalIdAuthorizationFailed => {
            "the transactional id (the role): the principal needs WRITE and DESCRIBE on TransactionalId <role>"
        }
        C::ClusterAuthorizationFailed => {
            "the cluster resource: the principal needs IDEMPOTENT_WRITE (and DESCRIBE_CONFIGS) on the cluster"
        }
        C::GroupAuthorizationFailed => "the consumer group (group.id): the principal needs DESCRIBE on it",
        C::DelegationTokenAuthorizationFailed => "the delegation token",
        _ => return None,
    })
}

/// Maps an rdkafka error to the crate's error: fencing to [`Error::Fenced`],
/// a rejected setting to [`Error::InvalidArgument`], an authorization
/// failure to [`Error::Fatal`] naming the resource (whatever librdkafka
/// says about retrying or aborting), permanent and fatal errors to
/// [`Error::Fatal`], the rest to [`Error::Transient`].
pub(crate) fn kafka_error(context: &str, e: KafkaError) -> Error {
    // rdkafka gives no code for an admin operation's error; it has one.
    let code = match &e {
        KafkaError::AdminOp(code) => Some(*code),
        _ => e.rdkafka_error_code(),
    };
    if let Some(resource) = code.and_then(denied) {
        return Error::fatal(format!("{context}: not authorized on {resource}"), e);
    }
    match &e {
        KafkaError::ClientConfig(_, desc, key, value) => Error::InvalidArgument(format!(
            "{context}: librdkafka refused the setting {key}={value}: {desc}"
        )),
        KafkaError::ClientCreation(message) => {
            Error::InvalidArgument(format!("{context}: {message}"))
        }
        KafkaError::Transaction(t) if t.is_fatal() => {
            if is_fenced_code(t.code()) {
                Error::Fenced(format!("{context}: {}", t.string()))
            } else {
                Error::fatal(context.to_owned(), e)
            }
        }
        KafkaError::Transaction(t) if t.is_retriable() || t.txn_requires_abort() => {
            Error::transient(context.to_owned(), e)
        }
        KafkaError::Transaction(_) => Error::fatal(context.to_owned(), e),
        KafkaError::MessageConsumptionFatal(_) => Error::fatal(context.to_owned(), e),
        KafkaError::Nul(_) => Error::InvalidArgument(format!(
            "{context}: a name or setting contains a NUL byte, which librdkafka cannot take"
        )),
        _ => match code {
            Some(code) if is_fenced_code(code) => Error::Fenced(format!("{context}: {e}")),
            Some(code) if is_permanent_code(code) => Error::fatal(context.to_owned(), e),
            _ => Error::transient(context.to_owned(), e),
        },
    }
}

/// True for the codes that mean a newer epoch exists.
fn is_fenced_code(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::Fenced
            | RDKafkaErrorCode::InvalidProducerEpoch
            | RDKafkaErrorCode::ProducerFenced
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fencing_codes_map_to_fenced() {
        for code in [
            RDKafkaErrorCode::Fenced,
            RDKafkaErrorCode::InvalidProducerEpoch,
            RDKafkaErrorCode::ProducerFenced,
        ] {
            let e = kafka_error("x", KafkaError::MessageProduction(code));
            assert!(matches!(e, Error::Fenced(_)), "{code:?}: {e}");
        }
        let e = kafka_error(
            "x",
            KafkaError::MessageProduction(RDKafkaErrorCode::TopicAuthorizationFailed),
        );
        assert!(matches!(e, Error::Fatal { .. }), "{e}");
        let e = kafka_error(
            "x",
            KafkaError::MessageProduction(RDKafkaErrorCode::MessageTimedOut),
        );
        assert!(e.is_transient(), "{e}");
    }

    #[test]
    fn authorization_failures_are_fatal_and_name_the_resource() {
        for (code, resource) in [
            (RDKafkaErrorCode::TopicAuthorizationFailed, "the topic"),
            (
                RDKafkaErrorCode::TransactionalIdAuthorizationFailed,
                "transactional id",
            ),
            (RDKafkaErrorCode::ClusterAuthorizationFailed, "cluster"),
            (RDKafkaErrorCode::GroupAuthorizationFailed, "consumer group"),
        ] {
            for e in [
                KafkaError::MessageProduction(code),
                KafkaError::MetadataFetch(code),
                KafkaError::AdminOp(code),
                KafkaError::MessageConsumption(code),
            ] {
                let e = kafka_error("writing to topic t", e);
                assert_eq!(e.kind(), crate::ErrorKind::Fatal, "{code:?}: {e}");
                let msg = e.to_string();
                assert!(
                    msg.contains("not authorized on") && msg.contains(resource),
                    "{msg}"
                );
                assert!(msg.contains("topic t"), "the context stays: {msg}");
            }
        }
    }
}

#[cfg(test)]
mod log_tests {
    use super::*;
    use rdkafka::ClientContext;
    use std::sync::{Arc, Mutex};

    /// A writer that keeps what a `fmt` subscriber writes.
    #[derive(Clone, Default)]
    struct Kept(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Kept {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn librdkafka_log_lines_go_to_tracing_with_their_facility_once() {
        let kept = Kept::default();
        let writer = kept.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_max_level(Level::DEBUG)
            .with_ansi(false)
            .without_time()
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            let ctx = TransportContext::default();
            ctx.log(
                RDKafkaLogLevel::Error,
                "FAIL",
                "127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused",
            );
            ctx.log(
                RDKafkaLogLevel::Warning,
                "CONFWARN",
                "Configuration property x is a consumer property",
            );
            ctx.log(RDKafkaLogLevel::Critical, "BUG", "assertion");
            ctx.error(
                KafkaError::Global(RDKafkaErrorCode::AllBrokersDown),
                "1/1 brokers are down",
            );
        });
        let text = String::from_utf8(kept.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "DEBUG librdkafka: 127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: \
                 Connection refused facility=\"FAIL\"",
                " WARN librdkafka: Configuration property x is a consumer property facility=\"CONFWARN\"",
                "ERROR librdkafka: assertion facility=\"BUG\"",
                " WARN librdkafka: 1/1 brokers are down error=AllBrokersDown",
            ],
            "{text}"
        );
    }
}
