#!/usr/bin/env bash
# The Kafka version compatibility suite: for each version given (default: the matrix of
# docs/compatibility.md), start a 1-node cluster and the secured cluster of that version
# (ci/kafka.sh with KAFKA_VERSION), run the Rust integration and end-to-end tests that cover
# what a user needs from a broker against them, stop them, and print a table: version,
# result, time, what failed.
#
#   ci/compat.sh                      the whole matrix, the full suite
#   ci/compat.sh 3.6.2 4.1.1          those versions
#   ci/compat.sh --short 3.6.2        the short suite (what ci/test.sh runs)
#
# The suites (the tests are the project's own, run with KRABKA_BOOTSTRAP set to the
# version's cluster; the secured suite reaches its cluster through `ci/kafka.sh start
# secured`, which takes the same environment):
#   short: kafka_client (acquire, describe, hand-over), kafka_epoch (renewals, guarded
#          writes, a deposed holder fenced, a crashed holder replaced), kafka_secured (SASL_SSL
#          with SCRAM-SHA-256/512 and PLAIN, a leadership round there) and e2e_failover
#          (member processes: SIGKILL failover, SIGSTOP, resign hand-over, describe by a third
#          party, guarded writes in log order)
#   full:  short, plus kafka_config (ensure_state_topic), kafka_protocol_lease, kafka_state
#          (the state reader) and cli_kafka (the krabka CLI; without its iptables cut-off
#          test, which needs root and iptables and tests no broker feature)
#
# A version whose secured cluster does not start (before 3.5 the storage tool cannot add
# the SCRAM users at format time) fails, and the other groups still run.
#
# Its clusters never touch the ones of ci/kafka.sh's defaults or ci/test.sh: their state
# lives in .kafka-compat/<version>/ and they listen on their own ports (1-node 39092,
# inter-broker 39142, controller 39192; secured 39392/39393, inter-broker 39442, controller
# 39492; a 3-node cluster, which no chosen test starts, would get 39592.. to 39694).
# KRABKA_BOOTSTRAP_3 is unset so
# that no test reaches another cluster. Each version's data is deleted before its run and
# kept after it (logs in .kafka-compat/<version>/); the clusters are stopped at the end, also
# on failure or Ctrl-C.
#
# Environment: KRABKA_COMPAT_VERSIONS (the default list), KRABKA_COMPAT_PORT (the 1-node
# broker port; the others keep their offsets from it), and ci/kafka.sh's own settings.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd -P)

# The matrix: the last release of each line from 3.6 on, the pinned 4.1.1 (the version of
# every other suite), and the newest 4.x on Maven Central when this list was written.
default_versions=(3.6.2 3.7.2 3.8.1 3.9.2 4.0.2 4.1.1 4.4.0)
read -r -a versions <<<"${KRABKA_COMPAT_VERSIONS:-${default_versions[*]}}"

suite=full
args=()
for a in "$@"; do
    case $a in
    --short) suite=short ;;
    --full) suite=full ;;
    -h | --help)
        sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
        exit 0
        ;;
    -*)
        echo "compat.sh: unknown option $a (--short, --full, --help)" >&2
        exit 2
        ;;
    *) args+=("$a") ;;
    esac
