"""Arguments of the clients: options refused at the call (before any I/O,
before any await) with a message naming the argument and the value, bad
``kafka`` dicts, the state topic's shape, and ``OutRecord``."""

from __future__ import annotations

import asyncio
import math
import os
import time
from datetime import timedelta
from typing import Any, Dict

import pytest

import krabka_coordination as kc
from kafka_support import members, unique_role

BOOT = {"bootstrap.servers": "127.0.0.1:1"}  # never contacted by these checks


@pytest.fixture(scope="module")
def offline() -> kc.Client:
    """A client of a cluster nobody listens on (it connects lazily)."""
    return kc.Client(BOOT)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"lease_duration": -1}, "lease_duration must be a positive number of seconds, got -1"),
        ({"lease_duration": -1.5}, "lease_duration must be a positive number of seconds, got -1.5"),
        ({"lease_duration": 0}, "lease_duration must be a positive number of seconds, got 0"),
        ({"renew_interval": 0.0}, "renew_interval must be a positive number of seconds, got 0"),
        ({"renew_interval": math.nan}, "renew_interval must be a positive number of seconds, got NaN"),
        ({"challenge_stagger": -0.1}, "challenge_stagger must be a non-negative number of seconds, got -0.1"),
        ({"challenge_stagger": math.inf}, "challenge_stagger must be at most 31536000 seconds (a year), got inf"),
        ({"lease_duration": 10**30}, "lease_duration must be at most 31536000 seconds (a year), got"),
        ({"lease_duration": 3.0, "renew_interval": 10.0}, "lease duration (3 s)"),
        ({"lease_duration": 5.0, "renew_interval": 5.0}, "renew interval (5 s)"),
    ],
)
def test_invalid_timings_raise_at_the_call_naming_the_argument(
    offline: kc.Client, options: Dict[str, Any], message: str
) -> None:
    with pytest.raises(kc.InvalidArgumentError) as info:
        offline.acquire_leadership("r", "m", **options)
    assert isinstance(info.value, ValueError)
    assert message in str(info.value), str(info.value)
    assert info.value.kind == "INVALID_ARGUMENT"

    # The asyncio client refuses the same, with the same words, before any
    # I/O.
    async def main() -> None:
        async with kc.AsyncClient(BOOT) as client:
            await client.acquire_leadership("r", "m", **options)

    with pytest.raises(kc.InvalidArgumentError, match=message.replace("(", r"\(").replace(")", r"\)")):
        asyncio.run(main())


@pytest.mark.parametrize(
    "options, message",
    [
        ({"lease_duration": timedelta(seconds=-1)}, "lease_duration must be a positive number of seconds, got -1"),
        ({"renew_interval": timedelta(0)}, "renew_interval must be a positive number of seconds, got 0"),
        ({"lease_duration": timedelta(seconds=3), "renew_interval": timedelta(seconds=10)}, "lease duration (3 s)"),
        ({"timeout": timedelta(milliseconds=-500)}, "timeout must be a non-negative number of seconds, got -0.5"),
    ],
)
def test_durations_may_be_timedeltas_checked_as_seconds(
    offline: kc.Client, options: Dict[str, Any], message: str
) -> None:
    # The values reach the same checks as seconds do: refused with the same
    # words, so they were read as the seconds they hold.
    with pytest.raises(kc.InvalidArgumentError) as info:
        offline.acquire_leadership("r", "m", **options)
    assert message in str(info.value), str(info.value)
    with pytest.raises(kc.InvalidArgumentError, match="connect_timeout must be a positive number of seconds, got 0"):
        kc.Client(BOOT, connect_timeout=timedelta(0))


