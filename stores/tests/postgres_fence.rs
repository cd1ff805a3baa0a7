//! The fence on a real PostgreSQL (ci/postgres.sh; KRABKA_POSTGRES_URL),
//! with elections on the core's test kit: members of one role writing
//! through it, a leader paused between its fence and its commit while its
//! successor is elected, a snapshot taken before a hand-over, a producer id
//! rotation to a lower id, and the SQL function for other languages. Each
//! test runs in its own schema.

mod support;

use std::time::Duration;

use krabka_coordination::testing::{TestCluster, TestProcess};
use krabka_coordination::{Error, FencingToken};
use krabka_coordination_stores::postgres;
use support::{leader_and_standby, past_the_lease, won, ROLE};
use tokio_postgres::{Client, IsolationLevel, NoTls};

/// A fresh schema `name` holding the fence (migrated) and a `writes` table;
/// returns a way to open connections to it.
async fn store(name: &str) -> tokio_postgres::Config {
    let url = std::env::var("KRABKA_POSTGRES_URL").expect(
        "KRABKA_POSTGRES_URL is not set: start a server with `ci/postgres.sh start` and export \
         the URL it prints last (ci/test.sh does)",
    );
    let mut config: tokio_postgres::Config = url.parse().expect("KRABKA_POSTGRES_URL");
    let admin = open(&config).await;
    admin
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {name} CASCADE; CREATE SCHEMA {name};"
        ))
        .await
        .unwrap();
    config.options(format!("-c search_path={name}"));
    let db = open(&config).await;
    postgres::migrate(&db).await.unwrap();
    postgres::migrate(&db).await.unwrap(); // idempotent
    db.batch_execute(
        "CREATE TABLE writes (id bigserial PRIMARY KEY, writer text NOT NULL, \
         producer_id bigint NOT NULL, epoch smallint NOT NULL)",
    )
    .await
    .unwrap();
    config
}

async fn open(config: &tokio_postgres::Config) -> Client {
    let (client, connection) = config.connect(NoTls).await.expect("connect to PostgreSQL");
    tokio::spawn(connection);
    client
}

/// One fenced transaction of `p` with `token` at `level`: fence, write a
/// row, commit. Returns how many rows of `other` it saw when it wrote.
async fn fenced_write(
    db: &mut Client,
    level: IsolationLevel,
    p: &TestProcess,
    token: FencingToken,
    other: &str,
) -> Result<i64, Error> {
    let tx = db
        .build_transaction()
        .isolation_level(level)
        .start()
        .await
        .map_err(|e| postgres::error("begin", ROLE, e))?;
    postgres::fence(&tx, ROLE, token, || p.client().describe_leadership(ROLE)).await?;
    let seen = write(&tx, p.name(), token, other).await?;
    tx.commit()
        .await
        .map_err(|e| postgres::error("commit", ROLE, e))?;
    Ok(seen)
}

async fn write(
    tx: &tokio_postgres::Transaction<'_>,
    writer: &str,
    token: FencingToken,
    other: &str,
) -> Result<i64, Error> {
    tx.execute(
        "INSERT INTO writes (writer, producer_id, epoch) VALUES ($1, $2, $3)",
        &[&writer, &token.producer_id, &token.producer_epoch],
    )
    .await
    .map_err(|e| postgres::error("write", ROLE, e))?;
    let row = tx
        .query_one("SELECT count(*) FROM writes WHERE writer = $1", &[&other])
        .await
        .map_err(|e| postgres::error("read", ROLE, e))?;
    Ok(row.get(0))
}

/// [`fenced_write`] again while it fails transiently (a serialization
/// failure under REPEATABLE READ or SERIALIZABLE), a few times.
async fn fenced_write_retried(
    db: &mut Client,
    level: IsolationLevel,
    p: &TestProcess,
    token: FencingToken,
    other: &str,
) -> Result<i64, Error> {
    let mut tries = 0;
    loop {
        match fenced_write(db, level, p, token, other).await {
            Err(e) if e.is_transient() && tries < 5 => tries += 1,
            r => return r,
        }
    }
}

