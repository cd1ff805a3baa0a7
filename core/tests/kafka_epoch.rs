//! Rules 1 and 2 on a real Kafka: minting, describing and fencing epochs,
//! aborted and crashed transactions.
//!
//! Needs a real cluster: `KRABKA_BOOTSTRAP`, or `ci/kafka.sh start 1` is run.
#![cfg(feature = "kafka")]

mod support;

use std::time::{Duration, Instant};

use krabka_coordination::transport::kafka::{
    ensure_state_topic, KafkaClient, KafkaEpoch, KafkaTransport,
};
use krabka_coordination::transport::{Coordinator, Describer, LeaseWriter, Registrar, StateReader};
use krabka_coordination::{Error, ErrorKind, FencingToken, NO_EPOCH};
use support::*;

/// How long one write of an epoch may take in these tests.
const WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

const LEASE: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mint_gives_increasing_tokens_and_describe_names_the_newest() {
    let role = unique("mint");
    let a = transport("mint-a").await;
    let b = transport("mint-b").await;

    let first_epoch = a.mint_epoch(&role, LEASE).await.expect("first acquire");
    let first = first_epoch.token();
    let second = b.acquire_epoch(&role, LEASE).await.expect("second acquire");
    let second = second.token();
    assert!(
        second > first,
        "tokens must increase: {first} then {second}"
    );
    // The same transport again: a third, newer token, in a handle of its own;
    // the first handle is superseded, not replaced.
    let third_epoch = a.acquire_epoch(&role, LEASE).await.expect("third acquire");
    let third = third_epoch.token();
    assert!(
        third > second,
        "tokens must increase: {second} then {third}"
    );
    assert_eq!(third_epoch.role(), role);
    let e = first_epoch
        .write_lease(
            lease_record(&role, Some(lease_value("a", first, 1))),
            WITHIN,
        )
        .await
        .unwrap_err();
    assert!(e.is_fenced(), "the first epoch is superseded: {e:?}");
    third_epoch
        .write_lease(
            lease_record(&role, Some(lease_value("a", third, 2))),
            WITHIN,
        )
        .await
        .expect("the newest epoch writes");

    assert_eq!(a.describe_epoch(&role).await.unwrap(), third);
    assert_eq!(b.describe_epoch(&role).await.unwrap(), third);
    let outsider = KafkaClient::new(&config(&bootstrap())).unwrap();
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
    let epoch = t.acquire_epoch(&role, LEASE).await.unwrap();
    let token = epoch.token();

    let client = KafkaClient::new(&config(&bootstrap())).unwrap();
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

    // Concurrent describes cost one request each, on the connections the
    // client has or opens (each new one asks ApiVersions first).
    let before = client.requests_sent();
    let connections = client.connections_made();
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
    let opened = client.connections_made() - connections;
    assert!(
        opened < KafkaClient::CONNECTIONS_PER_BROKER as u64,
        "at most the bound per broker: opened {opened}"
    );
    assert_eq!(client.requests_sent() - before - opened, 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deposed_holder_is_fenced_and_its_record_stays_invisible() {
    let role = unique("fence");
    let p = partition_of(&role);
    let a = transport("fence-a").await;
    let b = transport("fence-b").await;
    let (topic, data) = data_topic("krabka-test-fence-data").await;

    let ea = a.mint_epoch(&role, LEASE).await.unwrap();
    let ta = ea.token();
    let a1 = lease_value("a", ta, 1);
    ea.write_lease(lease_record(&role, Some(a1.clone())), WITHIN)
        .await
        .expect("A's first lease");

    let eb = b.mint_epoch(&role, LEASE).await.unwrap();
    let tb = eb.token();
    assert!(tb > ta);
    let a2 = lease_value("a", ta, 2);
    let e = ea
        .write_lease(lease_record(&role, Some(a2.clone())), WITHIN)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Fenced(_)), "expected Fenced, got {e:?}");
    assert_eq!(e.kind(), ErrorKind::Fenced);
    assert!(!ea.has_producer().await, "the fenced producer is dropped");

    // With no producer left, every later write is refused as Fenced again,
    // without reaching the broker.
    let e = ea
        .write_lease(lease_record(&role, Some(a2.clone())), WITHIN)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Fenced(_)), "expected Fenced, got {e:?}");

    // The guarded write of a deposed holder fails the same way.
    let guarded = data_record(&topic, 0, b"a-deposed");
    let e = ea
        .write_guarded(vec![guarded.clone()], WITHIN)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Fenced(_)), "expected Fenced, got {e:?}");

    let b1 = lease_value("b", tb, 4);
    eb.write_lease(lease_record(&role, Some(b1.clone())), WITHIN)
        .await
        .expect("B's lease");
    eb.write_guarded(vec![data_record(&topic, 0, b"b-holder")], WITHIN)
        .await
        .expect("B's guarded write");
    let records = read_until(&b, p, Duration::from_secs(10), |r| has_value(r, &b1)).await;
    assert!(has_value(&records, &a1), "A's committed lease is visible");
    assert!(has_value(&records, &b1), "B's lease is visible");
    assert!(
        !has_value(&records, &a2),
        "A's fenced lease must never be visible"
    );
    let written = read_until(&data, 0, Duration::from_secs(10), |r| {
        has_value(r, b"b-holder")
    })
    .await;
    assert!(has_value(&written, b"b-holder"));
    assert!(
        !has_value(&written, b"a-deposed"),
        "A's fenced guarded write must never be visible"
    );
    assert_eq!(b.describe_epoch(&role).await.unwrap(), tb);

    // A fresh acquire by A fences B in turn, on its guarded write.
    let ea2 = a.mint_epoch(&role, LEASE).await.unwrap();
    assert!(ea2.token() > tb);
    let e = eb.write_guarded(vec![guarded], WITHIN).await.unwrap_err();
    assert!(matches!(e, Error::Fenced(_)), "expected Fenced, got {e:?}");
    assert!(!eb.has_producer().await);
    assert!(ea2.has_producer().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_epochs_of_one_role_on_one_transport_write_through_their_own_producers() {
    // Each epoch owns its producer: two handles of one role on one
    // transport that renewed and wrote through the newest producer would
    // both be accepted by Kafka; with their own, the broker fences the
    // older ones.
    let role = unique("owned");
    let p = partition_of(&role);
    let t = transport("owned").await;
    let (topic, data) = data_topic("krabka-test-owned-data").await;

    let first = t.mint_epoch(&role, LEASE).await.unwrap();
    let second = t.mint_epoch(&role, LEASE).await.unwrap();
    let newest = t.acquire_epoch(&role, LEASE).await.unwrap();
    assert!(first.token() < second.token() && second.token() < newest.token());

    // The broker fences each older epoch, on a lease write and on a guarded
    // write alike, and every later write of it fails the same way.
    let first_lease = lease_value("m", first.token(), 1);
    let e = first
        .write_lease(lease_record(&role, Some(first_lease.clone())), WITHIN)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Fenced(_)), "expected Fenced, got {e:?}");
    let e = second
        .write_guarded(vec![data_record(&topic, 0, b"second")], WITHIN)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Fenced(_)), "expected Fenced, got {e:?}");
    assert!(!first.has_producer().await && !second.has_producer().await);
    let e = first
        .write_guarded(vec![data_record(&topic, 0, b"first")], WITHIN)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Fenced(_)), "expected Fenced, got {e:?}");
    let second_lease = lease_value("m", second.token(), 2);
    let e = second
        .write_lease(lease_record(&role, Some(second_lease.clone())), WITHIN)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Fenced(_)), "expected Fenced, got {e:?}");

    // The newest epoch writes, and only its records are visible.
    let newest_lease = lease_value("m", newest.token(), 3);
    newest
        .write_lease(lease_record(&role, Some(newest_lease.clone())), WITHIN)
        .await
        .expect("the newest epoch renews");
    newest
        .write_guarded(vec![data_record(&topic, 0, b"newest")], WITHIN)
        .await
        .expect("the newest epoch writes");
    let records = read_until(&t, p, Duration::from_secs(10), |r| {
        has_value(r, &newest_lease)
    })
    .await;
    assert!(has_value(&records, &newest_lease));
    assert!(!has_value(&records, &first_lease) && !has_value(&records, &second_lease));
    let written = read_until(&data, 0, Duration::from_secs(10), |r| {
        has_value(r, b"newest")
    })
    .await;
    assert!(has_value(&written, b"newest"));
    assert!(
        !has_value(&written, b"first") && !has_value(&written, b"second"),
        "a superseded epoch's guarded records must never be visible"
    );
    let raw = read_uncommitted(&bootstrap(), &topic, 0).await;
    assert!(has_value(&raw, b"newest"));
    assert_eq!(t.describe_epoch(&role).await.unwrap(), newest.token());

    // Dropping the older handles leaves the newest one alone.
    drop((first, second));
    newest
        .write_lease(
            lease_record(&role, Some(lease_value("m", newest.token(), 4))),
            WITHIN,
        )
        .await
        .expect("the newest epoch writes after the older handles went");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_an_epoch_may_not_make_are_refused_and_keep_the_epoch() {
    let t = transport("refused").await;
    let role = unique("refused");
    let epoch = t.mint_epoch(&role, LEASE).await.unwrap();
    let token = epoch.token();
    let state_topic = config(&bootstrap()).state_topic().to_owned();

    // A guarded write may not forge records of the state topic, nor name an
    // empty topic or a negative partition; a lease may not go to a negative
    // partition. None of it reaches the broker or costs the epoch.
    let mut forged = data_record(&state_topic, partition_of(&role), b"forged");
    forged.value = Some(lease_value("forger", token, 1));
    let e = epoch.write_guarded(vec![forged], WITHIN).await.unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    assert!(e.to_string().contains(&state_topic), "{e}");
    let e = epoch
        .write_guarded(vec![data_record("", 0, b"x")], WITHIN)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    let e = epoch
        .write_guarded(vec![data_record("some-topic", -1, b"x")], WITHIN)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    let e = epoch
        .write_lease(state_record(-1, lease_key(&role), None), WITHIN)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    assert!(epoch.has_producer().await, "a refused write is not a fence");
    let v = lease_value("m", token, 2);
    epoch
        .write_lease(lease_record(&role, Some(v.clone())), WITHIN)
        .await
        .unwrap();
    let records = read_until(&t, partition_of(&role), Duration::from_secs(10), |r| {
        has_value(r, &v)
    })
    .await;
    assert!(has_value(&records, &v));
    assert!(
        !has_value(&records, &lease_value("forger", token, 1)),
        "the forged record was never written"
    );

    // A lease below the shortest transaction timeout, and an empty role,
    // are refused before anything is minted.
    let e = t
        .acquire_epoch(&role, Duration::from_millis(500))
        .await
        .err()
        .expect("a 500 ms lease is refused");
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    let e = t.mint_epoch("", LEASE).await.unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    assert_eq!(t.describe_epoch(&role).await.unwrap(), token);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_an_epoch_aborts_its_open_transaction() {
    let role = unique("drop");
    let p = partition_of(&role);
    let t = transport("drop").await;
    // A long lease: the coordinator would abort the open transaction only
    // after a minute; the drop does it at once.
    let epoch = t.mint_epoch(&role, Duration::from_secs(60)).await.unwrap();
    let token = epoch.token();
    let open = lease_value("m", token, 1);
    epoch
        .write_lease_uncommitted(lease_record(&role, Some(open.clone())))
        .await
        .unwrap();
    let client = KafkaClient::new(&config(&bootstrap())).unwrap();
    let d = client.describe_transaction(&role).await.unwrap().unwrap();
    assert_eq!(d.state, "Ongoing", "the transaction is open");
    drop(epoch);

    // A record appended behind the open transaction becomes visible once it
    // is aborted, well before the coordinator's one-minute timeout.
    let after = reg_value("after-the-drop", 1);
    let key = reg_key(&role, "after-the-drop");
    t.append(state_record(p, key.clone(), Some(after.clone())))
        .await
        .unwrap();
    let records = read_until(&t, p, Duration::from_secs(20), |r| {
        has_record(r, &key, &after)
    })
    .await;
    assert!(
        has_record(&records, &key, &after),
        "the dropped epoch's open transaction was aborted"
    );
    assert!(!has_value(&records, &open), "its record is never visible");
    let d = client.describe_transaction(&role).await.unwrap().unwrap();
    assert_ne!(d.state, "Ongoing", "{d:?}");
}

/// Child mode of [`aborted_and_crashed_writes_never_appear`]: hold a
/// transaction open and wait to be killed.
async fn crashed_writer_child(role: &str, marker: i64) {
    init_tracing();
    let t = KafkaTransport::new(config(&bootstrap()), Some("crashed-writer")).unwrap();
    // A short lease: the coordinator aborts the orphaned transaction soon.
    let epoch = t.mint_epoch(role, Duration::from_secs(2)).await.unwrap();
    let token = epoch.token();
    epoch
        .write_lease(
            lease_record(role, Some(lease_value("child", token, marker))),
            WITHIN,
        )
        .await
        .unwrap();
    epoch
        .write_lease_uncommitted(lease_record(
            role,
            Some(lease_value("child", token, marker + 1)),
        ))
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
    let (topic, data) = data_topic("krabka-test-abort-data").await;

    // 1. A transaction that aborts: its first records are written to the log
    //    (the open transaction's sends are acknowledged), then a record for a
    //    partition the topic does not have fails the send and the
    //    transaction is aborted.
    let role = unique("abort");
    let p = partition_of(&role);
    let epoch = t.mint_epoch(&role, LEASE).await.unwrap();
    let token = epoch.token();
    let doomed = lease_value("m", token, 100);
    epoch
        .write_lease_uncommitted(lease_record(&role, Some(doomed.clone())))
        .await
        .unwrap();
    let e = epoch
        .write_guarded(
            vec![
                data_record(&topic, 0, b"doomed-data"),
                data_record(&topic, 7, b"x"),
            ],
            WITHIN,
        )
        .await;
    let e = e.expect_err("a send to a missing partition must fail the transaction");
    assert!(
        !e.is_fenced(),
        "an aborted transaction is not a fence: {e:?}"
    );
    assert!(
        epoch.has_producer().await,
        "an abortable error keeps the producer"
    );
    // The producer goes on: a later lease commits.
    let later = lease_value("m", token, 101);
    epoch
        .write_lease(lease_record(&role, Some(later.clone())), WITHIN)
        .await
        .expect("a write after the abort");
    let records = read_until(&t, p, Duration::from_secs(10), |r| has_value(r, &later)).await;
    assert!(has_value(&records, &later), "the later lease is visible");
    assert!(
        !has_value(&records, &doomed),
        "the aborted lease must never be visible"
    );
    let written = data.read_partition(0).await.unwrap();
    assert!(
        !has_value(&written, b"doomed-data"),
        "the aborted guarded record must never be visible"
    );
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
        .append(state_record(
            p2,
            reg_key(&role2, "after-the-kill"),
            Some(after.clone()),
        ))
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
    let d = KafkaClient::new(&cfg)
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
    let epoch = t.acquire_epoch(&role, LEASE).await.unwrap();
    let token = epoch.token();
    let start = Instant::now();
    const RENEWALS: i64 = 50;
    for i in 0..RENEWALS {
        epoch
            .write_lease(
                lease_record(&role, Some(lease_value("m", token, 1000 + i))),
                WITHIN,
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
    let epoch = t.mint_epoch(&role, lease).await.unwrap();
    let token = epoch.token();
    let stalled = lease_value("m", token, 1);
    epoch
        .write_lease_uncommitted(lease_record(&role, Some(stalled.clone())))
        .await
        .unwrap();

    // Wait (on the coordinator, not on a clock) until it has aborted the
    // transaction and bumped the epoch.
    let client = KafkaClient::new(&config(&bootstrap())).unwrap();
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
    let e = epoch
        .write_lease(lease_record(&role, Some(next.clone())), WITHIN)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Fenced(_)), "expected Fenced, got {e:?}");
    assert!(
        !epoch.has_producer().await,
        "the fenced producer is dropped"
    );
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
    let epoch = t.mint_epoch(role, Duration::from_secs(60)).await.unwrap();
    let token = epoch.token();
    epoch
        .write_lease(
            lease_record(role, Some(lease_value("old", token, 1))),
            WITHIN,
        )
        .await
        .unwrap();
    epoch
        .write_lease_uncommitted(lease_record(role, Some(lease_value("old", token, 2))))
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

    let client = KafkaClient::new(&config(&bootstrap())).unwrap();
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

    // The successor's InitProducerId fences the open transaction (the
    // coordinator bumps the epoch and aborts it) and is sent again 3 ms after
    // each CONCURRENT_TRANSACTIONS answer until the abort is done, where
    // librdkafka would wait a fixed 500 ms between tries.
    let t = transport("successor").await;
    let start = Instant::now();
    let epoch = t
        .mint_epoch(&role, LEASE)
        .await
        .expect("the successor's acquire succeeds");
    let new = epoch.token();
    let took = start.elapsed();
    println!("take-over acquire after a crash: {took:?}");
    assert!(new > old, "{old} -> {new}");
    if new.producer_id == old.producer_id {
        assert!(
            new.producer_epoch >= old.producer_epoch + 2,
            "the fence bumps once and the successor's InitProducerId again: {old} -> {new}"
        );
    }
    assert_eq!(t.mint_stats().minted, 1);
    assert!(
        took < Duration::from_secs(5),
        "the open transaction is fenced, not waited for (lease 10 s): {took:?}"
    );
    let mine = lease_value("new", new, 3);
    epoch
        .write_lease(lease_record(&role, Some(mine.clone())), WITHIN)
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

/// The conditional bump a resign relies on, checked on the broker:
/// InitProducerId with the caller's producer id and epoch (KIP-360) bumps only
/// the current epoch and is refused for a superseded one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn supersede_bumps_only_the_current_epoch_on_the_broker() {
    let role = unique("supersede");
    let a = transport("supersede-a").await;
    let b = transport("supersede-b").await;
    let old = a.mint_epoch(&role, LEASE).await.unwrap();
    let new = b.mint_epoch(&role, LEASE).await.unwrap();
    assert!(new.token() > old.token());

    // The deposed epoch asks: refused, nothing bumped.
    assert_eq!(
        old.supersede(WITHIN).await.unwrap(),
        krabka_coordination::transport::Superseded::AlreadySuperseded
    );
    assert_eq!(a.describe_epoch(&role).await.unwrap(), new.token());
    new.write_lease(
        lease_record(&role, Some(lease_value("b", new.token(), 1))),
        WITHIN,
    )
    .await
    .expect("the current epoch still writes");
    // That lease opened the next transaction ahead. The bump aborts it
    // first: found open, the coordinator would abort it with a bump of its
    // own, and the conditional bump would then find a newer epoch.
    wait_opened_ahead(
        &a,
        &role,
        config(&bootstrap()).state_topic(),
        partition_of(&role),
    )
    .await;

    // The current epoch asks: bumped by one, and its own writes are fenced.
    let krabka_coordination::transport::Superseded::Bumped(next) =
        new.supersede(WITHIN).await.unwrap()
    else {
        panic!("the current epoch must be bumped");
    };
    assert_eq!(next.producer_id, new.token().producer_id);
    assert_eq!(next.producer_epoch, new.token().producer_epoch + 1);
    assert_eq!(a.describe_epoch(&role).await.unwrap(), next);
    let e = new
        .write_lease(
            lease_record(&role, Some(lease_value("b", new.token(), 2))),
            WITHIN,
        )
        .await
        .unwrap_err();
    assert!(e.means_fenced(), "{e}");
}

/// A deposed epoch's bump must not touch a successor's open transaction.
/// The coordinator aborts an `Ongoing` transaction and fences its producer
/// for any InitProducerId carrying the role's producer id, whatever the
/// epoch: so the conditional bump asks DescribeTransactions first and sends
/// nothing once a newer epoch exists. (Found by the process hand-over
/// benchmark: a resign's bump, sent after its deregistration, fenced the
/// successor's first lease transaction.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deposed_bump_leaves_the_successors_open_transaction_alone() {
    let role = unique("supersede-open");
    let a = transport("supersede-open-a").await;
    let b = transport("supersede-open-b").await;
    let old = a.mint_epoch(&role, LEASE).await.unwrap();
    let new = b.mint_epoch(&role, LEASE).await.unwrap();
    assert!(new.token() > old.token());
    // The successor's first lease transaction is open.
    new.write_lease_uncommitted(lease_record(&role, Some(lease_value("b", new.token(), 1))))
        .await
        .unwrap();
    let client = KafkaClient::new(&config(&bootstrap())).unwrap();
    let d = client.describe_transaction(&role).await.unwrap().unwrap();
    assert_eq!((d.state.as_str(), d.token), ("Ongoing", new.token()));

    assert_eq!(
        old.supersede(WITHIN).await.unwrap(),
        krabka_coordination::transport::Superseded::AlreadySuperseded
    );
    // The successor's transaction commits, with its own token still current.
    new.write_lease(
        lease_record(&role, Some(lease_value("b", new.token(), 2))),
        WITHIN,
    )
    .await
    .expect("the successor's open transaction survives the deposed bump");
    assert_eq!(a.describe_epoch(&role).await.unwrap(), new.token());
}

