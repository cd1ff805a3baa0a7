#!/usr/bin/env bash
# Every function (and function-pointer type) the C header declares must have
# its documentation comment right above it: cbindgen copies the Rust doc
# comments there as `//` lines, so a function without one lost its contract
# (ownership, blocking, threads). Usage: check_header_docs.sh HEADER
set -euo pipefail
header="${1:?usage: check_header_docs.sh HEADER}"
awk '
    # A declaration at file scope: a prototype or a function-pointer typedef, one line each (cbindgen).
    /^[A-Za-z_].*\(.*\);$/ && !/^#/ {
        checked++
        if (prev !~ /^\/\//) { missing++; print FILENAME ":" NR ": undocumented: " $0 }
    }
    { prev = $0 }
    END {
        if (checked == 0) { print FILENAME ": no function declaration found"; exit 1 }
        if (missing > 0) { print missing " of " checked " declarations have no documentation comment"; exit 1 }
        print FILENAME ": all " checked " function declarations are documented"
    }
' "$header"
