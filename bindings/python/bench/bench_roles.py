"""Many roles held by one Python process (issue 16, item 2, "and the same
through Python"): one :class:`AsyncClient` acquires N roles at once, holds
them, and resigns them, while the process samples its threads, open
descriptors, TCP sockets and resident memory every second (``/proc/self``)
and times its renewals from the leaderships' events. The Rust twin is
``examples/rust/benches/roles.rs`` (``ci/bench-roles.sh``); the numbers of
both are in ``docs/benchmarks/scale.md``.

Usage (with the package installed, e.g. ``ci/python.sh`` leaves it in
``bindings/python/.venv``):

    python bench/bench_roles.py --bootstrap HOST:PORT[,...] [--roles 1000]
        [--hold-s 120] [--lease-s 10] [--renew-s 3] [--json PATH]

Prints one line per role count; exits 1 when a renewal failed or a role was
lost.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import math
import os
import platform
import sys
import time
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
    result = {
        "roles": n,
        "acquire_all_s": acquired,
        "hold_s": args.hold_s,
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
        f"{n:>5} roles (Python): acquired in {acquired:6.2f} s | peak {peak['threads']:>5} threads, "
        f"{peak['fds']:>5} fds, {peak['sockets']:>5} sockets, {peak['rss_mib']:7.1f} MiB | "
        f"{len(late)} renewals, late p50 {quantile(late, 0.5):.0f} ms p99 {quantile(late, 0.99):.0f} ms "
        f"max {quantile(late, 1.0):.0f} ms | {failures} failures, {lost} lost | "
        f"resigned in {resign_all:.2f} s ({resign_errors} errors)"
    )
    return result


async def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap", default=os.environ.get("KRABKA_BOOTSTRAP_3", ""))
    p.add_argument("--roles", default="1000", help="role counts, comma separated")
    p.add_argument("--hold-s", type=float, default=120.0)
    p.add_argument("--lease-s", type=float, default=10.0)
    p.add_argument("--renew-s", type=float, default=3.0)
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
    ok = True
    async with kc.AsyncClient({"bootstrap.servers": args.bootstrap}) as client:
        for n in counts:
            r = await run_one(args, client, n)
            ok = ok and r["renewal_failures"] == 0 and r["roles_lost"] == 0
            if args.json:
                with open(args.json, "a") as f:
                    line = {"t_ms": int(time.time() * 1000), "bootstrap": args.bootstrap, "python": True, "result": r}
                    f.write(json.dumps(line) + "\n")
            await asyncio.sleep(3)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
