#!/usr/bin/env bash
# The request latencies the brokers themselves measure (Kafka's RequestMetrics over JMX), for
# the requests on the lease path and the hand-over's: so a benchmark can tell time spent in the
# brokers (their JIT, their replication) from time spent in the client.
#
#   ci/broker-requests.sh [--size 3] [--save FILE] [--since FILE]
#
# Needs a cluster of ci/kafka.sh started with KAFKA_JMX=1 (each broker's JMX on its broker port
# + 150). For each node and each request it prints the count, the mean and the broker's p50 and
# p99, in milliseconds, of:
#   total   TotalTimeMs: from the request's arrival to its answer's send
#   remote  RemoteTimeMs: the part spent waiting on other brokers (a Produce with acks=all
#           waiting for the followers; a WriteTxnMarkers the same)
#   queue   RequestQueueTimeMs: the part spent waiting for a request handler thread (a broker
#           short of CPU shows it here first)
#
# --save FILE keeps the raw snapshot; --since FILE gives the count and mean of what happened
# after that snapshot (exact: Kafka's Mean and Count are cumulative since the broker started).
# The p50 and p99 are the broker's own, from a reservoir biased towards the last five minutes
# (Yammer's exponentially decaying sample), so they describe the recent past, not exactly the
# interval.
set -euo pipefail
cd "$(dirname "$0")/.."
size=3 save= since=
while [[ $# -gt 0 ]]; do
    case $1 in
    --size) size=$2; shift 2 ;;
    --save) save=$2; shift 2 ;;
    --since) since=$2; shift 2 ;;
    -h | --help)
        sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
        exit 0
        ;;
    *)
        echo "broker-requests: unknown argument $1 (see --help)" >&2
        exit 2
        ;;
    esac
done
case $size in
1) base=${KAFKA_PORT_1:-19092} nodes=1 ;;
3) base=${KAFKA_PORT_3:-29092} nodes=3 ;;
*)
    echo "broker-requests: --size is 1 or 3, got $size" >&2
    exit 2
    ;;
esac
if [[ -n $since && ! -r $since ]]; then
    echo "broker-requests: --since $since: no such snapshot" >&2
    exit 2
fi
requests=(Produce AddPartitionsToTxn EndTxn InitProducerId FetchConsumer WriteTxnMarkers)
objects=()
for r in "${requests[@]}"; do
    for n in TotalTimeMs RemoteTimeMs RequestQueueTimeMs; do
        objects+=(--object-name "kafka.network:type=RequestMetrics,name=$n,request=$r")
    done
done
snapshot=$(mktemp)
trap 'rm -f "$snapshot"' EXIT
for ((i = 1; i <= nodes; i++)); do
    jmx=$((base + i - 1 + 150))
    out=$(timeout 60 ci/kafka.sh tool org.apache.kafka.tools.JmxTool \
        --jmx-url "service:jmx:rmi:///jndi/rmi://127.0.0.1:$jmx/jmxrmi" "${objects[@]}" \
        --attributes Count,Mean,50thPercentile,99thPercentile --one-time true --report-format tsv 2>&1) || {
        echo "broker-requests: node $i: no JMX answer on 127.0.0.1:$jmx (was the cluster started with KAFKA_JMX=1?)" >&2
        printf '%s\n' "$out" | tail -n 3 >&2
        exit 1
    }
    # node <TAB> metric <TAB> request <TAB> attribute <TAB> value
    printf '%s\n' "$out" | sed -n 's/^kafka\.network:type=RequestMetrics,name=\([A-Za-z]*\),request=\([A-Za-z]*\):\([A-Za-z0-9]*\)\t/\1\t\2\t\3\t/p' |
        awk -v n="$i" -F '\t' '{print n "\t" $0}' >>"$snapshot"
done
if [[ -n $save ]]; then cp "$snapshot" "$save"; fi
awk -F '\t' -v since="${since:-/dev/null}" -v delta="${since:+1}" '
    FILENAME == since { old[$1 SUBSEP $2 SUBSEP $3 SUBSEP $4] = $5; next }
    { v[$1 SUBSEP $2 SUBSEP $3 SUBSEP $4] = $5; if (!(($1 SUBSEP $3) in seen)) { seen[$1 SUBSEP $3] = 1; order[++k] = $1 SUBSEP $3 } }
    END {
        printf "%-4s  %-18s  %-6s  %8s  %8s  %8s  %8s\n", "node", "request", "time", "count", "mean", "p50", "p99"
        for (j = 1; j <= k; j++) {
            split(order[j], a, SUBSEP)
            for (m = 1; m <= 3; m++) {
                metric = (m == 1 ? "TotalTimeMs" : m == 2 ? "RemoteTimeMs" : "RequestQueueTimeMs")
                key = a[1] SUBSEP metric SUBSEP a[2]
                c = v[key SUBSEP "Count"] + 0; mean = v[key SUBSEP "Mean"] + 0
                if (delta) {
                    c0 = old[key SUBSEP "Count"] + 0; m0 = old[key SUBSEP "Mean"] + 0
                    mean = (c > c0 ? (mean * c - m0 * c0) / (c - c0) : 0); c = c - c0
                }
                if (c == 0 || (m > 1 && mean < 0.005)) continue
                printf "%-4s  %-18s  %-6s  %8d  %8.2f  %8.2f  %8.2f\n", a[1], a[2], (m == 1 ? "total" : m == 2 ? "remote" : "queue"), c, mean,
                    v[key SUBSEP "50thPercentile"], v[key SUBSEP "99thPercentile"]
            }
        }
    }' ${since:+"$since"} "$snapshot"
