#!/usr/bin/env bash
# CI of the Python binding (bindings/python), from a fresh machine:
#
#   1. a venv at bindings/python/.venv (git-ignored) with maturin, pytest,
#      hypothesis, mypy and psycopg 3 from PyPI;
#   2. clippy -D warnings on the binding crate and the shared binding crate
#      (bindings/shared), and the shared crate's unit tests (skipped under
#      ci/test.sh, whose clippy and Rust tests cover the workspace);
#   3. `pip wheel ./bindings/python` and `pip install` of that wheel: the
#      PEP 517 path, maturin as the build backend in an isolated build
#      environment, as a user installs from source; with cargo's dev profile
#      (`MATURIN_PEP517_ARGS=--profile dev`, which shares the core's build
#      with the other bindings'): the release wheel is ci/release.sh's, and
#      ci/release-check.sh runs it;
#   4. the installed wheel must be the abi3 one (tag cp39-abi3-*) and must be
#      what the tests import (not the source tree);
#   5. a real Kafka for the leadership tests: KRABKA_BOOTSTRAP when set,
#      else the local one-node cluster of `ci/kafka.sh start 1` (started, or
#      reused when running); exported as KRABKA_BOOTSTRAP for what follows.
#      KRABKA_BOOTSTRAP_3, when set, names a three-node cluster on which the
#      state topic's production defaults are checked too;
#   6. a PostgreSQL for the fenced-store tests: KRABKA_POSTGRES_URL when set,
#      else the local one of `ci/postgres.sh start` (started, or reused);
#      pytest (the fence of krabka_coordination.stores on it and on SQLite, golden vectors, properties, errors, fork safety, the event
#      stream, logging, leadership on the real Kafka: failover between
#      processes, fencing, the blocking Client and the asyncio AsyncClient,
#      cancel), and the examples in examples/python: records.py,
#      and worker.py for a few seconds (it must lead, write results through
#      guarded writes, and resign cleanly);
#   7. mypy --strict over the package, the tests, the benchmark and the
#      examples (the stubs in use), and stubtest: the type stubs against the
#      built module;
#   8. the same abi3 wheel, installed on the oldest and newest other CPythons
#      found (3.9 and 3.13 under pyenv here; KRABKA_EXTRA_PYTHONS="path ..."
#      overrides), passes pytest there too (those runs side by side with
#      each other and with steps 6 and 7).
#
# The decode benchmark (the package must decode a lease faster than a
# pure-Python struct decoder) needs the release build: ci/release-check.sh
# runs it on the release wheel.
#
# Usage: bash ci/python.sh            (from anywhere; PYTHON=python3.X to pick
#                                      the interpreter, default python3)
# Needs: a Rust toolchain (cargo), a C toolchain for librdkafka, Python >= 3.9,
#        and Java for the local Kafka (or KRABKA_BOOTSTRAP=host:port of a cluster).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PKG="$ROOT/bindings/python"
VENV="$PKG/.venv"
PYTHON="${PYTHON:-python3}"
# The driver of the fenced-store tests (krabka_coordination.stores), as the
# package's `postgres` extra names it.
PSYCOPG="psycopg[binary]>=3.2,<4"

step() { printf '\n==> %s\n' "$*"; }

step "interpreter"
"$PYTHON" - <<'PY'
import sys
print(sys.executable, sys.version.split()[0])
if sys.version_info < (3, 9):
    sys.exit("the binding needs CPython >= 3.9")
PY

step "venv $VENV"
if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"
"$PY" -m pip install --quiet --upgrade pip
"$PY" -m pip install --quiet "maturin>=1.9,<2" "pytest>=7" "hypothesis>=6" "mypy>=1.10" "prometheus-client>=0.17" "$PSYCOPG"
"$PY" -m pip list 2>/dev/null | grep -Ei '^(maturin|pytest|hypothesis|mypy|prometheus[-_]client|psycopg|psycopg[-_]binary) '

