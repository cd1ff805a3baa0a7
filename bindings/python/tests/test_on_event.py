"""``on_event=`` on a real Kafka: a member's events reach the callback from
its registration on, in order, on the ``krabka-events`` thread (blocking
``Client``) or on the event loop that started the acquire
(``AsyncClient``); a callback that raises is reported to
``sys.unraisablehook`` and changes nothing for the member; a forked child
gets its own dispatcher thread. The ``waiting``
event of a standby (holder and token) is checked in ``test_observe.py``."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

import krabka_coordination as kc
from kafka_support import FAST
from test_runtime import FORK_WARNING, _in_child


def thread_name(native_id: int) -> str:
    """The OS name of a thread of this process (Linux)."""
    return Path(f"/proc/self/task/{native_id}/comm").read_text().strip()


class Recorder:
    """An ``on_event`` callback keeping each event, the native id of the
    thread it ran on, and an Event per kind seen."""

    def __init__(self) -> None:
        self.events: List[kc.Event] = []
        self.threads: List[int] = []
        self._lock = threading.Lock()
        self._seen: Dict[str, threading.Event] = {}

    def _flag(self, kind: str) -> threading.Event:
        with self._lock:
            return self._seen.setdefault(kind, threading.Event())

    def __call__(self, event: kc.Event) -> None:
        with self._lock:
            self.events.append(event)
            self.threads.append(threading.get_native_id())
        self._flag(event.kind).set()

    def wait_for(self, kind: str, within: float = 20.0) -> None:
        assert self._flag(kind).wait(within), f"no {kind!r} event within {within} s: {self.kinds()}"

    def kinds(self) -> List[str]:
        with self._lock:
            return [e.kind for e in self.events]


def assert_in_order_from_registration(kinds: List[str], role: str, events: List[kc.Event]) -> None:
    assert kinds[0] == "registered", kinds
    assert kinds.index("elected") < kinds.index("resigned") < kinds.index("deregistered"), kinds
    assert kinds[-2:] == ["resigned", "deregistered"], kinds
    assert all((e.role, e.member) == (role, "m") for e in events)
    ats = [e.at for e in events]
    assert ats == sorted(ats), f"the events arrive in the order the member took them: {ats}"


def test_blocking_on_event_gets_every_event_from_registration_on_its_thread(client: kc.Client, role: str) -> None:
    rec = Recorder()
    leadership = client.acquire_leadership(role, "m", on_event=rec, **FAST)
    try:
        rec.wait_for("elected")
        elected = next(e for e in rec.events if e.kind == "elected")
        assert elected.token == leadership.token
        registered = rec.events[0]
        assert registered.kind == "registered"
        assert registered.partition == leadership.partition and registered.offset is not None
        rec.wait_for("renewed", 5)
    finally:
        leadership.resign()
    rec.wait_for("deregistered")
    assert_in_order_from_registration(rec.kinds(), role, rec.events)
    # One thread of the package calls every callback, never the caller's.
    assert set(rec.threads) != {threading.get_native_id()}
    assert {thread_name(t) for t in rec.threads} == {"krabka-events"}, rec.threads


def test_async_on_event_runs_on_the_loop_that_started_the_acquire(kafka: Dict[str, str], role: str) -> None:
    rec = Recorder()

    async def main() -> Tuple[int, kc.FencingToken]:
        seen = {kind: asyncio.Event() for kind in ("elected", "deregistered")}

        def on_event(event: kc.Event) -> None:
            rec(event)
            if event.kind in seen:
                seen[event.kind].set()  # safe only on the loop's own thread

        async with kc.AsyncClient(kafka) as client:
            async with client.acquire_leadership(role, "m", on_event=on_event, **FAST) as leadership:
                token = leadership.token
                await asyncio.wait_for(seen["elected"].wait(), 10)
            await asyncio.wait_for(seen["deregistered"].wait(), 10)
            return threading.get_native_id(), token

    loop_thread, token = asyncio.run(asyncio.wait_for(main(), 60))
    assert_in_order_from_registration(rec.kinds(), role, rec.events)
    assert set(rec.threads) == {loop_thread}, "every callback ran on the loop's thread"
    assert next(e for e in rec.events if e.kind == "elected").token == token


def test_a_raising_callback_goes_to_unraisablehook_and_the_member_is_elected(
    client: kc.Client, role: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    reported: List[Any] = []
    hooked = threading.Event()

    def hook(unraisable: Any) -> None:
        reported.append((unraisable.exc_type, str(unraisable.exc_value), unraisable.object))
        hooked.set()

    monkeypatch.setattr(sys, "unraisablehook", hook)
    calls: List[str] = []

    def callback(event: kc.Event) -> None:
        calls.append(event.kind)
        if event.kind == "registered":
            raise RuntimeError("the callback failed")

    with client.acquire_leadership(role, "m", on_event=callback, **FAST) as leadership:
        assert leadership.is_held
        assert hooked.wait(10), "the exception reached sys.unraisablehook"
    assert reported[0][:2] == (RuntimeError, "the callback failed"), reported
    assert reported[0][2] is callback
    # Later callbacks still ran, after the one that raised.
    assert calls[0] == "registered" and "elected" in calls, calls
    assert len(reported) == 1, reported


def test_on_event_must_be_callable(client: kc.Client, kafka: Dict[str, str], role: str) -> None:
    with pytest.raises(TypeError, match="on_event must be a callable"):
        client.acquire_leadership(role, "m", on_event=42, **FAST)  # type: ignore[arg-type]

    async def main() -> None:
        async with kc.AsyncClient(kafka) as c:
            with pytest.raises(TypeError, match="on_event must be a callable"):
                await c.acquire_leadership(role, "m", on_event="no", **FAST)  # type: ignore[arg-type]

    asyncio.run(main())
    # Nothing was registered.
    assert client.describe_role_state(role).members == []


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() is POSIX only")
@pytest.mark.filterwarnings(FORK_WARNING)
def test_a_forked_child_gets_its_own_events_thread(client: kc.Client, kafka: Dict[str, str], role: str) -> None:
    # The parent's krabka-events thread runs (it is not copied by fork()).
    parent = Recorder()
    with client.acquire_leadership(role, "m", on_event=parent, **FAST):
        parent.wait_for("elected")

    def child() -> bool:
        rec = Recorder()
        with kc.Client(kafka) as own:
            with own.acquire_leadership(role, "child", on_event=rec, **FAST):
                rec.wait_for("elected")
            rec.wait_for("deregistered")
        return rec.kinds()[0] == "registered" and {thread_name(t) for t in rec.threads} == {"krabka-events"}

    assert _in_child(os.fork, child) == 0


_EXIT_WHILE_DELIVERING = """
import sys, time
import krabka_coordination as kc

client = kc.Client({"bootstrap.servers": sys.argv[1]})

def on_event(event: kc.Event) -> None:
    time.sleep(0.02)             # releases the GIL mid-callback
    print(event.kind, flush=True)

leadership = client.acquire_leadership(sys.argv[2], "host-a", on_event=on_event)
leadership.resign()
# The script ends here, its events still being delivered.
"""


def test_the_interpreter_exits_cleanly_while_callbacks_run(kafka: Dict[str, str], role: str) -> None:
    """A program that exits while the ``krabka-events`` thread is inside a
    callback (with the GIL released) exits 0. Before the package's
    ``atexit`` gate the thread took the GIL back during finalization, and
    CPython's ``pthread_exit`` of it aborted the process (SIGABRT, about
    one run in three)."""
    import subprocess

    for attempt in range(5):
        done = subprocess.run(
            [sys.executable, "-c", _EXIT_WHILE_DELIVERING, kafka["bootstrap.servers"], f"{role}-{attempt}"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, f"attempt {attempt}: exit {done.returncode}\n{done.stderr[-2000:]}"
        assert "Fatal Python error" not in done.stderr, done.stderr[-2000:]
        assert done.stdout.splitlines()[:1] == ["registered"], done.stdout
