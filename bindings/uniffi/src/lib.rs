//! # krabka-coordination-uniffi
//!
//! The uniffi bindings of `krabka-coordination`: one shared library and the
//! Kotlin and Swift sources uniffi generates from it (proc-macros, no UDL).
//! Every rule lives in the core; this crate only translates values, errors
//! and futures:
//!
//! * [`codec`]: the record layouts (encode and decode of a key, a
//!   registration, a lease), the partition of a role, Kafka's murmur2, and
//!   fencing tokens (order, `NO_EPOCH`).
//! * [`client`]: the core client built once from Kafka settings (passed
//!   through as they are), acquire, describe, the state topic.
//! * [`leadership`]: the held leadership of a role: its token, guarded
//!   writes, the end of the term and why, resign.
//! * [`offsets`]: a consumer group's input offsets committed in a guarded
//!   write's transaction, and the offsets a new leader resumes from.
//! * [`lead`]: the leader loop, driven one term at a time by the
//!   hand-written Kotlin `Client.lead`.
//! * [`events`]: the event stream of a held leadership, ending with its
//!   term, and of an acquire from the member's registration on.
//! * [`observe`]: watching roles without joining them: an observer of
//!   role views (who leads, with which token, the roster).
//! * [`log`]: the core's log records handed to a host [`Logger`], from the
//!   library's own log thread.
//! * [`metrics`]: the core's metrics, a snapshot and the Prometheus text.
//! * [`oauth`]: a host's OAUTHBEARER token provider, in the client options.
//! * [`fence`]: the fence of SQL stores for a host's own database driver
//!   (the Kotlin `KrabkaFence` over JDBC): the statements and the rule on
//!   a refused token, both the stores crate's.
//! * [`testing`]: the core's test kit: an in-memory cluster with a manual
//!   clock, whose processes have a [`Client`] and the faults a test puts
//!   them through.
//! * [`error`]: one error enum whose cases follow the core's error kinds
//!   (fenced, and each malformed record part, are cases of their own).
//!
//! Async functions run on the binding's tokio runtime (built on first use)
//! and surface as Kotlin `suspend` functions and Swift `async` functions.
//! uniffi catches a panic at the boundary; no input is unwrapped here.

pub mod client;
pub mod codec;
pub mod error;
pub mod events;
pub mod fence;
pub mod lead;
pub mod leadership;
pub mod log;
pub mod metrics;
pub mod oauth;
pub mod observe;
pub mod offsets;
mod runtime;
pub mod testing;

pub use client::{AcquireOptions, Client, ClientOptions, TopicOptions, TopicReport};
pub use codec::{FencingToken, FencingTokenParts, Key, KeyKind, Lease, Registration, RosterEntry};
pub use error::{ErrorKind, KrabkaError};
pub use events::{AcquireEvents, EventStream, LeadershipEvent};
pub use fence::{FenceStatement, FenceStatements, FenceStore};
pub use lead::{LeaderLoop, Term};
pub use leadership::{Header, Leadership, LeadershipStatus, OutRecord, RoleState, TermEnd};
pub use log::{set_logger, LogField, LogLevel, LogRecord, Logger};
pub use metrics::{metrics, metrics_text, MetricBucket, MetricKind, MetricSample};
pub use oauth::{OAuthToken, OAuthTokenProvider};
pub use observe::{Change, Observer, RoleView};
pub use offsets::{CommittedOffset, ConsumedOffsets, InputOffset, InputPartitions};
pub use testing::{GuardedWrite, TestCluster, TestProcess, TestProcessState};

uniffi::setup_scaffolding!("krabka_coordination");
