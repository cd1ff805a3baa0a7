//! # krabka-coordination-bindings
//!
//! What every binding of `krabka-coordination` (Python, Node, the C ABI and
//! the uniffi one) would otherwise write again, each slightly differently.
//! A binding keeps only what is about its host language: its interpreter
//! lock, signals, promises or awaitables, and exception classes.
//!
//! * [`runtime`]: the tokio runtime, built on first use, rebuilt in a forked
//!   child; [`per_process`]: the lock-free per-process cell under it.
//! * [`process_bound`]: handles usable only in the process that made them,
//!   with a clear error in a forked child.
//! * [`blocking`]: a blocking call that stays interruptible (Ctrl-C), with
//!   a cancellation token and a bounded grace on interrupt.
//! * [`args`]: argument checks with one wording for every language;
//!   [`options`]: the options of the binding surface (timings, the state
//!   topic's production defaults, partitions, the client's timeouts, Kafka
//!   settings).
//! * [`errors`]: the error-kind table every binding maps from (never from
//!   message text), the record part names, the cause chain.
//! * [`client`]: the core client built once from the host's settings, with
//!   every operation as a `'static` future.
//! * [`events`]: the event stream of a held leadership, ending with its
//!   term; the stream of an acquire, from the member's registration to the
//!   end of the term it wins; and a flat view of an event.
//! * [`log`]: the core's `tracing` events forwarded to the host's logging,
//!   from a thread that may wait for the host's lock.
//! * [`lead`]: the core's leader loop, driven one term at a time by a
//!   binding whose work runs in the host language.
//! * [`observe`]: the core's observer behind a handle whose `next` is a
//!   `'static` future and that any thread may close.
//! * [`metrics`]: the recorder of the core's metrics, read as a snapshot or
//!   as Prometheus text.
//! * [`suggest`]: the nearest known name to a misspelt setting or option.
//!
//! Nothing here depends on a host-language crate (pyo3, napi, uniffi).

pub mod args;
pub mod blocking;
pub mod client;
pub mod errors;
pub mod events;
pub mod lead;
pub mod log;
pub mod metrics;
pub mod observe;
pub mod options;
pub mod per_process;
pub mod process_bound;
pub mod runtime;
pub mod suggest;

pub use args::{ArgError, ArgErrorKind, Field};
pub use blocking::{block_on, Blocked, Interruptible, OnInterrupt};
pub use client::KafkaClient;
pub use events::{AcquireEventStream, AcquireFeed, AcquireOutcome, EventStream, EventView};
pub use lead::{LeadHandle, LoopEventStream};
pub use observe::ObserverHandle;
pub use options::{LeadershipArgs, TimeoutArgs, TopicArgs};
pub use per_process::PerProcess;
pub use process_bound::ProcessBound;
pub use runtime::RuntimeHolder;
