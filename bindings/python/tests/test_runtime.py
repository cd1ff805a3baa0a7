"""The tokio runtime behind every operation: it runs tasks, and a forked
child (through ``os.fork`` with its hook, through ``multiprocessing``, and
through a bare ``fork()`` that skips Python's hooks) builds its own runtime
and can use the package. An operation is run once: a second wait is
refused."""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import sys
import signal
import threading
import time
from typing import Callable, List, Tuple

import pytest

import krabka_coordination as kc
from krabka_coordination import _native

# Forking a process that has threads (the runtime's) is the very situation
# under test; CPython 3.12+ warns about it on every fork.
FORK_WARNING = "ignore:This process .* is multi-threaded:DeprecationWarning"

pytestmark = [
    pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() is POSIX only"),
    pytest.mark.filterwarnings(FORK_WARNING),
]

THREAD_NAME = "krabka-rt"

# A child that cannot run a task on its runtime hangs rather than fails (the
# task waits for worker threads that were not copied by fork()); it is killed
# after this long and the test fails.
CHILD_TIMEOUT_S = 60.0


def _ping_ok() -> bool:
    """A runtime-backed call, then a codec call, in this process."""
    pid, thread = _native._runtime_ping().wait()
    lease = kc.Lease("child", kc.FencingToken(9, 1), 2, 3)
    return pid == os.getpid() and thread == THREAD_NAME and kc.decode_lease(kc.encode_lease(lease)) == lease


def _in_child(fork: Callable[[], int], body: Callable[[], bool]) -> int:
    """Forks with ``fork``; the child runs ``body`` and exits 0 when it
    returned True, 1 when False, 2 on an exception. Returns the child's exit
    code. The child never returns into pytest."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = fork()
    if pid == 0:
        code = 2
        try:
            code = 0 if body() else 1
        finally:
            os._exit(code)
    deadline = time.monotonic() + CHILD_TIMEOUT_S
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail(f"the forked child hung for {CHILD_TIMEOUT_S} s")
        time.sleep(0.01)
    assert os.WIFEXITED(status), f"child ended by a signal: status {status}"
    return os.WEXITSTATUS(status)


def test_ping_runs_a_task_on_a_runtime_thread() -> None:
    pid, thread = _native._runtime_ping().wait()
    assert pid == os.getpid()
    assert thread == THREAD_NAME


def test_an_operation_runs_once() -> None:
    pending = _native._runtime_ping()
    assert repr(pending) == "<_Pending operation, not started>"
    assert pending.wait() == (os.getpid(), THREAD_NAME)
    assert repr(pending) == "<_Pending operation, started>"
    with pytest.raises(RuntimeError, match="waited for or awaited already"):
        pending.wait()


def test_an_operation_error_maps_through_the_one_mapping() -> None:
    with pytest.raises(kc.InvalidArgumentError, match="delay_ms must not be negative, got -1"):
        _native._runtime_ping(-1).wait()


def test_ping_from_many_python_threads() -> None:
    results: List[Tuple[int, str]] = []
    lock = threading.Lock()

    def work() -> None:
        for _ in range(20):
            r = _native._runtime_ping().wait()
            with lock:
                results.append(r)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [(os.getpid(), THREAD_NAME)] * 80


def test_forked_child_builds_its_own_runtime() -> None:
    # The parent's runtime exists before the fork: the child inherits a
    # runtime whose threads it does not have.
    assert _native._runtime_ping().wait()[0] == os.getpid()
    assert _in_child(os.fork, _ping_ok) == 0
    # The parent's runtime is untouched by the child.
    assert _native._runtime_ping().wait() == (os.getpid(), THREAD_NAME)


def test_grandchild_after_child_used_the_runtime() -> None:
    _native._runtime_ping().wait()

    def child() -> bool:
        return _ping_ok() and _in_child(os.fork, _ping_ok) == 0 and _ping_ok()

    assert _in_child(os.fork, child) == 0


def test_fork_hook_retires_the_inherited_runtime_before_any_call() -> None:
    _native._runtime_ping().wait()

    def child() -> bool:
        # os.register_at_fork(after_in_child=...) ran already; calling the hook
        # again is harmless, and the runtime built next is this process's.
        _native._reset_runtime_after_fork()
        return _ping_ok()

    assert _in_child(os.fork, child) == 0


def test_bare_fork_without_python_hooks_is_caught_by_the_pid_check() -> None:
    _native._runtime_ping().wait()
    # libc's fork() through ctypes.PyDLL (which keeps the GIL held) skips
    # os.register_at_fork hooks entirely: only the pid check can notice.
    libc = ctypes.PyDLL(None)
    libc.fork.restype = ctypes.c_int
    assert _in_child(libc.fork, _ping_ok) == 0


def _mp_child(queue: "multiprocessing.Queue[bool]") -> None:
    queue.put(_ping_ok())


def test_multiprocessing_fork_context() -> None:
    _native._runtime_ping().wait()
    ctx = multiprocessing.get_context("fork")
    queue: "multiprocessing.Queue[bool]" = ctx.Queue()
    procs = [ctx.Process(target=_mp_child, args=(queue,), daemon=True) for _ in range(3)]
    try:
        for p in procs:
            p.start()
        answers = [queue.get(timeout=CHILD_TIMEOUT_S) for _ in procs]
        for p in procs:
            p.join(timeout=CHILD_TIMEOUT_S)
            assert p.exitcode == 0
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
    assert answers == [True, True, True]