def test_timedeltas_are_taken_as_their_seconds(client: kc.Client, role: str) -> None:
    with client.acquire_leadership(
        role, "m", lease_duration=timedelta(seconds=3), renew_interval=timedelta(seconds=1),
        challenge_stagger=timedelta(0), timeout=timedelta(seconds=30),
    ) as leadership:
        assert 2.0 < leadership.lease_left <= 3.0, leadership.lease_left
        # authoritative takes the token's wire form as well as the token.
        status = client.describe_leadership(role)
        assert status.authoritative(str(leadership.token)) and status.authoritative(leadership.token)
        assert not status.authoritative("NoEpoch")
        with pytest.raises(kc.InvalidArgumentError, match="is not a fencing token"):
            status.authoritative("1004:18")
        started = time.monotonic()
        assert not leadership.wait(timedelta(milliseconds=300))
        assert 0.25 <= time.monotonic() - started < 2.5


def test_an_observers_next_takes_a_timedelta(client: kc.Client, role: str) -> None:
    with client.observe(role) as observer:
        first = observer.next(timedelta(seconds=20))
        assert first is not None and first.change == "initial", repr(first)
        # Nothing happens to the role: the wait ends after the timedelta's
        # seconds, not at once and not unbounded.
        started = time.monotonic()
        assert observer.next(timedelta(milliseconds=300)) is None
        assert 0.25 <= time.monotonic() - started < 2.5
        with pytest.raises(kc.InvalidArgumentError, match="timeout must be a non-negative number of seconds"):
            observer.next(timedelta(seconds=-1))


def test_a_zero_stagger_is_allowed(offline: kc.Client) -> None:
    # Zero stagger passes the checks; the call then fails on the empty
    # member, which the core checks before any I/O.
    with pytest.raises(kc.InvalidArgumentError, match=r"^member\b.* must not be empty"):
        offline.acquire_leadership("r", "", challenge_stagger=0)


def test_empty_role_or_member_is_refused_by_the_core(offline: kc.Client) -> None:
    with pytest.raises(kc.InvalidArgumentError, match=r"^role\b.* must not be empty"):
        offline.acquire_leadership("", "m")

    async def main() -> None:
        async with kc.AsyncClient(BOOT) as client:
            await client.acquire_leadership("r", "")

    with pytest.raises(kc.InvalidArgumentError, match=r"^member\b.* must not be empty"):
        asyncio.run(main())


def test_integer_ranges_name_the_argument(offline: kc.Client) -> None:
    with pytest.raises(kc.InvalidArgumentError, match="^partitions must be an integer from 1 to 2147483647, got 0$"):
        kc.Client(BOOT, partitions=0)
    with pytest.raises(kc.InvalidArgumentError, match="^partitions must be an integer from 1 to 2147483647, got 1099511627776$"):
        kc.Client(BOOT, partitions=2**40)
    with pytest.raises(kc.InvalidArgumentError, match=f"got {2**70}$"):
        kc.Client(BOOT, partitions=2**70)
    with pytest.raises(kc.InvalidArgumentError, match="^replication_factor must be an integer from 1 to 32767, got 0$"):
        offline.ensure_state_topic(replication_factor=0)
    with pytest.raises(kc.InvalidArgumentError, match="^min_insync_replicas must be an integer from 1 to 3, got 4$"):
        offline.ensure_state_topic(min_insync_replicas=4)
    with pytest.raises(kc.InvalidArgumentError, match="^min_insync_replicas must be an integer from 1 to 1, got 2$"):
        offline.ensure_state_topic(development=True, min_insync_replicas=2)


