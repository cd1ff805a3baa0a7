#!/usr/bin/env bash
# rustfmt over the workspace (check only).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
