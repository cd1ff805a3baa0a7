#!/usr/bin/env bash
# Leadership benchmarks on a real Kafka (examples/rust/benches/leadership/, the `leadership`
# bench of the krabka-examples crate, run with cargo bench): hand-over between member
# processes timed from outside, etcd's election timed the same way in the same run
# (Debian's etcd-server and etcd-client, a local 3-member etcd; installed with apt-get
# when missing), the in-process hand-over with every transport call timed (where the
# time goes), the first election of a new role, crash failover and describe_leadership.
# The numbers are recorded, with the machine and the command, in
# docs/benchmarks/leadership.md.
#
#   KRABKA_BOOTSTRAP=127.0.0.1:29092,127.0.0.1:29093,127.0.0.1:29094 \
#       ci/bench-leadership.sh --handover-trials 50     all of them on the 3-broker cluster
#   ci/bench-leadership.sh --only handover-procs --only etcd --handover-trials 50
#   ci/bench-leadership.sh --only crash-inproc --crash-trials 20    (both members in one process)
#
# Uses KRABKA_BOOTSTRAP when set, else starts (or reuses) the local cluster with
# ci/kafka.sh and stops it at the end only if this script started it. Each run appends one
# JSON line of results to target/bench-leadership.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
target_dir=${CARGO_TARGET_DIR:-target}
started=
cleanup() { if [[ -n $started ]]; then ci/kafka.sh stop 1 || true; fi; }
trap cleanup EXIT
if [[ -z ${KRABKA_BOOTSTRAP:-} ]]; then
    ci/kafka.sh provision >&2
    if ! ci/kafka.sh status 1 >/dev/null 2>&1; then started=1; fi
    # Brokers run as Kafka's own start scripts run them (a running cluster is reused as is).
    export KAFKA_JVM_PROFILE=${KAFKA_JVM_PROFILE:-stock}
    KRABKA_BOOTSTRAP=$(ci/kafka.sh start 1 | tail -n 1)
fi
if ! command -v etcd >/dev/null || ! command -v etcdctl >/dev/null; then
    echo "bench-leadership: installing etcd for the comparison (Debian's etcd-server, etcd-client)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q etcd-server etcd-client >&2 ||
        echo "bench-leadership: could not install etcd; the etcd part will fail (--only to skip it)" >&2
fi
# The bench profile is release with debug info; cargo builds the member binary with it.
cargo bench --quiet --no-run -p krabka-examples --bench leadership
# cargo runs a bench in its package's directory: the JSON path must be absolute.
json_out=$(realpath -m "$target_dir/bench-leadership.jsonl")
{
    echo "date:     $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "machine:  $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr)"
    echo "load:     $(cut -d ' ' -f 1-3 /proc/loadavg) (1, 5, 15 min) before the run"
    echo "kafka:    $KRABKA_BOOTSTRAP ($(ci/kafka.sh jvm "$KRABKA_BOOTSTRAP"))"
    echo "command:  ci/bench-leadership.sh $*"
    echo
} >&2
cargo bench --quiet -p krabka-examples --bench leadership -- \
    --bootstrap "$KRABKA_BOOTSTRAP" --json "$json_out" "$@"
