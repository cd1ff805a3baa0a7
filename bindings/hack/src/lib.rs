//! Feature unification for the bindings' builds; see `Cargo.toml`. No code.
