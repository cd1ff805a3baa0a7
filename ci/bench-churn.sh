#!/usr/bin/env bash
# A soak of one process whose roles come and go (examples/rust/benches/churn.rs, the `churn`
# bench of the krabka-examples crate): a steady set of roles held and renewing for the whole
# run while a fresh role name is acquired every ~150 ms, held ~3 s and resigned, several in
# flight at once. The process samples its resident memory, descriptors, threads, tokio tasks
# and CPU, and the per-role maps (the Kafka client's coordinator cache, the transport's mint
# locks, the keys of the state readers' views), and reports the first and last windows after
# the warm-up, the maxima and the slopes, and the failures. The record is
# docs/benchmarks/churn.md.
#
#   ci/bench-churn.sh                                 an hour (--duration-s 3600), 64 steady roles
#   ci/bench-churn.sh --duration-s 120                a 2-minute check of the set-up
#   ci/bench-churn.sh --duration-s 3600 --steady 100 --churn-every-ms 100
#
# Every run starts a new 3-node cluster (its data deleted first: ci/kafka.sh clean 3, then
# started with KAFKA_JVM_PROFILE=stock) on KAFKA_PORT_3 (ci/kafka.sh help), and stops it at
# the end (KEEP_CLUSTER=1 leaves it running). Every other argument goes to the bench (its
# --help lists them). The log goes to BENCH_LOG_DIR (default target/) as
# bench-churn-<UTC time>.log, beside the samples (.csv) and the result (.json).
set -euo pipefail
cd "$(dirname "$0")/.."
case ${1:-} in
-h | --help)
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 0
    ;;
esac
duration=3600
args=()
while (($#)); do
    case $1 in
    --duration-s)
        duration=${2:?--duration-s needs a value}
        shift 2
        ;;
    *)
        args+=("$1")
        shift
        ;;
    esac
done
log_dir=${BENCH_LOG_DIR:-target}
mkdir -p "$log_dir"
stem="$log_dir/bench-churn-$(date -u +%Y%m%dT%H%M%SZ)"
exec > >(tee "$stem.log") 2>&1

# The build first, so that none runs beside the measurement.
cargo bench --quiet --no-run -p krabka-examples --bench churn

cleanup() { if [[ -z ${KEEP_CLUSTER:-} ]]; then ci/kafka.sh stop 3 || true; fi; }
trap cleanup EXIT
export KAFKA_JVM_PROFILE=${KAFKA_JVM_PROFILE:-stock}
ci/kafka.sh provision >&2
ci/kafka.sh clean 3
bootstrap=$(ci/kafka.sh start 3 | tail -n 1)
echo "date:     $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "machine:  $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr)"
echo "load:     $(cut -d ' ' -f 1-3 /proc/loadavg) (1, 5, 15 min) before the run"
echo "kafka:    $bootstrap, a new cluster ($(ci/kafka.sh jvm "$bootstrap"))"
echo "commit:   $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- core kafka examples || echo ' (with local changes)')"
echo "command:  ci/bench-churn.sh --duration-s $duration ${args[*]}"
echo
cargo bench --quiet -p krabka-examples --bench churn -- --bootstrap "$bootstrap" \
    --duration-s "$duration" --samples "$stem.csv" --json "$stem.json" "${args[@]}"
echo "load:     $(cut -d ' ' -f 1-3 /proc/loadavg) (1, 5, 15 min) after the run"
echo "log:      $stem.log (samples $stem.csv, result $stem.json)"
