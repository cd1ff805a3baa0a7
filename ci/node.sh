#!/usr/bin/env bash
# CI of the Node.js binding (bindings/node, the npm package krabka-coordination),
# from a fresh clone:
#
#   1. npm install in examples/node, whose package.json depends on
#      "file:../../bindings/node": npm installs the package as a user does and
#      its install step (scripts/build.js: `napi build --release`, the CLI run
#      through npx since npm gives a linked folder no dependencies) builds the
#      addon from source and regenerates index.d.ts; typescript comes from npm as a devDependency;
#   2. the checked-in index.d.ts must be what the build generated
#      (git diff --exit-code), and every public name in it must carry a doc
#      comment (scripts/check-docs.js);
#   3. a real Kafka for the leadership tests: KRABKA_BOOTSTRAP when set, else
#      the local one-node cluster of `ci/kafka.sh start 1` (started, or reused
#      when running);
#   4. a PostgreSQL for the fenced-store tests: KRABKA_POSTGRES_URL when set,
#      else the local one of `ci/postgres.sh start` (started, or reused);
#      the node:test suites (krabka-coordination/stores on it with pg and on
#      SQLite with better-sqlite3, both devDependencies of examples/node; golden vectors, arguments and errors, leadership
#      on the real Kafka: failover between processes, fencing, abort, input
#      offsets committed with guarded writes; the
#      test kit, krabka-coordination/testing, with no broker);
#   5. examples/node/service.mjs for a few seconds (it must lead, write
#      results through guarded writes, and resign cleanly on SIGTERM);
#   6. tsc --noEmit --strict of examples/node/typed.ts, events.ts and testing.ts against the
#      shipped index.d.ts and testing.d.ts (events.ts: the event union narrows in a switch, and
#      its @ts-expect-error lines must not compile);
#   7. a short run of the decode benchmark (bindings/node/bench/decode.mjs).
#
# Usage: bash ci/node.sh   (CARGO_TARGET_DIR is honoured; nothing else is cached)
# Needs: node >= 20 and npm, a Rust toolchain, a C toolchain, cmake, libssl-dev
#        and pkg-config for librdkafka, and Java for the local Kafka (or
#        KRABKA_BOOTSTRAP=host:port of a cluster).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PKG="$ROOT/bindings/node"
EXAMPLES="$ROOT/examples/node"
started=$(date +%s)

step() { printf '\n==> %s (%ss)\n' "$*" "$(($(date +%s) - started))"; }

step "toolchain"
node --version
npm --version
node -e 'const [major] = process.versions.node.split(".").map(Number); if (major < 20) { console.error("the binding needs node >= 20"); process.exit(1) }'

# The install step as a user runs it, but without optimisations: in the
# README's test command ci/rust-tests.sh has compiled the core and librdkafka
# in the workspace's target directory by now, so the addon takes a minute or
# two; the release build of a user's `npm install` took 14 min cold on these 2
# cores. KRABKA_NODE_BUILD=release here builds exactly what users get.
export KRABKA_NODE_BUILD="${KRABKA_NODE_BUILD:-debug}"
step "npm install (examples/node -> file:../../bindings/node: builds the addon from source, $KRABKA_NODE_BUILD)"
(cd "$EXAMPLES" && npm install --no-audit --no-fund --foreground-scripts)
test -f "$PKG/krabka-coordination.node" || { echo "ci/node.sh: the install step built no addon" >&2; exit 1; }

step "index.d.ts is the one the build generated"
git -C "$ROOT" diff --exit-code -- bindings/node/index.d.ts
if [ -n "$(git -C "$ROOT" status --porcelain -- bindings/node/index.d.ts)" ]; then
    echo "ci/node.sh: bindings/node/index.d.ts is not checked in" >&2
    exit 1
fi

step "index.d.ts and testing.d.ts document every public name"
node "$PKG/scripts/check-docs.js" "$PKG/index.d.ts"
node "$PKG/scripts/check-docs.js" "$PKG/testing.d.ts"
node "$PKG/scripts/check-docs.js" "$PKG/stores.d.ts"

