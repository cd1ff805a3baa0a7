#!/usr/bin/env bash
# The README's main job: build and run the failover demo (examples/rust/src/bin/failover/,
# the `failover` binary of the krabka-examples crate).
#
#   ci/demo.sh                          start the local 1-node Kafka (ci/kafka.sh) and run it
#   ci/demo.sh --bootstrap HOST:PORT    run it against an existing cluster
#
# Other options pass through to the demo (ci/demo.sh --help lists them). The demo runs
# three member processes of one role, kills the leader, restarts it, makes the next leader
# resign, and prints the measured failover and hand-over times. The local cluster stays
# up afterwards for the next run (ci/kafka.sh stop 1 stops it).
set -euo pipefail
cd "$(dirname "$0")/.."
target_dir=${CARGO_TARGET_DIR:-target}
echo "building the demo (release) ..." >&2
cargo build --quiet --release -p krabka-examples --bin member --bin failover
exec "$target_dir/release/failover" --member-bin "$target_dir/release/member" "$@"
