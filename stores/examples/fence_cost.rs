//! The fence's cost per transaction on PostgreSQL (docs/benchmarks/fenced-stores.md).
//!
//! One leader, one connection, READ COMMITTED. Each transaction writes one
//! row (an upsert on one hot row, or an insert of a new row), either alone
//! ("bare"), after `postgres::fence` (the helper: one upsert of the fence
//! row), or after `SELECT krabka_fence(...)` (the SQL function). The modes
//! take turns transaction by transaction, so the machine's load falls on
//! all of them alike; then each runs as fast as it can (throughput), in
//! short slices taken in turn for the same reason. The token is a fixed minted one of one producer id, so the
//! helper never asks Kafka (the describe after a producer id rotation is
//! not measured: it happens once per rotation).
//!
//!   cargo run --release -p krabka-coordination-stores --example fence_cost -- \
//!       [--url URL] [--samples N] [--seconds S]
//!
//! URL defaults to KRABKA_POSTGRES_URL (`ci/postgres.sh start` prints it).
//! It writes in the schema `krabka_fence_cost`, dropped and made anew.

use std::time::{Duration, Instant};

use krabka_coordination::FencingToken;
use krabka_coordination_stores::postgres;
use tokio_postgres::{Client, NoTls};

const ROLE: &str = "bench";
const TOKEN: FencingToken = FencingToken {
    producer_id: 1_000,
    producer_epoch: 3,
};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Bare,
    Helper,
    Function,
}

const MODES: [Mode; 3] = [Mode::Bare, Mode::Helper, Mode::Function];

/// Throughput is measured in slices of this length, the modes in turn.
const SLICE: Duration = Duration::from_millis(250);

#[derive(Clone, Copy, Debug)]
enum Write {
    /// `INSERT ... ON CONFLICT DO UPDATE` of one hot row.
    HotUpsert,
    /// `INSERT` of a new row.
    Insert,
}

struct Args {
    url: String,
    samples: usize,
    seconds: u64,
}

fn args() -> Args {
    let mut a = Args {
        url: std::env::var("KRABKA_POSTGRES_URL").unwrap_or_default(),
        samples: 5_000,
        seconds: 5,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it
            .next()
            .unwrap_or_else(|| fail(&format!("{flag} needs a value")));
        match flag.as_str() {
            "--url" => a.url = value,
            "--samples" => a.samples = value.parse().unwrap_or_else(|_| fail("--samples N")),
            "--seconds" => a.seconds = value.parse().unwrap_or_else(|_| fail("--seconds S")),
            _ => fail(&format!("unknown argument {flag}")),
        }
    }
    if a.url.is_empty() {
        fail("no server: pass --url or set KRABKA_POSTGRES_URL (ci/postgres.sh start prints it)");
    }
    a
}

fn fail(why: &str) -> ! {
    eprintln!("fence_cost: {why}");
    std::process::exit(2)
}