step "clippy (binding crates) and the shared binding crate's tests"
if [ -n "${KRABKA_CI_UMBRELLA:-}" ]; then
    echo "(under ci/test.sh: ci/clippy.sh and ci/rust-tests.sh cover the workspace)"
else
    (cd "$ROOT" && cargo clippy -p krabka-coordination-python -p krabka-coordination-bindings --all-targets --no-deps -- -D warnings)
    (cd "$ROOT" && cargo test -q -p krabka-coordination-bindings)
fi

step "pip wheel ./bindings/python (PEP 517, maturin backend, dev profile) and pip install"
WHEELS="$VENV/wheels"
rm -rf "$WHEELS"
(cd "$ROOT" && MATURIN_PEP517_ARGS="--profile dev" "$PY" -m pip wheel --no-deps -w "$WHEELS" ./bindings/python)
"$PY" -m pip install --force-reinstall --no-deps "$WHEELS"/krabka_coordination-*.whl

step "installed wheel: abi3 tag, imported from site-packages"
(cd "$PKG/tests" && "$PY" - <<'PY'
import importlib.metadata as md
import krabka_coordination

wheel = md.distribution("krabka-coordination").read_text("WHEEL") or ""
tags = [line.split(":", 1)[1].strip() for line in wheel.splitlines() if line.startswith("Tag:")]
print("tags:", tags)
assert tags and all(t.startswith("cp39-abi3-") for t in tags), f"not an abi3 wheel for CPython >= 3.9: {tags}"
print("imported from:", krabka_coordination.__file__)
assert "site-packages" in krabka_coordination.__file__, "the tests would import the source tree"
PY
)

step "kafka for the leadership tests"
if [ -z "${KRABKA_BOOTSTRAP:-}" ]; then
    KRABKA_BOOTSTRAP="$(bash "$ROOT/ci/kafka.sh" start 1 | tail -n 1)"
fi
export KRABKA_BOOTSTRAP
echo "KRABKA_BOOTSTRAP=$KRABKA_BOOTSTRAP KRABKA_BOOTSTRAP_3=${KRABKA_BOOTSTRAP_3:-(not set: the three-node check is skipped)}"

step "postgresql for the fenced-store tests"
if [ -z "${KRABKA_POSTGRES_URL:-}" ]; then
    KRABKA_POSTGRES_URL="$(bash "$ROOT/ci/postgres.sh" start | tail -n 1)"
fi
export KRABKA_POSTGRES_URL
echo "KRABKA_POSTGRES_URL=$KRABKA_POSTGRES_URL"

step "the abi3 wheel on other CPythons: started beside the checks below"
if [ -n "${KRABKA_EXTRA_PYTHONS+set}" ]; then
    read -r -a extra <<<"$KRABKA_EXTRA_PYTHONS"
else
    extra=()
    pyroot="$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"
    for v in 3.9 3.13; do
        found="$(ls -d "$pyroot"/versions/"$v".*/bin/python"$v" 2>/dev/null | sort -V | tail -n 1 || true)"
        [ -z "$found" ] && found="$(command -v "python$v" || true)"
        if [ -n "$found" ]; then extra+=("$found"); else echo "python$v: not installed here, not checked"; fi
    done
fi
# Side by side with each other and with this interpreter's pytest, examples,
# snippets and mypy: the suites wait on Kafka far more than they compute (a
# pytest run takes about a seventh of its wall time in CPU). Each
# interpreter's output is printed whole at the end.
pids=() logs=() names=()
# When a check below fails, the other interpreters' runs end with it.
stop_extra() {
    for p in "${pids[@]}"; do
        pkill -TERM -P "$p" 2>/dev/null || true
        kill "$p" 2>/dev/null || true
    done
}
trap stop_extra EXIT
if [ "${#extra[@]}" -gt 0 ]; then
    for other in "${extra[@]}"; do
        ver="$("$other" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
        log="$(mktemp)"
        (
            "$other" -m venv --clear "$VENV/extra-$ver"
            "$VENV/extra-$ver/bin/python" -m pip install --quiet --upgrade pip
            "$VENV/extra-$ver/bin/python" -m pip install --quiet "$WHEELS"/krabka_coordination-*.whl pytest hypothesis "prometheus-client>=0.17" "$PSYCOPG"
            cd "$PKG" && "$VENV/extra-$ver/bin/python" -m pytest -q -p no:cacheprovider
        ) >"$log" 2>&1 &
        pids+=("$!") logs+=("$log") names+=("CPython $ver ($other)")
    done
