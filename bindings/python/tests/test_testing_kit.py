"""``krabka_coordination.testing``: the core's test kit from Python, with no
broker and no sleep. Each case drives the cluster's manual clock (30 s
leases, the defaults) and finishes in well under a second of wall time.

A blocking call that waits for the clock (a standby's acquire, a leader
loop) runs in a thread, as in a service; ``settle`` lets it register first.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, List, Tuple, TypeVar

import pytest

import krabka_coordination as kc
from krabka_coordination.testing import GuardedWrite, TestCluster, TestProcess

ROLE = "billing"
LEASE_MS = 30_000
# The challenge stagger the crash-failover standbys are given (the core's
# default): rank k challenges at the holder's deadline plus k of them.
STAGGER_MS = 5_000
# A future of the test thread that should have finished is given this much
# real time before the test fails instead of hanging.
BOUND = 10.0
# What a write in flight when its process was paused raises once resumed
# after another member took the role (see the paused-leader tests): the
# write reaches the cluster before the process's timers fire.
DEPOSED_WRITE = kc.Fenced

T = TypeVar("T")


@pytest.fixture
def cluster() -> TestCluster:
    return TestCluster()


class Threads:
    """Runs a blocking call in a daemon thread, its outcome a ``Future``: a
    call left blocked by a failing test (a standby whose clock never came)
    holds up neither the other tests nor the interpreter's exit."""

    def submit(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> Future[T]:
        fut: Future[T] = Future()

        def run() -> None:
            try:
                fut.set_result(fn(*args, **kwargs))
            except BaseException as e:  # handed to the test thread
                fut.set_exception(e)

        threading.Thread(target=run, daemon=True).start()
        return fut


@pytest.fixture
def pool() -> Threads:
    return Threads()


def standby(
    pool: Threads, cluster: TestCluster, p: TestProcess, member: str, **options: Any
) -> Future[kc.Leadership]:
    """``member`` contends on ``p`` in a thread (``options`` to its
    ``acquire_leadership``); returns once it is in the roster (waiting for
    its turn)."""
    fut = pool.submit(p.client.acquire_leadership, ROLE, member, **options)
    for _ in range(100):
        cluster.settle()
        if member in cluster_roster(p):
            return fut
    raise AssertionError(f"{member} never registered")


def cluster_roster(p: TestProcess) -> List[str]:
    return [m for m in p.client.describe_role_state(ROLE).members]


def values(writes: List[GuardedWrite]) -> List[Tuple[bytes, kc.FencingToken]]:
    return [(w.value or b"", w.token) for w in writes]


def test_the_first_member_leads_and_renews_while_time_passes(cluster: TestCluster) -> None:
    a = cluster.process("a")
    renewed: List[kc.Event] = []
    lead = a.client.acquire_leadership(ROLE, "a", on_event=lambda e: renewed.append(e) if e.kind == "renewed" else None)
    assert lead.is_held and lead.lease.granted_at == TestCluster.START_MILLIS
    assert cluster.describe_leadership(ROLE).authoritative(lead.token)
    cluster.advance(timedelta(minutes=2))
    assert cluster.now_millis == TestCluster.START_MILLIS + 120_000
    assert cluster.now == datetime(2026, 1, 1, 0, 2, tzinfo=timezone.utc)
    assert lead.is_held
    assert lead.lease.deadline > cluster.now_millis, "the lease was renewed as time passed"
    assert lead.renewal_failures == 0


@pytest.mark.parametrize("rank", [0, 1])
def test_a_crashed_leader_is_replaced_at_its_deadline_plus_the_stagger(
    cluster: TestCluster, pool: Threads, rank: int
) -> None:
    """a leads; b, then c, wait. Crashing a (and b, for rank 1) leaves the
    last standby at challenger rank ``rank``: b's registration stays, so c
    waits behind it. The survivor challenges at a's deadline plus rank x
    stagger, to the millisecond."""
    a = cluster.process("a")
    lead_a = a.client.acquire_leadership(ROLE, "a")
    deadline = lead_a.lease.deadline
    standbys = [cluster.process(m) for m in ["b", "c"][: rank + 1]]
    futs = [standby(pool, cluster, p, p.name, challenge_stagger=STAGGER_MS / 1000) for p in standbys]
    a.crash()
    assert a.state == "crashed"
    for p in standbys[:rank]:
        p.crash()
    turn = deadline + rank * STAGGER_MS
    cluster.advance((turn - cluster.now_millis - 1) / 1000)
    assert not futs[-1].done(), f"rank {rank} must wait until a's deadline plus {rank} staggers"
    cluster.advance(0.001)
    lead = futs[-1].result(timeout=BOUND)
    assert lead.token > lead_a.token
    assert lead.lease.granted_at == turn == cluster.now_millis
    assert cluster.describe_leadership(ROLE).authoritative(lead.token)
    a.resume()
    assert a.state == "crashed", "a crash is for good"


def test_a_crashed_processs_pending_calls_end_with_the_closed_error(cluster: TestCluster, pool: Threads) -> None:
    a, b, c = cluster.process("a"), cluster.process("b"), cluster.process("c")
    lead_a = a.client.acquire_leadership(ROLE, "a")
    deadline = lead_a.lease.deadline
    fut_b = standby(pool, cluster, b, "b")
    fut_c = standby(pool, cluster, c, "c")
    waited = pool.submit(lead_a.wait)
    c.crash()
    with pytest.raises(kc.InvalidArgumentError, match="closed: its process crashed"):
        fut_c.result(timeout=BOUND)
    a.crash()
    assert waited.result(timeout=BOUND) is True, "the term ends with the crash"
    assert not lead_a.is_held
    assert isinstance(lead_a.error, kc.InvalidArgumentError) and "its process crashed" in str(lead_a.error)
    with pytest.raises(kc.InvalidArgumentError, match="its process crashed"):
        lead_a.write("orders", b"late")
    # Nothing of it reached the cluster: b still waits out a's lease.
    cluster.advance((deadline - cluster.now_millis - 1) / 1000)
    assert not fut_b.done(), "b must wait out a's lease"
    cluster.advance(1)
    assert fut_b.result(timeout=BOUND).lease.granted_at == deadline
    assert cluster.guarded_writes() == []


def test_advance_to_next_deadline_steps_to_the_challenge(cluster: TestCluster, pool: Threads) -> None:
    a, b = cluster.process("a"), cluster.process("b")
    lead_a = a.client.acquire_leadership(ROLE, "a")
    fut_b = standby(pool, cluster, b, "b")
    a.crash()
    steps = 0
    while not fut_b.done() and steps < 100:
        at = cluster.advance_to_next_deadline()
        assert at is not None and at <= lead_a.lease.deadline
        steps += 1
    assert fut_b.result(timeout=BOUND).lease.granted_at == lead_a.lease.deadline == cluster.now_millis


def test_a_paused_leader_wakes_deposed_and_its_write_is_fenced(cluster: TestCluster, pool: Threads) -> None:
    a, b = cluster.process("a"), cluster.process("b")
    lead_a = a.client.acquire_leadership(ROLE, "a")
    lead_a.write("orders", b"a-1")
    fut_b = standby(pool, cluster, b, "b")
    a.pause()
    assert a.state == "paused"
    # The write is on its way when the process stops.
    write = pool.submit(lead_a.write, "orders", b"a-2")
    cluster.advance(40)
    lead_b = fut_b.result(timeout=BOUND)
    lead_b.write("orders", b"b-1")
    assert not write.done(), "a paused process does nothing"
    a.resume()
    cluster.settle()
    # Never committed: fenced at the cluster, which it reaches before the
    # lease's timer that came due in the pause fires.
    with pytest.raises(DEPOSED_WRITE):
        write.result(timeout=BOUND)
    assert not lead_a.is_held
    assert values(cluster.guarded_writes()) == [(b"a-1", lead_a.token), (b"b-1", lead_b.token)]
    w = cluster.guarded_writes()[1]
    assert (w.topic, w.role, w.key, w.offset) == ("orders", ROLE, b"", 1)


def test_offsets_commit_with_the_output_and_a_deposed_leaders_do_not_move(cluster: TestCluster, pool: Threads) -> None:
    a, b = cluster.process("a"), cluster.process("b")
    lead_a = a.client.acquire_leadership(ROLE, "a")
    assert cluster.committed_offset("pipeline", "in", 0) is None
    lead_a.write_with_offsets(
        [kc.OutRecord("orders", b"a-1")], kc.ConsumedOffsets("pipeline", [kc.InputOffset("in", 0, 1)])
    )
    assert cluster.committed_offset("pipeline", "in", 0) == 1
    assert cluster.committed_offset("pipeline", "in", 1) is None
    with pytest.raises(kc.InvalidArgumentError, match="offset -1"):
        lead_a.write_with_offsets([], kc.ConsumedOffsets("pipeline", [kc.InputOffset("in", 0, -1)]))
    fut_b = standby(pool, cluster, b, "b")
    a.pause()
    write = pool.submit(
        lead_a.write_with_offsets,
        [kc.OutRecord("orders", b"a-2")],
        kc.ConsumedOffsets("pipeline", [kc.InputOffset("in", 0, 2)]),
    )
    cluster.advance(40)
    lead_b = fut_b.result(timeout=BOUND)
    found = lead_b.committed_offsets("pipeline", {"in": [0, 1]})
    assert [(c.topic, c.partition, c.offset) for c in found] == [("in", 0, 1), ("in", 1, None)]
    a.resume()
    cluster.settle()
    with pytest.raises(DEPOSED_WRITE):
        write.result(timeout=BOUND)
    assert cluster.committed_offset("pipeline", "in", 0) == 1
    assert values(cluster.guarded_writes()) == [(b"a-1", lead_a.token)]


def test_a_resign_hands_over_without_waiting_for_the_lease(cluster: TestCluster, pool: Threads) -> None:
    a, b = cluster.process("a"), cluster.process("b")
    lead_a = a.client.acquire_leadership(ROLE, "a")
    fut_b = standby(pool, cluster, b, "b")
    before = cluster.now_millis
    lead_a.resign()
    cluster.advance(2)  # b follows the partition with one-second polls
    lead_b = fut_b.result(timeout=BOUND)
    assert lead_b.token > lead_a.token
    assert cluster.now_millis - before <= 2_000
    assert isinstance(lead_a.error, kc.Resigned)


def test_a_leader_cut_off_loses_its_lease_then_heals(cluster: TestCluster, pool: Threads) -> None:
    a, b = cluster.process("a"), cluster.process("b")
    kinds: List[str] = []
    lead_a = a.client.acquire_leadership(ROLE, "a", on_event=lambda e: kinds.append(e.kind))
    fut_b = standby(pool, cluster, b, "b")
    a.cut_off()
    assert a.state == "cut_off"
    cluster.advance(LEASE_MS / 1000 + 10)
    assert not lead_a.is_held
    lead_b = fut_b.result(timeout=BOUND)
    a.heal()
    assert a.state == "running"
    # Healed, a waits behind b as any standby does.
    again = standby(pool, cluster, a, "a")
    cluster.advance(LEASE_MS / 1000 + 5)  # past the lease b holds (and renews)
    assert not again.done() and lead_b.is_held
    lead_b.resign()
    cluster.advance(2)
    assert again.result(timeout=BOUND).token > lead_b.token
    assert "renewal_failing" in kinds and "lease_expired" in kinds, kinds


def test_renewals_that_fail_for_a_while_keep_the_role(cluster: TestCluster) -> None:
    a = cluster.process("a")
    kinds: List[str] = []
    lead = a.client.acquire_leadership(ROLE, "a", on_event=lambda e: kinds.append(e.kind))
    a.fail_for(15)
    cluster.advance(40)
    assert lead.is_held
    assert "renewal_failing" in kinds
    assert "renewed" in kinds[kinds.index("renewal_failing") :], kinds


def test_an_observer_sees_the_failover(cluster: TestCluster, pool: Threads) -> None:
    a, b, o = cluster.process("a"), cluster.process("b"), cluster.process("observer")
    holders: List[str] = []
    with o.client.observe(ROLE) as observer:
        lead_a = a.client.acquire_leadership(ROLE, "a")
        fut_b = standby(pool, cluster, b, "b")
        a.crash()
        cluster.advance(LEASE_MS / 1000 + 5)
        assert fut_b.result(timeout=BOUND).token > lead_a.token
        cluster.settle()
        while (view := observer.next(timeout=0)) is not None:
            if view.leader is not None and (not holders or holders[-1] != view.leader.member):
                holders.append(view.leader.member)
    assert holders == ["a", "b"]


def test_a_leader_loop_contends_again_after_losing(cluster: TestCluster, pool: Threads) -> None:
    a, b = cluster.process("a"), cluster.process("b")
    tokens: List[kc.FencingToken] = []
    stop = threading.Event()

    def work(leadership: kc.Leadership, ended: kc.TermEnded) -> None:
        tokens.append(leadership.token)
        ended.wait()

    looped = pool.submit(a.client.lead, ROLE, "a", work, stop=stop)
    for _ in range(100):
        cluster.settle()
        if tokens:
            break
    assert len(tokens) == 1
    fut_b = standby(pool, cluster, b, "b")
    # Paused past its lease, a is deposed; resumed, it contends again behind b.
    a.pause()
    cluster.advance(40)
    lead_b = fut_b.result(timeout=BOUND)
    a.resume()
    cluster.advance(5)
    lead_b.resign()
    cluster.advance(60)
    assert len(tokens) == 2, tokens
    assert tokens[0] < lead_b.token < tokens[1]
    stop.set()
    assert looped.result(timeout=BOUND) is None


def test_a_test_client_answers_the_kafka_only_operations() -> None:
    c = TestCluster(partitions=4).process("a").client
    assert (c.partitions, c.state_topic) == (4, "__coordination_state")
    report = c.ensure_state_topic()
    assert (report.created, report.partitions, report.cleanup_policy) == (False, 4, "compact")
    assert c.check_state_topic().partitions == 4
    c.close()
    assert c.closed
    with pytest.raises(kc.InvalidArgumentError, match="closed"):
        c.check_state_topic()


def test_bad_arguments_are_refused_at_the_call(cluster: TestCluster) -> None:
    with pytest.raises(kc.InvalidArgumentError, match="partitions"):
        TestCluster(partitions=0)
    with pytest.raises(kc.InvalidArgumentError, match="seconds"):
        cluster.advance(-1)
    with pytest.raises(TypeError, match="seconds"):
        cluster.process("a").fail_for("5")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="seconds"):
        cluster.advance(None)  # type: ignore[arg-type]
    assert cluster.advance_to_next_deadline() is None, "nobody waits"


