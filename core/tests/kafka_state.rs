//! Rules 3 and 4 on a real Kafka: read_committed reads in offset order up to
//! the last stable offset, polling, and partition pinning.
//!
//! Needs a real cluster: `KRABKA_BOOTSTRAP`, or `ci/kafka.sh start 1` is run.
#![cfg(feature = "kafka")]

mod support;

use std::time::{Duration, Instant};

use krabka_coordination::transport::kafka::{ensure_state_topic, KafkaConfig, KafkaTransport};
use krabka_coordination::transport::{
    Backlog, Coordinator, LeaseWriter, ReadBatch, Registrar, StateReader,
};
use krabka_coordination::{role_partition, Record, RoleState};
use rdkafka::producer::{FutureProducer, FutureRecord};
use support::*;

/// How long one write of an epoch may take in these tests.
const WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

const LEASE: Duration = Duration::from_secs(10);

/// A role other than `role` with the same partition.
fn neighbour_of(role: &str, partitions: i32) -> String {
    let p = role_partition(role, partitions).unwrap();
    loop {
        let other = unique("neighbour");
        if role_partition(&other, partitions).unwrap() == p {
            return other;
        }
    }
}

/// A transport on a fresh state topic of its own with `partitions` partitions.
async fn private_transport(member: &str, partitions: i32) -> (KafkaTransport, KafkaConfig) {
    init_tracing();
    let cfg = config(&bootstrap()).with_state_topic(unique("krabka-test-state"));
    let report = ensure_state_topic(&cfg, partitions, 1, 1)
        .await
        .expect("creating a private state topic");
    assert!(report.created);
    (KafkaTransport::new(cfg.clone(), Some(member)).unwrap(), cfg)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registrations_come_back_in_append_order_below_the_stable_offset() {
    let t = transport("order").await;
    let role = unique("order");
    let other = neighbour_of(&role, STATE_PARTITIONS);
    let p = partition_of(&role);

    // Interleave registrations of two roles of one partition.
    let mut mine = Vec::new();
    let mut theirs = Vec::new();
    for i in 0..5 {
        let m = format!("m{i}");
        let off = t
            .append(state_record(p, reg_key(&role, &m), Some(reg_value(&m, i))))
            .await
            .unwrap();
        mine.push((m, off));
        let o = format!("o{i}");
        let off = t
            .append(state_record(p, reg_key(&other, &o), Some(reg_value(&o, i))))
            .await
            .unwrap();
        theirs.push((o, off));
    }
    let offsets: Vec<i64> = mine.iter().map(|(_, o)| *o).collect();
    assert!(
        offsets.windows(2).all(|w| w[0] < w[1]),
        "offsets grow in append order: {offsets:?}"
    );

    let records = t.read_partition(p).await.unwrap();
    assert!(
        records.windows(2).all(|w| w[0].offset < w[1].offset),
        "records come in offset order"
    );
    let first = mine[0].1;
    let tail: Vec<&Record> = records.iter().filter(|r| r.offset >= first).collect();
    let keys: Vec<Vec<u8>> = tail.iter().map(|r| r.key.clone()).collect();
    let mut expected = Vec::new();
    for i in 0..5 {
        expected.push(reg_key(&role, &mine[i].0));
        expected.push(reg_key(&other, &theirs[i].0));
    }
    // Other tests may write to the shared partition meanwhile: keep ours.
    let ours: Vec<Vec<u8>> = keys.into_iter().filter(|k| expected.contains(k)).collect();
    assert_eq!(
        ours, expected,
        "both roles' records come back, in append order"
    );

    let state = RoleState::build(&role, records.iter()).expect("the role's state");
    let roster: Vec<(String, i64)> = state
        .roster()
        .map(|e| (e.member.clone(), e.offset))
        .collect();
    assert_eq!(
        roster, mine,
        "the roster is the append order, other roles ignored"
    );
    let state = RoleState::build(&other, records.iter()).unwrap();
    assert_eq!(state.roster_len(), 5);

    // An open transaction in the partition holds the stable offset back: a
    // read returns at once, without the open record and without anything
    // appended after it.
    let holder_role = neighbour_of(&role, STATE_PARTITIONS);
    let holder = transport("order-holder").await;
    let held = holder.mint_epoch(&holder_role, LEASE).await.unwrap();
    let token = held.token();
    let open = lease_value("h", token, 1);
    held.write_lease_uncommitted(lease_record(&holder_role, Some(open.clone())))
        .await
        .unwrap();
    let late = reg_value("late", 9);
    let late_off = t
        .append(state_record(p, reg_key(&role, "late"), Some(late.clone())))
        .await
        .unwrap();
    let start = Instant::now();
    let records = t.read_partition(p).await.unwrap();
    let took = start.elapsed();
    assert!(
        took < Duration::from_secs(3),
        "read_partition must not wait for the open transaction ({took:?})"
    );
    assert!(
        !has_value(&records, &open),
        "an open transaction's record is not read"
    );
    assert!(
        !has_record(&records, &reg_key(&role, "late"), &late),
        "a record above the last stable offset is not read yet"
    );
    assert!(records.iter().all(|r| r.offset < late_off));
    assert!(
        records.iter().any(|r| r.offset == mine[4].1),
        "everything below the stable offset is read"
    );

    // The commit releases both, in offset order.
    held.write_lease(
        lease_record(&holder_role, Some(lease_value("h", token, 2))),
        WITHIN,
    )
    .await
    .unwrap();
    let records = read_until(&t, p, Duration::from_secs(10), |r| {
        has_record(r, &reg_key(&role, "late"), &late)
    })
    .await;
    let open_at = records
        .iter()
        .position(|r| r.value.as_deref() == Some(open.as_slice()))
        .expect("committed now");
    let late_at = records
        .iter()
        .position(|r| r.offset == late_off)
        .expect("visible now");
    assert!(open_at < late_at);
    let state = RoleState::build(&role, records.iter()).unwrap();
    assert_eq!(
        state.roster().last().map(|e| e.member.as_str()),
        Some("late")
    );
    assert_eq!(
        state.lease(),
        None,
        "another role's lease is not this role's"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn null_and_empty_values_read_back_as_written() {
    let (t, _) = private_transport("values", 1).await;
    let k = reg_key("r", "m");
    let a = t.append(state_record(0, k.clone(), None)).await.unwrap();
    let b = t
        .append(state_record(0, k.clone(), Some(Vec::new())))
        .await
        .unwrap();
    let c = t
        .append(state_record(0, k.clone(), Some(vec![1, 2, 3])))
        .await
        .unwrap();
    let records = t.read_partition(0).await.unwrap();
    assert_eq!(
        records,
        vec![
            Record {
                offset: a,
                key: k.clone(),
                value: None
            },
            Record {
                offset: b,
                key: k.clone(),
                value: Some(Vec::new())
            },
            Record {
                offset: c,
                key: k.clone(),
                value: Some(vec![1, 2, 3])
            },
        ]
    );
    // A poll past the end of the log is refused (no silent jump), and the
    // reader recovers.
    let e = t
        .poll_partition(0, 1_000_000, Duration::from_secs(10))
        .await
        .unwrap_err();
    assert!(
        matches!(e, krabka_coordination::Error::InvalidArgument(_)),
        "{e:?}"
    );
    assert!(e.to_string().contains("1000000"), "{e}");
    let again = t
        .poll_partition(0, b, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(again.records.first().map(|r| r.offset), Some(b));
    // An empty partition reads as nothing, and a missing one is refused.
    let (empty, _) = private_transport("values-empty", 2).await;
    assert_eq!(empty.read_partition(1).await.unwrap(), Vec::new());
    let e = t.read_partition(5).await.unwrap_err();
    assert!(e.to_string().contains('5'), "{e}");
    let e = t.append(state_record(5, k, None)).await.unwrap_err();
    assert!(e.to_string().contains('5'), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poll_wakes_promptly_on_commits_and_continues_where_it_ended() {
    let (reader, cfg) = private_transport("poller", 1).await;
    let reader = std::sync::Arc::new(reader);
    let writer = KafkaTransport::new(cfg.clone(), Some("poll-writer")).unwrap();
    let k = reg_key("r", "m");

    // Nothing there: poll waits for max_wait and returns nothing.
    let start = Instant::now();
    let batch = reader
        .poll_partition(0, 0, Duration::from_millis(300))
        .await
        .unwrap();
    let waited = start.elapsed();
    assert!(batch.records.is_empty());
    assert_eq!(batch.next_offset, 0);
    assert!(
        waited >= Duration::from_millis(290),
        "an empty poll waits for max_wait ({waited:?})"
    );
    assert!(waited < Duration::from_secs(3), "{waited:?}");

    // Appends and lease commits wake a waiting poll promptly.
    let role = "poll-role";
    let epoch = writer.mint_epoch(role, LEASE).await.unwrap();
    let token = epoch.token();
    let mut next = batch.next_offset;
    let seeks_before = reader.state_seeks();
    let mut append_wake = Vec::new();
    let mut commit_wake = Vec::new();
    let mut after_ack = Vec::new();
    for i in 0..20i64 {
        let poll = {
            let r = std::sync::Arc::clone(&reader);
            let from = next;
            tokio::spawn(async move {
                (
                    r.poll_partition(0, from, Duration::from_secs(5)).await,
                    Instant::now(),
                )
            })
        };
        // Let the poll start waiting (it returns what arrived in any case).
        tokio::time::sleep(Duration::from_millis(30)).await;
        let sent = Instant::now();
        let value = i.to_be_bytes().to_vec();
        if i % 2 == 0 {
            writer
                .append(state_record(0, k.clone(), Some(value.clone())))
                .await
                .unwrap();
        } else {
            epoch
                .write_lease(
                    state_record(0, lease_key(role), Some(lease_value("w", token, i))),
                    WITHIN,
                )
                .await
                .unwrap();
        }
        let acked = Instant::now();
        let (batch, woke) = poll.await.unwrap();
        let batch = batch.unwrap();
        let latency = woke.saturating_duration_since(sent);
        // Positive when the poll woke after the writer had its ack.
        after_ack.push(woke.saturating_duration_since(acked));
        if i % 2 == 0 {
            append_wake.push(latency);
            assert_eq!(batch.records.len(), 1, "{batch:?}");
            assert_eq!(batch.records[0].value.as_deref(), Some(value.as_slice()));
        } else {
            commit_wake.push(latency);
            assert_eq!(batch.records.len(), 1, "{batch:?}");
            assert_eq!(
                batch.records[0].value.as_deref(),
                Some(lease_value("w", token, i).as_slice())
            );
        }
        assert!(batch.next_offset > next);
        // Past the last record, and past its commit marker once seen.
        let last = batch.records.last().unwrap().offset;
        assert!(
            batch.next_offset == last + 1 || batch.next_offset == last + 2,
            "{batch:?}"
        );
        next = batch.next_offset;
    }
    append_wake.sort();
    commit_wake.sort();
    after_ack.sort();
    println!(
        "poll wake-up after an append (from the send): median {:?}, max {:?}; after a lease commit (from \
         write_lease's start): median {:?}, max {:?}; after the writer's ack: median {:?}, max {:?} (fetch wait {:?})",
        append_wake[append_wake.len() / 2],
        append_wake.last().unwrap(),
        commit_wake[commit_wake.len() / 2],
        commit_wake.last().unwrap(),
        after_ack[after_ack.len() / 2],
        after_ack.last().unwrap(),
        cfg.fetch_wait()
    );
    assert!(*append_wake.last().unwrap() < Duration::from_secs(1));
    assert!(*commit_wake.last().unwrap() < Duration::from_secs(1));

    assert_eq!(
        reader.state_seeks(),
        seeks_before,
        "polls that continue from next_offset never reposition the consumer"
    );

    // Polling from an earlier offset re-reads from there, in order.
    let all = reader
        .poll_partition(0, 0, Duration::from_secs(5))
        .await
        .unwrap();
    assert!(!all.records.is_empty());
    assert_eq!(all.records[0].offset, 0);
    assert_eq!(
        reader.state_seeks(),
        seeks_before + 1,
        "a jump back seeks once"
    );
    assert!(all.records.windows(2).all(|w| w[0].offset < w[1].offset));
    let full = reader.read_partition(0).await.unwrap();
    assert_eq!(full.len(), 20);
    assert!(full.iter().all(|r| r.offset < next));

    // Aborted records never come through poll either.
    let doomed = lease_value("w", token, 99);
    epoch
        .write_lease_uncommitted(state_record(0, lease_key(role), Some(doomed.clone())))
        .await
        .unwrap();
    let other = KafkaTransport::new(cfg.clone(), Some("poll-usurper")).unwrap();
    // Aborts the open transaction.
    let _usurper = other.acquire_epoch(role, LEASE).await.unwrap();
    let marker = b"after-abort".to_vec();
    writer
        .append(state_record(0, k.clone(), Some(marker.clone())))
        .await
        .unwrap();
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !has_value(&seen, &marker) && Instant::now() < deadline {
        let b = reader
            .poll_partition(0, next, Duration::from_secs(1))
            .await
            .unwrap();
        next = b.next_offset;
        seen.extend(b.records);
    }
    assert!(has_value(&seen, &marker));
    assert!(
        !has_value(&seen, &doomed),
        "an aborted record must not come through poll"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_of_a_role_land_on_its_partition() {
    for n in [1, 3, 16] {
        let (t, cfg) = private_transport(&format!("pin-{n}"), n).await;
        let mut roles = Vec::new();
        for _ in 0..6 {
            let role = unique("pin");
            let p = role_partition(&role, n).unwrap();
            let off = t
                .append(state_record(
                    p,
                    reg_key(&role, "m"),
                    Some(reg_value("m", 1)),
                ))
                .await
                .unwrap();
            let epoch = t.acquire_epoch(&role, LEASE).await.unwrap();
            let token = epoch.token();
            epoch
                .write_lease(
                    state_record(p, lease_key(&role), Some(lease_value("m", token, 1))),
                    WITHIN,
                )
                .await
                .unwrap();
            roles.push((role, p, off, token));
        }
        let mut by_partition = Vec::new();
        for q in 0..n {
            by_partition.push(t.read_partition(q).await.unwrap());
        }
        for (role, p, off, token) in &roles {
            for (q, records) in by_partition.iter().enumerate() {
                let q = q as i32;
                let has_reg = records.iter().any(|r| r.key == reg_key(role, "m"));
                let has_lease = has_value(records, &lease_value("m", *token, 1))
                    && records.iter().any(|r| r.key == lease_key(role));
                assert_eq!(
                    has_reg,
                    q == *p,
                    "registration of {role} in partition {q} of {n} (expected {p})"
                );
                assert_eq!(
                    has_lease,
                    q == *p,
                    "lease of {role} in partition {q} of {n} (expected {p})"
                );
            }
            assert!(by_partition[*p as usize].iter().any(|r| r.offset == *off));
            let state = RoleState::build(role, by_partition[*p as usize].iter()).unwrap();
            assert_eq!(state.roster_len(), 1);
            assert_eq!(state.lease().map(|l| l.token), Some(*token));
        }
        let _ = cfg;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafkas_keyed_partitioning_agrees_with_role_partition() {
    init_tracing();
    let cfg = config(&bootstrap()).with_state_topic(unique("krabka-test-keyed"));
    ensure_state_topic(&cfg, 16, 1, 1).await.unwrap();
    let producer: FutureProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("partitioner", "murmur2_random")
        .set("linger.ms", "5")
        .create()
        .unwrap();
    let mut roles: Vec<String> = (0..500)
        .map(|i| format!("{}-{i}", unique("keyed")))
        .collect();
    // Short, long and non-ASCII names too.
    roles.extend(
        [
            "a",
            "ab",
            "abc",
            "abcd",
            "rôle-ü",
            "角色",
            "x".repeat(300).as_str(),
        ]
        .map(String::from),
    );
    let mut pending = Vec::new();
    for role in &roles {
        let record = FutureRecord::<str, [u8]>::to(cfg.state_topic())
            .key(role.as_str())
            .payload(b"v");
        let delivery = producer
            .send_result(record)
            .map_err(|(e, _)| e)
            .expect("enqueue");
        pending.push((role.clone(), delivery));
    }
    let mut checked = 0;
    for (role, delivery) in pending {
        let d = delivery
            .await
            .expect("delivery report")
            .map_err(|(e, _)| e)
            .expect("delivered");
        assert_eq!(
            d.partition,
            role_partition(&role, 16).unwrap(),
            "role {role:?}"
        );
        checked += 1;
    }
    assert!(checked >= 500);
}

/// A neighbour role's transaction left open on the shared partition hides
/// every later record, the leader's renewals included. `held_back` says so
/// (the high watermark is above the last stable offset, whatever the
/// position asked about), and a standby of the other role does not take
/// over while it lasts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_neighbours_open_transaction_holds_the_partition_back_and_fails_nobody_over() {
    let mut p = SharedPartition::new("held-back").await;
    assert_ne!(
        p.probe.held_back(0, 0).await.unwrap(),
        Backlog::HeldBack,
        "nothing is open yet"
    );

    // The neighbour stalls mid-transaction for longer than the lease.
    let epoch = stall_neighbour(&p.cfg, Duration::from_secs(60)).await;
    assert_eq!(
        p.probe.held_back(0, 0).await.unwrap(),
        Backlog::HeldBack,
        "the open transaction holds it back"
    );
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert!(!p.standby.is_finished(), "the standby did not take over");
    assert!(p.leader.is_held(), "the leader renewed all along");
    let names = p.names();
    assert!(names.contains(&"held_back"), "{names:?}");
    assert!(!names.contains(&"challenging"), "{names:?}");

    // The stall ends (the epoch is dropped, which aborts it): the renewals
    // show, and still nobody takes over.
    drop(epoch);
    let deadline = Instant::now() + Duration::from_secs(20);
    while p.probe.held_back(0, 0).await.unwrap() == Backlog::HeldBack {
        assert!(
            Instant::now() < deadline,
            "the aborted transaction should end the stall"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(!p.standby.is_finished());
    assert!(p.leader.is_held());
    assert_eq!(
        p.client.describe_leadership(&p.role).await.unwrap().token,
        p.leader.token()
    );
    p.standby.abort();
    p.leader.resign().await.unwrap();
}

/// A one-partition state topic of its own (every role shares it), the
/// leader `a` of a new role (lease 3 s, renewed every second) and its
/// standby `b`, already waiting, whose events [`SharedPartition::names`]
/// reads.
struct SharedPartition {
    cfg: KafkaConfig,
    client: krabka_coordination::client::Client,
    role: String,
    lease: Duration,
    leader: krabka_coordination::leadership::Leadership,
    standby: tokio::task::JoinHandle<
        krabka_coordination::Result<krabka_coordination::leadership::Leadership>,
    >,
    events: krabka_coordination::events::EventReceiver,
    probe: KafkaTransport,
}

impl SharedPartition {
    async fn new(prefix: &str) -> SharedPartition {
        use krabka_coordination::client::Client;
        init_tracing();
        let cfg = config(&bootstrap()).with_state_topic(unique(&format!("{prefix}-state")));
        ensure_state_topic(&cfg, 1, 1, 1).await.unwrap();
        let client = || {
            Client::new(cfg.clone())
                .unwrap()
                .with_partitions(1)
                .unwrap()
        };
        let lease = Duration::from_secs(3);
        let options = client()
            .leadership_options()
            .with_lease_duration(lease)
            .with_renew_interval(Duration::from_secs(1))
            .with_challenge_stagger(Duration::from_secs(1));
        let role = unique(&format!("{prefix}-role"));
        let leader = client().acquire(&role, "a", options.clone()).await.unwrap();
        let (tx, mut events) = krabka_coordination::events::channel();
        let standby = tokio::spawn({
            let (role, options, c) = (role.clone(), options.clone().with_events(tx), client());
            async move { c.acquire(&role, "b", options).await }
        });
        let mut names = Vec::new();
        let waiting = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(e) = events.recv().await {
                names.push(e.kind.name());
                if e.kind.name() == "waiting" {
                    return;
                }
            }
        })
        .await;
        assert!(
            waiting.is_ok(),
            "the standby waits behind the leader: {names:?}"
        );
        let probe = KafkaTransport::new(cfg.clone(), Some(&format!("{prefix}-probe"))).unwrap();
        SharedPartition {
            client: client(),
            cfg,
            role,
            lease,
            leader,
            standby,
            events,
            probe,
        }
    }

    /// The names of the standby's events since the last call.
    fn names(&mut self) -> Vec<&'static str> {
        let mut names = Vec::new();
        while let Ok(e) = self.events.try_recv() {
            names.push(e.kind.name());
        }
        names
    }
}

/// A neighbour role's member killed between its Produce and its EndTxn:
/// its transaction (timeout `timeout`) open on partition 0 of `cfg`'s
/// state topic. Dropping the epoch aborts it.
async fn stall_neighbour(
    cfg: &KafkaConfig,
    timeout: Duration,
) -> krabka_coordination::transport::kafka::KafkaEpoch {
    let stall = KafkaTransport::new(cfg.clone(), Some("neighbour-stall")).unwrap();
    let neighbour = unique("neighbour");
    let epoch = stall.mint_epoch(&neighbour, timeout).await.unwrap();
    epoch
        .write_lease_uncommitted(state_record(
            0,
            lease_key(&neighbour),
            Some(b"open".to_vec()),
        ))
        .await
        .unwrap();
    epoch
}

/// On Kafka's default broker settings: a neighbour
/// role's member killed between its Produce and its EndTxn leaves its
/// transaction open for its whole lease (120 s here) plus the broker's
/// clean-up interval, holding the shared partition's last stable offset
/// back. A role on the same partition still fails over within its own
/// lease: its standby reads past the open transaction (read_uncommitted,
/// each record decided by the markers) and takes over at the dead
/// leader's deadline, the neighbour's transaction still open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_neighbours_frozen_transaction_does_not_keep_a_dead_leaders_role_leaderless() {
    let mut p = SharedPartition::new("frozen-neighbour").await;
    let lease = p.lease;
    // The neighbour's member dies mid-transaction (its epoch is kept and
    // never ends the transaction: the broker aborts it only after 120 s).
    let frozen = stall_neighbour(&p.cfg, Duration::from_secs(120)).await;
    assert_eq!(p.probe.held_back(0, 0).await.unwrap(), Backlog::HeldBack);

    // Two leases with the transaction open: the standby sees the leader's
    // renewals past it and does not take over.
    tokio::time::sleep(2 * lease).await;
    assert!(
        !p.standby.is_finished(),
        "the standby did not depose a live leader"
    );
    assert!(p.leader.is_held(), "the leader renewed all along");
    let names = p.names();
    assert!(names.contains(&"held_back"), "{names:?}");
    assert!(!names.contains(&"challenging"), "{names:?}");

    // The leader dies (its renewals stop, nothing is resigned).
    let old = p.leader.token();
    let deadline = p.leader.lease().deadline;
    let SharedPartition {
        leader,
        standby,
        probe,
        mut events,
        ..
    } = p;
    drop(leader);
    let died = Instant::now();
    let won = tokio::time::timeout(lease + Duration::from_secs(10), standby)
        .await
        .expect("the standby takes over within its own lease plus a bounded delay")
        .unwrap()
        .unwrap();
    let took = died.elapsed();
    let after_deadline = {
        use krabka_coordination::clock::Clock;
        krabka_coordination::clock::SystemClock.now_millis() - deadline
    };
    println!("take-over {took:?} after the leader died, {after_deadline} ms after its deadline, beside a neighbour's open transaction");
    assert!(won.token() > old, "{old} -> {}", won.token());
    assert!(
        took < lease + Duration::from_secs(3),
        "within the lease ({lease:?}) and a read: {took:?}"
    );
    assert_eq!(
        probe.held_back(0, 0).await.unwrap(),
        Backlog::HeldBack,
        "the neighbour's transaction is still open"
    );
    let mut names = Vec::new();
    while let Ok(e) = events.try_recv() {
        names.push(e.kind.name());
    }
    assert!(names.contains(&"elected"), "{names:?}");
    won.resign().await.unwrap();
    drop(frozen);
}

/// Polls `partition` from `from` until a poll brings nothing new (no
/// record, the position unchanged): the reader then stands at the end of
/// what is decided. Returns that position and the records read.
async fn poll_to_end(t: &KafkaTransport, partition: i32, mut from: i64) -> (i64, Vec<Record>) {
    let mut records = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(Instant::now() < deadline, "the reads do not settle");
        let ReadBatch {
            records: new,
            next_offset,
        } = t
            .poll_partition(partition, from, Duration::from_millis(500))
            .await
            .unwrap();
        let settled = new.is_empty() && next_offset == from;
        records.extend(new);
        from = next_offset;
        if settled {
            return (from, records);
        }
    }
}

/// The look past an open transaction on a real broker: records of
/// Kafka's own making (our transactional batches and their markers,
/// librdkafka's idempotent registration batches) read uncommitted and
/// sorted by their markers: committed after the open entry, the open one
/// apart, an aborted one in neither list; nothing for a reader below the
/// last stable offset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_look_past_an_open_transaction_sorts_records_by_their_markers() {
    let (t, cfg) = private_transport("past-stable", 1).await;
    let role = unique("past-stable");
    let epoch = t.mint_epoch(&role, LEASE).await.unwrap();
    let lease = |marker| {
        state_record(
            0,
            lease_key(&role),
            Some(lease_value("a", epoch.token(), marker)),
        )
    };
    epoch.write_lease(lease(1), WITHIN).await.unwrap();
    // The neighbour's transaction, left open.
    let other = KafkaTransport::new(cfg.clone(), Some("past-stable-other")).unwrap();
    let neighbour = neighbour_of(&role, 1);
    let frozen = other
        .mint_epoch(&neighbour, Duration::from_secs(60))
        .await
        .unwrap();
    frozen
        .write_lease_uncommitted(state_record(
            0,
            lease_key(&neighbour),
            Some(b"open".to_vec()),
        ))
        .await
        .unwrap();
    let (stable, _) = poll_to_end(&t, 0, 0).await;
    // Past it: a renewal, a registration, and a transaction that aborts.
    epoch.write_lease(lease(2), WITHIN).await.unwrap();
    t.append(state_record(
        0,
        reg_key(&role, "b"),
        Some(reg_value("b", 5)),
    ))
    .await
    .unwrap();
    let third = unique("past-stable-aborted");
    let aborting = other
        .mint_epoch(&third, Duration::from_secs(60))
        .await
        .unwrap();
    aborting
        .write_lease_uncommitted(state_record(
            0,
            lease_key(&third),
            Some(b"aborted".to_vec()),
        ))
        .await
        .unwrap();
    drop(aborting);
    let deadline = Instant::now() + Duration::from_secs(20);
    let past = loop {
        let past = t
            .read_past_stable(0, stable)
            .await
            .unwrap()
            .expect("held back");
        if !has_value(&past.open, b"aborted") {
            break past;
        }
        assert!(
            Instant::now() < deadline,
            "the abort marker never came: {past:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(!has_value(&past.committed, b"aborted"), "{past:?}");
    assert_eq!(past.open.len(), 1, "{past:?}");
    assert_eq!(past.open[0].value.as_deref(), Some(&b"open"[..]));
    assert!(
        has_value(&past.committed, &lease_value("a", epoch.token(), 2)),
        "{past:?}"
    );
    assert!(has_value(&past.committed, &reg_value("b", 5)), "{past:?}");
    assert!(
        !has_value(&past.committed, &lease_value("a", epoch.token(), 1)),
        "below the position"
    );
    assert!(past.committed.windows(2).all(|w| w[0].offset < w[1].offset));
    assert!(past.end > stable);
    assert_eq!(
        t.read_past_stable(0, 0).await.unwrap(),
        None,
        "below the last stable offset"
    );
    drop(frozen);
}

/// The held-back check is one read of the high watermark against the reader's
/// position (one request, `docs/model.md`). On a real broker: a read_committed
/// reader that read a committed transaction stands past its commit marker, at
/// the high watermark, so the check says caught up; a transaction left open by
/// another producer holds it back; a record appended after the read is unread;
/// an aborted transaction's record and marker are read past.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_held_back_check_compares_the_high_watermark_with_the_readers_position() {
    let (t, cfg) = private_transport("backlog", 1).await;
    let role = unique("backlog-role");
    assert_eq!(t.held_back(0, 0).await.unwrap(), Backlog::CaughtUp);
    let reg = t
        .append(state_record(
            0,
            reg_key(&role, "a"),
            Some(reg_value("a", 1)),
        ))
        .await
        .unwrap();
    assert_eq!(t.held_back(0, reg).await.unwrap(), Backlog::Unread);
    let (pos, _) = poll_to_end(&t, 0, 0).await;
    assert_eq!(pos, reg + 1);
    assert_eq!(t.held_back(0, pos).await.unwrap(), Backlog::CaughtUp);

    // A committed lease: the record and its commit marker.
    let epoch = t.mint_epoch(&role, LEASE).await.unwrap();
    epoch
        .write_lease(
            state_record(0, lease_key(&role), Some(b"lease".to_vec())),
            WITHIN,
        )
        .await
        .unwrap();
    // The poll that brings the record stands past the marker already (a
    // read_committed fetch returns a transaction's records together with
    // their marker): a challenger that just read a lease is caught up.
    let first = t
        .poll_partition(0, pos, Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(first.records.len(), 1, "{first:?}");
    assert_eq!(first.records[0].offset, pos);
    assert_eq!(first.next_offset, pos + 2, "past the lease and its marker");
    let (end, _) = poll_to_end(&t, 0, first.next_offset).await;
    assert_eq!(end, pos + 2);
    assert_eq!(t.held_back(0, end).await.unwrap(), Backlog::CaughtUp);
    assert_eq!(
        t.held_back(0, end - 1).await.unwrap(),
        Backlog::Unread,
        "the marker is part of the log"
    );

    // Another producer leaves a transaction open.
    let other = KafkaTransport::new(cfg.clone(), Some("backlog-stall")).unwrap();
    let neighbour = unique("backlog-neighbour");
    let stalled = other
        .mint_epoch(&neighbour, Duration::from_secs(60))
        .await
        .unwrap();
    stalled
        .write_lease_uncommitted(state_record(
            0,
            lease_key(&neighbour),
            Some(b"open".to_vec()),
        ))
        .await
        .unwrap();
    assert_eq!(t.held_back(0, end).await.unwrap(), Backlog::HeldBack);
    // A committed record behind it is written but not readable.
    let behind = t
        .append(state_record(
            0,
            reg_key(&role, "b"),
            Some(reg_value("b", 2)),
        ))
        .await
        .unwrap();
    assert!(behind > end);
    let (held, records) = poll_to_end(&t, 0, end).await;
    assert!(records.is_empty(), "{records:?}");
    assert_eq!(held, end, "the reader stops at the open transaction");
    assert_eq!(t.held_back(0, held).await.unwrap(), Backlog::HeldBack);

    // Aborted (dropping the epoch aborts it): the reader reads past the
    // aborted record and the abort marker, and reads the record behind.
    drop(stalled);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut pos = held;
    let mut read = Vec::new();
    loop {
        let (p, records) = poll_to_end(&t, 0, pos).await;
        pos = p;
        read.extend(records);
        if t.held_back(0, pos).await.unwrap() == Backlog::CaughtUp {
            break;
        }
        assert!(Instant::now() < deadline, "the abort is not decided");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        read.iter().map(|r| r.offset).collect::<Vec<_>>(),
        [behind],
        "only the committed record"
    );
    assert_eq!(pos, behind + 2, "past the abort marker after the record");

    // A record appended after the read: not caught up until it is read.
    let late = t
        .append(state_record(
            0,
            reg_key(&role, "c"),
            Some(reg_value("c", 3)),
        ))
        .await
        .unwrap();
    assert_eq!(late, pos);
    assert_eq!(t.held_back(0, pos).await.unwrap(), Backlog::Unread);
    let (pos, _) = poll_to_end(&t, 0, pos).await;
    assert_eq!(pos, late + 1);
    assert_eq!(t.held_back(0, pos).await.unwrap(), Backlog::CaughtUp);

    // A transaction aborted with nothing committed behind it: only its
    // record and marker are new. A poll waiting for records returns once
    // the position moved past them, not at the end of its wait.
    let stalled = other
        .mint_epoch(&neighbour, Duration::from_secs(60))
        .await
        .unwrap();
    stalled
        .write_lease_uncommitted(state_record(
            0,
            lease_key(&neighbour),
            Some(b"open again".to_vec()),
        ))
        .await
        .unwrap();
    assert_eq!(t.held_back(0, pos).await.unwrap(), Backlog::HeldBack);
    let started = Instant::now();
    let (batch, ()) = tokio::join!(t.poll_partition(0, pos, Duration::from_secs(30)), async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        drop(stalled);
    });
    let batch = batch.unwrap();
    assert!(batch.records.is_empty(), "{batch:?}");
    assert_eq!(batch.next_offset, pos + 2, "past the record and its marker");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "returned after {:?}",
        started.elapsed()
    );
    assert_eq!(
        t.held_back(0, batch.next_offset).await.unwrap(),
        Backlog::CaughtUp
    );
    drop(epoch);
}

/// A read that follows a commit sees it (a describe right after an acquire
/// must show the new lease). The coordinator acknowledges a commit
/// once it has logged it, before the transaction markers reach the
/// partition; until they do, the last stable offset stays below the
/// committed records. `read_partition` waits a moment for them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_right_after_a_commit_sees_it() {
    let t = transport("read-your-commit").await;
    let role = unique("read-your-commit");
    let partition = partition_of(&role);
    let epoch = t.mint_epoch(&role, LEASE).await.unwrap();
    for n in 1..=40 {
        let value = lease_value("m", epoch.token(), n);
        epoch
            .write_lease(lease_record(&role, Some(value.clone())), WITHIN)
            .await
            .unwrap();
        let records = t.read_partition(partition).await.unwrap();
        assert!(
            has_value(&records, &value),
            "renewal {n} is not in a read that followed its commit"
        );
    }
}

/// What an election reads of a role's state: the roster, the lease, and with
/// no lease the deadline a tombstone cleared.
fn election_view(s: &RoleState) -> impl PartialEq + std::fmt::Debug {
    (
        s.roster().cloned().collect::<Vec<_>>(),
        s.lease().cloned(),
        s.lease().is_none().then(|| s.last_cleared_deadline()),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_state_is_the_compacted_partition_and_reads_only_what_is_new() {
    let (reader, cfg) = private_transport("compacted", 1).await;
    let writer = KafkaTransport::new(cfg.clone(), Some("compact-writer")).unwrap();
    let roles = ["ra", "rb"];
    let epoch = writer.mint_epoch(roles[0], LEASE).await.unwrap();
    let token = epoch.token();
    // Registrations, a re-registration, a tombstone, renewals and a lease
    // tombstone, of two roles, interleaved.
    for round in 0..3i64 {
        for role in roles {
            for m in ["m1", "m2"] {
                writer
                    .append(state_record(0, reg_key(role, m), Some(reg_value(m, round))))
                    .await
                    .unwrap();
            }
        }
        epoch
            .write_lease(
                state_record(
                    0,
                    lease_key(roles[0]),
                    Some(lease_value("m1", token, round)),
                ),
                WITHIN,
            )
            .await
            .unwrap();
    }
    writer
        .append(state_record(0, reg_key(roles[1], "m1"), None))
        .await
        .unwrap();
    epoch
        .write_lease(state_record(0, lease_key(roles[0]), None), WITHIN)
        .await
        .unwrap();

    let check = |what: &str, compact: &ReadBatch, all: &[Record]| {
        assert!(
            compact.records.len() < all.len(),
            "{what}: {} of {} records",
            compact.records.len(),
            all.len()
        );
        assert!(compact.next_offset > all.last().unwrap().offset, "{what}");
        for role in roles {
            let a = RoleState::build(role, all).unwrap();
            let c = RoleState::build(role, &compact.records).unwrap();
            assert_eq!(election_view(&c), election_view(&a), "{what}: role {role}");
        }
    };
    let first = reader.read_state(0).await.unwrap();
    let fresh = KafkaTransport::new(cfg.clone(), Some("compact-fresh")).unwrap();
    let all = fresh.read_partition(0).await.unwrap();
    check("first read", &first, &all);
    let cleared = RoleState::build(roles[0], &first.records).unwrap();
    assert!(cleared.lease().is_none());
    assert_eq!(
        cleared.last_cleared_deadline(),
        Some(2 + LEASE.as_millis() as i64)
    );

    // More records: the next read fetches only them, from where the
    // consumer stands (no seek), and a follower behind reads them from
    // what the reader kept (no seek either).
    writer
        .append(state_record(
            0,
            reg_key(roles[1], "m3"),
            Some(reg_value("m3", 9)),
        ))
        .await
        .unwrap();
    let seeks = reader.state_seeks();
    let second = reader.read_state(0).await.unwrap();
    let all = fresh.read_partition(0).await.unwrap();
    check("second read", &second, &all);
    let behind = reader
        .poll_partition(0, first.next_offset, Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(behind.records, all[all.len() - 1..].to_vec());
    assert_eq!(behind.next_offset, second.next_offset);
    assert_eq!(reader.state_seeks(), seeks, "no seek for what was kept");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn followers_of_one_partition_sharing_a_reader_miss_no_record() {
    // Many roles of one partition acquired at once: each follower reads the
    // partition, registers, and reads on from where it stood, all through
    // the transport's one reader of the partition. Each must find its own
    // registration, whatever the others' reads did to the reader.
    let (t, _cfg) = private_transport("sharing", 1).await;
    let t = std::sync::Arc::new(t);
    let tasks = (0..24).map(|i| {
        let t = std::sync::Arc::clone(&t);
        tokio::spawn(async move {
            let role = format!("share-{i}");
            for round in 0..4i64 {
                let start = t.read_state(0).await.unwrap();
                let mut state = RoleState::build(role.as_str(), &start.records).unwrap();
                let offset = t
                    .append(state_record(
                        0,
                        reg_key(&role, "m"),
                        Some(reg_value("m", round)),
                    ))
                    .await
                    .unwrap();
                let mut next = start.next_offset;
                let until = Instant::now() + Duration::from_secs(10);
                while next <= offset {
                    assert!(
                        Instant::now() < until,
                        "{role}: stuck at {next} below {offset}"
                    );
                    let b = t
                        .poll_partition(0, next, Duration::from_millis(200))
                        .await
                        .unwrap();
                    for r in &b.records {
                        state.apply(r).unwrap();
                    }
                    next = next.max(b.next_offset);
                }
                assert_eq!(
                    state.entry("m").map(|e| e.offset),
                    Some(offset),
                    "{role} round {round}: its registration at {offset} was skipped"
                );
            }
        })
    });
    for task in tasks.collect::<Vec<_>>() {
        task.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_state_reads_a_recreated_topic_from_its_start() {
    // What a reader kept of a partition is of no use once the topic is
    // deleted and made again (its offsets start over): the next read finds
    // the log's end below what it kept and reads the new log from its start.
    // (librdkafka fetches the new topic only well after the seek of the old
    // one fails; the read waits within its operation timeout.)
    let (reader, cfg) = private_transport("recreated", 1).await;
    let writer = KafkaTransport::new(cfg.clone(), Some("recreate-writer")).unwrap();
    for i in 0..6i64 {
        let m = format!("m{i}");
        writer
            .append(state_record(0, reg_key("r", &m), Some(reg_value(&m, i))))
            .await
            .unwrap();
    }
    let before = reader.read_state(0).await.unwrap();
    assert_eq!(before.records.len(), 6);
    drop(writer);

    let a: rdkafka::admin::AdminClient<rdkafka::client::DefaultClientContext> =
        rdkafka::ClientConfig::new()
            .set("bootstrap.servers", bootstrap())
            .create()
            .expect("admin client");
    let r = a
        .delete_topics(&[cfg.state_topic()], &rdkafka::admin::AdminOptions::new())
        .await
        .unwrap();
    assert!(r[0].is_ok(), "{r:?}");
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        match ensure_state_topic(&cfg, 1, 1, 1).await {
            Ok(report) if report.created => break,
            other => {
                assert!(
                    Instant::now() < until,
                    "the topic was not made again: {other:?}"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    tokio::task::spawn_blocking(move || drop(a)).await.unwrap();
    let writer = KafkaTransport::new(cfg.clone(), Some("recreate-writer-2")).unwrap();
    for m in ["x", "y"] {
        writer
            .append(state_record(0, reg_key("r", m), Some(reg_value(m, 1))))
            .await
            .unwrap();
    }
    let until = Instant::now() + Duration::from_secs(30);
    let after = loop {
        match reader.read_state(0).await {
            Ok(b) if b.records.len() == 2 => break b,
            other => {
                assert!(
                    Instant::now() < until,
                    "the new log was not read: {other:?}"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    assert_eq!(after.next_offset, 2);
    let state = RoleState::build("r", &after.records).unwrap();
    let members: Vec<_> = state.roster().map(|e| e.member.as_str()).collect();
    assert_eq!(members, ["x", "y"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_behind_gets_what_was_fetched_meanwhile_in_one_poll() {
    // While a partition stays assigned, librdkafka goes on fetching it, and
    // every fetch that reaches the end queues an end-of-partition event. A
    // follower that stood still (a leader through its term) and then polls
    // must get all that was fetched meanwhile at once, not a fetch's worth
    // per poll.
    let (t, cfg) = private_transport("behind", 1).await;
    let writer = KafkaTransport::new(cfg, Some("behind-writer")).unwrap();
    let (start, _) = poll_to_end(&t, 0, 0).await;
    const N: i64 = 40;
    for i in 0..N {
        writer
            .append(state_record(
                0,
                reg_key(&format!("behind-{i}"), "m"),
                Some(reg_value("m", i)),
            ))
            .await
            .unwrap();
        // Each append lands after the reader's last fetch answered.
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    // Time for librdkafka to fetch the last one too.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let b = t
        .poll_partition(0, start, Duration::from_millis(500))
        .await
        .unwrap();
    assert_eq!(
        b.records.len() as i64,
        N,
        "one poll from {start} returned offsets {:?}",
        b.records.iter().map(|r| r.offset).collect::<Vec<_>>()
    );
    assert_eq!(b.next_offset, start + N);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_reader_keeps_stays_current_without_reads() {
    // A leader's follower stands where its term began; its resign starts
    // from what the transport keeps of the partition. The transport takes
    // in what librdkafka fetched meanwhile, with no read asked for.
    let (_, cfg) = private_transport("kept-topic", 1).await;
    // Built outside a runtime, as the bindings build theirs.
    let t = {
        let cfg = cfg.clone();
        std::thread::spawn(move || KafkaTransport::new(cfg, Some("kept")).unwrap())
            .join()
            .unwrap()
    };
    assert_eq!(t.kept_state(0).await, None, "nothing kept before a read");
    let writer = KafkaTransport::new(cfg, Some("kept-writer")).unwrap();
    writer
        .append(state_record(
            0,
            reg_key("kept-0", "m"),
            Some(reg_value("m", 0)),
        ))
        .await
        .unwrap();
    let first = t.read_state(0).await.unwrap();
    let mut last = 0;
    for i in 1..=10i64 {
        last = writer
            .append(state_record(
                0,
                reg_key(&format!("kept-{i}"), "m"),
                Some(reg_value("m", i)),
            ))
            .await
            .unwrap();
    }
    writer
        .append(state_record(0, reg_key("kept-0", "m"), None))
        .await
        .unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    let kept = loop {
        let kept = t.kept_state(0).await.expect("kept after a read");
        if kept.next_offset > last + 1 || Instant::now() > until {
            break kept;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        kept.next_offset,
        last + 2,
        "kept from {} on",
        first.next_offset
    );
    let state = RoleState::build("kept-5", &kept.records).unwrap();
    assert!(
        state.entry("m").is_some(),
        "a registration written after the read"
    );
    let gone = RoleState::build("kept-0", &kept.records).unwrap();
    assert!(
        gone.entry("m").is_none(),
        "a deregistration written after the read"
    );
}

/// Every batch of partition 0 of `topic` as written (read_uncommitted,
/// transaction markers included), in offset order.
async fn batches_as_written(
    kafka: &krabka_kafka::Client,
    topic: &str,
) -> Vec<krabka_kafka::records::Batch> {
    let mut batches = Vec::new();
    let mut from = 0;
    loop {
        let deadline = tokio::time::Instant::now() + WITHIN;
        let fetched = kafka
            .fetch_uncommitted(topic, 0, from, 1 << 20, deadline)
            .await
            .unwrap();
        let next = fetched.batches.next_offset;
        batches.extend(fetched.batches.batches);
        match next {
            Some(n) if n < fetched.high_watermark => from = n,
            _ => return batches,
        }
    }
}

/// A resign with a standby waiting writes the lease tombstone and the
/// member's deregistration in one transaction of the term's own epoch: one
/// transactional batch of the term's producer id and epoch holds both (the
/// tombstone first), its commit marker follows, no other batch holds the
/// deregistration (the registrar wrote none), and a read_committed read
/// returns both. The standby takes over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resign_with_a_standby_waiting_commits_tombstone_and_deregistration_together() {
    use krabka_kafka::records::Marker;
    let p = SharedPartition::new("one-txn").await;
    let token = p.leader.token();
    p.leader.resign().await.unwrap();
    let b = tokio::time::timeout(Duration::from_secs(30), p.standby)
        .await
        .expect("the standby takes over")
        .unwrap()
        .unwrap();
    assert!(b.token() > token, "{token} -> {}", b.token());

    let kafka = p.probe.kafka_client().kafka().clone();
    let batches = batches_as_written(&kafka, p.cfg.state_topic()).await;
    let (tombstone, deregistration) = (lease_key(&p.role), reg_key(&p.role, "a"));
    let holding = |key: &[u8]| -> Vec<&krabka_kafka::records::Batch> {
        batches
            .iter()
            .filter(|b| {
                b.records
                    .iter()
                    .any(|r| r.key.as_deref() == Some(key) && r.value.is_none())
            })
            .collect()
    };
    let with_tombstone = holding(&tombstone);
    let with_deregistration = holding(&deregistration);
    assert_eq!(with_tombstone.len(), 1, "{batches:#?}");
    assert_eq!(
        with_deregistration.len(),
        1,
        "deregistered once: {batches:#?}"
    );
    let batch = with_tombstone[0];
    assert_eq!(
        batch.base_offset, with_deregistration[0].base_offset,
        "one batch: {batches:#?}"
    );
    assert!(batch.transactional, "{batch:?}");
    assert_eq!(
        (batch.producer_id, batch.producer_epoch),
        (token.producer_id, token.producer_epoch),
        "the term's own epoch: {batch:?}"
    );
    let keys: Vec<_> = batch.records.iter().map(|r| r.key.as_deref()).collect();
    assert_eq!(
        keys,
        [Some(tombstone.as_slice()), Some(deregistration.as_slice())]
    );
    assert!(
        batches.iter().any(|m| m.marker == Some(Marker::Commit)
            && (m.producer_id, m.producer_epoch) == (token.producer_id, token.producer_epoch)
            && m.base_offset > batch.last_offset),
        "committed: {batches:#?}"
    );
    let committed = p.probe.read_partition(0).await.unwrap();
    for key in [&tombstone, &deregistration] {
        assert!(
            committed.iter().any(|r| &r.key == key && r.value.is_none()),
            "read_committed returns {key:?}"
        );
    }
    b.resign().await.unwrap();
}
