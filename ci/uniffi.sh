#!/usr/bin/env bash
# CI of the uniffi bindings (bindings/uniffi: Kotlin tested on the JVM, Swift
# generated only), from a fresh clone:
#
#   1. the Kotlin compiler, kotlin-stdlib, kotlinx-coroutines, JNA, the
#      optional Micrometer and (for the tests only) JUnit 5's console
#      launcher from
#      Maven Central into ci/.cache/uniffi-jars (gitignored), each checked
#      against the sha256 pinned below; downloaded only when missing, and a
#      failed download (offline) stops the script with the URL;
#   2. the library and the workspace's uniffi-bindgen built, the Kotlin and
#      Swift sources generated from the library (bindings/uniffi/generate.sh);
#      the checked-in Swift must be what was generated (git diff). Swift is
#      never compiled or run here: there is no Swift toolchain;
#   3. the generated Kotlin, the hand-written Kotlin shipped with it
#      (bindings/uniffi/kotlin: observeFlow, TestCluster, ...), the tests
#      (bindings/uniffi/tests/kotlin) and the example (examples/kotlin)
#      compiled in one kotlinc run, then the Java tests
#      (bindings/uniffi/tests/java) with javac against them;
#   3b. the test kit's JUnit 5 tests, no broker needed: the scenario set
#      on TestCluster from Kotlin (TestingKitTest.kt) and from plain Java
#      (TestingKitJavaTest.java), and the README's two kit tests;
#   4. a real Kafka: KRABKA_BOOTSTRAP when set, else the local one-node
#      cluster of `ci/kafka.sh start 1` (started, or reused when running);
#   5. the tests on the JVM: every golden vector (counted), every malformed
#      entry with its part, refused arguments, leadership on the Kafka (a
#      second member taking over; a deposed leader fenced), without the
#      optional Micrometer jars; then the Micrometer binder
#      (krabka.coordination.micrometer, compiled against them) with them;
#   5b. the Java tests (bindings/uniffi/tests/java: JavaMain): KrabkaJava's blocking and
#      CompletableFuture API from plain Java on the same Kafka (the acquire
#      with a timeout, the leader loop), the token's text, and the API's
#      Java shape by reflection over every public class (no name colliding
#      with Object's or mangled, no setter on a returned record);
#   5c. the JDBC fence (krabka.coordination.jdbc.KrabkaFence) from Kotlin and
#      plain Java on the PostgreSQL of KRABKA_POSTGRES_URL (required; ci/
#      test.sh exports it) and on SQLite files, with the JDBC drivers
#      (ci/uniffi-jars.sh: DB_LIST) on the classpath and leaderships on the
#      same Kafka;
#   6. examples/kotlin/Worker.kt for a few seconds (it must lead, write
#      through guarded writes and resign when its time is up), then once more
#      deposed behind its back (it must stop its work and exit 3, fenced).
#
# Usage: bash ci/uniffi.sh   (CARGO_TARGET_DIR is honoured)
# Needs: Java 17 (java, javac), curl, a Rust toolchain and what the core needs.
# Time, on these 2 cores: 25-45 s warm (Rust built, jars cached: kotlinc ~20 s,
# the tests ~3 s, the example 5 s); 4 min 50 s cold from a fresh clone with an
# empty target directory (the Rust build of the core and librdkafka 4 min 20 s;
# the 9 jars, 65 MB, downloaded in seconds).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
# The pinned jars (kotlinc, kotlin-stdlib, coroutines, JNA): uniffi_jars.
. "$ROOT/ci/uniffi-jars.sh"
OUT="$TARGET/uniffi"
started=$(date +%s)

step() { printf '\n==> %s (%ss)\n' "$*" "$(($(date +%s) - started))"; }

