"""``krabka_coordination.stores``: the fence on a real PostgreSQL (psycopg 3,
``KRABKA_POSTGRES_URL``, started by ``ci/postgres.sh``) and on SQLite files
(``sqlite3``), with elections on the test kit, so no Kafka is needed.

Each case runs on both stores: two members of a role writing through the
fence; a leader paused after its fence and before its commit while its
successor is elected (the successor waits for the fence row and sees the
leader's write: the leader's commit is ordered first); a leader paused
before its fence (refused); a rotation to a lower producer id (the kit's
``set_epoch``), accepted when proven current and the deposed leader's
numerically higher token refused after it.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Callable, Iterator, List, Tuple, TypeVar

import psycopg
import pytest

import krabka_coordination as kc
from krabka_coordination import stores
from krabka_coordination.testing import TestCluster, TestProcess

ROLE = "billing"
BOUND = 10.0  # real seconds a thread of the test may take before it fails
T = TypeVar("T")


def postgres_url() -> str:
    url = os.environ.get("KRABKA_POSTGRES_URL")
    if not url:
        raise AssertionError(
            "KRABKA_POSTGRES_URL is not set: start a server with `ci/postgres.sh start` and "
            "export the URL it prints last (ci/python.sh does)"
        )
    return url


class Store:
    """One store of a test: fresh connections to its database, which holds
    the fence (migrated twice: idempotent) and a ``writes`` table."""

    def __init__(self, kind: str, name: str, tmp: Path) -> None:
        # One schema per process: the suite runs on several interpreters at
        # once against one server (ci/python.sh).
        name = f"{name}_{os.getpid()}"
        self.kind = kind
        self.ph = "%s" if kind == "postgres" else "?"
        self.begin = "BEGIN" if kind == "postgres" else "BEGIN IMMEDIATE"
        self.schema = name
        self.path = tmp / f"{name}.db"
        if kind == "postgres":
            with psycopg.connect(postgres_url(), autocommit=True) as admin:
                admin.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
                admin.execute(f"CREATE SCHEMA {name}")
        db = self.connect()
        stores.migrate(db)
        stores.migrate(db)
        db.execute(
            "CREATE TABLE writes (id "
            + ("bigserial" if kind == "postgres" else "INTEGER")
            + " PRIMARY KEY, writer text NOT NULL, producer_id bigint NOT NULL, epoch smallint NOT NULL)"
        )
        db.close()

    def connect(self) -> Any:
        """A connection in autocommit mode: each test's transactions are
        begun and ended by its own statements."""
        if self.kind == "postgres":
            return psycopg.connect(postgres_url(), autocommit=True, options=f"-c search_path={self.schema}")
        return sqlite3.connect(self.path, timeout=BOUND, isolation_level=None, check_same_thread=False)

    def write(self, db: Any, writer: str, token: kc.FencingToken, other: str) -> int:
        """Writes a row of ``writer``; returns how many rows of ``other``
        the transaction sees."""
        ph = self.ph
        db.execute(
            f"INSERT INTO writes (writer, producer_id, epoch) VALUES ({ph}, {ph}, {ph})",
            (writer, token.producer_id, token.producer_epoch),
        )
        seen: int = db.execute(f"SELECT count(*) FROM writes WHERE writer = {ph}", (other,)).fetchone()[0]
        return seen

    def fenced_write(self, db: Any, p: TestProcess, token: kc.FencingToken, other: str) -> int:
        """One fenced transaction of ``p`` with ``token``: fence, write,
        commit (rolled back on any error)."""
        db.execute(self.begin)
        try:
            stores.fence(db, ROLE, token, lambda: p.client.describe_leadership(ROLE))
            seen = self.write(db, p.name, token, other)
            db.execute("COMMIT")
            return seen
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def writers(self) -> List[Tuple[str, kc.FencingToken]]:
        db = self.connect()
        try:
            rows = db.execute("SELECT writer, producer_id, epoch FROM writes ORDER BY id").fetchall()
            return [(w, kc.FencingToken(i, e)) for w, i, e in rows]
        finally:
            db.close()


@pytest.fixture(params=["postgres", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    name = "py_" + request.node.originalname.removeprefix("test_")[:40] + "_" + request.param
    yield Store(request.param, name, tmp_path)


def in_thread(fn: Callable[[], T]) -> "Future[T]":
    """``fn`` in a daemon thread: one a failing test left blocked holds up
    neither the other tests nor the interpreter's exit."""
    fut: "Future[T]" = Future()

    def run() -> None:
        try:
            fut.set_result(fn())
        except BaseException as e:  # handed to the test thread
            fut.set_exception(e)

    threading.Thread(target=run, daemon=True).start()
    return fut


