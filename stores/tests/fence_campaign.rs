//! A campaign of hand-overs on the core's test kit: each leader of one role
//! writes numbered rows through the fence to a real PostgreSQL
//! (`KRABKA_POSTGRES_URL`, ci/postgres.sh) and to an SQLite file, and is
//! deposed by a resignation, a crash, a pause after its fence (its
//! transaction open across the election of its successor) or a pause before
//! its fence; every deposed leader then writes again with its old token.
//! The kinds of hand-over and the number of rows come from a seeded
//! generator (the seed is printed; `KRABKA_CAMPAIGN_SEED` replays another),
//! and the kit's clock makes the elections deterministic.
//!
//! Afterwards each store holds exactly the writes that were acknowledged,
//! in the order they were acknowledged, their tokens never decrease, and
//! no write of a deposed token lands after its successor's first write.

mod support;

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use krabka_coordination::leadership::{Leadership, LeadershipStatus};
use krabka_coordination::testing::{TestCluster, TestProcess};
use krabka_coordination::{Error, FencingToken, Result};
use krabka_coordination_stores::{postgres, sqlite};
use rusqlite::{params, Connection, TransactionBehavior};
use support::{contend, past_the_lease, won, ROLE};
use tokio::task::JoinHandle;
use tokio_postgres::NoTls;

const ROUNDS: usize = 12;
const SEED: u64 = 0x6b72_6162_6b61_0045;

/// A small deterministic generator (splitmix64): no dependency, the same
/// sequence for a seed on every platform.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n
    }
}

/// How a leader is deposed.
#[derive(Debug, Clone, Copy)]
enum HandOver {
    /// It resigns.
    Resign,
    /// It is killed; the successor waits out the lease.
    Crash,
    /// It stops after its fence, with a row written and not committed, past
    /// its lease; it resumes and commits once its successor tries to write.
    PausedAfterFence,
    /// It stops before its fence, past its lease; it resumes and writes
    /// after its successor's first write.
    PausedBeforeFence,
}

const HAND_OVERS: [HandOver; 4] = [
    HandOver::Resign,
    HandOver::Crash,
    HandOver::PausedAfterFence,
    HandOver::PausedBeforeFence,
];

/// Both stores: a PostgreSQL schema and an SQLite file, each with the fence
/// and a `campaign` table of numbered rows.
struct Stores {
    pg: tokio_postgres::Config,
    lite: PathBuf,
}

impl Stores {
    async fn new(name: &str) -> Stores {
        let url = std::env::var("KRABKA_POSTGRES_URL").expect(
            "KRABKA_POSTGRES_URL is not set: start a server with `ci/postgres.sh start` and \
             export the URL it prints last (ci/test.sh does)",
        );
        let mut pg: tokio_postgres::Config = url.parse().expect("KRABKA_POSTGRES_URL");
        pg_open(&pg)
            .await
            .batch_execute(&format!(
                "DROP SCHEMA IF EXISTS {name} CASCADE; CREATE SCHEMA {name};"
            ))
            .await
            .unwrap();
        pg.options(format!("-c search_path={name}"));
        let db = pg_open(&pg).await;
        postgres::migrate(&db).await.unwrap();
        db.batch_execute(
            "CREATE TABLE campaign (seq bigint PRIMARY KEY, producer_id bigint NOT NULL, \
             epoch smallint NOT NULL, committed bigint); \
             CREATE TABLE commit_order (n bigint NOT NULL); \
             INSERT INTO commit_order VALUES (0);",
        )
        .await
        .unwrap();

        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fenced-stores");
        std::fs::create_dir_all(&dir).unwrap();
        let lite = dir.join(format!("{name}.db"));
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", lite.display()));
        }
        let db = lite_open(&lite);
        sqlite::migrate(&db).unwrap();
        db.execute_batch(
            "CREATE TABLE campaign (id INTEGER PRIMARY KEY, seq INTEGER NOT NULL, \
             producer_id INTEGER NOT NULL, epoch INTEGER NOT NULL)",
        )
        .unwrap();
        Stores { pg, lite }
    }

    /// A leader's own connections to both stores.
    async fn connect(&self) -> Conns {
        Conns {
            pg: pg_open(&self.pg).await,
            lite: lite_open(&self.lite),
        }
    }
}

