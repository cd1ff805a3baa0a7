//! A data partition whose leader is paused costs writes, never the lease:
//! on the three-node cluster (a file of its own: the tests of one file run
//! at once, and this one pauses a broker).
//!
//! Needs the real three-node cluster: `KRABKA_BOOTSTRAP_3`, or `ci/kafka.sh
//! start 3` is run. The paused node is resumed at the end, and restarted by
//! a guard if the test fails.
#![cfg(feature = "kafka")]

mod support;

use std::time::{Duration, Instant};

use krabka_coordination::events;
use krabka_coordination::transport::kafka::KafkaClient;
use support::*;

const LEASE: Duration = Duration::from_secs(20);
const RENEW: Duration = Duration::from_secs(3);

/// A data partition whose leader is paused (SIGSTOP: it keeps its
/// connections and the kernel still accepts new ones, but it answers
/// nothing) costs the writes to it, not the lease: the leader's connection
/// to it is open (a write went through just before), so the next write's
/// Produce is sent and never answered. Its transaction cannot be aborted
/// with the term's epoch while that batch may still land, so the renewals
/// first send the batch again, for at most half their time each; once the
/// cluster moves the partition (`broker.session.timeout.ms` after the
/// pause), the batch is answered by the new leader and the renewals go on.
/// The broker is neither the role's coordinator nor its state partition's
/// leader; the lease, 20 s renewed every 3 s, follows the lease-sizing
/// rule on Kafka's default broker settings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_data_leader_costs_writes_not_the_lease() {
    init_tracing();
    let setup = FaultSetup::new("paused-leader", Duration::from_secs(20), 2, LEASE, RENEW).await;
    let (boot, cfg, data, client) = (&setup.boot, &setup.cfg, &setup.data, &setup.client);
    let victim = partition_leader(boot, data, 0);
    // A role whose lease never needs the data partition's leader.
    let describe = KafkaClient::new(cfg).unwrap();
    let mut role = None;
    for _ in 0..200 {
        let r = unique("paused-leader");
        let coordinator = node_of(&describe.coordinator_address(&r).await.unwrap(), boot);
        let state_leader = partition_leader(boot, cfg.state_topic(), partition_of(&r));
        if coordinator != victim && state_leader != victim {
            role = Some(r);
            break;
        }
    }
    let role = role.expect("a role whose coordinator and state leader are other brokers");
    let (tx, mut rx) = events::channel();
    let leader = client
        .acquire(&role, "leader", setup.options.clone().with_events(tx))
        .await
        .unwrap();
    let token = leader.token();
    leader
        .write(vec![data_record(data, 0, b"before")])
        .await
        .expect("a guarded write while every broker is up");
    // The pause meets a write in flight, not the markers of the one before:
    // markers on their way to a paused leader hold the role's transactions
    // for up to the brokers' `request.timeout.ms`, past this lease (the
    // lease-sizing rule for a paused broker covers that case).
    wait_markers_written(&describe, &role).await;

    let paused = DownNode::pause(&victim);
    let t0 = Instant::now();
    let (mut failed, mut written, mut slowest) = (Vec::new(), 0, Duration::ZERO);
    // One lease and a renew interval: the partition moves within the
    // broker session (9 s), and the term then holds past the lease it had
    // when the leader was paused.
    while t0.elapsed() < LEASE + RENEW {
        assert!(leader.is_held(), "the term ended: {:?}", leader.err());
        let started = Instant::now();
        match leader.write(vec![data_record(data, 0, b"during")]).await {
            Ok(()) => written += 1,
            Err(e) => failed.push(e),
        }
        slowest = slowest.max(started.elapsed());
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let mut renewed = 0;
    while let Ok(e) = rx.try_recv() {
        match e.kind {
            events::EventKind::Renewed { .. } => renewed += 1,
            events::EventKind::Fenced { .. }
            | events::EventKind::LeaseExpired
            | events::EventKind::Ended { .. } => panic!("the leader's term ended: {e:?}"),
            _ => {}
        }
    }
    eprintln!(
        "node {victim} paused: {} writes failed, {written} written after the move, slowest \
         {slowest:?}; {renewed} renewals in {:?}",
        failed.len(),
        t0.elapsed()
    );
    assert!(leader.is_held(), "the leader kept the role");
    assert!(!failed.is_empty(), "writes to the paused leader failed");
    for e in &failed {
        assert!(
            e.is_transient() || e.kind() == krabka_coordination::ErrorKind::OutcomeUnknown,
            "a failed write is transient or of unknown outcome: {e}"
        );
    }
    // A write waits for the producer behind a renewal, which first sends
    // the unanswered batch again for at most half the lease left, then
    // takes at most one renew interval itself.
    assert!(
        slowest <= LEASE / 2 + RENEW + Duration::from_secs(1),
        "a write never waits past a renewal's settling and its own bound (slowest {slowest:?})"
    );
    assert!(renewed >= 3, "renewals went on: {renewed}");

    paused.resume();
    let t1 = Instant::now();
    loop {
        match leader.write(vec![data_record(data, 0, b"after")]).await {
            Ok(()) => break,
            Err(e) if t1.elapsed() < Duration::from_secs(20) => {
                eprintln!("not yet: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("a guarded write once the broker is back: {e}"),
        }
    }
    assert_eq!(leader.token(), token, "the same term throughout");
    leader.resign().await.unwrap();
}
