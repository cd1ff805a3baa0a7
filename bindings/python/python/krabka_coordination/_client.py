"""The clients: :class:`Client` (blocking) and :class:`AsyncClient`
(asyncio), each built once from a dict of Kafka settings.

Both wrap one native client (``_native._Client``): one set of Kafka clients
shared by every role the client acquires or describes. Each operation is
implemented once in Rust and returns an operation that :class:`Client`
waits for and :class:`AsyncClient` awaits; arguments are checked when the
method is called, before any I/O.
"""

from __future__ import annotations

import asyncio
import threading
from types import TracebackType
from datetime import timedelta
from typing import Any, Callable, Generator, Mapping, Optional, Tuple, Type, TypeVar, Union

from . import _lead, _native
from ._lead import AsyncLeadWork, LeadWork
from ._leadership import AsyncLeadership, Leadership
from ._observe import AsyncObserver, Observer
from ._native import Cancelled, Event, LeadershipStatus, RoleStateReport, TopicReport

KafkaSettings = Mapping[str, Union[str, int, float, bool]]
"""librdkafka client settings: ``"bootstrap.servers"`` at least; values are
``str``, or numbers and bools written as librdkafka's strings."""

OAuthTokenProvider = Callable[[], Union[Tuple[str, float], Tuple[str, float, str]]]
"""A function supplying OAUTHBEARER tokens (``oauth_token=``): it takes no
argument and returns ``(token, expiry)`` or ``(token, expiry, principal)``,
the token as a ``str``, its expiry in seconds since the epoch (as
``time.time() + 3600`` writes it) and the principal it names (for the
logs; the broker reads the principal from the token)."""

EventCallback = Callable[[Event], object]
"""An ``on_event=`` callback: called with each :class:`Event` of the member,
in order, from its registration to the end of its term. With
:class:`Client` it runs on the package's ``krabka-events`` thread (keep it
quick and thread-safe; it must not block), with :class:`AsyncClient` on the
event loop that started the operation. What it raises is reported through
``sys.unraisablehook``; the member and the later callbacks go on. Its
return value is ignored."""

__all__ = [
    "AcquireTimeout",
    "AsyncAcquire",
    "AsyncClient",
    "Client",
    "EventCallback",
    "KafkaSettings",
    "OAuthTokenProvider",
]


class AcquireTimeout(Cancelled, TimeoutError):
    """An acquire with ``timeout=`` did not win the role in time. The member
    was deregistered before this was raised (and a role won in that very
    instant was resigned), so nothing of the attempt is left. A
    :class:`Cancelled` and a ``TimeoutError``."""


def _timed_out(role: str, member: str, timeout: Optional[Union[float, timedelta]]) -> AcquireTimeout:
    if isinstance(timeout, timedelta):
        timeout = timeout.total_seconds()
    return AcquireTimeout(
        f"cancelled: acquire of role {role!r} by member {member!r} did not win within timeout={timeout} "
        "seconds; the member was deregistered"
    )


_C = TypeVar("_C", bound="_ClientBase")


