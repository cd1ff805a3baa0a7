"""Kafka through an independent client (confluent-kafka, its own librdkafka):
topics of the campaign, and the committed records the checker reads.

Nothing here goes through the project's code: the checker must not trust
the thing it checks.
"""

import struct
import time

import threading

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition, OFFSET_BEGINNING
from confluent_kafka.admin import AdminClient, NewTopic

STATE_TOPIC = "__coordination_state"


def admin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000, "log_level": 4})


def partition_count(bootstrap, topic, timeout=20.0):
    """The partition count of `topic`, or None when it does not exist."""
    md = admin(bootstrap).list_topics(topic=topic, timeout=timeout)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        if t is not None and t.error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
            raise RuntimeError(f"metadata of {topic}: {t.error}")
        return None
    return len(t.partitions)


def partition_leader(bootstrap, topic, partition, timeout=20.0):
    """The broker id that leads one partition (-1 when none does)."""
    md = admin(bootstrap).list_topics(topic=topic, timeout=timeout)
    return md.topics[topic].partitions[partition].leader


def in_sync(bootstrap, topic, partition, timeout=10.0):
    """The broker ids of one partition's ISR (None when the metadata cannot
    be read)."""
    try:
        md = admin(bootstrap).list_topics(topic=topic, timeout=timeout)
        return list(md.topics[topic].partitions[partition].isrs)
    except (KafkaException, KeyError):
        return None


def under_replicated(bootstrap, timeout=10.0):
    """How many partitions of the cluster have fewer in-sync replicas than
    replicas (None when the metadata cannot be read)."""
    try:
        md = admin(bootstrap).list_topics(timeout=timeout)
    except KafkaException:
        return None
    return sum(len(p.isrs) < len(p.replicas) for t in md.topics.values() for p in t.partitions.values())


def create_topic(bootstrap, topic, partitions, config):
    """Creates `topic` (replication factor 3) unless it exists."""
    client = admin(bootstrap)  # must outlive the futures
    futures = client.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=3, config=config)],
        operation_timeout=30,
        request_timeout=40,
    )
    for name, f in futures.items():
        try:
            f.result(60)
        except KafkaException as e:
            if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise RuntimeError(f"creating {name}: {e}") from e


def set_topic_config(bootstrap, topic, name, value):
    """Sets one configuration of `topic` (IncrementalAlterConfigs)."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    client = admin(bootstrap)
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)])
    for f in client.incremental_alter_configs([resource], request_timeout=20).values():
        f.result(30)


def ensure_state_topic(bootstrap, default_partitions=16):
    """The state topic's partition count; creates it (compacted, RF 3, min ISR
    2) when the cluster has none."""
    n = partition_count(bootstrap, STATE_TOPIC)
    if n is None:
        create_topic(
            bootstrap,
            STATE_TOPIC,
            default_partitions,
            {"cleanup.policy": "compact", "min.insync.replicas": "2"},
        )
        # a new cluster's brokers can take a moment to learn of the topic
        # (seen on a fresh 3.6.2 cluster)
        deadline = time.monotonic() + 30.0
        while (n := partition_count(bootstrap, STATE_TOPIC)) is None and time.monotonic() < deadline:
            time.sleep(0.5)
        if n is None:
            raise RuntimeError(f"{STATE_TOPIC} is still missing 30 s after creating it")
    return n


def delete_topics(bootstrap, topics):
    if not topics:
        return
    client = admin(bootstrap)  # must outlive the futures
    for name, f in client.delete_topics(list(topics), operation_timeout=30).items():
        try:
            f.result(60)
        except KafkaException as e:
            print(f"faults: could not delete {name}: {e}", flush=True)


def _consumer(bootstrap, isolation, eof=True):
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "krabka-faults-checker",
            "enable.auto.commit": False,
            "enable.partition.eof": eof,
            "isolation.level": isolation,
            "auto.offset.reset": "earliest",
            "log_level": 4,
        }
    )


def ends(bootstrap, topic, partition, timeout=10.0):
    """(last stable offset, high watermark) of one partition: the end a
    read_committed reader sees, and the end of the log."""
    tp = TopicPartition(topic, partition)
    out = []
    for isolation in ("read_committed", "read_uncommitted"):
        c = _consumer(bootstrap, isolation)
        try:
            out.append(c.get_watermark_offsets(tp, timeout=timeout, cached=False)[1])
        finally:
            c.close()
    return out[0], out[1]


def wait_stable(bootstrap, topic, partition, within):
    """Waits until no open transaction holds the partition's last stable
    offset back (LSO == high watermark). Returns (lso, hw, settled)."""
    deadline = time.monotonic() + within
    while True:
        try:
            lso, hw = ends(bootstrap, topic, partition)
            if lso == hw or time.monotonic() > deadline:
                return lso, hw, lso == hw
        except KafkaException:
            if time.monotonic() > deadline:
                return -1, -1, False
        time.sleep(1.0)


def read_committed(bootstrap, topic, partition, within=120.0):
    """Every committed record of one partition, in log order, up to its last
    stable offset: a list of (offset, key, value). Raises on a timeout."""
    c = _consumer(bootstrap, "read_committed")
    records = []
    deadline = time.monotonic() + within
    try:
        c.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        while True:
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"reading {topic}[{partition}] did not reach its end within {within:.0f}s "
                    f"({len(records)} records read)"
                )
            msg = c.poll(1.0)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    return records, msg.offset()
                if err.retriable() or err.code() in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN):
                    continue
                raise RuntimeError(f"reading {topic}[{partition}]: {err}")
            records.append((msg.offset(), msg.key(), msg.value()))
    finally:
        c.close()


def committed_offset(bootstrap, group, topic, partition, timeout=20.0):
    """The offset consumer group `group` has committed for one partition
    (only decided commits: require_stable), or None when it has none."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "isolation.level": "read_committed", "log_level": 4})
    try:
        got = c.committed([TopicPartition(topic, partition)], timeout=timeout)[0]
        return got.offset if got.offset >= 0 else None
    finally:
        c.close()


