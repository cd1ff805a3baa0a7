"""Input offsets in a guarded write's transaction on a real Kafka, blocking
and asyncio: a leader's output and its consumer group's offsets commit
together and ``committed_offsets`` returns them to the next leader; a
deposed leader's write with offsets raises ``Fenced`` and the group's offset
does not move; bad offsets are refused at the call, naming the value."""

from __future__ import annotations

import asyncio
import uuid
from typing import Dict, List, Optional, Tuple

import pytest

import krabka_coordination as kc
from kafka_support import FAST, ensure_data_topic, mint_newer_epoch


@pytest.fixture(scope="module")
def input_topic(kafka: Dict[str, str]) -> str:
    """The input topic whose partition 0's offsets the groups commit (made
    as the other tests' topics are, so the group coordinator knows it)."""
    return ensure_data_topic(kafka["bootstrap.servers"], "krabka-python-offsets-in")


@pytest.fixture
def group(role: str) -> str:
    """A consumer group of this test alone."""
    return f"{role}-group-{uuid.uuid4().hex[:6]}"


def positions(found: List[kc.CommittedOffset]) -> List[Tuple[str, int, Optional[int], Optional[str]]]:
    return [(c.topic, c.partition, c.offset, c.metadata) for c in found]


def test_a_leaders_offsets_commit_with_its_output_and_the_next_leader_reads_them(
    client: kc.Client, data_topic: str, input_topic: str, group: str, role: str
) -> None:
    with client.acquire_leadership(role, "a", **FAST) as leadership:
        # Nothing committed yet: the query answers None for the partition.
        assert positions(leadership.committed_offsets(group, {input_topic: [0]})) == [(input_topic, 0, None, None)]
        leadership.write_with_offsets(
            [kc.OutRecord(data_topic, b"out-0"), kc.OutRecord(data_topic, b"out-1")],
            kc.ConsumedOffsets(group, [kc.InputOffset(input_topic, 0, 2, metadata="first batch")]),
        )
        leadership.write_with_offsets(
            (kc.OutRecord(data_topic, bytes([i])) for i in range(3)),
            kc.ConsumedOffsets(group, [kc.InputOffset(input_topic, 0, 5)]),
        )
        found = leadership.committed_offsets(group, [(input_topic, [0])])
        # No metadata committed reads back as None (Kafka keeps "").
        assert positions(found) == [(input_topic, 0, 5, None)]
        # Records may be none: only the offsets commit.
        leadership.write_with_offsets([], kc.ConsumedOffsets(group, [kc.InputOffset(input_topic, 0, 6, "m")]))
    with pytest.raises(kc.Resigned):
        leadership.write_with_offsets([], kc.ConsumedOffsets(group, [kc.InputOffset(input_topic, 0, 9)]))

    # The next leader resumes where the last one committed.
    with client.acquire_leadership(role, "b", **FAST) as successor:
        assert successor.token > leadership.token
        found = successor.committed_offsets(group, {input_topic: [0]})
        assert found == successor.committed_offsets(group, {input_topic: (0,)})
        assert positions(found) == [(input_topic, 0, 6, "m")]
        assert repr(found[0]) == f"CommittedOffset(topic={input_topic!r}, partition=0, offset=6, metadata='m')"


def test_a_deposed_leaders_write_with_offsets_is_fenced_and_the_offset_stays(
    client: kc.Client, kafka: Dict[str, str], data_topic: str, input_topic: str, group: str, role: str
) -> None:
    leadership = client.acquire_leadership(role, "a", **FAST)
    try:
        leadership.write_with_offsets(
            [kc.OutRecord(data_topic, b"while it leads")],
            kc.ConsumedOffsets(group, [kc.InputOffset(input_topic, 0, 3)]),
        )
        mint_newer_epoch(kafka["bootstrap.servers"], role)
        with pytest.raises(kc.Fenced) as info:
            leadership.write_with_offsets(
                [kc.OutRecord(data_topic, b"deposed")],
                kc.ConsumedOffsets(group, [kc.InputOffset(input_topic, 0, 7)]),
            )
        # The write or a renewal may meet the fence first: either way Fenced.
        assert not isinstance(info.value, ValueError)
        assert not leadership.is_held and isinstance(leadership.error, kc.Fenced)
    finally:
        leadership.resign()

    with client.acquire_leadership(role, "b", **FAST) as successor:
        assert positions(successor.committed_offsets(group, {input_topic: [0]})) == [(input_topic, 0, 3, None)]