done
if [[ ${#args[@]} -gt 0 ]]; then versions=("${args[@]}"); fi
for v in "${versions[@]}"; do
    [[ $v =~ ^[34]\.[0-9]+\.[0-9]+$ ]] || {
        echo "compat.sh: $v is not a Kafka 3.x or 4.x release number (e.g. 3.6.2)" >&2
        exit 2
    }
done

port=${KRABKA_COMPAT_PORT:-39092}
export KAFKA_PORT_1=$port KAFKA_PORT_3=$((port + 500)) KAFKA_PORT_SECURED=$((port + 300))
unset KAFKA_PORT_SECURED_REAUTH KRABKA_BOOTSTRAP_3
export KRABKA_BOOTSTRAP=127.0.0.1:$port

# The test groups, NAME:TARGETS:ARGUMENTS AFTER --. Each runs as `cargo test --workspace
# --test ...`: the workspace's feature set, so what ci/rust-tests.sh built is reused.
# The secured group runs only when the secured cluster started.
groups=("core:kafka_client kafka_epoch:" "secured:kafka_secured:" "e2e:e2e_failover:")
if [[ $suite == full ]]; then
    groups+=("core-more:kafka_config kafka_protocol_lease kafka_state:"
        "cli:cli_kafka:--skip a_cut_off_krabka_kills_a_stubborn_child")
fi
test_args() { # GROUP -> cargo test arguments (without what follows --)
    local g=$1 targets t out=(--workspace)
    targets=${g#*:}
    targets=${targets%%:*}
    for t in $targets; do out+=(--test "$t"); done
    printf '%s\n' "${out[@]}"
}

state_root=$repo/.kafka-compat
mkdir -p "$state_root"
current=
cleanup() {
    local rc=$?
    if [[ -n $current ]]; then
        KAFKA_VERSION=$current KAFKA_STATE_DIR=$state_root/$current ci/kafka.sh stop >/dev/null 2>&1 || true
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Build the tests once, before any clock starts (in ci/test.sh they are built already).
t=$SECONDS
build_log=$state_root/build.log
build=(cargo test --no-run --workspace)
for g in "${groups[@]}"; do mapfile -t a < <(test_args "$g") && build+=("${a[@]:1}"); done
echo "compat.sh: building the tests (${build[*]})" >&2
if ! "${build[@]}" >"$build_log" 2>&1; then
    tail -n 40 "$build_log" >&2
    echo "compat.sh: the tests did not build (see $build_log)" >&2
    exit 1
fi
echo "compat.sh: tests built in $((SECONDS - t)) s" >&2

rows=()
failed_any=0
for v in "${versions[@]}"; do
    export KAFKA_VERSION=$v KAFKA_STATE_DIR=$state_root/$v
    log=$KAFKA_STATE_DIR.log
    : >"$log"
    echo "compat.sh: === Kafka $v ($suite suite; log ${log#"$repo"/})" >&2
    # provisioning (a download the first time) is not part of the version's time
    t=$SECONDS
    if ! ci/kafka.sh provision >>"$log" 2>&1; then
        rows+=("$v|FAIL|-|not provisioned from Maven Central (see ${log#"$repo"/})")
        failed_any=1
        continue
    fi
    prov=$((SECONDS - t))
    t0=$SECONDS
    current=$v
    failures=()
    ci/kafka.sh clean >>"$log" 2>&1 || true
    secured=1
    if ! ci/kafka.sh start 1 >>"$log" 2>&1; then
        failures+=("the 1-node cluster did not start")
    else
        if ! ci/kafka.sh start secured >>"$log" 2>&1; then
            failures+=("the secured cluster did not start")
            secured=0
        fi
        for g in "${groups[@]}"; do
            if [[ ${g%%:*} == secured && $secured == 0 ]]; then continue; fi
            mapfile -t a < <(test_args "$g")
            extra=${g##*:}
            read -r -a extra_args <<<"$extra"
            t=$SECONDS
            rc=0
            {
                echo "----- cargo test ${a[*]} -- ${extra_args[*]}"
                cargo test "${a[@]}" -- ${extra_args[@]+"${extra_args[@]}"} 2>&1
            } >>"$log" || rc=$?
            echo "compat.sh: $v: ${a[*]}: $([[ $rc -eq 0 ]] && echo ok || echo "FAILED (exit $rc)") in $((SECONDS - t)) s" >&2
            if ((rc != 0)); then
                # the failed tests by name, else the target
                mapfile -t names < <(sed -n 's/^test \(.*\) \.\.\. FAILED$/\1/p' "$log" | sort -u)
                if [[ ${#names[@]} -gt 0 ]]; then
                    for n in "${names[@]}"; do
                        [[ " ${failures[*]} " == *" $n "* ]] || failures+=("$n")
                    done
                else
                    failures+=("${a[*]} (exit $rc)")
                fi
            fi
        done
    fi
    ci/kafka.sh stop >>"$log" 2>&1 || true
    current=
    secs=$((SECONDS - t0))
    if [[ ${#failures[@]} -eq 0 ]]; then
        rows+=("$v|pass|${secs} s|")
    else
        what=$(printf '%s, ' "${failures[@]}")
        rows+=("$v|FAIL|${secs} s|${what%, }")
        failed_any=1
    fi
    echo "compat.sh: Kafka $v: ${rows[-1]} (provisioning ${prov} s)" >&2
done

printf '\n%-8s  %-6s  %-7s  %s\n' version result time failed
for r in "${rows[@]}"; do
    IFS='|' read -r v res secs what <<<"$r"
    printf '%-8s  %-6s  %-7s  %s\n' "$v" "$res" "$secs" "$what"
done
exit "$failed_any"
