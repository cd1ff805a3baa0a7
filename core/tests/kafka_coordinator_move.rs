//! A mint finds a role's transaction coordinator after Kafka moved it
//! between two live brokers.
//!
//! Kafka moves a `__transaction_state` partition back to its preferred
//! replica on its own (`auto.leader.rebalance.enable`, checked every 300 s
//! by default) after a broker restart, and an operator's
//! `kafka-leader-election` does it at once. The former coordinator stays up
//! and answers InitProducerId NOT_COORDINATOR. The client forgets a
//! coordinator that says so for every request, InitProducerId included: a
//! mint (an acquire's challenge) that asked the former coordinator again
//! would retry there forever, and a role's standbys would never take over
//! after a restart of the brokers. This test makes the move with
//! the tool, as an operator would, and mints through the same transport
//! before and after; a term held across the move renews on.
//!
//! Needs the real three-node cluster: `KRABKA_BOOTSTRAP_3`, or
//! `ci/kafka.sh start 3` is run. The stopped node is restarted, and by a
//! guard if the test fails.
#![cfg(feature = "kafka")]

mod support;

use std::time::{Duration, Instant};

use krabka_coordination::transport::kafka::{KafkaClient, KafkaTransport};
use krabka_coordination::transport::LeaseWriter;
use support::*;

const LEASE: Duration = Duration::from_secs(20);
/// Kafka's internal topic of transaction coordinators.
const TXN_TOPIC: &str = "__transaction_state";

/// Kafka's partition of `__transaction_state` for a transactional id:
/// Java's `String.hashCode`, made non-negative by `Utils.abs`, modulo the
/// partition count.
fn txn_partition(transactional_id: &str, partitions: i32) -> i32 {
    let h = transactional_id
        .encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)));
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    abs % partitions
}

/// The partition count of `__transaction_state`, and of `partition` its
/// leader and its preferred replica (the first of its replicas).
fn txn_partition_metadata(bootstrap: &str, partition: Option<i32>) -> (i32, i32, i32) {
    let md = topic_metadata(bootstrap, TXN_TOPIC);
    let parts = md.topics()[0].partitions();
    let count = i32::try_from(parts.len()).unwrap();
    let Some(partition) = partition else {
        return (count, -1, -1);
    };
    let p = parts
        .iter()
        .find(|p| p.id() == partition)
        .unwrap_or_else(|| panic!("{TXN_TOPIC}/{partition} is not in the metadata"));
    (count, p.leader(), p.replicas()[0])
}

/// The address of node `node` (1..=3): the three-node cluster's bootstrap
/// list names its nodes in order.
fn address_of(node: i32, bootstrap: &str) -> String {
    bootstrap
        .split(',')
        .nth(usize::try_from(node - 1).unwrap())
        .unwrap_or_else(|| panic!("no node {node} in {bootstrap}"))
        .trim()
        .to_owned()
}

