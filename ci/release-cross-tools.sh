#!/usr/bin/env bash
# Installs the Debian packages that ci/release-cross.sh and
# ci/release-cross-check.sh need (they stop at once, naming the package, when
# one is missing):
#
#   rustc-web, cargo-web, libstd-rust-web-dev   Debian's Rust 1.96, at the version
#                                               pinned in release-cross-targets.sh,
#                                               whose std the cross targets use
#   libstd-rust-web-dev:arm64                   its std for aarch64 glibc
#                                               (multiarch: arm64 is added)
#   rust-web-src                                its std source, for the musl
#                                               targets (-Zbuild-std)
#   qemu-user-static, mmdebstrap                the aarch64 artifacts run
#                                               under qemu-user in an arm64
#                                               root
#   musl-tools, binutils, unzip, pkg-config     the musl C check, readelf
#
# The zig tools come from PyPI into a venv of ci/release-cross.sh's own,
# pinned by hash (ci/release-cross-requirements.txt).
#
# Usage: ci/release-cross-tools.sh     (as root: apt-get)
set -euo pipefail

if [ "$(id -u)" != 0 ]; then
    echo "ci/release-cross-tools.sh: apt-get needs root" >&2
    exit 1
fi
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    dpkg --add-architecture arm64
fi
apt-get update -qq
# Debian's Rust at the pinned version of ci/release-cross-targets.sh.
fail() { echo "ci/release-cross-tools.sh: $*" >&2; exit 1; }
# shellcheck source=release-cross-targets.sh
. "$(dirname "${BASH_SOURCE[0]}")/release-cross-targets.sh"
pinned=()
for p in "${DEBIAN_RUST_PACKAGES[@]}"; do pinned+=("$p=$DEBIAN_RUST_VERSION"); done
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends --allow-downgrades \
    "${pinned[@]}" qemu-user-static mmdebstrap musl-tools binutils unzip pkg-config >/dev/null \
    || fail "apt-get could not install ${pinned[*]}: if Debian no longer serves $DEBIAN_RUST_VERSION, move the pin in ci/release-cross-targets.sh"
debian_rust_check
/usr/bin/rustc -V
echo "ci/release-cross-tools.sh: the cross-release tools are installed"
