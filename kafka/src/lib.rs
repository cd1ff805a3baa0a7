//! The Kafka protocol client of krabka-coordination.
//!
//! It knows brokers, connections, SASL and TLS, requests and Kafka's
//! errors; it knows nothing of roles, leases or fencing tokens (the
//! `krabka-coordination` core builds those on top of it, and reads its
//! settings from librdkafka-style keys). It speaks the protocol through the
//! `kafka-protocol` codec over tokio TCP streams, TLS through rustls.
//!
//! * [`Client`]: the connections to a cluster and every request.
//! * [`Settings`], [`security`]: what a client is built from.
//! * [`oauth`]: OAUTHBEARER tokens from a caller's provider.
//! * [`frame_check`]: the bound on what a response frame may make the
//!   decoder allocate, checked before it decodes.
//! * [`records`]: the record batches of a Fetch answer, read with every
//!   length checked first, compressed ones decompressed within a bound.
//! * [`Client::read_committed`]: a read_committed reader's Fetch of
//!   assigned partitions, and [`Client::reset_offset`] for its reset
//!   policy.
//! * [`Error`]: what failed, and whether a retry may mend it.

//!
//! Without its default feature `client`, the crate is [`codes`],
//! [`frame_check`], [`records`] and [`Error`] alone: no tokio, no TLS.

// Production functions fit on a screen: at most the lines clippy.toml
// allows (tests aside).
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

#[cfg(feature = "client")]
pub mod client;
pub mod codes;
pub mod error;
pub mod frame_check;
pub mod human;
#[cfg(feature = "client")]
pub mod oauth;
pub mod records;
#[cfg(feature = "client")]
mod sasl;
#[cfg(feature = "client")]
pub mod security;
#[cfg(feature = "client")]
pub mod settings;
#[cfg(feature = "client")]
mod wire;

#[cfg(all(feature = "client", any(test, feature = "fake-broker")))]
pub mod fake_broker;

#[cfg(feature = "client")]
pub use client::{
    ActiveProducer, BumpAnswer, Client, Committed, Fetched, OffsetToCommit, OutOfRange,
    PartitionCommitted, PartitionRead, ReadError, ReadFrom, Reset, TransactionDescription,
    TxnError,
};
pub use error::{check_group_id, check_transactional_id, quote, Error, ProducerEpoch, Result};
#[cfg(feature = "client")]
pub use settings::Settings;

#[cfg(feature = "client")]
use std::time::Duration;

/// The instant `d` from now, or a far future one for a `d` too large to
/// add: an absurd timeout never panics.
#[cfg(feature = "client")]
pub fn deadline_in(d: Duration) -> tokio::time::Instant {
    /// About 30 years, as tokio's own far future.
    const FAR: Duration = Duration::from_secs(86_400 * 365 * 30);
    let now = tokio::time::Instant::now();
    now.checked_add(d.min(FAR))
        .unwrap_or_else(|| now + Duration::from_secs(86_400))
}
