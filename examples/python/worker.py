"""A worker that does a role's work only while it leads.

Start the same script on several machines (or several times on one): one
of them leads the role and works; the others wait as standbys and take over
when the leader stops, crashes or is cut off. The work here is a stand-in: a
numbered "result" every ``--interval`` seconds, written to ``--topic`` with a
guarded write, so that only the current leader's results are ever committed
(a deposed leader's write raises ``Fenced`` and none of it becomes visible).

Stopping:

* SIGINT (Ctrl-C) or SIGTERM: the worker resigns (a standby takes over at
  once) or, still waiting, deregisters; exit code 0.
* Fenced (a newer epoch took the role): the worker stops working at once;
  exit code 3.
* Its own lease expired (no renewal committed within the lease, e.g. after
  this process was frozen past it, or cut off from Kafka): the worker stops
  working at once; exit code 4.
* ``--for-seconds N``: stops like SIGTERM after N seconds (for demos and CI).

Run (a local Kafka: ``ci/kafka.sh start 1``; the results topic must exist)::

    python examples/python/worker.py --bootstrap 127.0.0.1:19092 \\
        --role nightly-report --member "$(hostname)-$$" --topic report-results

Kafka client settings (security, timeouts...) are passed with
``--kafka-setting key=value``, straight to librdkafka. The library's own log
(a broker it cannot reach, a renewal that fails) goes to Python's
``logging``, logger ``krabka_coordination``; this worker prints warnings.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import time
from types import FrameType
from typing import Dict, List, Optional

import krabka_coordination as kc

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_FENCED = 3
EXIT_LEASE_EXPIRED = 4


class Stop(Exception):
    """Raised by the signal handlers to leave whatever the worker waits in."""


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", flush=True)


def install_stop_signals(for_seconds: Optional[float]) -> None:
    """SIGINT, SIGTERM (and the --for-seconds alarm) raise Stop once; later
    signals are ignored so that the resign can finish."""
    stopping = False

    def handler(signum: int, frame: Optional[FrameType]) -> None:
        nonlocal stopping
        if stopping:
            return
        stopping = True
        raise Stop(signal.Signals(signum).name)

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
    if for_seconds is not None:
        signal.signal(signal.SIGALRM, handler)
        signal.setitimer(signal.ITIMER_REAL, for_seconds)


def do_work(role: str, seq: int) -> bytes:
    """The role's work, one step: here a stand-in result."""
    return json.dumps({"role": role, "seq": seq, "computed_at": time.time()}).encode()


def lead(leadership: kc.Leadership, topic: str, interval: float) -> int:
    """Works while the role is held. Returns the exit code when it ends."""
    token = leadership.token
    log(f"leading {leadership.role} as {leadership.member} with token {token}")
    seq = 0
    while True:
        result = do_work(leadership.role, seq)
        try:
            # The epoch-bound producer writes it: committed only while this
            # member's epoch is the role's newest.
            leadership.write(
                topic,
                result,
                key=leadership.role.encode(),
                headers={"fencing-token": str(token).encode()},
            )
        except kc.Fenced as e:
            log(f"fenced, stopping the work: {e}")
            return EXIT_FENCED
        except kc.LeaseExpired as e:
            log(f"the lease expired, stopping the work: {e}")
            return EXIT_LEASE_EXPIRED
        log(f"result {seq} written")
        seq += 1
        # Sleep until the next step, waking at once if the role ends.
        if leadership.wait(interval):
            error = leadership.error
            log(f"the role ended: {error!r}")
            if isinstance(error, kc.Fenced):
                return EXIT_FENCED
            return EXIT_LEASE_EXPIRED if isinstance(error, kc.LeaseExpired) else EXIT_ERROR


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--bootstrap", required=True, help="Kafka bootstrap servers, host:port[,host:port]")
    p.add_argument("--role", required=True)
    p.add_argument("--member", required=True, help="this worker's id, unique in the role")
    p.add_argument("--topic", required=True, help="where the results go (must exist)")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between results (default 1)")
    p.add_argument("--partitions", type=int, default=16, help="partitions of __coordination_state (default 16)")
    p.add_argument("--lease", type=float, default=30.0, help="lease duration in seconds (default 30)")
    p.add_argument("--renew", type=float, default=10.0, help="renew interval in seconds (default 10)")
    p.add_argument("--stagger", type=float, default=5.0, help="challenge stagger in seconds (default 5)")
    p.add_argument("--kafka-setting", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--for-seconds", type=float, help="stop (resign) after this many seconds")
    a = p.parse_args(argv)

    kafka: Dict[str, str] = {"bootstrap.servers": a.bootstrap}
    for setting in a.kafka_setting:
        key, sep, value = setting.partition("=")
        if not sep or not key:
            p.error(f"--kafka-setting takes KEY=VALUE, got {setting!r}")
        kafka[key] = value

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    install_stop_signals(a.for_seconds)
    log(f"{a.member} joins {a.role}; waiting for its turn")
    leadership: Optional[kc.Leadership] = None
    try:
        # One client per process, shared by every role it takes or asks about.
        client = kc.Client(kafka, partitions=a.partitions)
        # The `with` exit resigns: a standby takes over at once.
        with client.acquire_leadership(
            a.role,
            a.member,
            lease_duration=a.lease,
            renew_interval=a.renew,
            challenge_stagger=a.stagger,
        ) as leadership:
            code = lead(leadership, a.topic, a.interval)
    except Stop as why:
        if leadership is None:
            # Interrupted while waiting: the binding deregistered the
            # member before raising.
            log(f"{why}: stopped while waiting; deregistered")
        else:
            log(f"{why}: resigned")
        return EXIT_OK
    except kc.KrabkaError as e:
        log(f"stopped on an error: {e!r}")
        return EXIT_ERROR
    log(f"done: {leadership.error!r}")
    return code


if __name__ == "__main__":
    sys.exit(main())
