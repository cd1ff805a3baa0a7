#!/usr/bin/env bash
# The API reference of every language, built as users read it into one site,
# target/doc-site/, every warning an error:
#
#   rust/    rustdoc of the core (krabka-coordination), the Kafka client
#            (krabka-kafka), its back-off (krabka-backoff) and the fenced-store helpers
#            (krabka-coordination-stores, both drivers), without their
#            dependencies. The workspace lints warn on `missing_docs`, so a
#            public item without a doc comment fails here, as do broken
#            intra-doc links and bad code blocks.
#   python/  pdoc (pinned) of the installed package: krabka_coordination and
#            its public modules, signatures from the stubs. Needs the package
#            in bindings/python/.venv (ci/python.sh); built there with
#            `maturin develop` when it is missing.
#   node/    TypeDoc (pinned, installed in target/tools/typedoc) of index.d.ts,
#            testing.d.ts and stores.d.ts, the package's public API.
#   kotlin/  Dokka (pinned, through Maven) of the generated Kotlin and the
#            hand-written wrappers (bindings/uniffi/generate.sh makes the
#            generated sources when they are missing).
#   C        is its header, bindings/c/include/krabka_coordination.h: every
#            function carries its comment (ci/c.sh checks it).
#
# Usage: ci/docs.sh [rust|python|node|kotlin ...]   (default: all)
#        -> target/doc-site/index.html
# Needs: cargo; Python 3 (a venv and pdoc from PyPI); Node 20 and npm
# (TypeDoc from npm); Java 17 and Maven (Dokka from Maven Central). The first
# run downloads the tools; later runs reuse them.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
SITE=$TARGET/doc-site
TOOLS=$TARGET/tools
PDOC_VERSION=16.0.0
TYPEDOC_VERSION=0.28.20
TYPESCRIPT_VERSION=5.9.3
TYPES_NODE_VERSION=20
DOKKA_VERSION=2.2.0