fi

step "pytest"
(cd "$PKG" && "$PY" -m pytest -p no:cacheprovider --durations=8)

step "example (examples/python/records.py)"
(cd "$PKG/tests" && "$PY" "$ROOT/examples/python/records.py" 16)

step "example (examples/python/worker.py, 5 s on the real Kafka)"
WORKER_TOPIC=krabka-python-worker-results
bash "$ROOT/ci/kafka.sh" tool topics --bootstrap-server "$KRABKA_BOOTSTRAP" \
    --create --if-not-exists --topic "$WORKER_TOPIC" --partitions 1 --replication-factor 1 >/dev/null
WORKER_LOG="$(mktemp)"
set +e
(cd "$PKG/tests" && "$PY" "$ROOT/examples/python/worker.py" --bootstrap "$KRABKA_BOOTSTRAP" \
    --role "ci-python-worker-$$-$(date +%s)" --member ci-worker --topic "$WORKER_TOPIC" \
    --interval 0.5 --lease 3 --renew 1 --stagger 1 --for-seconds 5) >"$WORKER_LOG" 2>&1
worker_rc=$?
set -e
cat "$WORKER_LOG"
if [ "$worker_rc" -ne 0 ] || ! grep -q "leading " "$WORKER_LOG" \
    || ! grep -q "result 1 written" "$WORKER_LOG" || ! grep -q "SIGALRM: resigned" "$WORKER_LOG"; then
    echo "worker.py: expected exit 0 after leading, two guarded writes and a resign (exit $worker_rc)" >&2
    rm -f "$WORKER_LOG"
    exit 1
fi
rm -f "$WORKER_LOG"

step "quick starts (the python blocks of README.md, bindings/python/README.md and docs/python.md, ci/snippets.py)"
for topic in billing-out report-results pipeline-in pipeline-out; do
    bash "$ROOT/ci/kafka.sh" tool topics --bootstrap-server "$KRABKA_BOOTSTRAP" \
        --create --if-not-exists --topic "$topic" --partitions 1 --replication-factor 1 >/dev/null
done
SNIPPETS="$ROOT/target/snippets/python"
"$PY" "$ROOT/ci/snippets.py" extract python "$SNIPPETS" "$ROOT/README.md" "$PKG/README.md" "$ROOT/docs/python.md"
# A whole program runs; a fragment is compiled only.
(cd "$PKG/tests" && "$PY" "$ROOT/ci/snippets.py" run python "$SNIPPETS" -- sh -c \
    'if [ -n "${KRABKA_SNIPPET_FRAGMENT:-}" ]; then exec "$0" -m py_compile "$1"; else exec "$0" "$1"; fi' \
    "$PY" {})

step "mypy --strict (package, tests, benchmark and examples against the stubs)"
(cd "$PKG" && "$PY" -m mypy --strict python/krabka_coordination tests bench "$ROOT/examples/python")

step "stubtest"
(cd "$PKG/tests" && "$PY" -m mypy.stubtest krabka_coordination --allowlist stubtest-allowlist.txt)

step "the abi3 wheel on other CPythons: results"
if [ "${#pids[@]}" -gt 0 ]; then
    failed=0
    for i in "${!pids[@]}"; do
        rc=0
        wait "${pids[$i]}" || rc=$?
        echo "--- ${names[$i]}: exit $rc"
        cat "${logs[$i]}"
        rm -f "${logs[$i]}"
        [ "$rc" -eq 0 ] || failed=1
    done
    [ "$failed" -eq 0 ] || { echo "python: the wheel failed on another CPython" >&2; exit 1; }
fi

step "python binding: all checks passed"
