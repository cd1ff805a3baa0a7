"""Failover and fencing between member PROCESSES on a real Kafka.

Each member is a Python process (``member_proc.py``) using the blocking
client with a 3 s lease, renewed every second, and one second between challenger
ranks. One test kills the leader with SIGKILL and times the standby's
takeover; another freezes the leader with SIGSTOP past its lease, lets a
newer epoch take the role, resumes it, and sees its next guarded write
refused (``LeaseExpired`` by its own lease deadline, or ``Fenced`` by the
broker). A third has another process (Kafka's admin tool) mint a newer
epoch under a leader that is not due to renew, so that the broker refuses
the leader's guarded write itself. The members also relay the core's events
(``core.<kind>``), which the tests read instead of any log text.
"""

from __future__ import annotations

import signal
import time
from typing import Dict

import pytest

import krabka_coordination as kc
from kafka_support import FAST, LEASE_S, RENEW_S, STAGGER_S, Member, members, mint_newer_epoch, token_of, wait_until

# Process start, imports, connecting and the first reads: well within this.
ELECTED_WITHIN_S = 20.0
# What a takeover may take beyond lease + stagger: the standby's poll wait
# and Kafka round trips (InitProducerId, DescribeTransactions, a commit).
TAKEOVER_SLACK_S = 4.0


def test_sigkill_of_the_leader_hands_the_role_to_the_standby(
    client: kc.Client, kafka: Dict[str, str], data_topic: str, role: str
) -> None:
    a = Member(kafka, role, "a", "--topic", data_topic)
    b = None
    try:
        elected_a = a.expect("elected", ELECTED_WITHIN_S)
        a.expect("wrote", 10)
        b = Member(kafka, role, "b", "--topic", data_topic)
        # b is a registered standby behind a before a dies.
        wait_until(lambda: members(role) == ["a", "b"], 20, "b to register behind a")
        status = client.describe_leadership(role)
        assert status.authoritative(token_of(elected_a))

        a.send(signal.SIGKILL)
        killed_at = time.monotonic()
        assert a.exit_code(10) == -signal.SIGKILL

        elected_b = b.expect("elected", LEASE_S + STAGGER_S + TAKEOVER_SLACK_S + 5)
        took = elected_b["t_rx"] - killed_at
        # b is the first challenger: it challenges at a's last deadline, at
        # most one lease after the kill.
        assert took <= LEASE_S + STAGGER_S + TAKEOVER_SLACK_S, f"takeover took {took:.2f} s"
        b.expect("wrote", 10)
        # b's renewals go on: the core reports them as events.
        renewed = b.expect("core.renewed", 10)
        assert renewed["deadline"] > elected_b["deadline"]

        token_a, token_b = token_of(elected_a), token_of(elected_b)
        assert token_b > token_a
        status = client.describe_leadership(role)
        assert status.authoritative(token_b)
        assert not status.authoritative(token_a)
        # The winner removes the registration of the dead holder; the lease
        # is b's.
        wait_until(lambda: members(role) == ["b"], 10, "the dead holder's registration to be removed")
        report = client.describe_role_state(role)
        assert report.lease is not None and report.lease.member == "b" and report.lease.token == token_b
        print(f"\ntakeover after SIGKILL: {took:.2f} s (lease {LEASE_S} s, stagger {STAGGER_S} s)")

        b.send(signal.SIGINT)
        assert b.exit_code(20) != 3
    finally:
        a.kill()
        if b is not None:
            b.kill()


def test_a_frozen_leader_loses_the_role_and_its_writes_are_refused(
    client: kc.Client, kafka: Dict[str, str], data_topic: str, role: str
) -> None:
    a = Member(kafka, role, "a", "--topic", data_topic, "--write-every", "0.1")
    try:
        elected_a = a.expect("elected", ELECTED_WITHIN_S)
        a.expect("wrote", 10)
        a.expect("core.renewed", 10)
        # Freeze a: no renewals, no writes. Its lease runs out.
        a.send(signal.SIGSTOP)
        frozen_at = time.monotonic()
        # This process acquires with a newer epoch once a's lease is over.
        with kc.Client(kafka) as other, other.acquire_leadership(role, "b", **FAST) as b:
            took = time.monotonic() - frozen_at
            assert took >= LEASE_S - RENEW_S - 0.5, f"b took the role {took:.2f} s after a froze: before a's lease ran out"
            assert b.token > token_of(elected_a)
            assert client.describe_leadership(role).authoritative(b.token)

            a.send(signal.SIGCONT)
            # On resuming, a's next guarded write is refused and its term
            # ends. Either its own monotonic lease deadline says the lease
            # ran out (LeaseExpired, before anything reaches the broker), or
            # the broker fences the write or the overdue renewal (Fenced).
            # The write and the renewal task race on resuming: the term may
            # end by one reason while the write is refused by the other.
            lost = a.expect_any({"fenced", "lease_expired"}, 20)
            expected = "LeaseExpired" if lost["event"] == "lease_expired" else "Fenced"
            assert lost["error"] == expected, lost
            assert lost["leadership_error"] in ("LeaseExpired", "Fenced") and lost["is_held"] is False, lost
            assert a.exit_code(20) == (4 if expected == "LeaseExpired" else 3)
            # The core's own account: the term ended with one of those steps,
            # and no renewal of a's was accepted after it.
            core = [e["event"] for e in a.seen + a.drain()]
            endings = [i for i, e in enumerate(core) if e in ("core.fenced", "core.lease_expired")]
            assert endings, core
            assert "core.renewed" not in core[endings[0] + 1 :], core
            print(f"\nthe frozen leader's write was refused ({expected}); its term ended with {core[endings[0]]}")

            # b still leads and writes.
            assert b.is_held
            b.write(data_topic, b"after the fence", key=role.encode())
            assert client.describe_leadership(role).authoritative(b.token)
        assert isinstance(b.error, kc.Resigned)
    finally:
        a.kill()


def test_the_broker_refuses_the_guarded_write_of_a_superseded_epoch(
    client: kc.Client, kafka: Dict[str, str], data_topic: str, role: str
) -> None:
    # A 30 s lease renewed every 10 s: no renewal happens during the test, so
    # the guarded write is the first thing to meet the newer epoch.
    leadership = client.acquire_leadership(role, "a", lease_duration=30.0, renew_interval=10.0)
    events = leadership.events()
    try:
        leadership.write(data_topic, b"while it leads")
        mint_newer_epoch(kafka["bootstrap.servers"], role)
        status = client.describe_leadership(role)
        assert status.token > leadership.token and not status.authoritative(leadership.token)

        with pytest.raises(kc.Fenced) as info:
            leadership.write(data_topic, b"deposed", key=b"k")
        assert "a guarded write for role" in str(info.value), str(info.value)
        assert not isinstance(info.value, ValueError)
        # The fence ended the leadership.
        assert not leadership.is_held
        assert isinstance(leadership.error, kc.Fenced)
        assert leadership.wait(0) is True
        with pytest.raises(kc.Fenced):
            leadership.write_records([kc.OutRecord(data_topic, b"still deposed")])
        # The event stream ends with the fence; its error is a Fenced.
        kinds = [(e.kind, type(e.error).__name__) for e in events]
        assert kinds == [("fenced", "Fenced")], kinds
    finally:
        # After a fence, resign only deregisters.
        leadership.resign()
    assert members(role) == []
