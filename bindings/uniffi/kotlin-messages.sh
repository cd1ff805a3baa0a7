#!/usr/bin/env bash
# Rewrites the error messages of the Kotlin sources uniffi-bindgen generated,
# in place. Every place that generates Kotlin (generate.sh, ci/release.sh)
# runs it, so the shipped jar and the tested sources say the same.
#
# uniffi writes an error case's Kotlin `message` as its fields in Kotlin's
# data-class form (`detail=role "" must not be empty`); a caller prints
# `e.message`, so it is the detail itself (an Encode error reads as the
# core's: `cannot encode key: role must not be empty`). A uniffi whose
# template changed fails here rather than shipping the old form.
#
# Usage: bash bindings/uniffi/kotlin-messages.sh KOTLIN_OUT_DIR
set -euo pipefail
KT="${1:?usage: kotlin-messages.sh KOTLIN_OUT_DIR}/krabka/coordination/krabka_coordination.kt"
[ -f "$KT" ] || { echo "kotlin-messages.sh: no generated source at $KT" >&2; exit 1; }
sed -i.orig -E \
    -e 's/get\(\) = "detail=\$\{ `detail` \}"/get() = `detail`/' \
    -e 's/get\(\) = "part=\$\{ `part` \}, field=\$\{ `field` \}, detail=\$\{ `detail` \}"/get() = "cannot encode ${ `part` }: ${ `field` } ${ `detail` }"/' \
    "$KT"
rm -f "$KT.orig"
if grep -q 'get() = "[a-z]*=\$' "$KT"; then
    echo "kotlin-messages.sh: an error message of $KT is still in uniffi's field=value form" >&2
    exit 1
fi
