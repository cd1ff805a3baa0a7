#!/usr/bin/env bash
# The one version of the project: `version` of [workspace.package] in the
# workspace Cargo.toml. The core, the CLI and every binding crate inherit it
# (`version.workspace = true`); the Python package takes it from its crate
# (pyproject's `dynamic = ["version"]`, maturin); the C library's soname, its
# krabka_coordination.pc and krabka_version() take it from the crate; the
# JVM jar's manifest gets it from ci/release.sh. Only the npm package.json
# files repeat it, because npm reads no Cargo.toml: `sync` writes it there.
#
#   ci/version.sh          print the version
#   ci/version.sh check    fail when any place disagrees with Cargo.toml, or
#                          CHANGELOG.md has no section for the version
#   ci/version.sh sync     write the version into bindings/node/package.json
#                          and its package-lock.json (after editing Cargo.toml)
#
# Needs python3 (and cargo for `check`: cargo metadata lists the crates).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

version() {
    python3 - "$ROOT/Cargo.toml" <<'PY'
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
section = re.search(r"^\[workspace\.package\]\n(.*?)(?=^\[)", text, re.S | re.M)
found = section and re.search(r'^version\s*=\s*"([^"]+)"', section.group(1), re.M)
if not found:
    sys.exit("ci/version.sh: no version in [workspace.package] of Cargo.toml")
v = found.group(1)
if not re.fullmatch(r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?", v):
    sys.exit(f"ci/version.sh: {v!r} is not a semver version")
print(v)
PY
}

V="$(version)"
case "${1:-print}" in
    print) echo "$V" ;;
    sync)
        python3 - "$V" "$ROOT/bindings/node/package.json" "$ROOT/bindings/node/package-lock.json" <<'PY'
import json, sys
v = sys.argv[1]
for path in sys.argv[2:]:
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    data["version"] = v
    if "packages" in data and "" in data["packages"]:
        data["packages"][""]["version"] = v
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, ensure_ascii=False)
        f.write("\n")
    print(f"{path}: {v}")
PY
        ;;
    check)
        problems=0
        bad() { echo "ci/version.sh: $*" >&2; problems=$((problems + 1)); }
        # Every crate of the workspace inherits the version.
        while read -r name ver; do
            [[ $ver == "$V" ]] || bad "crate $name is $ver, not $V (use version.workspace = true)"
        done < <(cd "$ROOT" && cargo metadata --format-version 1 --no-deps --offline 2>/dev/null \
            | python3 -c 'import json,sys; [print(p["name"], p["version"]) for p in json.load(sys.stdin)["packages"]]')
        # npm's copies.
        while read -r where ver; do
            [[ $ver == "$V" ]] || bad "$where is $ver, not $V (run ci/version.sh sync)"
        done < <(python3 - "$ROOT/bindings/node" <<'PY'
import json, sys
d = sys.argv[1]
pkg = json.load(open(f"{d}/package.json", encoding="utf-8"))
lock = json.load(open(f"{d}/package-lock.json", encoding="utf-8"))
print("bindings/node/package.json", pkg["version"])
print("bindings/node/package-lock.json", lock["version"])
print("bindings/node/package-lock.json(packages)", lock["packages"][""]["version"])
PY
        )
        # The Python package has no version of its own.
        python3 - "$ROOT/bindings/python/pyproject.toml" <<'PY' || bad "bindings/python/pyproject.toml must take its version from the crate (dynamic = [\"version\"], no version key)"
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
project = re.search(r"^\[project\]\n(.*?)(?=^\[|\Z)", text, re.S | re.M).group(1)
ok = re.search(r'^dynamic\s*=\s*\[[^\]]*"version"', project, re.M) and not re.search(r"^version\s*=", project, re.M)
sys.exit(0 if ok else 1)
PY
        grep -q "^## \[$V\]" "$ROOT/CHANGELOG.md" 2>/dev/null || bad "CHANGELOG.md has no section '## [$V]'"
        if [[ $problems -gt 0 ]]; then exit 1; fi
        echo "version $V: every crate, package.json, package-lock.json, pyproject (dynamic) and CHANGELOG.md agree"
        ;;
    *) echo "usage: ci/version.sh [print|check|sync]" >&2; exit 2 ;;
esac