async fn writers(db: &Client) -> Vec<(String, FencingToken)> {
    db.query(
        "SELECT writer, producer_id, epoch FROM writes ORDER BY id",
        &[],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| (r.get(0), FencingToken::new(r.get(1), r.get(2))))
    .collect()
}

fn assert_fenced(r: Result<i64, Error>, parts: &[&str]) {
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
    let config = store("fence_two_members").await;
    let (mut da, mut db) = (open(&config).await, open(&config).await);
    let cluster = TestCluster::new();
    let (a, b) = (cluster.process("a"), cluster.process("b"));
    let (lead_a, standby) = leader_and_standby(&cluster, &a, &b).await;
    let rc = IsolationLevel::ReadCommitted;
    fenced_write(&mut da, rc, &a, lead_a.token(), "b")
        .await
        .unwrap();
    fenced_write(&mut da, rc, &a, lead_a.token(), "b")
        .await
        .unwrap();
    a.crash();
    past_the_lease(&cluster).await;
    let lead_b = won(standby).await;
    fenced_write(&mut db, rc, &b, lead_b.token(), "a")
        .await
        .unwrap();
    // The deposed leader still holds its token and writes with it.
    let (ta, tb) = (lead_a.token(), lead_b.token());
    let r = fenced_write(&mut da, rc, &a, ta, "b").await;
    assert_fenced(r, &["\"billing\"", &ta.to_string(), &tb.to_string()]);
    fenced_write(&mut db, rc, &b, tb, "a").await.unwrap();
    let rows = writers(&da).await;
    let expected: Vec<(String, FencingToken)> = [("a", ta), ("a", ta), ("b", tb), ("b", tb)]
        .iter()
        .map(|(w, t)| (w.to_string(), *t))
        .collect();
    assert_eq!(rows, expected);
}

