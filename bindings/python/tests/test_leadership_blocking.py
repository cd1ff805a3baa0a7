"""The blocking API on a real Kafka: ``with``, guarded writes, ``wait`` with a
timeout, describe, Ctrl-C of a waiting acquire (the member is deregistered
before ``KeyboardInterrupt`` is raised), and a Leadership seen from a forked
child."""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Dict

import pytest

import krabka_coordination as kc
from kafka_support import FAST, Member, members, wait_until
from test_runtime import FORK_WARNING, _in_child


def test_with_block_holds_writes_and_resigns(kafka: Dict[str, str], data_topic: str, role: str) -> None:
    with kc.acquire_leadership_blocking(kafka, role, "solo", **FAST) as leadership:
        assert leadership.is_held and leadership.error is None
        assert leadership.renewal_failures == 0
        assert repr(leadership).startswith(f"<Leadership role={role!r} member='solo' token=")

        started = time.monotonic()
        assert leadership.wait(0.3) is False
        waited = time.monotonic() - started
        assert 0.25 <= waited < 2.0, waited
        assert leadership.wait(0) is False
        with pytest.raises(kc.InvalidArgumentError, match="timeout must be a finite, non-negative number of seconds, got -1"):
            leadership.wait(-1)
        with pytest.raises(TypeError, match="timeout must be a number of seconds"):
            leadership.wait("1")  # type: ignore[arg-type]

        leadership.write_blocking(data_topic, b"v", key=b"k", partition=0, headers=[("a", b"1"), ("a", b"2")])
        leadership.write_records_blocking(kc.OutRecord(data_topic, bytes([i])) for i in range(3))

        status = kc.describe_leadership_blocking(kafka, role)
        assert status.authoritative(leadership.token)
        report = kc.describe_role_state_blocking(kafka, role)
        assert report.role == role and report.partition == leadership.partition
        assert report.members == ["solo"] and report.roster[0].rank == 0
        assert report.roster[0].registered_at > 0 and report.roster[0].offset >= 0
        assert report.lease is not None and report.lease.member == "solo"

        # The lease is renewed in the background.
        first = leadership.lease
        wait_until(lambda: leadership.lease.granted_at > first.granted_at, 5, "a renewal")
        assert leadership.lease.token == leadership.token

    assert not leadership.is_held
    assert isinstance(leadership.error, kc.Resigned)
    assert leadership.wait() is True
    with pytest.raises(kc.Resigned):
        leadership.write_blocking(data_topic, b"after")
    leadership.resign_blocking()  # idempotent

    report = kc.describe_role_state_blocking(kafka, role)
    assert report.members == [] and report.lease is None
    # The resign minted a newer epoch: the old token is not authoritative.
    status = kc.describe_leadership_blocking(kafka, role)
    assert status.token > leadership.token and not status.authoritative(leadership.token)


def test_an_exception_in_the_block_still_resigns(kafka: Dict[str, str], role: str) -> None:
    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        with kc.acquire_leadership_blocking(kafka, role, "m", **FAST) as leadership:
            raise Boom()
    assert isinstance(leadership.error, kc.Resigned)
    assert members(kafka, role) == []


def test_describe_a_role_nobody_took(kafka: Dict[str, str], role: str) -> None:
    status = kc.describe_leadership_blocking(kafka, role)
    assert status.token == kc.NO_EPOCH
    assert not status.authoritative(kc.NO_EPOCH)
    report = kc.describe_role_state_blocking(kafka, role)
    assert report.members == [] and report.roster == [] and report.lease is None
    assert report.partition == kc.role_partition(role, 16)


def test_describe_costs_one_request_once_the_coordinator_is_known(kafka: Dict[str, str], role: str) -> None:
    with kc.acquire_leadership_blocking(kafka, role, "m", **FAST) as leadership:
        assert kc.describe_leadership_blocking(kafka, role).authoritative(leadership.token)
        before = kc._native._describe_requests(kafka)
        for _ in range(5):
            assert kc.describe_leadership_blocking(kafka, role).authoritative(leadership.token)
        assert kc._native._describe_requests(kafka) - before == 5


def test_ctrl_c_of_a_waiting_acquire_deregisters_before_raising(kafka: Dict[str, str], role: str) -> None:
    holder = kc.acquire_leadership_blocking(kafka, role, "holder", lease_duration=30.0, renew_interval=1.0)
    waiting = Member(kafka, role, "waiting")
    try:
        waiting.expect("start", 20)
        wait_until(lambda: members(kafka, role) == ["holder", "waiting"], 20, "the waiting member to register")
        sent = time.monotonic()
        waiting.send(signal.SIGINT)
        interrupted = waiting.expect("interrupted", 15)
        assert waiting.exit_code(10) == 0
        # Read right after the process reported: the deregistration was done
        # before KeyboardInterrupt reached the script.
        assert members(kafka, role) == ["holder"]
        took = interrupted["t_rx"] - sent
        print(f"\nCtrl-C to KeyboardInterrupt, member deregistered in between: {took * 1000:.0f} ms")
        assert holder.is_held
    finally:
        waiting.kill()
        holder.resign_blocking()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() is POSIX only")
@pytest.mark.filterwarnings(FORK_WARNING)
def test_a_forked_child_cannot_use_the_parents_leadership(kafka: Dict[str, str], role: str) -> None:
    with kc.acquire_leadership_blocking(kafka, role, "parent", **FAST) as leadership:

        def child() -> bool:
            try:
                _ = leadership.token
            except kc.FatalError as e:
                return "acquire its own" in str(e)
            return False

        assert _in_child(os.fork, child) == 0
        # The parent's leadership is untouched.
        assert leadership.is_held
        assert kc.describe_leadership_blocking(kafka, role).authoritative(leadership.token)


def test_blocking_call_releases_the_gil(kafka: Dict[str, str], role: str) -> None:
    import threading

    ticks = 0
    stop = threading.Event()

    def spin() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            time.sleep(0.001)

    with kc.acquire_leadership_blocking(kafka, role, "m", **FAST) as leadership:
        t = threading.Thread(target=spin)
        t.start()
        try:
            leadership.wait(0.5)
        finally:
            stop.set()
            t.join()
    # A thread that could not run while wait() held the GIL would tick a few
    # times at most.
    assert ticks > 50, ticks
    assert sys.getswitchinterval() < 0.5