# The fence's tests need a PostgreSQL (ci/test.sh starts one and exports it;
# alone: KRABKA_POSTGRES_URL=$(bash ci/postgres.sh start | tail -n1)).
if [ -z "${KRABKA_POSTGRES_URL:-}" ]; then
    echo "ci/uniffi.sh: KRABKA_POSTGRES_URL is not set: the JDBC fence tests need a PostgreSQL (bash ci/postgres.sh start)" >&2
    exit 1
fi

step "toolchain"
java -version 2>&1 | head -1

step "jars (Maven Central, cached in ci/.cache/uniffi-jars)"
uniffi_jars
uniffi_db_jars
echo "$JAR_COUNT jars and the JDBC drivers verified"
# JUnit 5 (its console launcher) for the test kit's tests.
uniffi_test_jars

step "library and generated sources (bindings/uniffi/generate.sh)"
LIB="$(bash "$ROOT/bindings/uniffi/generate.sh" "$OUT/kotlin" | tail -n 1)"
echo "library: $LIB"
echo "kotlin: $(find "$OUT/kotlin" -name '*.kt')"

step "the checked-in Swift is what was generated (not compiled: no Swift toolchain here)"
git -C "$ROOT" diff --exit-code --stat -- bindings/uniffi/swift
untracked="$(git -C "$ROOT" ls-files --others --exclude-standard -- bindings/uniffi/swift)"
if [ -n "$untracked" ]; then
    echo "ci/uniffi.sh: generated Swift sources that are not checked in: $untracked (run bindings/uniffi/generate.sh and commit)" >&2
    exit 1
fi
ls "$ROOT/bindings/uniffi/swift"

