"""Test leader code without Kafka: an in-memory cluster that runs the
library's own election rules, with a clock the test moves.

A :class:`TestCluster` is the core's test kit: one in-memory state log and
transaction coordinator (Kafka's epochs, fencing and read_committed
visibility, the same rules as on Kafka), and one manual clock shared by
every process on it. Nothing waits on real time: the test moves the clock
with :meth:`TestCluster.advance` or :meth:`TestCluster.advance_to_next_deadline`.

Each :meth:`TestCluster.process` is a :class:`TestProcess`: its
:attr:`~TestProcess.client` is a real :class:`~krabka_coordination.Client`
and its :attr:`~TestProcess.async_client` an
:class:`~krabka_coordination.AsyncClient`, both on the same core client of
that process, so the code under test takes either unchanged. The test puts
a process through faults: :meth:`~TestProcess.crash` (SIGKILL),
:meth:`~TestProcess.pause`/:meth:`~TestProcess.resume` (SIGSTOP/SIGCONT),
:meth:`~TestProcess.cut_off`/:meth:`~TestProcess.heal`,
:meth:`~TestProcess.fail_for`; and reads back every guarded write the
cluster committed (:meth:`TestCluster.guarded_writes`), a consumer group's
committed input offset (:meth:`TestCluster.committed_offset`) and the coordinator's
answer (:meth:`TestCluster.describe_leadership`)::

    cluster = TestCluster()
    a, b = cluster.process("a"), cluster.process("b")
    lead_a = a.client.acquire_leadership("billing", "a")
    standby = ThreadPoolExecutor(1).submit(b.client.acquire_leadership, "billing", "b", timeout=10)
    cluster.settle()              # b registers and waits
    a.crash()
    cluster.advance(60)           # b challenges at a's lease deadline
    lead_b = standby.result()
    assert lead_b.token > lead_a.token

One cluster serves blocking and asyncio code alike, in the way httpx and
redis-py pair their clients: each time operation blocks (the GIL released,
the members acting on the package's runtime meanwhile) and has an awaitable
twin named ``*_async`` for a coroutine (:meth:`TestCluster.advance_async`
and so on), which lets the event loop deliver what the members do.

A blocking call of the code under test that waits for the clock (a standby's
``acquire_leadership``, a ``Client.lead``) runs in a thread of the test
(``concurrent.futures``), as it would run in a thread of the service; an
``AsyncClient`` call runs as an asyncio task. :meth:`TestCluster.settle`
returns once the members that have called into their client have nothing
left to do now; call it after starting such a thread or task. Timeouts given
to the client (``acquire_leadership(timeout=...)``, ``Leadership.wait``) are
real time, not the cluster's: a bound that ends a call a failing test left
waiting.

What the cluster does not model: broker latency, coordinator or partition
leader moves, compaction, transaction timeouts. The Kafka-only operations of
a test client answer as for a topic that exists: ``ensure_state_topic`` and
``check_state_topic`` report the state topic as existing (created ``False``),
compacted, with the cluster's partition count and one replica.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import List, Optional, Union

from . import _native
from ._client import AsyncClient, Client
from ._native import FencingToken, GuardedWrite, LeadershipStatus

Seconds = Union[float, timedelta]
"""A span of the cluster's time: a non-negative number of seconds or a
``timedelta``."""

__all__ = ["GuardedWrite", "Seconds", "TestCluster", "TestProcess"]


class TestProcess:
    """One process on a :class:`TestCluster` (see the module documentation).

    :attr:`client` and :attr:`async_client` share the process's core
    client: closing either closes both. A fault changes what the process's
    calls and timers do; its clients stay usable (a crashed process's
    client counts as closed, see :meth:`crash`)."""

    __test__ = False  # not a pytest test class
    __slots__ = ("_native", "_client", "_async_client")

    def __init__(self, native: _native._TestProcess) -> None:
        """Made by :meth:`TestCluster.process`."""
        self._native = native
        shared = native.client()
        self._client = Client._on_native(shared)
        self._async_client = AsyncClient._on_native(shared)

    @property
    def name(self) -> str:
        """The name given to :meth:`TestCluster.process`."""
        return self._native.name

    @property
    def state(self) -> str:
        """``"running"``, ``"cut_off"``, ``"paused"`` or ``"crashed"``."""
        return self._native.state

    @property
    def client(self) -> Client:
        """The process's blocking client, on the test cluster."""
        return self._client

    @property
    def async_client(self) -> AsyncClient:
        """The process's asyncio client, on the same core client as
        :attr:`client`."""
        return self._async_client

    def crash(self) -> None:
        """Kills the process (SIGKILL): it neither renews nor resigns nor
        sends anything again; its timers never fire. Its registration stays
        until a challenger passes it over. For good. Its clients count as
        closed: a call pending on them (an acquire, a write, an observer's
        next view, a leader loop) raises ``InvalidArgumentError`` ("the client is
        closed: its process crashed") at once, as does every later call; a
        term it held ends with that error as its reason; ``close`` returns
        at once."""
        self._native.crash()

    def pause(self) -> None:
        """Stops the process (SIGSTOP): its calls and timers wait. The clock
        goes on, so on :meth:`resume` what came due fires at once and a write
        it had in flight reaches the cluster, which fences it when another
        member took the role meanwhile: it never commits, and raises
        :class:`~krabka_coordination.Fenced` (the calls held across the
        pause go before the process's timers). Nothing for a crashed
        process."""
        self._native.pause()

    def resume(self) -> None:
        """Resumes a paused process (SIGCONT). Nothing for a crashed one."""
        self._native.resume()

    def cut_off(self) -> None:
        """Cuts the process off the cluster: each of its calls fails as
        transient (retried as the library retries any), its timers run,
        until :meth:`heal`."""
        self._native.cut_off()

    def heal(self) -> None:
        """Ends a :meth:`cut_off` (the same as :meth:`resume`)."""
        self._native.heal()

    def fail_for(self, seconds: Seconds) -> None:
        """Makes each call of the process fail as transient for ``seconds``
        of the cluster's time from now (a renewal or a guarded write that
        fails for a while, then goes through). A negative or non-finite
        span raises :class:`~krabka_coordination.InvalidArgumentError`, a
        non-number ``TypeError``."""
        self._native.fail_for(seconds)

    def __repr__(self) -> str:
        return f"<TestProcess {self.name!r} {self.state}>"


