//! An unwritable data partition costs a write, never the lease: on the
//! three-node cluster, a data topic with replication factor 3 and
//! `min.insync.replicas` 3 loses a broker (neither the role's coordinator nor
//! its state partition's leader). Once Kafka has taken the broker out of the
//! partition's in-sync replicas, every guarded write to it fails promptly with
//! an error naming the topic and the reason, and the leader keeps renewing for
//! a lease and two renewals (no fence, no expired lease, no standby elected;
//! the lease, 20 s renewed every 3 s, follows the lease-sizing rule on Kafka's
//! default broker settings). Once the broker is back in sync, a guarded write
//! commits again with the same token.
//!
//! Without the check before AddPartitionsToTxn the first such write added
//! the partition to the role's transaction; Kafka could then neither commit
//! nor abort it (its markers need the min ISR too), every later renewal met
//! CONCURRENT_TRANSACTIONS, and the lease ran out while the state topic was
//! healthy.
//!
//! Needs the real three-node cluster: `KRABKA_BOOTSTRAP_3`, or `ci/kafka.sh
//! start 3` is run. The killed node is restarted at the end, and by a guard
//! if the test fails.
#![cfg(feature = "kafka")]

mod support;

use std::time::{Duration, Instant};

use krabka_coordination::events;
use krabka_coordination::transport::kafka::KafkaClient;
use support::*;

const LEASE: Duration = Duration::from_secs(20);
const RENEW: Duration = Duration::from_secs(3);
/// How long the leader writes to the unwritable partition: past the deadline
/// it held at the first refused write (at most one lease away) by two renew
/// intervals, so renewals stuck behind that write would have lost the role.
const RIDE_OUT: Duration = Duration::from_secs(LEASE.as_secs() + 2 * RENEW.as_secs());

/// Waits until `topic`/0 shows `in_sync` replicas in sync, for at most
/// `within`; returns how long it took.
async fn wait_in_sync(boot: &str, topic: &str, in_sync: usize, within: Duration) -> Duration {
    let t0 = Instant::now();
    loop {
        let (boot2, topic2) = (boot.to_owned(), topic.to_owned());
        let (_, isr) = tokio::task::spawn_blocking(move || partition_metadata(&boot2, &topic2, 0))
            .await
            .unwrap();
        if isr == in_sync {
            return t0.elapsed();
        }
        assert!(
            t0.elapsed() < within,
            "{topic}/0 still has {isr} in-sync replicas after {within:?} (waiting for {in_sync})"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_below_its_min_insync_replicas_fails_the_write_and_keeps_the_lease() {
    init_tracing();
    let setup = FaultSetup::new("unwritable", Duration::from_secs(20), 3, LEASE, RENEW).await;
    let (boot, cfg, data, client) = (&setup.boot, &setup.cfg, &setup.data, &setup.client);
    let role = unique("unwritable");
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
    let (stx, mut srx) = events::channel();
    let standby = setup.standby(&setup.client(), &role, stx);
    // The standby waits behind the leader before the broker dies: its start
    // on a cluster losing a broker is not what this test is about.
    let t = Instant::now();
    loop {
        match srx.try_recv() {
            Ok(e) if matches!(e.kind, events::EventKind::Waiting { .. }) => break,
            Ok(e) => assert!(
                !matches!(e.kind, events::EventKind::Elected { .. }),
                "the standby was elected: {e:?}"
            ),
            Err(_) if t.elapsed() < Duration::from_secs(20) && !standby.is_finished() => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            Err(_) => panic!("the standby did not start waiting within 20 s"),
        }
    }

    // A node that is neither the role's coordinator nor its state
    // partition's leader: the lease itself never needs it.
    let describe = KafkaClient::new(cfg).unwrap();
    let coordinator = node_of(&describe.coordinator_address(&role).await.unwrap(), boot);
    let state_leader = partition_leader(boot, cfg.state_topic(), partition_of(&role));
    let victim = ["1", "2", "3"]
        .into_iter()
        .find(|n| *n != coordinator && *n != state_leader)
        .unwrap()
        .to_owned();
    leader_stays(&mut rx, &mut srx);
    let killed = DownNode::kill(&victim);
    let out = wait_in_sync(boot, data, 2, 2 * LEASE).await;
    eprintln!("node {victim} killed: {data}/0 was down to 2 in-sync replicas after {out:?}");

    // A lease and two renewals of guarded writes to the unwritable partition.
    // The term first, the errors after: what a failure costs shows first.
    let t0 = Instant::now();
    let (mut refused, mut slowest, mut errors) = (0, Duration::ZERO, Vec::new());
    while t0.elapsed() < RIDE_OUT && leader.is_held() {
        let started = Instant::now();
        let written = leader.write(vec![data_record(data, 0, b"refused")]).await;
        slowest = slowest.max(started.elapsed());
        errors.push(written.expect_err("a write to a partition below its min.insync.replicas"));
        refused += 1;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let renewed = leader_stays(&mut rx, &mut srx);
    eprintln!(
        "{refused} guarded writes refused in {:?} (slowest {slowest:?}); {renewed} renewals",
        t0.elapsed()
    );
    assert!(leader.is_held(), "the leader kept the role");
    for e in &errors {
        let message = e.to_string();
        assert!(
            e.is_transient()
                && message.contains(data.as_str())
                && message.contains("min.insync.replicas"),
            "the error names the topic and the reason: {message}"
        );
    }
    assert!(
        renewed >= (RIDE_OUT.as_secs() / RENEW.as_secs()) as usize - 2,
        "renewals went on: {renewed}"
    );
    assert!(
        slowest < Duration::from_secs(5),
        "each refusal came promptly (slowest {slowest:?})"
    );

    killed.restart().await;
    let back = wait_in_sync(boot, data, 3, Duration::from_secs(60)).await;
    eprintln!("node {victim} restarted: {data}/0 in sync again after {back:?}");
    // The writer's Metadata is fresh on every write; a broker's own view may
    // lag the controller's by a moment.
    let t1 = Instant::now();
    loop {
        match leader.write(vec![data_record(data, 0, b"after")]).await {
            Ok(()) => break,
            Err(e) if t1.elapsed() < Duration::from_secs(10) => {
                eprintln!("not yet: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("a guarded write once the broker is back: {e}"),
        }
    }
    leader_stays(&mut rx, &mut srx);
    assert_eq!(leader.token(), token, "the same term throughout");
    assert_eq!(
        client.describe_leadership(&role).await.unwrap().token,
        token,
        "the leader's token is still the role's"
    );
    if standby.is_finished() {
        match standby.await {
            Ok(Ok(l)) => panic!("the standby was elected with token {}", l.token()),
            Ok(Err(e)) => panic!("the standby's acquire ended: {e}"),
            Err(e) => panic!("the standby's task: {e}"),
        }
    }
    standby.abort();
    leader.resign().await.unwrap();
}
