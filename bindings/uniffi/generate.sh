#!/usr/bin/env bash
# Generates the Kotlin and Swift sources of the uniffi bindings from the built
# library (uniffi's library mode: the interface is read from the metadata the
# proc-macros compiled into it, so the sources always match the library).
#
# Usage: bash bindings/uniffi/generate.sh [KOTLIN_OUT_DIR]
#   Builds krabka-coordination-uniffi and the workspace's uniffi-bindgen
#   (CARGO_TARGET_DIR is honoured; KRABKA_UNIFFI_PROFILE=release for an
#   optimised library), writes the Swift sources to bindings/uniffi/swift/
#   (checked in) and the Kotlin sources to KOTLIN_OUT_DIR (default
#   target/uniffi/kotlin). Prints the path of the shared library last.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
PROFILE="${KRABKA_UNIFFI_PROFILE:-debug}"
KOTLIN_OUT="${1:-$TARGET/uniffi/kotlin}"
SWIFT_OUT="$ROOT/bindings/uniffi/swift"

flags=()
[ "$PROFILE" = release ] && flags=(--release)
# Two builds: together, the generator's dependencies (uniffi's cli) would
# turn on features of the library's and so build the core once more than the
# other bindings do (see bindings/hack).
(cd "$ROOT" && cargo build "${flags[@]}" -p krabka-coordination-uniffi >&2)
(cd "$ROOT" && cargo build "${flags[@]}" -p krabka-coordination-uniffi-bindgen >&2)
case "$(uname -s)" in
    Darwin) LIB="$TARGET/$PROFILE/libkrabka_coordination_uniffi.dylib" ;;
    *) LIB="$TARGET/$PROFILE/libkrabka_coordination_uniffi.so" ;;
esac
BINDGEN="$TARGET/$PROFILE/uniffi-bindgen"

rm -rf "$KOTLIN_OUT"
mkdir -p "$KOTLIN_OUT" "$SWIFT_OUT"
# --no-format: the output must not depend on whether ktlint or swift-format
# happens to be installed.
(cd "$ROOT" && "$BINDGEN" generate --no-format --library "$LIB" --language kotlin --out-dir "$KOTLIN_OUT" >&2)
# Error messages: the detail itself, not uniffi's field=value form.
bash "$ROOT/bindings/uniffi/kotlin-messages.sh" "$KOTLIN_OUT"
(cd "$ROOT" && "$BINDGEN" generate --no-format --library "$LIB" --language swift --out-dir "$SWIFT_OUT" >&2)
echo "$LIB"
