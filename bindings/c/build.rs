//! Gives the shared library the soname `libkrabka_coordination.so.<major>`,
//! so programs linked against it record the ABI's major version.

fn main() {
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_else(|_| "0".to_owned());
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libkrabka_coordination.so.{major}");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
