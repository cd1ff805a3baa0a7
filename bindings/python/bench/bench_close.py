"""Closing a client that holds many roles hands every one over before its
lease runs out: one :class:`AsyncClient` (the holder) acquires N roles, a
second one (the standby) queues a member behind each, then the holder is
closed (``aclose``, what ``async with`` does). The standby client runs in a
process of its own, as a user's standbys do (``--one-process``: beside the
holder in this one). Every standby must take over
before the holder's lease of that role runs out: the standby's election
(its ``elected`` event) comes before the deadline of the holder's last
committed lease (its last ``elected`` or ``renewed`` event). A role the close
has not reached yet is still renewed, so its deadline moves on; the time
from the start of the close is printed beside it.

Usage (with the package installed, e.g. ``ci/python.sh`` leaves it in
``bindings/python/.venv``):

    python bench/bench_close.py --bootstrap HOST:PORT[,...] [--roles 1000]
        [--lease-s 10] [--renew-s 3] [--state-topic NAME] [--one-process]

Each run makes a state topic of its own (replication factor 3,
``min.insync.replicas`` 2) unless ``--state-topic`` names one. Prints the
time the close took, the take-over times (from the start of the close) and
how far each election came before the holder's deadline; exits 1 when a
standby took over only after that deadline (or not at all), or when a term
of the holder ended by its lease running out.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Dict, List, Set

import krabka_coordination as kc


def quantile(values: List[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run_one_process(args: argparse.Namespace, topic: str) -> int:
    settings = {"bootstrap.servers": args.bootstrap}
    timings = {"lease_duration": args.lease_s, "renew_interval": args.renew_s, "challenge_stagger": 1.0}
    roles = role_names(args)
    async with kc.AsyncClient(settings, state_topic=topic) as standby_client:
        await standby_client.ensure_state_topic()  # replication factor 3, min ISR 2
        holder = kc.AsyncClient(settings, state_topic=topic)
        # The holder's lease deadline of each role, and the roles whose
        # term ended with the lease run out (epoch ms of this host's clock,
        # which both clients share).
        deadline: Dict[str, int] = {}
        expired: Set[str] = set()

        def on_holder_event(event: kc.Event) -> None:
            if event.kind in ("elected", "renewed") and event.deadline is not None:
                deadline[event.role] = event.deadline
            elif event.kind == "lease_expired":
                expired.add(event.role)

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
                    on_event=on_holder_event,
                )
                for r in roles
            )
        )
        print(f"{args.roles} roles acquired in {time.monotonic() - t0:.1f} s", flush=True)
        registered = 0
        all_registered = asyncio.Event()
        loop = asyncio.get_running_loop()

        # How long before the holder's deadline each standby was elected
        # (negative: after it).
        margin: Dict[str, float] = {}

        def on_event(event: kc.Event) -> None:
            nonlocal registered
            if event.kind == "elected" and event.role in deadline:
                margin[event.role] = (deadline[event.role] - event.at) / 1000
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
        return report(args, close_s, took, margin, expired, early, [repr(e) for e in failed], still_held)


def role_names(args: argparse.Namespace) -> List[str]:
    """The run's role names (one prefix per run, shared with the standby process)."""
    return [f"bench-close-{args.run_id}-{i}" for i in range(args.roles)]


def timing_options(args: argparse.Namespace) -> Dict[str, float]:
    return {"lease_duration": args.lease_s, "renew_interval": args.renew_s, "challenge_stagger": 1.0}


async def run_standbys(args: argparse.Namespace, topic: str) -> int:
    """The standby process: a member behind each role; prints ``registered``
    once all are queued, then ``elected ROLE EPOCH_MS`` per election,
    ``failed ROLE ERROR`` per failure, and ``done``."""
    settings = {"bootstrap.servers": args.bootstrap}
    registered = 0

    # Printed from the thread that delivers the events: one line per write.
    def on_event(event: kc.Event) -> None:
        nonlocal registered
        if event.kind == "elected":
            print(f"elected {event.role} {event.at}", flush=True)
        elif event.kind == "registered":
            registered += 1
            if registered == args.roles:
                print("registered", flush=True)

    async def standby(client: kc.AsyncClient, role: str) -> None:
        try:
            leadership = await client.acquire_leadership(
                role, "standby", on_event=on_event, timeout=3 * args.lease_s + 60, **timing_options(args)
            )
            await leadership.resign()
        except Exception as e:  # noqa: BLE001 - reported to the holder's process
            print(f"failed {role} {e!r}", flush=True)

    async with kc.AsyncClient(settings, state_topic=topic) as client:
        await asyncio.gather(*(standby(client, r) for r in role_names(args)))
    print("done", flush=True)
    return 0


