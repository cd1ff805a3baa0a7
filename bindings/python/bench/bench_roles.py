"""Many roles held by one Python process: one :class:`AsyncClient`
acquires N roles at once, holds them, and resigns them, while the process samples its threads, open
descriptors, TCP sockets and resident memory every second (``/proc/self``)
and times its renewals from the leaderships' events. The Rust twin is
``examples/rust/benches/roles.rs`` (``ci/bench-roles.sh``); the numbers of
both are in ``docs/benchmarks/scale.md``.

With ``--blocking THREADS`` the blocking :class:`Client` does the same,
its acquires run by a ``concurrent.futures.ThreadPoolExecutor`` of that
many threads (the way the package's README gives for acquiring many roles
from blocking code), and the renewals are timed from ``on_event``.

Usage (with the package installed, e.g. ``ci/python.sh`` leaves it in
``bindings/python/.venv``):

    python bench/bench_roles.py --bootstrap HOST:PORT[,...] [--roles 1000]
        [--hold-s 120] [--lease-s 10] [--renew-s 3] [--acquire-within-s 120] [--blocking THREADS]
        [--state-topic NAME] [--json PATH]

Like the Rust twin, each run makes a state topic of its own (replication
factor 3, ``min.insync.replicas`` 2) unless ``--state-topic`` names one: a
new member reads its partition from the start, so a topic shared by earlier
runs would time their history too.

Prints one line per role count; exits 1 when a renewal failed or a role was
lost.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import importlib.metadata
import json
import math
import os
import platform
import sys
import time
import threading
from typing import Dict, List

import krabka_coordination as kc


def sample() -> Dict[str, float]:
    """Threads, descriptors, sockets and resident MiB of this process."""
    fields = {}
    with open("/proc/self/status") as f:
        for line in f:
            name, _, value = line.partition(":")
            fields[name] = value.split()
    fds = sockets = 0
    for fd in os.listdir("/proc/self/fd"):
        fds += 1
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                sockets += 1
        except OSError:
            pass
    return {
        "threads": int(fields["Threads"][0]),
        "fds": fds,
        "sockets": sockets,
        "rss_mib": int(fields["VmRSS"][0]) / 1024,
    }


def quantile(values: List[float], q: float) -> float:
    """The q-quantile (nearest rank) of ``values``, NaN when empty."""
    if not values:
        return float("nan")
    s = sorted(values)
    return s[max(1, min(len(s), math.ceil(q * len(s)))) - 1]


async def follow(leadership: kc.AsyncLeadership, renew_ms: int, late: List[float]) -> None:
    """Collects how late each renewal came: its grant time (deadline minus
    the lease) against the previous grant plus the renew interval."""
    previous = leadership.lease.granted_at
    lease_ms = leadership.lease.deadline - previous
    async for event in leadership.events():
        if event.kind == "renewed" and event.deadline is not None:
            granted = event.deadline - lease_ms
            late.append(event.at - (previous + renew_ms))
            previous = granted
        elif event.kind in ("ended", "resigned", "fenced", "lease_expired"):
            return


async def run_one(args: argparse.Namespace, client: kc.AsyncClient, n: int) -> Dict[str, object]:
    base = f"bench-roles-py-{int(time.time() * 1000)}-{n}"
    before = sample()
    t0 = time.monotonic()
    held = await asyncio.gather(
        *(
            client.acquire_leadership(
                f"{base}-{i}",
                "holder",
                lease_duration=args.lease_s,
                renew_interval=args.renew_s,
                timeout=args.acquire_within_s,
            )
            for i in range(n)
        )
    )
    acquired = time.monotonic() - t0
    print(f"bench_roles: {n} acquired in {acquired:.2f} s", file=sys.stderr)
    late: List[float] = []
    renew_ms = int(args.renew_s * 1000)
    followers = [asyncio.ensure_future(follow(l, renew_ms, late)) for l in held]
    peak = dict(before)
    until = time.monotonic() + args.hold_s
    while time.monotonic() < until:
        await asyncio.sleep(1)
        s = sample()
        for k in peak:
            peak[k] = max(peak[k], s[k])
    failures = sum(l.renewal_failures for l in held)
    lost = sum(1 for l in held if not l.is_held)
    t1 = time.monotonic()
    resigned = await asyncio.gather(*(l.resign() for l in held), return_exceptions=True)
    resign_errors = sum(1 for r in resigned if isinstance(r, BaseException))
    resign_all = time.monotonic() - t1
    for f in followers:
        f.cancel()
    await asyncio.gather(*followers, return_exceptions=True)
    return report(n, "Python", acquired, args.hold_s, before, peak, late, failures, lost, resign_all, resign_errors)


def report(
    n: int,
    what: str,
    acquired: float,
    hold_s: float,
    before: Dict[str, float],
    peak: Dict[str, float],
    late: List[float],
    failures: int,
    lost: int,
    resign_all: float,
    resign_errors: int,
) -> Dict[str, object]:
    """Prints the run's line and returns its JSON result."""
    result = {
        "roles": n,
        "client": what,
        "acquire_all_s": acquired,
        "hold_s": hold_s,
        "before": before,
        "peak": peak,
        "renewals": len(late),
        "renewal_late_ms": {
            "p50": quantile(late, 0.5),
            "p99": quantile(late, 0.99),
            "max": quantile(late, 1.0),
        },
        "renewal_failures": failures,
        "roles_lost": lost,
        "resign_all_s": resign_all,
        "resign_errors": resign_errors,
    }
    print(
        f"{n:>5} roles ({what}): acquired in {acquired:6.2f} s | peak {peak['threads']:>5} threads, "
        f"{peak['fds']:>5} fds, {peak['sockets']:>5} sockets, {peak['rss_mib']:7.1f} MiB | "
        f"{len(late)} renewals, late p50 {quantile(late, 0.5):.0f} ms p99 {quantile(late, 0.99):.0f} ms "
        f"max {quantile(late, 1.0):.0f} ms | {failures} failures, {lost} lost | "
        f"resigned in {resign_all:.2f} s ({resign_errors} errors)"
    )
    return result


