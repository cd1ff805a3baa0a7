#!/usr/bin/env bash
# Installs every artifact of dist/ (ci/release.sh) as a user without a Rust
# toolchain would, and runs the golden vectors and a leadership round on
# Kafka through each:
#
#   * everything below runs with a PATH that has no cargo and no rustc (the
#     directories holding them, ~/.cargo/bin and rustup's, are left out, and
#     `command -v cargo` / `command -v rustc` must fail in it), in fresh
#     temporary directories;
#   * Python: a fresh venv, `pip install --only-binary :all:` of the wheel
#     (pytest and hypothesis from PyPI); the golden tests
#     (bindings/python/tests/test_golden.py, every vector counted), the
#     documentation tests, and leadership on Kafka: a member holding a role,
#     writing and resigning, and a second process taking over after a
#     SIGKILL of the first; all against the installed package;
#   * Node: `npm install` of the two tarballs into a fresh directory with
#     npm offline and its registry pointed at nothing, so our packages can
#     only come from dist/; the loader must take the addon from
#     krabka-coordination-linux-x64-gnu; the golden test and the
#     leadership tests (acquire, write, resign; SIGKILL hand-over between
#     processes; a deposed process's write fenced) from bindings/node/test,
#     run against the installed package;
#   * C: the tarball unpacked into a temporary prefix; the C golden test and
#     the two-process failover test (a fenced write included) built with the
#     prefix's pkg-config line and run, the golden test once more linked
#     statically; krabka_version() must be the release's;
#   * JVM: the Kotlin tests (bindings/uniffi/tests/kotlin) compiled against
#     the jar with the pinned kotlinc and run on the JVM with only the jar
#     and its three runtime jars on the classpath: JNA must load the native
#     library from the jar; golden vectors counted, a second member taking
#     over, a deposed leader fenced;
#   * every artifact carries the version of ci/version.sh.
#
# Kafka: KRABKA_BOOTSTRAP (required; ci/test.sh sets it): the check fails at
# once when no broker answers there.
#
# Usage: ci/release-check.sh        Needs: python3, node and npm, cc,
#                                   pkg-config, java 17, the pinned jars
#                                   (ci/uniffi-jars.sh fetches them).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
DIST="$ROOT/dist"
started=$(date +%s)
step() { printf '\n==> %s (%ss)\n' "$*" "$(($(date +%s) - started))"; }
fail() { echo "ci/release-check.sh: $*" >&2; exit 1; }

V="$(ci/version.sh)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/krabka-release-check.XXXXXX")"
children=()
cleanup() {
    for pid in "${children[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

step "artifacts of $V in dist/"
WHEEL="$(ls "$DIST"/krabka_coordination-"$V"-cp39-abi3-manylinux*_x86_64.whl)" || fail "no wheel of $V (run ci/release.sh)"
NPM_MAIN="$DIST/krabka-coordination-$V.tgz"
NPM_PLATFORM="$DIST/krabka-coordination-linux-x64-gnu-$V.tgz"
C_TARBALL="$DIST/krabka-coordination-c-$V-linux-x86_64.tar.gz"
JAR="$DIST/krabka-coordination-jvm-$V.jar"
for f in "$NPM_MAIN" "$NPM_PLATFORM" "$C_TARBALL" "$JAR" "$DIST/SHA256SUMS"; do
    [ -f "$f" ] || fail "$f is missing (run ci/release.sh)"
done
(cd "$DIST" && sha256sum --quiet -c SHA256SUMS) || fail "dist/ does not match its SHA256SUMS"
ls -l "$DIST"

step "a PATH without cargo and rustc"
# rustup's and cargo's directories are left out. A shared directory that
# holds a Rust toolchain too (Debian's rustc and cargo in /usr/bin, which
# ci/release-cross.sh installs) is replaced by a directory of links to its
# programs less the toolchain's: leaving /usr/bin out would leave out bash.
NORUST=""
IFS=: read -r -a dirs <<<"$PATH"
for d in "${dirs[@]}"; do
    [ -n "$d" ] || continue
    case "$d" in *cargo* | *rustup*) continue ;; esac
    if [ -e "$d/cargo" ] || [ -e "$d/rustc" ]; then
        masked="$WORK/path-$(printf '%s' "$d" | tr -c 'A-Za-z0-9' '_')"
        mkdir -p "$masked"
        for f in "$d"/*; do
            name="${f##*/}"
            case "$name" in
                cargo | cargo-* | rustc | rustc-* | rustdoc | rustdoc-* | rustup | rust-gdb* | rust-lldb | rustfmt | clippy-driver) continue ;;
            esac
            if [ -x "$f" ] && [ ! -d "$f" ]; then ln -s "$f" "$masked/$name"; fi
        done
        d="$masked"
    fi
    NORUST="$NORUST${NORUST:+:}$d"
