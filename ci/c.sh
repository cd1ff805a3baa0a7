#!/usr/bin/env bash
# CI of the C ABI (bindings/c), from a fresh clone:
#
#   1. the pinned cbindgen (CBINDGEN_VERSION) from crates.io into
#      target/tools (once; a fresh clone pays its cold install, see the
#      README), regenerates include/krabka_coordination.h: any difference
#      from the checked-in header fails, and every function it declares
#      must carry its documentation comment (tests/check_header_docs.sh);
#   2. the unit tests of the crate (ci/clippy.sh lints it with the workspace);
#   3. `make install PREFIX=target/c/prefix` (the debug build, to share the
#      workspace's build cache): the shared and static libraries, the header
#      and krabka_coordination.pc;
#   4. the header compiles alone as C99, C11 and C++11 with -Wall -Wextra
#      -pedantic -Werror, and a C++ program using it links and runs;
#   5. the C tests, built with the pkg-config line against the installed
#      prefix, run plainly, under AddressSanitizer (leaks included) and under
#      valgrind memcheck (no definite, indirect or possible leak); the
#      suppressions (bindings/c/tests/lsan.supp, valgrind.supp) name exact
#      frames and say why each is not the binding's: every golden vector
#      counted, NULL and bad-length arguments for every function, the
#      leadership surface and its thread safety on the real Kafka, a
#      two-process failover with a fenced write, an observer that sees a
#      hand-over and a SIGKILL failover in order (test_observe), and the
#      leader loop handing over, failing over and stopping (test_lead), and
#      the core's warnings reaching the log callback (test_log), and the
#      state topic's check and its report (test_topic), and the metrics
#      text after an election (test_metrics), and the size rule of the option
#      structs (test_options), and the OAUTHBEARER token callback
#      (test_oauth), and the test kit with no broker (test_testing_kit:
#      an election, a crash failed over at the deadline, a paused leader's
#      write fenced, a resign's hand-over, all on the manual clock), and
#      the input offsets committed with guarded writes on Kafka, a deposed
#      leader's write with offsets fenced and moving nothing (test_offsets);
#   6. examples/c/worker.c, built with `make` (the pkg-config line), leads
#      for a few seconds, writes, resigns on its alarm; a standby is stopped
#      with SIGTERM while it waits.
#
# Kafka: KRABKA_BOOTSTRAP when set, else the local one-node cluster of
# `ci/kafka.sh start 1` (started, or reused when running). The Kafka tests
# fail when it is unreachable.
#
# Usage: ci/c.sh            Needs: cargo, cc/c++, make, pkg-config, valgrind.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
CBINDGEN_VERSION=0.29.4
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
export CARGO_TARGET_DIR="$TARGET"
TOOLS="$TARGET/tools"
WORK="$TARGET/c"
PREFIX="$WORK/prefix"
BUILD="$WORK/build"
CBINDGEN="$TOOLS/bin/cbindgen"
C_STRICT=(-std=c99 -Wall -Wextra -pedantic -Werror)