class _ClientBase:
    """What both clients share: construction, the partition count, closing."""

    __slots__ = ("_native",)

    def __init__(
        self,
        kafka: KafkaSettings,
        *,
        partitions: Optional[int] = None,
        state_topic: Optional[str] = None,
        connect_timeout: Optional[Union[float, timedelta]] = None,
        operation_timeout: Optional[Union[float, timedelta]] = None,
        oauth_token: Optional[OAuthTokenProvider] = None,
    ) -> None:
        """Builds the shared Kafka clients from ``kafka`` (librdkafka
        settings, passed through) for a state topic of ``partitions``
        partitions (16 when left out) named ``state_topic``
        (``__coordination_state`` when left out). Every member of a
        coordination domain must use the same topic and its real partition
        count. A setting librdkafka refuses raises
        :class:`InvalidArgumentError` here; nothing connects yet.

        ``connect_timeout`` (seconds, 10 when left out) bounds the first
        contact with the cluster: when no broker of the bootstrap address
        answers within it, an acquire or a describe raises
        :class:`TransientError` naming the address, and nothing is
        registered. A member that reached the cluster once and loses it
        later keeps retrying instead. ``operation_timeout`` (seconds, 30
        when left out) bounds each blocking client operation once the
        cluster answered (a transaction commit, a read of the state, a
        DescribeTransactions round trip, an admin request); on expiry the
        operation fails as transient (:class:`TransientError`). Each must be a positive number
        of seconds of at most librdkafka's limit (about 24.8 days); another
        value raises :class:`InvalidArgumentError` naming the argument, a
        non-number ``TypeError``.

        ``oauth_token`` supplies the tokens of SASL/OAUTHBEARER (with
        ``"security.protocol": "SASL_SSL"`` and ``"sasl.mechanism":
        "OAUTHBEARER"`` in ``kafka``; without it that mechanism is refused):
        a function of no argument returning ``(token, expiry)`` or ``(token,
        expiry, principal)`` (:data:`OAuthTokenProvider`). Every Kafka client
        of this client takes its token from it; it is called when the first
        needs one and again half-way through each token's life, on a
        background thread (keep it quick and thread-safe; it must not use
        the event loop of an :class:`AsyncClient`). An exception it raises
        fails the operation that needed the token at once:
        :class:`TransientError` with the exception as ``__cause__``, or
        :class:`FatalError` when it raised :class:`FatalError`; a return
        value of another shape or an expired token raises
        :class:`InvalidArgumentError`. A token the broker refuses is a
        :class:`FatalError`. A non-callable raises ``TypeError`` here."""
        self._native = _native._Client(
            kafka,
            partitions,
            state_topic,
            connect_timeout=connect_timeout,
            operation_timeout=operation_timeout,
            oauth_token=oauth_token,
        )

    @classmethod
    def _on_native(cls: Type[_C], native: _native._Client) -> _C:
        """A client on ``native``, already built (a test process's, see
        :mod:`krabka_coordination.testing`)."""
        client = cls.__new__(cls)
        client._native = native
        return client

    @property
    def partitions(self) -> int:
        """The partition count of the state topic."""
        return self._native.partitions

    @property
    def state_topic(self) -> str:
        """The name of the state topic."""
        return self._native.state_topic

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._native.closed

    def close(self) -> None:
        """Closes the client and ends everything it started: resigns every
        leadership it holds (all at once, each within its lease, so the
        standbys take over at once), cancels its pending acquires (they raise
        :class:`Cancelled`), stops its leader loops and ends its
        observers, then lets go of the shared Kafka clients. Returns once
        that is done. Further calls on this client raise
        :class:`InvalidArgumentError` ("the client is closed"). Idempotent.
        Blocks, also on an :class:`AsyncClient` (use its :meth:`aclose` in
        a coroutine)."""
        self._native.close().wait()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"partitions={self.partitions}"
        return f"<{type(self).__name__} {state}>"