step "kotlinc: the generated Kotlin, the tests, the example and the README quick starts"
# The kotlin blocks of README.md, bindings/uniffi/README.md and docs/kotlin.md
# (ci/snippets.py), each compiled in a package of its own (each has a main).
SNIPPETS="$OUT/snippets"
python3 "$ROOT/ci/snippets.py" extract kotlin "$SNIPPETS" "$ROOT/README.md" "$ROOT/bindings/uniffi/README.md" "$ROOT/docs/kotlin.md"
rm -rf "$OUT/snippets-src"
mkdir -p "$OUT/snippets-src"
for f in "$SNIPPETS"/*.kt; do
    n=$(basename "$f" .kt)
    { echo "package snippets.$n"; cat "$f"; } >"$OUT/snippets-src/$n.kt"
done
rm -rf "$OUT/classes"
mkdir -p "$OUT/classes"
java -cp "$COMPILER_CP" org.jetbrains.kotlin.cli.jvm.K2JVMCompiler \
    -no-stdlib -no-reflect -nowarn -jvm-target 17 \
    -cp "$RUN_CP:$OPT_CP:$TEST_CP" -d "$OUT/classes" \
    "$(find "$OUT/kotlin" -name '*.kt')" \
    $(find "$ROOT/bindings/uniffi/kotlin" -name '*.kt' | sort) \
    "$ROOT/bindings/uniffi/tests/kotlin/Main.kt" \
    "$ROOT/bindings/uniffi/tests/kotlin/Micrometer.kt" \
    "$ROOT/bindings/uniffi/tests/kotlin/Fence.kt" \
    "$ROOT/bindings/uniffi/tests/kotlin/TestingKitTest.kt" \
    "$ROOT/examples/kotlin/Worker.kt" \
    "$OUT"/snippets-src/*.kt

step "javac: the Java tests (bindings/uniffi/tests/java) against the compiled bindings"
rm -rf "$OUT/java-classes"
mkdir -p "$OUT/java-classes"
javac -Xlint:all -Werror --release 17 -cp "$OUT/classes:$RUN_CP:$TEST_CP" -d "$OUT/java-classes" \
    $(find "$ROOT/bindings/uniffi/tests/java" -name '*.java' | sort)

step "test kit, no broker: JUnit 5 (TestingKitTest.kt, TestingKitJavaTest.java, the README's kit tests)"
# The README's kit tests are fragments (a JUnit class, no main): kotlinc
# compiled them into the snippets packages above; JUnit finds them there.
java -Djna.library.path="$(dirname "$LIB")" -jar "$TEST_CP" execute \
    --disable-banner --fail-if-no-tests --details=tree \
    --class-path "$OUT/java-classes:$OUT/classes:$RUN_CP" \
    --select-class krabka.coordination.test.TestingKitTest \
    --select-class krabka.coordination.javatest.TestingKitJavaTest \
    --select-package snippets

step "kafka for the leadership tests"
if [ -z "${KRABKA_BOOTSTRAP:-}" ]; then
    KRABKA_BOOTSTRAP="$(bash "$ROOT/ci/kafka.sh" start 1 | tail -n 1)"
fi
export KRABKA_BOOTSTRAP
echo "KRABKA_BOOTSTRAP=$KRABKA_BOOTSTRAP"
TOPIC=krabka-uniffi-results
bash "$ROOT/ci/kafka.sh" tool topics --bootstrap-server "$KRABKA_BOOTSTRAP" \
    --create --if-not-exists --topic "$TOPIC" --partitions 1 --replication-factor 1 >/dev/null
# The input of the exactly-once tests (offsets in the guarded transaction).
INPUT_TOPIC=krabka-uniffi-input
bash "$ROOT/ci/kafka.sh" tool topics --bootstrap-server "$KRABKA_BOOTSTRAP" \
    --create --if-not-exists --topic "$INPUT_TOPIC" --partitions 2 --replication-factor 1 >/dev/null

# Without the optional Micrometer jars (OPT_CP): the bindings run without
# them; only krabka.coordination.micrometer needs them.
JAVA_RUN=(java -Djna.library.path="$(dirname "$LIB")" -cp "$OUT/classes:$RUN_CP")

step "Kotlin tests on the JVM (bindings/uniffi/tests/kotlin/Main.kt)"
KRABKA_ROOT="$ROOT" KRABKA_UNIFFI_TOPIC="$TOPIC" KRABKA_UNIFFI_INPUT="$INPUT_TOPIC" "${JAVA_RUN[@]}" krabka.coordination.test.MainKt "$ROOT/golden"

step "Micrometer binder (bindings/uniffi/tests/kotlin/Micrometer.kt, with the optional jars)"
java -Djna.library.path="$(dirname "$LIB")" -cp "$OUT/classes:$RUN_CP:$OPT_CP" krabka.coordination.test.MicrometerMain

step "Java tests (bindings/uniffi/tests/java/.../JavaMain.java, on the JVM)"
java -Djna.library.path="$(dirname "$LIB")" -cp "$OUT/java-classes:$OUT/classes:$RUN_CP" \
    krabka.coordination.javatest.JavaMain "$TOPIC" "$INPUT_TOPIC"

step "JDBC fence (tests/kotlin/Fence.kt, tests/java/.../JavaFence.java) on PostgreSQL and SQLite, with the drivers"
# pgjdbc's URL of the same server: jdbc:postgresql://HOST:PORT/DB?user=USER.
pg_rest="${KRABKA_POSTGRES_URL#postgresql://}"
pg_rest="${pg_rest#postgres://}"
if [[ $pg_rest == *@* ]]; then
    KRABKA_POSTGRES_JDBC="jdbc:postgresql://${pg_rest#*@}?user=${pg_rest%%@*}"
else
    KRABKA_POSTGRES_JDBC="jdbc:postgresql://$pg_rest"
fi
export KRABKA_POSTGRES_JDBC
java -Djna.library.path="$(dirname "$LIB")" -cp "$OUT/classes:$RUN_CP:$DB_CP" krabka.coordination.test.FenceMain
java -Djna.library.path="$(dirname "$LIB")" -cp "$OUT/java-classes:$OUT/classes:$RUN_CP:$DB_CP" \
    krabka.coordination.javatest.JavaFence

step "example (examples/kotlin/Worker.kt, 5 s on the real Kafka)"
WORKER_LOG="$(mktemp)"
set +e
"${JAVA_RUN[@]}" krabka.coordination.example.WorkerKt --bootstrap "$KRABKA_BOOTSTRAP" \
    --role "ci-kotlin-worker-$$-$(date +%s)" --member ci-worker --topic "$TOPIC" \
    --interval 0.5 --lease 3 --renew 1 --stagger 1 --for-seconds 5 >"$WORKER_LOG" 2>&1
worker_rc=$?
set -e
cat "$WORKER_LOG"
if [ "$worker_rc" -ne 0 ] || ! grep -q "leading " "$WORKER_LOG" \
    || ! grep -q "result 2 written" "$WORKER_LOG" || ! grep -q "time is up: resigned" "$WORKER_LOG"; then
    echo "Worker.kt: expected exit 0 after leading, two guarded writes and a resign (exit $worker_rc)" >&2
    rm -f "$WORKER_LOG"
    exit 1
fi
rm -f "$WORKER_LOG"

step "quick starts (the kotlin blocks of README.md, bindings/uniffi/README.md and docs/kotlin.md) on the real Kafka"
for topic in billing-out results; do
    bash "$ROOT/ci/kafka.sh" tool topics --bootstrap-server "$KRABKA_BOOTSTRAP" \
        --create --if-not-exists --topic "$topic" --partitions 1 --replication-factor 1 >/dev/null
done
# A snippet's main is the file class of its package: readme_1.kt is
# snippets.readme_1.Readme_1Kt. A fragment (<!-- snippet: fragment -->) has
# no main: kotlinc checked it above.
python3 "$ROOT/ci/snippets.py" run kotlin "$SNIPPETS" -- sh -c \
    '[ -z "${KRABKA_SNIPPET_FRAGMENT:-}" ] || exit 0; n=$(basename "$0" .kt); c="$(printf %s "$n" | cut -c1 | tr a-z A-Z)$(printf %s "$n" | cut -c2-)Kt"; exec "$@" "snippets.$n.$c"' \
    {} "${JAVA_RUN[@]}"

step "example fenced: a newer epoch minted behind the worker's back stops its work (exit 3)"
WORKER_LOG="$(mktemp)"
ROLE="ci-kotlin-fenced-$$-$(date +%s)"
# A 30 s lease renewed every 10 s: the next guarded write meets the newer
# epoch before any renewal does.
"${JAVA_RUN[@]}" krabka.coordination.example.WorkerKt --bootstrap "$KRABKA_BOOTSTRAP" \
    --role "$ROLE" --member ci-worker --topic "$TOPIC" \
    --interval 0.5 --lease 30 --renew 10 --stagger 1 --for-seconds 60 >"$WORKER_LOG" 2>&1 &
worker=$!
for _ in $(seq 1 300); do
    grep -q "result 2 written" "$WORKER_LOG" && break
    kill -0 "$worker" 2>/dev/null || break
    sleep 0.1
done
bash "$ROOT/ci/kafka.sh" tool transactions --bootstrap-server "$KRABKA_BOOTSTRAP" \
    forceTerminateTransaction --transactionalId "$ROLE" >/dev/null
set +e
wait "$worker"
worker_rc=$?
set -e
cat "$WORKER_LOG"
if [ "$worker_rc" -ne 3 ] || ! grep -q "refused (fenced)" "$WORKER_LOG" \
    || ! grep -q "the term ended (FENCED)" "$WORKER_LOG"; then
    echo "Worker.kt: expected exit 3 after a guarded write refused as fenced (exit $worker_rc)" >&2
    rm -f "$WORKER_LOG"
    exit 1
fi
rm -f "$WORKER_LOG"

step "uniffi bindings: all checks passed in $(($(date +%s) - started)) s"
