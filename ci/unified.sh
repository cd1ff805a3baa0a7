#!/usr/bin/env bash
# The four bindings (Python, Node, C, uniffi) must build one and the same
# core: the same crate features for the core and everything it depends on,
# in the dev and in the release profile. Otherwise each binding's build
# compiles the core and its dependencies again (minutes each on CI's two
# cores). bindings/hack turns the differing features on for all four; when a
# dependency's update makes them differ again, this check names the crates
# and features to add there.
#
# Uses cargo's unit graph (`--unit-graph`, nightly's -Z unstable-options):
# nothing is built.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "ci/unified.sh: the nightly toolchain is needed for cargo's unit graph" >&2
    exit 1
fi
graphs=$(mktemp -d)
trap 'rm -rf "$graphs"' EXIT
for profile in dev release; do
    for b in python node c uniffi; do
        cargo +nightly build --profile "$profile" -p "krabka-coordination-$b" \
            --unit-graph -Z unstable-options >"$graphs/$profile-$b.json"
    done
done
python3 - "$graphs" <<'PY'
import json, os, sys

graphs = sys.argv[1]

def closure(path):
    """What the core's build depends on: every unit below it, by its crate,
    target, mode and features (the inputs of cargo's build hash)."""
    units = json.load(open(path))["units"]
    core = [i for i, u in enumerate(units)
            if "krabka-coordination@" in u["pkg_id"] and u["target"]["kind"] == ["lib"]
            and u["mode"] == "build"]
    if len(core) != 1:
        sys.exit(f"{path}: expected one build of the core, found {len(core)}")
    seen, todo = set(), core[:]
    while todo:
        i = todo.pop()
        if i in seen:
            continue
        seen.add(i)
        todo += [d["index"] for d in units[i]["dependencies"]]
    out = {}
    for i in seen:
        u = units[i]
        name = u["pkg_id"].rsplit("#", 1)[-1]
        key = (name, u["target"]["kind"][0], u["mode"], u["platform"] or "")
        out.setdefault(key, set()).add(",".join(u["features"]))
    return out

failed = False
for profile in ("dev", "release"):
    sets = {b: closure(os.path.join(graphs, f"{profile}-{b}.json"))
            for b in ("python", "node", "c", "uniffi")}
    keys = set().union(*sets.values())
    for key in sorted(keys):
        seen = {b: sorted(s.get(key, {"(not built)"})) for b, s in sets.items()}
        if len({tuple(v) for v in seen.values()}) > 1:
            failed = True
            print(f"{profile}: {key[0]} ({key[1]}, {key[2]}) differs:", file=sys.stderr)
            for b, v in seen.items():
                print(f"    {b}: {' | '.join(v)}", file=sys.stderr)
    if not failed:
        n = len(keys)
        print(f"{profile}: the four bindings build the core on the same {n} units")
if failed:
    sys.exit("ci/unified.sh: the bindings would each build the core again; turn the "
             "features above on in bindings/hack/Cargo.toml")
PY