done
# What runs the artifacts: no cargo, no rustc, no rustup environment.
norust() { env -u CARGO -u RUSTC -u RUSTUP_HOME -u RUSTUP_TOOLCHAIN -u CARGO_HOME -u CARGO_TARGET_DIR PATH="$NORUST" "$@"; }
if norust bash -c 'command -v cargo || command -v rustc'; then
    fail "cargo or rustc is still on the reduced PATH"
fi
for tool in python3 node npm cc pkg-config java; do
    norust bash -c "command -v $tool" >/dev/null || fail "$tool is not on the PATH without Rust ($NORUST)"
done
echo "PATH=$NORUST"
echo "command -v cargo: not found; command -v rustc: not found"

step "Kafka at KRABKA_BOOTSTRAP"
[ -n "${KRABKA_BOOTSTRAP:-}" ] || fail "KRABKA_BOOTSTRAP is not set: the leadership rounds need a Kafka (ci/kafka.sh start 1 prints its address)"
first="${KRABKA_BOOTSTRAP%%,*}"
if ! timeout 5 bash -c "exec 3<>/dev/tcp/${first%:*}/${first##*:}" 2>/dev/null; then
    fail "no broker answers at $first (KRABKA_BOOTSTRAP=$KRABKA_BOOTSTRAP)"
fi
echo "KRABKA_BOOTSTRAP=$KRABKA_BOOTSTRAP (reachable)"
export KRABKA_BOOTSTRAP
KAFKA_TOOL=(bash "$ROOT/ci/kafka.sh" tool)
TOPIC=krabka-release-check
"${KAFKA_TOOL[@]}" topics --bootstrap-server "$KRABKA_BOOTSTRAP" --create --if-not-exists \
    --topic "$TOPIC" --partitions 1 --replication-factor 1 >/dev/null

# ---------------------------------------------------------------- Python
step "Python: pip install --only-binary :all: $(basename "$WHEEL") into a fresh venv"
PYV="$WORK/python-venv"
norust python3 -m venv "$PYV"
norust "$PYV/bin/python" -m pip install --quiet --disable-pip-version-check --only-binary :all: \
    "$WHEEL" "pytest>=7" "hypothesis>=6"
(cd "$WORK" && norust "$PYV/bin/python" - "$V" "$PYV" <<'PY'
import importlib.metadata as md
import sys
import krabka_coordination as kc
version, venv = sys.argv[1], sys.argv[2]
assert md.version("krabka-coordination") == version, md.version("krabka-coordination")
assert kc.__file__.startswith(venv), f"imported from {kc.__file__}, not the fresh venv"
wheel = md.distribution("krabka-coordination").read_text("WHEEL") or ""
tags = [l.split(":", 1)[1].strip() for l in wheel.splitlines() if l.startswith("Tag:")]
# manylinux_2_X (ci/release.sh), or manylinux_2_17 with its alias
# manylinux2014 (ci/release-cross.sh's x86_64-unknown-linux-gnu).
assert tags and all(t.startswith(("cp39-abi3-manylinux_", "cp39-abi3-manylinux2014_")) for t in tags), tags
assert kc.role_partition("orders", 16) == 12
print(f"krabka-coordination {version} from {kc.__file__} ({', '.join(tags)})")
PY
)
# The repository's tests, run with the fresh venv's interpreter from
# bindings/python (whose source package is under python/, not importable
# from there): every golden vector, the docs, and leadership on Kafka.
(cd bindings/python && norust env KRABKA_BOOTSTRAP="$KRABKA_BOOTSTRAP" "$PYV/bin/python" -m pytest -q \
    -p no:cacheprovider -o addopts="-ra" \
    tests/test_golden.py tests/test_docs.py \
    tests/test_leadership_blocking.py::test_with_block_holds_writes_and_resigns \
    tests/test_leadership_failover.py::test_sigkill_of_the_leader_hands_the_role_to_the_standby)
