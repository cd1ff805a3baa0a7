"""The leadership event stream on a real Kafka: ``for`` / ``async for`` over
``leadership.events()``, the ``Event`` class, and the stream ending with the
term (resign, fence)."""

from __future__ import annotations

import typing

import asyncio
import threading
from typing import Dict, List

import krabka_coordination as kc
from kafka_support import FAST, mint_newer_epoch


def test_the_events_of_a_term_end_with_its_resign(client: kc.Client, role: str) -> None:
    leadership = client.acquire_leadership(role, "m", **FAST)
    events = leadership.events()
    seen: List[kc.Event] = []

    def read() -> None:
        seen.extend(events)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        # At least one renewal, then the resign ends the iteration.
        deadline_before = leadership.lease.deadline
        assert leadership.wait(2.5) is False
        leadership.resign()
        reader.join(timeout=20)
        assert not reader.is_alive(), "the iteration did not end with the term"
    finally:
        leadership.resign()
    kinds = [e.kind for e in seen]
    assert kinds[-2:] == ["resigned", "deregistered"], kinds
    # Every kind seen is one the stubs' Literal (kc.EventKind) names.
    assert set(kinds) <= set(typing.get_args(kc.EventKind)), kinds
    assert "renewed" in kinds, kinds
    renewed = next(e for e in seen if e.kind == "renewed")
    assert (renewed.role, renewed.member) == (role, "m")
    assert renewed.deadline is not None and renewed.deadline > deadline_before
    assert renewed.token is None and renewed.error is None and renewed.rank is None
    assert renewed.at > 0
    assert repr(renewed) == (
        f"Event(kind='renewed', role={role!r}, member='m', at={renewed.at}, deadline={renewed.deadline})"
    )
    resigned = seen[-2]
    assert resigned.cleared is True
    # An ended leadership's stream is empty.
    assert list(leadership.events()) == []


def test_async_for_ends_with_a_fence_whose_error_is_fenced(kafka: Dict[str, str], role: str) -> None:
    async def main() -> List[kc.Event]:
        async with kc.AsyncClient(kafka) as client:
            # A long lease renewed every second: the first renewal after the
            # newer epoch was minted meets the fence.
            leadership = await client.acquire_leadership(role, "m", lease_duration=30.0, renew_interval=1.0)
            seen = []
            events = leadership.events()  # subscribed before the fence
            mint_newer_epoch(kafka["bootstrap.servers"], role)
            async for event in events:
                seen.append(event)
            assert isinstance(leadership.error, kc.Fenced)
            await leadership.resign()  # only deregisters
            return seen

    seen = asyncio.run(main())
    kinds = [e.kind for e in seen]
    assert kinds[-1] == "fenced", kinds
    fenced = seen[-1]
    assert isinstance(fenced.error, kc.Fenced) and fenced.error.kind == "FENCED"
    assert fenced.error is fenced.error


def test_every_stream_gets_every_event_and_other_kinds_fields_are_none(client: kc.Client, role: str) -> None:
    with client.acquire_leadership(role, "m", **FAST) as leadership:
        first, second = leadership.events(), leadership.events()
        a, b = next(first), next(second)
        assert a.kind == b.kind == "renewed"
        assert a.at == b.at and a.deadline == b.deadline
        for attr in (
            "partition", "offset", "rank", "challenge_at", "token", "granted_at",
            "failures", "error", "cleared", "committed", "holder", "what", "attempt", "retry_in",
        ):
            assert getattr(a, attr) is None, attr
