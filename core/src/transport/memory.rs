//! A deterministic in-memory transport with the coordinator's semantics.
