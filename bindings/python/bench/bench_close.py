"""Closing a client that holds many roles hands every one over before its
lease runs out: one :class:`AsyncClient` (the holder) acquires N roles, a
second one (the standby) queues a member behind each, then the holder is
closed (``aclose``, what ``async with`` does). Every standby must take over
well before the holder's lease would have run out (lease ``--lease-s``).

Usage (with the package installed, e.g. ``ci/python.sh`` leaves it in
``bindings/python/.venv``):

    python bench/bench_close.py --bootstrap HOST:PORT[,...] [--roles 1000]
        [--lease-s 10] [--renew-s 3] [--state-topic NAME]

Each run makes a state topic of its own (replication factor 3,
``min.insync.replicas`` 2) unless ``--state-topic`` names one. Prints the
time the close took and the take-over times (from the start of the close);
exits 1 when a standby took over only after the lease (or not at all).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import List

import krabka_coordination as kc


def quantile(values: List[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run(args: argparse.Namespace, topic: str) -> int:
    settings = {"bootstrap.servers": args.bootstrap}
    timings = {"lease_duration": args.lease_s, "renew_interval": args.renew_s, "challenge_stagger": 1.0}
    roles = [f"bench-close-{int(time.time())}-{i}" for i in range(args.roles)]
    async with kc.AsyncClient(settings, state_topic=topic) as standby_client:
        await standby_client.ensure_state_topic()  # replication factor 3, min ISR 2
        holder = kc.AsyncClient(settings, state_topic=topic)
        t0 = time.monotonic()
        # Kept referenced until the close: a dropped leadership object stops
        # renewing on its own, which is not what is measured here.
        held = await asyncio.gather(
            *(
                holder.acquire_leadership(
                    r,
                    "holder",
                    lease_duration=timings["lease_duration"],
                    renew_interval=timings["renew_interval"],
                    challenge_stagger=timings["challenge_stagger"],
                )
                for r in roles
            )
        )
        print(f"{args.roles} roles acquired in {time.monotonic() - t0:.1f} s", flush=True)
        registered = 0
        all_registered = asyncio.Event()
        loop = asyncio.get_running_loop()

        def on_event(event: kc.Event) -> None:
            nonlocal registered
            if event.kind == "registered":
                registered += 1
                if registered == args.roles:
                    loop.call_soon_threadsafe(all_registered.set)

        took: List[float] = []
        early: List[str] = []
        closed_at = [0.0]

        async def standby(role: str) -> None:
            leadership = await standby_client.acquire_leadership(
                role,
                "standby",
                lease_duration=timings["lease_duration"],
                renew_interval=timings["renew_interval"],
                challenge_stagger=timings["challenge_stagger"],
                on_event=on_event,
                timeout=3 * args.lease_s + 60,
            )
            if closed_at[0]:
                took.append(time.monotonic() - closed_at[0])
            else:
                early.append(role)  # the holder lost it before the close
            await leadership.resign()

        standbys = [asyncio.ensure_future(standby(r)) for r in roles]
        await asyncio.wait_for(all_registered.wait(), 120)
        closed_at[0] = time.monotonic()
        await holder.aclose()
        close_s = time.monotonic() - closed_at[0]
        still_held = sum(1 for leadership in held if leadership.is_held)
        outcomes = await asyncio.gather(*standbys, return_exceptions=True)
        failed = [o for o in outcomes if isinstance(o, BaseException)]
        late = [t for t in took if t >= args.lease_s]
        print(
            f"roles={args.roles} lease={args.lease_s:g}s close={close_s:.2f}s "
            f"takeover p50={quantile(took, 0.5):.2f}s p99={quantile(took, 0.99):.2f}s max={max(took, default=0):.2f}s "
            f"after-lease={len(late)} lost-before-close={len(early)} failed={len(failed)} "
            f"held-after-close={still_held}",
            flush=True,
        )
        for e in failed[:5]:
            print(f"  failed: {e!r}", file=sys.stderr)
        return 0 if not late and not early and not failed and not still_held and len(took) == args.roles else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--roles", type=int, default=1000)
    p.add_argument("--lease-s", type=float, default=10.0)
    p.add_argument("--renew-s", type=float, default=3.0)
    p.add_argument("--state-topic")
    args = p.parse_args()
    topic = args.state_topic or f"krabka-bench-close-py-{int(time.time() * 1000)}"
    return asyncio.run(run(args, topic))


if __name__ == "__main__":
    sys.exit(main())
