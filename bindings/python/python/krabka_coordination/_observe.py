"""Watching roles without joining them: :class:`Observer` (blocking) and
:class:`AsyncObserver` (asyncio), from :meth:`Client.observe` and
:meth:`AsyncClient.observe`.

Both wrap one native observer (``_native._Observer``), the core's: it reads
the state topic as a standby does and writes nothing, so it takes no rank
and delays no election. Each yields a :class:`RoleView` per change of a
watched role: first ``"initial"`` once the role's committed records are
read, then ``"elected"``, ``"cleared"``, ``"lapsed"``, ``"roster"`` (and
``"renewed"`` with ``renewals=True``), in the order of the records that
made them. A view is a read, not a fence: only the broker decides whose
writes count. Nothing else happens here.
"""

from __future__ import annotations

from types import TracebackType
from datetime import timedelta
from typing import List, Literal, Optional, Type, Union

from . import _native
from ._native import RoleView

ChangeKind = Literal["initial", "elected", "renewed", "cleared", "lapsed", "roster"]
"""The changes of :attr:`RoleView.change` (``typing.get_args(ChangeKind)``),
for ``match`` and type checkers; the core may add changes."""

__all__ = ["AsyncObserver", "ChangeKind", "Observer"]


class _ObserverBase:
    """What both observers share: the roles, closing."""

    __slots__ = ("_native",)

    def __init__(self, native: _native._Observer) -> None:
        self._native = native

    @property
    def roles(self) -> List[str]:
        """The roles watched, sorted, each once."""
        return self._native.roles

    @property
    def closed(self) -> bool:
        """True once closed, or ended by an error."""
        return self._native.closed

    def close(self) -> None:
        """Stops the reads: an iteration waiting for a view ends, and every
        later one at once. Idempotent, from any thread."""
        self._native.close()

    def __repr__(self) -> str:
        state = ", closed" if self.closed else ""
        return f"<{type(self).__name__} of {self.roles!r}{state}>"


class Observer(_ObserverBase):
    """The views of the roles a :meth:`Client.observe` watches: ``for view
    in observer``. Each step blocks (the GIL released, Ctrl-C interrupting,
    without losing a view) until the next view; the iteration ends when the
    observer is closed (:meth:`close`, from any thread, or the end of a
    ``with`` block). An error that ends the observer (the state topic
    missing or unreadable, a record that does not decode) is raised by the
    step that meets it; a cluster that cannot be reached is retried, not
    raised."""

    __slots__ = ()

    def __iter__(self) -> Observer:
        return self

    def __next__(self) -> RoleView:
        view = self._native.next(None).wait()
        if view is None:
            raise StopIteration
        return view

    def next(self, timeout: Optional[Union[float, timedelta]] = None) -> Optional[RoleView]:
        """The next view, waiting at most ``timeout`` seconds (``None``: no
        limit); ``None`` when the time runs out first, or once the observer
        is closed (:attr:`closed` tells which). A view that comes after the
        timeout is kept for the next call."""
        return self._native.next(timeout).wait()

    def __enter__(self) -> Observer:
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()


class AsyncObserver(_ObserverBase):
    """The views of the roles an :meth:`AsyncClient.observe` watches:
    ``async for view in observer``; ends when the observer is closed
    (:meth:`close` or :meth:`aclose`, or the end of an ``async with``
    block). Cancelling the awaiting task loses no view."""

    __slots__ = ()

    def __aiter__(self) -> AsyncObserver:
        return self

    async def __anext__(self) -> RoleView:
        view = await self._native.next(None)
        if view is None:
            raise StopAsyncIteration
        return view

    async def next(self, timeout: Optional[Union[float, timedelta]] = None) -> Optional[RoleView]:
        """The next view, waiting at most ``timeout`` seconds (see
        :meth:`Observer.next`)."""
        return await self._native.next(timeout)

    async def aclose(self) -> None:
        """Closes the observer (see :meth:`close`)."""
        self.close()

    async def __aenter__(self) -> AsyncObserver:
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()
