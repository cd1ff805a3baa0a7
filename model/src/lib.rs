//! # krabka-model
//!
//! The election, lease and fence of `krabka-coordination`, explored
//! exhaustively with the [`stateright`] model checker. Members decide with
//! the core's own code: each member's view of its role is the core's
//! [`krabka_coordination::RoleState`] built from real encoded records (the
//! core's codec), the next step is the core's [`krabka_coordination::evaluate`],
//! tokens are the core's [`krabka_coordination::FencingToken`] and compare
//! with its order. The acquire loop's rules beside `evaluate` are the
//! core's too ([`krabka_coordination::election::guards`], called through
//! [`rules`]); the rest of the leadership loop (which request follows which)
//! is the model's [`acquire`](mod@acquire) and [`held`](mod@held) steps.
//!
//! * [`state`]: what a state holds (members, the coordinator, the state
//!   partition as a log of open, committed and aborted transactions, the
//!   data topic, clocks, ghost observations).
//! * [`kafka`]: what one atomic step of Kafka is.
//! * [`model`]: the actions and the fairness rule (maximal progress).
//! * [`properties`]: the properties, each with its one-line statement.
//! * [`check`]: running a check; [`trace`]: readable counterexamples.
//! * [`scenarios`]: the bounded configurations the tests and `ci/model.sh`
//!   run.
//!
//! `docs/model.md` says what is modelled, what is not, and what a check
//! costs.

pub mod acquire;
pub mod check;
pub mod config;
pub mod faults;
pub mod held;
pub mod kafka;
pub mod model;
pub mod properties;
pub mod rules;
pub mod scenarios;
pub mod state;
pub mod steps;
pub mod trace;

pub use check::{check, find, Outcome};
pub use config::{member, Config, Faults, MemberSpec, Old, Proposed, TICK_MS};
pub use model::{Action, LeaseModel};
pub use state::State;
