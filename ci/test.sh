#!/usr/bin/env bash
# The umbrella: every check, in order. This is the README's test command and
# what .ci/run calls. Starts the local Kafka clusters (unless KRABKA_BOOTSTRAP
# is set; the secured one always) and stops what it started at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
started=()
# Each step's wall time, printed as it ends and as a table at the end (also
# when a step fails): the suite must stay well under CI's 45 minutes.
t_start=$SECONDS
t_step=$SECONDS
current=
timings=()
end_step() {
    if [[ -n $current ]]; then
        timings+=("$(printf '%5ds  %s' "$((SECONDS - t_step))" "$current")")
    fi
}
cleanup() {
    rc=$?
    end_step
    for size in "${started[@]}"; do ci/kafka.sh stop "$size" || true; done
    if [[ -n ${postgres_started:-} ]]; then ci/postgres.sh stop || true; fi
    printf '\n=== step times (%s)\n' "$([[ $rc -eq 0 ]] && echo passed || echo "failed in: $current")" >&2
    printf '%s\n' "${timings[@]}" >&2
    printf '%5ds  in all\n' "$((SECONDS - t_start))" >&2
    if command -v df >/dev/null; then df -h . | tail -n 1 | awk '{print "disk: " $4 " free of " $2 >"/dev/stderr"}'; fi
}
trap cleanup EXIT

step() {
    end_step
    current="$*"
    t_step=$SECONDS
    printf '\n=== %s (at %ds)\n' "$*" "$((SECONDS - t_start))" >&2
    df -h . 2>/dev/null | awk 'NR == 2 {print "    disk: " $4 " free" >"/dev/stderr"}' || true
}
# A fresh clone gains nothing from incremental compilation: it only writes
# the incremental caches (gigabytes of disk on this workspace).
# Nor from the workspace crates' full debug info: line tables keep backtraces.
if [[ -n ${CI:-} ]]; then export CARGO_INCREMENTAL=0 CARGO_PROFILE_DEV_DEBUG=line-tables-only; fi
# The binding scripts skip what this umbrella's clippy and Rust tests cover
# (their crates' clippy and unit tests), which alone they run themselves.
export KRABKA_CI_UMBRELLA=1

step fmt;    ci/fmt.sh
step "comments (ci/comments.sh)"; ci/comments.sh
step "file lengths (ci/lengths.sh)"; ci/lengths.sh
step clippy; ci/clippy.sh
step "one core build for the four bindings"; ci/unified.sh

if [[ -z ${KRABKA_BOOTSTRAP:-} ]]; then
    step "kafka (1 node)"
    ci/kafka.sh provision >&2
    KRABKA_BOOTSTRAP=$(ci/kafka.sh start 1 | tail -n 1)
    started+=(1)
    export KRABKA_BOOTSTRAP
fi
if [[ -z ${KRABKA_BOOTSTRAP_3:-} ]]; then
    step "kafka (3 nodes)"
    KRABKA_BOOTSTRAP_3=$(ci/kafka.sh start 3 | tail -n 1)
    started+=(3)
    export KRABKA_BOOTSTRAP_3
fi
# The secured cluster (SASL_SSL, OAUTHBEARER, short sessions, ACLs) of
# core/tests/kafka_secured.rs, kafka_oauth.rs and kafka_reauth.rs: one node.
step "kafka (secured)"
ci/kafka.sh start secured >/dev/null
started+=(secured)
# The PostgreSQL of the fenced-store tests (stores/tests/postgres_fence.rs),
# unless KRABKA_POSTGRES_URL names one already.
if [[ -z ${KRABKA_POSTGRES_URL:-} ]]; then
    step "postgresql"
    KRABKA_POSTGRES_URL=$(ci/postgres.sh start | tail -n 1)
    postgres_started=1
    export KRABKA_POSTGRES_URL
fi
echo "KRABKA_BOOTSTRAP=$KRABKA_BOOTSTRAP KRABKA_BOOTSTRAP_3=$KRABKA_BOOTSTRAP_3 KRABKA_POSTGRES_URL=$KRABKA_POSTGRES_URL" >&2

# The Rust golden test runs with every other Rust suite in "rust tests" (one
# build of the workspace); here the vectors are checked against Kafka's Java.
step golden; ci/golden.sh --java
# cli/tests/cli_kafka.rs cuts a `krabka run` off with iptables (as root).
if [[ $(id -u) == 0 ]] && ! command -v iptables >/dev/null 2>&1; then
    echo "installing iptables (the cut-off tests need it)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q iptables >&2 || {
        DEBIAN_FRONTEND=noninteractive apt-get update -q >&2 || true
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q iptables >&2
    }
fi
step "rust tests"; ci/rust-tests.sh
# Every suite above ran on the pinned Kafka 4.1.1; the short compatibility suite
# runs again on the oldest supported Kafka, 3.6 (docs/compatibility.md), on a
# 1-node and a secured cluster of its own (own ports and .kafka-compat/), which
# it stops when it ends. The tests are the ones built above.
step "kafka 3.6 compatibility"; ci/compat.sh --short 3.6.2
step model;  ci/model.sh --ci
step faults; KRABKA_FAULTS_PROFILE=dev ci/faults.sh
step fuzz;   ci/fuzz.sh
step python; ci/python.sh
step node;   ci/node.sh
step c;      ci/c.sh
step uniffi; ci/uniffi.sh
# Last: the release builds reuse what the steps above built (the wheel's
# crates from ci/python.sh, the jars and uniffi-bindgen from ci/uniffi.sh).
step "api docs"; ci/docs.sh
step "release artifacts"; ci/release.sh
step "release artifacts installed without Rust"; ci/release-check.sh
step "all checks passed"
current=
