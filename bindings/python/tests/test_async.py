"""The asyncio side of an operation (asyncio.rs), through the internal
``_runtime_ping``: results, errors through the one mapping, cancellation
that aborts the task, use from a forked child, and outcomes that reach the
loop while another thread holds the GIL without holding up the runtime."""

from __future__ import annotations

import asyncio
import ctypes
import os
import sys
import time
from typing import List, Tuple

import pytest

import krabka_coordination as kc
from kafka_support import FAST
from krabka_coordination import _native
from test_runtime import FORK_WARNING, THREAD_NAME, _in_child


def test_awaitable_runs_on_the_runtime() -> None:
    async def main() -> Tuple[int, str]:
        return await _native._runtime_ping()

    assert asyncio.run(main()) == (os.getpid(), THREAD_NAME)


def test_many_concurrent_awaitables() -> None:
    async def main() -> List[Tuple[int, str]]:
        return await asyncio.gather(*(_native._runtime_ping(2) for _ in range(50)))

    assert asyncio.run(main()) == [(os.getpid(), THREAD_NAME)] * 50


def test_outcomes_reach_the_loop_through_one_thread() -> None:
    # Outcomes ending together (a thousand acquires, the events of a
    # thousand held roles) are handed to the loop by the one delivery
    # thread, not by a thread each.
    def threads() -> int:
        return len(os.listdir("/proc/self/task"))

    async def main() -> Tuple[int, int]:
        await _native._runtime_ping()
        before = threads()
        done = await asyncio.gather(*(_native._runtime_ping(20) for _ in range(300)))
        assert len(done) == 300
        return before, threads()

    before, after = asyncio.run(main())
    assert after - before < 8, f"{before} threads before, {after} after 300 outcomes"


def test_error_of_the_future_maps_through_error_rs() -> None:
    async def main() -> None:
        await _native._runtime_ping(-1)

    with pytest.raises(kc.InvalidArgumentError, match="delay_ms must not be negative, got -1"):
        asyncio.run(main())


async def _until_idle(limit_s: float = 10.0) -> int:
    """Waits (bounded) until the runtime has no live task; returns how many
    are alive at the end. Tasks of earlier calls finish on the runtime's own
    threads a moment after their outcome reached Python."""
    for _ in range(int(limit_s / 0.01)):
        if _native._runtime_alive_tasks() == 0:
            break
        await asyncio.sleep(0.01)
    return _native._runtime_alive_tasks()


def test_cancelling_the_awaitable_aborts_the_task() -> None:
    async def main() -> int:
        assert await _until_idle() == 0
        task = asyncio.ensure_future(_native._runtime_ping(600_000))
        # Let the call start: the runtime now holds its task (and the task
        # that delivers the outcome).
        await asyncio.sleep(0)
        assert _native._runtime_alive_tasks() >= 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # Aborting is asynchronous on the runtime's side; without the abort
        # the task would sleep ten minutes and the wait below would run out.
        return await _until_idle()

    assert asyncio.run(main()) == 0


def test_timeout_through_wait_for() -> None:
    async def main() -> None:
        await asyncio.wait_for(_native._runtime_ping(600_000), timeout=0.05)

    with pytest.raises(asyncio.TimeoutError):
        asyncio.run(main())


def test_needs_a_running_event_loop() -> None:
    with pytest.raises(RuntimeError):
        _native._runtime_ping().__await__()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() is POSIX only")
@pytest.mark.filterwarnings(FORK_WARNING)
def test_forked_child_can_await() -> None:
    async def main() -> Tuple[int, str]:
        return await _native._runtime_ping()

    # The parent's runtime exists before the fork.
    assert asyncio.run(main())[0] == os.getpid()

    def child() -> bool:
        return asyncio.run(main()) == (os.getpid(), THREAD_NAME)

    assert _in_child(os.fork, child) == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="holds the GIL through libc's usleep")
def test_renewals_go_on_while_a_thread_holds_the_gil_and_outcomes_wait_for_it(client: kc.Client, role: str) -> None:
    # Outcomes of many awaited operations are due while this thread holds
    # the GIL in a long C call. They reach Python through the delivery
    # thread, so the runtime's workers stay free and the lease is renewed on
    # time.
    libc = ctypes.PyDLL(None)  # PyDLL: the call keeps the GIL
    libc.usleep.argtypes = [ctypes.c_uint]
    hold_s = 2.5  # below the 3 s lease: nobody else may take the role
    with client.acquire_leadership(role, "m", **FAST) as leadership:
        events = leadership.events()

        async def main() -> Tuple[float, float]:
            pings = [asyncio.ensure_future(_native._runtime_ping(100)) for _ in range(16)]
            await asyncio.sleep(0)  # every ping has started on the runtime
            held_from = time.time()
            libc.usleep(int(hold_s * 1_000_000))
            held_until = time.time()
            assert [p[0] for p in await asyncio.gather(*pings)] == [os.getpid()] * 16
            return held_from, held_until

        held_from, held_until = asyncio.run(main())
        renewed_while_held = []
        for event in events:
            if event.kind == "renewed" and event.at > held_from * 1000:
                if event.at >= held_until * 1000:
                    break
                renewed_while_held.append(event.at)
        assert renewed_while_held, "no renewal while the GIL was held"
        assert leadership.is_held