def test_wrong_types_name_the_argument(offline: kc.Client) -> None:
    with pytest.raises(TypeError, match="^lease_duration must be a number of seconds, got str$"):
        offline.acquire_leadership("r", "m", lease_duration="30")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^renew_interval must be a number of seconds, got bool$"):
        offline.acquire_leadership("r", "m", renew_interval=True)
    with pytest.raises(TypeError, match="^partitions must be an int, got float$"):
        kc.Client(BOOT, partitions=16.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^replication_factor must be an int, got str$"):
        offline.ensure_state_topic(replication_factor="3")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^role must be a str, got int$"):
        offline.acquire_leadership(5, "m")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^role must be a str, got bytes$"):
        offline.describe_leadership(b"r")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        offline.acquire_leadership("r", "m", 30.0)  # type: ignore[call-arg]


def test_kafka_must_be_a_mapping_of_settings() -> None:
    with pytest.raises(TypeError, match="^kafka must be a dict of librdkafka settings"):
        kc.Client("127.0.0.1:9092")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match='^kafka setting "socket.timeout.ms" must be a str, int, float or bool, got list$'):
        kc.Client({"bootstrap.servers": "h:1", "socket.timeout.ms": [1]})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="^a kafka setting name must be a str, got int$"):
        kc.Client({1: "x"})  # type: ignore[dict-item]


def test_the_core_checks_the_kafka_settings_when_the_client_is_made() -> None:
    # No bootstrap address: the core's KafkaConfig refuses it.
    with pytest.raises(kc.InvalidArgumentError, match="bootstrap address is empty"):
        kc.Client({})
    # A setting librdkafka does not know.
    with pytest.raises(kc.InvalidArgumentError, match="librdkafka refused the setting no.such.setting=1"):
        kc.Client({"bootstrap.servers": "h:1", "no.such.setting": 1})
    # Numbers and bools are handed over as librdkafka's strings, which it
    # accepts.
    client = kc.Client({"bootstrap.servers": "h:1", "socket.keepalive.enable": True, "socket.timeout.ms": 5000})
    assert client.partitions == 16 and not client.closed
    assert repr(client) == "<Client partitions=16>"


def test_security_settings_reach_the_core_which_names_what_it_cannot_honour() -> None:
    settings = {
        "bootstrap.servers": "h:1",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "OAUTHBEARER",
        "ssl.keystore.location": "/client.p12",
    }
    with pytest.raises(kc.InvalidArgumentError) as info:
        kc.Client(settings)
    message = str(info.value)
    assert "cannot honour" in message and "OAUTHBEARER" in message and "ssl.keystore.location" in message


def test_a_closed_client_refuses_every_operation() -> None:
    client = kc.Client(BOOT)
    client.close()
    client.close()  # idempotent
    assert client.closed and repr(client) == "<Client closed>"
    for call in (
        lambda: client.describe_leadership("r"),
        lambda: client.acquire_leadership("r", "m"),
        lambda: client.ensure_state_topic(),
    ):
        with pytest.raises(kc.InvalidArgumentError, match="the client is closed"):
            call()


def test_a_lease_kafka_cannot_use_fails_before_registering(client: kc.Client, role: str) -> None:
    # 0.5 s passes the election's checks, but Kafka's transaction timeout
    # (the lease) is at least 1 s: the transport refuses it before the
    # member registers.
    with pytest.raises(kc.InvalidArgumentError, match=r"^the lease duration must be from 1 s to 2147483647 ms \(24\.8 days; it is the transaction timeout\), got 500 ms$"):
        client.acquire_leadership(role, "m", lease_duration=0.5, renew_interval=0.1)
    assert members(role) == []


def test_the_state_topic_is_created_for_production_unless_development_is_asked(
    kafka: Dict[str, str], request: pytest.FixtureRequest
) -> None:
    # A topic of this test alone, on the one-broker test cluster.
    topic = unique_role(request.node.name)
    client = kc.Client(kafka, partitions=2, state_topic=topic)
    assert client.state_topic == topic
    # The defaults are a production cluster's (3 replicas, min ISR 2), which
    # one broker cannot host: Kafka refuses, and the error says the shape.
    with pytest.raises(kc.InvalidArgumentError, match="replication factor 3"):
        client.ensure_state_topic()
    report = client.ensure_state_topic(development=True)
    assert report.created and report.topic == topic
    assert (report.partitions, report.replication_factor, report.min_insync_replicas) == (2, 1, 1)
    assert report.cleanup_policy == "compact"
    assert any("min.insync.replicas" in w for w in report.warnings), report.warnings
    # Idempotent: the existing topic is checked, not changed.
    again = client.ensure_state_topic(development=True)
    assert not again.created and again.partitions == 2
    assert client.check_state_topic().partitions == 2
    # Another partition count is refused, naming both counts.
    with pytest.raises(kc.FatalError) as info:
        kc.Client(kafka, partitions=3, state_topic=topic).check_state_topic()
    assert "2" in str(info.value) and "3" in str(info.value), str(info.value)


