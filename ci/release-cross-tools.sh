#!/usr/bin/env bash
# Installs the Debian packages that ci/release-cross.sh and
# ci/release-cross-check.sh need (they stop at once, naming the package, when
# one is missing):
#
#   rustc-web, cargo-web, libstd-rust-web-dev   Debian's Rust 1.96, whose std
#                                               the cross targets use
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
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    rustc-web cargo-web rust-web-src libstd-rust-web-dev libstd-rust-web-dev:arm64 \
    qemu-user-static mmdebstrap musl-tools binutils unzip pkg-config >/dev/null
/usr/bin/rustc -V
echo "ci/release-cross-tools.sh: the cross-release tools are installed"
