"""What the leadership tests need around a real Kafka: the cluster, a topic
for guarded writes, unique role names, and member processes to start, stop,
freeze and kill.

The cluster is ``KRABKA_BOOTSTRAP`` when set; otherwise ``ci/kafka.sh start 1``
(at the repository root, three levels above this directory) starts the local
one-node cluster or finds it running, and prints its bootstrap address as the
last line on stdout. A cluster that cannot be started or reached fails the
test that needs it, with the reason.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Set, TypedDict, TypeVar

import pytest

import krabka_coordination as kc

REPO_ROOT = Path(__file__).resolve().parents[3]
KAFKA_SH = REPO_ROOT / "ci" / "kafka.sh"
TESTS_DIR = Path(__file__).resolve().parent
MEMBER_SCRIPT = TESTS_DIR / "member_proc.py"
LEAD_SCRIPT = TESTS_DIR / "lead_proc.py"

# Short timings so that a failover takes seconds: a 3 s lease renewed every
# second, one second between challenger ranks.
LEASE_S = 3.0
RENEW_S = 1.0
STAGGER_S = 1.0


class Timings(TypedDict):
    """The timing options of an acquire, to pass as ``**timings``."""

    lease_duration: float
    renew_interval: float
    challenge_stagger: float


FAST = Timings(lease_duration=LEASE_S, renew_interval=RENEW_S, challenge_stagger=STAGGER_S)

# How long ci/kafka.sh may take to start a cluster from scratch.
START_TIMEOUT_S = 300.0

T = TypeVar("T")

_settings: Optional[Dict[str, str]] = None
_client: Optional[kc.Client] = None


def bootstrap_address() -> str:
    """``KRABKA_BOOTSTRAP``, or the local cluster that ``ci/kafka.sh start 1`` runs."""
    env = os.environ.get("KRABKA_BOOTSTRAP", "").strip()
    if env:
        return env
    if not KAFKA_SH.is_file():
        pytest.fail(f"KRABKA_BOOTSTRAP is not set and {KAFKA_SH} does not exist: no Kafka to test against")
    try:
        done = subprocess.run(
            ["bash", str(KAFKA_SH), "start", "1"],
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"ci/kafka.sh start 1 did not finish within {START_TIMEOUT_S:.0f} s")
    lines = [line.strip() for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0 or not lines:
        pytest.fail(
            f"KRABKA_BOOTSTRAP is not set and `ci/kafka.sh start 1` failed (exit {done.returncode}):\n"
            + done.stderr[-3000:]
        )
    return lines[-1]


def kafka_settings() -> Dict[str, str]:
    """The settings dict of the test cluster, checked once: the state topic
    is created or checked (16 partitions; one replica, the development
    shape, on a one-node cluster), which needs the cluster to answer."""
    global _settings, _client
    if _settings is None:
        settings = {"bootstrap.servers": bootstrap_address()}
        try:
            client = kc.Client(settings)
            client.ensure_state_topic(development=True)
        except kc.KrabkaError as e:
            pytest.fail(f"Kafka at {settings['bootstrap.servers']} cannot be reached or used: {e!r}")
        _settings, _client = settings, client
    return _settings


def shared_client() -> kc.Client:
    """One blocking client of the test cluster for the whole session (the
    describe calls of every test share its Kafka clients)."""
    kafka_settings()
    assert _client is not None
    return _client


def ensure_data_topic(bootstrap: str, topic: str) -> str:
    """Creates ``topic`` (one partition) unless it exists, with Kafka's own tool."""
    done = subprocess.run(
        [
            "bash", str(KAFKA_SH), "tool", "topics",
            "--bootstrap-server", bootstrap,
            "--create", "--if-not-exists", "--topic", topic,
            "--partitions", "1", "--replication-factor", "1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        pytest.fail(f"cannot create the topic {topic} on {bootstrap}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return topic


def mint_newer_epoch(bootstrap: str, role: str) -> None:
    """Has another process mint a newer epoch of ``role``: Kafka's own admin
    tool (``kafka-transactions forceTerminateTransaction``, Admin
    ``fenceProducers``) calls InitProducerId for the role's transactional id,
    which supersedes the holder's epoch at the transaction coordinator."""
    done = subprocess.run(
        [
            "bash", str(KAFKA_SH), "tool", "transactions",
            "--bootstrap-server", bootstrap,
            "forceTerminateTransaction", "--transactionalId", role,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        pytest.fail(f"kafka-transactions forceTerminateTransaction {role} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")


def unique_role(test_name: str) -> str:
    """A role name no other test (and no earlier run) uses."""
    slug = re.sub(r"[^A-Za-z0-9]+", "-", test_name).strip("-")[:40]
    return f"py-{slug}-{uuid.uuid4().hex[:10]}"


def wait_until(probe: Callable[[], Optional[T]], timeout: float, what: str, every: float = 0.1) -> T:
    """Calls ``probe`` until it returns something other than None/False, for
    at most ``timeout`` seconds; fails the test naming ``what`` otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value is not None and value is not False:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)


def members(role: str) -> List[str]:
    """The roster of ``role`` in rank order."""
    return shared_client().describe_role_state(role).members


class Member:
    """A member process running ``member_proc.py`` (or ``script``, such as
    ``lead_proc.py``): JSON events on stdout."""

    def __init__(
        self, kafka: Dict[str, str], role: str, member: str, *args: str, script: Path = MEMBER_SCRIPT
    ) -> None:
        self.member = member
        self.proc = subprocess.Popen(
            [
                sys.executable, "-u", str(script),
                "--bootstrap", kafka["bootstrap.servers"],
                "--role", role, "--member", member,
                "--lease", str(LEASE_S), "--renew", str(RENEW_S), "--stagger", str(STAGGER_S),
                *args,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.events: "queue.Queue[Dict[str, Any]]" = queue.Queue()
        self.seen: List[Dict[str, Any]] = []
        self.stderr: List[str] = []
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                event: Dict[str, Any] = json.loads(line)
            except ValueError:
                # Not an event (a library writing to stdout): keep it for
                # the failure message instead of losing every later event.
                self.stderr.append(f"[stdout] {line}\n")
                continue
            event["t_rx"] = time.monotonic()
            self.events.put(event)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    def expect(self, event: str, timeout: float) -> Dict[str, Any]:
        """The next event named ``event`` (skipping others), within ``timeout`` s."""
        return self.expect_any({event}, timeout)

    def expect_any(self, events: Set[str], timeout: float) -> Dict[str, Any]:
        """The next event named one of ``events`` (skipping others), within ``timeout`` s."""
        event = " or ".join(sorted(events))
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                got = self.events.get(timeout=max(left, 0.0))
            except queue.Empty:
                pytest.fail(
                    f"{self.member}: no {event!r} event within {timeout} s; "
                    f"events so far: {self.seen}; exit code {self.proc.poll()}; stderr:\n{''.join(self.stderr)[-3000:]}"
                )
            self.seen.append(got)
            if got["event"] in events:
                return got

    def drain(self) -> List[Dict[str, Any]]:
        """The events received and not yet read (without waiting)."""
        out: List[Dict[str, Any]] = []
        while True:
            try:
                out.append(self.events.get_nowait())
            except queue.Empty:
                return out

    def send(self, sig: signal.Signals) -> None:
        self.proc.send_signal(sig)

    def exit_code(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{self.member} did not exit within {timeout} s; events: {self.seen}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()


def token_of(event: Dict[str, Any]) -> kc.FencingToken:
    """The token an event reports as [producer_id, producer_epoch]."""
    pid, epoch = event["token"]
    return kc.FencingToken(int(pid), int(epoch))
