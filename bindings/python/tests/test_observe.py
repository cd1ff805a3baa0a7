"""The observer on the real Kafka: a third party that watches a role without
joining it (``Client.observe``, ``AsyncClient.observe``) sees a hand-over
and a crash failover in order (and the standby, through ``on_event``, whom
it waits for), each new leader with the token the role's
transaction coordinator reports (``describe_leadership``). The member that
crashes is a separate process (``member_proc.py``) killed with SIGKILL.
Also: the arguments the core refuses, ``close()`` from another thread, a
bounded ``next``, and Ctrl-C of a waiting iteration (no view is lost).
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from types import FrameType
from typing import Dict, List, Optional, Tuple

import pytest

import krabka_coordination as kc
from kafka_support import Member, Timings, token_of

# A 3 s lease renewed every second, half a second between challenger ranks.
TIMINGS = Timings(lease_duration=3.0, renew_interval=1.0, challenge_stagger=0.5)
MEMBER_ARGS = ("--lease", "3", "--renew", "1", "--stagger", "0.5")


def next_view(observer: kc.Observer, what: str, within: float) -> kc.RoleView:
    view = observer.next(timeout=within)
    if view is None:
        pytest.fail(f"no view within {within} s while waiting for {what} (closed: {observer.closed})")
    return view


def expect(observer: kc.Observer, change: str, within: float) -> kc.RoleView:
    """The next view of ``change``, roster changes aside; any other change
    first fails the test, so the order is asserted."""
    deadline = time.monotonic() + within
    while True:
        view = next_view(observer, change, max(deadline - time.monotonic(), 0.0))
        if view.change == change:
            return view
        assert view.change == "roster", f"expected {change!r} next (roster changes aside), got {view!r}"


def expect_roster(observer: kc.Observer, members: List[str], within: float = 30.0) -> kc.RoleView:
    deadline = time.monotonic() + within
    while True:
        view = next_view(observer, f"the roster {members}", max(deadline - time.monotonic(), 0.0))
        if view.members == members:
            return view
        assert view.change == "roster", f"only roster changes before {members}: {view!r}"


class AsyncWatch:
    """An ``AsyncObserver`` iterated with ``async for`` on a loop of its own
    thread, keeping every view until it is closed."""

    def __init__(self, kafka: Dict[str, str], role: str) -> None:
        self.views: List[kc.RoleView] = []
        self.error: Optional[BaseException] = None
        self.started = threading.Event()
        self._observer: Optional[kc.AsyncObserver] = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run(kafka, role)), daemon=True)
        self._thread.start()
        assert self.started.wait(20), "the async observer did not start"

    async def _run(self, kafka: Dict[str, str], role: str) -> None:
        try:
            async with kc.AsyncClient(kafka) as client, client.observe(role) as observer:
                self._observer = observer
                self.started.set()
                async for view in observer:
                    self.views.append(view)
        except BaseException as e:  # reported by stop()
            self.error = e
            self.started.set()

    def wait_initial(self, within: float = 20.0) -> kc.RoleView:
        deadline = time.monotonic() + within
        while not self.views:
            assert self.error is None, repr(self.error)
            assert time.monotonic() < deadline, "no initial view from the async observer"
            time.sleep(0.05)
        return self.views[0]

    def stop(self) -> List[kc.RoleView]:
        assert self._observer is not None
        self._observer.close()
        self._thread.join(10)
        assert not self._thread.is_alive(), "close() did not end the async iteration"
        assert self.error is None, repr(self.error)
        return self.views


def leaders(views: List[kc.RoleView]) -> List[Tuple[str, Optional[str], Optional[kc.FencingToken]]]:
    """The views that are not roster changes: (change, leader, token)."""
    return [
        (v.change, v.leader.member if v.leader else None, v.leader.token if v.leader else None)
        for v in views
        if v.change != "roster"
    ]


def test_an_observer_sees_a_handover_and_a_crash_failover_in_order(kafka: Dict[str, str], role: str) -> None:
    watcher = kc.Client(kafka)
    observer = watcher.observe(role)
    watch = AsyncWatch(kafka, role)
    ca, cc = kc.Client(kafka), kc.Client(kafka)
    b: Optional[Member] = None
    c_result: List[object] = []
    c_thread: Optional[threading.Thread] = None
    try:
        assert observer.roles == [role]
        initial = next_view(observer, "the initial view", 20)
        assert initial.change == "initial" and initial.leader is None and initial.roster == [], repr(initial)
        assert initial.role == role and initial.partition == kc.role_partition(role, watcher.partitions)
        # Both observers have read the role before anything happens to it.
        first = watch.wait_initial()
        assert first.change == "initial" and first.leader is None, repr(first)

        # a leads (in this process).
        a = ca.acquire_leadership(role, "a", **TIMINGS)
        v = expect(observer, "elected", 10)
        assert v.leader is not None and v.leader.member == "a" and v.leader.token == a.token, repr(v)
        assert watcher.describe_leadership(role).token == v.leader.token
        assert "change='elected'" in repr(v) and "member='a'" in repr(v), repr(v)

        # b (another process) waits behind a.
        b = Member(kafka, role, "b", *MEMBER_ARGS)
        joined = expect_roster(observer, ["a", "b"])
        assert joined.leader is not None and joined.leader.member == "a"
        assert [(e.member, e.rank) for e in joined.roster] == [("a", 0), ("b", 1)]

        # The hand-over: a resigns, the lease is cleared, b is elected.
        a.resign()
        cleared = expect(observer, "cleared", 10)
        assert cleared.leader is None and cleared.lapsed is None, repr(cleared)
        token_b = token_of(b.expect("elected", 30))
        v = expect(observer, "elected", 10)
        assert v.leader is not None and (v.leader.member, v.leader.token) == ("b", token_b), repr(v)
        assert token_b > a.token
        assert watcher.describe_leadership(role).token == token_b

        # c (this process) waits behind b, and sees whom it waits for
        # through on_event: its events from its registration on.
        c_events: List[kc.Event] = []
        c_waiting = threading.Event()

        def on_c_event(event: kc.Event) -> None:
            c_events.append(event)
            if event.kind == "waiting":
                c_waiting.set()

        def acquire_c() -> None:
            try:
                c_result.append(cc.acquire_leadership(role, "c", on_event=on_c_event, **TIMINGS))
            except BaseException as e:
                c_result.append(e)

        c_thread = threading.Thread(target=acquire_c, daemon=True)
        c_thread.start()
        expect_roster(observer, ["b", "c"])
        assert c_waiting.wait(10), f"c reported no waiting event: {c_events}"
        assert c_events[0].kind == "registered", c_events
        waiting = next(e for e in c_events if e.kind == "waiting")
        assert (waiting.holder, waiting.token) == ("b", token_b), repr(waiting)
        assert waiting.rank == 0 and waiting.challenge_at is not None, repr(waiting)

        # The crash: b is SIGKILLed; its lease lapses, then c is elected.
        b.send(signal.SIGKILL)
        lapsed = expect(observer, "lapsed", 3.0 + 10)
        assert lapsed.leader is None and lapsed.lapsed is not None, repr(lapsed)
        assert (lapsed.lapsed.member, lapsed.lapsed.token) == ("b", token_b)
        assert lapsed.at >= lapsed.lapsed.deadline, f"a lapse is reported at the deadline, not before: {lapsed!r}"
        v = expect(observer, "elected", 20)
        c_thread.join(20)
        assert len(c_result) == 1, c_result
        c = c_result[0]
        assert isinstance(c, kc.Leadership), c
        assert v.leader is not None and (v.leader.member, v.leader.token) == ("c", c.token), repr(v)
        assert c.token > token_b
        assert watcher.describe_leadership(role).token == c.token
        c.resign()
        expect(observer, "cleared", 10)

        # The async observer saw the same changes in the same order.
        want = [
            ("initial", None, None),
            ("elected", "a", a.token),
            ("cleared", None, None),
            ("elected", "b", token_b),
            ("lapsed", None, None),
            ("elected", "c", c.token),
            ("cleared", None, None),
        ]
        assert leaders(observer_views_until_quiet(watch, len(want))) == want
    finally:
        observer.close()
        if b is not None:
            b.kill()
        for client in (ca, cc, watcher):
            client.close()
    assert observer.closed and observer.next(timeout=0) is None


def observer_views_until_quiet(watch: AsyncWatch, changes: int, within: float = 10.0) -> List[kc.RoleView]:
    """The async observer's views once it reported ``changes`` non-roster
    views (it reads on its own and may lag the blocking one a little)."""
    deadline = time.monotonic() + within
    while len([v for v in watch.views if v.change != "roster"]) < changes and time.monotonic() < deadline:
        time.sleep(0.05)
    return watch.stop()


def test_observe_refuses_bad_arguments_at_the_call(client: kc.Client, kafka: Dict[str, str]) -> None:
    with pytest.raises(kc.InvalidArgumentError, match="at least one role"):
        client.observe()
    with pytest.raises(kc.InvalidArgumentError, match="NUL"):
        client.observe("fine", "a\0b")
    with pytest.raises(TypeError, match="role"):
        client.observe(7)  # type: ignore[arg-type]
    # The asyncio client checks at the call too (no loop needed, nothing awaited).
    async_client = kc.AsyncClient(kafka)
    try:
        with pytest.raises(kc.InvalidArgumentError, match="at least one role"):
            async_client.observe()
    finally:
        async_client.close()
    with client.observe("py-observe-args") as observer:
        with pytest.raises(kc.InvalidArgumentError, match="timeout"):
            observer.next(timeout=-1)


def test_close_from_another_thread_ends_a_blocked_iteration(client: kc.Client, role: str) -> None:
    observer = client.observe(role, role)
    assert observer.roles == [role], "each role once"
    assert next_view(observer, "the initial view", 20).change == "initial"
    # Nothing happens to the role: a bounded wait returns None, not closed.
    started = time.monotonic()
    assert observer.next(timeout=0.5) is None
    assert time.monotonic() - started >= 0.45
    assert not observer.closed

    seen: List[kc.RoleView] = []
    ended = threading.Event()

    def iterate() -> None:
        for view in observer:
            seen.append(view)
        ended.set()

    t = threading.Thread(target=iterate, daemon=True)
    t.start()
    time.sleep(0.5)
    assert not ended.is_set(), "the iteration waits for a view"
    observer.close()
    assert ended.wait(5), "close() from another thread ended the iteration"
    assert seen == []
    assert observer.closed and observer.next() is None and list(observer) == []


def test_ctrl_c_interrupts_a_waiting_iteration_without_losing_a_view(
    client: kc.Client, kafka: Dict[str, str], role: str
) -> None:
    def interrupt(signum: int, frame: Optional[FrameType]) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        with client.observe(role, renewals=True) as observer:
            assert next_view(observer, "the initial view", 20).change == "initial"
            signal.setitimer(signal.ITIMER_REAL, 0.3)
            started = time.monotonic()
            with pytest.raises(KeyboardInterrupt):
                next(observer)
            assert time.monotonic() - started < 2.0, "the interrupt ended the wait promptly"
            # The views made after the interrupt reach the next call.
            with kc.Client(kafka) as other, other.acquire_leadership(role, "a", **TIMINGS) as a:
                v = expect(observer, "elected", 10)
                assert v.leader is not None and v.leader.token == a.token
                # renewals=True: the renewals are views too.
                renewed = expect(observer, "renewed", 5)
                assert renewed.leader is not None and renewed.leader.deadline > v.leader.deadline
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
