# Sourced by ci/release-cross.sh and ci/release-cross-check.sh: the cross
# targets, and their `--target T` arguments read into `targets`. The caller
# defines `fail` and the usage line `usage` first.

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
