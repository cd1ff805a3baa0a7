#!/usr/bin/env bash
# The exactly-once read-process-write loop, side by side in one run on the local 3-broker
# cluster: a role's leader piping records through its guarded transactions (krabka:
# the eos-pipe binary of examples/rust, release build) and the same loop written with
# Apache Kafka's own Java client (java: kafka-clients, the version pinned below), the peer.
#
#   ci/bench-eos.sh                  the 3-broker cluster as it is (started if down)
#   ci/bench-eos.sh --clean          a new 3-broker cluster (the old one's data deleted)
#
# The method (examples/java-eos/EosPipe.java, examples/rust/src/bin/eos-pipe):
#   1. kafka-clients and slf4j (its one run-time dependency used here; compression is off, so
#      its compression libraries are not loaded) from Maven Central into ci/.cache/eos-java-jars
#      (gitignored), each checked against the sha256 pinned here; EosPipe.java compiled with
#      javac into target/eos-java/;
#   2. the cluster started with Kafka's own JVM options (KAFKA_JVM_PROFILE=stock) unless it
#      runs; then for each batch size (BATCHES, entries K or K:N: K records per transaction,
#      N records, RECORDS (20000) when N is left out; default "1:1000 100 1000": a batch of 1
#      costs one transaction per record, so it pipes fewer records to end in minutes):
#   3. an input and an output topic unique to the run, PARTITIONS (3) partitions, replication
#      factor 3, min.insync.replicas 2; the feeder writes N numbered records to the input
#      (idempotent producer, acks=all, record i in partition i mod PARTITIONS);
#   4. for each client in CLIENTS (default "krabka java", in that order for each batch size,
#      each on topics of its own), one pipe process. java: with its own consumer group and
#      transactional.id: a read_committed
#      consumer with the input's partitions assigned (no group membership) and seeked to the
#      group's committed offsets (none: the beginning), a transactional producer (acks=all, no
#      compression, Kafka's defaults otherwise, or with PRODUCER_SETTINGS, "key=value,..."
#      added); per transaction: beginTransaction, one output record per input record (same
#      key, value "i:piped", same partition number), sendOffsetsToTransaction(offsets,
#      groupMetadata), commitTransaction; it stops when every input partition is consumed
#      up to its end. krabka: the same work with this library: the role (named like the
#      transactional.id) taken by its one member, the group's committed offsets read through
#      the leadership, the term's input reader over the assigned partitions, and per
#      transaction one guarded write of the outputs with the consumed offsets
#      (Leadership::write_with_offsets); it resigns at the end;
#   5. the checker (EosPipe check, for both clients) reads the output read_committed and fails the run unless every input is
#      there exactly once, in input order.
#
# The figures: records/s = records piped / the loop's time (the first beginTransaction to the
# last commitTransaction returning, both in the pipe process; for krabka the first
# transaction's start to the last guarded write returning); setup = creating the clients,
# initTransactions (krabka: taking the role) and fetching the committed offsets; the per-transaction time
# (beginTransaction to commitTransaction returned) at p50 and p99. One line per batch size on
# stdout per client, and one JSON line each appended to target/bench-eos.jsonl with the UTC time,
# the load average before the run, the versions and the settings.
#
# Environment: CLIENTS, RECORDS, PARTITIONS, BATCHES, PRODUCER_SETTINGS (java only), and the cluster's
# KAFKA_STATE_DIR / KAFKA_PORT_3 (ci/kafka.sh --help). The stock producer's figures are the
# peer's; a second run with e.g. PRODUCER_SETTINGS=retry.backoff.ms=10 (the default is 100)
# shows how much of each transaction the producer spends waiting to retry a request, since
# that setting changes nothing else. Stops the cluster it started only with STOP=1.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
clean=
for arg in "$@"; do
    case $arg in
    --clean) clean=1 ;;
    -h | --help)
        sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
        exit 0
        ;;
    *)
        echo "bench-eos: unknown argument $arg (see --help)" >&2
        exit 2
        ;;
    esac
done
RECORDS=${RECORDS:-20000}
PARTITIONS=${PARTITIONS:-3}
BATCHES=${BATCHES:-1:1000 100 1000}
CLIENTS=${CLIENTS:-krabka java}
KAFKA_CLIENTS_VERSION=4.1.1
JARS="$ROOT/ci/.cache/eos-java-jars"
MAVEN="${KRABKA_MAVEN_URL:-https://repo1.maven.org/maven2}"
# group:artifact:version sha256: kafka-clients and the slf4j its POM names, with slf4j's
# no-operation binding so that the clients' logging stays quiet.
JAR_LIST="
org.apache.kafka:kafka-clients:$KAFKA_CLIENTS_VERSION 00247122a572c3d3ae4eb60a50192a5811bc0181f51923d13018600f892e821d
org.slf4j:slf4j-api:1.7.36 d3ef575e3e4979678dc01bf1dcce51021493b4d11fb7f1be8ad982877c16a1c0
org.slf4j:slf4j-nop:1.7.36 c214958b07816cb4412b30c7bdbd4308ffdc6ba2a83767b8f3a9229cbd9274d6
"

die() {
    echo "bench-eos: $*" >&2
    exit 1
}

