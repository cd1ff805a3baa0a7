"""A member process for the leadership tests (run by ``kafka_support.Member``).

It acquires the role with the blocking client, then, while it leads, makes a
guarded write to ``--topic`` every ``--write-every`` seconds (without
``--topic`` it only holds the role). Every step is a JSON line on stdout:
``start``, ``elected`` (``token``, ``deadline``), ``wrote`` (``seq``),
``fenced`` or ``lease_expired`` (the write was refused because a newer epoch
exists, or because the member's own lease ran out; ``error``: the class the
write raised, ``leadership_error``: the class of ``Leadership.error``),
``ended`` (the role ended while the member waited; after a fence or an
expiry it then tries one more write), ``interrupted`` (Ctrl-C
while waiting to acquire; ``deregistered_after_ms``), ``resigned``. The
core's own events of the held leadership are relayed as ``core.<kind>``
(``core.renewed`` with ``deadline``, ``core.fenced`` with ``error``...), read
from ``Leadership.events()``, never from log text.

Exit codes: 0 stopped cleanly (resigned, or interrupted while waiting),
3 fenced, 4 the lease expired.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from typing import Any, Dict

import krabka_coordination as kc

_lock = threading.Lock()


def emit(event: str, **fields: Any) -> None:
    line = json.dumps({"event": event, "t": time.time(), **fields})
    with _lock:
        print(line, flush=True)


def relay(events: kc.Events) -> None:
    """Prints the core's events of the held leadership until the term ends."""
    for e in events:
        fields: Dict[str, Any] = {"at": e.at}
        if e.token is not None:
            fields["token"] = [e.token.producer_id, e.token.producer_epoch]
        for name in ("deadline", "failures", "cleared"):
            value = getattr(e, name)
            if value is not None:
                fields[name] = value
        if e.error is not None:
            fields["error"] = type(e.error).__name__
        emit(f"core.{e.kind}", **fields)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--role", required=True)
    p.add_argument("--member", required=True)
    p.add_argument("--lease", type=float, required=True)
    p.add_argument("--renew", type=float, required=True)
    p.add_argument("--stagger", type=float, required=True)
    p.add_argument("--topic")
    p.add_argument("--write-every", type=float, default=0.2)
    a = p.parse_args()
    # Ctrl-C semantics even when started with SIGINT ignored (a background
    # job of a non-interactive shell inherits SIG_IGN, and Python then
    # leaves SIGINT ignored).
    signal.signal(signal.SIGINT, signal.default_int_handler)

    client = kc.Client({"bootstrap.servers": a.bootstrap})
    emit("start")
    started = time.monotonic()
    try:
        leadership = client.acquire_leadership(
            a.role,
            a.member,
            lease_duration=a.lease,
            renew_interval=a.renew,
            challenge_stagger=a.stagger,
        )
    except KeyboardInterrupt:
        # The binding deregistered the member before raising.
        emit("interrupted", deregistered_after_ms=round((time.monotonic() - started) * 1000))
        return 0

    relayer = threading.Thread(target=relay, args=(leadership.events(),), daemon=True)
    relayer.start()
    try:
        return lead(leadership, a.role, a.member, a.topic, a.write_every)
    finally:
        # The term is over (resigned or fenced): the relay ends with it.
        relayer.join(timeout=10)


def lead(leadership: kc.Leadership, role: str, member: str, topic: str | None, every: float) -> int:
    with leadership:
        token = leadership.token
        emit("elected", token=[token.producer_id, token.producer_epoch], deadline=leadership.lease.deadline)
        seq = 0
        while True:
            if topic is not None:
                try:
                    value = json.dumps({"member": member, "token": str(token), "seq": seq}).encode()
                    leadership.write(topic, value, key=role.encode())
                except (kc.Fenced, kc.LeaseExpired, kc.OutcomeUnknown) as e:
                    # The term is over, or ending this instant: report its
                    # final state. A write in flight at the lease deadline
                    # reports OutcomeUnknown while the term ends with
                    # LeaseExpired; an unknown outcome within a held term
                    # is not this helper's to hide.
                    leadership.wait(10)
                    error = leadership.error
                    if isinstance(e, kc.OutcomeUnknown) and (leadership.is_held or error is None):
                        raise
                    expired = isinstance(e, kc.LeaseExpired) or (
                        isinstance(e, kc.OutcomeUnknown) and isinstance(error, kc.LeaseExpired)
                    )
                    # `error`: how the term ended (the write's own error
                    # when it knew; the term's when the write's outcome
                    # was unknown); `write_error`: what the write raised.
                    ended_by = error if isinstance(e, kc.OutcomeUnknown) else e
                    emit(
                        "lease_expired" if expired else "fenced",
                        error=type(ended_by).__name__,
                        write_error=type(e).__name__,
                        message=str(e),
                        leadership_error=type(error).__name__ if error is not None else None,
                        is_held=leadership.is_held,
                    )
                    return 4 if expired else 3
                emit("wrote", seq=seq)
                seq += 1
            if leadership.wait(every):
                error = leadership.error
                emit("ended", error=type(error).__name__ if error is not None else None)
                lost = isinstance(error, (kc.Fenced, kc.LeaseExpired))
                if topic is None or not lost:
                    return (4 if isinstance(error, kc.LeaseExpired) else 3) if lost else 1
                # Lost: go round once more; the write must raise the reason.


if __name__ == "__main__":
    sys.exit(main())