def test_bad_offsets_are_refused_at_the_call_naming_the_value(
    client: kc.Client, data_topic: str, input_topic: str, group: str, role: str
) -> None:
    with client.acquire_leadership(role, "a", **FAST) as leadership:
        leadership.write_with_offsets([], kc.ConsumedOffsets(group, [kc.InputOffset(input_topic, 0, 4)]))
        out = [kc.OutRecord(data_topic, b"never")]
        with pytest.raises(kc.InvalidArgumentError, match="consumer group of the input offsets is empty"):
            leadership.write_with_offsets(out, kc.ConsumedOffsets("", [kc.InputOffset(input_topic, 0, 9)]))
        with pytest.raises(kc.InvalidArgumentError, match=f'offset -1 of input partition "{input_topic}"/0'):
            leadership.write_with_offsets(out, kc.ConsumedOffsets(group, [kc.InputOffset(input_topic, 0, -1)]))
        with pytest.raises(kc.InvalidArgumentError, match="input partition -2"):
            leadership.write_with_offsets(out, kc.ConsumedOffsets(group, [kc.InputOffset(input_topic, -2, 9)]))
        with pytest.raises(ValueError, match="named twice"):
            twice = [kc.InputOffset(input_topic, 0, 9), kc.InputOffset(input_topic, 0, 10)]
            leadership.write_with_offsets(out, kc.ConsumedOffsets(group, twice))
        with pytest.raises(TypeError, match="offsets must be a ConsumedOffsets"):
            leadership.write_with_offsets(out, [kc.InputOffset(input_topic, 0, 9)])  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="must be an int"):
            kc.InputOffset(input_topic, 0, "9")  # type: ignore[arg-type]
        with pytest.raises(kc.InvalidArgumentError, match="consumer group of the input offsets is empty"):
            leadership.committed_offsets("", {input_topic: [0]})
        with pytest.raises(kc.InvalidArgumentError, match="input partition -1"):
            leadership.committed_offsets(group, {input_topic: [-1]})
        # Nothing was sent: the offset is the last good write's.
        assert positions(leadership.committed_offsets(group, {input_topic: [0]})) == [(input_topic, 0, 4, None)]
        assert leadership.is_held


def test_async_write_with_offsets_commits_and_a_deposed_one_is_fenced(
    kafka: Dict[str, str], data_topic: str, input_topic: str, group: str, role: str
) -> None:
    async def main() -> None:
        async with kc.AsyncClient(kafka) as client:
            async with await client.acquire_leadership(role, "a", **FAST) as leadership:
                assert isinstance(leadership, kc.AsyncLeadership)
                await leadership.write_with_offsets(
                    [kc.OutRecord(data_topic, b"async")],
                    kc.ConsumedOffsets(group, [kc.InputOffset(input_topic, 0, 11, "a")]),
                )
                found = await leadership.committed_offsets(group, {input_topic: [0]})
                assert positions(found) == [(input_topic, 0, 11, "a")]
                with pytest.raises(kc.InvalidArgumentError, match="offset -5"):
                    await leadership.write_with_offsets(
                        [], kc.ConsumedOffsets(group, [kc.InputOffset(input_topic, 0, -5)])
                    )

                await asyncio.to_thread(mint_newer_epoch, kafka["bootstrap.servers"], role)
                with pytest.raises(kc.Fenced):
                    await leadership.write_with_offsets(
                        [kc.OutRecord(data_topic, b"deposed")],
                        kc.ConsumedOffsets(group, [kc.InputOffset(input_topic, 0, 20)]),
                    )
            async with await client.acquire_leadership(role, "b", **FAST) as successor:
                found = await successor.committed_offsets(group, [(input_topic, [0])])
                assert positions(found) == [(input_topic, 0, 11, "a")]

    asyncio.run(main())