# ------------------------------------------------------------------ asyncio


def test_async_election_and_renewal(cluster: TestCluster) -> None:
    async def main() -> None:
        a = cluster.process("a")
        lead = await a.async_client.acquire_leadership(ROLE, "a")
        await cluster.advance_async(timedelta(seconds=90))
        assert lead.is_held and lead.lease.deadline > cluster.now_millis
        assert (await cluster.describe_leadership_async(ROLE)).authoritative(lead.token)

    asyncio.run(main())


async def async_standby(cluster: TestCluster, p: TestProcess, member: str) -> asyncio.Task[kc.AsyncLeadership]:
    async def acquire() -> kc.AsyncLeadership:
        return await p.async_client.acquire_leadership(ROLE, member)

    task = asyncio.ensure_future(acquire())
    for _ in range(100):
        await cluster.settle_async()
        if member in (await p.async_client.describe_role_state(ROLE)).members:
            return task
    raise AssertionError(f"{member} never registered")


def test_async_crash_failover_at_the_deadline(cluster: TestCluster) -> None:
    async def main() -> None:
        a, b = cluster.process("a"), cluster.process("b")
        lead_a = await a.async_client.acquire_leadership(ROLE, "a")
        task_b = await async_standby(cluster, b, "b")
        a.crash()
        deadline = lead_a.lease.deadline
        await cluster.advance_async(timedelta(milliseconds=deadline - cluster.now_millis - 1))
        assert not task_b.done()
        await cluster.advance_async(timedelta(milliseconds=1))
        lead_b = await asyncio.wait_for(task_b, BOUND)
        assert lead_b.token > lead_a.token
        assert lead_b.lease.granted_at == deadline == cluster.now_millis

    asyncio.run(main())