/// A guarded write that cannot succeed (a topic that does not exist) fails
/// FATAL naming the topic, nothing of it is visible, and the epoch keeps
/// its producer and token, so it writes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unacknowledged_write_is_aborted_and_the_epoch_writes_on() {
    let role = unique("abort-relearn");
    let t = transport("abort-relearn").await;
    let epoch = t.mint_epoch(&role, LEASE).await.unwrap();
    let missing = data_record(&unique("no-such-topic"), 0, b"lost");
    let e = epoch
        .write_guarded(vec![missing], Duration::from_secs(2))
        .await
        .unwrap_err();
    // A topic that does not exist is no retry's to mend: FATAL, naming it.
    // The protocol path asks Metadata first and sends nothing.
    assert_eq!(e.kind(), ErrorKind::Fatal, "{e}");
    let said = e.to_string();
    assert!(
        said.contains("no-such-topic") && said.contains("does not exist"),
        "{e}"
    );
    assert!(
        epoch.has_producer().await,
        "an aborted write keeps the producer"
    );
    epoch
        .write_lease(
            lease_record(&role, Some(lease_value("a", epoch.token(), 1))),
            WITHIN,
        )
        .await
        .expect("the same epoch writes on after the abort");
    assert_eq!(t.describe_epoch(&role).await.unwrap(), epoch.token());
}

