"""Closing a client ends everything it started, on a real Kafka: leaving
``with Client(...)`` (or ``async with AsyncClient(...)``) resigns what the
client holds, so a standby of another client takes over at once, long
before the holder's lease would have run out; a pending acquire raises
``CancelledError``; a running ``lead`` returns; an observer's iteration
ends; the client refuses every later call."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Dict, List, Optional

import pytest

import krabka_coordination as kc
from kafka_support import members, unique_role, wait_until

# A lease long enough that a standby which took over did not wait it out.
LEASE_S = 20.0
RENEW_S = 2.0
STAGGER_S = 1.0


def acquire(client: kc.Client, role: str, member: str, timeout: Optional[float] = None) -> kc.Leadership:
    """Acquires ``role`` with the test's timings."""
    return client.acquire_leadership(
        role, member, timeout=timeout, lease_duration=LEASE_S, renew_interval=RENEW_S, challenge_stagger=STAGGER_S
    )


async def aacquire(
    client: kc.AsyncClient, role: str, member: str, timeout: Optional[float] = None
) -> kc.AsyncLeadership:
    """Acquires ``role`` with the test's timings, from a coroutine."""
    return await client.acquire_leadership(
        role, member, timeout=timeout, lease_duration=LEASE_S, renew_interval=RENEW_S, challenge_stagger=STAGGER_S
    )


def in_thread(results: List[Any], call: Any) -> threading.Thread:
    """Runs ``call`` in a thread, appending its value or exception."""

    def run() -> None:
        try:
            results.append(call())
        except BaseException as e:  # noqa: BLE001 - the test inspects it
            results.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_leaving_with_resigns_cancels_and_stops_what_the_client_started(
    kafka: Dict[str, str], request: pytest.FixtureRequest
) -> None:
    held_role, waited_role, looped_role = (unique_role(f"{request.node.name}-{n}") for n in "hwl")
    with kc.Client(kafka) as other:
        x = acquire(other, waited_role, "x")
        with kc.Client(kafka) as holder:
            a = acquire(holder, held_role, "a")
            standby: List[Any] = []
            b_thread = in_thread(standby, lambda: acquire(other, held_role, "b", timeout=LEASE_S / 2))
            pending: List[Any] = []
            p_thread = in_thread(pending, lambda: acquire(holder, waited_role, "a"))
            looped: List[Any] = []
            lead_thread = in_thread(
                looped,
                lambda: holder.lead(
                    looped_role,
                    "a",
                    lambda _l, ended: ended.wait(),
                    lease_duration=LEASE_S,
                    renew_interval=RENEW_S,
                    challenge_stagger=STAGGER_S,
                ),
            )
            observer = holder.observe(held_role)
            views: List[Any] = []
            o_thread = in_thread(views, lambda: [v for v in observer])
            wait_until(lambda: members(held_role) == ["a", "b"], 20, "b waiting behind a")
            wait_until(lambda: members(waited_role) == ["x", "a"], 20, "a waiting behind x")
            wait_until(lambda: holder.describe_leadership(looped_role).token is not None, 20, "the loop leading")
            closed_at = time.monotonic()
        # Left the with: the client closed, every one of its roles resigned.
        assert holder.closed
        assert not a.is_held
        b_thread.join(LEASE_S)
        assert len(standby) == 1 and isinstance(standby[0], kc.Leadership), standby
        b = standby[0]
        assert b.is_held and b.token > a.token
        took = time.monotonic() - closed_at
        assert took < LEASE_S / 2, f"b took over {took:.1f} s after the close"
        # The pending acquire was cancelled, and left the roster.
        p_thread.join(10)
        assert len(pending) == 1 and isinstance(pending[0], kc.Cancelled), pending
        assert members(waited_role) == ["x"]
        # The leader loop returned, its role resigned.
        lead_thread.join(10)
        assert looped == [None], looped
        assert other.describe_role_state(looped_role).lease is None
        # The observer's iteration ended.
        o_thread.join(10)
        assert not o_thread.is_alive() and len(views) == 1 and isinstance(views[0], list), views
        # Every later call raises the closed error.
        for call in (
            lambda: holder.acquire_leadership(held_role, "a"),
            lambda: holder.describe_leadership(held_role),
            lambda: holder.observe(held_role),
        ):
            with pytest.raises(kc.InvalidArgumentError, match="the client is closed"):
                call()
        holder.close()  # idempotent
        b.resign()
        x.resign()


def test_leaving_async_with_resigns_and_cancels(kafka: Dict[str, str], request: pytest.FixtureRequest) -> None:
    held_role, waited_role = (unique_role(f"{request.node.name}-{n}") for n in "hw")

    async def main() -> None:
        async with kc.AsyncClient(kafka) as other:
            x = await aacquire(other, waited_role, "x")
            async with kc.AsyncClient(kafka) as holder:
                a = await aacquire(holder, held_role, "a")
                standby = asyncio.ensure_future(aacquire(other, held_role, "b", timeout=LEASE_S / 2))
                pending = asyncio.ensure_future(aacquire(holder, waited_role, "a"))
                while (await other.describe_role_state(held_role)).members != ["a", "b"] or (
                    await other.describe_role_state(waited_role)
                ).members != ["x", "a"]:
                    await asyncio.sleep(0.1)
            assert not a.is_held
            b = await standby
            assert b.is_held and b.token > a.token
            with pytest.raises(kc.Cancelled):
                await pending
            assert (await other.describe_role_state(waited_role)).members == ["x"]
            await b.resign()
            await x.resign()

    asyncio.run(main())