def test_async_paused_leader_is_fenced(cluster: TestCluster) -> None:
    async def main() -> None:
        a, b = cluster.process("a"), cluster.process("b")
        lead_a = await a.async_client.acquire_leadership(ROLE, "a")
        await lead_a.write("orders", b"a-1")
        task_b = await async_standby(cluster, b, "b")
        a.pause()
        write = asyncio.ensure_future(lead_a.write("orders", b"a-2"))
        await cluster.advance_async(40)
        lead_b = await asyncio.wait_for(task_b, BOUND)
        await lead_b.write("orders", b"b-1")
        assert not write.done()
        a.resume()
        await cluster.settle_async()
        with pytest.raises(DEPOSED_WRITE):
            await asyncio.wait_for(write, BOUND)
        assert not lead_a.is_held
        assert values(cluster.guarded_writes()) == [(b"a-1", lead_a.token), (b"b-1", lead_b.token)]

    asyncio.run(main())


def test_async_leader_loop_contends_again_after_losing(cluster: TestCluster) -> None:
    async def main() -> None:
        a, b = cluster.process("a"), cluster.process("b")
        tokens: List[kc.FencingToken] = []

        async def work(leadership: kc.AsyncLeadership, ended: kc.AsyncTermEnded) -> None:
            tokens.append(leadership.token)
            await ended.wait()

        looped = asyncio.ensure_future(a.async_client.lead(ROLE, "a", work))
        for _ in range(100):
            await cluster.settle_async()
            if tokens:
                break
        assert len(tokens) == 1
        task_b = await async_standby(cluster, b, "b")
        a.pause()
        await cluster.advance_async(40)
        lead_b = await asyncio.wait_for(task_b, BOUND)
        a.resume()
        await cluster.advance_async(5)
        await lead_b.resign()
        await cluster.advance_async(60)
        # The new term's work starts on this loop: let it run.
        for _ in range(100):
            if len(tokens) == 2:
                break
            await cluster.settle_async()
        assert len(tokens) == 2, tokens
        assert tokens[0] < lead_b.token < tokens[1]
        looped.cancel()
        with pytest.raises(asyncio.CancelledError):
            await looped

    asyncio.run(main())


def test_the_blocking_and_asyncio_clients_share_the_process(cluster: TestCluster) -> None:
    a = cluster.process("a")
    a.async_client.close()
    assert a.client.closed
    assert repr(a) == "<TestProcess 'a' running>"
