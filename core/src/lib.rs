//! # krabka-coordination
//!
//! Leader election, leases and fencing tokens for active/standby processes on
//! Apache Kafka.
//!
//! ## Guarantees
//!
//! * **The epoch is the safety.** The leadership epoch is the producer epoch that
//!   Kafka's transaction coordinator mints for `transactional.id = <role>`. The
//!   coordinator persists it in the replicated `__transaction_state` log, never
//!   reuses a value, and the broker rejects every write carrying a superseded
//!   epoch (`INVALID_PRODUCER_EPOCH`, `PRODUCER_FENCED`). A deposed leader is
//!   fenced by the cluster; it does not have to notice anything itself.
//! * **The token is a pair.** [`FencingToken`] is `(producer_id, producer_epoch)`
//!   and orders by producer id first: the epoch is an `i16` that Kafka answers
//!   by rotating to a fresh producer id.
//! * **Anyone can ask who is authoritative** with one DescribeTransactions
//!   request once the transaction coordinator of the role is known.
//!
//! ## Non-guarantees
//!
//! * **The lease is timing, not safety.** The lease only decides when a standby
//!   stops waiting for a quiet holder. A wrong lease makes a failover early or
//!   late; it never makes two writers authoritative.
//! * **Clock skew** between members moves the failover time by the size of the
//!   skew. No clock takes part in the fence, so skew never affects safety. An
//!   operator who needs a bound on failover time needs a bound on skew.
//! * **Durability** of the state records rests on the topic configuration
//!   (`acks=all` here, `min.insync.replicas >= 2` by the operator), not on this
//!   library.
//!
//! ## Layout
//!
//! * [`codec`]: the frozen record layouts (byte-exact with the other ports).
//! * [`partition`]: the partition of a role (Kafka's murmur2, `toPositive`).
//! * [`token`]: the fencing token.
//! * [`state`]: the roster and lease of a role, built from the log.
//! * [`election`]: the pure election step.
//! * [`clock`]: the system clock and a manual clock for tests.
//! * [`client`]: the [`client::Client`] every binding builds on: shared Kafka
//!   clients, acquire, describe, topic checks.
//! * [`leadership`]: acquire, hold, renew, resign; [`events`]: what a member
//!   does, as typed events.
//! * [`observe`]: watching roles without joining them.
//! * `input` (feature `kafka`): a read_committed input reader bound to a
//!   leadership's term, for a leader that consumes and produces.
//! * [`transport`]: the four transport traits, the in-memory transport and
//!   (feature `kafka`) the rdkafka transport.
//! * [`testing`]: a test cluster in memory, with processes to crash, pause
//!   and cut off and a clock the test drives, for testing leader code
//!   without Kafka.

// Production functions fit on a screen: at most the lines clippy.toml
// allows (tests aside).
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod client;
pub mod clock;
pub mod codec;
pub mod election;
pub mod error;
pub mod events;
pub mod human;
#[cfg(feature = "kafka")]
pub mod input;
mod join;
pub mod leadership;
pub mod metrics;
pub mod observe;
pub mod partition;
pub mod remedy;
pub mod rfc3339;
pub mod state;
pub mod testing;
pub mod token;
pub mod transport;

pub use clock::{Clock, ManualClock, Sleep, SystemClock};
pub use codec::{
    decode_key, decode_lease, decode_lease_ref, decode_registration, decode_registration_ref,
    encode_key, encode_lease, encode_registration, is_tombstone, Key, KeyKind, Lease, Registration,
    MAX_STRING_LEN,
};
pub use election::{challenger_rank, evaluate, ElectionOptions, Step};
pub use error::{EncodeError, Error, ErrorKind, FormatError, Part, Result, SharedError};
pub use partition::{murmur2, role_partition};
pub use remedy::{Remedied, Remedy, Spelling};
pub use rfc3339::{rfc3339, Rfc3339};
pub use state::{RoleState, RosterEntry};
pub use token::{FencingToken, TokenParseError, NO_EPOCH};
pub use transport::Record;

/// The name of the compacted topic that holds every role's registrations and lease.
pub const STATE_TOPIC: &str = "__coordination_state";

/// The README's Rust quick start, run by `cargo test --doc` against the
/// one-node cluster of `ci/kafka.sh` (`127.0.0.1:19092`, with the topic
/// `billing-out`: `ci/rust-tests.sh` makes both): a quick start that stops
/// working fails CI. The README's other blocks are not Rust, so rustdoc
/// leaves them to `ci/snippets.py`.
#[cfg(all(doctest, feature = "kafka"))]
#[doc = include_str!("../../README.md")]
pub struct ReadmeQuickStart;
