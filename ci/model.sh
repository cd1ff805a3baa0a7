#!/usr/bin/env bash
# The model check of the protocol (model/, docs/model.md), release build:
# explores every scenario at a size and prints each one's distinct state
# count, time and verdicts, then the totals. Fails when a verdict differs
# from the expected one: the current core's recorded findings, or none with
# the proposed fixes.
#
#   ci/model.sh --ci     size 0 (the bounded check), current core and proposed
#                        fixes: what the README's test command runs
#   ci/model.sh [SIZE]   a larger configuration (default 1): each size adds two
#                        ticks of horizon, size 2 a fault, size 3 faults between
#                        any two steps (see model/src/scenarios.rs)
#
# Further arguments go to the checker: --proposed, --dfs, --threads N,
# --traces, scenario names. Sizes from 2 on search depth first (far less
# memory). The checker runs under a memory limit (KRABKA_MODEL_MEMORY_KB,
# default 8 GB of address space) so a large size cannot starve the machine.
set -euo pipefail
cd "$(dirname "$0")/.."

ci=false
size=1
if [[ ${1:-} == --ci ]]; then
    ci=true
    size=0
    shift
elif [[ ${1:-} =~ ^[0-9]+$ ]]; then
    size=$1
    shift
fi

cargo build --quiet --release -p krabka-model --bin krabka-model
checker="${CARGO_TARGET_DIR:-target}/release/krabka-model"
search=()
if ((size >= 2)); then search=(--dfs); fi

run() {
    (
        ulimit -v "${KRABKA_MODEL_MEMORY_KB:-8000000}"
        "$checker" --size "$size" "${search[@]}" "$@"
    )
}

echo "model check: size $size, $(nproc) cores ($(uname -m)), $(date -u +%Y-%m-%dT%H:%MZ)"
start=$SECONDS
if $ci; then
    echo "-- current core (the recorded findings are expected)"
    run "$@"
    echo "-- with the proposed fixes (every property holds)"
    run --proposed "$@"
else
    run "$@"
fi
echo "wall time $((SECONDS - start))s"