/// One transaction of `mode` writing `n` with `write`.
async fn transaction(db: &mut Client, mode: Mode, write: Write, n: i64) {
    let tx = db.transaction().await.expect("begin");
    match mode {
        Mode::Bare => {}
        Mode::Helper => postgres::fence(&tx, ROLE, TOKEN, || async {
            unreachable!("one producer id: no rotation to prove")
        })
        .await
        .expect("the fence accepts the bench's token"),
        Mode::Function => {
            tx.execute(
                "SELECT krabka_fence($1, $2, $3)",
                &[&ROLE, &TOKEN.producer_id, &TOKEN.producer_epoch],
            )
            .await
            .expect("krabka_fence()");
        }
    }
    let sql = match write {
        Write::HotUpsert => {
            "INSERT INTO hot (id, n) VALUES (1, $1) ON CONFLICT (id) DO UPDATE SET n = EXCLUDED.n"
        }
        Write::Insert => "INSERT INTO rows (n) VALUES ($1)",
    };
    tx.execute(sql, &[&n]).await.expect("the write");
    tx.commit().await.expect("commit");
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let a = args();
    let mut config: tokio_postgres::Config = a
        .url
        .parse()
        .unwrap_or_else(|e| fail(&format!("bad URL: {e}")));
    let (admin, conn) = config.connect(NoTls).await.expect("connect");
    tokio::spawn(conn);
    admin
        .batch_execute(
            "DROP SCHEMA IF EXISTS krabka_fence_cost CASCADE; CREATE SCHEMA krabka_fence_cost;",
        )
        .await
        .expect("schema");
    config.options("-c search_path=krabka_fence_cost");
    let (mut db, conn) = config.connect(NoTls).await.expect("connect");
    tokio::spawn(conn);
    postgres::migrate(&db).await.expect("migrate");
    db.batch_execute(
        "CREATE TABLE hot (id int PRIMARY KEY, n bigint NOT NULL); \
         CREATE TABLE rows (id bigserial PRIMARY KEY, n bigint NOT NULL);",
    )
    .await
    .expect("tables");
    let version: String = db
        .query_one("SHOW server_version", &[])
        .await
        .unwrap()
        .get(0);
    println!(
        "PostgreSQL {version}; {} samples per mode and write, {} s of throughput each",
        a.samples, a.seconds
    );

    let mut n = 0i64;
    for write in [Write::HotUpsert, Write::Insert] {
        // Warm-up: connections, plans, the fence row.
        for _ in 0..200 {
            for mode in MODES {
                n += 1;
                transaction(&mut db, mode, write, n).await;
            }
        }
        let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(a.samples); MODES.len()];
        for i in 0..a.samples {
            for k in 0..MODES.len() {
                // Rotate which mode goes first, so none always follows another.
                let m = (i + k) % MODES.len();
                n += 1;
                let t = Instant::now();
                transaction(&mut db, MODES[m], write, n).await;
                times[m].push(t.elapsed());
            }
        }
        let mut p50 = [Duration::ZERO; 3];
        let mut p99 = [Duration::ZERO; 3];
        for (m, t) in times.iter_mut().enumerate() {
            t.sort();
            p50[m] = percentile(t, 0.50);
            p99[m] = percentile(t, 0.99);
        }
        println!("\n{write:?}: latency per transaction (interleaved)");
        for (m, mode) in MODES.iter().enumerate() {
            println!(
                "  {:<8} p50 {:.3} ms  p99 {:.3} ms  | added p50 {:+.3} ms ({:.2}x)  p99 {:+.3} ms ({:.2}x)",
                format!("{mode:?}"),
                ms(p50[m]),
                ms(p99[m]),
                ms(p50[m]) - ms(p50[0]),
                ms(p50[m]) / ms(p50[0]),
                ms(p99[m]) - ms(p99[0]),
                ms(p99[m]) / ms(p99[0]),
            );
        }
        println!(
            "{write:?}: throughput, one leader as fast as it can (slices of {SLICE:?} in turn)"
        );
        let (mut counts, mut spent) = ([0u64; 3], [Duration::ZERO; 3]);
        let slices = a.seconds * 1_000 / SLICE.as_millis() as u64;
        for i in 0..slices as usize {
            for k in 0..MODES.len() {
                let m = (i + k) % MODES.len();
                let start = Instant::now();
                while start.elapsed() < SLICE {
                    n += 1;
                    transaction(&mut db, MODES[m], write, n).await;
                    counts[m] += 1;
                }
                spent[m] += start.elapsed();
            }
        }
        let rate = |m: usize| counts[m] as f64 / spent[m].as_secs_f64();
        for (m, mode) in MODES.iter().enumerate() {
            println!(
                "  {:<8} {:.0} transactions/s ({:.2}x bare)",
                format!("{mode:?}"),
                rate(m),
                rate(m) / rate(0)
            );
        }
    }
    admin
        .batch_execute("DROP SCHEMA krabka_fence_cost CASCADE")
        .await
        .expect("drop the schema");
}
