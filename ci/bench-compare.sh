#!/usr/bin/env bash
# Two revisions of the library side by side on one 3-broker cluster: the hand-over between
# processes and the renewal's lease write, measured by each revision's own leadership bench
# in alternating rounds (A B B A A B ...), so that the cluster's warming and the machine's
# load fall on both alike. For a change that must not make either slower.
#
#   ci/bench-compare.sh BASE [HEAD]      revisions (anything git rev-parse takes; HEAD by
#                                        default); both must be committed
#
# Settings (environment): ROUNDS (4), TRIALS (30 hand-overs and 30 renewals per round and
# revision), and the project harness's lease 2000 ms, renew 500 ms, stagger 500 ms, two
# members. The cluster is KRABKA_BOOTSTRAP_3 when set, else the 3-broker cluster of
# ci/kafka.sh (started with Kafka's own JVM options if it is not running).
#
# Each revision is checked out in target/bench-compare/src-<sha> and its bench built there
# (the release profile with debug info, as ci/bench-leadership.sh builds it); its bench and
# member binaries are kept in target/bench-compare/<sha>/. A revision whose bench has no
# `renewal` part is measured on hand-overs only. Everything goes to stdout and to
# target/bench-compare-<UTC time>.log; the per-round JSON lines to
# target/bench-compare/<sha>.jsonl. The summary gives, per figure, the median over the
# rounds of each revision's p50 and p99 and the ratio HEAD / BASE.
set -euo pipefail
cd "$(dirname "$0")/.."
case ${1:-} in
-h | --help | "")
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    [ -n "${1:-}" ]
    exit $?
    ;;
esac
base=$(git rev-parse --verify "$1^{commit}") || {
    echo "bench-compare: $1 is not a revision" >&2
    exit 2
}
head=$(git rev-parse --verify "${2:-HEAD}^{commit}") || {
    echo "bench-compare: ${2:-HEAD} is not a revision" >&2
    exit 2
}
ROUNDS=${ROUNDS:-4}
TRIALS=${TRIALS:-30}
target_dir=$(realpath -m "${CARGO_TARGET_DIR:-target}")
out=$target_dir/bench-compare
mkdir -p "$out"
log=$target_dir/bench-compare-$(date -u +%Y%m%dT%H%M%SZ).log
exec > >(tee "$log") 2>&1

# Builds revision $1's leadership bench; leaves its binaries in $out/$1/.
build() {
    local rev=$1 src=$out/src-$1
    if [ ! -x "$out/$rev/leadership" ]; then
        [ -d "$src" ] || git worktree add --quiet --detach "$src" "$rev"
        local exe
        exe=$(cd "$src" && CARGO_TARGET_DIR=$target_dir cargo bench --quiet --no-run \
            -p krabka-examples --bench leadership --message-format=json |
            python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "leadership" and m.get("executable"):
        print(m["executable"])')
        mkdir -p "$out/$rev"
        cp "$exe" "$out/$rev/leadership"
        cp "$target_dir/release/member" "$out/$rev/member"
        git worktree remove --force "$src"
    fi
}
echo "bench-compare: BASE $base, HEAD $head; $ROUNDS rounds of $TRIALS trials"
echo "date:     $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "machine:  $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), load $(cut -d ' ' -f 1-3 /proc/loadavg)"
build "$base"
build "$head"
bootstrap=${KRABKA_BOOTSTRAP_3:-}
if [ -z "$bootstrap" ]; then
    bootstrap=$(KAFKA_JVM_PROFILE=${KAFKA_JVM_PROFILE:-stock} ci/kafka.sh start 3 | tail -n 1)
fi
echo "kafka:    $bootstrap"
settings=(--lease-ms 2000 --renew-ms 500 --stagger-ms 500 --members 2)
run() {
    local rev=$1 parts=(--only handover-procs)
    # The help text is read whole first: `| grep -q` would close the pipe
    # early, and pipefail would count the writer's SIGPIPE as a failure.
    local help
    help=$("$out/$rev/leadership" --help 2>&1 || true)
    if [[ $help == *--renewal-trials* ]]; then
        parts+=(--only renewal --renewal-trials "$TRIALS")
    fi
    echo "--- round $2, $rev"
    "$out/$rev/leadership" --bench --bootstrap "$bootstrap" --member-bin "$out/$rev/member" \
        --json "$out/$rev.jsonl" --handover-trials "$TRIALS" "${parts[@]}" "${settings[@]}"
}
rm -f "$out/$base.jsonl" "$out/$head.jsonl"
for round in $(seq 1 "$ROUNDS"); do
    if [ $((round % 2)) = 1 ]; then
        run "$base" "$round"
        run "$head" "$round"
    else
        run "$head" "$round"
        run "$base" "$round"
    fi
done
python3 - "$out/$base.jsonl" "$out/$head.jsonl" <<'EOF'
import json, statistics, sys

def figures(path):
    rows = [json.loads(l)["results"] for l in open(path)]
    got = {}
    for r in rows:
        for name, key in (("hand-over between processes", ("handover-procs", "total")),
                          ("renewal's lease write", ("renewal", "renewal"))):
            v = r.get(key[0], {}).get(key[1])
            if v:
                got.setdefault(name, []).append(v)
    return got

a, b = figures(sys.argv[1]), figures(sys.argv[2])
print("\nmedian over rounds (ms)         BASE p50 / p99      HEAD p50 / p99      HEAD / BASE")
for name in ("hand-over between processes", "renewal's lease write"):
    if name not in a or name not in b:
        print(f"{name:30}  (not measured by both)")
        continue
    m = {q: (statistics.median(x[q] for x in a[name]), statistics.median(x[q] for x in b[name]))
         for q in ("p50", "p99")}
    print(f"{name:30}  {m['p50'][0]:7.1f} / {m['p99'][0]:6.1f}    {m['p50'][1]:7.1f} / {m['p99'][1]:6.1f}"
          f"    {m['p50'][1] / m['p50'][0]:.2f} / {m['p99'][1] / m['p99'][0]:.2f}")
EOF
echo "log: $log"