/// An epoch that writes as an older token of its producer id (as a writer
/// with a stale token would) is fenced by the broker: the term ends and
/// nothing carrying that token commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_with_an_older_token_ends_the_term() {
    let role = unique("moved-token");
    let p = partition_of(&role);
    let t = transport("moved-token").await;
    let epoch = t.mint_epoch(&role, LEASE).await.unwrap();
    let real = epoch.token();
    epoch
        .write_lease(lease_record(&role, Some(lease_value("m", real, 1))), WITHIN)
        .await
        .unwrap();
    let other = FencingToken::new(real.producer_id, real.producer_epoch - 1);
    epoch.assume_token(other).await;
    let e = epoch
        .write_lease(
            lease_record(&role, Some(lease_value("m", other, 2))),
            WITHIN,
        )
        .await
        .unwrap_err();
    assert!(e.is_fenced(), "the term ends: {e:?}");
    let again = epoch
        .write_lease(
            lease_record(&role, Some(lease_value("m", other, 3))),
            WITHIN,
        )
        .await
        .unwrap_err();
    assert!(again.is_fenced(), "and stays ended: {again:?}");

    // A later term's write shows the partition settled past the aborted one.
    let next = t.acquire_epoch(&role, LEASE).await.unwrap();
    let newer = next.token();
    next.write_lease(
        lease_record(&role, Some(lease_value("n", newer, 4))),
        WITHIN,
    )
    .await
    .unwrap();
    let records = read_until(&t, p, Duration::from_secs(10), |r| {
        has_value(r, &lease_value("n", newer, 4))
    })
    .await;
    assert!(
        !has_value(&records, &lease_value("m", other, 2)),
        "nothing carrying the moved token commits"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn member_checks_at_once_ask_the_shared_questions_once() {
    // Each role's check asks WRITE on its transactional id (FindCoordinator
    // and EndTxn); the consumer group and READ on the state topic are the
    // same for every role, and checks that run at the same time (a thousand
    // roles acquired at once) ask them once between them.
    init_tracing();
    let options = krabka_coordination::ElectionOptions::default();
    let cost = |t: &KafkaTransport| {
        let c = t.kafka_client();
        c.requests_sent() - c.connections_made()
    };
    let one = transport("check-one").await;
    one.check_member(&unique("check"), &options).await.unwrap();
    let first = cost(&one);
    one.check_member(&unique("check"), &options).await.unwrap();
    let per_role = cost(&one) - first;
    assert_eq!(
        per_role, 2,
        "a later role's check: FindCoordinator and EndTxn"
    );

    const N: u64 = 20;
    let many = std::sync::Arc::new(transport("check-many").await);
    let tasks: Vec<_> = (0..N)
        .map(|_| {
            let (t, o) = (std::sync::Arc::clone(&many), options.clone());
            tokio::spawn(async move { t.check_member(&unique("check"), &o).await })
        })
        .collect();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    // ApiVersions per connection aside.
    assert_eq!(
        cost(&many),
        first + (N - 1) * per_role,
        "{N} checks at once cost one first check and {} later ones",
        N - 1
    );
}

/// A guarded write of no records begins no transaction (an EndTxn with
/// nothing added would only be answered from the coordinator's cache): it
/// succeeds while the epoch is the role's current one and is fenced once a
/// newer one exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_of_no_records_checks_the_epoch() {
    let role = unique("empty-write");
    let t = transport("empty-write").await;
    let first = t.mint_epoch(&role, LEASE).await.unwrap();
    first
        .write_lease(
            lease_record(&role, Some(lease_value("e", first.token(), 1))),
            WITHIN,
        )
        .await
        .unwrap();
    first
        .write_guarded(Vec::new(), WITHIN)
        .await
        .expect("the current epoch's empty write succeeds");
    let second = t.mint_epoch(&role, LEASE).await.unwrap();
    assert!(second.token() > first.token());
    let e = first.write_guarded(Vec::new(), WITHIN).await.unwrap_err();
    assert!(
        e.is_fenced(),
        "a superseded epoch's empty write is fenced: {e:?}"
    );
    second
        .write_guarded(Vec::new(), WITHIN)
        .await
        .expect("the new epoch's empty write succeeds");
}

