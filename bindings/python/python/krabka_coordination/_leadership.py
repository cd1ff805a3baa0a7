"""The held leadership of a role, blocking (:class:`Leadership`) and
asyncio (:class:`AsyncLeadership`), and its event stream (:class:`Events`,
:class:`AsyncEvents`).

Both classes wrap one native handle (``_native._Leadership``); each
operation is implemented once in Rust and returns an operation that the
blocking class waits for and the asyncio class awaits. Nothing else
happens here.
"""

from __future__ import annotations

from types import TracebackType
from datetime import timedelta
from typing import Iterable, List, Literal, Mapping, Optional, Tuple, Type, Union

from . import _native
from ._native import CommittedOffset, ConsumedOffsets, Event, FencingToken, KrabkaError, Lease, OutRecord

_BytesLike = Union[bytes, bytearray, memoryview]
_Headers = Union[Mapping[str, _BytesLike], Iterable[Tuple[str, _BytesLike]]]
_Partitions = Union[Mapping[str, Iterable[int]], Iterable[Tuple[str, Iterable[int]]]]

EventKind = Literal[
    "registered",
    "waiting",
    "held_back",
    "challenging",
    "lost_challenge",
    "elected",
    "renewed",
    "renewal_failing",
    "write_resolved",
    "retrying",
    "fenced",
    "lease_expired",
    "ended",
    "resigned",
    "deregistered",
]
"""The kinds of :attr:`Event.kind` (``typing.get_args(EventKind)``), for
``match`` and type checkers; the core may add kinds."""

__all__ = ["AsyncEvents", "AsyncLeadership", "EventKind", "Events", "Leadership"]


class _LeadershipBase:
    """What the blocking and the asyncio leadership share: the properties."""

    __slots__ = ("_native",)

    def __init__(self, native: _native._Leadership) -> None:
        self._native = native

    @property
    def token(self) -> FencingToken:
        """The fencing token of this term: pass it with every write that a
        downstream system must be able to refuse from a deposed leader."""
        return self._native.token

    @property
    def role(self) -> str:
        """The role."""
        return self._native.role

    @property
    def member(self) -> str:
        """The member id."""
        return self._native.member

    @property
    def partition(self) -> int:
        """The partition of ``__coordination_state`` that holds the role."""
        return self._native.partition

    @property
    def lease(self) -> Lease:
        """The last lease this member wrote (``granted_at``, ``deadline``)."""
        return self._native.lease

    @property
    def renewal_failures(self) -> int:
        """How many renewals in a row have failed with a transient error."""
        return self._native.renewal_failures

    @property
    def lease_left(self) -> float:
        """Seconds of the lease left on this member's monotonic clock: what
        the work may still count on. Zero means the term has ended (the
        local deadline passed: :class:`LeaseExpired`), and :attr:`is_held`
        is then false too."""
        return self._native.lease_left

    @property
    def is_held(self) -> bool:
        """True until the role ends (fenced, resigned, or a fatal error)."""
        return self._native.is_held

    @property
    def error(self) -> Optional[KrabkaError]:
        """Why the role ended, as the exception instance (:class:`Fenced`,
        :class:`Resigned`, :class:`FatalError`...), or ``None`` while held."""
        return self._native.error

    def done(self) -> bool:
        """True once the role has ended (``not is_held``), without waiting."""
        return not self._native.is_held

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._native!r}>"


