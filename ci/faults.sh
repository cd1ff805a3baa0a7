#!/usr/bin/env bash
# The fault campaign: member processes of three roles (two
# sharing a state partition) write guarded records on the 3-broker cluster while
# a nemesis kills, pauses, cuts off and skews members and kills, pauses and
# restarts brokers (one at a time, or all three in a rolling restart), at random
# and reproducibly from a seed; a fourth, steady role whose lease follows the
# lease-sizing rule takes the broker faults only and must keep its leader; a slow
# role behind a slow, lossy network hands over on a schedule; a pipeline role pipes
# an input topic to its data topic with the input offsets in each guarded
# transaction, under the member and broker faults; then a checker reads every data
# topic and the state topic with an independent read_committed client (for the
# pipeline: each input exactly once, in input order).
# docs/faults.md describes the campaign and records its figures.
#
#   ci/faults.sh [--duration SECONDS] [--seed N] [--bootstrap HOST:PORT,...] [more, see --help]
#
# The cluster: --bootstrap, else KRABKA_BOOTSTRAP_3, else the 3-node cluster of
# ci/kafka.sh (started here and stopped at the end if it was not running).
# Broker faults need a cluster that ci/kafka.sh runs with this environment
# (KAFKA_PORT_3, KAFKA_STATE_DIR). Cutting a member off needs root (users and
# iptables; iptables is installed with apt-get when missing). The orchestrator
# and checker are Python (ci/faults/*.py) in a throw-away venv under
# target/faults/ with confluent-kafka from PyPI. Exit status 0 only when every
# check passed; the last line is "N passed, M failed".
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd -P)

log() { printf 'faults.sh: %s\n' "$*" >&2; }
die() {
    log "error: $*"
    exit 1
}

bootstrap=${KRABKA_BOOTSTRAP_3:-}
args=()
upgrade=
while [[ $# -gt 0 ]]; do
    case $1 in
    --upgrade)
        upgrade=3.6.2:4.4.0
        shift
        ;;
    --upgrade=*)
        upgrade=${1#--upgrade=}
        shift
        ;;
    --bootstrap)
        [[ $# -ge 2 ]] || die "--bootstrap needs a value"
        bootstrap=$2
        shift 2
        ;;
    --bootstrap=*)
        bootstrap=${1#--bootstrap=}
        shift
        ;;
    -h | --help)
        args+=("$1")
        shift
        ;;
    *)
        args+=("$1")
        shift
        ;;
    esac
done