class Client(_ClientBase):
    """A blocking client of a coordination cluster (see the package
    documentation). Blocking calls release the GIL and let Ctrl-C
    interrupt. Usable from any thread; ``with`` closes it."""

    __slots__ = ()

    def acquire_leadership(
        self,
        role: str,
        member: str,
        *,
        lease_duration: Optional[Union[float, timedelta]] = None,
        renew_interval: Optional[Union[float, timedelta]] = None,
        challenge_stagger: Optional[Union[float, timedelta]] = None,
        timeout: Optional[Union[float, timedelta]] = None,
        on_event: Optional[EventCallback] = None,
    ) -> Leadership:
        """Registers ``member`` in ``role``, waits for its turn, mints the
        epoch, writes the first lease, and returns the held
        :class:`Leadership`. Durations are seconds (the core's defaults: a 30
        s lease renewed every 10 s, 5 s between challenger ranks).

        ``timeout`` (seconds, ``None``: wait as long as it takes) bounds the
        wait: an acquire that has not won by then deregisters the member and
        raises :class:`AcquireTimeout` (a ``TimeoutError``). The bound
        covers the whole acquire (registering, the wait, the mint), so give
        it at least a few round trips to the cluster.

        Ctrl-C stops a waiting acquire: the member is deregistered (within 10
        s) before ``KeyboardInterrupt`` is raised, and a role won in that
        instant is resigned. A second acquire of a role this client is
        acquiring or holds raises :class:`InvalidArgumentError`.

        ``on_event`` (:data:`EventCallback`) is called with each of the
        member's events from its registration on (``registered``,
        ``waiting`` with the ``holder`` and its ``token``, ``elected``, the
        renewals, up to the end of the term), in order, on the package's
        ``krabka-events`` thread: keep it quick and thread-safe, and never
        block in it (it holds up the events of every member of the process).
        What it raises goes to ``sys.unraisablehook``."""
        pending = self._native.acquire(
            role, member, lease_duration, renew_interval, challenge_stagger, timeout, on_event
        )
        native = pending.wait()
        if native is None:
            raise _timed_out(role, member, timeout)
        return Leadership(native)

    def lead(
        self,
        role: str,
        member: str,
        work: LeadWork,
        *,
        lease_duration: Optional[Union[float, timedelta]] = None,
        renew_interval: Optional[Union[float, timedelta]] = None,
        challenge_stagger: Optional[Union[float, timedelta]] = None,
        on_event: Optional[EventCallback] = None,
        stop: Optional[threading.Event] = None,
    ) -> None:
        """Leads ``role`` as ``member`` term after term: waits for the turn
        as :meth:`acquire_leadership` does, calls ``work(leadership,
        term_ended)`` with the held :class:`Leadership` and the term's
        :class:`TermEnded`, and contends again, until stopped. The rules are
        the core's leader loop:

        * ``work`` returns: the role is resigned (the hand-over is
          immediate) and the member contends again, from the tail of the
          roster;
        * ``work`` raises: the role is resigned and ``lead`` raises that
          exception;
        * the term ends under the work (fenced, the lease expired):
          ``term_ended`` is set; once ``work`` returns the member contends
          again after a backoff (doubling while terms stay shorter than a
          lease);
        * ``stop`` is set (from any thread) or Ctrl-C: a waiting member
          deregisters, a running term's ``term_ended`` is set, the role is
          resigned once ``work`` returns, and ``lead`` returns (Ctrl-C:
          raises ``KeyboardInterrupt``, after the clean-up, within 10 s).

        ``work`` runs on the calling thread and must return soon after
        ``term_ended`` is set (``term_ended.wait(timeout)`` is a good pause
        between units of work). ``on_event`` gets the member's events of
        every term (see :meth:`acquire_leadership`). Arguments are checked
        here, before any I/O: a non-callable ``work`` or ``on_event``, or a
        ``stop`` that is not an Event, raises ``TypeError``; bad timings
        :class:`InvalidArgumentError`."""
        _lead.check_work(work)
        _lead.check_stop(stop)
        native = self._native.leader_loop(role, member, lease_duration, renew_interval, challenge_stagger, on_event)
        _lead.run_blocking(native, work, stop)

    def describe_leadership(self, role: str) -> LeadershipStatus:
        """The role's current token at its transaction coordinator: one
        DescribeTransactions request once the coordinator is known."""
        return self._native.describe_leadership(role).wait()

    def describe_role_state(self, role: str) -> RoleStateReport:
        """The roster (in rank order) and the lease of ``role``."""
        return self._native.describe_role_state(role).wait()

    def observe(self, *roles: str, renewals: bool = False) -> Observer:
        """Watches ``roles`` without joining them: an :class:`Observer`
        whose iteration yields a :class:`RoleView` at each change of a role
        (who leads, with which token and lease, the roster), through this
        client's state reader; nothing is written. ``renewals=True``
        reports each renewal too (``"renewed"``). No role, or a role the
        record layout cannot hold, raises :class:`InvalidArgumentError`
        here; nothing waits for Kafka."""
        return Observer(self._native.observe(roles, renewals))

    def ensure_state_topic(
        self,
        *,
        development: bool = False,
        replication_factor: Optional[int] = None,
        min_insync_replicas: Optional[int] = None,
    ) -> TopicReport:
        """Creates ``__coordination_state`` (compacted, this client's
        partition count) unless it exists, then checks it. The defaults are
        what a production cluster needs: replication factor 3 and
        ``min.insync.replicas`` 2. ``development=True`` makes them 1 and 1
        for a single-broker development cluster; explicit values win over
        either. An existing topic is left as it is; one of another partition
        count or cleanup policy is refused."""
        return self._native.ensure_state_topic(development, replication_factor, min_insync_replicas).wait()

    def check_state_topic(self) -> TopicReport:
        """Checks that the state topic exists, is compacted and has this
        client's partition count."""
        return self._native.check_state_topic().wait()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()