struct Conns {
    pg: tokio_postgres::Client,
    lite: Connection,
}

async fn pg_open(config: &tokio_postgres::Config) -> tokio_postgres::Client {
    let (client, connection) = config.connect(NoTls).await.expect("connect to PostgreSQL");
    tokio::spawn(connection);
    client
}

fn lite_open(path: &Path) -> Connection {
    let db = Connection::open(path).unwrap();
    db.pragma_update(None, "journal_mode", "WAL").unwrap();
    db.busy_timeout(Duration::from_secs(10)).unwrap();
    db
}

/// The kit never rotates a producer id in this campaign.
fn no_rotation() -> Result<LeadershipStatus> {
    panic!("no producer id rotation in this campaign")
}

const INSERT_PG: &str = "INSERT INTO campaign (seq, producer_id, epoch) VALUES ($1, $2, $3)";
/// A PostgreSQL transaction's last statement before its commit: its row
/// takes the next number of the counter row, whose lock it then holds until
/// it ends, so the numbers follow the order of the commits (row ids would
/// follow the inserts, which a writer that paused before committing made
/// earlier).
const COMMIT_ORDER_PG: &str = "WITH c AS (UPDATE commit_order SET n = n + 1 RETURNING n) \
     UPDATE campaign SET committed = c.n FROM c WHERE seq = $1";
const INSERT_LITE: &str = "INSERT INTO campaign (seq, producer_id, epoch) VALUES (?1, ?2, ?3)";

/// One fenced transaction on PostgreSQL (READ COMMITTED): fence, row
/// `seq`, commit.
async fn pg_write(db: &mut tokio_postgres::Client, token: FencingToken, seq: i64) -> Result<()> {
    let tx = db
        .transaction()
        .await
        .map_err(|e| postgres::error("begin", ROLE, e))?;
    postgres::fence(&tx, ROLE, token, || async { no_rotation() }).await?;
    tx.execute(
        INSERT_PG,
        &[&seq, &token.producer_id, &token.producer_epoch],
    )
    .await
    .map_err(|e| postgres::error("write", ROLE, e))?;
    tx.execute(COMMIT_ORDER_PG, &[&seq])
        .await
        .map_err(|e| postgres::error("commit order", ROLE, e))?;
    tx.commit()
        .await
        .map_err(|e| postgres::error("commit", ROLE, e))
}

/// One fenced transaction on SQLite (BEGIN IMMEDIATE): fence, row `seq`,
/// commit.
fn lite_write(db: &mut Connection, token: FencingToken, seq: i64) -> Result<()> {
    let tx = db
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| sqlite::error("begin", ROLE, e))?;
    sqlite::fence(&tx, ROLE, token, no_rotation)?;
    tx.execute(
        INSERT_LITE,
        params![seq, token.producer_id, token.producer_epoch],
    )
    .map_err(|e| sqlite::error("write", ROLE, e))?;
    tx.commit().map_err(|e| sqlite::error("commit", ROLE, e))
}

/// The campaign's running state: the leader, its standby, and every
/// acknowledged write in acknowledgement order.
struct Campaign {
    cluster: TestCluster,
    stores: Stores,
    rng: Rng,
    processes: usize,
    seq: i64,
    acked: Vec<(i64, FencingToken)>,
    refused: usize,
}

struct Leader {
    process: TestProcess,
    lead: Leadership,
    conns: Conns,
}

impl Campaign {
    fn next_seq(&mut self) -> i64 {
        self.seq += 1;
        self.seq
    }

    /// A new process contending for the role (the standby).
    async fn standby(&mut self) -> (TestProcess, JoinHandle<Result<Leadership>>) {
        self.processes += 1;
        let p = self.cluster.process(&format!("p{}", self.processes));
        let task = contend(&p);
        self.cluster.settle().await;
        (p, task)
    }

