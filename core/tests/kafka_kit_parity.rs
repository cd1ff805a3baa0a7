//! The test kit ([`krabka_coordination::testing`]) must not drift from
//! Kafka: one scripted scenario, run through the same code on a real
//! cluster and on the kit, gives the same winners in the same order, the
//! same ranks while waiting, the same milestones of each member's events,
//! tokens that order the same way, and the same guarded writes committed.
//!
//! The scenario: `a` leads; `b`, then `c`, queue behind it; `a` writes and
//! resigns; `b` takes over, writes and resigns; `c` takes over, writes, and
//! then a write of `a`'s old term is refused. Hand-overs by resign keep it
//! to a few seconds on Kafka.
//!
//! Needs a real cluster: `KRABKA_BOOTSTRAP`, or `ci/kafka.sh start 1` is run.
#![cfg(feature = "kafka")]

mod support;

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use krabka_coordination::client::Client;
use krabka_coordination::events::{channel, Event, EventKind};
use krabka_coordination::leadership::Leadership;
use krabka_coordination::testing::TestCluster;
use krabka_coordination::transport::kafka::TopicSpec;
use krabka_coordination::transport::OutRecord;
use krabka_coordination::{Error, ErrorKind, FencingToken};
use support::*;
use tokio::task::JoinHandle;

/// A member's acquire, in a task.
type Acquire = JoinHandle<Result<Leadership, Error>>;

/// What the scenario saw, in a form both backends must agree on.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    /// The members in the order they won.
    winners: Vec<String>,
    /// For each member, the rank of its first and of its last `waiting`
    /// event (what it waited at in between depends on when its polls saw
    /// a resign's tombstone and deregistration, on either backend).
    ranks: Vec<(String, Option<(u32, u32)>)>,
    /// For each member, its milestones in order: `registered`, `elected`,
    /// `resigned`, `deregistered`, `fenced`, `lease_expired`,
    /// `lost_challenge`, `ended`.
    milestones: Vec<(String, Vec<&'static str>)>,
    /// The committed guarded writes, in order, each with its writer's place
    /// in the order of the tokens (0 the oldest).
    writes: Vec<(String, usize)>,
    /// The kind of the error of the old term's write.
    stale_write: ErrorKind,
}

/// A condition the scenario waits for.
type Done = Arc<dyn Fn() -> bool + Send + Sync>;

/// Moves the scenario on until a condition holds: real time on Kafka, the
/// kit's clock on the kit.
type Until = Box<dyn Fn(Done) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

const MILESTONES: &[&str] = &[
    "registered",
    "elected",
    "resigned",
    "deregistered",
    "fenced",
    "lease_expired",
    "lost_challenge",
    "ended",
];

fn record(topic: &str, value: &str) -> OutRecord {
    OutRecord {
        topic: topic.to_owned(),
        partition: Some(0),
        // The data topic of the support module is compacted: keyed.
        key: Some(value.as_bytes().to_vec()),
        value: Some(value.as_bytes().to_vec()),
        headers: vec![],
    }
}

