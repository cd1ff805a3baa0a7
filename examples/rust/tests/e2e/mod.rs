//! The end-to-end tests' scene (a role, its member processes, a third
//! party) and the data-topic check.

pub mod data_log;
pub mod scene;
