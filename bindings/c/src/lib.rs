//! # libkrabka_coordination: the C ABI of krabka-coordination
//!
//! A shared and a static library with the checked-in header
//! `include/krabka_coordination.h`, generated from this crate by cbindgen
//! (`cbindgen.toml`). Like the Python binding, it translates and never
//! re-implements: every encode, decode, partition and comparison is the
//! core's, every leadership operation the core `Client`'s, and the runtime,
//! the process-bound handles, the blocking calls, the argument checks and
//! their wording, the error-kind table and the event stream are the shared
//! binding crate's (`krabka_coordination_bindings`). What is left here is
//! about C: raw pointers, result codes, caller-owned buffers and a callback
//! thread.
//!
//! The conventions (in the style of rustls-ffi), stated once in the header:
//!
//! * every fallible function returns a [`ffi::krabka_result`] with explicit
//!   values: the core's error kinds keep the core's numbers, the ABI's own
//!   codes start at 100;
//! * outputs go through out-parameters; error text goes to a caller-owned
//!   [`ffi::krabka_error`] with its whole length reported;
//! * every export catches panics (`KRABKA_RESULT_PANIC`);
//! * a NULL pointer is refused (`KRABKA_RESULT_NULL_ARGUMENT`) before
//!   anything is read, except where the header says NULL means "none";
//! * every `*_free` accepts NULL; handles are opaque.
//!
//! * [`ffi`]: the conventions; [`codec`]: records, partitions, tokens;
//!   [`client`]: the client, acquire, describe, the role state;
//!   [`leadership`]: the held role; [`offsets`]: input offsets committed
//!   with guarded writes, and where a new leader resumes; [`events`]: the event callback;
//!   [`observe`]: watching roles without joining them (the view callback);
//!   [`runtime`]: the runtime and the blocking calls; [`testing`]: the
//!   core's test kit (an in-memory cluster on a manual clock).

// The names are the C names of the header (`krabka_client`, ...).
#![allow(non_camel_case_types)]
// Every export is `unsafe extern "C"` and documents its pointer contract in
// the header's words; the bodies check every pointer before use.
#![allow(clippy::missing_safety_doc)]

pub mod client;
pub mod codec;
pub mod events;
pub mod ffi;
pub mod lead;
pub mod leadership;
pub mod log;
pub mod metrics;
pub mod oauth;
pub mod observe;
pub mod offsets;
pub mod options;
pub mod runtime;
pub mod testing;