/// A lease's commit opens the next transaction ahead (the state partition
/// added, nothing written): the coordinator shows it open on the role's
/// partition, a record written after it is visible to read_committed
/// readers at once (it holds no last stable offset back), and the next
/// lease commits in it.
///
/// On a state topic of its own: the tests that leave a transaction open on
/// the shared topic (a stalled holder, an open lease) would hold back the
/// last stable offset of a partition this role may share with them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_opens_the_next_transaction_ahead_without_holding_the_partition_back() {
    let role = unique("ahead");
    let p = partition_of(&role);
    let topic = unique("ahead-state");
    let cfg = config(&bootstrap()).with_state_topic(&topic);
    ensure_state_topic(&cfg, STATE_PARTITIONS, 1, 1)
        .await
        .unwrap_or_else(|e| panic!("creating the state topic {topic}: {e}"));
    let t = KafkaTransport::new(cfg, Some("ahead")).expect("transport");
    let (epoch, token) = holding(&t, &role).await;
    wait_opened_ahead(&t, &role, &topic, p).await;
    let (key, value) = (reg_key(&role, "later"), reg_value("later", 1));
    t.append(state_record(p, key.clone(), Some(value.clone())))
        .await
        .unwrap();
    let records = read_until(&t, p, Duration::from_secs(5), |r| {
        has_record(r, &key, &value)
    })
    .await;
    assert!(
        has_record(&records, &key, &value),
        "a record written after the transaction opened ahead is not visible within 5 s"
    );
    let next = lease_value("m", token, 2);
    epoch
        .write_lease(lease_record(&role, Some(next.clone())), WITHIN)
        .await
        .unwrap();
    let records = read_until(&t, p, Duration::from_secs(5), |r| has_value(r, &next)).await;
    assert!(has_value(&records, &next), "the next lease is committed");
}