def leader_and_standby(cluster: TestCluster, a: TestProcess, b: TestProcess) -> Tuple[kc.Leadership, "Future[kc.Leadership]"]:
    """``a`` leads the role and ``b`` waits as its standby."""
    lead = a.client.acquire_leadership(ROLE, a.name, timeout=BOUND)
    standby = in_thread(lambda: b.client.acquire_leadership(ROLE, b.name, timeout=BOUND))
    for _ in range(100):
        cluster.settle()
        if b.name in a.client.describe_role_state(ROLE).members:
            return lead, standby
    raise AssertionError("b never registered")


def past_the_lease(cluster: TestCluster) -> None:
    """Past the lease (30 s) and the standby's stagger: a leader that
    stopped renewing is replaced."""
    cluster.advance(60)


def assert_fenced(call: Callable[[], object], *parts: str) -> None:
    with pytest.raises(kc.Fenced) as raised:
        call()
    for part in parts:
        assert part in str(raised.value), f"{raised.value} should name {part}"


def test_two_members_write_in_token_order_and_the_deposed_one_is_refused(store: Store) -> None:
    da, db = store.connect(), store.connect()
    cluster = TestCluster()
    a, b = cluster.process("a"), cluster.process("b")
    lead_a, standby = leader_and_standby(cluster, a, b)
    ta = lead_a.token
    store.fenced_write(da, a, ta, "b")
    store.fenced_write(da, a, ta, "b")
    a.crash()
    past_the_lease(cluster)
    tb = standby.result(BOUND).token
    store.fenced_write(db, b, tb, "a")
    # The deposed leader still holds its token and writes with it.
    assert_fenced(lambda: store.fenced_write(da, a, ta, "b"), '"billing"', str(ta), str(tb))
    store.fenced_write(db, b, tb, "a")
    assert store.writers() == [("a", ta), ("a", ta), ("b", tb), ("b", tb)]


def test_a_leader_paused_after_its_fence_commits_before_its_successor_writes(store: Store) -> None:
    da, db = store.connect(), store.connect()
    cluster = TestCluster()
    a, b = cluster.process("a"), cluster.process("b")
    lead_a, standby = leader_and_standby(cluster, a, b)
    # A deferred transaction on SQLite too: the fence is its first
    # statement, so the write lock is the fence's, not BEGIN IMMEDIATE's.
    da.execute("BEGIN")
    stores.fence(da, ROLE, lead_a.token, lambda: a.client.describe_leadership(ROLE))
    a.pause()
    past_the_lease(cluster)
    lead_b = standby.result(BOUND)
    assert lead_b.token > lead_a.token
    successor = in_thread(lambda: store.fenced_write(db, b, lead_b.token, "a"))
    time.sleep(0.3)
    assert not successor.done(), f"the successor must wait for the paused leader's transaction: {successor}"
    a.resume()
    store.write(da, "a", lead_a.token, "b")
    da.execute("COMMIT")
    assert successor.result(BOUND) == 1, "the successor's transaction sees the leader's write"
    assert [w for w, _ in store.writers()] == ["a", "b"]


def test_a_leader_paused_before_its_fence_is_refused(store: Store) -> None:
    da, db = store.connect(), store.connect()
    cluster = TestCluster()
    a, b = cluster.process("a"), cluster.process("b")
    lead_a, standby = leader_and_standby(cluster, a, b)
    a.pause()
    past_the_lease(cluster)
    lead_b = standby.result(BOUND)
    store.fenced_write(db, b, lead_b.token, "a")
    a.resume()
    assert_fenced(lambda: store.fenced_write(da, a, lead_a.token, "b"), str(lead_a.token), str(lead_b.token))
    assert [w for w, _ in store.writers()] == ["b"]


def test_a_snapshot_taken_before_the_hand_over_is_refused_under_repeatable_read(tmp_path: Path) -> None:
    """PostgreSQL only: the leader's transaction took its snapshot before
    the hand-over; its fence fails with a serialization failure
    (``TransientError``), and its retry is fenced."""
    store = Store("postgres", "py_snapshot_rr", tmp_path)
    da, db = store.connect(), store.connect()
    cluster = TestCluster()
    a, b = cluster.process("a"), cluster.process("b")
    lead_a, standby = leader_and_standby(cluster, a, b)
    da.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    da.execute("SELECT * FROM writes").fetchall()  # the snapshot
    a.pause()
    past_the_lease(cluster)
    lead_b = standby.result(BOUND)
    store.fenced_write(db, b, lead_b.token, "a")
    a.resume()
    with pytest.raises(kc.TransientError) as raised:
        stores.fence(da, ROLE, lead_a.token, lambda: a.client.describe_leadership(ROLE))
    assert isinstance(raised.value.__cause__, psycopg.errors.SerializationFailure), repr(raised.value.__cause__)
    da.execute("ROLLBACK")
    assert_fenced(lambda: store.fenced_write(da, a, lead_a.token, "b"), str(lead_b.token))
    assert [w for w, _ in store.writers()] == ["b"]


