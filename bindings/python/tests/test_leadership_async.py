"""The asyncio API on a real Kafka: ``async with``, describe, guarded writes,
resign handing over to a waiting standby, and cancelling a waiting acquire."""

from __future__ import annotations

import asyncio
import time
from typing import Dict, List, Tuple

import pytest

import krabka_coordination as kc
from kafka_support import FAST, Timings

# A long lease, renewed often: a takeover faster than the lease proves the
# resign handed over rather than the standby waiting out the deadline.
LONG = Timings(lease_duration=10.0, renew_interval=1.0, challenge_stagger=1.0)


async def _until_members(kafka: Dict[str, str], role: str, want: List[str], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        report = await kc.describe_role_state(kafka, role)
        if report.members == want:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"roster of {role} is {report.members}, not {want}, after {timeout} s")
        await asyncio.sleep(0.1)


def test_async_with_describe_write_and_resign_hands_over(kafka: Dict[str, str], data_topic: str, role: str) -> None:
    async def main() -> Tuple[kc.Leadership, kc.Leadership, float]:
        async with await kc.acquire_leadership(kafka, role, "a", **LONG) as a:
            assert a.is_held and a.error is None
            assert (a.role, a.member) == (role, "a")
            assert a.partition == kc.role_partition(role, 16)
            assert a.lease.member == "a" and a.lease.token == a.token
            assert a.lease.deadline - a.lease.granted_at == 10_000

            status = await kc.describe_leadership(kafka, role)
            assert status.token == a.token and status.authoritative(a.token)
            assert not status.authoritative(kc.NO_EPOCH)

            await a.write(data_topic, b"one", key=b"k", headers={"h": b"v"})
            await a.write_records(
                [kc.OutRecord(data_topic, b"two", partition=0), kc.OutRecord(data_topic, None, key=b"k")]
            )

            # A standby waits behind a.
            standby = asyncio.ensure_future(kc.acquire_leadership(kafka, role, "b", **LONG))
            await _until_members(kafka, role, ["a", "b"])
            report = await kc.describe_role_state(kafka, role)
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
        assert a.error is a.error  # one exception object, not a new one per read
        assert b.is_held and b.token > a.token
        status = kc.describe_leadership_blocking(kafka, role)
        assert status.authoritative(b.token) and not status.authoritative(a.token)

        async def after() -> None:
            await asyncio.wait_for(a.done(), 1)  # already ended: completes at once
            with pytest.raises(kc.Resigned):
                await a.write(data_topic, b"too late")
            await a.resign()  # idempotent
            await b.resign()
            await asyncio.wait_for(b.done(), 5)

        asyncio.run(after())
        assert isinstance(b.error, kc.Resigned)
        report = kc.describe_role_state_blocking(kafka, role)
        assert report.members == [] and report.lease is None
        print(f"\nhand-over after resign: {took:.2f} s (lease 10 s)")
    finally:
        b.resign_blocking()


def test_done_completes_when_the_leadership_ends(kafka: Dict[str, str], role: str) -> None:
    async def main() -> float:
        leadership = await kc.acquire_leadership(kafka, role, "a", **FAST)
        done = asyncio.ensure_future(leadership.done())
        await asyncio.sleep(0.3)
        assert not done.done()
        started = time.monotonic()
        await leadership.resign()
        await asyncio.wait_for(done, 5)
        return time.monotonic() - started

    assert asyncio.run(main()) < 5


def test_cancelling_a_waiting_acquire_deregisters_the_member(kafka: Dict[str, str], role: str) -> None:
    holder = kc.acquire_leadership_blocking(kafka, role, "holder", **LONG)
    try:

        async def main() -> None:
            waiting = asyncio.ensure_future(kc.acquire_leadership(kafka, role, "waiting", **LONG))
            await _until_members(kafka, role, ["holder", "waiting"])
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            # The core deregisters the member on the runtime once the
            # cancel reaches it.
            await _until_members(kafka, role, ["holder"], timeout=10)

        asyncio.run(main())
        assert holder.is_held
        assert kc.describe_leadership_blocking(kafka, role).authoritative(holder.token)
    finally:
        holder.resign_blocking()


def test_wait_for_timeout_on_acquire_deregisters_too(kafka: Dict[str, str], role: str) -> None:
    holder = kc.acquire_leadership_blocking(kafka, role, "holder", **LONG)
    try:

        async def main() -> None:
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(kc.acquire_leadership(kafka, role, "impatient", **LONG), 2.0)
            await _until_members(kafka, role, ["holder"], timeout=10)

        asyncio.run(main())
    finally:
        holder.resign_blocking()
