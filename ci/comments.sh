#!/usr/bin/env bash
# Rust comments state contracts and invariants: this fails, naming file:line,
# on an issue-tracker reference ("issue 9, item 8", "finding 3", "#123") or a
# date ("2026-12-06", "6 December 2026") in a comment of any tracked .rs file.
# History goes to git and CHANGELOG.md, measurements to docs/benchmarks/.
# What is allowed and why (RFC and KIP numbers, KAFKA-n, timestamps an API
# takes): ci/comments.py. Takes well under a second; needs python3 only.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 ci/comments.py --self-test
exec python3 ci/comments.py "$@"