parts=("$@")
[[ ${#parts[@]} -gt 0 ]] || parts=(rust python node kotlin)
mkdir -p "$SITE"

doc_rust() {
    RUSTDOCFLAGS="${RUSTDOCFLAGS:-} -D warnings -D missing_docs -D rustdoc::missing_crate_level_docs" \
        cargo doc --quiet -p krabka-coordination -p krabka-kafka -p krabka-backoff --no-deps
    RUSTDOCFLAGS="${RUSTDOCFLAGS:-} -D warnings -D missing_docs -D rustdoc::missing_crate_level_docs" \
        cargo doc --quiet -p krabka-coordination-stores --features postgres,sqlite --no-deps
    rm -rf "$SITE/rust"
    cp -r "$TARGET/doc" "$SITE/rust"
}

doc_python() {
    local venv=$ROOT/bindings/python/.venv
    if [[ ! -x $venv/bin/python ]]; then python3 -m venv "$venv"; fi
    if ! (cd "$ROOT/bindings/python/tests" && "$venv/bin/python" -c 'import krabka_coordination' 2>/dev/null); then
        "$venv/bin/python" -m pip install --quiet "maturin>=1.9,<2"
        (cd "$ROOT/bindings/python" && VIRTUAL_ENV=$venv "$venv/bin/maturin" develop --quiet)
    fi
    "$venv/bin/python" -m pip install --quiet "pdoc==$PDOC_VERSION"
    rm -rf "$SITE/python"
    # Run beside the tests, not the source tree: the installed package with
    # its native module is what is documented.
    (cd "$ROOT/bindings/python/tests" && "$venv/bin/python" -W error -m pdoc \
        krabka_coordination krabka_coordination.testing krabka_coordination.prometheus \
        krabka_coordination.stores \
        -o "$SITE/python")
}

doc_node() {
    local tool=$TOOLS/typedoc
    if [[ ! -x $tool/node_modules/.bin/typedoc ]] \
        || ! grep -q "\"version\": \"$TYPEDOC_VERSION\"" "$tool/node_modules/typedoc/package.json"; then
        mkdir -p "$tool"
        npm install --prefix "$tool" --no-audit --no-fund --silent \
            "typedoc@$TYPEDOC_VERSION" "typescript@$TYPESCRIPT_VERSION" "@types/node@$TYPES_NODE_VERSION"
    fi
    # The declarations as a user's compiler reads them: Node's types, ES2022
    # with explicit resource management (`Symbol.asyncDispose`).
    cat >"$tool/tsconfig.json" <<EOF
{
  "compilerOptions": {
    "strict": true, "noEmit": true, "module": "nodenext", "moduleResolution": "nodenext",
    "target": "es2022", "lib": ["es2022", "esnext.disposable"],
    "types": ["node"], "typeRoots": ["$tool/node_modules/@types"]
  },
  "files": ["$ROOT/bindings/node/index.d.ts", "$ROOT/bindings/node/testing.d.ts",
            "$ROOT/bindings/node/stores.d.ts"]
}
EOF
    rm -rf "$SITE/node"
    (cd "$ROOT/bindings/node" && "$tool/node_modules/.bin/typedoc" --tsconfig "$tool/tsconfig.json" \
        --entryPoints index.d.ts --entryPoints testing.d.ts --entryPoints stores.d.ts --name "krabka-coordination (Node.js)" \
        --disableSources --treatWarningsAsErrors --logLevel Warn --out "$SITE/node")
}

doc_kotlin() {
    # Generated afresh (a no-op build when ci/uniffi.sh ran): sources older
    # than the binding's doc comments would be documented otherwise.
    local generated=$TARGET/uniffi/kotlin
    bash "$ROOT/bindings/uniffi/generate.sh" "$generated" >/dev/null
    local work=$TOOLS/dokka
    mkdir -p "$work"
    # The versions of the dependencies the sources name, as the jar's .pom.
    sed -e "s|@DOKKA@|$DOKKA_VERSION|" -e "s|@GENERATED@|$generated|" \
        -e "s|@WRAPPERS@|$ROOT/bindings/uniffi/kotlin|" -e "s|@OUT@|$SITE/kotlin|" \
        "$ROOT/bindings/uniffi/dokka-pom.xml" >"$work/pom.xml"
    rm -rf "$SITE/kotlin"
    # Maven's own progress is noise; Dokka's warnings (each one fails the
    # build) and errors are shown.
    if ! (cd "$work" && mvn -B "org.jetbrains.dokka:dokka-maven-plugin:$DOKKA_VERSION:dokka" >"$work/log" 2>&1); then
        grep -E '^\[(WARNING|ERROR)\]' "$work/log" >&2 || tail -n 40 "$work/log" >&2
        echo "docs.sh: Dokka failed (the whole log: $work/log)" >&2
        return 1
    fi
}

for part in "${parts[@]}"; do
    case $part in
        rust | python | node | kotlin) "doc_$part" ;;
        *)
            echo "docs.sh: unknown part $part (rust, python, node, kotlin)" >&2
            exit 2
            ;;
    esac
done

cat >"$SITE/index.html" <<'EOF'
<!doctype html>
<meta charset="utf-8">
<title>krabka-coordination API reference</title>
<h1>krabka-coordination API reference</h1>
<ul>
<li><a href="rust/krabka_coordination/index.html">Rust: krabka-coordination</a>,
    <a href="rust/krabka_kafka/index.html">krabka-kafka</a>,
    <a href="rust/krabka_backoff/index.html">krabka-backoff</a>,
    <a href="rust/krabka_coordination_stores/index.html">krabka-coordination-stores</a></li>
<li><a href="python/krabka_coordination.html">Python: krabka_coordination</a></li>
<li><a href="node/index.html">Node.js: krabka-coordination</a></li>
<li><a href="kotlin/index.html">Kotlin and Java: krabka.coordination</a></li>
<li>C: the header <code>bindings/c/include/krabka_coordination.h</code></li>
</ul>
EOF
echo "API reference: $SITE/index.html (${parts[*]}; no warnings)"
