"""A neighbour's transaction frozen on a state partition

  freeze.py hold BOOTSTRAP TRANSACTIONAL_ID PARTITION TIMEOUT_MS
      opens a transaction of TRANSACTIONAL_ID (transaction timeout
      TIMEOUT_MS), writes one record with that id's lease key to PARTITION
      of __coordination_state, prints READY and sleeps: the nemesis
      SIGKILLs it there, a member killed between its Produce and its EndTxn.
      Kafka aborts the transaction only after TIMEOUT_MS plus the brokers'
      clean-up interval.
  freeze.py abort BOOTSTRAP TRANSACTIONAL_ID
      InitProducerId of the same id: the coordinator aborts the open
      transaction (as a restarted member's would), then exits.

confluent-kafka's own transactional producer: nothing of the project's code.
"""

import struct
import sys
import time

from confluent_kafka import Producer

from kafka_io import STATE_TOPIC


def lease_key(role):
    """The state record key of `role`'s lease (version 0, kind 1, the role,
    an empty member)."""
    r = role.encode()
    return struct.pack(">hhh", 0, 1, len(r)) + r + struct.pack(">h", 0)


def producer(bootstrap, tid, timeout_ms):
    return Producer({
        "bootstrap.servers": bootstrap,
        "transactional.id": tid,
        "transaction.timeout.ms": timeout_ms,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 0,
        "log_level": 4,
    })


def main(argv):
    if len(argv) == 5 and argv[0] == "hold":
        bootstrap, tid, partition, timeout_ms = argv[1], argv[2], int(argv[3]), int(argv[4])
        p = producer(bootstrap, tid, timeout_ms)
        p.init_transactions(60)
        p.begin_transaction()
        p.produce(STATE_TOPIC, key=lease_key(tid), value=b"frozen", partition=partition)
        if p.flush(30) != 0:
            print("FAILED the record was not delivered", flush=True)
            return 1
        print("READY", flush=True)
        # The nemesis kills it here; should the nemesis die first, it ends
        # by itself after its transaction timed out.
        time.sleep(timeout_ms / 1000.0 + 30.0)
        return 0
    if len(argv) == 3 and argv[0] == "abort":
        p = producer(argv[1], argv[2], 60000)
        p.init_transactions(120)
        print("ABORTED", flush=True)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