# The upgrade campaign (--upgrade[=FROM:TO], by hand, not in CI: about 5
# minutes): a 3-node cluster of its own, formatted by Kafka FROM (default
# 3.6.2, the oldest supported), in .kafka-upgrade/ on the usual ports of
# KAFKA_PORT_3, is rolled broker by broker to Kafka TO (default 4.4.0) and
# finalized while the roles are held: the kind rolling_upgrade, and no other.
if [[ -n $upgrade ]]; then
    [[ $upgrade =~ ^[34]\.[0-9]+\.[0-9]+:[34]\.[0-9]+\.[0-9]+$ ]] ||
        die "--upgrade takes FROM:TO, two Kafka 3.x or 4.x releases (e.g. 3.6.2:4.4.0), got '$upgrade'"
    [[ -z $bootstrap ]] || die "--upgrade starts a cluster of its own; drop --bootstrap and KRABKA_BOOTSTRAP_3"
    upgrade_from=${upgrade%%:*} upgrade_to=${upgrade#*:}
    export KAFKA_VERSION=$upgrade_from KAFKA_STATE_DIR=${KRABKA_FAULTS_UPGRADE_STATE_DIR:-$repo/.kafka-upgrade}
    args=(--kinds rolling_upgrade --upgrade-to "$upgrade_to" --duration 150 "${args[@]+"${args[@]}"}")
fi

target_dir=${CARGO_TARGET_DIR:-$repo/target}
work=$target_dir/faults
mkdir -p "$work"

# -- clean-up: whatever the orchestrator left (it heals itself; this is the net)
started_cluster=0
cleanup() {
    local rc=$?
    if command -v iptables >/dev/null 2>&1 && [[ $(id -u) == 0 ]]; then
        for table in filter nat; do
            iptables -w -t "$table" -S OUTPUT 2>/dev/null | grep -- 'krabka-faults' | sed 's/^-A /-D /' |
                while read -r rule; do eval "iptables -w -t $table $rule" || true; done || true
        done
    fi
    if [[ $(id -u) == 0 ]]; then
        # the members' users (the orchestrator removes them; this is for a crash)
        for u in $(getent passwd | cut -d: -f1 | grep -E '^krabkaf[0-9]+$' || true); do
            userdel "$u" 2>/dev/null || true
        done
    fi
    if ((started_cluster)); then
        log "stopping the 3-node cluster this run started"
        ci/kafka.sh stop 3 || true
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# -- python venv with confluent-kafka (an independent client for the checker)
venv=$work/venv
if ! "$venv/bin/python" -c 'import confluent_kafka' >/dev/null 2>&1; then
    log "creating the venv $venv with confluent-kafka from PyPI"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check 'confluent-kafka>=2.4,<3' >&2
fi
for a in "${args[@]+"${args[@]}"}"; do
    if [[ $a == -h || $a == --help ]]; then
        exec "$venv/bin/python" ci/faults/main.py --help
    fi
done

# -- iptables for the cut-off fault (root only; skipped loudly otherwise)
if [[ $(id -u) == 0 ]] && ! command -v iptables >/dev/null 2>&1; then
    log "installing iptables (the cut-off fault needs it)"
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q iptables >&2; then
        DEBIAN_FRONTEND=noninteractive apt-get update -q >&2 || true
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q iptables >&2 ||
            log "NOTICE: iptables could not be installed; members will not be cut off"
    fi
fi

# -- the member binary and the clock shim
# KRABKA_FAULTS_PROFILE=dev takes the unoptimised member the test suites
# built (ci/test.sh sets it: a release build of the member and librdkafka
# took most of the step's 12 minutes there); the checks are the same.
profile=${KRABKA_FAULTS_PROFILE:-release}
case $profile in
    release)
        log "building the member binary (cargo build --release -p krabka-examples --bin member)"
        cargo build --release -q -p krabka-examples --bin member >&2
        member_bin=$target_dir/release/member
        ;;
    dev)
        # The very build of ci/rust-tests.sh (the same targets, so the same
        # features): nothing to compile after it.
        log "the member binary of the test build (cargo test --workspace --all-targets --no-run)"
        cargo test -q --workspace --all-targets --no-run >&2
        member_bin=$target_dir/debug/member
        ;;
    *) die "KRABKA_FAULTS_PROFILE must be release or dev, got '$profile'" ;;
esac
[[ -x $member_bin ]] || die "no member binary at $member_bin"
shim=$work/clockshim.so
cc -shared -fPIC -O2 -Wall -Wextra -Werror -o "$shim.tmp" ci/faults/clockshim.c -ldl
mv "$shim.tmp" "$shim"
chmod 755 "$shim" "$work"

# -- the cluster
if [[ -n $upgrade ]]; then
    KAFKA_VERSION=$upgrade_to ci/kafka.sh provision
    log "the upgrade campaign: a new 3-node cluster of Kafka $upgrade_from in $KAFKA_STATE_DIR, to be rolled to $upgrade_to"
    ci/kafka.sh status 3 >/dev/null 2>&1 && die "a 3-node cluster runs in $KAFKA_STATE_DIR; stop it first"
    ci/kafka.sh clean 3
    started_cluster=1
    bootstrap=$(ci/kafka.sh start 3 | tail -n 1)
elif [[ -z $bootstrap ]]; then
    log "no --bootstrap and no KRABKA_BOOTSTRAP_3: starting the 3-node cluster with ci/kafka.sh"
    if ! grep -q 'running (pid' <<<"$(ci/kafka.sh status 3 2>/dev/null)"; then started_cluster=1; fi
    bootstrap=$(ci/kafka.sh start 3 | tail -n 1)
fi

python_dir=$repo/ci/faults
PYTHONPATH=$python_dir "$venv/bin/python" "$python_dir/selftest.py"
PYTHONPATH=$python_dir "$venv/bin/python" -u "$python_dir/main.py" \
    --bootstrap "$bootstrap" --member-bin "$member_bin" --clock-shim "$shim" \
    --repo "$repo" --work-dir "$work" "${args[@]+"${args[@]}"}"