async def run(args: argparse.Namespace, topic: str) -> int:
    """The holder's process; the standbys run in a child process."""
    settings = {"bootstrap.servers": args.bootstrap}
    roles = role_names(args)
    async with kc.AsyncClient(settings, state_topic=topic) as admin:
        await admin.ensure_state_topic()  # replication factor 3, min ISR 2
    holder = kc.AsyncClient(settings, state_topic=topic)
    # The holder's lease deadline of each role, and the roles whose term
    # ended with the lease run out (epoch ms of this host's clock, which both
    # processes share).
    deadline: Dict[str, int] = {}
    expired: Set[str] = set()

    def on_holder_event(event: kc.Event) -> None:
        if event.kind in ("elected", "renewed") and event.deadline is not None:
            deadline[event.role] = event.deadline
        elif event.kind == "lease_expired":
            expired.add(event.role)

    t0 = time.monotonic()
    held = await asyncio.gather(
        *(holder.acquire_leadership(r, "holder", on_event=on_holder_event, **timing_options(args)) for r in roles)
    )
    print(f"{args.roles} roles acquired in {time.monotonic() - t0:.1f} s", flush=True)
    child = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--standby-process", "--bootstrap", args.bootstrap,
        "--roles", str(args.roles), "--lease-s", str(args.lease_s), "--renew-s", str(args.renew_s),
        "--state-topic", topic, "--run-id", args.run_id,
        stdout=asyncio.subprocess.PIPE,
    )
    assert child.stdout is not None
    elected_at: Dict[str, int] = {}
    failed: List[str] = []
    ready = asyncio.Event()

    async def read_child() -> None:
        assert child.stdout is not None
        async for raw in child.stdout:
            word, _, rest = raw.decode().strip().partition(" ")
            if word == "registered":
                ready.set()
            elif word == "elected":
                role, at = rest.split(" ")
                elected_at[role] = int(at)
            elif word == "failed":
                failed.append(rest)

    reader = asyncio.ensure_future(read_child())
    await asyncio.wait_for(ready.wait(), 120)
    closed_at_ms = time.time() * 1000
    closed_at = time.monotonic()
    await holder.aclose()
    close_s = time.monotonic() - closed_at
    still_held = sum(1 for leadership in held if leadership.is_held)
    await asyncio.wait_for(child.wait(), 3 * args.lease_s + 90)
    await reader
    early = [r for r, at in elected_at.items() if at < closed_at_ms]
    took = [(at - closed_at_ms) / 1000 for r, at in elected_at.items() if at >= closed_at_ms]
    margin = {r: (deadline[r] - at) / 1000 for r, at in elected_at.items() if r in deadline}
    return report(args, close_s, took, margin, expired, early, failed, still_held)


def report(
    args: argparse.Namespace,
    close_s: float,
    took: List[float],
    margin: Dict[str, float],
    expired: Set[str],
    early: List[str],
    failed: List[str],
    still_held: int,
) -> int:
    """Prints one line of results; 0 when every role was handed over in time."""
    late = [r for r, m in margin.items() if m <= 0]
    after_lease_s = [t for t in took if t >= args.lease_s]
    margins = list(margin.values())
    print(
        f"roles={args.roles} lease={args.lease_s:g}s close={close_s:.2f}s "
        f"takeover p50={quantile(took, 0.5):.2f}s p99={quantile(took, 0.99):.2f}s max={max(took, default=0):.2f}s "
        f"(after {args.lease_s:g}s from the close: {len(after_lease_s)}) "
        f"before-deadline min={min(margins, default=float('nan')):.2f}s p50={quantile(margins, 0.5):.2f}s "
        f"after-deadline={len(late)} holder-lease-expired={len(expired)} "
        f"lost-before-close={len(early)} failed={len(failed)} held-after-close={still_held}",
        flush=True,
    )
    for e in failed[:5]:
        print(f"  failed: {e}", file=sys.stderr)
    whole = len(took) == args.roles and len(margin) == args.roles
    return 0 if whole and not late and not expired and not early and not failed and not still_held else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--roles", type=int, default=1000)
    p.add_argument("--lease-s", type=float, default=10.0)
    p.add_argument("--renew-s", type=float, default=3.0)
    p.add_argument("--state-topic")
    p.add_argument("--one-process", action="store_true", help="the standbys in this process, beside the holder")
    p.add_argument("--standby-process", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--run-id", default=str(int(time.time())), help=argparse.SUPPRESS)
    args = p.parse_args()
    topic = args.state_topic or f"krabka-bench-close-py-{int(time.time() * 1000)}"
    if args.standby_process:
        return asyncio.run(run_standbys(args, topic))
    return asyncio.run((run_one_process if args.one_process else run)(args, topic))


if __name__ == "__main__":
    sys.exit(main())