    /// `who` writes row `seq` to both stores; both must accept.
    async fn write(&mut self, who: &mut Leader) {
        let (token, seq) = (who.lead.token(), self.next_seq());
        pg_write(&mut who.conns.pg, token, seq).await.unwrap();
        self.acked.push((seq, token));
        lite_write(&mut who.conns.lite, token, seq).unwrap();
    }

    /// The deposed `old` writes with its token after its successor's first
    /// write: both stores refuse it as fenced.
    async fn stale_write(&mut self, old: &mut Leader, successor: FencingToken) {
        let (token, seq) = (old.lead.token(), self.next_seq());
        let pg = pg_write(&mut old.conns.pg, token, seq).await;
        let lite = lite_write(&mut old.conns.lite, token, seq);
        for (store, r) in [("PostgreSQL", pg), ("SQLite", lite)] {
            match r {
                Err(Error::Fenced(m)) => assert!(m.contains(&successor.to_string()), "{m}"),
                other => panic!("{store} must refuse deposed {token} after {successor}: {other:?}"),
            }
        }
        self.refused += 1;
    }

    /// Deposes `old` by `how`; returns the successor, whose first write is
    /// made (and, for a pause after the fence, ordered after `old`'s).
    async fn hand_over(
        &mut self,
        old: &mut Leader,
        how: HandOver,
        standby: (TestProcess, JoinHandle<Result<Leadership>>),
    ) -> Leader {
        let (process, task) = standby;
        match how {
            HandOver::Resign => {
                old.lead.resign().await.unwrap();
                self.cluster.advance(Duration::from_secs(5)).await;
            }
            HandOver::Crash => {
                old.process.crash();
                past_the_lease(&self.cluster).await;
            }
            HandOver::PausedAfterFence => return self.paused_after_fence(old, process, task).await,
            HandOver::PausedBeforeFence => {
                old.process.pause();
                past_the_lease(&self.cluster).await;
            }
        }
        let lead = won(task).await;
        let mut new = Leader {
            conns: self.stores.connect().await,
            process,
            lead,
        };
        self.write(&mut new).await;
        old.process.resume();
        new
    }

    /// `old` passes its fence and writes a row in both stores, then stops
    /// past its lease; the successor is elected and starts its first write
    /// in both stores, which must wait on the fence row; `old` resumes and
    /// commits; the successor's write follows.
    async fn paused_after_fence(
        &mut self,
        old: &mut Leader,
        process: TestProcess,
        task: JoinHandle<Result<Leadership>>,
    ) -> Leader {
        let (token, seq) = (old.lead.token(), self.next_seq());
        let pg_tx = old.conns.pg.transaction().await.unwrap();
        postgres::fence(&pg_tx, ROLE, token, || async { no_rotation() })
            .await
            .unwrap();
        pg_tx
            .execute(
                INSERT_PG,
                &[&seq, &token.producer_id, &token.producer_epoch],
            )
            .await
            .unwrap();
        let lite_tx = old
            .conns
            .lite
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .unwrap();
        sqlite::fence(&lite_tx, ROLE, token, no_rotation).unwrap();
        lite_tx
            .execute(
                INSERT_LITE,
                params![seq, token.producer_id, token.producer_epoch],
            )
            .unwrap();
        old.process.pause();
        past_the_lease(&self.cluster).await;
        let lead = won(task).await;
        let Conns {
            pg: mut new_pg,
            lite: mut new_lite,
        } = self.stores.connect().await;
        let (new_token, new_seq) = (lead.token(), self.next_seq());
        let pg_new = tokio::spawn(async move {
            let r = pg_write(&mut new_pg, new_token, new_seq).await;
            (r, new_pg)
        });
        let (lite_done, lite_passed) = mpsc::channel();
        let lite_new = std::thread::spawn(move || {
            let r = lite_write(&mut new_lite, new_token, new_seq);
            lite_done.send(r).unwrap();
            new_lite
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            !pg_new.is_finished(),
            "PostgreSQL: the successor {new_token} must wait for the paused {token}"
        );
        assert!(
            lite_passed.try_recv().is_err(),
            "SQLite: the successor {new_token} must wait for the paused {token}"
        );
        old.process.resume();
        pg_tx.execute(COMMIT_ORDER_PG, &[&seq]).await.unwrap();
        pg_tx.commit().await.unwrap();
        lite_tx.commit().unwrap();
        self.acked.push((seq, token));
        let (r, pg) = pg_new.await.unwrap();
        r.unwrap();
        lite_passed
            .recv_timeout(Duration::from_secs(10))
            .unwrap()
            .unwrap();
        let lite = lite_new.join().unwrap();
        self.acked.push((new_seq, new_token));
        Leader {
            process,
            lead,
            conns: Conns { pg, lite },
        }
    }
}

/// Fails unless `rows` are exactly the acknowledged writes in order, with
/// tokens that never decrease: no write of a deposed token after its
/// successor's first.
fn check(store: &str, rows: &[(i64, FencingToken)], acked: &[(i64, FencingToken)]) {
    for pair in rows.windows(2) {
        assert!(
            pair[0].1 <= pair[1].1,
            "{store}: row {} of deposed {} landed after row {} of its successor {}",
            pair[1].0,
            pair[1].1,
            pair[0].0,
            pair[0].1
        );
    }
    assert_eq!(rows, acked, "{store}: the rows are the acknowledged writes");
}

async fn pg_rows(stores: &Stores) -> Vec<(i64, FencingToken)> {
    pg_open(&stores.pg)
        .await
        .query(
            "SELECT seq, producer_id, epoch FROM campaign ORDER BY committed",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), FencingToken::new(r.get(1), r.get(2))))
        .collect()
}

