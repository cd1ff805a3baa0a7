//! `uniffi-bindgen`: uniffi's generator, pinned to the uniffi version of the
//! bindings crate, so the generated Kotlin and Swift always match the
//! scaffolding compiled into the library.
//!
//! ```text
//! cargo run -p krabka-coordination-uniffi-bindgen -- generate \
//!     --library target/debug/libkrabka_coordination_uniffi.so \
//!     --language kotlin --out-dir out/kotlin
//! ```

fn main() {
    uniffi::uniffi_bindgen_main();
}
