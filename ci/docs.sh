#!/usr/bin/env bash
# The API documentation of the core, built as users read it: rustdoc of the
# crate krabka-coordination (no dependencies), every warning an error. The
# workspace lints warn on `missing_docs`, so a public item without a doc
# comment fails here, as do broken intra-doc links and bad code blocks.
# The other APIs are checked where they are built: the Python docstrings
# against the stub (bindings/python/tests/test_docs.py, ci/python.sh), the
# doc comments of the Node index.d.ts (ci/node.sh) and of the C header
# (ci/c.sh).
#
# Usage: ci/docs.sh    -> target/doc/krabka_coordination/index.html
set -euo pipefail
cd "$(dirname "$0")/.."
RUSTDOCFLAGS="${RUSTDOCFLAGS:-} -D warnings -D missing_docs -D rustdoc::missing_crate_level_docs" \
    cargo doc --quiet -p krabka-coordination -p krabka-kafka --no-deps
# The fenced-store helpers, with both drivers.
RUSTDOCFLAGS="${RUSTDOCFLAGS:-} -D warnings -D missing_docs -D rustdoc::missing_crate_level_docs" \
    cargo doc --quiet -p krabka-coordination-stores --features postgres,sqlite --no-deps
echo "core and Kafka client API docs: ${CARGO_TARGET_DIR:-target}/doc/krabka_coordination/index.html, .../krabka_kafka/index.html (no warnings, every public item documented)"