/// Runs the scenario on `clients` (a, b, c), writing to `topic`; `until`
/// moves time on. Returns what both backends must agree on (its `writes`
/// left for the caller to read back) and the winners' tokens.
async fn scenario(
    role: &str,
    clients: [Client; 3],
    topic: &str,
    until: Until,
) -> (Outcome, Vec<FencingToken>) {
    let names = ["a", "b", "c"];
    let events: Arc<Mutex<Vec<(usize, Event)>>> = Arc::default();
    let mut tasks: Vec<Arc<Mutex<Option<Acquire>>>> = Vec::new();
    for (i, client) in clients.iter().enumerate() {
        let (tx, mut rx) = channel();
        let sink = Arc::clone(&events);
        tokio::spawn(async move {
            while let Some(e) = rx.recv().await {
                sink.lock().unwrap().push((i, e));
            }
        });
        let client = client.clone();
        let role = role.to_owned();
        let options = client
            .leadership_options()
            .with_lease_duration(Duration::from_secs(10))
            .with_renew_interval(Duration::from_secs(2))
            .with_challenge_stagger(Duration::from_secs(1))
            .with_events(tx);
        tasks.push(Arc::new(Mutex::new(Some(tokio::spawn(async move {
            client.acquire(&role, names[i], options).await
        })))));
        // Each member registers (and the first wins) before the next starts.
        let sink = Arc::clone(&events);
        let ready = move || {
            sink.lock().unwrap().iter().any(|(m, e)| {
                *m == i
                    && matches!(
                        e.kind,
                        EventKind::Elected { .. } | EventKind::Waiting { .. }
                    )
            })
        };
        until(Arc::new(ready)).await;
    }
    let mut leads = Vec::new();
    for (i, task) in tasks.into_iter().enumerate() {
        let probe = Arc::clone(&task);
        until(Arc::new(move || {
            probe
                .lock()
                .unwrap()
                .as_ref()
                .is_some_and(|t| t.is_finished())
        }))
        .await;
        let acquire = task.lock().unwrap().take().unwrap();
        let lead = acquire.await.unwrap().unwrap();
        lead.write(vec![record(topic, &format!("{}-1", names[i]))])
            .await
            .unwrap_or_else(|e| panic!("{}'s write: {e}", names[i]));
        if i < 2 {
            lead.resign().await.unwrap();
        }
        leads.push(lead);
    }
    let stale_write = leads[0]
        .write(vec![record(topic, "a-late")])
        .await
        .expect_err("a write of a resigned term")
        .kind();
    let tokens: Vec<FencingToken> = leads.iter().map(|l| l.token()).collect();
    leads[2].resign().await.unwrap();
    let sink = Arc::clone(&events);
    until(Arc::new(move || {
        sink.lock()
            .unwrap()
            .iter()
            .any(|(m, e)| *m == 2 && matches!(e.kind, EventKind::Deregistered))
    }))
    .await;

    let events = events.lock().unwrap();
    let winners = events
        .iter()
        .filter(|(_, e)| matches!(e.kind, EventKind::Elected { .. }))
        .map(|(m, _)| names[*m].to_owned())
        .collect();
    let per_member = |pick: &dyn Fn(&Event) -> Option<u32>| -> Vec<Vec<u32>> {
        (0..3)
            .map(|i| {
                let mut out: Vec<u32> = Vec::new();
                for (_, e) in events.iter().filter(|(m, _)| *m == i) {
                    if let Some(v) = pick(e) {
                        if out.last() != Some(&v) {
                            out.push(v);
                        }
                    }
                }
                out
            })
            .collect()
    };
    let ranks = per_member(&|e| match e.kind {
        EventKind::Waiting { rank, .. } => Some(rank as u32),
        _ => None,
    });
    let ranks = names
        .iter()
        .map(|n| n.to_string())
        .zip(ranks.into_iter().map(|r| Some((*r.first()?, *r.last()?))))
        .collect();
    let milestones = (0..3)
        .map(|i| {
            let kinds = events
                .iter()
                .filter(|(m, e)| *m == i && MILESTONES.contains(&e.kind.name()))
                .map(|(_, e)| e.kind.name())
                .collect();
            (names[i].to_owned(), kinds)
        })
        .collect();
    (
        Outcome {
            winners,
            ranks,
            milestones,
            writes: Vec::new(),
            stale_write,
        },
        tokens,
    )
}

/// The place of `token` among `tokens` in their order.
fn place(tokens: &[FencingToken], token: FencingToken) -> usize {
    let mut sorted = tokens.to_vec();
    sorted.sort();
    sorted
        .iter()
        .position(|t| *t == token)
        .expect("a known token")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kit_and_kafka_agree_on_a_scripted_scenario() {
    // On Kafka.
    init_tracing();
    let role = unique("kit-parity");
    let (topic, reader) = data_topic("kit-parity-data").await;
    let mut kafka = Vec::new();
    for _ in 0..3 {
        let client = Client::new(config(&bootstrap())).expect("client");
        client
            .ensure_state_topic(TopicSpec::development())
            .await
            .expect("the shared state topic");
        kafka.push(client);
    }
    let real: Until = Box::new(|done| {
        Box::pin(async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
            while !done() {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "no progress in 60 s"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    });
    let clients: [Client; 3] = kafka.try_into().unwrap();
    let (mut on_kafka, kafka_tokens) = scenario(&role, clients, &topic, real).await;
    let committed = read_until(&reader, 0, Duration::from_secs(20), |r| r.len() >= 3).await;
    on_kafka.writes = committed
        .iter()
        .map(|r| (String::from_utf8(r.value.clone().unwrap()).unwrap(), 0))
        .collect();

    // On the kit, the same role and topic names.
    let cluster = TestCluster::new();
    let processes = ["a", "b", "c"].map(|n| cluster.process(n));
    let clients = processes.each_ref().map(|p| p.client().clone());
    let kit = cluster.clone();
    let driven: Until = Box::new(move |done| {
        let kit = kit.clone();
        Box::pin(async move {
            for _ in 0..600 {
                if done() {
                    return;
                }
                kit.advance(Duration::from_millis(100)).await;
            }
            panic!("no progress in 60 s of the kit's time");
        })
    });
    let (mut on_kit, kit_tokens) = scenario(&role, clients, &topic, driven).await;
    on_kit.writes = cluster
        .guarded_writes()
        .into_iter()
        .map(|w| {
            (
                String::from_utf8(w.value.unwrap()).unwrap(),
                place(&kit_tokens, w.token.unwrap()),
            )
        })
        .collect();
    // Kafka's records carry no token: the kit's writes name theirs, and
    // each must be its own writer's (a-1 by the oldest token, and so on).
    assert_eq!(
        on_kit.writes,
        vec![
            ("a-1".to_owned(), 0),
            ("b-1".to_owned(), 1),
            ("c-1".to_owned(), 2)
        ]
    );
    on_kit.writes = on_kit.writes.iter().map(|(v, _)| (v.clone(), 0)).collect();
    assert_eq!(on_kit, on_kafka);
    // Tokens order the same way: each winner's token above the last.
    for tokens in [&kafka_tokens, &kit_tokens] {
        assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
    }
}
