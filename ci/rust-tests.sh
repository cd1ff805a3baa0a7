#!/usr/bin/env bash
# The Rust test suites: unit, golden, property, in-memory election and the
# integration and end-to-end tests against the real local Kafka.
# Needs KRABKA_BOOTSTRAP (and KRABKA_BOOTSTRAP_3 for the replication tests),
# and KRABKA_POSTGRES_URL for the fenced-store tests and the CLI's psql
# example in cli_kafka (ci/postgres.sh start, and psql on the PATH;
# they fail without it);
# when unset, the tests start the local clusters themselves with ci/kafka.sh.
# The secured tests (core/tests/kafka_secured.rs, kafka_oauth.rs,
# kafka_reauth.rs) always use `ci/kafka.sh start secured`, which reuses a
# running secured cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each command's wall time, so the suite's cost is seen where it goes.
timed() {
    local t0=$SECONDS
    "$@"
    echo "rust-tests: $((SECONDS - t0)) s: $*" >&2
}
# (The Kafka client's fake-broker tests run here too: the core's tests turn
# the client's fake-broker feature on for the whole build.)
timed cargo test --workspace --all-targets --no-run
# Three halves side by side, each on clusters of its own, since the suites
# wait on Kafka far more than they compute: the suites that stop and start
# brokers of the three-node cluster (and the one that reads its settings, and
# the pipeline's end-to-end test, whose members must not meet those faults),
# the secured cluster's, and every other suite (the one-node cluster). Each
# group's output is printed whole when all have ended.
three_node=(kafka_broker_loss kafka_paused_leader kafka_coordinator_loss kafka_describe_cut kafka_coordinator_move kafka_replication kafka_rolling_restart kafka_unwritable kafka_preflight e2e_pipeline)
secured=(kafka_secured kafka_oauth kafka_reauth kafka_acls)
mapfile -t others < <(cargo metadata --format-version 1 --no-deps | python3 -c '
import json, sys
skip = set(sys.argv[1:])
for p in json.load(sys.stdin)["packages"]:
    for t in p["targets"]:
        if "test" in t["kind"] and t["name"] not in skip:
            print("--test"); print(t["name"])
' "${three_node[@]}" "${secured[@]}")
logs=() pids=() names=()
t0=$SECONDS
group() {
    local name=$1
    shift
    local log
    log=$(mktemp)
    "$@" >"$log" 2>&1 &
    pids+=("$!") logs+=("$log") names+=("$name")
}
group "three-node suites" cargo test --workspace $(printf -- '--test %s ' "${three_node[@]}")
group "secured suites" cargo test -p krabka-coordination $(printf -- '--test %s ' "${secured[@]}")
group "every other suite" cargo test --workspace --lib --bins --examples --benches "${others[@]}"
failed=()
for i in "${!pids[@]}"; do
    rc=0
    wait "${pids[$i]}" || rc=$?
    [[ $rc -eq 0 ]] || failed+=("${names[$i]} (exit $rc)")
done
for i in "${!logs[@]}"; do
    echo "--- ${names[$i]}"
    cat "${logs[$i]}"
    rm -f "${logs[$i]}"
done
echo "rust-tests: $((SECONDS - t0)) s: cargo test (three groups side by side)" >&2
if [[ ${#failed[@]} -gt 0 ]]; then
    echo "rust-tests: failed: ${failed[*]}" >&2
    exit 1
fi
# The C binding's library is named like the core's (libkrabka_coordination):
# rustdoc would see two crates of that name, and cargo runs doctests with --doc
# even where a crate sets doctest = false. It has no Rust examples to test.
# The README's Rust quick start is a doctest of the core (ReadmeQuickStart):
# it runs against the one-node cluster at 127.0.0.1:19092 and writes to
# billing-out, as the README says.
ci/kafka.sh start 1 >/dev/null
ci/kafka.sh tool topics --bootstrap-server 127.0.0.1:19092 --create --if-not-exists \
    --topic billing-out --partitions 1 --replication-factor 1 >/dev/null
timed cargo test --workspace --doc --exclude krabka-coordination-c
# The core without the Kafka transport must build and pass on its own: its
# unit tests here; every target of it type-checks in ci/clippy.sh, and its
# test suites run above with the default features, rather than being built
# and linked a second time for this build alone.
timed cargo test -p krabka-coordination --no-default-features --lib
# A tool that only asks who is authoritative builds the Kafka client and the
# core's types without librdkafka: the kafka-client feature, and no rdkafka in
# its dependency tree.
timed cargo check -p krabka-coordination --no-default-features --features kafka-client
# The error-code table and the frame check build without the client (the
# fuzz targets use them so).
timed cargo check -p krabka-kafka --no-default-features
if cargo tree -p krabka-coordination --no-default-features --features kafka-client -e normal \
    | grep -E 'rdkafka' >&2; then
    echo "rust-tests: rdkafka is in the tree of the kafka-client feature" >&2
    exit 1
fi