def rotated(cluster: TestCluster) -> Tuple[TestProcess, TestProcess, kc.FencingToken, "Future[kc.Leadership]"]:
    """``a`` leads at the last epoch of a high producer id (``set_epoch``),
    ``b`` waits; ``b``'s term will rotate to a lower producer id."""
    cluster.set_epoch(ROLE, kc.FencingToken(9_000, 32_765))
    a, b = cluster.process("a"), cluster.process("b")
    lead_a, standby = leader_and_standby(cluster, a, b)
    return a, b, lead_a.token, standby


def test_a_rotation_to_a_lower_producer_id_is_accepted_when_current(store: Store) -> None:
    da, db = store.connect(), store.connect()
    cluster = TestCluster()
    a, b, ta, standby = rotated(cluster)
    store.fenced_write(da, a, ta, "b")
    a.pause()  # stopped, not killed: it asks its coordinator again below
    past_the_lease(cluster)
    tb = standby.result(BOUND).token
    a.resume()
    assert tb.producer_id < ta.producer_id, f"{tb} should rotate below {ta}"
    assert tb < ta, "the token order alone would refuse the new leader"
    store.fenced_write(db, b, tb, "a")
    store.fenced_write(db, b, tb, "a")
    assert_fenced(lambda: store.fenced_write(da, a, ta, "b"), str(ta), str(tb))
    assert [w for w, _ in store.writers()] == ["a", "b", "b"]


def test_a_rotation_is_refused_when_not_current(store: Store) -> None:
    """The proof is the coordinator's answer: a token of another producer id
    that is not the current one (here: what ``describe`` answers names a
    newer one) is refused, and the stored token stays."""
    db = store.connect()
    cluster = TestCluster()
    a, b, ta, standby = rotated(cluster)
    store.fenced_write(db, a, ta, "b")
    stale = kc.FencingToken(ta.producer_id - 1, 3)
    asked: List[str] = []

    def describe() -> kc.LeadershipStatus:
        asked.append(ROLE)
        return a.client.describe_leadership(ROLE)

    db.execute(store.begin)
    with pytest.raises(kc.Fenced) as raised:
        stores.fence(db, ROLE, stale, describe)
    db.execute("ROLLBACK")
    assert asked == [ROLE], "the rotation's proof is asked once"
    for part in (str(ta), str(stale)):
        assert part in str(raised.value)
    assert store.writers() == [("a", ta)]


def test_bad_arguments_and_a_missing_table_are_named(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "empty.db", isolation_level=None)
    ok = kc.FencingToken(1, 0)
    with pytest.raises(kc.InvalidArgumentError, match="NoEpoch"):
        stores.fence(db, ROLE, kc.NO_EPOCH, lambda: pytest.fail("not asked"))
    with pytest.raises(kc.InvalidArgumentError):
        stores.fence(db, "", ok, lambda: pytest.fail("not asked"))
    with pytest.raises(kc.InvalidArgumentError, match="store="):
        stores.fence(object(), ROLE, ok, lambda: pytest.fail("not asked"))
    with pytest.raises(kc.FatalError, match='"billing" on SQLite') as raised:
        stores.fence(db, ROLE, ok, lambda: pytest.fail("not asked"))
    assert isinstance(raised.value.__cause__, sqlite3.OperationalError)


def test_the_async_helper_on_psycopg(tmp_path: Path) -> None:
    """``fence_async`` on psycopg's ``AsyncConnection``: the same rule,
    with an awaitable ``describe`` for the rotation's proof."""
    import asyncio

    store = Store("postgres", "py_async", tmp_path)
    cluster = TestCluster()
    a, b, ta, standby = rotated(cluster)

    async def write(p: TestProcess, token: kc.FencingToken) -> None:
        async with await psycopg.AsyncConnection.connect(
            postgres_url(), options=f"-c search_path={store.schema}"
        ) as conn:
            await stores.migrate_async(conn)
            async with conn.transaction():
                await stores.fence_async(conn, ROLE, token, lambda: p.async_client.describe_leadership(ROLE))
                await conn.execute(
                    "INSERT INTO writes (writer, producer_id, epoch) VALUES (%s, %s, %s)",
                    (p.name, token.producer_id, token.producer_epoch),
                )

    asyncio.run(write(a, ta))
    a.pause()
    past_the_lease(cluster)
    tb = standby.result(BOUND).token
    a.resume()
    asyncio.run(write(b, tb))
    with pytest.raises(kc.Fenced):
        asyncio.run(write(a, ta))
    assert store.writers() == [("a", ta), ("b", tb)]
