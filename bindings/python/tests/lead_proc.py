"""A member process running a leader loop (``Client.lead``, or
``AsyncClient.lead`` with ``--asyncio``), for the leader-loop tests (run by
``kafka_support.Member`` with ``script=LEAD_SCRIPT``).

Each term's work prints ``term`` (``number``, ``token``) and then waits for
the term's end signal, printing ``term_ended`` when it comes. SIGTERM stops
the loop (``stopped`` once ``lead`` returned). Every line is a JSON object
on stdout, as ``member_proc.py`` writes them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import threading
import time
from typing import Any

import krabka_coordination as kc

_lock = threading.Lock()


def emit(event: str, **fields: Any) -> None:
    line = json.dumps({"event": event, "t": time.time(), **fields})
    with _lock:
        print(line, flush=True)


def term_fields(leadership: kc.Leadership | kc.AsyncLeadership, number: int) -> dict[str, Any]:
    token = leadership.token
    return {"number": number, "token": [token.producer_id, token.producer_epoch], "member": leadership.member}


def run_blocking(a: argparse.Namespace) -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    terms = 0

    def work(leadership: kc.Leadership, ended: kc.TermEnded) -> None:
        nonlocal terms
        terms += 1
        emit("term", **term_fields(leadership, terms))
        ended.wait()
        emit("term_ended", number=terms)

    with kc.Client({"bootstrap.servers": a.bootstrap}) as client:
        emit("start")
        client.lead(
            a.role, a.member, work,
            lease_duration=a.lease, renew_interval=a.renew, challenge_stagger=a.stagger, stop=stop,
        )


async def run_async(a: argparse.Namespace) -> None:
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    terms = 0

    async def work(leadership: kc.AsyncLeadership, ended: asyncio.Event) -> None:
        nonlocal terms
        terms += 1
        emit("term", **term_fields(leadership, terms))
        await ended.wait()
        emit("term_ended", number=terms)

    async with kc.AsyncClient({"bootstrap.servers": a.bootstrap}) as client:
        emit("start")
        try:
            await client.lead(
                a.role, a.member, work,
                lease_duration=a.lease, renew_interval=a.renew, challenge_stagger=a.stagger,
            )
        except asyncio.CancelledError:
            pass


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--role", required=True)
    p.add_argument("--member", required=True)
    p.add_argument("--lease", type=float, required=True)
    p.add_argument("--renew", type=float, required=True)
    p.add_argument("--stagger", type=float, required=True)
    p.add_argument("--asyncio", action="store_true")
    a = p.parse_args()
    if a.asyncio:
        asyncio.run(run_async(a))
    else:
        run_blocking(a)
    emit("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
