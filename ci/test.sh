#!/usr/bin/env bash
# The umbrella: every check, in order. This is the README's test command and
# what .ci/run calls. Starts the local Kafka clusters (unless KRABKA_BOOTSTRAP
# is set; the secured one always) and stops what it started at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
started=()
cleanup() {
    for size in "${started[@]}"; do ci/kafka.sh stop "$size" || true; done
}
trap cleanup EXIT

step() { printf '\n=== %s\n' "$*" >&2; }

step fmt;    ci/fmt.sh
step clippy; ci/clippy.sh

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
echo "KRABKA_BOOTSTRAP=$KRABKA_BOOTSTRAP KRABKA_BOOTSTRAP_3=$KRABKA_BOOTSTRAP_3" >&2

step golden; ci/golden.sh
step "rust tests"; ci/rust-tests.sh
step model;  ci/model.sh --ci
step faults; ci/faults.sh
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