/// The leader passes the fence, then stops (SIGSTOP) before its commit; its
/// successor is elected and tries to write; the leader resumes and commits.
/// The fence row's lock orders them: the successor waits, and its
/// transaction sees the leader's write. Under SERIALIZABLE the successor's
/// first try fails with a serialization failure (transient) and its retry
/// passes.
async fn paused_after_the_fence(schema: &str, level: IsolationLevel) {
    let config = store(schema).await;
    let (mut da, mut db) = (open(&config).await, open(&config).await);
    let cluster = TestCluster::new();
    let (a, b) = (cluster.process("a"), cluster.process("b"));
    let (lead_a, standby) = leader_and_standby(&cluster, &a, &b).await;
    let tx = da
        .build_transaction()
        .isolation_level(level)
        .start()
        .await
        .unwrap();
    postgres::fence(&tx, ROLE, lead_a.token(), || {
        a.client().describe_leadership(ROLE)
    })
    .await
    .unwrap();
    write(&tx, "a", lead_a.token(), "b").await.unwrap();
    a.pause();
    past_the_lease(&cluster).await;
    let lead_b = won(standby).await;
    assert!(lead_b.token() > lead_a.token());
    let successor = tokio::spawn({
        let b = b.clone();
        async move { fenced_write_retried(&mut db, level, &b, lead_b.token(), "a").await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !successor.is_finished(),
        "the successor must wait for the paused leader's transaction: {:?}",
        successor.await
    );
    a.resume();
    tx.commit().await.unwrap();
    let seen_a = successor.await.unwrap().unwrap();
    assert_eq!(
        seen_a, 1,
        "the successor's transaction sees the leader's write"
    );
    let order: Vec<String> = writers(&da).await.into_iter().map(|(w, _)| w).collect();
    assert_eq!(order, ["a", "b"]);
}

#[tokio::test]
async fn read_committed_a_paused_leader_commits_before_its_successor_writes() {
    paused_after_the_fence("fence_paused_rc", IsolationLevel::ReadCommitted).await;
}

#[tokio::test]
async fn serializable_a_paused_leader_commits_before_its_successor_writes() {
    paused_after_the_fence("fence_paused_ser", IsolationLevel::Serializable).await;
}

/// The leader's transaction begins (and, at REPEATABLE READ or above, takes
/// its snapshot) before the hand-over; the leader stops before its fence;
/// the successor is elected and commits. On resume the leader's fence
/// refuses it: at once as fenced (READ COMMITTED), or as a serialization
/// failure whose retry is fenced; its write never commits.
async fn paused_before_the_fence(schema: &str, level: IsolationLevel) {
    let config = store(schema).await;
    let (mut da, mut db) = (open(&config).await, open(&config).await);
    let cluster = TestCluster::new();
    let (a, b) = (cluster.process("a"), cluster.process("b"));
    let (lead_a, standby) = leader_and_standby(&cluster, &a, &b).await;
    let tx = da
        .build_transaction()
        .isolation_level(level)
        .start()
        .await
        .unwrap();
    tx.query("SELECT * FROM writes", &[]).await.unwrap(); // the snapshot
    a.pause();
    past_the_lease(&cluster).await;
    let lead_b = won(standby).await;
    let rc = IsolationLevel::ReadCommitted;
    fenced_write(&mut db, rc, &b, lead_b.token(), "a")
        .await
        .unwrap();
    a.resume();
    let first = postgres::fence(&tx, ROLE, lead_a.token(), || {
        a.client().describe_leadership(ROLE)
    })
    .await;
    match level {
        IsolationLevel::ReadCommitted => {
            assert!(matches!(first, Err(Error::Fenced(_))), "{first:?}")
        }
        _ => assert!(
            first.as_ref().is_err_and(|e| e.is_transient()),
            "a serialization failure: {first:?}"
        ),
    }
    drop(tx); // rolls back
    let retry = fenced_write_retried(&mut da, level, &a, lead_a.token(), "b").await;
    assert_fenced(retry, &[&lead_b.token().to_string()]);
    let order: Vec<String> = writers(&da).await.into_iter().map(|(w, _)| w).collect();
    assert_eq!(order, ["b"]);
}

#[tokio::test]
async fn read_committed_a_leader_paused_before_its_fence_is_refused() {
    paused_before_the_fence("fence_before_rc", IsolationLevel::ReadCommitted).await;
}

#[tokio::test]
async fn repeatable_read_a_snapshot_before_the_hand_over_is_refused() {
    paused_before_the_fence("fence_before_rr", IsolationLevel::RepeatableRead).await;
}

#[tokio::test]
async fn serializable_a_snapshot_before_the_hand_over_is_refused() {
    paused_before_the_fence("fence_before_ser", IsolationLevel::Serializable).await;
}

/// The coordinator rotates the role to a new producer id that is LOWER than
/// the old one (the kit's `set_epoch` puts the old id at its last epoch).
/// The successor's token orders below the stored one, yet it is current, so
/// the fence accepts it; the deposed leader's token, numerically higher, is
/// refused after it, by the helper and by the SQL function.
#[tokio::test]
async fn a_rotation_to_a_lower_producer_id_is_accepted_when_current() {
    let config = store("fence_rotation").await;
    let (mut da, mut db) = (open(&config).await, open(&config).await);
    let cluster = TestCluster::new();
    cluster
        .memory()
        .set_epoch(ROLE, FencingToken::new(9_000, i16::MAX - 2));
    let (a, b) = (cluster.process("a"), cluster.process("b"));
    let (lead_a, standby) = leader_and_standby(&cluster, &a, &b).await;
    let rc = IsolationLevel::ReadCommitted;
    fenced_write(&mut da, rc, &a, lead_a.token(), "b")
        .await
        .unwrap();
    a.pause(); // stopped, not killed: it asks Kafka again below
    past_the_lease(&cluster).await;
    let lead_b = won(standby).await;
    a.resume();
    let (ta, tb) = (lead_a.token(), lead_b.token());
    assert!(
        tb.producer_id < ta.producer_id,
        "{tb} should rotate below {ta}"
    );
    assert!(tb < ta, "the token order alone would refuse the new leader");
    fenced_write(&mut db, rc, &b, tb, "a").await.unwrap();
    fenced_write(&mut db, rc, &b, tb, "a").await.unwrap();
    let r = fenced_write(&mut da, rc, &a, ta, "b").await;
    assert_fenced(r, &[&ta.to_string(), &tb.to_string()]);
    let e = da
        .execute(
            "SELECT krabka_fence($1, $2, $3)",
            &[&ROLE, &ta.producer_id, &ta.producer_epoch],
        )
        .await
        .unwrap_err();
    assert_eq!(e.code().map(|c| c.code()), Some("KF002"), "{e}");
    let order: Vec<String> = writers(&da).await.into_iter().map(|(w, _)| w).collect();
    assert_eq!(order, ["a", "b", "b"]);
}

/// The SQL function of `stores/sql/postgres.sql`, for callers without a
/// helper: accepts the same token again and newer epochs, refuses older
/// epochs (KF001), another producer id (KF002) and unminted tokens (22023),
/// each naming the tokens.
#[tokio::test]
async fn the_sql_function_advances_and_refuses_like_the_helper() {
    let config = store("fence_function").await;
    let db = open(&config).await;
    let call = |id: i64, epoch: i16| {
        let db = &db;
        async move {
            db.execute("SELECT krabka_fence($1, $2, $3)", &[&ROLE, &id, &epoch])
                .await
                .map_err(|e| {
                    let code = e.code().map(|c| c.code().to_owned()).unwrap_or_default();
                    let message = e
                        .as_db_error()
                        .map(|d| d.message().to_owned())
                        .unwrap_or_default();
                    (code, message)
                })
        }
    };
    call(5, 1).await.unwrap();
    call(5, 1).await.unwrap();
    call(5, 2).await.unwrap();
    let (code, message) = call(5, 1).await.unwrap_err();
    assert_eq!(code, "KF001");
    assert!(
        message.contains("5/2") && message.contains("5/1") && message.contains("'billing'"),
        "{message}"
    );
    let (code, message) = call(4, 9).await.unwrap_err();
    assert_eq!(code, "KF002");
    assert!(
        message.contains("5/2") && message.contains("4/9"),
        "{message}"
    );
    assert_eq!(call(-1, -1).await.unwrap_err().0, "22023");
    let stored = db
        .query_one(
            "SELECT producer_id, epoch FROM krabka_fence WHERE role = $1",
            &[&ROLE],
        )
        .await
        .unwrap();
    assert_eq!((stored.get::<_, i64>(0), stored.get::<_, i16>(1)), (5, 2));
}

/// The proof of a rotation is asked while the fence row is locked (so no
/// other writer can pass the fence between the proof and the commit): when
/// `describe` runs, another connection cannot lock the row, and the
/// rotation is in place once the transaction commits.
#[tokio::test]
async fn the_rotation_proof_is_asked_while_the_row_is_locked() {
    let config = store("fence_proof_locked").await;
    let (mut da, mut db, probe) = (
        open(&config).await,
        open(&config).await,
        open(&config).await,
    );
    let cluster = TestCluster::new();
    cluster
        .memory()
        .set_epoch(ROLE, FencingToken::new(9_000, i16::MAX - 2));
    let (a, b) = (cluster.process("a"), cluster.process("b"));
    let (lead_a, standby) = leader_and_standby(&cluster, &a, &b).await;
    let rc = IsolationLevel::ReadCommitted;
    fenced_write(&mut da, rc, &a, lead_a.token(), "b")
        .await
        .unwrap();
    a.crash();
    past_the_lease(&cluster).await;
    let tb = won(standby).await.token();
    let tx = db.transaction().await.unwrap();
    let mut asked = false;
    postgres::fence(&tx, ROLE, tb, || {
        asked = true;
        let (probe, b) = (&probe, &b);
        async move {
            let e = probe
                .query(
                    "SELECT 1 FROM krabka_fence WHERE role = $1 FOR UPDATE NOWAIT",
                    &[&ROLE],
                )
                .await
                .expect_err("the fence row must be locked while the proof is asked");
            assert_eq!(e.code().map(|c| c.code()), Some("55P03"), "{e}");
            b.client().describe_leadership(ROLE).await
        }
    })
    .await
    .unwrap();
    assert!(asked, "a rotation is proven with describe_leadership");
    tx.commit().await.unwrap();
    let row = probe
        .query_one(
            "SELECT producer_id, epoch FROM krabka_fence WHERE role = $1",
            &[&ROLE],
        )
        .await
        .unwrap();
    assert_eq!(FencingToken::new(row.get(0), row.get(1)), tb);
}
