#!/usr/bin/env bash
# Modules along real seams: this fails, naming the file and its count, on a
# production .rs file of core/src, kafka/src or kafka/backoff/src over 500
# lines (inline test modules and tests.rs files aside) whose module doc does
# not say why with a line `//! Long module: <reason>`. Functions over 80
# lines are clippy's too_many_lines (clippy.toml). Details: ci/lengths.py.
# Takes well under a second; needs python3 only.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 ci/lengths.py --self-test
exec python3 ci/lengths.py "$@"
