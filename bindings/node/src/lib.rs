//! `krabka-coordination` for Node.js: the napi-rs addon of the
//! `krabka-coordination` core.
//!
//! The binding translates; it never re-implements. Every encode, decode,
//! partition and comparison calls the core crate, every leadership operation
//! is the core `Client`'s, and what every binding needs (the runtime
//! holder, process-bound handles, argument wording, options, the error-kind
//! table, the event stream) is the shared crate's
//! (`krabka_coordination_bindings`). What is left here is about Node:
//! promises settled on the JavaScript thread, `bigint` and `Uint8Array`,
//! and error objects. The package (`index.js`, `lib/`) re-exports the public
//! names and adds the thin JavaScript classes (`Client`, `Leadership`, the
//! error classes) around the internal native ones.
//!
//! * [`values`], [`functions`]: the conformance surface (records, tokens,
//!   partitions).
//! * [`client`], [`leadership`], [`events`], [`reports`]: the leadership
//!   API, each operation once, as a promise.
//! * [`observe`]: the observer of roles (views of who leads), as promises.
//! * [`runtime`]: the runtime holder and the promise of a future.
//! * [`testing`]: the core's test kit (an in-memory cluster, a manual
//!   clock, processes to crash or pause), behind `krabka-coordination/testing`.
//! * [`offsets`]: the input offsets of a guarded write and a group's
//!   committed offsets, as plain objects.
//! * [`error`], [`convert`]: errors and argument conversion.
//!
//! Nothing here blocks the JavaScript thread on Kafka: every operation that
//! talks to the cluster runs on the runtime and settles a promise.

pub mod client;
pub mod convert;
pub mod error;
pub mod events;
pub mod fence;
pub mod functions;
pub mod lead;
pub mod leadership;
pub mod log;
pub mod metrics;
pub mod oauth;
pub mod observe;
pub mod offsets;
pub mod options;
pub mod reports;
pub mod runtime;
pub mod testing;
pub mod values;