step() { printf '\n==> %s\n' "$*"; }
started_kafka=
cleanup() {
    if [[ -n $started_kafka ]]; then ci/kafka.sh stop 1 >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT

step "cbindgen $CBINDGEN_VERSION (pinned, in $TOOLS)"
if [[ ! -x $CBINDGEN ]] || [[ "$("$CBINDGEN" --version)" != "cbindgen $CBINDGEN_VERSION" ]]; then
    t0=$SECONDS
    # --debug: a tool run once per check; an unoptimised build installs in a
    # fraction of the release build's time.
    cargo install --quiet --locked --debug --force cbindgen --version "$CBINDGEN_VERSION" --root "$TOOLS"
    echo "installed in $((SECONDS - t0)) s"
fi
"$CBINDGEN" --version

step "the checked-in header is what cbindgen makes of the crate"
mkdir -p "$WORK"
(cd bindings/c && "$CBINDGEN" --quiet --config cbindgen.toml --crate krabka-coordination-c \
    --output "$WORK/krabka_coordination.h" .)
if ! diff -u bindings/c/include/krabka_coordination.h "$WORK/krabka_coordination.h"; then
    echo "ci/c.sh: bindings/c/include/krabka_coordination.h is stale: run 'make -C bindings/c header CBINDGEN=$CBINDGEN' and commit it" >&2
    exit 1
fi
echo "header up to date ($(wc -l <bindings/c/include/krabka_coordination.h) lines)"
bindings/c/tests/check_header_docs.sh bindings/c/include/krabka_coordination.h

step "unit tests (krabka-coordination-c; its clippy is ci/clippy.sh's, over the workspace)"
if [ -n "${KRABKA_CI_UMBRELLA:-}" ]; then
    echo "(under ci/test.sh: ci/rust-tests.sh runs them with the workspace's)"
else
    cargo test --quiet -p krabka-coordination-c
fi

step "make install PREFIX=$PREFIX"
rm -rf "$PREFIX"
make --no-print-directory -C bindings/c install PREFIX="$PREFIX" PROFILE=dev CARGO="cargo" >/dev/null
find "$PREFIX" -type f -o -type l | sed "s|$PREFIX/||" | sort
export PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig"
export LD_LIBRARY_PATH="$PREFIX/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "pkg-config: $(pkg-config --cflags --libs krabka_coordination)"
read -r -a PC <<<"$(pkg-config --cflags --libs krabka_coordination)"

step "the header alone: C99, C11, C++11 (-Wall -Wextra -pedantic -Werror)"
mkdir -p "$BUILD"
printf '#include <krabka_coordination.h>\nint main(void) { return krabka_version()[0] == 0; }\n' >"$BUILD/only.c"
cc "${C_STRICT[@]}" -o "$BUILD/only_c99" "$BUILD/only.c" "${PC[@]}"
cc -std=c11 -Wall -Wextra -pedantic -Werror -o "$BUILD/only_c11" "$BUILD/only.c" "${PC[@]}"
c++ -std=c++11 -Wall -Wextra -pedantic -Werror -o "$BUILD/cxx_check" bindings/c/tests/cxx_check.cpp "${PC[@]}"
"$BUILD/only_c99" && "$BUILD/cxx_check"
# The static archive links too (pkg-config --static adds its system libraries).
cc "${C_STRICT[@]}" -o "$BUILD/only_static" "$BUILD/only.c" -I"$PREFIX/include" "$PREFIX/lib/libkrabka_coordination.a" \
    $(pkg-config --static --libs-only-l krabka_coordination | sed 's/-lkrabka_coordination//')
"$BUILD/only_static" && echo "static link: ok"

step "build the C tests (plain and AddressSanitizer)"
TESTS=(test_golden test_args test_kafka test_close test_failover test_observe test_lead test_log test_topic test_metrics test_options test_oauth test_testing_kit test_offsets member)
for t in "${TESTS[@]}"; do
    cc "${C_STRICT[@]}" -g -o "$BUILD/$t" "bindings/c/tests/$t.c" "${PC[@]}" -lpthread -lm
    cc "${C_STRICT[@]}" -g -fsanitize=address -fno-omit-frame-pointer -o "$BUILD/$t.asan" \
        "bindings/c/tests/$t.c" "${PC[@]}" -lpthread -lm
done

step "Kafka"
if [[ -z ${KRABKA_BOOTSTRAP:-} ]]; then
    if ! ci/kafka.sh status 1 >/dev/null 2>&1; then started_kafka=1; fi
    KRABKA_BOOTSTRAP=$(ci/kafka.sh start 1 | tail -n 1)
fi
export KRABKA_BOOTSTRAP KRABKA_KAFKA_SH="$ROOT/ci/kafka.sh" KRABKA_C_TOPIC=krabka-c-guarded
export KRABKA_C_INPUT_TOPIC=krabka-c-input
ci/kafka.sh tool topics --bootstrap-server "$KRABKA_BOOTSTRAP" --create --if-not-exists \
    --topic "$KRABKA_C_TOPIC" --partitions 1 --replication-factor 1 >/dev/null
ci/kafka.sh tool topics --bootstrap-server "$KRABKA_BOOTSTRAP" --create --if-not-exists \
    --topic "$KRABKA_C_INPUT_TOPIC" --partitions 2 --replication-factor 1 >/dev/null
echo "KRABKA_BOOTSTRAP=$KRABKA_BOOTSTRAP, guarded writes to $KRABKA_C_TOPIC"

# Each suite's outcome is a line of $RESULTS ("pass NAME" or "fail NAME"),
# so that suites run in the two lanes below count alike.
RESULTS="$WORK/results"
: >"$RESULTS"
run() { # run NAME COMMAND...: counts the suite, shows its output
    local name=$1
    shift
    echo "--- $name"
    if "$@"; then
        echo "pass $name" >>"$RESULTS"
    else
        echo "fail $name" >>"$RESULTS"
        echo "ci/c.sh: $name FAILED" >&2
    fi
}

plain_suites() {
    step "C tests"
    run golden "$BUILD/test_golden" golden
    run args "$BUILD/test_args"
    run kafka "$BUILD/test_kafka"
    run close "$BUILD/test_close"
    run failover "$BUILD/test_failover" "$BUILD/member"
    run observe "$BUILD/test_observe" "$BUILD/member"
    run lead "$BUILD/test_lead" "$BUILD/member"
    run log "$BUILD/test_log"
    run topic "$BUILD/test_topic"
    run metrics "$BUILD/test_metrics"
    run options "$BUILD/test_options"
    run oauth "$BUILD/test_oauth"
    run testing_kit "$BUILD/test_testing_kit"
    run offsets "$BUILD/test_offsets"
}

asan_suites() {
    step "C tests under AddressSanitizer (LeakSanitizer on)"
    # fast_unwind_on_malloc=0: whole stacks through the Rust frames, so the
    # suppressions (bindings/c/tests/lsan.supp, each explained) match exact frames.
    local ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:fast_unwind_on_malloc=0
    local LSAN_OPTIONS="suppressions=$ROOT/bindings/c/tests/lsan.supp:print_suppressions=0"
    export ASAN_OPTIONS LSAN_OPTIONS
    run golden.asan "$BUILD/test_golden.asan" golden
    run args.asan "$BUILD/test_args.asan"
    run kafka.asan "$BUILD/test_kafka.asan"
    run close.asan "$BUILD/test_close.asan"
    run failover.asan "$BUILD/test_failover.asan" "$BUILD/member.asan"
    run observe.asan "$BUILD/test_observe.asan" "$BUILD/member.asan"
    run lead.asan "$BUILD/test_lead.asan" "$BUILD/member.asan"
    run log.asan "$BUILD/test_log.asan"
    run topic.asan "$BUILD/test_topic.asan"
    run metrics.asan "$BUILD/test_metrics.asan"
    run options.asan "$BUILD/test_options.asan"
    run oauth.asan "$BUILD/test_oauth.asan"
    run testing_kit.asan "$BUILD/test_testing_kit.asan"
    run offsets.asan "$BUILD/test_offsets.asan"
}

valgrind_suites() {
    step "C tests under valgrind memcheck"
    # --child-silent-after-fork: test_args forks a child that must refuse its
    # parent's client, and a handle in a process that did not make it is leaked
    # by design (its threads are the parent's); the parent is checked in full.
    local VG=(valgrind --quiet --child-silent-after-fork=yes --error-exitcode=97 --leak-check=full
        --show-leak-kinds=definite,indirect,possible
        --errors-for-leak-kinds=definite,indirect,possible --suppressions=bindings/c/tests/valgrind.supp)
    run golden.valgrind "${VG[@]}" "$BUILD/test_golden" golden
    run args.valgrind "${VG[@]}" "$BUILD/test_args"
    run kafka.valgrind env KRABKA_C_SLOW=1 "${VG[@]}" "$BUILD/test_kafka"
    # The failover test under valgrind, its members too: member a is killed
    # (SIGKILL, no leak check by design); member b and the test itself exit
    # normally and are checked in full.
    run failover.valgrind env KRABKA_C_SLOW=1 "${VG[@]}" "$BUILD/test_failover" "${VG[@]}" "$BUILD/member"
    # The observer under valgrind: member b is killed (SIGKILL), as above.
    run observe.valgrind env KRABKA_C_SLOW=1 "${VG[@]}" "$BUILD/test_observe" "${VG[@]}" "$BUILD/member"
    # The leader loop under valgrind: member b is killed (SIGKILL), as above.
    run lead.valgrind env KRABKA_C_SLOW=1 "${VG[@]}" "$BUILD/test_lead" "${VG[@]}" "$BUILD/member"
    run log.valgrind env KRABKA_C_SLOW=1 "${VG[@]}" "$BUILD/test_log"
    run topic.valgrind "${VG[@]}" "$BUILD/test_topic"
    run metrics.valgrind env KRABKA_C_SLOW=1 "${VG[@]}" "$BUILD/test_metrics"
    run options.valgrind env KRABKA_C_SLOW=1 "${VG[@]}" "$BUILD/test_options"
    run oauth.valgrind "${VG[@]}" "$BUILD/test_oauth"
    run testing_kit.valgrind "${VG[@]}" "$BUILD/test_testing_kit"
    run offsets.valgrind env KRABKA_C_SLOW=1 "${VG[@]}" "$BUILD/test_offsets"
}

# Two lanes side by side: the valgrind runs (CPU-bound, one core) beside the
# plain and AddressSanitizer runs (which mostly wait on Kafka and on leases).
# Every suite uses roles of its own (named by its pid), so the lanes never
# contend for a role. Each lane's output is printed whole when both ended.
(plain_suites; asan_suites) >"$WORK/lane-plain.log" 2>&1 &
lane_plain=$!
valgrind_suites >"$WORK/lane-valgrind.log" 2>&1 &
lane_valgrind=$!
wait "$lane_plain" || true
wait "$lane_valgrind" || true
cat "$WORK/lane-plain.log" "$WORK/lane-valgrind.log"
passed=$(grep -c '^pass ' "$RESULTS" || true)
failed=$(grep -c '^fail ' "$RESULTS" || true)
if [[ $((passed + failed)) -ne 41 ]]; then
    echo "ci/c.sh: expected 41 suite results from the two lanes, got $((passed + failed))" >&2
    failed=$((failed + 1))
fi

step "example: examples/c/worker.c (make, the pkg-config line), a few seconds on Kafka"
make --no-print-directory -C examples/c -B worker >/dev/null
role="ci-c-worker-$$-$(date +%s)"
log="$WORK/worker.log"
set +e
examples/c/worker --bootstrap "$KRABKA_BOOTSTRAP" --role "$role" --member leader --topic "$KRABKA_C_TOPIC" \
    --interval 0.5 --lease 3 --renew 1 --stagger 1 --for-seconds 6 >"$log" 2>&1 &
leader=$!
sleep 2
examples/c/worker --bootstrap "$KRABKA_BOOTSTRAP" --role "$role" --member standby --topic "$KRABKA_C_TOPIC" \
    --lease 3 --renew 1 --stagger 1 >"$log.standby" 2>&1 &
standby=$!
sleep 2
kill -TERM "$standby"
wait "$standby"
standby_rc=$?
wait "$leader"
leader_rc=$?
set -e
sed 's/^/leader:  /' "$log"
sed 's/^/standby: /' "$log.standby"
if [[ $leader_rc -eq 0 ]] && grep -q '^leading with token' "$log" && grep -q '^result 2 written' "$log" \
    && grep -q '^signal 14: resigned' "$log"; then
    passed=$((passed + 1))
else
    failed=$((failed + 1))
    echo "ci/c.sh: the worker should lead, write results and resign on its alarm (exit $leader_rc)" >&2
fi
if [[ $standby_rc -eq 0 ]] && grep -q '^event waiting' "$log.standby" \
    && grep -q '^stopped while waiting (signal 15)' "$log.standby"; then
    passed=$((passed + 1))
else
    failed=$((failed + 1))
    echo "ci/c.sh: the standby should wait, then stop on SIGTERM (exit $standby_rc)" >&2
fi

step "quick start (the c blocks of README.md, bindings/c/README.md and docs/c.md, ci/snippets.py): C99 -Werror, run on Kafka"
ci/kafka.sh tool topics --bootstrap-server "$KRABKA_BOOTSTRAP" --create --if-not-exists \
    --topic billing-out --partitions 1 --replication-factor 1 >/dev/null
ci/kafka.sh tool topics --bootstrap-server "$KRABKA_BOOTSTRAP" --create --if-not-exists \
    --topic billing-in --partitions 1 --replication-factor 1 >/dev/null
SNIPPETS="$WORK/snippets"
python3 ci/snippets.py extract c "$SNIPPETS" README.md bindings/c/README.md docs/c.md
if python3 ci/snippets.py run c "$SNIPPETS" -- sh -c \
    'cc "$0" -o "$0.bin" "$@" && { [ -n "${KRABKA_SNIPPET_FRAGMENT:-}" ] || "$0.bin"; }' \
    {} "${C_STRICT[@]}" "${PC[@]}"; then
    passed=$((passed + 1))
else
    failed=$((failed + 1))
fi

step "C ABI: $passed suites passed, $failed failed"
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
