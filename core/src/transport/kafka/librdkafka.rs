//! What every librdkafka client of the transport shares: the client context
//! (librdkafka's error callbacks to `tracing`), blocking calls and drops on
//! tokio's blocking pool, and the mapping of librdkafka's errors to the
//! crate's.

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::FutureProducer;

use super::lease::is_fenced_code;
use crate::error::{Error, Result};

/// The rdkafka context of every client the transport builds. It routes
/// librdkafka's error callbacks to `tracing` at fitting levels: an
/// end-of-partition event (one per caught-up read) is not an error.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TransportContext;

impl rdkafka::ClientContext for TransportContext {
    fn error(&self, error: KafkaError, reason: &str) {
        let eof = matches!(error, KafkaError::PartitionEOF(_))
            || error.rdkafka_error_code() == Some(RDKafkaErrorCode::PartitionEOF);
        if eof {
            tracing::trace!(target: "librdkafka", "{reason}");
        } else {
            tracing::warn!(target: "librdkafka", "{error}: {reason}");
        }
    }
}

impl rdkafka::consumer::ConsumerContext for TransportContext {}

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

/// Drops `value` (a producer, consumer or admin client, whose destruction
/// blocks) on tokio's blocking pool, or right here outside a runtime.
pub(crate) fn drop_off_thread<T: Send + 'static>(value: T) {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => {
            drop(handle.spawn_blocking(move || drop(value)));
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

/// Maps an rdkafka error to the crate's error: fencing to [`Error::Fenced`],
/// a rejected setting to [`Error::InvalidArgument`], permanent and fatal
/// errors to [`Error::Fatal`], the rest to [`Error::Transient`].
pub(crate) fn kafka_error(context: &str, e: KafkaError) -> Error {
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
        _ => match e.rdkafka_error_code() {
            Some(code) if is_fenced_code(code) => Error::Fenced(format!("{context}: {e}")),
            Some(code) if is_permanent_code(code) => Error::fatal(context.to_owned(), e),
            _ => Error::transient(context.to_owned(), e),
        },
    }
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
}
