"""The blocking client on a real Kafka: ``with``, guarded writes, ``wait``
with a timeout, describe, Ctrl-C of a waiting acquire (the member is
deregistered before ``KeyboardInterrupt`` is raised), one acquire of a role
per client, and a Leadership or Client seen from a forked child."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Dict

import pytest

import krabka_coordination as kc
from kafka_support import FAST, Member, members, wait_until
from test_runtime import FORK_WARNING, _in_child


def test_with_block_holds_writes_and_resigns(client: kc.Client, data_topic: str, role: str) -> None:
    with client.acquire_leadership(role, "solo", **FAST) as leadership:
        assert isinstance(leadership, kc.Leadership)
        assert leadership.is_held and not leadership.done() and leadership.error is None
        assert leadership.renewal_failures == 0
        assert repr(leadership).startswith(f"<Leadership role={role!r} member='solo' token=")

        started = time.monotonic()
        assert leadership.wait(0.3) is False
        assert time.monotonic() - started >= 0.25
        assert leadership.wait(0) is False

        leadership.write(data_topic, b"v", key=b"k", partition=0, headers=[("a", b"1"), ("a", b"2")])
        leadership.write_records(kc.OutRecord(data_topic, bytes([i])) for i in range(3))

        status = client.describe_leadership(role)
        assert status.authoritative(leadership.token)
        report = client.describe_role_state(role)
        assert report.role == role and report.partition == leadership.partition
        assert report.members == ["solo"] and report.roster[0].rank == 0
        assert report.roster[0].registered_at > 0 and report.roster[0].offset >= 0
        assert report.lease is not None and report.lease.member == "solo"

        # The lease is renewed in the background.
        first = leadership.lease
        wait_until(lambda: leadership.lease.granted_at > first.granted_at, 5, "a renewal")
        assert leadership.lease.token == leadership.token

    assert not leadership.is_held and leadership.done()
    assert isinstance(leadership.error, kc.Resigned)
    assert leadership.error is leadership.error  # one exception object, not a new one per read
    assert leadership.wait() is True
    with pytest.raises(kc.Resigned):
        leadership.write(data_topic, b"after")
    leadership.resign()  # idempotent

    report = client.describe_role_state(role)
    assert report.members == [] and report.lease is None
    # The resign minted a newer epoch: the old token is not authoritative.
    status = client.describe_leadership(role)
    assert status.token > leadership.token and not status.authoritative(leadership.token)


def test_an_exception_in_the_block_still_resigns(client: kc.Client, role: str) -> None:
    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        with client.acquire_leadership(role, "m", **FAST) as leadership:
            raise Boom()
    assert isinstance(leadership.error, kc.Resigned)
    assert members(role) == []


def test_one_client_acquires_a_role_once(kafka: Dict[str, str], role: str) -> None:
    with kc.Client(kafka) as client:
        with client.acquire_leadership(role, "a", **FAST) as leadership:
            with pytest.raises(kc.InvalidArgumentError, match="already being acquired or held by this client"):
                client.acquire_leadership(role, "b", **FAST)
            assert members(role) == ["a"]
        # The claim ends with the term: the role can be acquired again.
        with client.acquire_leadership(role, "b", **FAST) as again:
            assert again.token > leadership.token
    assert client.closed


def test_describe_a_role_nobody_took(client: kc.Client, role: str) -> None:
    status = client.describe_leadership(role)
    assert status.token == kc.NO_EPOCH
    assert not status.authoritative(kc.NO_EPOCH)
    report = client.describe_role_state(role)
    assert report.members == [] and report.roster == [] and report.lease is None
    assert report.partition == kc.role_partition(role, 16)


def test_describe_costs_one_request_once_the_coordinator_is_known(kafka: Dict[str, str], role: str) -> None:
    with kc.Client(kafka) as client, client.acquire_leadership(role, "m", **FAST) as leadership:
        assert client.describe_leadership(role).authoritative(leadership.token)
        before = client._native._describe_requests()
        for _ in range(5):
            assert client.describe_leadership(role).authoritative(leadership.token)
        assert client._native._describe_requests() - before == 5


def test_ctrl_c_of_a_waiting_acquire_deregisters_before_raising(kafka: Dict[str, str], role: str) -> None:
    with kc.Client(kafka) as client:
        holder = client.acquire_leadership(role, "holder", lease_duration=30.0, renew_interval=1.0)
        waiting = Member(kafka, role, "waiting")
        try:
            waiting.expect("start", 20)
            wait_until(lambda: members(role) == ["holder", "waiting"], 20, "the waiting member to register")
            sent = time.monotonic()
            waiting.send(signal.SIGINT)
            interrupted = waiting.expect("interrupted", 15)
            assert waiting.exit_code(10) == 0
            # Read right after the process reported: the deregistration was
            # done before KeyboardInterrupt reached the script.
            assert members(role) == ["holder"]
            took = interrupted["t_rx"] - sent
            print(f"\nCtrl-C to KeyboardInterrupt, member deregistered in between: {took * 1000:.0f} ms")
            assert holder.is_held
        finally:
            waiting.kill()
            holder.resign()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() is POSIX only")
@pytest.mark.filterwarnings(FORK_WARNING)
def test_a_forked_child_cannot_use_the_parents_leadership_or_client(kafka: Dict[str, str], role: str) -> None:
    with kc.Client(kafka) as client, client.acquire_leadership(role, "parent", **FAST) as leadership:
        token = leadership.token

        def child() -> bool:
            refused = 0
            for use in (lambda: leadership.token, lambda: client.describe_leadership(role)):
                try:
                    use()
                except kc.FatalError as e:
                    refused += "a forked child must make its own" in str(e.__cause__)
            # The child makes its own client and sees the parent lead.
            with kc.Client(kafka) as own:
                return refused == 2 and own.describe_leadership(role).authoritative(token)

        assert _in_child(os.fork, child) == 0
        # The parent's leadership and client are untouched.
        assert leadership.is_held
        assert client.describe_leadership(role).authoritative(leadership.token)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() is POSIX only")
@pytest.mark.filterwarnings(FORK_WARNING)
def test_fork_while_describes_are_in_flight(kafka: Dict[str, str], role: str) -> None:
    # Another thread describes without pause while this one forks: whatever
    # the parent's describe client holds at the instant of the fork, the
    # child's own client works (no lock is shared with the parent's).
    stop = threading.Event()
    with kc.Client(kafka) as client, client.acquire_leadership(role, "parent", **FAST) as leadership:
        token = leadership.token

        def hammer() -> None:
            while not stop.is_set():
                client.describe_leadership(role)

        t = threading.Thread(target=hammer)
        t.start()
        try:

            def child() -> bool:
                with kc.Client(kafka) as own:
                    return own.describe_leadership(role).authoritative(token)

            for _ in range(5):
                assert _in_child(os.fork, child) == 0
        finally:
            stop.set()
            t.join()


def test_blocking_call_releases_the_gil(client: kc.Client, role: str) -> None:
    ticks = 0
    stop = threading.Event()

    def spin() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            time.sleep(0.001)

    with client.acquire_leadership(role, "m", **FAST) as leadership:
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


def test_an_acquire_with_a_timeout_deregisters_then_raises(kafka: Dict[str, str], client: kc.Client, role: str) -> None:
    holder = client.acquire_leadership(role, "holder", **FAST)
    try:
        assert 0 < holder.lease_left <= FAST["lease_duration"]
        with kc.Client(kafka) as other:
            started = time.monotonic()
            with pytest.raises(kc.AcquireTimeout) as caught:
                other.acquire_leadership(role, "impatient", **FAST, timeout=1.5)
            took = time.monotonic() - started
            assert 1.5 <= took < 15, took
            # A TimeoutError and a Cancelled, naming the role, the member and the bound.
            assert isinstance(caught.value, TimeoutError) and isinstance(caught.value, kc.Cancelled)
            for part in (role, "impatient", "timeout=1.5"):
                assert part in str(caught.value), str(caught.value)
            wait_until(lambda: other.describe_role_state(role).members == ["holder"], 10, "the member deregistered")
            # Bad bounds are refused before anything starts.
            with pytest.raises(kc.InvalidArgumentError, match="timeout"):
                other.acquire_leadership(role, "impatient", timeout=-1)
            with pytest.raises(TypeError, match="timeout"):
                other.acquire_leadership(role, "impatient", timeout="soon")  # type: ignore[arg-type]
        assert holder.is_held and client.describe_leadership(role).authoritative(holder.token)
    finally:
        holder.resign()
    assert holder.lease_left == 0.0 and not holder.is_held
    # A bound long enough: the acquire of a free role wins within it.
    with client.acquire_leadership(role, "patient", **FAST, timeout=30) as leadership:
        assert leadership.is_held