/// SQLite's rows by id: its writers hold the database's write lock from
/// BEGIN IMMEDIATE to their commit, so inserts follow the commits.
fn lite_rows(stores: &Stores) -> Vec<(i64, FencingToken)> {
    let db = lite_open(&stores.lite);
    let mut s = db
        .prepare("SELECT seq, producer_id, epoch FROM campaign ORDER BY id")
        .unwrap();
    s.query_map([], |r| {
        Ok((r.get(0)?, FencingToken::new(r.get(1)?, r.get(2)?)))
    })
    .unwrap()
    .map(|r| r.unwrap())
    .collect()
}

#[tokio::test]
async fn a_campaign_of_hand_overs_and_pauses_keeps_both_stores_in_token_order() {
    let seed = std::env::var("KRABKA_CAMPAIGN_SEED")
        .map(|s| s.parse().expect("KRABKA_CAMPAIGN_SEED: a number"))
        .unwrap_or(SEED);
    eprintln!("campaign seed {seed} (KRABKA_CAMPAIGN_SEED replays one)");
    let mut c = Campaign {
        cluster: TestCluster::new(),
        stores: Stores::new("fence_campaign").await,
        rng: Rng(seed),
        processes: 0,
        seq: 0,
        acked: Vec::new(),
        refused: 0,
    };
    let (process, task) = c.standby().await;
    let mut leader = Leader {
        lead: won(task).await,
        conns: c.stores.connect().await,
        process,
    };
    let mut kinds = Vec::new();
    for _ in 0..ROUNDS {
        for _ in 0..=c.rng.below(3) {
            c.write(&mut leader).await;
        }
        let how = HAND_OVERS[c.rng.below(HAND_OVERS.len() as u64) as usize];
        kinds.push(how);
        let standby = c.standby().await;
        let mut new = c.hand_over(&mut leader, how, standby).await;
        assert!(new.lead.token() > leader.lead.token());
        c.stale_write(&mut leader, new.lead.token()).await;
        std::mem::swap(&mut leader, &mut new);
    }
    c.write(&mut leader).await;
    eprintln!("hand-overs: {kinds:?}");
    for how in HAND_OVERS {
        assert!(
            kinds
                .iter()
                .any(|k| std::mem::discriminant(k) == std::mem::discriminant(&how)),
            "the seed should exercise {how:?}: {kinds:?}"
        );
    }
    assert_eq!(c.refused, ROUNDS);
    check("PostgreSQL", &pg_rows(&c.stores).await, &c.acked);
    check("SQLite", &lite_rows(&c.stores), &c.acked);
}