/// Asks Kafka until `partition` of `__transaction_state` is led by `node`,
/// for at most `within`, running the preferred-leader election of the
/// partition (with `elect`) each time it is not.
async fn until_led_by(boot: &str, partition: i32, node: i32, elect: bool, within: Duration) {
    let started = Instant::now();
    loop {
        let b = boot.to_owned();
        let (_, leader, _) =
            tokio::task::spawn_blocking(move || txn_partition_metadata(&b, Some(partition)))
                .await
                .unwrap();
        if leader == node {
            eprintln!(
                "{TXN_TOPIC}/{partition} led by node {node} after {:?}",
                started.elapsed()
            );
            return;
        }
        assert!(
            started.elapsed() < within,
            "{TXN_TOPIC}/{partition} still led by node {leader}, not {node}, after {within:?}"
        );
        if elect {
            let (b, p) = (boot.to_owned(), partition.to_string());
            // Refused while the preferred replica is not in sync yet.
            let _ = tokio::task::spawn_blocking(move || {
                kafka_sh(&[
                    "tool",
                    "leader-election",
                    "--bootstrap-server",
                    &b,
                    "--election-type",
                    "preferred",
                    "--topic",
                    TXN_TOPIC,
                    "--partition",
                    &p,
                ])
            })
            .await
            .unwrap();
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mint_finds_the_coordinator_a_preferred_leader_election_moved() {
    init_tracing();
    let boot = bootstrap3();
    let cfg = config(&boot).with_operation_timeout(Duration::from_secs(20));
    ensure_shared_topic(&cfg, 3, 2).await;
    let describe = KafkaClient::new(&cfg).unwrap();
    // Its coordinator is known once asked: __transaction_state exists.
    describe
        .coordinator_address(&unique("coordinator-move-probe"))
        .await
        .unwrap();

    // A role whose coordinator is its partition's preferred replica, so a
    // preferred-leader election moves it back there.
    let b = boot.clone();
    let (count, _, _) = tokio::task::spawn_blocking(move || txn_partition_metadata(&b, None))
        .await
        .unwrap();
    let (role, partition, preferred) = loop {
        let role = unique("coordinator-move");
        let partition = txn_partition(&role, count);
        let b = boot.clone();
        let (_, leader, preferred) =
            tokio::task::spawn_blocking(move || txn_partition_metadata(&b, Some(partition)))
                .await
                .unwrap();
        if leader == preferred {
            break (role, partition, preferred);
        }
    };
    assert_eq!(
        describe.coordinator_address(&role).await.unwrap(),
        address_of(preferred, &boot),
        "the coordinator of {role} leads {TXN_TOPIC}/{partition}"
    );
    eprintln!("{role}: {TXN_TOPIC}/{partition}, preferred replica node {preferred}");

    // The preferred replica's broker stops; the coordinator moves to
    // another. `minter` mints there and remembers it; `holder` then mints
    // there too and holds the term (its first lease committed, its next
    // transaction opened ahead at that coordinator).
    let down = DownNode::stop(preferred.to_string()).await;
    let minter = KafkaTransport::new(cfg.clone(), Some("coordinator-move-minter")).unwrap();
    let first = minter
        .mint_epoch(&role, LEASE)
        .await
        .expect("a mint while the preferred replica is down")
        .token();
    let holder = KafkaTransport::new(cfg.clone(), Some("coordinator-move-holder")).unwrap();
    let held = holder.mint_epoch(&role, LEASE).await.unwrap();
    let token = held.token();
    assert!(token > first, "{token} follows {first}");
    held.write_lease(
        lease_record(&role, Some(lease_value("holder", token, 1))),
        LEASE,
    )
    .await
    .expect("the first lease");

    // Back, and moved back by a preferred-leader election; the former
    // coordinator stays up and answers NOT_COORDINATOR.
    down.restart().await;
    until_led_by(&boot, partition, preferred, true, Duration::from_secs(120)).await;

    // The term goes on: the renewal finds the coordinator the election
    // moved, with the same token.
    let started = Instant::now();
    held.write_lease(
        lease_record(&role, Some(lease_value("holder", token, 2))),
        LEASE,
    )
    .await
    .expect("a renewal after the coordinator moved");
    eprintln!("renewed in {:?}", started.elapsed());
    assert_eq!(held.token(), token, "the term goes on at the same epoch");
    assert_eq!(describe.describe_epoch(&role).await.unwrap(), token);
    drop(held);

    // The mint through the transport that remembers the former
    // coordinator: one answer NOT_COORDINATOR, then the new coordinator.
    let started = Instant::now();
    let second = minter.mint_epoch(&role, LEASE).await.expect(
        "a mint at the coordinator the election moved (the former one said NOT_COORDINATOR)",
    );
    eprintln!("minted {} in {:?}", second.token(), started.elapsed());
    assert!(second.token() > token, "{} follows {token}", second.token());
}