class AsyncClient(_ClientBase):
    """An asyncio client of a coordination cluster (see the package
    documentation). The work runs on the package's runtime, off the event
    loop; ``async with`` closes it."""

    __slots__ = ()

    def acquire_leadership(
        self,
        role: str,
        member: str,
        *,
        lease_duration: Optional[Union[float, timedelta]] = None,
        renew_interval: Optional[Union[float, timedelta]] = None,
        challenge_stagger: Optional[Union[float, timedelta]] = None,
        timeout: Optional[Union[float, timedelta]] = None,
        on_event: Optional[EventCallback] = None,
    ) -> AsyncAcquire:
        """Registers, waits for the turn and takes the role (see
        :meth:`Client.acquire_leadership`, and its ``timeout``, which raises
        :class:`AcquireTimeout`). Await it for the
        :class:`AsyncLeadership`, or use it directly in ``async with``
        (``async with client.acquire_leadership(role, member) as
        leadership:``), which resigns when the block ends. Nothing starts
        until it is awaited or entered. Cancelling the awaiting task (or
        ``asyncio.wait_for`` running out) deregisters the member; a role won
        in that instant is resigned. Arguments are checked when it starts.

        ``on_event`` (:data:`EventCallback`) is called with each of the
        member's events from its registration on, in order, on the event
        loop that started the acquire (``loop.call_soon_threadsafe``); what
        it raises goes to ``sys.unraisablehook``."""
        return AsyncAcquire(self, role, member, lease_duration, renew_interval, challenge_stagger, timeout, on_event)

    async def lead(
        self,
        role: str,
        member: str,
        work: AsyncLeadWork,
        *,
        lease_duration: Optional[Union[float, timedelta]] = None,
        renew_interval: Optional[Union[float, timedelta]] = None,
        challenge_stagger: Optional[Union[float, timedelta]] = None,
        on_event: Optional[EventCallback] = None,
    ) -> None:
        """Leads ``role`` as ``member`` term after term (see
        :meth:`Client.lead` for the rules): ``await work(leadership,
        term_ended)`` runs once per term with the held
        :class:`AsyncLeadership` and an :class:`AsyncTermEnded` (an
        ``asyncio.Event`` with the term's ``number``) that is set, on this
        loop, when the term ends or the loop stops. Cancelling the task
        that awaits ``lead`` stops it: a waiting member deregisters; a
        running ``work`` is cancelled (``CancelledError`` inside it), the
        role is resigned, and the cancel propagates. ``work`` raising
        resigns the role and ``lead`` raises that exception. ``on_event`` is
        called on this loop. Arguments are checked when it starts, before
        any I/O."""
        _lead.check_work(work)
        native = self._native.leader_loop(
            role,
            member,
            lease_duration,
            renew_interval,
            challenge_stagger,
            on_event,
            asyncio.get_running_loop(),
        )
        await _lead.run_async(native, work)

    async def describe_leadership(self, role: str) -> LeadershipStatus:
        """The role's current token at its transaction coordinator."""
        return await self._native.describe_leadership(role)

    async def describe_role_state(self, role: str) -> RoleStateReport:
        """The roster (in rank order) and the lease of ``role``."""
        return await self._native.describe_role_state(role)

    def observe(self, *roles: str, renewals: bool = False) -> AsyncObserver:
        """Watches ``roles`` without joining them: an :class:`AsyncObserver`
        for ``async for`` (see :meth:`Client.observe`). Not a coroutine:
        the roles are checked, and the reads start, at the call."""
        return AsyncObserver(self._native.observe(roles, renewals))

    async def ensure_state_topic(
        self,
        *,
        development: bool = False,
        replication_factor: Optional[int] = None,
        min_insync_replicas: Optional[int] = None,
    ) -> TopicReport:
        """Creates and checks the state topic (see
        :meth:`Client.ensure_state_topic`)."""
        return await self._native.ensure_state_topic(development, replication_factor, min_insync_replicas)

    async def check_state_topic(self) -> TopicReport:
        """Checks the state topic (see :meth:`Client.check_state_topic`)."""
        return await self._native.check_state_topic()

    async def aclose(self) -> None:
        """Closes the client without blocking the event loop (see
        :meth:`close`: resigns what it holds, cancels its acquires, stops
        its loops and observers); ``async with`` calls it."""
        await self._native.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await self.aclose()


class AsyncAcquire:
    """An acquire of :meth:`AsyncClient.acquire_leadership`, not started:
    ``await`` it for the :class:`AsyncLeadership`, or enter it with ``async
    with`` (the block gets the leadership and resigns it at the end). It
    runs once."""

    __slots__ = ("_args", "_client", "_leadership", "_on_event")

    def __init__(
        self,
        client: AsyncClient,
        role: str,
        member: str,
        lease_duration: Optional[Union[float, timedelta]],
        renew_interval: Optional[Union[float, timedelta]],
        challenge_stagger: Optional[Union[float, timedelta]],
        timeout: Optional[Union[float, timedelta]],
        on_event: Optional[EventCallback] = None,
    ) -> None:
        self._client = client
        self._args = (role, member, lease_duration, renew_interval, challenge_stagger, timeout)
        self._on_event = on_event
        self._leadership: Optional[AsyncLeadership] = None

    async def _acquire(self) -> AsyncLeadership:
        role, member, lease_duration, renew_interval, challenge_stagger, timeout = self._args
        pending = self._client._native.acquire(
            role,
            member,
            lease_duration,
            renew_interval,
            challenge_stagger,
            timeout,
            self._on_event,
            asyncio.get_running_loop() if self._on_event is not None else None,
        )
        native = await pending
        if native is None:
            raise _timed_out(role, member, timeout)
        return AsyncLeadership(native)

    def __await__(self) -> Generator[Any, None, AsyncLeadership]:
        return self._acquire().__await__()

    async def __aenter__(self) -> AsyncLeadership:
        self._leadership = await self._acquire()
        return await self._leadership.__aenter__()

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        if self._leadership is not None:
            await self._leadership.__aexit__(exc_type, exc, tb)

    def __repr__(self) -> str:
        return f"<AsyncAcquire of role {self._args[0]!r} by member {self._args[1]!r}>"