def run_blocking(args: argparse.Namespace, client: kc.Client, n: int) -> Dict[str, object]:
    """The same with the blocking client: the acquires run by a thread pool
    of ``args.blocking`` threads, the renewals timed from ``on_event``."""
    base = f"bench-roles-pyb-{int(time.time() * 1000)}-{n}"
    renew_ms = int(args.renew_s * 1000)
    late: List[float] = []
    lock = threading.Lock()

    def acquire(i: int) -> kc.Leadership:
        # The previous grant and the lease, known once the acquire returned.
        state: Dict[str, float] = {}

        def on_event(event: kc.Event) -> None:
            if event.kind == "renewed" and event.deadline is not None and state:
                granted = event.deadline - state["lease_ms"]
                with lock:
                    late.append(event.at - (state["previous"] + renew_ms))
                state["previous"] = granted

        leadership = client.acquire_leadership(
            f"{base}-{i}",
            "holder",
            lease_duration=args.lease_s,
            renew_interval=args.renew_s,
            timeout=args.acquire_within_s,
            on_event=on_event,
        )
        state["lease_ms"] = leadership.lease.deadline - leadership.lease.granted_at
        state["previous"] = leadership.lease.granted_at
        return leadership

    before = sample()
    peak = dict(before)
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.blocking) as pool:
        futures = [pool.submit(acquire, i) for i in range(n)]
        while not all(f.done() for f in futures):
            time.sleep(0.2)
            s = sample()
            for k in peak:
                peak[k] = max(peak[k], s[k])
        held = [f.result() for f in futures]
    acquired = time.monotonic() - t0
    print(f"bench_roles: {n} acquired in {acquired:.2f} s ({args.blocking} threads)", file=sys.stderr)
    until = time.monotonic() + args.hold_s
    while time.monotonic() < until:
        time.sleep(1)
        s = sample()
        for k in peak:
            peak[k] = max(peak[k], s[k])
    failures = sum(l.renewal_failures for l in held)
    lost = sum(1 for l in held if not l.is_held)
    t1 = time.monotonic()
    resign_errors = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.blocking) as pool:
        for f in [pool.submit(l.resign) for l in held]:
            if f.exception() is not None:
                resign_errors += 1
    resign_all = time.monotonic() - t1
    with lock:
        late = list(late)
    what = f"Python, blocking, {args.blocking} threads"
    return report(n, what, acquired, args.hold_s, before, peak, late, failures, lost, resign_all, resign_errors)


async def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap", default=os.environ.get("KRABKA_BOOTSTRAP_3", ""))
    p.add_argument("--roles", default="1000", help="role counts, comma separated")
    p.add_argument("--hold-s", type=float, default=120.0)
    p.add_argument("--lease-s", type=float, default=10.0)
    p.add_argument("--renew-s", type=float, default=3.0)
    p.add_argument(
        "--acquire-within-s",
        type=float,
        default=120.0,
        help="each acquire's timeout: a run whose roles are not all acquired by then fails",
    )
    p.add_argument("--blocking", type=int, metavar="THREADS", help="the blocking Client, THREADS acquiring")
    p.add_argument("--state-topic", help="the state topic (default: one made for this run)")
    p.add_argument("--json", help="append one JSON line per role count")
    args = p.parse_args()
    if not args.bootstrap:
        p.error("--bootstrap (or KRABKA_BOOTSTRAP_3) is required")
    counts = [int(n) for n in args.roles.split(",")]
    print(
        f"python {platform.python_version()}, krabka-coordination "
        f"{importlib.metadata.version('krabka-coordination')}, "
        f"kafka {args.bootstrap}",
        file=sys.stderr,
    )
    topic = args.state_topic or f"krabka-bench-roles-py-{int(time.time() * 1000)}"
    print(f"bench_roles: state topic {topic}", file=sys.stderr)
    ok = True

    def record(r: Dict[str, object]) -> bool:
        if args.json:
            with open(args.json, "a") as f:
                line = {"t_ms": int(time.time() * 1000), "bootstrap": args.bootstrap, "python": True, "result": r}
                f.write(json.dumps(line) + "\n")
        return r["renewal_failures"] == 0 and r["roles_lost"] == 0

    if args.blocking:
        with kc.Client({"bootstrap.servers": args.bootstrap}, state_topic=topic) as blocking:
            blocking.ensure_state_topic()  # replication factor 3, min ISR 2
            for n in counts:
                ok = record(run_blocking(args, blocking, n)) and ok
                time.sleep(3)
        return 0 if ok else 1
    async with kc.AsyncClient({"bootstrap.servers": args.bootstrap}, state_topic=topic) as client:
        await client.ensure_state_topic()  # replication factor 3, min ISR 2
        for n in counts:
            ok = record(await run_one(args, client, n)) and ok
            await asyncio.sleep(3)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
