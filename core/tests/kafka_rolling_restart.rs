//! A rolling restart of the whole cluster does not move a leader: on the
//! three-node cluster (replication factor 3, min.insync.replicas 2), the three
//! brokers are restarted one at a time as a Kafka upgrade does (each stopped
//! with SIGTERM, so it shuts down in a controlled way and hands its partition
//! leaders and transaction coordinators over; started again; back in every
//! partition's ISR before the next), while one process leads three roles, each
//! with a standby in another client, and writes through guarded writes every
//! 100 ms.
//!
//! Each role keeps its leader and its token (no fence, no expired lease, no
//! standby elected), and each role's guarded writes resume after each
//! restart. The lease follows the lease-sizing rule (docs/operations.md):
//! lease >= renew interval + `broker.session.timeout.ms` + 7 s, so 20 s
//! renewed every 3 s on Kafka's default 9 s session.
//!
//! Needs the real three-node cluster: `KRABKA_BOOTSTRAP_3`, or
//! `ci/kafka.sh start 3` is run. A node this test stopped is started again
//! by a guard if the test fails.
#![cfg(feature = "kafka")]

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use krabka_coordination::events;
use support::*;

const LEASE: Duration = Duration::from_secs(20);
const RENEW: Duration = Duration::from_secs(3);
const ROLES: usize = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_of_the_cluster_keeps_every_leader() {
    init_tracing();
    let setup = FaultSetup::new("rolling", Duration::from_secs(60), 2, LEASE, RENEW).await;
    let (boot, data, client, options) = (&setup.boot, &setup.data, &setup.client, &setup.options);
    until_fully_replicated(boot, Duration::from_secs(60)).await;
    let standby_client = setup.client();
    let (tx, mut rx) = events::channel();
    let (stx, mut srx) = events::channel();
    let mut leaders = Vec::new();
    let mut standbys = Vec::new();
    let mut writers = Vec::new();
    let mut written = Vec::new();
    for i in 0..ROLES {
        let role = unique(&format!("rolling-{i}"));
        let leader = Arc::new(
            client
                .acquire(&role, "leader", options.clone().with_events(tx.clone()))
                .await
                .unwrap(),
        );
        standbys.push(tokio::spawn({
            let (client, role, options) = (
                standby_client.clone(),
                role.clone(),
                options.clone().with_events(stx.clone()),
            );
            async move { client.acquire(&role, "standby", options).await }
        }));
        let count = Arc::new(AtomicU64::new(0));
        writers.push(tokio::spawn({
            let (leader, count, data) = (Arc::clone(&leader), Arc::clone(&count), data.clone());
            async move {
                let mut seq = 0u64;
                while leader.is_held() {
                    seq += 1;
                    let rec = data_record(&data, 0, format!("{i}-{seq}").as_bytes());
                    if leader.write(vec![rec]).await.is_ok() {
                        count.fetch_add(1, Ordering::Relaxed);
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }));
        written.push(count);
        leaders.push((role, leader));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let tokens: Vec<_> = leaders.iter().map(|(_, l)| l.token()).collect();

    for node in ["1", "2", "3"] {
        leader_stays(&mut rx, &mut srx);
        let before: Vec<u64> = written.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        let t0 = Instant::now();
        let down = DownNode::stop(node.to_owned()).await;
        let stopped = t0.elapsed();
        tokio::time::sleep(Duration::from_secs(2)).await;
        down.restart().await;
        let started = t0.elapsed();
        let caught_up = until_fully_replicated(boot, Duration::from_secs(120)).await;
        // A few writes after the node is back in every ISR.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let renewed = leader_stays(&mut rx, &mut srx);
        let after: Vec<u64> = written.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        eprintln!(
            "node {node}: stopped in {stopped:?}, started again at {started:?}, in every ISR \
             {caught_up:?} later; {renewed} renewals; guarded writes {before:?} -> {after:?}"
        );
        for (i, (role, leader)) in leaders.iter().enumerate() {
            assert!(
                leader.is_held(),
                "{role} lost its leader with node {node}'s restart"
            );
            assert!(
                after[i] > before[i],
                "{role}: no guarded write committed across node {node}'s restart"
            );
        }
    }
    for ((role, leader), token) in leaders.iter().zip(&tokens) {
        assert_eq!(leader.token(), *token);
        assert_eq!(
            client.describe_leadership(role).await.unwrap().token,
            *token,
            "{role}'s token is still the role's after the rolling restart"
        );
    }
    for s in &standbys {
        assert!(!s.is_finished(), "every standby is still waiting");
    }
    for s in standbys {
        s.abort();
    }
    for (_, leader) in &leaders {
        leader.resign().await.unwrap();
    }
    for w in writers {
        w.await.unwrap();
    }
}
