"""Decoding a lease value: the package (the Rust core through the binding)
against a pure-Python ``struct`` decoder of the same layout, in one run.

The pure-Python decoder does the same work as the core's: it checks the
version, the string length, strict UTF-8, the member is not empty, and no
trailing bytes; and it returns an object with the same fields (a NamedTuple
holding a NamedTuple token), the cheapest faithful result Python offers.

Usage:
    python bench/bench_decode.py [--number N] [--repeat R]

Prints ns/op (best of R interleaved rounds of N calls) for each decoder and
input, and exits 1 if the package is slower than the pure-Python decoder.
"""

from __future__ import annotations

import argparse
import platform
import struct
import sys
import timeit
from typing import Callable, List, NamedTuple, Tuple

import krabka_coordination as kc

_HEADER = struct.Struct(">hh")  # version, string length
_TAIL = struct.Struct(">qhqq")  # producer_id, producer_epoch, granted_at, deadline


class Token(NamedTuple):
    """The pure-Python token."""

    producer_id: int
    producer_epoch: int


class Lease(NamedTuple):
    """The pure-Python lease value."""

    member: str
    token: Token
    granted_at: int
    deadline: int


def struct_decode_lease(data: bytes) -> Lease:
    """The lease value layout read with ``struct``, with the core's checks."""
    if len(data) < 4:
        raise ValueError("malformed lease value: too short")
    version, n = _HEADER.unpack_from(data, 0)
    if version != 0:
        raise ValueError(f"malformed lease value: unsupported version {version}")
    if n < 0:
        raise ValueError(f"malformed lease value: negative member length {n}")
    end = 4 + n
    if len(data) != end + _TAIL.size:
        raise ValueError("malformed lease value: wrong length")
    member = data[4:end].decode("utf-8")  # strict: refuses what the core refuses
    if not member:
        raise ValueError("malformed lease value: empty member")
    producer_id, producer_epoch, granted_at, deadline = _TAIL.unpack_from(data, end)
    return Lease(member, Token(producer_id, producer_epoch), granted_at, deadline)


def _best_ns_interleaved(
    decoders: List[Callable[[bytes], object]], data: bytes, number: int, repeat: int
) -> List[float]:
    """Best ns per ``decode(data)`` call for each decoder. The decoders take
    turns, one batch of ``number`` calls each per round, so a busy moment of
    the machine hits both alike; the best round of each is reported. A
    statement string (not a lambda) keeps an extra Python frame out of both."""
    timers = [timeit.Timer("decode(data)", globals={"decode": d, "data": data}) for d in decoders]
    best = [float("inf")] * len(timers)
    for _ in range(repeat):
        for i, timer in enumerate(timers):
            best[i] = min(best[i], timer.timeit(number=number))
    return [b / number * 1e9 for b in best]


def run(number: int, repeat: int) -> List[Tuple[str, int, float, float]]:
    inputs = [
        ("member 'node-1'", kc.Lease("node-1", kc.FencingToken(4001, 7), 1767225600000, 1767225630000)),
        ("member of 200 chars", kc.Lease("n" * 200, kc.FencingToken(4001, 7), 1767225600000, 1767225630000)),
    ]
    rows = []
    for label, lease in inputs:
        data = kc.encode_lease(lease)
        # Both decoders must agree before they are timed.
        mine = kc.decode_lease(data)
        ref = struct_decode_lease(data)
        assert (mine.member, mine.token.producer_id, mine.token.producer_epoch, mine.granted_at, mine.deadline) == (
            ref.member,
            ref.token.producer_id,
            ref.token.producer_epoch,
            ref.granted_at,
            ref.deadline,
        )
        native, pure = _best_ns_interleaved([kc.decode_lease, struct_decode_lease], data, number, repeat)
        rows.append((label, len(data), native, pure))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--number", type=int, default=200_000, help="calls per round (default 200000)")
    parser.add_argument("--repeat", type=int, default=15, help="rounds; the best is reported (default 15)")
    args = parser.parse_args()
    print(f"python {platform.python_version()} ({platform.python_implementation()}), {platform.machine()}")
    print(f"best of {args.repeat} interleaved rounds x {args.number} calls, ns/op (lower is better)\n")
    print(f"{'input':<22} {'bytes':>5} {'krabka_coordination':>20} {'struct (pure Python)':>21} {'ratio':>6}")
    slower = False
    for label, size, native, pure in run(args.number, args.repeat):
        print(f"{label:<22} {size:>5} {native:>20.0f} {pure:>21.0f} {pure / native:>5.1f}x")
        slower |= native > pure
    if slower:
        print("\nthe package is SLOWER than the pure-Python decoder", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
