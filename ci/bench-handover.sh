#!/usr/bin/env bash
# Hand-over on the local 3-broker cluster in both harnesses, cold and then warm, with etcd's
# election measured the same way in the same run. One command:
#
#   ci/bench-handover.sh                  a new cluster, cold, warm-up, warm
#   ci/bench-handover.sh --keep-data      restart the cluster with the topics it holds
#   ci/bench-handover.sh --no-restart     the cluster as it is (its state is printed)
#
# The harnesses (both the `handover-procs` part of the `leadership` bench, member processes
# timed from outside: `resign` written to the leader's stdin -> the next member's `elected`
# line; etcd: SIGINT to the leading `etcdctl elect` -> the next one's first line):
#
#   project: 2 members, lease 2000 ms, renew 500 ms, stagger 500 ms (docs/benchmarks/leadership.md)
#   user:    3 members, lease 3000 ms, renew 1000 ms, stagger 1000 ms (a user's conditions)
#
# The steps:
#   1. the 3-broker cluster's data deleted (ci/kafka.sh clean 3), so that every run starts
#      from the same state (the topics of earlier benchmarks and tests add to the brokers'
#      work: docs/benchmarks/leadership.md); then started with Kafka's own JVM options (KAFKA_JVM_PROFILE=stock) and left
#      alone for COLD_WAIT_S (60) seconds. The cluster's topic and partition counts are
#      printed before the cold part;
#   2. cold: both harnesses, TRIALS (50) hand-overs each, etcd beside each;
#   3. warm-up: WARMUP_ROLES (100) roles renewing for WARMUP_S (120) seconds (ci/bench-roles.sh,
#      lease 10 s, renew 3 s), then TRIALS hand-overs of the user harness not counted;
#   4. warm: both harnesses again, etcd beside each.
#
# Each harness also runs the in-process hand-over (`handover`: two members in the bench's own
# process, its transport calls timed) for where the time goes: the resign's tombstone
# transaction, the successor's wake-up, its checks, the mint and the first lease.
#
# Around each harness the brokers' own request latencies are printed (ci/broker-requests.sh:
# Kafka's RequestMetrics over JMX, so the cluster is started with KAFKA_JMX=1): how long the
# brokers took to answer the Produce, AddPartitionsToTxn, EndTxn, InitProducerId, fetch and
# marker requests of that part, cold and warm, beside what the clients saw.
#
# Everything goes to stdout and to target/bench-handover-<UTC time>.log; each part also
# appends its JSON line to target/bench-leadership.jsonl (target/bench-roles.jsonl for the
# warm-up). Needs etcd (ci/bench-leadership.sh installs Debian's etcd-server and etcd-client).
set -euo pipefail
cd "$(dirname "$0")/.."
restart=1 clean=1
for arg in "$@"; do
    case $arg in
    --no-restart) restart= clean= ;;
    --keep-data) clean= ;;
    -h | --help)
        sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
        exit 0
        ;;
    *)
        echo "bench-handover: unknown argument $arg (see --help)" >&2
        exit 2
        ;;
    esac
done
TRIALS=${TRIALS:-50}
COLD_WAIT_S=${COLD_WAIT_S:-60}
WARMUP_S=${WARMUP_S:-120}
WARMUP_ROLES=${WARMUP_ROLES:-100}
target_dir=${CARGO_TARGET_DIR:-target}
mkdir -p "$target_dir"
log="$target_dir/bench-handover-$(date -u +%Y%m%dT%H%M%SZ).log"
exec > >(tee "$log") 2>&1

step() { printf '\n=== %s (%s UTC)\n' "$*" "$(date -u +%H:%M:%S)"; }
# Builds first, so that no build runs beside a measurement.
step "builds (the leadership and roles benches, release with debug info)"
cargo bench --quiet --no-run -p krabka-examples --bench leadership --bench roles

export KAFKA_JVM_PROFILE=${KAFKA_JVM_PROFILE:-stock} KAFKA_JMX=1
if [[ -n $restart ]]; then
    if [[ -n $clean ]]; then
        step "a new 3-broker cluster ($KAFKA_JVM_PROFILE JVM profile; the old one's data deleted)"
        ci/kafka.sh clean 3
    else
        step "restarting the 3-broker cluster ($KAFKA_JVM_PROFILE JVM profile, its data kept)"
        ci/kafka.sh stop 3 || true
    fi
    ci/kafka.sh start 3 | tail -n 1
    echo "bench-handover: the brokers started at $(date -u +%H:%M:%S) UTC; left alone for ${COLD_WAIT_S} s"
    sleep "$COLD_WAIT_S"
else
    ci/kafka.sh start 3 | tail -n 1
    echo "bench-handover: --no-restart: the cluster as it is (not a cold measurement)"
fi
bootstrap=127.0.0.1:29092,127.0.0.1:29093,127.0.0.1:29094
export KRABKA_BOOTSTRAP=$bootstrap KRABKA_BOOTSTRAP_3=$bootstrap
topics=$(ci/kafka.sh tool topics --bootstrap-server "$bootstrap" --list 2>/dev/null | grep -c . || true)
partitions=$(ci/kafka.sh tool topics --bootstrap-server "$bootstrap" --describe 2>/dev/null | grep -c 'Partition: ' || true)
echo "bench-handover: the cluster holds $topics topics, $partitions partitions"

project=(--lease-ms 2000 --renew-ms 500 --stagger-ms 500 --members 2)
user=(--lease-ms 3000 --renew-ms 1000 --stagger-ms 1000 --members 3)
snap=$(mktemp)
trap 'rm -f "$snap"' EXIT
# measured CMD...: runs CMD between two looks at the brokers' request metrics, then prints
# what the brokers measured of the requests CMD made (a cluster without JMX: a note only)
measured() {
    local jmx=1
    ci/broker-requests.sh --save "$snap" >/dev/null || jmx=
    "$@"
    if [[ -n $jmx ]]; then
        echo "the brokers' own request latencies during this part (ms; p50 and p99 the broker's recent reservoir):"
        ci/broker-requests.sh --since "$snap" || true
    else
        echo "(no broker request metrics: the cluster was not started with KAFKA_JMX=1)"
    fi
}
both() { # both LABEL: the two harnesses, each with etcd beside it
    step "$1: the project's harness (2 members, lease 2000, renew 500, stagger 500)"
    measured ci/bench-leadership.sh --only handover-procs --only etcd --only handover --handover-trials "$TRIALS" "${project[@]}"
    step "$1: the user's harness (3 members, lease 3000, renew 1000, stagger 1000)"
    measured ci/bench-leadership.sh --only handover-procs --only etcd --only handover --handover-trials "$TRIALS" "${user[@]}"
}

both cold
step "warm-up: $WARMUP_ROLES roles renewing for $WARMUP_S s, then $TRIALS hand-overs not counted"
ci/bench-roles.sh --roles "$WARMUP_ROLES" --hold-s "$WARMUP_S"
ci/bench-leadership.sh --only handover-procs --handover-trials "$TRIALS" "${user[@]}" >/dev/null
both warm
step "done: the log is $log"
