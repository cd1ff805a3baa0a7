"""The leader loop behind :meth:`Client.lead` and :meth:`AsyncClient.lead`:
the core's rules (``LeaderLoop``), driven a term at a time.

The native loop (``_native._LeaderLoop``) yields each term once this member
leads; the work runs here, in Python, with the term's leadership and its end
signal; then the native ``finish`` resigns a role still held and owes the
core's backoff before the next term. What to do when the work returns,
raises or outlives its term is the core's (see the README); this module only
calls the work and relays its exception.
"""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta
from typing import Any, Awaitable, Callable, Optional, Union

from . import _native
from ._leadership import AsyncLeadership, Leadership

__all__ = ["AsyncLeadWork", "AsyncTermEnded", "LeadWork", "TermEnded"]


class TermEnded:
    """The end signal of a term of :meth:`Client.lead`, like a
    ``threading.Event`` that only the loop sets: it is set once the term has
    ended (fenced, the lease expired, a fatal error) or the loop is stopped
    (``stop`` set, Ctrl-C); the work must return then."""

    __slots__ = ("_term",)

    def __init__(self, term: _native._Term) -> None:
        self._term = term

    def is_set(self) -> bool:
        """True once the term ended or the loop was stopped."""
        return self._term.ended

    def wait(self, timeout: Optional[Union[float, timedelta]] = None) -> bool:
        """Blocks until the signal is set (``True``) or ``timeout`` seconds
        pass (``False``; ``None``: no limit). The GIL is released and Ctrl-C
        interrupts, as every blocking call of the package."""
        return self._term.wait_ended(timeout).wait()

    @property
    def number(self) -> int:
        """The term's number in its loop, from 1."""
        return self._term.number

    def __repr__(self) -> str:
        return f"<TermEnded term={self.number} set={self.is_set()}>"


class AsyncTermEnded(asyncio.Event):
    """The end signal of a term of :meth:`AsyncClient.lead`: an
    ``asyncio.Event`` that the loop sets, on the event loop, once the term
    has ended (fenced, the lease expired, a fatal error) or the loop is
    stopped; the work must return then. Like :class:`TermEnded`, it has the
    term's :attr:`number`."""

    def __init__(self, number: int) -> None:
        super().__init__()
        self._number = number

    @property
    def number(self) -> int:
        """The term's number in its loop, from 1."""
        return self._number

    def __repr__(self) -> str:
        return f"<AsyncTermEnded term={self.number} set={self.is_set()}>"


LeadWork = Callable[[Leadership, TermEnded], Any]
"""The work of :meth:`Client.lead`: called once per term with the held
:class:`Leadership` and the term's :class:`TermEnded`; its return value is
ignored."""

AsyncLeadWork = Callable[[AsyncLeadership, AsyncTermEnded], Awaitable[Any]]
"""The work of :meth:`AsyncClient.lead`: an async function called once per
term with the held :class:`AsyncLeadership` and its :class:`AsyncTermEnded`
(an ``asyncio.Event`` set on the loop when the term ends, with the term's
``number``)."""


def check_work(work: Any) -> None:
    if not callable(work):
        raise TypeError(f"work must be a callable taking (leadership, term_ended), got {type(work).__name__}")


def check_stop(stop: Any) -> None:
    if stop is not None and not (callable(getattr(stop, "is_set", None)) and callable(getattr(stop, "wait", None))):
        raise TypeError(f"stop must be a threading.Event (is_set(), wait(timeout)), got {type(stop).__name__}")


# How often the watcher of a `stop` event looks at it (the event has no
# callback to hook into).
_STOP_POLL = 0.05


def _watch_stop(stop: threading.Event, native: _native._LeaderLoop, finished: threading.Event) -> None:
    while not finished.is_set():
        if stop.wait(_STOP_POLL):
            native.stop()
            return


def run_blocking(native: _native._LeaderLoop, work: LeadWork, stop: Optional[threading.Event]) -> None:
    """Runs the loop on this thread until it is stopped (``stop`` set), the
    work raises (re-raised after the resign) or Ctrl-C (raised after the
    member deregistered or resigned)."""
    finished = threading.Event()
    if stop is not None:
        threading.Thread(
            target=_watch_stop, args=(stop, native, finished), name="krabka-lead-stop", daemon=True
        ).start()
    try:
        while True:
            if stop is not None and stop.is_set():
                native.stop()
            term = native.next_term().wait()
            if term is None:
                return
            try:
                work(Leadership(term.leadership), TermEnded(term))
            except BaseException:
                # The loop ends with the work's exception: resign, and
                # nothing contends again.
                native.stop()
                native.finish(term).wait()
                raise
            native.finish(term).wait()
    finally:
        native.stop()
        finished.set()


async def _set_when_ended(term: _native._Term, ended: AsyncTermEnded) -> None:
    await term.wait_ended()
    ended.set()


async def run_async(native: _native._LeaderLoop, work: AsyncLeadWork) -> None:
    """Runs the loop on the running event loop until the awaiting task is
    cancelled (the member deregisters or resigns) or the work raises
    (re-raised after the resign)."""
    loop = asyncio.get_running_loop()
    try:
        while True:
            term = await native.next_term()
            if term is None:
                return
            ended = AsyncTermEnded(term.number)
            watch = loop.create_task(_set_when_ended(term, ended))
            try:
                await work(AsyncLeadership(term.leadership), ended)
            except BaseException:
                native.stop()
                await native.finish(term)
                raise
            finally:
                watch.cancel()
            await native.finish(term)
    finally:
        native.stop()
