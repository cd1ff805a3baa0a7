//! Rules 1 and 2 on a real Kafka: minting, describing and fencing epochs,
//! aborted and crashed transactions.
//!
//! Needs a real cluster: `KRABKA_BOOTSTRAP`, or `ci/kafka.sh start 1` is run.
#![cfg(feature = "kafka")]

mod support;

use std::time::{Duration, Instant};

use krabka_coordination::transport::kafka::{DescribeClient, KafkaTransport};
use krabka_coordination::transport::{Coordinator, LeaseWriter, OutRecord, Registrar, StateReader};
use krabka_coordination::{Error, FencingToken, NO_EPOCH};
use support::*;

const LEASE: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mint_gives_increasing_tokens_and_describe_names_the_newest() {
    let role = unique("mint");
    let a = transport("mint-a").await;
    let b = transport("mint-b").await;

    let first = a.acquire_epoch(&role, LEASE).await.expect("first acquire");
    let second = b.acquire_epoch(&role, LEASE).await.expect("second acquire");
    assert!(
        second > first,
        "tokens must increase: {first} then {second}"
    );
    // The same transport again: a third, newer token; its earlier producer is replaced.
    let third = a.acquire_epoch(&role, LEASE).await.expect("third acquire");
    assert!(
        third > second,
        "tokens must increase: {second} then {third}"
    );
    assert_eq!(a.held(&role).await, Some(third));

    assert_eq!(a.describe_epoch(&role).await.unwrap(), third);
    assert_eq!(b.describe_epoch(&role).await.unwrap(), third);
    let outsider = DescribeClient::new(&config(&bootstrap())).unwrap();
    assert_eq!(outsider.describe_epoch(&role).await.unwrap(), third);
    let d = outsider
        .describe_transaction(&role)
        .await
        .unwrap()
        .expect("the role is known");
    assert_eq!(
        d.timeout_ms,
        LEASE.as_millis() as i32,
        "the transaction timeout is the lease"
    );

    let nobody = unique("never-taken");
    assert_eq!(a.describe_epoch(&nobody).await.unwrap(), NO_EPOCH);
    assert_eq!(outsider.describe_transaction(&nobody).await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_costs_one_request_once_the_coordinator_is_known() {
    init_tracing();
    let role = unique("describe");
    let t = transport("describe").await;
    let token = t.acquire_epoch(&role, LEASE).await.unwrap();

    let client = DescribeClient::new(&config(&bootstrap())).unwrap();
    assert_eq!(client.describe_epoch(&role).await.unwrap(), token);
    let warm = client.requests_sent();
    assert!(warm >= 3, "the first describe needs ApiVersions, FindCoordinator and DescribeTransactions, sent {warm}");

    const N: u64 = 50;
    let start = Instant::now();
    for _ in 0..N {
        assert_eq!(client.describe_epoch(&role).await.unwrap(), token);
    }
    let per = start.elapsed() / N as u32;
    assert_eq!(
        client.requests_sent() - warm,
        N,
        "each describe after the first is one request"
    );
    println!("describe latency (warm, sequential): {per:?} per request");

    // Concurrent describes share the connection.
    let before = client.requests_sent();
    let tasks: Vec<_> = (0..20)
        .map(|_| {
            let c = client.clone();
            let r = role.clone();
            tokio::spawn(async move { c.describe_epoch(&r).await })
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.unwrap().unwrap(), token);
    }
    assert_eq!(client.requests_sent() - before, 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deposed_holder_is_fenced_and_its_record_stays_invisible() {
    let role = unique("fence");
    let p = partition_of(&role);
    let a = transport("fence-a").await;
    let b = transport("fence-b").await;
    let key = lease_key(&role);

    let ta = a.acquire_epoch(&role, LEASE).await.unwrap();
    let a1 = lease_value("a", ta, 1);
    a.write_lease(&role, p, key.clone(), Some(a1.clone()))
        .await
        .expect("A's first lease");

    let tb = b.acquire_epoch(&role, LEASE).await.unwrap();
    assert!(tb > ta);
    let a2 = lease_value("a", ta, 2);
    let e = a
        .write_lease(&role, p, key.clone(), Some(a2.clone()))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Fenced(_)), "expected Fenced, got {e:?}");
    assert_eq!(a.held(&role).await, None, "the fenced producer is dropped");

    // With no producer left, a write is refused as "no epoch held", not Fenced again.
    let e = a
        .write_lease(&role, p, key.clone(), Some(a2.clone()))
        .await
        .unwrap_err();
    assert!(
        matches!(e, Error::Fatal { .. }),
        "expected Fatal (no epoch held), got {e:?}"
    );
    assert!(e.to_string().contains("no epoch"), "{e}");

    // The guarded write of a deposed holder fails the same way.
    let guarded = OutRecord {
        topic: config(&bootstrap()).state_topic().to_owned(),
        partition: Some(p),
        key: Some(key.clone()),
        value: Some(lease_value("a", ta, 3)),
        headers: vec![("h".into(), b"v".to_vec())],
    };
    assert!(a.write_guarded(&role, vec![guarded.clone()]).await.is_err());

    let b1 = lease_value("b", tb, 4);
    b.write_lease(&role, p, key.clone(), Some(b1.clone()))
        .await
        .expect("B's lease");
    let records = read_until(&b, p, Duration::from_secs(10), |r| has_value(r, &b1)).await;
    assert!(has_value(&records, &a1), "A's committed lease is visible");
    assert!(has_value(&records, &b1), "B's lease is visible");
    assert!(
        !has_value(&records, &a2),
        "A's fenced lease must never be visible"
    );
    assert!(
        !has_value(&records, &lease_value("a", ta, 3)),
        "A's fenced guarded write must never be visible"
    );
    assert_eq!(b.describe_epoch(&role).await.unwrap(), tb);

    // A fresh acquire by A fences B in turn.
    let ta2 = a.acquire_epoch(&role, LEASE).await.unwrap();
    assert!(ta2 > tb);
    let e = b.write_guarded(&role, vec![guarded]).await.unwrap_err();
    assert!(matches!(e, Error::Fenced(_)), "expected Fenced, got {e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_without_an_epoch_is_refused_but_not_as_fenced() {
    let t = transport("no-epoch").await;
    let role = unique("no-epoch");
    let e = t
        .write_lease(&role, 0, lease_key(&role), None)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Fatal { .. }), "{e:?}");
    let token = t.acquire_epoch(&role, LEASE).await.unwrap();
    t.write_lease(
        &role,
        partition_of(&role),
        lease_key(&role),
        Some(lease_value("m", token, 1)),
    )
    .await
    .unwrap();
    t.release(&role).await.unwrap();
    let e = t
        .write_lease(&role, partition_of(&role), lease_key(&role), None)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Fatal { .. }), "{e:?}");
    assert!(!e.is_fenced());
    let e = t
        .acquire_epoch(&role, Duration::from_millis(500))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
}