# The release build's speed: the package must decode a lease faster than a
# pure-Python struct decoder (a short run; ci/python.sh tests a dev build).
(cd "$WORK" && norust "$PYV/bin/python" "$ROOT/bindings/python/bench/bench_decode.py" --number 50000 --repeat 5)

# ------------------------------------------------------------------ Node
step "Node: npm install of the two tarballs into a fresh directory (offline, no registry)"
NODE_DIR="$WORK/node-app"
mkdir -p "$NODE_DIR/test"
printf '{ "name": "krabka-release-check", "version": "0.0.0", "private": true }\n' >"$NODE_DIR/package.json"
# The registry points nowhere and npm is offline: an optional dependency
# resolved anywhere but dist/ fails the install.
(cd "$NODE_DIR" && norust npm install --offline --no-audit --no-fund --registry=http://127.0.0.1:9/ \
    --cache "$WORK/npm-cache" "$NPM_PLATFORM" "$NPM_MAIN")
[ ! -e "$NODE_DIR/node_modules/krabka-coordination/krabka-coordination.node" ] \
    || fail "the main npm package carries an addon of its own"
(cd "$NODE_DIR" && norust node - "$V" <<'JS'
const assert = require('node:assert/strict')
const version = process.argv[2]
const kc = require('krabka-coordination')
const addons = Object.keys(require.cache).filter((f) => f.endsWith('.node'))
assert.deepEqual(addons, [require.resolve('krabka-coordination-linux-x64-gnu/krabka-coordination.linux-x64-gnu.node')])
assert.match(addons[0], /node_modules\/krabka-coordination-linux-x64-gnu\//)
assert.equal(require('krabka-coordination/package.json').version, version)
assert.equal(require('krabka-coordination-linux-x64-gnu/package.json').version, version)
assert.equal(kc.rolePartition('orders', 16), 12)
console.log(`krabka-coordination ${version}: the addon loaded from ${addons[0]}`)
JS
)
# The repository's tests against the installed package: their `require('..')`
# is the app directory, whose index.js is the installed package.
cp bindings/node/test/golden.test.js bindings/node/test/leadership.test.js bindings/node/test/support.js \
    bindings/node/test/member.js "$NODE_DIR/test/"
printf "module.exports = require('krabka-coordination')\n" >"$NODE_DIR/index.js"
(cd "$NODE_DIR" && norust env KRABKA_GOLDEN_DIR="$ROOT/golden" node --test --test-concurrency=1 test/golden.test.js)
(cd "$NODE_DIR" && norust env KRABKA_KAFKA_SH="$ROOT/ci/kafka.sh" node --test --test-concurrency=1 \
    --test-name-pattern='cluster is reachable|acquire, describe, events and resign|SIGKILL of the leader process|deposed process' \
    test/leadership.test.js)

# --------------------------------------------------------------------- C
step "C: the tarball into a temporary prefix, tests built with its pkg-config line"
PREFIX="$WORK/c-prefix"
mkdir -p "$PREFIX" "$WORK/c-build"
tar -xzf "$C_TARBALL" -C "$PREFIX" --strip-components=1
find "$PREFIX" -type f -o -type l | sed "s|$PREFIX/||" | sort
export PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig"
[ "$(pkg-config --modversion krabka_coordination)" = "$V" ] || fail "krabka_coordination.pc is not version $V"
read -r -a PC <<<"$(pkg-config --cflags --libs krabka_coordination)"
echo "pkg-config: ${PC[*]}"
B="$WORK/c-build"
for t in test_golden test_failover member; do
    norust cc -std=c99 -Wall -Wextra -pedantic -Werror -o "$B/$t" "bindings/c/tests/$t.c" "${PC[@]}" -lpthread -lm
done
norust cc -std=c99 -Wall -Wextra -pedantic -Werror -o "$B/test_golden_static" bindings/c/tests/test_golden.c \
    -I"$PREFIX/include" "$PREFIX/lib/libkrabka_coordination.a" \
    $(pkg-config --static --libs-only-l krabka_coordination | sed 's/-lkrabka_coordination//') -lpthread -lm
printf '#include <stdio.h>\n#include <krabka_coordination.h>\nint main(void) { puts(krabka_version()); return 0; }\n' >"$B/version.c"
norust cc -std=c99 -o "$B/version" "$B/version.c" "${PC[@]}"
export LD_LIBRARY_PATH="$PREFIX/lib"
[ "$(norust "$B/version")" = "$V" ] || fail "krabka_version() is $(norust "$B/version"), not $V"
# Read ldd whole before matching: `ldd | grep -q` under pipefail fails at random
# when grep quits at its match and ldd is still writing (SIGPIPE).
LDD=$(ldd "$B/test_golden")
grep -q "libkrabka_coordination.so.${V%%.*} => $PREFIX/lib/" <<<"$LDD" \
    || fail "the C test does not load the library of the prefix: $(grep krabka <<<"$LDD")"
echo "--- golden (shared library)"
norust "$B/test_golden" golden
echo "--- golden (static library)"
norust "$B/test_golden_static" golden
echo "--- failover between two member processes, a fenced write"
norust env KRABKA_C_TOPIC="$TOPIC" KRABKA_KAFKA_SH="$ROOT/ci/kafka.sh" "$B/test_failover" "$B/member"
unset LD_LIBRARY_PATH PKG_CONFIG_PATH

# ------------------------------------------------------------------- JVM
step "JVM: the Kotlin tests compiled against the jar (pinned kotlinc) and run with the jar alone"
. ci/uniffi-jars.sh
uniffi_jars
version_in_jar="$(python3 -c 'import sys, zipfile; print(zipfile.ZipFile(sys.argv[1]).read("META-INF/MANIFEST.MF").decode())' "$JAR" \
    | tr -d '\r' | sed -n 's/^Implementation-Version: //p')"
[ "$version_in_jar" = "$V" ] || fail "the jar's manifest says version '$version_in_jar', not $V"
python3 -c 'import sys, zipfile; sys.exit("linux-x86-64/libkrabka_coordination_uniffi.so" not in zipfile.ZipFile(sys.argv[1]).namelist())' "$JAR" \
    || fail "the jar holds no linux-x86-64/libkrabka_coordination_uniffi.so"
mkdir -p "$WORK/jvm-classes"
norust java -cp "$COMPILER_CP" org.jetbrains.kotlin.cli.jvm.K2JVMCompiler -no-stdlib -no-reflect -nowarn \
    -jvm-target 17 -cp "$JAR:$RUN_CP" -d "$WORK/jvm-classes" bindings/uniffi/tests/kotlin/Main.kt
# No jna.library.path and no LD_LIBRARY_PATH: the library can only come
# from the jar; JNA's load log must say so.
(cd "$WORK" && norust env -u LD_LIBRARY_PATH KRABKA_ROOT="$ROOT" KRABKA_UNIFFI_TOPIC="$TOPIC" \
    java -Djna.debug_load=true -cp "$WORK/jvm-classes:$JAR:$RUN_CP" krabka.coordination.test.MainKt "$ROOT/golden") \
    >"$WORK/jvm.log" 2>&1 || { cat "$WORK/jvm.log"; fail "the Kotlin tests failed against the jar"; }
grep -v '^INFO\|^[A-Z][a-z][a-z] [0-9]' "$WORK/jvm.log" || true
grep -q "jar:file:$JAR!/linux-x86-64/libkrabka_coordination_uniffi.so" "$WORK/jvm.log" \
    || { grep -i "library" "$WORK/jvm.log" | head -20; fail "JNA did not load the library from the jar"; }
grep -q ' 0 failed$' "$WORK/jvm.log" || fail "the Kotlin tests report failures"
echo "JNA loaded linux-x86-64/libkrabka_coordination_uniffi.so from $(basename "$JAR")"

step "release $V: every artifact installed and checked without a Rust toolchain in $(($(date +%s) - started)) s"
