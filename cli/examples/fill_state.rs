//! Fills a state topic with many roles for the `krabka roles` benchmark
//! (`cli/bench-roles.sh`, numbers in docs/benchmarks/cli.md).
//!
//! ```sh
//! cargo run --release -p krabka --example fill_state -- \
//!     BOOTSTRAP TOPIC ROLES MEMBERS RENEWALS [PARTITIONS]
//! ```
//!
//! Writes, through the core's registration producer (`Registrar::append`,
//! acks=all) and the real codec, for each of ROLES roles: MEMBERS
//! registrations, then RENEWALS lease records of the first member (the
//! history a topic holds until compaction removes it), each with a deadline
//! an hour away. Up to 2,000 appends are in flight, so the order of records
//! within a role is not the order of writing; the benchmark does not need
//! it. The lease records are written outside transactions, so the topic
//! has no transaction markers: the members' real renewals would add one
//! marker per commit, which the read_committed reader skips. The topic must
//! exist (`krabka topic ensure`).

use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use krabka_coordination::client::Client;
use krabka_coordination::transport::kafka::KafkaConfig;
use krabka_coordination::transport::{StateRecord, Transport};
use krabka_coordination::{
    encode_key, encode_lease, encode_registration, role_partition, FencingToken, Key, Lease,
    Registration,
};

/// Appends in flight at a time.
const IN_FLIGHT: usize = 2_000;

/// The role names of the benchmark (`bench-roles.sh` looks for the first).
fn role(i: usize) -> String {
    format!("payments-eu-west-{i:05}")
}

fn member(role: usize, m: usize) -> String {
    format!("worker-{m}.payments-{role:05}.svc.cluster.local")
}

fn usage() -> ! {
    eprintln!("usage: fill_state BOOTSTRAP TOPIC ROLES MEMBERS RENEWALS [PARTITIONS]");
    std::process::exit(2)
}

fn arg<T: std::str::FromStr>(args: &[String], i: usize) -> T {
    args.get(i)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| usage())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 5 {
        usage();
    }
    let (bootstrap, topic) = (&args[0], &args[1]);
    let roles: usize = arg(&args, 2);
    let members: usize = arg(&args, 3);
    let renewals: usize = arg(&args, 4);
    let partitions: i32 = if args.len() > 5 { arg(&args, 5) } else { 16 };

    // Batches of appends, not one request per record.
    let config = KafkaConfig::new(bootstrap)
        .with_state_topic(topic)
        .set("linger.ms", "20");
    let client = Client::new(config)
        .and_then(|c| c.with_partitions(partitions))
        .unwrap_or_else(|e| {
            eprintln!("fill_state: {e}");
            std::process::exit(4)
        });
    let transport: Arc<dyn Transport> = Arc::clone(client.transport());
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;

    // Registrations first, then the lease records renewal by renewal, as
    // members that join and then renew write them.
    let mut records = Vec::with_capacity(roles * (members + renewals));
    for i in 0..roles {
        let name = role(i);
        let partition = role_partition(&name, partitions).unwrap();
        for m in 0..members {
            let id = member(i, m);
            records.push(StateRecord {
                partition,
                key: encode_key(&Key::registration(&name, &id)).unwrap(),
                value: Some(
                    encode_registration(&Registration {
                        member: id,
                        registered_at: now,
                    })
                    .unwrap(),
                ),
            });
        }
    }
    for r in 0..renewals {
        for i in 0..roles {
            let name = role(i);
            let lease = Lease {
                member: member(i, 0),
                token: FencingToken::new(10_000 + i as i64, 0),
                granted_at: now + r as i64,
                deadline: now + 3_600_000 + r as i64,
            };
            records.push(StateRecord {
                partition: role_partition(&name, partitions).unwrap(),
                key: encode_key(&Key::lease(&name)).unwrap(),
                value: Some(encode_lease(&lease).unwrap()),
            });
        }
    }

    let total = records.len();
    let started = Instant::now();
    let mut pending: tokio::task::JoinSet<krabka_coordination::Result<i64>> =
        tokio::task::JoinSet::new();
    for record in records {
        if pending.len() >= IN_FLIGHT {
            pending
                .join_next()
                .await
                .unwrap()
                .unwrap()
                .unwrap_or_else(fail);
        }
        let t = Arc::clone(&transport);
        pending.spawn(async move { t.append(record).await });
    }
    while let Some(done) = pending.join_next().await {
        done.unwrap().unwrap_or_else(fail);
    }
    eprintln!(
        "fill_state: {total} records ({roles} roles x ({members} registrations + {renewals} leases)) in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

fn fail(e: krabka_coordination::Error) -> i64 {
    eprintln!("fill_state: {e}");
    std::process::exit(4)
}
