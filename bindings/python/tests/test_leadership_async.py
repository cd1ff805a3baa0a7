"""The asyncio client on a real Kafka: ``async with``, describe, guarded
writes, resign handing over to a waiting standby, cancelling a waiting
acquire, and a leadership won in the instant of a cancel."""

from __future__ import annotations

import asyncio
import time
from typing import Dict, List, Tuple

import pytest

import krabka_coordination as kc
from kafka_support import FAST, Timings, members, wait_until

# A long lease, renewed often: a takeover faster than the lease proves the
# resign handed over rather than the standby waiting out the deadline.
LONG = Timings(lease_duration=10.0, renew_interval=1.0, challenge_stagger=1.0)


async def _until_members(client: kc.AsyncClient, role: str, want: List[str], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        report = await client.describe_role_state(role)
        if report.members == want:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"roster of {role} is {report.members}, not {want}, after {timeout} s")
        await asyncio.sleep(0.1)


def test_async_with_describe_write_and_resign_hands_over(kafka: Dict[str, str], data_topic: str, role: str) -> None:
    # Two members in this process: two clients (one client holds a role once).
    a_client, b_client = kc.AsyncClient(kafka), kc.AsyncClient(kafka)

    async def main() -> Tuple[kc.AsyncLeadership, kc.AsyncLeadership, float]:
        async with await a_client.acquire_leadership(role, "a", **LONG) as a:
            assert isinstance(a, kc.AsyncLeadership)
            assert a.is_held and not a.done() and a.error is None
            assert (a.role, a.member) == (role, "a")
            assert a.partition == kc.role_partition(role, 16)
            assert a.lease.member == "a" and a.lease.token == a.token
            assert a.lease.deadline - a.lease.granted_at == 10_000

            status = await a_client.describe_leadership(role)
            assert status.token == a.token and status.authoritative(a.token)
            assert not status.authoritative(kc.NO_EPOCH)

            await a.write(data_topic, b"one", key=b"k", headers={"h": b"v"})
            await a.write_records(
                [kc.OutRecord(data_topic, b"two", partition=0), kc.OutRecord(data_topic, None, key=b"k")]
            )
            assert await a.wait(0.05) is False

            # A standby waits behind a.
            standby = asyncio.ensure_future(b_client.acquire_leadership(role, "b", **LONG))
            await _until_members(a_client, role, ["a", "b"])
            report = await a_client.describe_role_state(role)
            assert [(e.member, e.rank) for e in report.roster] == [("a", 0), ("b", 1)]
            assert report.lease is not None and report.lease.token == a.token
            assert not standby.done()
            resigned_at = time.monotonic()
        # The exit resigned: a is over, b takes over without waiting for the
        # 10 s deadline.
        b = await asyncio.wait_for(standby, 30)
        took = time.monotonic() - resigned_at
        return a, b, took

    a, b, took = asyncio.run(main())
    try:
        assert took < 5.0, f"the standby took {took:.2f} s after the resign"
        assert not a.is_held and isinstance(a.error, kc.Resigned)
        assert b.is_held and b.token > a.token

        async def after() -> None:
            assert await a.wait() is True  # already ended: at once
            with pytest.raises(kc.Resigned):
                await a.write(data_topic, b"too late")
            await a.resign()  # idempotent
            status = await b_client.describe_leadership(role)
            assert status.authoritative(b.token) and not status.authoritative(a.token)
            await b.resign()
            assert await asyncio.wait_for(b.wait(), 5) is True

        asyncio.run(after())
        assert isinstance(b.error, kc.Resigned)
        assert members(role) == []
        print(f"\nhand-over after resign: {took:.2f} s (lease 10 s)")
    finally:
        asyncio.run(b.resign())
        a_client.close()
        b_client.close()


def test_wait_completes_when_the_leadership_ends(kafka: Dict[str, str], role: str) -> None:
    async def main() -> None:
        async with kc.AsyncClient(kafka) as client:
            leadership = await client.acquire_leadership(role, "a", **FAST)
            waiting = asyncio.ensure_future(leadership.wait())
            await asyncio.sleep(0.3)
            assert not waiting.done()
            await leadership.resign()
            assert await asyncio.wait_for(waiting, 5) is True
        assert client.closed

    asyncio.run(main())