# The path of a pinned jar, downloaded when missing and checked against its sha256.
jar() {
    local spec=$1 sha=$2 g a v
    IFS=: read -r g a v <<<"$spec"
    local file="$JARS/$a-$v.jar"
    if [[ ! -f $file ]]; then
        local url="$MAVEN/${g//.//}/$a/$v/$a-$v.jar"
        mkdir -p "$JARS"
        curl -fsSL --retry 2 -o "$file.part" "$url" || {
            rm -f "$file.part"
            die "cannot download $url (offline?)"
        }
        mv "$file.part" "$file"
    fi
    if [[ "$(sha256sum "$file" | cut -c1-64)" != "$sha" ]]; then
        rm -f "$file"
        die "$file does not have the pinned sha256 $sha; removed"
    fi
    echo "$file"
}

command -v javac >/dev/null || die "javac (a JDK, 17 or newer) is needed"
cp=""
while read -r spec sha; do
    [[ -n $spec ]] || continue
    cp="$cp${cp:+:}$(jar "$spec" "$sha")"
done <<<"$JAR_LIST"
target_dir=$ROOT/target
classes="$target_dir/eos-java/classes"
rm -rf "$classes" && mkdir -p "$classes"
javac -Xlint:all -Werror -d "$classes" -cp "$cp" examples/java-eos/EosPipe.java
run() { java -cp "$classes:$cp" EosPipe "$@"; }
for client in $CLIENTS; do
    case $client in
    krabka)
        cargo build --release -q -p krabka-examples --bin eos-pipe
        ;;
    java) ;;
    *) die "CLIENTS takes krabka and java, got $client" ;;
    esac
done
eos_pipe=${CARGO_TARGET_DIR:-$ROOT/target}/release/eos-pipe

export KAFKA_JVM_PROFILE=${KAFKA_JVM_PROFILE:-stock}
[[ -z $clean ]] || ci/kafka.sh clean 3
bootstrap=$(ci/kafka.sh start 3 | tail -n 1)
[[ -n $bootstrap ]] || die "the 3-broker cluster did not start"
jvm=$(ci/kafka.sh jvm "$bootstrap" | tr '\n' ' ')

load=$(cut -d ' ' -f 1-3 /proc/loadavg)
when=$(date -u +%Y-%m-%dT%H:%M:%SZ)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
run_id="eosj-$(date -u +%Y%m%dT%H%M%S)-$$"
echo "bench-eos: kafka-clients $KAFKA_CLIENTS_VERSION, $PARTITIONS partitions, RF 3 / min ISR 2," \
    "producer settings: ${PRODUCER_SETTINGS:-none beyond the defaults}; cluster $bootstrap; load average $load; $when"
mkdir -p "$target_dir"
printf '%-7s %-6s %8s %6s %10s %10s %9s %9s %9s\n' client batch records txns records/s loop_ms setup_ms txn_p50 txn_p99
for spec in $BATCHES; do
    b=${spec%%:*} n=$RECORDS
    [[ $spec != *:* ]] || n=${spec#*:}
    [[ $b =~ ^[1-9][0-9]*$ && $n =~ ^[1-9][0-9]*$ ]] || die "BATCHES takes K or K:N (positive numbers), got $spec"
    for client in $CLIENTS; do
        topic="$run_id-b$b-$client"
        run create --bootstrap "$bootstrap" --partitions "$PARTITIONS" --replication 3 --min-isr 2 \
            "$topic-in" "$topic-out"
        run feed --bootstrap "$bootstrap" --topic "$topic-in" --records "$n"
        if [[ $client == java ]]; then
            json=$(run pipe --bootstrap "$bootstrap" --input "$topic-in" --output "$topic-out" \
                --group "$topic-g" --batch "$b" --transactional-id "$topic-t" \
                --producer-settings "${PRODUCER_SETTINGS:-}")
        else
            json=$("$eos_pipe" --bootstrap "$bootstrap" --input "$topic-in" --output "$topic-out" \
                --group "$topic-g" --batch "$b" --role "$topic-t" --partitions "$PARTITIONS")
        fi
        checked=$(run check --bootstrap "$bootstrap" --output "$topic-out" --records "$n" \
            --partitions "$PARTITIONS")
        jq -r '"\(.client) \(.batch) \(.records) \(.transactions) \(.records_per_s) \(.loop_ms) \(.setup_ms) \(.txn_p50_ms) \(.txn_p99_ms)"' \
            <<<"$json" | xargs printf '%-7s %-6s %8s %6s %10s %10s %9s %9s %9s\n'
        jq -c --arg when "$when" --arg load "$load" --arg commit "$commit" --arg jvm "$jvm" \
            --arg bootstrap "$bootstrap" --arg v "$KAFKA_CLIENTS_VERSION" \
            --arg settings "${PRODUCER_SETTINGS:-}" \
            --argjson partitions "$PARTITIONS" --argjson check "$checked" \
            '{bench: "eos", date: $when, commit: $commit, load_average: $load,
              kafka_clients: $v, producer_settings: $settings, partitions: $partitions,
              replication: 3, min_isr: 2, cluster: $bootstrap, broker_jvm: $jvm} + . + {check: $check}' \
            <<<"$json" >>"$target_dir/bench-eos.jsonl"
    done
done
echo "bench-eos: every output checked read_committed: each input exactly once, in order;" \
    "JSON lines appended to ${target_dir#"$ROOT"/}/bench-eos.jsonl"
if [[ ${STOP:-} == 1 ]]; then ci/kafka.sh stop 3; fi
