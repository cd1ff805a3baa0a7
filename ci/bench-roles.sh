#!/usr/bin/env bash
# Many roles held by one process (examples/rust/benches/roles.rs, the `roles` bench of
# the krabka-examples crate): for each role count, one Client acquires that many roles
# at once, holds them (lease 10 s, renew every 3 s by default) and resigns them, while
# the process samples its threads, descriptors, sockets and memory every second and
# times its renewals. The numbers are recorded in docs/benchmarks/scale.md.
#
#   ci/bench-roles.sh                              1, 10 and 100 roles, 120 s each
#   ci/bench-roles.sh --roles 1000 --hold-s 120
#
# Uses KRABKA_BOOTSTRAP_3 (else KRABKA_BOOTSTRAP) when set, else starts (or reuses) the
# local 3-node cluster with ci/kafka.sh and stops it at the end only if this script
# started it. Each run appends one JSON line per role count to target/bench-roles.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
target_dir=${CARGO_TARGET_DIR:-target}
started=
cleanup() { if [[ -n $started ]]; then ci/kafka.sh stop 3 || true; fi; }
trap cleanup EXIT
bootstrap=${KRABKA_BOOTSTRAP_3:-${KRABKA_BOOTSTRAP:-}}
if [[ -z $bootstrap ]]; then
    ci/kafka.sh provision >&2
    if ! ci/kafka.sh status 3 >/dev/null 2>&1; then started=1; fi
    # Brokers run as Kafka's own start scripts run them (a running cluster is reused as is).
    export KAFKA_JVM_PROFILE=${KAFKA_JVM_PROFILE:-stock}
    bootstrap=$(ci/kafka.sh start 3 | tail -n 1)
fi
cargo bench --quiet --no-run -p krabka-examples --bench roles
json_out=$(realpath -m "$target_dir/bench-roles.jsonl")
{
    echo "date:     $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "machine:  $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr)"
    echo "load:     $(cut -d ' ' -f 1-3 /proc/loadavg) (1, 5, 15 min) before the run"
    echo "kafka:    $bootstrap ($(ci/kafka.sh jvm "$bootstrap"))"
    echo "command:  ci/bench-roles.sh $*"
    echo
} >&2
# The brokers' CPU over the run: every Kafka broker JVM on this machine (on loopback, the
# cluster under test), user and system time from /proc, so a run can tell the client's
# limit from the brokers'.
broker_ticks() {
    local t=0 p v
    for p in $(pgrep -f 'kafka\.Kafka' || true); do
        v=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | awk '{print $12 + $13}') || continue
        t=$((t + ${v:-0}))
    done
    echo "$t"
}
brokers=$(pgrep -fc 'kafka\.Kafka' || true)
# And, when the cluster serves JMX (KAFKA_JMX=1), the brokers' own request latencies.
snap=$(mktemp)
trap 'rm -f "$snap"; cleanup' EXIT
jmx=
if [[ $bootstrap == 127.0.0.1:29092* ]] && ci/broker-requests.sh --save "$snap" >/dev/null 2>&1; then jmx=1; fi
ticks0=$(broker_ticks) wall0=$SECONDS
cargo bench --quiet -p krabka-examples --bench roles -- --bootstrap "$bootstrap" --json "$json_out" "$@"
ticks1=$(broker_ticks) wall=$((SECONDS - wall0))
if [[ -n $jmx ]]; then
    echo "the brokers' own request latencies during the run (ms; p50 and p99 the broker's recent reservoir):" >&2
    ci/broker-requests.sh --since "$snap" >&2 || true
fi
awk -v t=$((ticks1 - ticks0)) -v hz="$(getconf CLK_TCK)" -v w="$wall" -v n="${brokers:-0}" -v c="$(nproc)" \
    'BEGIN { s = t / hz; printf "brokers:  %d broker processes used %.0f CPU-seconds in the %d s of the run: %.2f of %d cores on average\n", n, s, w, (w > 0 ? s / w : 0), c }' >&2