/// The next transaction is opened after a pause, with the writer free
/// meanwhile: a resign's tombstone written right after a lease takes the
/// writer first, and nothing is opened after it (the successor's mint must
/// find the role's transaction complete, not an empty one to abort).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tombstone_right_after_a_lease_leaves_no_transaction_opened_ahead() {
    let role = unique("ahead-tombstone");
    let t = transport("ahead-tombstone").await;
    let (epoch, _) = holding(&t, &role).await;
    epoch
        .write_lease(lease_record(&role, None), WITHIN)
        .await
        .expect("the tombstone commits");
    // Past the longest pause before opening ahead (50 ms), and then some.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let d = t
        .kafka_client()
        .describe_transaction(&role)
        .await
        .unwrap()
        .expect("the role's transactional id is known");
    assert_ne!(
        d.state, "Ongoing",
        "a transaction was opened after the tombstone: {d:?}"
    );
    assert!(d.topics.is_empty(), "{d:?}");
}

/// A new epoch of `role` on `t` with its first lease (member `m`, lease
/// 1) committed: the epoch and its token.
async fn holding(t: &KafkaTransport, role: &str) -> (KafkaEpoch, FencingToken) {
    let epoch = t.mint_epoch(role, LEASE).await.unwrap();
    let token = epoch.token();
    epoch
        .write_lease(lease_record(role, Some(lease_value("m", token, 1))), WITHIN)
        .await
        .unwrap();
    (epoch, token)
}