/// Child mode of [`aborted_and_crashed_writes_never_appear`]: hold a
/// transaction open and wait to be killed.
async fn crashed_writer_child(role: &str, marker: i64) {
    init_tracing();
    let t = KafkaTransport::new(config(&bootstrap()), Some("crashed-writer")).unwrap();
    // A short lease: the coordinator aborts the orphaned transaction soon.
    let token = t.acquire_epoch(role, Duration::from_secs(2)).await.unwrap();
    let p = partition_of(role);
    t.write_lease(
        role,
        p,
        lease_key(role),
        Some(lease_value("child", token, marker)),
    )
    .await
    .unwrap();
    t.write_lease_uncommitted(
        role,
        p,
        lease_key(role),
        Some(lease_value("child", token, marker + 1)),
    )
    .await
    .unwrap();
    println!("READY {} {}", token.producer_id, token.producer_epoch);
    tokio::time::sleep(Duration::from_secs(120)).await;
    panic!("the child was not killed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborted_and_crashed_writes_never_appear() {
    if let Ok(role) = std::env::var(CHILD_ENV) {
        let marker: i64 = std::env::var("KRABKA_TEST_MARKER")
            .unwrap()
            .parse()
            .unwrap();
        return crashed_writer_child(&role, marker).await;
    }
    let t = transport("aborts").await;
    let cfg = config(&bootstrap());

    // 1. A transaction that aborts: its first record is written to the log
    //    (the open transaction's send is acknowledged), then a record for a
    //    partition the topic does not have fails the send and the
    //    transaction is aborted.
    let role = unique("abort");
    let p = partition_of(&role);
    let token = t.acquire_epoch(&role, LEASE).await.unwrap();
    let doomed = lease_value("m", token, 100);
    t.write_lease_uncommitted(&role, p, lease_key(&role), Some(doomed.clone()))
        .await
        .unwrap();
    let rec = |partition: i32, value: Vec<u8>| OutRecord {
        topic: cfg.state_topic().to_owned(),
        partition: Some(partition),
        key: Some(lease_key(&role)),
        value: Some(value),
        headers: Vec::new(),
    };
    let e = t
        .write_guarded(
            &role,
            vec![
                rec(p, lease_value("m", token, 99)),
                rec(STATE_PARTITIONS + 7, b"x".to_vec()),
            ],
        )
        .await;
    let e = e.expect_err("a send to a missing partition must fail the transaction");
    assert!(
        !e.is_fenced(),
        "an aborted transaction is not a fence: {e:?}"
    );
    assert_eq!(
        t.held(&role).await,
        Some(token),
        "an abortable error keeps the producer"
    );
    // The producer goes on: a later lease commits.
    let later = lease_value("m", token, 101);
    t.write_lease(&role, p, lease_key(&role), Some(later.clone()))
        .await
        .expect("a write after the abort");
    let records = read_until(&t, p, Duration::from_secs(10), |r| has_value(r, &later)).await;
    assert!(has_value(&records, &later), "the later lease is visible");
    assert!(
        !has_value(&records, &doomed),
        "the aborted lease must never be visible"
    );
    assert!(!has_value(&records, &lease_value("m", token, 99)));
    let raw = read_uncommitted(&bootstrap(), cfg.state_topic(), p).await;
    assert!(
        has_value(&raw, &doomed),
        "the aborted lease is in the log; read_committed hides it"
    );

    // 2. A writer process killed with SIGKILL in the middle of a transaction.
    let role2 = unique("killed");
    let p2 = partition_of(&role2);
    let marker = 200;
    let mut child = spawn_child(
        "aborted_and_crashed_writes_never_appear",
        &[
            (CHILD_ENV, role2.clone()),
            ("KRABKA_BOOTSTRAP", bootstrap()),
            ("KRABKA_TEST_MARKER", marker.to_string()),
        ],
    );
    let ready = wait_for_line(&mut child, "READY", Duration::from_secs(60));
    sigkill(&mut child);
    let mut parts = ready.split_whitespace().map(|s| s.parse::<i64>().unwrap());
    let child_token = FencingToken::new(parts.next().unwrap(), parts.next().unwrap() as i16);
    let committed = lease_value("child", child_token, marker);
    let open = lease_value("child", child_token, marker + 1);

    // A record written after the kill; it becomes visible once the
    // coordinator has aborted the orphaned transaction (2 s lease).
    let after = reg_value("after-the-kill", 7);
    let off = t
        .append(p2, reg_key(&role2, "after-the-kill"), Some(after.clone()))
        .await
        .unwrap();
    let after_key = reg_key(&role2, "after-the-kill");
    let records = read_until(&t, p2, Duration::from_secs(30), |r| {
        has_record(r, &after_key, &after)
    })
    .await;
    assert!(
        has_record(&records, &after_key, &after),
        "the record written after the kill becomes visible"
    );
    assert!(records.iter().any(|r| r.offset == off));
    assert!(
        has_value(&records, &committed),
        "the killed writer's committed lease is visible"
    );
    let raw = read_uncommitted(&bootstrap(), cfg.state_topic(), p2).await;
    assert!(
        has_value(&raw, &open),
        "the killed writer's open lease is in the log; read_committed hides it"
    );
    assert!(
        !has_value(&records, &open),
        "the killed writer's open lease must never be visible"
    );
    let d = DescribeClient::new(&cfg)
        .unwrap()
        .describe_epoch(&role2)
        .await
        .unwrap();
    assert!(
        d > child_token,
        "the coordinator's abort bumped the epoch: {child_token} -> {d}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_epoch_per_term_across_renewals() {
    let role = unique("term");
    let p = partition_of(&role);
    let t = transport("term").await;
    let token = t.acquire_epoch(&role, LEASE).await.unwrap();
    let start = Instant::now();
    const RENEWALS: i64 = 50;
    for i in 0..RENEWALS {
        t.write_lease(
            &role,
            p,
            lease_key(&role),
            Some(lease_value("m", token, 1000 + i)),
        )
        .await
        .unwrap();
    }
    let per = start.elapsed() / RENEWALS as u32;
    println!("lease renewal (one committed transaction): {per:?} each");
    // On a transaction-version-2 cluster the epoch would move on every
    // commit if the client sent EndTxn v5+; librdkafka's EndTxn keeps it.
    let described = t.describe_epoch(&role).await.unwrap();
    assert_eq!(
        described, token,
        "the epoch must stay the minted token for the whole term"
    );
    let records = read_until(&t, p, Duration::from_secs(10), |r| {
        has_value(r, &lease_value("m", token, 1000 + RENEWALS - 1))
    })
    .await;
    let mine: Vec<_> = records
        .iter()
        .filter(|r| r.key == lease_key(&role))
        .collect();
    assert_eq!(
        mine.len(),
        RENEWALS as usize,
        "every renewal is visible once, in order"
    );
    for (i, r) in mine.iter().enumerate() {
        assert_eq!(
            r.value.as_deref(),
            Some(lease_value("m", token, 1000 + i as i64).as_slice())
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_stalled_past_its_transaction_timeout_is_fenced() {
    let role = unique("stall");
    let p = partition_of(&role);
    let t = transport("stall").await;
    let lease = Duration::from_secs(2);
    let token = t.acquire_epoch(&role, lease).await.unwrap();
    let stalled = lease_value("m", token, 1);
    t.write_lease_uncommitted(&role, p, lease_key(&role), Some(stalled.clone()))
        .await
        .unwrap();

    // Wait (on the coordinator, not on a clock) until it has aborted the
    // transaction and bumped the epoch.
    let client = DescribeClient::new(&config(&bootstrap())).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let bumped = loop {
        let d = client.describe_epoch(&role).await.unwrap();
        if d > token || Instant::now() > deadline {
            break d;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(bumped > token, "the coordinator must abort the stalled transaction and bump the epoch ({token} -> {bumped})");

    let next = lease_value("m", token, 2);
    let e = t
        .write_lease(&role, p, lease_key(&role), Some(next.clone()))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Fenced(_)), "expected Fenced, got {e:?}");
    assert_eq!(t.held(&role).await, None);
    let raw = read_uncommitted(&bootstrap(), config(&bootstrap()).state_topic(), p).await;
    assert!(
        has_value(&raw, &stalled),
        "the stalled record is in the log"
    );
    let records = t.read_partition(p).await.unwrap();
    assert!(
        !has_value(&records, &stalled),
        "the stalled transaction's record must never be visible"
    );
    assert!(!has_value(&records, &next));
}

/// Child mode of [`a_crashed_holder_is_replaced`]: commit a lease, open a
/// transaction, wait to be killed.
async fn crashed_holder_child(role: &str) {
    init_tracing();
    let t = KafkaTransport::new(config(&bootstrap()), Some("crashed-holder")).unwrap();
    // A long lease: the coordinator must not abort on its own before the
    // new candidate arrives.
    let token = t
        .acquire_epoch(role, Duration::from_secs(60))
        .await
        .unwrap();
    let p = partition_of(role);
    t.write_lease(role, p, lease_key(role), Some(lease_value("old", token, 1)))
        .await
        .unwrap();
    t.write_lease_uncommitted(role, p, lease_key(role), Some(lease_value("old", token, 2)))
        .await
        .unwrap();
    println!("READY {} {}", token.producer_id, token.producer_epoch);
    tokio::time::sleep(Duration::from_secs(120)).await;
    panic!("the child was not killed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_holder_is_replaced() {
    if let Ok(role) = std::env::var(CHILD_ENV) {
        return crashed_holder_child(&role).await;
    }
    let role = unique("crash");
    let p = partition_of(&role);
    let mut child = spawn_child(
        "a_crashed_holder_is_replaced",
        &[(CHILD_ENV, role.clone()), ("KRABKA_BOOTSTRAP", bootstrap())],
    );
    let ready = wait_for_line(&mut child, "READY", Duration::from_secs(60));
    sigkill(&mut child);
    let mut parts = ready.split_whitespace().map(|s| s.parse::<i64>().unwrap());
    let old = FencingToken::new(parts.next().unwrap(), parts.next().unwrap() as i16);

    let client = DescribeClient::new(&config(&bootstrap())).unwrap();
    let before = client
        .describe_transaction(&role)
        .await
        .unwrap()
        .expect("the dead holder's id is known");
    assert_eq!(before.token, old);
    assert_eq!(
        before.state, "Ongoing",
        "the dead holder left its transaction open"
    );

    // The transaction stays open past the grace a live holder gets to finish
    // it, so the successor fences it (one InitProducerId of its protocol
    // client: the coordinator bumps the epoch and aborts it), waits the abort
    // out, then mints with its own producer. Its librdkafka InitProducerId
    // never meets the open transaction, whose CONCURRENT_TRANSACTIONS answer
    // would cost librdkafka's fixed 500 ms retry.
    let t = transport("successor").await;
    let start = Instant::now();
    let new = t
        .acquire_epoch(&role, LEASE)
        .await
        .expect("the successor's acquire succeeds");
    let took = start.elapsed();
    println!("take-over acquire after a crash: {took:?}");
    assert!(new > old, "{old} -> {new}");
    if new.producer_id == old.producer_id {
        assert!(
            new.producer_epoch >= old.producer_epoch + 2,
            "the fence bumps once and the successor's InitProducerId again: {old} -> {new}"
        );
    }
    let stats = t.mint_stats();
    assert_eq!(stats.minted, 1);
    assert_eq!(
        stats.fenced_open_transactions, 1,
        "the open transaction is fenced, not waited for: {stats:?}"
    );
    let mine = lease_value("new", new, 3);
    t.write_lease(&role, p, lease_key(&role), Some(mine.clone()))
        .await
        .unwrap();
    let records = read_until(&t, p, Duration::from_secs(10), |r| has_value(r, &mine)).await;
    assert!(
        has_value(&records, &lease_value("old", old, 1)),
        "the dead holder's committed lease is visible"
    );
    let raw = read_uncommitted(&bootstrap(), config(&bootstrap()).state_topic(), p).await;
    assert!(
        has_value(&raw, &lease_value("old", old, 2)),
        "the dead holder's open lease is in the log; read_committed hides it"
    );
    assert!(
        !has_value(&records, &lease_value("old", old, 2)),
        "the dead holder's open lease must never be visible"
    );
    assert!(has_value(&records, &mine));
    assert_eq!(t.describe_epoch(&role).await.unwrap(), new);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registered_member_mints_with_a_spare_lease_producer() {
    init_tracing();
    let role = unique("spare");
    let p = partition_of(&role);
    let a = transport("spare-a").await;
    let b = transport("spare-b").await;
    let key = lease_key(&role);

    let ta = a.acquire_epoch(&role, LEASE).await.unwrap();
    assert!(
        a.has_spare_lease_producer(&role),
        "after a mint the transport builds the role's next lease producer"
    );
    assert_eq!(a.mint_stats().from_spare, 0, "the first mint had no spare");
    // The lease record says how long the role's leases last (10 s = LEASE).
    let a1 = lease_value("a", ta, 1);
    a.write_lease(&role, p, key.clone(), Some(a1.clone()))
        .await
        .unwrap();

    // Reading the role's lease makes no spare: B was told nothing yet.
    read_until(&b, p, Duration::from_secs(10), |r| has_value(r, &a1)).await;
    assert!(!b.has_spare_lease_producer(&role));
    // Told it may mint the role (a waiting member's hint): B keeps a spare.
    b.prepare_epoch(&role, Some(LEASE));
    assert!(b.has_spare_lease_producer(&role));

    let tb = b.acquire_epoch(&role, LEASE).await.unwrap();
    assert!(tb > ta, "{ta} -> {tb}");
    let stats = b.mint_stats();
    assert_eq!((stats.minted, stats.from_spare), (1, 1), "{stats:?}");
    assert_eq!(b.describe_epoch(&role).await.unwrap(), tb);
    // The spare is the producer the epoch binds: it writes, A is fenced.
    let b2 = lease_value("b", tb, 2);
    b.write_lease(&role, p, key.clone(), Some(b2.clone()))
        .await
        .expect("the spare's epoch writes");
    let e = a
        .write_lease(&role, p, key.clone(), Some(lease_value("a", ta, 3)))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Fenced(_)), "expected Fenced, got {e:?}");

    // A mint with another lease does not use a spare built for 10 s: the
    // producer's transaction timeout is the lease.
    let short = Duration::from_secs(5);
    let tb2 = b.acquire_epoch(&role, short).await.unwrap();
    assert!(tb2 > tb, "{tb} -> {tb2}");
    assert_eq!(b.mint_stats().from_spare, 1, "{:?}", b.mint_stats());
    let d = b
        .describe_client()
        .describe_transaction(&role)
        .await
        .unwrap()
        .expect("the role is known");
    assert_eq!(d.timeout_ms, short.as_millis() as i32);
    let b4 = lease_value("b", tb2, 4);
    b.write_lease(&role, p, key.clone(), Some(b4.clone()))
        .await
        .unwrap();
    let records = read_until(&a, p, Duration::from_secs(10), |r| has_value(r, &b4)).await;
    assert!(has_value(&records, &b2));
    assert!(!has_value(&records, &lease_value("a", ta, 3)));

    // B leaves the role (the member's hint): the role's spare goes.
    b.prepare_epoch(&role, None);
    assert!(!b.has_spare_lease_producer(&role));
}