class Feeder:
    """Writes the inputs "0", "1", ... to partition 0 of `topic` on a thread,
    one every `every_s` (idempotent, acks=all), until stop(), which returns
    how many were written (every one acknowledged)."""

    def __init__(self, bootstrap, topic, every_s):
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "log_level": 4})
        self.topic = topic
        self.every_s = every_s
        self.count = 0
        self.failed = []
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self._run, name="feeder", daemon=True)

    def _delivered(self, err, msg):
        if err is not None:
            self.failed.append(f"input {msg.value()!r}: {err}")

    def _run(self):
        while not self.stop_flag.is_set():
            self.producer.produce(self.topic, value=str(self.count).encode(), partition=0,
                                  on_delivery=self._delivered)
            self.count += 1
            self.producer.poll(0)
            self.stop_flag.wait(self.every_s)

    def start(self):
        self.thread.start()

    def stop(self, within=120.0):
        self.stop_flag.set()
        self.thread.join()
        left = self.producer.flush(within)
        if left:
            self.failed.append(f"{left} inputs not acknowledged within {within:.0f}s")
        return self.count


# ---------------------------------------------------------------- state records
# The frozen layouts of core/src/codec.rs (big-endian):
#   key:   version i16 = 0, kind i16 (0 registration, 1 lease), role string, member string
#   lease: version i16 = 0, member string, producer_id i64, producer_epoch i16,
#          granted_at i64, deadline i64
# A string is an i16 byte length and the UTF-8 bytes.


def _string(buf, pos):
    (n,) = struct.unpack_from(">h", buf, pos)
    if n < 0:
        raise ValueError("negative string length")
    end = pos + 2 + n
    if end > len(buf):
        raise ValueError("string past the end")
    return buf[pos + 2 : end].decode("utf-8"), end


def decode_key(buf):
    """(kind, role, member) of a state record key; kind 0 registration, 1 lease."""
    version, kind = struct.unpack_from(">hh", buf, 0)
    if version != 0 or kind not in (0, 1):
        raise ValueError(f"key version {version} kind {kind}")
    role, pos = _string(buf, 4)
    member, pos = _string(buf, pos)
    if pos != len(buf):
        raise ValueError("trailing bytes in a key")
    return kind, role, member


def decode_lease(buf):
    """(member, producer_id, epoch, granted_at, deadline) of a lease value."""
    (version,) = struct.unpack_from(">h", buf, 0)
    if version != 0:
        raise ValueError(f"lease version {version}")
    member, pos = _string(buf, 2)
    pid, epoch, granted, deadline = struct.unpack_from(">qhqq", buf, pos)
    if pos + 26 != len(buf):
        raise ValueError("trailing bytes in a lease value")
    return member, pid, epoch, granted, deadline
