# Sourced by ci/release-cross.sh, ci/release-cross-check.sh and
# ci/release-cross-tools.sh: the cross targets, and their `--target T`
# arguments read into `targets`; the pinned Debian Rust. The caller defines
# `fail` and the usage line `usage` first.

# Debian's Rust for the cross builds, one package version (bookworm-security):
# ci/release-cross-tools.sh installs exactly this, ci/release-cross.sh refuses
# any other. When Debian replaces it (a security update), check the new one's
# changelog and move the pin; the artifacts of the two differ.
DEBIAN_RUST_VERSION=1.96.0+dfsg1-1~deb12u2
# The std packages are Multi-Arch: same, named with their architecture (the
# build machine's, x86_64 here, and arm64).
DEBIAN_RUST_PACKAGES=(rustc-web cargo-web rust-web-src libstd-rust-web-dev:amd64 libstd-rust-web-1.96:amd64
    libstd-rust-web-dev:arm64 libstd-rust-web-1.96:arm64)

# debian_rust_check: fails naming each package of DEBIAN_RUST_PACKAGES that
# is missing or not at DEBIAN_RUST_VERSION.
debian_rust_check() {
    local p v bad=""
    for p in "${DEBIAN_RUST_PACKAGES[@]}"; do
        v="$(dpkg-query -W -f '${Version}' "$p" 2>/dev/null || true)"
        [ "$v" = "$DEBIAN_RUST_VERSION" ] || bad="$bad $p (${v:-not installed})"
    done
    [ -z "$bad" ] || fail "Debian's Rust is pinned to $DEBIAN_RUST_VERSION; not so:$bad (run ci/release-cross-tools.sh, or move the pin in ci/release-cross-targets.sh)"
}

ALL_TARGETS=(x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu x86_64-unknown-linux-musl aarch64-unknown-linux-musl)

# parse_targets ARG...: `targets` from `--target T` (repeatable); `-h`/`--help`
# prints the caller's header comment and exits.
parse_targets() {
    targets=()
    while [ $# -gt 0 ]; do
        case "$1" in
            --target)
                [ $# -ge 2 ] || fail "--target needs a value (one of: ${ALL_TARGETS[*]})"
                case " ${ALL_TARGETS[*]} " in
                    *" $2 "*) targets+=("$2") ;;
                    *) fail "unknown target '$2' (known: ${ALL_TARGETS[*]})" ;;
                esac
                shift 2 ;;
            -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
            *) fail "unknown argument '$1' (usage: $usage)" ;;
        esac
    done
}