def test_async_with_takes_the_acquire_itself_and_a_timeout_raises(kafka: Dict[str, str], role: str) -> None:
    async def main() -> None:
        client = kc.AsyncClient(kafka)
        acquiring = client.acquire_leadership(role, "a", **LONG)
        assert isinstance(acquiring, kc.AsyncAcquire) and role in repr(acquiring)
        # No inner await: the acquire is an async context manager too.
        async with acquiring as leadership:
            assert isinstance(leadership, kc.AsyncLeadership) and leadership.is_held
            assert 0 < leadership.lease_left <= LONG["lease_duration"]
            async with kc.AsyncClient(kafka) as other:
                with pytest.raises(kc.AcquireTimeout) as caught:
                    await other.acquire_leadership(role, "b", **LONG, timeout=1.0)
                assert isinstance(caught.value, TimeoutError)
                await _until_members(other, role, ["a"], timeout=10)
        assert not leadership.is_held and isinstance(leadership.error, kc.Resigned)
        assert leadership.lease_left == 0.0
        # `await` keeps working, and aclose closes.
        second = await client.acquire_leadership(role, "c", **LONG)
        await second.resign()
        await client.aclose()
        assert client.closed

    asyncio.run(main())


def test_cancelling_a_waiting_acquire_deregisters_the_member(
    client: kc.Client, kafka: Dict[str, str], role: str
) -> None:
    holder = client.acquire_leadership(role, "holder", **LONG)
    try:

        async def main() -> None:
            async with kc.AsyncClient(kafka) as other:
                waiting = asyncio.ensure_future(other.acquire_leadership(role, "waiting", **LONG))
                await _until_members(other, role, ["holder", "waiting"])
                waiting.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await waiting
                # The core deregisters the member on the runtime once the
                # cancel reaches it.
                await _until_members(other, role, ["holder"], timeout=10)

        asyncio.run(main())
        assert holder.is_held
        assert client.describe_leadership(role).authoritative(holder.token)
    finally:
        holder.resign()


def test_wait_for_timeout_on_acquire_deregisters_too(client: kc.Client, kafka: Dict[str, str], role: str) -> None:
    holder = client.acquire_leadership(role, "holder", **LONG)
    try:

        async def main() -> None:
            async with kc.AsyncClient(kafka) as other:
                with pytest.raises(asyncio.TimeoutError):
                    await asyncio.wait_for(other.acquire_leadership(role, "impatient", **LONG), 2.0)
                await _until_members(other, role, ["holder"], timeout=10)

        asyncio.run(main())
    finally:
        holder.resign()


def test_a_leadership_won_as_the_acquire_is_cancelled_is_resigned(
    client: kc.Client, kafka: Dict[str, str], role: str
) -> None:
    # The acquire wins on the runtime while the event loop is blocked, so
    # its outcome waits for the loop; the task is cancelled before the loop
    # takes it. Nobody will hold the Leadership: it must be resigned, not
    # dropped (which would leave the member registered and the role leased
    # until the deadline).
    async def main() -> None:
        async with kc.AsyncClient(kafka) as other:
            task = asyncio.ensure_future(other.acquire_leadership(role, "m", **LONG))
            await asyncio.sleep(0)  # the task starts the acquire
            # Blocking the loop: the role is won meanwhile (its first lease
            # is visible), and the acquire hands its outcome to the loop.
            wait_until(lambda: client.describe_role_state(role).lease is not None, 20, "the acquire to win")
            time.sleep(0.5)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(main())
    wait_until(lambda: members(role) == [], 10, "the won leadership to be resigned")
    report = client.describe_role_state(role)
    assert report.lease is None, "the lease was not cleared"


def test_a_write_started_after_resign_never_commits(kafka: Dict[str, str], data_topic: str, role: str) -> None:
    # Tasks run in the order they were created: the second write starts
    # after the resign did, so it is refused (Resigned) and sends nothing,
    # whatever the runtime runs first; the first write started before.
    async def main() -> None:
        async with kc.AsyncClient(kafka) as client:
            for i in range(10):
                lead = await client.acquire_leadership(f"{role}-{i}", "a", **FAST)
                w1 = asyncio.ensure_future(lead.write(data_topic, b"before"))
                resign = asyncio.ensure_future(lead.resign())
                w2 = asyncio.ensure_future(lead.write(data_topic, b"after"))
                first, resigned, second = await asyncio.gather(w1, resign, w2, return_exceptions=True)
                assert isinstance(second, kc.Resigned), (i, second)
                assert resigned is None, (i, resigned)
                assert first is None or isinstance(first, kc.Resigned), (i, first)

    asyncio.run(main())
