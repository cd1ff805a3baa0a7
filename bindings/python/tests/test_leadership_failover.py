"""Failover and fencing between member PROCESSES on a real Kafka.

Each member is a Python process (``member_proc.py``) using the blocking API
with a 3 s lease, renewed every second, and one second between challenger
ranks. One test kills the leader with SIGKILL and times the standby's
takeover; the other freezes the leader with SIGSTOP past its lease, lets a
newer epoch take the role, resumes it, and sees its next guarded write raise
``Fenced``.
"""

from __future__ import annotations

import signal
import time
from typing import Dict

import krabka_coordination as kc
from kafka_support import FAST, LEASE_S, RENEW_S, STAGGER_S, Member, members, token_of, wait_until

# Process start, imports, connecting and the first reads: well within this.
ELECTED_WITHIN_S = 20.0
# What a takeover may take beyond lease + stagger: the standby's poll wait
# and Kafka round trips (InitProducerId, DescribeTransactions, a commit).
TAKEOVER_SLACK_S = 4.0


def test_sigkill_of_the_leader_hands_the_role_to_the_standby(kafka: Dict[str, str], data_topic: str, role: str) -> None:
    a = Member(kafka, role, "a", "--topic", data_topic)
    b = None
    try:
        elected_a = a.expect("elected", ELECTED_WITHIN_S)
        a.expect("wrote", 10)
        b = Member(kafka, role, "b", "--topic", data_topic)
        # b is a registered standby behind a before a dies.
        wait_until(lambda: members(kafka, role) == ["a", "b"], 20, "b to register behind a")
        status = kc.describe_leadership_blocking(kafka, role)
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

        token_a, token_b = token_of(elected_a), token_of(elected_b)
        assert token_b > token_a
        status = kc.describe_leadership_blocking(kafka, role)
        assert status.authoritative(token_b)
        assert not status.authoritative(token_a)
        # The dead member stays registered (nobody deregistered it); the
        # lease is b's.
        report = kc.describe_role_state_blocking(kafka, role)
        assert report.members == ["a", "b"]
        assert report.lease is not None and report.lease.member == "b" and report.lease.token == token_b
        print(f"\ntakeover after SIGKILL: {took:.2f} s (lease {LEASE_S} s, stagger {STAGGER_S} s)")

        b.send(signal.SIGINT)
        assert b.exit_code(20) != 3
    finally:
        a.kill()
        if b is not None:
            b.kill()


def test_a_deposed_leaders_guarded_write_raises_fenced(kafka: Dict[str, str], data_topic: str, role: str) -> None:
    a = Member(kafka, role, "a", "--topic", data_topic, "--write-every", "0.1")
    try:
        elected_a = a.expect("elected", ELECTED_WITHIN_S)
        a.expect("wrote", 10)
        # Freeze a: no renewals, no writes. Its lease runs out.
        a.send(signal.SIGSTOP)
        frozen_at = time.monotonic()
        # This process acquires with a newer epoch once a's lease is over.
        with kc.acquire_leadership_blocking(kafka, role, "b", **FAST) as b:
            took = time.monotonic() - frozen_at
            assert took >= LEASE_S - RENEW_S - 0.5, f"b took the role {took:.2f} s after a froze: before a's lease ran out"
            assert b.token > token_of(elected_a)
            assert kc.describe_leadership_blocking(kafka, role).authoritative(b.token)

            a.send(signal.SIGCONT)
            fenced = a.expect("fenced", 20)
            # The write raised Fenced and the leadership ended because of it
            # (the renewal may have hit the fence first; either way the
            # broker refused a's epoch).
            assert fenced["error"] == "Fenced"
            assert fenced["leadership_error"] == "Fenced"
            assert fenced["is_held"] is False
            assert a.exit_code(20) == 3

            # b still leads and writes.
            assert b.is_held
            b.write_blocking(data_topic, b"after the fence", key=role.encode())
            assert kc.describe_leadership_blocking(kafka, role).authoritative(b.token)
        assert isinstance(b.error, kc.Resigned)
    finally:
        a.kill()
