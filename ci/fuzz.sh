#!/usr/bin/env bash
# Fuzz the three record decoders and the Kafka client's response decoding for
# a short time each.
#
#   ci/fuzz.sh [seconds]     default 20 seconds per target
#
# Targets (core/fuzz, a standalone cargo-fuzz crate): decode_key,
# decode_registration, decode_lease. Each asserts that decoding never panics,
# that a failure names the target's record part, and that a successful decode
# re-encodes to exactly the input bytes. decode_response: a response body of
# every (API, version) the Kafka client sends, through the frame check and
# then kafka-protocol's decoder, with no panic and no allocation over
# -malloc_limit_mb (64 MiB) whatever counts the bytes hold. The record
# targets' corpus (core/fuzz/corpus/<target>, git-ignored) is seeded with the
# hex of every case and malformed entry of golden/records.json before each
# run; decode_response starts empty. Crashes land in core/fuzz/artifacts/.
#
# Needs the nightly toolchain (cargo +nightly) and cargo-fuzz, which this script
# installs from crates.io when it is missing. FUZZ_MAX_LEN (default 4096) caps
# the input size libFuzzer generates.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
secs="${1:-20}"
[[ "$secs" =~ ^[1-9][0-9]*$ ]] || { echo "ci/fuzz.sh: seconds must be a positive integer, got '$secs'" >&2; exit 2; }
max_len="${FUZZ_MAX_LEN:-4096}"
targets=(decode_key decode_registration decode_lease)
wire_targets=(decode_response)

if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "ci/fuzz.sh: the nightly toolchain is needed (rustup toolchain install nightly)" >&2
  exit 1
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "== installing cargo-fuzz"
  cargo install cargo-fuzz --locked
fi
command -v python3 >/dev/null || { echo "ci/fuzz.sh: python3 is needed to seed the corpus" >&2; exit 1; }

echo "== seeding core/fuzz/corpus from golden/records.json"
python3 - "$root/golden/records.json" "$root/core/fuzz/corpus" "${targets[@]}" <<'PY'
import json, os, sys
records, corpus, targets = sys.argv[1], sys.argv[2], sys.argv[3:]
doc = json.load(open(records, encoding="utf-8"))
entries = [("case", c) for c in doc["cases"]] + [("malformed", m) for m in doc["malformed"]]
for target in targets:
    d = os.path.join(corpus, target)
    os.makedirs(d, exist_ok=True)
    for i, (what, e) in enumerate(entries):
        part = e["part"].replace(" ", "-")
        with open(os.path.join(d, f"golden-{i:03d}-{what}-{part}"), "wb") as f:
            f.write(bytes.fromhex(e["hex"]))
print(f"{len(entries)} seeds for each of {', '.join(targets)}")
PY

cd "$root/core/fuzz"
echo "== building the fuzz targets"
cargo +nightly fuzz build
# Two targets at a time (libFuzzer runs one process on one core); each
# target's output is printed whole when it ends.
fuzz_one() {
  local t=$1
  mkdir -p "corpus/$t"
  cargo +nightly fuzz run "$t" "corpus/$t" -- \
    -max_total_time="$secs" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
    -malloc_limit_mb=64 -print_final_stats=1
}
all=("${targets[@]}" "${wire_targets[@]}")
failed=()
for ((i = 0; i < ${#all[@]}; i += 2)); do
  pair=("${all[@]:i:2}")
  pids=() logs=()
  for t in "${pair[@]}"; do
    echo "== fuzzing $t for ${secs}s"
    log=$(mktemp)
    fuzz_one "$t" >"$log" 2>&1 &
    pids+=("$!") logs+=("$log")
  done
  for j in "${!pids[@]}"; do
    rc=0
    wait "${pids[$j]}" || rc=$?
    echo "== ${pair[$j]}: exit $rc"
    cat "${logs[$j]}"
    rm -f "${logs[$j]}"
    [[ $rc -eq 0 ]] || failed+=("${pair[$j]}")
  done
done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz: failed: ${failed[*]} (crashes in core/fuzz/artifacts/)" >&2
  exit 1
fi
echo "fuzz: $(( ${#targets[@]} + ${#wire_targets[@]} )) targets ran ${secs}s each without a failure"
