//! The fence on SQLite database files (WAL mode), with elections on the
//! core's test kit: members of one role writing through it, a leader
//! paused between its fence and its commit while its successor is elected,
//! a snapshot taken before a hand-over, and a producer id rotation to a
//! lower id.

mod support;

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use krabka_coordination::leadership::LeadershipStatus;
use krabka_coordination::testing::{TestCluster, TestProcess};
use krabka_coordination::{Error, FencingToken, Result};
use krabka_coordination_stores::sqlite;
use rusqlite::{params, Connection, Transaction, TransactionBehavior};
use support::{leader_and_standby, past_the_lease, won, ROLE};

/// A fresh database file `name` (under the target's temporary directory)
/// with the fence (migrated) and a `writes` table.
fn store(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fenced-stores");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.db"));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    let db = open(&path);
    sqlite::migrate(&db).unwrap();
    sqlite::migrate(&db).unwrap(); // idempotent
    db.execute_batch(
        "CREATE TABLE writes (id INTEGER PRIMARY KEY, writer TEXT NOT NULL, \
         producer_id INTEGER NOT NULL, epoch INTEGER NOT NULL)",
    )
    .unwrap();
    path
}

fn open(path: &Path) -> Connection {
    let db = Connection::open(path).unwrap();
    db.pragma_update(None, "journal_mode", "WAL").unwrap();
    db.busy_timeout(Duration::from_secs(10)).unwrap();
    db
}

/// `p`'s `describe_leadership` as the blocking call the SQLite helper
/// takes: run on another thread, as from a blocking section of an async
/// program.
fn describe(p: &TestProcess) -> impl FnOnce() -> Result<LeadershipStatus> + '_ {
    move || {
        let handle = tokio::runtime::Handle::current();
        std::thread::scope(|s| {
            s.spawn(|| handle.block_on(p.client().describe_leadership(ROLE)))
                .join()
                .unwrap()
        })
    }
}

fn no_rotation() -> Result<LeadershipStatus> {
    panic!("no producer id rotation in this test")
}

fn write(tx: &Transaction<'_>, writer: &str, token: FencingToken, other: &str) -> i64 {
    tx.execute(
        "INSERT INTO writes (writer, producer_id, epoch) VALUES (?1, ?2, ?3)",
        params![writer, token.producer_id, token.producer_epoch],
    )
    .unwrap();
    tx.query_row(
        "SELECT count(*) FROM writes WHERE writer = ?1",
        params![other],
        |r| r.get(0),
    )
    .unwrap()
}

/// One fenced transaction of `p` with `token`: BEGIN IMMEDIATE, fence,
/// write a row, commit. Returns how many rows of `other` it saw.
fn fenced_write(
    db: &mut Connection,
    p: &TestProcess,
    token: FencingToken,
    other: &str,
) -> Result<i64> {
    let tx = db
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| sqlite::error("begin", ROLE, e))?;
    sqlite::fence(&tx, ROLE, token, describe(p))?;
    let seen = write(&tx, p.name(), token, other);
    tx.commit().map_err(|e| sqlite::error("commit", ROLE, e))?;
    Ok(seen)
}

fn writers(db: &Connection) -> Vec<(String, FencingToken)> {
    let mut s = db
        .prepare("SELECT writer, producer_id, epoch FROM writes ORDER BY id")
        .unwrap();
    s.query_map([], |r| {
        Ok((r.get(0)?, FencingToken::new(r.get(1)?, r.get(2)?)))
    })
    .unwrap()
    .map(|r| r.unwrap())
    .collect()
}

fn order(db: &Connection) -> Vec<String> {
    writers(db).into_iter().map(|(w, _)| w).collect()
}

fn assert_fenced<T: std::fmt::Debug>(r: Result<T>, parts: &[&str]) {
    match r {
        Err(Error::Fenced(m)) => {
            for part in parts {
                assert!(m.contains(part), "{m} should name {part}");
            }
        }
        other => panic!("expected Fenced, got {other:?}"),
    }
}

#[tokio::test]
async fn two_members_write_in_token_order_and_the_deposed_one_is_refused() {
    let path = store("two_members");
    let (mut da, mut db) = (open(&path), open(&path));
    let cluster = TestCluster::new();
    let (a, b) = (cluster.process("a"), cluster.process("b"));
    let (lead_a, standby) = leader_and_standby(&cluster, &a, &b).await;
    let (ta, _) = (lead_a.token(), ());
    fenced_write(&mut da, &a, ta, "b").unwrap();
    fenced_write(&mut da, &a, ta, "b").unwrap();
    a.crash();
    past_the_lease(&cluster).await;
    let tb = won(standby).await.token();
    fenced_write(&mut db, &b, tb, "a").unwrap();
    let r = fenced_write(&mut da, &a, ta, "b");
    assert_fenced(r, &["\"billing\"", &ta.to_string(), &tb.to_string()]);
    fenced_write(&mut db, &b, tb, "a").unwrap();
    let expected: Vec<(String, FencingToken)> = [("a", ta), ("a", ta), ("b", tb), ("b", tb)]
        .iter()
        .map(|(w, t)| (w.to_string(), *t))
        .collect();
    assert_eq!(writers(&da), expected);
}

