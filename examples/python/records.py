"""Write and read the records of one role the way every port does.

Builds the registration and lease records a member of role "orders" would
append to __coordination_state, pins them to the role's partition, reads them
back, and decides which of two lease holders is authoritative by their fencing
tokens. No Kafka needed: the bytes are what a producer would send.

Run:  python examples/python/records.py [partitions]
"""

from __future__ import annotations

import sys
import time

import krabka_coordination as kc


def main(partitions: int) -> None:
    role, member = "orders", "node-1"
    now_ms = int(time.time() * 1000)

    # Every record of a role goes to one partition: the role's, not the key's.
    partition = kc.role_partition(role, partitions)
    print(f"role {role!r}: partition {partition} of {partitions}")

    registration = (
        kc.encode_key(kc.Key.registration(role, member)),
        kc.encode_registration(kc.Registration(member, now_ms)),
    )
    token = kc.FencingToken(producer_id=4001, producer_epoch=7)
    lease = (
        kc.encode_key(kc.Key.lease(role)),
        kc.encode_lease(kc.Lease(member, token, granted_at=now_ms, deadline=now_ms + 30_000)),
    )
    for key_bytes, value_bytes in (registration, lease):
        print(f"  key {key_bytes.hex()}  value {value_bytes.hex()}")

    # Reading back: the key says which decoder the value needs.
    for key_bytes, value_bytes in (registration, lease):
        key = kc.decode_key(key_bytes)
        value: object = (
            kc.decode_registration(value_bytes) if key.kind == "registration" else kc.decode_lease(value_bytes)
        )
        print(f"  {key!r} -> {value!r}")

    # Fencing: a newer producer id outranks every epoch of an older one.
    deposed = kc.FencingToken(4001, 32766)
    current = kc.FencingToken(4002, 0)
    winner = max(deposed, current)
    print(f"authoritative: {winner} (not {deposed}); nobody yet: {kc.NO_EPOCH}")

    # Bad bytes name the record part that failed.
    try:
        kc.decode_lease(lease[1][:-1])
    except kc.FormatError as e:
        print(f"refused ({e.part}): {e}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 16)