step "require and import of the installed package"
(cd "$EXAMPLES" && node -e 'const kc = require("krabka-coordination"); if (kc.rolePartition("orders", 16) !== 12) process.exit(1); console.log("require: ok")')
(cd "$EXAMPLES" && node --input-type=module -e 'import { rolePartition } from "krabka-coordination"; if (rolePartition("orders", 16) !== 12) process.exit(1); console.log("import: ok")')
(cd "$EXAMPLES" && node -e 'const { TestCluster } = require("krabka-coordination/testing"); if (new TestCluster().now !== 1767225600000n) process.exit(1); console.log("require testing: ok")')
(cd "$EXAMPLES" && node --input-type=module -e 'import { TestCluster } from "krabka-coordination/testing"; if (typeof TestCluster !== "function") process.exit(1); console.log("import testing: ok")')
(cd "$EXAMPLES" && node -e 'const { fence, migrate } = require("krabka-coordination/stores"); if (typeof fence !== "function" || typeof migrate !== "function") process.exit(1); console.log("require stores: ok")')
(cd "$EXAMPLES" && node --input-type=module -e 'import { fence } from "krabka-coordination/stores"; if (typeof fence !== "function") process.exit(1); console.log("import stores: ok")')

step "kafka for the leadership tests"
if [ -z "${KRABKA_BOOTSTRAP:-}" ]; then
    KRABKA_BOOTSTRAP="$(bash "$ROOT/ci/kafka.sh" start 1 | tail -n 1)"
fi
export KRABKA_BOOTSTRAP
echo "KRABKA_BOOTSTRAP=$KRABKA_BOOTSTRAP"

step "postgresql for the fenced-store tests"
if [ -z "${KRABKA_POSTGRES_URL:-}" ]; then
    KRABKA_POSTGRES_URL="$(bash "$ROOT/ci/postgres.sh" start | tail -n 1)"
fi
export KRABKA_POSTGRES_URL
echo "KRABKA_POSTGRES_URL=$KRABKA_POSTGRES_URL"

step "node --test (bindings/node/test)"
# No --test-force-exit: a file whose cases leave something running (a test
# kit process's client not closed, a call that never ends) keeps its process
# alive instead of passing. The suite takes a minute or two; ten minutes
# without an end is such a hang, and fails naming it.
if ! (cd "$PKG" && timeout 600 node --test --test-concurrency=1 test/*.test.js); then
    echo "ci/node.sh: node --test failed, or did not end within 600 s (a test file that leaves a client or a timer running keeps its process alive)" >&2
    exit 1
fi

step "example (examples/node/service.mjs, 5 s on the real Kafka)"
SERVICE_TOPIC=krabka-node-service-results
bash "$ROOT/ci/kafka.sh" tool topics --bootstrap-server "$KRABKA_BOOTSTRAP" \
    --create --if-not-exists --topic "$SERVICE_TOPIC" --partitions 1 --replication-factor 1 >/dev/null
SERVICE_LOG="$(mktemp)"
set +e
node "$EXAMPLES/service.mjs" --bootstrap "$KRABKA_BOOTSTRAP" --role "ci-node-service-$$-$(date +%s)" \
    --member ci-service --topic "$SERVICE_TOPIC" --interval 0.5 --lease 3 --renew 1 --stagger 1 \
    --for-seconds 5 >"$SERVICE_LOG" 2>&1
service_rc=$?
set -e
cat "$SERVICE_LOG"
if [ "$service_rc" -ne 0 ] || ! grep -q "leading " "$SERVICE_LOG" \
    || ! grep -q "result 1 written" "$SERVICE_LOG" || ! grep -q "SIGTERM: resigned" "$SERVICE_LOG"; then
    echo "service.mjs: expected exit 0 after leading, two guarded writes and a resign (exit $service_rc)" >&2
    rm -f "$SERVICE_LOG"
    exit 1
fi
rm -f "$SERVICE_LOG"

step "quick starts (the js blocks of README.md, bindings/node/README.md and docs/node.md, ci/snippets.py)"
for topic in billing-out report-results; do
    bash "$ROOT/ci/kafka.sh" tool topics --bootstrap-server "$KRABKA_BOOTSTRAP" \
        --create --if-not-exists --topic "$topic" --partitions 1 --replication-factor 1 >/dev/null
done
# Beside examples/node/node_modules, where the snippets' import finds the
# package; git-ignored.
SNIPPETS="$EXAMPLES/.snippets"
python3 "$ROOT/ci/snippets.py" extract js "$SNIPPETS" "$ROOT/README.md" "$PKG/README.md" "$ROOT/docs/node.md"
python3 "$ROOT/ci/snippets.py" run js "$SNIPPETS" -- sh -c \
    'if [ -n "${KRABKA_SNIPPET_FRAGMENT:-}" ]; then exec node --check "$0"; else exec node "$0"; fi' {}

step "tsc --noEmit --strict (examples/node/typed.ts and events.ts against index.d.ts)"
(cd "$EXAMPLES" && npx --no-install tsc -p .)

step "decode benchmark (short run)"
(cd "$PKG" && node bench/decode.mjs --short)

step "node binding: all checks passed in $(($(date +%s) - started)) s"