/// The leader passes the fence, then stops before its write and commit;
/// the successor is elected and starts its transaction on another thread.
/// The write lock the fence took orders them: the successor waits, and sees
/// the leader's write once it passes.
#[tokio::test]
async fn a_paused_leader_commits_before_its_successor_writes() {
    let path = store("paused_after_the_fence");
    let mut da = open(&path);
    let cluster = TestCluster::new();
    let (a, b) = (cluster.process("a"), cluster.process("b"));
    let (lead_a, standby) = leader_and_standby(&cluster, &a, &b).await;
    // A deferred transaction: the fence is its first write.
    let tx = da.transaction().unwrap();
    sqlite::fence(&tx, ROLE, lead_a.token(), no_rotation).unwrap();
    a.pause();
    past_the_lease(&cluster).await;
    let tb = won(standby).await.token();
    let (done, passed) = mpsc::channel();
    let successor = std::thread::spawn({
        let path = path.clone();
        move || {
            let mut db = open(&path);
            let tx = db
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .unwrap();
            sqlite::fence(&tx, ROLE, tb, no_rotation).unwrap();
            let seen = write(&tx, "b", tb, "a");
            tx.commit().unwrap();
            done.send(seen).unwrap();
        }
    });
    assert!(
        passed.recv_timeout(Duration::from_millis(300)).is_err(),
        "the successor must wait for the paused leader's transaction"
    );
    a.resume();
    // Its write comes after the pause: only the fence's lock held the
    // successor back.
    write(&tx, "a", lead_a.token(), "b");
    tx.commit().unwrap();
    assert_eq!(passed.recv_timeout(Duration::from_secs(10)), Ok(1));
    successor.join().unwrap();
    assert_eq!(order(&da), ["a", "b"]);
}

/// The leader's deferred transaction reads (a WAL snapshot) before the
/// hand-over and stops before its fence; the successor commits. On resume
/// the fence cannot write from the stale snapshot (SQLITE_BUSY_SNAPSHOT, a
/// transient error); the retry is fenced; the leader's write never commits.
#[tokio::test]
async fn a_snapshot_before_the_hand_over_is_refused() {
    let path = store("paused_before_the_fence");
    let (mut da, mut db) = (open(&path), open(&path));
    let cluster = TestCluster::new();
    let (a, b) = (cluster.process("a"), cluster.process("b"));
    let (lead_a, standby) = leader_and_standby(&cluster, &a, &b).await;
    let tx = da.transaction().unwrap();
    tx.query_row("SELECT count(*) FROM writes", [], |r| r.get::<_, i64>(0))
        .unwrap();
    a.pause();
    past_the_lease(&cluster).await;
    let tb = won(standby).await.token();
    fenced_write(&mut db, &b, tb, "a").unwrap();
    a.resume();
    let first = sqlite::fence(&tx, ROLE, lead_a.token(), describe(&a));
    assert!(first.as_ref().is_err_and(|e| e.is_transient()), "{first:?}");
    drop(tx);
    let retry = fenced_write(&mut da, &a, lead_a.token(), "b");
    assert_fenced(retry, &[&tb.to_string()]);
    assert_eq!(order(&da), ["b"]);
}

/// A rotation to a LOWER producer id: the new leader's token orders below
/// the stored one, yet it is current, so the fence accepts it; the deposed
/// leader's token is refused after it.
#[tokio::test]
async fn a_rotation_to_a_lower_producer_id_is_accepted_when_current() {
    let path = store("rotation");
    let (mut da, mut db) = (open(&path), open(&path));
    let cluster = TestCluster::new();
    cluster
        .memory()
        .set_epoch(ROLE, FencingToken::new(9_000, i16::MAX - 2));
    let (a, b) = (cluster.process("a"), cluster.process("b"));
    let (lead_a, standby) = leader_and_standby(&cluster, &a, &b).await;
    let ta = lead_a.token();
    fenced_write(&mut da, &a, ta, "b").unwrap();
    a.pause(); // stopped, not killed: it asks Kafka again below
    past_the_lease(&cluster).await;
    let tb = won(standby).await.token();
    a.resume();
    assert!(
        tb.producer_id < ta.producer_id,
        "{tb} should rotate below {ta}"
    );
    fenced_write(&mut db, &b, tb, "a").unwrap();
    fenced_write(&mut db, &b, tb, "a").unwrap();
    let r = fenced_write(&mut da, &a, ta, "b");
    assert_fenced(r, &[&ta.to_string(), &tb.to_string()]);
    assert_eq!(order(&da), ["a", "b", "b"]);
}