class TestCluster:
    """An in-memory coordination cluster and its manual clock (see the
    module documentation). ``partitions`` is the state topic's partition
    count (16 by default; below 1 raises
    :class:`~krabka_coordination.InvalidArgumentError`)."""

    __test__ = False  # not a pytest test class
    __slots__ = ("_native", "_partitions")

    #: The instant a new cluster's clock starts at (epoch ms):
    #: 2026-01-01T00:00:00Z.
    START_MILLIS = 1_767_225_600_000

    def __init__(self, partitions: int = 16) -> None:
        self._native = _native._TestCluster(partitions)
        self._partitions = partitions

    @property
    def partitions(self) -> int:
        """The state topic's partition count."""
        return self._partitions

    @property
    def now_millis(self) -> int:
        """The cluster's time, in milliseconds since the epoch."""
        return self._native.now_millis

    @property
    def now(self) -> datetime:
        """The cluster's time, as a UTC ``datetime``."""
        return datetime.fromtimestamp(self._native.now_millis / 1000, tz=timezone.utc)

    def process(self, name: str) -> TestProcess:
        """A new process named ``name`` (for the test's messages; the
        member id is what ``acquire_leadership`` is given), running."""
        return TestProcess(self._native.process(name))

    def advance(self, seconds: Seconds) -> None:
        """Moves the clock forward by ``seconds``, instant by instant: to
        each deadline a member waits for on the way, letting every member
        act there, then to the end. Blocks (the GIL released) until the
        members are quiet. A negative span raises
        :class:`~krabka_coordination.InvalidArgumentError`, a non-number
        ``TypeError``."""
        self._native.advance(seconds).wait()

    async def advance_async(self, seconds: Seconds) -> None:
        """:meth:`advance`, awaited."""
        await self._native.advance(seconds)

    def advance_to_next_deadline(self) -> Optional[int]:
        """Moves the clock to the earliest deadline any member waits for and
        lets the members act; returns that instant (epoch ms), or ``None``
        (the clock unmoved) when nobody waits."""
        at: Optional[int] = self._native.advance_to_next_deadline().wait()
        return at

    async def advance_to_next_deadline_async(self) -> Optional[int]:
        """:meth:`advance_to_next_deadline`, awaited."""
        at: Optional[int] = await self._native.advance_to_next_deadline()
        return at

    def settle(self) -> None:
        """Returns once the members have nothing left to do at this instant
        (the clock unmoved)."""
        self._native.settle().wait()

    async def settle_async(self) -> None:
        """:meth:`settle`, awaited."""
        await self._native.settle()

    def guarded_writes(self) -> List[GuardedWrite]:
        """Every guarded write the cluster committed (every topic but the
        state topic), in commit order, each with its role and the token of
        the term that wrote it. A fenced write is not among them."""
        return self._native.guarded_writes()

    def committed_offset(self, group: str, topic: str, partition: int) -> Optional[int]:
        """What consumer group ``group`` has committed for ``topic`` /
        ``partition`` (the offset of the next record to read), ``None`` when
        nothing: the input position that guarded writes with offsets
        (:meth:`~krabka_coordination.Leadership.write_with_offsets`)
        committed; a commit still pending does not count."""
        return self._native.committed_offset(group, topic, partition)

    def set_epoch(self, role: str, token: FencingToken) -> None:
        """Sets the coordinator's current token of ``role``, to test a
        producer id rotation: the next member to take the role gets the
        next epoch of ``token``'s producer id or, when ``token``'s epoch is
        the last one (32766, Kafka's exhausted epoch), a new producer id of
        the cluster's own, which may be lower than ``token``'s. Set it
        before the role's first election, or between terms."""
        self._native.set_epoch(role, token)

    def describe_leadership(self, role: str) -> LeadershipStatus:
        """What the role's transaction coordinator says now, asked by a
        process of the cluster's own that no fault touches."""
        status: LeadershipStatus = self._native.describe_leadership(role).wait()
        return status

    async def describe_leadership_async(self, role: str) -> LeadershipStatus:
        """:meth:`describe_leadership`, awaited."""
        status: LeadershipStatus = await self._native.describe_leadership(role)
        return status

    def __repr__(self) -> str:
        return f"<TestCluster partitions={self.partitions} now={self.now.isoformat()}>"
