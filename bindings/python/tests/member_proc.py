"""A member process for the leadership tests (run by ``kafka_support.Member``).

It acquires the role with the blocking API, then, while it leads, makes a
guarded write to ``--topic`` every ``--write-every`` seconds (without
``--topic`` it only holds the role). Every step is a JSON line on stdout:
``start``, ``elected`` (``token``, ``deadline``), ``wrote`` (``seq``),
``fenced`` (``error``: the class the write raised, ``leadership_error``: the
class of ``Leadership.error``), ``ended`` (the role
ended while the member waited; after a fence it then tries one more write), ``interrupted`` (Ctrl-C while
waiting to acquire; ``deregistered_after_ms``), ``resigned``.

Exit codes: 0 stopped cleanly (resigned, or interrupted while waiting),
3 fenced.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from typing import Any

import krabka_coordination as kc


def emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, "t": time.time(), **fields}), flush=True)


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
    kafka = {"bootstrap.servers": a.bootstrap}
    # Ctrl-C semantics even when started with SIGINT ignored (a background
    # job of a non-interactive shell inherits SIG_IGN, and Python then
    # leaves SIGINT ignored).
    signal.signal(signal.SIGINT, signal.default_int_handler)

    emit("start")
    started = time.monotonic()
    try:
        leadership = kc.acquire_leadership_blocking(
            kafka,
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

    with leadership:
        token = leadership.token
        emit("elected", token=[token.producer_id, token.producer_epoch], deadline=leadership.lease.deadline)
        seq = 0
        while True:
            if a.topic is not None:
                try:
                    value = json.dumps({"member": a.member, "token": str(token), "seq": seq}).encode()
                    leadership.write_blocking(a.topic, value, key=a.role.encode())
                except kc.Fenced as e:
                    error = leadership.error
                    emit(
                        "fenced",
                        error=type(e).__name__,
                        message=str(e),
                        leadership_error=type(error).__name__ if error is not None else None,
                        is_held=leadership.is_held,
                    )
                    return 3
                emit("wrote", seq=seq)
                seq += 1
            if leadership.wait(a.write_every):
                error = leadership.error
                emit("ended", error=type(error).__name__ if error is not None else None)
                if a.topic is None or not isinstance(error, kc.Fenced):
                    return 3 if isinstance(error, kc.Fenced) else 1
                # Fenced: go round once more; the write must raise Fenced.


if __name__ == "__main__":
    sys.exit(main())