class Leadership(_LeadershipBase):
    """The held leadership of a role, for blocking code (from
    :meth:`Client.acquire_leadership`).

    The core renews the lease in the background. A ``with`` block resigns on
    exit (and never suppresses the block's exception). Blocking calls release
    the GIL and let Ctrl-C interrupt; an interrupted write or resign is left
    to finish (within 10 s) before ``KeyboardInterrupt`` is raised.
    """

    __slots__ = ()

    def write(
        self,
        topic: str,
        value: Optional[_BytesLike],
        key: Optional[_BytesLike] = None,
        partition: Optional[int] = None,
        headers: Optional[_Headers] = None,
    ) -> None:
        """A guarded write of one record: one transaction of the producer the
        epoch binds. A deposed leader's write raises :class:`Fenced` and none
        of it becomes visible; the leadership then ends."""
        self._native.write(topic, value, key, partition, headers).wait()

    def write_records(self, records: Iterable[OutRecord]) -> None:
        """A guarded write of several records in one transaction: all of them
        become visible, or (fenced) none."""
        self._native.write_records(records).wait()

    def write_with_offsets(self, records: Iterable[OutRecord], offsets: ConsumedOffsets) -> None:
        """A guarded write of ``records`` (possibly none) that commits
        ``offsets``, the input they were made from, for its consumer group
        in the same transaction of this term's epoch: the records become
        visible to ``read_committed`` readers and the group's offsets move
        together, or neither happens (Kafka's exactly-once
        read-process-write loop; see docs/exactly-once.md).

        A deposed leader's write raises :class:`Fenced`, none of its records
        become visible and the group's offsets do not move; the leadership
        then ends. Bad offsets (an empty group or topic, a negative
        partition or offset, a partition named twice) raise
        :class:`InvalidArgumentError` naming the value, nothing sent; after
        :meth:`resign`, :class:`Resigned`. The group is committed to without
        membership: read the input with ``assign`` + ``seek``, not
        ``subscribe``."""
        self._native.write_with_offsets(records, offsets).wait()

    def committed_offsets(self, group: str, partitions: _Partitions) -> List[CommittedOffset]:
        """What consumer group ``group`` has committed for ``partitions`` (a
        dict of topic to partitions, or ``(topic, partitions)`` pairs), in
        the order asked: where this leader resumes reading its input.

        Only offsets of decided transactions are returned (read_committed);
        a pending commit is waited for at most one lease duration, then
        :class:`TransientError`. :attr:`CommittedOffset.offset` is ``None``
        for a partition the group committed nothing for. An empty group or
        topic, a negative partition or a partition named twice raises
        :class:`InvalidArgumentError`."""
        found: List[CommittedOffset] = self._native.committed_offsets(group, partitions).wait()
        return found

    def resign(self) -> None:
        """Gives the role up: stops renewing, supersedes the token, clears the
        lease and deregisters, so the next standby takes over at once.
        Idempotent; after a fence it only deregisters."""
        self._native.resign().wait()

    def wait(self, timeout: Optional[Union[float, timedelta]] = None) -> bool:
        """Blocks until the role ends (``True``) or ``timeout`` seconds pass
        (``False``; ``None``: no limit)."""
        return self._native.wait(timeout).wait()

    def events(self) -> Events:
        """The member's events from now on (renewals, a failing renewal, the
        fence or the resign...); the iteration ends with the term."""
        return Events(self._native.events())

    def __enter__(self) -> Leadership:
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.resign()


class AsyncLeadership(_LeadershipBase):
    """The held leadership of a role, for asyncio code (from
    :meth:`AsyncClient.acquire_leadership`).

    The core renews the lease in the background, off the event loop. An
    ``async with`` block resigns on exit (and never suppresses the block's
    exception). A cancelled write or resign is left to finish on the
    runtime.
    """

    __slots__ = ()

    async def write(
        self,
        topic: str,
        value: Optional[_BytesLike],
        key: Optional[_BytesLike] = None,
        partition: Optional[int] = None,
        headers: Optional[_Headers] = None,
    ) -> None:
        """A guarded write of one record (see :meth:`Leadership.write`)."""
        await self._native.write(topic, value, key, partition, headers)

    async def write_records(self, records: Iterable[OutRecord]) -> None:
        """A guarded write of several records in one transaction."""
        await self._native.write_records(records)

    async def write_with_offsets(self, records: Iterable[OutRecord], offsets: ConsumedOffsets) -> None:
        """A guarded write of ``records`` that commits ``offsets`` in the same
        transaction (see :meth:`Leadership.write_with_offsets`)."""
        await self._native.write_with_offsets(records, offsets)

    async def committed_offsets(self, group: str, partitions: _Partitions) -> List[CommittedOffset]:
        """What consumer group ``group`` has committed for ``partitions`` (see
        :meth:`Leadership.committed_offsets`)."""
        found: List[CommittedOffset] = await self._native.committed_offsets(group, partitions)
        return found

    async def resign(self) -> None:
        """Gives the role up (see :meth:`Leadership.resign`)."""
        await self._native.resign()

    async def wait(self, timeout: Optional[Union[float, timedelta]] = None) -> bool:
        """Waits until the role ends (``True``) or ``timeout`` seconds pass
        (``False``; ``None``: no limit)."""
        return await self._native.wait(timeout)

    def events(self) -> AsyncEvents:
        """The member's events from now on, for ``async for``; the iteration
        ends with the term."""
        return AsyncEvents(self._native.events())

    async def __aenter__(self) -> AsyncLeadership:
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await self.resign()


class Events:
    """The events of a :class:`Leadership`: ``for event in
    leadership.events()``. Each step blocks (the GIL released, Ctrl-C
    interrupting) until the next event; the iteration ends after the event
    that ended the term and the member's last events."""

    __slots__ = ("_stream",)

    def __init__(self, stream: _native._EventStream) -> None:
        self._stream = stream

    def __iter__(self) -> Events:
        return self

    def __next__(self) -> Event:
        event = self._stream.next().wait()
        if event is None:
            raise StopIteration
        return event


class AsyncEvents:
    """The events of an :class:`AsyncLeadership`: ``async for event in
    leadership.events()``; ends with the term."""

    __slots__ = ("_stream",)

    def __init__(self, stream: _native._EventStream) -> None:
        self._stream = stream

    def __aiter__(self) -> AsyncEvents:
        return self

    async def __anext__(self) -> Event:
        event = await self._stream.next()
        if event is None:
            raise StopAsyncIteration
        return event
