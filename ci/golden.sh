#!/usr/bin/env bash
# The golden vectors in golden/: check them, or regenerate them from the core.
#
#   ci/golden.sh           check: the Rust golden test (files == core, every case
#                          decoded field by field) and the Java check (murmur2 and
#                          partitions against Kafka's own kafka-clients code)
#   ci/golden.sh --write   regenerate golden/*.json from the core, then check
#   ci/golden.sh --rust    only the Rust golden test
#   ci/golden.sh --java    only the Java check
#
# The Java check needs java, javac, mvn and python3; it fetches kafka-clients
# (KAFKA_CLIENTS_VERSION, default 4.1.1) and slf4j from Maven Central into the
# git-ignored ci/.cache once.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

mode="${1:-check}"
case "$mode" in
  check | --write | --rust | --java) ;;
  -h | --help) sed -n '2,15p' "$0"; exit 0 ;;
  *) echo "ci/golden.sh: unknown argument '$mode' (use --write, --rust, --java or nothing)" >&2; exit 2 ;;
esac

rust_check() {
  echo "== golden: cargo test --test golden"
  cargo test -p krabka-coordination --test golden
}

java_check() {
  echo "== golden: murmur2 and partitions against Kafka's Java code"
  local tool
  for tool in java javac mvn python3; do
    command -v "$tool" >/dev/null || { echo "ci/golden.sh: '$tool' is needed for the Java check" >&2; exit 1; }
  done
  local version="${KAFKA_CLIENTS_VERSION:-4.1.1}" slf4j="1.7.36"
  local cache="$root/ci/.cache/golden" jars="$root/ci/.cache/golden/jars"
  mkdir -p "$jars"
  local artifact
  for artifact in "org.apache.kafka:kafka-clients:$version" "org.slf4j:slf4j-api:$slf4j" "org.slf4j:slf4j-nop:$slf4j"; do
    local name="${artifact#*:}"
    name="${name%%:*}-${artifact##*:}.jar"
    if [[ ! -s "$jars/$name" ]]; then
      echo "fetching $artifact"
      mvn -q -B -Dstyle.color=never -Dmaven.repo.local="$root/ci/.cache/m2" dependency:copy \
        -Dartifact="$artifact" -DoutputDirectory="$jars" -Dmdep.overWriteReleases=true \
        >"$cache/mvn.log" 2>&1 || { cat "$cache/mvn.log" >&2; exit 1; }
    fi
    [[ -s "$jars/$name" ]] || { echo "ci/golden.sh: could not fetch $artifact" >&2; exit 1; }
  done
  local cp="$jars/kafka-clients-$version.jar:$jars/slf4j-api-$slf4j.jar:$jars/slf4j-nop-$slf4j.jar"
  rm -rf "$cache/classes"
  javac -d "$cache/classes" -cp "$cp" ci/golden/Murmur2Check.java
  java -cp "$cp:$cache/classes" Murmur2Check golden/partitions.json >"$cache/kafka.tsv"
  python3 - golden/partitions.json >"$cache/file.tsv" <<'PY'
import json, sys
cases = json.load(open(sys.argv[1], encoding="utf-8"))["cases"]
for i, c in enumerate(cases):
    print(f"{i}\t{c['murmur2']}\t{c['partitions']}\t{c['partition']}")
PY
  if ! diff -u "$cache/file.tsv" "$cache/kafka.tsv" >"$cache/diff.txt"; then
    head -40 "$cache/diff.txt" >&2
    echo "ci/golden.sh: golden/partitions.json disagrees with Kafka $version (full diff: $cache/diff.txt)" >&2
    exit 1
  fi
  echo "golden/partitions.json: $(wc -l <"$cache/kafka.tsv") cases agree with Kafka $version (Utils.murmur2, BuiltInPartitioner.partitionForKey)"
}

case "$mode" in
  --write)
    echo "== golden: regenerating golden/*.json from the core"
    KRABKA_GOLDEN_WRITE=1 cargo test -p krabka-coordination --test golden golden_files_match_the_core
    rust_check
    java_check
    git status --short golden/ || true
    ;;
  --rust) rust_check ;;
  --java) java_check ;;
  check) rust_check; java_check ;;
esac
