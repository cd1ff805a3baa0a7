#!/usr/bin/env bash
# Times `krabka roles --json` as a separate process on a state topic of many roles; the
# numbers are recorded, with the machine and the command, in docs/benchmarks/cli.md.
#
#   cli/bench-roles.sh                                   1,000 roles x 3 members, 1 lease each
#   cli/bench-roles.sh --roles 10000 --runs 10
#   cli/bench-roles.sh --roles 1000 --renewals 20        20 lease records per role (history)
#   cli/bench-roles.sh --replication 3 -b 127.0.0.1:29092,127.0.0.1:29093,127.0.0.1:29094
#   cli/bench-roles.sh --krabka /tmp/old/krabka         time another build on the same topic
#
# The topic, krabka-bench-roles-<roles>x<members>x<renewals>-rf<replication>, is created with
# `krabka topic ensure` and filled by the fill_state example (cli/examples/fill_state.rs)
# unless `krabka roles` already lists every role in it, so a second run only times. Kafka:
# -b, else KRABKA_BOOTSTRAP, else the local 1-node cluster of ci/kafka.sh (reused when it
# runs; never stopped). Every run's output is checked: ROLES roles, none unreadable.
set -euo pipefail
cd "$(dirname "$0")/.."
target_dir=${CARGO_TARGET_DIR:-target}

roles=1000 members=3 renewals=1 runs=10 replication=1 partitions=16
bootstrap=${KRABKA_BOOTSTRAP:-}
timed=
while [[ $# -gt 0 ]]; do
    case $1 in
        --roles) roles=$2; shift 2 ;;
        --members) members=$2; shift 2 ;;
        --renewals) renewals=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        --replication) replication=$2; shift 2 ;;
        --partitions) partitions=$2; shift 2 ;;
        -b|--bootstrap) bootstrap=$2; shift 2 ;;
        --krabka) timed=$2; shift 2 ;;
        *) echo "bench-roles.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
if [[ -z $bootstrap ]]; then
    bootstrap=$(ci/kafka.sh start 1 | tail -n 1)
fi
topic="krabka-bench-roles-${roles}x${members}x${renewals}-rf${replication}-p${partitions}"

cargo build --quiet --release -p krabka --bin krabka --example fill_state
krabka="$target_dir/release/krabka"
timed=${timed:-$krabka}
k() { "$krabka" -b "$bootstrap" --state-topic "$topic" --partitions "$partitions" "$@"; }
t() { "$timed" -b "$bootstrap" --state-topic "$topic" --partitions "$partitions" "$@"; }

min_isr=$(( replication > 1 ? 2 : 1 ))
k topic ensure --replication-factor "$replication" --min-insync-replicas "$min_isr" >&2
count_roles() { python3 -c 'import json,sys; v=json.load(sys.stdin); print(len(v["roles"]), len(v["unreadable"]))'; }
read -r listed unreadable < <(k roles --json | count_roles)
if [[ $listed -ne $roles ]]; then
    if [[ $listed -ne 0 ]]; then
        echo "bench-roles.sh: $topic lists $listed roles, not $roles nor 0: delete it first" >&2
        exit 1
    fi
    "$target_dir/release/examples/fill_state" "$bootstrap" "$topic" "$roles" "$members" "$renewals" "$partitions"
fi

{
    echo "date:     $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "machine:  $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr)"
    echo "load:     $(cut -d ' ' -f 1-3 /proc/loadavg) (1, 5, 15 min) before the runs"
    echo "kafka:    $bootstrap, topic $topic"
    echo "command:  cli/bench-roles.sh --roles $roles --members $members --renewals $renewals --runs $runs --replication $replication --partitions $partitions"
    echo "timed:    $timed"
} >&2

out=$(mktemp)
trap 'rm -f "$out"' EXIT
times=()
for _ in $(seq "$runs"); do
    start=$(date +%s%N)
    t roles --json >"$out"
    end=$(date +%s%N)
    read -r listed unreadable < <(count_roles <"$out")
    if [[ $listed -ne $roles || $unreadable -ne 0 ]]; then
        echo "bench-roles.sh: a run listed $listed roles ($unreadable unreadable), wanted $roles" >&2
        exit 1
    fi
    times+=($(( (end - start) / 1000000 )))
done
bytes=$(wc -c <"$out")
rss=$( { /usr/bin/time -f '%M' "$timed" -b "$bootstrap" --state-topic "$topic" --partitions "$partitions" roles --json >/dev/null; } 2>&1 | tail -n 1)
# The fixed cost of a process that reads one partition, for comparison.
one_start=$(date +%s%N)
t state "payments-eu-west-00000" --json >/dev/null
one_end=$(date +%s%N)
printf '%s\n' "${times[@]}" | sort -n | python3 -c '
import sys
t = [int(x) for x in sys.stdin]
n = len(t)
print(f"krabka roles --json, {sys.argv[1]} roles: {n} runs, min {t[0]} ms, median {t[n // 2]} ms, max {t[-1]} ms")
print(f"output {sys.argv[2]} bytes, max RSS {sys.argv[3]} KiB; krabka state (one partition) {sys.argv[4]} ms")
' "$roles" "$bytes" "$rss" "$(( (one_end - one_start) / 1000000 ))"