def test_a_missing_state_topic_names_the_python_call(kafka: Dict[str, str], request: pytest.FixtureRequest) -> None:
    client = kc.Client(kafka, partitions=2, state_topic=unique_role(request.node.name))
    with pytest.raises(kc.FatalError) as info:
        client.check_state_topic()
    message = str(info.value)
    assert "with client.ensure_state_topic() (client.ensure_state_topic(development=True) on a single broker)" in message, message
    assert "::" not in message and "TopicSpec" not in message, message


@pytest.mark.skipif(not os.environ.get("KRABKA_BOOTSTRAP_3"), reason="needs KRABKA_BOOTSTRAP_3 (a three-node cluster)")
def test_the_production_defaults_on_a_three_node_cluster(request: pytest.FixtureRequest) -> None:
    topic = unique_role(request.node.name)
    client = kc.Client({"bootstrap.servers": os.environ["KRABKA_BOOTSTRAP_3"]}, partitions=2, state_topic=topic)
    report = client.ensure_state_topic()
    assert report.created
    assert (report.replication_factor, report.min_insync_replicas, report.warnings) == (3, 2, [])


def test_out_record() -> None:
    r = kc.OutRecord("t", b"v", key=bytearray(b"k"), partition=2, headers={"a": b"1"})
    assert (r.topic, r.value, r.key, r.partition, r.headers) == ("t", b"v", b"k", 2, [("a", b"1")])
    assert r == kc.OutRecord("t", memoryview(b"v"), b"k", 2, [("a", b"1")])
    assert r != kc.OutRecord("t", b"v")
    assert repr(r) == "OutRecord(topic='t', value=b'v', key=b'k', partition=2, headers=[('a', b'1')])"
    tomb = kc.OutRecord("t", None)
    assert tomb.value is None and tomb.key is None and tomb.partition is None and tomb.headers == []
    with pytest.raises(TypeError, match="^value must be bytes, bytearray or memoryview, got str$"):
        kc.OutRecord("t", "text")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^a header must be a"):
        kc.OutRecord("t", b"v", headers=[b"x"])  # type: ignore[list-item]
    with pytest.raises(OverflowError, match="^partition does not fit the layout's i32"):
        kc.OutRecord("t", b"v", partition=2**31)


def test_wait_timeout_names_the_argument(client: kc.Client, role: str) -> None:
    with client.acquire_leadership(role, "m", lease_duration=3.0, renew_interval=1.0) as leadership:
        with pytest.raises(kc.InvalidArgumentError, match="^timeout must be a non-negative number of seconds, got -1$"):
            leadership.wait(-1)
        with pytest.raises(TypeError, match="^timeout must be a number of seconds, got str$"):
            leadership.wait("1")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="^records must be an iterable of OutRecord, got int$"):
            leadership.write_records(5)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="^a record must be an OutRecord, got bytes$"):
            leadership.write_records([b"x"])  # type: ignore[list-item]


def test_an_observer_on_a_missing_state_topic_fails_as_the_acquire_does(kafka: Dict[str, str], request: pytest.FixtureRequest) -> None:
    client = kc.Client(kafka, partitions=2, state_topic=unique_role(request.node.name))
    try:
        with pytest.raises(kc.FatalError) as info:
            for _ in client.observe("billing"):
                pytest.fail("a view of a state topic that does not exist")
        message = str(info.value)
        assert "does not exist" in message and "client.ensure_state_topic()" in message, message
        assert "--partitions 2 " in message, message
    finally:
        client.close()
