#!/usr/bin/env bash
# clippy over the workspace, every target, warnings denied.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo clippy --workspace --all-targets -- -D warnings
cargo clippy -p krabka-coordination --no-default-features --all-targets -- -D warnings
