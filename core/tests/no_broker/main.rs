//! Every suite of the core that needs no broker: the election rules, the
//! in-memory transport driven by `ManualClock`, the test kit, the clocks,
//! the codec's properties and the configuration checks. Each module is one
//! suite and its doc says what it covers.
//!
//! They are one test binary so that the test build compiles the shared
//! helpers (`world`, `captured`) and the core's generic code for the memory
//! transport once, and links once, instead of once per suite. A suite that
//! needs a process of its own (a global allocator, as `state.rs` has, or a
//! global subscriber) stays a binary of its own.

#[path = "../captured/mod.rs"]
mod captured;
#[path = "../world/mod.rs"]
mod world;

mod client;
mod clock;
mod close;
mod codec_props;
mod config_inputs;
mod describe_roles;
mod election;
mod error_kinds;
mod events;
mod faults;
mod first_lease;
mod held_back;
mod lead;
mod leadership;
mod observe;
mod offsets;
mod owned_epochs;
mod retry_events;
mod roster;
mod testing_kit;
mod write_bounds;
