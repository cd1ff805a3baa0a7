#!/usr/bin/env bash
# The Rust test suites: unit, golden, property, in-memory election and the
# integration and end-to-end tests against the real local Kafka.
# Needs KRABKA_BOOTSTRAP (and KRABKA_BOOTSTRAP_3 for the replication tests);
# when unset, the tests start the local clusters themselves with ci/kafka.sh.
# The secured tests (core/tests/kafka_secured.rs, kafka_oauth.rs,
# kafka_reauth.rs) always use `ci/kafka.sh start secured`, which reuses a
# running secured cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace --all-targets
# Rules 1 and 2 once more on the librdkafka lease path (LeasePath::Librdkafka,
# one librdkafka transactional producer per held role); the run above took the
# default, the protocol path.
KRABKA_LEASE_PATH=librdkafka cargo test -p krabka-coordination \
    --test kafka_epoch --test kafka_client --test kafka_state \
    --test kafka_broker_loss --test kafka_coordinator_loss --test kafka_replication \
    --test kafka_secured --test kafka_acls --test kafka_config
# The C binding's library is named like the core's (libkrabka_coordination):
# rustdoc would see two crates of that name, and cargo runs doctests with --doc
# even where a crate sets doctest = false. It has no Rust examples to test.
cargo test --workspace --doc --exclude krabka-coordination-c
# The core without the Kafka transport must build and pass on its own.
cargo test -p krabka-coordination --no-default-features --lib --tests
